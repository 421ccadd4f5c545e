"""``bench/cluster.py`` on emulated hosts at a small size: the table has a row per workload
and backend, every result is right, and the bytes measured between hosts are there beside
the simulator's."""

import os
import re
import subprocess
import sys

import pytest
from _bench_modules import BENCH

from tilegraph.testing.cluster import unavailable


def _run(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(BENCH.parent))  # this checkout's tilegraph
    return subprocess.run([sys.executable, str(BENCH / "cluster.py"), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.heavy
@pytest.mark.cluster
@pytest.mark.skipif(unavailable() is not None, reason=f"no emulated hosts: {unavailable()}")
def test_bench_cluster_runs_on_both_backends_and_every_result_is_right():
    proc = _run("--workloads", "matvec", "cholesky", "--scale", "0.5", "--bandwidth",
                "1gbit")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()
            if re.match(r"(matvec|Cholesky)\s+(dask|mpi)\s", line)]
    assert sorted((r[0], r[1]) for r in rows) == [("Cholesky", "dask"), ("Cholesky", "mpi"),
                                                   ("matvec", "dask"), ("matvec", "mpi")]
    assert all(r[-1] == "yes" for r in rows)
    assert all(r[2] == "3" and r[3] == "1gbit" for r in rows)
    cholesky = next(line for line in proc.stdout.splitlines()
                    if re.match(r"Cholesky\s+mpi\s", line))
    # the blocks MPI counted are the blocks the simulator planned to move (deterministic);
    # the interface counters hold at least those (more when segments were sent again, which
    # a loaded machine causes and the row reports)
    counted = re.search(r"(\S+ \S+) blocks, (\d+) segments resent", cholesky)
    assert counted, proc.stdout
    sim_blocks, counters = _bytes(cholesky.split()[10:12]), _bytes(cholesky.split()[8:10])
    assert abs(_bytes(counted.group(1).split()) / sim_blocks - 1) < 0.1, proc.stdout
    assert counters > 0.9 * sim_blocks, proc.stdout
    if int(counted.group(2)) == 0:
        assert float(cholesky.split()[14]) < 1.3, proc.stdout  # counters / simulator's wire


def _bytes(words):
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    return float(words[0]) * units[words[1]]


def test_bench_cluster_refuses_bad_arguments():
    for args, message in [(["--scale", "0"], "--scale must be positive"),
                          (["--hosts", "0"], "--hosts must be from 1 to 200"),
                          (["--workloads", "fft"], "invalid choice")]:
        proc = _run(*args, timeout=60)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
