"""A logdir in an S3 bucket (issue 34, first part): moto's real S3 server on a loopback
port holds a copy of local fixtures (TF xplane sessions, a two-rank PyTorch job, PyTorch
runs whose names hide their models), and `tb-opcompare` reads `s3://` through fsspec
(s3fs), with the endpoint and credentials from the standard AWS environment. Every fact
of the listing and every number of a comparison equals the same logdir's on disk."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

SOURCES = {
    "tf": FIXTURES / "tf_modes" / "logdir",
    "ranks": FIXTURES / "gpu_h200" / "ranks",
    "user": FIXTURES / "user_logdirs" / "torch_h200",
}


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    """(the S3 environment, the logdir's s3:// URL, the same logdir on disk)."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
    }
    local = tmp_path_factory.mktemp("bucket") / "logs"
    for name, source in SOURCES.items():
        shutil.copytree(source, local / name)
    import boto3

    client = boto3.client(
        "s3",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        endpoint_url=env["AWS_ENDPOINT_URL"],
    )
    client.create_bucket(Bucket="team")
    for path in local.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), "team", f"logs/{path.relative_to(local).as_posix()}")
    yield env, "s3://team/logs", local
    server.stop()


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    executable = Path(sys.executable).parent / "tb-opcompare"
    return subprocess.run(
        [str(executable), *args, "--json", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


FACTS = (
    "run",
    "format",
    "device",
    "device_name",
    "batch_size",
    "batch_size_source",
    "steps",
    "steps_source",
    "step_time_us",
    "model",
    "model_source",
    "precision",
    "compiler",
    "framework",
    "repeat",
    "warnings",
    "loaded",
)


def test_a_bucket_logdir_lists_and_compares_as_it_does_on_disk(bucket):
    env, url, local = bucket
    remote, disk = (_cli(env, "runs", where) for where in (url, str(local)))
    assert remote.returncode == disk.returncode == 0, remote.stderr[-2000:]
    remote_runs, disk_runs = json.loads(remote.stdout), json.loads(disk.stdout)
    assert len(remote_runs["runs"]) == len(disk_runs["runs"]) >= 10
    for theirs, ours in zip(remote_runs["runs"], disk_runs["runs"]):
        assert {fact: theirs[fact] for fact in FACTS} == {fact: ours[fact] for fact in FACTS}
        assert [worker["rank"] for worker in theirs["workers"]] == [worker["rank"] for worker in ours["workers"]]
        assert len(theirs["sessions"]) == len(ours["sessions"])
    assert remote_runs["pairs"] == disk_runs["pairs"] and remote_runs["suggested"] == disk_runs["suggested"]
    pair = ("--baseline", "ranks/ddp_cnn_cpu", "--target", "ranks/ddp_cnn_gpu")
    remote_compare, disk_compare = (
        json.loads(_cli(env, "compare", where, *pair).stdout) for where in (url, str(local))
    )
    for figure in ("headline_speedup", "headline_text", "matched_ops", "overall_speedup", "geomean_speedup"):
        assert remote_compare["summary"][figure] == disk_compare["summary"][figure], figure
    assert remote_compare["rows"] == disk_compare["rows"]


def test_a_gzip_trace_in_the_bucket_is_held_to_the_memory_guard_by_its_text(bucket):
    """The memory guard takes a gzip trace's text size from its trailer, in a bucket too
    (a range request): a trace 14x smaller than its text is refused up front as on disk,
    not downloaded and decompressed first."""
    from tb_opcompare.ingest.formats import PYTORCH, peak_bytes_per_byte

    env, url, local = bucket
    trace = next((local / "user" / "lstm_runA").glob("*.pt.trace.json.gz"))
    text_bytes = int.from_bytes(trace.read_bytes()[-4:], "little")
    assert text_bytes > 10 * trace.stat().st_size
    limit_gb = text_bytes * peak_bytes_per_byte(PYTORCH) / 2 / 1e9  # the text's read does not fit, the file would
    run = ("--baseline", "user/lstm_runA", "--target", "user/lstm_runA", "--max-read-gb", f"{limit_gb:.9f}")
    remote, disk = (_cli(env, "compare", where, *run) for where in (url, str(local)))
    assert remote.returncode == disk.returncode == 1
    assert "too large to read here" in disk.stderr
    assert remote.stderr.replace(url, "LOGDIR") == disk.stderr.replace(str(local), "LOGDIR")


def test_a_missing_bucket_is_named_and_nothing_breaks(bucket):
    env, _, _ = bucket
    result = _cli(env, "runs", "s3://no-such-bucket/logs")
    assert "Traceback" not in result.stderr
    document = json.loads(result.stdout)
    assert document["runs"] == [] and result.returncode == 1
    (error,) = document["errors"]
    assert error["path"] == "s3://no-such-bucket/logs" and error["message"].startswith("cannot list it: ")


def test_a_trace_rewritten_in_the_bucket_is_read_again(bucket, monkeypatch, tmp_path):
    """fsspec's listing cache never expires: a trace rewritten after a listing kept its old
    size (the old profile served until a restart), and a trace added to a listed folder
    could not be read. Each listing drops that cache first."""
    import boto3

    from tb_opcompare.store.catalog import Catalog

    env, url, local = bucket
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
    ranks = FIXTURES / "user_logdirs" / "torch_h200"
    trace = next((ranks / "lstm_runA").rglob("*.pt.trace.json*"))
    client.upload_file(str(trace), "team", f"changing/run/{trace.name}")
    catalog = Catalog("s3://team/changing", cache_dir=None)
    first = catalog.load("run").profile.facts.batch_size
    other = next((ranks / "lstm_runC").rglob("*.pt.trace.json*"))
    client.upload_file(str(other), "team", f"changing/run/{trace.name}")  # rewritten in place
    catalog.sources(refresh=True)
    assert catalog.load("run").profile.facts.batch_size != first
    client.upload_file(
        str(trace), "team", "changing/run/vm_2.2.pt.trace.json" + (".gz" if trace.name.endswith(".gz") else "")
    )
    catalog.sources(refresh=True)  # a trace added to a listed folder is read
    assert len(catalog.source("run").sessions) == 2 and catalog.load("run") is not None


def test_a_bucket_without_credentials_is_named_not_a_traceback(bucket, tmp_path):
    env, url, _ = bucket
    bare = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    bare.update(
        AWS_ENDPOINT_URL=env["AWS_ENDPOINT_URL"],
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    executable = Path(sys.executable).parent / "tb-opcompare"
    result = subprocess.run(
        [str(executable), "runs", url, "--json", "--no-cache"], capture_output=True, text=True, timeout=120, env=bare
    )
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    (error,) = json.loads(result.stdout)["errors"]
    assert error["path"] == url and error["message"].startswith("cannot list it: ")


def test_a_bucket_logdir_sweeps_and_fills_the_matrix_as_it_does_on_disk(bucket):
    env, url, local = bucket
    for command in (("sweep", "--model", "user/lstm_run"), ("sweep", "--model", "user/runs"), ("matrix",)):
        remote, disk = (_cli(env, command[0], where, *command[1:]) for where in (url, str(local)))
        assert remote.returncode == disk.returncode == 0, remote.stderr[-2000:]
        assert json.loads(remote.stdout) == json.loads(disk.stdout), command


def test_the_tab_reads_a_bucket_where_tensorflow_is_installed(bucket, tmp_path, page):
    """Issue 58: `tensorboard --logdir s3://…` with TensorFlow installed stops at
    TensorBoard's own check (it asks for tensorflow-io). The tab's own flag reads the bucket
    beside a local --logdir: this venv has TensorFlow, and the tab lists and compares the
    bucket's runs as the CLI does."""
    pytest.importorskip("tensorflow")
    from conftest import open_op_compare, route_json
    from tensorboard_server import running_tensorboard

    env, url, _ = bucket
    listed = json.loads(_cli(env, "runs", url).stdout)
    (tmp_path / "local").mkdir()
    with running_tensorboard(
        tmp_path / "local",
        env={**os.environ, **env},
        flags=("--opcompare_logdir", url, "--opcompare_cache_dir", "none"),
        tensorflow=True,
    ) as tensorboard:
        runs = route_json(tensorboard, "runs")
        assert sorted(run["run"] for run in runs["runs"]) == sorted(run["run"] for run in listed["runs"])
        assert runs["errors"] == []
        frame = open_op_compare(page, tensorboard)
        frame.locator("#oc-count").wait_for(timeout=60_000)
        suggested = runs["suggested"]
        assert [frame.locator(f"#oc-{side}").input_value() for side in ("baseline", "target")] == [
            suggested["baseline"],
            suggested["target"],
        ]
        assert not page.page_errors


def test_a_bucket_listing_reads_each_objects_time_quicker_and_the_same(bucket, monkeypatch):
    """botocore read each listed object's time with dateutil's general parser, a fifth of
    listing a bucket of 10,000 objects: the filesystem the reads use is given a session
    whose parsers use ``fs._timestamp``. Its times are the ones botocore's own parser gives
    (boto3's listing of the same objects), and so is every value S3 could send."""
    import boto3
    import s3fs
    from botocore.utils import parse_timestamp

    from tb_opcompare.ingest import fs

    env, url, _ = bucket
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    read: list[str] = []
    monkeypatch.setattr(fs, "_timestamp", lambda value, quick=fs._timestamp: read.append(value) or quick(value))
    remote = s3fs.S3FileSystem(skip_instance_cache=True)
    fs._with_quick_times(remote)
    listed = remote.find(url.removeprefix("s3://"), detail=True)
    client = boto3.client("s3", region_name=env["AWS_DEFAULT_REGION"], endpoint_url=env["AWS_ENDPOINT_URL"])
    pages = client.get_paginator("list_objects_v2").paginate(Bucket="team", Prefix="logs/")
    theirs = {f"team/{item['Key']}": item["LastModified"] for page in pages for item in page["Contents"]}
    assert {key: info["LastModified"] for key, info in listed.items()} == theirs
    assert len(read) >= len(theirs) > 10
    for value in (
        "2026-11-30T10:56:11.000Z",
        "2026-11-30T10:56:11.123456Z",
        "2026-11-30T10:56:11+02:00",
        "2026-11-30T10:56:11",  # no zone: botocore's own reading
        "Mon, 30 Nov 2026 10:56:11 GMT",  # a header's form
        "1700000000",
        1700000000,
    ):
        assert fs._timestamp(value) == parse_timestamp(value)
    with pytest.raises(ValueError):
        fs._timestamp("2026-11-30T25:00:00Z")
    wired = (
        "from tb_opcompare.ingest import fs; remote = fs._remote('s3://team/logs')._remote; "
        "print(remote.session.get_component('response_parser_factory')._defaults['timestamp_parser'] is fs._timestamp)"
    )
    done = subprocess.run([sys.executable, "-c", wired], capture_output=True, text=True, env={**os.environ, **env})
    assert done.stdout.strip() == "True", done.stderr[-2000:]  # the filesystem every read uses
