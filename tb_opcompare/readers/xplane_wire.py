"""Walk an XSpace one XLine at a time instead of building the whole message tree.

A profile's protobuf objects take about ten times the file's size in memory when the
XSpace is parsed at once. Here only the wire framing is scanned: each XPlane's small
fields (name, metadata, stats) are parsed together, and its lines are parsed one by one
as a reader iterates ``plane.lines``, so at most one line's events are alive at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf.message import DecodeError

from .xplane_schema import XLine, XPlane

_SPACE_PLANES = 1
_PLANE_LINES = 3


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


def fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, start of its tag, start of its value, end of its value) for every
    length-delimited field in ``data[start:end]``; other wire types are skipped."""
    pos = start
    while pos < end:
        tag_start = pos
        key, pos = _varint(data, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise DecodeError(f"field number 0 at byte {tag_start}")
        if wire == 0:
            _, pos = _varint(data, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(data, pos, end)
            if pos + length > end:
                raise DecodeError(f"a field of {length} bytes at byte {pos} runs past the end ({end})")
            yield field, tag_start, pos, pos + length
            pos += length
        else:
            raise DecodeError(f"wire type {wire} at byte {tag_start}")
        if pos > end:
            raise DecodeError(f"truncated field at byte {tag_start}")


class PlaneView:
    """An XPlane whose ``lines`` are parsed on demand, one at a time."""

    def __init__(self, data: memoryview, start: int, end: int):
        self._data = data
        self._lines: list[tuple[int, int]] = []
        others = []
        for field, tag_start, value_start, value_end in fields(data, start, end):
            if field == _PLANE_LINES:
                self._lines.append((value_start, value_end))
            else:
                others.append(data[tag_start:value_end])
        # Varint fields (the plane id) are not needed; everything else is in `others`.
        meta = XPlane()
        meta.ParseFromString(b"".join(bytes(part) for part in others))
        self.name = meta.name
        self.event_metadata = meta.event_metadata
        self.stat_metadata = meta.stat_metadata
        self.stats = meta.stats

    @property
    def lines(self) -> Iterator:
        for start, end in self._lines:
            line = XLine()
            line.ParseFromString(bytes(self._data[start:end]))
            yield line


def split_space(data: bytes) -> list[PlaneView]:
    """The planes of a serialized XSpace. Raises DecodeError on broken framing."""
    view = memoryview(data)
    return [PlaneView(view, start, end)
            for field, _, start, end in fields(view, 0, len(view)) if field == _SPACE_PLANES]
