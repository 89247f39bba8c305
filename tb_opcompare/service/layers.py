"""The layers document: two runs' application, framework, runtime and device time side by
side, and the application's and runtime's rows."""

from __future__ import annotations

from tb_opcompare.analysis.headline import headline_figure
from tb_opcompare.analysis.layers import APPLICATION, RUNTIME, WALL, compare_layers
from tb_opcompare.analysis.step_time import batch_sizes_differ
from tb_opcompare.schema.contract import LayerRow, LayersDocument, LayerTotal
from tb_opcompare.service.records import as_structs
from tb_opcompare.store.catalog import Catalog, LoadedRun


def layers_document(
    catalog: Catalog, baseline: str, target: str, baseline_session: str | None = None, target_session: str | None = None
) -> LayersDocument:
    """Raises UnknownRunError for unknown runs/sessions, ProfileError for unreadable ones."""
    base, tgt = catalog.load(baseline, baseline_session), catalog.load(target, target_session)
    facts = base.profile.facts, tgt.profile.facts
    figure = headline_figure(base.profile, tgt.profile)  # shares are of the headline's step wall time
    totals, rows, per_step = compare_layers(
        (base.profile.op_table.frame(), base.profile.annotation_table.frame()),
        (tgt.profile.op_table.frame(), tgt.profile.annotation_table.frame()),
        facts[0].steps,
        facts[1].steps,
        figure.baseline_step_wall_us,
        figure.target_step_wall_us,
    )
    layers = as_structs(totals, LayerTotal)
    records = as_structs(rows, LayerRow)
    return LayersDocument(
        baseline=baseline,
        target=target,
        per_step=per_step,
        headline=figure,
        layers=layers,
        rows=records,
        notes=_notes(base, tgt, layers, figure.per_sample),
    )


def _notes(baseline: LoadedRun, target: LoadedRun, layers: list[LayerTotal], per_sample: bool) -> list[str]:
    """What the user should know to read the layers: what a run did not record, and why."""
    notes = []
    present = {layer.layer: layer for layer in layers}
    if APPLICATION not in present:
        if "PyTorch" in (baseline.profile.facts.framework, target.profile.facts.framework):
            notes.append(
                "No application ranges in these runs: wrap parts of a step in "
                'torch.profiler.record_function("name") to see them as rows here.'
            )
        else:
            notes.append(
                "These runs record no application ranges that Op Compare reads (PyTorch record_function "
                "ranges, TensorFlow's tf.profiler.experimental.Trace ranges and tf.data input pipeline, or "
                "the profiler wrapper's app_stats in summary.json)."
            )
    elif WALL in present[APPLICATION].basis:
        notes.append(
            "Application time from ranges that have a wall time only (TF Trace ranges, app_stats) is "
            "the wall time of the outermost ranges: the ops that ran inside them count in the framework "
            "layer too, so the layers overlap."
        )
    if RUNTIME not in present:
        gpu_runs = [
            loaded.source.run for loaded in (baseline, target) if loaded.profile.facts.device not in (None, "CPU")
        ]
        if gpu_runs:
            notes.append(
                f"No runtime calls recorded in {', '.join(gpu_runs)}: PyTorch traces list CUDA/HIP runtime "
                "and driver calls; TensorFlow profiles keep them out of their op events."
            )
    differ = batch_sizes_differ(baseline.profile.facts.batch_size, target.profile.facts.batch_size)
    if differ:
        notes.append(
            f"{differ}: a layer's time per step is different amounts of work on each side"
            + ("; the whole step's speedup above is per sample." if per_sample else ".")
        )
    if any(
        layer.baseline_share and layer.baseline_share > 1 or layer.target_share and layer.target_share > 1
        for layer in layers
    ):
        notes.append("A host layer above 100% of the step: several host threads worked at once.")
    return notes
