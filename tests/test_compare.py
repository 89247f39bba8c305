"""Comparison maths on small hand-made tables (no files)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tb_opcompare.analysis.compare import compare_frame, compare_ops, effective_ops, normalize_op_type
from tb_opcompare.schema.events import OP_COLUMNS
from tb_opcompare.schema.table import Table


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
    return Table.from_frame(pd.DataFrame(records, columns=OP_COLUMNS))


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
        ("aten::miopen_convolution", "aten::convolution"),
        ("aten::_slow_conv2d_forward", "aten::convolution"),
        ("aten::_slow_conv2d_backward", "aten::convolution_backward"),
        ("aten::slow_conv_dilated2d", "aten::convolution"),
        ("aten::slow_conv_transpose2d", "aten::convolution_transpose"),  # never a plain convolution
        ("aten::cudnn_convolution_transpose", "aten::convolution_transpose"),
        ("aten::slow_conv_transpose2d_backward", "aten::convolution_transpose_backward"),
        ("aten::_nnpack_spatial_convolution", "aten::convolution"),
        ("aten::mkldnn_convolution_backward", "aten::convolution_backward"),
        ("aten::cudnn_batch_norm", "aten::batch_norm"),
        ("aten::_cudnn_rnn", "aten::rnn"),
        ("aten::mkldnn_linear", "aten::linear"),
        ("aten::addmm", "aten::addmm"),
        ("aten::slow_conv_fancy", "aten::slow_conv_fancy"),  # not a known fallback: kept
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


def _implementation_rows(names_and_types: dict[str, list[tuple[str, str]]]):
    """Two runs' host rows, one execution of 10 µs each (names and recorded types)."""
    return {
        side: table(*[("host", name, kind, 1, 10.0) for name, kind in rows]) for side, rows in names_and_types.items()
    }


def test_implementations_of_one_op_compare_as_that_op_and_nothing_else_merges():
    """Issue 51: a CNN's convolution is aten::mkldnn_convolution on the CPU and
    aten::cudnn_convolution on the GPU, and was "baseline only" and "target only". One-sided
    implementations of one framework op now make one row; TF ops, whose names are not their
    types, never merge by type; and an op both runs have stays as it is."""
    runs = _implementation_rows(
        {
            "baseline": [
                ("aten::convolution", "aten::convolution"),
                ("aten::mkldnn_convolution", "aten::mkldnn_convolution"),
                ("aten::_slow_conv2d_forward", "aten::_slow_conv2d_forward"),
                ("model/dense/MatMul", "_MklMatMul"),
            ],
            "target": [
                ("aten::convolution", "aten::convolution"),
                ("aten::cudnn_convolution", "aten::cudnn_convolution"),
                ("model/dense_1/MatMul", "MatMul"),
            ],
        }
    )
    rows, summary = compare(runs["baseline"], runs["target"])
    by_key = rows.set_index("key")
    joined = "aten::_slow_conv2d_forward, aten::mkldnn_convolution → aten::cudnn_convolution"
    assert by_key.loc[joined, "status"] == "matched" and by_key.loc[joined, "op_type"] == "aten::convolution"
    assert by_key.loc[joined, "baseline_total_us"] == 20.0 and by_key.loc[joined, "baseline_occurrences"] == 2
    assert by_key.loc[joined, "speedup"] == 1.0  # 20 µs over 2 calls against 10 µs over 1
    assert by_key.loc["aten::convolution", "status"] == "matched"  # the dispatcher, on both sides
    assert by_key.loc["model/dense/MatMul", "status"] == "baseline_only"
    assert by_key.loc["model/dense_1/MatMul", "status"] == "target_only"
    assert summary["matched_ops"] == 2
    apart, _ = compare(runs["baseline"], runs["target"], normalize=False)
    assert {"aten::mkldnn_convolution", "aten::cudnn_convolution"} <= set(apart["key"])


def test_the_demos_convolution_has_a_speedup_from_cpu_to_gpu():
    """Issue 51 on a real pair (the demo's PyTorch CNN at batch 64, CPU then an H100): the
    convolution, the CNN's largest op, was "baseline only" (oneDNN) and "target only"
    (cuDNN). It is one row now, holding exactly what the two rows held."""
    from pathlib import Path
    from types import SimpleNamespace

    from tb_opcompare.service.compare import compare_document
    from tb_opcompare.store.catalog import Catalog

    catalog = Catalog(str(Path(__file__).parent.parent / "demo_logs"), cache_dir=None)
    pair = ("torch/mnist_cnn_torch_cpu_bs64", "torch/mnist_cnn_torch_gpu_bs64")
    rows = {row["key"]: SimpleNamespace(**row) for row in compare_document(catalog, *pair).rows}
    apart = {row["key"]: SimpleNamespace(**row) for row in compare_document(catalog, *pair, normalize=False).rows}
    conv = rows["aten::mkldnn_convolution → aten::cudnn_convolution"]
    assert conv.status == "matched" and conv.op_type == "aten::convolution"
    cpu, gpu = apart["aten::mkldnn_convolution"], apart["aten::cudnn_convolution"]
    assert (cpu.status, gpu.status) == ("baseline_only", "target_only")
    assert (conv.baseline_total_us, conv.baseline_occurrences) == (cpu.baseline_total_us, cpu.baseline_occurrences)
    assert (conv.target_total_us, conv.target_occurrences) == (gpu.target_total_us, gpu.target_occurrences)
    assert conv.target_time_source == "device" and conv.speedup > 10
    assert conv.speedup == pytest.approx(cpu.baseline_mean_us / gpu.target_mean_us, rel=1e-12)
    # the largest op of the CPU run, by its total, now has a speedup
    largest = max((row for row in rows.values() if row.baseline_total_us), key=lambda row: row.baseline_total_us)
    assert largest is conv


def _same_column(got, want) -> None:
    assert got.dtype == want.dtype
    assert [type(value) for value in got.tolist()] == [type(value) for value in want.tolist()]
    assert pd.Series(got).equals(pd.Series(want))  # NaN and None where the other has them


@pytest.mark.parametrize("group_by", ["name", "type"])
def test_rows_taken_from_a_comparison_are_those_of_its_columns_made_whole(group_by):
    """Most of a comparison's columns are made when first asked for (``Gathered``), and
    rows taken from it (a page, a CSV chunk) make only their own rows: the same values,
    dtypes and Python types (counts, flags, None where a side lacks the op) as the rows of
    the columns made whole, whatever the rows (a mask, repeats, a slice)."""
    rows_lazy, _ = compare_ops(CPU, GPU, group_by=group_by)
    rows_whole, _ = compare_ops(CPU, GPU, group_by=group_by)
    whole = Table(dict(rows_whole.items()))  # every column made
    assert len(whole) >= 4 and set(whole["status"]) == {"matched", "baseline_only", "target_only"}
    for positions in (
        np.array([True, False] * (len(whole) // 2) + [True] * (len(whole) % 2)),
        np.array([3, 0, 3, 1]),
        slice(1, None, 2),
    ):
        taken = rows_lazy.take(positions)
        for name in whole.names:
            _same_column(taken[name], whole.take(positions)[name])
    for name in whole.names:  # and made whole, as made at once
        _same_column(rows_lazy[name], whole[name])
    assert rows_lazy.memory_bytes() > 0
