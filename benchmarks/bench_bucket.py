"""A logdir in a bucket against the same logdir on disk, before and after `index`.

moto's S3 server (a real S3-compatible server in its own process, on loopback; requests
logged) holds a copy of the demo logdir. Each figure is a fresh `tb-opcompare` process
with an empty cache (`--no-cache`): the listing (`runs`) and the first comparison
(`compare` of the suggested pair), on disk and in the bucket, without the shared index and
with it. Also counted: the requests each made to the bucket, and how many fetched a
profile. Median of N runs, the four places alternating so drift hits all alike.

    python benchmarks/bench_bucket.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
CLI = str(Path(sys.executable).parent / "tb-opcompare")
PROFILE = re.compile(r"\.(pb|json|json\.gz)$")


def timed(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    result = subprocess.run([CLI, *args, "--no-cache"], capture_output=True, text=True, env={**os.environ, **env})
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed: {result.stderr[-2000:]}")
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    from s3_server import s3_server

    scratch = Path(tempfile.mkdtemp(prefix="opcompare-bench-bucket-"))
    local = scratch / "logs"
    indexed_local = scratch / "indexed"
    shutil.copytree(REPO / "demo_logs", local)
    shutil.copytree(REPO / "demo_logs", indexed_local)
    try:
        with s3_server(scratch / "moto.log") as server:
            server.upload(local, "team", "logs")
            server.upload(local, "team", "indexed")
            env = server.env("writer")
            timed(["index", "s3://team/indexed"], env)
            timed(["index", str(indexed_local)], {})
            suggested = json.loads(timed(["runs", str(local), "--json"], {})[1].stdout)["suggested"]
            pair = ["--baseline", suggested["baseline"], "--target", suggested["target"]]
            places = {
                "disk": str(local),
                "disk, indexed": str(indexed_local),
                "bucket": "s3://team/logs",
                "bucket, indexed": "s3://team/indexed",
            }
            figures = {(place, command): [] for place in places for command in ("runs", "compare")}
            requests = {}
            for _ in range(options.runs):
                for place, where in places.items():
                    for command in ("runs", "compare"):
                        before = len(server.requests())
                        seconds, _ = timed([command, where, "--json", *(pair if command == "compare" else [])], env)
                        figures[(place, command)].append(seconds)
                        made = server.requests()[before:]
                        requests[(place, command)] = (
                            len(made),
                            sum(
                                1
                                for method, path in made
                                if method == "GET" and PROFILE.search(path) and "/.opcompare/" not in path
                            ),
                        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"demo logdir ({sum(1 for _ in (REPO / 'demo_logs').rglob('*') if _.is_file())} files), a fresh process "
        f"with an empty cache, median of {options.runs}; moto's S3 server on loopback"
    )
    print(f"{'':18} {'runs (listing)':>16} {'first compare':>15} {'requests':>10} {'profile GETs':>13}")
    for place in places:
        listing, compare = (statistics.median(figures[(place, command)]) for command in ("runs", "compare"))
        made, fetched = (requests[(place, "runs")][k] + requests[(place, "compare")][k] for k in (0, 1))
        print(f"{place:18} {listing:>14.2f} s {compare:>13.2f} s {made:>10} {fetched:>13}")
    ratio = statistics.median(figures[("bucket, indexed", "runs")]) / statistics.median(figures[("disk", "runs")])
    print(f"bucket listing after index / disk listing without: {ratio:.2f}x")


if __name__ == "__main__":
    main()
