"""Only the optional C extensions; everything else about the package is in pyproject.toml.

``optional=True``: where it cannot be compiled (no compiler, no Python headers) the
install goes on without it and the reader uses its pure-Python code.
"""

import sys

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tb_opcompare.ingest.readers._xplane_wire",
            sources=["tb_opcompare/ingest/readers/_xplane_wire.c"],
            # a CFLAGS of the builder's own (a conda environment's, an include path) takes the
            # place of Python's, -O3 with it: the wire loops then run about three times slower
            extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
            optional=True,
        ),
        Extension(
            "tb_opcompare.ingest.readers._trace_scan",
            sources=["tb_opcompare/ingest/readers/_trace_scan.c"],
            extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
            optional=True,
        ),
        Extension(
            "tb_opcompare.schema._groups",
            sources=["tb_opcompare/schema/_groups.c"],
            extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
            optional=True,
        ),
        Extension(
            "tb_opcompare.service._csv_lines",
            sources=["tb_opcompare/service/_csv_lines.c"],
            extra_compile_args=[] if sys.platform == "win32" else ["-O3"],
            optional=True,
        ),
    ],
)
