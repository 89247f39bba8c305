"""The Compare tab grouped by module (issue 17), on a real TensorBoard serving the demo's
PyTorch CNN recorded with Python stacks on an H100 (tests/fixtures/gpu_h100/modules)."""

from __future__ import annotations

import json

from conftest import TAB_FRAME, open_op_compare, route, tab_state

RUN = "mnist_cnn_torch_stack_gpu_bs16"


def test_the_table_groups_by_module_and_the_confidence_card_says_why_it_stays_per_op(page, modules_tensorboard_url):
    url = modules_tensorboard_url
    frame = open_op_compare(page, url, baseline=RUN, target=RUN)
    frame.locator("button[data-group-by=module]").click()
    frame.locator("tr.oc-row[data-key='Sequential_0/Conv2d_0']").wait_for()
    status, body = route(url, "compare", baseline=RUN, target=RUN, group_by="module")
    assert status == 200
    expected = [row["key"] for row in json.loads(body)["rows"]]
    shown = frame.locator("tr.oc-row").evaluate_all("rows => rows.map(row => row.dataset.key)")
    assert sorted(shown) == sorted(expected) and "(outside modules)" in shown
    assert frame.locator("button[data-group-by=module]").get_attribute("aria-pressed") == "true"
    assert tab_state(page)["group_by"] == "module"
    frame.locator(".oc-confidence", has_text="modules are for the compare table").wait_for()
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    frame.locator("tr.oc-row[data-key='Sequential_0/Linear_0']").wait_for(timeout=60_000)
    assert not page.page_errors
