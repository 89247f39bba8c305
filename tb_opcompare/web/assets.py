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
_SERVED_SUFFIXES = (".js", ".css")


def _frontend_root():
    try:
        return importlib.resources.files(FRONTEND_PACKAGE)
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "frontend"


@functools.lru_cache(maxsize=1)
def frontend_files() -> tuple[str, ...]:
    """The tab's files as paths relative to ``frontend/`` (``views/table.js``): whatever
    ships, so adding a module needs no list kept in step (pyproject's globs decide)."""
    found, folders = [], [(_frontend_root(), "")]
    while folders:
        folder, prefix = folders.pop()
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.name.startswith(("_", ".")):
                folders.append((entry, f"{prefix}{entry.name}/"))
            elif entry.is_file() and entry.name.endswith(_SERVED_SUFFIXES):
                found.append(prefix + entry.name)
    return tuple(sorted(found))


def frontend_file(name: str) -> bytes:
    """Read on each request (a few KB): an edit in a checkout shows on reload."""
    if name not in frontend_files():
        raise FileNotFoundError(name)
    resource = _frontend_root()
    for part in name.split("/"):  # one segment at a time: Python 3.11's MultiplexedPath.joinpath takes one
        resource = resource.joinpath(part)
    return resource.read_bytes()


@functools.lru_cache(maxsize=1)
def plotly_bundle() -> bytes:
    """plotly.js as shipped by the installed ``plotly`` package: no CDN, works air-gapped."""
    return importlib.resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
