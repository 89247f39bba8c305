"""A logdir in a bucket against the same logdir on disk, before and after `index`.

moto's S3 server (a real S3-compatible server in its own process, on loopback) holds a
copy of a logdir, behind a small proxy on loopback that adds a fixed latency to every
request (30 ms, as a real bucket's 20-50 ms) and counts the requests and the bytes it
answers. Each figure is a fresh `tb-opcompare` process with an empty cache (`--no-cache`):
the listing (`runs`) and the first comparison (`compare` of the suggested pair), on disk
and in the bucket, without the shared index and with it. Two logdirs:

- the demo logdir (36 runs);
- 1,000 small PyTorch runs among 9,000 other objects (TensorBoard event files,
  checkpoints, JSON configs and metrics), as a team's bucket holds them (issue 55).

Median and range of N runs, the places alternating so drift hits all alike.

    python benchmarks/bench_bucket.py [--runs 3] [--latency-ms 30] [--sizes 36,1000]
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
CLI = [sys.executable, "-m", "tb_opcompare.cli"]
PROFILE = re.compile(r"\.(pb|json|json\.gz)$")
SMALL_TRACE = REPO / "tests/fixtures/onnxruntime/logdir/cnn_infer_cpu_bs16/vm_6117.1795423750789100707.pt.trace.json.gz"


def synthetic_logdir(root: Path, runs: int, others_per_run: int = 9) -> Path:
    """``runs`` small PyTorch runs (one 8 KB trace and a sidecar each), each among
    ``others_per_run`` objects that are no profile: TensorBoard event files, checkpoint
    shards, a JSON config and a JSON of metrics (which discovery must look into)."""
    trace = SMALL_TRACE.read_bytes()
    sidecar = json.loads((SMALL_TRACE.parent / "opcompare.json").read_text())
    for number in range(runs):
        run = root / f"team{number % 10}" / f"cnn_bs{1 + number % 4 * 16}_{number:04d}"
        run.mkdir(parents=True)
        (run / SMALL_TRACE.name).write_bytes(trace)
        (run / "opcompare.json").write_text(json.dumps({**sidecar, "label": f"run {number}"}))
        kinds = [
            ("config.json", json.dumps({"lr": 0.1, "seed": number}).encode()),
            ("metrics.json", json.dumps({"loss": [1.0, 0.5, 0.25]}).encode()),
        ]
        kinds += [(f"events.out.tfevents.{number}.host.{k}", b"\0" * 64) for k in range(3)]
        kinds += [(f"checkpoints/ckpt-{k}.index", b"\1" * 32) for k in range(others_per_run)]
        for name, data in kinds[:others_per_run]:
            (run / name).parent.mkdir(parents=True, exist_ok=True)
            (run / name).write_bytes(data)
    return root


def timed(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    result = subprocess.run(
        [*CLI, *args, "--no-cache"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed: {result.stderr[-2000:]}")
    return time.perf_counter() - started, result


def _places(scratch: Path, source: Path, server, proxy, name: str) -> dict[str, str]:
    """The logdir on disk, on disk indexed, in the bucket, in the bucket indexed."""
    local, indexed_local = scratch / f"{name}-logs", scratch / f"{name}-indexed"
    shutil.copytree(source, local)
    shutil.copytree(source, indexed_local)
    server.upload(local, "team", f"{name}/logs")
    server.upload(local, "team", f"{name}/indexed")
    env = {**server.env("writer"), "AWS_ENDPOINT_URL": proxy.url}
    for where in (f"s3://team/{name}/indexed", str(indexed_local)):
        seconds, result = timed(["index", where], env)
        print(f"  index {where}: {seconds:.1f} s, {result.stdout.strip().splitlines()[-1][:120]}", flush=True)
        listing = json.loads(timed(["runs", where, "--json"], env)[1].stdout)
        for notice in listing["notices"]:
            if "index" in notice:
                print(f"  notice: {notice[:300]}", flush=True)
    return {
        "disk": str(local),
        "disk, indexed": str(indexed_local),
        "bucket": f"s3://team/{name}/logs",
        "bucket, indexed": f"s3://team/{name}/indexed",
    }


# The floor of any listing that must see runs added since the index: the bucket's own
# listing of every object, by s3fs in a fresh process (as each command is one)
BARE_LISTING = "import sys, s3fs; fs = s3fs.S3FileSystem(); print(len(fs.find(sys.argv[1].removeprefix('s3://'))))"


def bare_listing(where: str, env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", BARE_LISTING, where], capture_output=True, check=True, env={**os.environ, **env}
    )
    return time.perf_counter() - started


def measure(places: dict[str, str], env: dict, proxy, runs: int) -> dict:
    """(place, command) -> {"seconds": [...], "requests": n, "bytes": n, "profile_gets": n};
    (bucket, "listing") -> {"seconds": [...]}: the bucket's bare listing."""
    suggested = json.loads(timed(["runs", places["disk"], "--json"], {})[1].stdout)["suggested"]
    pair = ["--baseline", suggested["baseline"], "--target", suggested["target"]]
    figures: dict = {}
    for _ in range(runs):
        for place, where in places.items():
            for command in ("runs", "compare"):
                before = proxy.count()
                seconds, _ = timed([command, where, "--json", *(pair if command == "compare" else [])], env)
                made = proxy.since(before)
                figure = figures.setdefault((place, command), {"seconds": []})
                figure["seconds"].append(seconds)
                figure["requests"] = len(made)
                figure["bytes"] = sum(size for _, _, size in made)
                figure["profile_gets"] = sum(
                    1
                    for method, path, _ in made
                    if method == "GET" and PROFILE.search(path.split("?")[0]) and "/.opcompare/" not in path
                )
        figures.setdefault(("bucket", "listing"), {"seconds": []})["seconds"].append(
            bare_listing(places["bucket"], env)
        )
    return figures


def report(title: str, figures: dict, places: dict) -> None:
    print(title)
    print(f"{'':16} {'command':8} {'median s':>9} {'range s':>13} {'requests':>9} {'bytes':>11} {'profile GETs':>13}")
    for place in places:
        for command in ("runs", "compare"):
            figure = figures[(place, command)]
            seconds = figure["seconds"]
            print(
                f"{place:16} {command:8} {statistics.median(seconds):>9.2f} "
                f"{min(seconds):>6.2f}-{max(seconds):<6.2f} {figure['requests']:>9} {figure['bytes']:>11,} "
                f"{figure['profile_gets']:>13}"
            )
    listing = {place: statistics.median(figures[(place, "runs")]["seconds"]) for place in places}
    floor = figures[("bucket", "listing")]["seconds"]
    print(
        f"the bucket's bare listing (s3fs find, a fresh process): {statistics.median(floor):.2f} s "
        f"({min(floor):.2f}-{max(floor):.2f}), {statistics.median(floor) / listing['disk, indexed']:.2f}x "
        "the indexed disk listing: the floor of a listing that sees runs added since the index"
    )
    # like for like first: the same index read from the bucket and from the disk (the disk
    # listing without one reads every trace, which flattered the bucket: 0.19x)
    for disk in ("disk, indexed", "disk"):
        ratio = listing["bucket, indexed"] / listing[disk]
        print(f"indexed bucket listing / {disk} listing: {ratio:.2f}x (target <= 1.5x)", flush=True)
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=30.0)
    parser.add_argument("--sizes", default="36,1000", help="36: the demo logdir; any other N: N synthetic runs")
    options = parser.parse_args()
    from s3_server import CountingProxy, s3_server

    scratch = Path(tempfile.mkdtemp(prefix="opcompare-bench-bucket-"))
    try:
        with s3_server(scratch / "moto.log") as server:
            proxy = CountingProxy(server.url, options.latency_ms / 1000)
            env = {**server.env("writer"), "AWS_ENDPOINT_URL": proxy.url}
            for size in (int(size) for size in options.sizes.split(",")):
                if size == 36:
                    source, title = REPO / "demo_logs", "demo logdir (36 runs)"
                else:
                    source = synthetic_logdir(scratch / f"synthetic{size}", size)
                    title = f"{size:,} small runs among {9 * size:,} other objects"
                print(f"{title}: setting up", flush=True)
                places = _places(scratch, source, server, proxy, f"n{size}")
                figures = measure(places, env, proxy, options.runs)
                report(
                    f"{title}; a fresh process with an empty cache, median and range of {options.runs}; "
                    f"moto's S3 server behind a proxy adding {options.latency_ms:g} ms a request",
                    figures,
                    places,
                )
            proxy.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
