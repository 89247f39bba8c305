"""The pages of one pair of runs beside Compare: ``modules``, ``layers``, ``memory`` and
``roofline``, each a document printed as a tree or a table."""

from __future__ import annotations

import argparse

from tb_opcompare.cli.common import EXIT_OK, add_top_option, emit, escape_controls, open_catalog, positive_int
from tb_opcompare.text import format_bytes, format_rate, format_share, format_speedup, format_time


def add_pages(
    commands: argparse._SubParsersAction, reading: argparse.ArgumentParser, two_runs: argparse.ArgumentParser
) -> None:
    """The four pages' commands, in the order the top-level --help lists them: each its
    help, its description, its own option and its handler."""
    for name, help_text, description, own_option, handler in _PAGES:
        page = commands.add_parser(name, parents=[reading, two_runs], help=help_text, description=description)
        own_option(page)
        page.set_defaults(handler=handler)


def _depth_option(page: argparse.ArgumentParser) -> None:
    page.add_argument("--depth", type=positive_int, default=3, help="print modules down to this depth (default 3)")


def _modules(args) -> int:
    catalog = open_catalog(args)
    from tb_opcompare.service.csv_export import modules_csv
    from tb_opcompare.service.modules import modules_document

    document = modules_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    emit(args, document, modules_csv, f"{len(document.nodes)} nodes", lambda tree: _print_modules(tree, args.depth))
    return EXIT_OK


def _layers(args) -> int:
    catalog = open_catalog(args)
    from tb_opcompare.service.csv_export import layers_csv
    from tb_opcompare.service.layers import layers_document

    document = layers_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    emit(args, document, layers_csv, f"{len(document.rows)} rows", lambda layers: _print_layers(layers, args.top))
    return EXIT_OK


def _print_layers(document, top: int) -> None:
    from tb_opcompare.schema.contract import ROW_LAYERS

    unit = "per step" if document.per_step else "in all"
    print(f"layers, time {unit}: baseline -> target, speedup (share of the step)")
    for layer in document.layers:
        print(
            f"  {layer.layer:<12} {format_time(layer.baseline_us)} -> {format_time(layer.target_us)}  "
            f"{format_speedup(layer.speedup)}  ({format_share(layer.baseline_share)} -> "
            f"{format_share(layer.target_share)}; {layer.basis} time)"
        )
    for name in ROW_LAYERS:
        rows = [row for row in document.rows if row.layer == name]
        if rows:
            print(f"\n{name}: wall time per call, baseline -> target, speedup")
        for row in rows[:top]:
            print(
                f"  {escape_controls(row.name)}  {format_time(row.baseline_mean_us)} -> "
                f"{format_time(row.target_mean_us)}  {format_speedup(row.speedup)}  "
                f"[{_count(row.baseline_calls)} -> {_count(row.target_calls)} calls]"
            )
        if len(rows) > top:
            print(f"  … {len(rows) - top} more (--top, --csv)")
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _count(calls: int | None) -> str:
    return "–" if calls is None else str(calls)


def _print_modules(document, depth: int) -> None:
    unit = "per step" if document.per_step else "in all"
    print(f"modules from {document.source}; time {unit}, baseline -> target, speedup")
    for node in document.nodes:
        if node.kind == "module" and node.depth <= depth:
            print(
                f"{'  ' * node.depth}{escape_controls(node.name)}  {format_time(node.baseline_us)} -> "
                f"{format_time(node.target_us)}  {format_speedup(node.speedup)}  "
                f"({format_share(node.baseline_share)} -> {format_share(node.target_share)})"
            )
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _memory(args) -> int:
    catalog = open_catalog(args)
    from tb_opcompare.service.csv_export import memory_csv
    from tb_opcompare.service.memory import memory_document

    document = memory_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    emit(args, document, memory_csv, f"{len(document.rows)} ops", lambda memory: _print_memory(memory, args.top))
    return EXIT_OK


def _roofline(args) -> int:
    catalog = open_catalog(args)
    from tb_opcompare.service.csv_export import roofline_csv
    from tb_opcompare.service.roofline import roofline_document

    document = roofline_document(catalog, args.baseline, args.target, args.baseline_session, args.target_session)
    emit(args, document, roofline_csv, f"{len(document.rows)} ops", lambda found: _print_roofline(found, args.top))
    return EXIT_OK


def _print_roofline(document, top: int) -> None:
    for side in ("baseline", "target"):
        run = getattr(document, side)
        roofs = "; ".join(_limits_text(limits) for limits in run.limits)
        achieved = f"{format_rate(run.flops_per_s, 'FLOP/s')} on the ops of known work"
        print(escape_controls(f"{side + ':':<9} {run.run}: {achieved}; roofs: {roofs}"))
    if document.rows:
        shown = min(top, len(document.rows))
        print(
            f"\nops by time (either run), {shown} of {len(document.rows)}; % of roof, bound (tf32: under the TF32 "
            "tensor cores' roof); speedup per call "
            "(work: the target's FLOPs per call / the baseline's)"
        )
        print(
            f"{'base rate':>14}  {'target rate':>14}  {'base roof':>18}  {'target roof':>18}  {'speedup':>7}  "
            f"{'work':>7}  op: change"
        )
        for row in document.rows[:top]:
            print(
                f"{format_rate(row['baseline_flops_per_s'], 'FLOP/s'):>14}  "
                f"{format_rate(row['target_flops_per_s'], 'FLOP/s'):>14}  "
                f"{_roof_text(row, 'baseline'):>18}  {_roof_text(row, 'target'):>18}  "
                f"{format_speedup(row['speedup']):>7}  {format_speedup(row['work_ratio']):>7}  "
                f"{escape_controls(row['op_name'])}" + (f": {row['change']}" if row["change"] else "")
            )
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


def _limits_text(limits) -> str:
    """``device NVIDIA H100 SXM: 67 TFLOP/s fp32, 3.35 TB/s``, or ``host unknown``."""
    if limits.peak_flops is None and limits.memory_bandwidth is None:
        return f"{limits.processor} unknown"
    peak = f"{format_rate(limits.peak_flops, 'FLOP/s')} {limits.precision or ''}".strip()
    return f"{limits.processor} {limits.device}: {peak}, {format_rate(limits.memory_bandwidth, 'B/s')}"


def _roof_text(row: dict, side: str) -> str:
    fraction, bound = row[f"{side}_fraction_of_roof"], row[f"{side}_bound"]
    if row[f"{side}_suspect"]:
        return "suspect"
    if fraction is None:
        return "-"
    unit = "tf32" if row[f"{side}_roof_precision"] == "tf32" else ""  # an fp32 op on TF32 tensor cores
    return f"{format_share(fraction)} {bound or ''} {unit}".strip()


def _print_memory(document, top: int) -> None:
    for side in ("baseline", "target"):
        run = getattr(document, side)
        peaks = ", ".join(f"{device} {format_bytes(size)}" for device, size in run.peak_memory_bytes.items())
        rates = [
            f"{format_bytes(run.allocated_bytes_per_step)} allocated per step"
            if run.allocated_bytes_per_step is not None
            else None,
            f"{run.memory_events_per_step:,.0f} memory events per step"
            if run.memory_events_per_step is not None
            else None,
        ]
        print(
            escape_controls(
                f"{side + ':':<9} {run.run}: peak {peaks or 'not recorded'}"
                + "".join(f"; {rate}" for rate in rates if rate)
            )
        )
    if document.rows:
        print(
            f"\nops by bytes allocated (either run), {min(top, len(document.rows))} of {len(document.rows)}; "
            "ratio = target / baseline per call"
        )
        print(f"{'base alloc':>11}  {'target alloc':>12}  {'base/call':>11}  {'target/call':>11}  {'ratio':>7}  op")
        for row in document.rows[:top]:
            print(
                f"{format_bytes(row['baseline_alloc_bytes']):>11}  {format_bytes(row['target_alloc_bytes']):>12}  "
                f"{format_bytes(row['baseline_alloc_bytes_per_execution']):>11}  "
                f"{format_bytes(row['target_alloc_bytes_per_execution']):>11}  {format_speedup(row['ratio']):>7}  "
                f"{escape_controls(row['key'])}"
            )
        if len(document.rows) > top:
            print(f"… {len(document.rows) - top} more (--top, --csv)")
    for note in document.notes:
        print(f"note: {escape_controls(note)}")


# (command, its --help line, its description, its own option, its handler)
_PAGES = (
    (
        "modules",
        "two runs' module trees side by side (model -> module -> op)",
        "Each op placed in its module (PyTorch: the nn.Module call it ran in, recorded with "
        "with_stack=True; TF: the scope of its name), and every module's time with its sub-modules, on "
        "both runs, per profiled step where both know their steps; speedup = baseline / target.",
        _depth_option,
        _modules,
    ),
    (
        "layers",
        "two runs' application, framework, runtime and device time",
        "How much of a step each layer takes on both runs: the application (record_function and "
        "TF Trace ranges, app_stats), the framework (ops), the runtime (CUDA/HIP runtime and driver calls) and the "
        "device (kernels); then each application range and runtime call compared by its wall time per "
        "call (speedup = baseline / target).",
        lambda page: add_top_option(page, "print the N largest rows of each layer"),
        _layers,
    ),
    (
        "memory",
        "two runs' memory: peaks per device and what each op allocated",
        "Each run's peak memory per device, its memory events and bytes allocated per profiled step, "
        "and the ops that allocated or freed memory, the largest first: bytes allocated in all and per "
        "call on both runs (ratio = target / baseline per call). PyTorch records memory with "
        "profile_memory=True; TensorFlow with its allocation events.",
        lambda page: add_top_option(page, "print the N ops that allocated the most"),
        _memory,
    ),
    (
        "roofline",
        "why an op sped up: its work, achieved rate and device limit on both runs",
        "Each op's FLOPs and bytes (from the profile, else from its recorded input shapes), its "
        "achieved FLOP/s, arithmetic intensity and fraction of its device's roof on both runs, whether it is "
        "compute- or memory-bound, and what the change did: moved along the roof, or closed or widened the gap "
        "under it. Device limits come from the run's sidecar (device_limits, host_limits), the profile, or a "
        "table of datasheet figures.",
        lambda page: add_top_option(page, "print the N ops with the most time"),
        _roofline,
    ),
)
