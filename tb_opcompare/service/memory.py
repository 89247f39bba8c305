"""The memory document: two runs' memory side by side (peaks, memory over time, each op's
allocations), for the tab's Memory page, its CSV and ``tb-opcompare memory``."""

from __future__ import annotations

from tb_opcompare.analysis.compare import compare_frame
from tb_opcompare.analysis.memory import allocated_bytes, memory_rows, per_step, timeline_series
from tb_opcompare.analysis.step_time import batch_sizes_differ
from tb_opcompare.schema.contract import MEMORY_COLUMNS, MemoryDocument, MemoryRun, MemorySeries
from tb_opcompare.service.records import as_records
from tb_opcompare.store.catalog import Catalog, LoadedRun
from tb_opcompare.store.comparisons import comparison


def memory_document(
    catalog: Catalog, baseline: str, target: str, baseline_session: str | None = None, target_session: str | None = None
) -> MemoryDocument:
    """Raises UnknownRunError for unknown runs or sessions, ProfileError for unreadable ones."""
    base, tgt = catalog.load(baseline, baseline_session), catalog.load(target, target_session)
    runs = memory_run(base), memory_run(tgt)
    series = [
        MemorySeries(
            side=side,
            device=device,
            peak_bytes=int(bytes_in_use.max()),
            time_us=times.tolist(),
            bytes_in_use=bytes_in_use.tolist(),
        )
        for side, loaded in (("baseline", base), ("target", tgt))
        for device, times, bytes_in_use in timeline_series(loaded.profile.memory_table.frame())
    ]
    rows = memory_rows(compare_frame(comparison(base.profile, tgt.profile).rows))
    return MemoryDocument(
        baseline=runs[0],
        target=runs[1],
        series=series,
        columns=list(MEMORY_COLUMNS),
        rows=as_records(rows),
        notes=memory_notes((base, tgt), runs),
    )


def memory_run(loaded: LoadedRun) -> MemoryRun:
    facts = loaded.profile.facts
    allocated = allocated_bytes(loaded.profile.op_table.frame())
    return MemoryRun(
        run=loaded.source.run,
        framework=facts.framework,
        format=facts.format,
        recorded=bool(facts.peak_memory_bytes or facts.memory_events or allocated is not None),
        peak_memory_bytes=dict(facts.peak_memory_bytes),
        steps=facts.steps,
        memory_events=facts.memory_events,
        memory_events_per_step=per_step(facts.memory_events, facts.steps),
        allocated_bytes=allocated,
        allocated_bytes_per_step=per_step(allocated, facts.steps),
    )


def memory_notes(loaded: tuple[LoadedRun, LoadedRun], runs: tuple[MemoryRun, MemoryRun]) -> list[str]:
    """What the user should know before reading the figures: a run without memory (and how
    to record it), a run whose records lack memory in use, what TensorFlow leaves out, and
    runs whose memory is on different devices."""
    notes = []
    for run, record in zip(loaded, runs):
        facts, name = run.profile.facts, record.run
        if run is loaded[1] and (run.source.run, run.session) == (loaded[0].source.run, loaded[0].session):
            break  # one capture on both sides: said once
        if not record.recorded:
            if facts.framework == "PyTorch":
                notes.append(
                    f"{name} records no memory: profile it with torch.profiler.profile(profile_memory=True) "
                    "(tb_opcompare.recording.torch_profile turns it on by default)."
                )
            elif facts.format == "xplane":
                notes.append(f"{name} records no memory: its xplane holds no MemoryAllocation events.")
            else:
                notes.append(f"{name} records no memory: its format ({facts.format}) carries none.")
            continue
        if facts.framework == "PyTorch" and not facts.peak_memory_bytes:
            notes.append(
                f'{name}\'s memory records carry no "Total Allocated" (PyTorch 1.8 wrote none): it has each '
                "op's allocations, but no memory in use over time and no peak."
            )
        if facts.format == "xplane":
            notes.append(
                f"{name}: TensorFlow traces only some allocations (on the CPU none below about 256 KiB in "
                "this project's recordings), so small tensors are missing from its bytes per op and its "
                "memory over time; its frees name no op, so its net bytes are unknown."
            )
        if not facts.steps:
            notes.append(f"{name} does not know its profiled steps: no per-step figures for it.")
    differ = batch_sizes_differ(*(run.profile.facts.batch_size for run in loaded))
    if differ:
        notes.append(f"{differ}: activations grow with the batch, so memory compares different amounts of work.")
    peaks = [set(record.peak_memory_bytes) for record in runs]
    if all(peaks) and peaks[0] != peaks[1]:
        notes.append(
            f"The runs hold memory on different devices (baseline: {', '.join(runs[0].peak_memory_bytes)}; "
            f"target: {', '.join(runs[1].peak_memory_bytes)}): peaks compare device by device, and memory "
            "one run holds on another device shows on its own plot."
        )
    return notes
