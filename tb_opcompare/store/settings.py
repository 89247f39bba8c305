"""Where parsed profiles are kept and how much a read may cost: one rule for the
TensorBoard flags and the CLI options. Imports nothing heavy (TensorBoard start-up
reads this)."""

from __future__ import annotations

import dataclasses
import math
import os
import sys

ENV_CACHE_DIR = "TB_OPCOMPARE_CACHE_DIR"
ENV_CACHE_MAX_GB = "TB_OPCOMPARE_CACHE_MAX_GB"
DEFAULT_CACHE_MAX_GB = 5.0  # ccache's default; a 31 MB xplane's entry is 11 MB


def default_cache_dir() -> str:
    """``$TB_OPCOMPARE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb-opcompare``, else
    ``~/.cache/tb-opcompare``: a per-user place, never the logdir."""
    if os.environ.get(ENV_CACHE_DIR):
        return os.environ[ENV_CACHE_DIR]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb-opcompare")


UNBOUNDED = sys.maxsize


def cache_max_bytes(cache_max_gb: float | None = None) -> int:
    """The cache folder's bound: ``cache_max_gb`` where given (above 0), else
    ``$TB_OPCOMPARE_CACHE_MAX_GB``, else 5 GB; ``inf``: no bound (``UNBOUNDED``)."""
    if not cache_max_gb or not cache_max_gb > 0:  # not given, 0 or below, NaN
        try:
            cache_max_gb = float(os.environ.get(ENV_CACHE_MAX_GB) or DEFAULT_CACHE_MAX_GB)
        except ValueError:
            cache_max_gb = DEFAULT_CACHE_MAX_GB
        if not cache_max_gb > 0:
            cache_max_gb = DEFAULT_CACHE_MAX_GB
    scaled = cache_max_gb * 1e9  # inf, or a finite number past float's range once scaled: no bound
    return UNBOUNDED if math.isinf(scaled) or scaled >= UNBOUNDED else int(scaled)


@dataclasses.dataclass(frozen=True)
class ReadSettings:
    cache_dir: str | None  # None: parsed profiles are kept in memory only
    max_trace_bytes: int | None  # None: the memory guard's default (half of this machine's memory)
    cache_max_bytes: int = dataclasses.field(default_factory=cache_max_bytes)  # the cache folder's bound

    @classmethod
    def from_options(
        cls, cache_dir: str | None, no_cache: bool, max_read_gb: float | None, cache_max_gb: float | None = None
    ) -> ReadSettings:
        chosen = cache_dir or default_cache_dir()
        kept = None if no_cache or chosen.lower() == "none" else chosen
        limit = int(max_read_gb * 1e9) if max_read_gb and max_read_gb > 0 else None
        return cls(cache_dir=kept, max_trace_bytes=limit, cache_max_bytes=cache_max_bytes(cache_max_gb))
