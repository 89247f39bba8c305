"""Progress of long work (issue 58): a bar on a terminal, plain lines in a log, nothing with
--quiet; the cold reads under way, on stderr and from the tab's ``reads`` route. Real
commands on real profiles, under a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import REALTRACES, REPO, run_cli
from in_process import PREFIX, plugin_client

from tb_opcompare.text import format_bytes

CLI = str(Path(sys.executable).parent / "tb-opcompare")
RESNET18 = "torch_resnet18_cpu"


def _small_logdir(tmp_path: Path) -> Path:
    """Three of the demo's Keras runs: an index of three sessions."""
    logdir = tmp_path / "logs"
    for run in ("mnist_cnn_cpu_bs1", "mnist_cnn_cpu_bs16", "mnist_cnn_cpu_bs64"):
        shutil.copytree(REPO / "demo_logs" / "tf_keras" / run, logdir / run)
    return logdir


def _on_a_terminal(*args: str) -> tuple[int, str]:
    """(exit code, all it wrote) of the CLI with stdout and stderr on a pseudo-terminal."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([CLI, *args], stdout=follower, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    written = bytearray()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            written += chunk
        elif process.poll() is not None:
            break
    os.close(leader)
    return process.wait(timeout=30), written.decode(errors="replace")


def test_index_draws_a_bar_on_a_terminal_and_plain_lines_in_a_log(tmp_path):
    logdir = _small_logdir(tmp_path)
    code, terminal = _on_a_terminal("index", str(logdir), "--no-cache", "--jobs", "1")
    assert code == 0, terminal
    # tqdm's bar, redrawn in place with carriage returns, ends at 3 of 3
    assert "\r" in terminal and "3/3" in terminal and "100%|" in terminal, terminal
    assert "3 read, 0 already indexed" in terminal

    shutil.rmtree(logdir / ".opcompare")
    piped = run_cli("index", str(logdir), "--no-cache", "--jobs", "1")
    assert piped.returncode == 0, piped.stderr
    # off a terminal: lines a log can keep (the first and the last at least), no bar
    assert "sessions: 1 of 3 (33%)" in piped.stderr and "sessions: 3 of 3 (100%)" in piped.stderr, piped.stderr
    assert "\r" not in piped.stderr and "|" not in piped.stderr
    assert "3 read, 0 already indexed" in piped.stdout  # the result stays on stdout

    exported = run_cli("export", str(logdir), "--parquet", str(tmp_path / "out"), "--no-cache")
    assert exported.returncode == 0 and "runs: 3 of 3 (100%)" in exported.stderr, exported.stderr

    shutil.rmtree(logdir / ".opcompare")
    quiet = run_cli("index", str(logdir), "--no-cache", "--jobs", "1", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert "3 read, 0 already indexed" in quiet.stdout


def test_a_long_cold_read_is_named_with_its_size_and_quiet_hides_it(tmp_path):
    """Reads are shown once they take TB_OPCOMPARE_PROGRESS_AFTER_S (2 s by default; 0 here,
    so that a few-MB trace is seen): the run and its files' size."""
    logdir = tmp_path / "logs"
    shutil.copytree(REALTRACES / RESNET18 / "tensorboard_trace_handler", logdir)
    (run,) = [path.name for path in logdir.iterdir()]
    size = sum(path.stat().st_size for path in (logdir / run).rglob("*") if path.is_file() and ".json" in path.name)
    env = {**os.environ, "TB_OPCOMPARE_PROGRESS_AFTER_S": "0", "PYTHONWARNINGS": "ignore"}
    args = [CLI, "compare", str(logdir), "--baseline", run, "--target", run, "--no-cache", "--json"]
    shown = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert f"Reading {run} ({format_bytes(size)})" in shown.stderr, shown.stderr
    assert shown.stdout.lstrip().startswith("{")  # stdout stays the document
    quiet = subprocess.run([*args, "--quiet"], capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 0 and "Reading" not in quiet.stderr, quiet.stderr


def test_the_tab_is_told_which_read_the_server_is_at(tmp_path, monkeypatch):
    """The ``reads`` route, asked while a cold compare reads on another thread, names that
    run and its size; once the read ended, it lists nothing."""
    monkeypatch.setenv("TB_OPCOMPARE_PROGRESS_AFTER_S", "0")
    logdir = tmp_path / "logs"
    shutil.copytree(REALTRACES / RESNET18 / "tensorboard_trace_handler", logdir)
    (run,) = [path.name for path in logdir.iterdir()]
    client = plugin_client(logdir)
    answer: dict = {"reads": []}
    compared = threading.Thread(target=lambda: client.get(f"{PREFIX}/compare?baseline={run}&target={run}"))
    compared.start()
    while compared.is_alive() and not answer["reads"]:
        answer = client.get(f"{PREFIX}/reads").get_json()
    compared.join(timeout=120)
    seen = answer["reads"]
    assert seen and seen[0]["run"] == run and seen[0]["bytes"] > 1_000_000, seen
    # the time left comes from the rate of this process's reads that ended (None before any)
    assert seen[0]["seconds"] >= 0 and (seen[0]["seconds_left"] is None or seen[0]["seconds_left"] > 0)
    assert answer["text"].startswith(f"Reading {run} ({format_bytes(seen[0]['bytes'])}): ")  # the spinner's line
    assert client.get(f"{PREFIX}/reads").get_json() == {"reads": [], "text": ""}


def _read_once() -> str:
    from tb_opcompare.store.progress import READS_UNDER_WAY

    with READS_UNDER_WAY.reading("run", 1):
        return "read"


def test_a_worker_forked_while_the_reads_line_polls_still_reads():
    """`index` forks a worker a session while the CLI's line of reads under way polls the
    process's reads from a thread of its own. A fork copies their lock as it is: forked
    while that thread held it, the worker's first read waited on a lock no thread of its
    would release, until its deadline killed it and its session was named as failed."""
    from tb_opcompare.store.progress import READS_UNDER_WAY
    from tb_opcompare.store.watched_fork import Fork

    held, release = threading.Event(), threading.Event()

    def poll_holding_the_lock() -> None:
        with READS_UNDER_WAY._lock:
            held.set()
            release.wait(30)

    poller = threading.Thread(target=poll_holding_the_lock)
    poller.start()
    try:
        assert held.wait(10)
        worker = Fork(10.0, _read_once)  # forked while the lock is held
    finally:
        release.set()
        poller.join()
    assert worker.answer() == "read"


def test_a_command_that_shows_progress_may_still_fork_its_workers():
    """The line of reads under way is drawn from a guarded thread: while it runs,
    ``may_fork`` still says yes, so a command that shows progress makes its CSV and its
    head start on both cores, as ``--quiet`` does (it said no: a million-op compare took
    25.5 s, against 22.7 s quiet). Any other thread still says no. In a fresh process, as
    a command's: this one runs the threads of other tests."""
    code = """
import io, threading
from tb_opcompare.cli.progress import Reporter, showing_reads
from tb_opcompare.store.watched_fork import may_fork
said = [may_fork()]
with showing_reads(Reporter(stream=io.StringIO())):
    said.append(threading.active_count() == 2 and may_fork())
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, args=(30,))
    other.start()
    said.append(may_fork())
    stop.set()
    other.join()
print(said)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.stdout.strip() == "[True, True, False]", done.stderr[-2000:]


def test_bars_drawn_on_a_terminal_leave_no_thread_that_stops_forks():
    """tqdm's bars, on a terminal (a command's bar, the line of a long read): tqdm started
    a monitor thread with its first bar, which outlived it and is no guarded thread, so
    ``may_fork`` said no for the rest of the command once a bar was drawn (a million-op
    compare run at a terminal made its CSV on one core), and ``index`` forked its workers
    beside it. The bars are drawn and redrawn all the same. In a fresh process, as a
    command's: this one runs the threads of other tests."""
    code = """
import io, os, threading, time
os.environ["TB_OPCOMPARE_PROGRESS_AFTER_S"] = "0"
from tb_opcompare.cli.progress import Reporter, showing_reads
from tb_opcompare.store.progress import READS_UNDER_WAY
from tb_opcompare.store.watched_fork import may_fork

class Terminal(io.StringIO):
    def isatty(self):
        return True

screen = Terminal()
reporter = Reporter(stream=screen)
reporter.start(2, "sessions")
reporter.advance("first")
said = [may_fork()]
reporter.advance("second")
with showing_reads(reporter), READS_UNDER_WAY.reading("big_run", 70 << 20):
    deadline = time.monotonic() + 30
    while "big_run" not in screen.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
said.append(may_fork())
print(said, sorted(thread.name for thread in threading.enumerate()))
print(repr(screen.getvalue()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    said, screen = done.stdout.strip().splitlines()
    assert said == "[True, True] ['MainThread']", done.stderr[-2000:]
    # the bar ran to 2 of 2 and the line of the read under way was drawn
    assert "2/2" in screen and "big_run" in screen, screen


def test_no_worker_is_forked_halfway_through_a_guarded_step():
    """A guarded thread's step (the reads line writing to stderr, with stderr's lock held)
    is never cut by a fork: ``Fork`` waits for the step to end. Forked halfway through,
    the worker would start with that lock held by no thread of its own. Here a step holds
    a lock nearly all the time and each worker takes the lock: every one of 20 gets it."""
    from tb_opcompare.store.watched_fork import Fork, guarded_thread

    stream_lock, stop = threading.Lock(), threading.Event()

    def write_slowly() -> None:
        with stream_lock:
            time.sleep(0.02)

    writer = guarded_thread(write_slowly, 0.0005, stop)
    writer.start()
    try:
        answers = [Fork(30.0, _take, stream_lock).answer() for _ in range(20)]
    finally:
        stop.set()
        writer.join()
    assert answers == ["taken"] * 20


def _take(lock) -> str:
    return "taken" if lock.acquire(timeout=5) else "held by a thread the fork left behind"


def test_index_workers_take_several_sessions_and_report_every_64_at_least(tmp_path, monkeypatch):
    """`index --jobs 2` on many small sessions: a worker reads several (a fork a session cost
    more than the read), and at most 64, so the bar moves every 64 sessions at least."""
    import collections

    from tb_opcompare.store import prewarm
    from tb_opcompare.store.catalog import Catalog

    trace = next((REPO / "tests/fixtures/onnxruntime/logdir/cnn_infer_cpu_bs16").glob("*.pt.trace.json.gz"))
    logdir = tmp_path / "logs"
    for number in range(150):
        (logdir / f"run{number:03d}").mkdir(parents=True)
        shutil.copy(trace, logdir / f"run{number:03d}" / trace.name)
    read_session, on_pool = prewarm._index_one, prewarm._on_pool

    def tagged(*task):
        done = read_session(*task)
        done.worker = str(os.getpid())  # which worker read it
        return done

    by_worker: collections.Counter[str] = collections.Counter()

    def counted(*args):
        for done in on_pool(*args):
            by_worker[done.worker] += 1
            yield done

    monkeypatch.setattr(prewarm, "_index_one", tagged)
    monkeypatch.setattr(prewarm, "_on_pool", counted)
    # the bytes' rule out of the way: 150 sessions of 8 KB fit one batch by their bytes
    monkeypatch.setattr(prewarm, "worker_batch_bytes", lambda total, processes: total)
    report = prewarm.index_logdir(Catalog(str(logdir)), jobs=2, say=lambda _: None)
    assert (report.read, report.errors) == (150, [])
    assert sum(by_worker.values()) == 150 and max(by_worker.values()) == prewarm.INDEX_BATCH_SESSIONS, by_worker
    assert len(by_worker) == 3  # 64, 64 and 22
