"""``tb-opcompare export LOGDIR --parquet DIR``: every session of a logdir as the tables of
docs/index_schema.md (the shared index's tables, with each run's facts settled and its
model), for DuckDB, pandas or a warehouse to query without this tool."""

from __future__ import annotations

import dataclasses

from tb_opcompare.errors import ProfileError, escape_undecodable
from tb_opcompare.schema.index_tables import RUNS, parquet_bytes, session_columns
from tb_opcompare.service.logdir import read_logdir
from tb_opcompare.store.cache import profile_columns
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.progress import Progress


@dataclasses.dataclass
class Dataset:
    tables: dict[str, bytes]  # table -> one Parquet file of every session's rows
    sessions: int
    errors: list[tuple[str, str]]  # (path, reason) of the sessions that could not be read


def logdir_dataset(catalog: Catalog, progress: Progress | None = None) -> Dataset:
    # each run's model is found among the newest sessions (``progress``: told of each run read)
    newest, failed = read_logdir(catalog, progress)
    errors = [(error.path, error.reason) for _, error in failed]
    model_of = {loaded.source.run: loaded for loaded in newest}
    loaded_sessions: list[LoadedRun] = []
    for loaded in newest:
        for session in loaded.source.sessions:
            if session in loaded.source.worker_sessions:
                continue  # a rank of a job's capture: the job's session holds its rows
            if session == loaded.session:
                loaded_sessions.append(loaded)
                continue
            try:
                loaded_sessions.append(catalog.load_source(loaded.source, session))
            except ProfileError as error:
                errors.append((error.path, error.reason))
    merged: dict[str, dict[str, list]] = {}
    for loaded in loaded_sessions:
        grouped = model_of.get(loaded.source.run, loaded)
        export = {
            "model": grouped.model,
            "base_model": grouped.base_model or grouped.model,
            "model_source": grouped.model_source,
            "label": loaded.label,
            "repeat": loaded.repeat,
        }
        # as the runs are named: Parquet text is UTF-8, a file name need not be
        files = [escape_undecodable(catalog.index.relative(path)) for path in loaded.source.sessions[loaded.session]]
        for table, columns in session_columns(
            profile_columns(loaded.profile), loaded.source.run, loaded.session, files, **export
        ).items():
            into = merged.setdefault(table, {name: [] for name in columns})
            for name, values in columns.items():
                into[name].extend(values)
    tables = {table: parquet_bytes(table, columns, export=table == RUNS) for table, columns in merged.items()}
    return Dataset(tables, len(loaded_sessions), errors)
