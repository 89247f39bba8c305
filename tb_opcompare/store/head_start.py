"""A cold command's first reads, begun while it is still importing pandas.

A cold ``tb-opcompare compare`` of two named runs spends about 0.2 s importing pandas
before it opens a profile, then about as long again reading a 30 MB xplane: one core
waits while the other works. The readers and the tables need no pandas
(``formats.read_profile``), so ``HeadStart.start`` forks a process that reads the session
and makes its tables while the command imports; ``take`` collects them through a pipe.
Two sessions read side by side make their tables side by side too: on the million-op pair
of ``benchmarks/bench_many_ops.py`` the tables take about 3 s a side.
On the 31 MB Keras xplane of ``make bench``: a cold compare of the run with itself
0.91 -> 0.76 s, median of 10 alternating, 2 cores (CHANGELOG.md). Since
``compare`` makes its tables without pandas it has no import left to overlap, and the
head start there costs about what it saves (CHANGELOG.md); the commands that
still load pandas (sweep, check, trend, matrix) gain as before.

Only where it pays and is safe (``pays``): before this process has imported pandas
(after that a read here is as quick), where forking is safe (``watched_fork.may_fork``:
no other thread runs), on a local logdir (a bucket's client and its event loop do not survive a
fork). The catalog starts only sessions no cache or shared index holds and whose reads
fit the memory guard together. A worker that fails, stops or dies hands back nothing
(``store.watched_fork``: a stopped one is seen at once, a silent one past its deadline):
the catalog then reads the session itself and reports what is wrong as always.
"""

from __future__ import annotations

import sys
import weakref

from tb_opcompare.ingest import fs
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.store.cache import Encoded, encoded, entry_bytes
from tb_opcompare.store.memory_guard import text_budget
from tb_opcompare.store.watched_fork import Fork, Lost, allowance, may_fork

# Below this much of a session's files, the read is over before a fork has paid for itself.
HEAD_START_MIN_BYTES = 256 * 1024

_LIVE: weakref.WeakSet[HeadStart] = weakref.WeakSet()  # for ``cancel_all`` at the command's end


def pays(logdir: str) -> bool:
    """Whether reading in a forked process now overlaps work this process has yet to do."""
    return may_fork() and "pandas" not in sys.modules and not fs.is_remote(logdir)


class HeadStart:
    """Sessions being read in forked processes, by the catalog's key of each."""

    def __init__(self):
        self._workers: dict[tuple, Fork] = {}
        _LIVE.add(self)

    def __contains__(self, key: tuple) -> bool:
        return key in self._workers

    def __len__(self) -> int:
        return len(self._workers)

    def start(self, key: tuple, places: tuple[str, ...] | None, limit_bytes: int) -> None:
        """Fork a process that reads the session of ``key`` (format, files' signatures),
        opening nothing outside ``places`` (as ``catalog._read_within``), and sends it back
        as its disk cache entry (``cache.entry_bytes``; ``take`` makes it an ``Encoded``)."""
        file_format, signatures = key
        paths = [path for path, _, _ in signatures]
        seconds = allowance(sum(size for _, size, _ in signatures))
        self._workers[key] = Fork(seconds, _read_session, key, places, file_format, paths, limit_bytes)

    def take(self, key: tuple) -> Encoded | None:
        """The session of ``key`` as its worker read it, with its disk entry, waiting for
        it within the worker's deadline; None where no worker read it, or the worker failed,
        stopped or died (the caller reads the session itself)."""
        worker = self._workers.pop(key, None)
        if worker is None:
            return None
        entry = worker.answer()
        return None if isinstance(entry, Lost) else encoded(key, entry)

    def cancel(self) -> None:
        """Stop the workers whose sessions nobody took."""
        for worker in self._workers.values():
            worker.give_up("not taken")
        self._workers.clear()


def _read_session(key: tuple, places: tuple[str, ...] | None, file_format: str, paths: list[str], limit_bytes: int):
    """In the worker: the session read as ``catalog._read_within`` reads it, tables made,
    as its disk cache entry."""
    with fs.confined(places):
        return entry_bytes(key, read_profile(file_format, paths, text_budget(file_format, limit_bytes)))


def cancel_all() -> None:
    """``cancel`` every head start of this process (a command that ended early)."""
    for head_start in list(_LIVE):
        head_start.cancel()
