"""A logdir's runs, each read once into an OpProfile with its facts settled.

This is the one place that ties discovery, the readers and the sidecar together; the
CLI and the HTTP routes both go through it. Parsed profiles are kept in memory,
keyed by the files' size and modification time, so a run that changes on disk is
read again.
"""

from __future__ import annotations

import dataclasses
import json
import os

from . import fs
from .cache import DEFAULT_MEMORY_BYTES, ProfileCache
from .discovery import (CHROME_TRACE, EMPTY_SESSION, PYTORCH, SIDECAR, SUMMARY_JSON, TF_TRACE_JSON, XPLANE, RunSource,
                        discover)
from .errors import OverLimit, ProfileError
from .naming import batch_size_from_name, device_from_name, model_key, repeat_from_name
from .optable import OpProfile
from .readers.chrome_json import open_chrome_trace
from .readers.summary_json import read_summary_json
from .readers.tf1_timeline import is_tf1_timeline, read_tf1_timeline
from .readers.tf_trace_json import is_tf_trace_json, read_tf_trace_json
from .readers.torch_trace import is_torch_trace, read_torch_trace
from .readers.xplane import read_xplane_session


class UnknownRunError(KeyError):
    """A run or session name that is not among the discovered ones."""

    def __init__(self, message: str, known: list[str]):
        super().__init__(message)
        self.message = message
        self.known = known


@dataclasses.dataclass
class LoadedRun:
    source: RunSource
    session: str
    profile: OpProfile
    model: str
    label: str | None
    repeat: int | None = None


class Catalog:
    """``cache_dir``: where parsed profiles are kept between processes (None: memory
    only). ``max_trace_bytes``: the memory guard, see ``memory_guard``."""

    def __init__(self, logdir: str, cache_dir: str | None = None, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                 max_trace_bytes: int | None = None):
        self.logdir = logdir
        self.cache = ProfileCache(cache_dir, memory_bytes)
        self.max_trace_bytes = max_trace_bytes if max_trace_bytes is not None else default_trace_limit()
        self._sources: list[RunSource] | None = None

    def sources(self, refresh: bool = False) -> list[RunSource]:
        if refresh or self._sources is None:
            self._sources = discover(self.logdir)
        return self._sources

    def source(self, run: str) -> RunSource:
        for source in self.sources():
            if source.run == run:
                return source
        for source in self.sources(refresh=True):
            if source.run == run:
                return source
        known = [s.run for s in self._sources or []]
        raise UnknownRunError(f"unknown run {run!r}", known)

    def _session(self, run: str, session: str | None) -> tuple[RunSource, str, tuple]:
        source = self.source(run)
        if source.refusal:
            raise ProfileError(source.sessions[source.newest_session][0], source.refusal)
        session = session or source.newest_session
        if session not in source.sessions:
            raise UnknownRunError(f"run {run!r} has no session {session!r}", list(source.sessions))
        signatures = []
        for path in source.sessions[session]:
            try:
                signatures.append((path, *fs.signature(path)))
            except OSError as error:
                raise ProfileError(path, f"cannot read the file: {error.strerror or error}") from None
        return source, session, (source.format, tuple(signatures))

    def load(self, run: str, session: str | None = None) -> LoadedRun:
        """The run's profile, read once and then served from the caches. Raises
        UnknownRunError or ProfileError."""
        source, session, key = self._session(run, session)
        profile = self.cache.peek(key)
        if profile is None:
            file_format, signatures = key
            memory_guard(file_format, [(path, size) for path, size, _ in signatures], self.max_trace_bytes)
            paths = [path for path, _, _ in signatures]
            budget = text_budget(file_format, self.max_trace_bytes)
            profile = self.cache.get(key, lambda: read_profile(file_format, paths, budget))
        return _settle_facts(source, session, profile)

    def peek(self, run: str, session: str | None = None) -> LoadedRun | None:
        """The run if its profile is already in a cache (memory or disk), else None; never
        reads a trace. Raises ProfileError for a file already known to be unreadable."""
        source, session, key = self._session(run, session)
        profile = self.cache.peek(key)
        return None if profile is None else _settle_facts(source, session, profile)


# Peak memory of a read, per byte of trace, with a margin over what
# benchmarks/bench_readers.py measures (30 MB xplane: 1.9x; 211 MB PyTorch JSON: 1.9x,
# read in batches). TF JSON traces are decoded whole into full events (about 3.4x).
_PEAK_PER_BYTE = {XPLANE: 3.0, PYTORCH: 3.0, "json": 4.5}


def default_trace_limit() -> int:
    """Half of the machine's memory, expressed as the trace size whose read would need it."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = 8 * 1024**3
    return int(physical * 0.5)


def estimated_read_bytes(file_format: str, files: list[tuple[str, int]]) -> int:
    """Roughly the memory a read of these ``(path, size)`` files takes at its peak."""
    total = 0
    for path, size in files:
        if path.endswith(".gz") and not fs.is_remote(path):
            size = max(size, _gzip_original_size(path))
        total += size * _PEAK_PER_BYTE.get(file_format, _PEAK_PER_BYTE["json"])
    return int(total)


def _gzip_original_size(path: str) -> int:
    """The gzip trailer's size field (modulo 4 GiB): the uncompressed size."""
    try:
        with fs.open_regular(path) as handle:
            handle.seek(-4, os.SEEK_END)
            return int.from_bytes(handle.read(4), "little")
    except OSError:
        return 0


def memory_guard(file_format: str, files: list[tuple[str, int]], limit_bytes: int) -> None:
    """Refuse a read that would need more memory than the limit, with the way out, rather
    than let the kernel kill TensorBoard."""
    if limit_bytes <= 0:
        return
    needed = estimated_read_bytes(file_format, files)
    if needed > limit_bytes:
        size_mb = sum(size for _, size in files) / 1e6
        raise OverLimit(
            files[0][0],
            f"too large to read here: {size_mb:,.0f} MB of trace needs about {needed / 1e9:,.1f} GB of memory, above "
            f"the {limit_bytes / 1e9:,.1f} GB limit (memory guard). Raise it with --opcompare_max_read_gb or "
            "`tb-opcompare --max-read-gb`, or precompute on a bigger machine with `tb-opcompare index` and share "
            "the cache directory",
        )


def text_budget(file_format: str, limit_bytes: int) -> int | None:
    """How much decompressed text a read may produce within the memory limit."""
    return None if limit_bytes <= 0 else int(limit_bytes / _PEAK_PER_BYTE.get(file_format, _PEAK_PER_BYTE["json"]))


def read_profile(file_format: str, paths: list[str], max_text_bytes: int | None = None) -> OpProfile:
    """Read one session's files with the reader their content calls for."""
    try:
        return _read_profile(file_format, paths, max_text_bytes)
    except OSError as error:
        raise ProfileError(error.filename or paths[0], f"cannot read the file: {error.strerror or error}") from None
    except RecursionError:
        raise ProfileError(paths[0], "nested more deeply than a profiler ever writes (thousands of levels of JSON "
                                     "arrays or objects); not read") from None
    except MemoryError:  # a limit of this machine, not a fault of the file: never cached
        raise OverLimit(paths[0], "ran out of memory while reading it; lower the memory guard "
                                     "(--opcompare_max_read_gb / --max-read-gb) so such reads are refused up "
                                     "front, or read it on a bigger machine with `tb-opcompare index`") from None


def _read_profile(file_format: str, paths: list[str], max_text_bytes: int | None) -> OpProfile:
    if file_format == EMPTY_SESSION:
        raise ProfileError(paths[0], "no .xplane.pb or .trace.json.gz in this profile session directory; the "
                                     "profiler was stopped before writing, or is still writing")
    if file_format == XPLANE:
        return read_xplane_session(paths, fs.read_bytes, max_text_bytes)
    path = paths[0]
    data = fs.read_bytes(path)
    if file_format == SUMMARY_JSON:
        return read_summary_json(path, data)
    text = open_chrome_trace(path, data, max_text_bytes)
    del data  # ``text`` holds the (decompressed) bytes
    if file_format == PYTORCH or is_torch_trace(text):
        return read_torch_trace(path, text)
    trace = text.materialize()
    del text
    if file_format == TF_TRACE_JSON or is_tf_trace_json(trace):
        return read_tf_trace_json(path, trace)
    if file_format == CHROME_TRACE and is_tf1_timeline(trace):
        return read_tf1_timeline(path, trace)
    raise ProfileError(path, "a Chrome trace, but neither a TF1 timeline, a TF 2.x trace nor a PyTorch trace")


_SIDECAR_MAX_BYTES = 1 << 20


def _read_sidecar(source: RunSource) -> tuple[dict, str | None]:
    """The sidecar's JSON object and None, or ``{}`` and why it was ignored."""
    path = fs.join(source.run_dir, SIDECAR)
    try:
        data = fs.read_head(path, _SIDECAR_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        return {}, f"{path}: ignored, {error.strerror or error}"
    if len(data) > _SIDECAR_MAX_BYTES:
        return {}, f"{path}: ignored, larger than {_SIDECAR_MAX_BYTES:,} bytes (a sidecar is a few hundred)"
    try:
        sidecar = json.loads(data)
        if not isinstance(sidecar, dict):
            raise ValueError("expected a JSON object")
    except RecursionError:
        return {}, f"{path}: ignored, JSON nested too deeply"
    except ValueError as error:
        return {}, f"{path}: ignored, not a JSON object ({error})"
    return sidecar, None


MAX_BATCH_SIZE = 10_000_000  # a claimed batch size above this is a broken sidecar, not a model
WEAK_AGREEMENT = 0.75  # below this share of the evidence (against the runner-up), a sidecar or run name wins
SIDECAR_SOURCE = SIDECAR
NAME_SOURCE = "run name"
_SAID_BY = {SIDECAR_SOURCE: "the sidecar opcompare.json", NAME_SOURCE: "the run name"}


@dataclasses.dataclass(frozen=True)
class Claims:
    """What a run's sidecar and name say, before (or beside) what its data shows. The
    order of trust is data, then sidecar, then name."""

    model: str  # the sidecar's ``model``, else the run name's model key
    label: str | None
    batch_sizes: tuple[tuple[int, str], ...]  # (size, source), most trusted first
    device: str | None  # the sidecar's device, else the name's
    device_source: str | None
    device_name: str | None
    warning: str | None  # a sidecar that could not be used
    repeat: int | None = None  # which recording of one configuration (sidecar ``repeat``, else ``_rep<K>``)


def read_claims(source: RunSource) -> Claims:
    sidecar, warning = _read_sidecar(source)
    model = sidecar.get("model") if isinstance(sidecar.get("model"), str) else None
    label = sidecar.get("label") if isinstance(sidecar.get("label"), str) else None
    sidecar_batch = sidecar.get("batch_size")
    batch_sizes = []
    if isinstance(sidecar_batch, int) and not isinstance(sidecar_batch, bool) and 0 < sidecar_batch <= MAX_BATCH_SIZE:
        batch_sizes.append((sidecar_batch, SIDECAR_SOURCE))
    elif sidecar_batch is not None and warning is None:
        warning = (f"{fs.join(source.run_dir, SIDECAR)}: batch_size {str(sidecar_batch)[:40]!r} ignored, not a "
                   f"whole number from 1 to {MAX_BATCH_SIZE:,}")
    named_batch = batch_size_from_name(source.run)
    if named_batch is not None:
        batch_sizes.append((named_batch, NAME_SOURCE))
    sidecar_device = sidecar.get("device")
    if isinstance(sidecar_device, str) and sidecar_device.strip():
        device, device_source = sidecar_device.strip().upper(), SIDECAR_SOURCE
    else:
        device = device_from_name(source.run)
        device_source = NAME_SOURCE if device else None
    device_name = sidecar.get("device_name") if isinstance(sidecar.get("device_name"), str) else None
    repeat = sidecar.get("repeat")
    if not (isinstance(repeat, int) and not isinstance(repeat, bool) and repeat > 0):
        repeat = repeat_from_name(source.run)
    return Claims(model=model or model_key(source.run), label=label, batch_sizes=tuple(batch_sizes), device=device,
                  device_source=device_source, device_name=device_name, warning=warning, repeat=repeat)


def _settle_facts(source: RunSource, session: str, parsed: OpProfile) -> LoadedRun:
    """Batch size: the profile's tensors, then the sidecar, then the run name; a claim
    that disagrees with the measured size is shown as a warning. Device: the profile
    (a device plane with activity); a sidecar that says otherwise gets a warning. Model:
    the sidecar, then the run name."""
    facts = dataclasses.replace(parsed.facts, warnings=list(parsed.facts.warnings))
    claims = read_claims(source)
    if claims.warning:
        facts.warnings.append(claims.warning)
    weak = facts.batch_size_agreement is not None and facts.batch_size_agreement < WEAK_AGREEMENT
    disagreeing = [(size, by) for size, by in claims.batch_sizes if size != facts.batch_size]
    if facts.batch_size is None and claims.batch_sizes:
        facts.batch_size, facts.batch_size_source = claims.batch_sizes[0]
    elif weak and claims.batch_sizes and claims.batch_sizes[0] in disagreeing:  # the most trusted claim decides
        measured, agreement = facts.batch_size, facts.batch_size_agreement
        facts.batch_size, claimed_by = claims.batch_sizes[0]
        facts.batch_size_source, facts.batch_size_agreement = claimed_by, None
        facts.warnings.append(f"the profile's tensors weakly suggest batch size {measured} (only {agreement:.0%} "
                              f"of the evidence agrees); using {facts.batch_size} from {_SAID_BY[claimed_by]}")
    else:
        for size, claimed_by in disagreeing:
            facts.warnings.append(f"{_SAID_BY[claimed_by]} says batch size {size} but the profile's tensors say "
                                  f"{facts.batch_size}; using the measured size")
    if claims.device_source == SIDECAR_SOURCE and claims.device != facts.device:
        facts.warnings.append(f"the sidecar opcompare.json says {claims.device} but the profile shows "
                              f"{facts.device} activity only; using the profile")
    if facts.device_name is None and claims.device_name and facts.device != "CPU":
        facts.device_name = claims.device_name
    return LoadedRun(source=source, session=session, profile=OpProfile(facts=facts, ops=parsed.ops),
                     model=claims.model, label=claims.label, repeat=claims.repeat)
