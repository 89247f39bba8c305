"""Prints what the test run's numbers depend on, at the start of `make test` (and so of
CI): Python, the CPU, numpy and its BLAS, pandas, torch, TensorFlow. A failure seen on
one machine and not another starts from this."""

from __future__ import annotations

import importlib.metadata
import os
import platform


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")
    except OSError:
        return platform.processor() or "?"


def main() -> None:
    print(
        f"test environment: Python {platform.python_version()} on {platform.machine()} {_cpu()}, {os.cpu_count()} cores"
    )
    for package in ("numpy", "pandas", "torch", "tensorflow-cpu", "tensorboard", "xprof", "protobuf"):
        print(f"  {package} {_version(package)}")
    blas = {
        name: os.environ[name]
        for name in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
        if name in os.environ
    }
    print(f"  BLAS environment: {blas or 'none set'}")
    import numpy

    try:  # numpy >= 1.25: its build as data (numpy.show_config() without pyyaml prints 80 lines of JSON)
        config = numpy.show_config(mode="dicts")
    except TypeError:
        numpy.show_config()
        return
    blas = config.get("Build Dependencies", {}).get("blas", {})
    simd = config.get("SIMD Extensions", {})
    print(f"  numpy BLAS: {blas.get('name')} {blas.get('version')} ({blas.get('openblas configuration', '')})")
    print(f"  numpy SIMD: baseline {', '.join(simd.get('baseline', []))}; found {', '.join(simd.get('found', []))}")


if __name__ == "__main__":
    main()
