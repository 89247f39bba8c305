"""Ranks of one distributed job: which trace files are workers of one job, read together
as one run.

PyTorch's profiler writes one trace per process. In a data-parallel job every rank
writes its own (``tensorboard_trace_handler`` names each ``<host>_<pid>.<ms>.pt.trace.json``
in one folder), and kineto records the job in each trace's ``distributedInfo``
(``{"backend": "nccl", "rank": 1, "world_size": 8}``, near the top of the file). Files of
one folder whose heads name distinct ranks of one world are one capture of one job: the
k-th file of every rank (in time order) is the job's k-th capture. Only the first bytes of
each file are looked at, as discovery looks at them."""

from __future__ import annotations

import dataclasses
import re

_DISTRIBUTED = re.compile(rb'"distributedInfo"\s*:\s*\{([^{}]*)')
_FIELD = re.compile(rb'"(rank|world_size|backend)"\s*:\s*"?([A-Za-z0-9_]+)"?')


@dataclasses.dataclass(frozen=True)
class Rank:
    rank: int
    world_size: int
    backend: str | None


def rank_of(head: bytes) -> Rank | None:
    """The rank a trace's first bytes name (``distributedInfo``); None where they name none."""
    found = _DISTRIBUTED.search(head)
    if not found:
        return None
    fields = {key.decode(): value.decode() for key, value in _FIELD.findall(found.group(1))}
    try:
        rank, world = int(fields["rank"]), int(fields["world_size"])
    except (KeyError, ValueError):
        return None
    if not 0 <= rank < world <= 1_000_000:
        return None
    return Rank(rank, world, fields.get("backend"))


def group_ranks(files: list[str], ranks: list[Rank | None]) -> list[list[str]] | None:
    """The captures of one job: ``files`` (in time order) grouped so that each group holds
    one file of each rank found, the k-th of every rank together; None unless every file
    names a rank of one world and of one backend, and two ranks or more are there."""
    known = [rank for rank in ranks if rank is not None]
    if len(files) < 2 or len(known) < len(ranks):
        return None
    if len({(rank.world_size, rank.backend) for rank in known}) != 1 or len({rank.rank for rank in known}) < 2:
        return None
    by_rank: dict[int, list[str]] = {}
    for path, rank in zip(files, known):
        by_rank.setdefault(rank.rank, []).append(path)
    captures = max(len(paths) for paths in by_rank.values())
    return [[paths[k] for _, paths in sorted(by_rank.items()) if k < len(paths)] for k in range(captures)]
