"""A cold command's first reads begin while it imports pandas (``store.head_start``): the
runs --baseline and --target name are read in forked workers, with the same tables as
a read in this process, a broken file reported as always, and the same bytes printed."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, run_cli

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.formats import read_profile
from tb_opcompare.store.catalog import Catalog

# Real recordings over the head start's size floor: a Flax xplane pair (H200 machine's
# CPU and GPU; together over ``read_ahead``'s floor too) and a PyTorch pair (gzip JSON,
# H100 machine).
PAIRS = {
    "xplane": (FIXTURES / "user_logdirs" / "flax_h200", "workdir_cpu_bs32", "workdir_gpu_bs32"),
    "pytorch": (FIXTURES / "gpu_h100" / "zoo", "resnet18_cpu_bs32", "resnet18_gpu_bs32"),
}

# A fresh interpreter, as a cold command is: begin the reads, check that workers took
# them before pandas is imported, load, and hand the tables back pickled.
COLD_PROCESS = r"""
import pickle, sys
from tb_opcompare.errors import ProfileError
from tb_opcompare.store.catalog import Catalog

logdir, out, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
catalog = Catalog(logdir, parallel_reads=2)
catalog.read_soon([(run, None) for run in runs])
began, imported_pandas = len(catalog.head_start), "pandas" in sys.modules
catalog.read_ahead_runs(runs)  # what a command's service asks next: nothing is read twice
read_twice = sum(catalog.cache.holds(catalog._session(catalog.source(run), None)[1]) for run in runs)
loaded = {}
for run in runs:
    try:
        loaded[run] = catalog.parsed(catalog.source(run))[1]  # as read, before sidecars settle facts
    except ProfileError as error:
        loaded[run] = (error.path, error.reason)
with open(out, "wb") as handle:
    pickle.dump({"began": began, "imported_pandas": imported_pandas, "read_twice": read_twice,
                 "left": len(catalog.head_start), "loaded": loaded}, handle)
"""


def _cold_load(logdir: Path, runs: list[str], tmp_path: Path) -> dict:
    out = tmp_path / "loaded.pickle"
    done = subprocess.run(
        [sys.executable, "-c", COLD_PROCESS, str(logdir), str(out), *runs], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads(out.read_bytes())


def _paths(catalog: Catalog, run: str) -> tuple[str, list[str]]:
    _, (file_format, signatures) = catalog._session(catalog.source(run), None)
    return file_format, [path for path, _, _ in signatures]


@pytest.mark.parametrize("reader", sorted(PAIRS))
def test_workers_read_the_named_runs_into_the_same_tables(reader, tmp_path):
    logdir, baseline, target = PAIRS[reader]
    cold = _cold_load(logdir, [baseline, target], tmp_path)
    assert cold["began"] == 2 and not cold["imported_pandas"]  # both read in workers, before pandas
    assert cold["read_twice"] == 0
    assert cold["left"] == 0  # and both taken
    catalog = Catalog(str(logdir))
    for run in (baseline, target):
        ours, theirs = cold["loaded"][run], read_profile(*_paths(catalog, run))
        assert ours.facts == theirs.facts and ours.step_count == theirs.step_count
        # sent back as their disk cache entries (``cache.Encoded``): every table to the bit
        tables = ("op_table", "step_table", "module_table", "annotation_table", "memory_table")
        for table in (*tables, "breakdown_table", "work_table"):
            pd.testing.assert_frame_equal(
                getattr(ours, table).frame(), getattr(theirs, table).frame(), check_exact=True
            )


def test_a_broken_file_read_by_a_worker_is_reported_as_in_one_process(tmp_path):
    logdir, baseline, target = PAIRS["xplane"]
    copy = tmp_path / "logdir"
    for run in (baseline, target):
        shutil.copytree(logdir / run, copy / run)
    broken = next((copy / baseline).rglob("*.xplane.pb"))
    broken.write_bytes(broken.read_bytes()[: int(broken.stat().st_size * 0.8)])  # cut, still over the floor
    cold = _cold_load(copy, [baseline, target], tmp_path)
    assert cold["began"] == 2
    with pytest.raises(ProfileError) as raised:
        read_profile("xplane", [str(broken)])
    assert cold["loaded"][baseline] == (str(broken), raised.value.reason)
    assert len(cold["loaded"][target].op_table.frame()) > 10  # the good run is still read


@pytest.mark.parametrize("reader", sorted(PAIRS))
def test_a_cold_command_prints_what_one_process_prints(reader, capsys):
    from tb_opcompare.cli.main import main

    logdir, baseline, target = PAIRS[reader]
    argv = ["compare", str(logdir), "--baseline", baseline, "--target", target, "--json", "--no-cache"]
    cold = run_cli(*argv)
    assert cold.returncode == 0, cold.stderr
    assert main(argv) == 0  # this process has pandas: no head start here
    assert cold.stdout == capsys.readouterr().out


def test_runs_a_shared_index_holds_are_taken_from_it_not_read(tmp_path):
    logdir, baseline, target = PAIRS["pytorch"]
    copy = tmp_path / "logdir"
    for run in (baseline, target):
        shutil.copytree(logdir / run, copy / run)
    indexed = run_cli("index", str(copy), "--cache-dir", str(tmp_path / "cache"))
    assert indexed.returncode == 0, indexed.stderr
    cold = _cold_load(copy, [baseline, target], tmp_path)
    assert cold["began"] == 0
    assert len(cold["loaded"][target].op_table.frame()) > 10
