"""The third-party tier in a real browser (issue 32): TensorBoard on each whole logdir that
other people wrote (``test_third_party_tier.LOGDIRS``, from ``../shared/realtraces``), and
every page of the tab opened cold on it, as a newcomer would. Each page is filled, or says
in a note why not and how to record what it needs; none shows an error, throws, or stays
blank; the Compare page's first figure is the route's headline."""

from __future__ import annotations

import pytest
from conftest import console_errors, open_op_compare, reopen_op_compare, route_json
from tensorboard_server import running_tensorboard
from test_third_party_tier import LOGDIRS, assemble

from tb_opcompare.text import format_speedup

# Each page: what shows when it is filled, and the note that says why it is not.
PAGES = {
    "compare": ("#oc-count", "#oc-message"),
    "sweep": ("#oc-sweep-step .scatterlayer .point", "#oc-sweep-empty"),
    "trend": ("#oc-trend-ops .scatterlayer .point", "#oc-trend-message"),
    "matrix": ("#oc-matrix-table tbody tr", "#oc-matrix-message"),
    "modules": ("#oc-modules-table tbody tr", "#oc-modules-notes .oc-panel-note"),
    "memory": ("#oc-memory-table tbody tr", "#oc-memory-message"),
    "layers": ("#oc-layers-summary tbody tr", "#oc-layers-message"),
    "roofline": ("#oc-roofline-table tbody tr.oc-roofline-row", "#oc-roofline-notes .oc-roofline-note"),
}


@pytest.fixture(scope="module", params=sorted(LOGDIRS))
def tier_tensorboard(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param) / "logdir"
    assemble(request.param, root)
    with running_tensorboard(root) as url:
        yield url


def test_every_page_of_the_tab_is_filled_or_says_why(page, tier_tensorboard):
    url = tier_tensorboard
    errors = console_errors(page)
    runs = route_json(url, "runs")
    suggested = runs["suggested"]
    compare = route_json(url, "compare", baseline=suggested["baseline"], target=suggested["target"])
    shown = {}
    for name, (filled, why) in PAGES.items():
        # each page opens cold: TensorBoard once, then the tab's frame reloaded on each page
        if name == "compare":
            frame = open_op_compare(page, url, ready=f"{filled}, {why}")
        else:
            frame = reopen_op_compare(page, ready=f"{filled}, {why}", view=name)
        frame.locator(".oc-loading").first.wait_for(state="hidden", timeout=60_000)
        # a note saying why outranks rows (Modules lists its root row beside "no nn.Module calls")
        notes = frame.locator(why)
        shown[name] = notes.first.inner_text() if notes.count() else "filled"
        assert frame.locator(".oc-panel-error").count() == 0, (
            name,
            frame.locator(".oc-panel-error").first.inner_text(),
        )
        if name == "compare":
            # the default pair is the listing's suggestion, and its first figure the route's
            assert frame.locator("#oc-headline").inner_text() == format_speedup(compare["summary"]["headline_speedup"])
            picked = [frame.locator(f"#oc-{side}").input_value() for side in ("baseline", "target")]
            assert picked == [suggested["baseline"], suggested["target"]]
            _where_the_time_went(frame, compare["summary"])
    # the pages a logdir of any profiles can fill, filled; the others say why in words
    assert shown["compare"] == shown["matrix"] == shown["trend"] == "filled", shown
    for name, text in shown.items():
        assert text == "filled" or len(text) > 40, (name, text)
    assert not errors and not page.page_errors


def _where_the_time_went(frame, summary: dict) -> None:
    """Issue 53: the waterfall under the headline, its bars the route's (each part's change,
    from the baseline's step to the target's), in words a newcomer reads; where a side's
    profile splits no step, the card says so instead of drawing nothing."""
    breakdown = summary["breakdown"]
    caption = frame.locator("#oc-breakdown-caption")
    if breakdown is None:
        assert caption.inner_text() == summary["breakdown_note"] and summary["breakdown_note"]
        return
    frame.locator("#oc-waterfall .main-svg").first.wait_for(timeout=60_000)
    drawn = frame.locator("#oc-waterfall").evaluate("el => ({x: el.data[0].x, y: el.data[0].y})")
    host = [part for part in breakdown["parts"] if part["side"] == "host"]
    assert drawn["x"] == ["baseline step", *(part["label"] for part in host), "target step"]
    expected = [breakdown["baseline_wall_us"], *(part["change_us"] for part in host), breakdown["target_wall_us"]]
    assert drawn["y"] == pytest.approx([us / 1000 for us in expected], rel=1e-12)
    assert caption.inner_text().startswith("The median steady step of each side")
