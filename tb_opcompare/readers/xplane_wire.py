"""Walk an XSpace a bounded piece at a time instead of building the whole message tree.

A profile's protobuf objects take about seven times their wire size in memory, and one
XLine of a long host thread can hold most of a file. So only the wire framing is
scanned here: each XPlane's small fields (name, metadata, stats) are parsed together,
and its lines' events are parsed in batches of at most ``EVENT_BATCH_BYTES`` of wire
data, so memory stays the file plus one batch however large a line grows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from google.protobuf.message import DecodeError

from .xplane_schema import XLine, XPlane

_SPACE_PLANES = 1
_PLANE_LINES = 3
_LINE_EVENTS = 4
_LINE_EVENTS_TAG = (_LINE_EVENTS << 3) | 2  # one byte on the wire: 0x22

EVENT_BATCH_BYTES = 1 << 20


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


class LineView:
    """An XLine: its small fields at once, its events in batches (``event_batches``)."""

    def __init__(self, data: memoryview, start: int, end: int):
        self._data = data
        if end - start <= EVENT_BATCH_BYTES:
            line = XLine()
            line.ParseFromString(bytes(data[start:end]))
            self._whole: XLine | None = line
            self._batches: list[tuple[int, int]] = []
        else:
            self._whole = None
            header, self._batches = _split_events(data, start, end)
            line = XLine()
            line.ParseFromString(header)
        self.name = line.name
        self.timestamp_ns = line.timestamp_ns

    def event_batches(self) -> Iterator[Sequence]:
        """The line's events, in wire order, a batch at a time. Drop each batch before
        asking for the next: that is what bounds memory."""
        if self._whole is not None:
            yield self._whole.events  # a line of at most one batch, parsed when the view was made
            return
        for start, end in self._batches:
            chunk = XLine()
            chunk.ParseFromString(bytes(self._data[start:end]))
            events = chunk.events
            del chunk
            yield events


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

    def __init__(self, data: memoryview, start: int, end: int):
        self._data = data
        self._lines: list[tuple[int, int]] = []
        others = []
        for field, tag_start, value_start, value_end in fields(data, start, end):
            if field == _PLANE_LINES:
                self._lines.append((value_start, value_end))
            else:
                others.append(data[tag_start:value_end])
        meta = XPlane()
        meta.ParseFromString(b"".join(bytes(part) for part in others))
        self.name = meta.name
        self.event_metadata = meta.event_metadata
        self.stat_metadata = meta.stat_metadata
        self.stats = meta.stats

    @property
    def lines(self) -> Iterator[LineView]:
        for start, end in self._lines:
            yield LineView(self._data, start, end)


def split_space(data: bytes) -> list[PlaneView]:
    """The planes of a serialized XSpace. Raises DecodeError on broken framing."""
    view = memoryview(data)
    return [PlaneView(view, start, end)
            for field, _, start, end in fields(view, 0, len(view)) if field == _SPACE_PLANES]
