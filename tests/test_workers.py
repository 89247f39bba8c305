"""Ranks of one distributed job read as one run (issue 32 item 2): `tests/fixtures/gpu_h200/ranks`
(two ranks of a DistributedDataParallel job, written as users write one: both traces in one
folder, no sidecar) and the public `torch_hta_two_ranks` traces. Every figure is checked
against the raw trace events."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from conftest import FIXTURES, REALTRACES, profiler_step_durations, run_cli, steady_median

from tb_opcompare.ingest.discovery import discover
from tb_opcompare.store.catalog import Catalog

RANKS = FIXTURES / "gpu_h200" / "ranks"


def _raw(path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def test_the_ranks_of_one_job_are_one_capture_of_one_run():
    sources = {source.run: source for source in discover(str(RANKS))}
    assert set(sources) == {"ddp_cnn_cpu", "ddp_cnn_gpu"}
    for source in sources.values():
        ((session, files),) = [
            (session, files) for session, files in source.sessions.items() if session not in source.worker_sessions
        ]
        assert len(files) == 2 and session.endswith("(ranks 0, 1 of 2)")
    (hta,) = discover(str(REALTRACES / "torch_hta_two_ranks"))
    assert [len(files) for files in hta.sessions.values()] == [1, 1, 2]
    assert hta.newest_session.endswith("(ranks 0, 1 of 128)")
    # three processes that are no job (no distributedInfo) stay three captures
    (cnn,) = [source for source in discover(str(FIXTURES / "user_logdirs" / "torch_h200")) if source.run == "log/cnn"]
    assert len(cnn.sessions) == 3


def test_a_jobs_run_pools_its_ranks_ops_and_steps_as_long_as_its_slowest_rank():
    """Before, the folder was one run of two sessions and only the newest rank was read."""
    loaded = Catalog(str(RANKS), cache_dir=None).load("ddp_cnn_gpu")
    files = sorted((RANKS / "ddp_cnn_gpu").glob("*.pt.trace.json.gz"))
    raw = [_raw(path) for path in files]
    ops = loaded.profile.op_table.frame().set_index(["side", "op_name"])
    for name in ("aten::addmm", "aten::convolution_backward", "Optimizer.step#SGD.step"):
        count = sum(
            1
            for events in raw
            for event in events
            if event.get("ph") == "X"
            and event.get("name") == name
            and event.get("cat") in ("cpu_op", "user_annotation")
        )
        assert ops.loc[("host", name), "occurrences"] == count, name
    kernels = sum(
        event["dur"] for events in raw for event in events if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    assert ops.xs("device", level="side")["total_us"].sum() == pytest.approx(kernels, rel=1e-6)
    per_rank = [profiler_step_durations(path) for path in files]
    facts = loaded.profile.facts
    assert facts.step_times_us == pytest.approx([max(times) for times in zip(*per_rank)])
    assert facts.batch_size == 32 and "per rank, 2 ranks" in facts.batch_size_source
    assert [worker["rank"] for worker in facts.workers] == [0, 1]
    for worker, times in zip(facts.workers, per_rank):
        assert worker["world_size"] == 2
        assert worker["step_time_us"] == pytest.approx(steady_median(times))


def test_the_runs_listing_shows_each_worker(tmp_path):
    shutil.copytree(RANKS, tmp_path / "ranks")
    document = json.loads(run_cli("runs", str(tmp_path / "ranks"), "--json", "--no-cache").stdout)
    record = next(run for run in document["runs"] if run["run"] == "ddp_cnn_gpu")
    assert [(worker["rank"], worker["world_size"]) for worker in record["workers"]] == [(0, 2), (1, 2)]
    text = run_cli("runs", str(tmp_path / "ranks"), "--no-cache").stdout
    assert "workers=2 (ranks 0, 1 of 2;" in text
    # the CPU job and the GPU job pair, and the headline is the ratio of the jobs' steps
    assert document["pairs"][0]["baseline"] == "ddp_cnn_cpu" and document["pairs"][0]["target"] == "ddp_cnn_gpu"


def test_a_rank_without_step_markers_never_lends_rank_0s_steps_to_the_job(tmp_path):
    """Rank 1's trace lost its ProfilerStep markers: the job's steps are rank 0's, and the
    run says so (before: rank 0's steps stood for the job's, and nothing said why)."""
    job = tmp_path / "ddp_cnn_gpu"
    shutil.copytree(RANKS / "ddp_cnn_gpu", job)
    files = sorted(job.glob("*.pt.trace.json.gz"))
    trace = json.loads(gzip.decompress(files[1].read_bytes()))
    trace["traceEvents"] = [
        event for event in trace["traceEvents"] if not str(event.get("name", "")).startswith("ProfilerStep#")
    ]
    files[1].write_bytes(gzip.compress(json.dumps(trace).encode()))
    facts = Catalog(str(tmp_path), cache_dir=None).load("ddp_cnn_gpu").profile.facts
    assert facts.step_times_us == pytest.approx(profiler_step_durations(files[0]))
    assert facts.steps_source == "ProfilerStep#N annotations of rank 0"
    assert f"rank 1 ({files[1].name}) has no step markers: the job's steps are timed on rank 0" in facts.warnings


def test_one_rank_of_a_job_is_a_session_of_its_run_and_the_job_the_default(tmp_path):
    """The choice of combining a job's ranks: all ranks pooled (the run's newest session,
    read by default), or one rank alone (its own session, a straggler's, say); an index
    of the logdir reads the job only."""
    shutil.copytree(RANKS, tmp_path / "ranks")
    catalog = Catalog(str(tmp_path / "ranks"), cache_dir=None)
    source = catalog.source("ddp_cnn_gpu")
    files = sorted((tmp_path / "ranks" / "ddp_cnn_gpu").glob("*.pt.trace.json.gz"))
    *alone, job = source.sessions
    assert job.endswith("(ranks 0, 1 of 2)") and catalog.load("ddp_cnn_gpu").session == job
    assert alone == [f"{files[0].name} (rank 0 of 2 only)", f"{files[1].name} (rank 1 of 2 only)"]
    for session, path in zip(alone, files):
        profile = catalog.load("ddp_cnn_gpu", session).profile
        ops = profile.op_table.frame().set_index(["side", "op_name"])
        count = sum(
            1
            for event in _raw(path)
            if event.get("ph") == "X" and event.get("name") == "aten::addmm" and event.get("cat") == "cpu_op"
        )
        assert ops.loc[("host", "aten::addmm"), "occurrences"] == count
        assert profile.facts.step_times_us == pytest.approx(profiler_step_durations(path))
    from tb_opcompare.store.prewarm import index_logdir

    report = index_logdir(
        Catalog(str(tmp_path / "ranks"), cache_dir=str(tmp_path / "cache")), jobs=1, say=lambda _: None
    )
    assert report.read == 2  # the CPU job and the GPU job, not their ranks again
