"""Scheduler overhead in microseconds per task, tilegraph against dask, in one process run.

Each graph's tasks do almost nothing, so wall time / tasks is what the scheduler costs
(reading the graph, ordering, running, releasing). Shapes:

- chain:   50,000 tasks, each consuming the previous one
- fan-in:  50,000 independent tasks and one task summing them all
- matmul:  a blocked matrix product as a dict of tiny blocks (32^3 block products + sums)
- dask.array: the graph dask.array itself makes for ``(x @ y + x).sum()`` with tiny chunks

Targets: tilegraph threads <= 15 us/task, and >= 5x less overhead than dask's threaded
scheduler on every shape. Run: ``python bench/scheduler_overhead.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

import tilegraph


def inc(x):
    return x + 1


def chain(n=50_000):
    dsk = {("x", 0): 0}
    dsk.update({("x", i): (inc, ("x", i - 1)) for i in range(1, n)})
    return dsk, ("x", n - 1)


def fan_in(n=50_000):
    dsk = {("x", i): (inc, i) for i in range(n)}
    dsk["total"] = (sum, [("x", i) for i in range(n)])
    return dsk, "total"


def blocked_matmul(nb=32, bs=2):
    rng = np.random.default_rng(0)
    dsk = {}
    for i in range(nb):
        for j in range(nb):
            dsk[("A", i, j)] = rng.random((bs, bs))
            dsk[("B", i, j)] = rng.random((bs, bs))
    for i in range(nb):
        for j in range(nb):
            for k in range(nb):
                dsk[("P", i, j, k)] = (np.dot, ("A", i, k), ("B", k, j))
            dsk[("C", i, j)] = (sum, [("P", i, j, k) for k in range(nb)])
    return dsk, [[("C", i, j) for j in range(nb)] for i in range(nb)]


def dask_array_graph():
    import dask.array as da

    x = da.ones((400, 400), chunks=10)
    y = da.ones((400, 400), chunks=10)
    expr = (x @ y + x).sum()
    dsk = dict(expr.__dask_graph__())
    return dsk, expr.__dask_keys__()


def schedulers():
    import dask.local
    import dask.threaded

    return {
        "tilegraph threads": lambda d, k: tilegraph.get(d, k, backend="threads"),
        "tilegraph sync": lambda d, k: tilegraph.get(d, k, backend="sync"),
        "dask threaded": dask.threaded.get,
        "dask sync": dask.local.get_sync,
    }


def best_time(fn, dsk, keys, repeat):
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn(dsk, keys)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shapes = {"chain": chain(), "fan-in": fan_in(), "matmul dict": blocked_matmul(),
              "dask.array": dask_array_graph()}
    scheds = schedulers()
    small = fan_in(100)
    for fn in scheds.values():  # warm up imports and caches
        fn(*small)
    names = list(scheds)
    print(f"{'shape':12s} {'tasks':>7s} " + " ".join(f"{n:>18s}" for n in names)
          + "  dask-threaded/tilegraph-threads")
    ok = True
    for shape, (dsk, keys) in shapes.items():
        us = {}
        for name, fn in scheds.items():
            us[name] = best_time(fn, dsk, keys, args.repeat) / len(dsk) * 1e6
        ratio = us["dask threaded"] / us["tilegraph threads"]
        meets = us["tilegraph threads"] <= 15 and ratio >= 5
        ok &= meets
        print(f"{shape:12s} {len(dsk):7d} " + " ".join(f"{us[n]:15.1f} us" for n in names)
              + f"  {ratio:6.1f}x  {'meets' if meets else 'MISSES'} target")
    print("targets (<= 15 us/task, >= 5x dask threaded):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
