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
    port = free_port()
    # The server's log goes to the temp dir, never beside the logdir (which may be in the checkout).
    log = open(Path(tempfile.gettempdir()) / f"opcompare-tensorboard-{port}.log", "w+")
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
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"TensorBoard exited with {process.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/data/plugins_listing", timeout=5) as response:
                    json.load(response)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
        PIDS[url] = process.pid
        yield url
    finally:
        PIDS.pop(url, None)
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
