"""Caching and scale: one parse per file however many ask, an on-disk cache that survives
restarts and notices changed files, a bounded memory cache, a memory guard, listings
that read no trace, and `tb-opcompare index`."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import threading
import time
import urllib.request
from pathlib import Path

import msgspec
import pandas as pd
import pytest
from conftest import LOGDIR, as_json, run_cli

from tb_opcompare.errors import ProfileError, UnknownRunError
from tb_opcompare.schema.table import Table
from tb_opcompare.store import cache as cache_module
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.store.settings import ReadSettings

TORCH_RUN = "torch/cnn_torch_cpu_bs64"
TF_RUN = "tf_keras/cnn_cpu_bs32/train"


@pytest.fixture
def logdir(tmp_path) -> Path:
    copy = tmp_path / "logs"
    shutil.copytree(LOGDIR, copy)
    return copy


def file_listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def test_twenty_concurrent_loads_of_a_cold_run_parse_it_once(logdir):
    catalog = Catalog(str(logdir), cache_dir=None)
    barrier = threading.Barrier(20)
    results, failures = [], []

    def load():
        barrier.wait()
        try:
            results.append(catalog.load(TORCH_RUN).profile)
        except Exception as error:  # noqa: BLE001 - the test reports any failure
            failures.append(error)

    threads = [threading.Thread(target=load) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert list(catalog.cache.parses.values()) == [1]
    assert all(profile.op_table is results[0].op_table for profile in results)  # one table, shared


def test_twenty_concurrent_compare_requests_to_the_plugin_parse_each_file_once(logdir, tmp_path):
    """The plugin's own WSGI app under 20 threads, on a cold pair."""
    from werkzeug.test import Client

    from tb_opcompare.web.plugin import OpComparePlugin

    class Flags:
        opcompare_cache_dir = str(tmp_path / "cache")
        opcompare_max_read_gb = 0

    from tensorboard.plugins.base_plugin import TBContext

    plugin = OpComparePlugin(TBContext(logdir=str(logdir), flags=Flags()))
    app = plugin.get_plugin_apps()["/compare"]
    barrier = threading.Barrier(20)
    statuses = []

    def request():
        barrier.wait()
        response = Client(app).get("/compare", query_string={"baseline": TORCH_RUN, "target": TF_RUN}, buffered=True)
        statuses.append((response.status_code, len(json.loads(response.data)["rows"])))

    threads = [threading.Thread(target=request) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(statuses) == 20 and len(set(statuses)) == 1 and statuses[0][0] == 200
    parses = plugin._catalog.cache.parses
    assert len(parses) == 2 and set(parses.values()) == {1}


def test_a_second_process_reads_the_disk_cache_not_the_trace(logdir, tmp_path):
    cache_dir = str(tmp_path / "cache")
    first = Catalog(str(logdir), cache_dir=cache_dir).load(TF_RUN).profile
    # Same size, same modification time, different bytes: only a cache hit can still read it.
    (xplane,) = (logdir / TF_RUN).rglob("*.xplane.pb")
    stat = xplane.stat()
    xplane.write_bytes(os.urandom(stat.st_size))
    os.utime(xplane, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second_catalog = Catalog(str(logdir), cache_dir=cache_dir)
    second = second_catalog.load(TF_RUN).profile
    assert not second_catalog.cache.parses
    assert second.facts == first.facts
    # every table comes back with its dtypes and values to the bit (numbers are stored as
    # their arrays' bytes), the per-step table (the check's samples) too
    for table in ("op_table", "step_table", "module_table", "annotation_table", "memory_table"):
        pd.testing.assert_frame_equal(getattr(second, table).frame(), getattr(first, table).frame(), check_exact=True)
    assert len(first.step_table.frame()) and second.step_count == first.step_count == 5
    # a file that changes on disk is read again (here: now garbage, so a clear error)
    os.utime(xplane, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(ProfileError) as raised:
        Catalog(str(logdir), cache_dir=cache_dir).load(TF_RUN)
    assert str(xplane) == raised.value.path


_TABLES = (
    "op_table",
    "step_table",
    "module_table",
    "annotation_table",
    "memory_table",
    "breakdown_table",
    "work_table",
)


def _same_tables(second, first) -> None:
    for table in _TABLES:
        pd.testing.assert_frame_equal(getattr(second, table).frame(), getattr(first, table).frame(), check_exact=True)


def test_a_disk_entry_keeps_each_text_once_and_comes_back_to_the_bit(logdir, tmp_path):
    """A row's side is one of two words, and a PyTorch op's type is mostly its name (all
    of it but for annotations): the entry holds such texts once (distinct texts and codes,
    or a reference to the column with the same texts), and every table comes back the
    same, without reading the trace."""
    cache_dir = tmp_path / "cache"
    first = Catalog(str(logdir), cache_dir=str(cache_dir)).load(TORCH_RUN).profile
    (entry,) = cache_dir.rglob("*.msgpack")
    stored = msgspec.msgpack.decode(entry.read_bytes())
    assert stored["ops"]["side"]["texts"] == ["host"] and len(stored["ops"]["side"]["codes"]) == 4 * len(first.op_table)
    assert isinstance(stored["ops"]["op_name"], list)  # distinct names: as they are
    again = Catalog(str(logdir), cache_dir=str(cache_dir))
    second = again.load(TORCH_RUN).profile
    assert not again.cache.parses
    _same_tables(second, first)
    # a listing's summary, names as distinct texts and codes too (a run's host and device rows)
    stored["ops"]["op_name"] = {"texts": sorted(set(stored["ops"]["op_name"])), "codes": b""}
    entry.write_bytes(msgspec.msgpack.encode(stored))
    fresh = Catalog(str(logdir), cache_dir=str(cache_dir))
    summary = fresh.cache.peek_summary(fresh._session(fresh.source(TORCH_RUN), None)[1])
    assert summary is not None and summary.op_names == set(first.op_table["op_name"].tolist())
    # a type column the same as the names (no annotation among the ops): a reference
    named = dataclasses.replace(first, op_table=first.op_table.assign(op_type=first.op_table["op_name"]))
    stored = msgspec.msgpack.decode(msgspec.msgpack.encode(cache_module.profile_columns(named, numbers_as_bytes=True)))
    assert stored["ops"]["op_type"] == {"same_as": "op_name"}
    _same_tables(cache_module.profile_from_columns(stored), named)


def test_a_workers_entry_is_taken_only_where_it_is_a_profile_of_the_key(logdir, tmp_path):
    """What a worker sends back (``cache.Encoded``): its entry becomes the profile and is
    written as it is; bytes that are no entry, or another key's, are refused (the command
    then reads the session itself)."""
    catalog = Catalog(str(logdir), cache_dir=str(tmp_path / "cache"))
    first = catalog.load(TORCH_RUN).profile
    _, key = catalog._session(catalog.source(TORCH_RUN), None)
    entry = cache_module.entry_bytes(key, first)
    made = cache_module.encoded(key, entry)
    assert made is not None and made.entry is entry
    _same_tables(made.profile, first)
    other_key = (key[0], (("elsewhere", 1, 2),))
    assert cache_module.encoded(other_key, entry) is None
    assert cache_module.encoded(key, b"\x93not an entry") is None
    assert cache_module.encoded(key, entry[: len(entry) // 2]) is None


def test_an_entry_nested_past_the_decoders_depth_is_a_fresh_read(logdir, tmp_path, caplog):
    cache_dir = tmp_path / "cache"
    first = Catalog(str(logdir), cache_dir=str(cache_dir)).load(TORCH_RUN).profile
    (entry,) = cache_dir.rglob("*.msgpack")
    key = msgspec.msgpack.decode(entry.read_bytes())["key"]
    # a map of the entry's key and a value 200,000 arrays deep
    entry.write_bytes(
        b"\x82" + msgspec.msgpack.encode("key") + msgspec.msgpack.encode(key) + b"\xa1x" + b"\x91" * 200_000 + b"\xc0"
    )
    again = Catalog(str(logdir), cache_dir=str(cache_dir))
    assert again.cache.peek_summary(again._session(again.source(TORCH_RUN), None)[1]) is None
    _same_tables(again.load(TORCH_RUN).profile, first)
    assert list(again.cache.parses.values()) == [1] and "ignoring an unreadable cache entry" in caplog.text


def test_an_empty_table_is_kept_as_lists_and_its_summary_reads(logdir, tmp_path):
    """A run with no op (every table empty): its entry's names are a list, which a
    listing's summary decoder reads (an empty column once passed for any other's texts)."""
    from tb_opcompare.schema.events import ProfileFacts
    from tb_opcompare.schema.optable import OP_DTYPES, OpProfile

    empty = OpProfile(facts=ProfileFacts(format="pytorch"), op_table=Table.empty(OP_DTYPES))
    stored = msgspec.msgpack.decode(msgspec.msgpack.encode(cache_module.profile_columns(empty, numbers_as_bytes=True)))
    assert stored["ops"]["op_name"] == [] and stored["ops"]["op_type"] == []
    key = ("pytorch", (("/x/trace.json", 1, 2),))
    summary = cache_module._entry_summary(
        cache_module._SUMMARY_DECODER.decode(cache_module.entry_bytes(key, empty)), key
    )
    assert summary is not None and summary.op_names == frozenset()


def _damaged(stored: dict, how: str):
    ops = stored["ops"]
    if how == "codes out of range":
        ops["side"]["codes"] = (10**6).to_bytes(4, "little") * (len(ops["side"]["codes"]) // 4)
    elif how == "a reference to no column":
        ops["op_type"] = {"same_as": "p90_us_of_nothing"}
    elif how == "numbers cut short":
        ops["self_us"]["bytes"] = ops["self_us"]["bytes"][:-3]
    elif how == "a dtype of nothing":
        ops["self_us"]["dtype"] = "<q9"
    elif how == "facts of another shape":
        stored["facts"]["no_such_fact"] = 1
    elif how == "a table missing":
        del stored["step_breakdown"]
    elif how == "a number too big for its column":
        ops["occurrences"] = [2**64 - 1] * (len(ops["self_us"]["bytes"]) // 8)
    elif how == "not a map":
        return [stored["key"]]
    return stored


@pytest.mark.parametrize(
    "how",
    [
        "codes out of range",
        "a reference to no column",
        "numbers cut short",
        "a dtype of nothing",
        "facts of another shape",
        "a table missing",
        "a number too big for its column",
        "not a map",
    ],
)
def test_a_damaged_disk_entry_is_a_warning_and_a_fresh_read(logdir, tmp_path, caplog, how):
    """The cache's own files are untrusted input too: an entry damaged in any way is
    named in a warning and the trace is read again, with the same tables."""
    cache_dir = tmp_path / "cache"
    first = Catalog(str(logdir), cache_dir=str(cache_dir)).load(TORCH_RUN).profile
    (entry,) = cache_dir.rglob("*.msgpack")
    entry.write_bytes(msgspec.msgpack.encode(_damaged(msgspec.msgpack.decode(entry.read_bytes()), how)))
    again = Catalog(str(logdir), cache_dir=str(cache_dir))
    _same_tables(again.load(TORCH_RUN).profile, first)
    assert list(again.cache.parses.values()) == [1]
    assert "ignoring an unreadable cache entry" in caplog.text


def test_a_reader_version_change_invalidates_the_disk_cache(logdir, tmp_path, monkeypatch):
    cache_dir = str(tmp_path / "cache")
    Catalog(str(logdir), cache_dir=cache_dir).load(TORCH_RUN)
    monkeypatch.setattr(cache_module, "READER_VERSION", "test-next")
    catalog = Catalog(str(logdir), cache_dir=cache_dir)
    catalog.load(TORCH_RUN)
    assert list(catalog.cache.parses.values()) == [1]
    # and so does a change of how entries are written: an older form is never misread
    monkeypatch.setattr(cache_module, "_DISK_FORMAT", "test-next")
    catalog = Catalog(str(logdir), cache_dir=cache_dir)
    catalog.load(TORCH_RUN)
    assert list(catalog.cache.parses.values()) == [1]


def test_unreadable_files_are_remembered_until_they_change(logdir, tmp_path):
    broken = logdir / "broken_cpu"
    broken.mkdir()
    (broken / "trace.json").write_text('{"traceEvents": [')
    cache_dir = str(tmp_path / "cache")
    with pytest.raises(ProfileError):
        Catalog(str(logdir), cache_dir=cache_dir).load("broken_cpu")
    again = Catalog(str(logdir), cache_dir=cache_dir)
    with pytest.raises(ProfileError) as raised:
        again.peek("broken_cpu")  # known broken without reading it
    assert "truncated" in raised.value.reason and not again.cache.parses


def test_memory_cache_stays_within_its_bound(logdir):
    catalog = Catalog(str(logdir), cache_dir=None, memory_bytes=150_000)
    for source in catalog.sources():
        catalog.load(source.run)
    assert catalog.cache.held_bytes <= 150_000 or len(catalog.cache._memory) <= 2
    assert len(catalog.cache._memory) < len(catalog.sources())
    # the two most recently used stay (the pair being compared), whatever their size
    older, newest = catalog.sources()[-2].run, catalog.sources()[-1].run
    assert catalog.peek(older) is not None and catalog.peek(newest) is not None


def test_an_unwritable_cache_dir_degrades_to_memory(logdir, tmp_path, caplog):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory would go")
    catalog = Catalog(str(logdir), cache_dir=str(blocker / "cache"))
    assert catalog.load(TORCH_RUN).profile.facts.batch_size == 64
    assert "cannot write the profile cache" in caplog.text


def test_memory_guard_refuses_a_read_that_would_not_fit(logdir):
    catalog = Catalog(str(logdir), cache_dir=None, max_trace_bytes=100_000)
    with pytest.raises(ProfileError) as raised:
        catalog.load(TORCH_RUN)
    assert "memory guard" in raised.value.reason and "tb-opcompare index" in raised.value.reason
    assert not catalog.cache.parses
    result = run_cli("compare", str(logdir), "--baseline", TORCH_RUN, "--target", TF_RUN, "--max-read-gb", "0.0001")
    assert result.returncode == 1 and "too large to read here" in result.stderr


def test_lazy_listing_reads_no_trace_and_knows_cached_runs(logdir, tmp_path):
    cache_dir = str(tmp_path / "cache")
    catalog = Catalog(str(logdir), cache_dir=cache_dir)
    from tb_opcompare.service.runs import runs_document

    listing = as_json(runs_document(catalog, load=False))
    assert not catalog.cache.parses and listing["complete"] is False
    gpu = next(run for run in listing["runs"] if run["run"] == "tf1/mlp_gpu")
    assert (gpu["device"], gpu["loaded"]) == ("GPU", False)  # from the name, until read
    assert listing["pairs"][0]["baseline"] == "tf1/mlp_cpu"
    catalog.load(TORCH_RUN)
    fresh = Catalog(str(logdir), cache_dir=cache_dir)
    listing = as_json(runs_document(fresh, load=False))
    torch_run = next(run for run in listing["runs"] if run["run"] == TORCH_RUN)
    assert torch_run["loaded"] is True and torch_run["steps"] == 2 and not fresh.cache.parses


def test_index_fills_the_cache_with_worker_processes(logdir, tmp_path):
    cache_dir = str(tmp_path / "cache")
    before = file_listing(logdir)
    first = run_cli("index", str(logdir), "--jobs", "2", "--cache-dir", cache_dir, "--local-only")
    assert first.returncode == 0, first.stderr
    sessions = sum(len(source.sessions) for source in Catalog(str(logdir)).sources())
    assert f"{sessions} read, 0 already cached, 0 unreadable" in first.stdout
    second = run_cli("index", str(logdir), "--cache-dir", cache_dir, "--local-only")
    assert f"0 read, {sessions} already cached" in second.stdout
    lazy = run_cli("runs", str(logdir), "--lazy", "--cache-dir", cache_dir)
    assert "not read yet" not in lazy.stdout
    assert file_listing(logdir) == before  # --local-only: nothing is written into the logdir


def test_an_index_keeps_the_cache_folder_to_its_bound_as_it_writes(logdir, tmp_path, monkeypatch):
    """An index makes a catalog a session; the folder is looked at once a process and then
    each tenth of the bound written (it was once a session), and stays within its bound."""
    from tb_opcompare.store.prewarm import index_logdir

    scans = []
    prune = cache_module.prune_cache
    monkeypatch.setattr(cache_module, "prune_cache", lambda *args, **kwargs: scans.append(1) or prune(*args, **kwargs))
    roomy = tmp_path / "roomy"
    report = index_logdir(Catalog(str(logdir), cache_dir=str(roomy)), jobs=1, say=lambda _: None, shared=False)
    assert report.read >= 5 and len(scans) == 1  # jobs=1: every session read in this process
    sizes = _entries(roomy)
    bound = sum(sizes.values()) // 3
    tight = tmp_path / "tight"
    index_logdir(
        Catalog(str(logdir), cache_dir=str(tight), cache_max_bytes=bound), jobs=1, say=lambda _: None, shared=False
    )
    assert 0 < sum(_entries(tight).values()) <= bound + max(sizes.values())


def test_a_loaded_entry_is_marked_used_unless_it_was_lately(logdir, tmp_path):
    """Loading marks an entry used (its mtime) where its mark is over ten minutes old, and
    writes nothing where it is newer (a listing of many cached runs touches no file)."""
    cache_dir = tmp_path / "cache"
    Catalog(str(logdir), cache_dir=str(cache_dir)).load(TORCH_RUN)
    (entry,) = cache_dir.rglob("*.msgpack")
    lately, long_ago = time.time() - 60, time.time() - 3600
    for mark, touched in ((lately, False), (long_ago, True)):
        os.utime(entry, (mark, mark))
        Catalog(str(logdir), cache_dir=str(cache_dir)).load(TORCH_RUN)
        assert (entry.stat().st_mtime > mark + 1) is touched


def test_an_index_worker_reads_the_run_it_is_given_without_walking_the_logdir(logdir, tmp_path, monkeypatch):
    from tb_opcompare.store import catalog as catalog_module
    from tb_opcompare.store.prewarm import _index_one

    (source,) = [s for s in Catalog(str(logdir)).sources() if s.run == TORCH_RUN]
    walks = []
    monkeypatch.setattr(catalog_module, "discover", lambda logdir, *_: walks.append(logdir) or [])
    settings = ReadSettings(cache_dir=str(tmp_path / "cache"), max_trace_bytes=0)
    done = _index_one(str(logdir), settings, source, source.newest_session, shared=False)
    assert (done.run, done.session, done.unreadable, done.entry) == (TORCH_RUN, source.newest_session, None, None)
    assert walks == []
    assert (
        Catalog(str(logdir), cache_dir=str(tmp_path / "cache")).cache.peek(
            catalog_module.Catalog(str(logdir))._session(source, None)[1]
        )
        is not None
    )


def test_a_second_tensorboard_start_serves_a_pair_without_reading_traces(logdir, tmp_path):
    from tensorboard_server import running_tensorboard

    cache_dir = tmp_path / "cache"
    query = f"baseline={TF_RUN.replace('/', '%2F')}&target=torch%2Fcnn_torch_cpu_bs4"

    def compare(url):
        with urllib.request.urlopen(f"{url}/data/plugin/op_compare/compare?{query}") as response:
            return json.load(response)

    env = {"TB_OPCOMPARE_CACHE_DIR": str(cache_dir)}
    with running_tensorboard(logdir, env=env) as url:
        first = compare(url)
    for run in (TF_RUN, "torch/cnn_torch_cpu_bs4"):
        for path in (logdir / run).rglob("*"):
            if path.is_file() and path.name != "opcompare.json":
                stat = path.stat()
                path.write_bytes(b"\0" * stat.st_size)
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with running_tensorboard(logdir, env=env) as url:
        assert compare(url) == first


def test_a_repeated_comparison_is_served_again_but_never_after_a_file_changed(logdir):
    """The tab asks for the same pair over and over; the answer is kept, keyed by the
    parsed tables, so a trace rewritten in place (a re-profiled run) is compared anew."""
    from tb_opcompare.analysis.row_view import RowView
    from tb_opcompare.service.compare import compare_document
    from tb_opcompare.store.comparisons import COMPARISONS

    catalog = Catalog(str(logdir), cache_dir=None)
    first = as_json(compare_document(catalog, "torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16"))
    made = COMPARISONS.computed
    again = as_json(
        compare_document(
            catalog, "torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16", view=RowView(sort="speedup", top=5)
        )
    )
    assert COMPARISONS.computed == made  # served from the memo, not recomputed
    assert again["total_rows"] == first["total_rows"] and len(again["rows"]) == 5
    target = next((logdir / "torch" / "cnn_torch_cpu_bs16").glob("*.pt.trace.json"))
    shutil.copyfile(next((logdir / "torch" / "cnn_torch_cpu_bs64").glob("*.pt.trace.json")), target)
    os.utime(target, (1, 1))  # a new size and time: the profile is read again
    changed = as_json(compare_document(catalog, "torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16"))
    assert COMPARISONS.computed == made + 1
    assert changed["summary"]["target"]["batch_size"] == 64
    expected = as_json(
        compare_document(Catalog(str(logdir), cache_dir=None), "torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16")
    )
    assert changed["rows"] == expected["rows"]


def test_an_unreadable_run_asked_for_again_and_again_holds_no_more_memory(tmp_path):
    """Issue 33 item 5: the cache kept the ProfileError itself and raised that one object on
    every request, its traceback growing with each raise and pinning each raise's frames
    (31-230 KB a `runs` request while one run was unreadable; the tab polls). Each request
    now gets a fresh error, and a thousand of them leave memory where it was."""
    import tracemalloc

    from tb_opcompare.service.runs import runs_document

    run = tmp_path / "logs" / "broken"
    run.mkdir(parents=True)
    (run / "host.1.pt.trace.json").write_text('{"traceEvents": [')  # truncated
    catalog = Catalog(str(tmp_path / "logs"), cache_dir=None)
    errors = []
    for _ in range(3):
        with pytest.raises(ProfileError) as raised:
            catalog.load("broken")
        errors.append(raised.value)
    assert errors[0] is not errors[1] and errors[1] is not errors[2]
    depth = [len(__import__("traceback").extract_tb(error.__traceback__)) for error in errors]
    assert depth[1] == depth[2]  # the same short traceback each time, not one that grows

    for _ in range(50):  # warm: caches, interned strings
        runs_document(catalog)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):
        runs_document(catalog)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 200_000, f"{grown:,} bytes held after 1,000 listings"


def _entries(cache_dir: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in cache_dir.rglob("*.msgpack")}


def test_the_disk_cache_keeps_to_its_bound_deleting_what_was_used_longest_ago(logdir, tmp_path):
    """The cache folder is bounded: a process that writes prunes it to four fifths of the
    bound, deleting the entries used longest ago (loading one marks it used), never the one
    it just wrote, nor files that are not its own; a pruned run is read again, to the same
    tables."""
    cache_dir = tmp_path / "cache"
    runs = [source.run for source in Catalog(str(logdir)).sources()]
    assert len(runs) >= 6
    filling = Catalog(str(logdir), cache_dir=str(cache_dir))
    first = {run: filling.load(run).profile for run in runs[:-1]}
    sizes = _entries(cache_dir)
    assert len(sizes) == len(runs) - 1
    # used an hour ago, a second apart, in the order loaded (whatever the clock's grain)
    for age, key in enumerate(filling.cache._memory):
        os.utime(filling.cache._path(key), (time.time() - 3600 + age,) * 2)
    # another program's files in the folder (a cache folder may be shared): never pruned
    foreign = [cache_dir / "otherapp" / "notes.msgpack", cache_dir / "ab" / "session.tmp"]
    for path in foreign:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * 4096)
        os.utime(path, (time.time() - 7200,) * 2)
    # the oldest entry is loaded again by another process: used most recently now
    again = Catalog(str(logdir), cache_dir=str(cache_dir))
    again.load(runs[0])
    assert not again.cache.parses
    bound = sum(sizes.values()) // 2
    writer = Catalog(str(logdir), cache_dir=str(cache_dir), cache_max_bytes=bound)
    writer.load(runs[-1])  # read, and written: the folder is pruned
    left = _entries(cache_dir)
    assert sum(left.values()) <= 0.8 * bound + max(sizes.values())  # the bound, but for the entry just written
    (written,) = writer.cache._memory
    assert os.path.exists(writer.cache._path(written))
    assert all(path.exists() for path in foreign)
    reader = Catalog(str(logdir), cache_dir=str(cache_dir))
    reader.load(runs[0])
    assert not reader.cache.parses, "the entry loaded again was pruned before older ones"
    reader.load(runs[1])
    assert sum(reader.cache.parses.values()) == 1, "the entry used longest ago was kept"
    pd.testing.assert_frame_equal(
        reader.load(runs[1]).profile.op_table.frame(), first[runs[1]].op_table.frame(), check_exact=True
    )


def test_the_cache_bound_is_an_option_of_every_command(logdir, tmp_path):
    """``--cache-max-gb`` (and ``$TB_OPCOMPARE_CACHE_MAX_GB``): a bound below one entry
    leaves the folder with the entry just written alone."""
    cache_dir = tmp_path / "cache"
    common = ["--cache-dir", str(cache_dir), "--cache-max-gb", "0.000001"]
    assert run_cli("compare", str(logdir), "--baseline", TORCH_RUN, "--target", TF_RUN, *common).returncode == 0
    assert len(_entries(cache_dir)) == 1


@pytest.mark.parametrize(
    "option, environment, expected",
    [
        (0, None, 5e9),
        (2.5, "9", 2.5e9),
        (0, "1.5", 1.5e9),
        (0, "lots", 5e9),
        (0, "nan", 5e9),
        (-1, "-3", 5e9),
        (float("inf"), None, sys.maxsize),  # no bound (this raised OverflowError, a review found)
        (0, "inf", sys.maxsize),
        (1e300, None, sys.maxsize),  # past float's range once in bytes
    ],
)
def test_the_cache_bound_comes_from_the_option_else_the_environment_else_5_gb(
    option, environment, expected, monkeypatch
):
    from tb_opcompare.store.settings import ENV_CACHE_MAX_GB

    if environment is None:
        monkeypatch.delenv(ENV_CACHE_MAX_GB, raising=False)
    else:
        monkeypatch.setenv(ENV_CACHE_MAX_GB, environment)
    assert ReadSettings.from_options(None, False, 0, option).cache_max_bytes == int(expected)
    if expected == sys.maxsize:  # and the command takes it
        assert run_cli("runs", str(LOGDIR), "--lazy", "--cache-max-gb", "inf").returncode == 0


def test_a_session_read_again_after_its_files_changed_holds_only_its_newest_version(logdir):
    """Issue 55: a profile touched or rewritten (a logdir synced again, a run re-profiled, the
    shared index rewritten under TensorBoard) is a new key; every older version stayed in
    memory until the 512 MB bound, though no request can name it again."""
    catalog = Catalog(str(logdir), cache_dir=None)
    trace = next((logdir / "torch" / "cnn_torch_cpu_bs4").glob("*.pt.trace.json"))
    catalog.load("torch/cnn_torch_cpu_bs4")
    held = catalog.cache.held_bytes
    for second in range(1, 6):
        os.utime(trace, (second, second))
        catalog.load("torch/cnn_torch_cpu_bs4")
    assert len(catalog.cache._memory) == 1 and catalog.cache.held_bytes == held
    assert sum(catalog.cache.parses.values()) == 6  # each version read once


def test_a_session_or_run_deleted_since_the_listing_is_looked_up_in_a_new_one(logdir):
    """Issue 55: the tab lists every few seconds and compares in between; a run's newest
    session deleted since the last listing answered 422 (its file cannot be read) for a
    run that is fine, and a run deleted 422 instead of 404 (unknown run)."""
    catalog = Catalog(str(logdir), cache_dir=None)
    run = logdir / TF_RUN / "plugins" / "profile"
    older = next(run.glob("*/vm.xplane.pb"))
    newer = run / "2030_01_01_00_00_00" / "vm.xplane.pb"
    newer.parent.mkdir()
    shutil.copyfile(next((logdir / "tf_keras/cnn_cpu_bs8/train").rglob("*.xplane.pb")), newer)
    catalog.sources(refresh=True)
    assert catalog.load(TF_RUN).session == "2030_01_01_00_00_00"
    shutil.rmtree(newer.parent)
    assert catalog.load(TF_RUN).session == older.parent.name
    catalog.sources(refresh=True)
    shutil.rmtree(logdir / TORCH_RUN)
    with pytest.raises(UnknownRunError):
        catalog.load(TORCH_RUN)
