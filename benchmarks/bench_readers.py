"""Reader benchmark: our readers vs xprof's converter and vs orjson, on real recordings.

Records (once, cached in benchmarks/.data/, never committed):
  * a ~30 MB xplane: the MNIST-shaped Keras CNN profiled for 1,200 training steps;
  * a ~210 MB PyTorch Chrome trace (record_shapes) of the same kind of CNN.
Each measurement runs in a fresh subprocess so its peak RSS is its own; times are the
best of --repeat runs. The JSON references are orjson then a plain-Python per-op pass
(the issue's "orjson-then-Python"), and orjson.loads alone.

Usage: python benchmarks/bench_readers.py [--xplane-steps 1200] [--torch-steps 2500] [--repeat 5]
       [--xplane-copies 34] [--torch-copies 5]   (also the ~1 GiB tiled inputs of issue 36)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
DATA = HERE / ".data"
REPO = HERE.parent

_MEASURE = r"""
import json, resource, sys, time
kind, path = sys.argv[1], sys.argv[2]
# Imports happen before the clock starts: the figures are read times, not start-up.
if kind.startswith("ours"):
    # the readers (and pandas with them) load on a format's first read: here, before the clock
    import tb_opcompare.ingest.readers.torch_trace  # noqa: F401
    import tb_opcompare.ingest.readers.xplane  # noqa: F401
    from tb_opcompare.ingest.formats import read_profile
elif kind == "xprof":
    from xprof.convert import raw_to_tool_data
else:
    import orjson
baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
if kind == "ours-xplane":
    result = len(read_profile("xplane", [path]).op_table.frame())
elif kind == "ours-json":
    result = len(read_profile("pytorch", [path]).op_table.frame())
elif kind == "xprof":
    data, _ = raw_to_tool_data.xspace_to_tool_data([path], "framework_op_stats", {})
    result = len(data)
elif kind == "orjson":
    with open(path, "rb") as handle:
        result = len(orjson.loads(handle.read())["traceEvents"])
elif kind == "orjson-python":
    # What a script would do without tb-opcompare: orjson, then self time per host op by
    # nesting on each thread in plain Python (the benchmark trace is CPU-only: no kernels).
    from collections import defaultdict
    with open(path, "rb") as handle:
        events = orjson.loads(handle.read())["traceEvents"]
    host_categories = {"cpu_op", "Operator", "user_annotation", "cuda_runtime", "cuda_driver", "Runtime", "Driver"}
    threads = defaultdict(list)
    for event in events:
        if (event.get("ph") == "X" and event.get("cat") in host_categories
                and not event["name"].startswith("ProfilerStep#")):
            threads[(event["pid"], event["tid"])].append(event)
    totals = defaultdict(lambda: [0, 0.0])
    for thread in threads.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        self_time = [e["dur"] for e in thread]
        open_events = []  # (end, index), innermost last
        for index, event in enumerate(thread):
            while open_events and open_events[-1][0] <= event["ts"]:
                open_events.pop()
            if open_events:
                self_time[open_events[-1][1]] -= event["dur"]
            open_events.append((event["ts"] + event["dur"], index))
        for event, value in zip(thread, self_time):
            row = totals[event["name"] if event["cat"] in ("cpu_op", "Operator") else (event["name"], event["cat"])]
            row[0] += 1
            row[1] += max(value, 0.0)
    result = len(totals)
elapsed = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "peak_mb": peak_mb, "added_mb": peak_mb - baseline_mb, "result": result}))
"""


def measure(kind: str, path: Path, repeat: int, pure_python: bool = False) -> dict:
    """``pure_python``: the readers without their optional C extensions."""
    extra_env = {"TB_OPCOMPARE_PURE_PYTHON": "1"} if pure_python else {}
    runs = []
    for _ in range(repeat):
        target = path
        if kind == "xprof":  # xprof writes cache files beside its input: give it a fresh copy
            scratch = Path(tempfile.mkdtemp())
            target = scratch / path.name
            shutil.copy(path, target)
        out = subprocess.run(
            [sys.executable, "-c", _MEASURE, kind, str(target)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "GLOG_minloglevel": "3", **extra_env},
        )
        if out.returncode:
            raise SystemExit(f"{kind} failed:\n{out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["seconds"])
    return {
        "seconds": best["seconds"],
        "peak_mb": max(r["peak_mb"] for r in runs),
        "added_mb": max(r["added_mb"] for r in runs),
        "result": best["result"],
    }


def record_xplane(steps: int) -> Path:
    out = DATA / f"xplane_{steps}"
    found = sorted(out.glob("**/*.xplane.pb"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                str(REPO / "tests/fixtures/record_tf_keras.py"),
                str(out),
                "--batch-sizes",
                "32",
                "--steps",
                str(steps + 4),
                "--profile-steps",
                f"2,{steps + 1}",
            ],
            check=True,
            capture_output=True,
        )
        found = sorted(out.glob("**/*.xplane.pb"))
    return found[0]


def tile_xplane(source: Path, copies: int) -> Path:
    """A larger xplane made of a recorded one: its host plane's lines (threads) repeated
    ``copies`` times, at the wire level (TF needs about 34 times a file's size in memory
    to write one, so no 1 GiB xplane can be recorded on this machine). Each copy is read
    as another thread that ran the same ops at the same times: the same work per event
    as the recorded file, ``copies`` times the events."""
    out = DATA / f"{source.relative_to(DATA).parts[0]}_x{copies}" / source.name
    if out.exists():
        return out
    sys.path.insert(0, str(REPO))
    from tb_opcompare.ingest.readers.xplane_wire import fields

    def length_delimited(field: int, payload: bytes) -> bytes:
        header, value = bytearray([(field << 3) | 2]), len(payload)
        while value >= 0x80:
            header.append((value & 0x7F) | 0x80)
            value >>= 7
        header.append(value)
        return bytes(header) + payload

    data = memoryview(source.read_bytes())
    planes = []
    for space_field, tag, start, end in fields(data, 0, len(data)):
        if space_field != 1:  # not a plane (host names, errors): as it was
            planes.append(bytes(data[tag:end]))
            continue
        plane = bytes(data[start:end])
        lines = [bytes(data[tag:value_end]) for field, tag, _, value_end in fields(data, start, end) if field == 3]
        is_host = any(
            field == 2 and bytes(data[a:b]).startswith(b"/host:") for field, _, a, b in fields(data, start, end)
        )
        planes.append(length_delimited(1, plane + b"".join(lines) * (copies - 1) if is_host else plane))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(planes))
    return out


def record_torch(steps: int) -> Path:
    out = DATA / f"torch_{steps}"
    found = sorted(out.glob("**/*.pt.trace.json"))
    if not found:
        code = (
            "import sys; sys.path.insert(0, 'tests/fixtures'); import torch; torch.set_num_threads(1);"
            f"from record_torch import record; record({str(out)!r}, 8, active_steps={steps})"
        )
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True)
        found = sorted(out.glob("**/*.pt.trace.json"))
    return found[0]


def tile_torch_trace(source: Path, copies: int) -> Path:
    """A larger PyTorch trace made of a recorded one: its events repeated ``copies`` times,
    each copy shifted past the one before and its ``ProfilerStep#N`` renumbered after them,
    as if the profiler had stayed on ``copies`` times as many steps (recording that many
    needs the profiler to hold every event in memory: tens of GiB for a 1 GiB trace). The
    same work per event as the recorded file, ``copies`` times the events; metadata once."""
    out = DATA / f"{source.relative_to(DATA).parts[0]}_x{copies}" / source.name
    if out.exists():
        return out
    data = json.loads(source.read_bytes())
    events = data.pop("traceEvents")
    timed = [event for event in events if event.get("ph") != "M" and "ts" in event]  # kineto dates its metadata too
    first = min(float(event["ts"]) for event in timed)
    last = max(float(event["ts"]) + float(event.get("dur", 0)) for event in timed)
    span = last - first + 1000.0  # a millisecond between copies
    steps = {event["name"] for event in timed if str(event.get("name", "")).startswith("ProfilerStep#")}
    step_numbers = sorted(int(name.split("#", 1)[1]) for name in steps)
    step_span = step_numbers[-1] - step_numbers[0] + 1 if step_numbers else 0

    def tiled():
        yield from (event for event in events if event.get("ph") == "M" or "ts" not in event)
        for copy in range(copies):
            for event in timed:
                shifted = dict(event, ts=float(event["ts"]) + copy * span)
                name = str(event.get("name", ""))
                if copy and name.startswith("ProfilerStep#"):
                    shifted["name"] = f"ProfilerStep#{int(name.split('#', 1)[1]) + copy * step_span}"
                yield shifted

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")  # an interrupted tiling is never taken for a whole one
    with open(partial, "w") as handle:
        handle.write(json.dumps({**data, "traceEvents": []})[:-3] + "[\n")  # the other fields, then the events
        for index, event in enumerate(tiled()):
            handle.write((",\n" if index else "") + json.dumps(event))
        handle.write("\n]}\n")
    partial.rename(out)
    return out


def report(label: str, figures: dict) -> None:
    print(
        f"  {label}: {figures['seconds']:.2f} s, peak RSS {figures['peak_mb']:.0f} MB "
        f"(+{figures['added_mb']:.0f} MB over the process after imports)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--xplane-steps", type=int, default=1200)
    parser.add_argument("--torch-steps", type=int, default=2500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--xplane-copies",
        type=int,
        default=1,
        help="also read the recorded xplane with its host threads repeated N times (see tile_xplane); "
        "xprof is not run on it",
    )
    parser.add_argument(
        "--torch-copies",
        type=int,
        default=1,
        help="also read the recorded PyTorch trace with its steps repeated N times (see tile_torch_trace)",
    )
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)

    xplane = record_xplane(args.xplane_steps)
    head_to_head("xplane", xplane, "ours-xplane", "xprof", "xprof", 3, args.repeat)
    report(
        "tb-opcompare without its C extension (TB_OPCOMPARE_PURE_PYTHON=1)",
        measure("ours-xplane", xplane, args.repeat, pure_python=True),
    )
    if args.xplane_copies > 1:
        big_input("xplane", tiled("tile_xplane", xplane, args.xplane_copies), "ours-xplane", args.repeat)
    torch_trace = record_torch(args.torch_steps)
    head_to_head(
        "chrome trace",
        torch_trace,
        "ours-json",
        "orjson-python",
        "orjson.loads, then per-op self times in Python",
        5,
        args.repeat,
    )
    head_to_head(
        "chrome trace",
        torch_trace,
        "ours-json",
        "orjson",
        "orjson.loads alone (decode only, no per-op work)",
        5,
        args.repeat,
    )
    report(
        "tb-opcompare without its C extension (TB_OPCOMPARE_PURE_PYTHON=1)",
        measure("ours-json", torch_trace, args.repeat, pure_python=True),
    )
    if args.torch_copies > 1:
        big_input("chrome trace", tiled("tile_torch_trace", torch_trace, args.torch_copies), "ours-json", args.repeat)


def tiled(tiler: str, source: Path, copies: int) -> Path:
    """``tile_xplane`` or ``tile_torch_trace`` of ``source``, run in a child process: tiling
    holds the whole 1 GiB input, and a process forked from one that did starts with its peak
    RSS (``ru_maxrss`` survives fork and exec), so every measurement after it read at least
    that (2,218 MB for both 1 GiB inputs, seen on 2026-11-27)."""
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from pathlib import Path; import bench_readers; "
        f"print(bench_readers.{tiler}(Path({str(source)!r}), {copies}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        raise SystemExit(f"{tiler} failed:\n{done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def big_input(title: str, path: Path, kind: str, repeat: int) -> None:
    """A tiled input against issue 36's bar for 1 GiB: read in 10 s or less, the whole
    process at no more than twice the file's size in memory."""
    size_mb = path.stat().st_size / 2**20
    ours = measure(kind, path, min(repeat, 3))
    print(f"{title} {path.parent.name}/{path.name}: {size_mb:.0f} MB (tiled)")
    report("tb-opcompare", ours)
    print(
        f"  {size_mb / 1024 / ours['seconds']:.2f} GiB/s, {ours['seconds'] * 1024 / size_mb:.1f} s per GiB "
        f"(target <= 10 s); peak RSS / file size {ours['peak_mb'] / size_mb:.2f}x (target <= 2x); "
        f"added by the read {ours['added_mb'] / size_mb:.2f}x"
    )


_measured: dict[tuple[str, Path], dict] = {}


def head_to_head(
    title: str, path: Path, ours_kind: str, reference_kind: str, reference_label: str, speed_target: float, repeat: int
) -> None:
    size_mb = path.stat().st_size / 2**20
    if (ours_kind, path) not in _measured:
        _measured[ours_kind, path] = measure(ours_kind, path, repeat)
    ours = _measured[ours_kind, path]
    reference = measure(reference_kind, path, repeat)
    print(f"{title} {path.name}: {size_mb:.1f} MB")
    report("tb-opcompare", ours)
    report(reference_label, reference)
    if reference_kind == "orjson-python" and ours["result"] != reference["result"]:
        print(f"  ! the reference found {reference['result']} ops/rows, tb-opcompare {ours['result']}")
    print(
        f"  speed-up {reference['seconds'] / ours['seconds']:.1f}x (target >= {speed_target:g}x); "
        f"memory added by the read / file size {ours['added_mb'] / size_mb:.1f}x (target <= 3x)"
    )


if __name__ == "__main__":
    main()
