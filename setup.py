"""Only the optional C extension; everything else about the package is in pyproject.toml.

``optional=True``: where it cannot be compiled (no compiler, no Python headers) the
install goes on without it and the reader uses its pure-Python code.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tb_opcompare.ingest.readers._xplane_wire",
            sources=["tb_opcompare/ingest/readers/_xplane_wire.c"],
            optional=True,
        ),
    ],
)
