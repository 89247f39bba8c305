"""tb-opcompare: which ops got faster (or slower) between two profile runs, and by how much.

Importing the package is cheap on purpose: TensorBoard imports the plugin's entry point
at start-up, and pandas and the readers load only when the tab first asks for data.
"""

# The one place the version is written: pyproject.toml reads it from here (setuptools'
# ``attr``, statically). Asking importlib.metadata instead cost 40-50 ms of every start.
__version__ = "0.1.0"

# The Python API (``tb_opcompare.api``), importable from the package without making the
# package's own import heavier: each name loads the API on first use (PEP 562).
_API = ("open_logdir", "Logdir", "compare", "check", "matrix", "sweep", "trend", "runs")


def __getattr__(name: str):
    if name in _API:
        from tb_opcompare import api

        return getattr(api, name)
    raise AttributeError(f"module 'tb_opcompare' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
