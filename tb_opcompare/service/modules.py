"""The modules document: two runs' module trees side by side."""

from __future__ import annotations

from tb_opcompare.analysis.headline import headline_figure
from tb_opcompare.analysis.modules import module_tree
from tb_opcompare.analysis.numerics import finite_or_none
from tb_opcompare.schema.contract import ModuleNode, ModulesDocument
from tb_opcompare.store.catalog import Catalog, LoadedRun


def modules_document(
    catalog: Catalog, baseline: str, target: str, baseline_session: str | None = None, target_session: str | None = None
) -> ModulesDocument:
    """Raises UnknownRunError for unknown runs/sessions, ProfileError for unreadable ones."""
    base, tgt = catalog.load(baseline, baseline_session), catalog.load(target, target_session)
    steps = base.profile.facts.steps, tgt.profile.facts.steps
    tree = module_tree(
        base.profile.op_table, tgt.profile.op_table, base.profile.module_table, tgt.profile.module_table, *steps
    )
    source, notes = module_source(base, tgt)
    nodes = [
        ModuleNode(**{key: finite_or_none(value) for key, value in row.items()}) for row in tree.to_dict("records")
    ]
    return ModulesDocument(
        baseline=baseline,
        target=target,
        per_step=bool(all(steps)),
        source=source,
        headline=headline_figure(base.profile, tgt.profile),
        nodes=nodes,
        notes=notes,
    )


def module_source(baseline: LoadedRun, target: LoadedRun) -> tuple[str, list[str]]:
    """Where two runs' modules come from (``nn.Module calls``, ``name scopes`` or
    ``mixed``), and what the user should know about it."""
    with_calls = [bool(len(loaded.profile.module_table)) for loaded in (baseline, target)]
    if all(with_calls):
        return "nn.Module calls", []
    if any(with_calls):
        run = (baseline, target)[with_calls.index(True)].source.run
        return "mixed", [
            f"Only {run} records its nn.Module calls (PyTorch's with_stack=True); the other run's ops are "
            "placed by the scopes of their names, so few modules can match. Record both with stacks."
        ]
    if "PyTorch" in (baseline.profile.facts.framework, target.profile.facts.framework):
        return "name scopes", [
            "No nn.Module calls in these runs: record with torch.profiler's with_stack=True "
            "(tb_opcompare.recording.torch_profile(with_stack=True)) to see the modules."
        ]
    return "name scopes", []
