"""The recording helpers and `tb-opcompare record`, run for real (TensorFlow CPU, PyTorch
CPU) in subprocesses, then read back with the readers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import LOGDIR, run_cli

from tb_opcompare.recording.runner import gpu_present
from tb_opcompare.store.catalog import Catalog

PYTHON = sys.executable


def run_python(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [PYTHON, *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def sidecar(run_dir) -> dict:
    return json.loads((run_dir / "opcompare.json").read_text())


def test_keras_callback_profiles_marked_steps_and_writes_the_sidecar(tmp_path):
    run_dir = tmp_path / "mnist_cnn_cpu_bs8"
    run_python("-m", "tb_opcompare.demo.mnist_tf", "--batch-size", "8", "--steps", "9", "--run-dir", str(run_dir))
    loaded = Catalog(str(tmp_path)).load("mnist_cnn_cpu_bs8")
    facts = loaded.profile.facts
    assert facts.format == "xplane" and facts.device == "CPU"
    assert facts.steps == 5 and facts.steps_source.startswith("step markers")  # batches 3..7
    assert facts.step_time_us > 0
    # The profile's own tf.data shapes give the size; the sidecar agrees, so no warning.
    assert (facts.batch_size, facts.batch_size_source) == (8, "data: tf.data input elements (Iterator::Root shapes)")
    assert not [w for w in facts.warnings if "batch size" in w]
    assert loaded.model == "mnist_cnn"
    written = sidecar(run_dir)
    assert written["batch_size"] == 8
    assert written["versions"]["tensorflow"] and written["versions"]["keras"]
    assert written["device"] == "CPU" and written["profiled_steps"] == [3, 7]
    assert any(part.endswith("mnist_tf.py") for part in written["command"])
    conv = loaded.profile.op_table.frame()[loaded.profile.op_table.frame()["op_type"].str.contains("Conv2D")]
    assert len(conv) and (conv["occurrences"] % 5 == 0).all()  # once per profiled step


def test_tf_context_manager_marks_a_custom_loop(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        import tensorflow as tf
        from tb_opcompare.recording import tf_profile

        weights = tf.Variable(tf.random.normal((64, 64)))

        @tf.function
        def train_step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.matmul(x, weights) ** 2)
            weights.assign_sub(0.001 * tape.gradient(loss, weights))

        with tf_profile(sys.argv[1], model="matmul", batch_size=16, first_step=2, steps=3) as profiler:
            for step in range(8):
                with profiler.step(step):
                    train_step(tf.random.normal((16, 64)))
    """)
    )
    run_python(str(script), str(tmp_path / "matmul_cpu_bs16"))
    facts = Catalog(str(tmp_path)).load("matmul_cpu_bs16").profile.facts
    assert facts.steps == 3 and facts.batch_size == 16
    assert sidecar(tmp_path / "matmul_cpu_bs16")["profiled_steps"] == [2, 4]


def test_torch_helper_records_shapes_steps_and_the_sidecar(tmp_path):
    run_dir = tmp_path / "mnist_cnn_torch_cpu_bs8"
    run_python("-m", "tb_opcompare.demo.mnist_torch", "--batch-size", "8", "--run-dir", str(run_dir))
    loaded = Catalog(str(tmp_path)).load("mnist_cnn_torch_cpu_bs8")
    facts = loaded.profile.facts
    assert facts.format == "pytorch" and facts.device == "CPU"
    assert facts.steps == 5 and facts.step_time_us > 0
    assert facts.batch_size == 8 and facts.batch_size_source.startswith("data")  # from record_shapes
    assert loaded.model == "mnist_cnn_torch" and not facts.warnings
    assert sidecar(run_dir)["versions"]["torch"].startswith("2.")


@pytest.mark.parametrize("module", ["tb_opcompare.demo.mnist_tf", "tb_opcompare.demo.mnist_torch"])
def test_switching_profiling_off_writes_nothing(tmp_path, module):
    run_dir = tmp_path / "run"
    result = run_python("-m", module, "--batch-size", "4", "--run-dir", str(run_dir), env={"TB_OPCOMPARE_PROFILE": "0"})
    assert "trained 10 steps at batch size 4" in result.stdout
    assert not run_dir.exists()


def test_record_cli_runs_every_batch_size_and_skips_an_absent_gpu(tmp_path):
    logdir = tmp_path / "logs"
    result = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "tiny",
        "--batch-sizes",
        "2,4",
        "--devices",
        "cpu,gpu",
        "--",
        PYTHON,
        "-m",
        "tb_opcompare.demo.mnist_torch",
        "--batch-size",
        "{batch_size}",
        "--steps",
        "6",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    if not gpu_present():
        assert "gpu: no GPU visible here" in result.stdout
    assert "[1/2] tiny_cpu_bs2:" in result.stdout and "[2/2] tiny_cpu_bs4:" in result.stdout
    assert "2 of 2 runs recorded" in result.stdout
    catalog = Catalog(str(logdir))
    for size in (2, 4):
        loaded = catalog.load(f"tiny_cpu_bs{size}")
        assert loaded.profile.facts.batch_size == size and loaded.model == "tiny"
        assert loaded.profile.facts.steps == 3  # 6 steps: wait 1, warm-up 2, active 3
    sweep = json.loads(run_cli("sweep", str(logdir), "--model", "tiny", "--json").stdout)
    assert sweep["batch_sizes"] == {"CPU": [2, 4]}


def test_record_cli_repeats_each_run_and_the_demo_records_bf16_and_memory(tmp_path):
    logdir = tmp_path / "logs"
    result = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "tiny",
        "--batch-sizes",
        "2,3",
        "--devices",
        "cpu",
        "--repeats",
        "2",
        "--",
        PYTHON,
        "-m",
        "tb_opcompare.demo.mnist_torch",
        "--batch-size",
        "{batch_size}",
        "--steps",
        "4",
        "--precision",
        "bf16",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # repeats interleave: every batch size once, then again
    order = re.findall(r"\] (tiny_cpu_bs\d_rep\d):", result.stdout)
    assert order == ["tiny_cpu_bs2_rep1", "tiny_cpu_bs3_rep1", "tiny_cpu_bs2_rep2", "tiny_cpu_bs3_rep2"]
    listing = json.loads(run_cli("runs", str(logdir), "--json", "--no-cache").stdout)
    assert {(r["run"], r["batch_size"], r["repeat"], r["model"]) for r in listing["runs"]} == {
        (f"tiny_cpu_bs{n}_rep{k}", n, k, "tiny [bf16]") for n in (2, 3) for k in (1, 2)
    }
    written = sidecar(logdir / "tiny_cpu_bs3_rep2")
    assert (written["repeat"], written["precision"], written["profile_memory"]) == (2, "bf16", True)
    trace = next((logdir / "tiny_cpu_bs3_rep2").glob("*.pt.trace.json")).read_text()
    assert '"[memory]"' in trace and "c10::BFloat16" in trace  # allocations recorded, autocast took effect


def test_record_matrix_runs_every_cell_in_its_own_process_and_the_matrix_places_them(tmp_path):
    """``--matrix precision=fp32,bf16 --matrix backend=eager,xla`` on the Keras demo: four
    runs at one batch size, each value a name token and a sidecar fact, and the matrix
    puts each in the column its data (else its sidecar) says."""
    logdir = tmp_path / "logs"
    result = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "cnn",
        "--batch-sizes",
        "4",
        "--devices",
        "cpu",
        "--matrix",
        "precision=fp32,bf16",
        "--matrix",
        "backend=eager,xla",
        "--",
        PYTHON,
        "-m",
        "tb_opcompare.demo.mnist_tf",
        "--batch-size",
        "{batch_size}",
        "--steps",
        "6",
        "--precision",
        "{precision}",
        "--backend",
        "{backend}",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.findall(r"\] (cnn_cpu_bs4_\w+):", result.stdout) == [
        "cnn_cpu_bs4_fp32_eager",
        "cnn_cpu_bs4_fp32_xla",
        "cnn_cpu_bs4_bf16_eager",
        "cnn_cpu_bs4_bf16_xla",
    ]
    assert "tb-opcompare matrix" in result.stdout
    written = sidecar(logdir / "cnn_cpu_bs4_bf16_xla")
    assert (written["model"], written["precision"], written["compiler"]) == ("cnn", "bf16", "xla")
    matrix = json.loads(run_cli("matrix", str(logdir), "--json", "--no-cache").stdout)
    # Keras's fit runs a graph: the recorder's "eager" (no XLA) and the data's "TF graph" agree
    assert [column["key"] for column in matrix["columns"]] == ["CPU"]
    assert [(cell["precision"], cell["compiler"], cell["runs"]) for cell in matrix["cells"]] == [
        ("fp32", "TF graph", ["cnn_cpu_bs4_fp32_eager"]),
        ("fp32", "XLA", ["cnn_cpu_bs4_fp32_xla"]),
        ("bf16", "TF graph", ["cnn_cpu_bs4_bf16_eager"]),
        ("bf16", "XLA", ["cnn_cpu_bs4_bf16_xla"]),
    ]
    assert matrix["reference"] == "CPU"
    assert all(cell["latency_us"] > 0 and cell["steps"] >= 1 for cell in matrix["cells"])


@pytest.mark.parametrize(
    "matrix, message",
    [
        ("precision", "give comma-separated values"),
        ("optimizer=adam,sgd", "the dimensions are precision, backend, compiler"),
        ("batch_size=1,2", "the dimensions are"),
        ("precision=fp32,fp32", "given twice"),
        ("precision=fp 32", "letters, digits"),
    ],
)
def test_record_refuses_a_matrix_it_cannot_name_runs_by(tmp_path, matrix, message):
    result = run_cli(
        "record",
        "--logdir",
        str(tmp_path),
        "--model",
        "m",
        "--batch-sizes",
        "1",
        "--devices",
        "cpu",
        "--matrix",
        matrix,
        "--",
        PYTHON,
        "-c",
        "pass",
    )
    assert result.returncode == 2 and message in result.stderr and not list(tmp_path.iterdir())


def test_record_cli_says_which_runs_failed_and_why(tmp_path):
    logdir = tmp_path / "logs"
    show_env = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['TB_OPCOMPARE_BATCH_SIZE'])"
    failing = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "crash",
        "--batch-sizes",
        "3",
        "--devices",
        "cpu",
        "--",
        PYTHON,
        "-c",
        "import sys; print('out of memory'); sys.exit(3)",
    )
    assert failing.returncode == 1
    assert f"FAILED {logdir / 'crash_cpu_bs3'}: exit status 3" in failing.stderr
    assert "out of memory" in failing.stderr
    silent = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "silent",
        "--batch-sizes",
        "5",
        "--devices",
        "cpu",
        "--",
        PYTHON,
        "-c",
        show_env,
    )
    assert silent.returncode == 1 and "wrote no profile" in silent.stderr
    # CPU runs hide the GPUs, and the batch size reaches the command's environment
    assert (logdir / "silent_cpu_bs5" / "opcompare-record.log").read_text().split() == ["-1", "5"]
    usage = run_cli("record", "--logdir", str(logdir), "--model", "m", "--batch-sizes", "x1")
    assert usage.returncode == 2 and "comma-separated integers" in usage.stderr


def test_sidecar_claims_that_disagree_with_the_data_are_warned_about(tmp_path):
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", tmp_path / "run")
    (tmp_path / "run" / "opcompare.json").write_text(json.dumps({"batch_size": 5, "device": "GPU"}))
    facts = Catalog(str(tmp_path)).load("run").profile.facts
    assert (facts.batch_size, facts.device) == (4, "CPU")
    assert any("sidecar opcompare.json says batch size 5 but the profile's tensors say 4" in w for w in facts.warnings)
    assert any("sidecar opcompare.json says GPU but the profile shows CPU" in w for w in facts.warnings)


def test_record_refuses_a_run_directory_that_already_holds_a_profile(tmp_path):
    logdir = tmp_path / "logs"
    occupied = logdir / "tiny_cpu_bs4"
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", occupied)
    sidecar = json.dumps({"model": "other", "framework": "torch"})
    (occupied / "opcompare.json").write_text(sidecar)
    command = ["--", PYTHON, "-c", "print('the training ran')"]
    refused = run_cli(
        "record", "--logdir", str(logdir), "--model", "tiny", "--batch-sizes", "4", "--devices", "cpu", *command
    )
    assert refused.returncode == 1
    assert f"{occupied} already holds a profile of model 'other' (torch): pytorch (1 capture)" in refused.stderr
    assert "--force" in refused.stderr
    assert not (occupied / "opcompare-record.log").exists()  # the command never ran
    forced = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "tiny",
        "--batch-sizes",
        "4",
        "--devices",
        "cpu",
        "--force",
        *command,
    )
    assert forced.returncode == 0, forced.stderr
    assert (occupied / "opcompare-record.log").read_text().strip() == "the training ran"


@pytest.mark.parametrize("module", ["tb_opcompare.demo.mnist_torch", "tb_opcompare.demo.mnist_tf"])
def test_a_gpu_run_whose_framework_sees_no_gpu_fails_instead_of_profiling_the_cpu(tmp_path, module):
    """What `tb-opcompare record --devices gpu` sets; this project's CPU builds see no GPU."""
    if gpu_present():
        pytest.skip("a GPU is visible here")
    run_dir = tmp_path / "tiny_gpu_bs2"
    result = subprocess.run(
        [PYTHON, "-m", module, "--batch-size", "2", "--steps", "4", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TB_OPCOMPARE_DEVICE": "GPU"},
    )
    assert result.returncode != 0
    assert "this is a GPU run (TB_OPCOMPARE_DEVICE=GPU), but" in result.stderr and "sees no GPU here" in result.stderr
    assert not list(run_dir.rglob("*.json")) and not list(run_dir.rglob("*.xplane.pb"))


def test_record_and_the_helpers_leave_their_index_beside_the_profile(tmp_path):
    """`record --index` and `torch_profile(index=True)`: the training job writes the
    logdir's shared index, so the first viewer reads no profile."""
    logdir = tmp_path / "logs"
    result = run_cli(
        "record",
        "--logdir",
        str(logdir),
        "--model",
        "tiny",
        "--batch-sizes",
        "2",
        "--devices",
        "cpu",
        "--index",
        "--",
        PYTHON,
        "-m",
        "tb_opcompare.demo.mnist_torch",
        "--batch-size",
        "{batch_size}",
        "--steps",
        "6",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    script = textwrap.dedent(f"""
        import torch
        from tb_opcompare.recording.profilers import torch_profile
        model = torch.nn.Linear(8, 4)
        with torch_profile({str(logdir / "helper_cpu_bs3")!r}, model="helper", batch_size=3, index=True) as profiler:
            for _ in range(6):
                model(torch.randn(3, 8)).sum().backward()
                profiler.step()
    """)
    run_python("-c", script)
    entries = json.loads((logdir / ".opcompare" / "manifest.json").read_text())["sessions"].values()
    assert sorted(entry["run"] for entry in entries) == ["helper_cpu_bs3", "tiny_cpu_bs2"]
    fresh = Catalog(str(logdir))
    assert {fresh.load(run).profile.facts.batch_size for run in ("helper_cpu_bs3", "tiny_cpu_bs2")} == {2, 3}
    assert not fresh.cache.parses
