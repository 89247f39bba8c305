"""The tab's first screen as a user waits for it: a real TensorBoard, Debian's Chromium.

TensorBoard's own page is loaded and settled first; then the Op Compare tab is opened,
cold (a fresh server and an empty cache each time), and the page itself notes (a
``requestAnimationFrame`` loop in the tab's frame, so a time is when the browser could
paint it) when the headline first holds a number and when the first plotly chart is
drawn. Also reported: when each data request was asked and answered, from the tab's
opening, to show where the wait goes (listing, reads, comparison, the page's own work).

Logdirs: the demo (40 runs; the tab suggests the PyTorch CNN CPU -> GPU at batch 64) and,
where ``../shared/realtraces`` (or ``$OPCOMPARE_REALTRACES``) holds it, the public TF2
BERT xplane (4,696 ops) beside the test fixtures' Keras CNN: a 4,973-row first table.

    python benchmarks/bench_first_screen.py [--runs 3]

Needs the test extra (Playwright) and /usr/bin/chromium (``make test`` installs both).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

TAB_FRAME = "iframe[src*='plugin_entry.html?name=op_compare']"
# Notes, in the tab's frame, the first frame the browser could paint with a headline and
# with a drawn chart (epoch ms, as Python's time.time() * 1000 counts them).
NOTE_PAINTS = """
(() => {
  const seen = window.__firstScreen = {};
  const tick = () => {
    if (document.body) {
      const headline = document.querySelector('#oc-headline');
      if (!seen.headline && headline && headline.textContent.trim()) seen.headline = performance.timeOrigin + performance.now();
      if (!seen.chart && document.querySelector('.js-plotly-plot .main-svg')) seen.chart = performance.timeOrigin + performance.now();
    }
    if (!seen.chart) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""


def logdirs(scratch: Path) -> dict[str, Path]:
    found = {"demo (40 runs)": REPO / "demo_logs"}
    bert = (
        Path(os.environ.get("OPCOMPARE_REALTRACES", REPO.parent / "shared" / "realtraces")) / "tf2_xplane_bert_multigpu"
    )
    if bert.is_dir():
        logdir = scratch / "bert_vs_cnn"
        shutil.copytree(bert, logdir / "bert_gpu")
        shutil.copytree(REPO / "tests/fixtures/logdir/tf_keras/cnn_cpu_bs8", logdir / "cnn_cpu_bs8")
        found["TF2 BERT vs Keras CNN (4,973 rows)"] = logdir
    else:
        print(f"BERT logdir skipped: {bert} is not there")
    return found


def first_screen(browser, logdir: Path) -> dict:
    """One cold opening of the tab: ms from opening it to the headline and to the first chart,
    and each data request's [route, ms asked, ms answered]."""
    from tensorboard_server import running_tensorboard

    with (
        tempfile.TemporaryDirectory() as cache,
        running_tensorboard(logdir, env={"TB_OPCOMPARE_CACHE_DIR": cache}) as url,
    ):
        page = browser.new_page()
        try:
            page.add_init_script(NOTE_PAINTS)
            page.goto(f"{url}/#timeseries")
            page.wait_for_load_state("networkidle")
            opened = time.time() * 1000
            requests: list[list] = []  # [route, ms asked, ms answered (None until it is)]

            def route_of(request) -> str | None:
                _, data, rest = request.url.partition("/data/plugin/op_compare/")
                route = rest.split("?")[0]
                return route if data and not route.endswith((".js", ".css")) else None

            def asked(request) -> None:
                if route_of(request):
                    requests.append([route_of(request), time.time() * 1000 - opened, None])

            def answered(request) -> None:
                waiting = [entry for entry in requests if entry[0] == route_of(request) and entry[2] is None]
                if waiting:
                    waiting[0][2] = time.time() * 1000 - opened

            page.on("request", asked)
            page.on("requestfinished", answered)
            page.goto(f"{url}/#op_compare")
            frame = page.frame_locator(TAB_FRAME)
            frame.locator("#oc-headline:not(:empty)").first.wait_for(timeout=120_000)
            frame.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
            tab = next(f for f in page.frames if "plugin_entry.html" in f.url)
            tab.wait_for_function("window.__firstScreen && window.__firstScreen.chart", timeout=120_000)
            seen = tab.evaluate("window.__firstScreen")
        finally:
            page.close()
    return {"headline": seen["headline"] - opened, "chart": seen["chart"] - opened, "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        try:
            print(f"The tab's first screen, cold, {args.runs} runs each (ms from opening the tab; median, range)")
            for label, logdir in logdirs(Path(scratch)).items():
                runs = [first_screen(browser, logdir) for _ in range(args.runs)]
                for what in ("headline", "chart"):
                    values = sorted(run[what] for run in runs)
                    print(
                        f"  {label:36s} {what:8s} {statistics.median(values):6.0f}  ({values[0]:.0f}-{values[-1]:.0f})"
                    )
                last = runs[-1]["requests"]
                print(
                    "    its last run's data requests (ms asked -> answered):",
                    "; ".join(
                        f"{route} {started:.0f} -> {'?' if ended is None else f'{ended:.0f}'}"
                        for route, started, ended in last
                    ),
                )
        finally:
            browser.close()


if __name__ == "__main__":
    main()
