"""The Compare view's pair select in a real browser (Debian's Chromium driven by Playwright)
against a real TensorBoard on a copy of demo_logs: beside the CPU -> accelerator pairs it
lists the pairs that differ in precision or compiler only, grouped, each said by what
differs; choosing one loads that comparison, and a reload keeps it chosen."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, TAB_FRAME, console_errors, open_op_compare, route, route_json, tab_state, tensorboard_on_copy

SCREENSHOT = "/tmp/opcompare-variant-pairs.png"
PAIR_SELECT = "select[aria-label='suggested pair']"
GROUPS = {"device": "CPU → accelerator", "precision": "Precision (fp32 → …)", "compiler": "Compiler (eager → …)"}
# fp32 -> bf16 on the H100 at batch 64, eager on both sides; and the same under torch.compile
PRECISION_PAIR = ("torch/mnist_cnn_torch_gpu_bs64", "torch/mnist_cnn_torch_gpu_bs64_bf16_eager")
PRECISION_LABEL = "mnist_cnn_torch · GPU · batch 64: fp32 → bf16"
COMPILED_PRECISION_LABEL = "mnist_cnn_torch · GPU · batch 64 · torch.compile: fp32 → bf16"
COMPILER_LABEL = "mnist_cnn_torch · GPU · batch 64: eager → torch.compile"


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory):
    """TensorBoard on a copy of demo_logs: 40 runs, fp32/bf16 x eager/compiled x batch 1/16/64
    of a PyTorch CNN on CPU and H100, and of a Keras CNN on CPU (eager and XLA); the PyTorch CNN
    with stacks on the CPU and H200 of one host."""
    with tensorboard_on_copy(tmp_path_factory, REPO / "demo_logs") as url:
        yield url


def pair_groups(frame) -> list[dict]:
    """The pair select's groups as shown: label, and each option's label, value and title."""
    return frame.locator(f"{PAIR_SELECT} optgroup").evaluate_all(
        "groups => groups.map(g => ({label: g.label, varies: g.dataset.varies, options: [...g.children].map("
        "o => ({label: o.textContent, value: o.value, title: o.title}))}))"
    )


def wait_for_pairs(frame, count: int):
    """Until the select lists `count` pairs: the full listing's (the tab first lists the runs
    unread, from their names and sidecars, then again once every trace has been read)."""
    frame.locator(f"{PAIR_SELECT} optgroup option >> nth={count - 1}").wait_for(state="attached", timeout=60_000)


def wait_for_compare(frame, baseline: str, target: str):
    """Until the summary's run cards name `baseline` and `target`."""
    for side, run in (("baseline", baseline), ("target", target)):
        card = frame.locator(".oc-run-card", has=frame.locator(".oc-card-title", has_text=side))
        card.locator(f".oc-run-name[title='{run}']").wait_for(timeout=60_000)


def test_variant_pairs_are_grouped_chosen_and_kept_over_a_reload(page, demo_url):
    errors = console_errors(page)
    document = route_json(demo_url, "runs")
    expected = {
        "device": document["pairs"],
        **{
            varies: [pair for pair in document["variant_pairs"] if pair["varies"] == varies]
            for varies in ("precision", "compiler")
        },
    }
    assert len(document["runs"]) == 40 and len(document["pairs"]) == 14
    assert len(expected["precision"]) == 18 and len(expected["compiler"]) == 18
    assert all(pair["varies"] == "device" for pair in document["pairs"])

    frame = open_op_compare(page, demo_url, ready="#oc-count")
    wait_for_pairs(frame, sum(map(len, expected.values())))
    groups = pair_groups(frame)
    assert [group["label"] for group in groups] == list(GROUPS.values())
    assert [group["varies"] for group in groups] == list(GROUPS)
    for group in groups:
        pairs = expected[group["varies"]]
        assert len(group["options"]) == len(pairs), group["label"]
        # each option is one of the group's pairs, every pair once
        assert sorted(option["title"] for option in group["options"]) == sorted(
            f"{pair['baseline']} → {pair['target']}" for pair in pairs
        )
        labels = [option["label"] for option in group["options"]]
        assert len(set(labels)) == len(labels), labels  # told apart by their labels alone
    # the CPU -> accelerator pairs as before: their run names
    assert [option["label"] for option in groups[0]["options"]] == [
        f"{pair['baseline']} → {pair['target']}" for pair in document["pairs"]
    ]
    # the variant pairs say what differs, after what the two runs share
    by_title = {option["title"]: option for group in groups for option in group["options"]}
    assert by_title[" → ".join(PRECISION_PAIR)]["label"] == PRECISION_LABEL
    assert (
        by_title["torch/mnist_cnn_torch_gpu_bs64_fp32_compile → torch/mnist_cnn_torch_gpu_bs64_bf16_compile"]["label"]
        == COMPILED_PRECISION_LABEL
    )
    assert (
        by_title["torch/mnist_cnn_torch_gpu_bs64 → torch/mnist_cnn_torch_gpu_bs64_fp32_compile"]["label"]
        == COMPILER_LABEL
    )
    assert all(
        ":" in option["label"] and " → " in option["label"] for group in groups[1:] for option in group["options"]
    )
    # the suggested CPU -> GPU pair the tab opened on is the one selected
    suggested = document["suggested"]
    assert (
        frame.locator(PAIR_SELECT).input_value()
        == by_title[f"{suggested['baseline']} → {suggested['target']}"]["value"]
    )
    assert frame.locator("#oc-count").is_visible()

    # choosing a precision pair loads that comparison
    baseline, target = PRECISION_PAIR
    frame.locator(PAIR_SELECT).select_option(label=PRECISION_LABEL)
    page.wait_for_function(f"() => location.hash.includes({json.dumps(target.rsplit('/', 1)[-1])})")
    state = tab_state(page)
    assert (state["baseline"], state["target"]) == PRECISION_PAIR
    assert "baseline_session" not in state and "target_session" not in state
    wait_for_compare(frame, baseline, target)
    status, body = route(demo_url, "compare", baseline=baseline, target=target)
    assert status == 200, body
    summary = json.loads(body)["summary"]
    assert (summary["baseline"]["run"], summary["target"]["run"]) == PRECISION_PAIR
    assert summary["baseline"]["precision"] == "fp32" and summary["target"]["precision"] == "bf16"
    assert frame.locator("#oc-baseline").input_value() == baseline
    assert frame.locator("#oc-target").input_value() == target
    assert frame.locator(f"{PAIR_SELECT} option:checked").text_content() == PRECISION_LABEL
    assert frame.locator(PAIR_SELECT).get_attribute("title") == PRECISION_LABEL  # in full, should it not fit
    chosen = frame.locator(PAIR_SELECT).input_value()
    page.screenshot(path=SCREENSHOT, full_page=True)

    # a reload (the runs in the link) keeps the precision pair chosen
    page.reload()
    frame = page.frame_locator(TAB_FRAME)
    wait_for_compare(frame, baseline, target)
    wait_for_pairs(frame, sum(map(len, expected.values())))
    frame.locator(f"{PAIR_SELECT} option:checked", has_text=PRECISION_LABEL).wait_for(state="attached", timeout=60_000)
    assert frame.locator(PAIR_SELECT).input_value() == chosen
    assert (tab_state(page)["baseline"], tab_state(page)["target"]) == PRECISION_PAIR
    assert len(pair_groups(frame)) == 3

    # a run chosen by hand is "Custom"; a CPU -> accelerator pair still loads as before
    frame.locator("#oc-target").select_option("torch/mnist_cnn_torch_gpu_bs16")
    page.wait_for_function("() => location.hash.includes('mnist_cnn_torch_gpu_bs16')")
    assert frame.locator(PAIR_SELECT).input_value() == "custom"
    assert frame.locator(f"{PAIR_SELECT} option[value='custom']").text_content() == "Custom (choose below)"
    device_pair = document["pairs"][0]
    frame.locator(PAIR_SELECT).select_option(label=f"{device_pair['baseline']} → {device_pair['target']}")
    wait_for_compare(frame, device_pair["baseline"], device_pair["target"])
    assert (tab_state(page)["baseline"], tab_state(page)["target"]) == (device_pair["baseline"], device_pair["target"])
    assert (
        frame.locator(PAIR_SELECT).input_value()
        == by_title[f"{device_pair['baseline']} → {device_pair['target']}"]["value"]
    )

    assert errors == [] and page.page_errors == [] and page.dialogs == []


@pytest.mark.parametrize("kept", ["variant pairs", "none"])
def test_the_no_pairs_text_shows_only_without_pairs_of_any_kind(page, demo_url, kept):
    """The runs document as a logdir without CPU -> accelerator pairs would give (and
    without variant pairs either): the select says so only when it has no pair at all."""
    errors = console_errors(page)
    document = route_json(demo_url, "runs")

    def without_pairs(handled):
        answer = handled.fetch()
        listing = answer.json()
        listing["pairs"] = []
        if kept == "none":
            listing["variant_pairs"] = []
        handled.fulfill(response=answer, json=listing)

    page.route("**/data/plugin/op_compare/runs*", without_pairs)
    frame = open_op_compare(page, demo_url, ready="#oc-count")
    custom = frame.locator(f"{PAIR_SELECT} option[value='custom']")
    if kept == "none":
        custom.filter(has_text="No CPU↔GPU pairs found").wait_for(state="attached")
        assert frame.locator(f"{PAIR_SELECT} optgroup").count() == 0
    else:
        wait_for_pairs(frame, len(document["variant_pairs"]))
        assert custom.text_content() == "Custom (choose below)"
        assert [group["label"] for group in pair_groups(frame)] == [GROUPS["precision"], GROUPS["compiler"]]
    # the suggested CPU -> GPU pair, no longer a listed one, is a custom choice
    assert frame.locator(PAIR_SELECT).input_value() == "custom"
    assert errors == [] and page.page_errors == []
