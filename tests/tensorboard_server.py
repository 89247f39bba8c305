"""Start a real TensorBoard process (with the installed plugin) on a free loopback port."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PIDS: dict[str, int] = {}  # url -> TensorBoard process id, while it runs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_tensorboard(
    logdir: Path,
    timeout: float = 90.0,
    env: dict | None = None,
    python: str = sys.executable,
    cwd: Path | None = None,
    flags: tuple[str, ...] = (),
):
    """``python``: the interpreter whose TensorBoard (and installed plugin) to start;
    ``flags``: more of TensorBoard's command line (``--opcompare_max_read_gb``, ...)."""
    for _ in range(3):  # a free port may be taken by another test worker before TensorBoard binds it
        process, url, log = _start(logdir, env, python, cwd, flags)
        try:
            if _ready(process, url, log, (logdir, cwd), timeout):
                break
        except BaseException:
            _stop(process, log)
            raise
        _stop(process, log)
    else:
        raise RuntimeError("TensorBoard found its port taken three times")
    try:
        PIDS[url] = process.pid
        yield url
    finally:
        PIDS.pop(url, None)
        _stop(process, log)


def _start(logdir: Path, env: dict | None, python: str, cwd: Path | None, flags: tuple[str, ...]):
    port = free_port()
    # The server's log goes to the temp dir, never beside the logdir (which may be in the checkout).
    log = tempfile.NamedTemporaryFile("w+", prefix=f"opcompare-tensorboard-{port}-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [
            python,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(logdir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--load_fast=false",
            *flags,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    return process, f"http://127.0.0.1:{port}", log


def _ready(process, url: str, log, place: tuple, timeout: float) -> bool:
    """True once this TensorBoard answers; False where its port was taken (it exited saying
    so, or another worker's server answers there, serving another logdir)."""
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            log.seek(0)
            text = log.read()
            if "already in use" in text or "Address in use" in text:
                return False
            raise RuntimeError(f"TensorBoard exited with {process.returncode}:\n{text[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=5) as response:
                json.load(response)
            with urllib.request.urlopen(f"{url}/data/environment", timeout=5) as response:
                served = json.load(response).get("data_location")
            return _where(served or "", place[1]) == _where(*place)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.25)


def _where(logdir, cwd: Path | None) -> str:
    """A logdir as one string to compare: a local path made absolute, a URL as given."""
    text = str(logdir)
    return text if "://" in text else os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(text)))


def _stop(process, log) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()
