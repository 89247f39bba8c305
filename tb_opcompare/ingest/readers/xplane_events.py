"""What both plane readers of an xplane share: reading events and stats.

An event batch's three integers (metadata id, offset, duration) as one array
(``event_ints``: from the wire where the C helper was built), metadata ids mapped to
codes (``IdLookup``), a stat's text or number (from a parsed stat, or as codes and
numbers from the wire's arrays), a plane's own stats, the error for events whose times
cannot be trusted (``BrokenEvents``), and how an XLA op is named and its work looked up
(``hlo_op``, ``framework_rows``, ``xla_costs``): a host's compiled op and a device's
kernel of one meet by that name.

Separate so that the host planes' reader (``xplane_host``) and the device planes'
(``xplane_device``) share these without importing each other.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable

import numpy as np

from tb_opcompare.ingest.readers.xla_cost import XlaPrograms
from tb_opcompare.ingest.readers.xplane_wire import STAT_REF, STAT_STR
from tb_opcompare.schema.groups import first_appearance


def plane_stat_names(plane) -> dict[int, str]:
    return {entry.key: entry.value.name for entry in plane.stat_metadata}


def plane_event_names(plane) -> dict[int, str]:
    """The plane's event names by metadata id. ``event_metadata`` is a map, a repeated
    key/value entry on the wire: where a key is given twice the last entry wins, as
    protobuf and xprof read a map."""
    return {entry.key: entry.value.name for entry in plane.event_metadata}


def xla_costs(keys: list[tuple[str, str]], codes: list[int], ran: set[int], programs: XlaPrograms) -> list:
    """Per key, the work of one execution of the XLA op it names where ``codes`` holds its
    code (or why it is unknown), None for the rest."""
    costs: list = [None] * len(keys)
    for code in codes:
        costs[code] = programs.cost(keys[code][0], ran)
    return costs


def framework_rows(
    keys: list[tuple[str, str]], codes: list[int], searched: Callable[[int], set[int]], programs: XlaPrograms
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], np.ndarray]:
    """XLA ops named by what they compute: each key at ``codes`` (an instruction, as
    ``hlo_op`` names it) becomes its framework op's row (``XlaPrograms.framework_row``,
    looked up in the programs ``searched(code)`` names), so that two compilations, which
    number their instructions differently, meet op by op; the rest keep their keys.
    Returns each code's row (instructions of one framework op and kind share one), the
    distinct rows in the order first met, and each code's number among them."""
    rows = list(keys)
    for code in codes:
        name, kind = keys[code]
        rows[code] = programs.framework_row(name, kind, searched(code)) or keys[code]
    renumbered, distinct = first_appearance(rows)
    return rows, distinct, renumbered


_HLO_INSTANCE = re.compile(r"\.\d+$")


def hlo_op(name: str, instance: re.Pattern = _HLO_INSTANCE) -> tuple[str, str]:
    """An XLA op's instruction: named as XLA names it (``convolution.2``), typed without the
    instance number (``convolution``), so that the same kind of op meets across runs
    whose modules number them differently. A kernel's name ends in its number after an
    underscore instead (``loop_add_fusion_26``): ``instance`` says which. Its row is its
    framework op's where its program tells it (``framework_rows``); an instruction
    whose metadata and users name no one framework op (or whose program is not known)
    keeps this name."""
    return name, instance.sub("", name) or name


class Texts:
    """The distinct texts of a batch's stats, so that arrays carry them as codes; ``""``
    is code 0."""

    def __init__(self):
        self.names: list[str] = [""]
        self._codes: dict[str, int] = {"": 0}

    def code(self, text: str) -> int:
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self.names)
            self.names.append(text)
        return code


def stat_text_codes(
    kinds: np.ndarray, values: np.ndarray, wire_texts: np.ndarray, stat_names: dict[int, str], texts: Texts
) -> np.ndarray:
    """``stat_text`` of stats as ``EventStats`` holds them, as codes of ``texts``
    (``wire_texts``: the code of each of its str values)."""
    codes = np.zeros(len(kinds), dtype=np.int64)
    is_str = kinds == STAT_STR
    codes[is_str] = wire_texts[values[is_str]]
    is_ref = kinds == STAT_REF
    if is_ref.any():
        refs, where = np.unique(values[is_ref].view(np.uint64), return_inverse=True)
        ref_codes = [texts.code(stat_names.get(ref, "")) for ref in refs.tolist()]
        codes[is_ref] = np.asarray(ref_codes, dtype=np.int64)[where]
    return codes


def int_value(stat) -> int | None:
    """An integer stat's value; None where it holds no integer."""
    which = stat.WhichOneof("value")
    return getattr(stat, which) if which in ("int64_value", "uint64_value") else None


def number(stat) -> float:
    """A numeric stat's value (0 where absent or not a number)."""
    if stat is None:
        return 0.0
    which = stat.WhichOneof("value")
    value = getattr(stat, which) if which in ("int64_value", "uint64_value", "double_value") else 0
    return float(value) if 0 <= value < 1 << 62 else 0.0


class IdLookup:
    """Maps event metadata ids (arbitrary int64) to codes (non-negative), vectorised: -1
    for an id it does not hold. Writers number their metadata from 1 up, so the ids
    usually index a table (a plain gather, about five times a binary search's speed on a
    big line); ids spread wider are searched."""

    _TABLE_SLACK = 1 << 16  # a table may be this much longer than the ids it holds

    def __init__(self, ids: list[int], codes: list[int]):
        order = np.argsort(np.asarray(ids, dtype=np.int64))
        self._ids = np.asarray(ids, dtype=np.int64)[order]
        self._codes = np.asarray(codes, dtype=np.int64)[order]
        self._table = None
        if len(self._ids) and self._ids[0] >= 0 and self._ids[-1] < 4 * len(self._ids) + self._TABLE_SLACK:
            self._table = np.full(int(self._ids[-1]) + 2, -1, dtype=np.int64)  # the last slot: ids past it
            self._table[self._ids] = self._codes

    def codes(self, ids: np.ndarray) -> np.ndarray:
        """The code of each id, -1 where it has none."""
        if not len(self._ids):
            return np.full(len(ids), -1, dtype=np.int64)
        if self._table is not None:
            return self._table[np.clip(ids, -1, len(self._table) - 1)]  # -1 and past the end: the last slot
        where = np.searchsorted(self._ids, ids).clip(max=len(self._ids) - 1)
        return np.where(self._ids[where] == ids, self._codes[where], -1)


_EVENT_INTS = operator.attrgetter("metadata_id", "offset_ps", "duration_ps")


def event_ints(batch) -> np.ndarray:
    """(n, 3) int64 array of each event's metadata id, offset and duration: decoded from
    the batch's wire bytes by the C extension where it is built (touching no parsed
    event), else read from the parsed events (``_event_ints_python``)."""
    wire_ints = getattr(batch, "wire_ints", None)
    ints = wire_ints() if wire_ints is not None else None
    if ints is None:
        return _event_ints_python(batch)
    return np.frombuffer(ints, dtype=np.int64).reshape(-1, 3)


def _event_ints_python(batch) -> np.ndarray:
    """``event_ints`` from the parsed events: attrgetter and fromiter keep the loop out of
    the interpreter, but every event object is still visited."""
    flat = itertools.chain.from_iterable(map(_EVENT_INTS, batch))
    return np.fromiter(flat, dtype=np.int64, count=3 * len(batch)).reshape(-1, 3)


class BrokenEvents(ValueError):
    """Events whose times cannot be trusted; the message names what is wrong."""


def plane_stats(plane, stat_names: dict[int, str]) -> dict[str, str | int | float | bytes]:
    """The plane's own stats by name: text or number (``gpu_device_name``, ``core_count``,
    ``jax_version`` on JAX's metadata plane), or the bytes of a ``bytes_value``."""
    values: dict[str, str | int | float | bytes] = {}
    for stat in plane.stats:
        which = stat.WhichOneof("value")
        if which:
            values[stat_names.get(stat.metadata_id, "")] = (
                stat_text(stat, stat_names) if which in ("ref_value", "str_value") else getattr(stat, which)
            )
    return values


def stat_text(stat, stat_names: dict[int, str]) -> str:
    if stat.WhichOneof("value") == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return stat.str_value
