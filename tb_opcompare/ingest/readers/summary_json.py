"""Reader for ``summary.json`` written by the profiler wrapper of the seed material.

Layout: ``{"app_stats": {step: {activity: {"duration", "meta"}}}, "op_stats": {model:
{step: {ip: {device: {node_name: {"duration", "output", "total_bytes"}}}}}}}`` with
durations in microseconds (TF step_stats). Each node entry is one occurrence of the op
in that step. ``CPU`` device keys are host work; any other key (``GPU``, ``MLU``)
names the accelerator. The file records no op types, so the type shown is the node
name's last path component without a trailing ``_<n>`` (``dense/MatMul_1`` -> ``MatMul``).
"""

from __future__ import annotations

import re

import msgspec

from tb_opcompare.errors import ProfileError
from tb_opcompare.ingest.readers.chrome_json import MAX_DURATION_US, describe_json_error
from tb_opcompare.schema.events import DEVICE, HOST, OpEvents, ParsedProfile, ProfileFacts

FORMAT = "summary_json"
APP_STATS = "app_stats"
_NUMBERED_SUFFIX = re.compile(r"_\d+\Z")


class _NodeStats(msgspec.Struct):
    duration: float
    total_bytes: int | None = None  # bytes of the node's outputs allocated in that step (the op's memory)


class _ActivityStats(msgspec.Struct):
    duration: float


class _Summary(msgspec.Struct):
    op_stats: dict[str, dict[str, dict[str, dict[str, dict[str, _NodeStats]]]]]
    app_stats: dict[str, dict[str, _ActivityStats]] = {}  # step -> activity (``session_run``): the application layer


_DECODER = msgspec.json.Decoder(_Summary)


def read_summary_json(path: str, data: bytes) -> ParsedProfile:
    try:
        summary = _DECODER.decode(data)
    except msgspec.ValidationError as error:
        raise ProfileError(
            path,
            "summary.json does not have the expected nesting op_stats -> model -> step -> ip -> "
            f"device -> node -> {{duration}} ({error})",
        ) from None
    except msgspec.DecodeError as error:
        raise ProfileError(path, describe_json_error(data, str(error))) from None
    except UnicodeDecodeError as error:
        raise ProfileError(path, f"not valid UTF-8 text at byte {error.start:,}") from None
    events = OpEvents()
    allocated: dict[tuple[str, str], int] = {}
    steps: set[str] = set()
    accelerators: set[str] = set()
    for model, model_steps in summary.op_stats.items():
        for step, hosts in model_steps.items():
            steps.add(step)
            for devices in hosts.values():
                for device, nodes in devices.items():
                    is_host = device.upper() == "CPU"
                    if not is_host:
                        accelerators.add(device.upper())
                    for node_name, stats in nodes.items():
                        if not 0.0 <= stats.duration < MAX_DURATION_US:  # NaN fails too
                            problem = (
                                "negative"
                                if stats.duration < 0
                                else "not a real duration (over a year, or not a number)"
                            )
                            raise ProfileError(
                                path,
                                f"op_stats -> {model} -> step {step} -> {device} -> {node_name!r}: "
                                f"duration {stats.duration} µs is {problem}; the writer "
                                "produced broken entries",
                            )
                        op_type = _NUMBERED_SUFFIX.sub("", node_name.rsplit("/", 1)[-1])
                        events.add(HOST if is_host else DEVICE, node_name, op_type, stats.duration, stats.duration)
                        if stats.total_bytes is not None and stats.total_bytes >= 0:
                            allocated.setdefault((node_name, op_type), 0)
                            allocated[node_name, op_type] += stats.total_bytes
    if not len(events):
        raise ProfileError(path, "summary.json holds no op entries under op_stats")
    if allocated:  # frees are not recorded: allocated bytes only
        keys = list(allocated)
        events.add_memory(keys, range(len(keys)), [allocated[key] for key in keys], net_known=False)
    facts = ProfileFacts(format=FORMAT, framework="TensorFlow (summary.json)")
    if accelerators:
        facts.device = "GPU" if "GPU" in accelerators else sorted(accelerators)[0]
        facts.device_name = ", ".join(sorted(accelerators))
    facts.steps, facts.steps_source = len(steps), "step keys of op_stats"
    return ParsedProfile(facts, events, annotations=_app_activities(path, summary.app_stats))


def _app_activities(path: str, app_stats: dict[str, dict[str, _ActivityStats]]) -> dict[str, list]:
    """The wrapper's ``app_stats``: each activity's calls (one a step it appears in) and wall time."""
    calls: dict[str, int] = {}
    wall: dict[str, float] = {}
    for step, activities in app_stats.items():
        for activity, stats in activities.items():
            if not 0.0 <= stats.duration < MAX_DURATION_US:
                raise ProfileError(
                    path,
                    f"app_stats -> step {step} -> {activity!r}: duration {stats.duration} µs is "
                    "not a real duration (negative, over a year, or not a number)",
                )
            calls[activity] = calls.get(activity, 0) + 1
            wall[activity] = wall.get(activity, 0.0) + stats.duration
    return {  # ANNOTATION_COLUMNS; no start times: nesting unknown
        "name": list(calls),
        "kind": [APP_STATS] * len(calls),
        "occurrences": list(calls.values()),
        "total_us": [wall[name] for name in calls],
        "outermost_us": [wall[name] for name in calls],
    }
