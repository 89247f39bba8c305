"""The module tree of a comparison: model -> module -> op, with both runs' time at every
node.

Each op execution is placed in its module (``compare.in_modules``: PyTorch's nn.Module
calls, else TF name scopes); a module's time is everything that ran inside it, its
sub-modules included, so the time of a node is the sum of its children's plus what ran in
it directly. The bytes its ops allocated add up the same way (empty for a run that
records no memory). Times are per profiled step where both runs know their step count (runs of
different lengths compare), else totals; the speedup of a node is its baseline time over
its target time. Plain tables in, plain records out: no I/O.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tb_opcompare.analysis.compare import effective_ops, in_modules
from tb_opcompare.schema.contract import MODULE_NODE_COLUMNS
from tb_opcompare.schema.table import Table

MODULE, OP = "module", "op"
TREE_COLUMNS = MODULE_NODE_COLUMNS
_SIDES = ("baseline", "target")


def module_tree(
    baseline_ops: Table,
    target_ops: Table,
    baseline_modules: Table | None,
    target_modules: Table | None,
    baseline_steps: int | None = None,
    target_steps: int | None = None,
) -> pd.DataFrame:
    """One row per node (``TREE_COLUMNS``), parents before children, largest first among
    siblings. ``id`` is the node's path (modules ``/``-joined, an op after its module's
    path and a ``/``; the root ``""``), ``parent`` its parent's id. A node only one run
    has keeps the other side empty (``status`` ``baseline_only`` / ``target_only``)."""
    per_step = bool(baseline_steps and target_steps)
    sides = {}
    for side, ops, modules, steps in (
        ("baseline", baseline_ops, baseline_modules, baseline_steps),
        ("target", target_ops, target_modules, target_steps),
    ):
        placed = in_modules(effective_ops(ops), modules).frame().groupby(["module", "op_name"], sort=False)
        measured = pd.DataFrame(
            {side: placed["self_us"].sum(), f"{side}_alloc": placed["alloc_bytes"].sum(min_count=1)}
        )
        sides[side] = measured / steps if per_step else measured
    leaves = pd.concat(sides.values(), axis=1)
    present = pd.DataFrame({side: leaves[side].notna() for side in _SIDES})
    recorded = {side: bool(sides[side][f"{side}_alloc"].notna().any()) for side in _SIDES}  # memory profiled
    leaves = leaves.fillna(0.0)
    nodes: dict[str, dict[str, Any]] = {"": _node("", None, "(whole model)", MODULE, 0)}
    for (module, op), times in leaves.iterrows():
        parts = module.split("/")
        path = ""
        for depth, part in enumerate(parts, start=1):
            parent, path = path, f"{path}/{part}" if path else part
            node = nodes.setdefault(path, _node(path, parent, part, MODULE, depth))
            _add(node, times, present.loc[(module, op)])
        name = op[len(module) + 1 :] if op.startswith(module + "/") else op  # a TF op named in its scope
        op_id = f"{path}/{name}"
        if nodes.get(op_id, {}).get("kind") == MODULE:  # a TF op named like a scope of other ops
            op_id += " (op)"
        _add(nodes.setdefault(op_id, _node(op_id, path, name, OP, len(parts) + 1)), times, present.loc[(module, op)])
        _add(nodes[""], times, present.loc[(module, op)])
    frame = pd.DataFrame(list(nodes.values()))
    for side in ("baseline", "target"):
        whole = frame.loc[0, f"{side}_us"]
        frame[f"{side}_share"] = frame[f"{side}_us"] / whole if whole > 0 else float("nan")
        frame[f"{side}_us"] = frame[f"{side}_us"].where(frame[f"in_{side}"])
    frame["speedup"] = frame["baseline_us"] / frame["target_us"].where(frame["target_us"] > 0)
    for side in _SIDES:
        frame[f"{side}_alloc_bytes"] = frame[f"{side}_alloc_bytes"].where(frame[f"in_{side}"] & recorded[side])
    frame["status"] = [
        ("matched" if b and t else "baseline_only" if b else "target_only")
        for b, t in zip(frame["in_baseline"], frame["in_target"])
    ]
    frame["parent"] = frame["parent"].astype(object).where(frame["parent"].notna(), None)
    return _ordered(frame)[TREE_COLUMNS]


def _node(node_id: str, parent: str | None, name: str, kind: str, depth: int) -> dict[str, Any]:
    return {
        "id": node_id,
        "parent": parent,
        "name": name,
        "kind": kind,
        "depth": depth,
        "baseline_us": 0.0,
        "target_us": 0.0,
        "baseline_alloc_bytes": 0.0,
        "target_alloc_bytes": 0.0,
        "in_baseline": False,
        "in_target": False,
    }


def _add(node: dict[str, Any], times: pd.Series, present: pd.Series) -> None:
    for side in _SIDES:
        node[f"{side}_us"] += times[side]
        node[f"{side}_alloc_bytes"] += times[f"{side}_alloc"]
    node["in_baseline"] = node["in_baseline"] or bool(present["baseline"])
    node["in_target"] = node["in_target"] or bool(present["target"])


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Depth first from the root, the larger of each node's children first."""
    size = frame[["baseline_us", "target_us"]].max(axis=1).fillna(0.0)
    children: dict[str | None, list[int]] = {}
    for position, parent in enumerate(frame["parent"]):
        children.setdefault(parent, []).append(position)
    order, stack = [], [0]
    while stack:
        position = stack.pop()
        order.append(position)
        kids = sorted(children.get(frame.at[position, "id"], []), key=lambda child: size[child])
        stack.extend(kids)  # the largest last, so popped first
    return frame.iloc[order].reset_index(drop=True)
