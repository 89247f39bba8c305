"""The malformed-input corpus: broken logdir entries built from real fixtures, each with
what a user must be told. ``build_corpus(root)`` writes one run per case under ``root``
and returns the cases.

A case is an error case (``reason`` is a fragment of the ProfileError the reader must
raise, naming ``path``) or a survivable one (``reason`` None: the run must read, and
``check`` says what to verify).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
from collections.abc import Callable
from pathlib import Path

from conftest import FIXTURES, HOSTILE, LOGDIR, MALFORMED

TORCH_TRACE = next((LOGDIR / "torch" / "cnn_torch_cpu_bs4").glob("*.pt.trace.json"))
XPLANE = next((LOGDIR / "tf_keras" / "cnn_cpu_bs8" / "train" / "plugins" / "profile").glob("*/vm.xplane.pb"))
TF1_TIMELINE = LOGDIR / "tf1" / "mlp_gpu" / "timeline_02_step_1.json"
SUMMARY = FIXTURES / "summary_json" / "mlp_cpu" / "summary.json"
HOSTILE_TRACE = next((HOSTILE / "hostile_names_cpu_bs4").glob("*.pt.trace.json"))


@dataclasses.dataclass
class Case:
    run: str  # run name under the corpus root
    path: Path | None  # the file the error must name
    reason: str | None  # fragment of the error; None: the run reads
    check: Callable | None = None  # for readable cases: check(loaded_run)


def _torch_events() -> dict:
    return json.loads(TORCH_TRACE.read_text())


def _write_torch(run_dir: Path, trace: dict) -> Path:
    run_dir.mkdir(parents=True)
    path = run_dir / "worker.1.pt.trace.json"
    path.write_text(json.dumps(trace))
    return path


def _xplane_run(root: Path, run: str, data: bytes) -> Path:
    path = root / run / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path


def _first_op(trace: dict, category: str = "cpu_op") -> dict:
    return next(e for e in trace["traceEvents"] if e.get("cat") == category and e.get("ph") == "X")


def build_corpus(root: Path) -> list[Case]:
    cases: list[Case] = []
    rng = random.Random(7)
    xplane = XPLANE.read_bytes()

    cases.append(Case("xplane_empty", _xplane_run(root, "xplane_empty", b""), "the file is empty (0 bytes)"))
    cases.append(
        Case("xplane_truncated", _xplane_run(root, "xplane_truncated", xplane[: len(xplane) // 3]), "truncated")
    )
    cases.append(
        Case(
            "xplane_random_bytes",
            _xplane_run(root, "xplane_random_bytes", rng.randbytes(4096)),
            "not a valid XSpace protobuf",
        )
    )

    plain = TORCH_TRACE.read_bytes()
    packed = gzip.compress(plain)
    (root / "gz_truncated").mkdir()
    path = root / "gz_truncated" / "worker.1.pt.trace.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    cases.append(Case("gz_truncated", path, "the gzip stream is truncated or corrupt"))
    (root / "gz_corrupt").mkdir()
    path = root / "gz_corrupt" / "worker.1.pt.trace.json.gz"
    corrupt = bytearray(packed)
    for offset in range(len(corrupt) // 2, len(corrupt) // 2 + 64):
        corrupt[offset] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    cases.append(Case("gz_corrupt", path, "the gzip stream is truncated or corrupt"))

    path = _write_torch(root / "events_not_a_list", {"traceEvents": {"ph": "X", "name": "MatMul"}})
    cases.append(Case("events_not_a_list", path, "Expected `array`, got `object`"))
    tf_trace = next((FIXTURES / "tf_trace_json").glob("**/*.trace.json.gz"))
    packed_tf = tf_trace.read_bytes()
    path = root / "tf23_truncated" / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.trace.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(packed_tf[: len(packed_tf) * 3 // 4])
    cases.append(Case("tf23_truncated", path, "the gzip stream is truncated or corrupt"))
    path = _write_torch(root / "not_a_trace", {"hello": "world", "steps": [1, 2]})
    cases.append(Case("not_a_trace", path, "JSON is not a Chrome trace"))
    trace = _torch_events()
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    cases.append(Case("no_op_events", _write_torch(root / "no_op_events", trace), "no cpu_op, runtime or kernel"))

    for label, value, reason in (("negative", -5.0, "a negative duration"), ("missing", None, "no duration")):
        trace = _torch_events()
        event = _first_op(trace)
        if value is None:
            del event["dur"]
        else:
            event["dur"] = value
        cases.append(Case(f"duration_{label}", _write_torch(root / f"duration_{label}", trace), reason))
    trace = _torch_events()
    _first_op(trace)["dur"] = float("nan")  # what Python's json.dump writes: `"dur": NaN`, not JSON
    cases.append(Case("duration_nan", _write_torch(root / "duration_nan", trace), "NaN"))

    # Kernels whose correlation id matches no launch: real traces have them (launches
    # before the profiling window); they are kept under their kernel names, with a warning.
    trace = _torch_events()
    trace["traceEvents"].append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "orphan_gemm_kernel",
            "pid": 0,
            "tid": 7,
            "ts": trace["traceEvents"][-1].get("ts", 0),
            "dur": 12.5,
            "args": {"correlation": 987654321},
        }
    )

    def orphan_check(loaded):
        ops = loaded.profile.op_table.frame().set_index("op_name")
        assert ops.loc["orphan_gemm_kernel", "op_type"] == "(kernel without a launching op)"
        assert any("without a launching op" in w for w in loaded.profile.facts.warnings)

    cases.append(Case("orphan_kernels", _write_torch(root / "orphan_kernels", trace), None, orphan_check))

    # An event's args are decoded only where the read needs them, after the batch: a kernel's
    # correlation id that is text is still named, event and field
    trace = _torch_events()
    kernel = dict(trace["traceEvents"][-1], ph="X", cat="kernel", name="gemm", dur=1.0, args={"correlation": "7"})
    trace["traceEvents"].append(kernel)
    reason = f"at `$.traceEvents[{len(trace['traceEvents']) - 1}].args.correlation`"
    cases.append(Case("correlation_text", _write_torch(root / "correlation_text", trace), reason))

    summary = json.loads(SUMMARY.read_text())
    summary["op_stats"] = [summary["op_stats"]]  # a list where an object of models belongs
    (root / "summary_wrong_nesting").mkdir()
    path = root / "summary_wrong_nesting" / "summary.json"
    path.write_text(json.dumps(summary))
    cases.append(Case("summary_wrong_nesting", path, "op_stats"))
    for run, duration, problem in (
        ("summary_negative_duration", -5, "duration -5.0 µs is negative"),
        ("summary_huge_duration", 1e308, "duration 1e+308 µs is not a real duration"),
    ):
        summary = json.loads(SUMMARY.read_text())
        nodes = next(iter(next(iter(next(iter(summary["op_stats"].values())).values())).values()))["CPU"]
        name = next(iter(nodes))
        nodes[name]["duration"] = duration
        (root / run).mkdir()
        path = root / run / "summary.json"
        path.write_text(json.dumps(summary))
        cases.append(Case(run, path, f"-> CPU -> {name!r}: {problem}"))

    # Names a page or a spreadsheet could trip on, written as valid (escaped) JSON.
    odd_names = ['<script>alert("x")</script>', 'quote " and \\ backslash', "line one\nline two", "ünïcödé 注意 ⚡"]
    trace = json.loads(HOSTILE_TRACE.read_text())
    annotations = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    for event, name in zip(annotations, odd_names * (len(annotations) // len(odd_names) + 1)):
        event["name"] = name

    def names_check(loaded):
        assert set(odd_names) <= set(loaded.profile.op_table.frame()["op_name"])

    cases.append(Case("odd_names_cpu_bs4", _write_torch(root / "odd_names_cpu_bs4", trace), None, names_check))

    (root / "loop").mkdir()
    os.symlink("..", root / "loop" / "back_to_the_top")  # a symlink loop must not hang discovery

    (root / "dangling").mkdir()
    path = root / "dangling" / "worker.1.pt.trace.json"
    os.symlink(root / "dangling" / "vanished.json", path)
    cases.append(Case("dangling", path, "cannot read"))

    session = root / "no_hosts" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    cases.append(Case("no_hosts", session, "no .xplane.pb"))

    both = root / "two_formats"
    both.mkdir()
    (both / "timeline.json").write_bytes(TF1_TIMELINE.read_bytes())
    (both / "worker.1.pt.trace.json").write_bytes(TORCH_TRACE.read_bytes())

    def two_formats_check(loaded):
        assert loaded.profile.facts.format in ("pytorch", "tf1_timeline")

    cases.append(Case("two_formats", None, None, two_formats_check))
    cases.append(Case("two_formats [pytorch]", None, None, two_formats_check))

    real_bad = next(MALFORMED.glob("*/*.pt.trace.json"))
    (root / "unescaped_quote").mkdir()
    path = root / "unescaped_quote" / real_bad.name
    path.write_bytes(real_bad.read_bytes())
    cases.append(Case("unescaped_quote", path, "not valid JSON at line 306"))
    return cases
