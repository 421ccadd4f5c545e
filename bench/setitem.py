"""Item assignment on an n x n float64 array in blocks, tilegraph against dask.array and
NumPy in the same run.

The same five assignments are made on each system, then the result is computed to a NumPy
array and checked against NumPy's:

- ``x[rows, ::3] = 1`` (a basic region: a band of rows, every third column);
- ``x[:, cols] = v`` (an integer array of 50 columns, a lazy value for tilegraph and dask);
- ``x[x > 0.99] = 0`` (a mask made from the array itself);
- ``x[::-7] *= 2`` (an in-place operator on a strided view);
- ``x[5, 5] = -1`` (one element).

Two figures per system: the time to make the five assignments (planning only for the lazy
systems) and the time to compute the result; for tilegraph also the tasks of the plan, and
how many of them the assignments added (only touched blocks get tasks).
Run: ``python bench/setitem.py [--n 4000] [--block 500] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _assign(x, n: int, value) -> object:
    x[n // 3:n // 3 + n // 10, ::3] = 1.0
    x[:, np.arange(0, n, max(1, n // 50))[:50]] = value
    x[x > 0.99] = 0.0
    x[::-7] *= 2
    x[5, 5] = -1.0
    return x


def _run(make, n: int, value, repeat: int) -> tuple[float, float, np.ndarray, object]:
    best_plan = best_run = float("inf")
    out = lazy = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        lazy = _assign(make(), n, value)
        t1 = time.perf_counter()
        out = np.asarray(lazy.compute() if hasattr(lazy, "compute") else lazy)
        t2 = time.perf_counter()
        best_plan, best_run = min(best_plan, t1 - t0), min(best_run, t2 - t1)
    return best_plan, best_run, out, lazy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--block", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, b = args.n, args.block

    import dask.array as da

    import tilegraph as tg

    a = np.random.default_rng(0).random((n, n))
    v = np.random.default_rng(1).random((n, 50))
    results = {}
    results["numpy"] = _run(lambda: a.copy(), n, v, args.repeat)
    results["dask"] = _run(lambda: da.from_array(a, chunks=b), n,
                           da.from_array(v, chunks=(b, 50)), args.repeat)
    results["tilegraph"] = _run(lambda: tg.from_numpy(a, chunks=b), n,
                                tg.from_numpy(v, chunks=(b, 50)), args.repeat)
    expected = results["numpy"][2]
    print(f"item assignment: {n} x {n} float64, blocks {b} x {b} "
          f"({(n // b) ** 2} blocks), best of {args.repeat}")
    for name, (plan, run, out, _) in results.items():
        ok = np.array_equal(out, expected)
        print(f"  {name:<10} assign {plan * 1e3:8.1f} ms   compute {run * 1e3:8.1f} ms   "
              f"{'matches NumPy' if ok else 'MISMATCH'}")
    tg_lazy = results["tilegraph"][3]
    base = tg.from_numpy(a, chunks=b)
    added = tg_lazy.ntasks - base.ntasks
    print(f"  tilegraph plan: {tg_lazy.ntasks} tasks before fusion, {added} added by the "
          f"assignments (the array has {base.npartitions} blocks)")
    d, t = results["dask"], results["tilegraph"]
    print(f"  ratio dask/tilegraph: assign {d[0] / t[0]:.2f}x, compute {d[1] / t[1]:.2f}x, "
          f"total {(d[0] + d[1]) / (t[0] + t[1]):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
