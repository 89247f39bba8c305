"""The installed ``tb-opcompare`` command on real fixture logdirs."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from conftest import LOGDIR, REALTRACES, profiler_step_durations, run_cli, steady_median

from tb_opcompare.text import format_speedup


@pytest.fixture(scope="module")
def runs_doc():
    result = run_cli("runs", str(LOGDIR), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_runs_lists_every_format_with_facts(runs_doc):
    by_run = {r["run"]: r for r in runs_doc["runs"]}
    assert set(by_run) == {
        "tf1/mlp_cpu",
        "tf1/mlp_gpu",
        "tf_keras/cnn_cpu_bs2/train",
        "tf_keras/cnn_cpu_bs8/train",
        "tf_keras/cnn_cpu_bs32/train",
        "torch/cnn_torch_cpu_bs4",
        "torch/cnn_torch_cpu_bs16",
        "torch/cnn_torch_cpu_bs64",
    }
    assert by_run["tf1/mlp_gpu"]["device"] == "GPU"
    assert by_run["tf1/mlp_cpu"]["device"] == "CPU"
    assert by_run["tf_keras/cnn_cpu_bs32/train"]["batch_size"] == 32
    assert by_run["tf_keras/cnn_cpu_bs32/train"]["batch_size_source"].startswith("data: tf.data")
    assert by_run["torch/cnn_torch_cpu_bs16"]["batch_size"] == 16
    assert by_run["torch/cnn_torch_cpu_bs16"]["batch_size_source"].startswith("data")
    assert by_run["tf_keras/cnn_cpu_bs8/train"]["format"] == "xplane"
    assert by_run["torch/cnn_torch_cpu_bs4"]["steps"] == 2
    for record in runs_doc["runs"]:
        assert {
            "run",
            "format",
            "device",
            "device_name",
            "batch_size",
            "batch_size_source",
            "steps",
            "model",
            "sessions",
        } <= set(record)
    assert runs_doc["errors"] == []


def test_runs_pairs_the_tf1_cpu_and_gpu_runs(runs_doc):
    assert [(p["baseline"], p["target"]) for p in runs_doc["pairs"]] == [("tf1/mlp_cpu", "tf1/mlp_gpu")]


def test_compare_json_has_summary_columns_rows():
    result = run_cli("compare", str(LOGDIR), "--baseline", "tf1/mlp_cpu", "--target", "tf1/mlp_gpu", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"summary", "columns", "rows", "total_rows", "view_rows"}  # as the API answers
    assert document["total_rows"] == document["view_rows"] == len(document["rows"])
    assert document["summary"]["baseline"]["run"] == "tf1/mlp_cpu"
    assert document["summary"]["overall_speedup"] > 1
    row = next(r for r in document["rows"] if r["key"] == "layer_1/fully_connected/MatMul")
    assert row["speedup"] == pytest.approx(row["baseline_mean_us"] / row["target_mean_us"])
    assert row["target_time_source"] == "device"


def test_output_is_whole_through_a_file_and_quiet_when_the_reader_leaves(tmp_path):
    """The command leaves without the interpreter's teardown (``cli.main.run``): what it
    printed must still all arrive, and a pipe closed early (``| head``) is no error."""
    import subprocess
    import sys
    from pathlib import Path

    executable = Path(sys.executable).parent / "tb-opcompare"
    argv = [str(executable), "compare", str(LOGDIR), "--json", "--all-pairs"]  # every pair: more than a pipe holds
    with open(tmp_path / "out.json", "w") as out:
        written = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True, timeout=120)
    assert written.returncode == 0, written.stderr
    full = (tmp_path / "out.json").read_text()
    assert len(full) > 1 << 16 and json.loads(full) == json.loads(run_cli(*argv[1:]).stdout)
    head = subprocess.run(
        f"{' '.join(argv)} | head -c 20",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        executable="/bin/bash",
    )
    assert head.stdout == full[:20]
    assert "Traceback" not in head.stderr and "Exception" not in head.stderr, head.stderr


def test_the_command_loads_pandas_without_pyarrow_and_prints_the_same(tmp_path, capsys):
    """``cli.main.run`` keeps pyarrow out of pandas' import (0.1 s and 38 MB of every
    command): the documents it prints are those of pandas with pyarrow (this test's own
    process), and ``export`` still imports pyarrow itself and writes its Parquet."""
    import subprocess
    import sys
    from pathlib import Path

    import pyarrow.parquet as pq

    from tb_opcompare.cli.main import main

    pairs = [  # an xplane pair and a PyTorch pair: both readers' string columns
        ("tf_keras/cnn_cpu_bs2/train", "tf_keras/cnn_cpu_bs32/train"),
        ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs64"),
    ]
    executable = Path(sys.executable).parent / "tb-opcompare"
    for baseline, target in pairs:  # ``modules``: one of the views still made with pandas
        argv = ["modules", str(LOGDIR), "--baseline", baseline, "--target", target, "--json", "--no-cache"]
        traced = subprocess.run(
            [sys.executable, "-X", "importtime", str(executable), *argv], capture_output=True, text=True, timeout=120
        )
        assert traced.returncode == 0, traced.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
        assert "pandas" in imported and "pyarrow.lib" not in imported
        assert main(argv) == 0
        assert traced.stdout == capsys.readouterr().out  # byte for byte
    exported = run_cli("export", str(LOGDIR), "--parquet", str(tmp_path / "tables"), "--no-cache")
    assert exported.returncode == 0, exported.stderr
    ops = pq.read_table(tmp_path / "tables" / "ops" / "ops.parquet")
    assert set(ops.column("run").to_pylist()) >= {baseline, target}


def test_a_compare_imports_no_pandas_cold_or_cached(tmp_path, capsys):
    """``compare`` makes its tables and its comparison with numpy alone, so a cold compare
    of a small trace is no longer mostly pandas' import (BERT-small: 0.37 -> 0.2 s, HTA
    0.8 s): read cold into the cache, then from it, by name and by type, an xplane pair and
    a PyTorch run with module calls (a table made on first use). What it prints is what
    this process (pandas loaded) prints; grouped by module, it merges with pandas."""
    import subprocess
    import sys
    from pathlib import Path

    from conftest import FIXTURES

    from tb_opcompare.cli.main import main

    executable = Path(sys.executable).parent / "tb-opcompare"
    modules = FIXTURES / "gpu_h100" / "modules"
    pairs = [
        (LOGDIR, "tf_keras/cnn_cpu_bs2/train", "tf_keras/cnn_cpu_bs32/train"),
        (modules, "mnist_cnn_torch_stack_gpu_bs16", "mnist_cnn_torch_stack_gpu_bs16"),
    ]
    for logdir, baseline, target in pairs:
        cache = tmp_path / logdir.name
        for group_by in ("name", "name", "type"):  # cold, then from the cache
            argv = ["compare", str(logdir), "--baseline", baseline, "--target", target, "--group-by", group_by]
            argv += ["--json", "--cache-dir", str(cache)]
            traced = subprocess.run(
                [sys.executable, "-X", "importtime", str(executable), *argv],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert traced.returncode == 0, traced.stderr[-2000:]
            imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
            assert "numpy" in imported and "pandas" not in imported and "pyarrow" not in imported, group_by
            assert main(argv) == 0
            assert traced.stdout == capsys.readouterr().out  # byte for byte
    run = pairs[1][1]
    by_module = run_cli("compare", str(modules), "--baseline", run, "--target", run, "--group-by", "module")
    assert by_module.returncode == 0 and "Sequential" in by_module.stdout, by_module.stderr


def test_a_lazy_listing_imports_no_pandas(runs_doc):
    """``runs --lazy`` lists from names and sidecars without reading a trace: it needs no
    tables, so no pandas (0.33 s -> 0.14 s of a small logdir's listing)."""
    import subprocess
    import sys
    from pathlib import Path

    executable = Path(sys.executable).parent / "tb-opcompare"
    argv = [str(executable), "runs", str(LOGDIR), "--lazy", "--no-cache", "--json"]
    traced = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, timeout=120)
    assert traced.returncode == 0, traced.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
    assert "numpy" in imported and "pandas" not in imported
    listed = json.loads(traced.stdout)
    assert [run["run"] for run in listed["runs"]] == [run["run"] for run in runs_doc["runs"]]
    assert listed["complete"] is False


def test_a_cached_listing_makes_no_tables(tmp_path):
    """A listing of runs the disk cache holds takes their facts and op names from the
    cache entries without making tables, so no pandas (demo_logs' 36 runs: 0.82 -> 0.26 s);
    it lists what a listing that reads the traces lists, a broken run's error included."""
    import subprocess
    import sys
    from pathlib import Path

    logdir, cache = tmp_path / "logdir", tmp_path / "cache"
    shutil.copytree(LOGDIR, logdir)
    broken = logdir / "broken" / "cut_trace"
    broken.mkdir(parents=True)
    (broken / "host.1.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1')
    read = run_cli("runs", str(logdir), "--cache-dir", str(cache), "--json")
    assert read.returncode == 1, read.stderr  # a run could not be read
    first = json.loads(read.stdout)
    assert [error["run"] for error in first["errors"]] == ["broken/cut_trace"] and first["complete"]

    executable = Path(sys.executable).parent / "tb-opcompare"
    for lazy in ([], ["--lazy"]):
        argv = [str(executable), "runs", str(logdir), "--cache-dir", str(cache), "--json", *lazy]
        traced = subprocess.run(
            [sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, timeout=120
        )
        assert traced.returncode == 1, traced.stderr[-2000:]
        imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
        assert "numpy" in imported and "pandas" not in imported
        assert json.loads(traced.stdout) == first


def test_an_unknown_run_is_said_before_pandas_is_imported(tmp_path):
    """A mistyped run name is the commonest error: it is reported from the listing, before
    the command imports pandas for its tables (it took 0.58 s on demo_logs, now 0.32 s)."""
    import subprocess
    import sys
    from pathlib import Path

    executable = Path(sys.executable).parent / "tb-opcompare"
    argv = [str(executable), "compare", str(LOGDIR), "--baseline", "cnn_nope", "--target", "torch/*", "--no-cache"]
    traced = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, timeout=120)
    assert traced.returncode == 2, traced.stderr[-2000:]
    assert "unknown run 'cnn_nope'" in traced.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines() if "|" in line}
    assert "tb_opcompare.store.run_groups" in imported and "pandas" not in imported


def test_compare_without_runs_uses_the_automatic_pairs():
    result = run_cli("compare", str(LOGDIR), "--top", "3")
    assert result.returncode == 0, result.stderr
    assert "baseline: tf1/mlp_cpu" in result.stdout
    assert "\nspeedup 13.3× (step wall time" in result.stdout
    # beside the headline, one op time ratio, labelled (issue 51): matched and geomean are in --json
    summary = json.loads(run_cli("compare", str(LOGDIR), "--json").stdout)["summary"]
    op_time = format_speedup(summary["op_time_speedup"])
    assert f"\nop time {op_time} (all ops, per step; not wall time) | faster " in result.stdout
    assert "matched" not in result.stdout.split("\n  speedup")[0] and "geomean" not in result.stdout


def test_compare_csv_matches_json_rows_sorted_and_cut(tmp_path):
    out = tmp_path / "ops.csv"
    args = [
        "compare",
        str(LOGDIR),
        "--baseline",
        "tf1/mlp_cpu",
        "--target",
        "tf1/mlp_gpu",
        "--sort",
        "speedup",
        "--top",
        "5",
    ]
    assert run_cli(*args, "--csv", str(out)).returncode == 0
    document = json.loads(run_cli(*args, "--json").stdout)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["key"] for r in rows] == [r["key"] for r in document["rows"]]
    speedups = [float(r["speedup"]) for r in rows]
    assert speedups == sorted(speedups, reverse=True) and len(rows) == 5
    assert list(rows[0]) == document["columns"]


def test_unknown_run_exits_2_and_lists_runs():
    result = run_cli("compare", str(LOGDIR), "--baseline", "nope", "--target", "tf1/mlp_gpu")
    assert result.returncode == 2
    assert "unknown run 'nope'" in result.stderr
    assert "tf1/mlp_cpu" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreadable_profile_exits_1_naming_the_file(tmp_path):
    shutil.copytree(LOGDIR / "tf1", tmp_path / "tf1")
    broken = tmp_path / "broken_gpu/plugins/profile/2026_01_01_00_00_00/host.xplane.pb"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"")
    result = run_cli("runs", str(tmp_path))
    assert result.returncode == 1
    assert f"{broken}: the file is empty" in result.stdout
    assert "tf1/mlp_cpu" in result.stdout  # the good runs are still listed
    compare = run_cli("compare", str(tmp_path), "--baseline", "tf1/mlp_cpu", "--target", "broken_gpu")
    assert compare.returncode == 1
    assert str(broken) in compare.stderr and "Traceback" not in compare.stderr


def test_sidecar_overrides_facts(tmp_path):
    shutil.copytree(LOGDIR / "tf1/mlp_cpu", tmp_path / "first")
    shutil.copytree(LOGDIR / "tf1/mlp_gpu", tmp_path / "second")
    (tmp_path / "first/opcompare.json").write_text(json.dumps({"model": "mlp", "batch_size": 100, "label": "CPU"}))
    (tmp_path / "second/opcompare.json").write_text(json.dumps({"model": "mlp", "batch_size": 100}))
    document = json.loads(run_cli("runs", str(tmp_path), "--json").stdout)
    first = next(r for r in document["runs"] if r["run"] == "first")
    assert (first["model"], first["batch_size"], first["batch_size_source"]) == ("mlp", 100, "opcompare.json")
    assert document["pairs"][0]["baseline"] == "first" and document["pairs"][0]["matched_by"] == "run names"


def test_all_real_traces_read(tmp_path):
    document = json.loads(run_cli("runs", str(REALTRACES), "--json").stdout)
    assert document["errors"] == []
    devices = {r["run"]: (r["device"], r["device_name"]) for r in document["runs"]}
    assert devices["torch_resnet50_v100"] == ("GPU", "Tesla V100-DGXS-32GB")
    assert devices["torch_resnet18_cpu/export_chrome_trace"] == ("CPU", None)
    assert devices["tf2_xplane_bert_multigpu"][0] == "GPU"


def test_compare_csv_to_a_file_says_where_and_prints_the_table_only_when_asked(tmp_path):
    out = tmp_path / "ops.csv"
    pair = ["compare", str(LOGDIR), "--baseline", "tf1/mlp_cpu", "--target", "tf1/mlp_gpu"]
    quiet = run_cli(*pair, "--csv", str(out))
    assert quiet.returncode == 0, quiet.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert quiet.stderr.strip() == f"wrote {len(rows)} rows to {out}"
    assert quiet.stdout == ""
    loud = run_cli(*pair, "--csv", str(out), "--table", "--top", "2")
    assert "baseline: tf1/mlp_cpu" in loud.stdout and loud.stderr.strip() == f"wrote 2 rows to {out}"


def test_an_output_that_cannot_be_written_is_named_not_a_traceback(tmp_path):
    """A full disk (Linux's /dev/full), a folder that is not there: the command says which
    file it cannot write and why, with the usage status, and no traceback."""
    pair = ["compare", str(LOGDIR), "--baseline", "tf1/mlp_cpu", "--target", "tf1/mlp_gpu"]
    missing = tmp_path / "no_such_folder" / "ops.csv"
    for target, reason in (("/dev/full", "No space left on device"), (str(missing), "No such file or directory")):
        done = run_cli(*pair, "--csv", target)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"error: cannot write {target}: {reason}"
    check = ["check", str(LOGDIR), "--baseline", "tf1/mlp_cpu", "--target", "tf1/mlp_gpu", "--allow-one-run"]
    done = run_cli(*check, "--output", "/dev/full")
    assert done.returncode == 2 and "error: cannot write /dev/full: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr


def test_compare_csv_of_several_pairs_says_which_pair_each_row_is_from(tmp_path):
    for model in ("alpha", "beta"):
        for device in ("cpu", "gpu"):
            shutil.copytree(LOGDIR / f"tf1/mlp_{device}", tmp_path / "logs" / f"{model}_{device}")
    out = tmp_path / "pairs.csv"
    result = run_cli("compare", str(tmp_path / "logs"), "--csv", str(out), "--all-pairs")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0])[:3] == ["baseline_run", "target_run", "key"]
    assert {(r["baseline_run"], r["target_run"]) for r in rows} == {
        ("alpha_cpu", "alpha_gpu"),
        ("beta_cpu", "beta_gpu"),
    }
    assert len(rows) == 2 * sum(1 for r in rows if r["baseline_run"] == "alpha_cpu")
    shutil.rmtree(tmp_path / "logs" / "beta_gpu")  # one automatic pair left: the same layout
    assert run_cli("compare", str(tmp_path / "logs"), "--csv", str(out), "--all-pairs").returncode == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert list(rows[0])[:3] == ["baseline_run", "target_run", "key"]
    assert {(r["baseline_run"], r["target_run"]) for r in rows} == {("alpha_cpu", "alpha_gpu")}


def test_lazy_listing_trusts_the_sidecar_over_the_run_name(tmp_path):
    shutil.copytree(LOGDIR / "tf1/mlp_cpu", tmp_path / "mlp_gpu_bs8")
    (tmp_path / "mlp_gpu_bs8" / "opcompare.json").write_text(
        json.dumps({"model": "mlp", "batch_size": 100, "device": "cpu"})
    )
    lazy = json.loads(run_cli("runs", str(tmp_path), "--lazy", "--json", "--no-cache").stdout)
    (run,) = lazy["runs"]
    assert (run["loaded"], run["device"], run["batch_size"], run["batch_size_source"], run["model"]) == (
        False,
        "CPU",
        100,
        "opcompare.json",
        "mlp",
    )
    read = json.loads(run_cli("runs", str(tmp_path), "--json", "--no-cache").stdout)["runs"][0]
    assert (read["device"], read["batch_size"]) == ("CPU", 100)  # the data agree; the name was wrong


def test_runs_document_suggests_a_pair_and_says_when_no_accelerator_run_exists(tmp_path):
    for size in (16, 4, 64):
        shutil.copytree(LOGDIR / f"torch/cnn_torch_cpu_bs{size}", tmp_path / f"cnn_cpu_bs{size}")
    document = json.loads(run_cli("runs", str(tmp_path), "--json").stdout)
    assert document["pairs"] == []
    assert (document["suggested"]["baseline"], document["suggested"]["target"]) == ("cnn_cpu_bs4", "cnn_cpu_bs64")
    (notice,) = document["notices"]
    assert "No accelerator run" in notice and "--devices gpu" in notice
    with_gpu = json.loads(run_cli("runs", str(LOGDIR), "--json").stdout)
    assert with_gpu["notices"] == [] and with_gpu["suggested"]["target"] == "tf1/mlp_gpu"


def test_an_overlap_only_pair_needs_a_clear_margin_and_is_marked_a_guess(tmp_path):
    """Nameless runs (``cpu``, ``gpu``), batch sizes unknown: one CPU candidate pairs, as a
    guess; two CPU runs equally like the GPU run pair with neither."""
    for name, device in (("first", "cpu"), ("second", "gpu")):
        shutil.copytree(LOGDIR / f"tf1/mlp_{device}", tmp_path / "one" / name)
    (pair,) = json.loads(run_cli("runs", str(tmp_path / "one"), "--json").stdout)["pairs"]
    assert (pair["baseline"], pair["target"], pair["guess"]) == ("first", "second", True)
    assert pair["matched_by"] == "op names (Jaccard 0.76); a guess: batch sizes unknown"
    for name, device in (("first", "cpu"), ("again", "cpu"), ("second", "gpu")):
        shutil.copytree(LOGDIR / f"tf1/mlp_{device}", tmp_path / "two" / name)
    assert json.loads(run_cli("runs", str(tmp_path / "two"), "--json").stdout)["pairs"] == []


def test_the_summary_says_when_runs_do_not_compare_like_with_like():
    def summary(baseline, target):
        result = run_cli("compare", str(LOGDIR), "--baseline", baseline, "--target", target, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)["summary"]

    sizes = summary("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs64")
    assert sizes["per_sample_speedup"] == pytest.approx(sizes["whole_step_speedup"] * 64 / 4)
    assert sizes["notes"][0] == (
        "Batch sizes differ (4 vs 64): the headline is per sample, and each op's speedup "
        "compares one call at each size, that is different amounts of work."
    )
    # the headline: the median step wall time per sample, from the runs' own ProfilerStep markers
    assert sizes["headline_per_sample"] and sizes["headline_basis"] == "step wall time"
    walls = [
        steady_median(profiler_step_durations(LOGDIR / run))
        for run in ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs64")
    ]
    assert sizes["headline_speedup"] == pytest.approx(walls[0] / 4 / (walls[1] / 64), rel=1e-9)
    frameworks = summary("tf_keras/cnn_cpu_bs8/train", "torch/cnn_torch_cpu_bs16")
    assert frameworks["matched_ops"] == 0
    # no "group by op type" hint: op types meet within one framework only (Conv2D is never aten::convolution)
    assert (
        "No op is in both runs: the runs come from different frameworks (PyTorch and TensorFlow)."
        in frameworks["notes"]
    )
    devices = summary("tf1/mlp_cpu", "tf1/mlp_gpu")
    assert devices["whole_step_speedup"] == pytest.approx(
        devices["baseline_time_per_step_us"] / devices["target_time_per_step_us"]
    )
    # the notes write speedups as everything else does (text.py, the tab's format.js); a TF1 timeline is
    # one session.run, whose wall time is the headline, and op time (CPU ops side by side) says why it differs
    assert devices["headline_basis"] == "step wall time"
    assert devices["notes"] == [
        f"Op time per step gives {format_speedup(devices['whole_step_speedup'])}, the step wall time "
        f"{format_speedup(devices['headline_speedup'])}: op time adds up ops that ran side by side on parallel threads "
        "and misses time outside ops (a data loader, Python, waiting on a device), so the headline is the wall time.",
    ]  # matched op time and the geomean are not repeated in a note: they are out of the first screen
    assert devices["op_time_speedup"] == devices["whole_step_speedup"] and devices["op_time_basis"] == "per step"


def test_compare_on_a_cpu_only_logdir_compares_the_pair_the_tab_opens_on(tmp_path):
    """No CPU/accelerator pair: the tab opens on the widest batch-size change of one model,
    and so does `compare` without runs (it exited 2 before)."""
    logdir = tmp_path / "logs"
    shutil.copytree(LOGDIR / "torch", logdir / "torch")
    suggested = json.loads(run_cli("runs", str(logdir), "--json", "--no-cache").stdout)["suggested"]
    assert (suggested["baseline"], suggested["target"]) == ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs64")
    result = run_cli("compare", str(logdir), "--no-cache", "--top", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("baseline: torch/cnn_torch_cpu_bs4 (CPU)\ntarget:   torch/cnn_torch_cpu_bs64 (CPU)")
    assert f"comparing the pair the tab opens on: {suggested['reason']}" in result.stderr


def test_the_text_compare_prints_the_run_warnings_the_tab_shows(tmp_path):
    """A bs64 trace filed under a name that says bs32: the tab lists the run's warning
    beside the notes, and the text output prints it too."""
    logdir = tmp_path / "logs"
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", logdir / "cnn_torch_cpu_bs4")
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs64", logdir / "cnn_torch_cpu_bs32")
    document = json.loads(
        run_cli(
            "compare",
            str(logdir),
            "--baseline",
            "cnn_torch_cpu_bs4",
            "--target",
            "cnn_torch_cpu_bs32",
            "--json",
            "--no-cache",
        ).stdout
    )
    (warning,) = [w for w in document["summary"]["target"]["warnings"] if "the run name says batch size 32" in w]
    text = run_cli(
        "compare",
        str(logdir),
        "--baseline",
        "cnn_torch_cpu_bs4",
        "--target",
        "cnn_torch_cpu_bs32",
        "--no-cache",
        "--top",
        "1",
    ).stdout
    assert f"\nwarning: cnn_torch_cpu_bs32: {warning}\n" in text


def test_compare_without_runs_compares_the_pair_the_tab_opens_on():
    """Issue 51: on the demo the CLI printed all its pairs (then twelve), batch 1 first (0.89×), where
    the tab opens on batch 64 (2.03×). The CLI now prints the tab's pair and says how to ask
    for every pair; --all-pairs prints them all."""
    demo = Path(__file__).parent.parent / "demo_logs"
    listing = json.loads(run_cli("runs", str(demo), "--json").stdout)
    suggested = listing["suggested"]
    result = run_cli("compare", str(demo), "--top", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\nbaseline: ") + result.stdout.startswith("baseline: ") == 1
    assert result.stdout.startswith(f"baseline: {suggested['baseline']} (CPU)\ntarget:   {suggested['target']} (GPU")
    assert len(listing["pairs"]) == 14  # 12 of the PyTorch CNN's matrix, 2 with stacks (demo_logs/torch_modules)
    assert f"--all-pairs compares all {len(listing['pairs'])} CPU/accelerator pairs" in result.stderr
    document = json.loads(run_cli("compare", str(demo), "--json").stdout)
    assert (document["summary"]["baseline"]["run"], document["summary"]["target"]["run"]) == (
        suggested["baseline"],
        suggested["target"],
    )
    every = run_cli("compare", str(demo), "--top", "1", "--all-pairs")
    assert every.returncode == 0 and every.stdout.count("baseline: ") == len(listing["pairs"])
    refused = run_cli("compare", str(demo), "--baseline", "a", "--target", "b", "--all-pairs")
    assert refused.returncode == 2 and "--all-pairs" in refused.stderr
