from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
LOGDIR = FIXTURES / "logdir"
REALTRACES = FIXTURES / "realtraces"
REPO = Path(__file__).parent.parent


@pytest.fixture(scope="session")
def logdir() -> Path:
    return LOGDIR


def read_bytes(path) -> bytes:
    return Path(path).read_bytes()


def run_cli(*args: str, cwd: Path | None = None):
    """Run the installed ``tb-opcompare`` console script for real."""
    import subprocess

    executable = Path(sys.executable).parent / "tb-opcompare"
    return subprocess.run(
        [str(executable), *args], capture_output=True, text=True, cwd=cwd or REPO, timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
