"""What the installed plugin adds to TensorBoard's start-up.

Starts TensorBoard in a new process, with TensorBoard's own plugins only and with the
Op Compare plugin added, on the demo logdir, and times process start to the first
answer of ``/data/plugins_listing`` (which asks every plugin whether it is active).
Also reports which heavy modules the plugin's entry point imports (none should be).
Median of N runs, alternating the two so drift hits both alike.

    python benchmarks/bench_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SERVER = """
import sys
from importlib.metadata import entry_points
from tensorboard import default, program
# Every installed plugin (xprof's Profile tab included) but Op Compare, whose entry point
# is not even loaded; then the same with Op Compare.
plugins = default.get_static_plugins() + [entry.load() for entry in entry_points(group="tensorboard_plugins")
                                          if entry.name != "op_compare"]
if sys.argv[1] == "with":
    from tb_opcompare.web.plugin import OpCompareLoader
    plugins = plugins + [OpCompareLoader]
server = program.TensorBoard(plugins=plugins)
server.configure(argv=["tensorboard", "--logdir", sys.argv[2], "--host", "127.0.0.1", "--port", sys.argv[3],
                       "--load_fast=false"])
server.main()
"""

# The entry point's own imports are looked at before the plugin is built: building it starts
# the thread that, where the logdir holds runs, imports the routes and readers beside
# TensorBoard's start (``plugin._look``), whose imports the load's time may share a core with.
IMPORTS = """
import sys, time
started = time.perf_counter()
from tensorboard.plugins import base_plugin
base = time.perf_counter()
from tb_opcompare.web.plugin import OpCompareLoader
heavy = sorted(m for m in ("pandas", "numpy", "plotly", "tb_opcompare.store.catalog", "tb_opcompare.ingest.readers.xplane")
               if m in sys.modules)
class Flags: pass
plugin = OpCompareLoader().load(base_plugin.TBContext(logdir=sys.argv[1], flags=Flags()))
plugin.get_plugin_apps(); plugin.is_active()
done = time.perf_counter()
print((done - base) * 1000, heavy)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def time_start(mode: str, logdir: Path, env: dict) -> float:
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, mode, str(logdir), str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=5) as answer:
                    listing = json.load(answer)
                break
            except OSError:
                if process.poll() is not None or time.perf_counter() - started > 120:
                    raise RuntimeError(f"TensorBoard ({mode}) did not start")
                time.sleep(0.02)
        elapsed = time.perf_counter() - started
        assert ("op_compare" in listing) == (mode == "with"), sorted(listing)
        return elapsed
    finally:
        process.terminate()
        process.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="opcompare-bench-startup-"))
    try:
        logdir = scratch / "demo_logs"
        shutil.copytree(REPO / "demo_logs", logdir)
        env = {**os.environ, "TB_OPCOMPARE_CACHE_DIR": str(scratch / "cache")}
        output = subprocess.run(
            [sys.executable, "-c", IMPORTS, str(logdir)], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        load_ms, heavy = output.split(" ", 1)
        times = {"without": [], "with": []}
        for _ in range(args.runs):
            for mode in times:
                times[mode].append(time_start(mode, logdir, env))
        without, with_plugin = (statistics.median(times[m]) for m in ("without", "with"))
        print(f"TensorBoard start to first plugins_listing answer, median of {args.runs}:")
        print(f"  every other installed plugin:     {without:6.2f} s")
        print(f"  plus Op Compare:                  {with_plugin:6.2f} s  ({(with_plugin - without) * 1000:+.0f} ms)")
        print(
            f"entry point import + load + is_active, after TensorBoard's own imports: {float(load_ms):.0f} ms; "
            f"heavy modules the entry point imports: {heavy}"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
