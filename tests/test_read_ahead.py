"""The CLI's reads on every core (``Catalog.read_ahead``): a cold listing or comparison
of several runs reads their files in worker processes, with the same tables as one
process reads, the memory guard held for all of them, and a broken run left to ``load``
to report."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from conftest import REPO

from tb_opcompare.errors import ProfileError
from tb_opcompare.service.runs import runs_document
from tb_opcompare.store import catalog as catalog_module
from tb_opcompare.store.catalog import Catalog

DEMO = REPO / "demo_logs"


def _keys(catalog: Catalog) -> list[tuple]:
    return [catalog._session(source, None)[1] for source in catalog.sources()]


def test_worker_processes_read_the_same_tables_as_one_process():
    parallel = Catalog(str(DEMO), parallel_reads=2)
    sources = parallel.sources(refresh=True)
    assert len(sources) > 10 and not any(parallel.cache.holds(key) for key in _keys(parallel))
    parallel.read_ahead(sources)
    assert all(parallel.cache.holds(key) for key in _keys(parallel))  # read before anyone loads them
    alone = Catalog(str(DEMO))
    for source in sources:
        ours, theirs = parallel.load(source.run), alone.load(source.run)
        pd.testing.assert_frame_equal(ours.profile.op_table.frame(), theirs.profile.op_table.frame())
        # the demo's with_stack runs place ops in modules: a table made on first use, which
        # came back from a worker (pickled) as it is made in one process
        pd.testing.assert_frame_equal(ours.profile.module_table.frame(), theirs.profile.module_table.frame())
        assert ours.profile.facts == theirs.profile.facts


def test_the_runs_listing_is_the_same_on_two_cores(tmp_path):
    one = runs_document(Catalog(str(DEMO)))
    two = runs_document(Catalog(str(DEMO), parallel_reads=2))
    assert two == one


def test_a_broken_run_is_reported_by_load_and_hides_no_other(tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(DEMO / "tf_keras", logdir / "tf_keras")
    broken = next((logdir / "tf_keras").glob("*/plugins/profile/*/*.xplane.pb"))
    broken.write_bytes(b"\x0a\xff\xff" * 1000)  # not an XSpace
    catalog = Catalog(str(logdir), parallel_reads=2)
    catalog.read_ahead(catalog.sources(refresh=True))
    runs = [source.run for source in catalog.sources()]
    broken_run = next(run for run in runs if str(broken).startswith(str(logdir / run)))
    held = {source.run: catalog.cache.holds(catalog._session(source, None)[1]) for source in catalog.sources()}
    assert not held.pop(broken_run) and all(held.values())  # the workers read the others; the broken one waits
    with pytest.raises(ProfileError, match="XSpace|protobuf"):
        catalog.load(broken_run)
    assert all(catalog.load(run).profile.op_table.frame() is not None for run in runs if run != broken_run)


def test_reads_that_need_more_than_the_memory_limit_together_wait_for_load():
    catalog = Catalog(str(DEMO), parallel_reads=2)
    sources = catalog.sources(refresh=True)
    # room for the largest read alone, not for all of them at once
    catalog.max_trace_bytes = 4 * max(sum(size for _, size, _ in key[1]) for key in _keys(catalog))
    catalog.read_ahead(sources)
    assert not any(catalog.cache.holds(key) for key in _keys(catalog))
    assert catalog.load(sources[0].run).profile.op_table.frame() is not None  # each read alone still passes


def test_small_runs_are_read_several_to_a_worker_and_a_broken_one_hides_no_other(tmp_path, monkeypatch):
    """A fork, the pages it copies and its reaping cost a small session's read several
    times over (200 runs of an 8 KB trace listed in 6.9-8.6 s at one session a worker,
    2.0-2.5 s now): small sessions are read several to a worker, and each worker's share
    stays even. A broken session in a worker's batch costs that session only: ``load``
    reports it, the batch's others are read."""
    from tb_opcompare.store import watched_fork

    trace = next((REPO / "tests/fixtures/onnxruntime/logdir/cnn_infer_cpu_bs16").glob("*.pt.trace.json.gz"))
    for number in range(24):
        run = tmp_path / f"cnn_{number:02d}"
        run.mkdir()
        shutil.copy(trace, run / trace.name)
    broken = tmp_path / "cnn_07" / trace.name
    broken.write_bytes(broken.read_bytes()[:200])  # a gzip stream cut short
    forks = []
    monkeypatch.setattr(watched_fork, "Fork", _counted(watched_fork.Fork, forks))
    monkeypatch.setattr(catalog_module, "PARALLEL_MIN_BYTES", 0)  # 24 small files: read here otherwise
    catalog = Catalog(str(tmp_path), parallel_reads=2)
    catalog.read_ahead(catalog.sources(refresh=True))
    held = {source.run: catalog.cache.holds(catalog._session(source, None)[1]) for source in catalog.sources()}
    assert not held.pop("cnn_07") and len(held) == 23 and all(held.values())
    assert 2 <= len(forks) <= 12  # 24 sessions in 4-6 batches a process, not 24 forks
    with pytest.raises(ProfileError, match="gzip|truncated|end of stream|Compressed"):
        catalog.load("cnn_07")


def _counted(fork_type, forks: list):
    def counted(*args):
        forks.append(args)
        return fork_type(*args)

    return counted
