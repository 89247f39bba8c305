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
from conftest import REPO, assert_built_and_switchable
from in_process import PREFIX, plugin_client

from tb_opcompare import native
from tb_opcompare.schema.requests import COMPARE_PAGE_ROWS
from tb_opcompare.schema.table import Table, text_array
from tb_opcompare.service import csv_export
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


@pytest.mark.parametrize("gzip_taken", [False, True])
@pytest.mark.parametrize("streamed", [False, True])
def test_the_answers_are_the_whole_documents_bytes_sent_whole_or_as_made(
    many_ops, whole, monkeypatch, gzip_taken, streamed
):
    """The compare JSON and its CSV are the very bytes of the document made whole (every
    row, the summary, the counts): an answer up to ``WHOLE_ANSWER_BYTES`` sent whole, with
    its length, as TensorBoard sends one; a bigger one (here the bound is made small) sent
    as it is made, with no length known ahead (a million rows made whole held 2.5 GB of
    TensorBoard's memory); both gzipped where the client takes gzip."""
    import gzip

    import msgspec

    from tb_opcompare.web import routes

    if streamed:
        monkeypatch.setattr(routes, "WHOLE_ANSWER_BYTES", 100_000)
    client = plugin_client(many_ops)
    headers = {"Accept-Encoding": "gzip, deflate"} if gzip_taken else {}
    for route, expected in (
        ("compare", msgspec.json.encode(whole.document)),
        ("compare.csv", "".join(table_csv_chunks(whole.table, positions=whole.positions)).encode()),
    ):
        response = client.get(f"{PREFIX}/{route}", query_string={**PAIR, "full": "1"}, headers=headers)
        assert response.status_code == 200 and ("Content-Length" in response.headers) is not streamed
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        body = response.get_data()
        assert response.headers.get("Content-Encoding") == ("gzip" if gzip_taken else None)
        assert (gzip.decompress(body) if gzip_taken else body) == expected
        assert len(expected) > routes.WHOLE_ANSWER_BYTES if streamed else len(expected) < routes.WHOLE_ANSWER_BYTES
    assert len(json.loads(msgspec.json.encode(whole.document))["rows"]) == OPS > COMPARE_PAGE_ROWS


def test_a_long_answer_is_made_a_page_at_a_time_and_leaves_the_tabs_page_kept(many_ops, whole, monkeypatch):
    """A comparison too big to keep every record (a million rows; here the bound is made
    small) has the records of each page of a long answer made as it is sent, and none of
    them replaces the page the tab asks for again."""
    import msgspec

    from tb_opcompare.service import compare as compare_service
    from tb_opcompare.store.comparisons import Comparison

    monkeypatch.setattr(Comparison, "KEEP_RECORDS_UP_TO", 1_000)
    made: list[int] = []
    monkeypatch.setattr(compare_service, "as_records", lambda table: made.append(len(table)) or as_records(table))
    client = plugin_client(many_ops)
    page = client.get(f"{PREFIX}/compare", query_string=PAIR).get_data()
    assert made == [COMPARE_PAGE_ROWS]
    assert client.get(f"{PREFIX}/compare", query_string={**PAIR, "full": "1"}).get_data() == msgspec.json.encode(
        whole.document
    )
    assert made == [COMPARE_PAGE_ROWS, OPS - COMPARE_PAGE_ROWS]  # the first page was the kept one
    assert client.get(f"{PREFIX}/compare", query_string=PAIR).get_data() == page
    assert len(made) == 2  # still kept


@pytest.mark.parametrize("failing_chunk", [1, 2])
def test_an_answer_whose_first_pages_fail_is_an_error_not_a_cut_answer(many_ops, monkeypatch, caplog, failing_chunk):
    """An answer's first ``WHOLE_ANSWER_BYTES`` are made before anything is sent, so a
    failure there is the plugin's JSON error (500, logged), not a 200 cut short: in the
    first page or a later one, of the tab's page, of every row, of the CSV."""
    from tb_opcompare.service import compare as compare_service
    from tb_opcompare.store.comparisons import Comparison

    made: list[int] = []

    def records(table):
        made.append(len(table))
        if len(made) == failing_chunk:
            raise RuntimeError("a bug while making records")
        return as_records(table)

    def chunks(*args, **kwargs):
        if failing_chunk == 2:
            yield "op,seconds\n" * 10
        raise RuntimeError("a bug while making records")

    monkeypatch.setattr(Comparison, "KEEP_RECORDS_UP_TO", 1_000)  # records made a page at a time
    monkeypatch.setattr(compare_service, "as_records", records)
    monkeypatch.setattr("tb_opcompare.web.routes.table_csv_chunks", chunks)
    answers = [("compare", {"full": "1"}), ("compare.csv", {})] + [("compare", {})] * (failing_chunk == 1)
    for route, params in answers:
        made.clear()
        response = plugin_client(many_ops).get(f"{PREFIX}/{route}", query_string={**PAIR, **params})
        assert response.status_code == 500, (route, params)
        assert "internal error" in json.loads(response.get_data())["error"]["message"]
    assert "a bug while making records" in caplog.text


def test_an_answer_that_fails_once_sent_is_cut_short_and_logged(many_ops, monkeypatch, caplog):
    """Past ``WHOLE_ANSWER_BYTES`` (here made small) an answer is under way: a failure in a
    later page can no longer be an error answer, so it cuts the answer short, and the
    plugin's log says which route failed."""
    from tb_opcompare.service import compare as compare_service
    from tb_opcompare.store.comparisons import Comparison
    from tb_opcompare.web import routes

    monkeypatch.setattr(routes, "WHOLE_ANSWER_BYTES", 100_000)
    monkeypatch.setattr(Comparison, "KEEP_RECORDS_UP_TO", 1_000)  # records made a page at a time
    made: list[int] = []

    def records(table):
        made.append(len(table))
        if len(made) == 2:
            raise RuntimeError("a bug in the second page")
        return as_records(table)

    monkeypatch.setattr(compare_service, "as_records", records)
    with pytest.raises(RuntimeError, match="second page"):
        plugin_client(many_ops).get(f"{PREFIX}/compare", query_string={**PAIR, "full": "1"})
    assert "op_compare: /data/plugin/op_compare/compare failed while it was sent" in caplog.text


def test_the_cli_json_is_made_a_page_at_a_time_and_is_the_whole_documents_text(many_ops, whole):
    """``compare --json`` prints the document a page of records at a time: the text of the
    document made whole, as every command's --json prints one (``json_text``)."""
    from tb_opcompare.cli.common import json_text

    printed = subprocess.run(
        [sys.executable, "-m", "tb_opcompare.cli", "compare", str(many_ops), "--no-cache", "--json", "-q"]
        + [f"--{side}={run}" for side, run in PAIR.items()],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert len(whole.document.rows) == OPS > COMPARE_PAGE_ROWS
    assert printed.stdout == json_text(whole.document)


def test_the_cli_csv_is_the_routes_bytes(client, many_ops, tmp_path):
    out = tmp_path / "rows.csv"
    subprocess.run(
        [sys.executable, "-m", "tb_opcompare.cli", "compare", str(many_ops), "--no-cache", "--csv", str(out), "-q"]
        + [f"--{side}={run}" for side, run in PAIR.items()],
        check=True,
        cwd=REPO,
    )
    assert out.read_bytes() == client.get(f"{PREFIX}/compare.csv", query_string=PAIR).get_data()


def test_the_csv_joiner_is_built_in_this_environment():
    assert_built_and_switchable(
        csv_export._JOINER, "tb_opcompare.service._csv_lines", "tb_opcompare.service.csv_export"
    )


def _python_join(cells: list[list[str]]) -> str | None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(native.PURE_PYTHON_ENV, "1")
        return csv_export._joined_lines(cells, len(cells[0]) if cells else 0)


def test_the_c_join_is_the_pythons_and_the_writers_on_any_text():
    """Cells of every width (ASCII, Latin-1, the BMP, beyond it), empty ones, repeated
    ones, and each character the writer quotes for, at every place in a chunk: the C join
    gives the Python join's text (None where a cell needs quoting), and that is
    csv.writer's text where it gives one."""
    from tb_opcompare.service import _csv_lines

    texts = ["", "op", "é", "naïve", "層", "x😀y", "0.5", "aten::mm", "\u00e9", "'=x", "a b"]
    quoted = [",", '"', "\n", "\r", "a,b", 'x"', "é\n", "層,"]
    rng = np.random.default_rng(57)
    for rows, columns in ((1, 2), (3, 2), (1025, 3), (2049, 5)):
        pool = [texts[i] for i in rng.integers(len(texts), size=rows * columns)]
        cells = [pool[c * rows : (c + 1) * rows] for c in range(columns)]
        expected = _python_join(cells)
        assert _csv_lines.joined_lines(cells) == expected
        writer_text = io.StringIO()
        csv.writer(writer_text, lineterminator="\n").writerows(zip(*cells))
        assert expected == writer_text.getvalue()
        for bad in quoted:  # one cell to quote, anywhere: the writer's way
            row, column = int(rng.integers(rows)), int(rng.integers(columns))
            spoiled = [list(cells_of) for cells_of in cells]
            spoiled[column][row] = bad
            assert _csv_lines.joined_lines(spoiled) is None and _python_join(spoiled) is None
    assert _csv_lines.joined_lines([["x", "y"]]) is None  # one column: the writer quotes a lone empty cell
    assert _csv_lines.joined_lines([[], []]) is None and _csv_lines.joined_lines([]) is None


def test_the_c_join_refuses_what_is_not_columns_of_text():
    from tb_opcompare.service import _csv_lines

    with pytest.raises(ValueError, match="all of one length"):
        _csv_lines.joined_lines([["a", "b"], ["c"]])
    with pytest.raises(TypeError, match="str"):
        _csv_lines.joined_lines([["a", "b"], ["c", 1.5]])
    with pytest.raises(TypeError, match="list"):
        _csv_lines.joined_lines((["a"], ["b"]))


def test_table_csv_is_compare_csv_of_the_records(both_ways):
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


def test_a_chunk_with_a_cell_to_quote_is_the_writers(both_ways):
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


@pytest.fixture(scope="module")
def whole(many_ops):
    """The small pair's comparison with every row's record in its document: what an answer
    made a piece at a time must equal, byte for byte."""
    from tb_opcompare.analysis.row_view import RowView
    from tb_opcompare.service.compare import compared_rows
    from tb_opcompare.store.catalog import Catalog

    return compared_rows(Catalog(str(many_ops), cache_dir=None), *RUNS, view=RowView(), records=True)


@pytest.fixture(scope="module")
def compared(many_ops):
    """The small pair's comparison as the CLI writes its CSV: a table and the view's rows."""
    from tb_opcompare.analysis.row_view import RowView
    from tb_opcompare.service.compare import compared_rows
    from tb_opcompare.store.catalog import Catalog

    catalog = Catalog(str(many_ops), cache_dir=None)
    return compared_rows(catalog, *RUNS, group_by="name", view=RowView(), records=False)


def _split_in_a_fresh_process(compared, tmp_path, helper_exits: bool) -> tuple[str, bool]:
    """``split_csv_chunks`` of the comparison in a process of one thread (a test worker
    may run others, and then nothing forks): its text, and whether a helper made a half."""
    import pickle

    (tmp_path / "compared.pickle").write_bytes(pickle.dumps((compared.table, compared.positions)))
    script = f"""
import os, pickle, sys
from tb_opcompare.service import csv_export
table, positions = pickle.loads(open({str(tmp_path / "compared.pickle")!r}, "rb").read())
csv_export.SPLIT_CSV_ROWS = 1000
made = csv_export._csv_file
def helper(*args):
    open({str(tmp_path / "helper_ran")!r}, "w").close()
    if {helper_exits}:
        os._exit(3)
    return made(*args)
csv_export._csv_file = helper
sys.stdout.write("".join(csv_export.split_csv_chunks(table, positions=positions)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, check=True)
    return done.stdout, (tmp_path / "helper_ran").exists()


@pytest.mark.parametrize("helper_exits", [False, True], ids=["helper", "helper_dies"])
def test_a_big_csv_made_in_two_halves_is_the_same_bytes(compared, tmp_path, helper_exits):
    """Past SPLIT_CSV_ROWS the CLI's CSV is made in two halves at once, the second in a
    forked helper; the text is the one-process text to the byte, and where the helper
    dies its half is made by the command after all."""
    whole = "".join(table_csv_chunks(compared.table, positions=compared.positions))
    text, helper_ran = _split_in_a_fresh_process(compared, tmp_path, helper_exits)
    assert helper_ran and len(compared.positions) > 1000
    assert text == whole


def test_the_helpers_half_reads_back_whole_characters(monkeypatch, tmp_path):
    """The helper's half, written as UTF-8 to its file, reads back as the same text
    however the pieces cut it (here every 3 bytes, through 2- to 4-byte characters), a
    lone surrogate (which UTF-8 cannot hold) as it is."""
    text = "op,é,層,\U0001f600\n" * 50 + "aten::mm,x\n" + "lone\udc80surrogate\n"
    monkeypatch.setattr(csv_export, "_READ_BACK_BYTES", 3)
    with open(tmp_path / "half", "w+b") as scratch:
        table = Table({"key": text_array(text.splitlines()), "n": np.arange(len(text.splitlines()))})
        size = csv_export._csv_file(table, np.arange(len(table)), scratch.fileno())
        expected = "".join(table_csv_chunks(table, positions=np.arange(len(table)), header=False))
        assert size == len(expected.encode("utf-8", "surrogatepass"))
        pieces = list(csv_export._file_text(scratch.fileno(), size))
    assert len(pieces) > 100 and "".join(pieces) == expected


def test_a_run_of_rows_is_written_as_its_positions_say():
    """Rows given as a run of positions (the second half of a view) are written from
    slices: the same text as the rows gathered."""
    count = CSV_CHUNK_ROWS + 7
    table = Table({"key": text_array(f"op{n}" for n in range(count)), "mean_us": np.arange(count) * 0.25})
    run = np.arange(5, count - 2)
    expected = compare_csv(as_records(table.take(run)), ["key", "mean_us"])
    assert "".join(table_csv_chunks(table, ["key", "mean_us"], positions=run)) == expected


# Real op keys (a PyTorch transformer's), two neighbours that match from their first
# character, and keys a hostile file may hold: a newline, a character whose lowercase is
# longer ('İ'), a final sigma, an empty key, a lone surrogate.
HOSTILE_KEYS = ["convA", "convB", "a\nconv", "İstanbul/Conv2D", "ΟΔΟΣ", "", "x\ud800conv", "conv\tmm", "MatMul"]
QUERIES = [
    "conv",
    "CONV",
    "aten::",
    "i̇stanbul",
    "οδος",
    "ς",
    "\n",
    "/conv/",
    "/^aten::(add|mul)_?$/",
    "/^conv/",
    "/mm$/",
    r"/\bconv/",
    "/(?:con)v2d/",
    "/x*/",
    "/$/",
    r"/\Aconv/",
    "/(?-m)^conv/",
    "/(?i)matmul/",
    "/[^a]conv/",
    "/./",
    "/a.conv/",
    r"/\d+$/",
    "/İ/",
]


def test_the_filter_of_every_row_at_once_is_the_rule_row_by_row():
    """The filter searches all keys at once (a million rows: 10 s -> well under 1 s for a
    regex) and asks each row found again: on real keys and hostile ones, whatever the
    query, it keeps exactly the rows the rule for one row keeps."""
    from tb_opcompare.analysis.row_view import _query_matcher, _rows_matching
    from tb_opcompare.ingest.formats import read_profile

    trace = next((REPO / "tests/fixtures/versions/torch2.13/transformer_cpu_bs20").glob("*.pt.trace.json"))
    ops = read_profile("pytorch", [str(trace)]).op_table
    keys = [*ops["op_name"].tolist(), *HOSTILE_KEYS, "conv"]
    types = [*ops["op_type"].tolist(), *([None] * len(HOSTILE_KEYS)), "Conv2D"]
    for query in QUERIES:
        # RE2 takes no lone surrogate (the rule for one row raises): those rows, for substrings
        every = [key for key in keys if "\ud800" not in key] if query.startswith("/") else keys
        for rows in (every, [key for key in keys if "\n" not in key and "\ud800" not in key]):
            kinds = [types[keys.index(key)] for key in rows]
            rule = _query_matcher(query)
            expected = [rule(key) or rule(kind if isinstance(kind, str) else "") for key, kind in zip(rows, kinds)]
            assert _rows_matching(query, rows, kinds).tolist() == expected, query


def test_an_answer_of_many_rows_sets_off_no_collection_of_older_objects(many_ops):
    """An answer's records (a dict and a tuple a row) once set off a collection of
    everything the server holds before the answer went out: 40-60 ms of a cold BERT compare
    in TensorBoard. The route collects rarely until its answer is sent (here: closed), and
    gives the collector back after."""
    import gc

    from tb_opcompare.ingest.formats import READ_GC_THRESHOLD

    client = plugin_client(many_ops)  # its own cache: this answer reads, compares and makes every record
    before, older = gc.get_threshold(), []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] > 0:
            older.append(info["generation"])

    # The collector counts its young collections across tests: from a full one, what is seen
    # is what this answer set off (a count left near ten by earlier tests once made one of
    # its young collections the tenth, and an older one with it).
    gc.collect()
    gc.callbacks.append(seen)
    try:
        response = client.get(f"{PREFIX}/compare", query_string={**PAIR, "full": "1"}, buffered=False)
        body = response.get_data()  # every record made, as it was sent
        built, while_sending = list(older), gc.get_threshold()
        response.close()
    finally:
        gc.callbacks.remove(seen)
    # parsed after: a million parsed rows are a million of this test's own dicts
    assert len(json.loads(body)["rows"]) == OPS
    assert built == []
    assert while_sending[0] >= READ_GC_THRESHOLD > before[0]
    assert gc.get_threshold() == before


def test_reads_collect_rarely_and_give_the_collector_back(many_ops, tmp_path):
    """A read raises the collector's young threshold (a million-op trace ran 1,400
    collections, a tenth of its read) and gives the process's own back when the last of
    its reads ends: reads in several threads, one of them of a broken file, leave
    TensorBoard's process collecting as it did."""
    import gc
    import threading

    from tb_opcompare.errors import ProfileError
    from tb_opcompare.ingest import formats

    broken = tmp_path / "broken.pt.trace.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "name": "aten::mm"')
    traces = sorted(str(path) for path in many_ops.rglob("*.pt.trace.json*"))
    before = gc.get_threshold()
    during: list[int] = []
    failed: list[str] = []

    def read(path: str) -> None:
        with formats.collecting_rarely():
            during.append(gc.get_threshold()[0])
            try:
                formats.read_parsed(formats.PYTORCH, [path])
            except ProfileError as error:
                failed.append(error.path)
            during.append(gc.get_threshold()[0])

    threads = [threading.Thread(target=read, args=(path,)) for path in [*traces, str(broken), *traces]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [str(broken)]
    assert min(during) >= formats.READ_GC_THRESHOLD > before[0]
    assert gc.get_threshold() == before
