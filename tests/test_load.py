"""Load: 20 concurrent clients hitting runs, compare and compare.csv on a real TensorBoard
over loopback (TB_OPCOMPARE_LOAD_SECONDS, default 10; `make load` runs a minute), and a
soak of every route beside an unreadable run (TB_OPCOMPARE_SOAK_SECONDS, default 25; 45 for
the index rewritten under the server). No request may fail, and the server's memory must
level off, not grow with requests."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
from conftest import FIXTURES, TRUNCATED_RUN, run_cli, without_read_from
from in_process import PREFIX, plugin_client

SECONDS = float(os.environ.get("TB_OPCOMPARE_LOAD_SECONDS", "10"))
CLIENTS = 20


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_twenty_clients_for_a_while(plugin_logdir):
    from tensorboard_server import PIDS, running_tensorboard

    pairs = [
        ("tf1/mlp_cpu", "tf1/mlp_gpu"),
        ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16"),
        ("tf_keras/cnn_cpu_bs8/train", "tf_keras/cnn_cpu_bs32/train"),
        ("big/bert_multigpu", "tf1/mlp_gpu"),
    ]
    with running_tensorboard(plugin_logdir, tensorflow=True) as url:
        server_pid = PIDS[url]
        base = f"{url}/data/plugin/op_compare"
        requests = [f"{base}/runs"] + [
            f"{base}/{route}?{urllib.parse.urlencode({'baseline': b, 'target': t, **view})}"
            for (b, t), route, view in itertools.product(
                pairs, ("compare", "compare.csv"), ({}, {"sort": "speedup", "top": "50"}, {"group_by": "type"})
            )
        ]
        for request in requests:  # warm: every run read once
            urllib.request.urlopen(request, timeout=300).read()
        warm_mb = resident_mb(server_pid)
        failures, counts = [], [0] * CLIENTS
        deadline = time.monotonic() + SECONDS

        def client(index: int):
            chooser = random.Random(index)
            while time.monotonic() < deadline:
                request = chooser.choice(requests)
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        response.read()
                        if response.status != 200:
                            failures.append((request, response.status))
                except (urllib.error.URLError, OSError) as error:
                    failures.append((request, repr(error)))
                counts[index] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        samples = []
        while any(thread.is_alive() for thread in threads):
            samples.append(resident_mb(server_pid))
            time.sleep(SECONDS / 6)
        for thread in threads:
            thread.join()
        end_mb = resident_mb(server_pid)
    print(
        f"\n{sum(counts)} requests from {CLIENTS} clients in {SECONDS:.0f} s; server RSS {warm_mb:.0f} MB warm, "
        f"{end_mb:.0f} MB at the end; samples {[round(v) for v in samples]}"
    )
    assert not failures, failures[:5]
    assert sum(counts) > CLIENTS * SECONDS  # more than one request per client-second
    # 20 requests in flight each hold a response and its temporaries; what must not happen is
    # growth towards the profile cache's 512 MB bound (or past it) from serving alone.
    assert end_mb - warm_mb < 200, f"server memory grew from {warm_mb:.0f} MB to {end_mb:.0f} MB: {samples}"


SOAK_SECONDS = float(os.environ.get("TB_OPCOMPARE_SOAK_SECONDS", "25"))


def memory_trend(times: np.ndarray, sizes: np.ndarray) -> float:
    """How fast a server's resident memory (MB) rises, in MB a minute, after the first third
    of its samples (the caches and the allocator's arenas still filling): the median of the
    slopes between every two samples (Theil-Sen). A least-squares line read a flat 800-811
    MB series as +22 MB a minute because its last samples caught two requests in flight;
    the median ignores such peaks, and the dips of memory handed back, but not a climb."""
    times, sizes = times[len(times) // 3 :], sizes[len(sizes) // 3 :]
    first, second = np.triu_indices(len(times), 1)
    return float(np.median((sizes[second] - sizes[first]) / (times[second] - times[first])) * 60)


def test_every_route_polled_for_a_while_holds_its_memory(plugin_logdir):
    """Issue 33 item 5's soak: the tab polls, and a cached error once grew a traceback with
    each raise (31-230 KB a `runs` request while one run was unreadable: +809 MB in 90 s).
    Every route, CSVs included, is asked again and again beside the logdir's unreadable
    run; after a warm-up the server's resident memory must not trend up (`memory_trend`),
    whatever its level."""
    from tensorboard_server import PIDS, running_tensorboard

    pair = {"baseline": "tf1/mlp_cpu", "target": "tf1/mlp_gpu"}
    two_runs = urllib.parse.urlencode(pair)
    # the listing four times over, as the tab polls it
    routes = [
        "runs",
        "runs?load=0",
        "runs",
        "runs?load=0",
        "sweeps",
        "matrix",
        "matrix.csv",
        f"compare?{two_runs}",
        f"compare.csv?{two_runs}",
        f"compare?{two_runs}&q=%2Fmat%2F&sort=speedup",
        f"check?{two_runs}&allow_one_run=1",
        f"modules?{two_runs}",
        f"modules.csv?{two_runs}",
        f"memory?{two_runs}",
        f"memory.csv?{two_runs}",
        f"layers?{two_runs}",
        f"layers.csv?{two_runs}",
        "trend?runs=tf1%2Fmlp_cpu,tf1%2Fmlp_gpu",
        "trend.csv?runs=tf1%2Fmlp_cpu,tf1%2Fmlp_gpu",
        f"compare?baseline={urllib.parse.quote(TRUNCATED_RUN, safe='')}&target=tf1%2Fmlp_gpu",
    ]
    # two malloc arenas: the allocator's own climb (several MB steps over 30-45 s with one
    # arena a thread) ends within seconds, so a short window measures the server, not it
    with running_tensorboard(plugin_logdir, env={"MALLOC_ARENA_MAX": "2"}, tensorflow=True) as url:
        pid = PIDS[url]
        base = f"{url}/data/plugin/op_compare/"

        def ask(route: str) -> int:
            try:
                with urllib.request.urlopen(base + route, timeout=120) as response:
                    response.read()
                    return response.status
            except urllib.error.HTTPError as error:
                error.read()
                return error.code

        statuses = {route: ask(route) for route in routes}  # warm: every run read once
        assert statuses[routes[-1]] == 422 and all(status == 200 for status in list(statuses.values())[:-1]), statuses
        for route in routes * 3:  # the caches fill and the allocator settles
            ask(route)
        samples, asked = [], 0
        started = time.monotonic()
        while time.monotonic() - started < SOAK_SECONDS:
            for route in routes:
                ask(route)
                asked += 1
            samples.append((time.monotonic() - started, resident_mb(pid)))
    times, sizes = (np.array(values) for values in zip(*samples))
    slope = memory_trend(times, sizes)
    print(
        f"\n{asked} requests in {SOAK_SECONDS:.0f} s; RSS {sizes[0]:.0f} -> {sizes[-1]:.0f} MB, "
        f"slope {slope:+.1f} MB/min"
    )
    # the leak measured 31-230 KB a listing: at this rate (some 10 listings a second on two
    # cores) 20-140 MB a minute; a healthy server measured +2 MB a minute
    assert slope < 12, f"server memory trends up by {slope:.1f} MB a minute: {[round(v) for v in sizes]}"


# -- the index rewritten under the server (issue 55) ---------------------------------------------

# The same knob as the soak above. At least this many rewrites too, however slow the
# machine (up to 3x the seconds): a leak grows with each rewrite's reads, while a healthy
# server's memory still moves in steps of 2-6 MB; over 22-45 s a healthy server read up
# to +0.6 MB a rewrite (+1.0 over 5 rewrites), as much as a leak kept per read of the index.
INDEX_SOAK_SECONDS = float(os.environ.get("TB_OPCOMPARE_SOAK_SECONDS", "45"))
INDEX_SOAK_ROUNDS = 12
TOUCHED = ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16")  # their bytes never change
CHANGED = ("tf_keras/cnn_cpu_bs8/train", "tf_keras/cnn_cpu_bs32/train")  # a session comes and goes; rewritten
VISITOR = "torch/visitor"  # a run added and removed


def _small_logdir(root: Path) -> Path:
    """Five small runs of the fixture logdir: two PyTorch traces, three Keras xplanes."""
    logdir = root / "logdir"
    for run in (*TOUCHED, *CHANGED, "tf_keras/cnn_cpu_bs2/train"):
        shutil.copytree(FIXTURES / "logdir" / run, logdir / run)
    return logdir


def _one_file(folder: Path, pattern: str) -> Path:
    (path,) = folder.rglob(pattern)
    return path


class _Rewriter:
    """The logdir changed and indexed again by the real CLI, over and over. Each round
    rewrites the changed pair's target (another capture's bytes, put in place whole), adds
    or removes a newer session of its baseline and the visitor run (entries pruned, batches
    written anew), touches every profile (a new time, the same bytes: the server's next
    read of each is the index's, trusted by its content), then runs `tb-opcompare index`."""

    def __init__(self, logdir: Path, scratch: Path):
        self.logdir, self.scratch = logdir, scratch
        self.rounds, self.seconds, self.failures = 0, 0.0, []
        self.captures = [_one_file(logdir / CHANGED[1], "*.xplane.pb").read_bytes()]
        self.captures.append(_one_file(FIXTURES / "logdir/tf_keras/cnn_cpu_bs2", "*.xplane.pb").read_bytes())
        self.visitor = _one_file(FIXTURES / "logdir/torch/cnn_torch_cpu_bs64", "*.pt.trace.json").read_bytes()

    def change(self) -> None:
        self._put(_one_file(self.logdir / CHANGED[1], "*.xplane.pb"), self.captures[(self.rounds + 1) % 2])
        session = self.logdir / CHANGED[0] / "plugins/profile/2026_11_23_09_00_00"
        if self.rounds % 4 in (0, 1):
            self._put(session / "vm.xplane.pb", self.captures[1])
        else:
            shutil.rmtree(session, ignore_errors=True)
        visitor = self.logdir / VISITOR
        if self.rounds % 2 == 0:
            self._put(visitor / "vm_1.1795345335619686555.pt.trace.json", self.visitor)
        else:
            shutil.rmtree(visitor, ignore_errors=True)
        now = time.time()
        for profile in [*self.logdir.rglob("*.pt.trace.json"), *self.logdir.rglob("*.xplane.pb")]:
            os.utime(profile, (now, now))

    def _put(self, path: Path, data: bytes) -> None:
        """``data`` as the file at ``path``, placed whole (a profiler's finished file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.scratch / path.name
        scratch.write_bytes(data)
        os.replace(scratch, path)

    def index(self) -> None:
        started = time.monotonic()
        result = run_cli("index", str(self.logdir), "--no-cache", "--jobs", "1")
        self.seconds += time.monotonic() - started
        if result.returncode != 0 or "Traceback" in result.stderr:
            self.failures.append(result.stdout + result.stderr[-3000:])
        self.rounds += 1

    def loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.change()
            self.index()


def _index_soak_routes() -> list[str]:
    """What the tab asks for of the logdir's indexed tables: the listing, both pairs'
    comparisons and CSVs, their views, and the visitor's comparison (last)."""
    routes = ["runs", "runs?load=0", "sweeps", "matrix"]
    for baseline, target in (TOUCHED, CHANGED):
        two_runs = urllib.parse.urlencode({"baseline": baseline, "target": target})
        routes += [f"compare?{two_runs}", f"compare.csv?{two_runs}", f"modules?{two_runs}", f"memory?{two_runs}"]
        routes += [f"check?{two_runs}&allow_one_run=1", f"trend?runs={urllib.parse.quote(f'{baseline},{target}')}"]
    return routes + [f"compare?{urllib.parse.urlencode({'baseline': VISITOR, 'target': TOUCHED[0]})}"]


def _ask(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _soak(base: str, pid: int, rewriter: _Rewriter, routes: list[str]) -> tuple[list, list, int, int]:
    """Two clients poll ``routes`` while ``rewriter`` loops, for INDEX_SOAK_SECONDS and
    INDEX_SOAK_ROUNDS; returns the failed answers, the server's (seconds, RSS MB) samples,
    the requests made and the rewrites done by the last sample."""
    failures, asked, samples = [], [0], []
    stop = threading.Event()

    def client(seed: int) -> None:
        chooser = random.Random(seed)
        while not stop.is_set():
            route = chooser.choice(routes)
            status, body = _ask(base + route)
            asked[0] += 1
            if status != 200 and not (route == routes[-1] and status == 404):
                failures.append((route, status, body.decode(errors="replace")[-600:]))

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(2)]
    threads.append(threading.Thread(target=rewriter.loop, args=(stop,)))
    for thread in threads:
        thread.start()
    started, first_round, rewrites = time.monotonic(), rewriter.rounds, 0
    while (elapsed := time.monotonic() - started) < INDEX_SOAK_SECONDS or (
        rewriter.rounds - first_round < INDEX_SOAK_ROUNDS and elapsed < 3 * INDEX_SOAK_SECONDS
    ):
        samples.append((time.monotonic() - started, resident_mb(pid)))
        rewrites = rewriter.rounds - first_round  # the rewrites done by the last sample
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    return failures, samples, asked[0], rewrites


def test_the_index_rewritten_under_the_server_holds_its_memory_and_numbers(tmp_path):
    """Issue 55's last item: while two clients poll what the tab reads of a logdir's indexed
    tables, `tb-opcompare index` rewrites the index under the server again and again, the
    logdir changed between rewrites (a profile rewritten, a session and a run added and
    removed, every profile touched: manifests, batches and entries really change, and the
    server reads every run from the index again each round). No request may fail: every
    answer is 200 but the visitor run's, 404 (an unknown run, the documented answer) while
    it is gone. After the last rewrite the server serves what a fresh read without the
    index gives, and its memory did not trend up."""
    from tensorboard_server import PIDS, running_tensorboard

    logdir = _small_logdir(tmp_path)
    (tmp_path / "scratch").mkdir()
    rewriter = _Rewriter(logdir, tmp_path / "scratch")
    rewriter.change()
    rewriter.index()
    routes = _index_soak_routes()
    # The server's own cache folder, not the indexer's. Two malloc arenas: glibc gives the
    # threads a request each runs on arenas of their own (up to 8 a core), which fill in
    # steps of several MB for 30-45 s (676 -> 715 MB in 90 s, flat after ~40 s, with or
    # without a leak); with two the steps end within ~10 s. Blocks over 64 KB are mapped and
    # unmapped whole, and freed memory trimmed: RSS then moves with what is live, not in the
    # 2-6 MB steps in which a healthy server's heap otherwise grew and held.
    server_env = {"TB_OPCOMPARE_CACHE_DIR": str(tmp_path / "server-cache"), "MALLOC_ARENA_MAX": "2"}
    server_env |= {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "131072"}
    with running_tensorboard(logdir, env=server_env, tensorflow=True) as url:
        pid, base = PIDS[url], f"{url}/data/plugin/op_compare/"
        for route in routes:  # warm: every run read from the index once
            _ask(base + route)
        failures, samples, asked, sampled_rewrites = _soak(base, pid, rewriter, routes)
        rounds = rewriter.rounds - 1
        rewriter.change()  # the last rewrite; every profile touched: the server's next reads are the index's
        rewriter.index()
        served = {route: _ask(base + route) for route in routes[:1] + routes[4:6] + routes[10:12]}
    (logdir / ".opcompare").rename(tmp_path / "index-aside")
    fresh = plugin_client(logdir)  # a fresh read: no index, no cache
    times, sizes = (np.array(values) for values in zip(*samples))
    assert sampled_rewrites >= 2, f"{sampled_rewrites} rewrites of the index in {times[-1]:.0f} s"
    per_rewrite = memory_trend(times, sizes) * times[-1] / 60 / sampled_rewrites  # MB a rewrite of the index
    print(
        f"\n{asked} requests and {rounds} rewrites of the index ({rewriter.seconds / rewriter.rounds:.1f} s each) "
        f"in {times[-1]:.0f} s; server RSS {sizes[0]:.0f} -> {sizes[-1]:.0f} MB "
        f"(max {sizes.max():.0f}), {per_rewrite:+.2f} MB a rewrite; {[round(v) for v in sizes]}"
    )
    assert not rewriter.failures, rewriter.failures[:2]
    assert not failures, failures[:5]
    assert rounds >= 2 and asked > INDEX_SOAK_SECONDS
    for route, (status, body) in served.items():
        answer = fresh.get(PREFIX + "/" + route)
        assert status == answer.status_code == 200, (route, status, body[:400])
        if "csv" in route:
            assert body == answer.data, route
        else:  # the same numbers; only where they were read differs (the index, the profile)
            assert without_read_from(json.loads(body)) == without_read_from(json.loads(answer.data)), route
    # over 45 s or more, with large blocks mapped and unmapped whole (so RSS follows what is
    # live), healthy servers measured +0.06 to +0.10 MB a rewrite; one keeping the tables of
    # every read of the index +0.61 on two cores. Pinned to one core it read +0.20, under the
    # bound: there this soak catches only a larger leak (CI's machines have two cores).
    assert per_rewrite < 0.4, f"server memory rises {per_rewrite:.2f} MB a rewrite: {[round(v) for v in sizes]}"
