"""Decoding of Chrome-trace JSON (plain or gzipped) into typed events.

msgspec decodes straight into Structs that declare only the fields the readers use,
so the rest of each event (call stacks, shapes of every input, ...) is skipped
without building Python objects for it. Big traces are decoded a batch of events at
a time (``TraceText``) so that they never exist as Python objects all at once.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import functools
import re
import types
import zlib
from collections.abc import Iterator
from typing import Any, TypeVar

import msgspec
import numpy as np

from tb_opcompare.errors import OverLimit, ProfileError, escape_control_characters

WHOLE_TEXT_BYTES = 16 << 20
BATCH_BYTES = 4 << 20
BATCH_EVENTS = 8192
RAW_BYTES_PER_OBJECT = 64  # one msgspec.Raw and its list slot, measured (CPython 3.11, msgspec 0.22)
# What an event costs once read, text included, measured on 1.5 million tiny events
# (CPython 3.11, msgspec 0.22): a TraceEvent with its args and what the TF readers build
# from it peaked at 817 bytes; a PyTorch event read in batches at 347.
MATERIALIZED_BYTES_PER_EVENT = 800
BATCHED_BYTES_PER_EVENT = 350
NEWLINE = b"\n"


class EventArgs(msgspec.Struct, gc=False):
    name: str | None = None  # TF1 timeline: node name; metadata events: process/thread name
    op: str | None = None  # TF1 timeline: op type
    tf_op: str | None = None  # TF 2.x trace viewer: kernel's TF op
    level0: str | None = msgspec.field(default=None, name="level 0")
    annotation: str | None = None
    long_name: str | None = None  # TF 2.x trace viewer: "<op_name>:<op_type>" of a host op
    shape: str | None = None  # TF 2.x trace viewer: input shapes of a host op
    # TF 2.x trace viewer, read by tf_trace_json as it finds them (any JSON value: a file that
    # writes another kind here is not broken, the value is just not evidence)
    shapes: Any = None  # a tf.data iterator's element shapes
    step_num: Any = None  # a step marker's step
    batch_size: Any = None  # Keras 2's step event; a batch dataset's declared size
    group_id: Any = None  # a kernel's step group (text in the trace viewer's JSON)
    correlation_id: Any = None  # a kernel's and its host launch's shared id


class BaseEvent(msgspec.Struct, gc=False):
    """The fields every reader needs; readers subclass it with the ``args`` they read."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float | None = None


class TraceEvent(BaseEvent, gc=False):
    args: EventArgs | None = None


class DeviceProperties(msgspec.Struct):
    name: str = ""


class ChromeTrace(msgspec.Struct):
    traceEvents: list[TraceEvent]
    deviceProperties: list[DeviceProperties] | None = None


_Event = TypeVar("_Event", bound=msgspec.Struct)  # the Struct a reader decodes events as


@functools.cache
def _decoders(event_type: type) -> tuple[msgspec.json.Decoder, msgspec.json.Decoder, msgspec.json.Decoder]:
    """(decoder of a whole trace object, of a JSON array of events, of one event) for one
    event Struct."""
    trace_type = msgspec.defstruct(
        f"{event_type.__name__}Trace",
        [("traceEvents", _list_of(event_type)), ("deviceProperties", list[DeviceProperties] | None, None)],
    )
    return (
        msgspec.json.Decoder(trace_type),
        msgspec.json.Decoder(_list_of(event_type)),
        msgspec.json.Decoder(event_type),
    )


def _list_of(event_type: type) -> types.GenericAlias:
    """``list[event_type]`` of a type known only when called (what the subscript makes)."""
    return types.GenericAlias(list, (event_type,))


_RAW_DECODER, _RAW_LIST_DECODER, _ = _decoders(msgspec.Raw)  # events as undecoded views


class TraceText:
    """A Chrome trace's JSON text, decoded on demand into the event Struct a reader asks for.

    Up to ``WHOLE_TEXT_BYTES`` the events are decoded in one go (fastest). A bigger text
    is decoded in batches of about ``BATCH_BYTES`` so that only one batch of Structs is
    alive at once. The batches are cut where one event ends and the next begins (``},``
    then ``{``), found by searching the text; a cut in the wrong place (inside a string or
    a nested object) cannot decode as a list of events, so a batch that fails to decode
    sends the rest of the text to the exact way: cutting it into one ``msgspec.Raw`` per
    event with msgspec's own parser, which costs a second pass over the text and 64 bytes
    per event. ``max_text_bytes`` (the read's text budget) bounds that cost too: a text of
    millions of tiny objects whose events array the search cannot find (a key written with
    escapes, ``"trace\\u0045vents"``) would otherwise need many times its size.
    """

    def __init__(self, path: str, data: bytes, max_text_bytes: int | None = None):
        self.path, self.data = path, data
        self._max_split_bytes = max_text_bytes
        self.device_names: list[str] = []  # from deviceProperties; known once ``batches`` has begun
        self._is_array = _starts_with_array(data)
        if not self._is_array:
            _one_events_array(path, data)
        self.whole = len(data) <= WHOLE_TEXT_BYTES
        self._events: list[msgspec.Raw] | None = None  # one view per event, once split
        self._cuts: list[tuple[int, int]] | None = None  # byte ranges of batches, if found
        self._cut_firsts: list[int] = []  # index of each cut batch's first event
        self.parts_decoded = 0  # parts decoded again by ``events`` (a test counts them)
        if not self.whole:
            self._cuts = self._find_cuts()
            if self._cuts is None:
                self._split()

    def batches(self, event_type: type) -> Iterator[tuple[int, list]]:
        """(index of the first event, decoded events) for each batch. ``event_type`` is
        ``BaseEvent`` or a subclass."""
        if self.whole:
            events = self._decode_text(event_type)
            _check_durations(self.path, 0, events)
            yield 0, events
            return
        list_decoder = _decoders(event_type)[1]
        index = 0
        if self._cuts is not None:
            self._cut_firsts = []
            for begin, end in self._cuts:
                try:
                    batch = list_decoder.decode(self._array_text(begin, end))
                except (msgspec.DecodeError, UnicodeDecodeError):
                    self._cuts = None
                    self._split()
                    break
                self._cut_firsts.append(index)
                _check_durations(self.path, index, batch)
                yield index, batch
                index += len(batch)
            else:
                return
        events = self._raw_events()
        for start in range(index, len(events), BATCH_EVENTS):
            stop = min(start + BATCH_EVENTS, len(events))
            try:
                batch = list_decoder.decode(self._batch_text(start, stop))
            except (msgspec.DecodeError, UnicodeDecodeError) as error:
                self._raise_for_whole_file(start, error)
            _check_durations(self.path, start, batch)
            yield start, batch

    def events(self, indices: list[int], event_type: type[_Event]) -> Iterator[_Event]:
        """Events ``indices`` (ascending) of the file decoded as ``event_type``, one at a time,
        for the few events a reader wants more fields of than its batches hold (after
        ``batches`` has run). Each part of the file is decoded at most once, however many are
        asked."""
        decoder = _decoders(event_type)[2]
        if self._cuts is None or not self._cut_firsts:
            events = self._raw_events()  # a text decoded whole is small: cutting it up is cheap
            yield from (self._decoded(decoder, events[index], index) for index in indices)
            return
        # Each event is decoded from a copy of its own text: a ``Raw`` field of an event
        # decoded from its view points into the copy of the whole part, which then stayed
        # alive as long as the event (a 212 MB trace's 103,000 shaped calls kept 230 MB).
        part: int | None = None
        raw: list[msgspec.Raw] = []
        for index in indices:
            number = bisect.bisect_right(self._cut_firsts, index) - 1
            if number != part:
                part = number
                raw = _RAW_LIST_DECODER.decode(self._array_text(*self._cuts[number]))
                self.parts_decoded += 1
            yield self._decoded(decoder, bytes(raw[index - self._cut_firsts[number]]), index)

    def _decoded(self, decoder: msgspec.json.Decoder, text, index: int):
        """Event ``index`` of the file decoded, or a ProfileError that says which event and
        what in it is not what a trace holds (an ``args`` that is a number, not an object)."""
        try:
            return decoder.decode(text)
        except (msgspec.DecodeError, UnicodeDecodeError) as error:
            raise undecodable(
                self.path, error, f"$[{index}]" if self._is_array else f"$.traceEvents[{index}]"
            ) from None

    def cut_ranges(self) -> list[tuple[int, int]] | None:
        """The byte ranges of the batches (each whole events, separated by commas), found
        for a text of any size; None where the text is not laid out for them. For a reader
        that decodes them itself (``torch_trace``'s C scanner) instead of ``batches``: it
        then says where each range's events begin (``note_cut_firsts``)."""
        if self._cuts is None and self._events is None:
            cuts = self._find_cuts()
            # a text ``batches`` decodes whole is one batch: the order events are met in
            # (codes are numbered by it) is a batch's, so the ranges must be the batches
            self._cuts = [(cuts[0][0], cuts[-1][1])] if cuts and self.whole else cuts
        return self._cuts

    def note_cut_firsts(self, firsts: list[int]) -> None:
        """The index of the first event of each of ``cut_ranges``, which ``events`` needs."""
        self._cut_firsts = firsts

    def refuse_past_budget(self, bytes_per_event: int, peak_bytes_per_byte: float) -> None:
        """OverLimit where the file's events, at ``bytes_per_event`` each once read, would
        need more than the read's memory limit (its text budget times the format's
        ``peak_bytes_per_byte``): a limit in bytes alone let a small file of many tiny
        events take many times it (a 4 MB gzip of 1.5 million TF events took 1.3 GB at a
        0.7 GB limit). Counting the events costs a search of the text."""
        if self._max_split_bytes is None:
            return
        events = self.data.count(b'"ph"')  # every event has a phase: an upper bound on events
        needed = events * bytes_per_event
        if needed > self._max_split_bytes * peak_bytes_per_byte:
            raise OverLimit(
                self.path,
                (
                    f"{events:,} events in {len(self.data) / 1e6:,.0f} MB of text would need about "
                    f"{needed / 1e9:,.1f} GB once read, above what this machine's memory limit allows (memory "
                    "guard). Raise it with --opcompare_max_read_gb or `tb-opcompare --max-read-gb` if the file is a "
                    "real trace"
                ),
            )

    def materialize(self) -> ChromeTrace:
        """Every event as a ``TraceEvent``, for readers of small (TF) traces (their caller
        refuses a file of too many first: ``refuse_past_budget``)."""
        events = [event for _, batch in self.batches(TraceEvent) for event in batch]
        return ChromeTrace(traceEvents=events, deviceProperties=[DeviceProperties(name) for name in self.device_names])

    def _find_cuts(self) -> list[tuple[int, int]] | None:
        """Byte ranges of about ``BATCH_BYTES`` that each hold whole events, or None where
        the text is not laid out as expected. The document around the events array is
        decoded here (with the array emptied), which checks it and reads deviceProperties."""
        data = self.data
        if self._is_array:
            opening = data.index(b"[")
        else:
            key = _EVENTS_KEY.search(data)
            if key is None:
                return None
            opening = key.end() - 1
        closing = None
        for window in (1 << 16, 1 << 24, len(data)):
            ends = list(_LAST_EVENT_END.finditer(data, max(opening, len(data) - window)))
            if ends:
                closing = ends[-1]
                break
        if closing is None:
            return None
        try:
            rest = (
                _RAW_DECODER.decode(data[:opening] + b"[]" + data[closing.end() :])
                if not self._is_array
                else _RAW_LIST_DECODER.decode(b"[]" + data[closing.end() :])
            )
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None  # the exact way will say what is wrong
        if not self._is_array:
            if rest.traceEvents:  # the array emptied was not the trace's: its key is written otherwise
                return None
            self.device_names = _names(rest.deviceProperties)
        last = closing.start() + 1  # just after the last event's closing brace
        begin = data.find(b"{", opening, last)
        if begin > opening + 1 and data[opening + 1 : begin].strip():
            return None  # something that is not an event before the first one
        between_events = (
            _BETWEEN_LINES if _BETWEEN_LINES.search(data, begin, min(begin + BATCH_BYTES, last)) else _BETWEEN_EVENTS
        )
        cuts = []
        while 0 <= begin < last:
            between = between_events.search(data, min(begin + BATCH_BYTES, last), last)
            end = between.start() + 1 if between else last
            cuts.append((begin, end))
            begin = between.end() - 1 if between else last
        return cuts

    def _decode_text(self, event_type: type) -> list:
        """All events of the text at once (and deviceProperties), or a ProfileError
        that says what is wrong and where."""
        whole_decoder, list_decoder, _ = _decoders(event_type)
        with _json_errors(self.path, self.data):
            if self._is_array:
                return list_decoder.decode(self.data)
            trace = whole_decoder.decode(self.data)
        self.device_names = _names(trace.deviceProperties)
        return trace.traceEvents

    def _raw_events(self) -> list[msgspec.Raw]:
        """One view per event, the text split the first time."""
        return self._split() if self._events is None else self._events

    def _split(self) -> list[msgspec.Raw]:
        if self._max_split_bytes is not None and not self.whole:
            objects = self.data.count(b"{")  # at least one per event: an upper bound on events
            needed = objects * RAW_BYTES_PER_OBJECT
            if needed > self._max_split_bytes:
                raise OverLimit(
                    self.path,
                    (
                        'its events must be read one by one (the fast way needs `"traceEvents": [` at the top level '
                        f"and clean cuts between events): {objects:,} JSON objects in {len(self.data) / 1e6:,.0f} MB of "
                        f"text would need about {needed / 1e9:,.1f} GB more, above what this machine's memory limit "
                        "allows (memory guard). Raise it with --opcompare_max_read_gb or `tb-opcompare --max-read-gb` if "
                        "the file is a real trace"
                    ),
                )
        self._address = np.frombuffer(self.data, dtype=np.uint8).ctypes.data
        self._events = events = self._decode_text(msgspec.Raw)
        return events

    def _array_text(self, begin: int, end: int) -> bytes:
        """``data[begin:end]`` (comma-separated events) as a JSON array, copied once."""
        return b"".join((b"[", memoryview(self.data)[begin:end], b"]"))

    def _batch_text(self, start: int, stop: int) -> bytes:
        """Events ``start:stop`` as one JSON array. Consecutive events of the array are
        one stretch of the text (separated by commas and spaces), so the stretch is
        copied once, found from where the first and last events' views point;
        joining thousands of views would copy every byte twice."""
        events = self._raw_events()
        first, last = events[start], events[stop - 1]
        begin, end = self._offset(first), self._offset(last)
        if begin is None or end is None:
            return b"[" + b",".join(events[start:stop]) + b"]"
        return self._array_text(begin, end + len(last))

    def _offset(self, event: msgspec.Raw) -> int | None:
        offset = np.frombuffer(event, dtype=np.uint8).ctypes.data - self._address
        if 0 <= offset <= len(self.data) - len(event) and memoryview(self.data)[
            offset : offset + len(event)
        ] == memoryview(event):
            return offset
        return None  # not a view into ``data`` (never seen; joined instead)

    def _raise_for_whole_file(self, start: int, error: Exception):
        # A batch's error has offsets into the batch, not the file: decoding the whole
        # file once more (only on this error path) names the byte and the event.
        _check_durations(self.path, 0, self._decode_text(TraceEvent))
        raise ProfileError(self.path, f"traceEvents[{start}:{start + BATCH_EVENTS}] cannot be decoded: {error}")


def undecodable(path: str, error: Exception, at: str) -> ProfileError:
    """The ProfileError for a part of a trace msgspec refused (an event, its ``args``),
    msgspec's ``$`` in its message made the part's place in the file (``at``:
    ``$.traceEvents[12].args``)."""
    return ProfileError(path, "JSON is not a Chrome trace (" + str(error).replace("`$", "`" + at) + ")")


_EVENTS_KEY = re.compile(rb'(?<!\\)"traceEvents"\s*:\s*\[')


def _one_events_array(path: str, data: bytes) -> None:
    """Refuse a trace object that holds two ``traceEvents`` arrays (two traces joined, a
    file written twice): a JSON decoder keeps the last and says nothing, and which one is
    the trace cannot be told. Found with a plain byte search, one pass over the text."""
    found: list[int] = []
    start = data.find(b'"traceEvents"')
    while start >= 0 and len(found) < 2:
        if _EVENTS_KEY.match(data, start) and (start == 0 or data[start - 1 : start] != b"\\"):
            found.append(start)
        start = data.find(b'"traceEvents"', start + 1)
    if len(found) == 2:
        raise ProfileError(
            path,
            f'two "traceEvents" arrays in one trace (at bytes {found[0]:,} and {found[1]:,}): '
            "two traces joined, or a file written twice; which one is the trace cannot be "
            "told, so it is not read",
        )


_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
# Writers put a line break between events (PyTorch, ONNX Runtime), and rarely inside one,
# where lists of objects (ONNX Runtime's input shapes) hold "},{" too: cuts at line breaks
# decode where cuts at any "},{" would fall back to the slow exact way.
_BETWEEN_LINES = re.compile(rb"\}\s*,[ \t\r]*\n\s*\{")
_LAST_EVENT_END = re.compile(rb"\}\s*\]")


def _names(properties: list[DeviceProperties] | None) -> list[str]:
    return [p.name for p in properties or [] if p.name]


def open_chrome_trace(path: str, data: bytes, max_text_bytes: int | None = None) -> TraceText:
    """The trace's text, decompressed, ready to decode (see ``TraceText``), or a
    ProfileError naming the problem. ``max_text_bytes`` bounds the decompressed text:
    counted while inflating, so a gzip bomb stops at the budget whatever its trailer says."""
    if not data:
        raise ProfileError(path, "the file is empty (0 bytes)")
    if data[:2] == b"\x1f\x8b":
        try:
            data = _gunzip(data, max_text_bytes)
        except _TooLarge as error:
            raise OverLimit(
                path,
                f"decompresses to more than {error.limit / 1e9:,.2f} GB of text, more than "
                "this machine's memory limit allows (memory guard): a very large trace, or "
                "a gzip bomb. Raise the limit with --opcompare_max_read_gb or "
                "`tb-opcompare --max-read-gb`",
            ) from None
        except (EOFError, OSError, zlib.error) as error:
            raise ProfileError(path, f"the gzip stream is truncated or corrupt: {error}") from None
    if data[:3] == _UTF8_BOM:
        data = data[3:]  # some editors and Windows tools add one; JSON parsers refuse it
    encoding = _utf16_or_32(data)
    if encoding:
        raise ProfileError(
            path,
            f"the text is {encoding}, and a trace must be UTF-8 (as profilers write it); "
            f"convert it, e.g. `iconv -f {encoding} -t UTF-8`",
        )
    return TraceText(path, data, max_text_bytes)


_UTF8_BOM = b"\xef\xbb\xbf"


def _utf16_or_32(data: bytes) -> str | None:
    """The UTF-16/32 encoding the text starts in (by its byte-order mark, or by the NUL
    bytes that ASCII text has around each character in it), or None."""
    head = data[:4]
    if head[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        return "UTF-32"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16"
    if len(head) == 4 and head[1] == 0 and head[3] == 0 and head[0] and head[2]:
        return "UTF-16LE"
    if len(head) == 4 and head[0] == 0 and head[2] == 0 and head[1] and head[3]:
        return "UTF-16BE"
    return None


class _TooLarge(Exception):
    def __init__(self, limit: int):
        self.limit = limit


def _gunzip(data: bytes, limit: int | None, piece: int = 16 << 20) -> bytes:
    """Every gzip member of ``data`` inflated, at most ``limit`` bytes in all."""
    parts: list[bytes] = []
    produced = 0
    pending = data
    while pending:
        inflater = zlib.decompressobj(wbits=31)
        chunk = inflater.decompress(pending, piece)
        while True:
            produced += len(chunk)
            if limit is not None and produced > limit:
                raise _TooLarge(limit)
            parts.append(chunk)
            if inflater.eof or not inflater.unconsumed_tail:
                break
            chunk = inflater.decompress(inflater.unconsumed_tail, piece)
        if not inflater.eof:
            raise EOFError("the gzip stream ends before its end marker")
        pending = inflater.unused_data.lstrip(b"\x00")  # members may be followed by zero padding
    return b"".join(parts)


@contextlib.contextmanager
def _json_errors(path: str, data: bytes) -> Iterator[None]:
    """Turns msgspec's errors into ProfileErrors that say what is wrong and where."""
    try:
        yield
    except msgspec.ValidationError as error:
        raise ProfileError(path, f"JSON is not a Chrome trace ({error})") from None
    except msgspec.DecodeError as error:
        raise ProfileError(path, describe_json_error(data, str(error))) from None
    except UnicodeDecodeError as error:
        # The error's offset is within one JSON string; find the byte in the file.
        offset = _first_invalid_utf8(data)
        where = "" if offset is None else f" at byte {offset:,} (line {data.count(NEWLINE, 0, offset) + 1})"
        raise ProfileError(path, f"not valid UTF-8 text{where}: {error.reason}") from None


def _first_invalid_utf8(data: bytes, piece: int = 1 << 20) -> int | None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    for offset in range(0, len(data), piece):
        pending = len(decoder.getstate()[0])  # bytes of a character cut by the previous piece
        try:
            decoder.decode(data[offset : offset + piece], final=offset + piece >= len(data))
        except UnicodeDecodeError as error:
            return offset - pending + error.start
    return None


# No profiled op lasts a year: a longer duration is a broken writer, and summing such
# values would overflow.
MAX_DURATION_US = 3.2e13


def _check_durations(path: str, start: int, events: list) -> None:
    """A complete ("X") event needs a finite, non-negative duration below a year:
    anything else means the writer was broken, and no time in the file can be trusted."""
    try:
        durations = [event.dur for event in events if event.ph == "X"]
        if not durations or (min(durations) >= 0.0 and max(durations) < MAX_DURATION_US):
            return  # the common case, checked at C speed; the loop below names the culprit
    except TypeError:  # a None among them
        pass
    for index, event in enumerate(events, start):
        if event.ph == "X" and not (event.dur is not None and 0.0 <= event.dur < MAX_DURATION_US):
            problem = (
                "no duration"
                if event.dur is None
                else f"a negative duration ({event.dur} µs)"
                if event.dur < 0
                else f"a duration of {event.dur} µs (over a year)"
            )
            raise ProfileError(
                path,
                f"traceEvents[{index}] ({event.name!r} at ts {event.ts}) is a complete event "
                f"with {problem}; the trace writer produced broken events",
            )


_FIRST_TEXT = re.compile(rb"\S")


def _starts_with_array(data: bytes) -> bool:
    first = _FIRST_TEXT.search(data)  # not data.lstrip(), which copies the whole file
    return first is not None and data[first.start() : first.start() + 1] == b"["


_ERROR_OFFSET = re.compile(r"\(byte (\d+)\)")


def describe_json_error(data: bytes, message: str) -> str:
    """Say whether the file ends early (a killed writer) or is malformed part-way, and
    where, with the text around that point (e.g. an unescaped quote in an op name)."""
    match = _ERROR_OFFSET.search(message)
    if "truncated" in message or (match and int(match.group(1)) >= len(data.rstrip()) - 1):
        return f"the JSON ends early, the file looks truncated ({len(data):,} bytes): {message}"
    if not match:
        return f"not valid JSON: {message}"
    offset = int(match.group(1))
    line = data.count(b"\n", 0, offset) + 1
    start = max(data.rfind(b"\n", 0, offset) + 1, offset - 60)
    end = data.find(b"\n", offset)
    end = min(end if end >= 0 else len(data), offset + 60)
    context = escape_control_characters(data[start:end].strip().decode("utf-8", "replace"))
    what = message.split(" (byte")[0]
    if data[offset : offset + 3] in (b"NaN", b"Inf") or data[offset : offset + 4] == b"-Inf":
        what = "a NaN or Infinity number, which JSON does not allow (Python's json.dump writes them)"
    return f"not valid JSON at line {line} (byte {offset:,}): {what}; the text there reads: {context}"


def process_names(trace: ChromeTrace) -> dict[int | str, str]:
    return {
        event.pid: event.args.name
        for event in trace.traceEvents
        if event.ph == "M" and event.name == "process_name" and event.args and event.args.name
    }
