"""Load: 20 concurrent clients hitting runs, compare and compare.csv on a real TensorBoard
over loopback (TB_OPCOMPARE_LOAD_SECONDS, default 10; `make load` runs a minute). No
request may fail, and the server's memory must level off, not grow with requests."""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

SECONDS = float(os.environ.get("TB_OPCOMPARE_LOAD_SECONDS", "10"))
CLIENTS = 20


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_twenty_clients_for_a_while(plugin_logdir):
    from tensorboard_server import PIDS, running_tensorboard

    pairs = [("tf1/mlp_cpu", "tf1/mlp_gpu"), ("torch/cnn_torch_cpu_bs4", "torch/cnn_torch_cpu_bs16"),
             ("tf_keras/cnn_cpu_bs8/train", "tf_keras/cnn_cpu_bs32/train"), ("big/bert_multigpu", "tf1/mlp_gpu")]
    with running_tensorboard(plugin_logdir) as url:
        server_pid = PIDS[url]
        base = f"{url}/data/plugin/op_compare"
        requests = [f"{base}/runs"] + [
            f"{base}/{route}?{urllib.parse.urlencode({'baseline': b, 'target': t, **view})}"
            for (b, t), route, view in itertools.product(
                pairs, ("compare", "compare.csv"), ({}, {"sort": "speedup", "top": "50"}, {"group_by": "type"}))]
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
    print(f"\n{sum(counts)} requests from {CLIENTS} clients in {SECONDS:.0f} s; server RSS {warm_mb:.0f} MB warm, "
          f"{end_mb:.0f} MB at the end; samples {[round(v) for v in samples]}")
    assert not failures, failures[:5]
    assert sum(counts) > CLIENTS * SECONDS  # more than one request per client-second
    # 20 requests in flight each hold a response and its temporaries; what must not happen is
    # growth towards the profile cache's 512 MB bound (or past it) from serving alone.
    assert end_mb - warm_mb < 200, f"server memory grew from {warm_mb:.0f} MB to {end_mb:.0f} MB: {samples}"
