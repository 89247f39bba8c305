"""Odd and hostile entries in a logdir, made at test time (FIFOs, links, bombs, deep
JSON): the CLI and a real TensorBoard never hang, never crash, and name each bad entry
while the good runs keep working. Every probe runs under a time limit, so a hang fails
the test instead of stalling CI."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import BIG_RUN, FIXTURES, LOGDIR, REALTRACES, run_cli, varint
from tensorboard_server import running_tensorboard

GOOD = "good_cpu_bs4"
GOOD_TOO = "good_cpu_bs16"
DEEP = "[" * 100_000 + "]" * 100_000


def _torch_trace(size: int) -> Path:
    return next((LOGDIR / "torch" / f"cnn_torch_cpu_bs{size}").glob("*.pt.trace.json"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "logs"
    for name, size in ((GOOD, 4), (GOOD_TOO, 16)):
        (root / name).mkdir(parents=True)
        shutil.copy(_torch_trace(size), root / name)
    os.mkfifo(root / "pipe.pt.trace.json")
    (root / "pipes").mkdir()
    os.mkfifo(root / "pipes" / "timeline.json")
    os.mkfifo(root / GOOD_TOO / "opcompare.json")  # a sidecar nobody writes
    session = root / "tf_pipe" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    os.mkfifo(session / "vm.xplane.pb")
    folder = root / "tf_folder" / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
    folder.mkdir(parents=True)
    os.symlink("/", root / "escape")
    os.symlink("/dev/zero", root / "zero.pt.trace.json")
    os.symlink("/etc/passwd", root / "passwd.pt.trace.json")
    text = _torch_trace(4).read_text()
    extra = '{"ph": "X", "name": "aten::odd", "cat": "cpu_op", "pid": 1, "tid": 77, "ts": 1, "dur": %s, "args": %s},'
    for name, duration, args in (("deep_cpu", "1", '{"a": ' + DEEP + "}"), ("huge_cpu", "1e308", "{}")):
        (root / name).mkdir()
        (root / name / "w.1.pt.trace.json").write_text(
            text.replace(
                '"traceEvents": [', '"traceEvents": [' + extra % (duration, args) + extra % (duration, args), 1
            )
        )
    (root / "deep_summary").mkdir()
    (root / "deep_summary" / "summary.json").write_text('{"op_stats": {}, "notes": ' + DEEP + "}")
    return root


def _errors(document: dict) -> dict[str, str]:
    return {
        Path(error["path"]).relative_to(document["_root"]).as_posix(): error["message"] for error in document["errors"]
    }


EXPECTED = {
    "pipe.pt.trace.json": "not a regular file (a named pipe); not read, as it could block or never end",
    "pipes/timeline.json": "not a regular file (a named pipe); not read, as it could block or never end",
    "tf_pipe/plugins/profile/2026_01_01_00_00_00/vm.xplane.pb": "not a regular file (a named pipe); not read, as it could block or never end",
    "tf_folder/plugins/profile/2026_01_01_00_00_00/vm.xplane.pb": "a directory named like a trace file, not a trace",
    "escape": "a link to /, which holds the logdir; not followed",
    "zero.pt.trace.json": "not a regular file (a device); not read, as it could block or never end",
    "passwd.pt.trace.json": "a link to a file outside the logdir (/etc/passwd); not read",
}


def _runs(hostile: Path, *flags: str) -> dict:
    started = time.monotonic()
    result = run_cli("runs", str(hostile), "--json", "--no-cache", *flags)
    assert time.monotonic() - started < 60
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    document["_root"] = str(hostile)
    return document


@pytest.mark.timeout(120)
def test_listing_names_every_odd_entry_and_keeps_the_good_runs(hostile):
    document = _runs(hostile)
    errors = _errors(document)
    for path, message in EXPECTED.items():
        assert errors[path] == message
    assert errors["deep_cpu/w.1.pt.trace.json"].startswith("nested more deeply than a profiler ever writes")
    assert errors["deep_summary/summary.json"].startswith("nested more deeply than a profiler ever writes")
    assert errors["huge_cpu/w.1.pt.trace.json"] == (
        "traceEvents[0] ('aten::odd' at ts 1.0) is a complete event with a duration of 1e+308 µs (over a year); "
        "the trace writer produced broken events"
    )
    runs = {run["run"]: run for run in document["runs"]}
    assert set(runs) == {GOOD, GOOD_TOO}
    assert runs[GOOD_TOO]["warnings"] == [
        f"{hostile / GOOD_TOO / 'opcompare.json'}: ignored, not a regular file (a named pipe)"
    ]
    lazy = _errors(_runs(hostile, "--lazy"))
    assert {path: lazy[path] for path in EXPECTED} == EXPECTED


@pytest.mark.timeout(120)
def test_runs_linked_in_from_elsewhere_are_listed_and_shared_configs_ignored(tmp_path):
    """A logdir assembled from links to run folders kept elsewhere (a common habit), and a
    run with its config linked from a shared place: all is read, nothing is an error."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    os.symlink(LOGDIR / "torch", logdir / "torch")
    shutil.copytree(LOGDIR / "tf1" / "mlp_cpu", logdir / "mlp_cpu")
    (tmp_path / "shared.json").write_text('{"lr": 0.1}')
    os.symlink(tmp_path / "shared.json", logdir / "mlp_cpu" / "hparams.json")
    os.symlink(logdir, logdir / "torch_again")  # a cycle back into the logdir is walked once
    result = run_cli("runs", str(logdir), "--json", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert document["errors"] == []
    assert {run["run"] for run in document["runs"]} == {
        "mlp_cpu",
        "torch/cnn_torch_cpu_bs4",
        "torch/cnn_torch_cpu_bs16",
        "torch/cnn_torch_cpu_bs64",
    }


@pytest.mark.timeout(120)
def test_good_runs_compare_beside_odd_entries(hostile):
    result = run_cli("compare", str(hostile), "--baseline", GOOD, "--target", GOOD_TOO, "--json", "--no-cache")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["summary"]["target"]["run"] == GOOD_TOO


@pytest.mark.timeout(120)
def test_a_sidecar_nested_deeply_is_ignored_with_a_warning(tmp_path):
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", tmp_path / "run_cpu")
    (tmp_path / "run_cpu" / "opcompare.json").write_text('{"model": ' + DEEP + "}")
    (run,) = json.loads(run_cli("runs", str(tmp_path), "--json", "--no-cache").stdout)["runs"]
    assert run["warnings"] == [f"{tmp_path / 'run_cpu' / 'opcompare.json'}: ignored, JSON nested too deeply"]


@pytest.mark.timeout(180)
def test_a_gzip_bomb_stops_at_the_memory_budget_and_is_not_remembered(tmp_path):
    """Two members: the trailer read by the size estimate is the last, tiny one's."""
    run = tmp_path / "logs" / "bomb_cpu"
    run.mkdir(parents=True)
    with open(run / "w.1.pt.trace.json.gz", "wb") as handle:
        handle.write(gzip.compress(b'{"traceEvents": [' + b" " * (100 << 20), 9))
        handle.write(gzip.compress(b"]}", 9))
    cache = str(tmp_path / "cache")
    refused = run_cli("runs", str(tmp_path / "logs"), "--json", "--cache-dir", cache, "--max-read-gb", "0.03")
    (error,) = json.loads(refused.stdout)["errors"]
    assert error["message"].startswith(
        "decompresses to more than 0.01 GB of text, more than this machine's memory "
        "limit allows (memory guard): a very large trace, or a gzip bomb"
    )
    # A higher limit reads it (the refusal was not cached): valid JSON, but no events.
    allowed = run_cli("runs", str(tmp_path / "logs"), "--json", "--cache-dir", cache, "--max-read-gb", "2")
    (error,) = json.loads(allowed.stdout)["errors"]
    assert "decompresses" not in error["message"]


@pytest.mark.timeout(180)
def test_millions_of_tiny_events_under_an_escaped_key_stop_at_the_memory_budget(tmp_path):
    """The batch cutter looks for the literal key; a key spelled with escapes sends the read
    to the one-object-at-a-time way, whose cost (64 bytes an object) the guard now counts."""
    run = tmp_path / "logs" / "escaped_cpu"
    run.mkdir(parents=True)
    (run / "w.1.pt.trace.json").write_bytes(b'{"trace\\u0045vents": [' + b",".join([b"{}"] * 8_000_000) + b"]}")
    refused = run_cli("runs", str(tmp_path / "logs"), "--json", "--no-cache", "--max-read-gb", "0.5")
    (error,) = json.loads(refused.stdout)["errors"]
    assert error["message"].startswith(
        'its events must be read one by one (the fast way needs `"traceEvents": [` at the top level and clean cuts '
        "between events): 8,000,001 JSON objects in 24 MB of text would need about 0.5 GB more"
    )
    # The same key spelled with escapes in a small trace is read (as JSON says it must be).
    (run / "w.1.pt.trace.json").write_bytes(
        b'{"trace\\u0045vents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 5, "pid": 1, '
        b'"tid": 1}]}'
    )
    (listed,) = json.loads(run_cli("runs", str(tmp_path / "logs"), "--json", "--no-cache").stdout)["runs"]
    assert listed["format"] == "pytorch" and listed["loaded"]


_WITHOUT_ROOT_READS = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
]


def _can_drop_root_reads() -> bool:
    """Root, util-linux's setpriv, and a container that lets setpriv drop the capabilities
    (one without CAP_SETPCAP refuses: then the test is skipped, not failed)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    return subprocess.run([*_WITHOUT_ROOT_READS, "true"], capture_output=True, timeout=30).returncode == 0


_DROPS_ROOT_READS = _can_drop_root_reads()


@pytest.mark.skipif(not _DROPS_ROOT_READS, reason="needs root, util-linux's setpriv and leave to drop capabilities")
def test_a_run_that_cannot_be_read_is_listed_with_the_reason(tmp_path):
    """Run as root without the capabilities that let root read anything, so file modes
    bite as they do for a user: a directory and a trace that cannot be read are listed
    under errors (exit status 1); the readable run is listed as usual."""
    logs = tmp_path / "logs"
    for name in ("good_cpu_bs4", "locked_cpu_bs4", "secret_cpu_bs4"):
        shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", logs / name)
    (secret,) = (logs / "secret_cpu_bs4").glob("*.pt.trace.json")
    secret.chmod(0)
    (logs / "locked_cpu_bs4").chmod(0)
    try:
        listing = subprocess.run(
            [
                *_WITHOUT_ROOT_READS,
                str(Path(sys.executable).parent / "tb-opcompare"),
                "runs",
                str(logs),
                "--json",
                "--no-cache",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        (logs / "locked_cpu_bs4").chmod(0o755)
    assert listing.returncode == 1, listing.stderr
    document = json.loads(listing.stdout)
    assert [run["run"] for run in document["runs"]] == ["good_cpu_bs4"] and document["runs"][0]["loaded"]
    assert {(error["path"], error["message"]) for error in document["errors"]} == {
        (str(logs / "locked_cpu_bs4"), "cannot list this directory: Permission denied"),
        (str(secret), "cannot read the file: Permission denied"),
    }


@pytest.mark.skipif(not _DROPS_ROOT_READS, reason="needs root, util-linux's setpriv and leave to drop capabilities")
def test_a_file_made_readable_is_read_at_the_next_request(tmp_path):
    """A permission error was cached under the file's unchanged size and time, both in
    memory and on disk: fixing the permission changed nothing until the file was touched.
    Now such a failure is never remembered (one process, one cache, as TensorBoard runs)."""
    run = tmp_path / "logs" / "secret_cpu_bs4"
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", run)
    (secret,) = run.glob("*.pt.trace.json")
    secret.chmod(0)
    script = (
        "import os, sys\n"
        "from tb_opcompare.errors import ProfileError\n"
        "from tb_opcompare.store.catalog import Catalog\n"
        f"catalog = Catalog({str(tmp_path / 'logs')!r}, cache_dir={str(tmp_path / 'cache')!r})\n"
        "try:\n"
        "    catalog.load('secret_cpu_bs4')\n"
        "except ProfileError as error:\n"
        "    print('refused:', error.reason)\n"
        f"os.chmod({str(secret)!r}, 0o644)\n"
        "print('read:', len(catalog.load('secret_cpu_bs4').profile.op_table.frame()))\n"
        f"print('again:', len(Catalog({str(tmp_path / 'logs')!r}, cache_dir={str(tmp_path / 'cache')!r})"
        ".load('secret_cpu_bs4').profile.op_table.frame()))\n"
    )
    done = subprocess.run(
        [*_WITHOUT_ROOT_READS, sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "refused: cannot read the file: Permission denied", done.stderr
    assert lines[1].startswith("read: ") and int(lines[1].split()[1]) > 10
    assert lines[2] == lines[1].replace("read:", "again:")


def _xplane_bytes(*planes) -> bytes:
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    space = XSpace()
    for fill in planes:
        fill(space)
    return space.SerializeToString()


@pytest.mark.timeout(180)
def test_xplanes_whose_size_says_little_about_their_cost_are_read_or_refused_cheaply(tmp_path):
    """An empty plane is 2 bytes of wire and over a kilobyte once parsed; a minimal
    metadata entry 11 bytes and about 220. Planes are now parsed one at a time, empty ones
    skipped, and elements counted on the wire before anything is parsed."""
    real = next((LOGDIR / "tf_keras" / "cnn_cpu_bs8").rglob("*.xplane.pb")).read_bytes()
    logs = tmp_path / "logs"

    def run_with(name: str, data: bytes) -> None:
        target = logs / name / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
        target.parent.mkdir(parents=True)
        target.write_bytes(data)

    def empty_planes(space):
        for _ in range(300_000):
            space.planes.add()

    def named_planes(space):
        for index in range(100_001):
            space.planes.add().name = f"/host:thread{index}"

    def metadata(space):
        plane = space.planes.add()
        plane.name = "/host:CPU"
        for key in range(1, 1_500_001):
            entry = plane.event_metadata.add()
            entry.key, entry.value.name = key, "x"

    run_with("empty_planes_cpu_bs8", _xplane_bytes(empty_planes) + real)
    run_with("real_cpu_bs8", real)
    run_with("named_planes_cpu", _xplane_bytes(named_planes))
    run_with("metadata_cpu", _xplane_bytes(metadata))
    started = time.monotonic()
    document = json.loads(run_cli("runs", str(logs), "--json", "--no-cache", "--max-read-gb", "0.5").stdout)
    assert time.monotonic() - started < 60
    errors = {error["run"]: error["message"] for error in document["errors"]}
    assert errors["named_planes_cpu"] == (
        "the XSpace holds more than 100,000 planes (profilers write one per "
        "device and host view, a few hundred at most); not read"
    )
    assert errors["metadata_cpu"].startswith(
        "a plane holds 1,500,000 metadata entries, which would need about 0.4 GB "
        "once parsed, more than this machine's memory limit allows"
    )
    (read,) = [run for run in document["runs"] if run["run"] == "empty_planes_cpu_bs8"]
    assert read["loaded"] and read["batch_size"] == 8
    same = json.loads(
        run_cli(
            "compare",
            str(logs),
            "--baseline",
            "real_cpu_bs8",
            "--target",
            "empty_planes_cpu_bs8",
            "--json",
            "--no-cache",
        ).stdout
    )["summary"]
    assert same["matched_ops"] > 10 and same["baseline_only_ops"] == same["target_only_ops"] == 0
    assert same["overall_speedup"] == 1


@pytest.fixture(scope="module")
def hostile_server(hostile):
    shutil.copytree(REALTRACES / "tf2_xplane_bert_multigpu", hostile / BIG_RUN)
    with running_tensorboard(hostile) as url:
        yield url


def _get(url: str, timeout: float = 30):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.timeout(180)
def test_tensorboard_lists_plugins_and_runs_beside_odd_entries(hostile_server):
    status, body = _get(f"{hostile_server}/data/plugins_listing")
    assert status == 200 and json.loads(body)["op_compare"]["enabled"]
    status, body = _get(f"{hostile_server}/data/plugin/op_compare/runs")
    assert status == 200
    document = json.loads(body)
    assert {GOOD, GOOD_TOO, BIG_RUN} <= {run["run"] for run in document["runs"]}
    assert len(document["errors"]) == len(EXPECTED) + 3


@pytest.mark.timeout(180)
def test_a_pathological_regex_filter_answers_at_once_and_stalls_nothing(hostile_server):
    query = urllib.parse.urlencode({"baseline": BIG_RUN, "target": BIG_RUN, "q": "/(.*.*)*~/"})
    assert _get(f"{hostile_server}/data/plugin/op_compare/compare?baseline={BIG_RUN}&target={BIG_RUN}")[0] == 200
    answers = {}

    def core_route():
        time.sleep(0.05)
        started = time.monotonic()
        answers["core"] = (_get(f"{hostile_server}/data/plugins_listing")[0], time.monotonic() - started)

    probe = threading.Thread(target=core_route)
    probe.start()
    started = time.monotonic()
    status, body = _get(f"{hostile_server}/data/plugin/op_compare/compare?{query}")
    elapsed = time.monotonic() - started
    probe.join(60)
    assert status == 200 and json.loads(body)["rows"] == [] and elapsed < 10
    assert answers["core"][0] == 200 and answers["core"][1] < 10
    backtracking = urllib.parse.urlencode({"baseline": BIG_RUN, "target": BIG_RUN, "q": "/(a+)+$/"})
    assert _get(f"{hostile_server}/data/plugin/op_compare/compare?{backtracking}")[0] == 200
    status, body = _get(
        f"{hostile_server}/data/plugin/op_compare/compare?"
        + urllib.parse.urlencode({"baseline": BIG_RUN, "target": BIG_RUN, "q": "/(a)\\1/"})
    )
    assert status == 400 and "backreferences and lookaround are not supported" in json.loads(body)["error"]["message"]


@pytest.mark.timeout(120)
def test_a_sweep_of_runs_without_step_markers_answers(tmp_path):
    """``export_chrome_trace`` without ``profiler.step()``: a real way to record."""
    source = REALTRACES / "torch_resnet18_cpu" / "export_chrome_trace" / "trace.json"
    for size in (5, 10):
        (tmp_path / f"resnet_cpu_bs{size}").mkdir()
        shutil.copy(source, tmp_path / f"resnet_cpu_bs{size}" / "trace.json")
    result = run_cli("sweep", str(tmp_path), "--model", "resnet", "--json", "--no-cache")
    assert "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    assert document["steps"] == [] and document["series"]
    assert any(w.endswith(": no step count, so no time per step or throughput") for w in document["warnings"])


@pytest.mark.timeout(120)
def test_the_cli_escapes_control_characters_in_names(tmp_path):
    run = tmp_path / "evil\x1b[2J\nunreadable:_cpu"
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", run)
    result = run_cli("runs", str(tmp_path), "--no-cache")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "unreadable:" not in result.stdout.splitlines()[0][:12]
    assert result.stdout.startswith("evil\\x1b[2J\\x0aunreadable:_cpu\t")
    assert len(result.stdout.strip().splitlines()) == 1


def _xspace(path: Path):
    from tb_opcompare.ingest.readers.xplane_schema import XSpace

    space = XSpace()
    space.ParseFromString(path.read_bytes())
    return space


@pytest.mark.timeout(120)
def test_odd_encodings_numbers_and_names_are_named_or_made_harmless(tmp_path):
    from tb_opcompare.service.figures import label

    text = _torch_trace(4).read_bytes()
    (tmp_path / "bom_cpu_bs4").mkdir()
    (tmp_path / "bom_cpu_bs4" / "w.1.pt.trace.json").write_bytes(b"\xef\xbb\xbf" + text)
    (tmp_path / "wide_cpu").mkdir()
    (tmp_path / "wide_cpu" / "w.1.pt.trace.json").write_bytes(text.decode("utf-8").encode("utf-16"))
    (tmp_path / "claims_cpu_bs4").mkdir()
    shutil.copy(_torch_trace(4), tmp_path / "claims_cpu_bs4")
    (tmp_path / "claims_cpu_bs4" / "opcompare.json").write_text('{"batch_size": 1000000000000000000000000000000}')
    xplane = next((LOGDIR / "tf_keras" / "cnn_cpu_bs8").glob("**/*.xplane.pb"))
    space = _xspace(xplane)
    from tb_opcompare.ingest.readers.tf_ops import parse_host_op

    host = next(plane for plane in space.planes if plane.name.startswith("/host:"))
    op_ids = {entry.key for entry in host.event_metadata if parse_host_op(entry.value.name)}
    line, event = next((line, event) for line in host.lines for event in line.events if event.metadata_id in op_ids)
    event.duration_ps = -5
    broken = tmp_path / "negative_cpu" / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(space.SerializeToString())
    bert = _xspace(next((REALTRACES / "tf2_xplane_bert_multigpu").glob("**/*.xplane.pb")))
    for plane in bert.planes:
        plane.name = plane.name.replace("/device:GPU", "/device:<a href=x>GPU</a>")
    tagged = tmp_path / "tagged" / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
    tagged.parent.mkdir(parents=True)
    tagged.write_bytes(bert.SerializeToString())

    document = json.loads(run_cli("runs", str(tmp_path), "--json", "--no-cache").stdout)
    runs = {run["run"]: run for run in document["runs"]}
    errors = {error["run"]: error["message"] for error in document["errors"]}
    assert runs["bom_cpu_bs4"]["batch_size"] == 4 and runs["bom_cpu_bs4"]["steps"] == 2  # read like the original
    assert errors["wide_cpu"] == (
        "the text is UTF-16, and a trace must be UTF-8 (as profilers write it); convert "
        "it, e.g. `iconv -f UTF-16 -t UTF-8`"
    )
    assert runs["claims_cpu_bs4"]["batch_size"] == 4
    assert runs["claims_cpu_bs4"]["warnings"] == [
        f"{tmp_path / 'claims_cpu_bs4' / 'opcompare.json'}: batch_size '1000000000000000000000000000000' ignored, not a "
        "whole number from 1 to 10,000,000"
    ]
    assert errors["negative_cpu"].startswith(
        f"plane '/host:CPU', line {line.name!r}: 1 op events have a negative or impossibly long duration"
    )
    assert runs["tagged"]["device"] == "accelerator"
    assert label('a "quoted" <img src=x> & %{x}') == 'a "quoted" &lt;img src=x&gt; &amp; %{x}'


@pytest.mark.timeout(120)
def test_events_that_overlap_without_nesting_are_warned_about(tmp_path):
    """A real trace with one op stretched past the end of the op it starts in."""
    document = json.loads(_torch_trace(4).read_text())
    ops = [e for e in document["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    parent, child = next(
        (p, c)
        for p in ops
        for c in ops
        if c is not p and c["tid"] == p["tid"] and p["ts"] < c["ts"] and c["ts"] + c["dur"] < p["ts"] + p["dur"]
    )
    child["dur"] = parent["ts"] + parent["dur"] - child["ts"] + 5_000.0
    (tmp_path / "stretched_cpu").mkdir()
    (tmp_path / "stretched_cpu" / "w.1.pt.trace.json").write_text(json.dumps(document))
    (run,) = json.loads(run_cli("runs", str(tmp_path), "--json", "--no-cache").stdout)["runs"]
    # The stretched op outlives its parent, and the enclosing ops that end before it too.
    assert any("op events overlap the event they start in without ending inside it" in w for w in run["warnings"])
    before = json.loads(run_cli("runs", str(LOGDIR / "torch"), "--json", "--no-cache").stdout)["runs"]
    assert not any("overlap" in w for r in before for w in r["warnings"])


@pytest.mark.timeout(180)
def test_a_trace_swapped_for_a_link_out_after_listing_is_never_read(tmp_path):
    """Issue 33 item 1, against a live TensorBoard: list a logdir, then replace a trace by a
    link to a file outside it and ask for the comparison. Before, the outside file was read:
    a valid trace answered 200 with its ops, `/etc/passwd` a 422 quoting its first line.
    Now the read refuses what the listing did not walk, on the opened descriptor."""
    logdir, outside = tmp_path / "logdir", tmp_path / "outside"
    for name in ("cnn_torch_cpu_bs4", "cnn_torch_cpu_bs16"):
        shutil.copytree(LOGDIR / "torch" / name, logdir / name)
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs64", outside / "secret")
    (secret_trace,) = (outside / "secret").glob("*.pt.trace.json*")
    (victim,) = (logdir / "cnn_torch_cpu_bs16").glob("*.pt.trace.json*")
    with running_tensorboard(logdir) as url:
        base = f"{url}/data/plugin/op_compare"
        status, body = _get(f"{base}/runs")
        assert status == 200 and {run["run"] for run in json.loads(body)["runs"]} >= {"cnn_torch_cpu_bs16"}
        for target in (secret_trace, Path("/etc/passwd")):
            victim.unlink()
            victim.symlink_to(target)
            query = urllib.parse.urlencode({"baseline": "cnn_torch_cpu_bs4", "target": "cnn_torch_cpu_bs16"})
            for route in ("compare", "compare.csv"):
                status, body = _get(f"{base}/{route}?{query}")
                text = body.decode("utf-8", "replace")
                assert status != 200, (target, route)
                assert "outside the logdir" in text and "root:" not in text, text[:300]


@pytest.mark.timeout(120)
def test_a_directory_tree_a_thousand_levels_deep_is_listed_as_an_error(tmp_path):
    """Issue 33 item 6: a 1,100-deep directory raised RecursionError, a 500 on every route.
    The walk stops 64 levels below the logdir, names where, and the good runs stay."""
    logdir = tmp_path / "logdir"
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", logdir / "good")
    deep = logdir / "deep"
    deep.mkdir()
    levels = 1100
    # os.makedirs and shutil.rmtree recurse too: one level at a time, from descriptors
    descriptors = [os.open(deep, os.O_RDONLY)]
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=descriptors[-1])
            descriptors.append(os.open("d", os.O_RDONLY, dir_fd=descriptors[-1]))
        document = _runs(logdir)
        assert "good" in {run["run"] for run in document["runs"]}
        assert any("deeper than 64 levels" in error["message"] for error in document["errors"])
    finally:  # pytest's own clean-up would recurse into it: taken down level by level here
        for inner in range(len(descriptors) - 1, 0, -1):
            os.close(descriptors[inner])
            os.rmdir("d", dir_fd=descriptors[inner - 1])
        os.close(descriptors[0])


@pytest.mark.parametrize("events", [2, 120_000], ids=["small", "above the streaming threshold"])
def test_a_trace_with_two_event_arrays_is_refused_by_name(tmp_path, events):
    """Issue 33 item 9: two `traceEvents` arrays in one JSON object. A small file silently
    took the second; one above the streaming threshold (16 MiB) ended in an IndexError
    traceback. Which one is the trace cannot be told: the file is refused, and says why."""
    from tb_opcompare.errors import ProfileError
    from tb_opcompare.store.catalog import Catalog

    event = (
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": %d, "dur": 1, '
        '"args": {"padding": "%s"}}'
    )
    array = "[" + ", ".join(event % (k * 10, "x" * 100) for k in range(events)) + "]"
    run = tmp_path / "logs" / "joined"
    run.mkdir(parents=True)
    (run / "host_1.1.pt.trace.json").write_text(
        '{"schemaVersion": 1, "traceEvents": %s,\n"traceEvents": %s}' % (array, array)
    )
    with pytest.raises(ProfileError) as raised:
        Catalog(str(tmp_path / "logs"), cache_dir=None).load("joined")
    assert 'two "traceEvents" arrays in one trace' in raised.value.reason


@pytest.mark.timeout(60)
def test_a_link_into_proc_is_listed_and_never_walked(tmp_path):
    """Issue 33 item 2: a link to `/proc` was walked into other processes' working
    directories (59-66 "runs", hundreds of errors, up to 5 GB on a full read)."""
    logdir = tmp_path / "logdir"
    shutil.copytree(LOGDIR / "torch" / "cnn_torch_cpu_bs4", logdir / "good")
    for name, target in (("proc", "/proc"), ("self", "/proc/self"), ("sys", "/sys")):
        (logdir / name).symlink_to(target)
    document = _runs(logdir)
    assert [run["run"] for run in document["runs"]] == ["good"]
    refused = {Path(error["path"]).name: error["message"] for error in document["errors"]}
    assert {"proc", "self", "sys"} <= set(refused)
    assert all("not followed" in refused[name] for name in ("proc", "self", "sys"))


def test_a_run_of_ten_thousand_captures_is_listed_at_once_with_its_newest(tmp_path):
    """Issue 33 item 7: 10,000 empty capture folders in one run took 94 s to list (each
    capture re-sorted all the others). Now the listing answers in seconds, reads the newest
    capture, and names the newest 500, saying how many older ones there are."""
    profile = tmp_path / "logdir" / "fit" / "plugins" / "profile"
    for k in range(10_000):
        (profile / f"2026_01_01_{k:05d}").mkdir(parents=True)
        (profile / f"2026_01_01_{k:05d}" / "host.xplane.pb").touch()
    real = FIXTURES / "tf_modes" / "logdir" / "keras_graph_cpu_bs16" / "train" / "plugins" / "profile"
    shutil.copytree(next(real.iterdir()), profile / "2026_11_26_04_07_26")
    started = time.monotonic()
    result = run_cli("runs", str(tmp_path / "logdir"), "--json", "--no-cache")
    assert time.monotonic() - started < 30 and result.returncode == 0, result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    assert run["session"] == "2026_11_26_04_07_26" and run["device"] == "CPU"
    assert len(run["sessions"]) == 500 and run["sessions"][-1] == "2026_11_26_04_07_26"
    assert "10,001 captures: the newest 500 are listed; the 9,501 older ones" in run["warnings"][-1]


def _xplane_of_empty_lines(lines: int) -> bytes:
    plane = b"\x12\x09/host:CPU" + b"\x1a\x00" * lines  # name, then `lines` empty XLines
    return b"\x0a" + varint(len(plane)) + plane


def _dense_tf_trace(events: int) -> bytes:
    event = b'{"ph":"X","name":"MatMul","pid":1,"tid":1,"ts":%d,"dur":1,"args":{"long_name":"m:MatMul"}},'
    return gzip.compress(
        b'{"displayTimeUnit":"ns","traceEvents":[{"ph":"M","pid":1,"name":"process_name","args":'
        b'{"name":"/host:CPU"}},' + b"".join(event % (2 * k) for k in range(events)) + b"{}]}",
        compresslevel=1,
    )


def _peak_rss_of_listing(logdir: Path, max_read_gb: str) -> tuple[int, dict]:
    """The listing's peak resident memory (bytes) and its document, from a process of its own."""
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child would report
    # the peak of the test process it was forked from
    script = (
        "import sys\nfrom tb_opcompare.cli.main import main\n"
        f"main(['runs', {str(logdir)!r}, '--json', '--no-cache', '--max-read-gb', {max_read_gb!r}])\n"
        "peak = next(line for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
        "print(int(peak.split()[1]) * 1024, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    return int(done.stderr.strip().splitlines()[-1]), json.loads(done.stdout)


def _dense_torch_trace(events: int) -> bytes:
    event = b'{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":%d,"dur":1},'
    return (
        b'{"schemaVersion":1,"traceEvents":['
        + b"".join(event % (2 * k) for k in range(events))
        + b'{"ph":"i","name":"end","pid":1,"tid":1,"ts":0}]}'
    )


@pytest.mark.parametrize("flood", ["xplane lines", "trace.json events", "PyTorch events"])
def test_element_floods_stay_within_the_memory_limit(tmp_path, flood):
    """Issue 33 item 3: a limit in bytes let small files of many elements take far more:
    3,000,000 empty XLines in 6 MB peaked at 486 MB (and 28 s) at --max-read-gb 0.05; a
    4 MB gzip of 1,500,000 tiny TF trace events at 1.3 GB at a 0.7 GB limit; 1,200,000 tiny
    PyTorch events in 88 MB at about 490 MB at a 0.3 GB limit. Now the lines are never listed and the
    events are counted before they are read."""
    session = tmp_path / "logdir" / "run" / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    if flood == "xplane lines":
        (session / "h.xplane.pb").write_bytes(_xplane_of_empty_lines(3_000_000))
        limit, message = "0.05", "no TensorFlow op events in this profile"
    elif flood == "trace.json events":
        (session / "h.trace.json.gz").write_bytes(_dense_tf_trace(1_500_000))
        limit, message = "0.7", "1,500,001 events in 143 MB of text would need about 1.2 GB once read"
    else:  # 74 bytes an event, where the guard's estimate by size assumes some 300
        (tmp_path / "logdir" / "torch").mkdir()
        (tmp_path / "logdir" / "torch" / "w.1.pt.trace.json").write_bytes(_dense_torch_trace(1_200_000))
        shutil.rmtree(tmp_path / "logdir" / "run")
        limit, message = "0.3", "1,200,001 events in 88 MB of text would need about 0.4 GB once read"
    peak, document = _peak_rss_of_listing(tmp_path / "logdir", limit)
    (error,) = document["errors"]
    assert message in error["message"]
    assert peak < float(limit) * 1e9 + 150e6, f"{peak / 1e6:,.0f} MB"  # the limit, and the interpreter's own


def _many_op_trace(events: int) -> bytes:
    event = b'{"ph":"X","cat":"cpu_op","name":"aten::op%d","pid":1,"tid":1,"ts":%d,"dur":1,"args":{"External id":%d}},'
    body = b"".join(event % (k % 50, 2 * k, k) for k in range(events))
    return b'{"schemaVersion":1,"traceEvents":[' + body + b'{"ph":"i","name":"end","pid":1,"tid":1,"ts":0}]}'


def _high_water(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def test_concurrent_cold_reads_share_one_memory_budget(tmp_path):
    """Issue 33 item 4: each read was held to the limit alone, so five cold reads at once
    took 1.5 GB against a 0.5 GB limit. Now one budget is shared by the reads of a process:
    four clients asking for four 50 MB traces at once at a 0.2 GB limit are read one after
    another, every answer is right, and TensorBoard's memory grows by about one read (314 MB
    here, where all four at once grew it by 684 MB: a dense trace takes more than the
    guard's estimate, so the bound is three estimates, not one)."""
    from tensorboard_server import PIDS, running_tensorboard

    logdir = tmp_path / "logdir"
    trace = _many_op_trace(460_000)
    for k in range(4):
        (logdir / f"big{k}").mkdir(parents=True)
        (logdir / f"big{k}" / "w.1.pt.trace.json").write_bytes(trace)
    one_read = len(trace) * 3  # what the guard expects a read of it to need
    with running_tensorboard(logdir, flags=("--opcompare_max_read_gb", "0.2")) as url:
        before = _high_water(PIDS[url])
        answers: dict[int, tuple[int, bytes]] = {}

        def ask(k: int) -> None:
            with urllib.request.urlopen(
                f"{url}/data/plugin/op_compare/compare?baseline=big{k}&target=big{k}", timeout=300
            ) as answer:
                answers[k] = answer.status, answer.read()

        clients = [threading.Thread(target=ask, args=(k,)) for k in range(4)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        grown = _high_water(PIDS[url]) - before
    assert sorted(answers) == [0, 1, 2, 3] and all(status == 200 for status, _ in answers.values())
    for _, body in answers.values():
        summary = json.loads(body)["summary"]
        assert summary["baseline"]["run"] == summary["target"]["run"] and summary["matched_ops"] == 50
    assert grown < 3 * one_read, f"{grown / 1e6:,.0f} MB for reads of {one_read / 1e6:,.0f} MB each"


def test_a_read_that_waits_too_long_for_memory_is_refused_in_words():
    from tb_opcompare.errors import OverLimit
    from tb_opcompare.store.memory_guard import ReadBudget

    budget = ReadBudget(wait_s=0.2)
    with budget.reserve("a.json", 600, 1000):
        with pytest.raises(OverLimit) as refused:
            with budget.reserve("b.json", 600, 1000):
                pass
    assert refused.value.path == "b.json"
    assert refused.value.reason.startswith("waited 0 s for memory: reads under way hold 0.00 GB of the 0.0 GB limit")
    with budget.reserve("b.json", 600, 1000):  # once the first read is done, the next one goes ahead
        assert budget.peak_held == 600


def test_files_the_listing_passes_over_are_read_or_said(tmp_path):
    """Issue 33: odd files were passed over without a word. An xplane outside a profile
    session (copied out of one) is now a run of its folder, and a JSON file that is no
    trace by its first 64 KB is named in a notice, in the CLI and the listing alike."""
    logdir = tmp_path / "logdir"
    session = FIXTURES / "tf_modes" / "logdir" / "keras_graph_cpu_bs16" / "train" / "plugins" / "profile"
    (logdir / "copied").mkdir(parents=True)
    shutil.copy(next(next(session.iterdir()).glob("*.xplane.pb")), logdir / "copied" / "vm.xplane.pb")
    (logdir / "late").mkdir()
    trace = {
        "metadata": {"note": "x" * 100_000},
        "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1, "pid": 1, "tid": 1}],
    }
    (logdir / "late" / "trace.json").write_text(json.dumps(trace))
    (logdir / "late" / "opcompare.json").write_text("{}")  # a sidecar is no trace and never counted
    (logdir / "cut").mkdir()  # a gzip file whose stream is corrupt: said apart, with why
    (logdir / "cut" / "trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)
    result = run_cli("runs", str(logdir), "--no-cache")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("copied\tformat=xplane\tdevice=CPU\tbatch=16")
    assert (
        'note: 1 JSON file not read: no trace\'s marker ("traceEvents", "op_stats" ...) in the first 64 KB: '
        "late/trace.json."
    ) in result.stderr
    assert (
        "note: 1 JSON file could not be read to tell whether it is a trace: cut/trace.json.gz (not a readable "
        "gzip stream (Error -3 while decompressing data: "
    ) in result.stderr
