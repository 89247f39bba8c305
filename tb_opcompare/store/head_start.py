"""A cold command's first reads, begun while it is still importing pandas.

A cold ``tb-opcompare compare`` of two named runs spends about 0.2 s importing pandas
before it opens a profile, then about as long again reading a 30 MB xplane: one core
waits while the other works. The readers need no pandas (``formats.read_parsed``), so
``HeadStart.start`` forks a process that reads the session while the command imports;
``take`` collects the parsed session through a pipe and the catalog makes its tables.
On the 31 MB Keras xplane of ``make bench``: a cold compare of the run with itself
0.91 -> 0.76 s, median of 10 alternating, 2 cores (docs/speed_and_safety.md). Since
``compare`` makes its tables without pandas it has no import left to overlap, and the
head start there costs about what it saves (docs/speed_and_safety.md); the commands that
still load pandas (sweep, check, trend, matrix) gain as before.

Only where it pays and is safe (``pays``): before this process has imported pandas
(after that a read here is as quick), while no other thread runs (a fork copies the
thread that forks and no other, so a lock another thread holds would stay held in the
worker), on a local logdir (a bucket's client and its event loop do not survive a
fork). The catalog starts only sessions no cache or shared index holds and whose reads
fit the memory guard together. A worker that fails hands back nothing: the catalog
then reads the session itself and reports what is wrong as always.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import weakref

from tb_opcompare.ingest import fs
from tb_opcompare.ingest.formats import read_parsed
from tb_opcompare.store.memory_guard import text_budget

# Below this much of a session's files, the read is over before a fork has paid for itself.
HEAD_START_MIN_BYTES = 256 * 1024

_LIVE: weakref.WeakSet[HeadStart] = weakref.WeakSet()  # for ``cancel_all`` at the command's end


def pays(logdir: str) -> bool:
    """Whether reading in a forked process now overlaps work this process has yet to do."""
    return (
        hasattr(os, "fork")
        and "pandas" not in sys.modules
        and threading.active_count() == 1
        and not fs.is_remote(logdir)
    )


class HeadStart:
    """Sessions being read in forked processes, by the catalog's key of each."""

    def __init__(self):
        self._workers: dict[tuple, tuple[int, int]] = {}  # key -> (process id, read end of its pipe)
        _LIVE.add(self)

    def __contains__(self, key: tuple) -> bool:
        return key in self._workers

    def __len__(self) -> int:
        return len(self._workers)

    def start(self, key: tuple, places: tuple, limit_bytes: int) -> None:
        """Fork a process that reads the session of ``key`` (format, files' signatures),
        opening nothing outside ``places`` (as ``catalog._read_within``), and sends it back
        pickled."""
        file_format, signatures = key
        read_end, write_end = os.pipe()
        process = os.fork()
        if process == 0:
            os.close(read_end)
            code = 1
            try:
                with fs.confined(places):
                    parsed = read_parsed(
                        file_format, [path for path, _, _ in signatures], text_budget(file_format, limit_bytes)
                    )
                with os.fdopen(write_end, "wb") as pipe:  # streamed: no second copy of the arrays
                    pickle.dump(parsed, pipe, protocol=pickle.HIGHEST_PROTOCOL)
                code = 0
            finally:  # whatever happened, never back into the command's code
                os._exit(code)
        os.close(write_end)
        self._workers[key] = (process, read_end)

    def take(self, key: tuple):
        """The session of ``key`` as its worker read it (a ``ParsedProfile``), waiting for
        it; None where no worker read it or the worker failed."""
        worker = self._workers.pop(key, None)
        if worker is None:
            return None
        process, read_end = worker
        try:
            with os.fdopen(read_end, "rb") as pipe:
                parsed = pickle.load(pipe)
        except Exception:  # nothing or half sent: the worker failed
            parsed = None
        _, status = os.waitpid(process, 0)
        return parsed if os.waitstatus_to_exitcode(status) == 0 else None

    def cancel(self) -> None:
        """Stop the workers whose sessions nobody took."""
        for process, read_end in self._workers.values():
            try:
                os.kill(process, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(read_end)
            os.waitpid(process, 0)
        self._workers.clear()


def cancel_all() -> None:
    """``cancel`` every head start of this process (a command that ended early)."""
    for head_start in list(_LIVE):
        head_start.cancel()
