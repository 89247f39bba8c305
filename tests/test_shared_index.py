"""The shared index (issue 34): `tb-opcompare index` keeps each session's parsed tables in
the logdir's `.opcompare/` folder, and any later process, here or on another machine,
lists and compares from them without reading a profile, on disk and in a bucket (moto's
real S3 server, IAM enforced); a profile changed since is read again; a logdir that cannot
be written keeps working from the local cache. The index is a dataset that DuckDB and
pandas read in the documented schema, and indexing runs on a real Dask cluster."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import FIXTURES, REPO, without_read_from

from tb_opcompare import __version__
from tb_opcompare.analysis.compare import IMPLEMENTATIONS_JOIN
from tb_opcompare.ingest import fs
from tb_opcompare.service.compare import compare_document
from tb_opcompare.service.runs import runs_document
from tb_opcompare.store.cache import READER_VERSION
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.store.prewarm import index_logdir
from tb_opcompare.store.settings import ReadSettings

SOURCES = {
    "tf": FIXTURES / "tf_modes" / "logdir",
    "ranks": FIXTURES / "gpu_h200" / "ranks",
    "user": FIXTURES / "user_logdirs" / "torch_h200",
}
PAIRS = [
    ("ranks/ddp_cnn_cpu", "ranks/ddp_cnn_gpu"),
    ("user/lstm_runA", "user/lstm_runB"),
    ("tf/keras_eager_cpu_bs16/train", "tf/keras_graph_cpu_bs16/train"),
]


def _logdir(root: Path, broken: bool = True) -> Path:
    logdir = root / "logs"
    for name, source in SOURCES.items():
        shutil.copytree(source, logdir / name)
    if broken:  # a run that cannot be read: its error is indexed too
        (logdir / "broken").mkdir()
        (logdir / "broken" / "host_1.123.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name"')
    return logdir


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    executable = Path(sys.executable).parent / "tb-opcompare"
    return subprocess.run(
        [str(executable), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})},
    )


def _documents(catalog: Catalog) -> dict:
    documents = {"runs": msgspec.to_builtins(runs_document(catalog))}
    for baseline, target in PAIRS:
        documents[f"{baseline} -> {target}"] = msgspec.to_builtins(compare_document(catalog, baseline, target))
    return documents


def _profiles_opened(monkeypatch) -> list[str]:
    """Every local file opened from now on that is not part of the index."""
    opened, real_open = [], fs.open_regular
    monkeypatch.setattr(fs, "open_regular", lambda path: opened.append(path) or real_open(path))
    return opened


def _read_from(documents) -> set:
    found = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            if "read_from" in value:
                found.add(value["read_from"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(documents)
    return found


def test_a_fresh_process_lists_and_compares_from_the_index_without_reading_a_profile(tmp_path, monkeypatch):
    logdir = _logdir(tmp_path)
    parsed = _documents(Catalog(str(logdir)))
    assert any(error["path"].endswith("host_1.123.pt.trace.json") for error in parsed["runs"]["errors"])
    result = _cli("index", str(logdir), "--no-cache", "--jobs", "2")
    sessions = sum(
        1
        for source in Catalog(str(logdir)).sources()
        for session in source.sessions
        if session not in source.worker_sessions
    )
    assert f"{sessions - 1} read, 0 already indexed, 1 unreadable" in result.stdout, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert (logdir / ".opcompare" / "manifest.json").is_file()

    opened = _profiles_opened(monkeypatch)
    fresh = Catalog(str(logdir))  # no cache: memory only, empty
    indexed = _documents(fresh)
    # each run says where its numbers came from: the index and its writer, or the profile
    said = _read_from(indexed)
    assert said == {f"the shared index (.opcompare/), written by tb-opcompare {__version__} (reader {READER_VERSION})"}
    assert _read_from(parsed) == {"the profile"}
    assert without_read_from(indexed) == without_read_from(parsed)  # every fact, number, note and error
    assert not fresh.cache.parses
    # not one profile byte (sidecars, a few bytes each, are read as before)
    assert [path for path in opened if "/.opcompare/" not in path and not path.endswith("/opcompare.json")] == []
    assert not any(".opcompare" in run["run"] for run in indexed["runs"]["runs"])  # the index is no run

    again = _cli("index", str(logdir), "--no-cache")  # nothing new: nothing read
    assert f"0 read, {sessions} already indexed" in again.stdout, again.stdout


def test_a_profile_changed_after_indexing_is_read_again_and_a_copied_logdir_is_not(tmp_path):
    logdir = _logdir(tmp_path, broken=False)
    assert _cli("index", str(logdir), "--no-cache").returncode == 0
    copied = tmp_path / "copied"
    shutil.copytree(logdir, copied, copy_function=shutil.copy)  # new modification times, same bytes
    fresh = Catalog(str(copied))
    msgspec.to_builtins(runs_document(fresh))
    assert not fresh.cache.parses

    trace = next((logdir / "user" / "lstm_runA").rglob("*.pt.trace.json*"))
    other = next((logdir / "user" / "lstm_runC").rglob("*.pt.trace.json*"))
    shutil.copyfile(other, trace)  # rewritten in place
    ops = sorted((logdir / "ranks" / "ddp_cnn_gpu").rglob("*.pt.trace.json*"))[0]
    data = bytearray(ops.read_bytes())
    data[1000] ^= 1  # the same size, one byte flipped near the start
    ops.write_bytes(bytes(data))
    fresh = Catalog(str(logdir))
    runs = msgspec.to_builtins(runs_document(fresh))
    reread = {key[1][0][0].split("/logs/")[1].split("/")[1] for key in fresh.cache.parses}
    assert reread == {"lstm_runA", "ddp_cnn_gpu"}  # those two, and only those
    shutil.copytree(logdir, tmp_path / "unindexed", ignore=shutil.ignore_patterns(".opcompare"))
    truth = msgspec.to_builtins(runs_document(Catalog(str(tmp_path / "unindexed"))))
    assert without_read_from(runs["runs"]) == without_read_from(truth["runs"])  # the new bytes', not the indexed


def test_index_local_only_writes_nothing_into_the_logdir(tmp_path):
    logdir = _logdir(tmp_path, broken=False)
    before = sorted(path.relative_to(logdir) for path in logdir.rglob("*"))
    result = _cli("index", str(logdir), "--local-only", "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0 and "kept in this machine's cache" in result.stdout, result.stdout + result.stderr
    assert sorted(path.relative_to(logdir) for path in logdir.rglob("*")) == before


# A command in a process of its own (argv after the module and function), each forked
# worker writing down the modules its call of that worker function imported
WORKER_IMPORTS = r"""
import importlib, json, os, sys
from tb_opcompare.cli.main import main

out, module, name = sys.argv[1], importlib.import_module(sys.argv[2]), sys.argv[3]
work = getattr(module, name)

def noted(*args):
    before = set(sys.modules)
    done = work(*args)
    with open(os.path.join(out, str(os.getpid())), "w") as handle:
        json.dump(sorted(set(sys.modules) - before), handle)
    return done

setattr(module, name, noted)
sys.argv = ["tb-opcompare", *sys.argv[4:]]
sys.exit(main())
"""
# pyarrow's pandas shim, a few ms, is still imported where a worker first converts a list
_HEAVY = ("numpy", "pandas", "distributed", "dask", "tb_opcompare")


def _worker_imports(out: Path, worker: str, *command: str, heavy: tuple[str, ...] = _HEAVY) -> dict[str, list[str]]:
    """What each forked worker of ``command`` imported in its call of ``worker``
    (module.function), of the ``heavy`` packages (and pyarrow), by the worker's pid."""
    out.mkdir()
    module, name = worker.rsplit(".", 1)
    done = subprocess.run(
        [sys.executable, "-c", WORKER_IMPORTS, str(out), module, name, *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    workers = {path.name: json.loads(path.read_text()) for path in out.iterdir()}
    assert len(workers) >= 3, done.stdout  # a worker a session, every session forked
    return {
        pid: [name for name in names if name.split(".")[0] in heavy or name in ("pyarrow", "pyarrow.parquet")]
        for pid, names in workers.items()
    }


def test_index_workers_inherit_their_imports_rather_than_each_importing_them(tmp_path):
    """A worker is forked a session. Each imported the readers, pandas, pyarrow and Dask for
    itself (about 1 s a session): `index` of the 38 small sessions of the demo took 28.9 s
    with two workers against 4.7 s in one process. The command now imports them once,
    before it forks, and imports Dask only on a Dask worker."""
    logdir = _logdir(tmp_path, broken=False)
    imported = _worker_imports(
        tmp_path / "imports", "tb_opcompare.store.prewarm._index_one", "index", str(logdir), "--jobs", "2", "--no-cache"
    )
    assert not any(imported.values()), imported


def test_a_cold_listings_read_ahead_workers_inherit_the_readers(tmp_path):
    """A cold listing reads its runs in forked workers, a session each (``read_ahead``),
    which each imported the readers for themselves: `runs` of the demo's 38 sessions took
    2.6-3.2 s and 3.9-4.6 s of CPU, now 2.3-2.9 s and 2.9-3.6 s (alternating runs)."""
    logdir = tmp_path / "demo"
    shutil.copytree(REPO / "demo_logs", logdir, ignore=shutil.ignore_patterns(".opcompare"))
    # (numpy's own lazy ``numpy.ma``, which a numpy function imports on first use, is left)
    imported = _worker_imports(
        tmp_path / "imports",
        "tb_opcompare.store.catalog._read_key",
        *("runs", str(logdir), "--no-cache", "-q"),
        heavy=("pandas", "distributed", "dask", "tb_opcompare", "google"),
    )
    assert not any(imported.values()), imported


def _documented_columns() -> dict[str, list[str]]:
    text = (REPO / "docs" / "index_schema.md").read_text()
    tables = {}
    for block in text.split("\n## ")[1:]:
        name = block.split("\n", 1)[0].strip()
        tables[name] = re.findall(r"^\| `(\w+)` \|", block, flags=re.M)
    return tables


def test_the_index_and_an_export_are_a_dataset_duckdb_and_pandas_read(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    import pandas as pd

    logdir = _logdir(tmp_path, broken=False)
    assert _cli("index", str(logdir), "--no-cache").returncode == 0
    exported = tmp_path / "dataset"
    result = _cli("export", str(logdir), "--parquet", str(exported), "--no-cache")
    assert result.returncode == 0, result.stderr
    documented = _documented_columns()
    for table in ("runs", "ops", "steps", "memory"):
        frame = pd.read_parquet(exported / table)
        assert list(frame.columns) == documented[table], table
        indexed = duckdb.sql(f"SELECT * FROM '{logdir}/.opcompare/{table}/*.parquet'")
        export_only = {"model", "base_model", "model_source", "label", "repeat"}
        assert indexed.columns == [c for c in documented[table] if c not in export_only], table

    # the question of the docs, answered without the tool, equals what the tool says
    catalog = Catalog(str(logdir))
    runs = msgspec.to_builtins(runs_document(catalog))["runs"]
    exported_models = dict(duckdb.sql(f"SELECT DISTINCT run, model FROM '{exported}/runs/*.parquet'").fetchall())
    assert exported_models == {run["run"]: run["model"] for run in runs}
    baseline, target = PAIRS[0]
    tool = msgspec.to_builtins(compare_document(catalog, baseline, target))
    checked = 0
    for row in tool["rows"]:
        if row["status"] != "matched":
            continue
        # one framework op's implementations on each side (``a → b``): each side's own op name
        joined = IMPLEMENTATIONS_JOIN in row["key"]
        names = row["key"].split(IMPLEMENTATIONS_JOIN) if joined else [row["key"]] * 2
        if joined and any(", " in name for name in names):
            continue  # several implementations on a side: summed, no one op's row to read
        for name, (side, run) in zip(names, (("baseline", baseline), ("target", target))):
            ((mean_us,),) = (
                duckdb.connect()
                .execute(
                    f"SELECT o.mean_us FROM '{exported}/ops/*.parquet' o JOIN '{exported}/runs/*.parquet' r "
                    f"USING (run, session) WHERE o.run = ? AND o.op_name = ? AND o.side = ? AND len(r.workers_json) > 2",
                    [run, name, row[f"{side}_time_source"]],
                )
                .fetchall()
            )
            assert mean_us == pytest.approx(row[f"{side}_mean_us"], rel=1e-9), (row["key"], side)
            checked += 1
    assert checked > 20


# -- a bucket --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    pytest.importorskip("s3fs")
    from s3_server import s3_server

    root = tmp_path_factory.mktemp("bucket")
    local = _logdir(root, broken=False)
    with s3_server(root / "moto.log") as server:
        server.upload(local, "team", "logs")
        server.upload(local, "team", "readonly")
        yield server, local


def _profile_gets(server, since: int) -> list[str]:
    """The profiles fetched whole (a range read of a trace's first bytes, which discovery
    looks at to join a distributed job's ranks, is no read of the profile)."""
    return [
        path
        for method, path, status in server.answers()[since:]
        if method == "GET"
        and status != 206
        and re.search(r"\.(pb|json|json\.gz)$", path)
        and "/.opcompare/" not in path
    ]


FACTS = (
    "run",
    "format",
    "device",
    "device_name",
    "batch_size",
    "steps",
    "step_time_us",
    "model",
    "precision",
    "compiler",
    "framework",
    "warnings",
)


def test_after_index_a_bucket_logdir_compares_with_no_profile_read(bucket, tmp_path):
    server, local = bucket
    unindexed = _cli("runs", "s3://team/logs", "--json", "--no-cache", env=server.env("reader"))
    indexing = _cli("index", "s3://team/logs", "--no-cache", "--jobs", "2", env=server.env("writer"))
    assert indexing.returncode == 0 and "kept in the shared index s3://team/logs/.opcompare" in indexing.stdout, (
        indexing.stdout + indexing.stderr
    )
    since = len(server.requests())
    listing = _cli("runs", "s3://team/logs", "--json", "--no-cache", env=server.env("reader"))
    pair = ("--baseline", PAIRS[0][0], "--target", PAIRS[0][1])
    remote = _cli("compare", "s3://team/logs", *pair, "--json", "--no-cache", env=server.env("reader"))
    assert listing.returncode == remote.returncode == 0, listing.stderr[-2000:] + remote.stderr[-2000:]
    assert _profile_gets(server, since) == []  # listing and comparing fetched the index, not one profile
    disk = _cli("compare", str(local), *pair, "--json", "--no-cache")
    assert json.loads(remote.stdout)["rows"] == json.loads(disk.stdout)["rows"]
    for indexed_run, read_run in zip(json.loads(listing.stdout)["runs"], json.loads(unindexed.stdout)["runs"]):
        assert {fact: indexed_run[fact] for fact in FACTS} == {fact: read_run[fact] for fact in FACTS}

    # rewritten in the bucket after indexing: read again, and its numbers are the new file's
    pair = ("--baseline", PAIRS[1][0], "--target", PAIRS[1][1])
    before = json.loads(
        _cli("compare", "s3://team/logs", *pair, "--json", "--no-cache", env=server.env("reader")).stdout
    )
    trace = next((local / "user" / "lstm_runA").rglob("*.pt.trace.json*"))
    other = next((local / "user" / "lstm_runC").rglob("*.pt.trace.json*"))
    key = f"logs/{trace.relative_to(local).as_posix()}"
    server.client("writer").upload_file(str(other), "team", key)
    since = len(server.requests())
    again = _cli("compare", "s3://team/logs", *pair, "--json", "--no-cache", env=server.env("reader"))
    assert again.returncode == 0 and any(path.endswith(key) for path in _profile_gets(server, since))
    changed = tmp_path / "changed"
    shutil.copytree(local, changed)
    shutil.copyfile(other, changed / trace.relative_to(local))
    truth = json.loads(_cli("compare", str(changed), *pair, "--json", "--no-cache").stdout)
    assert json.loads(again.stdout)["rows"] == truth["rows"] != before["rows"]


def test_a_bucket_that_denies_writes_is_indexed_into_the_local_cache_with_a_warning(bucket, tmp_path):
    server, _ = bucket
    cache = str(tmp_path / "cache")
    result = _cli("index", "s3://team/readonly", "--cache-dir", cache, env=server.env("reader"))
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning: cannot write s3://team/readonly/.opcompare" in result.stderr
    assert "AccessDenied" in result.stderr or "Access Denied" in result.stderr
    since = len(server.requests())
    listing = _cli("runs", "s3://team/readonly", "--json", "--cache-dir", cache, env=server.env("reader"))
    assert listing.returncode == 0 and json.loads(listing.stdout)["runs"]
    assert _profile_gets(server, since) == []


# -- a Dask cluster -----------------------------------------------------------------------------


def test_index_on_a_dask_cluster_survives_a_lost_worker_and_matches_one_machine(tmp_path):
    distributed = pytest.importorskip("distributed")
    logdir = _logdir(tmp_path / "cluster", broken=False)
    alone = _logdir(tmp_path / "alone", broken=False)
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        pids = client.run(os.getpid)  # worker address -> process id
        assert len(pids) == 2
        killed = []

        def kill_one_worker(line: str) -> None:
            if line.startswith("  [1/"):
                # mid-run (the others are queued or running), a worker that has read a session
                # already: killed before its first, it left every task to the other
                done = [
                    task["worker"]
                    for task in client.get_task_stream()
                    if task["key"].startswith("opcompare-index-") and task["worker"] in pids
                ]
                killed.append(done[0] if done else next(iter(pids)))
                os.kill(pids[killed[0]], signal.SIGKILL)

        with distributed.get_task_stream(client) as stream:
            report = index_logdir(
                Catalog(str(logdir)), jobs=1, say=kill_one_worker, scheduler=cluster.scheduler_address
            )
    sessions = sum(
        1
        for source in Catalog(str(logdir)).sources()
        for session in source.sessions
        if session not in source.worker_sessions
    )
    assert (report.read, report.errors, report.write_error) == (sessions, [], None)
    ran = [task for task in stream.data if task["key"].startswith("opcompare-index-")]
    assert killed and len({task["worker"] for task in ran}) >= 2  # both workers read sessions
    # one task a session (a result lost with the killed worker is asked for again, under a new key)
    assert len({task["key"].split("-again-")[0] for task in ran}) == sessions
    # each rank of the two-rank jobs a task of its own, pooled into one run by the job's task
    jobs = [
        (source, session)
        for source in Catalog(str(logdir)).sources()
        for session in source.sessions
        if session in source.worker_sessions.values()
    ]
    ranks = {task["key"].split("-again-")[0] for task in stream.data if task["key"].startswith("opcompare-rank-")}
    assert len(jobs) == 2 and len(ranks) == sum(len(source.sessions[session]) for source, session in jobs) == 4

    index_logdir(Catalog(str(alone)), jobs=1, say=lambda _: None)
    cluster_manifest = json.loads((logdir / ".opcompare" / "manifest.json").read_text())["sessions"]
    alone_manifest = json.loads((alone / ".opcompare" / "manifest.json").read_text())["sessions"]
    assert set(cluster_manifest) == set(alone_manifest)
    import pyarrow.parquet as pq

    def tables(root: Path, entry: dict) -> dict[str, dict]:  # each of the entry's tables, from its batch's bundle
        data = (root / ".opcompare" / "bundles" / f"{entry['batch']}.bundle").read_bytes()
        return {
            table: pq.read_table(io.BytesIO(data[start:end])).to_pydict()
            for table, (start, end) in entry["tables"].items()
        }

    facts = ("run", "session", "facts", "step_count", "op_names")
    for part, entry in cluster_manifest.items():
        theirs = alone_manifest[part]
        assert {k: entry[k] for k in facts} == {k: theirs[k] for k in facts}
        assert tables(logdir, entry) == tables(alone, theirs)


def test_a_job_too_big_for_one_worker_is_refused_on_a_cluster_as_on_one_machine(tmp_path):
    """Each rank of a job's capture passes the memory guard alone; the worker that combines
    them holds them all. A job that one machine's index refuses as a whole (the guard over
    every rank) is refused on a cluster too, with the same words, not read rank by rank
    into one worker."""
    distributed = pytest.importorskip("distributed")
    from tb_opcompare.store.memory_guard import memory_guard

    logdir = _logdir(tmp_path / "cluster", broken=False)
    alone = _logdir(tmp_path / "alone", broken=False)
    source, session = next(
        (source, session)
        for source in Catalog(str(logdir)).sources()
        for session in source.sessions
        if session in source.worker_sessions.values()
    )
    files = [(path, os.path.getsize(path)) for path in source.sessions[session]]
    each = max(memory_guard(source.format, [file], 0) for file in files)
    limit = (each + memory_guard(source.format, files, 0)) // 2  # every rank fits, the job does not
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        report = index_logdir(
            Catalog(str(logdir), max_trace_bytes=limit), jobs=1, say=lambda _: None, scheduler=cluster.scheduler_address
        )
    one_machine = index_logdir(Catalog(str(alone), max_trace_bytes=limit), jobs=1, say=lambda _: None)

    def relative(errors, root):
        return sorted((str(Path(path).relative_to(root)), reason) for path, reason in errors)

    refused = relative(report.errors, logdir)
    assert refused == relative(one_machine.errors, alone)
    job_file = str(Path(files[0][0]).relative_to(logdir))
    assert any(path == job_file and "memory guard" in reason for path, reason in refused)


def test_index_scheduler_local_from_the_command_line(tmp_path):
    pytest.importorskip("distributed")
    logdir = _logdir(tmp_path, broken=False)
    result = _cli("index", str(logdir), "--scheduler", "local:2", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "on the Dask cluster at tcp://" in result.stdout and "(2 workers)" in result.stdout
    fresh = Catalog(str(logdir))
    msgspec.to_builtins(runs_document(fresh))
    assert not fresh.cache.parses
    unreachable = _cli(
        "index",
        str(_logdir(tmp_path / "other", broken=False)),
        "--scheduler",
        "tcp://127.0.0.1:9",
        "--no-cache",
        env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3s"},
    )
    assert unreachable.returncode == 2 and "cannot reach the Dask scheduler" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    for wrong in (("--scheduler", "local:x"), ("--scheduler", "local:0"), ("--scheduler", "local:2", "--local-only")):
        refused = _cli("index", str(logdir), *wrong, "--no-cache")
        assert refused.returncode == 2 and refused.stderr.startswith("error: --") and "Traceback" not in refused.stderr


def test_a_broken_or_foreign_index_is_passed_over_in_words(tmp_path):
    logdir = _logdir(tmp_path, broken=False)
    truth = msgspec.to_builtins(runs_document(Catalog(str(logdir))))
    assert _cli("index", str(logdir), "--no-cache").returncode == 0
    manifest = logdir / ".opcompare" / "manifest.json"
    document = json.loads(manifest.read_text())
    for entry in document["sessions"].values():
        entry["tables"] = ["../../../../etc/passwd"]  # never a path out of the index
    manifest.write_text(json.dumps(document))
    catalog = Catalog(str(logdir))
    assert msgspec.to_builtins(runs_document(catalog))["runs"] == truth["runs"]
    assert catalog.cache.parses  # read from the profiles
    manifest.write_text("{not json")
    listing = msgspec.to_builtins(runs_document(Catalog(str(logdir))))
    assert listing["runs"] == truth["runs"]
    assert any(
        notice.startswith(f"the shared index {logdir / '.opcompare' / 'manifest.json'} cannot be read")
        for notice in listing["notices"]
    )


def test_errors_cross_process_boundaries_whole():
    """A Dask task returns a rank's ProfileError: unpicklable, it hung the job's task."""
    import pickle

    from tb_opcompare.errors import NotReadableNow, OverLimit, ProfileError, UnknownRunError, UsageError

    for error in (ProfileError("a/b", "why"), OverLimit("a", "big"), NotReadableNow("a", "busy")):
        again = pickle.loads(pickle.dumps(error))
        assert (type(again), again.path, again.reason) == (type(error), error.path, error.reason)
    assert pickle.loads(pickle.dumps(UnknownRunError("unknown run 'x'", ["y"]))).known == ["y"]
    assert pickle.loads(pickle.dumps(UsageError("top: no", "top"))).parameter == "top"


def test_the_index_is_written_readable_by_the_team_and_never_through_a_link(tmp_path):
    logdir = _logdir(tmp_path, broken=False)
    umask = os.umask(0o022)  # the team's usual umask, whatever the runner's (the command inherits it)
    try:
        assert _cli("index", str(logdir), "--no-cache").returncode == 0
    finally:
        os.umask(umask)
    manifest = logdir / ".opcompare" / "manifest.json"
    assert manifest.stat().st_mode & 0o044 == 0o044  # group and others may read it (umask 022)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = _logdir(tmp_path / "other", broken=False)
    (other / ".opcompare").symlink_to(elsewhere, target_is_directory=True)
    result = _cli("index", str(other), "--no-cache")
    assert "warning: cannot write" in result.stderr and "is a link" in result.stderr
    assert list(elsewhere.iterdir()) == []  # nothing written where the link points
    listing = msgspec.to_builtins(runs_document(Catalog(str(other))))
    assert any("is a link; not used" in notice for notice in listing["notices"])


def test_a_file_changed_while_it_was_read_gets_no_entry(tmp_path, monkeypatch):
    from tb_opcompare.store import prewarm

    logdir = _logdir(tmp_path, broken=False)
    catalog = Catalog(str(logdir))
    source = catalog.source("user/lstm_runA")
    real = prewarm._fingerprints
    monkeypatch.setattr(prewarm, "_fingerprints", lambda paths: [dict(f, mtime=0.5) for f in real(paths)])
    done = prewarm._index_one(str(logdir), ReadSettings(None, 0), source, source.newest_session, shared=True)
    assert done.entry is None and done.write_error is None and done.unreadable is None
