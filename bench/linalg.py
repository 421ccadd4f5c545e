"""Blocked linear algebra against NumPy and Dask, same process run, inputs in memory:
Cholesky at n = 8000 (blocks 1000 and 2000; target >= 0.9x NumPy and ahead of Dask), TSQR of
a 200000 x 200 matrix (target >= 1.0x NumPy's qr), and the tall-skinny SVD of the same
matrix (target >= 0.9x NumPy's svd). Ratios are speed ratios (NumPy seconds / tilegraph
seconds). First, the planning time of Cholesky over 64 x 64 blocks (shapes only: lowering
its ~52,000 tasks and building the TaskGraph, the garbage collector paused as the planner
does). Before timing, memory as large as the working set is touched once: on this
virtual machine the first touch of fresh memory is many times slower than any later one,
and it would otherwise be charged to whichever system runs first.
Then the QR of a square 4000 x 4000 matrix in tiles of 1000 (tiled Householder; dask has no
QR for a matrix of several column blocks).
Run: ``python bench/linalg.py [--n 8000] [--blocks 1000 2000] [--repeat 2] [--plan-blocks 64]
[--square-qr 4000 1000]``.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from measure import touch_memory

import tilegraph as tg
from tilegraph.algebra import lower


def best(fn, repeat: int) -> float:
    out = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        del result
        out = dt if out is None else min(out, dt)
    return out


def plan_graph(x: tg.Array):
    """The TaskGraph of ``x`` (lowered and built, the garbage collector paused)."""
    gc.disable()
    try:
        return lower([x.collection]).build()
    finally:
        gc.enable()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--blocks", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--tall", type=int, nargs=2, default=[200000, 200])
    parser.add_argument("--tall-block", type=int, default=25000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--plan-blocks", type=int, default=64)
    parser.add_argument("--square-qr", type=int, nargs=2, default=[4000, 1000],
                        metavar=("N", "BLOCK"), help="the square QR: size and tile")
    args = parser.parse_args()
    nbp = args.plan_blocks
    shape_only = tg.ones((100 * nbp, 100 * nbp), chunks=100)
    t_plan = best(lambda: plan_graph(tg.linalg.cholesky(shape_only)), max(5, args.repeat))
    ntasks = len(plan_graph(tg.linalg.cholesky(shape_only)))
    print(f"Planning Cholesky over {nbp} x {nbp} blocks: {ntasks} tasks in {t_plan:.3f} s")
    try:
        import dask
        import dask.array as da
    except ImportError:
        da = None
    n = args.n
    touch_memory(3 * 8 * n * n)  # the memory the runs will use (see the module docstring)
    rng = np.random.default_rng(0)
    a = rng.random((n, n))
    spd = a @ a.T + n * np.eye(n)
    del a
    ok = True
    print(f"Cholesky n={n} (best of {args.repeat}, seconds)")
    t_np = best(lambda: np.linalg.cholesky(spd), args.repeat)
    import scipy.linalg

    t_sp = best(lambda: scipy.linalg.cholesky(spd, lower=True, check_finite=False),
                args.repeat)
    print(f"  numpy {t_np:.3f}; scipy.linalg.cholesky (LAPACK potrf, no checks) {t_sp:.3f}")
    for block in args.blocks:
        x = tg.from_numpy(spd, chunks=block)
        t_tg = best(lambda x=x: tg.linalg.cholesky(x).compute(), args.repeat)
        line = (f"  blocks {block}: tilegraph {t_tg:.3f} ({t_np / t_tg:.2f}x NumPy, "
                f"{t_sp / t_tg:.2f}x SciPy)")
        ok &= t_np / t_tg >= 0.9
        if da is not None:
            d = da.from_array(spd, chunks=block)
            with dask.config.set(scheduler="threads"):
                t_da = best(lambda d=d: da.linalg.cholesky(d, lower=True).compute(),
                            args.repeat)
            line += f", dask {t_da:.3f} ({t_np / t_da:.2f}x NumPy); tilegraph/dask " \
                    f"{t_da / t_tg:.2f}x"
            ok &= t_da >= t_tg
        print(line)
    spd = None  # free it before the tall matrix
    m, k = args.tall
    tall = rng.random((m, k))
    tb = args.tall_block
    print(f"TSQR and SVD of {m} x {k}, row blocks of {tb}")
    x = tg.from_numpy(tall, chunks=(tb, k))
    for label, np_fn, tg_fn, da_fn, target in (
        ("qr", lambda: np.linalg.qr(tall),
         lambda: tg.compute(*tg.linalg.qr(x)),
         lambda d: da.compute(*da.linalg.qr(d)), 1.0),
        ("svd", lambda: np.linalg.svd(tall, full_matrices=False),
         lambda: tg.compute(*tg.linalg.svd(x)),
         lambda d: da.compute(*da.linalg.svd(d)), 0.9),
    ):
        t_np = best(np_fn, args.repeat)
        t_tg = best(tg_fn, args.repeat)
        line = f"  {label}: numpy {t_np:.3f}, tilegraph {t_tg:.3f} ({t_np / t_tg:.2f}x NumPy)"
        ok &= t_np / t_tg >= target
        if da is not None:
            d = da.from_array(tall, chunks=(tb, k))
            with dask.config.set(scheduler="threads"):
                t_da = best(lambda d=d, f=da_fn: f(d), args.repeat)
            line += f", dask {t_da:.3f} ({t_np / t_da:.2f}x NumPy)"
        print(line)
    tall = x = None
    n, qb = args.square_qr
    sq = rng.random((n, n))
    xs = tg.from_numpy(sq, chunks=qb)
    t_np = best(lambda: np.linalg.qr(sq), args.repeat)
    t_tg = best(lambda: tg.compute(*tg.linalg.qr(xs)), args.repeat)
    line = (f"QR of {n} x {n} (tiled Householder, tiles of {qb}): numpy {t_np:.3f}, "
            f"tilegraph {t_tg:.3f} ({t_np / t_tg:.2f}x NumPy)")
    if da is not None:
        line += "; dask has no QR of a matrix with several column blocks"
    print(line)
    print("targets (Cholesky >= 0.9x NumPy and ahead of dask, TSQR >= 1.0x, SVD >= 0.9x):",
          "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
