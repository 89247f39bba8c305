"""Many ops (issue 57): two PyTorch traces of a million distinct ops each
(``make_many_ops.py``, about 90 MB a side), compared

- from the CLI, cold (an empty cache), every row written as CSV: wall time and the peak
  memory of the process and its readers (``/usr/bin/time -v``), against ≤ 15 s and ≤ 1.5 GB;
- over HTTP on a real TensorBoard, the tab's first request (``compare?…&top=20000``): in a
  fresh server whose cache holds the two profiles (the CLI's run left them) against ≤ 2 s,
  in a fresh server with an empty cache, and again warm (the median of ``--requests``)
  against ≤ 0.3 s; and the full table (``full=1``) once, for its size.

Each figure is the median of ``--repeat`` runs, with its range.

Usage: python benchmarks/bench_many_ops.py [--ops 1000000] [--repeat 3] [--requests 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))

from make_many_ops import RUNS, make_many_ops  # noqa: E402

CLI_SECONDS, CLI_MB, PAGE_COLD_SECONDS, PAGE_WARM_SECONDS = 15.0, 1500.0, 2.0, 0.3
TAB_ROWS = 20_000  # frontend/state.js MAX_TAB_ROWS: the tab's first request


def cli_cold(logdir: Path, cache: Path, csv_path: Path) -> tuple[float, float, int]:
    """(seconds, peak MB of the process and its readers, CSV lines) of one cold compare."""
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-m",
        "tb_opcompare.cli",
        "compare",
        str(logdir),
        "--baseline",
        RUNS[0],
        "--target",
        RUNS[1],
        "--cache-dir",
        str(cache),
        "--csv",
        str(csv_path),
        "-q",
    ]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode:  # its own words, not only its status
        said = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("\t"))
        raise SystemExit(f"the CLI compare failed (exit status {done.returncode}):\n{said}")
    seconds = time.perf_counter() - start
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    with csv_path.open("rb") as handle:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    return seconds, peak_kb / 1024, lines


def get(url: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=900) as response:
        body = response.read()
    return time.perf_counter() - start, body


def first_page(logdir: Path, cache: Path, requests: int) -> dict:
    """A fresh TensorBoard on ``logdir`` with ``cache``: the tab's first request, then
    ``requests`` more (warm), then the full table once."""
    from tensorboard_server import PIDS, running_tensorboard

    pair = urllib.parse.urlencode({"baseline": RUNS[0], "target": RUNS[1]})
    page = f"/data/plugin/op_compare/compare?{pair}&top={TAB_ROWS}"
    with running_tensorboard(logdir, env={"TB_OPCOMPARE_CACHE_DIR": str(cache)}) as url:
        cold, body = get(url + page)
        document = json.loads(body)
        warm = [get(url + page)[0] for _ in range(requests)]
        before = rss_mb(PIDS[url])
        with peak_rss(PIDS[url]) as peak:
            full, full_body = get(url + f"/data/plugin/op_compare/compare?{pair}&full=1")
    return {
        "cold": cold,
        "warm": statistics.median(warm),
        "rows": len(document["rows"]),
        "total": document["total_rows"],
        "full": full,
        "full_mb": len(full_body) / 1e6,
        "full_added_mb": max(peak) - before,
    }


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))


@contextlib.contextmanager
def peak_rss(pid: int):
    """The resident memory of process ``pid`` sampled every 10 ms while the block runs."""
    samples, done = [rss_mb(pid)], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            samples.append(rss_mb(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        done.set()
        sampler.join()


def figure(values: list[float], unit: str = "s", digits: int = 1) -> str:
    median = statistics.median(values)
    spread = f" (range {min(values):.{digits}f}–{max(values):.{digits}f})" if len(values) > 1 else ""
    return f"{median:.{digits}f} {unit}{spread}"


def verdict(values: list[float], target: float) -> str:
    return "met" if statistics.median(values) <= target else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        logdir = make_many_ops(scratch / "logs", args.ops)
        size = sum(path.stat().st_size for path in logdir.rglob("*.json")) / 2e6
        print(f"many ops: two PyTorch traces of {args.ops:,} distinct ops each ({size:.0f} MB a side)")
        cli, memory, pages = [], [], []
        for attempt in range(args.repeat):
            cache = scratch / f"cache{attempt}"
            seconds, peak, lines = cli_cold(logdir, cache, scratch / "rows.csv")
            assert lines == args.ops + 1, f"the CSV has {lines} lines, not {args.ops + 1}"
            cli.append(seconds)
            memory.append(peak)
            pages.append(first_page(logdir, cache, args.requests))  # the CLI left both profiles in the cache
        empty = first_page(logdir, scratch / "empty_cache", args.requests)
        print(
            f"  CLI compare, cold, every row as CSV: {figure(cli)} (target ≤ {CLI_SECONDS:g} s: {verdict(cli, CLI_SECONDS)})"
        )
        print(
            f"    peak memory, the process and its readers: {figure(memory, 'MB', 0)} (target ≤ {CLI_MB:,.0f} MB: {verdict(memory, CLI_MB)})"
        )
        cold = [page["cold"] for page in pages]
        warm = [page["warm"] for page in pages]
        print(
            f"  the tab's first page ({pages[0]['rows']:,} of {pages[0]['total']:,} rows), fresh TensorBoard, profiles "
            f"in its disk cache: {figure(cold, 's', 2)} (target ≤ {PAGE_COLD_SECONDS:g} s: {verdict(cold, PAGE_COLD_SECONDS)})"
        )
        print(
            f"    warm, median of {args.requests}: {figure(warm, 's', 3)} (target ≤ {PAGE_WARM_SECONDS:g} s: {verdict(warm, PAGE_WARM_SECONDS)})"
        )
        print(f"    fresh TensorBoard, empty cache (both traces read): {empty['cold']:.1f} s")
        print(
            f"    the full table (full=1), warm: {empty['full']:.1f} s, {empty['full_mb']:,.0f} MB, "
            f"TensorBoard's memory +{empty['full_added_mb']:,.0f} MB while it is sent"
        )


if __name__ == "__main__":
    main()
