"""The cost of a small slice of a large lazy array: tilegraph plans the blocks the slice
reads (culling before planning), dask builds the whole graph and culls it (``cull`` of its
high-level graph) when it computes. Same program text for both, in one run.

Cases (``n`` x ``n`` float64 random inputs in ``block`` x ``block`` blocks):

- ``map_overlap``: a 5-point Laplacian with ``depth=1`` (boundary "none"), 10 elements of
  one column across a block boundary (``y[95:105, 99]`` at block 100): the case of a
  10000^2 array in 100^2 blocks that planned for seconds before;
- ``elementwise``: ``((x + 1) * y - x / 2) ** 2`` of two inputs, a 10 x 10 corner;
- ``matmul row``: ``(a @ b)[:block]``, one row of output blocks (it reads a row of ``a``'s
  blocks and all of ``b``; ``n`` is a quarter of the others' by default);
- ``sum of slice``: ``x[:, k:k+10].sum(axis=0)`` (a reduction along one axis of a slice);
- ``slice of sum``: ``x.sum(axis=0)[k:k+10]`` (a slice of a reduction along one axis).

Per case and system: seconds to build the lazy arrays; tilegraph's seconds to plan (lower,
fuse, order: nothing runs); the tasks planned (tilegraph, before fusion) or left after the
cull (dask), beside the tasks of everything the slice's expression reaches (``uncut``:
dask's graph before its cull, what tilegraph planned before it culled first); seconds to
compute the slice (building and planning included; dask: its graph, optimisation, cull
and run, on the synchronous scheduler) and their ratio, tilegraph to dask. Timings are the
best of ``--repeat``; run it on a quiet machine. ``--check`` runs every case on small NumPy
inputs shared by both systems and compares the slices with NumPy's instead of timing.

Run: ``python bench/cull.py [--n 10000] [--block 100] [--repeat 3] [--case NAME] [--check]``.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def lap(b: np.ndarray) -> np.ndarray:
    """The 5-point Laplacian of a block with its halo (its edge rows and columns kept)."""
    out = b.copy()
    out[1:-1, 1:-1] = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
                       - 4 * b[1:-1, 1:-1])
    return out


@dataclass(frozen=True)
class Case:
    """A program: ``build(lib, src, n, block)`` gives ``(whole, part)``, where ``lib`` is
    the array namespace (``tilegraph``, ``dask.array``, or ``numpy`` for the reference)
    and ``src(seed, shape)`` an input; ``scale`` multiplies ``--n`` for it."""

    name: str
    build: Callable
    scale: float = 1.0


def _map_overlap(lib, src, n, block):
    x = src(1, (n, n))
    # boundary "none": the array's edges are not extended, so NumPy's is lap of the whole
    y = lap(x) if lib is np else lib.map_overlap(lap, x, depth=1, boundary="none")
    return y, y[block - 5:block + 5, block - 1]


def _elementwise(lib, src, n, block):
    x, y = src(1, (n, n)), src(2, (n, n))
    z = ((x + 1) * y - x / 2) ** 2
    return z, z[:10, :10]


def _matmul_row(lib, src, n, block):
    c = src(1, (n, n)) @ src(2, (n, n))
    return c, c[:block]


def _sum_of_slice(lib, src, n, block):
    x = src(1, (n, n))
    k = n // 2
    return x.sum(axis=0), x[:, k:k + 10].sum(axis=0)


def _slice_of_sum(lib, src, n, block):
    s = src(1, (n, n)).sum(axis=0)
    k = n // 2
    return s, s[k:k + 10]


CASES = {c.name: c for c in (
    Case("map_overlap", _map_overlap),
    Case("elementwise", _elementwise),
    Case("matmul row", _matmul_row, scale=0.25),
    Case("sum of slice", _sum_of_slice),
    Case("slice of sum", _slice_of_sum),
)}


def _random_sources(lib_name: str, block: int) -> Callable:
    """Lazy random inputs of the system (nothing is held in memory)."""
    if lib_name == "tilegraph":
        import tilegraph as tg

        return lambda seed, shape: tg.random.random(shape, chunks=block, seed=seed)
    import dask.array as da

    return lambda seed, shape: da.random.default_rng(seed).random(shape, chunks=block)


def _numpy_sources(lib_name: str, block: int, data: dict) -> Callable:
    """The same NumPy inputs for both systems (``--check``)."""
    def src(seed, shape):
        if (seed, shape) not in data:
            data[seed, shape] = np.random.default_rng(seed).random(shape)
        if lib_name == "tilegraph":
            import tilegraph as tg

            return tg.from_numpy(data[seed, shape], chunks=block)
        import dask.array as da

        return da.from_array(data[seed, shape], chunks=block)

    return src


def _stored(data: dict) -> Callable:
    """The NumPy inputs the systems were given (for NumPy's own result)."""
    return lambda seed, shape: data[seed, shape]


def _best(run: Callable, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - t0)
    return best, out


def tilegraph_row(case: Case, n: int, block: int, repeat: int) -> dict:
    """Build, plan and compute the slice with tilegraph; the tasks it plans, beside those
    of everything its expression reaches."""
    import tilegraph as tg
    from tilegraph.algebra.demand import plan_order
    from tilegraph.array.lowering import lower_arrays, plan_arrays, planning_options
    from tilegraph.plan.order import order

    src = _random_sources("tilegraph", block)
    build, (_, part) = _best(lambda: case.build(tg, src, n, block), repeat)
    options = planning_options("bench/cull.py")

    def plan():
        p = plan_arrays([part], options=options)
        order(p.graph, p.graph.indices(p.outputs))
        return p

    plan_s, _ = _best(plan, repeat)
    tasks = len(lower_arrays([part], options)[0])
    # what planning every collection the slice's expression reaches would emit (dask's
    # graph before its cull)
    uncut = sum(c.count(options) for c in plan_order([part.collection], options))
    compute_s, value = _best(lambda: case.build(tg, src, n, block)[1].compute(), repeat)
    return {"build": build, "plan": plan_s, "tasks": tasks, "uncut": uncut,
            "compute": compute_s, "shape": np.shape(value)}


def dask_row(case: Case, n: int, block: int, repeat: int) -> dict:
    """Compute the slice with dask; its graph's tasks before and after its cull."""
    import dask
    import dask.array as da

    src = _random_sources("dask", block)
    build, (_, part) = _best(lambda: case.build(da, src, n, block), repeat)
    (culled,) = dask.optimize(part)
    compute_s, value = _best(
        lambda: case.build(da, src, n, block)[1].compute(scheduler="sync"), repeat)
    return {"build": build, "tasks": len(culled.__dask_graph__()),
            "uncut": len(part.__dask_graph__()), "compute": compute_s,
            "shape": np.shape(value)}


def check(names: list[str], n: int, block: int) -> None:
    """Every case on the same small NumPy inputs: tilegraph's slice and dask's equal
    NumPy's, and tilegraph plans fewer tasks than the whole array's plan."""
    import dask.array as da

    import tilegraph as tg
    from tilegraph.algebra.demand import LoweringPlan
    from tilegraph.array.lowering import lower_arrays, planning_options

    options = planning_options("bench/cull.py")
    for name in names:
        case, data = CASES[name], {}
        m = max(4 * block, int(n * case.scale) // block * block)
        whole, part = case.build(tg, _numpy_sources("tilegraph", block, data), m, block)
        _, dpart = case.build(da, _numpy_sources("dask", block, data), m, block)
        _, npart = case.build(np, _stored(data), m, block)
        got, want = part.compute(), np.asarray(npart)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(dpart.compute(scheduler="sync"), want, rtol=1e-10,
                                   atol=1e-12)
        tasks = len(lower_arrays([part], options)[0])
        assert tasks < LoweringPlan([whole.collection], options).count(), name
        print(f"{name}: the slice {part.shape} equals NumPy's for both systems "
              f"({tasks} tasks planned)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--check", action="store_true",
                        help="compare with NumPy on small shared inputs instead of timing")
    args = parser.parse_args(argv)
    if args.n < 1 or args.block < 1 or args.repeat < 1:
        parser.error("--n, --block and --repeat must be positive")
    names = args.case or list(CASES)
    if args.check:
        check(names, args.n, args.block)
        return 0
    print(f"{'case':18s} {'system':9s} {'build s':>8s} {'plan s':>8s} {'tasks':>8s} "
          f"{'uncut':>10s} {'compute s':>10s}")
    for name in names:
        case = CASES[name]
        n = max(4 * args.block, int(args.n * case.scale) // args.block * args.block)
        tg_row = tilegraph_row(case, n, args.block, args.repeat)
        dk_row = dask_row(case, n, args.block, args.repeat)
        if tg_row["shape"] != dk_row["shape"]:
            raise AssertionError(f"{name}: slices of shape {tg_row['shape']} and "
                                 f"{dk_row['shape']}")
        label = f"{name} {n}"
        print(f"{label:18s} {'tilegraph':9s} {tg_row['build']:8.3f} {tg_row['plan']:8.3f} "
              f"{tg_row['tasks']:8,d} {tg_row['uncut']:10,d} {tg_row['compute']:10.3f}")
        print(f"{'':18s} {'dask':9s} {dk_row['build']:8.3f} {'-':>8s} "
              f"{dk_row['tasks']:8,d} {dk_row['uncut']:10,d} {dk_row['compute']:10.3f}  "
              f"ratio {tg_row['compute'] / dk_row['compute']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
