"""A run whose resident set tests/runtime/test_rss.py measures from outside the process:
``python rss_job.py WORKLOAD LIMIT``. It runs the workload under ``memory_limit=LIMIT``
with two workers, prints one line ``RECORD {json}`` (the run's figures) and waits for a
line on stdin, so that the parent reads the process's peak resident set (VmHWM) while it
is alive; then it checks its values against NumPy (the check's arrays would raise the
peak) and prints ``CHECK ok`` or ``CHECK wrong``.

Workloads (each about 250 MB of blocks made as it runs):

- ``anomaly``: coiled's test_anom_mean with arrays: random (120, 262144) in one-row blocks
  of 2 MiB, reshaped to (10, 12, 262144), the climatology over axis 0, the anomaly against
  it, its mean over (0, 1);
- ``wide``: zeros (2_000_000, 16) in column blocks of 16 MB, summed along the rows;
- ``quadratic``: the time means of u*u, v*v and u*v, u and v random (100, 1, 300, 500) in
  blocks of 10 time steps.
"""

from __future__ import annotations

import json
import sys

import numpy as np

import tilegraph as tg


def workload(name: str) -> tuple[list, object]:
    """The arrays to compute and a function of their values that checks them."""
    if name == "anomaly":
        x = tg.random.random((120, 262144), chunks=(1, 262144), seed=3)
        r = x.reshape((10, 12, 262144))

        def check(got):
            xs = x.compute(backend="sync").reshape(10, 12, 262144)
            return np.allclose(got[0], (xs - xs.mean(axis=0)).mean(axis=(0, 1)))

        return [(r - r.mean(axis=0)).mean(axis=(0, 1))], check
    if name == "wide":
        return ([(tg.zeros((2_000_000, 16), chunks=(-1, 1)) + 1).sum(axis=1)],
                lambda got: bool(np.all(got[0] == 16)))
    if name == "quadratic":
        shape, chunks = (100, 1, 300, 500), (10, 1, 300, 500)
        u = tg.random.random(shape, chunks=chunks, seed=1)
        v = tg.random.random(shape, chunks=chunks, seed=2)

        def check(got):
            un, vn = u.compute(backend="sync"), v.compute(backend="sync")
            return all(np.allclose(g, w) for g, w in zip(
                got, [(un * un).mean(0), (vn * vn).mean(0), (un * vn).mean(0)], strict=True))

        return [(u * u).mean(axis=0), (v * v).mean(axis=0), (u * v).mean(axis=0)], check
    raise SystemExit(f"unknown workload {name!r}")


def main(name: str, limit: str) -> None:
    arrays, check = workload(name)
    got = tg.compute(*arrays, memory_limit=limit, workers=2)
    run = tg.last_run()
    record = {"spilled": run.spilled_bytes, "peak_rss": run.peak_rss,
              "baseline": run.rss_baseline, "limit": run.memory_limit,
              "held": run.peak_bytes, "remade": run.remade, "text": str(run)}
    print("RECORD " + json.dumps(record), flush=True)
    sys.stdin.readline()
    print("CHECK " + ("ok" if check(got) else "wrong"), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
