"""Long work as it goes: the cold reads a process has under way, and counted work (sessions
indexed or exported, runs recorded) with the time left at the rate so far. The CLI draws
it as a progress bar (``cli.progress``) and the tab as a line under its spinner (the
``reads`` route); the figures and the time-left rule live here, once."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator

# A read shorter than this is not worth a line: most reads of a warm logdir are.
# ``$TB_OPCOMPARE_PROGRESS_AFTER_S`` sets another (0: every read, as a test sees them).
ENV_SHOWN_AFTER_S = "TB_OPCOMPARE_PROGRESS_AFTER_S"
DEFAULT_SHOWN_AFTER_S = 2.0


def shown_after_s() -> float:
    """How long a read runs before it is shown: ``$TB_OPCOMPARE_PROGRESS_AFTER_S``, else 2 s."""
    try:
        seconds = float(os.environ.get(ENV_SHOWN_AFTER_S) or DEFAULT_SHOWN_AFTER_S)
    except ValueError:
        return DEFAULT_SHOWN_AFTER_S
    return seconds if 0 <= seconds < float("inf") else DEFAULT_SHOWN_AFTER_S


def seconds_left(done: float, total: float, elapsed: float) -> float | None:
    """The time the rest of ``total`` takes at the rate of the ``done`` part so far; None
    before anything is done (no rate yet) or once everything is."""
    if done <= 0 or total <= done:
        return None
    return elapsed / done * (total - done)


@dataclasses.dataclass
class Tally:
    """Counted work: ``done`` of ``total`` (``what``: "sessions", "runs"), since ``started``."""

    what: str
    total: int
    done: int = 0
    failed: int = 0
    started: float = dataclasses.field(default_factory=time.monotonic)

    def advance(self, ok: bool = True) -> None:
        self.done += 1
        self.failed += not ok

    def seconds_left(self) -> float | None:
        return seconds_left(self.done, self.total, time.monotonic() - self.started)


@dataclasses.dataclass(frozen=True)
class Read:
    """One cold read under way: the run, its files' bytes, and when it began."""

    run: str
    size_bytes: int
    started: float


class ReadsUnderWay:
    """The process's cold reads as they start and end (thread-safe), and the rate of those
    that ended, which gives a read under way its expected time left (the CLI's line and
    the tab's ``reads`` route ask for a ``snapshot``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads: dict[int, Read] = {}
        self._ids = itertools.count()
        self._read_bytes = 0
        self._read_seconds = 0.0

    @contextlib.contextmanager
    def reading(self, run: str, size_bytes: int) -> Iterator[None]:
        """Around one read of ``run``'s files (``size_bytes`` in all)."""
        key = next(self._ids)
        read = Read(run, size_bytes, time.monotonic())
        with self._lock:
            self._reads[key] = read
        try:
            yield
        finally:
            with self._lock:
                del self._reads[key]
                self._read_bytes += size_bytes
                self._read_seconds += time.monotonic() - read.started

    def snapshot(self, after_s: float | None = None) -> list[dict]:
        """The reads that have taken ``after_s`` (None: ``shown_after_s()``) or more so far,
        oldest first: run, bytes, seconds so far, and about how many are left (None before
        any read ended)."""
        after_s = shown_after_s() if after_s is None else after_s
        now = time.monotonic()
        with self._lock:
            reads = sorted(self._reads.values(), key=lambda read: read.started)
            rate = self._read_bytes / self._read_seconds if self._read_seconds > 0 and self._read_bytes else None
        shown = []
        for read in reads:
            elapsed = now - read.started
            if elapsed < after_s:
                continue
            expected = read.size_bytes / rate if rate else None
            # a read past its expected time has no "time left": it is slower than the others
            left = expected - elapsed if expected is not None and expected > elapsed else None
            shown.append({"run": read.run, "bytes": read.size_bytes, "seconds": elapsed, "seconds_left": left})
        return shown

    def forget_in_child(self) -> None:
        """After a fork, in the worker: a fresh lock and no reads. A fork copies the lock as
        it is, and held by another thread (the CLI's line of reads under way polls it) it
        stayed held in the worker, where no thread would release it: the worker's first
        read then waited until its deadline killed it."""
        self._lock = threading.Lock()
        self._reads = {}


READS_UNDER_WAY = ReadsUnderWay()  # the process's, shared by every catalog in it
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=READS_UNDER_WAY.forget_in_child)


class Progress:
    """What long counted work reports to: ``start`` once with the total, ``advance`` once
    an item, ``say`` for a line of its own. This one prints a line an item (``say``:
    where to); the CLI's ``cli.progress.Reporter`` draws a bar instead."""

    def __init__(self, say: Callable[[str], None] = print) -> None:
        self._say = say
        self.tally: Tally | None = None

    def start(self, total: int, what: str) -> None:
        self.tally = Tally(what, total)

    def advance(self, label: str, ok: bool = True) -> None:
        assert self.tally is not None, "advance before start"
        self.tally.advance(ok)
        self.show(self.tally, label, ok)

    def show(self, tally: Tally, label: str, ok: bool) -> None:
        """An item done: a line of its own here."""
        self._say(f"  [{tally.done}/{tally.total}] {label}: {'ok' if ok else 'unreadable'}")

    def say(self, text: str) -> None:
        self._say(text)
