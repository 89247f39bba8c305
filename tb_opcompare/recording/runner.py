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


def record_runs(
    logdir: str,
    model: str,
    batch_sizes: list[int],
    devices: list[str],
    command: list[str],
    say: Callable[[str], None] = print,
    has_gpu: Callable[[], bool] = gpu_present,
    force: bool = False,
    repeats: int = 1,
    matrix: list[tuple[str, list[str]]] | None = None,
) -> list[RunResult]:
    names = [name for name, _ in matrix or []]
    cells = [dict(zip(names, values)) for values in itertools.product(*(values for _, values in matrix or []))]
    wanted = []
    for device in devices:
        if device == "gpu" and not has_gpu():
            say("gpu: no GPU visible here (nvidia-smi finds none); skipping the GPU runs")
            continue
        # repeats interleave (rep 1 of every size and cell, then rep 2 ...) so that a drift
        # of the machine over the recording spreads across them instead of biasing one
        wanted.extend(
            (device, size, cell, repeat) for repeat in range(1, repeats + 1) for size in batch_sizes for cell in cells
        )
    results = []
    for index, (device, batch_size, cell, repeat) in enumerate(wanted, start=1):
        if repeats == 1:
            repeat = None  # one recording: no repeat number, in the name or the sidecar
        run_name = (
            f"{model}_{device}_bs{batch_size}"
            + "".join(f"_{value}" for value in cell.values())
            + (f"_rep{repeat}" if repeat else "")
        )
        run_dir = os.path.join(logdir, run_name)
        refusal = None if force else occupied_reason(run_dir)
        if refusal:
            say(f"[{index}/{len(wanted)}] {os.path.basename(run_dir)}: refused")
            results.append(RunResult(run_dir, device, batch_size, ok=False, reason=refusal, repeat=repeat, cell=cell))
            continue
        argv = fill(command, batch_size=batch_size, run_dir=run_dir, device=device, model=model, **cell)
        env = {
            **os.environ,
            ENV_RUN_DIR: run_dir,
            ENV_MODEL: model,
            ENV_BATCH_SIZE: str(batch_size),
            ENV_DEVICE: device.upper(),
            ENV_MATRIX: json.dumps(cell),
        }
        if repeat:
            env[ENV_REPEAT] = str(repeat)
        else:
            env.pop(ENV_REPEAT, None)  # not one of several: an inherited number would mislabel it
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = "-1"
        os.makedirs(run_dir, exist_ok=True)
        log_path = os.path.join(run_dir, LOG_NAME)
        say(f"[{index}/{len(wanted)}] {os.path.basename(run_dir)}: {' '.join(argv)}")
        started = time.monotonic()
        try:
            with open(log_path, "w", encoding="utf-8") as log:
                completed = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
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
        result = RunResult(
            run_dir, device, batch_size, ok=not reason, reason=reason, seconds=seconds, repeat=repeat, cell=cell
        )
        say(f"    {'ok' if result.ok else 'FAILED'} ({seconds:.1f} s)")
        results.append(result)
    return results


def _tail(path: str, lines: int = 8) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return "(no log)"
