"""Find profile runs under a logdir without parsing any trace.

A run is one profiled experiment; a session is one capture within it (the newest is
the default). What makes a run:

* ``<run>/plugins/profile/<session>/<host>.xplane.pb`` (TF >= 2.2): every host file of
  a session is read together. ``<host>.trace.json.gz`` (TF 2.0-2.3) is used where a
  session has no xplane.
* ``<run>/<worker>.<ts>.pt.trace.json[.gz]`` (PyTorch ``tensorboard_trace_handler``):
  each file is a session, except where the files are the ranks of one distributed job
  (``ingest.workers``): then each session is one capture, every rank's file read together.
* any other ``*.json`` / ``*.json.gz`` whose first bytes show ``"traceEvents"`` (TF1
  timeline, PyTorch ``export_chrome_trace``), or a ``summary.json`` with
  ``"op_stats"``: the directory is the run, each file a session.

Only file names and, for ambiguous JSON, the first few kilobytes are looked at. Only
regular files in the walked places (the logdir and the directories it links to, see
``fs.Walk``) are ever opened: a FIFO, a device, a directory named like a trace, a
trace-named link to a file elsewhere or a link to a directory that holds the logdir
becomes a ``REFUSED`` entry that is listed with the reason and never read, so one odd
entry can neither block the listing nor hide the good runs.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import posixpath
import re
import zlib
from collections.abc import Callable

from tb_opcompare.errors import escape_undecodable
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.formats import (
    CHROME_TRACE,
    EMPTY_SESSION,
    FORMATS,
    PYTORCH,
    REFUSED,
    SESSION_FORMATS,
    SNIFF_BYTES,
    XPLANE,
    ProfileFormat,
    text_head,
)
from tb_opcompare.ingest.sidecar import SIDECAR
from tb_opcompare.ingest.workers import Rank, group_ranks, rank_of

_TORCH_TIMESTAMP = re.compile(r"\.(\d+)\.pt\.trace\.json")
_SESSION_FORMAT_NAMES = {f.name for f in SESSION_FORMATS}
# (format, its file name pattern), (format, its marker), (format, its session suffix): the
# formats of the registry that have one, in its order
_NAMED_FORMATS = tuple((f, f.file_name) for f in FORMATS if f.file_name)
_SNIFFED_FORMATS = tuple((f, f.json_marker) for f in FORMATS if f.json_marker)
_SESSION_SUFFIXES = tuple((f, f.session_suffix) for f in SESSION_FORMATS if f.session_suffix)


@dataclasses.dataclass(frozen=True)
class HeadFacts:
    """What discovery learns from a file's first ``SNIFF_BYTES``: the markers of the JSON
    formats told by content that it holds, and the rank of a distributed job it names.
    The shared index keeps them, so that listing an indexed logdir opens no profile.
    ``unreadable``: why the first bytes could not be read (then no marker is known)."""

    markers: tuple[str, ...]
    rank: Rank | None
    unreadable: str | None = None


def head_facts(head: bytes) -> HeadFacts:
    return HeadFacts(tuple(marker.decode() for _, marker in _SNIFFED_FORMATS if marker in head), rank_of(head))


# A file's HeadFacts where something already knows them (the shared index), else None
KnownHeads = Callable[[str], "HeadFacts | None"]


# The folder at a logdir's root that holds its shared index (``store.shared_index``):
# parsed tables beside the profiles, which discovery never lists as runs.
INDEX_FOLDER = ".opcompare"


@dataclasses.dataclass
class RunSource:
    """A run found on disk: where its files are, and which captures it holds."""

    run: str
    format: str
    run_dir: str
    sessions: dict[str, list[str]]  # session name -> files, oldest session first
    refusal: str | None = None  # why a REFUSED entry is not read
    # the real paths the listing walked: a read opens files there only (``fs.confined``)
    places: tuple[str, ...] | None = None
    # a distributed job's one-rank sessions -> the job's session of all ranks (``_join_ranks``)
    worker_sessions: dict[str, str] = dataclasses.field(default_factory=dict)
    # whether the listing found a sidecar in run_dir (None: not listed; look): a bucket is
    # not asked for a sidecar it does not hold, a request a run on every listing
    sidecar_listed: bool | None = None

    @property
    def newest_session(self) -> str:
        return next(reversed(self.sessions))


@dataclasses.dataclass
class _Sidecar:
    """A folder the listing found a sidecar in."""

    directory: str


@dataclasses.dataclass
class _Session:
    """A profile session directory (``<run>/plugins/profile/<session>``) and its host files."""

    run_dir: str
    name: str
    directory: str
    host_files: list[str]
    refused_any: bool


@dataclasses.dataclass
class _File:
    """A file outside profile sessions whose name or first bytes make it a trace."""

    directory: str
    name: str
    kind: str


@dataclasses.dataclass
class _Skipped:
    """A JSON file that is no trace by its first ``SNIFF_BYTES`` (a config, or a trace
    whose ``traceEvents`` come later than any profiler writes them), or whose first bytes
    could not be read (``unreadable`` says why)."""

    path: str
    unreadable: str | None
    said: bool = True  # False: a name known to be no trace (a config), passed over unsaid


# JSON files a logdir holds that are known not to be traces: never counted as skipped
_NOT_TRACES = frozenset({SIDECAR, "projector_config.json", "config.json", "hparams.json"})


def _entries(
    logdir: str,
    refused: list[tuple[str, str, str]],
    walk: fs.Walk | None = None,
    known: KnownHeads | None = None,
):
    """Every profile session and trace file under ``logdir``, in walk order; what must
    not be read goes to ``refused`` as (path, reason, run directory: the path itself where it is one)."""
    walk = walk or fs.Walk(logdir, refused=lambda path, reason: refused.append((path, reason, path)))
    for directory, subdirs, files in walk:
        if SIDECAR in files:
            yield _Sidecar(directory)
        if INDEX_FOLDER in subdirs and directory.rstrip("/" + os.sep) == logdir.rstrip("/" + os.sep):
            subdirs.remove(INDEX_FOLDER)  # the shared index's parsed tables, never a run
        parent, session = _split(directory)
        profile_root, plugins = _split(parent)
        if session and plugins == "profile" and _split(profile_root)[1] == "plugins":
            run_dir = _split(profile_root)[0]
            before = len(refused)
            # A directory named like a host file is refused by name, so the user learns of it.
            host_files = _readable(walk, directory, files + subdirs, refused, _is_host_file, run_dir)
            yield _Session(run_dir, session, directory, host_files, len(refused) > before)
            continue
        for name in _readable(walk, directory, files, refused, _is_candidate, directory):
            # a file's first bytes are read under the rule every read keeps (``fs.confined``):
            # one swapped for a link out of the walked places since the listing is not opened
            with fs.confined(None if fs.is_remote(logdir) else tuple(walk.real_roots)):
                kind, unreadable = _classify(name, fs.join(directory, name), known)
            if kind:
                yield _File(directory, name, kind)
            elif _is_json(name):
                yield _Skipped(fs.join(directory, name), unreadable, said=name not in _NOT_TRACES)


def discover(
    logdir: str,
    skipped: list[tuple[str, str | None]] | None = None,
    known: KnownHeads | None = None,
    not_traces: list[str] | None = None,
) -> list[RunSource]:
    """The runs under ``logdir``; ``skipped`` (where given) receives the JSON files that
    are no trace by their first bytes, relative to ``logdir``, each with why its first
    bytes could not be read (None: read, no trace's marker), for the listing to say.
    ``known``: the first bytes' facts of files already read (the shared index's);
    ``not_traces`` receives the paths of every JSON file read and found no trace (the
    shared index remembers them)."""
    found: dict[tuple[str, str], RunSource] = {}
    empty: dict[str, list[tuple[str, str]]] = {}  # run dir -> [(session, session dir)] with no host file
    refused: list[tuple[str, str, str]] = []
    walk = fs.Walk(logdir, refused=lambda path, reason: refused.append((path, reason, path)))
    if fs.is_remote(logdir):
        known = _heads_read_ahead(logdir, walk, known)
    sidecars: set[str] = set()
    for entry in _entries(logdir, refused, walk, known):
        if isinstance(entry, _Sidecar):
            sidecars.add(entry.directory.rstrip("/" + os.sep))
        elif isinstance(entry, _Skipped):
            if skipped is not None and entry.said:
                skipped.append((run_name(logdir, entry.path), entry.unreadable))
            if not_traces is not None and entry.unreadable is None:
                not_traces.append(entry.path)
        elif isinstance(entry, _File):
            _add(found, logdir, entry.directory, entry.kind, entry.name, fs.join(entry.directory, entry.name))
        elif not _add_profile_session(found, logdir, entry.run_dir, entry.name, entry.directory, entry.host_files):
            if not entry.refused_any:
                empty.setdefault(entry.run_dir, []).append((entry.name, entry.directory))
    for run_dir, sessions in empty.items():
        if (run_name(logdir, run_dir), XPLANE) not in found:
            for session, directory in sessions:
                _add_files(found, logdir, run_dir, EMPTY_SESSION, session, [directory])
    for path, reason, run_dir in refused:
        run = run_name(logdir, run_dir)
        if (run, REFUSED) in found:  # a second refused entry of that run is listed under its own path
            run = run_name(logdir, path)
        found[(run, REFUSED)] = RunSource(
            run=run, format=REFUSED, run_dir=run_dir, sessions={_name(path): [path]}, refusal=reason
        )
    places = None if fs.is_remote(logdir) else tuple(walk.real_roots)
    for source in found.values():
        source.places = places
        source.sidecar_listed = source.run_dir.rstrip("/" + os.sep) in sidecars
        # sorted once per run: sorting at each session added took 94 s for 10,000 sessions
        source.sessions = dict(sorted(source.sessions.items(), key=lambda item: _session_order(item[0])))
        if source.format in (PYTORCH, CHROME_TRACE) and len(source.sessions) >= 2:
            _join_ranks(source, known)
    return _unique_names(sorted(found.values(), key=lambda r: r.run))


def _heads_read_ahead(logdir: str, walk: fs.Walk, known: KnownHeads | None) -> KnownHeads:
    """``known``, and the first bytes of every other remote file the listing will look into,
    read at once (``fs.read_heads``): the JSON files told by content, and the PyTorch traces
    of folders of several (a distributed job's ranks). A first pass over the walk (its
    listing made once: no request) finds them."""
    wanted: list[str] = []
    traces: dict[str, list[str]] = {}

    def note(path: str) -> HeadFacts:
        facts = known(path) if known else None
        if facts is None:
            wanted.append(path)
        return facts or HeadFacts((), None)

    for entry in _entries(logdir, [], walk, note):
        if isinstance(entry, _File) and entry.kind in (PYTORCH, CHROME_TRACE):
            traces.setdefault(entry.directory, []).append(fs.join(entry.directory, entry.name))
    wanted += [path for paths in traces.values() if len(paths) > 1 for path in paths if not (known and known(path))]
    heads = fs.read_heads(list(dict.fromkeys(wanted)), SNIFF_BYTES)

    def read_ahead(path: str) -> HeadFacts | None:
        facts = known(path) if known else None
        if facts is None and path in heads:
            facts = facts_of_head(heads[path])
        return facts

    return read_ahead


def _join_ranks(source: RunSource, known: KnownHeads | None) -> None:
    """A folder of one distributed job's traces, one per rank, becomes one run whose
    sessions are the job's captures, each holding every rank's file (``workers``), each
    after a session per rank of it (``worker_sessions``); any other folder of several
    traces keeps one session per file."""
    files = [paths[0] for paths in source.sessions.values()]
    ranks = [_head_facts(path, known).rank for path in files]
    captures = group_ranks(files, ranks)
    if captures is None:
        return
    rank_by_file = {path: rank for path, rank in zip(files, ranks) if rank is not None}  # every one, grouped
    sessions = {}
    for paths in captures:
        paths = sorted(paths, key=lambda path: rank_by_file[path].rank)
        found = [rank_by_file[path].rank for path in paths]
        world = rank_by_file[paths[0]].world_size
        capture = _name(paths[0])
        job = f"{capture} (ranks {', '.join(map(str, found))} of {world})"
        # Each rank alone too, before the job (the newest session, read by default): the
        # choice between the ranks pooled and one rank, a straggler's, say.
        for path, rank in zip(paths, found):
            alone = f"{_name(path)} (rank {rank} of {world} only)"
            sessions[alone] = [path]
            source.worker_sessions[alone] = job
        sessions[job] = paths
    source.sessions = sessions


def has_profile_runs(logdir: str) -> bool:
    """Whether discover() would find a readable run, stopping at the first (TensorBoard
    asks on every plugin listing, so this must stay cheap and must never block)."""
    return any(
        isinstance(entry, _File) or (isinstance(entry, _Session) and entry.host_files) for entry in _entries(logdir, [])
    )


def _is_host_file(name: str) -> bool:
    return any(name.endswith(suffix) for _, suffix in _SESSION_SUFFIXES)


def _named_format(name: str) -> ProfileFormat | None:
    return next((f for f, file_name in _NAMED_FORMATS if file_name.search(name)), None)


def _is_json(name: str) -> bool:
    return name != SIDECAR and name.endswith((".json", ".json.gz"))


def _is_candidate(name: str) -> bool:
    """Could be a trace by its name alone (the content decides for generic JSON)."""
    return _named_format(name) is not None or _is_json(name) or _is_loose_xplane(name)


def _is_loose_xplane(name: str) -> bool:
    """An xplane outside a profile session (``<run>/plugins/profile/<session>/``): copied
    out of one, or written by ``jax.profiler`` elsewhere. Its folder is its run; before,
    it was passed over without a word."""
    return name.endswith(".xplane.pb")


def _readable(walk: fs.Walk, directory: str, names: list[str], refused: list, wanted, run_dir: str) -> list[str]:
    """The wanted names that are regular files in a walked place; the others go to
    ``refused`` with the reason (checked with ``stat``: nothing is opened). A generic
    ``.json`` linked from elsewhere (a shared config) is passed over in silence: only a
    name that says "trace" makes a link out of the logdir worth a word."""
    kept = []
    for name in names:
        if not wanted(name):
            continue
        path = fs.join(directory, name)
        reason = walk.refusal(path)
        if reason is None:
            kept.append(name)
        elif reason.startswith(fs.OUTSIDE) and not (_named_format(name) or _is_host_file(name)):
            continue
        else:
            refused.append((path, reason, run_dir))
    return kept


def _split(path: str) -> tuple[str, str]:
    return posixpath.split(path.rstrip("/")) if fs.is_remote(path) else os.path.split(path.rstrip(os.sep))


def run_name(logdir: str, directory: str) -> str:
    """The name a run (or a file) below ``logdir`` is listed and asked for by: its path
    there, each byte that is not UTF-8 shown as ``\\xNN`` (``errors.escape_undecodable``),
    so one folder named so is listed, and never fails a listing (a JSON document, a
    Parquet table, a terminal cannot carry the raw byte). Its files keep their real paths."""
    return escape_undecodable(relative_to(logdir, directory))


def _name(path: str) -> str:
    """A session's name: its folder's or file's, shown as ``run_name`` shows a run's."""
    return escape_undecodable(_split(path)[1])


def relative_to(logdir: str, directory: str) -> str:
    """``directory`` (or a file) below ``logdir``, with forward slashes, as it is on disk
    (``run_name``: as a run is named)."""
    if fs.is_remote(logdir):
        relative = posixpath.relpath(directory, logdir)
    else:
        relative = os.path.relpath(directory, logdir).replace(os.sep, "/")
    return relative


def _add_profile_session(found, logdir, run_dir, session, directory, files) -> bool:
    """The session's host files of the first session format it holds (an xplane over
    the JSON trace that older TF wrote beside it)."""
    for session_format, suffix in _SESSION_SUFFIXES:
        host_files = [fs.join(directory, f) for f in files if f.endswith(suffix)]
        if host_files:
            _add_files(found, logdir, run_dir, session_format.name, session, host_files)
            return True
    return False


def _add(found, logdir, directory, kind, session, path) -> None:
    _add_files(found, logdir, directory, kind, session, [path])


def _add_files(found, logdir, run_dir, kind, session, paths) -> None:
    run = run_name(logdir, run_dir)
    # one run per profile-session folder, whichever session format each capture holds
    family = XPLANE if kind == EMPTY_SESSION or kind in _SESSION_FORMAT_NAMES else kind
    source = found.setdefault((run, family), RunSource(run=run, format=kind, run_dir=run_dir, sessions={}))
    source.sessions[escape_undecodable(session)] = sorted(paths)  # put in order once all are found (``discover``)


def _session_order(session: str) -> tuple:
    match = _TORCH_TIMESTAMP.search(session)
    return (int(match.group(1)) if match else 0, session)


def _classify(name: str, path: str, known: KnownHeads | None) -> tuple[str | None, str | None]:
    """(the file's format or None, why its first bytes could not be read or None)."""
    named = _named_format(name)
    if named:
        return named.name, None
    if _is_loose_xplane(name):
        return XPLANE, None
    if not _is_json(name):
        return None, None
    facts = _head_facts(path, known)
    kind = next(
        (
            f.name
            for f, marker in _SNIFFED_FORMATS
            if name.startswith(f.name_prefix) and marker.decode() in facts.markers
        ),
        None,
    )
    return kind, facts.unreadable


def _head_facts(path: str, known: KnownHeads | None) -> HeadFacts:
    return (known and known(path)) or _sniffed(path)


def _sniffed(path: str) -> HeadFacts:
    """The facts of a file's first ``SNIFF_BYTES``, unzipped; where they cannot be read,
    why (a file that cannot be opened, a gzip stream that is corrupt: before, both were
    reported as JSON holding no trace's marker)."""
    try:
        head = fs.read_head(path, SNIFF_BYTES)
    except OSError as error:
        return HeadFacts((), None, f"cannot read it: {error.strerror or error}")
    return facts_of_head(head)


def facts_of_head(data: bytes) -> HeadFacts:
    """The facts of a file's first ``SNIFF_BYTES`` (``data`` may hold more), unzipped;
    where the gzip stream is corrupt, none, and why."""
    try:
        return head_facts(text_head(data[:SNIFF_BYTES]))
    except (zlib.error, gzip.BadGzipFile) as error:
        return HeadFacts((), None, f"not a readable gzip stream ({error})")


def _unique_names(sources: list[RunSource]) -> list[RunSource]:
    """Two formats in one directory make two runs; the later one is named ``run [format]``."""
    seen: set[str] = set()
    for source in sources:
        if source.run in seen:
            source.run = f"{source.run} [{source.format}]"
        seen.add(source.run)
    return sources
