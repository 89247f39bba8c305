"""``tb-opcompare record``: run a training command once per device, batch size and cell of
``--matrix`` into ``LOGDIR/<model>_<device>_bs<N>[_<value>...]`` (``…_rep<K>`` for each of
``--repeats N`` > 1). ``--matrix precision=fp32,bf16 --matrix backend=eager,compile``
records every combination, each value as a token of the run name and, for the helpers,
in ``TB_OPCOMPARE_MATRIX`` (JSON), which they write to the sidecar as the run's precision
and compiler; ``{precision}``, ``{backend}`` ... in the command are
filled in like ``{batch_size}``.

Each run gets ``TB_OPCOMPARE_RUN_DIR``, ``TB_OPCOMPARE_MODEL``, ``TB_OPCOMPARE_BATCH_SIZE``,
``TB_OPCOMPARE_DEVICE`` and, with repeats, ``TB_OPCOMPARE_REPEAT`` (read by
``tb_opcompare.record``'s helpers), and
``{batch_size}``, ``{run_dir}``, ``{device}``, ``{model}`` in the command are filled in.
CPU runs hide the GPUs (``CUDA_VISIBLE_DEVICES=-1``). The command's output goes to
``<run dir>/opcompare-record.log``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable

from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import discover
from tb_opcompare.ingest.sidecar import SIDECAR
from tb_opcompare.recording.profilers import (
    ENV_BATCH_SIZE,
    ENV_DEVICE,
    ENV_MATRIX,
    ENV_MODEL,
    ENV_REPEAT,
    ENV_RUN_DIR,
    MATRIX_FACTS,
)
from tb_opcompare.store.progress import Progress

DEVICES = ("cpu", "gpu")
LOG_NAME = "opcompare-record.log"


@dataclasses.dataclass
class RunResult:
    run_dir: str
    device: str
    batch_size: int
    ok: bool
    reason: str = ""
    seconds: float = 0.0
    repeat: int | None = None
    cell: dict[str, str] = dataclasses.field(default_factory=dict)  # this run's value of each --matrix dimension


MATRIX_VALUE = re.compile(r"[A-Za-z0-9.+-]+")


def parse_matrix(texts: list[str]) -> list[tuple[str, list[str]]]:
    """``["precision=fp32,bf16", "backend=eager,compile"]`` -> dimensions and their values;
    ValueError naming the part that is wrong."""
    dimensions: list[tuple[str, list[str]]] = []
    for text in texts:
        name, _, values_text = text.partition("=")
        name = name.strip().lower()
        values = [value.strip() for value in values_text.split(",") if value.strip()]
        if name not in MATRIX_FACTS:
            # another dimension would be in the run names only, and runs differing in it
            # would be pooled as repeats of one configuration
            raise ValueError(
                f"--matrix {text!r}: the dimensions are {', '.join(MATRIX_FACTS)} (e.g. "
                "precision=fp32,bf16); record other variations under another --model"
            )
        if not values or any(not MATRIX_VALUE.fullmatch(value) for value in values):
            raise ValueError(f"--matrix {text!r}: give comma-separated values of letters, digits, '.', '+' or '-'")
        if len(set(values)) < len(values) or name in (known for known, _ in dimensions):
            raise ValueError(f"--matrix {text!r}: a dimension or value is given twice")
        dimensions.append((name, values))
    return dimensions


def gpu_present() -> bool:
    """Whether an NVIDIA GPU is visible, without importing a framework."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("-1", ""):
        return False
    if not shutil.which("nvidia-smi"):
        return False
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listing.returncode == 0 and "GPU" in listing.stdout


def fill(command: list[str], **values) -> list[str]:
    filled = []
    for part in command:
        for key, value in values.items():
            part = part.replace("{" + key + "}", str(value))
        filled.append(part)
    return filled


def occupied_reason(run_dir: str) -> str | None:
    """Why recording into ``run_dir`` would mix two recordings in one run, or None. A run
    directory holding a profile already would get a second one beside it, of another
    framework or model perhaps, and its sidecar would be overwritten."""
    existing = discover(run_dir) if os.path.isdir(run_dir) else []
    if not existing:
        return None
    kinds = ", ".join(
        sorted(
            {
                f"{source.format} ({len(source.sessions)} capture{'s' * (len(source.sessions) > 1)})"
                for source in existing
            }
        )
    )
    described = ""
    try:
        sidecar = json.loads(fs.read_head(os.path.join(run_dir, SIDECAR), 1 << 20))  # never blocks on a FIFO
        if isinstance(sidecar, dict):
            described = f" of model {sidecar.get('model')!r} ({sidecar.get('framework') or 'unknown framework'})"
    except (OSError, ValueError, RecursionError):
        pass
    return (
        f"{run_dir} already holds a profile{described}: {kinds}. Recording into it would put two recordings in "
        "one run and overwrite its opcompare.json; choose another --model or --logdir, or pass --force to add "
        "a capture to it anyway"
    )


@dataclasses.dataclass
class RecordingPlan:
    """What ``tb-opcompare record`` records: ``command`` once per device, batch size,
    ``matrix`` cell and repeat, each into ``<logdir>/<model>_<device>_bs<N>[_<cell
    values>][_rep<K>]``. ``force`` records into a run folder that holds a profile already."""

    logdir: str
    model: str
    batch_sizes: list[int]
    devices: list[str]
    command: list[str]
    force: bool = False
    repeats: int = 1
    matrix: list[tuple[str, list[str]]] | None = None


@dataclasses.dataclass
class _Recording:
    """One run of a plan: the run's folder and configuration, and its place in the plan."""

    index: int
    total: int
    device: str
    batch_size: int
    cell: dict[str, str]
    repeat: int | None
    run_dir: str


def record_runs(
    plan: RecordingPlan,
    say: Callable[[str], None] = print,
    has_gpu: Callable[[], bool] = gpu_present,
    progress: Progress | None = None,
) -> list[RunResult]:
    """Run the plan's command once per run, each in a process of its own, and say how each
    went; a failed or refused run never stops the others. ``progress`` is told of each
    run recorded (the lines to ``say`` tell each already)."""
    results = []
    recordings = _recordings(plan, say, has_gpu)
    progress = progress or Progress(say=lambda _line: None)
    progress.start(len(recordings), "runs")
    for recording in recordings:
        refusal = None if plan.force else occupied_reason(recording.run_dir)
        if refusal:
            say(f"[{recording.index}/{recording.total}] {os.path.basename(recording.run_dir)}: refused")
            results.append(_result(recording, reason=refusal))
        else:
            results.append(_record_one(plan, recording, say))
        progress.advance(os.path.basename(recording.run_dir), ok=results[-1].ok)
    return results


def _recordings(plan: RecordingPlan, say: Callable[[str], None], has_gpu: Callable[[], bool]) -> list[_Recording]:
    names = [name for name, _ in plan.matrix or []]
    cells = [dict(zip(names, values)) for values in itertools.product(*(values for _, values in plan.matrix or []))]
    wanted: list[tuple[str, int, dict[str, str], int | None]] = []  # (device, batch size, cell, repeat)
    for device in plan.devices:
        if device == "gpu" and not has_gpu():
            say("gpu: no GPU visible here (nvidia-smi finds none); skipping the GPU runs")
            continue
        # repeats interleave (rep 1 of every size and cell, then rep 2 ...) so that a drift
        # of the machine over the recording spreads across them instead of biasing one
        wanted.extend(
            (device, size, cell, repeat)
            for repeat in range(1, plan.repeats + 1)
            for size in plan.batch_sizes
            for cell in cells
        )
    recordings = []
    for index, (device, batch_size, cell, repeat) in enumerate(wanted, start=1):
        if plan.repeats == 1:
            repeat = None  # one recording: no repeat number, in the name or the sidecar
        run_name = (
            f"{plan.model}_{device}_bs{batch_size}"
            + "".join(f"_{value}" for value in cell.values())
            + (f"_rep{repeat}" if repeat else "")
        )
        run_dir = os.path.join(plan.logdir, run_name)
        recordings.append(_Recording(index, len(wanted), device, batch_size, cell, repeat, run_dir))
    return recordings


def _environment(plan: RecordingPlan, recording: _Recording) -> dict[str, str]:
    """The command's environment: what the recording helpers read to name and describe the
    run (``tb_opcompare.recording.profilers``), and no GPU for a CPU run."""
    env = {
        **os.environ,
        ENV_RUN_DIR: recording.run_dir,
        ENV_MODEL: plan.model,
        ENV_BATCH_SIZE: str(recording.batch_size),
        ENV_DEVICE: recording.device.upper(),
        ENV_MATRIX: json.dumps(recording.cell),
    }
    if recording.repeat:
        env[ENV_REPEAT] = str(recording.repeat)
    else:
        env.pop(ENV_REPEAT, None)  # not one of several: an inherited number would mislabel it
    if recording.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    return env


def _record_one(plan: RecordingPlan, recording: _Recording, say: Callable[[str], None]) -> RunResult:
    run_dir = recording.run_dir
    argv = fill(
        plan.command,
        batch_size=recording.batch_size,
        run_dir=run_dir,
        device=recording.device,
        model=plan.model,
        **recording.cell,
    )
    os.makedirs(run_dir, exist_ok=True)
    log_path = os.path.join(run_dir, LOG_NAME)
    say(f"[{recording.index}/{recording.total}] {os.path.basename(run_dir)}: {' '.join(argv)}")
    started = time.monotonic()
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            completed = subprocess.run(argv, env=_environment(plan, recording), stdout=log, stderr=subprocess.STDOUT)
        code, reason = completed.returncode, ""
    except OSError as error:
        code, reason = None, f"could not start the command: {error}"
    seconds = time.monotonic() - started
    if code not in (0, None):
        reason = f"exit status {code}; last lines of {log_path}:\n" + _tail(log_path)
    elif code == 0 and not discover(run_dir):
        reason = (
            f"the command succeeded but wrote no profile into {run_dir}; profile with the helpers in "
            f"tb_opcompare.recording, or write the profile to ${ENV_RUN_DIR}"
        )
    result = _result(recording, reason=reason, seconds=seconds)
    say(f"    {'ok' if result.ok else 'FAILED'} ({seconds:.1f} s)")
    return result


def _result(recording: _Recording, reason: str, seconds: float | None = None) -> RunResult:
    extra = {} if seconds is None else {"seconds": seconds}
    return RunResult(
        recording.run_dir,
        recording.device,
        recording.batch_size,
        ok=not reason,
        reason=reason,
        repeat=recording.repeat,
        cell=recording.cell,
        **extra,
    )


def _tail(path: str, lines: int = 8) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return "(no log)"
