"""Decoding of Chrome-trace JSON (plain or gzipped) into typed events.

msgspec decodes straight into Structs that declare only the fields the readers use,
so the rest of each event (call stacks, shapes of every input, ...) is skipped
without building Python objects for it.
"""

from __future__ import annotations

import gzip
import re
import zlib

import msgspec

from ..errors import ProfileError


class EventArgs(msgspec.Struct):
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


class TraceEvent(msgspec.Struct):
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
            return ChromeTrace(traceEvents=_LIST_DECODER.decode(data))
        return _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise ProfileError(path, f"JSON is not a Chrome trace ({error})") from None
    except msgspec.DecodeError as error:
        raise ProfileError(path, _describe_json_error(data, str(error))) from None


_ERROR_OFFSET = re.compile(r"\(byte (\d+)\)")


def _describe_json_error(data: bytes, message: str) -> str:
    """Say whether the file ends early (a killed writer) or is malformed part-way, and
    where, with the text around that point (e.g. an unescaped quote in an op name)."""
    match = _ERROR_OFFSET.search(message)
    if "truncated" in message or (match and int(match.group(1)) >= len(data.rstrip()) - 1):
        return f"the JSON ends early, the file looks truncated ({len(data):,} bytes): {message}"
    if not match:
        return f"not valid JSON: {message}"
    offset = int(match.group(1))
    line = data.count(b"\n", 0, offset) + 1
    start = data.rfind(b"\n", 0, offset) + 1
    end = data.find(b"\n", offset)
    context = data[start: end if end >= 0 else len(data)].strip()[:120].decode("utf-8", "replace")
    return f"not valid JSON at line {line} (byte {offset:,}): {message.split(' (byte')[0]}; the line reads: {context}"


def process_names(trace: ChromeTrace) -> dict[int | str, str]:
    return {
        event.pid: event.args.name
        for event in trace.traceEvents
        if event.ph == "M" and event.name == "process_name" and event.args and event.args.name
    }
