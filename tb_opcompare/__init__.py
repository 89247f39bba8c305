"""tb-opcompare: which ops got faster (or slower) between two profile runs, and by how much.

Importing the package is cheap on purpose: TensorBoard imports the plugin's entry point
at start-up, and pandas and the readers load only when the tab first asks for data.
"""

# The one place the version is written: pyproject.toml reads it from here (setuptools'
# ``attr``, statically). Asking importlib.metadata instead cost 40-50 ms of every start.
__version__ = "0.1.0"
