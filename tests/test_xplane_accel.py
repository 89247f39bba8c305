"""The xplane reader's C helpers (``_xplane_wire``) against its pure-Python code, on the
real xplanes this project has: the same batches, the same event integers, the same
memory events' stats, the same tables, the same errors on broken wire, and no crash
whatever the bytes."""

from __future__ import annotations

import collections
import json
import math
import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, REALTRACES, REPO, assert_same_read, varint

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.ingest.readers import xplane_device, xplane_events, xplane_evidence, xplane_host, xplane_wire
from tb_opcompare.ingest.readers.xplane_schema import XEvent, XLine, XPlane, XSpace

_XPLANE_ROOTS = [FIXTURES, REPO / "demo_logs"] + ([REALTRACES] if REALTRACES.is_dir() else [])
XPLANES = sorted(path for root in _XPLANE_ROOTS for path in root.rglob("*.xplane.pb"))
SMALL_BATCH = 4096  # cuts the fixtures' lines (none reaches the real 1 MiB) into many batches
_SPACE_PLANES, _PLANE_LINES = 1, 3


def _name(path: Path) -> str:
    root = next(root for root in _XPLANE_ROOTS if path.is_relative_to(root))
    parts = [part for part in path.relative_to(root).parts if part not in ("plugins", "profile")]
    return "/".join([root.name, *parts])


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every XLine of every plane, read with the wire module's own walker."""
    view = memoryview(data)
    return [
        (line_start, line_end)
        for field, _, start, end in xplane_wire.fields(view, 0, len(view))
        if field == _SPACE_PLANES
        for line_field, _, line_start, line_end in xplane_wire.fields(view, start, end)
        if line_field == _PLANE_LINES
    ]


def _c_ints(data, start: int, end: int) -> np.ndarray:
    return np.frombuffer(xplane_wire._compiled.event_ints(data, start, end), dtype=np.int64).reshape(-1, 3)


def _python_ints(data: bytes) -> np.ndarray:
    line = XLine()
    line.ParseFromString(data)
    return xplane_events._event_ints_python(line.events)


@pytest.fixture
def compiled():
    if xplane_wire._compiled is None:
        pytest.fail(
            "the C extension _xplane_wire is not built in this environment "
            "(see test_the_extension_is_built_in_this_environment)"
        )
    return xplane_wire._compiled


def test_there_are_real_xplanes_to_compare_on():
    assert len(XPLANES) >= 20


def test_the_extension_is_built_in_this_environment(monkeypatch):
    """So that a missing compiler never leaves the suite testing only the fallback."""
    from tb_opcompare.ingest.readers import _xplane_wire

    assert xplane_wire._compiled is _xplane_wire
    # beside the Python modules: in the checkout for an editable install, in site-packages for a wheel
    assert Path(_xplane_wire.__file__).parent == Path(xplane_wire.__file__).parent
    monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)
    assert xplane_wire.native() is _xplane_wire
    monkeypatch.setenv(xplane_wire.PURE_PYTHON_ENV, "1")
    assert xplane_wire.native() is None


@pytest.mark.parametrize("path", XPLANES, ids=_name)
@pytest.mark.parametrize("batch_bytes", [SMALL_BATCH, xplane_wire.EVENT_BATCH_BYTES])
def test_batches_and_event_integers_match_the_python_code(path, batch_bytes, compiled, monkeypatch):
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", batch_bytes)
    data = path.read_bytes()
    view = memoryview(data)
    events = 0
    for start, end in _line_spans(data):
        header, batches = compiled.split_events(view, start, end, batch_bytes)
        assert (header, batches) == xplane_wire._split_events(view, start, end)
        # a whole line (the reader's span for a line of one batch) and each batch of it
        for span_start, span_end in [(start, end), *batches]:
            expected = _python_ints(data[span_start:span_end])
            got = _c_ints(view, span_start, span_end)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert got.tobytes() == expected.tobytes()
        events += len(_python_ints(data[start:end]))
    assert events


def _read(path: Path, pure_python: bool, monkeypatch):
    """The reader's whole result, or its error, on one path."""
    if pure_python:
        monkeypatch.setenv(xplane_wire.PURE_PYTHON_ENV, "1")
    else:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)
    try:
        return read_profile("xplane", [str(path)])
    except ProfileError as error:
        return error
    finally:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)


class _Spy:
    """The compiled module, counting its calls (so a native read is known to use it)."""

    def __init__(self, module):
        self.module, self.WireError = module, module.WireError
        self.calls = {"split_events": 0, "event_ints": 0, "event_stats": 0, "plane_header": 0, "next_line": 0}

    def split_events(self, *args):
        self.calls["split_events"] += 1
        return self.module.split_events(*args)

    def plane_header(self, *args):
        self.calls["plane_header"] += 1
        return self.module.plane_header(*args)

    def next_line(self, *args):
        self.calls["next_line"] += 1
        return self.module.next_line(*args)

    def event_ints(self, *args):
        self.calls["event_ints"] += 1
        return self.module.event_ints(*args)

    def event_stats(self, *args):
        self.calls["event_stats"] += 1
        return self.module.event_stats(*args)


def _never_called(*args):
    raise AssertionError("the native read fell back to reading the parsed events")


@pytest.mark.parametrize("path", XPLANES, ids=_name)
@pytest.mark.parametrize("batch_bytes", [SMALL_BATCH, xplane_wire.EVENT_BATCH_BYTES])
def test_read_profile_gives_the_same_tables_on_both_paths(path, batch_bytes, compiled, monkeypatch):
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", batch_bytes)
    pure = _read(path, True, monkeypatch)
    spy = _Spy(compiled)
    monkeypatch.setattr(xplane_wire, "_compiled", spy)
    with monkeypatch.context() as patched:
        patched.setattr(xplane_events, "_event_ints_python", _never_called)
        patched.setattr(xplane_host._MemoryEvents, "_read_parsed", _never_called)
        native = _read(path, False, monkeypatch)
    assert_same_read(native, pure)
    assert spy.calls["plane_header"] > 0
    if not isinstance(pure, Exception):
        assert spy.calls["event_ints"] > 0 and spy.calls["next_line"] > 0
        if batch_bytes == SMALL_BATCH:
            assert spy.calls["split_events"] > 0
        if pure.facts.memory_events:
            assert spy.calls["event_stats"] > 0


def test_the_real_xplanes_hold_every_memory_output(monkeypatch):
    """The comparison above covers the memory outputs only where real files carry them:
    allocations and frees (the timeline, the peaks, the ops' allocated bytes), the precision
    from the dtypes allocated, and the batch size voted by the shapes allocated."""
    profiles = [
        profile
        for profile in (_read(path, False, monkeypatch) for path in XPLANES)
        if not isinstance(profile, Exception)
    ]
    with_memory = [profile for profile in profiles if profile.facts.memory_events]
    assert len(with_memory) >= 10
    assert all(len(profile.memory_table.frame()) and profile.facts.peak_memory_bytes for profile in with_memory)
    assert (
        sum((profile.op_table.frame()["alloc_bytes"] > 0).any() for profile in with_memory) >= 10
    )  # XLA's ops name none
    assert any("tensors the model's ops allocated" in (profile.facts.precision_source or "") for profile in with_memory)
    assert any(
        "tensor shapes in memory allocations" in (profile.facts.batch_size_source or "") for profile in with_memory
    )


# Broken copies of real files: cut at a few places, and bytes flipped (deterministically).
_BREAK_SEEDS = [path for path in XPLANES if "bert" in str(path)][:1] + [
    path for path in XPLANES if "tf_keras" in str(path) and "cpu" in path.parts[-6]
][:1]


def _broken_copies(data: bytes, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    copies = [(f"cut at {fraction:.0%}", data[: int(len(data) * fraction)]) for fraction in (0.05, 0.3, 0.61, 0.97)]
    copies += [("cut a byte short", data[:-1])]
    for index in range(12):
        broken = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            broken[rng.randrange(len(broken))] ^= rng.randint(1, 255)
        copies.append((f"flipped #{index}", bytes(broken)))
    return copies


@pytest.mark.parametrize("path", _BREAK_SEEDS, ids=_name)
def test_broken_wire_gives_the_same_outcome_on_both_paths(path, compiled, tmp_path, monkeypatch):
    assert _BREAK_SEEDS, "no real seed file found"
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", SMALL_BATCH)  # so the split sees the damage too
    target = tmp_path / path.name
    errors = 0
    for label, data in _broken_copies(path.read_bytes(), seed=len(path.name)):
        target.write_bytes(data)
        pure, native = _read(target, True, monkeypatch), _read(target, False, monkeypatch)
        try:
            assert_same_read(native, pure)
        except AssertionError as failure:
            raise AssertionError(f"{label}: {failure}") from None
        errors += isinstance(pure, ProfileError)
    assert errors >= 4  # at least the cuts


@pytest.mark.parametrize("path", _BREAK_SEEDS, ids=_name)
def test_split_errors_are_the_python_codes_errors(path, compiled):
    """A line's span cut short: the same DecodeError message on both paths."""
    from google.protobuf.message import DecodeError

    data = path.read_bytes()
    view = memoryview(data)
    rng = random.Random(7)
    compared = 0
    for start, end in _line_spans(data):
        if end - start < 64:
            continue
        for cut in sorted({start + 1, start + 2, end - 1, *(rng.randrange(start, end) for _ in range(6))}):
            try:
                expected = xplane_wire._split_events(view, start, cut)
            except DecodeError as error:
                expected = f"DecodeError: {error}"
            try:
                got = xplane_wire.split_events(view, start, cut)
            except DecodeError as error:
                got = f"DecodeError: {error}"
            assert got == expected
            compared += 1
    assert compared


def _plane_walk(view: memoryview, start: int, end: int, pure_python: bool, monkeypatch) -> object:
    """What a PlaneView finds in ``view[start:end]``: its header's bytes, metadata entries
    and the spans of its non-empty lines, or the walk's error message."""
    from google.protobuf.message import DecodeError

    if pure_python:
        monkeypatch.setenv(xplane_wire.PURE_PYTHON_ENV, "1")
    try:
        header = xplane_wire.plane_header(view, start, end)
        if pure_python:
            fields = xplane_wire.fields(view, start, end)
            return header, [(first, last) for field, _, first, last in fields if field == _PLANE_LINES and last > first]
        lines, pos = [], start
        while (found := xplane_wire._compiled.next_line(view, pos, end)) is not None:
            lines.append(found[:2])
            pos = found[2]
        return header, lines
    except (DecodeError, xplane_wire._compiled.WireError) as error:
        return str(error)
    finally:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)


@pytest.mark.parametrize("path", _BREAK_SEEDS, ids=_name)
def test_plane_walk_in_c_is_the_python_walk(path, compiled, monkeypatch):
    """A plane's fields walked in C (``plane_header``, ``next_line``): the same header, lines
    and DecodeError messages as the Python walk, on whole planes and on planes cut short or
    with a byte flipped (a field number 0, a wire type 7, a length past the end)."""
    data = path.read_bytes()
    view = memoryview(data)
    planes = [(start, end) for field, _, start, end in xplane_wire.fields(view, 0, len(view)) if field == _SPACE_PLANES]
    rng = random.Random(11)
    outcomes = collections.Counter()
    for start, end in planes:
        cases = [(data, start, end)]
        for cut in sorted({start + 1, start + 2, end - 1, *(rng.randrange(start, end) for _ in range(8))}):
            cases.append((data, start, cut))
        for _ in range(8):
            broken = bytearray(data)
            broken[rng.randrange(start, min(end, start + 4096))] = rng.choice([0x00, 0x07, 0x1A, 0xFF])
            cases.append((bytes(broken), start, end))
        for wire, first, last in cases:
            wire_view = memoryview(wire)
            expected = _plane_walk(wire_view, first, last, True, monkeypatch)
            assert _plane_walk(wire_view, first, last, False, monkeypatch) == expected
            outcomes[isinstance(expected, str)] += 1
    assert outcomes[True] >= 4 and outcomes[False] >= len(planes)


def test_event_integers_follow_protobuf_on_reencoded_real_events(compiled):
    """Real events re-encoded the ways a writer may legally write them: merged (the last
    value wins), num_occurrences taking offset_ps's oneof, negative ids and durations (ten-
    byte varints), a stat's fields read as XEvent fields of other wire types, and unknown
    groups. Each must read as the protobuf runtime reads it."""
    source = next(path for path in XPLANES if "tf_keras" in str(path))
    data = source.read_bytes()
    events = []
    for start, end in _line_spans(data):
        line = XLine()
        line.ParseFromString(data[start:end])
        events.extend(event for event in line.events if event.stats)
        if len(events) > 200:
            break
    assert len(events) > 50
    rng = random.Random(3)
    variants: list[bytes] = []
    for event in events[:100]:
        other = rng.choice(events)
        stat = rng.choice(list(event.stats)).SerializeToString()
        occurrences = _copy(event)
        occurrences.num_occurrences = event.offset_ps + 1
        negative = _copy(event)
        negative.metadata_id, negative.duration_ps = -event.metadata_id - 1, -event.duration_ps - 1
        wire = event.SerializeToString()
        variants += [
            wire + other.SerializeToString(),
            occurrences.SerializeToString(),
            occurrences.SerializeToString() + other.SerializeToString(),
            wire + occurrences.SerializeToString(),
            negative.SerializeToString(),
            wire + stat,
            stat + wire,
            wire + _group(rng.randint(6, 1000), stat + _group(9, b"")) + other.SerializeToString(),
        ]
    line_wire = b"".join(_tag(4, 2) + varint(len(variant)) + variant for variant in variants)
    expected = _python_ints(line_wire)
    assert len(expected) == len(variants)
    assert _c_ints(line_wire, 0, len(line_wire)).tobytes() == expected.tobytes()
    # the same events through the reader's batch object, as the reader asks for them
    batch = xplane_wire.EventBatch(XLine.FromString(line_wire).events, memoryview(line_wire), 0, len(line_wire))
    assert xplane_events.event_ints(batch).tobytes() == expected.tobytes()


def _event_with_stat_bytes(value: bytes, field: int = 5) -> bytes:
    """One XLine.events entry: an event whose one stat holds ``value`` as field ``field``
    (5: str_value, which protobuf checks is UTF-8; 6: bytes_value, which it does not)."""
    stat = _tag(1, 0) + varint(3) + _tag(field, 2) + varint(len(value)) + value
    event = _tag(1, 0) + varint(7) + _tag(3, 0) + varint(100) + _tag(4, 2) + varint(len(stat)) + stat
    return _tag(4, 2) + varint(len(event)) + event


def test_event_integers_refuse_the_strings_protobuf_refuses(compiled):
    """The C scan leaves most events unparsed, so it checks their stats' texts as protobuf
    would: a file protobuf refuses (a str_value that is not UTF-8, anywhere) is refused
    on both paths alike, and a valid one read alike. Every 1-4 byte sequence class that
    UTF-8 has rules about, against protobuf's own parser."""
    rng = random.Random(7)
    values = [
        b"",
        b"ascii",
        "caf\u00e9 \u20ac \U0001f600".encode(),
        b"\x80",
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xe0\xa0\x80",
        b"\xed\xa0\x80",
        b"\xed\x9f\xbf",
        b"\xf0\x80\x80\x80",
        b"\xf0\x90\x80\x80",
        b"\xf4\x8f\xbf\xbf",
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\xe2\x82",
        b"abc\xe2\x82",
    ]
    values += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    refused = 0
    for value in values:
        for field in (5, 6):
            wire = _event_with_stat_bytes(value, field)
            try:
                expected = _python_ints(wire)
            except Exception:  # protobuf's DecodeError
                expected = None
            try:
                got = _c_ints(wire, 0, len(wire))
            except compiled.WireError:
                got = None
            assert (got is None) == (expected is None), (value, field)
            if expected is not None:
                assert got.tobytes() == expected.tobytes()
            refused += expected is None
    assert refused > 1000  # most random bytes are not UTF-8: the check was exercised


def test_the_wire_path_parses_no_whole_batch_of_host_events(compiled, monkeypatch):
    """Where the C helper reads the events, protobuf parses only the few events whose stats
    are read (step markers, shape probes), never a batch of host events: that parse was
    a fifth of a big xplane's read. The tables are the parsed path's (the test above)."""
    path = max((path for path in XPLANES if "tf_keras" in str(path) and "cpu" in str(path)), key=_size)
    whole_parses, alone = [], []
    events = xplane_wire.EventBatch.events

    def counting(batch):
        if batch._events is None:
            whole_parses.append(batch)
        return events.fget(batch)

    def parse_alone(data):
        alone.append(len(data))
        return XEvent.FromString(data)

    monkeypatch.setattr(xplane_wire.EventBatch, "events", property(counting))
    monkeypatch.setattr(xplane_wire, "XEvent", type("CountingXEvent", (), {"FromString": staticmethod(parse_alone)}))
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", SMALL_BATCH)
    profile = _read(path, False, monkeypatch)
    assert profile.facts.steps and len(profile.op_table.frame())
    assert whole_parses == []
    host_events = sum(
        len(_python_ints(bytes(memoryview(path.read_bytes())[s:e]))) for s, e in _line_spans(path.read_bytes())
    )
    assert 0 < len(alone) < host_events / 4


def _size(path: Path) -> int:
    return path.stat().st_size


def _copy(event):
    copy = XLine().events.add()
    copy.CopyFrom(event)
    return copy


def _tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def _group(field: int, body: bytes) -> bytes:
    """``body`` as an unknown group field (wire types 3 and 4), which no XEvent writer uses
    but protobuf must skip."""
    return _tag(field, 3) + body + _tag(field, 4)


# Real memory events whose stats are refs to stat metadata (current TF) and strs (TF 2.4).
_MEMORY_SOURCES = [path for path in XPLANES if "tf_keras" in str(path) and "cpu" in path.parts[-6]][:1] + [
    path for path in XPLANES if "bert" in str(path)
][:1]
_MEMORY_EVENT_NAMES = ("MemoryAllocation", "MemoryDeallocation")
# what event_stats reports for each XStat value (the field number), 1 for none
_KINDS = {
    None: xplane_wire.STAT_WITHOUT_VALUE,
    "double_value": xplane_wire.STAT_DOUBLE,
    "uint64_value": xplane_wire.STAT_UINT64,
    "int64_value": xplane_wire.STAT_INT64,
    "str_value": xplane_wire.STAT_STR,
    "bytes_value": xplane_wire.STAT_BYTES,
    "ref_value": xplane_wire.STAT_REF,
}


def _host_memory_plane(path: Path) -> tuple[XPlane, list, list]:
    """The first host plane's metadata, with a second stat id for some of the memory stats'
    names (a writer may repeat a name), its memory events and some of its other events."""
    space = xplane_wire.split_space(path.read_bytes())
    view = next(view for view in space.planes() if view.name.startswith("/host:"))
    plane = XPlane()
    plane.event_metadata.extend(view.event_metadata)
    plane.stat_metadata.extend(view.stat_metadata)
    next_id = max(entry.key for entry in plane.stat_metadata) + 1
    for offset, name in enumerate(("tf_op", "shape", "allocator_name", "bytes_allocated")):
        entry = plane.stat_metadata.add(key=next_id + offset)
        entry.value.id, entry.value.name = next_id + offset, name
    memory_ids = {entry.key for entry in plane.event_metadata if entry.value.name in _MEMORY_EVENT_NAMES}
    memory, others = [], []
    for line in view.lines:
        for batch in line.event_batches():
            for event in batch:
                (memory if event.metadata_id in memory_ids else others).append(_copy(event))
        if len(memory) > 300:
            break
    assert len(memory) > 20 and others
    return plane, memory, others[:100]


def _field(number: int, value: int) -> bytes:
    return _tag(number, 0) + varint(value & (1 << 64) - 1)


def _bytes_field(number: int, value: bytes) -> bytes:
    return _tag(number, 2) + varint(len(value)) + value


def _double(value: float) -> bytes:
    return _tag(2, 1) + struct.pack("<d", value)


def _stat(metadata_id: int | None, *values: bytes) -> bytes:
    """An XEvent.stats field: its metadata id first, then ``values`` as they are."""
    body = (_field(1, metadata_id) if metadata_id is not None else b"") + b"".join(values)
    return _bytes_field(4, body)


def _reencoded_memory_line(plane: XPlane, memory: list, others: list, rng: random.Random) -> bytes:
    """Real memory events among other events, and the same events with stats added the
    ways a writer may legally write them: a later stat of the same name or of another id
    of that name, values of every kind and range, several values in one stat (the last
    one is its oneof's), its metadata id after its value or twice, no value, known field
    numbers with other wire types, unknown fields and groups, and event metadata ids
    written twice."""
    ids = {}
    for entry in plane.stat_metadata:
        ids.setdefault(entry.value.name, []).append(entry.key)
    first, last = {name: keys[0] for name, keys in ids.items()}, {name: keys[-1] for name, keys in ids.items()}
    memory_id = next(entry.key for entry in plane.event_metadata if entry.value.name == "MemoryAllocation")
    texts = [
        b"",
        "形状/[2,3]".encode(),
        b"model/dense/MatMul",
        b"training/Adam/m/dense",
        b"[32,10]",
        b"[7,3]",
        b"[7,3,2]",
        b"[16,4]",
    ]
    numbers = [
        _field(4, 0),
        _field(4, -5),
        _field(4, 1 << 62),
        _field(4, (1 << 62) - 1),
        _field(3, 1 << 63),
        _field(3, (1 << 64) - 1),
        _field(3, 4096),
        _double(math.nan),
        _double(-0.0),
        _double(math.inf),
        _double(1.5),
        _double(1.9),
        _double(14.0),
        _double(float(1 << 62)),
        _double(math.nextafter(float(1 << 62), 0)),
        _double(-1.0),
        _field(4, 19),
        _field(4, 2),
        _field(7, 3),
    ]
    stat_ids = [entry.key for entry in plane.stat_metadata]

    def a_value() -> bytes:
        choice = rng.random()
        if choice < 0.35:
            return _bytes_field(5, rng.choice(texts))
        if choice < 0.5:
            return _field(7, rng.choice(stat_ids + [1 << 63, (1 << 64) - 1, 10**9]))
        if choice < 0.55:
            return _bytes_field(6, b"\x00\xff")
        return rng.choice(numbers)

    def a_stat() -> bytes:
        name = rng.choice(xplane_host._MemoryEvents.STATS)
        metadata_id = rng.choice([first[name], last[name]])
        shape = rng.random()
        if shape < 0.5:
            return _stat(metadata_id, a_value())
        if shape < 0.6:
            return _stat(metadata_id, a_value(), a_value(), a_value())
        if shape < 0.7:
            return _stat(None, a_value(), _field(1, metadata_id))
        if shape < 0.75:
            return _stat(rng.choice(stat_ids), a_value(), _field(1, metadata_id))
        if shape < 0.8:
            return _stat(metadata_id)
        if shape < 0.85:  # XStat field numbers with other wire types, which protobuf keeps as unknown
            return _stat(
                metadata_id, a_value(), _field(5, 7), _field(2, 1), _bytes_field(3, b"\x01"), _tag(7, 1) + bytes(8)
            )
        if shape < 0.9:
            return _stat(
                metadata_id, _group(rng.randint(9, 300), _field(1, 5) + _group(2, b"")), a_value(), _field(12, 1)
            )
        return _bytes_field(4, b"")  # a stat with nothing at all: metadata id 0

    variants = []
    for event in memory:
        wire = event.SerializeToString()
        variants.append(wire)
        variants.append(wire + b"".join(a_stat() for _ in range(rng.randint(1, 4))))
        variants.append(b"".join(a_stat() for _ in range(rng.randint(0, 3))) + wire)
        variants.append(wire + rng.choice(memory).SerializeToString())
        variants.append(wire + rng.choice(others).SerializeToString())  # no longer a memory event
        variants.append(rng.choice(others).SerializeToString() + wire + a_stat())  # become one
    for event in others:
        variants.append(event.SerializeToString())
        variants.append(event.SerializeToString() + _field(1, memory_id) + a_stat())
    rng.shuffle(variants)
    return b"".join(_bytes_field(4, variant) for variant in variants)


def _python_event_stats(events, event_ids, stat_columns: dict[int, int], column_count: int) -> list:
    """event_stats' rows as the protobuf runtime reads the events: (index, [(kind, value)])."""
    rows = []
    for index, event in enumerate(events):
        if event.metadata_id not in event_ids:
            continue
        cells = [(xplane_wire.STAT_ABSENT, 0)] * column_count
        for stat in event.stats:
            column = stat_columns.get(stat.metadata_id)
            if column is None:
                continue
            which = stat.WhichOneof("value")
            value = getattr(stat, which) if which else 0
            if which == "double_value":
                value = struct.unpack("<q", struct.pack("<d", value))[0]
            elif which in ("uint64_value", "ref_value"):
                value = struct.unpack("<q", struct.pack("<Q", value))[0]
            elif which == "bytes_value":
                value = 0
            cells[column] = (_KINDS[which], value)
        rows.append((index, cells))
    return rows


def _c_event_stats(compiled, wire: bytes, event_ids, stat_columns: dict[int, int], column_count: int) -> list:
    rows, spans = compiled.event_stats(wire, 0, len(wire), event_ids, stat_columns, column_count)
    texts = [wire[offset : offset + length].decode() for offset, length in spans]
    assert len(set(texts)) == len(texts)  # each distinct str once
    table = np.frombuffer(rows, dtype=np.int64).reshape(-1, 1 + 2 * column_count).tolist()
    return [
        (
            row[0],
            [
                (kind, texts[value] if kind == xplane_wire.STAT_STR else value)
                for kind, value in zip(row[1::2], row[2::2])
            ],
        )
        for row in table
    ]


def _memory_state(plane: XPlane, batch, pure_python: bool, monkeypatch) -> tuple:
    """What ``_MemoryEvents`` makes of the batch, read twice (so sums and first-seen orders
    carry over from a batch to the next), float values as their exact hex."""
    if pure_python:
        monkeypatch.setenv(xplane_wire.PURE_PYTHON_ENV, "1")
    else:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)
    try:
        dtypes, in_use, shapes = collections.Counter(), xplane_evidence.MemoryInUse(), {}
        memory = xplane_host._Allocations(dtypes)
        reader = xplane_host._MemoryEvents(
            xplane_events.plane_event_names(plane), xplane_events.plane_stat_names(plane), memory, in_use, shapes
        )
        ints = xplane_events.event_ints(batch)
        for line_ns in (1_700_000_000_000_000_000, 1_700_000_000_000_000_777):
            reader.read(batch, ints, line_ns)
    finally:
        monkeypatch.delenv(xplane_wire.PURE_PYTHON_ENV, raising=False)
    return (
        list(shapes),
        shapes,
        [(op, size.hex()) for op, size in memory.requested.items()],
        list(dtypes.items()),
        list(in_use.allocators.items()),
        in_use.codes,
        in_use.line_ns,
        in_use.offset_ps,
        [value.hex() for value in in_use.bytes_in_use],
    )


@pytest.mark.parametrize("path", _MEMORY_SOURCES, ids=_name)
def test_memory_stats_follow_protobuf_on_reencoded_real_events(path, compiled, monkeypatch):
    """Memory events re-encoded (``_reencoded_memory_line``): the C helper's stats are the
    protobuf runtime's, and the reader makes the same allocations, memory in use and
    allocated shapes of them on both paths, with the cap on shapes reached or not."""
    assert len(_MEMORY_SOURCES) == 2, "no real seed files found"
    plane, memory, others = _host_memory_plane(path)
    wire = _reencoded_memory_line(plane, memory, others, random.Random(len(path.name)))
    events = XLine.FromString(wire).events
    reader = xplane_host._MemoryEvents(
        xplane_events.plane_event_names(plane), xplane_events.plane_stat_names(plane), None, None, None
    )
    columns = len(reader.STATS)
    expected = _python_event_stats(events, set(reader.event_ids), reader.stat_columns, columns)
    assert len(expected) > 100
    got = _c_event_stats(compiled, wire, reader.event_ids, reader.stat_columns, columns)
    assert got == expected
    kinds = {kind for _, cells in expected for kind, _ in cells}
    assert kinds == set(range(8))  # every kind met, absent and no value included

    batch = xplane_wire.EventBatch(events, memoryview(wire), 0, len(wire))
    for cap in (xplane_host._MAX_ALLOCATED_SHAPES, 4):
        monkeypatch.setattr(xplane_host, "_MAX_ALLOCATED_SHAPES", cap)
        pure = _memory_state(plane, batch, True, monkeypatch)
        with monkeypatch.context() as patched:
            patched.setattr(xplane_host._MemoryEvents, "_read_parsed", _never_called)
            native = _memory_state(plane, batch, False, monkeypatch)
        assert native == pure
        assert pure[2] and pure[3] and pure[5]  # allocations, dtypes and samples were made
        assert len(pure[0]) == min(cap, len(pure[0]))


def test_event_stats_refuses_bad_arguments(compiled):
    wire = _bytes_field(4, _field(1, 5) + _stat(3, _field(4, 9)))
    table, spans = compiled.event_stats(wire, 0, len(wire), [5], {3: 1}, 2)
    assert np.frombuffer(table, dtype=np.int64).tolist() == [0, 0, 0, xplane_wire.STAT_INT64, 9] and spans == []
    for event_ids, stat_columns, column_count, error in [
        ([5], {3: 2}, 2, ValueError),
        ([5], {3: -1}, 2, ValueError),
        ([5], {3: 0}, -1, ValueError),
        ([5], {3: 0}, 1 << 20, ValueError),
        ([5], [(3, 0)], 1, TypeError),
        (["5"], {3: 0}, 1, TypeError),
        (5, {3: 0}, 1, TypeError),
        ([5], {"3": 0}, 1, TypeError),
        ([1 << 64], {3: 0}, 1, OverflowError),
    ]:
        with pytest.raises(error):
            compiled.event_stats(wire, 0, len(wire), event_ids, stat_columns, column_count)
    with pytest.raises(compiled.WireError, match="past the end at byte 5"):
        broken = _bytes_field(4, _field(1, 5) + _tag(4, 2) + varint(9))
        compiled.event_stats(broken, 0, len(broken), [5], {3: 0}, 1)


def test_event_stats_reads_every_event_and_flags_a_column_held_twice(compiled):
    """``event_ids`` None asks for every event; ``flag_repeats`` marks a column where the
    event held more than one stat (the row keeps the last), for readers whose rule takes
    the first that names something."""
    wire = _bytes_field(4, _field(1, 5) + _stat(3, _field(4, 9)) + _stat(3, _field(4, 11))) + _bytes_field(
        4, _field(1, 6) + _stat(3, _field(4, 7))
    )

    def rows(event_ids, flag_repeats):
        table, _ = compiled.event_stats(wire, 0, len(wire), event_ids, {3: 0}, 1, flag_repeats)
        return np.frombuffer(table, dtype=np.int64).reshape(-1, 3).tolist()

    int64, repeated = xplane_wire.STAT_INT64, xplane_wire.STAT_REPEATED
    assert rows([5], False) == [[0, int64, 11]]
    assert rows(None, False) == [[0, int64, 11], [1, int64, 7]]
    assert rows(None, True) == [[0, int64 | repeated, 11], [1, int64, 7]]


def test_event_stats_gives_up_on_texts_piled_on_one_hash(compiled):
    """The C helper's table of distinct str values has an unkeyed hash: texts a hostile file
    piles on one slot make it give up (WireError: the reader then reads the parsed events)
    instead of taking quadratic time. As many texts spread as usual are read."""
    candidates = np.arange(2_000_000, dtype=np.uint64)
    digits = candidates[:, None] // np.uint64(10) ** np.arange(7, -1, -1, dtype=np.uint64) % np.uint64(10) + np.uint64(
        ord("0")
    )
    hashes = np.full(len(candidates), 14695981039346656037, dtype=np.uint64)  # FNV-1a, as the C code
    for column in digits.T:
        hashes = (hashes ^ column) * np.uint64(1099511628211)
    piled = np.flatnonzero(hashes & np.uint64(1023) == 0)[:400]  # one slot while the table has 1024
    assert len(piled) == 400

    def line(numbers) -> bytes:
        return b"".join(
            _bytes_field(4, _field(1, 5) + _stat(3, _bytes_field(5, b"%08d" % number))) for number in numbers
        )

    wire = line(piled.tolist())
    with pytest.raises(compiled.WireError, match="share a hash"):
        compiled.event_stats(wire, 0, len(wire), [5], {3: 0}, 1)
    assert (
        xplane_wire.EventBatch(XLine.FromString(wire).events, memoryview(wire), 0, len(wire)).wire_stats([5], {3: 0}, 1)
        is None
    )
    spread = line(range(400))
    _, spans = compiled.event_stats(spread, 0, len(spread), [5], {3: 0}, 1)
    assert len(spans) == 400


_CRASH_PROBE = textwrap.dedent("""
    import json, random, sys
    from tb_opcompare.ingest.readers import _xplane_wire as c
    data = open(sys.argv[1], "rb").read()
    rng = random.Random(11)
    outcomes = {}
    for round in range(3000):
        piece = bytearray(data[rng.randrange(len(data)):][: rng.randrange(1, 5000)])
        for _ in range(rng.randint(0, 8)):
            if piece:
                piece[rng.randrange(len(piece))] = rng.randrange(256)
        piece = bytes(piece)
        ids = rng.sample(range(200), rng.randint(0, 4))
        columns = {rng.randrange(200): rng.randrange(4) for _ in range(rng.randint(0, 8))}
        for call in (lambda: c.event_ints(piece, 0, len(piece)),
                     lambda: c.split_events(piece, 0, len(piece), rng.choice([1, 64, 4096])),
                     lambda: c.event_stats(piece, 0, len(piece), ids, columns, 4),
                     lambda: c.event_stats(piece, 0, len(piece), None, columns, 4, True),
                     lambda: c.plane_header(piece, 0, len(piece)),
                     lambda: c.next_line(piece, rng.randrange(len(piece) + 1), len(piece))):
            try:
                call()
                outcome = "ok"
            except c.WireError:
                outcome = "WireError"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    for start, end in [(-1, 3), (5, 2), (0, len(data) + 1)]:
        for call in (lambda: c.event_ints(data, start, end), lambda: c.split_events(data, start, end, 4096),
                     lambda: c.event_stats(data, start, end, [1], {1: 0}, 1),
                     lambda: c.plane_header(data, start, end), lambda: c.next_line(data, start, end)):
            try:
                call()
                raise SystemExit(f"span {start}, {end} was accepted")
            except IndexError:
                pass
    print(json.dumps(outcomes))
""")


@pytest.mark.parametrize("path", _BREAK_SEEDS, ids=_name)
def test_garbage_never_crashes_the_process(path, compiled):
    """Random pieces of a real file, bytes overwritten, fed straight to the C functions in
    a child process: each returns or raises WireError; bad spans raise IndexError."""
    result = subprocess.run(
        [sys.executable, "-c", _CRASH_PROBE, str(path)], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, f"exit {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    outcomes = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes.get("ok") and outcomes.get("WireError")


@pytest.mark.parametrize("place", ["line", "event", "stat"])
def test_groups_nested_as_deep_as_protobuf_refuses_are_refused_in_c(place, compiled):
    """Events the reader never parses are checked by the C scan alone, so it refuses nested
    groups from the depth protobuf refuses them, counted from the XLine (a review found a
    stat's groups accepted 2 levels deeper than protobuf's limit)."""
    refused = []
    for depth in range(96, 103):
        groups = _tag(9, 3) * depth + _tag(9, 4) * depth
        if place == "stat":
            stat = _tag(1, 0) + varint(2) + groups
            event = _tag(1, 0) + varint(1) + _tag(4, 2) + varint(len(stat)) + stat
        else:
            event = _tag(1, 0) + varint(1) + (groups if place == "event" else b"")
        wire = (groups if place == "line" else b"") + _tag(4, 2) + varint(len(event)) + event
        try:
            XLine.FromString(wire)
            by_protobuf = False
        except Exception:  # protobuf's DecodeError
            by_protobuf = True
        outcomes = []
        for scan in (
            lambda: compiled.event_ints(wire, 0, len(wire), True),
            lambda: compiled.event_stats(wire, 0, len(wire), [1], {2: 0}, 1),
        ):
            try:
                scan()
                outcomes.append(False)
            except compiled.WireError:
                outcomes.append(True)
        assert outcomes == [by_protobuf, by_protobuf], (place, depth)
        refused.append(by_protobuf)
    assert refused[0] is False and refused[-1] is True  # the limit lies inside the range tried


# Kernels whose stats exercise each clause of the kernel-op rule (``xplane_device._KernelOps``):
# (kernel, [(stat name, value)] in event order, the op the rule gives, its type)
_KERNELS = [
    ("volta_sgemm", [("tf_op", "a/conv:Conv2D")], "a/conv", "Conv2D"),
    ("volta_sgemm", [("annotation", "outer::b/mm:MatMul#shape=[4,4]#")], "b/mm", "MatMul"),
    ("volta_sgemm", [("tf_op", "c/x:Relu"), ("annotation", "d/y:Add")], "c/x", "Relu"),  # the first settles
    ("volta_sgemm", [("annotation", "d/y:Add"), ("tf_op", "c/x:Relu")], "d/y", "Add"),
    ("volta_sgemm", [("tf_op", "no op here"), ("tf_op", "e/z:Mul")], "e/z", "Mul"),  # two of one stat
    ("volta_sgemm", [("level 0", "f/l:Sub"), ("tf_op", "not!an op")], "f/l", "Sub"),  # level 0 when nothing else
    ("volta_sgemm", [("level 0", "f/l:Sub"), ("annotation", "g/a:Neg")], "g/a", "Neg"),
    ("volta_sgemm", [("tf_op", ("ref", "h/r:Tanh"))], "h/r", "Tanh"),  # a text by reference
    # one text as a tf_op (which names no op: no type) and as an annotation (a TraceMe, its
    # own op): each read as its stat says (the plane's first reading of a text was kept for
    # every stat of it, so the annotation's kernel was an op of its own name, by order)
    ("gemv_kernel", [("tf_op", "MakeTensor")], "gemv_kernel", "(kernel without TF op)"),
    ("volta_sgemm", [("annotation", "MakeTensor")], "MakeTensor", "MakeTensor"),
    ("cudnn_kernel", [("tf_op", "XlaModule:"), ("hlo_op", "fusion.3"), ("scope_range_id", 7)], "fusion.3", "fusion"),
    ("cudnn_kernel", [("hlo_op", "fusion.3"), ("scope_range_id", 7)], "fusion.3", "fusion"),  # same execution
    ("cudnn_kernel", [("hlo_op", "fusion.3"), ("scope_range_id", ("uint64", (1 << 64) - 1))], "fusion.3", "fusion"),
    ("cudnn_kernel", [("hlo_op", "fusion.3"), ("scope_range_id", -1)], "fusion.3", "fusion"),  # another number
    (
        "loop_add_fusion_26",
        [("hlo_op", "command_buffer_1"), ("scope_range_id", 9)],
        "loop_add_fusion_26",
        "loop_add_fusion",
    ),
    ("MemcpyHtoD", [], "MemcpyHtoD", "MemcpyHtoD"),
    ("kernel_x", [], "kernel_x", "(kernel without TF op)"),
]
_KERNEL_COPIES = 40  # the line is long enough to be cut in batches, scanned ahead in a thread


def _kernel_rule_xplane(path: Path) -> None:
    """A GPU plane of ``_KERNEL_COPIES`` runs of ``_KERNELS`` on one stream line."""
    plane = XPlane(id=1, name="/device:GPU:0")
    stat_ids = {name: key for key, name in enumerate(("tf_op", "annotation", "level 0", "hlo_op", "scope_range_id"), 1)}
    stat_ids["h/r:Tanh"] = 6  # a ref_value's text is its stat metadata's name
    for name, key in stat_ids.items():
        entry = plane.stat_metadata.add(key=key)
        entry.value.id, entry.value.name = key, name
    kernel_ids = {name: key for key, name in enumerate(dict.fromkeys(kernel for kernel, *_ in _KERNELS), 100)}
    for name, key in kernel_ids.items():
        entry = plane.event_metadata.add(key=key)
        entry.value.id, entry.value.name = key, name
    line = plane.lines.add(id=1, name="Stream #7(Compute)", timestamp_ns=1_700_000_000_000_000_000)
    offset = 0
    for _ in range(_KERNEL_COPIES):
        for index, (kernel, stats, _, _) in enumerate(_KERNELS):
            event = line.events.add(metadata_id=kernel_ids[kernel], offset_ps=offset, duration_ps=1_000 + index)
            offset += 10_000
            for name, value in stats:
                stat = event.stats.add(metadata_id=stat_ids[name])
                if isinstance(value, int):
                    stat.int64_value = value
                elif value[0] == "ref":
                    stat.ref_value = stat_ids[value[1]]
                elif value[0] == "uint64":
                    stat.uint64_value = value[1]
                else:
                    stat.str_value = value
    space = XSpace()
    space.planes.append(plane)
    path.write_bytes(space.SerializeToString())


def test_kernel_ops_follow_the_rule_on_both_paths(tmp_path, compiled, monkeypatch):
    """Each clause of the kernel-op rule, on the C path (stats read as arrays, the rule
    applied once per distinct set of stats) and the pure-Python one: the same tables, the
    ops the rule names, kernels sharing a scope range id as one execution (a uint64 and an
    int64 of the same bits being two numbers), and only the kernels whose stats the arrays
    cannot order read from parsed events."""
    path = tmp_path / "vm.xplane.pb"
    _kernel_rule_xplane(path)
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", SMALL_BATCH)
    pure = _read(path, True, monkeypatch)
    spy = _Spy(compiled)
    monkeypatch.setattr(xplane_wire, "_compiled", spy)
    parsed_kernels = []
    parsed_batch = xplane_device._KernelOps._parsed_batch

    def counting(self, batch, indices):
        parsed_kernels.extend(indices)
        return parsed_batch(self, batch, indices)

    with monkeypatch.context() as patched:
        patched.setattr(xplane_events, "_event_ints_python", _never_called)
        patched.setattr(xplane_device._KernelOps, "_parsed_batch", counting)
        native = _read(path, False, monkeypatch)
    assert_same_read(native, pure)
    assert spy.calls["event_stats"] > 1 and spy.calls["split_events"] > 0
    # the third to fifth kernels: a tf_op and an annotation naming two ops, or one stat twice
    assert len(parsed_kernels) == 3 * _KERNEL_COPIES

    device = pure.op_table.frame()[pure.op_table.frame()["side"] == "device"].set_index("op_name")
    expected = {op: op_type for _, _, op, op_type in _KERNELS}
    assert device["op_type"].to_dict() == expected
    kernels = collections.Counter(op for _, _, op, _ in _KERNELS)
    assert device["kernels"].to_dict() == {op: count * _KERNEL_COPIES for op, count in kernels.items()}
    # fusion.3's kernels: scope 7 (two kernels a copy, every copy alike), 2**64 - 1, -1: three executions
    assert device.loc["fusion.3", "occurrences"] == 3
    # in a command buffer each kernel is an execution of its own; so is a kernel without a scope
    assert device.loc["loop_add_fusion_26", "occurrences"] == _KERNEL_COPIES
    assert device.loc["a/conv", "occurrences"] == _KERNEL_COPIES


def _timed_plane_xplane(path: Path, executions_ns: int, kernels_ns: int) -> None:
    """A TF 2.2-2.4 GPU plane: a ``TensorFlow Ops`` line starting at ``executions_ns``
    with two executions of one op, and a stream line starting at ``kernels_ns`` whose three
    kernels of that op start 5 ps, 7 ps and 30 ps after its start (the first two in the
    first execution, the third in none)."""
    plane = XPlane(id=1, name="/device:GPU:0")
    entry = plane.stat_metadata.add(key=1)
    entry.value.id, entry.value.name = 1, "tf_op"
    for key, name in ((100, "a/conv:Conv2D"), (101, "volta_sgemm")):
        entry = plane.event_metadata.add(key=key)
        entry.value.id, entry.value.name = key, name
    ops = plane.lines.add(id=1, name="TensorFlow Ops", timestamp_ns=executions_ns)
    ops.events.add(metadata_id=100, offset_ps=0, duration_ps=10)
    ops.events.add(metadata_id=100, offset_ps=50, duration_ps=10)
    stream = plane.lines.add(id=2, name="Stream #7(Compute)", timestamp_ns=kernels_ns)
    for offset in (5, 7, 30):
        kernel = stream.events.add(metadata_id=101, offset_ps=offset, duration_ps=2)
        kernel.stats.add(metadata_id=1).str_value = "a/conv:Conv2D"
    space = XSpace()
    space.planes.append(plane)
    path.write_bytes(space.SerializeToString())


@pytest.mark.parametrize("pure_python", [True, False])
def test_kernels_meet_their_executions_on_a_clock_of_ns_since_the_epoch(tmp_path, pure_python, monkeypatch):
    """Lines may start at ns since the epoch, whose picoseconds overflow int64 (this raised
    OverflowError, a traceback): times are taken from the earliest TensorFlow Ops line,
    whatever other lines hold (a Steps line at 0). Lines 54 years apart are a broken file,
    which the error names."""
    path = tmp_path / "vm.xplane.pb"
    epoch_ns = 1_700_000_000_000_000_000
    _timed_plane_xplane(path, epoch_ns, epoch_ns)
    space = XSpace.FromString(path.read_bytes())
    space.planes[0].lines.add(id=3, name="Steps", timestamp_ns=0).events.add(metadata_id=100, duration_ps=50)
    path.write_bytes(space.SerializeToString())
    profile = _read(path, pure_python, monkeypatch)
    (row,) = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].itertuples()
    assert (row.op_name, row.kernels, row.occurrences) == ("a/conv", 3, 2)  # 5 and 7 ps: one execution
    _timed_plane_xplane(path, 0, epoch_ns)
    error = _read(path, pure_python, monkeypatch)
    assert isinstance(error, ProfileError)
    assert "line 'Stream #7(Compute)': events lie 1,700,000,000 s from the plane's TensorFlow Ops line" in str(error)


def _kernel_totals_xplane(path: Path, durations_ps: list[int]) -> None:
    """A GPU plane without executions or scopes (its kernels summed per op): one op's
    kernels of ``durations_ps``."""
    plane = XPlane(id=1, name="/device:GPU:0")
    entry = plane.stat_metadata.add(key=1)
    entry.value.id, entry.value.name = 1, "tf_op"
    entry = plane.event_metadata.add(key=101)
    entry.value.id, entry.value.name = 101, "volta_sgemm"
    stream = plane.lines.add(id=2, name="Stream #7(Compute)", timestamp_ns=1_700_000_000_000_000_000)
    for index, duration in enumerate(durations_ps):
        kernel = stream.events.add(metadata_id=101, offset_ps=index * 100, duration_ps=duration)
        kernel.stats.add(metadata_id=1).str_value = "a/conv:Conv2D"
    space = XSpace()
    space.planes.append(plane)
    path.write_bytes(space.SerializeToString())


@pytest.mark.parametrize(
    "durations_ps", [[7, -5, 10], [3_000_000_000_000_000_000, 3_000_000_000_000_000_000, 3_000_000_000_000_000_001]]
)
def test_kernel_totals_are_the_exact_sums_of_their_durations_on_both_paths(tmp_path, durations_ps, monkeypatch):
    """Summed kernels: the picoseconds added as integers, exactly, then divided once, a
    writer's negative duration kept as written (it was, before the arrays: a review found
    it read as a 64-bit unsigned 18 million seconds), sums past int64 too."""
    path = tmp_path / "vm.xplane.pb"
    _kernel_totals_xplane(path, durations_ps)
    for pure_python in (True, False):
        profile = _read(path, pure_python, monkeypatch)
        (row,) = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].itertuples()
        assert (row.op_name, row.kernels, row.total_us) == ("a/conv", 3, sum(durations_ps) / 1e6)


@pytest.mark.parametrize("pure_python", [True, False])
def test_a_kernel_line_starting_past_int64_picoseconds_still_meets_its_executions(tmp_path, pure_python, monkeypatch):
    """A stream line 2**63 ps after the executions' line (its start alone past int64),
    whose kernels' negative offsets bring them back: two in the first execution, one in
    none (a review found this raised OverflowError)."""
    path = tmp_path / "vm.xplane.pb"
    line_ns = -(-(1 << 63) // 1000)  # the first whole ns at or past 2**63 ps
    _timed_plane_xplane(path, 0, line_ns)
    space = XSpace.FromString(path.read_bytes())
    executions, stream = space.planes[0].lines
    for execution in executions.events:  # [200, 210] and [250, 260] ps
        execution.offset_ps += 200
    # the stream starts 2**63 + 192 ps after them: its kernels at 205, 207 and 230 ps
    for kernel, at in zip(stream.events, (205, 207, 230)):
        kernel.offset_ps = at - (line_ns * 1000)
    path.write_bytes(space.SerializeToString())
    profile = _read(path, pure_python, monkeypatch)
    (row,) = profile.op_table.frame()[profile.op_table.frame()["side"] == "device"].itertuples()
    assert (row.op_name, row.kernels, row.occurrences) == ("a/conv", 3, 2)
