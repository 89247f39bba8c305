"""Progress of a command's long work, on stderr (stdout keeps the command's output, which
may be piped to a file or ``jq``): a tqdm bar on a terminal, a plain line every few seconds
when stderr is not one (a CI log), nothing with ``--quiet``. What is counted and the time
left come from ``store.progress``; this module only draws them."""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

from tb_opcompare.cli.common import escape_controls
from tb_opcompare.store.progress import READS_UNDER_WAY, Progress, ReadsUnderWay, Tally, shown_after_s
from tb_opcompare.store.watched_fork import guarded_thread
from tb_opcompare.text import format_reads, format_seconds

# Off a terminal, a line at most this often (and for the first and last item): a log of
# 10,000 sessions reads as a few hundred lines, not 10,000.
PLAIN_LINE_EVERY_S = 5.0


def _poll_seconds() -> float:
    """How often the line of a cold read under way is redrawn: twice a second, more often
    where reads are shown sooner."""
    return min(0.5, max(0.05, shown_after_s() / 4))


class Reporter(Progress):
    """``store.progress.Progress`` drawn for a person: ``start``/``advance`` move a bar (or
    write a line now and then), ``say`` writes a line above it."""

    def __init__(self, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        super().__init__(say=self._line)
        self._bar = None
        self._last_line = 0.0

    def result(self, text: str) -> None:
        """A line of the command's own output (stdout, even with --quiet), written above the
        bar where one is drawn."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stdout)
        else:
            print(text, flush=True)

    def _line(self, text: str) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def start(self, total: int, what: str) -> None:
        super().start(total, what)
        self.close()
        self._last_line = 0.0
        if self.quiet or not self.terminal or not total:
            return
        # miniters=1: every item redraws the bar (at most each tqdm.mininterval), which tqdm's
        # monitor thread, turned off in _bar_class, would otherwise see to
        self._bar = _bar_class()(total=total, unit=f" {what}", file=self.stream, leave=True, miniters=1, **_screen())

    def show(self, tally: Tally, label: str, ok: bool) -> None:
        """The bar moved on a terminal; off one, a plain line now and then."""
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(escape_controls(label)[:32], refresh=False)
            self._bar.update(1)
            if tally.done >= tally.total:
                self.close()
            return
        now = time.monotonic()
        if tally.done in (1, tally.total) or now - self._last_line >= PLAIN_LINE_EVERY_S:
            self._last_line = now
            print(plain_line(tally), file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


@contextlib.contextmanager
def showing_reads(reporter: Reporter, reads: ReadsUnderWay = READS_UNDER_WAY) -> Iterator[None]:
    """While the block runs, each cold read that takes 2 s or more (``shown_after_s``) is
    shown: a line that counts its seconds on a terminal, one line when it passes 2 s off
    one. Drawn from a guarded thread (``watched_fork.guarded_thread``): the command may
    fork its workers meanwhile."""
    if reporter.quiet:
        yield
        return
    done = threading.Event()
    watcher = guarded_thread(_ReadsLine(reporter, reads, done).redraw, _poll_seconds(), done)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join(timeout=1.0)


class _ReadsLine:
    """The line of the reads under way, redrawn at each step of its thread."""

    def __init__(self, reporter: Reporter, reads: ReadsUnderWay, done: threading.Event) -> None:
        self.reporter, self.reads, self.done = reporter, reads, done
        self.told: set[tuple[str, int]] = set()
        self.bar: Any = None  # a tqdm line, on a terminal (tqdm is imported there only)

    def redraw(self) -> None:
        shown = [] if self.done.is_set() else self.reads.snapshot()
        if not shown:
            if self.bar is not None:
                self.bar.close()
                self.bar = None
            return
        text = escape_controls(format_reads(shown))
        if not self.reporter.terminal:
            if (shown[0]["run"], shown[0]["bytes"]) not in self.told:
                self.told.add((shown[0]["run"], shown[0]["bytes"]))
                print(text, file=self.reporter.stream, flush=True)
            return
        if self.bar is None:
            self.bar = _bar_class()(
                total=None, file=self.reporter.stream, bar_format="{desc}", leave=False, **_screen()
            )
        self.bar.set_description_str(text)


def _bar_class() -> Any:
    """tqdm's bar (a terminal's only: a piped or quiet command never imports it), without
    its monitor thread. That thread outlives the bars and is no guarded one: once a bar was
    drawn, ``may_fork`` said no for the rest of the command, so a million-op compare run at
    a terminal made its CSV on one core, and ``index`` forked its workers beside it."""
    from tqdm import tqdm

    tqdm.monitor_interval = 0
    return tqdm


def _screen() -> dict:
    """The terminal's size for tqdm; 80 x 24 where it tells none (a pseudo-terminal of 0
    rows and columns, on which tqdm would draw nothing)."""
    size = shutil.get_terminal_size(fallback=(80, 24))
    return {"ncols": size.columns, "nrows": size.lines}


def plain_line(tally: Tally) -> str:
    """``sessions: 12 of 36 (33%), 1 unreadable, about 40 s left``."""
    left = tally.seconds_left()
    return (
        f"{tally.what}: {tally.done} of {tally.total} ({100 * tally.done // max(tally.total, 1)}%)"
        + (f", {tally.failed} unreadable" if tally.failed else "")
        + (f", about {format_seconds(left)} left" if left is not None else "")
    )
