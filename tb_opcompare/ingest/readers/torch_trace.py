"""Reader for PyTorch profiler traces (``export_chrome_trace``, ``tensorboard_trace_handler``).

Host ops are ``cpu_op`` (``Operator`` in PyTorch <= 1.9) events; runtime calls
(``cuda_runtime``, ``cuda_driver``, ``Runtime``) and ``record_function`` ranges
(``user_annotation``) are host rows too, as in ``key_averages()``. Self time subtracts
the ops and runtime calls nested inside an event on the same thread. A kernel
(``kernel``/``Kernel``, memcpy, memset) belongs to the innermost op enclosing the
runtime call whose ``correlation`` id it carries, else (a launch with no op around it,
as fused optimizers make inside ``Optimizer.step#…``) to the innermost
``record_function`` range enclosing it. Steps are the distinct
``ProfilerStep#N`` annotations.

Traces run to gigabytes, so big ones are decoded a batch of events at a time
(``TraceText``), and each event is kept only as a few numbers in flat arrays (codes of
its name, category and thread, start, duration, index in the file; correlation ids
only for the runtime calls that have one).
Input shapes are decoded afterwards, for the first top-level ops only (batch size).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import re
from collections.abc import Iterable
from typing import NamedTuple

import msgspec
import numpy as np

from tb_opcompare.analysis.breakdown import side_split
from tb_opcompare.analysis.step_time import step_latency
from tb_opcompare.analysis.work import FORMULA_NAMES, Call, Work, work_from_shapes
from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.chrome_json import MAX_DURATION_US, BaseEvent, TraceText, undecodable
from tb_opcompare.ingest.readers.memory_timeline import memory_timeline
from tb_opcompare.ingest.readers.op_work import CallWork, HostTree, tf32_kernels, work_rows
from tb_opcompare.ingest.readers.step_breakdown import (
    DEVICE_CODES,
    HOST_CODES,
    NONE,
    decided_categories,
    device_rows,
    host_rows,
    joined,
    union,
)
from tb_opcompare.ingest.workers import Rank
from tb_opcompare.native import built, wanted
from tb_opcompare.schema.dimensions import is_batch_size
from tb_opcompare.schema.events import (
    ANNOTATION_TYPES,
    BREAKDOWN_COLUMNS,
    DEVICE,
    HOST,
    RUNTIME_TYPES,
    OpEvents,
    ParsedProfile,
    ProfileFacts,
    Recipe,
    crossing_events,
    crossing_warning,
    precision_from_dtypes,
    self_times,
    steps_of,
)
from tb_opcompare.schema.groups import first_appearance_ids, group_sums, integer_group_sums, starting_with
from tb_opcompare.schema.optable import BREAKDOWN_DTYPES, typed_table
from tb_opcompare.schema.table import Table

FORMAT = "pytorch"
_OP_CATEGORIES = {"cpu_op", "Operator"}
# Meta's MTIA accelerator: its command processor's events; those a runtime call launched
# (a correlation id) are its kernels, the rest (DMA requests, stream waits) its plumbing.
_MTIA_DEVICE = "mtia_ccp_events"
_DEVICE_CATEGORIES = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", _MTIA_DEVICE}
_HOST_CATEGORIES = _OP_CATEGORIES | ANNOTATION_TYPES | RUNTIME_TYPES
_PYTHON_CATEGORY = "python_function"
_MODULE_PREFIX = "nn.Module: "  # the Python frame of an nn.Module's call, with_stack=True
_STEP_PREFIX = "ProfilerStep#"
_NO_CORRELATION = -1
_COMPLETE = "X"  # the phase of an event with a duration


class _Args(msgspec.Struct, gc=False):
    correlation: int | None = None  # links a runtime launch to its kernels
    # ``[memory]`` events (``profile_memory=True``): an allocation (> 0) or free (< 0), and
    # the memory then in use on its device
    bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")


class _Event(BaseEvent, gc=False):
    # Its text, decoded (``_args_of``) only where the read wants it: a runtime call's, a
    # kernel's, a memory record's, and the inputs of the calls ``_Inputs`` keeps. Decoding
    # every event's args as it was read cost more than skipping them, and the calls' inputs
    # then had to be found again in a second pass over the file.
    args: msgspec.Raw = msgspec.Raw(b"")


class _InputArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")
    strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Strides")
    flops: float | None = None  # ``with_flops=True``, where the trace keeps it (key_averages() always does)


class _WithInputs(msgspec.Struct, gc=False):
    args: _InputArgs | None = None


_ARGS = (msgspec.json.Decoder(list[_Args | None]), msgspec.json.Decoder(_Args | None))
_INPUT_ARGS = (msgspec.json.Decoder(list[_InputArgs | None]), msgspec.json.Decoder(_InputArgs | None))


def _args_of(path: str, decoders: tuple, texts: list, indices: list[int]) -> list:
    """The ``args`` texts of events (at ``indices`` of the file) decoded in one go, each
    None where it is ``null``; a ProfileError that names the event where one is not what
    it should be."""
    if not texts:
        return []
    try:
        return decoders[0].decode(b"".join((b"[", b",".join(texts), b"]")))
    except msgspec.DecodeError:
        for text, index in zip(texts, indices):
            try:
                decoders[1].decode(text)
            except msgspec.DecodeError as error:
                raise undecodable(path, error, f"$.traceEvents[{index}].args") from None
        raise


def is_torch_trace(trace: TraceText) -> bool:
    categories = _OP_CATEGORIES | _DEVICE_CATEGORIES
    return any(event.cat in categories for _, batch in trace.batches(BaseEvent) for event in batch)


class _Columns:
    """Flat numeric columns, grown a batch at a time and read back as numpy arrays."""

    def __init__(self, **dtypes: str):
        self._dtypes = dtypes
        self._parts: dict[str, list[np.ndarray]] = {name: [] for name in dtypes}
        self._joined: dict[str, np.ndarray] = {}
        self.rows = 0

    def add(self, **values: list | np.ndarray) -> None:
        """One batch: a list or an array of equal length for every column."""
        for name, column in values.items():
            dtype = self._dtypes[name]
            if isinstance(column, np.ndarray):
                self._parts[name].append(column.astype(dtype, copy=False))
            else:
                self._parts[name].append(np.fromiter(column, dtype, len(column)))
        self.rows += len(column)

    def numpy(self, name: str) -> np.ndarray:
        if name not in self._joined:
            parts = self._parts.pop(name)
            self._joined[name] = np.concatenate(parts) if parts else np.zeros(0, self._dtypes[name])
        return self._joined[name]


class _Codes(dict):
    """Small integer codes for repeated values, numbered in order of first sight.

    ``encode`` looks each value up once at C speed; only a value not seen before calls
    back into Python (``__missing__``) to be numbered. Getting, then adding the new values,
    then getting again took four dict passes: on a million distinct op names 2.1 s, now
    about 0.9 s, and a trace of a few hundred names pays one lookup a value as before."""

    def __missing__(self, value) -> int:
        code = self[value] = len(self)
        return code

    def encode(self, values: list) -> list[int]:
        return list(map(self.__getitem__, values))


_NO_ARGS = _WithInputs()


class _Inputs(dict):
    """The recorded inputs of the calls the read needs them of (``_INPUTS_WANTED``: an op
    whose work has a formula, or whose dtypes vote for the precision), by the event's index
    in the file, kept as the events are read.

    Found afterwards, they cost a second pass over the file (0.6 s of a 212 MB CPU trace's
    2.9 s read, whose 103,000 shaped calls lie in every part of it). A model calls an op
    with the same inputs step after step: calls whose inputs read alike share one object,
    copied out of the batch's text (42 objects for those 103,000 calls)."""

    def __init__(self):
        super().__init__()
        self._alike: dict[tuple, _WithInputs] = {(): _NO_ARGS}

    def keep(self, path: str, positions: list[int], texts: list) -> None:
        """Keep the inputs of the wanted events at ``positions`` of the file, whose ``args``
        are ``texts`` (empty where an event has none)."""
        given = [k for k, text in enumerate(texts) if text]
        self.update((position, _NO_ARGS) for position, text in zip(positions, texts) if not text)
        found = _args_of(path, _INPUT_ARGS, [texts[k] for k in given], [positions[k] for k in given])
        keys = [_inputs_key(args) for args in found]
        alike = self._alike
        for n in [n for n, key in enumerate(keys) if key not in alike]:
            alike[keys[n]] = _WithInputs(_copied(found[n]))
        self.update(zip([positions[k] for k in given], map(alike.__getitem__, keys)))


def _inputs_key(args: _InputArgs | None) -> tuple:
    """What tells a call's recorded inputs apart: their texts, and the profiler's FLOPs. No
    JSON value's text holds a NUL byte (a string holds it escaped), so joined on one, two
    keys are equal only where every text is."""
    if args is None:
        return ()
    return b"\0".join((args.input_dims, args.input_type, args.concrete, args.strides)), args.flops


def _copied(args: _InputArgs) -> _InputArgs:
    """Inputs copied out of the text they were decoded from (which their views keep alive)."""
    return _InputArgs(
        input_dims=msgspec.Raw(bytes(args.input_dims)),
        input_type=msgspec.Raw(bytes(args.input_type)),
        concrete=msgspec.Raw(bytes(args.concrete)),
        strides=msgspec.Raw(bytes(args.strides)),
        flops=args.flops,
    )


def _complete(batch: list, categories: set[str]) -> list[int]:
    return [i for i, event in enumerate(batch) if event.cat in categories and event.ph == _COMPLETE]


@dataclasses.dataclass
class _TraceColumns:
    host: _Columns  # cpu ops, runtime calls, annotations
    launches: _Columns  # the host events that carry a correlation id
    memory: _Columns  # allocations and frees (``[memory]`` instant events)
    device: _Columns  # kernels, memcpys, memsets
    modules: _Columns  # ``nn.Module: <Name>_<k>`` ranges (``with_stack=True``), the modules' calls
    names: list[str]  # decoding the name codes of host and device
    categories: list[str]
    pids: list  # decoding the process and thread codes of host and memory events
    tids: list
    inputs: _Inputs  # the recorded inputs of the calls the read needs them of


class _Reading:
    """The columns and codes of a read under way, as either way of reading fills them."""

    def __init__(self):
        self.host = _Columns(name="q", cat="q", pid="q", tid="q", ts="d", dur="d", index="q")
        self.launches = _Columns(position="q", correlation="q")
        self.memory = _Columns(pid="q", tid="q", ts="d", bytes="q", total="q", device="q")
        self.device = _Columns(name="q", cat="q", ts="d", dur="d", correlation="q")
        self.modules = _Columns(name="q", pid="q", tid="q", ts="d", dur="d")
        self.names, self.categories, self.pids, self.tids = _Codes(), _Codes(), _Codes(), _Codes()
        self.inputs = _Inputs()

    def finished(self, codes: tuple[list, list, list, list] | None = None) -> _TraceColumns:
        """The columns, and the values of the codes (``codes``, where they were not
        numbered by this read's ``_Codes``: names, categories, pids, tids)."""
        names, categories, pids, tids = codes or (
            list(self.names),
            list(self.categories),
            list(self.pids),
            list(self.tids),
        )
        return _TraceColumns(
            self.host, self.launches, self.memory, self.device, self.modules, names, categories, pids, tids, self.inputs
        )


def _read_columns(trace: TraceText) -> _TraceColumns:
    """The events the reader needs, as flat columns: scanned in C (``_scanned_columns``)
    where the helper was built and is sure of the text, else decoded with msgspec
    (``_decoded_columns``). Both give the same columns, codes numbered alike."""
    scanned = _scanned_columns(trace)
    return scanned if scanned is not None else _decoded_columns(trace)


def _decoded_columns(trace: TraceText) -> _TraceColumns:
    """The events decoded with msgspec and sorted into columns a batch at a time with
    comprehensions (C-speed loops): a per-event Python loop costs twice as much on
    million-event traces. Strings are coded one field at a time (pairs are formed later, in
    numpy): hashing a fresh tuple of fresh strings per event costs more than the rest of
    the loop."""
    read = _Reading()
    host, names, categories, pids, tids = read.host, read.names, read.categories, read.pids, read.tids
    for start, batch in trace.batches(_Event):
        indices = _complete(batch, _HOST_CATEGORIES)
        events = [batch[i] for i in indices]
        positions = [start + i for i in indices]
        wanted = [k for k, event in enumerate(events) if event.name in _INPUTS_WANTED]
        read.inputs.keep(trace.path, [positions[k] for k in wanted], [events[k].args for k in wanted])
        calls = [k for k, event in enumerate(events) if event.args and event.cat not in _OP_CATEGORIES]
        _add_launches(
            read.launches,
            trace.path,
            [events[k].args for k in calls],
            [positions[k] for k in calls],
            [host.rows + k for k in calls],
        )
        host.add(
            index=positions,
            ts=[e.ts for e in events],
            dur=[e.dur for e in events],
            name=names.encode([e.name for e in events]),
            cat=categories.encode([e.cat for e in events]),
            pid=pids.encode([e.pid for e in events]),
            tid=tids.encode([e.tid for e in events]),
        )
        _add_memory_records(read.memory, (trace.path, start, batch), pids, tids)
        _add_module_calls(read.modules, batch, (names, pids, tids))
        _add_device_events(read.device, (trace.path, start, batch), names, categories)
        del batch, events
    return read.finished()


_SCAN_HELPER = built("ingest.readers._trace_scan")
# the columns ``_trace_scan.scan_events`` gives, in its order
_SCAN_COLUMNS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args_begin", "args_end")


def _scanned_columns(trace: TraceText) -> _TraceColumns | None:
    """``_decoded_columns`` by the C scanner: each batch's events as columns of codes and
    numbers, sorted into the reader's columns with numpy; only the ``args`` the read needs
    (a runtime call's, a kernel's, a memory record's, a shaped call's) are decoded, with
    msgspec, as the other way decodes them. None where the scanner was not built, or is not
    sure of the text (``_trace_scan.c``): the caller then decodes it all with msgspec,
    which says what is wrong, if anything is. (On a 212 MB CPU trace the Python loops over
    the decoded events took 1.4 s of a 3.5 s read.)"""
    helper = wanted(_SCAN_HELPER)
    ranges = trace.cut_ranges() if helper is not None else None
    if helper is None or ranges is None:
        return None
    read = _Reading()
    scanner = _Scanner(trace.data)
    firsts, start = [], 0
    for begin, end in ranges:
        found = helper.scan_events(trace.data, begin, end, scanner.tables)
        if found is None:
            return None
        rows = np.frombuffer(found, dtype=np.int64).reshape(len(_SCAN_COLUMNS), -1)
        if not _add_scanned(read, scanner, trace.path, dict(zip(_SCAN_COLUMNS, rows)), start):
            return None
        firsts.append(start)
        start += rows.shape[1]
    trace.note_cut_firsts(firsts)
    return read.finished(scanner.codes)


class _Recoded:
    """One of the scanner's code tables (a dict and a list: its values numbered by first
    sight over every event) numbered again as ``_Codes.encode`` would number what the
    msgspec way gives it (a batch's host events, then its modules, then its device
    events), whose codes order the rows made of them. Numbered with arrays, so a value
    enters one dict only (a million distinct op names took 1 s a dict)."""

    def __init__(self, table: tuple[dict, list]):
        self._lookup, self._values = table
        self._mapping = np.zeros(0, dtype=np.int64)  # scanner's code -> the read's (-1: not yet given)
        self._order: list[int] = []  # the read's code -> scanner's

    def encode(self, scanned: np.ndarray) -> np.ndarray:
        """The read's codes of these scanner's codes, new ones numbered in order of first sight."""
        if len(self._mapping) < len(self._values):
            grown = np.full(len(self._values) - len(self._mapping), -1, dtype=np.int64)
            self._mapping = np.concatenate([self._mapping, grown])
        new = scanned[self._mapping[scanned] < 0]
        if len(new):
            distinct, first = np.unique(new, return_index=True)
            ordered = distinct[np.argsort(first, kind="stable")]
            self._mapping[ordered] = np.arange(len(self._order), len(self._order) + len(ordered))
            self._order.extend(ordered.tolist())
        return self._mapping[scanned]

    def encode_values(self, values: list) -> np.ndarray:
        """``encode`` of values met outside the scanner (a module's name, its prefix cut
        off), entered in its table as ``scan_events`` enters them: a value's code is its
        place in the list, which the scanner reads from the dict."""
        lookup, known = self._lookup, self._values
        for value in values:
            if value not in lookup:
                lookup[value] = len(known)
                known.append(value)
        return self.encode(np.fromiter(map(lookup.__getitem__, values), dtype=np.int64, count=len(values)))

    def values(self) -> list:
        """The values by the read's code."""
        return list(map(self._values.__getitem__, self._order))


class _ValueFlags:
    """A test of the values of a growing list, read by code, worked out once a value and
    only for the values asked about (a million op names are never asked whether they name
    a module's Python frame)."""

    def __init__(self, values: list, test):
        self._values, self._test = values, test
        self._flags = np.zeros(0, dtype=np.int8)  # by code: 1 true, 0 false, -1 not yet worked out

    def __getitem__(self, codes: np.ndarray) -> np.ndarray:
        if len(self._flags) < len(self._values):
            self._flags = np.concatenate([self._flags, np.full(len(self._values) - len(self._flags), -1, np.int8)])
        asked_now = codes[self._flags[codes] < 0]
        if len(asked_now):  # each once, in code order (``np.unique`` sorted a million new names' codes)
            once = np.zeros(len(self._values), dtype=bool)
            once[asked_now] = True
            unknown = np.flatnonzero(once)
            asked = map(self._values.__getitem__, unknown.tolist())
            self._flags[unknown] = np.fromiter(map(self._test, asked), dtype=bool, count=len(unknown))
        return self._flags[codes] > 0


class _Scanner:
    """The C scanner's state over one file: its code tables (ph, cat, name, pid, tid: a
    dict and a list each, as ``scan_events`` fills them), their codes numbered again for
    the read, and the tests of their values that sort events into columns."""

    def __init__(self, data: bytes):
        self.tables: tuple[tuple[dict, list], ...] = tuple(({}, []) for _ in range(5))
        phase_table, category_table, name_table, pid_table, tid_table = self.tables
        self.phases, (self.names_seen, self.names) = phase_table[0], name_table
        self.name_codes, self.category_codes = _Recoded(name_table), _Recoded(category_table)
        self.pid_codes, self.tid_codes = _Recoded(pid_table), _Recoded(tid_table)
        categories, names = category_table[1], name_table[1]  # the values, by the scanner's code
        self.on_host = _ValueFlags(categories, _HOST_CATEGORIES.__contains__)
        self.on_device = _ValueFlags(categories, _DEVICE_CATEGORIES.__contains__)
        self.in_python = _ValueFlags(categories, _PYTHON_CATEGORY.__eq__)
        self.is_op = _ValueFlags(categories, _OP_CATEGORIES.__contains__)
        self.is_mtia = _ValueFlags(categories, _MTIA_DEVICE.__eq__)
        self.inputs_wanted = _ValueFlags(names, _INPUTS_WANTED.__contains__)
        self.is_module = _ValueFlags(names, lambda name: name.startswith(_MODULE_PREFIX))
        self._view = memoryview(data)

    @property
    def codes(self) -> tuple[list, list, list, list]:
        """The read's names, categories, pids and tids, by code."""
        return (
            self.name_codes.values(),
            self.category_codes.values(),
            self.pid_codes.values(),
            self.tid_codes.values(),
        )

    def texts(self, begins: np.ndarray, ends: np.ndarray) -> list:
        """The text of each span of the file (empty where it begins at -1: no ``args``)."""
        view = self._view
        return [view[begin:end] if begin >= 0 else b"" for begin, end in zip(begins.tolist(), ends.tolist())]


def _add_scanned(read: _Reading, scanner: _Scanner, path: str, batch: dict[str, np.ndarray], start: int) -> bool:
    """One scanned batch (its events from ``start`` of the file) into the read's columns,
    each kind of event chosen as ``_decoded_columns`` chooses it; False where a complete
    event's duration is not one ``chrome_json._check_durations`` accepts (the msgspec way
    then says which)."""
    ts, dur = batch["ts"].view(np.float64), batch["dur"].view(np.float64)
    complete = batch["ph"] == scanner.phases.get(_COMPLETE, -1)
    if not ((dur[complete] >= 0.0) & (dur[complete] < MAX_DURATION_US)).all():  # None (NaN) fails too
        return False
    cat, name, pid, tid, args_begin = batch["cat"], batch["name"], batch["pid"], batch["tid"], batch["args_begin"]
    host = np.flatnonzero(scanner.on_host[cat] & complete)
    positions = host + start
    wanted_inputs = host[scanner.inputs_wanted[name[host]]]
    read.inputs.keep(
        path,
        (wanted_inputs + start).tolist(),
        scanner.texts(args_begin[wanted_inputs], batch["args_end"][wanted_inputs]),
    )
    calls = np.flatnonzero(~scanner.is_op[cat[host]] & (args_begin[host] >= 0))
    at = host[calls]
    _add_launches(
        read.launches,
        path,
        scanner.texts(args_begin[at], batch["args_end"][at]),
        (at + start).tolist(),
        (read.host.rows + calls).tolist(),
    )
    read.host.add(
        index=positions,
        ts=ts[host],
        dur=dur[host],
        name=scanner.name_codes.encode(name[host]),
        cat=scanner.category_codes.encode(cat[host]),
        pid=scanner.pid_codes.encode(pid[host]),
        tid=scanner.tid_codes.encode(tid[host]),
    )
    _add_scanned_memory(read, scanner, path, batch, start)
    python = np.flatnonzero(scanner.in_python[cat] & complete)
    modules = python[scanner.is_module[name[python]]]
    if len(modules):
        read.modules.add(
            name=scanner.name_codes.encode_values(
                [scanner.names[code][len(_MODULE_PREFIX) :] for code in name[modules].tolist()]
            ),
            pid=scanner.pid_codes.encode(pid[modules]),
            tid=scanner.tid_codes.encode(tid[modules]),
            ts=ts[modules],
            dur=dur[modules],
        )
    _add_scanned_device(read, scanner, path, batch, start, np.flatnonzero(scanner.on_device[cat] & complete))
    return True


def _add_scanned_memory(read: _Reading, scanner: _Scanner, path: str, batch: dict[str, np.ndarray], start: int) -> None:
    """The scanned batch's ``[memory]`` records (``_add_memory_records``)."""
    code = scanner.names_seen.get(_MEMORY_EVENT)
    if code is None:
        return
    picked = np.flatnonzero((batch["name"] == code) & (batch["args_begin"] >= 0))
    kept, found = _memory_args(
        path, scanner.texts(batch["args_begin"][picked], batch["args_end"][picked]), (picked + start).tolist()
    )
    if kept:
        at = picked[kept]
        read.memory.add(
            pid=scanner.pid_codes.encode(batch["pid"][at]),
            tid=scanner.tid_codes.encode(batch["tid"][at]),
            ts=batch["ts"][at].view(np.float64),
            **_memory_values(found),
        )


def _add_scanned_device(
    read: _Reading, scanner: _Scanner, path: str, batch: dict[str, np.ndarray], start: int, picked: np.ndarray
) -> None:
    """The scanned batch's kernels, memcpys and memsets (at ``picked``; ``_add_device_events``)."""
    correlations = _correlations(
        path, scanner.texts(batch["args_begin"][picked], batch["args_end"][picked]), (picked + start).tolist()
    )
    kept = _launched_or_not_mtia(correlations, scanner.is_mtia[batch["cat"][picked]].tolist())
    at = picked[kept]
    read.device.add(
        ts=batch["ts"][at].view(np.float64),
        dur=batch["dur"][at].view(np.float64),
        name=scanner.name_codes.encode(batch["name"][at]),
        cat=scanner.category_codes.encode(batch["cat"][at]),
        correlation=[_NO_CORRELATION if correlations[k] is None else correlations[k] for k in kept],
    )


def _add_launches(launches: _Columns, path: str, texts: list, positions: list[int], rows: list[int]) -> None:
    """The host events (not ops) that carry a correlation id, a runtime call's launch, of
    the events (host rows ``rows``, at ``positions`` of the file) that are not ops and have
    ``args`` (``texts``)."""
    found = _args_of(path, _ARGS, texts, positions)
    linked = [
        (row, args.correlation) for row, args in zip(rows, found) if args is not None and args.correlation is not None
    ]
    launches.add(position=[row for row, _ in linked], correlation=[correlation for _, correlation in linked])


def _add_memory_records(memory: _Columns, read: tuple[str, int, list], pids: _Codes, tids: _Codes) -> None:
    """The batch's ``[memory]`` records: an allocation (bytes > 0) or a free, and the memory
    in use after it where PyTorch reported it."""
    path, start, batch = read
    picked = [i for i, e in enumerate(batch) if e.name == _MEMORY_EVENT and e.args]
    kept, found = _memory_args(path, [batch[i].args for i in picked], [start + i for i in picked])
    if kept:
        events = [batch[picked[k]] for k in kept]
        memory.add(
            pid=pids.encode([e.pid for e in events]),
            tid=tids.encode([e.tid for e in events]),
            ts=[e.ts for e in events],
            **_memory_values(found),
        )


def _memory_args(path: str, texts: list, positions: list[int]) -> tuple[list[int], list[_Args]]:
    """Which of ``[memory]`` events (``args`` ``texts``, at ``positions`` of the file) are
    records (they say how many bytes), and their args."""
    found = _args_of(path, _ARGS, texts, positions)
    kept = [k for k, args in enumerate(found) if args is not None and args.bytes is not None]
    return kept, [found[k] for k in kept]


def _memory_values(found: list[_Args]) -> dict[str, list]:
    """The memory columns the records' args give."""
    return {
        "bytes": [args.bytes for args in found],
        "total": [_NOT_REPORTED if args.total_allocated is None else args.total_allocated for args in found],
        "device": [_memory_device(args) for args in found],
    }


def _add_device_events(device: _Columns, read: tuple[str, int, list], names: _Codes, categories: _Codes) -> None:
    """The batch's kernels, memcpys and memsets, each with the correlation id of the launch
    that made it (MTIA's command processor: only the events a launch made)."""
    path, start, batch = read
    picked = _complete(batch, _DEVICE_CATEGORIES)
    correlations = _correlations(path, [batch[i].args for i in picked], [start + i for i in picked])
    kept = [
        (batch[picked[k]], _NO_CORRELATION if correlations[k] is None else correlations[k])
        for k in _launched_or_not_mtia(correlations, [batch[i].cat == _MTIA_DEVICE for i in picked])
    ]
    device.add(
        ts=[e.ts for e, _ in kept],
        dur=[e.dur for e, _ in kept],
        name=names.encode([e.name for e, _ in kept]),
        cat=categories.encode([e.cat for e, _ in kept]),
        correlation=[correlation for _, correlation in kept],
    )


def _correlations(path: str, texts: list, positions: list[int]) -> list[int | None]:
    """The correlation id in each device event's ``args`` (``texts``, empty where it has
    none; at ``positions`` of the file), None where it has none."""
    given = [k for k, text in enumerate(texts) if text]
    decoded = dict(zip(given, _args_of(path, _ARGS, [texts[k] for k in given], [positions[k] for k in given])))
    return [getattr(decoded.get(k), "correlation", None) for k in range(len(texts))]


def _launched_or_not_mtia(correlations: list[int | None], mtia: list[bool]) -> list[int]:
    """Which device events are kept: all but MTIA's command processor's that no launch made
    (its DMA requests and stream waits)."""
    return [k for k, correlation in enumerate(correlations) if not mtia[k] or correlation is not None]


def _add_module_calls(modules: _Columns, batch: list, codes: tuple[_Codes, _Codes, _Codes]) -> None:
    """The batch's ``nn.Module: <Name>_<k>`` ranges (``with_stack=True``): the modules' calls."""
    names, pids, tids = codes
    events = [e for e in batch if e.cat == _PYTHON_CATEGORY and e.ph == _COMPLETE and e.name.startswith(_MODULE_PREFIX)]
    if events:
        modules.add(
            name=names.encode([e.name[len(_MODULE_PREFIX) :] for e in events]),
            pid=pids.encode([e.pid for e in events]),
            tid=tids.encode([e.tid for e in events]),
            ts=[e.ts for e in events],
            dur=[e.dur for e in events],
        )


def read_torch_trace(path: str, trace: TraceText) -> ParsedProfile:
    return _read_trace(path, trace).parsed()


@dataclasses.dataclass
class RankRead:
    """One rank's trace of a distributed job, read (its events, not yet pooled): what a
    worker of a cluster returns for the job's reader to combine (``combine_ranks``)."""

    trace: _OneTrace
    worker: dict  # rank, world_size, file, steps, step_time_us, host_op_time_us, step_parts


def read_torch_rank(path: str, trace: TraceText, rank: Rank | None) -> RankRead:
    read = _read_trace(path, trace)
    facts = read.facts
    worker = {
        "rank": rank.rank if rank else None,
        "world_size": rank.world_size if rank else None,
        "file": path.rsplit("/", 1)[-1],
        "steps": facts.steps,
        "step_time_us": step_latency([facts.step_times_us]).median_us,
        "host_op_time_us": float(
            sum(read.events.self_time) + sum(part["self_us"].sum() for part in read.events.host_partials)
        ),
        "step_parts": _own_step_parts(facts.step_times_us, read.events.breakdown),
    }
    return RankRead(read, worker)


def _own_step_parts(step_times_us: list[float], breakdown: dict | None) -> dict[str, float]:
    """A rank's own median steady step, its host parts (the job's split is its slowest
    rank's, step by step: each rank's own shows beside it which one waited on the others)."""
    if breakdown is None:
        return {}
    split = side_split([(step_times_us, typed_table(breakdown, BREAKDOWN_DTYPES))])
    return split.parts.get(HOST, {}) if split else {}


def combine_ranks(reads: Iterable[RankRead]) -> ParsedProfile:
    """The ranks of one job, read each on its own (in rank order), as one run. Each op's
    executions are every rank's (its mean per execution pooled over ranks); a step lasts
    as long as its slowest rank, since the job's step ends when the last rank ends it; the
    batch size is each rank's. ``facts.workers`` keeps each rank's own figures, for a
    per-worker breakdown."""
    job: _OneTrace | None = None
    workers, step_times, splits = [], [], []
    for rank_read in reads:
        workers.append(rank_read.worker)
        step_times.append(rank_read.trace.facts.step_times_us)
        splits.append(rank_read.trace.events.breakdown)
        if job is None:
            job = rank_read.trace
        else:
            _absorb_rank(job, rank_read.trace, workers)
    if job is None:
        raise ValueError("combine_ranks: no rank to combine")
    facts = job.facts
    _job_steps(facts, workers, step_times)
    job.events.breakdown = _slowest_ranks_split(facts.step_times_us, step_times, splits)
    if facts.batch_size_source:
        facts.batch_size_source += f" (per rank, {len(workers)} ranks)"
    facts.workers = workers
    return job.parsed()


def _absorb_rank(job: _OneTrace, read: _OneTrace, workers: list[dict]) -> None:
    """Add a later rank (``workers[-1]``) to the job: its events and module ops, and a
    warning where it ran with another configuration than the first rank."""
    job.events.absorb(read.events)
    if read.module_recipe is not None:
        job.module_recipe = (
            read.module_recipe
            if job.module_recipe is None
            else Recipe(_summed_module_tables, (job.module_recipe, read.module_recipe))
        )
    facts, first = read.facts, job.facts
    for name in ("batch_size", "precision", "compiler", "device"):
        if getattr(facts, name) != getattr(first, name):
            first.warnings.append(
                f"rank {workers[-1]['rank']} ({workers[-1]['file']}) ran with {name} "
                f"{getattr(facts, name)}, rank {workers[0]['rank']} with {getattr(first, name)}; "
                f"rank {workers[0]['rank']}'s is shown"
            )
    first.warnings.extend(f"rank {workers[-1]['rank']}: {warning}" for warning in facts.warnings)
    names = {name for text in (first.device_name, facts.device_name) if text for name in text.split(", ")}
    first.device_name = ", ".join(sorted(names)) or None


def _job_steps(facts: ProfileFacts, workers: list[dict], step_times: list) -> None:
    """The job's steps. A rank without step markers cannot say how long its steps took: the
    job's steps are timed on the ranks that can (their steps end together, each waiting on
    the others' gradients), and the run says which rank was left out; rank 0's own steps
    never stand for the job's."""
    timed = [times for times in step_times if len(times)]
    timed_ranks = _ranks_text([worker for worker, times in zip(workers, step_times) if len(times)])
    untimed = [worker for worker, times in zip(workers, step_times) if not len(times)]
    steps = min((len(times) for times in timed), default=0)
    facts.step_times_us, facts.step_time_us, facts.steps = [], None, None
    facts.steps_source = "unknown: no rank's trace has step markers"
    if steps:
        facts.step_times_us = [max(times[k] for times in timed) for k in range(steps)]
        facts.step_time_us = sum(facts.step_times_us) / steps
        facts.steps = steps
        facts.steps_source = f"ProfilerStep#N annotations of {timed_ranks}" + (
            ", each step as long as its slowest rank" if len(timed) > 1 else ""
        )
    if untimed and timed:
        left_out = ", ".join(f"rank {worker['rank']} ({worker['file']})" for worker in untimed)
        facts.warnings.append(
            f"{left_out} {'has' if len(untimed) == 1 else 'have'} no step markers: the job's steps "
            f"are timed on {timed_ranks}"
        )


def _slowest_ranks_split(job_times: list[float], step_times: list, splits: list) -> dict[str, list] | None:
    """The job's step breakdown: each step's from the rank whose step it was as long as (the
    slowest, which sets the job's step), so that it adds up to the job's step."""
    if not job_times or any(split is None for split, times in zip(splits, step_times) if len(times)):
        return None
    rows: dict[str, list] = {column: [] for column in BREAKDOWN_COLUMNS}
    for step, time in enumerate(job_times):
        rank = next(index for index, times in enumerate(step_times) if len(times) > step and times[step] == time)
        split = splits[rank]
        for position in (index for index, value in enumerate(split["step"]) if value == step):
            for column in BREAKDOWN_COLUMNS:
                rows[column].append(split[column][position])
    return rows


def _ranks_text(workers: list[dict]) -> str:
    """``rank 0``, ``ranks 0, 2``: the ranks of ``workers``, as a job's notes name them."""
    ranks = ", ".join(str(worker["rank"]) for worker in workers)
    return f"rank {ranks}" if len(workers) == 1 else f"ranks {ranks}"


@dataclasses.dataclass
class _OneTrace:
    """One trace read: its facts, its events, and its ops by module where it has stacks."""

    facts: ProfileFacts
    events: OpEvents
    module_recipe: Recipe | None = None

    def parsed(self) -> ParsedProfile:
        return ParsedProfile(self.facts, self.events, module_recipe=self.module_recipe)


def _read_trace(path: str, trace: TraceText) -> _OneTrace:
    """The steps: the events as columns (``_read_columns``); the host events sorted and
    keyed (``_host_rows``); the host rows, memory and kernels added to the events, each
    under the op PyTorch counts it under; then the facts (steps, batch size, precision,
    compiler) and, with stacks, the ops by module."""
    columns = _read_columns(trace)
    if not columns.host.rows and not columns.device.rows:
        raise ProfileError(path, "a PyTorch trace with no cpu_op, runtime or kernel events")
    rows = _host_rows(columns)
    events = OpEvents()
    events.step_count = len(rows.steps)
    _add_host_rows(events, rows)
    facts = ProfileFacts(format=FORMAT, framework="PyTorch")
    allocations = _add_memory(events, facts, columns, rows) if columns.memory.rows else None
    kernels = _add_device(events, facts, columns, rows, trace.device_names) if columns.device.rows else None
    _settle_steps(facts, rows.steps)
    events.breakdown = _step_breakdown(columns, rows)
    work_probes = _work_probes(rows)
    decoded = _settle_inputs(facts, trace, columns, rows, work_probes)
    if len(work_probes):
        events.work.append(_op_work(rows, work_probes, decoded, kernels))
    facts.compiler, facts.compiler_source = _compiler_of(columns.names, columns.host.numpy("name"))
    if events.crossings:
        facts.warnings.append(crossing_warning(events.crossings))
    read = _OneTrace(facts, events)
    if columns.modules.rows:
        module_of, paths = _modules_of(
            columns, columns.host.numpy("pid")[rows.order], columns.host.numpy("tid")[rows.order], rows.starts
        )
        parts = _module_parts(rows, module_of, kernels, allocations)
        named = np.asarray([*paths, ""], dtype=object)  # -1: outside every module
        read.module_recipe = Recipe(_module_table, (*parts, named))
    return read


class _Nesting(NamedTuple):
    """The host rows nested (``_add_host_rows``), each array by position."""

    parents: np.ndarray  # its enclosing event (-1: top level)
    counted_as: np.ndarray  # the event it is counted as (``_fold_only_children``)
    counted_selfs: np.ndarray  # self time as counted
    selfs: np.ndarray  # each event's own self time


class _RowKeys(NamedTuple):
    """The host rows' keys, by key code: as pairs, and the columns the reader tests."""

    keys: list[tuple[str, str]]  # (op name, row type)
    names: list[str]
    types: list[str]
    is_op: np.ndarray  # the type is the name: an op's row, not a runtime call's or an annotation's
    distinct: bool  # no two keys equal as text (``_row_keys``)


@dataclasses.dataclass
class _HostRows:
    """The trace's host events as rows are counted: sorted by thread, then start (the
    longer first), the ``ProfilerStep#N`` ranges left out (they give the steps); each with
    the code of its row key and, once nested (``_add_host_rows``), its enclosing event and
    the event it is counted as. Positions index these sorted arrays."""

    key_table: _RowKeys
    steps: dict[str, tuple[float, float]]  # step name -> (start, duration)
    step_threads: np.ndarray  # each step's (in start order) thread: the one its longest range is on
    first_step: tuple[float, float] | None  # (start, end) of the earliest step
    order: np.ndarray  # position -> the event's host column
    codes: np.ndarray  # position -> its key's code
    starts: np.ndarray
    durations: np.ndarray
    threads: np.ndarray
    step_of: np.ndarray  # position -> its step (-1: none)
    nesting: _Nesting | None = None  # once nested

    @property
    def nested(self) -> _Nesting:
        """The rows' nesting; an error before ``_add_host_rows`` made it."""
        if self.nesting is None:
            raise RuntimeError("the host rows are not nested yet")
        return self.nesting

    @property
    def keys(self) -> list[tuple[str, str]]:
        """(op name, row type) of each key code: an op's type is its name, a runtime call's
        or an annotation's its category."""
        return self.key_table.keys

    @property
    def key_names(self) -> list[str]:
        return self.key_table.names

    @property
    def op_keys(self) -> np.ndarray:
        """Whether each key is an op's (not a runtime call's or an annotation's)."""
        return self.key_table.is_op

    def names_flags(self, flags: np.ndarray) -> np.ndarray:
        """Per-key ``flags`` (one for each of ``keys``) at each position."""
        return flags[self.codes] if len(self.codes) else np.zeros(0, dtype=bool)


def _host_rows(columns: _TraceColumns) -> _HostRows:
    host, names = columns.host, columns.names
    kind_codes, kind_names, kind_categories = _pair_code_columns(host.numpy("name"), host.numpy("cat"))
    thread_codes, _, _ = _pair_code_columns(host.numpy("pid"), host.numpy("tid"))
    is_step = starting_with(names, (_STEP_PREFIX,))[host.numpy("name")]
    step_starts, step_durations = host.numpy("ts")[is_step], host.numpy("dur")[is_step]
    step_names = list(map(names.__getitem__, host.numpy("name")[is_step].tolist()))
    steps = _step_ranges(step_names, step_starts, step_durations)
    step_threads = _step_threads(step_names, step_starts, step_durations, thread_codes[is_step])
    first_step = None
    if len(step_starts):
        first = int(np.argmin(step_starts))
        first_step = (float(step_starts[first]), float(step_starts[first] + step_durations[first]))
    row_of_kind, row_keys = _row_keys(columns, kind_names, kind_categories)
    kept = np.flatnonzero(~is_step)
    ts, durations, threads_of = host.numpy("ts")[kept], host.numpy("dur")[kept], thread_codes[kept]
    order = kept[np.lexsort((-durations, ts, threads_of))]
    starts = host.numpy("ts")[order]
    return _HostRows(
        key_table=row_keys,
        steps=steps,
        step_threads=step_threads,
        first_step=first_step,
        order=order,
        codes=row_of_kind[kind_codes[order]] if len(order) else np.zeros(0, dtype=np.int64),
        starts=starts,
        durations=host.numpy("dur")[order],
        threads=thread_codes[order],
        step_of=_steps_of(starts, steps),
    )


def _row_keys(
    columns: _TraceColumns, kind_names: np.ndarray, kind_categories: np.ndarray
) -> tuple[np.ndarray, _RowKeys]:
    """Each kind's row, and the rows' keys, numbered in the order first met over the kinds.
    Kinds are grouped on integer codes (an op's type, its name, coded -1; a runtime call's
    or an annotation's, its category): a string is looked up once a distinct row, and no
    pass in Python runs over the op rows but to make their pairs."""
    names, categories = columns.names, columns.categories
    is_op_category = np.fromiter(map(_OP_CATEGORIES.__contains__, categories), dtype=bool, count=len(categories))
    row_types = np.where(is_op_category[kind_categories], -1, kind_categories)
    row_of_kind, first_kinds = first_appearance_ids([kind_names, row_types])
    key_names = list(map(names.__getitem__, kind_names[first_kinds].tolist()))
    key_types, type_codes = list(key_names), row_types[first_kinds]
    others = np.flatnonzero(type_codes >= 0)
    for index, code in zip(others.tolist(), type_codes[others].tolist()):
        key_types[index] = categories[code]
    # The (name, type) codes are distinct, and so are names and categories as text: two keys
    # can read the same only where a runtime call or annotation is named as its category
    # and an op bears that name too.
    distinct = not any(key_names[index] == key_types[index] for index in others.tolist())
    return row_of_kind, _RowKeys(list(zip(key_names, key_types)), key_names, key_types, type_codes < 0, distinct)


def _settle_steps(facts: ProfileFacts, steps: dict[str, tuple[float, float]]) -> None:
    if steps:
        facts.steps, facts.steps_source = len(steps), "ProfilerStep#N annotations"
        facts.step_time_us = sum(duration for _, duration in steps.values()) / len(steps)
        facts.step_times_us = [float(duration) for _, duration in sorted(steps.values())]


def _settle_inputs(
    facts: ProfileFacts, trace: TraceText, columns: _TraceColumns, rows: _HostRows, work_probes: np.ndarray
) -> dict[int, _WithInputs]:
    """The batch size and the precision, from the inputs of a few op events (their
    ``Input Dims`` and ``Input type``, decoded from the file for those events only, with
    those of ``work_probes``, whose decoded inputs are returned)."""
    file_indices = columns.host.numpy("index")[rows.order]
    batch_probes = _batch_probes(rows)
    precision_probes = _precision_probes(rows.key_names, rows.codes, file_indices)
    decoded = _decoded_inputs(trace, file_indices, columns.inputs, batch_probes, precision_probes, work_probes)
    evidence = _batch_size_evidence(batch_probes, decoded, rows) if len(batch_probes) else None
    precision = _precision_of(precision_probes, decoded)
    if precision:
        facts.precision, facts.precision_source = precision
    if evidence:
        facts.batch_size, facts.batch_size_source, facts.batch_size_agreement = evidence
    return decoded


def _work_probes(rows: _HostRows) -> np.ndarray:
    """The op events whose work ``analysis.work`` has a formula for (all their calls: an
    op's work is the sum of its calls')."""
    known = np.fromiter(map(FORMULA_NAMES.__contains__, rows.key_names), dtype=bool, count=len(rows.keys))
    return np.flatnonzero(rows.names_flags(known & rows.op_keys))


def _op_work(rows: _HostRows, probes: np.ndarray, decoded: dict[int, _WithInputs], kernels: tuple | None) -> dict:
    """``WORK_COLUMNS`` of the ops of ``probes`` (``op_work.work_rows``): each call's work,
    the profiler's figure first (``with_flops``, where the trace keeps it), else the
    formula's on its recorded inputs. A model calls each op with the same inputs step after
    step, so each distinct (op, inputs) is computed once: 9,294 calls of kineto's ResNet-50
    are 283 distinct ones. Calls whose inputs read alike share one object
    (``_Inputs``): the object tells them apart."""
    flops, sizes = np.full(len(probes), np.nan), np.full(len(probes), np.nan)
    profiled, why = np.zeros(len(probes), dtype=bool), [""] * len(probes)
    known: dict[tuple, tuple[Work | None, str]] = {}
    for index, position in enumerate(probes.tolist()):
        args = decoded[position].args
        if args is None:
            why[index] = _NO_SHAPES
            continue
        key = (int(rows.codes[position]), id(args))  # ``decoded`` holds every args object till the end
        if key not in known:
            known[key] = _call_work(rows.keys[rows.codes[position]][0], args)
        found, reason = known[key]
        if args.flops is not None:
            flops[index], profiled[index] = args.flops, True
        elif found is not None:
            flops[index] = found.flops
        else:
            why[index] = reason
        sizes[index] = found.bytes if found is not None else np.nan
    tree = HostTree(rows.keys, rows.codes, rows.nested.parents, rows.durations)
    launched = None if kernels is None else (kernels[3], kernels[2], kernels[4])
    return work_rows(tree, CallWork(probes, flops, sizes, profiled, why), launched)


def _call_work(name: str, args: _InputArgs) -> tuple[Work | None, str]:
    """One call's work by the formulas, or None and why not."""
    dims = _raw_list(args.input_dims)
    if dims is None:
        return None, _NO_SHAPES
    call = Call(dims, *(_raw_list(raw) or [] for raw in (args.input_type, args.concrete, args.strides)))
    found = work_from_shapes(name, call)
    return found, "" if found is not None else _NOT_ENOUGH


_NO_SHAPES = "the trace records no input shapes (torch.profiler's record_shapes=True records them)"
_NOT_ENOUGH = "the recorded inputs lack what the formula needs (a convolution's stride and padding: PyTorch 2.x)"


def _same_text(values: list) -> np.ndarray:
    """For each code, the first code whose value reads the same (``25738`` and ``"25738"``)."""
    first: dict[str, int] = {}
    return np.fromiter(
        (first.setdefault(str(value), code) for code, value in enumerate(values)), dtype=np.int64, count=len(values)
    )


_MEMORY_EVENT = "[memory]"
_MEMORY_DEVICE_TYPES = {0: "CPU", 1: "GPU", 6: "GPU"}  # c10::DeviceType: 0 CPU, 1 CUDA, 6 HIP (ROCm)
_NOT_REPORTED = -1  # "Total Allocated" absent (PyTorch 1.8 wrote none): no peak to tell


def _memory_device(args: _Args) -> int:
    """A code for the memory's device: -1 the CPU, else type * 1024 + index."""
    if not args.device_type:
        return -1
    return args.device_type * 1024 + max(args.device_id or 0, 0)


def _memory_device_name(code: int) -> str:
    if code < 0:
        return "CPU"
    kind = _MEMORY_DEVICE_TYPES.get(code // 1024, f"device type {code // 1024}")
    return f"{kind}:{code % 1024}"


def _add_memory(
    events: OpEvents, facts: ProfileFacts, columns: _TraceColumns, rows: _HostRows
) -> tuple[np.ndarray, np.ndarray]:
    """Each allocation and free to the innermost host event around it on its thread (as
    ``key_averages()`` counts an op's self memory), and the run's peak memory per device.
    Returns each allocation's host event (a position in ``rows``) and its bytes."""
    memory = columns.memory
    container = _memory_containers(columns, rows)
    sizes = memory.numpy("bytes")
    placed = container >= 0
    events.add_memory(rows.keys, rows.codes[container[placed]], sizes[placed])
    allocations = placed & (sizes > 0)
    # Memory in use after each record, per device, where reported (PyTorch 1.8 wrote no
    # "Total Allocated": no peak and no timeline there, rather than zeros). The peak and the
    # timeline come from the same samples, and the timeline's thinning keeps highs, so the
    # timeline peaks at the peak.
    totals, devices, stamps = memory.numpy("total"), memory.numpy("device"), memory.numpy("ts")
    reported = totals != _NOT_REPORTED
    device_codes, device_of = np.unique(devices[reported], return_inverse=True)
    names = [_memory_device_name(device) for device in device_codes.tolist()]
    peaks = np.full(len(names), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(peaks, device_of.reshape(-1), totals[reported])
    facts.peak_memory_bytes.update(zip(names, peaks.tolist()))
    events.memory_timeline = memory_timeline(names, device_of.reshape(-1), stamps[reported], totals[reported])
    facts.memory_events = int(len(sizes))
    return container[allocations], sizes[allocations]


def _memory_containers(columns: _TraceColumns, rows: _HostRows) -> np.ndarray:
    """Each memory record's innermost host event open at its stamp on its thread (a
    position in ``rows``; -1: none). A thread is matched by its ids' text: PyTorch 1.8
    wrote an op's ``tid`` as a string and a memory record's as a number."""
    host, memory, order, parents = columns.host, columns.memory, rows.order, rows.nested.parents
    starts, ends = rows.starts, rows.starts + rows.durations
    same_pid, same_tid = _same_text(columns.pids), _same_text(columns.tids)
    thread_of_host = (same_pid[host.numpy("pid")[order]] << 32) | same_tid[host.numpy("tid")[order]]
    thread_of_memory = (same_pid[memory.numpy("pid")] << 32) | same_tid[memory.numpy("tid")]
    # host events sort by thread, then start; where two spellings of one thread meet, again
    sorted_positions = (
        np.arange(len(thread_of_host))
        if np.all(thread_of_host[:-1] <= thread_of_host[1:])
        else np.lexsort((starts - ends, starts, thread_of_host))
    )
    thread_sorted, starts_sorted = thread_of_host[sorted_positions], starts[sorted_positions]
    stamps = memory.numpy("ts")
    container = np.full(len(stamps), -1, dtype=np.int64)
    for thread in np.unique(thread_of_memory).tolist():
        first, last = np.searchsorted(thread_sorted, [thread, thread + 1])
        if first == last:
            continue
        mine = np.flatnonzero(thread_of_memory == thread)
        place = first + np.searchsorted(starts_sorted[first:last], stamps[mine], side="right") - 1
        candidate = np.where(place >= first, sorted_positions[place.clip(min=0)], -1)
        active = np.flatnonzero(candidate >= 0)
        while len(active):  # climb to the innermost event still open at the stamp
            ended = ends[candidate[active]] < stamps[mine[active]]  # a record at an op's end is the op's
            candidate[active[ended]] = parents[candidate[active[ended]]]
            active = active[ended & (candidate[active] >= 0)]
        container[mine] = candidate
    return container


def _pair_code_columns(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A code per (first, second) pair of small codes, and each code's first and second."""
    unique, inverse = np.unique((first << 32) | second, return_inverse=True)
    return inverse.reshape(-1), unique >> 32, unique & 0xFFFFFFFF


def _pair_codes(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """A code per (first, second) pair of small codes, and the pairs in code order."""
    codes, firsts, seconds = _pair_code_columns(first, second)
    return codes, list(zip(firsts.tolist(), seconds.tolist()))


def _scatter(count: int, launches: _Columns) -> np.ndarray:
    """Each host event's correlation id (``_NO_CORRELATION`` where it has none)."""
    correlations = np.full(count, _NO_CORRELATION, dtype=np.int64)
    correlations[launches.numpy("position")] = launches.numpy("correlation")
    return correlations


def _step_ranges(names: list[str], starts: np.ndarray, durations: np.ndarray) -> dict[str, tuple[float, float]]:
    """(start, duration) of each distinct ``ProfilerStep#N``: the longest range of that
    name (a step can be marked on more than one thread)."""
    ranges: dict[str, tuple[float, float]] = {}
    for name, start, duration in zip(names, starts.tolist(), durations.tolist()):
        if name not in ranges or duration > ranges[name][1]:
            ranges[name] = (start, duration)
    return ranges


def _step_threads(names: list[str], starts: np.ndarray, durations: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """The thread of each distinct step's longest range (``_step_ranges``'s), the steps in
    start order: the thread that drives it."""
    longest: dict[str, tuple[float, float, int]] = {}
    for name, start, duration, thread in zip(names, starts.tolist(), durations.tolist(), threads.tolist()):
        if name not in longest or duration > longest[name][1]:
            longest[name] = (start, duration, thread)
    return np.asarray([thread for _, _, thread in sorted(longest.values())], dtype=np.int64)


def _steps_of(starts: np.ndarray, ranges: dict[str, tuple[float, float]]) -> np.ndarray:
    """Each event's step (an index of ``ranges`` in start order), by where it starts; -1
    outside every step."""
    if not ranges:
        return np.full(len(starts), -1, dtype=np.int64)
    return steps_of(starts, np.asarray(sorted((start, start + duration) for start, duration in ranges.values())))


def _add_host_rows(events: OpEvents, rows: _HostRows) -> None:
    """Add the host rows (self time by nesting on each thread), and note in ``rows`` each
    event's enclosing event, the event it is counted as (``_fold_only_children``) and its
    self time as counted."""
    codes, starts, durations = rows.codes, rows.starts, rows.durations
    parents = np.full(len(codes), -1, dtype=np.int64)
    selfs = np.empty(len(codes), dtype=np.float64)
    bounds = [0, *(np.flatnonzero(np.diff(rows.threads)) + 1).tolist(), len(codes)]
    for begin, end in zip(bounds, bounds[1:]):
        selfs[begin:end], local = self_times(starts[begin:end], durations[begin:end])
        events.crossings += crossing_events(starts[begin:end], durations[begin:end], local)
        parents[begin:end] = np.where(local >= 0, local + begin, -1)
    counted_as = _fold_only_children(parents, codes)
    kept = counted_as == np.arange(len(codes))
    merged_selfs = np.bincount(counted_as, weights=selfs, minlength=len(codes))
    events.add_host_codes(
        rows.keys,
        codes[kept],
        durations[kept],
        merged_selfs[kept],
        steps=rows.step_of[kept],
        distinct_keys=rows.key_table.distinct,
    )
    rows.nesting = _Nesting(parents, counted_as, merged_selfs, selfs)


_SYNCHRONIZE = ("Synchronize",)  # cudaStreamSynchronize, cudaDeviceSynchronize, hipEventSynchronize …
_BACKWARD = re.compile(r"^autograd::engine::evaluate_function|Backward\d*$")


def _own_category(name: str, row_type: str) -> int:
    """What an event is by itself (``step_breakdown.NONE``: what encloses it): the
    DataLoader's ``__next__``, collectives, runtime calls by what they do, the optimizer's
    ranges and the autograd engine's functions."""
    if "DataLoader" in name and name.endswith("__next__"):
        return HOST_CODES["input"]
    lowered = name.lower()
    if "nccl" in lowered or "gloo" in lowered or name.startswith(("c10d::", "record_param_comms")):
        return HOST_CODES["communication"]
    if row_type in RUNTIME_TYPES:
        if any(word in name for word in _SYNCHRONIZE):
            return HOST_CODES["device_wait"]
        return HOST_CODES["copy"] if "Memcpy" in name else HOST_CODES["launch"]
    if name.startswith("Optimizer."):
        return HOST_CODES["optimizer"]
    return HOST_CODES["backward"] if _BACKWARD.search(name) else NONE


# Every name ``_own_category`` gives a category holds one of these, lowercased (a runtime
# call's type aside): the others are found at C speed, in the names' text joined.
_OWN_CATEGORY_WORDS = (
    "dataloader",
    "nccl",
    "gloo",
    "c10d::",
    "record_param_comms",
    "optimizer.",
    "autograd::engine::evaluate_function",
    "backward",
)


def _own_categories(keys: _RowKeys) -> np.ndarray:
    """``_own_category`` of each key, worked out for the keys that may have one."""
    runtime = np.fromiter(map(RUNTIME_TYPES.__contains__, keys.types), dtype=bool, count=len(keys.types))
    maybe = _holding_any(keys.names, _OWN_CATEGORY_WORDS) | runtime
    own = np.full(len(keys.names), NONE, dtype=np.int64)
    for index in np.flatnonzero(maybe).tolist():
        own[index] = _own_category(keys.names[index], keys.types[index])
    return own


def _holding_any(names: list[str], words: tuple[str, ...]) -> np.ndarray:
    """Whether each name, lowercased, holds any of ``words`` (lowercase, no line breaks):
    the names' text joined, lowercased and searched once a word, each find placed by offsets."""
    text = "\n".join(names).lower()
    lengths = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
    if len(text) != int(lengths.sum()) + len(names) - 1:  # a letter whose lowercase is longer ('İ')
        lowered = [name.lower() for name in names]
        text, lengths = "\n".join(lowered), np.fromiter(map(len, lowered), dtype=np.int64, count=len(names))
    ends = np.cumsum(lengths + 1)
    found = []
    for word in words:
        start = text.find(word)
        while start >= 0:
            found.append(start)
            start = text.find(word, start + 1)
    flags = np.zeros(len(names), dtype=bool)
    flags[np.searchsorted(ends, np.asarray(found, dtype=np.int64), side="right")] = True
    return flags


_STICKY = np.zeros(len(HOST_CODES), dtype=bool)
_STICKY[[HOST_CODES["input"], HOST_CODES["communication"]]] = True
_COPY_CATEGORIES = {"gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def _device_kind(name: str, category: str) -> int:
    if "nccl" in name.lower():
        return DEVICE_CODES["device_communication"]
    return DEVICE_CODES["device_copy"] if category in _COPY_CATEGORIES else DEVICE_CODES["device_compute"]


def _step_breakdown(columns: _TraceColumns, rows: _HostRows) -> dict[str, list] | None:
    """Each step's wall time by what it was spent on (``step_breakdown``): the events of the
    thread each step's ``ProfilerStep#N`` range is on, by their category or their enclosing
    event's; and the device's time in it. None without steps."""
    if not rows.steps or rows.nesting is None:
        return None
    nesting = rows.nesting
    bounds = np.asarray(sorted((start, start + duration) for start, duration in rows.steps.values()), dtype=float)
    own = _own_categories(rows.key_table)[rows.codes] if len(rows.codes) else np.zeros(0, dtype=np.int64)
    decided = decided_categories(nesting.parents, own, _STICKY)
    step = rows.step_of
    driving = (step >= 0) & (rows.threads == rows.step_threads[step.clip(min=0)])
    ends = rows.starts + rows.durations
    outermost = nesting.parents < 0
    on_driving_thread = np.isin(rows.threads, rows.step_threads)
    covered = union(rows.starts[driving & outermost], ends[driving & outermost])
    helping = outermost & ~on_driving_thread & (decided == HOST_CODES["backward"])
    host = host_rows(
        bounds,
        step[driving],
        decided[driving],
        nesting.selfs[driving],
        covered,
        union(rows.starts[helping], ends[helping]),
    )
    device = columns.device
    if not device.rows:
        return host
    codes, pairs = _pair_codes(device.numpy("name"), device.numpy("cat"))
    kind_of_pair = np.asarray([_device_kind(columns.names[name], columns.categories[cat]) for name, cat in pairs])
    kind = kind_of_pair[codes]
    starts = device.numpy("ts")
    return joined(host, device_rows(bounds, starts, starts + device.numpy("dur"), kind))


def _modules_of(
    columns: _TraceColumns, pids: np.ndarray, tids: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Each host event's innermost ``nn.Module`` call on its thread (an index into the
    returned paths, ``Sequential_0/Conv2d_0``; -1 outside every module). Module calls
    and event starts (as points) are nested together: a point's enclosing range is the
    innermost module open when the event starts."""
    modules = columns.modules
    module_threads = (modules.numpy("pid") << 32) | modules.numpy("tid")
    event_threads = (pids << 32) | tids
    threads = np.concatenate([module_threads, event_threads])
    begin = np.concatenate([modules.numpy("ts"), starts])
    length = np.concatenate([modules.numpy("dur"), np.zeros(len(starts))])
    order = np.lexsort((-length, begin, threads))
    parent_of = np.full(len(order), -1, dtype=np.int64)
    bounds = [0, *(np.flatnonzero(np.diff(threads[order])) + 1).tolist(), len(order)]
    for first, last in zip(bounds, bounds[1:]):
        local = self_times(begin[order[first:last]], length[order[first:last]])[1]
        parent_of[order[first:last]] = np.where(local >= 0, order[first:last][local.clip(min=0)], -1)
    module_count = modules.rows
    names = [columns.names[code] for code in modules.numpy("name").tolist()]
    path_of: list[str] = [""] * module_count
    for position in order[order < module_count].tolist():  # a module starts before the modules it calls
        parent = int(parent_of[position])
        path_of[position] = f"{path_of[parent]}/{names[position]}" if parent >= 0 else names[position]
    paths = list(dict.fromkeys(path_of))
    index = {path: i for i, path in enumerate(paths)}
    module_index = np.asarray([index[path] for path in path_of], dtype=np.int64)
    innermost = parent_of[module_count:]
    return np.where(innermost >= 0, module_index[innermost.clip(min=0)], -1), paths


def _module_parts(
    rows: _HostRows,
    module_of: np.ndarray,
    kernels: tuple | None,
    allocations: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[dict, dict | None, dict | None]:
    """The columns ``OpProfile.module_table`` is made of (``_module_table``): each op's
    executions and self time per module it ran in (host: as counted,
    ``_fold_only_children``; device: kernels under the module of their launching
    occurrence, an execution per launching occurrence), and the bytes the op allocated
    there (``allocations``: each allocation's host event and size, as the op table counts
    them). Summed on integer codes, so a trace with millions of events makes no string per
    event, and what is handed over is one row per op and module."""
    keys, codes, counted_selfs = rows.keys, rows.codes, rows.nested.counted_selfs
    kept = np.flatnonzero(rows.nested.counted_as == np.arange(len(codes)))
    host = _by_op_and_module(
        HOST, keys, codes[kept], module_of[kept], np.ones(len(kept), dtype=np.int64), counted_selfs[kept]
    )
    memory = None
    if allocations is not None:
        events, sizes = allocations
        memory = _by_op_and_module(HOST, keys, codes[events], module_of[events], np.zeros(len(events)), sizes)
    device = None
    if kernels is not None:
        kernel_keys, kernel_codes, durations, invocations, _ = kernels
        launched = invocations >= 0
        modules = np.where(launched, module_of[invocations.clip(min=0)], -1)
        # an execution is a launching occurrence, however many kernels it launched
        launch = np.where(launched, invocations, -1 - np.arange(len(invocations)))
        first = np.zeros(len(launch), dtype=np.int64)
        first[np.unique(np.stack([kernel_codes, modules, launch]), axis=1, return_index=True)[1]] = 1
        device = _by_op_and_module(DEVICE, kernel_keys, kernel_codes, modules, first, durations)
    return host, memory, device


def _module_table(host: dict, memory: dict | None, device: dict | None, named: np.ndarray) -> Table:
    """``OpProfile.module_table`` from ``_module_parts`` (module codes named by ``named``, -1
    the last: outside every module). With memory, the host rows and the allocations' rows
    joined on (side, op, type, module), in that order; the device rows after them, their
    bytes unknown (NaN)."""
    host_rows = _module_rows(host)
    if memory is not None:
        allocations = _module_rows(memory)
        keys = sorted(set(host_rows) | set(allocations))
        host_rows = {
            key: (*host_rows.get(key, (0, 0.0)), allocations[key][1] if key in allocations else 0.0) for key in keys
        }
    else:
        host_rows = {key: (*values, np.nan) for key, values in host_rows.items()}
    device_rows = {key: (*values, np.nan) for key, values in _module_rows(device).items()} if device else {}
    rows = [*host_rows.items(), *device_rows.items()]
    return Table(
        {
            "side": np.array([key[0] for key, _ in rows], dtype=object),
            "op_name": np.array([key[1] for key, _ in rows], dtype=object),
            "op_type": np.array([key[2] for key, _ in rows], dtype=object),
            "module": named[np.array([key[3] for key, _ in rows], dtype=np.int64)],
            "occurrences": np.array([values[0] for _, values in rows], dtype=np.int64),
            "self_us": np.array([values[1] for _, values in rows], dtype=np.float64),
            "alloc_bytes": np.array([values[2] for _, values in rows], dtype=np.float64),
        }
    )


def _module_rows(part: dict) -> dict:
    """A ``_by_op_and_module`` part as (side, op, type, module code) -> (occurrences, self_us)."""
    keys = zip([part["side"]] * len(part["module"]), part["op_name"], part["op_type"], part["module"])
    return dict(zip(keys, zip(part["occurrences"].tolist(), part["self_us"].tolist())))


def _summed_module_tables(job: Recipe, rank: Recipe) -> Table:
    """The module tables of a job's ranks so far and of its next rank, summed per op and
    module (in the order of (side, op, type, module); bytes unknown on both add up to 0)."""
    both = [job(), rank()]
    columns = ("side", "op_name", "op_type", "module")
    keys = [key for table in both for key in zip(*(table[column].tolist() for column in columns))]
    distinct = sorted(set(keys))
    number = {key: position for position, key in enumerate(distinct)}
    codes = np.fromiter((number[key] for key in keys), dtype=np.int64, count=len(keys))

    def summed(column: str, adder) -> np.ndarray:
        return adder(np.concatenate([table[column] for table in both]), codes, len(distinct))

    return Table(
        {
            **{column: np.array([key[i] for key in distinct], dtype=object) for i, column in enumerate(columns)},
            "occurrences": summed("occurrences", integer_group_sums),
            "self_us": summed("self_us", group_sums),
            "alloc_bytes": summed("alloc_bytes", group_sums),
        }
    )


def _by_op_and_module(
    side: str, keys: list, codes: np.ndarray, modules: np.ndarray, occurrences: np.ndarray, selfs: np.ndarray
) -> dict:
    pairs, where = np.unique(np.stack([codes, modules]), axis=1, return_inverse=True)
    where = where.reshape(-1)
    op_codes, module_codes = pairs.tolist() if pairs.size else ([], [])
    return {
        "side": side,
        "op_name": [keys[code][0] for code in op_codes],
        "op_type": [keys[code][1] for code in op_codes],
        "module": module_codes,
        "occurrences": np.bincount(where, weights=occurrences, minlength=pairs.shape[1]).astype(np.int64),
        "self_us": np.bincount(where, weights=selfs, minlength=pairs.shape[1]).astype(np.float64),
    }


def _fold_only_children(parents: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """PyTorch's own counting (``key_averages()``): an event that is the only child of a
    parent with the same name (``aten::div`` calling ``aten::div``) is one call with its
    parent, its self time added to the parent's. Returns, for each event, the event it is
    counted as (itself where nothing folds)."""
    counted_as = np.arange(len(codes))
    nested = parents >= 0
    if not nested.any():
        return counted_as
    children = np.bincount(parents[nested], minlength=len(codes))
    folds = np.zeros(len(codes), dtype=bool)
    folds[nested] = (codes[parents[nested]] == codes[nested]) & (children[parents[nested]] == 1)
    counted_as[folds] = parents[folds]
    while True:  # chains (a div in a div in a div) settle on the outermost
        settled = counted_as[counted_as]
        if np.array_equal(settled, counted_as):
            return counted_as
        counted_as = settled


def _add_device(
    events: OpEvents, facts: ProfileFacts, columns: _TraceColumns, rows: _HostRows, device_names: list[str]
) -> tuple:
    """Add the kernels (``_add_kernels``) and say which accelerator ran them: from their
    events' category (MTIA's are its own; CUDA's and ROCm's kernels are a GPU's)."""
    device = columns.device
    device_codes, device_pairs = _pair_codes(device.numpy("name"), device.numpy("cat"))
    device_kinds = [(columns.names[n], columns.categories[c]) for n, c in device_pairs]
    launch_correlations = _scatter(columns.host.rows, columns.launches)[rows.order]
    kernels = _add_kernels(events, facts, device, (device_codes, device_kinds), rows, launch_correlations)
    facts.device = "MTIA" if any(category == _MTIA_DEVICE for _, category in device_kinds) else "GPU"
    facts.device_name = ", ".join(sorted(set(device_names))) or None
    return kernels


def _add_kernels(
    events: OpEvents,
    facts: ProfileFacts,
    device: _Columns,
    kernel_kinds: tuple[np.ndarray, list],
    rows: _HostRows,
    host_correlations: np.ndarray,
) -> tuple:
    """Kernels under the op call that launched them (as PyTorch counts calls), else under
    the innermost annotation around the launch; kernels whose launch is not in the trace
    under their own name. Returns the kernels' keys, their codes in them, their durations,
    launching occurrences (-1: none) and whether each ran on TF32 tensor cores."""
    kernel_codes, kernel_keys = kernel_kinds
    host_keys, host_codes = rows.keys, rows.codes
    correlations = device.numpy("correlation")
    durations = device.numpy("dur")
    invocation = _launching_occurrences(rows, host_correlations, correlations)
    linked = invocation >= 0
    # A linked kernel's row is its launching op's host row key; an orphan gets its own.
    orphan_keys = [(name, f"({cat} without a launching op)") for name, cat in kernel_keys]
    launched_by = host_codes[invocation.clip(min=0)] if len(host_codes) else np.zeros(len(invocation), np.int64)
    codes = np.where(linked, launched_by, len(host_keys) + kernel_codes)
    step_of = rows.step_of
    events.add_device_kernels(
        host_keys + orphan_keys,
        codes,
        durations,
        invocation,
        steps=np.where(linked, step_of[invocation.clip(min=0)], -1) if len(step_of) else None,
    )
    orphans = int((~linked).sum())
    if orphans:
        # Usual for kernels launched just before the profiling window opened.
        facts.warnings.append(
            f"{orphans} device events ({durations[~linked].sum():,.0f} µs) have no launching op "
            "in the trace (their correlation id matches no launch); they are listed under their "
            "own names, typed '(… without a launching op)'"
        )
    on_tf32 = tf32_kernels([name for name, _ in kernel_keys])[kernel_codes]
    return host_keys + orphan_keys, codes, durations, invocation, on_tf32


def _launching_occurrences(rows: _HostRows, host_correlations: np.ndarray, correlations: np.ndarray) -> np.ndarray:
    """Each kernel's launching occurrence (a position in ``rows``, -1: none): the op call
    around the launch its correlation id names, as counted, else the innermost annotation
    around the launch."""
    is_op = rows.names_flags(rows.op_keys)
    types = rows.key_table.types
    is_annotation = rows.names_flags(
        np.fromiter(map(ANNOTATION_TYPES.__contains__, types), dtype=bool, count=len(types))
    )
    parents, counted_as = rows.nested.parents, rows.nested.counted_as
    launch_correlation, launcher = [], []
    for position in np.flatnonzero((host_correlations != _NO_CORRELATION) & ~is_op).tolist():
        parent, annotation = parents[position], -1
        while parent != -1 and not is_op[parent]:
            if annotation == -1 and is_annotation[parent]:
                annotation = parent
            parent = parents[parent]
        if parent == -1:
            parent = annotation
        if parent != -1:
            launch_correlation.append(int(host_correlations[position]))
            launcher.append(int(counted_as[parent]))
    invocation = np.full(len(correlations), -1, dtype=np.int64)
    if launch_correlation:
        known = np.asarray(launch_correlation, dtype=np.int64)
        sort = np.argsort(known, kind="stable")
        known, launchers = known[sort], np.asarray(launcher, dtype=np.int64)[sort]
        where = np.searchsorted(known, correlations).clip(max=len(known) - 1)
        found = (known[where] == correlations) & (correlations != _NO_CORRELATION)
        invocation[found] = launchers[where[found]]
    return invocation


# Ops that see no batch of samples: a DataLoader indexing its whole data set, an
# optimizer updating parameters. Their inputs are left out of the vote.
_NOT_MODEL_SCOPES = ("enumerate(DataLoader)", "Optimizer.")
# A loss's target holds one entry per sample: the strongest evidence a trace has.
_LOSS_OPS = frozenset(
    {
        "aten::cross_entropy_loss",
        "aten::nll_loss",
        "aten::nll_loss_nd",
        "aten::nll_loss2d",
        "aten::mse_loss",
        "aten::l1_loss",
        "aten::smooth_l1_loss",
        "aten::huber_loss",
        "aten::binary_cross_entropy",
        "aten::binary_cross_entropy_with_logits",
        "aten::kl_div",
        "aten::ctc_loss",
        "aten::multi_margin_loss",
    }
)
_LOSS_WEIGHT = 25
_BATCH_PROBES = 4000  # op events looked at: one step of a big model, decoded part by part


def _decoded_inputs(
    trace: TraceText, file_indices: np.ndarray, kept: _Inputs, *probe_sets: np.ndarray
) -> dict[int, _WithInputs]:
    """The input dims and types of the events at these positions, for every probe at once:
    those ``_Inputs`` kept as the file was read, and the others (the first step's ops the
    batch size is voted by) decoded again in file order, so each part of the file is
    decoded once for all of them."""
    positions = np.unique(np.concatenate([np.asarray(probes, dtype=np.int64) for probes in probe_sets]))
    found = {position: kept.get(index) for position, index in zip(positions.tolist(), file_indices[positions].tolist())}
    again = np.asarray([position for position, inputs in found.items() if inputs is None], dtype=np.int64)
    decoded: dict[int, _WithInputs] = {position: inputs for position, inputs in found.items() if inputs is not None}
    if len(again):
        order = np.argsort(file_indices[again], kind="stable")
        decoded.update(zip(again[order].tolist(), trace.events(file_indices[again][order].tolist(), _WithInputs)))
    return decoded


def _batch_probes(rows: _HostRows) -> np.ndarray:
    """The op events whose inputs vote for the batch size: those of the first profiled
    step, outside optimizer and DataLoader scopes, at most ``_BATCH_PROBES`` of them."""
    starts, parents, window = rows.starts, rows.nested.parents, rows.first_step
    scopes = itertools.repeat(_NOT_MODEL_SCOPES)
    excluded = rows.names_flags(
        np.fromiter(map(str.startswith, rows.key_names, scopes), dtype=bool, count=len(rows.keys))
    )
    up = parents.copy()
    while (moving := up >= 0).any():  # any enclosing scope excludes, however deep (record_function wrappers)
        excluded[moving] |= excluded[up[moving]]
        up = np.where(moving, parents[up.clip(min=0)], -1)
    wanted = rows.names_flags(rows.op_keys) & ~excluded
    if window is not None:
        wanted &= (starts >= window[0]) & (starts < window[1])
    probes = np.flatnonzero(wanted)
    return probes[np.argsort(starts[probes], kind="stable")[:_BATCH_PROBES]]


def _batch_size_evidence(probes: np.ndarray, decoded: dict[int, _WithInputs], rows: _HostRows):
    """(batch size, where it came from, agreement) from the ops of the first profiled step,
    or None. Each op votes with the leading dim of its first input of rank >= 2 (the
    batch of an activation); a loss's target votes strongly. Parameters and a data set
    are left out (optimizer and DataLoader scopes), so an embedding's vocabulary or a
    sequence-first LSTM's length loses to the many ops that see the batch."""
    keys, codes, window = rows.keys, rows.codes, rows.first_step
    votes: collections.Counter[int] = collections.Counter()  # ops' votes and the loss target's
    op_votes: collections.Counter[int] = collections.Counter()
    loss_target = None
    for position in probes.tolist():
        dims = _input_dims(decoded[position])
        if not dims:
            continue
        first = dims[0]
        if isinstance(first, list) and len(first) >= 2 and is_batch_size(first[0]):
            votes[first[0]] += 1
            op_votes[first[0]] += 1
        if (
            keys[codes[position]][0] in _LOSS_OPS
            and len(dims) >= 2
            and isinstance(dims[1], list)
            and dims[1]
            and is_batch_size(dims[1][0])
        ):
            votes[dims[1][0]] += _LOSS_WEIGHT
            loss_target = loss_target or (keys[codes[position]][0], dims[1][0])
    if not votes:
        return None
    (size, weight), *others = votes.most_common(2)
    # Against the runner-up, not all votes: a model's many other dims split their votes.
    agreement = 1.0 if loss_target and loss_target[1] == size else weight / (weight + (others[0][1] if others else 0))
    where = "the first profiled step" if window is not None else "the first ops"
    source = f"data: batch dim of {op_votes[size]} of {sum(op_votes.values())} shaped ops in {where}"
    if loss_target and loss_target[1] == size:
        source += f", and the target of {loss_target[0]}"
    return size, source + " (Input Dims)", round(agreement, 3)


def _input_dims(event: _WithInputs) -> list | None:
    return _raw_list(event.args.input_dims) if event.args is not None else None


def _raw_list(raw: msgspec.Raw) -> list | None:
    if not len(raw):
        return None
    try:
        value = _ANY_JSON.decode(raw)  # a sixth of json.loads' time (3,000 probes: 10 -> 1.6 ms)
    except msgspec.DecodeError:
        try:  # what strict JSON refuses and Python's json reads (NaN, Infinity) reads as before
            value = json.loads(bytes(raw))
        except ValueError:
            return None
    return value if isinstance(value, list) else None


_ANY_JSON = msgspec.json.Decoder()


# The ops that do a model's arithmetic, at the level where a dtype is final: composite ops
# (aten::conv2d, aten::linear) are entered before autocast casts their inputs.
_COMPUTE_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::_convolution",
        "aten::mkldnn_convolution",
        "aten::cudnn_convolution",
        "aten::miopen_convolution",
        "aten::_slow_conv2d_forward",
        "aten::convolution_overrideable",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_flash_attention_forward",
        "aten::_efficient_attention_forward",
    }
)
# The ops whose recorded inputs the read needs (``_Inputs``): their work's formula, their
# dtypes' vote for the precision.
_INPUTS_WANTED = FORMULA_NAMES | _COMPUTE_OPS
_PRECISION_PROBES = 400
_DTYPES = {
    "float": "fp32",
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "double": "fp64",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
}


def _precision_probes(key_names: list[str], codes: np.ndarray, file_indices: np.ndarray) -> np.ndarray:
    compute = np.fromiter(map(_COMPUTE_OPS.__contains__, key_names), dtype=bool, count=len(key_names))
    probes = np.flatnonzero(compute[codes]) if len(codes) else np.zeros(0, dtype=np.int64)
    return probes[np.argsort(file_indices[probes], kind="stable")[:_PRECISION_PROBES]]


def _precision_of(probes: np.ndarray, decoded: dict[int, _WithInputs]) -> tuple[str, str] | None:
    dtypes: collections.Counter[str] = collections.Counter()
    for position in probes.tolist():
        event = decoded[position]
        types = _raw_list(event.args.input_type) if event.args is not None else None
        if types and isinstance(types[0], str) and types[0] in _DTYPES:
            dtypes[_DTYPES[types[0]]] += 1
    return precision_from_dtypes(dtypes, "input dtypes of {total} matrix and convolution ops")


# torch.compile marks its graphs: dynamo's region, AOTAutograd's function, Inductor's calls
_COMPILED_MARKS = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")


def _compiler_of(names: list[str], host_names: np.ndarray) -> tuple[str | None, str | None]:
    """torch.compile where any host event is one of its graphs' (``host_names``: each host
    event's name code), else eager."""
    if not len(host_names):
        return None, None  # no host events: nothing to tell eager from compiled
    marked = starting_with(names, _COMPILED_MARKS)[host_names]
    if marked.any():
        first = names[int(host_names[marked].min())]
        return "torch.compile", f"data: {int(marked.sum())} torch.compile graph events ({first[:40]} ...)"
    return "eager", "data: no torch.compile graph events"
