"""The version matrix (tests/fixtures/versions): real CPU profiles from TF 2.12 (Keras 2)
and 2.21 (Keras 3), torch 2.5, 2.13 and 2.14, and real H100 GPU profiles from torch 2.11
(gzipped, as ``tensorboard_trace_handler(use_gzip=True)`` writes them), four model shapes,
each checked against an oracle taken in the recording process (PyTorch's
``key_averages()``) or by xprof's converter on a copy (TF), and against the batch size and
steps the recorder knew."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, as_json, run_cli

from tb_opcompare.schema.optable import OpProfile
from tb_opcompare.store.catalog import Catalog

VERSIONS = FIXTURES / "versions"
ORACLES = VERSIONS / "oracles"
CATALOG = Catalog(str(VERSIONS), cache_dir=None)
TORCH_RUNS = sorted(s.run for s in CATALOG.sources() if s.run.startswith("torch"))
TF_RUNS = sorted(s.run for s in CATALOG.sources() if s.run.startswith("tf"))


def _oracle(run: str, kind: str) -> dict:
    version, name = run.split("/")[:2]
    return json.loads((ORACLES / version / f"{name}.{kind}.json").read_text())


def test_the_matrix_is_complete():
    assert len(TORCH_RUNS) == 32 and len(TF_RUNS) == 14
    assert {run.split("/")[0] for run in TORCH_RUNS + TF_RUNS} == {
        "torch2.5",
        "torch2.13",
        "torch2.14",
        "torch2.11_h100",
        "tf2.12",
        "tf2.21",
    }


@pytest.mark.parametrize("run", TORCH_RUNS)
def test_pytorch_counts_calls_and_self_time_as_key_averages_does(run):
    """Including its fold of an only child of the same name (``aten::div`` in ``aten::div``).
    On GPU traces key_averages() also lists each kernel, and a record_function range a
    second time for its GPU-side copy; those rows have no CPU time and are not host ops."""
    oracle = _oracle(run, "key_averages")
    expected = {
        entry["key"]: entry
        for entry in oracle["key_averages"]
        if not entry["key"].startswith("ProfilerStep") and entry["cpu_time_total_us"] > 0
    }
    loaded = CATALOG.load(run)
    host = loaded.profile.op_table.frame()[loaded.profile.op_table.frame()["side"] == "host"].set_index("op_name")
    assert set(host.index) == set(expected)
    for name, row in host.iterrows():
        assert row["occurrences"] == expected[name]["count"], name
        assert row["self_us"] == pytest.approx(expected[name]["self_cpu_time_total_us"], rel=1e-3, abs=0.01), name
    facts = loaded.profile.facts
    assert (facts.batch_size, facts.steps) == (oracle["batch_size"], oracle["profiled_steps"])
    assert facts.batch_size_source.startswith("data: batch dim of ") and not facts.warnings


@pytest.mark.parametrize("run", TF_RUNS)
def test_tensorflow_self_times_agree_with_xprof_and_facts_with_the_recorder(run):
    oracle = _oracle(run, "framework_op_stats")
    loaded = CATALOG.load(run)
    ours = {(row.op_name, row.op_type): row for row in loaded.profile.op_table.frame().itertuples()}
    # IDLE is xprof's idle time; "(null)" rows are zero-time events it could not name.
    expected = [row for row in oracle["ops"] if row["type"] != "IDLE" and row["operation"] != "(null)"]
    assert all(row["total_time"] == 0 for row in oracle["ops"] if row["operation"] == "(null)")
    assert {(row["operation"], row["type"]) for row in expected} == set(ours)
    differing = []
    for row in expected:
        mine = ours[(row["operation"], row["type"])]
        assert mine.self_us == pytest.approx(row["total_self_time"], rel=1e-3, abs=0.01), row["operation"]
        if mine.occurrences != row["occurrences"]:
            differing.append((row["occurrences"], mine.occurrences))
    # xprof counts a few oneDNN ops of the bs20 CNN twice; the xplane holds one event per
    # step for them (3), which is what is counted here.
    assert len(differing) <= 3 and all(theirs == 2 * mine for theirs, mine in differing)
    facts = loaded.profile.facts
    assert (facts.batch_size, facts.steps) == (oracle["batch_size"], oracle["profiled_steps"])
    assert facts.batch_size_source.startswith("data: ")


@pytest.mark.parametrize("run", [run for run in TORCH_RUNS if "_gpu_" in run])
def test_pytorch_gpu_time_per_op_is_its_kernels_per_execution_as_key_averages_says(run):
    """A device row sums the kernels (and memcpys, memsets) its op launched, as
    key_averages()' self device time does, and counts the op's executions, not its kernels:
    the mean is per execution, which is what a CPU mean is compared with."""
    oracle = _oracle(run, "key_averages")
    host_entries = [
        entry
        for entry in oracle["key_averages"]
        if entry["cpu_time_total_us"] > 0 and not entry["key"].startswith("ProfilerStep")
    ]
    expected = {entry["key"]: entry for entry in host_entries if entry["self_device_time_total_us"] > 0}
    loaded = CATALOG.load(run)
    assert loaded.profile.facts.device == "GPU" and loaded.profile.facts.device_name == "NVIDIA H100 80GB HBM3"
    device = loaded.profile.op_table.frame()[loaded.profile.op_table.frame()["side"] == "device"].set_index("op_name")
    assert set(device.index) == set(expected)
    for name, row in device.iterrows():
        assert row["total_us"] == pytest.approx(expected[name]["self_device_time_total_us"], rel=1e-3, abs=0.01), name
        assert row["occurrences"] == expected[name]["count"], name


def test_an_op_that_launches_seven_kernels_per_call_has_a_mean_per_call():
    """cuDNN's LSTM backward launches 7 kernels per call on the H100: 3 profiled steps, 21
    kernels, and the mean is a third of the total, not a 21st."""
    for size in (6, 20):
        ops = CATALOG.load(f"torch2.11_h100/lstm_gpu_bs{size}").profile.op_table.frame()
        (row,) = ops[(ops["side"] == "device") & (ops["op_name"] == "aten::_cudnn_rnn_backward")].itertuples()
        assert (row.kernels, row.occurrences) == (21, 3)
        assert row.mean_us == pytest.approx(row.total_us / 3)
        assert row.min_us <= row.median_us <= row.max_us and row.min_us * 3 <= row.total_us <= row.max_us * 3
    # what a user sees: a CPU->GPU comparison of the LSTM at batch 20 (the CPU run is torch 2.14's)
    catalog = Catalog(str(VERSIONS), cache_dir=None)
    from tb_opcompare.service.compare import compare_document

    rows = {
        row["key"]: row
        for row in as_json(compare_document(catalog, "torch2.14/lstm_cpu_bs20", "torch2.11_h100/lstm_gpu_bs20"))["rows"]
    }
    backward = rows["aten::_cudnn_rnn_backward"]  # cuDNN's: on the GPU only
    assert (backward["status"], backward["target_kernels_per_execution"], backward["target_occurrences"]) == (
        "target_only",
        7,
        3,
    )
    addmm = rows["aten::addmm"]  # host time on the CPU, 4 kernels a call on the GPU
    assert (addmm["status"], addmm["baseline_kernels_per_execution"], addmm["target_kernels_per_execution"]) == (
        "matched",
        None,
        4,
    )
    assert addmm["target_mean_us"] == pytest.approx(addmm["target_total_us"] / 3)


def test_batch_sizes_come_from_the_data_when_names_say_nothing(tmp_path):
    """Runs renamed so that no name carries a batch size: every batch size is still found."""
    truth = {}
    for index, run in enumerate(TORCH_RUNS + TF_RUNS):
        source = next(s for s in CATALOG.sources() if s.run == run)
        shutil.copytree(source.run_dir, tmp_path / f"run{index:02d}")
        truth[f"run{index:02d}"] = _oracle(run, "key_averages" if run.startswith("torch") else "framework_op_stats")
    document = json.loads(run_cli("runs", str(tmp_path), "--json", "--no-cache").stdout)
    assert document["errors"] == []
    found = {run["run"].split("/")[0]: (run["batch_size"], run["steps"]) for run in document["runs"]}
    assert found == {name: (oracle["batch_size"], oracle["profiled_steps"]) for name, oracle in truth.items()}


def test_an_embedding_vocabulary_no_longer_passes_for_the_batch_size():
    """Sequence-first LSTM fed by an embedding: the first shaped input is the [1000, 16]
    weight, and the LSTM's input is [12, N, 16]; the batch is N."""
    for version in ("torch2.5", "torch2.13", "torch2.14"):
        for size in (6, 20):
            facts = CATALOG.load(f"{version}/lstm_cpu_bs{size}").profile.facts
            assert facts.batch_size == size and not facts.warnings
            assert "and the target of aten::cross_entropy_loss" in facts.batch_size_source


def test_keras_2_step_events_batch_size_is_evidence_too(tmp_path):
    """fit() on arrays: Keras 2's step event carries the batch_size argument. It agrees with
    the input pipeline here; with the pipeline's events renamed away (as in profiles whose
    tf.data iterators were not traced), it alone gives the batch size."""
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    for size in (6, 20):
        facts = CATALOG.load(f"tf2.12/cnn_arrays_cpu_bs{size}").profile.facts
        assert facts.batch_size == size and not facts.warnings
        assert facts.batch_size_source == (
            "data: tf.data input elements (Iterator::Root shapes); the batch_size of "
            "the Keras step event (fit()'s argument) agrees"
        )
    source = next((VERSIONS / "tf2.12" / "cnn_arrays_cpu_bs20").rglob("*.xplane.pb"))

    def variant(name: str, change) -> None:
        space = XSpace()
        space.ParseFromString(source.read_bytes())
        for plane in space.planes:
            change(plane)
        target = tmp_path / name / "plugins" / "profile" / "1" / "vm.xplane.pb"
        target.parent.mkdir(parents=True)
        target.write_bytes(space.SerializeToString())

    def rename_pipeline(plane) -> None:
        for entry in plane.event_metadata:
            entry.value.name = entry.value.name.replace("Iterator::", "Untraced::")

    def rename_step_batch_size(plane) -> None:  # on the step event only: the batch dataset keeps its own
        batch_size = [entry.key for entry in plane.stat_metadata if entry.value.name == "batch_size"]
        train = {entry.key for entry in plane.event_metadata if entry.value.name == "train"}
        for line in plane.lines:
            for event in line.events:
                if event.metadata_id in train:
                    kept = [stat for stat in event.stats if stat.metadata_id not in batch_size]
                    del event.stats[:]
                    event.stats.extend(kept)

    variant("no_pipeline", rename_pipeline)
    variant("no_step_batch_size", rename_step_batch_size)
    variant("no_pipeline_sidecar", rename_pipeline)  # fit(batch_size=20) over a dataset the sidecar says is 128
    (tmp_path / "no_pipeline_sidecar" / "opcompare.json").write_text('{"model": "cnn", "batch_size": 128}')
    catalog = Catalog(str(tmp_path), cache_dir=None)
    facts = catalog.load("no_pipeline").profile.facts
    # an argument, not a measurement (issue 31, item 7): alone it gives the size, and says what it is
    assert (facts.batch_size, facts.batch_size_source) == (
        20,
        "argument: the batch_size of the Keras step event (fit()'s argument)",
    )
    facts = catalog.load("no_pipeline_sidecar").profile.facts
    assert (facts.batch_size, facts.batch_size_source) == (128, "opcompare.json")
    assert facts.warnings == [
        "the profile holds batch size 20 only as the batch_size of the Keras step event (fit()'s "
        "argument), which Keras ignores for a batched dataset; using 128 from the sidecar "
        "opcompare.json"
    ]
    # without the step event's stat, the elements measured still come before the batch dataset's declared size
    facts = catalog.load("no_step_batch_size").profile.facts
    assert (facts.batch_size, facts.batch_size_source) == (20, "data: tf.data input elements (Iterator::Root shapes)")


def test_keras_2_steps_count_every_step_function_call():
    """Keras 2 marks one of three profiled steps with step_num; it calls train_function for each."""
    facts = CATALOG.load("tf2.12/cnn_cpu_bs6").profile.facts
    assert facts.steps == 3
    assert facts.steps_source == "Keras step function calls (train_function); step markers: 1"


def test_reading_a_big_trace_decodes_each_part_once(tmp_path):
    """The batch-size probe decodes the parts holding the first step's ops once, not once per op."""
    from tb_opcompare.ingest.readers.chrome_json import open_chrome_trace
    from tb_opcompare.ingest.readers.torch_trace import read_torch_trace

    path = next((VERSIONS / "torch2.13" / "transformer_cpu_bs20").glob("*.pt.trace.json"))
    import tb_opcompare.ingest.readers.chrome_json as chrome_json

    original = chrome_json.WHOLE_TEXT_BYTES, chrome_json.BATCH_BYTES
    chrome_json.WHOLE_TEXT_BYTES, chrome_json.BATCH_BYTES = 1 << 16, 1 << 16  # cut this 0.9 MB trace into parts
    try:
        text = open_chrome_trace(str(path), Path(path).read_bytes())
        profile = OpProfile.from_parsed(read_torch_trace(str(path), text))
    finally:
        chrome_json.WHOLE_TEXT_BYTES, chrome_json.BATCH_BYTES = original
    assert profile.facts.batch_size == 20
    parts = len(text._cuts)
    assert parts > 5 and 0 < text.parts_decoded <= parts
