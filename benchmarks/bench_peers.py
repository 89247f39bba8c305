"""Peer benchmark: tb-opcompare's readers against Holistic Trace Analysis (HTA) and xprof,
on the real traces of ``../shared/realtraces`` and the large ones ``bench_readers.py``
records into ``benchmarks/.data`` (the smallest PyTorch CPU trace of 200 MiB or more, the
largest recorded xplane).

What is measured, for each trace, in fresh processes (median of --repeat, the two tools
alternating so that drift of this shared machine hits both alike):

  * wall time of the whole process (interpreter start, imports, read, per-op table, exit)
    and its peak RSS (``ru_maxrss`` from ``os.wait4`` on that child alone); the seconds
    after imports, as each process reports them, are shown in brackets;
  * tb-opcompare: the command a user runs, ``tb-opcompare compare LOGDIR --baseline run
    --target run --no-cache`` on a fresh logdir holding the trace (its per-op table, cold);
    its bracketed figure is the read alone (``read_profile`` after imports, one untimed run);
  * PyTorch traces: that against HTA in its own virtual environment
    (``benchmarks/.data/hta-venv``, made on first use): ``TraceAnalysis(trace_dir=...)``
    then ``get_gpu_kernel_breakdown(visualize=False)`` for GPU traces; for CPU-only traces,
    where HTA has no kernel breakdown, its per-op summary: ``LabeledTrace(trace_dir=...)``
    then ``get_ops_summary`` of the CPU events (count and inclusive time per op);
  * TF xplanes (the BERT one of ``../shared/realtraces`` and the largest ``.xplane.pb``
    under ``benchmarks/.data``, which ``bench_readers.py`` records): that against xprof's
    converter, ``xspace_to_tool_data([copy], "framework_op_stats",
    {})`` on a fresh temporary copy each time (xprof writes cache files beside its input);
    and against xprof-rs, a fresh server's first ``framework_op_stats`` answer;
  * beside xprof-rs, in fresh processes alternating with each other: the floor of a reader
    in Python on this machine (a process that imports numpy and the wire modules and only
    scans every event once with the C wire scanner), and, for reference, protobuf's own
    parse of the file.

Agreement, where both tools measure the same thing (relative difference, peer minus
tb-opcompare over tb-opcompare):

  * GPU traces: total GPU time, the sum of HTA's kernel breakdown (its ``sum (us)`` column,
    ``others`` rows included; kernels, memcpys and memsets) against the sum of
    tb-opcompare's device rows' ``total_us``; once with HTA's defaults (the timed run) and
    once, untimed, with ``include_last_profiler_step=True`` and ``HTA_DISABLE_NS_ROUNDING=1``
    (HTA's defaults drop kernels launched in the last profiler step and round each event of
    a nanosecond trace inwards to whole microseconds);
  * CPU traces: inclusive op time, HTA's summary against tb-opcompare's host rows'
    ``total_us``, in total and op by op;
  * xplanes: host self time, xprof's Host rows (``IDLE`` left out) against tb-opcompare's
    host rows' ``self_us``, in total and op by op over the ops xprof lists.

Known, explained differences (seen with HTA 0.5.0 and xprof 2.24): HTA's defaults give
16-18% less GPU time (the last profiler step left out; every sub-microsecond edge of a
nanosecond trace rounded away, which matters for short kernels), and the untimed run with
those two off agrees exactly; HTA sums every occurrence of an op, so an op that is the only
child of an op of the same name (``aten::div_`` in ``aten::div_``) counts twice there,
once in tb-opcompare (as ``key_averages()`` counts it); xprof's table keeps its top 500
host and 500 device rows (``kMaxNumOfOps``, ``IDLE`` among them), so its total misses the
smallest ops while each op it lists agrees.

Traces are read where they lie, never copied into the repository; the virtual environment
and xprof's temporary copies stay under ``benchmarks/.data`` (ignored) and the system's
temporary folder. If HTA cannot be installed, its columns are skipped with a message.

Usage: python benchmarks/bench_peers.py [--repeat 3] [--quick] [--only TEXT]
       (--quick: one repeat, and the traces over 16 MiB uncompressed left out;
        --only: only the rows whose label holds TEXT)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA = HERE / ".data"
REAL = REPO.parent / "shared" / "realtraces"
HTA_VERSION = "0.5.0"
HTA_VENV = DATA / "hta-venv"
HTA_PYTHON = HTA_VENV / "bin" / "python"
XPROF_RS_VERSION = "0.1.3"
XPROF_RS_VENV = DATA / "xprof-rs-venv"  # the wheel is the Rust binary alone: its own environment keeps it apart
XPROF_RS = XPROF_RS_VENV / "bin" / "xprof-rs"
QUICK_MAX_BYTES = 16 * 2**20  # --quick leaves out traces bigger than this, uncompressed

# (label, path under ../shared/realtraces, "gpu" or "cpu"); HTA reads the trace's folder,
# and each of these folders holds that one trace. A folder is the traces of one job's ranks:
# HTA reads it as it is, tb-opcompare as one run of that many workers.
TORCH_TRACES = [
    ("HTA's two ranks of one job, GPU", "torch_hta_two_ranks", "gpu"),
    ("ResNet-50 train, V100", "torch_resnet50_v100/worker0.1623143089861.pt.trace.json.gz", "gpu"),
    (
        "BERT-small infer, H100",
        "torch_bert_small_h100_vs_mi300/h100/gaunernst_bert-small-uncased__1016001.json.gz",
        "gpu",
    ),
    (
        "BERT-small infer, MI300X",
        "torch_bert_small_h100_vs_mi300/mi300/gaunernst_bert-small-uncased__1016001.json.gz",
        "gpu",
    ),
    ("ResNet-18 infer, CPU (export)", "torch_resnet18_cpu/export_chrome_trace/trace.json", "cpu"),
    (
        "ResNet-18 infer, CPU (handler)",
        "torch_resnet18_cpu/tensorboard_trace_handler/resnet18/LE-PC-DE-16_8780.1672914269646.pt.trace.json",
        "cpu",
    ),
]
BERT_XPLANE = "tf2_xplane_bert_multigpu/plugins/profile/GPU-multi-worker/34.83.195.179_6003.xplane.pb"

# Each snippet prints one JSON line: its seconds after imports and what the agreement needs.
_OURS = r"""
import json, sys, time
from tb_opcompare.ingest.formats import read_profile
# The readers (and pandas, for .frame()) are imported on first use: import them before the clock.
import pandas, tb_opcompare.ingest.readers.torch_trace, tb_opcompare.ingest.readers.xplane
started = time.perf_counter()
ops = read_profile(sys.argv[1], sys.argv[2:]).op_table.frame()
host, device = ops[ops["side"] == "host"], ops[ops["side"] == "device"]
column = "self_us" if sys.argv[1] == "xplane" else "total_us"
per_op = {}
for name, value in zip(host["op_name"], host[column]):
    per_op[name] = per_op.get(name, 0.0) + float(value)
print(json.dumps({"seconds": time.perf_counter() - started, "rows": len(ops),
                  "device_us": float(device["total_us"].sum()), "host_us": per_op}))
"""

_HTA = r"""
import json, sys, time
mode, trace_dir = sys.argv[1], sys.argv[2]
from hta.trace_analysis import TraceAnalysis
from hta.trace_diff import LabeledTrace
started = time.perf_counter()
if mode.startswith("gpu"):
    analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=mode == "gpu-exact")
    _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    out = {"rows": len(kernels), "device_us": float(kernels["sum (us)"].sum())}
else:
    trace = LabeledTrace(trace_dir=trace_dir)
    events = trace.t.get_trace(trace.ranks()[0])
    summary = trace.get_ops_summary(events[events["stream"].eq(-1)])
    ops = summary[summary["cat"].isin(["cpu_op", "Operator"])]
    out = {"rows": len(summary), "host_us": {n: float(v) for n, v in zip(ops["name"], ops["total_duration"])}}
out["seconds"] = time.perf_counter() - started
print(json.dumps(out))
"""

_XPROF = r"""
import json, sys, time
from xprof.convert import raw_to_tool_data
sys.path.insert(0, sys.argv[2])
from bench_peers import framework_op_summary  # before the clock, as every tool's imports are
started = time.perf_counter()
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "framework_op_stats", {})
summary = framework_op_summary(data)
print(json.dumps({"seconds": time.perf_counter() - started, **summary}))
"""

# What a reader of an xplane in Python can hardly go under on this machine: a process that
# starts, imports numpy and the reader's wire modules (protobuf and the schema with them),
# makes each plane's metadata, and reads every event's id, offset and duration once (the C
# scan, on two threads: the least any per-op table must do), and nothing else. Beside it,
# for reference, protobuf's own parse of the whole file (upb) with numpy imported, which
# our reader does not use. Set beside xprof-rs (a Rust server that reads on two threads),
# they say how near a target against it can be met.
_SCAN_FLOOR = r"""
import json, sys, time
import numpy
from tb_opcompare.ingest.readers.xplane_events import event_ints
from tb_opcompare.ingest.readers.xplane_wire import split_space
started, events = time.perf_counter(), 0
for plane in split_space(open(sys.argv[1], "rb").read()).planes():
    for line in plane.lines:
        for batch in line.event_batches():
            events += len(event_ints(batch))
print(json.dumps({"events": events, "seconds": time.perf_counter() - started}))
"""

_PARSE_FLOOR = r"""
import json, sys, time
import numpy
from tb_opcompare.ingest.readers.xplane_schema import XSpace
started = time.perf_counter()
space = XSpace.FromString(open(sys.argv[1], "rb").read())
print(json.dumps({"planes": len(space.planes), "seconds": time.perf_counter() - started}))
"""


def framework_op_summary(data) -> dict:
    """xprof's (and xprof-rs') ``framework_op_stats`` table as the agreement needs it: host
    self time per op and the device's total, ``IDLE`` left out."""
    table = json.loads(data)[0]
    ids = [column["id"] for column in table["cols"]]
    host, device_us = {}, 0.0
    for row in table["rows"]:
        row = dict(zip(ids, [cell["v"] if cell else None for cell in row["c"]]))
        if row["type"] == "IDLE":
            continue
        if row["host_or_device"] == "Host":
            host[row["operation"]] = host.get(row["operation"], 0.0) + row["total_self_time"]
        else:
            device_us += row["total_self_time"]
    return {"rows": len(table["rows"]), "device_us": device_us, "host_us": host}


_QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "GLOG_minloglevel": "3", "PYTHONWARNINGS": "ignore"}


def _child_env(extra_env: dict | None) -> dict:
    """The child's environment, bytecode caches allowed: an installed package has them (pip
    compiles on install), and a shell with PYTHONDONTWRITEBYTECODE=1 would otherwise make
    every run of ours compile its modules again (about 0.1 s) while the peers' are cached."""
    env = {**os.environ, **_QUIET, **(extra_env or {})}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(argv: list[str], extra_env: dict | None = None, json_out: bool = True) -> dict:
    """Run one fresh process; its wall time, its own peak RSS and (``json_out``) the JSON
    its last line printed."""
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=stdout, stderr=stderr, cwd=REPO, env=_child_env(extra_env))
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
    if child.returncode:
        last = [line for line in err.strip().splitlines() if line.strip()][-1:] or ["(no message)"]
        return {"error": f"exit {child.returncode}: {last[0][:200]}"}
    printed = json.loads(out.strip().splitlines()[-1]) if json_out else {}
    return {**printed, "wall": wall, "peak_mib": usage.ru_maxrss / 1024}


def measure_pair(ours_run, peer_argv_for, repeat: int) -> tuple[dict, dict]:
    """Alternate tb-opcompare and the peer ``repeat`` times; median of each figure.
    ``peer_argv_for()`` gives the peer's command afresh (and a clean-up) each time."""

    def peer() -> dict:
        argv, env, cleanup = peer_argv_for()
        try:
            return run_child(argv, env)
        finally:
            cleanup()

    return measure_against(ours_run, peer, repeat)


def measure_against(ours_run, peer_run, repeat: int) -> tuple[dict, dict]:
    """``measure_pair`` for a peer that is not one process to wait for: ``ours_run()`` and
    ``peer_run()`` return their figures (``wall``, ``seconds``, ``peak_mib``) themselves."""
    ours_runs, peer_runs = [], []
    for _ in range(repeat):
        ours_runs.append(ours_run())
        peer_runs.append(peer_run())
    return summarise(ours_runs), summarise(peer_runs)


TB_OPCOMPARE = Path(sys.executable).parent / "tb-opcompare"


def ours_for(path: Path, file_format: str):
    """What ``measure_pair`` times for tb-opcompare on one trace (or a folder of ranks): the
    command a user runs for its per-op table, ``tb-opcompare compare`` of the run with
    itself, cold (a fresh logdir holding the traces, ``--no-cache``), the whole process; and,
    once and untimed, ``read_profile`` in a script (the ``_OURS`` snippet) for the read's
    own seconds (in brackets) and the figures the agreement needs."""
    files = trace_files(path)
    agreement = run_child([sys.executable, "-c", _OURS, file_format, *map(str, files)])

    def run() -> dict:
        if "error" in agreement:
            return agreement
        scratch = Path(tempfile.mkdtemp(prefix="bench-ours-"))
        folder = scratch / "run" / ("plugins/profile/session" if file_format == "xplane" else "")
        folder.mkdir(parents=True)
        for number, file in enumerate(files):
            name = (
                file.name
                if file_format == "xplane"
                else f"bench_{number}.1.pt.trace.json" + file.suffix * (file.suffix == ".gz")
            )
            try:
                os.link(file, folder / name)
            except OSError:  # another file system
                shutil.copy(file, folder / name)
        argv = [str(TB_OPCOMPARE), "compare", str(scratch), "--baseline", "run", "--target", "run", "--no-cache"]
        try:
            timed = run_child(argv + ["--top", "10"], json_out=False)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return timed if "error" in timed else {**agreement, "wall": timed["wall"], "peak_mib": timed["peak_mib"]}

    return run


def summarise(runs: list[dict]) -> dict:
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    last = dict(runs[-1])
    for key in ("wall", "peak_mib", "seconds"):
        last[key] = statistics.median(run[key] for run in runs)
    return last


def ensure_hta() -> str | None:
    """The HTA virtual environment (made once); its version, or None with a message."""
    probe = [
        str(HTA_PYTHON),
        "-c",
        (
            "import importlib.metadata as m; import hta; print(m.version("
            "'HolisticTraceAnalysis'), m.version('pandas'), m.version('numpy'))"
        ),
    ]
    if HTA_PYTHON.exists():
        done = subprocess.run(probe, check=False, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.split()[0] == HTA_VERSION:
            return done.stdout.strip()
    print(
        f"making {HTA_VENV.relative_to(REPO)} with HolisticTraceAnalysis=={HTA_VERSION} (about 30 s, once) ...",
        flush=True,
    )
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(HTA_VENV)], check=True, capture_output=True)
        subprocess.run(
            [
                str(HTA_PYTHON),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"HolisticTraceAnalysis=={HTA_VERSION}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        done = subprocess.run(probe, capture_output=True, text=True, check=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        detail = getattr(error, "stderr", None) or str(error)
        detail = detail if isinstance(detail, str) else detail.decode(errors="replace")
        lines = [line for line in detail.strip().splitlines() if "is ignored" not in line]
        print(
            f"HTA skipped: could not install HolisticTraceAnalysis=={HTA_VERSION} into "
            f"{HTA_VENV.relative_to(REPO)}: {(lines or ['?'])[-1][:300]}"
        )
        return None
    return done.stdout.strip()


def ensure_xprof_rs() -> str | None:
    """xprof-rs in its own virtual environment (made once): its version, or None with a
    message. The wheel holds the Rust binary alone (server and CLI)."""
    if XPROF_RS.exists():
        return XPROF_RS_VERSION
    print(f"making {XPROF_RS_VENV.relative_to(REPO)} with xprof-rs=={XPROF_RS_VERSION} ...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(XPROF_RS_VENV)], check=True, capture_output=True)
        subprocess.run(
            [
                str(XPROF_RS_VENV / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"xprof-rs=={XPROF_RS_VERSION}",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as error:
        detail = getattr(error, "stderr", None) or str(error)
        lines = [line for line in str(detail).strip().splitlines() if "is ignored" not in line]
        print(f"xprof-rs skipped: could not install xprof-rs=={XPROF_RS_VERSION}: {(lines or ['?'])[-1][:300]}")
        return None
    return XPROF_RS_VERSION


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_xprof_rs(path: Path) -> dict:
    """A fresh xprof-rs server over a fresh copy of the xplane (as one session of one run):
    the wall time from its start to its first ``framework_op_stats`` answer, its peak RSS,
    and the table's figures. The same question xprof's Profile tab asks first of a run."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-xprof-rs-"))
    session = scratch / "run" / "plugins" / "profile" / "session"
    session.mkdir(parents=True)
    shutil.copy(path, session / path.name)
    port = free_port()
    url = (
        f"http://127.0.0.1:{port}/data/plugin/profile/data?run=run/session&tag=framework_op_stats"
        f"&host={urllib.parse.quote(path.name[: -len('.xplane.pb')])}"
    )
    started = time.perf_counter()
    server = subprocess.Popen(
        [str(XPROF_RS), "--logdir", str(scratch), "--port", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        body = None
        while body is None and time.perf_counter() - started < 600:
            try:
                with urllib.request.urlopen(url, timeout=600) as response:
                    body = response.read()
            except urllib.error.HTTPError as error:  # listening, and it refused the question
                return {"error": f"xprof-rs answered {error.code} to {url}"}
            except (ConnectionError, urllib.error.URLError):  # not listening yet
                time.sleep(0.002)
        wall = time.perf_counter() - started
    finally:
        server.terminate()
        _, _, usage = os.wait4(server.pid, 0)
        shutil.rmtree(scratch, ignore_errors=True)
    if body is None:
        return {"error": "xprof-rs gave no answer in 600 s"}
    return {**framework_op_summary(body), "wall": wall, "seconds": wall, "peak_mib": usage.ru_maxrss / 1024}


def uncompressed_size(path: Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    size = 0
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            size += len(chunk)
    return size


def trace_files(path: Path) -> list[Path]:
    """The traces a row reads: the file, or each trace of a folder of ranks."""
    return sorted(child for child in path.iterdir() if child.is_file()) if path.is_dir() else [path]


def size_label(path: Path) -> str:
    files = trace_files(path)
    on_disk = sum(file.stat().st_size for file in files) / 2**20
    if all(file.suffix == ".gz" for file in files):
        return f"{on_disk:.2f} gz/{sum(map(uncompressed_size, files)) / 2**20:.1f} MiB"
    return f"{on_disk:.2f} MiB"


def figures(result: dict) -> tuple[str, str]:
    if "error" in result:
        return ("skipped" if result["error"] == "skipped" else "failed"), "-"
    return f"{result['wall']:.2f} ({result['seconds']:.2f})", f"{result['peak_mib']:.0f}"


def relative(peer: float, ours: float) -> str:
    return f"{(peer - ours) / ours:+.3%}" if ours else ("0" if not peer else "n/a (ours 0)")


def per_op_agreement(ours: dict, peer: dict) -> str:
    both = set(ours) & set(peer)
    differences = {name: (peer[name] - ours[name]) / ours[name] for name in both if ours[name]}
    differing = sorted(
        (name for name, value in differences.items() if abs(value) > 1e-4), key=lambda name: -abs(differences[name])
    )
    text = (
        f"{len(both)} ops in both (tb-opcompare {len(ours)}, peer {len(peer)}), summed over them "
        f"{relative(sum(peer[n] for n in both), sum(ours[n] for n in both))}; "
    )
    if not differing:
        return text + "every one within 0.01%"
    worst = differing[0]
    return (
        text + f"{len(differing)} differ by more than 0.01%, most {worst} ({ours[worst]:,.1f} vs "
        f"{peer[worst]:,.1f} us, {differences[worst]:+.1%})"
    )


def print_table(title: str, peer: str, rows: list[list[str]]) -> None:
    header = ["trace", "size", "tb-opcompare s", "MiB", f"{peer} s", "MiB", "time ratio", "mem ratio"]
    widths = [max(len(str(row[i])) for row in [header] + rows) for i in range(len(header))]
    print(f"\n{title}")
    for row in [header] + rows:
        print(
            "  "
            + "  ".join(
                str(cell).ljust(width) if i < 2 else str(cell).rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths))
            )
        )


def table_row(label: str, path: Path, ours: dict, peer: dict) -> list[str]:
    ratios = ["-", "-"]
    if "error" not in ours and "error" not in peer:
        ratios = [f"{peer['wall'] / ours['wall']:.1f}x", f"{peer['peak_mib'] / ours['peak_mib']:.1f}x"]
    return [label, size_label(path), *figures(ours), *figures(peer), *ratios]


LARGE_TORCH_BYTES = 200 * 2**20


def recorded_traces(prefix: str, pattern: str) -> list[Path]:
    """Traces ``bench_readers.py`` recorded (``benchmarks/.data/<prefix><steps>/``); not
    its tiled copies (``…_x4``), which only our reader is timed on."""
    return [
        path
        for folder in DATA.glob(f"{prefix}*")
        if folder.name[len(prefix) :].isdigit()
        for path in folder.glob(f"**/{pattern}")
    ]


def torch_benchmarks(repeat: int, quick: bool, hta: bool, only: str = "") -> list[str]:
    rows, agreement = [], []
    traces = [(label, REAL / relative_path, kind) for label, relative_path, kind in TORCH_TRACES]
    large = sorted(
        (path for path in recorded_traces("torch_", "*.pt.trace.json") if path.stat().st_size >= LARGE_TORCH_BYTES),
        key=lambda p: p.stat().st_size,
    )
    if large:  # the smallest of them: HTA takes minutes on one
        traces.append((f"CNN train, CPU ({large[0].relative_to(DATA).parts[0]})", large[0], "cpu"))
    else:
        print(
            "(no recorded PyTorch trace of 200 MiB or more under benchmarks/.data: "
            "`python benchmarks/bench_readers.py` makes one)"
        )
    for label, path, kind in traces:
        if only not in label:
            continue
        if not path.exists():
            agreement.append(f"{label}: {path} is missing; skipped")
            continue
        if quick and sum(map(uncompressed_size, trace_files(path))) > QUICK_MAX_BYTES:
            agreement.append(f"{label}: left out by --quick")
            continue
        ours_run = ours_for(path, "pytorch")
        folder = path if path.is_dir() else path.parent
        if not hta:
            ours = summarise([ours_run() for _ in range(repeat)])
            rows.append(table_row(label, path, ours, {"error": "skipped"}))
            continue
        hta_argv = [str(HTA_PYTHON), "-c", _HTA, kind, str(folder)]
        ours, peer = measure_pair(ours_run, lambda argv=hta_argv: (argv, None, lambda: None), repeat)
        rows.append(table_row(label, path, ours, peer))
        if "error" in ours or "error" in peer:
            agreement.append(f"{label}: tb-opcompare {ours.get('error', 'ok')}; HTA {peer.get('error', 'ok')}")
        elif kind == "gpu":
            exact = run_child([str(HTA_PYTHON), "-c", _HTA, "gpu-exact", str(folder)], {"HTA_DISABLE_NS_ROUNDING": "1"})
            exact_text = (
                exact["error"]
                if "error" in exact
                else f"{exact['device_us']:,.1f} us ({relative(exact['device_us'], ours['device_us'])})"
            )
            agreement.append(
                f"{label}: GPU time: tb-opcompare {ours['device_us']:,.1f} us; HTA defaults "
                f"{peer['device_us']:,.1f} us ({relative(peer['device_us'], ours['device_us'])}); HTA with the last "
                f"profiler step kept and ns rounding off {exact_text}"
            )
        else:
            ours_total, peer_total = sum(ours["host_us"].values()), sum(peer["host_us"].values())
            agreement.append(
                f"{label}: inclusive CPU op time: tb-opcompare {ours_total:,.1f} us; HTA {peer_total:,.1f} us "
                f"({relative(peer_total, ours_total)}); {per_op_agreement(ours['host_us'], peer['host_us'])}"
            )
    print_table(
        "PyTorch traces: tb-opcompare reader vs HTA (wall s of the whole process (s after imports), "
        "peak RSS MiB; ratio = HTA / tb-opcompare)",
        "HTA",
        rows,
    )
    return agreement


def xplane_benchmarks(repeat: int, quick: bool, xprof_rs: bool, only: str = "") -> list[str]:
    planes = [("TF2 BERT, 8 GPUs (xplane)", REAL / BERT_XPLANE)]
    recorded = sorted(recorded_traces("xplane_", "*.xplane.pb"), key=lambda p: p.stat().st_size)
    if recorded:
        planes.append((f"Keras CNN CPU ({recorded[-1].relative_to(DATA).parts[0]})", recorded[-1]))
    else:
        print("(no recorded .xplane.pb under benchmarks/.data: `python benchmarks/bench_readers.py` makes one)")
    rows, rs_rows, agreement, floors = [], [], [], []
    for label, path in planes:
        if only not in label:
            continue
        if not path.exists():
            agreement.append(f"{label}: {path} is missing; skipped")
            continue
        if quick and path.stat().st_size > QUICK_MAX_BYTES:
            agreement.append(f"{label}: left out by --quick")
            continue

        def fresh_copy(path=path):
            scratch = Path(tempfile.mkdtemp(prefix="bench-peers-"))
            shutil.copy(path, scratch / path.name)
            return (
                [sys.executable, "-c", _XPROF, str(scratch / path.name), str(HERE)],
                None,
                lambda: shutil.rmtree(scratch, ignore_errors=True),
            )

        ours_run = ours_for(path, "xplane")
        ours, peer = measure_pair(ours_run, fresh_copy, repeat)
        rows.append(table_row(label, path, ours, peer))
        if xprof_rs:
            ours_again, fast_peer = measure_against(ours_run, lambda path=path: run_xprof_rs(path), repeat)
            rs_rows.append(table_row(label, path, ours_again, fast_peer))
            if "error" not in fast_peer and "error" not in ours_again:
                agreement.append(
                    f"{label}: host self time: xprof-rs {sum(fast_peer['host_us'].values()):,.1f} us; "
                    f"{per_op_agreement(ours_again['host_us'], fast_peer['host_us'])}"
                )
                floors.append(floor_line(label, path, ours_again, fast_peer, repeat))
        if "error" in ours or "error" in peer:
            agreement.append(f"{label}: tb-opcompare {ours.get('error', 'ok')}; xprof {peer.get('error', 'ok')}")
            continue
        ours_total, peer_total = sum(ours["host_us"].values()), sum(peer["host_us"].values())
        device = ""
        if ours["device_us"] or peer["device_us"]:
            device = f"; GPU time: tb-opcompare {ours['device_us']:,.1f} us, " + (
                f"xprof {peer['device_us']:,.1f} us" if peer["device_us"] else "xprof gives no Device rows"
            )
        agreement.append(
            f"{label}: host self time: tb-opcompare {ours_total:,.1f} us; xprof {peer_total:,.1f} us "
            f"({relative(peer_total, ours_total)}); {per_op_agreement(ours['host_us'], peer['host_us'])}{device}"
        )
    print_table(
        "TF xplanes: tb-opcompare reader vs xprof framework_op_stats (as above; ratio = xprof / tb-opcompare)",
        "xprof",
        rows,
    )
    if rs_rows:
        print_table(
            "TF xplanes: tb-opcompare reader vs xprof-rs (a fresh server's first framework_op_stats answer, "
            "its whole time; ratio = xprof-rs / tb-opcompare: above 1x we are faster)",
            "xprof-rs",
            rs_rows,
        )
        for line in floors:
            print(f"  {line}")
    return agreement


def floor_line(label: str, path: Path, ours: dict, fast_peer: dict, repeat: int) -> str:
    """Our whole process and xprof-rs's (medians of the run before) beside the floor of a
    Python reader of ``path`` (``_SCAN_FLOOR``) and protobuf's parse of it
    (``_PARSE_FLOOR``), these two alternating, medians of ``repeat``."""
    scan, parse = measure_pair(
        lambda: run_child([sys.executable, "-c", _SCAN_FLOOR, str(path)]),
        lambda: ([sys.executable, "-c", _PARSE_FLOOR, str(path)], None, lambda: None),
        repeat,
    )
    if "error" in scan or "error" in parse:
        return f"{label}: floor not measured: {scan.get('error') or parse.get('error')}"
    return (
        f"{label}: on this machine, importing numpy and the wire modules and scanning every event once in C, "
        f"nothing else, takes {scan['wall']:.2f} s; protobuf's parse of the file {parse['wall']:.2f} s. tb-opcompare "
        f"{ours['wall']:.2f} s is {ours['wall'] / scan['wall']:.1f}x the scan; xprof-rs {fast_peer['wall']:.2f} s "
        f"is {fast_peer['wall'] / scan['wall']:.1f}x it (2x xprof-rs would be {fast_peer['wall'] / 2:.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per tool and trace (median)")
    parser.add_argument("--quick", action="store_true", help="one repeat; leave out traces over 16 MiB")
    parser.add_argument("--only", default="", help="time only the rows whose label holds this text")
    args = parser.parse_args()
    repeat = 1 if args.quick else max(1, args.repeat)
    if not REAL.is_dir():
        raise SystemExit(f"{REAL} is missing: the real traces live in ../shared/realtraces beside the checkout")
    started = time.perf_counter()
    DATA.mkdir(exist_ok=True)
    versions = ensure_hta()
    if versions:
        hta_version, pandas_version, numpy_version = versions.split()
        print(f"HTA {hta_version} (pandas {pandas_version}, numpy {numpy_version}) in {HTA_VENV.relative_to(REPO)}")
    agreement = torch_benchmarks(repeat, args.quick, bool(versions), args.only)
    fast_xprof = ensure_xprof_rs()
    if fast_xprof:
        print(f"xprof-rs {fast_xprof} in {XPROF_RS_VENV.relative_to(REPO)}")
    agreement += xplane_benchmarks(repeat, args.quick, bool(fast_xprof), args.only)
    print("\nAgreement (peer minus tb-opcompare, relative to tb-opcompare):")
    for line in agreement:
        print(f"  {line}")
    print(f"\n{repeat} repeat(s); whole script {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
