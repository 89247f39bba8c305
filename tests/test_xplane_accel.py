"""The xplane reader's C helpers (``_xplane_wire``) against its pure-Python code, on the
real xplanes this project has: the same batches, the same event integers, the same
tables, the same errors on broken wire, and no crash whatever the bytes."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, REALTRACES, REPO

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.ingest.readers import xplane, xplane_wire
from tb_opcompare.ingest.readers.xplane_schema import XLine

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
    return [(line_start, line_end)
            for field, _, start, end in xplane_wire.fields(view, 0, len(view)) if field == _SPACE_PLANES
            for line_field, _, line_start, line_end in xplane_wire.fields(view, start, end)
            if line_field == _PLANE_LINES]


def _c_ints(data, start: int, end: int) -> np.ndarray:
    return np.frombuffer(xplane_wire._compiled.event_ints(data, start, end), dtype=np.int64).reshape(-1, 3)


def _python_ints(data: bytes) -> np.ndarray:
    line = XLine()
    line.ParseFromString(data)
    return xplane._event_ints_python(line.events)


@pytest.fixture
def compiled():
    if xplane_wire._compiled is None:
        pytest.fail("the C extension _xplane_wire is not built in this environment "
                    "(see test_the_extension_is_built_in_this_environment)")
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


def _assert_same_outcome(native, pure) -> None:
    if isinstance(pure, Exception) or isinstance(native, Exception):
        assert type(native) is type(pure) and str(native) == str(pure)
        return
    for field in dataclasses.fields(pure):
        expected, got = getattr(pure, field.name), getattr(native, field.name)
        if isinstance(expected, pd.DataFrame):
            pd.testing.assert_frame_equal(got, expected, check_exact=True, obj=field.name)
        elif field.name == "facts":
            assert vars(got) == vars(expected)
        else:
            assert got == expected, field.name


class _Spy:
    """The compiled module, counting its calls (so a native read is known to use it)."""

    def __init__(self, module):
        self.module, self.WireError, self.calls = module, module.WireError, {"split_events": 0, "event_ints": 0}

    def split_events(self, *args):
        self.calls["split_events"] += 1
        return self.module.split_events(*args)

    def event_ints(self, *args):
        self.calls["event_ints"] += 1
        return self.module.event_ints(*args)


def _never_called(batch):
    raise AssertionError("the native read fell back to reading the parsed events")


@pytest.mark.parametrize("path", XPLANES, ids=_name)
@pytest.mark.parametrize("batch_bytes", [SMALL_BATCH, xplane_wire.EVENT_BATCH_BYTES])
def test_read_profile_gives_the_same_tables_on_both_paths(path, batch_bytes, compiled, monkeypatch):
    monkeypatch.setattr(xplane_wire, "EVENT_BATCH_BYTES", batch_bytes)
    pure = _read(path, True, monkeypatch)
    spy = _Spy(compiled)
    monkeypatch.setattr(xplane_wire, "_compiled", spy)
    with monkeypatch.context() as patched:
        patched.setattr(xplane, "_event_ints_python", _never_called)
        native = _read(path, False, monkeypatch)
    _assert_same_outcome(native, pure)
    if not isinstance(pure, Exception):
        assert spy.calls["event_ints"] > 0
        if batch_bytes == SMALL_BATCH:
            assert spy.calls["split_events"] > 0


# Broken copies of real files: cut at a few places, and bytes flipped (deterministically).
_BREAK_SEEDS = [path for path in XPLANES if "bert" in str(path)][:1] + \
    [path for path in XPLANES if "tf_keras" in str(path) and "cpu" in path.parts[-6]][:1]


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
            _assert_same_outcome(native, pure)
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
    line_wire = b"".join(_tag(4, 2) + _varint(len(variant)) + variant for variant in variants)
    expected = _python_ints(line_wire)
    assert len(expected) == len(variants)
    assert _c_ints(line_wire, 0, len(line_wire)).tobytes() == expected.tobytes()
    # the same events through the reader's batch object, as the reader asks for them
    batch = xplane_wire.EventBatch(XLine.FromString(line_wire).events, memoryview(line_wire), 0, len(line_wire))
    assert xplane._event_ints(batch).tobytes() == expected.tobytes()


def _copy(event):
    copy = XLine().events.add()
    copy.CopyFrom(event)
    return copy


def _tag(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _group(field: int, body: bytes) -> bytes:
    """``body`` as an unknown group field (wire types 3 and 4), which no XEvent writer uses
    but protobuf must skip."""
    return _tag(field, 3) + body + _tag(field, 4)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


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
        for call in (lambda: c.event_ints(piece, 0, len(piece)),
                     lambda: c.split_events(piece, 0, len(piece), rng.choice([1, 64, 4096]))):
            try:
                call()
                outcome = "ok"
            except c.WireError:
                outcome = "WireError"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    for start, end in [(-1, 3), (5, 2), (0, len(data) + 1)]:
        for call in (lambda: c.event_ints(data, start, end), lambda: c.split_events(data, start, end, 4096)):
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
    result = subprocess.run([sys.executable, "-c", _CRASH_PROBE, str(path)], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, f"exit {result.returncode}:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    outcomes = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcomes.get("ok") and outcomes.get("WireError")
