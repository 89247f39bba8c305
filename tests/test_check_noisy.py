"""The gate on a noisy runner (issue 52): 4 runs a side of the one-thread demo CNN against
its 25% wider first dense layer (tests/fixtures/repeats_noisy, real recordings), one
baseline run slowed by a concurrent CPU load on its core for three of its five profiled
steps (its step: 39.6 ms against 16.9-26.1 ms for the other baseline runs).

Before, that one run hid the regression: the check passed with a plain PASS, reading
`aten::mm` 1.12x *faster* once adjusted for run speed (p 0.44) and `aten::addmm` 0.82x (p
0.0074), "within noise", the whole step within noise. Per execution, the runs' medians
separate cleanly (`aten::addmm` 344-422 µs against 421-548 µs)."""

from __future__ import annotations

import shutil

import msgspec
import pytest
from conftest import FIXTURES, run_cli

from tb_opcompare.schema.contract import CheckDocument
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


def test_one_slow_run_no_longer_hides_the_wider_layer(document):
    """Each run's median per execution, and a speed factor centred on medians, show both
    ops of the wider layer slower by about a quarter, as every run but the slowed one does."""
    rows = {row.key: row for row in document.rows}
    for key in WIDER:
        assert 0.7 < rows[key].adjusted_speedup < 0.87, rows[key]  # 15% slower or more
        assert rows[key].speedup_high < 1, rows[key]  # its 99%+ interval is all slower
        assert rows[key].p_value < 0.01, rows[key]
    assert not any(row.verdict == "faster" and row.gated for row in document.rows)


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
