"""The readers' optional C helpers (``_xplane_wire``, ``_trace_scan``), and the one switch
that turns them off.

Each is built where the installer has a compiler (``setup.py``: optional) and each reader
that uses one has Python code that gives the same results; ``TB_OPCOMPARE_PURE_PYTHON=1``
makes the readers use the Python code (read on each call, so tests can switch paths).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_ENV = "TB_OPCOMPARE_PURE_PYTHON"


def built(name: str) -> ModuleType | None:
    """The C helper ``tb_opcompare.ingest.readers.<name>``, or None where it was not built."""
    try:  # a C extension, no stub: its callers take it through ``wanted``, a ModuleType
        return importlib.import_module(f"tb_opcompare.ingest.readers.{name}")
    except ImportError:  # built without a compiler: the reader's Python code does it all
        return None


def wanted(module: ModuleType | None) -> ModuleType | None:
    """``module`` (a C helper, or None), or None where ``TB_OPCOMPARE_PURE_PYTHON`` asks for
    the Python code."""
    if module is None or os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    return module
