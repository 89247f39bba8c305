"""Every profile format Op Compare reads, declared once: its name, how discovery
recognises it, how much memory its read takes per byte, and its reader.

Discovery (``ingest.discovery``) recognises files from this table, the memory guard
(``store.memory_guard``) takes each format's factor from it, and the catalog reads
through ``read_profile``. Adding a format means adding a row here and its reader.

Importing this module is cheap (TensorBoard start-up lists runs through discovery): the
readers, and pandas with them, are imported when a read happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import re
import threading
import zlib
from collections.abc import Callable

from tb_opcompare.errors import NotReadableNow, OverLimit, ProfileError
from tb_opcompare.ingest import fs

XPLANE = "xplane"
TF_TRACE_JSON = "tf_trace_json"
PYTORCH = "pytorch"
CHROME_TRACE = "chrome_trace"
SUMMARY_JSON = "summary_json"
ONNXRUNTIME = "onnxruntime"
# Not formats but what discovery found instead of one: listed, so each can be explained.
EMPTY_SESSION = "empty_session"  # a profile session directory with no host file
REFUSED = "refused"  # an entry that must not be read or walked (FIFO, device, link out of the walked places)


@dataclasses.dataclass(frozen=True)
class ProfileFormat:
    """One format. Discovery looks, in this order: host files of a profile session
    (``<run>/plugins/profile/<session>/<host><session_suffix>``), the first format of
    ``FORMATS`` whose suffix a session holds winning; file names (``file_name``); then
    the first ``SNIFF_BYTES`` of other ``*.json[.gz]`` files (``json_marker``, for names
    starting with ``name_prefix``)."""

    name: str
    description: str
    read: Callable[[str, list[str], int | None], object]  # (format name, paths, text budget) -> ParsedProfile
    peak_bytes_per_byte: float  # peak memory of a read per byte of (uncompressed) trace, with a margin
    session_suffix: str | None = None
    file_name: re.Pattern | None = None
    json_marker: bytes | None = None
    name_prefix: str = ""


def _read_xplane(_format: str, paths: list[str], max_text_bytes: int | None):
    from tb_opcompare.ingest.readers.xplane import read_xplane_session

    # the events are counted against the whole limit the text budget was cut from
    limit = None if max_text_bytes is None else int(max_text_bytes * peak_bytes_per_byte(XPLANE))
    return read_xplane_session(paths, fs.read_bytes, max_text_bytes, limit)


def _read_summary(_format: str, paths: list[str], _max_text_bytes: int | None):
    from tb_opcompare.ingest.readers.summary_json import read_summary_json

    return read_summary_json(paths[0], fs.read_bytes(paths[0]))


def _read_onnxruntime(_format: str, paths: list[str], max_text_bytes: int | None):
    from tb_opcompare.ingest.readers.chrome_json import MATERIALIZED_BYTES_PER_EVENT, open_chrome_trace
    from tb_opcompare.ingest.readers.onnxruntime_json import read_onnxruntime

    text = open_chrome_trace(paths[0], fs.read_bytes(paths[0]), max_text_bytes)
    text.refuse_past_budget(MATERIALIZED_BYTES_PER_EVENT, WHOLE_JSON_PEAK)
    return read_onnxruntime(paths[0], text)


def _read_chrome_trace(file_format: str, paths: list[str], max_text_bytes: int | None):
    """The Chrome-trace dialects share a decoder; a generic ``traceEvents`` file is told
    apart by its content (PyTorch, a TF 2.0-2.3 trace, a TF1 timeline)."""
    from tb_opcompare.ingest.readers.chrome_json import (
        BATCHED_BYTES_PER_EVENT,
        MATERIALIZED_BYTES_PER_EVENT,
        open_chrome_trace,
    )
    from tb_opcompare.ingest.readers.tf1_timeline import is_tf1_timeline, read_tf1_timeline
    from tb_opcompare.ingest.readers.tf_trace_json import is_tf_trace_json, read_tf_trace_json
    from tb_opcompare.ingest.readers.torch_trace import is_torch_trace, read_torch_trace

    if len(paths) > 1:  # the ranks of one distributed job (ingest.workers), one trace each
        return _read_ranks(paths, max_text_bytes)
    path = paths[0]
    text = open_chrome_trace(path, fs.read_bytes(path), max_text_bytes)
    if file_format == PYTORCH or is_torch_trace(text):
        text.refuse_past_budget(BATCHED_BYTES_PER_EVENT, peak_bytes_per_byte(PYTORCH))
        return read_torch_trace(path, text)
    text.refuse_past_budget(MATERIALIZED_BYTES_PER_EVENT, WHOLE_JSON_PEAK)
    trace = text.materialize()
    if file_format == TF_TRACE_JSON or is_tf_trace_json(trace):
        del text
        return read_tf_trace_json(path, trace)
    if file_format == CHROME_TRACE and is_tf1_timeline(trace):
        return read_tf1_timeline(path, trace, text)  # its memory events are decoded from the text again
    raise ProfileError(path, "a Chrome trace, but neither a TF1 timeline, a TF 2.x trace nor a PyTorch trace")


def text_head(head: bytes) -> bytes:
    """The first ``SNIFF_BYTES`` of a file's text from its first bytes, inflated where they
    are gzip: what discovery and the readers look at without reading a whole trace.
    Raises zlib.error for a corrupt stream."""
    if head[:2] == b"\x1f\x8b":
        return zlib.decompressobj(wbits=31).decompress(head, SNIFF_BYTES)
    return head


def _read_ranks(paths: list[str], max_text_bytes: int | None):
    from tb_opcompare.ingest.readers.torch_trace import combine_ranks

    return combine_ranks(_read_rank(path, max_text_bytes) for path in paths)  # one rank's text at a time


def _read_rank(path: str, max_text_bytes: int | None):
    from tb_opcompare.ingest.readers.chrome_json import BATCHED_BYTES_PER_EVENT, open_chrome_trace
    from tb_opcompare.ingest.readers.torch_trace import is_torch_trace, read_torch_rank
    from tb_opcompare.ingest.workers import rank_of

    data = fs.read_bytes(path)
    text = open_chrome_trace(path, data, max_text_bytes)
    if not is_torch_trace(text):
        raise ProfileError(path, "a rank of a distributed job, but not a PyTorch trace")
    text.refuse_past_budget(BATCHED_BYTES_PER_EVENT, peak_bytes_per_byte(PYTORCH))
    rank = rank_of(text_head(data[:SNIFF_BYTES]))
    del data
    return read_torch_rank(path, text, rank)


def read_job_rank(path: str, max_text_bytes: int | None = None):
    """One rank's trace of a distributed job, read but not pooled (a ``RankRead``), where a
    cluster reads a job's ranks on several workers; ``combine_job_ranks`` makes the job's
    profile of them, the profile ``read_profile`` gives for the whole session."""
    with _reading([path]), collecting_rarely():
        return _read_rank(path, max_text_bytes)


def combine_job_ranks(paths: list[str], reads: list):
    """The job's profile of its ranks' reads (``read_job_rank``, in the order of ``paths``)."""
    from tb_opcompare.ingest.readers.torch_trace import combine_ranks

    return tables_of(paths, combine_ranks(reads))


# Factors: what benchmarks/bench_readers.py measures plus a margin (30 MB xplane: 1.9x;
# 211 MB PyTorch JSON: 1.9x, read in batches); other JSON traces are decoded whole into
# full events (about 3.4x).
WHOLE_JSON_PEAK = 4.5
FORMATS: tuple[ProfileFormat, ...] = (
    ProfileFormat(
        XPLANE,
        "TensorFlow profiler session, TF >= 2.2 (<host>.xplane.pb)",
        _read_xplane,
        3.0,
        session_suffix=".xplane.pb",
    ),
    ProfileFormat(
        TF_TRACE_JSON,
        "TensorFlow profiler session, TF 2.0-2.3 (<host>.trace.json.gz)",
        _read_chrome_trace,
        WHOLE_JSON_PEAK,
        session_suffix=".trace.json.gz",
    ),
    ProfileFormat(
        PYTORCH,
        "PyTorch profiler trace (<worker>.<timestamp>.pt.trace.json[.gz])",
        _read_chrome_trace,
        3.0,
        file_name=re.compile(r"\.pt\.trace\.json(\.gz)?\Z"),
    ),
    ProfileFormat(
        CHROME_TRACE,
        "Chrome trace: a TF1 timeline or PyTorch export_chrome_trace (*.json[.gz])",
        _read_chrome_trace,
        WHOLE_JSON_PEAK,
        json_marker=b'"traceEvents"',
    ),
    ProfileFormat(
        SUMMARY_JSON,
        "profiler wrapper summary with op_stats (summary*.json)",
        _read_summary,
        WHOLE_JSON_PEAK,
        json_marker=b'"op_stats"',
        name_prefix="summary",
    ),
    # a JSON array of events, whatever prefix the session was given: its session's own
    # events, among the first written, tell it
    ProfileFormat(
        ONNXRUNTIME,
        "ONNX Runtime profile (SessionOptions.enable_profiling: <prefix>_<date>.json)",
        _read_onnxruntime,
        WHOLE_JSON_PEAK,
        json_marker=b'"session_initialization"',
    ),
)
BY_NAME = {profile_format.name: profile_format for profile_format in FORMATS}
SESSION_FORMATS = tuple(f for f in FORMATS if f.session_suffix)
SNIFF_BYTES = 65536  # some PyTorch traces put 26 KB of metadata before "traceEvents"


def import_readers() -> None:
    """Import every reader now, which a read otherwise imports on first use: for a process
    about to fork workers that read, which then inherit them rather than each importing
    them for itself. Private modules are left to the reader that imports them (the xplane
    wire decoder's C extension, which falls back to Python where it does not load).

    numpy's masked arrays too: numpy 2.4's plain ``np.unique`` asks ``np.ma`` whether
    its array is masked, which imports ``numpy.ma`` on the first call of a process, 6-8 ms
    in the middle of a read (TensorBoard's first compare of two xplanes)."""
    import importlib
    import pkgutil

    import numpy.ma  # noqa: F401 - see above

    from tb_opcompare.ingest import readers

    for module in pkgutil.iter_modules(readers.__path__, readers.__name__ + "."):
        if not module.name.rpartition(".")[2].startswith("_"):
            importlib.import_module(module.name)


def peak_bytes_per_byte(file_format: str) -> float:
    known = BY_NAME.get(file_format)
    return known.peak_bytes_per_byte if known else WHOLE_JSON_PEAK


def read_profile(file_format: str, paths: list[str], max_text_bytes: int | None = None):
    """Read one session's files into its tables (an ``OpProfile``): ``read_parsed``, then
    ``OpProfile.from_parsed``; every failure becomes a ProfileError (or OverLimit) naming
    the file."""
    return tables_of(paths, read_parsed(file_format, paths, max_text_bytes))


def tables_of(paths: list[str], parsed):
    """The tables (an ``OpProfile``) of a session read from ``paths`` (a ``ParsedProfile``,
    read here or in another process); a failure becomes a ProfileError naming the file."""
    from tb_opcompare.schema.optable import OpProfile  # pandas: only where tables are made

    with _reading(paths), collecting_rarely():
        return OpProfile.from_parsed(parsed)


def read_parsed(file_format: str, paths: list[str], max_text_bytes: int | None = None):
    """Read one session's files with their format's reader, as it leaves them (a
    ``ParsedProfile``: no table made, no pandas imported); every failure becomes a
    ProfileError (or OverLimit) naming the file."""
    with _reading(paths), collecting_rarely():
        if file_format == EMPTY_SESSION:
            raise ProfileError(
                paths[0],
                "no .xplane.pb or .trace.json.gz in this profile session directory; the "
                "profiler was stopped before writing, or is still writing",
            )
        return BY_NAME[file_format].read(file_format, paths, max_text_bytes)


# While a read runs, young objects are collected after this many allocations, not CPython's
# 700: a read builds lists of millions of items, and each collection walked every young one
# again (a million-op PyTorch trace: 1,400 collections, 0.9-1.2 s of its 9-10 s read). A
# threshold, not a pause: a long read beside other threads still collects their garbage.
READ_GC_THRESHOLD = 100_000
_COLLECTOR = threading.Lock()
_reads_under_way = 0
_thresholds_before: tuple[int, int, int] = gc.get_threshold()


@contextlib.contextmanager
def collecting_rarely():
    """The collector's young threshold at ``READ_GC_THRESHOLD`` while any read (or the
    making of a read's tables) of this process runs: reads in several threads share it,
    and the last one to end puts the process's own back."""
    global _reads_under_way, _thresholds_before
    with _COLLECTOR:
        if not _reads_under_way:
            _thresholds_before = gc.get_threshold()
            gc.set_threshold(max(READ_GC_THRESHOLD, _thresholds_before[0]), *_thresholds_before[1:])
        _reads_under_way += 1
    try:
        yield
    finally:
        with _COLLECTOR:
            _reads_under_way -= 1
            if not _reads_under_way:
                gc.set_threshold(*_thresholds_before)


def _collector_in_child() -> None:
    """A forked worker starts with no read under way, whatever its parent's threads were doing."""
    global _COLLECTOR, _reads_under_way
    _COLLECTOR, _reads_under_way = threading.Lock(), 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_collector_in_child)


@contextlib.contextmanager
def _reading(paths: list[str]):
    """Every failure of a read as a ProfileError (or OverLimit, NotReadableNow) naming the file."""
    try:
        yield
    except OSError as error:
        raise NotReadableNow(error.filename or paths[0], f"cannot read the file: {error.strerror or error}") from None
    except RecursionError:
        raise ProfileError(
            paths[0],
            "nested more deeply than a profiler ever writes (thousands of levels of JSON arrays or objects); not read",
        ) from None
    except MemoryError:  # a limit of this machine, not a fault of the file: never cached
        raise OverLimit(
            paths[0],
            "ran out of memory while reading it; lower the memory guard "
            "(--opcompare_max_read_gb / --max-read-gb) so such reads are refused up "
            "front, or read it on a bigger machine with `tb-opcompare index`",
        ) from None
