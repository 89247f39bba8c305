"""The memory guard: refuse a read that would need more memory than the machine can
spare, up front, with the way out, rather than let the kernel kill TensorBoard."""

from __future__ import annotations

import contextlib
import os
import threading
import time

from tb_opcompare.errors import OverLimit
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.formats import peak_bytes_per_byte


def default_trace_limit() -> int:
    """Half of the machine's memory, expressed as the trace size whose read would need it."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 8 * 1024**3
    return int(physical * 0.5)


def estimated_read_bytes(file_format: str, files: list[tuple[str, int]]) -> int:
    """Roughly the memory a read of these ``(path, size)`` files takes at its peak."""
    total = 0.0
    for path, size in files:
        if path.endswith(".gz"):
            size = max(size, _gzip_original_size(path))
        total += size * peak_bytes_per_byte(file_format)
    return int(total)


def _gzip_original_size(path: str) -> int:
    """The gzip trailer's size field (modulo 4 GiB): the uncompressed size. In a bucket
    too (one range request): estimated from the compressed size, a trace 14x smaller
    than its text passed the guard, and reads at once reserved a fourteenth of what
    they took. 0 where it cannot be read (a store without range reads, TensorBoard's
    gfile): the compressed size is used, and the reader's text budget still bounds the
    read (``text_budget``)."""
    try:
        tail = fs.read_tail(path, 4)
    except OSError:
        return 0
    return int.from_bytes(tail, "little") if tail and len(tail) == 4 else 0


def memory_guard(file_format: str, files: list[tuple[str, int]], limit_bytes: int) -> int:
    """Refuse a read that would need more memory than the limit, with the way out, rather
    than let the kernel kill TensorBoard. Returns the memory the read is expected to need."""
    needed = estimated_read_bytes(file_format, files)
    if limit_bytes <= 0:
        return needed
    if needed > limit_bytes:
        size_mb = sum(size for _, size in files) / 1e6
        raise OverLimit(
            files[0][0],
            f"too large to read here: {size_mb:,.0f} MB of trace needs about {needed / 1e9:,.1f} GB of memory, above "
            f"the {limit_bytes / 1e9:,.1f} GB limit (memory guard). Raise it with --opcompare_max_read_gb or "
            "`tb-opcompare --max-read-gb`, or precompute on a bigger machine with `tb-opcompare index` and share "
            "the cache directory",
        )
    return needed


# How long a read waits for others to finish before it is refused: a TensorBoard request
# thread waits, the tab shows a loading page meanwhile.
READ_WAIT_S = 120.0


class ReadBudget:
    """The one memory budget that concurrent reads share in a process: a read reserves
    what it is expected to need (``estimated_read_bytes``) and waits while the reads under
    way hold too much of the limit; past ``READ_WAIT_S`` it is refused with OverLimit (a
    refusal the cache never remembers: the next request may pass). Before, five cold
    reads of 86 MB traces at once took 1.5 GB against a 0.5 GB limit."""

    def __init__(self, wait_s: float = READ_WAIT_S):
        self._changed = threading.Condition()
        self._held = 0
        self.wait_s = wait_s
        self.peak_held = 0  # the most ever held at once (for a test to read)

    @contextlib.contextmanager
    def reserve(self, path: str, needed: int, limit_bytes: int):
        if limit_bytes <= 0:
            yield
            return
        needed = min(needed, limit_bytes)  # a read the guard let through alone waits for all the others
        deadline = time.monotonic() + self.wait_s
        with self._changed:
            while self._held + needed > limit_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OverLimit(
                        path,
                        (
                            f"waited {self.wait_s:,.0f} s for memory: reads under way hold {self._held / 1e9:,.2f} GB of "
                            f"the {limit_bytes / 1e9:,.1f} GB limit and this one needs about {needed / 1e9:,.2f} GB "
                            "(memory guard). Try again when they finish, or raise the limit with "
                            "--opcompare_max_read_gb or `tb-opcompare --max-read-gb`"
                        ),
                    )
                self._changed.wait(left)
            self._held += needed
            self.peak_held = max(self.peak_held, self._held)
        try:
            yield
        finally:
            with self._changed:
                self._held -= needed
                self._changed.notify_all()


READS = ReadBudget()  # the process's, shared by every catalog in it


def text_budget(file_format: str, limit_bytes: int) -> int | None:
    """How much decompressed text a read may produce within the memory limit."""
    return None if limit_bytes <= 0 else int(limit_bytes / peak_bytes_per_byte(file_format))
