"""A whole logdir read: every run, each with its model found among the others.

The views that place runs by model (the runs listing and its pairs, the Batch sweep, the
Matrix) read the logdir through ``read_logdir``, so one run has one model everywhere."""

from __future__ import annotations

import dataclasses

from tb_opcompare.analysis.model_identity import IdentityRun, identify_models
from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.discovery import RunSource
from tb_opcompare.ingest.naming import names_no_model, run_folder
from tb_opcompare.schema.dimensions import configuration_key
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.progress import Progress


def read_logdir(
    catalog: Catalog, progress: Progress | None = None
) -> tuple[list[LoadedRun], list[tuple[RunSource, ProfileError]]]:
    """Every run read (the caches keep them) with its model found across the logdir
    (``analysis.model_identity``: runs whose names hide the model are joined by their
    data), and the runs that could not be read, each with its error. ``progress``: told
    of each run read."""
    loaded_runs, failed = [], []
    sources = catalog.sources(refresh=True)
    if progress:
        progress.start(len(sources), "runs")
    catalog.read_ahead(sources)
    for source in sources:
        try:
            loaded_runs.append(catalog.load_source(source))
            read = True
        except ProfileError as error:
            failed.append((source, error))
            read = False
        if progress:
            progress.advance(source.run, ok=read)
    return with_identified_models(loaded_runs), failed


def with_identified_models(loaded_runs: list[LoadedRun]) -> list[LoadedRun]:
    """The runs, each with the model ``identify_models`` finds for it among the others."""
    identities = identify_models(
        [
            IdentityRun(
                run=loaded.source.run,
                key=loaded.base_model,
                from_sidecar=loaded.model_source == "sidecar",
                names_nothing=names_no_model(loaded.source.run),
                folder=run_folder(loaded.source.run),
                device=loaded.profile.facts.device,
                batch_size=loaded.profile.facts.batch_size,
                precision=loaded.precision,
                compiler=loaded.compiler,
                op_names=loaded.profile.op_names,
            )
            for loaded in loaded_runs
        ]
    )
    found = []
    for loaded in loaded_runs:
        identity = identities[loaded.source.run]
        found.append(
            dataclasses.replace(
                loaded,
                base_model=identity.model,
                model_source=identity.source,
                model=configuration_key(identity.model, loaded.precision, loaded.compiler),
            )
        )
    return found
