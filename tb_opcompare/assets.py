"""The files the tab is made of, read through ``importlib.resources``.

The tab's ES modules live in the checkout's top-level ``frontend/`` and are installed as
the ``tb_opcompare.frontend`` package data. ``importlib.resources`` is used as a resource
API (``joinpath``/``read_bytes``), never turned into a filesystem path: in an installed
wheel the folder is a namespace package whose ``files()`` is a ``MultiplexedPath``, in an
editable install it is mapped by setuptools' finder, and a path built from ``__file__``
would point at a checkout that users do not have. Only when the package is imported from
a source tree (a checkout on ``sys.path``, where the mapping does not apply) is the
checkout's ``frontend/`` read directly.
"""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

FRONTEND_PACKAGE = "tb_opcompare.frontend"
FRONTEND_FILES = ("index.js", "view.js", "format.js", "table.js", "sweep.js", "theme.js", "style.css")


def frontend_file(name: str) -> bytes:
    """Read on each request (a few KB): an edit in a checkout shows on reload."""
    if name not in FRONTEND_FILES:
        raise FileNotFoundError(name)
    try:
        return importlib.resources.files(FRONTEND_PACKAGE).joinpath(name).read_bytes()
    except ModuleNotFoundError:
        source_tree = Path(__file__).resolve().parent.parent / "frontend"
        return (source_tree / name).read_bytes()


@functools.lru_cache(maxsize=1)
def plotly_bundle() -> bytes:
    """plotly.js as shipped by the installed ``plotly`` package: no CDN, works air-gapped."""
    return importlib.resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
