"""A cold start of the Compare page in a real browser (Debian's Chromium) against a real
TensorBoard, on a logdir whose run names say nothing (two timestamps): the page reads the
run names at once and the traces later, and must never show a number, or a "no pairs"
message, that the settled page contradicts (issue 51: 0.14× and "No CPU↔GPU pairs found"
for two seconds, then 10.2×)."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request

from conftest import REPO, TAB_FRAME

from tb_opcompare.text import format_speedup

# The demo's PyTorch CNN at batch 64 on a CPU and on an H100, without the sidecars that name
# model and device: folders named by a time only, as a team's scripts often write them.
RUNS = {
    "logs/20261122-101500": "torch/mnist_cnn_torch_cpu_bs64",
    "logs/20261123-090000": "torch/mnist_cnn_torch_gpu_bs64",
}


def _logdir(root):
    for name, source in RUNS.items():
        (root / name).mkdir(parents=True)
        for trace in (REPO / "demo_logs" / source).glob("*.pt.trace.json*"):
            shutil.copyfile(trace, root / name / trace.name)
    return root


def _samples(page, frame, seconds: float = 90.0) -> list[tuple[str, str, str]]:
    """(headline, pair picker, message) every 100 ms from the first paint until the table
    has shown one headline for two seconds."""
    seen, settled_since, deadline = [], None, time.monotonic() + seconds
    while time.monotonic() < deadline:
        texts = tuple(
            " | ".join(frame.locator(selector).all_inner_texts())
            for selector in ("#oc-headline", "select[aria-label='suggested pair']", "#oc-message")
        )
        if seen and texts == seen[-1] and texts[0] and frame.locator("#oc-count").count():
            settled_since = settled_since or time.monotonic()
            if time.monotonic() - settled_since > 2:
                break
        else:
            settled_since = None
        seen.append(texts)
        time.sleep(0.1)
    return seen


def test_a_cold_start_shows_only_the_settled_headline(page, tmp_path):
    from tensorboard_server import running_tensorboard

    logdir = _logdir(tmp_path / "logdir")
    with running_tensorboard(logdir) as url:
        page.goto(f"{url}/#op_compare")
        frame = page.frame_locator(TAB_FRAME)
        seen = _samples(page, frame)
        with urllib.request.urlopen(f"{url}/data/plugin/op_compare/runs", timeout=120) as response:
            suggested = json.load(response)["suggested"]
        query = f"baseline={suggested['baseline']}&target={suggested['target']}".replace("/", "%2F")
        with urllib.request.urlopen(f"{url}/data/plugin/op_compare/compare?{query}", timeout=120) as response:
            settled = json.load(response)["summary"]
    assert (suggested["baseline"], suggested["target"]) == tuple(RUNS)  # the CPU run, then the GPU one
    headlines = {headline for headline, _, _ in seen if headline}
    assert headlines and len(headlines) == 1, seen
    (shown,) = headlines
    assert shown == format_speedup(settled["headline_speedup"])
    assert not any("No CPU↔GPU pairs found" in picker for _, picker, _ in seen), seen
    assert not any("Choose two runs" in message for _, _, message in seen), seen
    assert not page.page_errors
