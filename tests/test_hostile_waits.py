"""Hostile and odd inputs, round four (issue 55, point 7): no fault may hang the tool.
Read-ahead workers and `index --jobs N` workers are real forks, stopped (SIGSTOP, as a
worker stuck on I/O is) or killed with real signals while they work: each costs its own
session, read again in this process (a read ahead) or named as failed (`index`), and
never a wait without end or another session."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, REPO
from test_bucket_logdir import _cli as _bucket_cli
from test_bucket_logdir import bucket  # noqa: F401 (a fixture: moto's server on loopback, the logdir in it)

from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.store.prewarm import index_logdir

DEMO = REPO / "demo_logs"
FLAX = (FIXTURES / "user_logdirs" / "flax_h200", "workdir_cpu_bs32", "workdir_gpu_bs32")
SESSIONS = FIXTURES / "user_logdirs" / "torch_h200"


def _children(pid: int | None = None) -> list[int]:
    """The live child processes of ``pid`` (this process by default), from Linux's /proc."""
    pid = pid or os.getpid()
    found = []
    for children in glob.glob(f"/proc/{pid}/task/*/children"):
        with open(children) as listed:
            found += [int(child) for child in listed.read().split()]
    return found


def _state(pid: int) -> str:
    """A process's state letter (R running, S sleeping, T stopped, Z ended, not reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0].decode()
    except (OSError, IndexError):
        return ""


pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="watches forks through Linux's /proc")

# A cold command's head start (store.head_start): both named runs begin in forked workers,
# which are then stopped or killed before their answer is taken.
COLD_PROCESS = r"""
import glob, os, pickle, signal, sys, time
from tb_opcompare.store.catalog import Catalog

logdir, out, sent, runs = sys.argv[1], sys.argv[2], getattr(signal, sys.argv[3]), sys.argv[4:]
catalog = Catalog(logdir, parallel_reads=2)
catalog.read_soon([(run, None) for run in runs])
workers = [int(child) for path in glob.glob(f"/proc/{os.getpid()}/task/*/children") for child in open(path).read().split()]
for worker in workers:
    os.kill(worker, sent)
started = time.monotonic()
loaded = {run: catalog.parsed(catalog.source(run))[1] for run in runs}
with open(out, "wb") as handle:
    pickle.dump({"workers": len(workers), "seconds": time.monotonic() - started, "loaded": loaded}, handle)
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sent", ["SIGSTOP", "SIGKILL"])
def test_a_stopped_or_killed_head_start_worker_costs_only_a_read_here(sent, tmp_path):
    logdir, baseline, target = FLAX
    out = tmp_path / "loaded.pickle"
    done = subprocess.run(
        [sys.executable, "-c", COLD_PROCESS, str(logdir), str(out), sent, baseline, target],
        capture_output=True,
        text=True,
        timeout=80,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cold = pickle.loads(out.read_bytes())
    assert cold["workers"] == 2 and cold["seconds"] < 30  # seen at once, not after a deadline
    catalog = Catalog(str(logdir))
    for run in (baseline, target):
        _, (file_format, signatures) = catalog._session(catalog.source(run), None)
        theirs = read_profile(file_format, [path for path, _, _ in signatures])
        pd.testing.assert_frame_equal(cold["loaded"][run].op_table.frame(), theirs.op_table.frame(), check_exact=True)


def _answer_of(size: int) -> bytes:
    return bytes(size)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are Linux's")
@pytest.mark.timeout(60)
def test_workers_pipes_are_widened_a_few_at_a_time():
    """A worker's answer comes back through a 1 MiB pipe (64 KiB by default: an 11 MB
    answer took 170 turns of the two processes), but Linux gives every new pipe of a user
    a single page once their pipes hold 64 MiB together: on a machine of many cores, a
    worker a core would have slowed every pipe of that user's. At most eight are wide at
    once; the rest keep the default, and a pipe given back is wide for the next worker."""
    import fcntl

    from tb_opcompare.store.watched_fork import Fork

    read_end, write_end = os.pipe()
    try:
        default = fcntl.fcntl(read_end, fcntl.F_GETPIPE_SZ)
        fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 1 << 20)
    except OSError:
        pytest.skip("this system lets no pipe of this user's hold 1 MiB")
    finally:
        os.close(read_end)
        os.close(write_end)
    forks = [Fork(60.0, _answer_of, 3 << 20) for _ in range(10)]
    try:
        sizes = [fcntl.fcntl(fork.fd, fcntl.F_GETPIPE_SZ) for fork in forks]
        answers = [fork.answer() for fork in forks]
        again = Fork(60.0, _answer_of, 1)
        forks.append(again)
        size_again = fcntl.fcntl(again.fd, fcntl.F_GETPIPE_SZ)
        answer_again = again.answer()
    finally:
        for fork in forks:
            if fork.fd >= 0:
                fork.give_up("test over")
    assert sizes == [1 << 20] * 8 + [default] * 2
    assert answers == [bytes(3 << 20)] * 10
    assert (size_again, answer_again) == (1 << 20, bytes(1))


@pytest.mark.timeout(90)
def test_a_stopped_read_ahead_worker_costs_only_a_read_here():
    """``read_ahead`` on two cores (the CLI's listing and comparisons): the first worker is
    stopped as soon as it is seen; its session is read again by ``load``."""
    stopped: list[int] = []
    watching = threading.Event()
    others = set(_children())  # processes of other tests' (a server's, a cluster's helper)

    def stop_the_first_worker() -> None:
        while watching.is_set() and not stopped:
            for child in set(_children()) - others:
                os.kill(child, signal.SIGSTOP)
                stopped.append(child)
                break
            time.sleep(0.005)

    catalog = Catalog(str(DEMO), parallel_reads=2)
    sources = catalog.sources(refresh=True)
    watching.set()
    watcher = threading.Thread(target=stop_the_first_worker)
    watcher.start()
    try:
        started = time.monotonic()
        catalog.read_ahead(sources)
        seconds = time.monotonic() - started
    finally:
        watching.clear()
        watcher.join()
        for child in stopped:  # on code that waits forever, leave no stopped process behind
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert stopped and seconds < 30
    assert not set(_children()) - others  # the stopped worker was killed and reaped
    alone = Catalog(str(DEMO))
    for source in sources:
        pd.testing.assert_frame_equal(
            catalog.load(source.run).profile.op_table.frame(), alone.load(source.run).profile.op_table.frame()
        )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("sent", "named"), [("SIGKILL", "killed by SIGKILL"), ("SIGSTOP", "stopped (SIGSTOP)")])
def test_an_index_worker_stopped_or_killed_mid_batch_fails_only_its_session(sent, named, tmp_path, monkeypatch):
    """`index --jobs 2`, small sessions several to a worker: the read of one session stops
    or kills its worker, mid-batch, every time it is read. A process pool, broken by one
    killed worker, failed every session still in it; a stopped one left `index` waiting for
    ever. Now the lost batch's other sessions are read again, one to a worker, and only the
    session that takes its worker down is named as failed."""
    logdir = tmp_path / "logs"
    shutil.copytree(SESSIONS, logdir)
    victim = next(iter(sorted(logdir.glob("lstm_runB/*.json.gz"))))
    others = set(_children())  # processes of other tests' (a server's, a cluster's helper)

    from tb_opcompare.store import prewarm

    read_session = prewarm._index_one

    def a_read_that_takes_its_worker_down(*task):
        _, _, source, session, _ = task
        if Path(source.sessions[session][0]) == victim:
            os.kill(os.getpid(), getattr(signal, sent))  # in the forked worker, never here
        done = read_session(*task)
        done.worker = f"pid {os.getpid()}"  # which worker read it
        return done

    monkeypatch.setattr(prewarm, "_index_one", a_read_that_takes_its_worker_down)
    # two batches, whatever the sessions' sizes: the victim's holds others to be read again
    monkeypatch.setattr(prewarm, "worker_batch_bytes", lambda total, processes: total // 2 + 1)
    report = index_logdir(Catalog(str(logdir)), jobs=2, say=lambda _: None)
    sessions = sum(len(source.sessions) for source in Catalog(str(logdir)).sources())
    assert report.errors == [
        (str(victim), f"indexing failed: its worker was {named}" + (", and was killed" if sent == "SIGSTOP" else ""))
    ], report
    assert report.read == sessions - 1
    # the first batch's sessions in one worker, the lost batch's read again one to a worker
    assert len(report.workers) < sessions - 1, report.workers
    assert not set(_children()) - others  # the stopped worker was killed and reaped
    monkeypatch.undo()
    again = index_logdir(Catalog(str(logdir)), jobs=2, say=lambda _: None)  # the lost session alone is read again
    assert (again.read, again.cached, again.errors) == (1, sessions - 1, [])


@pytest.mark.timeout(180)
def test_a_relative_logdir_is_indexed_by_dask_workers_that_run_elsewhere(tmp_path, monkeypatch):
    """The cluster's worker processes start in one directory, `index` is run with a
    relative logdir from another: the workers were sent the relative path, which names
    nothing where they run, and every session failed."""
    distributed = pytest.importorskip("distributed")
    elsewhere = tmp_path / "workers_run_here"
    elsewhere.mkdir()
    shutil.copytree(SESSIONS, tmp_path / "team" / "logs")
    monkeypatch.chdir(elsewhere)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        monkeypatch.chdir(tmp_path / "team")
        report = index_logdir(Catalog("logs"), jobs=1, say=lambda _: None, scheduler=cluster.scheduler_address)
    sessions = sum(len(source.sessions) for source in Catalog("logs").sources())
    assert (report.read, report.errors, report.write_error) == (sessions, [], None)
    assert not (elsewhere / "logs").exists()
    fresh = Catalog("logs")
    fresh.sources()
    assert fresh.index.size and all(
        fresh.load(source.run).profile.op_table.frame() is not None for source in fresh.sources()
    )
    assert not fresh.cache.parses  # every run from the index the workers wrote


# -- a bucket ------------------------------------------------------------------------------------


def test_a_bucket_key_with_an_empty_segment_costs_that_key_only(bucket, tmp_path):  # noqa: F811
    """`a//b/c.json` made `a/b` a folder of no parent, and listing the whole bucket
    failed (KeyError): no good run could be compared."""
    env, url, local = bucket
    import boto3

    client = boto3.client(
        "s3",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
        endpoint_url=env["AWS_ENDPOINT_URL"],
    )
    odd = ["logs/a//b/host.pt.trace.json", "logs//top.pt.trace.json", "logs/user/lstm_runA//x.pt.trace.json"]
    for key in odd:
        client.put_object(Bucket="team", Key=key, Body=b'{"traceEvents": []}')
    try:
        remote, disk = (_bucket_cli(env, "runs", where) for where in (url, str(local)))
    finally:
        for key in odd:
            client.delete_object(Bucket="team", Key=key)
    assert remote.returncode == 1 and "Traceback" not in remote.stderr, remote.stderr[-2000:]
    listed, truth = json.loads(remote.stdout), json.loads(disk.stdout)
    assert [run["run"] for run in listed["runs"]] == [run["run"] for run in truth["runs"]]
    refused = {error["path"]: error["message"] for error in listed["errors"]}
    assert set(refused) == {f"s3://team/{key}" for key in odd}
    assert all("empty segment" in reason for reason in refused.values())


# -- an element flood in an xplane (point 9) --------------------------------------------------------

KERAS_XPLANE = next((DEMO / "tf_keras" / "mnist_cnn_cpu_bs64").rglob("*.xplane.pb"))


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _flood(events: int) -> bytes:
    """A real Keras xplane with one more host plane (the real one's metadata) whose busiest
    thread holds ``events`` tiny events of one TF op, 9 bytes of wire each."""
    from tb_opcompare.ingest.readers.tf_ops import parse_host_op
    from tb_opcompare.ingest.readers.xplane_schema import XLine, XPlane, XSpace

    real = KERAS_XPLANE.read_bytes()
    space = XSpace()
    space.ParseFromString(real)
    host = next(plane for plane in space.planes if plane.name.startswith("/host:"))
    busiest = max(host.lines, key=lambda line: len(line.events))
    names = {entry.key: entry.value.name for entry in host.event_metadata}
    op = next(event.metadata_id for event in busiest.events if parse_host_op(names.get(event.metadata_id, "")))
    block = XLine()  # events only: its wire is the events fields, repeated below
    for index in range(1000):
        block.events.add(metadata_id=op, offset_ps=2 * index + 1, duration_ps=1)
    line = XLine(id=busiest.id, name=busiest.name, timestamp_ns=busiest.timestamp_ns).SerializeToString()
    line += block.SerializeToString() * (events // 1000)
    plane = XPlane()
    plane.CopyFrom(host)
    del plane.lines[:]
    plane_bytes = plane.SerializeToString() + b"\x1a" + _varint(len(line)) + line
    return real + b"\x0a" + _varint(len(plane_bytes)) + plane_bytes


# A read in a fresh process: its peak memory past what the imports took (Linux's ru_maxrss, KiB).
PEAK_PROCESS = r"""
import resource, sys
from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.ingest.readers import xplane
from tb_opcompare.store.memory_guard import text_budget

path, limit = sys.argv[1], int(float(sys.argv[2]) * 1e9)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    read_profile("xplane", [path], text_budget("xplane", limit))
    said = "read"
except ProfileError as error:
    said = str(error)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
print(said)
"""


@pytest.mark.timeout(180)
def test_an_xplane_flooded_with_tiny_events_is_refused_before_they_are_held(tmp_path):
    """2 M tiny events of one op in 18 MB pass the memory guard at 0.1 GB (three times the
    file), and took 0.22 GB once read; they are counted as they come now and refused past
    what the limit admits, with the file named, and the other runs read."""
    logs = tmp_path / "logs"
    flooded = logs / "flood_cpu_bs64" / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
    flooded.parent.mkdir(parents=True)
    flooded.write_bytes(_flood(2_000_000))
    assert 15e6 < flooded.stat().st_size < 0.1e9 / 3  # within what the memory guard lets through
    shutil.copytree(DEMO / "tf_keras" / "mnist_cnn_cpu_bs64", logs / "mnist_cnn_cpu_bs64")

    done = subprocess.run(
        [sys.executable, "-c", PEAK_PROCESS, str(flooded), "0.1"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    peak_kib, said = done.stdout.splitlines()
    assert said.startswith(f"{flooded}: more than 1,562,499 events") and "memory limit" in said, said
    assert int(peak_kib) * 1024 < 0.1e9  # the flood's events were never all held

    from conftest import run_cli

    listing = run_cli("runs", str(logs), "--json", "--no-cache", "--max-read-gb", "0.1")
    document = json.loads(listing.stdout)
    assert listing.returncode == 1 and [run["run"] for run in document["runs"]] == ["mnist_cnn_cpu_bs64"]
    (error,) = document["errors"]
    assert error["path"] == str(flooded) and "events" in error["message"]


class _FaultProxy:
    """An HTTP proxy on loopback in front of moto's server that forwards every request but
    those for ``hang`` (a part of an object's path), which it takes and never answers."""

    def __init__(self, upstream: str, hang: str):
        import http.client
        import http.server
        import urllib.parse

        target = urllib.parse.urlparse(upstream)
        self.held = threading.Event()
        self.release = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                if hang in self.path:
                    proxy.held.set()
                    proxy.release.wait(300)  # never answers while the test runs
                    self.close_connection = True
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream_call = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                upstream_call.request(self.command, self.path, body=body, headers=dict(self.headers))
                answer = upstream_call.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream_call.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.timeout(240)
def test_an_object_that_never_answers_costs_its_run_within_the_deadline(bucket):  # noqa: F811
    """One trace in the bucket whose GET is taken and never answered (a fault-injecting
    proxy in front of moto's server): `runs` waited on it past 7 minutes. Each request to
    the store has a deadline now; the object's run is named with it, the others listed."""
    env, url, local = bucket
    hung = "user/lstm_runB/"
    proxy = _FaultProxy(env["AWS_ENDPOINT_URL"], f"/team/logs/{hung}")
    try:
        started = time.monotonic()
        result = _bucket_cli({**env, "AWS_ENDPOINT_URL": proxy.url, "TB_OPCOMPARE_REMOTE_TIMEOUT_S": "3"}, "runs", url)
        seconds = time.monotonic() - started
    finally:
        proxy.close()
    assert proxy.held.is_set()  # the object was asked for, and not answered
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert seconds < 90
    listed = json.loads(result.stdout)
    truth = json.loads(_bucket_cli(env, "runs", str(local)).stdout)
    assert [run["run"] for run in listed["runs"]] == [run["run"] for run in truth["runs"] if run["run"] != hung[:-1]]
    (error,) = listed["errors"]
    assert error["path"].startswith(f"{url}/{hung}") and "no answer from the store within 3 s" in error["message"]


@contextlib.contextmanager
def _one_worker_cluster():
    """A scheduler and one worker without a nanny (none starts another when it dies), each a
    process of its own: (the scheduler's address, the worker's process)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            address.rsplit(":", 1)[1],
            "--no-dashboard",
        ],
        **quiet,
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--no-nanny",
            "--nthreads",
            "1",
            "--no-dashboard",
        ],
        **quiet,
    )
    try:
        yield address, worker
    finally:
        for process in (worker, scheduler):
            process.kill()
            process.wait()


@pytest.mark.timeout(180)
def test_a_cluster_whose_only_worker_dies_mid_index_does_not_wait_for_ever(tmp_path, monkeypatch):
    """The cluster's one worker (no nanny to start another) killed when the first session
    is done: the scheduler waits for a worker for ever, and so did `index`. With no worker
    for the watch's time, the sessions still waiting are named as failed."""
    distributed = pytest.importorskip("distributed")
    from tb_opcompare.store import prewarm

    monkeypatch.setattr(prewarm, "WORKERLESS_SECONDS", 3.0)
    logdir = tmp_path / "logs"
    shutil.copytree(SESSIONS, logdir)
    with _one_worker_cluster() as (address, worker):
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
        killed = []

        def kill_the_worker(line: str) -> None:
            if line.startswith("  [1/") and not killed:
                worker.kill()
                killed.append(worker.pid)

        started = time.monotonic()
        report = index_logdir(Catalog(str(logdir)), jobs=1, say=kill_the_worker, scheduler=address)
        seconds = time.monotonic() - started
    sessions = sum(len(source.sessions) for source in Catalog(str(logdir)).sources())
    assert killed and seconds < 60
    assert report.read >= 1 and report.read + len(report.errors) == sessions
    assert report.errors and all(
        reason == "indexing failed: no Dask worker was left on the cluster for 3 s" for _, reason in report.errors
    )
    again = index_logdir(Catalog(str(logdir)), jobs=1, say=lambda _: None)  # what was read is kept
    assert (again.cached, again.read, again.errors) == (report.read, len(report.errors), [])
