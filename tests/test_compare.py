"""Comparison maths on small hand-made tables (no files)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tb_opcompare.analysis.compare import compare_frame, compare_ops, effective_ops, normalize_op_type
from tb_opcompare.schema.events import OP_COLUMNS


def table(*rows):
    """rows: (side, name, type, occurrences, self_us)."""
    records = []
    for side, name, op_type, occurrences, self_us in rows:
        records.append(
            dict(
                side=side,
                op_name=name,
                op_type=op_type,
                occurrences=occurrences,
                kernels=0,
                total_us=self_us,
                self_us=self_us,
                mean_us=self_us / occurrences,
                min_us=math.nan,
                max_us=math.nan,
                std_us=math.nan,
            )
        )
    return pd.DataFrame(records, columns=OP_COLUMNS)


def compare(*args, **kwargs):
    """``compare_ops``, its rows as the DataFrame the views read (``compare_frame``)."""
    rows, summary = compare_ops(*args, **kwargs)
    return compare_frame(rows), summary


CPU = table(
    ("host", "conv", "_MklNativeFusedConv2D", 2, 800.0),
    ("host", "dense", "_MklMatMul", 2, 200.0),
    ("host", "cpu_only", "Cast", 1, 10.0),
)
GPU = table(
    ("host", "conv", "_FusedConv2D", 2, 30.0),  # launch time, replaced by the kernels below
    ("device", "conv", "_FusedConv2D", 2, 40.0),
    ("host", "dense", "MatMul", 2, 400.0),  # ran on the host only: host time counts
    ("device", "gpu_only", "Fill", 4, 8.0),
)


def test_speedup_is_baseline_mean_over_target_mean():
    rows, _ = compare(CPU, GPU)
    by_key = rows.set_index("key")
    assert by_key.loc["conv", "speedup"] == pytest.approx((800 / 2) / (40 / 2))
    assert by_key.loc["conv", "target_time_source"] == "device"
    assert by_key.loc["dense", "speedup"] == pytest.approx(0.5)
    assert by_key.loc["dense", "target_time_source"] == "host"
    assert by_key.loc["conv", "delta_mean_us"] == pytest.approx(20 - 400)


def test_every_op_appears_with_its_status():
    rows, summary = compare(CPU, GPU)
    status = dict(zip(rows["key"], rows["status"]))
    assert status == {"conv": "matched", "dense": "matched", "cpu_only": "baseline_only", "gpu_only": "target_only"}
    assert summary["faster_ops"] == 1 and summary["slower_ops"] == 1
    assert summary["baseline_only_ops"] == 1 and summary["target_only_ops"] == 1
    assert math.isnan(rows.set_index("key").loc["gpu_only", "speedup"])


def test_summary_speedups():
    _, summary = compare(CPU, GPU)
    assert summary["baseline_matched_total_us"] == 1000.0
    assert summary["target_matched_total_us"] == 440.0
    assert summary["overall_speedup"] == pytest.approx(1000 / 440)
    assert summary["overall_speedup_basis"] == "whole profile"
    assert summary["geomean_speedup"] == pytest.approx(math.sqrt(20 * 0.5))


def test_overall_speedup_is_per_step_when_steps_are_known():
    _, summary = compare(CPU, GPU, baseline_steps=1, target_steps=2)
    assert summary["overall_speedup"] == pytest.approx(1000 / (440 / 2))
    assert summary["target_time_per_step_us"] == pytest.approx(448 / 2)


def test_shares_sum_to_one_per_side():
    rows, _ = compare(CPU, GPU)
    assert rows["baseline_share"].sum() == pytest.approx(1.0)
    assert rows["target_share"].sum() == pytest.approx(1.0)
    assert rows.set_index("key").loc["conv", "baseline_share"] == pytest.approx(800 / 1010)


def test_group_by_type_meets_onednn_and_gpu_types():
    rows, _ = compare(CPU, GPU, group_by="type")
    by_key = rows.set_index("key")
    assert by_key.loc["FusedConv2D", "status"] == "matched"
    assert by_key.loc["MatMul", "status"] == "matched"
    unnormalized, _ = compare(CPU, GPU, group_by="type", normalize=False)
    assert "FusedConv2D" not in set(unnormalized["key"])
    assert {"_MklNativeFusedConv2D", "_FusedConv2D"} <= set(unnormalized["key"])


@pytest.mark.parametrize(
    "raw, normal",
    [
        ("_MklNativeFusedConv2D", "FusedConv2D"),
        ("_FusedConv2D", "FusedConv2D"),
        ("_MklMatMul", "MatMul"),
        ("MatMul", "MatMul"),
        ("_MklNativeMaxPool", "MaxPool"),
        ("aten::mkldnn_convolution", "aten::convolution"),
        ("aten::cudnn_convolution", "aten::convolution"),
        ("aten::addmm", "aten::addmm"),
    ],
)
def test_normalize_op_type(raw, normal):
    assert normalize_op_type(raw) == normal


def test_effective_ops_prefers_device_rows():
    chosen = effective_ops(GPU)
    assert sorted(zip(chosen["op_name"], chosen["time_source"])) == [
        ("conv", "device"),
        ("dense", "host"),
        ("gpu_only", "device"),
    ]


def test_bad_group_by_is_rejected():
    with pytest.raises(ValueError):
        compare_ops(CPU, GPU, group_by="colour")
