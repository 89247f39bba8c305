"""A comparison bigger than the tab holds (issue 33: a million-op comparison was one 858 MB
answer and took TensorBoard to 3.6 GB): two real-format PyTorch traces of 30,000 distinct
ops each, in a real browser against a real TensorBoard. The tab holds the first 20,000
rows (`MAX_TAB_ROWS`), says so, and lets the server filter and order every row; the CSV
holds them all."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import console_errors, open_op_compare, route, route_json
from tensorboard_server import running_tensorboard

OPS = 30_000
MAX_TAB_ROWS = 20_000  # frontend/state.js


def _trace(scale: int) -> bytes:
    event = '{"ph":"X","cat":"cpu_op","name":"aten::op%d","pid":1,"tid":1,"ts":%d,"dur":%d}'
    events = ",".join(event % (k, 10 * k, 1 + (k * scale) % 7) for k in range(OPS))
    return ('{"schemaVersion":1,"traceEvents":[' + events + "]}").encode()


@pytest.fixture(scope="module")
def big_tensorboard_url(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("big") / "logdir"
    for name, scale in (("wide_cpu", 1), ("wide_gpu", 3)):
        (logdir / name).mkdir(parents=True)
        (logdir / name / "w.1.pt.trace.json").write_bytes(_trace(scale))
    with running_tensorboard(logdir) as url:
        yield url


def test_a_comparison_bigger_than_the_tab_holds_is_capped_and_said(page, big_tensorboard_url):
    url = big_tensorboard_url
    errors = console_errors(page)
    pair = {"baseline": "wide_cpu", "target": "wide_gpu"}
    frame = open_op_compare(page, url, ready="#oc-count", **pair)
    assert frame.locator("#oc-count").inner_text() == (
        "Showing the first 20,000 of 30,000 matching ops (of 30,000); the CSV has them all"
    )
    # a filter runs on the server, over every row: 11,111 keys hold "op1" (op1, op10-19, ...)
    frame.locator("#oc-filter").fill("op1")
    frame.locator("#oc-count", has_text="Showing 11,111 of 30,000 ops").wait_for(timeout=30_000)
    expected = route_json(url, "compare", **pair, q="op1", top=MAX_TAB_ROWS)
    assert expected["view_rows"] == 11_111
    first = frame.locator(".oc-table-scroll[aria-label=ops] tr.oc-row >> nth=0").get_attribute("data-key")
    assert first == expected["rows"][0]["key"]
    status, body = route(url, "compare.csv", **pair)
    assert status == 200 and len(list(csv.reader(io.StringIO(body.decode())))) == OPS + 1
    assert not errors and not page.page_errors


def test_the_route_counts_the_rows_its_view_keeps_before_top(big_tensorboard_url):
    status, body = route(big_tensorboard_url, "compare", baseline="wide_cpu", target="wide_gpu", q="op2", top=5)
    document = json.loads(body)
    assert status == 200 and len(document["rows"]) == 5
    assert document["view_rows"] == 11_111 and document["total_rows"] == OPS
