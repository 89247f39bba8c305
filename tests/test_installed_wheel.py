"""The product as users get it: the wheel and the sdist built from this checkout, the
wheel installed into a fresh virtual environment (not editable, the checkout nowhere on
sys.path), and TensorBoard from that environment showing the tab in Chromium.

Slow on a cold machine (it installs TensorBoard, pandas and plotly into the new
environment); pip's cache makes later runs quick.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import tomllib
from conftest import REPO, open_op_compare
from tensorboard_server import running_tensorboard

from tb_opcompare import __version__
from tb_opcompare.store.cache import READER_VERSION

# The version is written once, in the package (pyproject.toml reads it from there): read
# it from the source, never by importing the package the wheel is tested against.
VERSION = re.search(r'^__version__ = "([^"]+)"$', (REPO / "tb_opcompare/__init__.py").read_text(), re.M).group(1)

FRONTEND = sorted(
    path.relative_to(REPO / "frontend").as_posix()
    for path in (REPO / "frontend").rglob("*")
    if path.suffix in (".js", ".css")
)
# Neither the checkout nor the test environment may leak into the installed product.
CLEAN_ENV = {
    key: value
    for key, value in os.environ.items()
    if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")
}
PIP_INSTALL = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile")


def _run(*args, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(arg) for arg in args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=CLEAN_ENV
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy of the tracked files, as a fresh clone would be.
    source = tmp_path_factory.mktemp("source") / "tb-opcompare"
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    _run(sys.executable, "-m", "build", "--outdir", out, source, cwd=out)
    return out


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """A fresh virtual environment with only the wheel (and its dependencies) in it."""
    home = tmp_path_factory.mktemp("user")
    env = home / "env"
    _run(sys.executable, "-m", "venv", env, cwd=home)
    (wheel,) = dist.glob("*.whl")
    # --no-compile: pip compiling every module of pandas, plotly and TensorBoard took 20 of
    # the install's 36 s; the modules the tests import compile as they are imported.
    _run(env / "bin" / "python", *PIP_INSTALL, wheel, cwd=home)
    return env


def test_wheel_and_sdist_carry_the_tab_and_the_licence_and_nothing_borrowed(dist):
    (wheel,) = dist.glob("tb_opcompare-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert (
        sorted(n.removeprefix("tb_opcompare/frontend/") for n in names if n.startswith("tb_opcompare/frontend/"))
        == FRONTEND
    )
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if "demo_logs" in n or n.startswith("tests/")]
    (sdist,) = dist.glob("tb_opcompare-*.tar.gz")
    members = [m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m]
    assert {f"frontend/{name}" for name in FRONTEND} <= set(members)
    assert "LICENSE" in members and "pyproject.toml" in members
    assert not [m for m in members if "realtraces" in m]
    # the C extensions: compiled into the wheel, their sources in the sdist to build anywhere
    for extension in (
        "ingest/readers/_xplane_wire",
        "ingest/readers/_trace_scan",
        "schema/_groups",
        "service/_csv_lines",
    ):
        assert [n for n in names if n.startswith(f"tb_opcompare/{extension}.") and n.endswith(".so")]
        assert f"tb_opcompare/{extension}.c" in members
        assert f"tb_opcompare/{extension}.c" not in names


def test_installed_commands_work_outside_the_checkout(installed, tmp_path):
    demo = tmp_path / "logs"
    shutil.copytree(REPO / "demo_logs", demo)
    python, cli = installed / "bin" / "python", installed / "bin" / "tb-opcompare"
    where = _run(python, "-c", "import tb_opcompare; print(tb_opcompare.__file__)", cwd=tmp_path).stdout
    assert str(installed) in where and str(REPO) not in where
    native = _run(
        python, "-c", "from tb_opcompare.ingest.readers.xplane_wire import native; print(native())", cwd=tmp_path
    ).stdout
    assert "_xplane_wire" in native and str(installed) in native  # the reader runs the compiled loops
    scanner = _run(
        python,
        "-c",
        "from tb_opcompare import native; from tb_opcompare.ingest.readers import torch_trace; print(native.wanted(torch_trace._SCAN_HELPER))",
        cwd=tmp_path,
    ).stdout
    assert "_trace_scan" in scanner and str(installed) in scanner
    joiner = _run(
        python,
        "-c",
        "from tb_opcompare import native; from tb_opcompare.service import csv_export; "
        "print(native.wanted(csv_export._JOINER))",
        cwd=tmp_path,
    ).stdout
    assert "_csv_lines" in joiner and str(installed) in joiner
    assert _run(cli, "--version", cwd=tmp_path).stdout.strip() == f"tb-opcompare {VERSION}"
    listing = json.loads(_run(cli, "runs", demo, "--json", cwd=tmp_path).stdout)
    assert listing["errors"] == [] and len(listing["runs"]) == 40 and listing["version"] == VERSION
    # the precision x compiler matrix of both demo models, one run a cell
    matrix = list(csv.DictReader(io.StringIO(_run(cli, "matrix", demo, "--csv", "-", cwd=tmp_path).stdout)))
    assert len(matrix) == 40 and {line["runs"] for line in matrix} == {run["run"] for run in listing["runs"]}
    assert {(line["model"], line["compiler"]) for line in matrix if line["precision"] == "bf16"} == {
        ("mnist_cnn", "TF graph"),
        ("mnist_cnn", "XLA"),
        ("mnist_cnn_torch", "eager"),
        ("mnist_cnn_torch", "torch.compile"),
    }
    suggested = listing["suggested"]
    compared = _run(
        cli,
        "compare",
        demo,
        "--baseline",
        suggested["baseline"],
        "--target",
        suggested["target"],
        "--top",
        "3",
        cwd=tmp_path,
    ).stdout
    table_row = re.compile(r"\s+([\d.]+×|–)\s.* (matched|baseline_only|target_only) ")
    rows = [line for line in compared.splitlines() if table_row.match(line)]
    assert f"baseline: {suggested['baseline']}" in compared and len(rows) == 3
    # the regression gate, as a CI job would run it: exit 1 and the slowed op named first
    repeats = tmp_path / "repeats"
    shutil.copytree(REPO / "tests" / "fixtures" / "repeats" / "logdir", repeats)
    gate = subprocess.run(
        [
            str(cli),
            "check",
            str(repeats),
            "--baseline",
            "cnn_cpu_bs16_rep*",
            "--target",
            "cnnslow_cpu_bs16_rep*",
            "--format",
            "json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=CLEAN_ENV,
    )
    assert gate.returncode == 1, gate.stderr
    report = json.loads(gate.stdout)
    assert not report["passed"] and report["rows"][0]["key"] == "head" and report["rows"][0]["verdict"] == "slower"
    # the pooled compare, the layers and the memory of the same runs, from the installed package
    pooled = json.loads(
        _run(
            cli,
            "compare",
            repeats,
            "--baseline",
            "cnn_cpu_bs16_rep1",
            "--target",
            "cnnslow_cpu_bs16_rep1",
            "--repeats",
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    assert len(pooled["summary"]["baseline_runs"]) == 6 and len(pooled["summary"]["target_runs"]) == 6
    layers = json.loads(
        _run(
            cli,
            "layers",
            repeats,
            "--baseline",
            "cnn_cpu_bs16_rep1",
            "--target",
            "cnnslow_cpu_bs16_rep1",
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    assert "head" in {row["name"] for row in layers["rows"] if row["layer"] == "application"}
    memory = json.loads(
        _run(
            cli,
            "memory",
            repeats,
            "--baseline",
            "cnn_cpu_bs16_rep1",
            "--target",
            "cnnslow_cpu_bs16_rep1",
            "--json",
            cwd=tmp_path,
        ).stdout
    )
    assert memory["rows"] and memory["baseline"]["peak_memory_bytes"]["CPU"] > 0


def test_entry_point_loads_the_plugin_without_pandas_or_readers(installed, tmp_path):
    probe = (
        "import sys, importlib.metadata as md\n"
        "from tensorboard.plugins.base_plugin import TBContext\n"
        "(entry,) = [e for e in md.entry_points(group='tensorboard_plugins') if e.name == 'op_compare']\n"
        "class Flags: pass\n"
        f"plugin = entry.load()().load(TBContext(logdir={str(tmp_path)!r}, flags=Flags()))\n"
        "plugin.get_plugin_apps(); plugin.is_active()\n"
        "print(sorted(m for m in ('pandas', 'numpy', 'tb_opcompare.store.catalog', 'tb_opcompare.ingest.readers.xplane') "
        "if m in sys.modules))\n"
    )
    assert _run(installed / "bin" / "python", "-c", probe, cwd=tmp_path).stdout.strip() == "[]"


def test_installed_tab_renders_rows_and_the_batch_sweep(installed, tmp_path, page):
    demo = tmp_path / "logs"
    shutil.copytree(REPO / "demo_logs", demo)
    with running_tensorboard(
        demo,
        python=str(installed / "bin" / "python"),
        cwd=tmp_path,
        env={"TB_OPCOMPARE_CACHE_DIR": str(tmp_path / "cache")},
        tensorflow=True,  # as a user's install runs it
    ) as url:
        frame = open_op_compare(page, url)
        frame.locator("tr.oc-row >> nth=4").wait_for(timeout=60_000)
        assert frame.locator("#oc-count").inner_text().startswith("Showing ")
        # The demo's suggested pair is its CPU->GPU pair (PyTorch, H100): no "no accelerator" notice.
        assert "H100" in frame.locator("body").inner_text()
        assert "No accelerator run" not in frame.locator("body").inner_text()
        assert frame.locator("#oc-version").inner_text() == f"tb-opcompare {VERSION}"
        frame.locator("button[data-page='sweep']").click()
        frame.locator("#oc-sweep-op_time .scatterlayer .trace >> nth=2").wait_for(timeout=60_000)
        assert frame.locator("#oc-sweep-step .scatterlayer .point").count() >= 3
        assert not page.page_errors


def test_installed_tab_over_a_bucket_logdir_reads_the_index_not_the_profiles(installed, dist, tmp_path, page):
    """`pip install tb-opcompare[s3]`, `tb-opcompare index s3://…` as a writer, then
    `tensorboard --logdir s3://…` as a reader (TensorBoard without TensorFlow reads the
    bucket through its own boto3 layer, the plugin through fsspec): the tab shows the
    demo's runs from the shared index, fetching not one profile from the bucket."""
    from s3_server import s3_server

    (wheel,) = dist.glob("*.whl")
    _run(
        installed / "bin" / "python",
        *PIP_INSTALL,
        f"{wheel}[s3]",
        "boto3",
        "-c",
        REPO / "tests" / "constraints.txt",
        cwd=tmp_path,
    )
    with s3_server(tmp_path / "moto.log") as server:
        server.upload(REPO / "demo_logs", "team", "logs")
        indexing = subprocess.run(
            [str(installed / "bin" / "tb-opcompare"), "index", "s3://team/logs", "--no-cache"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
            env={**CLEAN_ENV, **server.env("writer")},
        )
        assert indexing.returncode == 0 and "40 read" in indexing.stdout, indexing.stdout + indexing.stderr
        since = len(server.requests())
        reader = {**server.env("reader"), "S3_ENDPOINT": server.url, "TB_OPCOMPARE_CACHE_DIR": str(tmp_path / "cache")}
        with running_tensorboard(
            "s3://team/logs", python=str(installed / "bin" / "python"), cwd=tmp_path, env=reader, tensorflow=True
        ) as url:
            frame = open_op_compare(page, url)
            frame.locator("tr.oc-row >> nth=4").wait_for(timeout=60_000)
            assert "H100" in frame.locator("body").inner_text()
            # each run card says where its numbers came from: the team's index, and who wrote it
            assert (
                frame.locator(".oc-read-from").all_inner_texts()
                == [
                    f"read from the shared index (.opcompare/), written by tb-opcompare {__version__} (reader {READER_VERSION})"
                ]
                * 2
            )
            listing = json.loads(
                subprocess.run(
                    ["curl", "-s", f"{url}/data/plugin/op_compare/runs"], capture_output=True, text=True
                ).stdout
            )
            assert len(listing["runs"]) == 40 and listing["errors"] == []
            assert not page.page_errors
        profiles = [
            path
            for method, path in server.requests()[since:]
            if method == "GET" and re.search(r"\.(pb|json|json\.gz)$", path) and "/.opcompare/" not in path
        ]
        assert profiles == []


def test_the_version_is_written_once():
    """pyproject.toml takes the version from the package, so the two cannot disagree."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tb_opcompare.__version__"}
