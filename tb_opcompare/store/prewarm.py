"""``tb-opcompare index``: read every session of a logdir ahead of time, on this machine's
cores or on a Dask cluster, and keep the parsed tables in the logdir's shared index
(``store.shared_index``) and this machine's cache, so TensorBoard and the CLI, here or on
any machine that reads the logdir, serve them without reading a profile.

One task a session (the newest and the older captures of every run; on this machine's
cores small sessions are read several to a worker). On a cluster a
distributed job's capture is a task a rank, each reading its rank's trace where it runs,
and one task that pools them into the job's profile (the same profile one process reading
every rank makes).
Each task reads its session where it runs, writes its part of the index, and returns the
part's manifest entry; the entries are published in one manifest write at the end. A task
that fails is reported and never costs the others theirs.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NoReturn

from tb_opcompare.errors import NotReadableNow, OverLimit, ProfileError, UsageError
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import RunSource
from tb_opcompare.ingest.formats import EMPTY_SESSION, PYTORCH, combine_job_ranks, import_readers, read_job_rank
from tb_opcompare.ingest.sidecar import SIDECAR
from tb_opcompare.store.catalog import FETCH_BATCH_BYTES, Catalog, byte_batches, worker_batch_bytes
from tb_opcompare.store.memory_guard import memory_guard, text_budget
from tb_opcompare.store.progress import Progress
from tb_opcompare.store.settings import ReadSettings
from tb_opcompare.store.shared_index import Found
from tb_opcompare.store.watched_fork import Lost, allowance, run_watched

if TYPE_CHECKING:  # annotations only: Dask is optional, imported where a cluster is asked for
    from distributed import Client

    from tb_opcompare.schema.optable import OpProfile


@dataclasses.dataclass
class IndexReport:
    read: int = 0  # sessions read now
    cached: int = 0  # sessions the shared index (or, with shared=False, the local cache) already held
    errors: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (path, reason): unreadable
    write_error: str | None = None  # why the shared index could not be written (the local cache has them)
    workers: set[str] = dataclasses.field(default_factory=set)  # where the tasks ran (Dask workers' addresses)
    seconds: float = 0.0


@dataclasses.dataclass
class _Done:
    run: str
    session: str
    entry: dict | None = None  # the session's manifest entry, where its part was written
    unreadable: tuple[str, str] | None = None
    write_error: str | None = None
    worker: str | None = None


def _index_one(logdir: str, settings: ReadSettings, source: RunSource, session: str, shared: bool) -> _Done:
    """Read one session (the source found by the parent: a worker never walks the logdir
    again) and write its part of the shared index; ``settings``: the parent's cache
    folder (None on a cluster) and bound, and its memory guard."""
    catalog = Catalog(
        logdir,
        cache_dir=settings.cache_dir,
        max_trace_bytes=settings.max_trace_bytes,
        cache_max_bytes=settings.cache_max_bytes,
    )
    before = _fingerprints(source.sessions[session])
    try:
        found = Found(catalog.parsed(source, session)[1])
    except ProfileError as error:
        found = _failed(error)
    return _publish(catalog, source, session, found, shared, before)


def _fingerprints(paths: list[str]) -> list[dict] | None:
    """The files' fingerprints before a read: the index entry is written only if they are
    the same after it (else the tables could be an older version's)."""
    try:
        return [fs.fingerprint(path) for path in paths]
    except OSError:
        return None


def _read_rank(max_trace_bytes: int, source: RunSource, path: str) -> tuple:
    """One rank of a job's capture, read where the task runs: (its fingerprint before the
    read, a ``RankRead`` or the ProfileError that stopped it); the job's task decides."""
    before = _fingerprints([path])
    try:
        with fs.confined(source.places):
            memory_guard(PYTORCH, [(path, fs.signature(path)[0])], max_trace_bytes)
            return before, read_job_rank(path, text_budget(PYTORCH, max_trace_bytes))
    except OSError as error:
        return before, NotReadableNow(path, f"cannot read the file: {error.strerror or error}")
    except ProfileError as error:
        return before, error


def _index_job(logdir: str, max_trace_bytes: int, source: RunSource, session: str, shared: bool, *ranks) -> _Done:
    """A job's capture from its ranks' reads (each a task of its own, on any worker): the
    same profile as one process reading every rank, then its part of the index."""
    catalog = Catalog(logdir, max_trace_bytes=max_trace_bytes)
    fingerprints = [fingerprint for fingerprint, _ in ranks]
    before = None if None in fingerprints else [rank_file for rank in fingerprints for rank_file in rank]
    reads = [read for _, read in ranks]
    error = next((read for read in reads if isinstance(read, ProfileError)), None)
    if error is not None:
        return _publish(catalog, source, session, _failed(error), shared, before)
    # combining adds every rank's events to the first rank's: a copy, so that a retried
    # task (Dask keeps the ranks' results) never counts them twice
    reads[0] = copy.deepcopy(reads[0])
    try:
        found = Found(combine_job_ranks(source.sessions[session], reads))
    except ProfileError as failure:
        found = _failed(failure)
    return _publish(catalog, source, session, found, shared, before)


def _failed(error: ProfileError) -> Found[OpProfile]:
    """An unreadable session as the index keeps it; None for a limit of this machine or a
    passing fault (OverLimit, NotReadableNow), which says nothing of the file."""
    passing = isinstance(error, (OverLimit, NotReadableNow))
    return Found(None, (error.path, error.reason), passing=passing)


def _publish(
    catalog: Catalog, source: RunSource, session: str, found: Found, shared: bool, before: list[dict] | None
) -> _Done:
    done = _Done(source.run, session, unreadable=found.unreadable, worker=_worker_address())
    # an empty session (a profiler stopped before writing) has nothing to index yet
    if shared and not found.passing and before is not None and source.format != EMPTY_SESSION:
        try:
            with fs.confined(source.places):  # fingerprints open only what the listing found
                done.entry = catalog.index.make_entry(
                    source.run, session, source.format, source.sessions[session], found, before, source.run_dir
                )
        except OSError as error:
            done.write_error = f"cannot write {catalog.index.root}: {error.strerror or error}"
    return done


def _worker_address() -> str | None:
    """The Dask worker this task runs on, None elsewhere. A task on a worker finds Dask
    imported; a forked worker here must not import it to learn it is none (0.5 s each)."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return None


def index_logdir(
    catalog: Catalog,
    jobs: int,
    say: Callable[[str], None] = print,
    shared: bool = True,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> IndexReport:
    """Index every session of the catalog's logdir. ``shared``: write the logdir's shared
    index (else fill this machine's cache only, writing nothing into the logdir).
    ``scheduler``: a Dask scheduler's address, or ``local:N`` for a cluster of N worker
    processes here; None: a pool of ``jobs`` processes here. ``progress``: told of each
    session read (None: a line each, to ``say``)."""
    check_scheduler(scheduler, shared)
    progress = progress or Progress(say)
    if scheduler and not fs.is_remote(catalog.logdir) and not os.path.isabs(catalog.logdir):
        # a cluster's workers run in directories of their own, where a relative logdir names
        # nothing (or another logdir): each of its sessions failed there
        catalog = Catalog(
            os.path.abspath(catalog.logdir),
            cache_dir=catalog.cache.cache_dir,
            max_trace_bytes=catalog.max_trace_bytes,
            cache_max_bytes=catalog.cache.disk_bytes,
        )
    started = time.monotonic()
    report = IndexReport()
    todo = _sessions_to_read(catalog, shared, report)
    entries: list[dict] = []
    if todo:
        # a cluster's workers need not see this machine's cache folder: they write the index only
        settings = ReadSettings(
            cache_dir=None if scheduler else catalog.cache.cache_dir,
            max_trace_bytes=catalog.max_trace_bytes,
            cache_max_bytes=catalog.cache.disk_bytes,
        )
        tasks = [(catalog.logdir, settings, source, session, shared) for source, session in todo]
        runner = _on_dask(scheduler, tasks, say) if scheduler else _on_pool(jobs, tasks, say)
        entries = _collect(runner, len(todo), report, progress)
    if shared:
        _publish_manifest(catalog, entries, report, say)
    report.seconds = time.monotonic() - started
    return report


def _publish_manifest(catalog: Catalog, entries: list[dict], report: IndexReport, say: Callable[[str], None]) -> None:
    """The new entries published, and the entries of files that are gone pruned (with
    their parts): an index that never forgets grows with every run deleted."""
    listed = {path for source in catalog.sources() for paths in source.sessions.values() for path in paths}
    try:
        # the JSON files that are no profile, remembered: a listing then looks into none of them
        pruned = catalog.index.write_manifest(entries, listed, catalog.not_traces)
    except OSError as error:
        report.write_error = report.write_error or f"cannot write {catalog.index.root}: {error.strerror or error}"
        return
    if pruned:
        say(f"pruned {pruned} entries of the shared index whose files are gone, and their parts")


def check_scheduler(scheduler: str | None, shared: bool = True) -> None:
    """Refuse a ``--scheduler`` that cannot name a Dask cluster before anything is read:
    Dask's client met a missing port, an empty address, a TLS address without TLS
    configuration or a malformed IPv6 address with a traceback (a ValueError or a
    TypeError from deep in its comm layer), after the logdir had been listed."""
    if scheduler is None:
        return
    if not shared:
        raise UsageError("--local-only fills this machine's cache: a cluster's workers cannot; drop one", "scheduler")
    if scheduler.startswith("local:"):
        count = scheduler.split(":", 1)[1]
        if not (count.isascii() and count.isdigit() and int(count) > 0):
            raise UsageError(f"--scheduler local:N takes a number of worker processes, not {count!r}", "scheduler")
        return
    if not scheduler.strip():
        _refuse_scheduler(scheduler, "an empty address")
    scheme, separator, rest = scheduler.partition("://")
    if not separator:  # Dask's own default scheme
        scheme, rest = "tcp", scheduler
    if scheme not in ("tcp", "tls"):
        _refuse_scheduler(scheduler, f"{scheme!r} is not a scheme this tool connects with")
    _check_port(scheduler, _host_port(scheduler, rest))
    if scheme == "tls" and not _tls_configured():
        _refuse_scheduler(
            scheduler,
            "tls:// needs Dask's TLS configuration (distributed.comm.tls.ca-file, .client.cert and .client.key, "
            "in Dask's config or DASK_DISTRIBUTED__COMM__TLS__* variables)",
        )


_HOST = re.compile(r"[A-Za-z0-9._-]+")


def _host_port(scheduler: str, rest: str) -> str:
    """The port of ``HOST:PORT`` or ``[IPV6]:PORT``, once the host is checked."""
    if rest.startswith("["):
        inside, bracket, after = rest[1:].partition("]")
        if not bracket:
            _refuse_scheduler(scheduler, "an IPv6 address without its closing ']'")
        try:
            ipaddress.IPv6Address(inside)
        except ValueError:
            _refuse_scheduler(scheduler, f"{inside!r} is not an IPv6 address")
        if not after.startswith(":"):
            _refuse_scheduler(scheduler, "no port (Dask's default is 8786)")
        return after[1:]
    host, colon, port = rest.rpartition(":")
    if not colon:
        _refuse_scheduler(scheduler, "no port (Dask's default is 8786)")
    if ":" in host:
        _refuse_scheduler(scheduler, "an IPv6 address goes in brackets: tcp://[::1]:8786")
    if not _HOST.fullmatch(host):
        _refuse_scheduler(scheduler, f"{host!r} is not a host name or address")
    return port


def _check_port(scheduler: str, port: str) -> None:
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        _refuse_scheduler(scheduler, f"the port {port!r} is not a number from 1 to 65535")


def _refuse_scheduler(scheduler: str, why: str) -> NoReturn:
    raise UsageError(
        f"--scheduler {scheduler!r}: {why}; a Dask scheduler's address is tcp://HOST:PORT, tls://HOST:PORT or local:N",
        "scheduler",
    )


def _tls_configured() -> bool:
    """Whether Dask's configuration gives a client TLS credentials (or a loader of them);
    True without Dask, whose absence ``_on_dask`` names."""
    try:
        import dask
        from distributed import Security
    except ImportError:
        return True
    if dask.config.get("distributed.client.security-loader", None):
        return True
    return Security().get_connection_args("client").get("ssl_context") is not None


def _sessions_to_read(catalog: Catalog, shared: bool, report: IndexReport) -> list[tuple[RunSource, str]]:
    """The sessions no index (``shared``) or cache (else) holds yet; those already held are
    counted in ``report``, and the runs that cannot be opened are its errors."""
    todo = []
    for source in catalog.sources(refresh=True):
        if source.refusal:  # a link out of the logdir, a FIFO: never opened, not even to fingerprint it
            report.errors.append((source.sessions[source.newest_session][0], source.refusal))
            continue
        for session in source.sessions:
            if session in source.worker_sessions:
                continue  # one rank of a job's capture, read when asked: the job holds its file
            if shared and catalog.index.indexed(source.format, source.sessions[session]):
                report.cached += 1
                continue
            if not shared:
                try:
                    if catalog.peek(source.run, session) is not None:
                        report.cached += 1
                        continue
                except ProfileError as error:
                    report.errors.append((error.path, error.reason))
                    continue
            todo.append((source, session))
    return todo


def _collect(runner: Iterator[_Done], total: int, report: IndexReport, progress: Progress) -> list:
    """Each finished read counted in ``report`` as it arrives; returns the index entries."""
    entries = []
    progress.start(total, "sessions")
    for done in runner:
        if done.unreadable:
            report.errors.append(done.unreadable)
        else:
            report.read += 1
        if done.entry:
            entries.append(done.entry)
        if done.write_error and not report.write_error:
            report.write_error = done.write_error
        if done.worker:
            report.workers.add(done.worker)
        progress.advance(f"{done.run} ({done.session})", ok=not done.unreadable)
    return entries


def _on_pool(jobs: int, tasks: list[tuple], say: Callable[[str], None]) -> Iterator[_Done]:
    """Sessions read in forked processes, ``jobs`` at a time, small ones several to a worker
    (``worker_batch_bytes``), each worker watched (``store.watched_fork``). A worker killed
    or stopped mid-run costs no other worker's sessions (a process pool, broken by one
    killed worker, failed them all); its own are read again one to a worker, so that only a
    session whose own worker is lost is named as failed."""
    if tasks and fs.is_remote(tasks[0][0]):
        # a bucket's client (its event loop thread) is not safe to fork: a pool forked from it
        # ended a bucket's `index` in "attached to a different loop"
        say(f"reading {len(tasks)} sessions in this process, their files fetched a batch at a time")
        yield from _fetched_in_batches(tasks)
        return
    workers = min(jobs, len(tasks))
    say(f"reading {len(tasks)} sessions with {workers} worker processes")
    if workers == 1:  # one process: no worker to start
        for task in tasks:
            yield _index_one(*task)
        return
    _import_what_workers_use(shared=tasks[0][4])
    sized = [(task, _session_bytes(task)) for task in tasks]  # a stat a file, once, not a stat a use
    most = worker_batch_bytes(sum(size for _, size in sized), workers)
    batches = list(byte_batches(sized, _size, most, INDEX_BATCH_SESSIONS))
    again: list[tuple[tuple, int]] = []
    for number, done in _watched(batches, workers):
        if not isinstance(done, Lost):
            yield from done
        elif len(batches[number]) > 1:
            again.extend(batches[number])
        else:
            yield _lost(batches[number][0][0], done.reason)
    for number, done in _watched([[task] for task in again], workers):
        yield _lost(again[number][0], done.reason) if isinstance(done, Lost) else done[0]


# A worker's batch holds at most this many sessions: the progress bar moves a batch at a
# time, and 1,000 runs of an 8 KB trace in 8 batches (the bytes' rule alone) held it still
# for 2.4 s a step; now 1.2 s. It costs a fork more every 64 sessions (50-60 ms, against
# the 2.4 s a worker takes to read and index them).
INDEX_BATCH_SESSIONS = 64


def _watched(batches: list[list[tuple[tuple, int]]], workers: int) -> Iterator[tuple[int, list[_Done] | Lost]]:
    """(number, each session's ``_Done`` or ``Lost``) of each batch of (task, its files'
    bytes), read in a forked worker."""
    calls = [
        (number, allowance(sum(size for _, size in batch)), _index_batch, [task for task, _ in batch])
        for number, batch in enumerate(batches)
    ]
    return run_watched(calls, workers)


def _size(sized: tuple[tuple, int]) -> int:
    return sized[1]


def _index_batch(batch: list[tuple]) -> list[_Done]:
    """In a worker: ``_index_one`` of each task of the batch, in order."""
    return [_index_one(*task) for task in batch]


def _import_what_workers_use(shared: bool) -> None:
    """Import here, once, what each forked worker would otherwise import for itself: the
    readers, and pyarrow to write the index with pandas, which pyarrow imports to convert
    lists. A worker is forked a session, so each paid about 1 s of imports: `index` of the
    demo's 38 small sessions took 28.9 s with two workers against 4.7 s in one process."""
    import_readers()
    if shared:
        import pyarrow.parquet  # noqa: F401

        # isort: split
        # pandas after pyarrow, as a worker met them: pandas then loads its Arrow types
        import pandas  # noqa: F401


def _address(client: Client, scheduler: str) -> str:
    """The scheduler's address as the client reached it (``scheduler`` before it has)."""
    connected = client.scheduler
    return str(connected.address) if connected is not None else scheduler


def _fetched_in_batches(tasks: list[tuple]) -> Iterator[_Done]:
    """``_index_one`` of each task here, the files of a batch of sessions (and their runs'
    sidecars) fetched at once, each batch's requests sent together (``fs.read_many``): one
    after the other, each file of 1,000 runs cost round trips of its own."""
    for batch in byte_batches(tasks, _session_bytes, FETCH_BATCH_BYTES):
        paths = [path for _, _, source, session, _ in batch for path in _files_of(source, session)]
        contents = {path: data for path, data in fs.read_many(paths).items() if isinstance(data, bytes)}
        with fs.fetched(contents):
            done = [_index_one(*task) for task in batch]
        yield from done


def _files_of(source: RunSource, session: str) -> list[str]:
    """The session's files, and its run's sidecar where the listing found one."""
    if source.format == EMPTY_SESSION:
        return []
    return [*source.sessions[session], *([fs.join(source.run_dir, SIDECAR)] if source.sidecar_listed else [])]


def _session_bytes(task: tuple) -> int:
    """The size of a task's files, from the listing (what its worker's deadline allows for)."""
    _, _, source, session, _ = task
    try:
        with fs.confined(source.places):
            return sum(fs.signature(path)[0] for path in source.sessions[session])
    except OSError:  # its worker says what is wrong with it
        return 0


def _on_dask(scheduler: str, tasks: list[tuple], say: Callable[[str], None]) -> Iterator[_Done]:
    """One Dask task a session, on the cluster at ``scheduler`` (``local:N``: a
    ``LocalCluster`` of N worker processes started here for the run). A worker lost
    mid-task has its tasks run again elsewhere (Dask's own rescheduling), and a finished
    task whose result was lost with its worker is submitted again; a task that raises is
    tried again twice, then reported."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ProfileError(scheduler, "indexing on a cluster needs Dask: pip install 'tb-opcompare[dask]'") from None
    cluster = None
    if scheduler.startswith("local:"):
        cluster = LocalCluster(
            n_workers=int(scheduler.split(":", 1)[1]), threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
    else:
        try:
            import dask

            client = Client(scheduler, timeout=dask.config.get("distributed.comm.timeouts.connect"))
        except (OSError, TimeoutError) as error:
            raise ProfileError(scheduler, f"cannot reach the Dask scheduler: {error}") from None
    try:
        say(
            f"reading {len(tasks)} sessions on the Dask cluster at {_address(client, scheduler)} "
            f"({len(client.scheduler_info()['workers'])} workers)"
        )
        yield from _gathered(client, tasks, as_completed)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _gathered(client, tasks: list[tuple], as_completed) -> Iterator[_Done]:
    """Each task's result as it ends; while none is ready, the cluster is watched: with no
    worker left for ``WORKERLESS_SECONDS`` the tasks still waiting are named as failed
    (the scheduler waits for a worker for ever, and so did ``index``)."""
    futures = {_submit_index_task(client, number, task, 0): (number, task, 0) for number, task in enumerate(tasks)}
    finished = as_completed(futures)
    watch = _WorkerWatch(client)
    while not finished.is_empty():
        if not finished.has_ready():
            time.sleep(_WATCH_SECONDS)
            if watch.too_long():
                client.cancel(list(futures))
                for _, task, _ in futures.values():
                    yield _lost(task, _WORKERLESS_REASON.format(seconds=WORKERLESS_SECONDS))
                return
            continue
        future = next(finished)
        number, task, tries = futures.pop(future)
        if future.status != "error" and tries < _LOST_RESULT_TRIES and not _settled_result(client, future):
            again = _submit_index_task(client, number, task, tries + 1)
            futures[again] = (number, task, tries + 1)
            finished.add(again)
            continue
        yield _result(client, future, task)


# How long a cluster may have no worker while tasks wait, before they are named as failed (a
# worker restarted by its nanny is back within seconds), and how often it is looked at.
WORKERLESS_SECONDS = 60.0
_WATCH_SECONDS = 0.5
_WORKERLESS = object()  # ``_waited``'s answer where no worker was left to give one
_WORKERLESS_REASON = "no Dask worker was left on the cluster for {seconds:g} s"


class _WorkerWatch:
    """Since when the cluster has had no worker (asked of its scheduler)."""

    def __init__(self, client):
        self.client = client
        self.since: float | None = None

    def too_long(self) -> bool:
        if self.client.scheduler_info()["workers"]:
            self.since = None
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since > WORKERLESS_SECONDS


def _waited(client, future):
    """``future.result()`` (its task's error raised), or ``_WORKERLESS`` where the cluster
    had no worker for ``WORKERLESS_SECONDS`` meanwhile: a result lost with its worker
    waits for another worker to make it again, and one that never comes hung ``index``."""
    watch = _WorkerWatch(client)
    while True:
        try:
            return future.result(timeout=_WATCH_SECONDS)
        except TimeoutError:
            if future.status == "error":  # the task's own TimeoutError
                raise
            if watch.too_long():
                return _WORKERLESS


# A task's result lives on the worker that ran it: when that worker dies between the task's
# end and the client's gather, Dask reschedules it, and distributed 2026.x's client can
# then fail the gather itself ("bound to a different event loop"). Such a task is submitted
# again, under a new key, rather than reported as an unreadable session.
_LOST_RESULT_TRIES = 2


def _settled_result(client, future) -> bool:
    """True when the future's answer (its result, or the error its task raised) can be had."""
    try:
        return _waited(client, future) is not _WORKERLESS
    except Exception:  # which failures are the task's own, its status says
        return future.status == "error"


def _submit_index_task(client, number: int, task: tuple, tries: int):
    """One session's index task on the cluster (a job's capture: a task a rank, then the
    job's); ``tries`` > 0 names a resubmission, so its keys are new."""
    logdir, settings, source, session, shared = task
    limit = settings.max_trace_bytes
    suffix = f"-again-{tries}" if tries else ""
    if session in source.worker_sessions.values() and _job_fits(source, session, limit):
        ranks = [
            client.submit(
                _read_rank, limit, source, path, key=f"opcompare-rank-{number}-{rank}{suffix}", pure=False, retries=2
            )
            for rank, path in enumerate(source.sessions[session])
        ]
        return client.submit(
            _index_job,
            logdir,
            limit,
            source,
            session,
            shared,
            *ranks,
            key=f"opcompare-index-{number}{suffix}",
            pure=False,
            retries=2,
        )
    return client.submit(_index_one, *task, key=f"opcompare-index-{number}{suffix}", pure=False, retries=2)


def _job_fits(source: RunSource, session: str, limit: int) -> bool:
    """Whether the memory guard lets one process hold every rank of a job's capture, as the
    job's task does while it combines them. Where not, the job is no rank tasks: its task
    is ``_index_one``'s, which reports the guard's refusal as one machine's index does
    (each rank alone would pass the guard, and the worker combining them run out)."""
    try:
        with fs.confined(source.places):
            files = [(path, fs.signature(path)[0]) for path in source.sessions[session]]
        memory_guard(source.format, files, limit)
    except (OSError, ProfileError):  # ``_index_one`` reports what stops it
        return False
    return True


def _result(client, future, task: tuple) -> _Done:
    """A task's result, or its failure named (a crashed worker, an error no reader expected,
    no worker left to make it)."""
    try:
        done = _waited(client, future)
    except Exception as error:
        return _lost(task, f"{type(error).__name__}: {error}")
    return _lost(task, _WORKERLESS_REASON.format(seconds=WORKERLESS_SECONDS)) if done is _WORKERLESS else done


def _lost(task: tuple, reason: str) -> _Done:
    """The session of a task that gave no result, named as failed, and why."""
    _, _, source, session, _ = task
    return _Done(source.run, session, unreadable=(source.sessions[session][0], f"indexing failed: {reason}"))
