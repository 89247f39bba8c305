"""The gate on a noisy runner (issue 52): 4 runs a side of the one-thread demo CNN against
its 25% wider first dense layer (tests/fixtures/repeats_noisy, real recordings), one
baseline run slowed by a concurrent CPU load on its core for three of its five profiled
steps (its step: 39.6 ms against 16.9-26.1 ms for the other baseline runs).

Before, that one run hid the regression: the check passed with a plain PASS, reading
`aten::mm` 1.12x *faster* once adjusted for run speed (p 0.44) and `aten::addmm` 0.82x (p
0.0074), "within noise", the whole step within noise. Per execution, the runs' medians
separate cleanly (`aten::addmm` 344-422 µs against 421-548 µs).

Now the slowed run moves neither op of the wider layer, and the check says it has not
enough evidence rather than PASS. It cannot flag them among the 22 ops a default gate tests
here: four runs a side on this machine put their p-values at 0.5-1% against "at most 5%
slower", and each op of 22 needs 1.5%/22 = 0.07% (a permutation test on four runs a side
can reach no lower than 1/70 = 1.4%; ``benchmarks/bench_check.py``'s noisy runner and
docs/cli.md give the figures). A gate on the layer's ops fails, naming the slowed run."""

from __future__ import annotations

import math
import shutil

import msgspec
import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, run_cli

from tb_opcompare.analysis import confidence
from tb_opcompare.schema.contract import CheckDocument
from tb_opcompare.service import check
from tb_opcompare.service.check import check_document
from tb_opcompare.store.catalog import Catalog

NOISY = FIXTURES / "repeats_noisy" / "logdir"
BASELINE = [f"cnn_cpu_bs16_rep{k}" for k in (1, 2, 3, 4)]  # rep2: slowed for steps 5-7
TARGET = [f"cnnwide_cpu_bs16_rep{k}" for k in (1, 3, 4, 6)]
WIDER = ("aten::addmm", "aten::mm")  # the dense layers' forward and backward: 25% more work


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """A logdir holding only the runs compared, as a user's gate meets them."""
    path = tmp_path_factory.mktemp("noisy")
    for run in BASELINE + TARGET:
        shutil.copytree(NOISY / run, path / run)
    return path


@pytest.fixture(scope="module")
def document(logdir):
    return check_document(Catalog(str(logdir), cache_dir=None), BASELINE, TARGET)


def test_one_slow_run_no_longer_hides_the_wider_layer(logdir, document):
    """Each run's typical time and a speed factor centred on medians show both ops of the
    wider layer slower by about a fifth, as every run but the slowed one does: leaving the
    slowed run out moves neither estimate by more than 5%."""
    rows = {row.key: row for row in document.rows}
    without = check_document(Catalog(str(logdir), cache_dir=None), [BASELINE[0], *BASELINE[2:]], TARGET)
    alone = {row.key: row for row in without.rows}
    for key in WIDER:
        assert 0.7 < rows[key].adjusted_speedup < 0.87, rows[key]  # 15% slower or more
        assert rows[key].p_value < 0.02, rows[key]  # against "at most 5% slower"
        assert abs(math.log(rows[key].adjusted_speedup / alone[key].adjusted_speedup)) < math.log(1.05)
    assert not any(row.verdict == "faster" and row.gated for row in document.rows)


def test_a_gate_on_the_layer_s_ops_flags_the_regression_despite_the_slowed_run(logdir):
    """The issue's case as a gate meets it: the regression every other run agrees on fails
    the check, with the slowed run named, where the gate asks about the ops it covers. Four
    runs a side on this machine cannot flag it among the 22 ops a default gate tests (each
    then needs p below 1.5%/22 = 0.07%, and these read 0.5-1% against "at most 5% slower":
    ``test_the_verdict_is_not_a_plain_pass``); two ops need p below 0.75%."""
    document = check_document(Catalog(str(logdir), cache_dir=None), BASELINE, TARGET, ops=r"^aten::(addmm|mm)$")
    assert not document.passed
    assert {row.key for row in document.rows if row.verdict == "slower"} == set(WIDER)
    assert document.whole_step.verdict != "slower"
    assert "cnn_cpu_bs16_rep2" in document.outlier_runs


def test_an_op_the_wider_layer_does_not_touch_reads_unchanged(document):
    """``aten::convolution_backward`` runs once for each of the two convolutions a step, at
    two sizes: the median of its calls fell between the two, on the slowest call of the one
    and the fastest of the other, and read it 12% slower (0.879x) here. Its steps' median
    time per execution, as steady as a call of each, reads it unchanged; ``aten::div``, whose
    time in a step is one big call among seven small ones, keeps its median execution."""
    rows = {row.key: row for row in document.rows}
    assert 0.95 < rows["aten::convolution_backward"].adjusted_speedup < 1.08, rows["aten::convolution_backward"]
    assert rows["aten::convolution_backward"].verdict == "within noise"


def test_an_op_run_twice_a_step_is_tested_on_its_steps():
    """Per op, one statistic for every run compared (``log_run_typical``): for an op run
    twice in every step (two layers of one kind) the lower quartile of its steps' time per
    execution; for any other op its median execution."""
    catalog = Catalog(str(NOISY), cache_dir=None)
    samples = [confidence.profile_samples(catalog.load(run).profile) for run in BASELINE + TARGET]
    keys = pd.Index(["aten::convolution_backward", "aten::addmm", "aten::div", "aten::mm", "head"])
    typical = np.exp(confidence.log_run_typical(samples, keys))[:, :-1]
    columns = [[run.keys.get_loc(key) for run in samples] for key in keys]
    calls = np.array([[run.call_median_us[k] for run, k in zip(samples, column)] for column in columns]).T
    steps = np.array(
        [
            [np.quantile(run.step_time_us[:, k] / run.step_executions[:, k], 0.25) for run, k in zip(samples, column)]
            for column in columns
        ]
    ).T
    twice = [all((run.step_executions[:, k] == 2).all() for run, k in zip(samples, column)) for column in columns]
    assert twice == [True, True, False, False, False]
    assert typical[:, :2] == pytest.approx(steps[:, :2], rel=1e-9)
    assert typical[:, 2:] == pytest.approx(calls[:, 2:], rel=1e-9)
    assert not np.allclose(steps[:, :2], calls[:, :2], rtol=0.02)  # the two medians differ there


def test_a_0_percent_gate_can_have_enough_evidence():
    """``--max-regression 0%``: any significant slowdown fails. What such a check could see
    is answered for as for a 5% gate (twice it: 10%), not as twice 0%, which no test reaches:
    before, every 0% check that flagged nothing read NOT ENOUGH EVIDENCE."""
    assert check._enough(0.08, 0.0) and not check._enough(0.12, 0.0)
    assert check._enough(0.08, 0.05) and not check._enough(0.12, 0.05)
    assert check._enough(0.35, 0.2) and not check._enough(0.45, 0.2)
    assert not check._enough(None, 0.0)


def test_the_slowed_run_is_named_an_outlier_for_the_whole_step(document):
    assert "cnn_cpu_bs16_rep2" in document.outlier_runs
    assert any(
        warning.startswith("cnn_cpu_bs16_rep2: an outlier for the whole step (its step took 39.6 ms")
        for warning in document.warnings
    )


def test_the_verdict_is_not_a_plain_pass(document):
    """Four noisy runs a side cannot show a 10% regression of every big op here: the check
    says so, with the smallest change it could have seen, rather than PASS."""
    if document.passed:
        assert not document.enough_evidence
        assert document.headline.startswith("NOT ENOUGH EVIDENCE: no significant regression beyond 5%, but the ")
        assert f"smallest detectable change here is {document.detectable_change:.0%}" in document.headline
        assert document.detectable_change > 2 * document.threshold
    else:
        assert {row.key for row in document.rows if row.verdict == "slower"} <= set(WIDER)


def test_strict_makes_not_enough_evidence_exit_3(logdir, document):
    args = ["check", str(logdir), "--no-cache", "--baseline", ",".join(BASELINE), "--target", ",".join(TARGET)]
    plain = run_cli(*args)
    strict = run_cli(*args, "--strict", "--format", "json")
    if document.passed:
        assert plain.returncode == 0, plain.stderr
        assert strict.returncode == 3, strict.stderr
        assert "power:    the smallest detectable change here is" in plain.stdout
        assert "outliers: cnn_cpu_bs16_rep2" in plain.stdout
    else:
        assert plain.returncode == strict.returncode == 1
    assert msgspec.json.decode(strict.stdout, type=CheckDocument) == document
    markdown = run_cli(*args, "--format", "markdown").stdout
    assert markdown.startswith("### ⚠️ tb-opcompare check: NOT ENOUGH EVIDENCE" if document.passed else "### ❌")
