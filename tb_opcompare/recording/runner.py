"""``tb-opcompare record``: run a training command once per device and batch size into
``LOGDIR/<model>_<device>_bs<N>`` (``…_rep<K>`` for each of ``--repeats N`` > 1).

Each run gets ``TB_OPCOMPARE_RUN_DIR``, ``TB_OPCOMPARE_MODEL``, ``TB_OPCOMPARE_BATCH_SIZE``,
``TB_OPCOMPARE_DEVICE`` and, with repeats, ``TB_OPCOMPARE_REPEAT`` (read by
``tb_opcompare.record``'s helpers), and
``{batch_size}``, ``{run_dir}``, ``{device}``, ``{model}`` in the command are filled in.
CPU runs hide the GPUs (``CUDA_VISIBLE_DEVICES=-1``). The command's output goes to
``<run dir>/opcompare-record.log``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable

from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import discover
from tb_opcompare.ingest.sidecar import SIDECAR
from tb_opcompare.recording.profilers import ENV_BATCH_SIZE, ENV_DEVICE, ENV_MODEL, ENV_REPEAT, ENV_RUN_DIR

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
    kinds = ", ".join(sorted({f"{source.format} ({len(source.sessions)} capture{'s' * (len(source.sessions) > 1)})"
                              for source in existing}))
    described = ""
    try:
        sidecar = json.loads(fs.read_head(os.path.join(run_dir, SIDECAR), 1 << 20))  # never blocks on a FIFO
        if isinstance(sidecar, dict):
            described = f" of model {sidecar.get('model')!r} ({sidecar.get('framework') or 'unknown framework'})"
    except (OSError, ValueError, RecursionError):
        pass
    return (f"{run_dir} already holds a profile{described}: {kinds}. Recording into it would put two recordings in "
            "one run and overwrite its opcompare.json; choose another --model or --logdir, or pass --force to add "
            "a capture to it anyway")


def record_runs(logdir: str, model: str, batch_sizes: list[int], devices: list[str], command: list[str],
                say: Callable[[str], None] = print, has_gpu: Callable[[], bool] = gpu_present,
                force: bool = False, repeats: int = 1) -> list[RunResult]:
    wanted = []
    for device in devices:
        if device == "gpu" and not has_gpu():
            say("gpu: no GPU visible here (nvidia-smi finds none); skipping the GPU runs")
            continue
        # repeats interleave (rep 1 of every size, then rep 2 ...) so that a drift of the
        # machine over the recording spreads across sizes instead of biasing one
        wanted.extend((device, size, repeat) for repeat in range(1, repeats + 1) for size in batch_sizes)
    results = []
    for index, (device, batch_size, repeat) in enumerate(wanted, start=1):
        if repeats == 1:
            repeat = None  # one recording: no repeat number, in the name or the sidecar
        run_name = f"{model}_{device}_bs{batch_size}" + (f"_rep{repeat}" if repeat else "")
        run_dir = os.path.join(logdir, run_name)
        refusal = None if force else occupied_reason(run_dir)
        if refusal:
            say(f"[{index}/{len(wanted)}] {os.path.basename(run_dir)}: refused")
            results.append(RunResult(run_dir, device, batch_size, ok=False, reason=refusal, repeat=repeat))
            continue
        argv = fill(command, batch_size=batch_size, run_dir=run_dir, device=device, model=model)
        env = {**os.environ, ENV_RUN_DIR: run_dir, ENV_MODEL: model, ENV_BATCH_SIZE: str(batch_size),
               ENV_DEVICE: device.upper()}
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
            reason = (f"the command succeeded but wrote no profile into {run_dir}; profile with the helpers in "
                      f"tb_opcompare.recording, or write the profile to ${ENV_RUN_DIR}")
        result = RunResult(run_dir, device, batch_size, ok=not reason, reason=reason, seconds=seconds, repeat=repeat)
        say(f"    {'ok' if result.ok else 'FAILED'} ({seconds:.1f} s)")
        results.append(result)
    return results


def _tail(path: str, lines: int = 8) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:]).rstrip()
    except OSError:
        return "(no log)"
