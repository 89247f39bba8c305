"""The golden tier's comparison: a last-digit change of a number passes, anything a user
could see fails and is named (tests/golden_compare.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from golden_compare import differences  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"


def _json(document: dict) -> bytes:
    return b"200 \n" + json.dumps(document).encode()


def test_a_last_digit_change_of_a_number_is_no_difference():
    # the change that broke the suite on another machine (issue 30)
    committed = _json({"breakeven": [{"batch_size": 13.639064306679616, "op": "conv", "faster": "above"}]})
    produced = _json({"breakeven": [{"batch_size": 13.639064306679611, "op": "conv", "faster": "above"}]})
    assert differences("sweep0.json", committed, produced) == []


def test_a_visible_change_of_a_number_names_the_field_and_both_values():
    committed = _json({"summary": {"geomean_speedup": 2.0412, "matched_ops": 12}})
    produced = _json({"summary": {"geomean_speedup": 2.0413, "matched_ops": 12}})
    assert differences("pair0_compare.json", committed, produced) == [
        "$.summary.geomean_speedup: committed 2.0412, produced 2.0413"
    ]


def test_structure_order_texts_and_flags_compare_exactly():
    base = {"rows": [{"op": "conv", "poor_fit": False, "r2": 0.5}], "note": "3 runs"}
    assert differences("a.json", _json(base), _json({"note": "3 runs", "rows": base["rows"]}))  # key order
    assert differences("a.json", _json(base), _json({**base, "rows": base["rows"] * 2}))  # row count
    assert differences("a.json", _json(base), _json({**base, "rows": [{**base["rows"][0], "poor_fit": True}]}))
    assert differences("a.json", _json(base), _json({**base, "rows": [{**base["rows"][0], "op": "conv2d"}]}))
    assert differences("a.json", _json(base), _json({**base, "note": "4 runs"})) == [
        "$.note: committed 3 in '3 runs', produced 4 in '4 runs'"
    ]
    assert differences("a.json", _json({"x": None}), _json({"x": 0})) != []
    assert differences("a.json", _json({"runs": 2}), _json({"runs": 2.0})) == [
        "$.runs: committed 2, produced 2.0"
    ]  # an integer that became a float changes the contract


def test_the_status_line_and_the_csv_header_compare_byte_for_byte():
    body = "key,speedup\nconv,1.5000000000000002\n"
    committed = b'200 attachment; filename="a.csv"\n' + body.encode()
    assert differences("a.csv", committed, b'200 attachment; filename="a.csv"\nkey,speedup\nconv,1.5\n') == []
    assert differences("a.csv", committed, b'200 attachment; filename="b.csv"\n' + body.encode())
    assert differences("a.csv", committed, b'200 attachment; filename="a.csv"\nkey, speedup\nconv,1.5\n')
    assert differences("a.csv", committed, b'200 attachment; filename="a.csv"\nkey,speedup\nconv,1.6\n') == [
        "CSV row 2, speedup: committed 1.5000000000000002 in '1.5000000000000002', produced 1.6 in '1.6'"
    ]


def test_numbers_printed_in_text_compare_within_the_tolerance():
    committed = b"exit 0\nCPU  16   5.22 ms   3,067  step markers\nbreak-even 13.639064306679616\n"
    assert (
        differences(
            "cli.txt", committed, b"exit 0\nCPU  16   5.22 ms   3,067  step markers\nbreak-even 13.639064306679611\n"
        )
        == []
    )
    assert differences(
        "cli.txt", committed, b"exit 0\nCPU  16   5.23 ms   3,067  step markers\nbreak-even 13.639064306679611\n"
    )
    assert differences("cli.txt", committed, b"exit 2\n" + committed.split(b"\n", 1)[1])


def test_every_committed_golden_file_is_read_by_its_kind():
    """Each committed file parses as its kind says (JSON bodies as JSON), and compares equal
    to itself: no file falls back to a reading that raises or sees a difference in nothing."""
    files = [path for path in GOLDEN.rglob("*") if path.is_file() and path.parent != GOLDEN]
    assert len(files) > 100
    for path in files:
        assert differences(path.name, path.read_bytes(), path.read_bytes()) == []
        status, _, body = path.read_bytes().partition(b"\n")
        if path.suffix == ".json" and status.startswith(b"200"):
            json.loads(body)
