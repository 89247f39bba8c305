"""The PyTorch reader's C scanner (``_trace_scan``) against its msgspec way, on real traces
and on broken ones: the same profile both ways, bit for bit, whether the file is read as
one batch or cut into many; the scanner used where it is sure of the text; and where it is
not (a lone surrogate, a repeated field, invalid UTF-8, ...), the msgspec way's answer,
error included, never a different one."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from conftest import FIXTURES, REALTRACES, REPO, assert_built_and_switchable, assert_same_read

from tb_opcompare import native
from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.ingest.readers import chrome_json, torch_trace

# One trace of each kind this project recorded (CPU, CUDA with kernels, with_stack modules,
# profile_memory, a DataLoader's workers, ranks, versions 2.5-2.14), and every public one.
_OURS = [
    "logdir/torch",
    "memory/logdir",
    "gpu_h100/modules",
    "gpu_h100/resnet18",
    "gpu_h200/stacks",
    "gpu_h200/loader",
    "gpu_h200/flops",
    "gpu_h200/ranks",
    "versions/torch2.5",
    "versions/torch2.14",
    "user_logdirs/lightning_ddp_h200",
    "repeats/logdir",
]
TRACES = [next(iter(sorted((FIXTURES / folder).rglob("*.pt.trace.json*")))) for folder in _OURS] + sorted(
    path for path in REALTRACES.glob("torch_*/**/*.json*") if path.is_file()
)
# the public traces the scanner leaves to msgspec, and why: their deviceProperties follow
# traceEvents, so the cut that ends the events array is not found (the msgspec way then
# reads the file whole)
_LEFT_TO_MSGSPEC = {"gaunernst_bert-small-uncased__1016001.json.gz"}


def _name(path: Path) -> str:
    root = FIXTURES if path.is_relative_to(FIXTURES) else REALTRACES
    return "/".join([root.name, *path.relative_to(root).parts[-3:]])


@pytest.fixture
def scanner():
    if torch_trace._SCAN_HELPER is None:
        pytest.fail("the C extension _trace_scan is not built in this environment")
    return torch_trace._SCAN_HELPER


def test_the_extension_is_built_in_this_environment():
    assert_built_and_switchable(
        torch_trace._SCAN_HELPER, "tb_opcompare.ingest.readers._trace_scan", "tb_opcompare.ingest.readers.torch_trace"
    )


def _read(path: Path | str, pure_python: bool, monkeypatch, file_format: str = "pytorch"):
    """The reader's whole result, or its error, one way."""
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if pure_python else "")
    try:
        return read_profile(file_format, [str(path)])
    except ProfileError as error:
        return error
    finally:
        monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)


class _Counting:
    """The scanner, counting its calls and the batches it was not sure of."""

    def __init__(self, module):
        self.module, self.calls, self.unsure = module, 0, 0

    def scan_events(self, *args):
        self.calls += 1
        found = self.module.scan_events(*args)
        self.unsure += found is None
        return found


@pytest.mark.parametrize("path", TRACES, ids=_name)
@pytest.mark.parametrize("batch_bytes", [64 * 1024, None], ids=["small batches", "as shipped"])
def test_a_trace_reads_the_same_both_ways(path, batch_bytes, scanner, monkeypatch, tmp_path):
    """Cut into batches of 64 KiB too (a big trace's way: codes are numbered batch by
    batch), the scanned read is the decoded one, every table and fact."""
    if batch_bytes is not None:
        monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", 0)
        monkeypatch.setattr(chrome_json, "BATCH_BYTES", batch_bytes)
    decoded = _read(path, True, monkeypatch)
    counting = _Counting(scanner)
    monkeypatch.setattr(torch_trace, "_SCAN_HELPER", counting)
    scanned = _read(path, False, monkeypatch)
    assert_same_read(scanned, decoded)
    assert not isinstance(scanned, Exception)
    if path.name in _LEFT_TO_MSGSPEC:
        assert counting.unsure
        return
    assert counting.calls and not counting.unsure
    data = path.read_bytes()
    if batch_bytes and len(gzip.decompress(data) if path.name.endswith(".gz") else data) > 3 * batch_bytes:
        assert counting.calls >= 2  # cut into batches, as a big trace is


def _small_trace() -> dict:
    """The first 200 events of a real CUDA trace (kernels, runtime calls, shapes)."""
    path = next(iter(sorted((FIXTURES / "gpu_h200/flops").rglob("*.pt.trace.json.gz"))))
    document = json.loads(gzip.decompress(path.read_bytes()))
    document["traceEvents"] = document["traceEvents"][:200]
    return document


# Texts the scanner must leave to msgspec, each made by one edit of a valid trace's text.
_UNSURE_EDITS = {
    "a lone high surrogate in a key it skips": (b'"Ev Idx"', b'"\\ud800 Idx"'),
    "a lone low surrogate in a name": (b'"name": "aten::', b'"name": "\\udc00aten::'),
    "a repeated field": (b'"ph": "X"', b'"ph": "X", "ph": "i"'),
    "a key written with escapes": (b'"dur"', b'"d\\u0075r"'),
    "invalid UTF-8 in a string it skips": (b'"External id"', b'"External \xff id"'),
    "a control character in a string": (b'"name": "aten::', b'"name": "\x01aten::'),
    "a number that overflows": (b'"ts": ', b'"ts": 1e400, "x": '),
    "an id of over 18 digits": (b'"pid": ', b'"pid": 1234567890123456789, "x": '),
    "a trailing comma in an object": (b'"ph": "X",', b'"ph": "X",}, {'),
    "a number JSON does not allow": (b'"dur": ', b'"dur": 01, "x": '),
    "a float for an id": (b'"tid": ', b'"tid": 1.0, "x": '),
    "null for a timestamp": (b'"ts": ', b'"ts": null, "x": '),
    "nesting deeper than the scanner goes": (b'"args": {', b'"args": {"deep": ' + b"[" * 300 + b"]" * 300 + b", "),
}
# Texts the scanner reads, whose durations the msgspec way refuses (and names the event).
_REFUSED_DURATIONS = {"a negative duration": b'"dur": -1, "x": ', "no duration": b'"dur": null, "x": '}


def _edited(tmp_path: Path, old: bytes, new: bytes) -> Path:
    text = json.dumps(_small_trace(), indent=1, ensure_ascii=False).encode()
    assert old in text
    path = tmp_path / "edited.pt.trace.json"
    path.write_bytes(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("edit", sorted(_UNSURE_EDITS), ids=str)
def test_text_the_scanner_is_not_sure_of_is_left_to_msgspec(edit, scanner, monkeypatch, tmp_path):
    """Each edit makes the scanner return None, and the read then gives what the msgspec
    way gives: the same profile where msgspec reads the text, the same error where not."""
    path = _edited(tmp_path, *_UNSURE_EDITS[edit])
    counting = _Counting(scanner)
    monkeypatch.setattr(torch_trace, "_SCAN_HELPER", counting)
    scanned = _read(path, False, monkeypatch)
    assert counting.unsure == 1
    assert_same_read(scanned, _read(path, True, monkeypatch))


@pytest.mark.parametrize("edit", sorted(_REFUSED_DURATIONS), ids=str)
def test_a_complete_event_without_a_sound_duration_gets_the_msgspec_ways_error(edit, monkeypatch, tmp_path):
    path = _edited(tmp_path, b'"dur": ', _REFUSED_DURATIONS[edit])
    scanned = _read(path, False, monkeypatch)
    assert isinstance(scanned, ProfileError) and "complete event" in str(scanned)
    assert_same_read(scanned, _read(path, True, monkeypatch))


def test_the_scanner_reads_what_msgspec_reads_on_random_edits(scanner, monkeypatch, tmp_path):
    """Fields set to values of every kind (missing, null, the wrong type, escapes, numbers
    at the edges of a double) in a real trace: wherever the scanner is sure of the text,
    the read is the msgspec way's, error or profile."""
    values = [None, True, 0, -0.0, 1, -5, 2**53, 2**53 + 1, 2**63, 10**25, 1.5, 1e300, 5e-324, 0.1, 123456789.123456789,
              "", "X", "i", "cpu_op", "kernel", "cuda_runtime", "python_function", "nn.Module: Net_0", "[memory]",
              "aten::mm", "é", "\u2028", "\x00", 'a"b', "a\\b", "\U0001f600", [], {}, [1, [2, {"a": None}]],
              {"correlation": 5}, {"Bytes": 10, "Total Allocated": 5, "Device Type": 1}]  # fmt: skip
    fields = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "other"]
    original, rng = _small_trace(), random.Random(57)
    monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", 0)
    monkeypatch.setattr(chrome_json, "BATCH_BYTES", 8 * 1024)
    counting = _Counting(scanner)
    monkeypatch.setattr(torch_trace, "_SCAN_HELPER", counting)
    sure = 0
    for attempt in range(120):
        document = json.loads(json.dumps(original))
        for _ in range(rng.randint(1, 5)):
            event = rng.choice(document["traceEvents"])
            field = rng.choice(fields)
            if rng.random() < 0.15:
                event.pop(field, None)
            else:
                event[field] = rng.choice(values)
        path = tmp_path / f"edit{attempt}.pt.trace.json"
        path.write_text(json.dumps(document, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1])))
        unsure_before = counting.unsure
        scanned = _read(path, False, monkeypatch)
        sure += counting.unsure == unsure_before
        assert_same_read(scanned, _read(path, True, monkeypatch))
    assert sure >= 20  # the scanner read many of them itself


def test_the_scanners_columns_are_the_decoded_ones_on_a_cut_trace(scanner, monkeypatch):
    """Below the tables: the columns and codes themselves, the demo's CUDA trace with
    stacks cut into 16 KiB batches (host, runtime, kernels, modules, memory, inputs)."""
    path = next(iter(sorted((REPO / "demo_logs/torch_modules").rglob("*gpu_bs16*/*.pt.trace.json*"))))
    data = path.read_bytes()
    data = gzip.decompress(data) if path.name.endswith(".gz") else data
    monkeypatch.setattr(chrome_json, "WHOLE_TEXT_BYTES", 0)
    monkeypatch.setattr(chrome_json, "BATCH_BYTES", 16 * 1024)
    scanned = torch_trace._scanned_columns(chrome_json.open_chrome_trace(str(path), data))
    decoded = torch_trace._decoded_columns(chrome_json.open_chrome_trace(str(path), data))
    assert scanned is not None and scanned.modules.rows and scanned.device.rows and scanned.launches.rows
    for part in ("host", "launches", "memory", "device", "modules"):
        got, expected = getattr(scanned, part), getattr(decoded, part)
        assert got.rows == expected.rows
        for column in expected._dtypes:
            assert got.numpy(column).tobytes() == expected.numpy(column).tobytes(), f"{part}.{column}"
    assert (scanned.names, scanned.categories, scanned.pids, scanned.tids) == (
        decoded.names,
        decoded.categories,
        decoded.pids,
        decoded.tids,
    )
    assert scanned.inputs.keys() == decoded.inputs.keys()


def test_the_scanner_refuses_what_is_not_a_batch_of_events(scanner):
    """Called on its own: None for text that is not events separated by commas, an error
    for a span outside the buffer."""
    tables = tuple(({}, []) for _ in range(5))
    for text in (b'{"ph": "X"} {"ph": "X"}', b"[1]", b'{"ph": "X"},', b'{"ph": "X"', b'"ph"', b"{}, 1"):
        assert scanner.scan_events(text, 0, len(text), tables) is None, text
    assert len(scanner.scan_events(b"  ", 0, 2, tables)) == 0
    with pytest.raises(ValueError):
        scanner.scan_events(b"{}", 0, 3, tables)


@pytest.mark.parametrize("pure_python", [False, True], ids=["scanned", "decoded"])
def test_a_probed_call_whose_args_are_not_an_object_is_named(pure_python, monkeypatch, tmp_path):
    """The batch size is voted by the first step's calls, whose inputs are decoded again
    from the file: one whose ``args`` is a number was a msgspec traceback, both ways."""
    document = _small_trace()
    broken = [k for k, event in enumerate(document["traceEvents"]) if event.get("name") == "aten::empty"]
    for k in broken:
        document["traceEvents"][k]["args"] = 1.5
    path = tmp_path / "broken.pt.trace.json"
    path.write_text(json.dumps(document))
    error = _read(path, pure_python, monkeypatch)
    assert isinstance(error, ProfileError)
    assert f"$.traceEvents[{broken[0]}].args" in str(error) and "got `float`" in str(error)


# Numbers at the edges of the scanner's own conversion (integers that wrap 64 bits, -0 as an
# integer and as a float, 2**53 and past it, long fractions) and of strtod's.
_EDGE_NUMBERS = [
    "-0", "-0.0", "0.0", "18446744073709551616", "-18446744073709551616", "55340232221128654848",
    "1844674407370955161600", "1844674407370955161.6", "0.18446744073709551616", "9007199254740992",
    "9007199254740993", "-9007199254740993", "123456789012345678", "12345678901234567890.5", "0.1",
    "0.30000000000000004", "1e5", "1E-7", "5e-324", "1.7976931348623157e308", "0.00000000000000000000001",
    "4503599627370496.5", "5092521583502.994",
]  # fmt: skip


@pytest.mark.parametrize("number", _EDGE_NUMBERS)
def test_a_number_reads_as_msgspec_reads_it(number, scanner, monkeypatch, tmp_path):
    """As a timestamp and as a duration: the same double, bit for bit (0.0 and -0.0 apart),
    or the same refusal (a duration over a year)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 7, "dur": 3},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 0.5},
    ]
    text = (
        json.dumps({"traceEvents": events})
        .replace('"ts": 7', f'"ts": {number}')
        .replace('"dur": 0.5', f'"dur": {number}')
    )
    path = tmp_path / "numbers.pt.trace.json"
    path.write_text(text)
    counting = _Counting(scanner)
    monkeypatch.setattr(torch_trace, "_SCAN_HELPER", counting)
    try:
        decoded_columns = torch_trace._decoded_columns(chrome_json.open_chrome_trace(str(path), path.read_bytes()))
    except ProfileError:
        decoded_columns = None  # a duration over a year
    scanned_columns = torch_trace._scanned_columns(chrome_json.open_chrome_trace(str(path), path.read_bytes()))
    if decoded_columns is None:
        assert scanned_columns is None
    elif scanned_columns is not None:
        for column in ("ts", "dur"):
            got, expected = scanned_columns.host.numpy(column), decoded_columns.host.numpy(column)
            assert got.tobytes() == expected.tobytes(), (column, got, expected)
    assert_same_read(_read(path, False, monkeypatch), _read(path, True, monkeypatch))


# Texts whose events array is not cut for the scanner (``TraceText.cut_ranges`` is None), so
# msgspec reads them and says what is wrong: a value before the first event, and a trace
# whose events key is written with escapes beside a nested object holding a plain one.
_NOT_CUT = {
    "a number before the first event": b'{"traceEvents": [1, {"ph": "X", "name": "a", "ts": 1, "dur": 1}]}',
    "a lone comma before the first event": b'{"traceEvents": [ , {"ph": "X", "name": "a", "ts": 1, "dur": 1}]}',
    "a string before the first event": b'["junk", {"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]',
    "the events under an escaped key, a nested plain one": (
        b'{"trace\\u0045vents": [{"ph": "X", "cat": "cpu_op", "name": "real", "pid": 1, "tid": 1, "ts": 1, "dur": 1}],'
        b' "x": {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "nested", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}}'
    ),
}


@pytest.mark.parametrize("case", sorted(_NOT_CUT), ids=str)
def test_an_events_array_the_cuts_cannot_trust_is_read_by_msgspec(case, monkeypatch, tmp_path):
    data = _NOT_CUT[case]
    assert chrome_json.open_chrome_trace("t.json", data).cut_ranges() is None
    path = tmp_path / "odd.pt.trace.json"
    path.write_bytes(data)
    scanned = _read(path, False, monkeypatch)
    assert_same_read(scanned, _read(path, True, monkeypatch))
    if "nested" in case:
        assert set(scanned.op_table.frame()["op_name"]) == {"real"}
    else:
        assert isinstance(scanned, ProfileError)
