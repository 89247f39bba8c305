"""The runs document: every run's facts, the automatic pairs, what could not be read.

``runs_document`` -> ``{"runs", "pairs", "errors", "complete", "suggested", "notices", "version"}``
"""

from __future__ import annotations

from tb_opcompare import __version__
from tb_opcompare.analysis.numerics import finite_or_none
from tb_opcompare.analysis.pairing import RunForPairing, notices, pair_runs, suggest_pair, variant_pairs
from tb_opcompare.analysis.step_time import StepLatency, step_latency
from tb_opcompare.errors import ProfileError, escape_undecodable
from tb_opcompare.ingest.discovery import RunSource
from tb_opcompare.ingest.facts import claimed_facts
from tb_opcompare.ingest.formats import SNIFF_BYTES
from tb_opcompare.ingest.sidecar import Claims
from tb_opcompare.schema.contract import (
    READ_FROM_PROFILE,
    ReadsDocument,
    ReadUnderWay,
    RunError,
    RunRecord,
    RunsDocument,
    WorkerRecord,
)
from tb_opcompare.schema.events import ProfileFacts
from tb_opcompare.service.logdir import with_identified_models
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.progress import READS_UNDER_WAY
from tb_opcompare.store.run_groups import repeat_groups
from tb_opcompare.text import format_reads, natural_key

MISSING_DIMENSION = "(none)"


def run_dimensions(loaded: LoadedRun) -> dict[str, str]:
    """A read run's model and dimensions, in the words points and notes name them by."""
    facts = loaded.profile.facts
    values = {
        "model": loaded.base_model or loaded.model,
        "device": facts.device,
        "batch_size": facts.batch_size,
        "precision": loaded.precision,
        "compiler": loaded.compiler,
    }
    return {name: MISSING_DIMENSION if value is None else str(value) for name, value in values.items()}


def mixed_dimensions(runs: list[LoadedRun], leaving_out: str | None = None) -> str | None:
    """Which of the runs' model and dimensions differ among them, as text (``device: CPU,
    GPU; batch size: 16, 64``); None where they agree. ``leaving_out``: a dimension the
    runs are meant to differ in."""
    found: dict[str, set[str]] = {}
    for run in runs:
        for dimension, value in run_dimensions(run).items():
            found.setdefault(dimension, set()).add(value)
    mixed = [
        f"{dimension.replace('_', ' ')}: {', '.join(sorted(values, key=natural_key))}"
        for dimension, values in found.items()
        if len(values) > 1 and dimension != leaving_out
    ]
    return "; ".join(mixed) or None


def run_record(loaded: LoadedRun, steps: StepLatency | None = None) -> RunRecord:
    """``steps``: the steady step wall time its record shows, where the caller has it (a
    run group's, pooled); else the run's own."""
    return _record(loaded.source, loaded.session, loaded.profile.facts, loaded, loaded=True, steps=steps)


def unread_run_record(source: RunSource, claims: Claims) -> RunRecord:
    """What is known of a run before its trace is read: its sidecar, then its name
    (``claims``, the store's ``Catalog.claims``)."""
    return _record(source, source.newest_session, claimed_facts(source.format, claims), claims, loaded=False)


def _record(
    source: RunSource,
    session: str,
    facts: ProfileFacts,
    configured_by: LoadedRun | Claims,
    loaded: bool,
    steps: StepLatency | None = None,
) -> RunRecord:
    """``configured_by``: what names the run's model, label and repeat (a read run, else
    its claims)."""
    steps = step_latency([facts.step_times_us]) if steps is None else steps
    model, label, repeat = configured_by.model, configured_by.label, configured_by.repeat
    model_source = configured_by.model_source
    return RunRecord(
        run=source.run,
        repeat_runs=None,
        format=facts.format,
        device=facts.device,
        device_name=facts.device_name,
        model_source=model_source,
        batch_size=facts.batch_size,
        batch_size_source=facts.batch_size_source,
        batch_size_agreement=facts.batch_size_agreement,
        steps=facts.steps,
        steps_source=facts.steps_source,
        step_time_us=finite_or_none(steps.median_us),
        model=model,
        label=label,
        repeat=repeat,
        sessions=list(source.sessions)[-MAX_LISTED_SESSIONS:],
        session=session,
        framework=facts.framework,
        warnings=list(facts.warnings) + _unlisted_sessions(source),
        peak_memory_bytes=dict(facts.peak_memory_bytes),
        precision=facts.precision,
        precision_source=facts.precision_source,
        compiler=facts.compiler,
        compiler_source=facts.compiler_source,
        loaded=loaded,
        read_from=(facts.read_from or READ_FROM_PROFILE) if loaded else None,
        workers=[
            WorkerRecord(
                **{
                    **worker,
                    "file": escape_undecodable(worker["file"]),  # a rank's trace named with a byte not UTF-8
                    "step_time_us": finite_or_none(worker["step_time_us"]),
                }
            )
            for worker in facts.workers
        ],
    )


# A run's captures a listing names (its newest): a run of 10,000 captures sent 10,000 names
# with each listing, each into the tab's session picker. Older ones stay readable by name.
MAX_LISTED_SESSIONS = 500


def _unlisted_sessions(source: RunSource) -> list[str]:
    older = len(source.sessions) - MAX_LISTED_SESSIONS
    if older <= 0:
        return []
    return [
        f"{len(source.sessions):,} captures: the newest {MAX_LISTED_SESSIONS:,} are listed; the {older:,} older "
        f"ones are read only when named (--baseline-session / --target-session), from "
        f"{next(iter(source.sessions))!r} on"
    ]


SKIPPED_NAMED = 5  # skipped files a notice names; it counts the rest


def _skipped_notice(catalog: Catalog) -> list[str]:
    """What the listing passed over, said: a JSON file that is no trace by its first bytes
    (before, such a file was not listed and nothing said why), and apart from those, a
    JSON file whose first bytes could not be read, with why."""
    notices = []
    no_marker = [path for path, unreadable in catalog.skipped if unreadable is None]
    if no_marker:
        notices.append(
            f'{_count_files(no_marker)} not read: no trace\'s marker ("traceEvents", "op_stats" ...) in the first '
            f"{SNIFF_BYTES // 1024} KB: {_named_files(no_marker)}. A trace the profiler wrote has it there; a file "
            "of other JSON needs nothing."
        )
    unreadable = [f"{path} ({why})" for path, why in catalog.skipped if why is not None]
    if unreadable:
        notices.append(
            f"{_count_files(unreadable)} could not be read to tell whether "
            f"{'they are traces' if len(unreadable) > 1 else 'it is a trace'}: {_named_files(unreadable)}."
        )
    return notices


def _count_files(files: list[str]) -> str:
    return f"{len(files):,} JSON file{'s' * (len(files) > 1)}"


def _named_files(files: list[str]) -> str:
    named = ", ".join(files[:SKIPPED_NAMED])
    return named + (f", and {len(files) - SKIPPED_NAMED:,} more" if len(files) > SKIPPED_NAMED else "")


def runs_document(catalog: Catalog, load: bool = True) -> RunsDocument:
    """Every run's facts (newest session), the automatic pairs, what could not be read,
    the pair to show first (``suggested``), ``notices`` for the user (no accelerator run)
    and the plugin's ``version``.

    ``load=False`` reads no trace: runs already in the cache have their facts, the others
    what their sidecars, then names, say (``"loaded": false``).
    """
    runs, errors, for_pairing = [], [], []
    sources = catalog.sources(refresh=True)
    # the shared index's runs from its manifest; the others read on every core given (``load``)
    catalog.list_ahead(sources, read=load)
    claims = {source.run: catalog.claims(source) for source in sources}
    groups = repeat_groups(claims)
    read: dict[str, LoadedRun | None] = {}
    for source in sources:
        try:
            read[source.run] = catalog.listed(source, read=load)
        except ProfileError as error:
            errors.append(RunError(run=source.run, path=error.path, message=error.reason))
    # each read run's model found among the others (one model per run in every view)
    identified = {loaded.source.run: loaded for loaded in with_identified_models([run for run in read.values() if run])}
    for source in sources:
        if source.run not in read:
            continue
        loaded = identified.get(source.run)
        record = run_record(loaded) if loaded else unread_run_record(source, claims[source.run])
        record.repeat_runs = len(groups.get(source.run, [source.run]))
        runs.append(record)
        configured_by = loaded or claims[source.run]  # a read run by its data, else by its claims
        for_pairing.append(
            RunForPairing(
                run=record.run,
                model=record.model,
                device=record.device,
                batch_size=record.batch_size,
                repeat=record.repeat,
                op_names=loaded.profile.op_names if loaded else frozenset(),
                base_model=configured_by.base_model,
                precision=configured_by.precision,
                compiler=configured_by.compiler,
                model_source=record.model_source,
                device_name=record.device_name,
            )
        )
    pairs = pair_runs(for_pairing)
    variants = variant_pairs(for_pairing)
    return RunsDocument(
        runs=runs,
        pairs=pairs,
        variant_pairs=variants,
        errors=errors,
        complete=all(run.loaded for run in runs),
        suggested=suggest_pair(for_pairing, pairs, variants),
        notices=notices(for_pairing) + _skipped_notice(catalog) + catalog.index.warnings,
        version=__version__,
    )


def reads_document() -> ReadsDocument:
    """This process's cold reads that have taken a while (``store.progress``)."""
    reads = READS_UNDER_WAY.snapshot()
    return ReadsDocument(reads=[ReadUnderWay(**read) for read in reads], text=format_reads(reads))
