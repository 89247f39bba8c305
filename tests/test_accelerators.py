"""Accelerators beyond CUDA and ROCm, from the data (issue 32, item 2): Meta's MTIA traces
in ../shared/realtraces read as MTIA runs with their kernels, not as CPU runs."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from conftest import REALTRACES

from tb_opcompare.schema.events import DEVICE
from tb_opcompare.service.layers import layers_document
from tb_opcompare.service.matrix import matrix_document
from tb_opcompare.store.catalog import Catalog

ACCELERATORS = REALTRACES / "torch_hta_accelerators"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    logdir = tmp_path_factory.mktemp("accelerators") / "logs"
    shutil.copytree(ACCELERATORS, logdir)
    return Catalog(str(logdir), cache_dir=None)


def _raw(run: str) -> dict:
    (path,) = (ACCELERATORS / run).glob("*.json.gz")
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.mark.parametrize("run", ["mtia_inference", "mtia_train"])
def test_mtia_runs_are_mtia_runs_with_their_kernels(catalog, run):
    """The kernels: the command processor's events a runtime call launched (a correlation
    id), summed as the raw trace has them; DMA requests and waits without one are not."""
    raw = _raw(run)
    kernels = [
        event
        for event in raw["traceEvents"]
        if event.get("cat") == "mtia_ccp_events" and event.get("ph") == "X" and "correlation" in event.get("args", {})
    ]
    loaded = catalog.load(run)
    facts, ops = loaded.profile.facts, loaded.profile.op_table.frame()
    assert facts.device == "MTIA"
    names = [device["name"] for device in raw.get("deviceProperties", [])]
    assert facts.device_name == (", ".join(sorted(set(names))) or None)
    device = ops[ops["side"] == DEVICE]
    assert device["kernels"].sum() == len(kernels) > 200
    assert device["total_us"].sum() == pytest.approx(sum(event["dur"] for event in kernels), rel=1e-9)


def test_mtia_runtime_calls_are_the_runtime_layer_and_the_matrix_has_an_mtia_column(catalog):
    raw = _raw("mtia_train")
    runtime_us = sum(event["dur"] for event in raw["traceEvents"] if event.get("cat") == "mtia_runtime")
    layers = {row.layer: row for row in layers_document(catalog, "mi250_train", "mtia_train").layers}
    assert layers["runtime"].target_us * (catalog.load("mtia_train").profile.facts.steps or 1) == pytest.approx(
        runtime_us, rel=1e-6
    )
    columns = [column.device for column in matrix_document(catalog).columns]
    assert "MTIA" in columns and "GPU" in columns
