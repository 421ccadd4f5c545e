"""bench/memory_promise.py at tiny sizes: each workload runs in its own process, its values
are NumPy's, and the record has what the table prints (spilled, made again, the peak RSS
read from outside the process)."""

import pytest
from _bench_modules import bench_module

promise = bench_module("memory_promise")

TINY = {
    "anomaly": {"t": 48, "x": 4096},
    "wide": {"n": 20_000, "m": 12},
    "quadratic": {"t": 30, "y": 20, "x": 30},
}


@pytest.mark.parametrize("name", sorted(TINY))
def test_each_workload_runs_in_its_own_process_and_gives_numpys_values(name):
    record = promise.run(name, TINY[name], "100MB", check=True)
    assert "error" not in record, record
    assert record["check"] == "ok"
    assert record["spilled"] == 0 and record["limit"] == 100 * 10**6
    assert record["peak_rss"] > record["baseline"] > 0
    # the kernel raises its high-water mark (VmHWM) lazily, when pages are unmapped, not
    # when malloc_trim hands pages back (madvise): a sample taken just before such a
    # release may be a few pages above it
    assert record["hwm"] >= 0.95 * record["peak_rss"]


def test_a_workload_that_fails_is_reported_not_raised():
    record = promise.run("anomaly", {"t": 50, "x": 16}, "100MB", check=True)
    assert "error" in record and "reshape" in record["error"].lower()
