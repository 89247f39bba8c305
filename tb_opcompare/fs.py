"""File access for local logdirs and, through TensorBoard's own file layer, remote ones.

Local paths use ``os`` directly (fast, and gives modification times). Paths with a
scheme (``gs://``, ``s3://``, ...) go through ``tensorboard.compat.tensorflow_stub``'s
gfile, the layer TensorBoard itself reads with when TensorFlow is absent, so no
TensorFlow import happens here.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


def walk(root: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """Like os.walk, following directory symlinks once each (a symlink loop ends there)."""
    if is_remote(root):
        from tensorboard.compat.tensorflow_stub.io import gfile

        yield from gfile.walk(root)
        return
    seen: set[str] = set()
    for directory, subdirs, files in os.walk(root, followlinks=True, onerror=None):
        real = os.path.realpath(directory)
        if real in seen:
            subdirs[:] = []
            continue
        seen.add(real)
        subdirs.sort()
        yield directory, subdirs, sorted(files)


def read_bytes(path: str) -> bytes:
    if is_remote(path):
        from tensorboard.compat.tensorflow_stub.io import gfile

        with gfile.GFile(path, "rb") as handle:
            return handle.read()
    with open(path, "rb") as handle:
        return handle.read()


def read_head(path: str, size: int) -> bytes:
    if is_remote(path):
        from tensorboard.compat.tensorflow_stub.io import gfile

        with gfile.GFile(path, "rb") as handle:
            return handle.read(size)
    with open(path, "rb") as handle:
        return handle.read(size)


def signature(path: str) -> tuple[int, float]:
    """(size, mtime) to tell when a file changed; remote files report mtime 0."""
    if is_remote(path):
        from tensorboard.compat.tensorflow_stub.io import gfile

        return gfile.stat(path).length, 0.0
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime
