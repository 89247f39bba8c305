"""The Python API, for notebooks and scripts: the views of the tab and the CLI as calls that
return the same typed documents the HTTP routes serve (``schema.contract``), each with
``.to_pandas()`` where a table is wanted.

    import tb_opcompare as oc

    logs = oc.open_logdir("logs/")                      # one catalog, its cache shared
    result = logs.compare("cnn_cpu_bs64", "cnn_gpu_bs64")
    result.summary.headline_speedup                     # 2.03: the stopwatch's ratio
    result.to_pandas().head()                           # the ops, one row each
    logs.check(["base_rep*"], ["new_rep*"]).passed      # the CI gate's verdict

A side is a run name, a comma list, a shell pattern (``"cnn_cpu_bs16_rep*"``) or a list of
them, as on the command line. Errors are the package's own (``tb_opcompare.errors``):
``UsageError`` for a bad argument, ``UnknownRunError`` for a run the logdir does not hold,
``ProfileError`` for one that cannot be read. This module only picks the services and
passes them the arguments: every rule lives in the services and below.
"""

from __future__ import annotations

from tb_opcompare.schema.dimensions import DEFAULT_MIN_SHARE, DEFAULT_THRESHOLD
from tb_opcompare.store.settings import ReadSettings


class Logdir:
    """A logdir opened once: every view asked of it shares one catalog, so a run read for
    one view is not read again for the next (and parsed runs are cached on disk as the CLI
    caches them, unless ``cache_dir="none"``)."""

    def __init__(self, path: str, cache_dir: str | None = None, max_read_gb: float | None = None):
        from tb_opcompare.store.catalog import Catalog

        settings = ReadSettings.from_options(cache_dir, False, max_read_gb)
        self.path = str(path)
        self.catalog = Catalog(
            self.path,
            cache_dir=settings.cache_dir,
            cache_max_bytes=settings.cache_max_bytes,
            max_trace_bytes=settings.max_trace_bytes,
        )

    def __repr__(self) -> str:
        return f"Logdir({self.path!r})"

    def runs(self):
        """Every run with its facts and where each came from (a ``RunsDocument``)."""
        from tb_opcompare.service.runs import runs_document

        return runs_document(self.catalog)

    def compare(self, baseline, target, group_by: str = "name", repeats: bool = False):
        """Per-op speedups of ``target`` over ``baseline`` (a ``CompareDocument``): each side a
        run, a pattern or a list of runs pooled; ``repeats`` pools each run with its repeats."""
        from tb_opcompare.service.compare import compare_document
        from tb_opcompare.store.run_groups import both_sides

        return compare_document(self.catalog, *both_sides(self.catalog, baseline, target, repeats), group_by=group_by)

    def check(
        self,
        baseline,
        target,
        max_regression: float = DEFAULT_THRESHOLD,
        ops: str | None = None,
        min_share: float = DEFAULT_MIN_SHARE,
        repeats: bool = False,
        allow_one_run: bool = False,
        baseline_logdir: Logdir | str | None = None,
    ):
        """The regression gate (a ``CheckDocument``: ``passed``, ``headline``, the rows).
        ``baseline_logdir``: where the baseline runs are, when not in this logdir (a stored
        baseline: the main branch's runs in a bucket or an artifact folder)."""
        from tb_opcompare.service.check import check_document
        from tb_opcompare.store.run_groups import both_sides, one_side

        stored = Logdir(baseline_logdir) if isinstance(baseline_logdir, str) else baseline_logdir
        if stored is None:
            sides = both_sides(self.catalog, baseline, target, repeats)
        else:
            sides = (one_side(stored.catalog, baseline, repeats), one_side(self.catalog, target, repeats))
        return check_document(
            self.catalog,
            *sides,
            threshold=max_regression,
            ops=ops,
            min_share=min_share,
            allow_one_run=allow_one_run,
            baseline_catalog=stored.catalog if stored else None,
        )

    def sweep(self, model: str, top: int = 10, series_by: str = "device"):
        """One model's batch-size sweep (a ``SweepDocument``), its lines drawn by ``series_by``."""
        from tb_opcompare.service.sweep import sweep_document

        return sweep_document(self.catalog, model, top=top, series_by=series_by)

    def matrix(self, reference: str | None = None, warmup: int | None = None, part: str | None = None):
        """Step latency and throughput of every configuration on every device (a ``MatrixDocument``)."""
        from tb_opcompare.service.matrix import matrix_document

        return matrix_document(self.catalog, reference=reference, warmup=warmup, part=part)

    def trend(self, runs, order_by: str = "recorded", top: int = 10):
        """The top ops and the whole step across ``runs`` (patterns allowed), in the order of a
        fact (a ``TrendDocument``)."""
        from tb_opcompare.service.trend import trend_document
        from tb_opcompare.store.run_groups import expand_runs, split_runs

        names = split_runs(runs) if isinstance(runs, str) else list(runs)
        return trend_document(self.catalog, expand_runs(self.catalog, names), order_by=order_by, top=top)

    def roofline(
        self, baseline: str, target: str, baseline_session: str | None = None, target_session: str | None = None
    ):
        """Each op of two runs on its device's roofline (a ``RooflineDocument``): its work,
        achieved rate, fraction of the roof, and what the change did."""
        from tb_opcompare.service.roofline import roofline_document

        return roofline_document(self.catalog, baseline, target, baseline_session, target_session)


def open_logdir(path: str, cache_dir: str | None = None, max_read_gb: float | None = None) -> Logdir:
    """A logdir (a folder or a bucket URL) to ask views of; see ``Logdir``."""
    return Logdir(path, cache_dir=cache_dir, max_read_gb=max_read_gb)


def compare(logdir: str, baseline, target, group_by: str = "name", repeats: bool = False):
    """``open_logdir(logdir).compare(...)``: one comparison, without keeping the logdir open."""
    return open_logdir(logdir).compare(baseline, target, group_by=group_by, repeats=repeats)


def check(logdir: str, baseline, target, **options):
    """``open_logdir(logdir).check(...)``."""
    return open_logdir(logdir).check(baseline, target, **options)


def matrix(logdir: str, **options):
    """``open_logdir(logdir).matrix(...)``."""
    return open_logdir(logdir).matrix(**options)


def sweep(logdir: str, model: str, **options):
    """``open_logdir(logdir).sweep(...)``."""
    return open_logdir(logdir).sweep(model, **options)


def trend(logdir: str, runs, **options):
    """``open_logdir(logdir).trend(...)``."""
    return open_logdir(logdir).trend(runs, **options)


def runs(logdir: str):
    """``open_logdir(logdir).runs()``."""
    return open_logdir(logdir).runs()
