"""Only the optional C extensions; everything else about the package is in pyproject.toml.

``optional=True``: where one cannot be compiled (no compiler, no Python headers) the
install goes on without it and the module that uses it runs its pure-Python code
(``tb_opcompare/native.py``).
"""

import sys

from setuptools import Extension, setup

# The C helpers, each beside the module that uses it.
HELPERS = (
    "tb_opcompare.ingest.readers._xplane_wire",
    "tb_opcompare.ingest.readers._trace_scan",
    "tb_opcompare.schema._groups",
    "tb_opcompare.service._csv_lines",
)


def optional_extension(module: str) -> Extension:
    return Extension(
        module,
        sources=[module.replace(".", "/") + ".c"],
        # a CFLAGS of the builder's own (a conda environment's, an include path) takes the
        # place of Python's, -O3 with it: the wire loops then ran about three times slower
        extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
        optional=True,
    )


setup(ext_modules=[optional_extension(module) for module in HELPERS])
