"""A logdir's runs, each read once into an OpProfile with its facts settled.

The CLI and the HTTP routes both go through here: discovery finds the runs, the format
registry reads them (behind the memory guard and the cache), and the sidecar and the
run name add what the data cannot say. Parsed profiles are kept keyed by the files'
size and modification time, so a run that changes on disk is read again.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from tb_opcompare.errors import OverLimit, ProfileError, UnknownRunError
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import RunSource, discover
from tb_opcompare.ingest.facts import settle_facts
from tb_opcompare.ingest.formats import EMPTY_SESSION, import_readers, read_profile
from tb_opcompare.ingest.sidecar import Claims, read_claims, read_sidecars_ahead, sidecar_field, sidecar_object
from tb_opcompare.schema.dimensions import configuration_key, configured
from tb_opcompare.store.cache import DEFAULT_MEMORY_BYTES, Encoded, ProfileCache, ProfileSummary, encoded, entry_bytes
from tb_opcompare.store.head_start import HEAD_START_MIN_BYTES, HeadStart, pays
from tb_opcompare.store.memory_guard import READS, default_trace_limit, memory_guard, text_budget
from tb_opcompare.store.progress import READS_UNDER_WAY
from tb_opcompare.store.shared_index import SharedIndex
from tb_opcompare.store.watched_fork import Lost, allowance, run_watched

if TYPE_CHECKING:  # the tables come with the readers: a cold command lists before it loads them
    from tb_opcompare.schema.optable import OpProfile

# A session named by its time (Keras's 2026_11_22_11_44_57, Kineto's epoch milliseconds).
_TIMED_SESSION = re.compile(
    r"(\d{4})_(\d{2})_(\d{2})_(\d{2})_(\d{2})_(\d{2})|(?<!\d)(\d{10}|\d{13}|\d{16}|\d{19})(?!\d)"
)


def _from_session_name(session: str) -> datetime.datetime | None:
    """The time a session's name gives, in UTC; None where it gives none. Keras names its
    sessions in the recording machine's local time, which the name does not say: taken as
    UTC, they order among themselves, and may sit hours off a sidecar's or a file's time."""
    match = _TIMED_SESSION.search(session)
    if not match:
        return None
    try:
        if match.group(7):
            digits = match.group(7)
            seconds, fraction = divmod(int(digits), 10 ** (len(digits) - 10))
            when = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc) + datetime.timedelta(
                microseconds=fraction * 10**6 // 10 ** (len(digits) - 10)
            )
            # ten digits may be a date (2026112211, a name's YYYYMMDDHH), not epoch seconds: none from the future
            return when if when <= datetime.datetime.now(datetime.timezone.utc) + _SLACK else None
        year, month, day, hour, minute, second = map(int, match.groups()[:6])
        return datetime.datetime(year, month, day, hour, minute, second, tzinfo=datetime.timezone.utc)
    except (ValueError, OverflowError, OSError):  # a name that only looks like a time
        return None


_SLACK = datetime.timedelta(days=1)


def _from_iso(text: str) -> datetime.datetime | None:
    """A sidecar's ISO time; one without a zone is taken as UTC (the recorder writes UTC)."""
    try:
        when = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _utc_text(when: datetime.datetime | None) -> str:
    if when is None:
        return ""
    try:
        return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    except (OverflowError, ValueError):  # a sidecar's 0001-01-01T00:00+01:00 lies before year 1 in UTC
        return ""


# a run's tables (``load``), or, in a listing, maybe only their summary (``listed``)
_Kept = TypeVar("_Kept", bound="OpProfile | ProfileSummary")
_Made = TypeVar("_Made")
_Item = TypeVar("_Item")


@dataclasses.dataclass
class LoadedRun(Generic[_Kept]):
    source: RunSource
    session: str
    profile: _Kept  # a one-shot catalog's listing: the summary of a cached run
    model: str
    label: str | None
    repeat: int | None = None
    base_model: str = ""  # the model without its precision and compiler (``model`` is the grouping key)
    precision: str | None = None  # as configured (``schema.dimensions.configured``): the grouping's precision
    compiler: str | None = None
    model_source: str = "run name"  # ``sidecar``, ``run name``, or the data that joined it to others
    # (``service.logdir.read_logdir``)


class Catalog:
    """``cache_dir``: where parsed profiles are kept between processes (None: memory
    only), ``cache_max_bytes`` at most (None: ``settings.cache_max_bytes()``).
    ``max_trace_bytes``: the memory guard, see ``memory_guard``. ``one_shot``: the
    catalog of a command, which lists once and ends (``listed``)."""

    def __init__(
        self,
        logdir: str,
        cache_dir: str | None = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        max_trace_bytes: int | None = None,
        parallel_reads: int = 1,
        one_shot: bool = False,
        cache_max_bytes: int | None = None,
    ):
        self.logdir = logdir
        self.one_shot = one_shot
        # How many processes ``read_ahead`` reads in: the CLI's cores. TensorBoard's server
        # keeps 1 (it runs threads, and a fork of a threaded process may copy a held lock).
        self.parallel_reads = parallel_reads
        self.cache = ProfileCache(cache_dir, memory_bytes, cache_max_bytes)
        self.max_trace_bytes = max_trace_bytes if max_trace_bytes is not None else default_trace_limit()
        self._sources: list[RunSource] | None = None
        # JSON files the last listing found to be no trace, relative, each with why it could
        # not be read or None (``discover``)
        self.skipped: list[tuple[str, str | None]] = []
        self.not_traces: list[str] = []  # every JSON file the last listing found no trace, as paths
        self.index = SharedIndex(logdir, self.max_trace_bytes)
        self.head_start = HeadStart()
        # What the last listing's runs are before their data is read, worked out once a
        # listing (``claims``, ``per_listing``): a warm request of the tab read and parsed
        # every run's sidecar again to find repeats, a stat a run.
        self._listing_memo: dict[object, object] = {}
        self._claims: dict[int, tuple[RunSource, Claims]] = {}

    def sources(self, refresh: bool = False) -> list[RunSource]:
        """The logdir's runs, listed again with ``refresh`` (and its shared index's
        manifest read again with them: one request), but by a one-shot catalog: a command
        lists its logdir once (`runs` listed a bucket twice: at its start, for the head
        start, and for its document)."""
        if self._sources is None or (refresh and not self.one_shot):
            self.skipped, self.not_traces = [], []
            self.index.refresh()
            self._sources = discover(self.logdir, self.skipped, self.index.known_head, self.not_traces)
            self.index.seed_sidecars(self._sources)
            self._listing_memo, self._claims = {}, {}
        return self._sources

    def per_listing(self, key: object, make: Callable[[], _Made]) -> _Made:
        """``make()``, made once a listing of the logdir (what is true of the listed runs
        until the next listing: their repeat groups)."""
        memo = self._listing_memo
        if key not in memo:
            memo[key] = make()
        return memo[key]  # type: ignore[return-value]  # each key is made by one caller, of one type

    def source(self, run: str) -> RunSource:
        for source in self.sources():
            if source.run == run:
                return source
        return self._listed_again(run)

    def _listed_again(self, run: str) -> RunSource:
        """The run in a new listing of the logdir. Raises UnknownRunError where it is not there."""
        for source in self.sources(refresh=True):
            if source.run == run:
                return source
        known = [s.run for s in self._sources or []]
        raise UnknownRunError(f"unknown run {run!r}", known)

    # What a run is before its data is read: the store's answer for every service, which
    # never opens a sidecar or a profile itself (each sidecar version is parsed once).
    def claims(self, source: RunSource) -> Claims:
        """What the run's sidecar, then its name, say (model, device, batch size, label,
        repeat, precision, compiler): read once a listing (a sidecar changed is read at the
        next listing, which the tab makes every few seconds)."""
        kept = self._claims.get(id(source))
        if kept is not None and kept[0] is source:
            return kept[1]
        claims = read_claims(source)
        self._claims[id(source)] = (source, claims)  # held with its source: an id is never reused
        return claims

    def sidecar_field(self, source: RunSource, path: str) -> str | None:
        """A field of the run's sidecar by its dotted path (``versions.torch``), as text."""
        return sidecar_field(source, path)

    def sidecar_object(self, source: RunSource, field: str) -> dict | None:
        """A JSON object of the run's sidecar (``device_limits``), as given."""
        return sidecar_object(source, field)

    def recorded_at(self, source: RunSource) -> str:
        """When the run was recorded, as UTC text that sorts in time
        (``2026-11-22 11:44:57.000000``): its sidecar's ``recorded_at``, else its newest
        session's name where the name is a time (Keras's ``2026_11_22_11_44_57``, Kineto's
        epoch milliseconds or nanoseconds), else the session file's modification time. One
        spelling for all three: as given, a sidecar's ``T`` sorted after a file time's
        space, and PyTorch runs sorted by their process id. A TF1 timeline's session is its
        file name (``timeline_02_step_1.json``), which every run of a logdir may share: no
        time at all, given as that name."""
        recorded = sidecar_field(source, "recorded_at")
        if recorded:
            return _utc_text(_from_iso(recorded)) or recorded
        session = source.newest_session
        named = _from_session_name(session)
        if named:
            return _utc_text(named)
        try:
            _, modified = fs.signature(source.sessions[session][0])
        except (OSError, IndexError, KeyError):
            return session
        if not modified:  # a store that gives no time (TensorBoard's gfile)
            return session
        return _utc_text(datetime.datetime.fromtimestamp(modified, datetime.timezone.utc))

    def _session(self, source: RunSource, session: str | None) -> tuple[str, tuple]:
        run = source.run
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
        return session, (source.format, tuple(signatures))

    def load(self, run: str, session: str | None = None) -> LoadedRun[OpProfile]:
        """The run's profile, read once and then served from the caches. A file of the run
        that the last listing found and that is gone now (a session or the run deleted since:
        the tab lists every few seconds and compares in between) is looked for in a new
        listing: the run as it is now, or UnknownRunError for a run deleted, never a 422
        naming a file no listing holds any more. Raises UnknownRunError or ProfileError."""
        try:
            return self.load_source(self.source(run), session)
        except ProfileError as error:
            if self.one_shot or not fs.is_gone(error.path):
                raise
        return self.load_source(self._listed_again(run), session)

    def load_source(self, source: RunSource, session: str | None = None) -> LoadedRun[OpProfile]:
        """``load`` for a run already found (no lookup, so no walk of the logdir)."""
        session, profile = self.parsed(source, session)
        return _settled(source, session, profile, self.claims(source))

    def parsed(self, source: RunSource, session: str | None = None) -> tuple[str, OpProfile]:
        """(the session's name, its profile as read, before sidecars and names settle its
        facts): from the caches, else the shared index, else the profile's files."""
        session, key = self._session(source, session)
        return session, self._profile(source, key)

    def _profile(self, source: RunSource, key: tuple) -> OpProfile:
        """``parsed``'s profile of the session of ``key``."""
        profile = self.cache.peek(key)
        if profile is None and self._take_from_index([key]):
            profile = self.cache.peek(key)
        if profile is None:
            needed = self._memory_needed(key)

            def read() -> OpProfile | Encoded:  # once per key, however many ask (the cache's single flight)
                size = sum(size for _, size, _ in key[1])
                with (
                    READS.reserve(key[1][0][0], needed, self.max_trace_bytes),
                    READS_UNDER_WAY.reading(source.run, size),
                ):
                    early = self.head_start.take(key)
                    if early is not None:
                        return early
                    return _read_key(source, key, self.max_trace_bytes)

            profile = self.cache.get(key, read)
        return profile

    def _memory_needed(self, key: tuple) -> int:
        """What reading the session of ``key`` is expected to take (raises OverLimit past the
        memory guard's limit)."""
        file_format, signatures = key
        return memory_guard(file_format, [(path, size) for path, size, _ in signatures], self.max_trace_bytes)

    def read_soon(self, runs: list[tuple[str, str | None]]) -> None:
        """Begin reading these (run, session or None for the newest) in forked processes
        while this process goes on importing (``store.head_start``): a cold command's first
        reads, at most one per core. Names of no run, sessions a cache or the shared index
        holds, small files and reads the memory guard cannot hold together are left to
        ``load``, which reports what is wrong as always."""
        if not runs or not pays(self.logdir):
            return
        listed = {source.run: source for source in self.sources()}  # the listing reads the index's manifest
        if self.index.size:
            return  # what it holds is read faster from it; what it lacks is rare
        needed = 0
        for run, session in dict.fromkeys(runs):
            source = listed.get(run)
            if source is None or len(self.head_start) >= self.parallel_reads:
                continue
            try:
                _, key = self._session(source, session)
                need = self._memory_needed(key)
            except (ProfileError, UnknownRunError):
                continue
            if (
                key[0] == EMPTY_SESSION
                or key in self.head_start
                or sum(size for _, size, _ in key[1]) < HEAD_START_MIN_BYTES
                or (self.max_trace_bytes > 0 and needed + need > self.max_trace_bytes)
                or self.cache.holds(key)
            ):
                continue
            needed += need
            self.head_start.start(key, source.places, self.max_trace_bytes)

    def prefetch(self, sources: list[RunSource]) -> None:
        """Take the newest sessions of ``sources`` that no cache holds from the shared index,
        in one batch of reads (a listing of a bucket logdir: one round of requests, not one
        a run)."""
        self._prefetched(sources)

    def _prefetched(self, sources: list[RunSource]) -> list[tuple[RunSource, tuple]]:
        """``prefetch``; returns each source with its newest session's key (files stated
        once, for the caller too), the sources that cannot be read left out."""
        keyed = []
        for source in sources:
            try:
                keyed.append((source, self._session(source, None)[1]))
            except (ProfileError, UnknownRunError):
                continue
        self._take_from_index([key for _, key in keyed if not self.cache.holds(key)])
        return keyed

    def list_ahead(self, sources: list[RunSource], read: bool) -> None:
        """What a listing of ``sources`` needs before ``listed``: nothing for the runs the
        shared index sums up (their facts and ops' names are in its manifest: no request,
        where fetching their tables cost 4-5 requests a run in a bucket); ``read_ahead``
        (with ``read``) or ``prefetch`` for the others."""
        rest = [source for source in sources if self._index_summary(source) is None]
        (self.read_ahead if read else self.prefetch)(rest)
        read_sidecars_ahead(sources)  # a bucket's: those the index holds no copy of, at once

    def _index_summary(self, source: RunSource, key: tuple | None = None):
        """The shared index's ``Found`` summary of the run's newest session, or None."""
        if not self.index.size:
            return None
        try:
            key = key or self._session(source, None)[1]
        except (ProfileError, UnknownRunError):
            return None
        return self.index.summary(key[0], [path for path, _, _ in key[1]])

    def read_ahead_runs(self, runs: list[str]) -> None:
        """``read_ahead`` of the runs of these names (an unknown name is left to ``load``
        to report)."""
        listed = {source.run: source for source in self.sources()}
        self.read_ahead([listed[run] for run in dict.fromkeys(runs) if run in listed])

    def read_ahead(self, sources: list[RunSource]) -> None:
        """``prefetch``, then read the newest sessions of ``sources`` that neither cache nor
        the shared index holds, ``parallel_reads`` at a time in worker processes, into the
        caches: one process reads one file at a time, so a cold listing or comparison of
        several runs used one core of the machine's. Nothing is reported here: a session
        that fails (or any read, with one process) is read again by ``load``, which raises
        as always. The memory guard holds what every read at once needs, or they are left
        to ``load`` one after the other."""
        keyed = self._prefetched(sources)
        if fs.is_remote(self.logdir):  # a bucket's client (its event loop thread) is not safe to fork
            self._fetch_then_read([(source, key) for source, key in keyed if not self.cache.holds(key)])
            return
        if self.parallel_reads < 2:
            return
        reads = [
            (source, key)
            for source, key in keyed
            if key[0] != EMPTY_SESSION and not self.cache.holds(key) and key not in self.head_start
        ]
        if len(reads) < 2 or _files_bytes(reads) < PARALLEL_MIN_BYTES:
            return  # a worker's start and the tables' trip back cost more than they save
        try:
            needed = sum(self._memory_needed(key) for _, key in reads)
        except ProfileError:
            return  # one of them is over the limit alone: ``load`` says so
        if self.max_trace_bytes > 0 and needed > self.max_trace_bytes:
            return
        try:
            size = _files_bytes(reads)
            names = [source.run for source, _ in reads]
            # a few of the names: the line of 200 runs read at once named all 200
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
            runs = f"{len(reads)} runs at once ({shown})"
            with READS.reserve(self.logdir, needed, self.max_trace_bytes), READS_UNDER_WAY.reading(runs, size):
                for key, entry in _read_in_processes(reads, self.max_trace_bytes, self.parallel_reads):
                    made = encoded(key, entry)
                    if made is not None:  # else ``load`` reads it again
                        self.cache.put(key, made)
        except OverLimit:  # other reads hold the memory now: ``load`` waits its turn
            return

    def _fetch_then_read(self, reads: list[tuple[RunSource, tuple]]) -> None:
        """Read remote sessions here, their files fetched a batch at a time, each batch's
        requests sent at once (``fs.read_many``): one after the other, 1,000 runs' traces
        cost a round trip each. A batch holds at most ``FETCH_BATCH_BYTES`` (and a quarter
        of the memory guard's limit); a session that fails is left to ``load`` to report."""
        most = min(FETCH_BATCH_BYTES, self.max_trace_bytes // 4) if self.max_trace_bytes > 0 else FETCH_BATCH_BYTES
        for batch in byte_batches(reads, _read_bytes, most):
            paths = [path for _, keyed in batch for path, _, _ in keyed[1] if keyed[0] != EMPTY_SESSION]
            contents = {path: data for path, data in fs.read_many(paths).items() if isinstance(data, bytes)}
            with fs.fetched(contents):
                for batch_source, batch_key in batch:
                    try:
                        self._profile(batch_source, batch_key)
                    except ProfileError:
                        continue

    def _take_from_index(self, keys: list[tuple]) -> bool:
        """Keep what the shared index holds of ``keys`` in the caches; True if it held any."""
        if not keys or not self.index.size:
            return False
        found = self.index.lookup(
            [(file_format, [path for path, _, _ in signatures]) for file_format, signatures in keys]
        )
        for position, hit in found.items():
            self.cache.put(keys[position], hit.profile, hit.unreadable)
        return bool(found)

    def listed(self, source: RunSource, read: bool) -> LoadedRun[OpProfile | ProfileSummary] | None:
        """The run (newest session) as a listing shows it: what a cache holds, else the shared
        index's summary, else ``load_source`` (with ``read``). A one-shot catalog takes a
        cached run's summary instead of its tables:
        making a cached run's tables cost a command listing 36 runs 0.7 of its 0.9 s, most of
        it importing pandas and making frames no listing shows. A long-lived one keeps the
        tables in memory for the comparisons that follow."""
        session, key = self._session(source, None)  # its files stated once here (a bucket: requests)
        held = self.cache.peek_summary(key) if self.one_shot else self.cache.peek(key)
        if held is not None:
            return _settled(source, session, held, self.claims(source))
        summed = self._index_summary(source, key)  # from the manifest: no table made, no request
        if summed is not None:
            if summed.unreadable:
                raise ProfileError(*summed.unreadable)
            if summed.profile is not None:  # so where not unreadable
                return _settled(source, session, summed.profile, self.claims(source))
        profile = self._profile(source, key) if read else self.cache.peek(key)
        return None if profile is None else _settled(source, session, profile, self.claims(source))

    def peek(self, run: str, session: str | None = None) -> LoadedRun[OpProfile] | None:
        """The run if its profile is already in a cache (memory or disk), else None; never
        reads a trace. Raises ProfileError for a file already known to be unreadable."""
        source = self.source(run)
        session, key = self._session(source, session)
        profile = self.cache.peek(key)
        return None if profile is None else _settled(source, session, profile, self.claims(source))


# Below this much of the files together, ``read_ahead`` reads in this process (as ``load``).
PARALLEL_MIN_BYTES = 1 << 20
# A remote logdir's files ``read_ahead`` fetches at once, at most
FETCH_BATCH_BYTES = 256 << 20


def _read_in_processes(reads: list[tuple[RunSource, tuple]], limit: int, processes: int):
    """(key, disk cache entry) of each session read in forked processes (they start with the readers
    imported: here, once, not in each), each watched (``store.watched_fork``), small
    sessions several to a worker (``WORKER_BATCH_BYTES``); a session whose read fails, or
    whose worker stops or dies, is left out (``load`` reads it again)."""
    import_readers()
    most = worker_batch_bytes(_files_bytes(reads), processes)
    calls = [
        (position, allowance(_files_bytes(batch)), _read_keys, batch, limit)
        for position, batch in enumerate(byte_batches(reads, _read_bytes, most))
    ]
    for _, read in run_watched(calls, processes):
        if not isinstance(read, Lost):
            yield from read


# A worker reads sessions until it holds this much of their files (or it holds one): a fork,
# the pages it copies and its reaping cost a small session's read several times over (200
# runs of an 8 KB trace each: 7.3 s at one session a worker).
WORKER_BATCH_BYTES = 8 << 20


def byte_batches(
    items: list[_Item], size_of: Callable[[_Item], int], most: int, most_items: int | None = None
) -> Iterator[list[_Item]]:
    """``items`` in order, cut into batches of at most ``most`` bytes (``size_of`` each; a
    bigger item alone) and ``most_items`` items: a worker's sessions (``_read_in_processes``,
    ``index``'s pool) or a round of fetches (``_fetch_then_read``, a bucket's ``index``)."""
    batch: list[_Item] = []
    held = 0
    for item in items:
        size = size_of(item)
        if batch and (held + size > most or len(batch) == most_items):
            yield batch
            batch, held = [], 0
        batch.append(item)
        held += size
    if batch:
        yield batch


def worker_batch_bytes(total_bytes: int, processes: int) -> int:
    """How many bytes of files a worker's batch holds at most: ``WORKER_BATCH_BYTES``, and a
    quarter of a process's share, so that the processes end together."""
    return max(1, min(WORKER_BATCH_BYTES, total_bytes // (4 * processes)))


def _read_bytes(read: tuple[RunSource, tuple]) -> int:
    return _files_bytes([read])


def _files_bytes(reads: list[tuple[RunSource, tuple]]) -> int:
    return sum(size for _, key in reads for _, size, _ in key[1])


def _read_keys(batch: list[tuple[RunSource, tuple]], limit: int) -> list[tuple[tuple, bytes]]:
    """In a worker: (key, disk cache entry: ``cache.entry_bytes``) of each session of the
    batch it could read; one that fails is left to ``load``, which reads it again and says
    why."""
    read = []
    for source, key in batch:
        try:
            read.append((key, entry_bytes(key, _read_key(source, key, limit))))
        except Exception:  # noqa: BLE001 - whatever it was, ``load`` meets it again and reports it
            continue
    return read


def _read_key(source: RunSource, key: tuple, limit: int) -> OpProfile:
    """The session of ``key`` read, its text within the memory limit; the caller holds the
    memory guard (``parsed`` here, ``read_ahead``'s parent for a worker)."""
    file_format, signatures = key
    return _read_within(source, file_format, [path for path, _, _ in signatures], text_budget(file_format, limit))


def _read_within(source: RunSource, file_format: str, paths: list[str], budget: int | None) -> OpProfile:
    """Read the session's files, opening none outside the places its listing walked."""
    with fs.confined(source.places):
        return read_profile(file_format, paths, budget)


def _settled(source: RunSource, session: str, parsed: _Kept, claims: Claims) -> LoadedRun[_Kept]:
    """The run with its facts settled, and grouped by what it was configured with: the
    claimed precision and compiler where the data agrees, else the data's (an unclaimed
    bf16 run is never pooled with fp32 runs)."""
    facts = settle_facts(parsed.facts, claims)
    precision = configured("precision", claims.precision, parsed.facts.precision)
    compiler = configured("compiler", claims.compiler, parsed.facts.compiler)
    return LoadedRun(
        source=source,
        session=session,
        profile=dataclasses.replace(parsed, facts=facts),
        model=configuration_key(claims.base_model, precision, compiler),
        label=claims.label,
        repeat=claims.repeat,
        base_model=claims.base_model,
        precision=precision,
        compiler=compiler,
        model_source=claims.model_source,
    )
