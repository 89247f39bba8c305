"""tb-opcompare: which ops got faster (or slower) between two profile runs, and by how much.

Importing the package is cheap on purpose: TensorBoard imports the plugin's entry point
at start-up, and pandas and the readers load only when the tab first asks for data.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tb-opcompare")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"
