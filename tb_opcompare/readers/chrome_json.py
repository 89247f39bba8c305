"""Decoding of Chrome-trace JSON (plain or gzipped) into typed events.

msgspec decodes straight into Structs that declare only the fields the readers use,
so the rest of each event (call stacks, shapes of every input, ...) is skipped
without building Python objects for it.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib

import msgspec

from ..errors import ProfileError


class EventArgs(msgspec.Struct, gc=False):
    name: str | None = None  # TF1 timeline: node name; metadata events: process/thread name
    op: str | None = None  # TF1 timeline: op type
    correlation: int | None = None  # PyTorch: links a runtime launch to its kernels
    # Raw: decoded only for the one op that gives the batch size
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    tf_op: str | None = None  # TF 2.x trace viewer: kernel's TF op
    level0: str | None = msgspec.field(default=None, name="level 0")
    annotation: str | None = None
    long_name: str | None = None  # TF 2.x trace viewer: "<op_name>:<op_type>" of a host op
    shape: str | None = None  # TF 2.x trace viewer: input shapes of a host op


class TraceEvent(msgspec.Struct, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float | None = None
    args: EventArgs | None = None


class DeviceProperties(msgspec.Struct):
    name: str = ""


class ChromeTrace(msgspec.Struct):
    traceEvents: list[TraceEvent]
    deviceProperties: list[DeviceProperties] | None = None


_DECODER = msgspec.json.Decoder(ChromeTrace)
_LIST_DECODER = msgspec.json.Decoder(list[TraceEvent])


def decode_chrome_trace(path: str, data: bytes) -> ChromeTrace:
    """Decode bytes (gzip detected by magic number) or raise ProfileError naming the problem."""
    if not data:
        raise ProfileError(path, "the file is empty (0 bytes)")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as error:
            raise ProfileError(path, f"the gzip stream is truncated or corrupt: {error}") from None
    stripped = data.lstrip()
    try:
        if stripped[:1] == b"[":
            trace = ChromeTrace(traceEvents=_LIST_DECODER.decode(data))
        else:
            trace = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise ProfileError(path, f"JSON is not a Chrome trace ({error})") from None
    except msgspec.DecodeError as error:
        raise ProfileError(path, describe_json_error(data, str(error))) from None
    except UnicodeDecodeError as error:
        raise ProfileError(path, f"not valid UTF-8 text at byte {error.start:,}") from None
    _check_durations(path, trace)
    return trace


def _check_durations(path: str, trace: ChromeTrace) -> None:
    """A complete ("X") event needs a finite, non-negative duration: anything else means
    the writer was broken, and no time in the file can be trusted."""
    for index, event in enumerate(trace.traceEvents):
        if event.ph == "X" and not (event.dur is not None and 0.0 <= event.dur < math.inf):
            problem = "no duration" if event.dur is None else f"a negative duration ({event.dur} µs)" \
                if event.dur < 0 else f"a duration of {event.dur}"
            raise ProfileError(path, f"traceEvents[{index}] ({event.name!r} at ts {event.ts}) is a complete event "
                                     f"with {problem}; the trace writer produced broken events")


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
    context = data[start:end].strip().decode("utf-8", "replace")
    what = message.split(" (byte")[0]
    if data[offset:offset + 3] in (b"NaN", b"Inf") or data[offset:offset + 4] == b"-Inf":
        what = "a NaN or Infinity number, which JSON does not allow (Python's json.dump writes them)"
    return f"not valid JSON at line {line} (byte {offset:,}): {what}; the text there reads: {context}"


def process_names(trace: ChromeTrace) -> dict[int | str, str]:
    return {
        event.pid: event.args.name
        for event in trace.traceEvents
        if event.ph == "M" and event.name == "process_name" and event.args and event.args.name
    }
