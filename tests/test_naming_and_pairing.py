from __future__ import annotations

import itertools
import random
import re

import pytest
from conftest import as_json

from tb_opcompare.analysis.pairing import (
    VARIANT_DIMENSIONS,
    RunForPairing,
    _hardware,
    _one_model_two_devices,
    _two_runs_of_one_model,
    pair_runs,
    variant_pairs,
)
from tb_opcompare.ingest.naming import batch_size_from_name, model_key, repeat_from_name
from tb_opcompare.schema.dimensions import is_default


@pytest.mark.parametrize(
    "run, key, batch",
    [
        ("mnist_cpu_bs32/train", "mnist/train", 32),
        ("mnist_gpu_bs32/train", "mnist/train", 32),
        ("resnet-cuda0-batch_size=64", "resnet", 64),
        ("bert/batch16/gpu", "bert", 16),
        ("b16_cuda:0_model", "model", 16),
        ("log_prefetch/128_20210203-201149", "log_prefetch/128", None),  # a timestamp names no model
        ("scuba_gpu_cpuinfo", "scuba_cpuinfo", None),
        ("mnist_gpu_bs64_rep2", "mnist", 64),
        ("resnet/repeat-3/cuda_b8", "resnet", 8),
        ("report_cpu_bs4", "report", 4),
        # accelerator models are hardware, and `vs` joins two: one model on an H100 and an MI300X
        ("torch_bert_small_h100_vs_mi300/h100", "torch_bert_small", None),
        ("torch_bert_small_h100_vs_mi300/mi300", "torch_bert_small", None),
        ("tf1_timeline_mlp_cpu_vs_gpu/gpu", "tf1_timeline_mlp", None),
        ("resnet50_a100_bs8", "resnet50", 8),
        ("convnext_mi250x_bs8", "convnext", 8),
        ("llama_b200_bs8", "llama", 8),  # a B200 is a GPU, not batch 200
        ("llama_b200", "llama", None),
    ],
)
def test_model_key_and_batch_from_name(run, key, batch):
    assert model_key(run) == key
    assert batch_size_from_name(run) == batch


def test_repeat_from_name():
    assert [repeat_from_name(n) for n in ("m_gpu_bs4_rep2", "resnet/repeat-3/cuda", "report_cpu", "m_rep")] == [
        2,
        3,
        None,
        None,
    ]


def run(name, device, batch=None, ops=("a", "b", "c", "d")):
    return RunForPairing(run=name, model=model_key(name), device=device, batch_size=batch, op_names=frozenset(ops))


def test_pairs_by_model_and_batch_size():
    pairs = as_json(
        pair_runs(
            [
                run("m_cpu_bs8", "CPU", 8),
                run("m_gpu_bs8", "GPU", 8),
                run("m_cpu_bs32", "CPU", 32),
                run("m_gpu_bs32", "GPU", 32),
            ]
        )
    )
    assert {(p["baseline"], p["target"]) for p in pairs} == {("m_cpu_bs8", "m_gpu_bs8"), ("m_cpu_bs32", "m_gpu_bs32")}
    assert all(p["matched_by"] == "run names" for p in pairs)


def test_repeats_pair_with_the_same_repeat_and_a_single_run_with_each():
    def repeat(name, device, number):
        return RunForPairing(run=name, model="m", device=device, batch_size=8, op_names=frozenset("ab"), repeat=number)

    runs = [repeat(f"m_{d}_bs8_rep{k}", d.upper(), k) for d in ("cpu", "gpu") for k in (1, 2, 3)]
    assert {(p["baseline"], p["target"]) for p in as_json(pair_runs(runs))} == {
        (f"m_cpu_bs8_rep{k}", f"m_gpu_bs8_rep{k}") for k in (1, 2, 3)
    }
    single_cpu = [repeat("m_cpu_bs8", "CPU", None), *runs[3:]]
    assert len(as_json(pair_runs(single_cpu))) == 3


def test_pairs_by_op_overlap_when_names_do_not_tell():
    pairs = as_json(
        pair_runs(
            [
                run("log_prefetch/128_20210203-201149", "CPU", ops="abcdef"),
                run("download128-20210202-131252", "GPU", ops="abcdeg"),
                run("other-20210202", "GPU", ops="xyz"),
            ]
        )
    )
    assert len(pairs) == 1
    assert pairs[0]["target"] == "download128-20210202-131252"
    assert pairs[0]["matched_by"].startswith("op names (Jaccard 0.71")


def test_no_pair_below_jaccard_threshold_or_between_two_cpus():
    assert as_json(pair_runs([run("a", "CPU", ops="abcd"), run("b", "GPU", ops="cdef")])) == []
    assert as_json(pair_runs([run("x_cpu", "CPU"), run("y_cpu", "CPU")])) == []


@pytest.mark.parametrize(
    "run, precision, compiler, key",
    [
        ("resnet_bf16_gpu_bs64", "bf16", None, "resnet"),
        ("fp16_study/resnet_gpu_bs32_bf16", "bf16", None, "study/resnet"),  # the run's own part speaks last
        ("resnet_jit_gpu_bs32", None, None, "resnet_jit"),  # TorchScript's word in PyTorch, XLA's in TF: no claim
        ("keras_fp32_xla_cpu_bs16/train", "fp32", "XLA", "keras/train"),
        ("mnist_cnn_compiled_gpu_bs64", None, "torch.compile", "mnist_cnn"),
    ],
)
def test_names_claim_precision_and_compiler_and_keys_leave_them_out(run, precision, compiler, key):
    from tb_opcompare.ingest.naming import compiler_from_name, precision_from_name

    assert (precision_from_name(run), compiler_from_name(run), model_key(run)) == (precision, compiler, key)


@pytest.mark.parametrize(
    "framework, family",
    [
        ("PyTorch 2.13.0+cpu", "PyTorch"),
        ("TensorFlow 2.16.1 (Keras 3)", "TensorFlow"),
        ("TensorFlow (summary.json)", "TensorFlow"),
        ("ONNX Runtime 1.32.0", "ONNX Runtime"),
        ("TensorFlow 1.x", "TensorFlow"),
        ("TensorFlow", "TensorFlow"),
    ],
)
def test_a_framework_s_family_is_its_name_without_version_or_note(framework, family):
    from tb_opcompare.analysis.headline import _framework_family

    assert _framework_family(framework) == family


def _first_pair_pairwise(runs, alike):
    """The rule as first written, pair by pair in ``itertools.combinations`` order: the
    oracle of the one-pass search."""
    return next(((a.run, b.run) for a, b in itertools.combinations(runs, 2) if alike(a, b)), None)


def _random_runs(generator: random.Random, count: int) -> list[RunForPairing]:
    """Runs drawn from few values, so that alike runs, and runs alike but on other
    hardware, are common."""
    return [
        RunForPairing(
            run=f"run{number}",
            model=generator.choice("ab"),
            device=generator.choice([None, "CPU", "GPU"]),
            device_name=generator.choice([None, "H100", "MI300X"]),
            batch_size=generator.choice([None, 8]),
            op_names=frozenset(),
            precision=generator.choice([None, "bf16"]),
            compiler=generator.choice([None, "XLA"]),
        )
        for number in range(count)
    ]


def test_the_suggested_pair_of_two_devices_and_of_one_model_is_the_pairwise_first():
    """Rules 3 and 5 of ``suggest_pair`` search in one pass a run (a listing of 1,000 runs
    of one configuration took 1.1 s pairwise); each finds the pair the pairwise search
    finds first, on 400 logdirs drawn at random."""

    def two_devices(a, b):
        return (
            (a.model, a.batch_size, a.precision, a.compiler) == (b.model, b.batch_size, b.precision, b.compiler)
            and a.device
            and b.device
            and _hardware(a) != _hardware(b)
        )

    generator = random.Random(57)
    found = {"devices": 0, "model": 0}
    for _ in range(400):
        runs = _random_runs(generator, generator.randrange(0, 12))
        expected = _first_pair_pairwise(runs, two_devices)
        suggested = _one_model_two_devices(runs)
        assert (suggested and (suggested.baseline, suggested.target)) == (expected and expected)
        found["devices"] += expected is not None
        expected = _first_pair_pairwise(runs, lambda a, b: a.model == b.model)
        suggested = _two_runs_of_one_model(runs)
        assert (suggested and (suggested.baseline, suggested.target)) == (expected and expected)
        found["model"] += expected is not None
    assert min(found.values()) > 100  # both searches found pairs, and missed some (the draws test both)
    assert max(found.values()) < 400


def _overlap_pairs_pass_over_every_pair(runs):
    """Pairing by op names as first written: each candidate's rivals found in a pass over
    every scored pair (800 unpaired runs took 17 s). The oracle of ``pair_runs``."""
    baselines = [r for r in runs if r.device == "CPU"]
    targets = [r for r in runs if r.device not in (None, "CPU")]
    scores = {
        (cpu.run, accelerator.run): (
            len(cpu.op_names & accelerator.op_names) / len(cpu.op_names | accelerator.op_names),
            cpu,
            accelerator,
        )
        for cpu in baselines
        for accelerator in targets
        if not (cpu.batch_size and accelerator.batch_size and cpu.batch_size != accelerator.batch_size)
    }
    pairs, paired = [], set()
    for (cpu_run, accelerator_run), (score, cpu, accelerator) in sorted(scores.items(), key=lambda item: -item[1][0]):
        if score < 0.5 or cpu_run in paired or accelerator_run in paired:
            continue
        rivals = [
            other
            for (b, t), (other, _, _) in scores.items()
            if (b == cpu_run) != (t == accelerator_run) and b not in paired and t not in paired
        ]
        runner_up = max(rivals, default=0.0)
        if score - runner_up < 0.1 - 1e-9:
            continue
        pairs.append((cpu_run, accelerator_run, f"{score:.2f}", f"{runner_up:.2f}" if rivals else None))
        paired.update((cpu_run, accelerator_run))
    return pairs


def test_pairs_by_op_overlap_are_those_of_a_pass_over_every_pair():
    """Each overlap candidate's rivals come from its runs' own candidates, best first, not
    from a pass over every pair: the pairs, scores and runners-up are the same on 300
    logdirs of unnamed runs drawn at random (a few models' op sets, batch sizes known or
    not)."""
    generator = random.Random(55)
    made = 0
    for _ in range(300):
        models = [frozenset(f"m{model}_{op}" for op in range(generator.randrange(3, 9))) for model in range(3)]
        runs = []
        for number in range(generator.randrange(2, 14)):
            ops = set(generator.choice(models)) | {
                f"extra{generator.randrange(3)}" for _ in range(generator.randrange(2))
            }
            runs.append(
                RunForPairing(
                    run=f"log/{number}_20210203-2011{number:02d}",
                    model=f"log/{number}",
                    device=generator.choice(["CPU", "GPU", None]),
                    batch_size=generator.choice([None, 8, 16]),
                    op_names=frozenset(ops),
                )
            )
        pairs = pair_runs(runs)
        found = [
            (
                pair.baseline,
                pair.target,
                *re.match(r"op names \(Jaccard (\S+?)(?:, next best (\S+))?\)", pair.matched_by).groups(),
            )
            for pair in pairs
        ]
        assert found == _overlap_pairs_pass_over_every_pair(runs)
        made += len(found)
    assert made > 150  # the draws pair runs, and not always


def test_variant_pairs_are_those_of_a_search_over_every_two_runs():
    """``variant_pairs`` looks each target's defaults up by the facts they share (1,000
    runs, half of them bf16, took 0.65 s pair by pair): the same pairs in the same order
    as a search over every two runs, on 300 logdirs drawn at random."""

    def every_two_runs(runs):
        found = []
        for dimension in VARIANT_DIMENSIONS:
            held = [other for other in VARIANT_DIMENSIONS if other != dimension]
            for target in sorted(runs, key=lambda run: run.run):
                if is_default(dimension, getattr(target, dimension) or VARIANT_DIMENSIONS[dimension]):
                    continue
                if target.device is None:
                    continue
                for baseline in sorted(runs, key=lambda run: run.run):
                    value = {
                        run.run: {d: getattr(run, d) or VARIANT_DIMENSIONS[d] for d in VARIANT_DIMENSIONS}
                        for run in (baseline, target)
                    }
                    if (
                        is_default(dimension, value[baseline.run][dimension])
                        and (baseline.repeat is None or target.repeat is None or baseline.repeat == target.repeat)
                        and (baseline.base_model, baseline.device, baseline.batch_size)
                        == (target.base_model, target.device, target.batch_size)
                        and all(value[baseline.run][other] == value[target.run][other] for other in held)
                    ):
                        found.append((baseline.run, target.run, dimension))
        return found

    generator = random.Random(58)
    made = 0
    for _ in range(300):
        runs = [
            RunForPairing(
                run=f"run{number:02d}",
                model="m",
                base_model=generator.choice("ab"),
                device=generator.choice(["CPU", "GPU", None]),
                batch_size=generator.choice([None, 8]),
                op_names=frozenset(),
                repeat=generator.choice([None, 1, 2]),
                precision=generator.choice([None, "fp32", "bf16"]),
                compiler=generator.choice([None, "eager", "XLA"]),
            )
            for number in generator.sample(range(40), generator.randrange(0, 12))
        ]
        found = [(pair.baseline, pair.target, pair.varies) for pair in variant_pairs(runs)]
        assert found == every_two_runs(runs)
        made += len(found)
    assert made > 60  # the draws make variant pairs
