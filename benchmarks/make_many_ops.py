"""Two PyTorch profiler traces of N distinct ops each (issue 57: "many ops").

Each op is one ``cpu_op`` event with a name of its own (``aten::op{i}``), as the op
names of a big unrolled graph carry their layer index; the events lie in
``ProfilerStep#N`` ranges (one ``user_annotation`` each) on one thread, in the
torch.profiler chrome-trace layout of tests/fixtures/logdir/torch (the header, a
``process_name`` record, then the events). The baseline's ops take 1-97 µs; the
target's run twice as fast on most and slower on every seventh, so every status occurs.
About 90 MB a side at a million ops.

Usage: python benchmarks/make_many_ops.py LOGDIR [--ops 1000000] [--steps 10]
Writes LOGDIR/many_cpu/host.1.pt.trace.json and LOGDIR/many_gpu/host.1.pt.trace.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

RUNS = ("many_cpu", "many_gpu")  # baseline, target
_HEADER = (
    '{"schemaVersion": 1, "deviceProperties": [], "record_shapes": 0, "host_name": "bench",'
    ' "displayTimeUnit": "ms", "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [\n'
    '{"ph": "M", "name": "process_name", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "python"}}'
)
_OP = ',{"ph":"X","cat":"cpu_op","name":"aten::op%d","pid":1,"tid":1,"ts":%d,"dur":%d}'
_STEP = (
    ',\n{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1, "tid": 1,'
    ' "ts": %d, "dur": %d, "args": {"External id": %d}}'
)
_FOOTER = '\n], "traceName": "bench.pt.trace.json"}\n'


def _duration(op: int, target: bool) -> int:
    base = op % 97 + 2
    if not target:
        return base
    return base * 2 if op % 7 == 0 else max(1, base // 2)


def write_trace(path: Path, ops: int, steps: int, target: bool) -> None:
    """One trace: ``steps`` ProfilerStep ranges splitting ``ops`` ops, each op once."""
    per_step = -(-ops // steps) if ops else 0
    clock = 1_000
    with path.open("w") as out:
        out.write(_HEADER)
        for step in range(steps):
            first, last = step * per_step, min(ops, (step + 1) * per_step)
            durations = [_duration(op, target) for op in range(first, last)]
            span = sum(durations) + len(durations) + 2
            out.write(_STEP % (step, clock, span, step))
            parts, ts = [], clock + 1
            for op, duration in zip(range(first, last), durations):
                parts.append(_OP % (op, ts, duration))
                ts += duration + 1
            out.write("".join(parts))
            clock += span + 10
        out.write(_FOOTER)


def make_many_ops(logdir: Path, ops: int = 1_000_000, steps: int = 10) -> Path:
    """The two runs under ``logdir`` (made if missing); returns ``logdir``."""
    for run, target in zip(RUNS, (False, True)):
        (logdir / run).mkdir(parents=True, exist_ok=True)
        write_trace(logdir / run / "host.1.pt.trace.json", ops, steps, target)
    return logdir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir", type=Path)
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    make_many_ops(args.logdir, args.ops, args.steps)


if __name__ == "__main__":
    main()
