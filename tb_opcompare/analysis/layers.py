"""The layers of a profile, side by side for two runs: what the application, the framework,
the runtime and the device each took, and the application's and runtime's own rows.

A host row of the op table belongs to a layer by its type (``layer_of``): ``user_annotation``
ranges (PyTorch ``record_function``, the DataLoader's and optimizer's own ranges) and TF's
input pipeline (tf.data iterator events, ``Dataset``) are the application, CUDA/HIP runtime
and driver calls the runtime, every other host row the framework; device rows (kernels, memcpys, memsets) are the device. Host self times never
overlap on one thread (a range's self time leaves out the ops and calls inside it), so the
host layers add up to the busy time of the host threads; the device layer is kernel time,
which overlaps the host. The application ranges a reader keeps beside its op table
(``OpProfile.annotation_table``: the seed wrapper's ``app_stats``, TF's ``Trace`` ranges) have a
wall time only: the ops inside them are framework time too, so the layer is then measured
by the wall time of the outermost ranges and says so.

Times are per profiled step where both runs know their step count (runs of different
lengths compare), else per run; a row's speedup is its baseline mean per call over its
target mean per call, as in the op table. Plain tables in, plain tables out: no I/O.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tb_opcompare.schema.contract import LAYER_COLUMNS, LAYERS, ROW_LAYERS, LayerTotal
from tb_opcompare.schema.events import APPLICATION_TYPES, DEVICE, HOST, RUNTIME_TYPES
from tb_opcompare.schema.table import repeated_text

APPLICATION, FRAMEWORK, RUNTIME, DEVICE_LAYER = LAYERS
SELF, WALL, KERNEL = "self", "wall", "kernel"  # how a layer's time is measured
TOTAL_COLUMNS = list(LayerTotal.__struct_fields__)


def layer_of(ops: pd.DataFrame) -> np.ndarray:
    """Each op-table row's layer."""
    op_type = ops["op_type"].to_numpy(dtype=object)
    layers = repeated_text(len(ops), FRAMEWORK)
    layers[np.isin(op_type, list(APPLICATION_TYPES))] = APPLICATION
    layers[np.isin(op_type, list(RUNTIME_TYPES))] = RUNTIME
    layers[ops["side"].to_numpy(dtype=object) == DEVICE] = DEVICE_LAYER
    return layers


def run_layers(ops: pd.DataFrame, annotations: pd.DataFrame) -> tuple[dict[str, tuple[float, str]], pd.DataFrame]:
    """One run's time per layer, ``{layer: (µs, basis)}`` (layers the run has no record of
    are left out), and its application and runtime rows (``layer``, ``name``, ``kind``,
    ``calls``, ``wall_us``, ``self_us``; a range kept beside the op table has no self time)."""
    layers = layer_of(ops)
    on_host = ops["side"].to_numpy(dtype=object) == HOST
    totals: dict[str, tuple[float, str]] = {}
    for layer in (APPLICATION, FRAMEWORK, RUNTIME):
        mine = on_host & (layers == layer)
        if mine.any():
            totals[layer] = (float(ops["self_us"].to_numpy()[mine].sum()), SELF)
    device = layers == DEVICE_LAYER
    if device.any():
        totals[DEVICE_LAYER] = (float(ops["total_us"].to_numpy()[device].sum()), KERNEL)
    listed = ops[on_host & np.isin(layers, ROW_LAYERS)]
    rows = pd.DataFrame(
        {
            "layer": layers[on_host & np.isin(layers, ROW_LAYERS)],
            "name": listed["op_name"].to_numpy(),
            "kind": listed["op_type"].to_numpy(),
            "calls": listed["occurrences"].to_numpy(),
            "wall_us": listed["total_us"].to_numpy(),
            "self_us": listed["self_us"].to_numpy(),
        }
    )
    if len(annotations):
        kept = pd.DataFrame(
            {
                "layer": APPLICATION,
                "name": annotations["name"].to_numpy(),
                "kind": annotations["kind"].to_numpy(),
                "calls": annotations["occurrences"].to_numpy(),
                "wall_us": annotations["total_us"].to_numpy(),
                "self_us": np.nan,
            }
        )
        rows = pd.concat([rows, kept], ignore_index=True)
        if APPLICATION not in totals:
            totals[APPLICATION] = (float(annotations["outermost_us"].sum()), WALL)
    return totals, rows


def compare_layers(
    baseline: tuple[pd.DataFrame, pd.DataFrame],
    target: tuple[pd.DataFrame, pd.DataFrame],
    baseline_steps: int | None = None,
    target_steps: int | None = None,
    baseline_step_us: float | None = None,
    target_step_us: float | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """Two runs' layers from their ``(ops, annotations)``: ``(totals, rows, per_step)``.

    ``totals`` has a row per layer either run has (``TOTAL_COLUMNS``; a share is of the
    side's step wall time ``*_step_us`` where known, and can pass 100% when several host
    threads work at once); ``rows`` the application and runtime rows of both
    (``LAYER_COLUMNS``), the largest first within each layer."""
    per_step = bool(baseline_steps and target_steps)
    scale = {"baseline": (baseline_steps or 1) if per_step else 1, "target": (target_steps or 1) if per_step else 1}
    step_us = {"baseline": baseline_step_us if per_step else None, "target": target_step_us if per_step else None}
    sides = {"baseline": run_layers(*baseline), "target": run_layers(*target)}
    total_rows = []
    for layer in LAYERS:
        measured = {side: sides[side][0].get(layer) for side in sides}
        if not any(measured.values()):
            continue
        bases = sorted({value[1] for value in measured.values() if value})
        row: dict[str, str | float] = {"layer": layer, "basis": "/".join(bases)}
        side_us: dict[str, float] = {}
        for side, value in measured.items():
            side_us[side] = us = value[0] / scale[side] if value else np.nan
            side_step_us = step_us[side]
            row[f"{side}_us"] = us
            row[f"{side}_share"] = us / side_step_us if side_step_us else np.nan
        row["speedup"] = _ratio(side_us["baseline"], side_us["target"])
        total_rows.append(row)
    totals = pd.DataFrame(total_rows, columns=TOTAL_COLUMNS)
    per_side = []
    for side, (_, rows) in sides.items():
        keys = rows["name"].where(rows["layer"] != RUNTIME, rows["name"].map(runtime_call_key))
        grouped = (
            rows.assign(key=keys)
            .groupby(["layer", "kind", "key"], sort=False)
            .agg(
                name=("name", lambda names: " / ".join(dict.fromkeys(names))),
                calls=("calls", "sum"),
                wall_us=("wall_us", "sum"),
                self_us=("self_us", lambda s: s.sum(min_count=1)),
            )
        )
        grouped["mean_us"] = grouped["wall_us"] / grouped["calls"].where(grouped["calls"] > 0)
        grouped[["wall_us", "self_us"]] = grouped[["wall_us", "self_us"]] / scale[side]
        per_side.append(grouped.add_prefix(f"{side}_"))
    joined = pd.concat(per_side, axis=1).reset_index()
    joined["name"] = [_shown_name(base, target) for base, target in zip(joined["baseline_name"], joined["target_name"])]
    in_baseline, in_target = joined["baseline_calls"].notna(), joined["target_calls"].notna()
    joined["status"] = np.select([in_baseline & in_target, in_baseline], ["matched", "baseline_only"], "target_only")
    joined["speedup"] = joined["baseline_mean_us"] / joined["target_mean_us"].where(joined["target_mean_us"] > 0)
    for side in ("baseline", "target"):
        joined[f"{side}_calls"] = joined[f"{side}_calls"].astype("Int64")
    size = joined[["baseline_wall_us", "target_wall_us"]].max(axis=1)
    order = np.lexsort((-size.fillna(0.0).to_numpy(), joined["layer"].map(LAYERS.index).to_numpy()))
    return totals, joined.iloc[order].reset_index(drop=True)[LAYER_COLUMNS], per_step


_VENDOR_PREFIX = re.compile(r"\A(?:cuda|hip|cu)(?=[A-Z])")


def runtime_call_key(name: str) -> str:
    """What a runtime call is, whichever vendor's runtime made it: ``cudaLaunchKernel`` and
    ``hipLaunchKernel`` are ``LaunchKernel`` (an H100 run and an MI300X run then meet row by
    row); the call's kind (runtime or driver) still tells ``cuLaunchKernel`` apart."""
    return _VENDOR_PREFIX.sub("", name)


def _shown_name(baseline: object, target: object) -> str:
    """A row's name: one where the sides agree or only one has the row, both where the
    vendors' names differ (``cudaLaunchKernel / hipLaunchKernel``)."""
    return " / ".join(dict.fromkeys(name for name in (baseline, target) if isinstance(name, str)))


def _ratio(baseline: float, target: float) -> float:
    return baseline / target if target and target > 0 and not np.isnan(baseline) else np.nan
