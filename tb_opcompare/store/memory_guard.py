"""The memory guard: refuse a read that would need more memory than the machine can
spare, up front, with the way out, rather than let the kernel kill TensorBoard."""

from __future__ import annotations

import os

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
    total = 0
    for path, size in files:
        if path.endswith(".gz") and not fs.is_remote(path):
            size = max(size, _gzip_original_size(path))
        total += size * peak_bytes_per_byte(file_format)
    return int(total)


def _gzip_original_size(path: str) -> int:
    """The gzip trailer's size field (modulo 4 GiB): the uncompressed size."""
    try:
        with fs.open_regular(path) as handle:
            handle.seek(-4, os.SEEK_END)
            return int.from_bytes(handle.read(4), "little")
    except OSError:
        return 0


def memory_guard(file_format: str, files: list[tuple[str, int]], limit_bytes: int) -> None:
    """Refuse a read that would need more memory than the limit, with the way out, rather
    than let the kernel kill TensorBoard."""
    if limit_bytes <= 0:
        return
    needed = estimated_read_bytes(file_format, files)
    if needed > limit_bytes:
        size_mb = sum(size for _, size in files) / 1e6
        raise OverLimit(
            files[0][0],
            f"too large to read here: {size_mb:,.0f} MB of trace needs about {needed / 1e9:,.1f} GB of memory, above "
            f"the {limit_bytes / 1e9:,.1f} GB limit (memory guard). Raise it with --opcompare_max_read_gb or "
            "`tb-opcompare --max-read-gb`, or precompute on a bigger machine with `tb-opcompare index` and share "
            "the cache directory",
        )


def text_budget(file_format: str, limit_bytes: int) -> int | None:
    """How much decompressed text a read may produce within the memory limit."""
    return None if limit_bytes <= 0 else int(limit_bytes / peak_bytes_per_byte(file_format))
