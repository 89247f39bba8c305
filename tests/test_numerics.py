"""Numbers the same on every machine, and flags that a last-digit change cannot flip
(issue 30): the BLAS kernel, the CPU and the numpy release move the last bits of a
float, never a verdict a user reads."""

from __future__ import annotations

import math
import shutil
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

from tb_opcompare.analysis import confidence
from tb_opcompare.analysis.compare import compare_frame, compare_ops
from tb_opcompare.analysis.numerics import above, at_most, below, finite_or_none, geometric_mean, line_fit, settled
from tb_opcompare.analysis.sweep import breakeven_batch_sizes, fit_lines
from tb_opcompare.schema.table import Table
from tb_opcompare.service.sweep import sweep_document, sweeps_document
from tb_opcompare.store.catalog import Catalog


def ulp(values, direction: float):
    return np.nextafter(np.asarray(values, dtype="float64"), direction)


@pytest.mark.parametrize("limit", [0.9, 0.5, 0.05, 1.0, 0.025, 1e-4, 123456.789])
def test_a_value_one_ulp_either_side_of_a_threshold_gets_one_verdict(limit):
    for decide in (above, below, at_most):
        verdicts = {decide(float(value), limit) for value in (ulp(limit, -math.inf), limit, ulp(limit, math.inf))}
        assert len(verdicts) == 1, (decide.__name__, limit)
    assert above(limit * 1.001, limit) and below(limit * 0.999, limit) and not at_most(limit * 1.001, limit)


def test_decisions_on_arrays_equal_decisions_on_each_value():
    values = np.array([0.5, ulp(0.5, 1.0), ulp(0.5, 0.0), 0.49, 0.51, np.nan, np.inf, -np.inf, 0.0])
    limits = np.full(len(values), 0.5)
    for decide in (above, below, at_most):
        assert list(decide(values, 0.5)) == [decide(float(v), 0.5) for v in values]
        assert list(decide(values, limits)) == [decide(float(v), 0.5) for v in values]
    assert list(above(values, 0.5)) == [False, False, False, False, True, False, True, False, False]


def test_settled_keeps_nine_significant_digits():
    assert settled(13.639064306679616) == settled(13.639064306679611) == 13.6390643
    assert settled(-2.5e-7) == -2.5e-7 and settled(0.0) == 0.0 and math.isnan(settled(math.nan))


def test_a_line_fit_has_the_same_bits_whatever_the_order_of_its_points():
    x = np.array([1.0, 16.0, 64.0, 256.0, 3.0])
    y = np.array([3051.2, 5220.7, 6950.1, 20011.4, 3102.9])
    slope, intercept = line_fit(x, y)
    assert np.polyfit(x, y, 1) == pytest.approx([slope, intercept], rel=1e-12)
    for order in ([4, 3, 2, 1, 0], [2, 0, 4, 1, 3]):
        assert line_fit(x[order], y[order]) == (slope, intercept)


def test_a_geometric_mean_has_the_same_bits_whatever_the_order():
    values = np.array([3.29, 0.5, 2.04, 17.0, 1.0000001])
    assert (
        geometric_mean(values)
        == geometric_mean(values[::-1])
        == pytest.approx(float(np.exp(np.log(values).mean())), rel=1e-14)
    )
    assert geometric_mean(np.array([])) is None


def test_a_p_value_at_its_benjamini_hochberg_bound_is_decided_the_same_either_side():
    rate = 0.05
    for first in (ulp(rate / 2, 0.0), rate / 2, ulp(rate / 2, 1.0)):
        assert list(confidence.benjamini_hochberg(np.array([float(first), 0.7]), rate)) == [True, False]


def _sweep_points(catalog: Catalog, model: str) -> pd.DataFrame:
    document = sweep_document(catalog, model, top=10_000)
    points = document.to_pandas("series")[["op", "series", "batch_size", "mean_us"]]
    assert len(points) > 50
    return points


def _flags(points: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    fits = fit_lines(points).set_index(["op", "series"])
    return fits, breakeven_batch_sizes(fits.reset_index(), "CPU", "GPU").set_index("op")


@pytest.fixture(scope="module")
def h100_catalog(tmp_path_factory) -> Catalog:
    logdir = tmp_path_factory.mktemp("h100") / "demo"
    shutil.copytree(FIXTURES / "gpu_h100" / "demo", logdir)
    return Catalog(str(logdir))


def test_real_sweeps_flags_do_not_move_when_every_point_moves_one_ulp(h100_catalog):
    """The H100 recordings' CPU and GPU sweeps: every op's poor-fit flag and break-even
    side, and every fitted number to 1e-9, with all points one ulp up or down."""
    model = sweeps_document(h100_catalog).sweepable[0]
    points = _sweep_points(h100_catalog, model)
    fits, crossings = _flags(points)
    assert len(crossings) > 10 and set(fits.index.get_level_values("series")) >= {"CPU", "GPU"}
    for direction in (math.inf, -math.inf):
        moved_fits, moved_crossings = _flags(points.assign(mean_us=ulp(points["mean_us"], direction)))
        assert moved_fits["poor_fit"].equals(fits["poor_fit"])
        assert moved_crossings["target_faster"].equals(crossings["target_faster"])
        for column in ("fixed_us", "per_sample_us", "r2"):
            assert np.allclose(moved_fits[column], fits[column], rtol=1e-9, atol=1e-9), column


def test_real_compare_flags_do_not_move_when_every_time_moves_one_ulp(h100_catalog):
    runs = {source.run: source for source in h100_catalog.sources(refresh=True)}
    baseline = h100_catalog.load(next(run for run in runs if "_cpu_bs64" in run)).profile.op_table.frame()
    target = h100_catalog.load(next(run for run in runs if "_gpu_bs64" in run)).profile.op_table.frame()
    rows, summary = compare_ops(Table.from_frame(baseline), Table.from_frame(target))
    rows = compare_frame(rows)
    for direction in (math.inf, -math.inf):
        moved = baseline.assign(
            self_us=ulp(baseline["self_us"], direction), total_us=ulp(baseline["total_us"], direction)
        )
        moved_rows, moved_summary = compare_ops(Table.from_frame(moved), Table.from_frame(target))
        moved_rows = compare_frame(moved_rows)
        for column in ("status", "baseline_noisy", "target_noisy"):
            assert moved_rows[column].equals(rows[column]), column
        for count in ("faster_ops", "slower_ops", "noisy_ops", "matched_ops"):
            assert moved_summary[count] == summary[count], count
        assert moved_summary["geomean_speedup"] == pytest.approx(summary["geomean_speedup"], rel=1e-9)


def test_a_number_is_made_json_while_another_thread_imports_pandas(monkeypatch):
    """In TensorBoard the first screen's routes import no pandas, and another view's route,
    on another thread, may be importing it meanwhile: ``sys.modules`` then holds a pandas
    module with nothing in it yet. Reading its ``NA`` there answered the tab's first
    listing with a 500 (CI: seven third-party logdirs and Lightning's, opened on the Sweep)."""
    import types

    monkeypatch.setitem(sys.modules, "pandas", types.ModuleType("pandas"))  # as a half-done import leaves it
    assert finite_or_none(1.5) == 1.5 and finite_or_none(float("nan")) is None and finite_or_none(None) is None
