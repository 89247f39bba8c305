"""``tb-opcompare index``: read every run of a logdir into the on-disk cache with a pool of
worker processes, so TensorBoard (or the CLI) later serves them without reading a trace."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.discovery import RunSource
from tb_opcompare.store.catalog import Catalog


@dataclasses.dataclass
class IndexReport:
    read: int = 0
    cached: int = 0
    errors: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def _read_one(logdir: str, cache_dir: str | None, max_trace_bytes: int, source: RunSource, session: str):
    # the source found by the parent: a worker never walks the logdir again
    catalog = Catalog(logdir, cache_dir=cache_dir, max_trace_bytes=max_trace_bytes)
    try:
        catalog.load_source(source, session)
    except ProfileError as error:
        return source.run, session, (error.path, error.reason)
    return source.run, session, None


def index_logdir(catalog: Catalog, jobs: int, say: Callable[[str], None] = print) -> IndexReport:
    started = time.monotonic()
    report = IndexReport()
    todo = []
    for source in catalog.sources(refresh=True):
        for session in source.sessions:
            if session in source.worker_sessions:
                continue  # one rank of a job's capture, read when asked: the job holds its file
            try:
                known = catalog.peek(source.run, session)
            except ProfileError as error:
                report.errors.append((error.path, error.reason))
                continue
            if known is not None:
                report.cached += 1
            else:
                todo.append((source, session))
    if todo:
        say(f"reading {len(todo)} sessions with {min(jobs, len(todo))} worker processes")
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
            futures = [pool.submit(_read_one, catalog.logdir, catalog.cache.cache_dir, catalog.max_trace_bytes,
                                   source, session) for source, session in todo]
            for done, future in enumerate(as_completed(futures), start=1):
                run, session, error = future.result()
                if error:
                    report.errors.append(error)
                else:
                    report.read += 1
                say(f"  [{done}/{len(todo)}] {run} ({session}): {'unreadable' if error else 'ok'}")
    report.seconds = time.monotonic() - started
    return report
