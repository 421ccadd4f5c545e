"""``bench/pangeo.py`` at tiny sizes (``--shrink``): the workloads ported from
coiled/benchmarks and the zonal-mean diagnostic run on tilegraph, dask's threads,
dask.distributed and Cubed, and each system's results match NumPy's on the same inputs
(``--check``); bad arguments are refused. Each run is a process of its own: the runs on
a local cluster, and Cubed's but the smallest, are heavy."""

import json
import os
import subprocess
import sys

import pytest
from _bench_modules import BENCH

# workload -> (T, --shrink): a few hundred blocks at most, but sum_square's 3913 (the
# port's own count, whatever the size)
SMALL = {"anom_array": (200, 256), "sum_thin": (20, 256), "sum_square": (15, 256),
         "double_diff": (200, 64), "overlap_sample": (100, 5), "circulation": (24, 32)}
# the runs of about a second or two (a local cluster's start alone takes longer, and
# Cubed's thousands of tasks far longer)
LIGHT = {("tilegraph", w) for w in SMALL} | {("dask", w) for w in SMALL if w != "sum_square"} | {
    ("cubed", "sum_thin"), ("cubed", "overlap_sample")}


def _run(tmp_path, *args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(BENCH.parent))  # this checkout's tilegraph
    return subprocess.run([sys.executable, str(BENCH / "pangeo.py"), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path,
                          env=env)


def _child(tmp_path, system, workload, *extra, limit="64MB"):
    t, shrink = SMALL[workload]
    proc = _run(tmp_path, "--child", system, "--workload", workload, "--t", str(t),
                "--shrink", str(shrink), "--limit", limit, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cases():
    for system in ("tilegraph", "dask", "distributed", "cubed"):
        for workload in SMALL:
            heavy = (system, workload) not in LIGHT
            marks = [pytest.mark.heavy] if heavy else []
            if system == "distributed" and workload == "sum_square":
                continue  # (thousands of tasks through one worker: minutes)
            yield pytest.param(system, workload, marks=marks, id=f"{system}-{workload}")


@pytest.mark.parametrize(("system", "workload"), list(_cases()))
def test_each_port_matches_numpy_on_each_system(tmp_path, system, workload):
    if system == "cubed":
        pytest.importorskip("cubed")
    if system == "distributed":
        pytest.importorskip("distributed")
    got = _child(tmp_path, system, workload, "--check")
    assert got["checked"] is True and got["seconds"] > 0 and got["peak_rss"] > 0
    if system == "tilegraph":
        assert {"spilled", "read_back", "recomputed", "held", "projected"} <= set(got)


def test_the_zonal_diagnostic_spills_nothing_under_a_few_time_steps(tmp_path):
    # blocks of 32.4 KB, four a time step: 300 KB holds about two steps
    got = _child(tmp_path, "tilegraph", "circulation", limit="300KB")
    assert got["spilled"] == 0 and got["recomputed"] == 0
    assert got["held"] <= 300_000


@pytest.mark.heavy
def test_a_stored_port_runs_on_a_local_cluster(tmp_path):
    pytest.importorskip("distributed")
    got = _child(tmp_path, "distributed", "double_diff")  # into a sink, on the worker
    assert got["checked"] is False and got["peak_rss"] > 0


def test_the_parent_runs_each_system_and_prints_the_ratios(tmp_path):
    proc = _run(tmp_path, "--workload", "circulation", "--t", "24", "--shrink", "32",
                "--limit", "64MB", "--systems", "tilegraph,dask", "--check")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "circulation: T=24, memory_limit=64MB" in out
    assert out.count("(checked against NumPy)") == 2
    assert "tilegraph/dask: time" in out and "failed" not in out


def test_bad_arguments_are_refused(tmp_path):
    bad = _run(tmp_path, "--systems", "tilegraph,nosuch", timeout=120)
    assert bad.returncode == 2 and "unknown system(s) nosuch" in bad.stderr
    bad = _run(tmp_path, "--t", "0", timeout=120)
    assert bad.returncode == 2 and "must be a positive integer" in bad.stderr
    bad = _run(tmp_path, "--shrink", "-3", timeout=120)
    assert bad.returncode == 2 and "must be a positive integer" in bad.stderr
    bad = _run(tmp_path, "--child", "tilegraph", "--workload", "circulation", "--t", "25",
               "--shrink", "32", timeout=120)
    assert bad.returncode != 0 and "not a whole number of days" in bad.stderr
    bad = _run(tmp_path, "--child", "nosuch", "--workload", "circulation", "--t", "24",
               timeout=120)
    assert bad.returncode != 0 and "unknown system 'nosuch'" in bad.stderr
