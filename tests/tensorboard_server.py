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

# TensorBoard as it runs where TensorFlow is not installed (the plugin does not need it):
# where it is, the Profile plugin imports it at start, 5-8 s of CPU and 500 MB a server on
# this machine, which the suite paid about fifty times. A server that must run beside
# TensorFlow (a user's full install, gfile's filesystems) asks for it: tensorflow=True.
_WITHOUT_TENSORFLOW = (
    "import runpy, sys; sys.modules['tensorflow'] = None; "
    "runpy.run_module('tensorboard.main', run_name='__main__', alter_sys=True)"
)


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
    tensorflow: bool = False,
):
    """``python``: the interpreter whose TensorBoard (and installed plugin) to start;
    ``flags``: more of TensorBoard's command line (``--opcompare_max_read_gb``, ...);
    ``tensorflow``: whether TensorBoard may import TensorFlow (where it is installed)."""
    launch = ("-m", "tensorboard.main") if tensorflow else ("-c", _WITHOUT_TENSORFLOW)
    for _ in range(3):  # a free port may be taken by another test worker before TensorBoard binds it
        process, url, log = _start(logdir, env, (python, *launch), cwd, flags)
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


def _start(logdir: Path, env: dict | None, launch: tuple[str, ...], cwd: Path | None, flags: tuple[str, ...]):
    """``launch``: the interpreter and how it runs TensorBoard; ``flags``: after every test's."""
    port = free_port()
    # The server's log goes to the temp dir, never beside the logdir (which may be in the checkout).
    log = tempfile.NamedTemporaryFile("w+", prefix=f"opcompare-tensorboard-{port}-", suffix=".log", delete=False)
    process = subprocess.Popen(
        [
            *launch,
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
    with contextlib.suppress(OSError):  # what it said is in the error of a server that failed
        os.unlink(log.name)
