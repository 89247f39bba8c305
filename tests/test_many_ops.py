"""Many distinct ops (issue 57), on a small pair made as the million-op bench makes its
own (benchmarks/make_many_ops.py, 20,000 ops a side): the compare route answers a page
and says how many rows there are, the full table only when asked; the CSV has every row,
written from the comparison's table with the bytes the records would have given."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from in_process import PREFIX, plugin_client

from tb_opcompare.schema.requests import COMPARE_PAGE_ROWS
from tb_opcompare.schema.table import Table, text_array
from tb_opcompare.service.csv_export import CSV_CHUNK_ROWS, compare_csv, table_csv_chunks
from tb_opcompare.service.records import as_records

sys.path.insert(0, str(REPO / "benchmarks"))
from make_many_ops import RUNS, make_many_ops  # noqa: E402

OPS = COMPARE_PAGE_ROWS + 5  # one page and a few rows more
PAIR = {"baseline": RUNS[0], "target": RUNS[1]}


@pytest.fixture(scope="module")
def many_ops(tmp_path_factory):
    return make_many_ops(tmp_path_factory.mktemp("many") / "logs", OPS, steps=4)


@pytest.fixture(scope="module")
def client(many_ops):
    return plugin_client(many_ops)


def _json(client, route: str, **params):
    response = client.get(f"{PREFIX}/{route}", query_string={**PAIR, **params})
    assert response.status_code == 200, response.get_data(as_text=True)
    return json.loads(response.get_data())


def test_the_route_answers_a_page_and_counts_every_row(client):
    document = _json(client, "compare")
    assert len(document["rows"]) == COMPARE_PAGE_ROWS
    assert document["total_rows"] == document["view_rows"] == OPS
    assert document["summary"]["matched_ops"] == OPS


def test_the_whole_table_when_asked_for(client):
    paged, full = _json(client, "compare"), _json(client, "compare", full="1")
    assert len(full["rows"]) == OPS
    assert full["rows"][:COMPARE_PAGE_ROWS] == paged["rows"]
    assert len(_json(client, "compare", top="7", full="1")["rows"]) == 7  # `top` still cuts


def test_the_tabs_filter_runs_on_the_server_over_every_row(client):
    document = _json(client, "compare", q="op2000", top="50")  # op2000, op20000-20004
    assert sorted(row["key"] for row in document["rows"]) == [f"aten::op{n}" for n in (2000, *range(20000, 20005))]
    assert document["view_rows"] == 6 and document["total_rows"] == OPS


def test_the_csv_has_every_row(client):
    response = client.get(f"{PREFIX}/compare.csv", query_string=PAIR)
    rows = list(csv.reader(io.StringIO(response.get_data(as_text=True))))
    assert response.status_code == 200 and len(rows) == OPS + 1
    assert len({row[0] for row in rows[1:]}) == OPS


def test_the_cli_csv_is_the_routes_bytes(client, many_ops, tmp_path):
    out = tmp_path / "rows.csv"
    subprocess.run(
        [sys.executable, "-m", "tb_opcompare.cli", "compare", str(many_ops), "--no-cache", "--csv", str(out), "-q"]
        + [f"--{side}={run}" for side, run in PAIR.items()],
        check=True,
        cwd=REPO,
    )
    assert out.read_bytes() == client.get(f"{PREFIX}/compare.csv", query_string=PAIR).get_data()


def test_table_csv_is_compare_csv_of_the_records():
    """Chunked from the columns, the text is the records' to the byte: formulas, control
    characters, missing numbers and flags, infinities, chunk edges, an order given."""
    count = 2 * CSV_CHUNK_ROWS + 3
    cycle = np.arange(count) % 8
    table = Table(
        {
            "key": text_array(["=cmd", " +x", "a\u202eb", "plain", "tab\there", "-neg", "ok", "x"][c] for c in cycle),
            "noisy": np.array([True, None, False, None, True, False, True, None], dtype=object)[cycle],
            "occurrences": np.array([1, None, 3, 4, None, 6, 7, 8], dtype=object)[cycle],
            "mean_us": np.array([1.5, np.nan, np.inf, -0.0, 1e-7, 3.0, 2.5e20, 0.1])[cycle],
            "kernels": np.arange(count),
            "flag": cycle == 3,
        }
    )
    columns = ["key", "noisy", "occurrences", "mean_us", "kernels", "flag", "absent"]
    for positions in (None, np.arange(count)[::-1].copy()):
        shown = table if positions is None else table.take(positions)
        expected = compare_csv(as_records(shown), columns)
        assert "".join(table_csv_chunks(table, columns, positions=positions)) == expected
    plain = Table({"key": text_array(f"op{n}" for n in range(count)), "mean_us": np.arange(count) * 0.5})
    assert "".join(table_csv_chunks(plain, ["key", "mean_us"])) == compare_csv(as_records(plain), ["key", "mean_us"])


def test_a_chunk_with_a_cell_to_quote_is_the_writers():
    """Cells with a delimiter, a quote or a line break, in one chunk of several: that
    chunk quoted as csv.writer quotes, the others joined as they are, the same bytes."""
    count = CSV_CHUNK_ROWS + 5
    names = [f"op{n}" for n in range(count)]
    names[CSV_CHUNK_ROWS + 1 : CSV_CHUNK_ROWS + 4] = ["a,b", 'say "x"', "two\nlines"]
    table = Table({"key": text_array(names), "n": np.arange(count) * -0.5, "k": np.arange(count, dtype=np.uint64)})
    columns = ["key", "n", "k"]
    assert "".join(table_csv_chunks(table, columns)) == compare_csv(as_records(table), columns)
    lone = Table({"key": text_array(["", "x", ""])})
    assert "".join(table_csv_chunks(lone, ["key"])) == compare_csv(as_records(lone), ["key"])
