"""An indexed bucket lists in a constant number of requests (issue 57, second item), and a
bucket of many runs among many other objects lists and indexes (issue 55, point 7).

moto's S3 server on loopback, behind a proxy that counts every request. The shared index's
manifest (index schema 2) carries every fact a listing shows (each session's facts, its
ops' names, its run's sidecar, the JSON files that are no profile), so listing an indexed
bucket asks for the manifest and the bucket's listing, whatever the number of runs: before,
each run cost 4-5 requests (its parts and its sidecar), 170 for the demo's 36 runs."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import msgspec
import pytest
from conftest import FIXTURES, without_read_from
from s3_server import CountingProxy

from tb_opcompare.service.compare import compare_document
from tb_opcompare.service.runs import runs_document
from tb_opcompare.store.catalog import Catalog
from tb_opcompare.store.prewarm import index_logdir

TRACE = FIXTURES / "onnxruntime" / "logdir" / "cnn_infer_cpu_bs16" / "vm_6117.1795423750789100707.pt.trace.json.gz"


@pytest.fixture(scope="module")
def store():
    """(the counting proxy in front of moto's server, a boto3 client)."""
    pytest.importorskip("s3fs")
    import boto3
    import s3fs
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    proxy = CountingProxy(f"http://127.0.0.1:{port}")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", proxy.url),
        ):
            patch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()  # one made for another endpoint would be reused
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
        client.create_bucket(Bucket="team")
        yield proxy, client
        s3fs.S3FileSystem.clear_instance_cache()
    proxy.close()
    server.stop()


def _upload(client, prefix: str, runs: int) -> str:
    """``runs`` small PyTorch runs, each with a sidecar and two JSON files that are no
    profile (a config and metrics, which discovery looks into), and an event file."""
    trace = TRACE.read_bytes()
    for number in range(runs):
        run = f"{prefix}/cnn_bs{1 + number % 4 * 16}_{number:03d}"
        objects = {
            TRACE.name: trace,
            "opcompare.json": json.dumps({"model": "cnn", "label": f"run {number}"}).encode(),
            "config.json": json.dumps({"seed": number}).encode(),
            "metrics.json": json.dumps({"loss": [1.0, 0.5]}).encode(),
            f"events.out.tfevents.{number}": b"\0" * 32,
        }
        for name, data in objects.items():
            client.put_object(Bucket="team", Key=f"{run}/{name}", Body=data)
    return f"s3://team/{prefix}"


def _listing(proxy, url: str) -> tuple[dict, list[tuple[str, str, int]]]:
    """A fresh command's listing (its catalog one-shot, no cache), and the requests it made."""
    before = proxy.count()
    document = msgspec.to_builtins(runs_document(Catalog(url, one_shot=True)))
    return document, proxy.since(before)


def test_an_indexed_bucket_lists_in_the_same_requests_for_3_runs_as_for_15(store):
    proxy, client = store
    made = {}
    for runs in (3, 15):
        url = _upload(client, f"n{runs}", runs)
        plain, unindexed = _listing(proxy, url)
        report = index_logdir(Catalog(url), jobs=1, say=lambda _: None)
        assert report.read == runs and not report.errors and not report.write_error, report
        indexed, requests = _listing(proxy, url)
        assert without_read_from(indexed["runs"]) == without_read_from(plain["runs"])
        assert indexed["pairs"] == plain["pairs"]
        assert {run["label"] for run in indexed["runs"]} == {f"run {number}" for number in range(runs)}
        paths = [path.split("?")[0] for _, path, _ in requests]
        # the manifest and the bucket's listing: no part, no profile, no sidecar, no config
        assert all(path.endswith("/.opcompare/manifest.json") or path == "/team" for path in paths), paths
        assert len(unindexed) > 3 * runs  # each run's trace, sidecar, config and metrics
        # distinct requests: a retry on a loaded machine (the client's deadline passed) is the
        # same request again, not one more the listing needed
        made[runs] = len({(method, path) for method, path, _ in requests})
    assert made[3] == made[15] <= 3, made

    # a first comparison reads each run's tables in one range read of its batch (two next to
    # each other in one), and no profile
    before = proxy.count()
    document = compare_document(Catalog(url, one_shot=True), "cnn_bs1_000", "cnn_bs17_001")
    assert document.rows
    fetched = [path.split("?")[0] for _, path, _ in proxy.since(before)]
    assert 1 <= len([path for path in fetched if "/.opcompare/bundles/" in path]) <= 2, fetched
    assert not [path for path in fetched if "/.opcompare/" not in path and path != "/team"], fetched


def test_a_sidecar_corrected_after_index_is_read_again(store):
    proxy, client = store
    url = _upload(client, "corrected", 2)
    index_logdir(Catalog(url), jobs=1, say=lambda _: None)
    client.put_object(
        Bucket="team",
        Key="corrected/cnn_bs1_000/opcompare.json",
        Body=json.dumps({"model": "cnn", "label": "corrected"}).encode(),
    )
    document, requests = _listing(proxy, url)
    labels = {run["run"]: run["label"] for run in document["runs"]}
    assert labels == {"cnn_bs1_000": "corrected", "cnn_bs17_001": "run 1"}
    assert [path for _, path, _ in requests if path.endswith("opcompare.json")] == [
        "/team/corrected/cnn_bs1_000/opcompare.json"
    ]


def test_an_index_of_the_older_layout_is_named_and_rewritten(store, tmp_path):
    proxy, client = store
    url = _upload(client, "older", 2)
    old = {"schema": 1, "tool": "0.30", "sessions": {"0123456789abcdef01234567": {"run": "x", "tables": ["ops"]}}}
    client.put_object(Bucket="team", Key="older/.opcompare/manifest.json", Body=json.dumps(old).encode())
    client.put_object(Bucket="team", Key="older/.opcompare/ops/0123456789abcdef01234567.parquet", Body=b"old")
    client.put_object(Bucket="team", Key="older/.opcompare/runs/0123456789abcdef01234567.parquet", Body=b"old")
    document, _ = _listing(proxy, url)
    assert len(document["runs"]) == 2
    assert any(
        "older layout (index schema 1" in notice and "tb-opcompare index" in notice for notice in document["notices"]
    )
    index_logdir(Catalog(url), jobs=1, say=lambda _: None)
    keys = {item["Key"] for item in client.list_objects_v2(Bucket="team", Prefix="older/.opcompare/")["Contents"]}
    assert not any("0123456789abcdef01234567" in key for key in keys), keys  # the old layout's parts are gone
    document, _ = _listing(proxy, url)
    assert not any("older layout" in notice for notice in document["notices"])


def test_the_listing_of_a_bucket_looks_into_its_json_files_at_once(store, monkeypatch):
    """Discovery reads the first bytes of every JSON file of a bucket in one call (its range
    reads sent together), and the listing every sidecar in one: one after the other, 2,000
    JSON files and 1,000 sidecars took a cold listing of 1,000 runs 88 s."""
    from tb_opcompare.ingest import fs

    proxy, client = store
    url = _upload(client, "sniffed", 4)
    calls = []
    real = fs.read_heads
    monkeypatch.setattr(fs, "read_heads", lambda paths, size: calls.append(len(paths)) or real(paths, size))
    document, requests = _listing(proxy, url)
    assert len(document["runs"]) == 4
    assert calls == [8, 4]  # each run's config and metrics in one call, then each run's sidecar in one
    heads = [path for _, path, _ in requests if path.endswith(("config.json", "metrics.json"))]
    assert len(heads) == 8  # each once


def test_appending_sessions_writes_a_batch_of_their_own_and_nothing_else(tmp_path):
    """Incremental indexing stays cheap: a new run is a batch of its own, the batches
    before are not touched; a run whose profile changed has its batch written anew (its
    other sessions' bytes copied), so the dataset holds each session once."""
    import pyarrow.parquet as pq

    logdir = tmp_path / "logs"
    for number in range(3):
        (logdir / f"run{number}").mkdir(parents=True)
        (logdir / f"run{number}" / TRACE.name).write_bytes(TRACE.read_bytes())
    index = logdir / ".opcompare"

    def batches() -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in (index / "bundles").iterdir()}

    index_logdir(Catalog(str(logdir)), jobs=1, say=lambda _: None)
    first = batches()
    (logdir / "run3").mkdir()
    (logdir / "run3" / TRACE.name).write_bytes(TRACE.read_bytes())
    index_logdir(Catalog(str(logdir)), jobs=1, say=lambda _: None)
    second = batches()
    assert len(second) == 2 and {name: second[name] for name in first} == first  # appended, none rewritten

    other = next((FIXTURES / "versions" / "torch2.11_h100" / "mlp_gpu_bs6").glob("*.pt.trace.json.gz"))
    (logdir / "run0" / TRACE.name).write_bytes(other.read_bytes())
    index_logdir(Catalog(str(logdir)), jobs=1, say=lambda _: None)
    third = batches()
    appended = next(name for name in second if name not in first)
    assert len(third) == 2 and third[appended] == second[appended] and not set(first) & set(third)
    runs = pq.read_table(index / "runs").to_pydict()
    assert sorted(runs["run"]) == ["run0", "run1", "run2", "run3"]
    ops = pq.read_table(index / "ops").to_pydict()
    assert set(zip(ops["run"], ops["op_name"])) >= {("run0", name) for name in _op_names(other)}
    fresh = Catalog(str(logdir))
    document = msgspec.to_builtins(runs_document(fresh))
    assert len(document["runs"]) == 4 and not fresh.cache.parses  # every run from the index


def _op_names(trace: Path) -> set[str]:
    from tb_opcompare.ingest.formats import PYTORCH, read_profile

    return set(read_profile(PYTORCH, [str(trace)]).op_table["op_name"].tolist())
