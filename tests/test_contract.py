"""The typed contract (``tb_opcompare.schema.contract``): its generated files are current,
and every document the routes served for the golden files, and every error they answer,
decodes strictly against it."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest
from conftest import REPO
from in_process import PREFIX, plugin_client

from tb_opcompare.schema import contract

GOLDEN = Path(__file__).parent / "golden"
DOCUMENT_OF_FILE = [
    (re.compile(r"runs(_lazy)?\.json"), contract.RunsDocument),
    (re.compile(r"pair\d+_compare(_by_type|_view)?\.json"), contract.CompareDocument),
    (re.compile(r"sweeps\.json"), contract.SweepsDocument),
    (re.compile(r"sweep\d+\.json"), contract.SweepDocument),
]


@pytest.mark.parametrize("relative", sorted(contract.GENERATED))
def test_generated_files_are_current(relative):
    committed = (REPO / relative).read_text(encoding="utf-8")
    assert committed == contract.GENERATED[relative](), (
        f"{relative} is out of date with tb_opcompare/schema/contract.py: run `make contract`"
    )


def _golden_documents():
    for path in sorted(GOLDEN.glob("*/*.json")):
        kind = next((document for pattern, document in DOCUMENT_OF_FILE if pattern.fullmatch(path.name)), None)
        if kind is not None:
            yield pytest.param(path, kind, id=f"{path.parent.name}/{path.name}")


@pytest.mark.parametrize("path, document", list(_golden_documents()))
def test_every_golden_document_fits_the_contract(path, document):
    status, _, body = path.read_bytes().partition(b"\n")
    assert status.startswith(b"200"), path
    decoded = msgspec.json.decode(body, type=document, strict=True)
    # nothing served is left out of the contract: encoding what was decoded gives the same keys
    assert msgspec.json.decode(msgspec.json.encode(decoded)).keys() == msgspec.json.decode(body).keys()


def test_the_golden_files_cover_every_document():
    covered = {document for _, document in (p.values for p in _golden_documents())}
    assert covered == {contract.RunsDocument, contract.CompareDocument, contract.SweepsDocument, contract.SweepDocument}


@pytest.mark.parametrize(
    "route, code",
    [
        ("/compare?baseline=nope&target=nope", 404),
        ("/compare?baseline=a", 400),
        ("/compare?baseline=broken/cnn_cpu_truncated/train&target=broken/cnn_cpu_truncated/train", 422),
        ("/sweep?model=mnist&top=99", 400),
    ],
)
def test_errors_fit_the_contract(plugin_logdir, route, code):
    response = plugin_client(plugin_logdir).get(PREFIX + route)
    assert response.status_code == code
    error = msgspec.json.decode(response.get_data(), type=contract.ErrorDocument, strict=True).error
    assert error.status == code and error.message


def test_compare_columns_are_the_rows_fields():
    assert contract.COMPARE_COLUMNS[:5] == ["key", "op_type", "status", "speedup", "delta_mean_us"]
    assert {f"{side}_mean_us" for side in contract.SIDES} <= set(contract.COMPARE_COLUMNS)


def test_every_route_is_mounted_served_and_documented():
    """The loader mounts its routes before pandas is imported, so it lists them itself;
    the list must match the routes served and the generated API document."""
    from tb_opcompare.schema.contract import ROUTES
    from tb_opcompare.store.settings import ReadSettings
    from tb_opcompare.web.plugin import DATA_ROUTES
    from tb_opcompare.web.routes import DataRoutes

    served = set(DataRoutes(".", ReadSettings.from_options(None, True, 0)).apps)
    assert set(DATA_ROUTES) == served == {f"/{route}" for route, _, _ in ROUTES}
