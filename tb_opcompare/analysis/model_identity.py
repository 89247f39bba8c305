"""Which runs are one model when their names do not say so.

A run's model is first what it is called: its sidecar's ``model``, else its name key
(``ingest.naming.model_key``: ``mnist_cpu_bs32`` and ``mnist_gpu_bs32`` are ``mnist``).
Users often name runs in ways that hide the model: ``lstm_runA``/``lstm_runB``,
``download8-20210202-…``/``download128-…``, or names that say nothing at all
(``runs/Nov26_02-49-23_vm``, ``fit/20261126-031500/train``). Such runs, each alone under
its name or named by generic words only, are joined by their data:

- **the same configuration at other batch sizes**: same device, precision and compiler,
  side by side in one folder, different batch sizes, op-name sets overlapping by
  ``SAME_MODEL_JACCARD`` or more. A model's ops do not change with its batch size:
  measured 0.97-1.00 between batch sizes of one model (PyTorch CNN and LSTM on an H200,
  TF Keras CNN), against 0.61-0.70 between two models of one framework (a CNN and an MLP);
- **its CPU or accelerator counterpart**: a CPU run and an accelerator run in one folder
  that ``pairing.pair_runs`` pairs by op-name overlap (same batch size, Jaccard >= 0.5,
  clear of every rival by a margin).

- **its repeats**: runs of one configuration and batch size side by side whose op-name
  sets are the very same and whose names differ in a run counter only (Lightning's
  ``version_1``, ``version_2``, … of one script) or say nothing. Every repeat this
  project has, ours and users' (PyTorch on an H100, an H200 and a CPU, JAX on an H200, 3
  to 16 repeats a configuration), has identical op names; so do two sizes of one
  architecture (``resnet18``, ``resnet34``) and two settings that change no op, which
  their names tell apart.

Otherwise two groups are never joined where both hold a run of one configuration and batch
size: those are two experiments (kineto's ``num_workers_0`` and ``num_workers_4``, op names
0.88 alike), not one model's runs, and stay apart. A sidecar's model is never overridden, and runs in other
folders are never joined by data (one model recorded under two library versions looks
the same: measured 0.90), except one model's CPU runs and its accelerator runs:

- **its other device, in another folder**: a group of CPU runs and a group of accelerator
  runs whose names say nothing of the model (``log_prefetch/128_<time>`` and
  ``logs_load/download128-<time>``) are one model when their layer scopes
  (``layer_scopes``: ``sequential/conv2d``, ``layer_1/fully_connected``) agree by
  ``SAME_SCOPES_JACCARD`` or more, with at least ``MIN_SCOPES`` of them, and each is the
  other's only such match. Op names cannot say this: the layout optimizer's transposes and
  fused ops leave a TF CNN's CPU and GPU runs 0.57-0.61 alike, below two models of one
  framework. Scopes name the model's layers, which no device changes. They do not carry
  the layers' widths: two models with the same layer names and other widths, each alone
  on one device in folders whose names say nothing, read as one (the tables hold no
  parameter shapes yet).

A folder of more than ``MAX_FOLDER_RUNS`` runs keeps its names.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
import re
from collections.abc import Callable

from tb_opcompare.analysis.pairing import SAME_MODEL_JACCARD, RunForPairing, jaccard, pair_runs

# Joining compares the runs of a folder pairwise (and pairing's margin rule more than
# that): 64 ms at 200 runs, 14 s at 1,000 on this project's 2 cores. A folder of more
# runs keeps the models its names give.
MAX_FOLDER_RUNS = 200

# Layer scopes of one model's CPU and GPU runs: 1.00 on the TF1 MLP pair of
# ``realtraces/tf1_timeline_mlp_cpu_vs_gpu`` and on Keras CNNs (the GPU side's extra ops,
# layout transposes and copies, sit in the same layers); two models of one framework
# share their loss and optimizer scopes only.
SAME_SCOPES_JACCARD = 0.8
MIN_SCOPES = 3

# ``identify_models``'s union-find, as its helpers take it: a run's group (its root run),
# and joining two runs' groups with why each was joined
_Root = Callable[[str], str]
_Join = Callable[[str, str, str, str], None]


@dataclasses.dataclass
class IdentityRun:
    run: str
    key: str  # the model its sidecar or name gives, without precision and compiler
    from_sidecar: bool
    names_nothing: bool  # the name holds only generic words (``runs``, ``fit/train``) once tokens are out
    folder: str  # ``naming.run_folder``
    device: str | None
    batch_size: int | None
    precision: str | None
    compiler: str | None
    op_names: frozenset[str]

    @property
    def configuration(self) -> tuple[str | None, int | None, str | None, str | None]:
        return self.device, self.batch_size, self.precision, self.compiler


@dataclasses.dataclass(frozen=True)
class Identity:
    model: str
    source: str  # how it was found: ``sidecar``, ``run name`` or ``data: …`` naming the evidence


def identify_models(runs: list[IdentityRun]) -> dict[str, Identity]:
    """Each run's model and how it was found (see the module's docstring). Runs not
    read yet (no ops) keep what they are called."""
    parent = {run.run: run.run for run in runs}
    evidence: dict[str, str] = {}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    members: dict[str, list[IdentityRun]] = {run.run: [run] for run in runs}

    def join(a: str, b: str, why_a: str, why_b: str) -> None:
        first, second = root(a), root(b)
        if first == second:
            return
        if _two_experiments(members[first], members[second]):
            return
        parent[second] = first
        members[first].extend(members.pop(second))
        for run, why in ((a, why_a), (b, why_b)):  # a run joined twice says both
            evidence[run] = f"{evidence[run]}; {why.removeprefix('data: ')}" if run in evidence else why

    crowded = {
        folder for folder, count in collections.Counter(run.folder for run in runs).items() if count > MAX_FOLDER_RUNS
    }
    by_key: dict[str, list[IdentityRun]] = {}
    for run in runs:
        if not run.names_nothing or run.from_sidecar or run.folder in crowded:
            by_key.setdefault(run.key, []).append(run)
    for named in by_key.values():  # a name shared by several runs is one model, as it always was
        for other in named[1:]:
            parent[other.run] = named[0].run
            members[named[0].run].extend(members.pop(other.run))
    unsure = {
        run.run
        for run in runs
        if not run.from_sidecar and run.op_names and (run.names_nothing or len(by_key.get(run.key, ())) == 1)
    }
    folders: dict[str, list[IdentityRun]] = {}
    for run in runs:
        if run.op_names and not run.from_sidecar:
            folders.setdefault(run.folder, []).append(run)
    for folder, side_by_side in folders.items():
        if folder in crowded or not unsure.intersection(run.run for run in side_by_side):
            continue
        _join_repeats(side_by_side, unsure, join)
        _join_batch_sizes(side_by_side, unsure, join)
        _join_counterparts(side_by_side, unsure, join)
    _join_other_devices(runs, unsure, root, members, join)
    return _named(runs, root, members, evidence)


# A run counter at the end of a name (``version_3``, ``run-2``, ``trial.7``): all that tells
# one run of a script from its reruns, where the digits follow a separator. Digits joined to
# a word name a model (``resnet18``, ``resnet34``: the same op names, two models).
_RUN_COUNTER = re.compile(r"[_\-.]\d+$")


def _are_repeats(a: IdentityRun, b: IdentityRun) -> bool:
    """One configuration, the very same (non-empty) op names, and names that tell nothing
    else apart: they differ in a run counter only, or both say nothing (timestamps and
    hosts). Names that differ otherwise (``cudnn_benchmark_on``/``_off``) are two
    experiments however alike their ops."""
    if a.configuration != b.configuration or not a.batch_size or not a.op_names or a.op_names != b.op_names:
        return False
    return (a.names_nothing and b.names_nothing) or _RUN_COUNTER.sub("", a.run) == _RUN_COUNTER.sub("", b.run)


def _two_experiments(first: list[IdentityRun], second: list[IdentityRun]) -> bool:
    """Whether two groups hold runs of one configuration that are not repeats of each
    other: two experiments, not one model's runs."""
    return any(a.configuration == b.configuration and not _are_repeats(a, b) for a in first for b in second)


def _join_repeats(runs: list[IdentityRun], unsure: set[str], join: _Join) -> None:
    for a, b in itertools.combinations(sorted(runs, key=lambda run: run.run), 2):
        if (a.run in unsure or b.run in unsure) and _are_repeats(a, b):
            why = "data: a repeat of {}: the same device, batch size, precision and compiler, the same ops"
            join(a.run, b.run, why.format(b.run), why.format(a.run))


def _join_batch_sizes(runs: list[IdentityRun], unsure: set[str], join: _Join) -> None:
    for a, b in itertools.combinations(sorted(runs, key=lambda run: run.run), 2):
        if a.run not in unsure and b.run not in unsure:
            continue
        if (a.device, a.precision, a.compiler) != (b.device, b.precision, b.compiler):
            continue
        if not a.batch_size or not b.batch_size or a.batch_size == b.batch_size:
            continue
        score = jaccard(a.op_names, b.op_names)
        if score >= SAME_MODEL_JACCARD - 1e-9:
            join(
                a.run,
                b.run,
                f"data: the same ops as {b.run} at batch {b.batch_size} (Jaccard {score:.2f})",
                f"data: the same ops as {a.run} at batch {a.batch_size} (Jaccard {score:.2f})",
            )


def _join_counterparts(runs: list[IdentityRun], unsure: set[str], join: _Join) -> None:
    # each run stands for itself (its own name as model), so only the overlap rule pairs
    pairs = pair_runs(
        [
            RunForPairing(
                run=run.run, model=run.run, device=run.device, batch_size=run.batch_size, op_names=run.op_names
            )
            for run in runs
        ]
    )
    for pair in pairs:
        if pair.guess or (pair.baseline not in unsure and pair.target not in unsure):
            continue
        how = pair.matched_by
        join(
            pair.baseline,
            pair.target,
            f"data: the CPU run of {pair.target}, paired by {how}",
            f"data: the accelerator run of {pair.baseline}, paired by {how}",
        )


# Name scopes that wrap a model's layers without being one: a tf.function's call, the
# gradient pass (its ops sit in the forward layer's scope below it), TF1's gradients.
_WRAPPERS = frozenset({"StatefulPartitionedCall", "PartitionedCall", "gradient_tape", "gradients"})


def layer_scopes(op_names: frozenset[str]) -> frozenset[str]:
    """The model's layers its op names hold: each name's first two scopes
    (``sequential/conv2d`` of ``StatefulPartitionedCall/sequential/conv2d/Relu``) once
    wrappers are out, where the name goes deeper than its scopes; gradients' own scopes
    (``MatMul_grad``) and TF's internal names (``edge_11_…``, ``_SOURCE``) are none.
    Empty for ops without scopes (PyTorch's ``aten::``, XLA's HLO names)."""
    scopes = set()
    for name in op_names:
        parts = name.split("/")
        while parts and parts[0] in _WRAPPERS:
            parts = parts[1:]
        if len(parts) < 3 or parts[0].startswith(("edge_", "_")) or "::" in parts[0]:
            continue
        head = parts[:2]
        if any(part.endswith("_grad") or not part for part in head):
            continue
        scopes.add("/".join(head))
    return frozenset(scopes)


def _join_other_devices(
    runs: list[IdentityRun], unsure: set[str], root: _Root, members: dict[str, list[IdentityRun]], join: _Join
) -> None:
    """A group of unsure CPU runs and a group of unsure accelerator runs, in other folders,
    whose layer scopes agree, each the other's only match (see the module's docstring)."""
    groups: dict[str, list[IdentityRun]] = collections.defaultdict(list)
    for run in runs:
        groups[root(run.run)].append(run)
    sides: dict[str, list[tuple[str, frozenset[str]]]] = {"cpu": [], "accelerator": []}
    for group_root, group in groups.items():
        if not all(run.run in unsure and run.device for run in group):
            continue
        on_cpu = {run.device == "CPU" for run in group}
        if len(on_cpu) == 1:
            scopes = layer_scopes(frozenset().union(*(run.op_names for run in group)))
            if len(scopes) >= MIN_SCOPES:
                sides["cpu" if on_cpu.pop() else "accelerator"].append((group_root, scopes))

    def matches(scopes: frozenset[str], others: list[tuple[str, frozenset[str]]]) -> list[tuple[str, float]]:
        found = []
        for other, their_scopes in others:
            score = jaccard(scopes, their_scopes)
            if score >= SAME_SCOPES_JACCARD - 1e-9 and len(scopes & their_scopes) >= MIN_SCOPES:
                found.append((other, score))
        return found

    for cpu_root, cpu_scopes in sides["cpu"]:
        found = matches(cpu_scopes, sides["accelerator"])
        if len(found) != 1 or _named_apart(groups[cpu_root], groups[found[0][0]]):
            continue
        (accelerator_root, score), accelerator_scopes = found[0], dict(sides["accelerator"])[found[0][0]]
        if len(matches(accelerator_scopes, sides["cpu"])) != 1:
            continue
        cpu_run, accelerator_run = members[cpu_root][0].run, members[accelerator_root][0].run
        shared = len(cpu_scopes & accelerator_scopes)
        join(
            cpu_run,
            accelerator_run,
            f"data: the CPU side of {accelerator_run}: the same {shared}{_BY_LAYER_SCOPES}{score:.2f})",
            f"data: the accelerator side of {cpu_run}: the same {shared}{_BY_LAYER_SCOPES}{score:.2f})",
        )


_BY_LAYER_SCOPES = " layer scopes (Jaccard "  # how a model_source says the runs were joined by their layers


def joined_by_layer_scopes(model_source: str) -> bool:
    """Whether a run's model was found by its layer scopes alone (``_join_other_devices``):
    a join that cannot tell two models of the same layer names and other widths apart."""
    return _BY_LAYER_SCOPES in model_source


# Words of a run's own folder name that say where or how it ran, not what model it is.
_NOT_A_MODEL = frozenset({"cpu", "gpu", "cuda", "tpu", "xpu", "mps", "rocm", "bs", "batch", "train", "validation"})


def _own_words(run: IdentityRun) -> frozenset[str]:
    """The words of the run's own name (its last folder, Keras's ``train`` left out),
    without numbers, times and device words: ``download`` of ``download128-20210202-1010``,
    nothing of ``128_20210203-201149``, ``cnn small`` of ``cnn_small``."""
    own = run.run[len(run.folder) :].strip("/")
    return frozenset(re.findall(r"[a-z]+", own.lower())) - _NOT_A_MODEL


def _named_apart(first: list[IdentityRun], second: list[IdentityRun]) -> bool:
    """Whether both groups' runs have names of their own and they differ (``cnn_small`` and
    ``cnn_big``): what names tell apart, data does not join. A name that holds only a time
    and a batch size (``128_20210203-201149``) tells nothing."""
    words = [{_own_words(run) for run in group} - {frozenset()} for group in (first, second)]
    return bool(words[0] and words[1] and words[0] != words[1])


def _named(
    runs: list[IdentityRun], root: _Root, members: dict[str, list[IdentityRun]], evidence: dict[str, str]
) -> dict[str, Identity]:
    """One name per group: the members' shared key, else their keys' common beginning
    (``lstm_runA`` and ``lstm_runB`` are ``lstm_run``), else, for a group over several
    folders, the folders (``log_prefetch + logs_load``), else the first key; a name
    another group has already gets its number (``runs (2)``)."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for group_root in sorted(members, key=lambda name: (len({run.key for run in members[name]}) > 1, name)):
        keys = sorted({run.key for run in members[group_root]})
        folders = sorted({run.folder for run in members[group_root]})
        by_folders = " + ".join(folders) if len(folders) > 1 and all(folders) else ""
        name = keys[0] if len(keys) == 1 else _common_beginning(keys) or by_folders or keys[0]
        number = 2
        unique = name
        while unique in taken:
            unique, number = f"{name} ({number})", number + 1
        taken.add(unique)
        names[group_root] = unique
    identities = {}
    for run in runs:
        source = "sidecar" if run.from_sidecar else evidence.get(run.run, "run name")
        identities[run.run] = Identity(model=names[root(run.run)], source=source)
    return identities


_TRAILING = re.compile(r"[/_\-.=:\s]+$")


_TRAILING_DIGITS = re.compile(r"\d+\Z")
_SEPARATOR = re.compile(r"[/_\-.=:\s]")


def _common_beginning(keys: list[str]) -> str:
    """The keys' common beginning, never cut inside a number: ``log_prefetch/128`` and
    ``log_prefetch/1024`` begin with ``log_prefetch/1``, a token of neither (issue 51),
    and are ``log_prefetch``."""
    beginning = os.path.commonprefix(keys)
    if beginning[-1:].isdigit() and any(key[len(beginning) : len(beginning) + 1].isdigit() for key in keys):
        beginning = _TRAILING_DIGITS.sub("", beginning)
    beginning = _TRAILING.sub("", beginning)
    if not _SEPARATOR.search(beginning) and any(key[len(beginning) : len(beginning) + 1].isalnum() for key in keys):
        return ""  # a cut inside the keys' first word: ``log`` of ``log_prefetch`` and ``logs_load``
    return beginning if len(beginning) >= 2 else ""
