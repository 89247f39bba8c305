"""Hostile and odd inputs, round four (issue 55): the shared index is input too. Whoever may
write a logdir may write its `.opcompare/`, so every manifest and part is checked before
anything is taken from it: a bad manifest costs the index, a bad entry or part costs its
run (read from its profile, with a notice naming it), never a traceback or another run.
Links under `.opcompare` are never followed, `index` forgets what is gone, `export`
writes a new folder and renames it into place, and a folder named with a byte that is
not UTF-8 is listed under an escaped name. Real files, the real CLI, the tab's routes."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.service.runs import runs_document
from tb_opcompare.store.catalog import Catalog

SOURCE = FIXTURES / "user_logdirs" / "torch_h200"
PAIR = ("lstm_runA", "lstm_runB")
FACTS = ("run", "format", "device", "batch_size", "steps", "step_time_us", "model", "precision", "warnings")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    logdir = tmp_path_factory.mktemp("indexed") / "logs"
    shutil.copytree(SOURCE, logdir)
    result = run_cli("index", str(logdir), "--no-cache", "--jobs", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    return logdir


@pytest.fixture(scope="module")
def truth(tmp_path_factory) -> dict:
    """What the logdir says with no index: the listing and the pair's rows."""
    logdir = tmp_path_factory.mktemp("plain") / "logs"
    shutil.copytree(SOURCE, logdir)
    return {"runs": _facts(_cli_json(logdir, "runs")), "rows": _cli_json(logdir, "compare", *_pair())["rows"]}


def _copy(indexed: Path, tmp_path: Path) -> Path:
    """The indexed logdir again (copy2 keeps the files' times: every entry is trusted)."""
    logdir = tmp_path / "logs"
    shutil.copytree(indexed, logdir, symlinks=True)
    return logdir


def _pair(baseline: str = PAIR[0], target: str = PAIR[1]) -> tuple[str, ...]:
    return ("--baseline", baseline, "--target", target)


def _cli_json(logdir: Path, command: str, *args: str, code: int = 0) -> dict:
    result = run_cli(command, str(logdir), *args, "--json", "--no-cache")
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr[-3000:]
    return json.loads(result.stdout)


def _facts(listing: dict) -> list[dict]:
    return [{fact: run[fact] for fact in FACTS} for run in listing["runs"]]


def _entries(logdir: Path) -> dict[str, dict]:
    return json.loads((logdir / ".opcompare" / "manifest.json").read_text())["sessions"]


def _part_of(logdir: Path, run: str) -> str:
    return next(part for part, entry in _entries(logdir).items() if entry["run"] == run)


def _bundle_of(logdir: Path, run: str) -> Path:
    """The file of the run's batch that holds its tables (index schema 2)."""
    batch = _entries(logdir)[_part_of(logdir, run)]["batch"]
    return logdir / ".opcompare" / "bundles" / f"{batch}.bundle"


def _every_command_answers(logdir: Path) -> None:
    """`runs`, `compare`, `index` and `check` end in words, never a traceback, and the
    tab's listing and comparison answer 200."""
    for args in (
        ("runs", str(logdir), "--no-cache"),
        ("compare", str(logdir), *_pair(), "--no-cache"),
        ("check", str(logdir), *_pair(), "--allow-one-run", "--no-cache"),
    ):
        result = run_cli(*args)
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, (args, result.stderr[-3000:])
    client = plugin_client(logdir)
    assert client.get(f"{PREFIX}/runs").status_code == 200
    assert client.get(f"{PREFIX}/compare?baseline={PAIR[0]}&target={PAIR[1]}").status_code == 200
    indexing = run_cli("index", str(logdir), "--no-cache", "--jobs", "1")
    assert indexing.returncode == 0 and "Traceback" not in indexing.stderr, indexing.stderr[-3000:]


# -- 1. a manifest or a part that is not what this version writes --------------------------------


def test_a_manifest_nested_300000_levels_deep_costs_the_index_and_nothing_else(indexed, truth, tmp_path):
    logdir = _copy(indexed, tmp_path)
    manifest = logdir / ".opcompare" / "manifest.json"
    manifest.write_text("[" * 300_000)
    listing = _cli_json(logdir, "runs")
    assert _facts(listing) == truth["runs"]
    assert any(
        notice.startswith(f"the shared index {manifest} cannot be read (nested deeper than")
        for notice in listing["notices"]
    ), listing["notices"]
    _every_command_answers(logdir)
    assert len(_entries(logdir)) == 11  # `index` wrote a manifest anew


def test_facts_of_the_wrong_type_or_range_cost_their_run_only(indexed, truth, tmp_path):
    logdir = _copy(indexed, tmp_path)
    manifest = logdir / ".opcompare" / "manifest.json"
    document = json.loads(manifest.read_text())
    wrong = {"lstm_runA": ("batch_size", "sixty-four"), "lstm_runB": ("warnings", 7), "lstm_runC": ("steps", -3)}
    for entry in document["sessions"].values():
        if entry["run"] in wrong:
            fact, value = wrong[entry["run"]]
            entry["facts"][fact] = value
    manifest.write_text(json.dumps(document))

    listing = _cli_json(logdir, "runs")
    assert _facts(listing) == truth["runs"]  # the three read from their profiles, the others from the index
    for run in wrong:
        assert any(
            f"entry for {run!r}" in notice and "read from its profile" in notice for notice in listing["notices"]
        )
    catalog = Catalog(str(logdir))
    runs_document(catalog)
    assert sorted({key[1][0][0].split("/logs/")[1].split("/")[0] for key in catalog.cache.parses}) == sorted(wrong)
    assert _cli_json(logdir, "compare", *_pair())["rows"] == truth["rows"]
    _every_command_answers(logdir)


def test_per_step_rows_pointing_past_their_tables_cost_their_run_only(indexed, truth, tmp_path):
    logdir = _copy(indexed, tmp_path)
    part = _part_of(logdir, PAIR[0])
    bundle = _bundle_of(logdir, PAIR[0])
    data = bundle.read_bytes()
    document = json.loads((logdir / ".opcompare" / "manifest.json").read_text())
    start, end = document["sessions"][part]["tables"]["steps"]
    table = pq.read_table(io.BytesIO(data[start:end]))
    columns = table.to_pydict()
    columns["row"] = [10**9] * len(columns["row"])  # past the ops table: `check` indexed arrays with it
    changed = io.BytesIO()
    pq.write_table(pa.Table.from_pydict(columns, schema=table.schema), changed)
    bundle.write_bytes(data + changed.getvalue())  # the entry's steps table now the one at the end
    document["sessions"][part]["tables"]["steps"] = [len(data), len(data) + len(changed.getvalue())]
    (logdir / ".opcompare" / "manifest.json").write_text(json.dumps(document))

    listing = _cli_json(logdir, "runs")
    assert _facts(listing) == truth["runs"]  # a listing reads the manifest alone (index schema 2): no part
    assert _cli_json(logdir, "compare", *_pair())["rows"] == truth["rows"]
    client = plugin_client(logdir)  # the tab reads the part when it compares, and says so in its listing
    assert client.get(f"{PREFIX}/compare?baseline={PAIR[0]}&target={PAIR[1]}").get_json()["rows"] == truth["rows"]
    notices = client.get(f"{PREFIX}/runs").get_json()["notices"]
    assert any(f"entry for {PAIR[0]!r} (part {part!r})" in notice for notice in notices), notices
    _every_command_answers(logdir)


# -- 2. links under .opcompare -----------------------------------------------------------------


def _two_logdirs(root: Path) -> tuple[Path, Path]:
    """Two indexed logdirs with a run `x` of the same file name, another model's trace in
    each (so their parts have the same names and different ops)."""
    name = next((SOURCE / "lstm_runA").iterdir()).name
    mine, theirs = root / "mine", root / "theirs"
    for logdir, source in ((mine, "lstm_runA"), (theirs, "lstm_runD")):
        (logdir / "x").mkdir(parents=True)
        shutil.copy2(next((SOURCE / source).iterdir()), logdir / "x" / name)
        shutil.copytree(SOURCE / "lstm_runB", logdir / "lstm_runB")
        assert run_cli("index", str(logdir), "--no-cache", "--jobs", "1").returncode == 0
    return mine, theirs


def test_a_part_or_a_table_folder_linking_to_another_logdirs_index_is_never_followed(tmp_path):
    mine, theirs = _two_logdirs(tmp_path)
    plain = tmp_path / "plain"
    shutil.copytree(mine, plain, ignore=shutil.ignore_patterns(".opcompare"))
    truth = _cli_json(plain, "compare", *_pair("x", "lstm_runB"))["rows"]
    part = _part_of(mine, "x")
    assert part == _part_of(theirs, "x")

    linked_part = _bundle_of(mine, "x")  # a batch's bundle, linked to their batch's
    linked_part.unlink()
    linked_part.symlink_to(_bundle_of(theirs, "x"))
    assert _cli_json(mine, "compare", *_pair("x", "lstm_runB"))["rows"] == truth  # not their op names
    client = plugin_client(mine)  # the tab reads the part when it compares, and says so in its listing
    assert client.get(f"{PREFIX}/compare?baseline=x&target=lstm_runB").get_json()["rows"] == truth
    notices = client.get(f"{PREFIX}/runs").get_json()["notices"]
    assert any(
        f"entry for 'x' (part {part!r})" in notice and "a link to a file outside" in notice for notice in notices
    )

    shutil.copyfile(_bundle_of(theirs, "x"), theirs / ".opcompare" / "bundles" / linked_part.name)
    shutil.rmtree(mine / ".opcompare" / "bundles")  # the folder, linked to theirs (a bundle of mine's name there)
    (mine / ".opcompare" / "bundles").symlink_to(theirs / ".opcompare" / "bundles", target_is_directory=True)
    assert _cli_json(mine, "compare", *_pair("x", "lstm_runB"))["rows"] == truth
    client = plugin_client(mine)
    answer = client.get(f"{PREFIX}/compare?baseline=x&target=lstm_runB")
    assert answer.status_code == 200 and answer.get_json()["rows"] == truth

    theirs_before = sorted(path.name for path in (theirs / ".opcompare" / "bundles").iterdir())
    shutil.copytree(SOURCE / "lstm_runC", mine / "new_run")  # a run whose part `index` writes
    result = run_cli("index", str(mine), "--no-cache", "--jobs", "1")
    assert "Traceback" not in result.stderr and "warning: cannot write" in result.stderr, result.stderr
    assert sorted(path.name for path in (theirs / ".opcompare" / "bundles").iterdir()) == theirs_before


# -- 3. `index` forgets what is gone ------------------------------------------------------------


def test_index_prunes_the_entries_and_parts_of_files_that_are_gone(indexed, tmp_path):
    logdir = _copy(indexed, tmp_path)
    trace = next((logdir / "lstm_runA").iterdir())
    data = trace.read_bytes()
    for rotation in range(3):  # the run deleted and recorded anew, three times
        shutil.rmtree(logdir / "lstm_runA")
        (logdir / "lstm_runA").mkdir()
        (logdir / "lstm_runA" / f"vm_{rotation}.{1795661336446941146 + rotation}.pt.trace.json.gz").write_bytes(data)
        result = run_cli("index", str(logdir), "--no-cache", "--jobs", "1")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "pruned 1 entries" in result.stdout
    shutil.rmtree(logdir / "log")  # a run of three captures gone for good
    result = run_cli("index", str(logdir), "--no-cache", "--jobs", "1")
    assert "pruned 3 entries" in result.stdout and "0 read, 8 already indexed" in result.stdout, result.stdout

    entries = _entries(logdir)
    listed = {path for source in Catalog(str(logdir)).sources() for paths in source.sessions.values() for path in paths}
    assert len(entries) == len(listed) == 8
    assert {str(logdir / record["path"]) for entry in entries.values() for record in entry["files"]} == listed
    # every file of the index is a batch's that holds a session, and the dataset holds each
    # session once (a batch that lost one was written anew)
    batches = {path.stem for path in (logdir / ".opcompare").rglob("*") if path.is_file() and path.stem != "manifest"}
    assert batches == {entry["batch"] for entry in entries.values()}
    runs = pq.read_table(logdir / ".opcompare" / "runs").to_pydict()
    assert sorted(zip(runs["run"], runs["session"])) == sorted((e["run"], e["session"]) for e in entries.values())


# -- 4. `export --parquet DIR` ------------------------------------------------------------------


def _export(logdir: Path, target: Path, *flags: str):
    result = run_cli("export", str(logdir), "--parquet", str(target), "--no-cache", *flags)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


def test_export_never_writes_through_a_link_and_never_mixes_exports(indexed, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ops.parquet").write_text("someone else's file")
    target = tmp_path / "dataset"
    target.mkdir()
    (target / "ops").symlink_to(outside, target_is_directory=True)

    refused = _export(indexed, target)
    assert refused.returncode == 2 and "is not an earlier export" in refused.stderr and "--overwrite" in refused.stderr
    assert (outside / "ops.parquet").read_text() == "someone else's file"
    assert _export(indexed, target, "--overwrite").returncode == 0
    assert (outside / "ops.parquet").read_text() == "someone else's file"
    assert not (target / "ops").is_symlink() and sorted(os.listdir(target / "ops")) == ["ops.parquet"]
    rows = pq.read_table(target / "ops").num_rows

    pq.write_table(pq.read_table(target / "ops" / "ops.parquet"), target / "ops" / "left_over.parquet")
    assert pq.read_table(target / "ops").num_rows == 2 * rows  # what the documented glob counted
    assert _export(indexed, target).returncode == 0  # an earlier export: replaced whole, no flag needed
    assert pq.read_table(target / "ops").num_rows == rows
    assert sorted(os.listdir(target / "ops")) == ["ops.parquet"]
    assert [name for name in os.listdir(tmp_path) if name.startswith(".")] == []  # no scratch folder left

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    refused = _export(indexed, notes)
    assert refused.returncode == 2 and (notes / "todo.txt").read_text() == "mine"


def test_export_into_the_logdirs_index_or_over_the_logdir_is_refused(indexed, tmp_path):
    logdir = _copy(indexed, tmp_path)
    before = sorted(path.relative_to(logdir) for path in logdir.rglob("*"))
    for target in (logdir / ".opcompare", logdir / ".opcompare" / "export", logdir):
        refused = _export(logdir, target, "--overwrite")
        assert refused.returncode == 2 and refused.stderr.startswith("error: --parquet"), refused.stderr
    assert sorted(path.relative_to(logdir) for path in logdir.rglob("*")) == before


# -- 5. names that are not UTF-8 ----------------------------------------------------------------


def test_a_run_folder_named_with_a_byte_that_is_not_utf8_is_listed_escaped(tmp_path):
    logdir = tmp_path / "logs"
    shutil.copytree(SOURCE, logdir)
    odd = os.fsencode(logdir) + b"/odd\xff"
    os.mkdir(odd)
    trace = next((SOURCE / "lstm_runA").iterdir())
    with open(odd + b"/" + os.fsencode(trace.name), "wb") as out:
        out.write(trace.read_bytes())
    os.mkdir(os.fsencode(logdir) + b"/broken\xfe")
    with open(os.fsencode(logdir) + b"/broken\xfe/host.1.pt.trace.json", "w") as out:
        out.write('{"traceEvents": [{"ph": "X", "name"')

    listing = _cli_json(logdir, "runs", code=1)  # 1: a run cannot be read
    assert "odd\\xff" in [run["run"] for run in listing["runs"]] and len(listing["runs"]) == 10
    (error,) = listing["errors"]
    assert error["run"] == "broken\\xfe" and error["path"].endswith("/broken\\xfe/host.1.pt.trace.json")
    compared = _cli_json(logdir, "compare", *_pair("odd\\xff", "lstm_runB"))  # asked for by its listed name
    assert compared["rows"] == _cli_json(logdir, "compare", *_pair("lstm_runA", "lstm_runB"))["rows"]
    answer = plugin_client(logdir).get(f"{PREFIX}/runs")
    assert answer.status_code == 200 and "odd\\xff" in [run["run"] for run in answer.get_json()["runs"]]

    indexing = run_cli("index", str(logdir), "--no-cache", "--jobs", "1")
    assert indexing.returncode == 1 and "Traceback" not in indexing.stderr, indexing.stderr[-3000:]
    assert "12 read" in indexing.stdout and "broken\\xfe/host.1.pt.trace.json" in indexing.stderr
    catalog = Catalog(str(logdir))
    assert [run.run for run in runs_document(catalog).runs] == [run["run"] for run in listing["runs"]]
    assert not catalog.cache.parses  # the odd run too, from the index

    exported = _export(logdir, tmp_path / "dataset")
    assert exported.returncode == 1 and "12 sessions written" in exported.stdout, exported.stdout + exported.stderr
    runs = pq.read_table(tmp_path / "dataset" / "runs").to_pydict()
    assert "odd\\xff" in runs["run"] and any(files == [f"odd\\xff/{trace.name}"] for files in runs["files"])


# -- a scheduler's address (point 8) ------------------------------------------------------------

NO_CLUSTER = {
    "127.0.0.1": "no port",
    "": "an empty address",
    "tls://127.0.0.1:8786": "tls:// needs Dask's TLS configuration",
    "tcp://[::1:8786": "without its closing ']'",
    "tcp://[fe80::zz]:8786": "is not an IPv6 address",
    "tcp://::1:8786": "an IPv6 address goes in brackets",
    "tcp://host:port": "the port 'port' is not a number",
    "ucx://host:8786": "'ucx' is not a scheme",
}


def test_a_scheduler_address_that_names_no_cluster_is_refused_before_anything_is_read(tmp_path):
    """Each of these ended in a traceback from Dask's comm layer, after the logdir was
    listed (the empty one indexed on this machine instead)."""
    pytest.importorskip("distributed")
    logdir = tmp_path / "logs"
    shutil.copytree(SOURCE, logdir)
    for address, why in NO_CLUSTER.items():
        result = run_cli("index", str(logdir), "--scheduler", address, "--no-cache")
        assert result.returncode == 2, (address, result.stdout, result.stderr[-2000:])
        assert result.stderr.startswith(f"error: --scheduler {address!r}: ") and why in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and not result.stdout
    assert not (logdir / ".opcompare").exists()  # nothing read, nothing written


def test_a_scheduler_address_dask_takes_passes_the_check():
    from tb_opcompare.store.prewarm import check_scheduler

    for address in ("tcp://[::1]:8786", "127.0.0.1:8786", "tcp://scheduler.example.org:8786", "local:2"):
        check_scheduler(address)


# -- a sidecar linked out of the logdir (point 10) -------------------------------------------------


def test_a_sidecar_linked_out_of_the_logdir_is_not_followed(tmp_path):
    """`opcompare.json` beside a run, a link to a file elsewhere: its fields (label, model,
    device) were read into the runs document. The rule for traces holds for it: no file is
    read through a link out of the logdir, checked on the opened file."""
    logdir = tmp_path / "logs"
    shutil.copytree(SOURCE, logdir)
    outside = tmp_path / "elsewhere" / "opcompare.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps({"label": "secret-label", "model": "leaked", "device": "tpu", "batch_size": 7}))
    (logdir / PAIR[0] / "opcompare.json").symlink_to(outside)
    inside = logdir / PAIR[1] / "opcompare.json"  # a link within the logdir is a file of the logdir
    (logdir / "shared_sidecar.json").write_text(json.dumps({"label": "team-label"}))
    inside.symlink_to(logdir / "shared_sidecar.json")
    listing = _cli_json(logdir, "runs")
    runs = {run["run"]: run for run in listing["runs"]}
    assert set(runs) == {run["run"] for run in _cli_json(SOURCE, "runs")["runs"]}  # every run still listed
    linked = runs[PAIR[0]]
    assert "secret-label" not in json.dumps(listing) and "leaked" not in json.dumps(listing)
    assert linked["device"] != "TPU" and linked["batch_size"] != 7
    assert any(
        "opcompare.json: ignored, a link to a file outside the logdir" in warning and str(outside) in warning
        for warning in linked["warnings"]
    ), linked["warnings"]
    assert runs[PAIR[1]]["label"] == "team-label"
    text = run_cli("runs", str(logdir), "--no-cache")
    assert text.returncode == 0 and "secret-label" not in text.stdout + text.stderr


# -- a rewrite in place of as many bytes (point 3) --------------------------------------------------


def test_a_trace_rewritten_in_place_with_as_many_bytes_is_read_again(tmp_path):
    """Op names scrubbed to names of the same length in the middle of a trace, after
    indexing: the size is the same, the time is new, and the first and last 64 KiB are the
    same, so the index kept serving the old names. The whole content is compared now."""
    import gzip

    logdir = tmp_path / "logs"
    shutil.copytree(SOURCE, logdir)
    packed = next((logdir / PAIR[0]).glob("*.pt.trace.json.gz"))
    trace = packed.with_suffix("")  # plain JSON: its middle can be rewritten in place
    trace.write_bytes(gzip.decompress(packed.read_bytes()))
    packed.unlink()
    assert run_cli("index", str(logdir), "--no-cache", "--jobs", "1").returncode == 0
    before = _cli_json(logdir, "compare", *_pair())["rows"]
    assert any(row["key"] == "aten::transpose" for row in before)

    data = trace.read_bytes()
    middle = slice(1 << 16, len(data) - (1 << 16))
    scrubbed = data[middle].replace(b'"aten::transpose"', b'"aten::TRANSPOSE"')
    assert scrubbed != data[middle]
    with open(trace, "r+b") as handle:  # in place: the same inode, the same size
        handle.seek(middle.start)
        handle.write(scrubbed)
    stat = trace.stat()
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert trace.stat().st_size == len(data)

    after = _cli_json(logdir, "compare", *_pair())["rows"]
    assert any(row["key"] == "aten::TRANSPOSE" for row in after)
    shutil.rmtree(logdir / ".opcompare")
    assert after == _cli_json(logdir, "compare", *_pair())["rows"]  # what a read of the profile says


def test_a_touched_trace_is_hashed_once_not_at_every_listing(tmp_path, monkeypatch):
    """A copy (cp -r, aws s3 sync) gives every trace a new time and the same bytes: the index
    still serves it, after one hash of the whole file, not one at every listing of a server
    that runs for weeks."""
    from tb_opcompare.ingest import fs

    logdir = tmp_path / "logs"
    shutil.copytree(SOURCE, logdir)
    assert run_cli("index", str(logdir), "--no-cache", "--jobs", "1").returncode == 0
    for trace in logdir.rglob("*.pt.trace.json*"):
        stat = trace.stat()
        os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    hashed: list[str] = []
    digest = fs.content_digest
    monkeypatch.setattr(fs, "content_digest", lambda path: hashed.append(path) or digest(path))
    catalog = Catalog(str(logdir), cache_dir=None)
    for _ in range(3):  # the tab polls the listing
        catalog.sources(refresh=True)
        document = runs_document(catalog)
        assert not document.errors and all(run.sessions for run in document.runs)
    assert len(hashed) >= 2 and sorted(hashed) == sorted(set(hashed))  # each indexed trace once
    assert sum(catalog.cache.parses.values()) == 0  # every run served by the index, none parsed
