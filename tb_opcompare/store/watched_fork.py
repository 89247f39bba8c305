"""Work done in forked processes, watched: the read-ahead workers of a cold command
(``store.head_start``), ``read_ahead``'s reads on every core (``store.catalog``),
``index --jobs N`` (``store.prewarm``) and the second half of a big CSV
(``service.csv_export.split_csv_chunks``).

A worker answers through a pipe; its parent waits on the pipe with a deadline, so a worker
that stops (SIGSTOP, as when it hangs on I/O) or dies costs its own call and nothing else.
Before this, a stopped read-ahead worker left a cold ``compare`` waiting forever, and one
killed ``index --jobs 2`` worker broke the process pool and failed every session still
in it. What a lost call means is its caller's: a read is done again in this process, an
index task is named as failed.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import selectors
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator

# A worker's allowance: this long, and a second more a MiB of its files, without a byte of
# its answer. A read runs at tens of MiB a second, so only a worker that is stuck (or
# stopped, which is seen at once) gets near it.
WORKER_SECONDS = 60.0
WORKER_BYTES_PER_SECOND = 1 << 20
_POLL_SECONDS = 0.1  # how often a worker is looked at while its pipe is quiet


def may_fork() -> bool:
    """Whether forking is safe now: the platform forks, and no other thread runs but
    guarded ones (``guarded_thread``). A fork copies the thread that forks and no other,
    so a lock another thread holds would stay held in the worker."""
    here = threading.current_thread()
    return hasattr(os, "fork") and all(thread is here or thread in _GUARDED for thread in threading.enumerate())


# A thread beside the forking one may hold locks a worker would need (the CLI's line of
# reads under way holds stderr's while it writes, and the reads' own): a guarded thread
# takes each step under this lock, and ``Fork`` forks under it, so no worker starts while
# such a step is half done. Without it a command that showed progress forked its
# read-ahead workers anyway, and made its CSV and its head start on one core, as
# ``may_fork`` said no (a million-op compare: 25.5 s, against 22.7 s with ``--quiet``).
_FORK_GUARD = threading.Lock()
_GUARDED: weakref.WeakSet[threading.Thread] = weakref.WeakSet()


def guarded_thread(step: Callable[[], None], every_s: float, stop: threading.Event) -> threading.Thread:
    """A daemon thread (not started) that runs ``step()`` every ``every_s`` seconds until
    ``stop`` is set, then once more, each time where no fork can begin; ``may_fork``
    counts it as no other thread."""

    def run() -> None:
        while not stop.wait(every_s):
            with _FORK_GUARD:
                step()
        with _FORK_GUARD:
            step()

    thread = threading.Thread(target=run, daemon=True)
    _GUARDED.add(thread)
    return thread


def allowance(size_bytes: int) -> float:
    """Seconds a worker reading ``size_bytes`` of files may stay silent before it is given up."""
    return WORKER_SECONDS + size_bytes / WORKER_BYTES_PER_SECOND


@dataclasses.dataclass
class Lost:
    """A call whose worker gave no answer: why, in words."""

    reason: str


class Fork:
    """``work(*args)`` running in a forked process, its answer (the value, pickled) coming
    back through a pipe."""

    def __init__(self, seconds: float, work: Callable, *args):
        self.seconds = seconds
        self.heard = time.monotonic()  # when the worker last sent something (or started)
        self._chunks: list[bytes] = []
        read_end, write_end = os.pipe()
        self.fd, self._wide = read_end, _widen(write_end)
        try:
            with _FORK_GUARD:  # no guarded thread is halfway through a step (``guarded_thread``)
                self.pid = os.fork()
        except BaseException:  # no process to be had, or an interrupt: the pipe is closed first
            os.close(write_end)
            self._close()
            raise
        if self.pid == 0:
            os.close(read_end)
            _answer(write_end, work, args)
        os.close(write_end)

    def answer(self):
        """The call's value, waiting for it; ``Lost`` where the worker gave none."""
        return _first_done([self])[1]

    def stopped(self) -> bool:
        """Whether the worker is stopped by a signal (Linux's /proc; elsewhere its deadline
        alone tells)."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                return stat.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
        except (OSError, IndexError):
            return False

    def receive(self) -> bool:
        """Read what the pipe holds now; True at its end."""
        chunk = os.read(self.fd, 1 << 20)
        if chunk:
            self._chunks.append(chunk)
            self.heard = time.monotonic()
        return not chunk

    def finish(self):
        """The worker's value once its pipe has ended (a whole answer is the value, however
        the worker ended after sending it), else ``Lost``. The answer is unpickled while the
        worker exits (giving back its memory took 5-7 ms after a 31 MB xplane's read), and
        the worker reaped after."""
        self._close()
        try:
            outcome, value = pickle.loads(b"".join(self._chunks))
        except Exception:  # nothing or half sent
            code = os.waitstatus_to_exitcode(self._reaped())
            if code < 0:
                return Lost(f"its worker was killed by {signal.Signals(-code).name}")
            return Lost(f"its worker ended with code {code} and no answer")
        finally:
            self._chunks.clear()
        self._reaped()
        return value if outcome == "value" else Lost(value)

    def _reaped(self) -> int:
        """The worker's wait status, once it has ended: one stopped after its answer (its
        pipe closed, its exit to come) is killed, never waited for."""
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return status
            if self.stopped():
                os.kill(self.pid, signal.SIGKILL)
            time.sleep(0.001)

    def give_up(self, reason: str) -> Lost:
        """Kill the worker (a stopped one too) and say why; one ``finish`` left halfway (an
        interrupt) is given up too, its pipe closed once and its worker reaped once."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._close()
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped already
            pass
        return Lost(reason)

    def _close(self) -> None:
        if self.fd < 0:
            return
        os.close(self.fd)
        self.fd = -1
        if self._wide:
            _WIDE_PIPES.release()
            self._wide = False


# Linux's pipe holds 64 KiB unless asked for more: an answer of 11 MB (the 31 MB Keras
# xplane's tables) went through it in 170 turns of the two processes, 3-5 ms more than
# with 1 MiB, the most an unprivileged process may ask for (/proc/sys/fs/pipe-max-size).
# An unprivileged user's pipes may hold 64 MiB together (pipe-user-pages-soft) before Linux
# gives each new pipe of theirs, in any process, the smallest buffer: so a few are widened
# at a time, and a machine's many read-ahead workers beyond them keep the default.
_PIPE_BYTES = 1 << 20
_WIDE_PIPES = threading.BoundedSemaphore(8)


def _widen(pipe_end: int) -> bool:
    """Whether the pipe's buffer is now ``_PIPE_BYTES`` (Linux, within the system's
    limits, and fewer than eight such pipes of this process open); else it is as it was."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        return False
    command = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux alone
    if command is None or not _WIDE_PIPES.acquire(blocking=False):
        return False
    try:
        fcntl.fcntl(pipe_end, command, _PIPE_BYTES)
    except OSError:  # a lower limit: the pipe works as it is
        _WIDE_PIPES.release()
        return False
    return True


def _answer(write_end: int, work: Callable, args: tuple) -> None:
    """In the worker: send ``work``'s value, or what it raised in words, and leave (never
    back into the parent's code)."""
    code = 1
    try:
        # what the worker inherited, frozen: no collection here walks it (nor copies its pages
        # from the parent's for it); its reads collect rarely (``formats.collecting_rarely``)
        gc.freeze()
        try:
            answer = ("value", work(*args))
        except Exception as error:
            answer = ("raised", f"{type(error).__name__}: {error}")
        with os.fdopen(write_end, "wb") as pipe:  # streamed: no second copy of the arrays
            pickle.dump(answer, pipe, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)


def run_watched(calls: list[tuple], processes: int) -> Iterator[tuple]:
    """(key, value or ``Lost``) of each call ``(key, seconds, work, *args)``, as they end,
    ``processes`` at a time, each in a forked process of its own."""
    waiting = list(reversed(calls))
    running: dict[Fork, object] = {}
    try:
        while waiting or running:
            while waiting and len(running) < processes:
                key, seconds, work, *args = waiting.pop()
                running[Fork(seconds, work, *args)] = key
            fork, value = _first_done(list(running))
            yield running.pop(fork), value
    finally:  # a caller that stopped early (an error, ^C) leaves no worker behind
        for fork in running:
            fork.give_up("not waited for")


def _first_done(forks: list[Fork]) -> tuple[Fork, object]:
    """(fork, value or ``Lost``) of the first of ``forks`` to end, to stop or to pass its
    deadline (the one given up is killed)."""
    with selectors.DefaultSelector() as selector:
        for fork in forks:
            selector.register(fork.fd, selectors.EVENT_READ, fork)
        while True:
            for ready, _ in selector.select(_POLL_SECONDS):
                if ready.data.receive():
                    selector.unregister(ready.fd)
                    return ready.data, ready.data.finish()
            now = time.monotonic()
            for fork in forks:
                if fork.stopped():
                    selector.unregister(fork.fd)
                    return fork, fork.give_up("its worker was stopped (SIGSTOP), and was killed")
                if now - fork.heard > fork.seconds:
                    selector.unregister(fork.fd)
                    return fork, fork.give_up(f"its worker sent nothing for {fork.seconds:.0f} s, and was killed")
