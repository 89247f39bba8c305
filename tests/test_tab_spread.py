"""The op table's spread whiskers: after each mean, p10–p90 and the median on the row's own
scale, drawn in a real browser (Debian's Chromium driven by Playwright) against a real
TensorBoard process."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

from conftest import open_op_compare

WIDTH = 40  # px, .oc-whisker-slot in frontend/style.css
SCREENSHOT = "/tmp/opcompare-whisker.png"

# Both mean cells of the one row shown: the whisker's numbers (its data-* attributes) and
# where its range and median tick lie, in px from its left edge.
MEAN_CELLS = """table => {
    const names = [...table.querySelectorAll('th')].map(th => th.dataset.column);
    const cells = table.querySelectorAll('tr.oc-row td');
    const read = (cell) => {
        const whisker = cell.querySelector('.oc-whisker');
        if (!whisker) return {title: cell.title, text: cell.innerText, whisker: null};
        const box = whisker.getBoundingClientRect();
        const range = whisker.querySelector('.oc-whisker-range').getBoundingClientRect();
        const tick = whisker.querySelector('.oc-whisker-median');
        const median = tick.getBoundingClientRect();
        return {title: cell.title, text: cell.innerText, whisker: {
            data: Object.fromEntries(['p10', 'median', 'p90', 'scale'].map(k => [k, Number(whisker.dataset[k])])),
            width: box.width, p10: range.left - box.left, p90: range.right - box.left,
            median: (median.left + median.right) / 2 - box.left,
            tick: getComputedStyle(tick).backgroundColor}};
    };
    return {baseline: read(cells[names.indexOf('baseline_mean_us')]),
            target: read(cells[names.indexOf('target_mean_us')])};
}"""


def compare(url: str, **pair) -> list[dict]:
    query = urllib.parse.urlencode(pair)
    with urllib.request.urlopen(f"{url}/data/plugin/op_compare/compare?{query}") as response:
        return json.loads(response.read())["rows"]


def spread(row: dict, side: str) -> tuple[float, float, float] | None:
    values = tuple(row[f"{side}_{name}_us"] for name in ("p10", "median", "p90"))
    return None if None in values else values


def test_each_mean_has_a_whisker_of_its_spread_on_the_rows_own_scale(browser, tensorboard_url):
    context = browser.new_context(viewport={"width": 1500, "height": 900}, color_scheme="dark")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    # a row with a wide, distinct p10 < median < p90 on both sides
    pair = {"baseline": "torch/cnn_torch_cpu_bs4", "target": "torch/cnn_torch_cpu_bs16"}
    row = next(r for r in compare(tensorboard_url, **pair) if r["key"] == "aten::convolution_backward")
    sides = {side: spread(row, side) for side in ("baseline", "target")}
    assert all(values and values[0] < values[1] < values[2] for values in sides.values())
    scale = max(values[2] for values in sides.values())
    frame = open_op_compare(page, tensorboard_url, q="/^aten::convolution_backward$/", **pair)
    frame.locator("#oc-count", has_text="Showing 1 of").wait_for()
    frame.locator("tr.oc-row .oc-whisker").first.wait_for()
    cells = frame.locator("table").first.evaluate(MEAN_CELLS)
    for side, (p10, median, p90) in sides.items():
        cell = cells[side]
        assert cell["title"].startswith("mean ") and "p10–p90" in cell["title"]  # the tooltip stays
        whisker = cell["whisker"]
        assert whisker, f"no whisker in the {side} mean"
        assert whisker["data"] == {"p10": p10, "median": median, "p90": p90, "scale": scale}
        assert whisker["width"] == WIDTH
        assert 0 <= whisker["p10"] < whisker["median"] < whisker["p90"] <= WIDTH
        for name, value in (("p10", p10), ("median", median), ("p90", p90)):
            assert abs(whisker[name] - value / scale * WIDTH) <= 1, (side, name, whisker)
        assert whisker["tick"] == "rgb(239, 141, 46)"  # --oc-accent of the dark theme
    # the larger p90 of the two ends the track: that side's range reaches the whisker's end
    wider = max(sides, key=lambda side: sides[side][2])
    assert abs(cells[wider]["whisker"]["p90"] - WIDTH) <= 1
    frame.locator(".oc-table-scroll[aria-label=ops]").screenshot(path=SCREENSHOT)

    # a GPU op's kernels, not told apart per occurrence: no percentiles, no whisker
    pair = {"baseline": "tf1/mlp_cpu", "target": "tf1/mlp_gpu"}
    bare = next(
        r
        for r in compare(tensorboard_url, **pair)
        if r["target_mean_us"] is not None and spread(r, "target") is None and spread(r, "baseline")
    )
    frame = open_op_compare(page, tensorboard_url, q=f"/^{re.escape(bare['key'])}$/", **pair)
    frame.locator("#oc-count", has_text="Showing 1 of").wait_for()
    cells = frame.locator("table").first.evaluate(MEAN_CELLS)
    assert cells["target"]["whisker"] is None and cells["target"]["text"].strip()
    assert cells["baseline"]["whisker"] is not None
    assert frame.locator("tr.oc-row .oc-whisker").count() == 1
    assert not errors
    context.close()
