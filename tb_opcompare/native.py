"""The package's optional C helpers (the readers' ``_xplane_wire`` and ``_trace_scan``,
``schema._groups`` for the comparison's keys, the CSV writer's ``_csv_lines``), and the
one switch that turns them off.

Each is built where the installer has a compiler (``setup.py``: optional) and each module
that uses one has Python code that gives the same results; ``TB_OPCOMPARE_PURE_PYTHON=1``
makes them use the Python code (read on each call, so tests can switch paths).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_ENV = "TB_OPCOMPARE_PURE_PYTHON"


def built(name: str) -> ModuleType | None:
    """The C helper ``tb_opcompare.<name>`` (``ingest.readers._trace_scan``), or None where it
    was not built."""
    try:  # a C extension, no stub: its callers take it through ``wanted``, a ModuleType
        return importlib.import_module(f"tb_opcompare.{name}")
    except ImportError:  # built without a compiler: the caller's Python code does it all
        return None


def wanted(module: ModuleType | None) -> ModuleType | None:
    """``module`` (a C helper, or None), or None where ``TB_OPCOMPARE_PURE_PYTHON`` asks for
    the Python code."""
    if module is None or os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    return module
