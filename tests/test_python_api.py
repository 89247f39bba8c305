"""The Python API (issue 58): the views as calls for notebooks, returning the documents the
HTTP routes serve, with their tables as pandas; and docs/python_api.ipynb, executed here
in a real Jupyter kernel, cell by cell, as a user would run it."""

from __future__ import annotations

import subprocess
import sys

import msgspec
import pytest
from conftest import REPO
from in_process import PREFIX, plugin_client

import tb_opcompare as oc
from tb_opcompare.errors import UnknownRunError, UsageError
from tb_opcompare.schema.contract import CheckDocument, CompareDocument, MatrixDocument

DEMO = REPO / "demo_logs"
CPU, GPU = "torch/mnist_cnn_torch_cpu_bs64", "torch/mnist_cnn_torch_gpu_bs64"


@pytest.fixture(scope="module")
def logs():
    return oc.open_logdir(str(DEMO), cache_dir="none")


def _route(name: str, document_type, **params):
    query = "&".join(f"{key}={value}" for key, value in params.items())
    answer = plugin_client(DEMO).get(f"{PREFIX}/{name}?{query}")
    assert answer.status_code == 200
    return msgspec.json.decode(answer.data, type=document_type)


def test_the_api_answers_what_the_routes_serve(logs):
    """compare, matrix and check from Python equal the HTTP routes' documents for the same
    arguments, and their tables come out as DataFrames, one column a field."""
    compared = logs.compare(CPU, GPU)
    assert msgspec.json.encode(compared) == msgspec.json.encode(
        _route("compare", CompareDocument, baseline=CPU, target=GPU)
    )
    frame = compared.to_pandas()
    assert list(frame.columns) == compared.columns and len(frame) == len(compared.rows)
    assert frame["key"].tolist() == [row["key"] for row in msgspec.to_builtins(compared.rows)]
    matrix = logs.matrix(part="launch")
    assert matrix == _route("matrix", MatrixDocument, part="launch")
    assert len(matrix.to_pandas()) == len(matrix.cells)
    check = logs.check(GPU, CPU, allow_one_run=True)
    routed = _route("check", CheckDocument, baseline=GPU, target=CPU, allow_one_run=1)
    assert (check.passed, check.headline) == (routed.passed, routed.headline)
    assert not check.passed  # the CPU is slower than the GPU: a regression, named
    parts = compared.summary.breakdown.to_pandas()
    assert parts["change_us"][parts["side"] == "host"].sum() == pytest.approx(
        compared.summary.target_step_wall_us - compared.summary.baseline_step_wall_us, abs=1e-3
    )


def test_a_stored_baseline_in_another_logdir_gives_the_check_of_one_logdir(tmp_path):
    """``check(..., baseline_logdir=...)``: the main branch's runs kept apart from the runs
    just recorded; the verdicts are those of the same runs checked in one logdir."""
    import shutil

    from conftest import FIXTURES

    stored = FIXTURES / "repeats" / "logdir"
    for run in stored.glob("cnnslow_cpu_bs16_rep*"):
        shutil.copytree(run, tmp_path / "recorded" / run.name)
    apart = oc.check(
        str(tmp_path / "recorded"), "cnn_cpu_bs16_rep*", "cnnslow_cpu_bs16_rep*", baseline_logdir=str(stored)
    )
    together = oc.check(str(stored), "cnn_cpu_bs16_rep*", "cnnslow_cpu_bs16_rep*")
    assert apart.baseline_logdir == str(stored) and together.baseline_logdir is None
    assert (apart.passed, apart.headline, apart.baseline, apart.target) == (
        together.passed,
        together.headline,
        together.baseline,
        together.target,
    )
    assert [(row.key, row.verdict) for row in apart.rows] == [(row.key, row.verdict) for row in together.rows]


def test_the_api_raises_the_packages_own_errors(logs):
    with pytest.raises(UnknownRunError):
        logs.compare("no_such_run", GPU)
    with pytest.raises(UsageError, match="part: expected a part of the step"):
        logs.matrix(part="nope")
    with pytest.raises(UsageError, match="holds no table named 'nope'"):
        logs.compare(CPU, GPU).to_pandas("nope")


def test_importing_the_package_stays_cheap():
    """TensorBoard imports the plugin at start-up: the API's names load it on first use."""
    code = "import sys, tb_opcompare; assert 'pandas' not in sys.modules and 'tb_opcompare.api' not in sys.modules"
    code += "; tb_opcompare.open_logdir; assert 'tb_opcompare.api' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_documented_notebook_runs(tmp_path):
    """docs/python_api.ipynb, executed in a Jupyter kernel from docs/ as a user opens it:
    every cell runs, and what it shows is what the API answers."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(REPO / "docs" / "python_api.ipynb", as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(REPO / "docs")}}
    ).execute()
    outputs = [
        "".join(output.get("text", "") or output.get("data", {}).get("text/plain", "") for output in cell.outputs)
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]
    assert all(outputs), outputs  # every cell shows something, and none an error (execute raises)
    headline = oc.compare(str(DEMO), CPU, GPU).summary.headline_speedup
    assert outputs[1].startswith(f"{headline:.2f}x faster (step wall time)")
    assert "host compute: forward and other" in outputs[2]
