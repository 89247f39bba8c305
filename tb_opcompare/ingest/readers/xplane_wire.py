"""Walk an XSpace a bounded piece at a time instead of building the whole message tree.

A profile's protobuf objects take about seven times their wire size in memory, and one
XLine of a long host thread can hold most of a file. So only the wire framing is
scanned here: each XPlane's small fields (name, metadata, stats) are parsed together,
and its lines' events are parsed in batches of at most ``EVENT_BATCH_BYTES`` of wire
data, so memory stays the file plus one batch however large a line grows.

Planes are made one at a time, as the reader asks for them (an empty plane, two bytes of
wire and over a kilobyte once parsed, is skipped), and a wire that would cost far more
than its size is refused by counting elements before parsing them: more than
``MAX_PLANES`` planes, a plane whose metadata entries would need more than the read's
budget, or more events than the read's memory limit admits (``EventCount``).

The two loops that visit every event (cutting a big line into batches, and reading each
event's metadata id, offset and duration) run in the optional C extension
``_xplane_wire`` where it was built; ``TB_OPCOMPARE_PURE_PYTHON=1`` makes them use the
Python code here, which gives the same results. So does a third, for the many events
whose stats the reader needs (memory allocations and frees): ``EventBatch.wire_stats``
reads chosen stats of chosen events from the wire into arrays (``EventStats``), or gives
None without the C helper, for the caller to read the parsed events instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from tb_opcompare.ingest.readers.xplane_schema import XEvent, XLine, XPlane
from tb_opcompare.native import PURE_PYTHON_ENV as PURE_PYTHON_ENV  # where its tests meet it
from tb_opcompare.native import built, wanted

_compiled = built("ingest.readers._xplane_wire")


def native() -> ModuleType | None:
    """The C helpers, or None where they were not built or ``TB_OPCOMPARE_PURE_PYTHON``
    asks for the Python code (``native.wanted``)."""
    return wanted(_compiled)


_SPACE_PLANES = 1
_PLANE_LINES = 3
_LINE_NAME = 2
_LINE_EVENTS = 4
_LINE_EVENTS_TAG = (_LINE_EVENTS << 3) | 2  # one byte on the wire: 0x22

EVENT_BATCH_BYTES = 1 << 20
MAX_PLANES = 100_000  # one per host, device and derived view: a few hundred at most in real profiles
METADATA_ENTRY_BYTES = 256  # a parsed event/stat metadata entry and the reader's dict entry (measured 137 + 83)
_PLANE_NAME = 2
_PLANE_METADATA = (4, 5)  # event_metadata, stat_metadata


class TooManyElements(ValueError):
    """The wire holds more elements than a read may parse within its memory budget."""


# What one event may take once read (its op's occurrence columns, its line's arrays): about
# 53 B on the 32.5 MB Keras xplane of ``make bench`` (25 B of wire each), 100 B on a flood
# of one TF op's 9-byte events (issue 55). Below the 3x of wire the memory guard allows a
# real event, above what a flood of tiny events gets.
EVENT_BYTES = 64


class EventCount:
    """The events a read has come to, counted a batch at a time before each batch is read
    (``LineView.event_batches``), against what its memory limit admits: a limit in bytes
    alone let 12 M tiny events in 96 MB take 1.9 GB at a 0.3 GB limit."""

    def __init__(self, max_read_bytes: int | None):
        self.most = None if max_read_bytes is None else max_read_bytes // EVENT_BYTES
        self.seen = 0

    def add(self, count: int) -> None:
        self.seen += count
        if self.most is not None and self.seen > self.most:
            raise TooManyElements(
                f"more than {self.most:,} events (at {EVENT_BYTES} bytes each once read, about "
                f"{self.most * EVENT_BYTES / 1e9:,.2f} GB), and {self.seen:,} counted so far"
            )


class TooManyPlanes(ValueError):
    """More planes than any profiler writes: a broken or hostile file, whatever the budget."""


def _varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise DecodeError(f"truncated varint at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError(f"varint too long at byte {pos}")


def _skip(data: memoryview, tag_start: int, end: int) -> tuple[int, int, int]:
    """(field number, start of the value, end of the value) of the field at ``tag_start``;
    for varint and fixed-width fields the value span is returned but not decoded."""
    key, pos = _varint(data, tag_start, end)
    field, wire = key >> 3, key & 7
    if field == 0:
        raise DecodeError(f"field number 0 at byte {tag_start}")
    if wire == 0:
        _, value_end = _varint(data, pos, end)
    elif wire == 1:
        value_end = pos + 8
    elif wire == 5:
        value_end = pos + 4
    elif wire == 2:
        length, pos = _varint(data, pos, end)
        value_end = pos + length
    else:
        raise DecodeError(f"wire type {wire} at byte {tag_start}")
    if value_end > end:
        raise DecodeError(f"a field at byte {tag_start} runs past the end ({end})")
    return field, pos, value_end


def fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, start of its tag, start of its value, end of its value) for every
    field in ``data[start:end]``."""
    pos = start
    while pos < end:
        field, value_start, value_end = _skip(data, pos, end)
        yield field, pos, value_start, value_end
        pos = value_end


# What ``EventStats.kinds`` says of a stat: the event has none, it holds no value, or the
# field number of the value its oneof holds (XStat's numbering)
STAT_ABSENT, STAT_WITHOUT_VALUE = 0, 1
STAT_DOUBLE, STAT_UINT64, STAT_INT64, STAT_STR, STAT_BYTES, STAT_REF = 2, 3, 4, 5, 6, 7
# Added to a kind, where asked for (``wire_stats(flag_repeats=True)``): the event held more
# than one stat of that column, of which the row keeps the last
STAT_REPEATED = 256


class EventStats(NamedTuple):
    """Chosen stats of a batch's chosen events (``EventBatch.wire_stats``), a column per
    stat: where an event holds several stats of one column, the last one, as a dict built
    from its stats in order would keep."""

    indices: np.ndarray  # the events' positions in the batch, in wire order
    kinds: np.ndarray  # (events, columns) of STAT_*
    # (events, columns) int64: the int64; a uint64's or a ref_value's bits (view them as
    # uint64), a double's bits (view them as float64); for STAT_STR an index into ``texts``;
    # 0 for the other kinds
    values: np.ndarray
    texts: list[str]  # the distinct str values, each decoded once


class EventBatch(Sequence):
    """XEvents and the wire span they come from, so that what every event needs
    (``wire_ints``), and the stats of the many events whose stats are all read
    (``wire_stats``), can be read from the wire in C while parsed events serve the few
    others whose stats are read.

    Nothing is parsed by protobuf before it is asked for. Once ``wire_ints`` has found each
    event's bytes, an index into the batch parses that one event alone: a batch's few step
    markers and shape probes no longer parse its thousands of other events (that parsing
    was a fifth of a big xplane's read). Iterating, ``len`` or ``events`` parse the span
    whole, as before."""

    __slots__ = ("_events", "_data", "_start", "_end", "_spans", "_parsed", "_scanned")

    def __init__(self, events, data: memoryview, start: int, end: int):
        self._events = events  # None: parsed from data[start:end] when first asked for
        self._data, self._start, self._end = data, start, end
        self._spans: np.ndarray | None = None  # (start, end) of each event's bytes, from wire_ints
        self._parsed: dict[int, object] = {}  # events parsed alone, by index
        self._scanned: tuple | None = None  # what scan() found: (ints, spans), or () where the C helper refused

    def scan(self) -> None:
        """Read the events' integers and byte spans from the wire now, in C without the
        GIL, for ``wire_ints``: a thread may do it ahead of the reader (``scanned_ahead``)."""
        helpers = native()
        if helpers is None or self._scanned is not None:
            return
        try:
            self._scanned = helpers.event_ints(self._data, self._start, self._end, True)
        except helpers.WireError:
            # protobuf's reading of the bytes answers instead: its error where they are
            # broken, its events where only the C code refuses them (groups nested past its limit)
            self._scanned = ()

    @property
    def events(self):
        if self._events is None:
            chunk = XLine()
            chunk.ParseFromString(bytes(self._data[self._start : self._end]))
            self._events = chunk.events
        return self._events

    def __len__(self) -> int:
        return len(self.events)

    def event_count(self) -> int:
        """How many events the batch holds: from the C helper's scan of the wire (kept for
        ``wire_ints``), else from the parsed events."""
        self.scan()
        return len(self._scanned[0]) // 24 if self._scanned else len(self.events)

    def __getitem__(self, index):
        if self._events is not None or self._spans is None or not isinstance(index, int):
            return self.events[index]
        event = self._parsed.get(index)
        if event is None:
            start, end = self._spans[index].tolist()
            event = self._parsed[index] = XEvent.FromString(bytes(self._data[start:end]))
        return event

    def __iter__(self):
        return iter(self.events)

    def wire_ints(self) -> bytearray | None:
        """metadata_id, offset_ps, duration_ps of each event as native int64 triples, read
        from the wire by the C helper; None without it, where it refuses the wire, or where
        the batch was parsed and protobuf counts other events (a safeguard: the tests check
        the values are protobuf's), for the caller to read them from ``events`` instead,
        which raises protobuf's own error on a broken span."""
        self.scan()
        if not self._scanned:
            return None
        ints, spans = self._scanned
        if self._events is not None and len(ints) != 24 * len(self._events):
            return None
        self._spans = np.frombuffer(spans, dtype=np.int64).reshape(-1, 2)
        return ints

    def wire_stats(
        self,
        event_ids: Sequence[int] | None,
        stat_columns: Mapping[int, int],
        column_count: int,
        flag_repeats: bool = False,
    ) -> EventStats | None:
        """The stats of the events whose metadata id is in ``event_ids`` (None: of every
        event), read from the wire by the C helper: the stat of metadata id ``m`` in column
        ``stat_columns[m]`` (several ids may share a column; ``flag_repeats`` marks where
        an event held several, ``STAT_REPEATED``). None without the helper or where it
        refuses the wire, for the caller to read the parsed events instead."""
        helpers = native()
        if helpers is None:
            return None
        try:
            rows, spans = helpers.event_stats(
                self._data, self._start, self._end, event_ids, dict(stat_columns), column_count, flag_repeats
            )
        except helpers.WireError:  # as in wire_ints: protobuf's reading of the bytes answers
            return None
        try:
            texts = [str(self._data[offset : offset + length], "utf-8") for offset, length in spans]
        except UnicodeDecodeError:
            # protobuf checks a str is UTF-8 when it parses the batch: the parsed events give
            # protobuf's own reading of it (or its error)
            return None
        table = np.frombuffer(rows, dtype=np.int64).reshape(-1, 1 + 2 * column_count)
        return EventStats(table[:, 0], table[:, 1::2], table[:, 2::2], texts)


class LineView:
    """An XLine: its small fields at once, its events in batches (``event_batches``),
    each batch counted in ``events`` (where given) before it is handed out."""

    def __init__(self, data: memoryview, start: int, end: int, events: EventCount | None = None):
        self._data = data
        self._count = events
        if end - start <= EVENT_BATCH_BYTES and native() is None:
            # without the C helper a small line is parsed whole: cutting it in Python costs more
            line = XLine()
            line.ParseFromString(bytes(data[start:end]))
            self._whole: XLine | None = line
            self._batches: list[tuple[int, int]] = [(start, end)]  # one batch: the whole line
        else:
            self._whole = None
            header, self._batches = split_events(data, start, end)
            line = XLine()
            line.ParseFromString(header)
        self.id = line.id
        self.name = line.name
        self.timestamp_ns = line.timestamp_ns

    def event_batches(self) -> Iterator[EventBatch]:
        """The line's events, in wire order, a batch at a time. Drop each batch before
        asking for the next: that is what bounds memory. Raises TooManyElements before
        handing out a batch past the read's count of events."""
        for batch in self._batches_of_line():
            if self._count is not None:
                self._count.add(batch.event_count())
            yield batch

    def _batches_of_line(self) -> Iterator[EventBatch]:
        if self._whole is not None:
            # parsed when the view was made; the C reader skips the line's non-event fields
            ((start, end),) = self._batches
            yield EventBatch(self._whole.events, self._data, start, end)
            return
        if len(self._batches) > 1 and native() is not None:
            yield from scanned_ahead(self._data, self._batches)
            return
        for start, end in self._batches:
            yield EventBatch(None, self._data, start, end)  # parsed only if an event is asked for


def scanned_ahead(data: memoryview, spans: list[tuple[int, int]]) -> Iterator[EventBatch]:
    """The batches of these spans in order, each one's wire scanned (``EventBatch.scan``,
    C without the GIL) in a thread while the caller works on the one before: the second
    core on one big line. Only the batch handed out and the one being scanned exist at a
    time (each made when its turn comes), so memory stays bounded by two batches. The
    stats stay with the caller (``wire_stats``, C too): read ahead as well, they made the
    thread the slower side (warm reads, median of 7: a 32 MB GPU xplane 0.15 -> 0.16-0.24 s,
    the 31 MB Keras one 0.16 -> 0.16-0.20 s)."""
    import concurrent.futures  # only a big line's read needs a thread

    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="xplane-scan") as pool:
        following = EventBatch(None, data, *spans[0])
        ahead = pool.submit(following.scan)
        for span in spans[1:]:
            ahead.result()
            batch = following
            following = EventBatch(None, data, *span)
            ahead = pool.submit(following.scan)
            yield batch
            del batch  # the caller's drop of it frees it
        ahead.result()
        yield following


def split_events(data: memoryview, start: int, end: int) -> tuple[bytes, list[tuple[int, int]]]:
    """``_split_events``, in C where it was built (same batches, same errors)."""
    helpers = native()
    if helpers is None:
        return _split_events(data, start, end)
    try:
        return helpers.split_events(data, start, end, EVENT_BATCH_BYTES)
    except helpers.WireError as error:
        raise DecodeError(str(error)) from None


def _split_events(data: memoryview, start: int, end: int) -> tuple[bytes, list[tuple[int, int]]]:
    """Cut a line into its non-event fields and runs of whole event fields of about
    ``EVENT_BATCH_BYTES`` each. This loop visits every event of the biggest lines, so
    the common case (a one-byte tag, a short length) is handled inline."""
    header: list[bytes] = []
    batches: list[tuple[int, int]] = []
    batch_start = -1
    pos = start
    while pos < end:
        if data[pos] == _LINE_EVENTS_TAG:
            if batch_start < 0:
                batch_start = pos
            value_start = pos + 1
            byte = data[value_start] if value_start < end else 0x80
            if byte < 0x80:
                value_end = value_start + 1 + byte
                if value_end > end:
                    raise DecodeError(f"an event at byte {pos} runs past the end of its line ({end})")
            else:
                _, _, value_end = _skip(data, pos, end)
            pos = value_end
            if pos - batch_start >= EVENT_BATCH_BYTES:
                batches.append((batch_start, pos))
                batch_start = -1
        else:
            _, _, value_end = _skip(data, pos, end)
            header.append(bytes(data[pos:value_end]))
            pos = value_end
    if batch_start >= 0:
        batches.append((batch_start, pos))
    return b"".join(header), batches


class PlaneView:
    """An XPlane whose ``lines`` are read on demand, one at a time."""

    def __init__(self, data: memoryview, start: int, end: int, max_metadata_bytes: int | None = None, events=None):
        self._data = data
        self._events = events  # the read's EventCount, for its lines
        # The lines are found again each time they are read, never listed: a list of 3,000,000
        # empty lines (6 MB on the wire) held 400 MB of spans.
        self._span = (start, end)
        header, entries = plane_header(data, start, end)
        if max_metadata_bytes is not None and entries * METADATA_ENTRY_BYTES > max_metadata_bytes:
            raise TooManyElements(
                f"a plane holds {entries:,} metadata entries, which would need about "
                f"{entries * METADATA_ENTRY_BYTES / 1e9:,.1f} GB once parsed"
            )
        meta = XPlane()
        meta.ParseFromString(header)
        self.name = meta.name
        self.event_metadata = meta.event_metadata
        self.stat_metadata = meta.stat_metadata
        self.stats = meta.stats

    @property
    def lines(self) -> Iterator[LineView]:
        for start, end in _line_spans(self._data, *self._span):
            yield LineView(self._data, start, end, self._events)


def _line_spans(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each non-empty XLine of the XPlane in ``data[start:end]``."""
    helpers = native()
    if helpers is None:
        for field, _, line_start, line_end in fields(data, start, end):
            if field == _PLANE_LINES and line_end > line_start:  # an empty line holds no event
                yield line_start, line_end
        return
    # in C: a plane may hold 100,000 stats beside its lines (JAX's scope range tree)
    pos = start
    while True:
        try:
            found = helpers.next_line(data, pos, end)
        except helpers.WireError as error:  # plane_header walked these bytes first: never seen
            raise DecodeError(str(error)) from None
        if found is None:
            return
        line_start, line_end, pos = found
        yield line_start, line_end


def plane_header(data: memoryview, start: int, end: int) -> tuple[bytes, int]:
    """The fields of an XPlane other than its lines, joined, and how many event and stat
    metadata entries it holds: in C where it was built (same results, same errors)."""
    helpers = native()
    if helpers is not None:
        try:
            return helpers.plane_header(data, start, end)
        except helpers.WireError as error:
            raise DecodeError(str(error)) from None
    others = []
    entries = 0
    for field, tag_start, _, value_end in fields(data, start, end):
        if field != _PLANE_LINES:
            entries += field in _PLANE_METADATA
            others.append(data[tag_start:value_end])
    return b"".join(bytes(part) for part in others), entries


class SpaceView:
    """A serialized XSpace: the names of its planes at once (read from the wire without
    parsing the planes), the planes themselves one at a time (``planes``). Raises
    DecodeError on broken framing and TooManyElements past the bounds above."""

    def __init__(self, data: bytes, max_metadata_bytes: int | None = None, events: EventCount | None = None):
        self._view = memoryview(data)
        self._max_metadata_bytes = max_metadata_bytes
        self._events = events
        self._spans: list[tuple[int, int]] = []
        self.names: list[str] = []
        self.current: str | None = None
        for field, _, start, end in fields(self._view, 0, len(self._view)):
            if field != _SPACE_PLANES or end == start:  # an empty plane holds nothing to read
                continue
            if len(self._spans) == MAX_PLANES:
                raise TooManyPlanes(
                    f"the XSpace holds more than {MAX_PLANES:,} planes (profilers write one per "
                    "device and host view, a few hundred at most)"
                )
            self._spans.append((start, end))
            self.names.append(_plane_name(self._view, start, end))

    def let_go(self) -> None:
        """Hold the file's bytes no longer (every plane read): no plane can be made after."""
        self._view, self._spans, self.names = memoryview(b""), [], []

    def has_line(self, plane_prefix: str, line_name: str) -> bool:
        """Whether a plane named ``plane_prefix...`` holds a line named ``line_name``,
        read from the wire without making the planes: a line's name comes before its
        events, as writers order the fields (a line that names itself after them reads
        as not named so)."""
        for (start, end), name in zip(self._spans, self.names):
            if name.startswith(plane_prefix):
                for line_start, line_end in _line_spans(self._view, start, end):
                    for field, _, value_start, value_end in fields(self._view, line_start, line_end):
                        if field == _LINE_NAME:
                            if bytes(self._view[value_start:value_end]) == line_name.encode():
                                return True
                            break
                        if field == _LINE_EVENTS:
                            break
        return False

    def planes(self, first: str | None = None, rank: Callable[[str], int] | None = None) -> Iterator[PlaneView]:
        """Each plane in turn, those named ``first`` before the rest (what they say can
        decide how the others read), or in the order of ``rank`` of their names (lowest
        first, file order among equals); ``current`` names the one being made or read, for
        errors."""
        key = rank if rank is not None else (lambda name: name != first)
        order = sorted(range(len(self.names)), key=lambda index: key(self.names[index]))
        for index in order:
            (start, end), name = self._spans[index], self.names[index]
            self.current = name
            yield PlaneView(self._view, start, end, self._max_metadata_bytes, self._events)


def _plane_name(data: memoryview, start: int, end: int) -> str:
    for field, _, value_start, value_end in fields(data, start, end):
        if field == _PLANE_NAME:
            return bytes(data[value_start:value_end]).decode("utf-8", "replace")
    return ""


def split_space(data: bytes, max_metadata_bytes: int | None = None, events: EventCount | None = None) -> SpaceView:
    """The planes of a serialized XSpace (see ``SpaceView``); ``events``: the read's count
    of events, shared by every file of its session."""
    return SpaceView(data, max_metadata_bytes, events)
