"""Blocked matmul, tilegraph against one NumPy ``A @ B`` and dask.array, in one process run.

For each n and block size: GFLOP/s of NumPy (BLAS on all cores), of tilegraph's threads
backend and of dask.array with the same blocks, each the best of ``--repeat`` runs, inputs
in memory and the result assembled into one NumPy array. Targets: tilegraph >= 0.95x NumPy
at blocks >= 1000, and ahead of dask at every block size.
Run: ``python bench/matmul.py [--sizes 4000 8000] [--blocks 500 1000 2000] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

import tilegraph as tg


def best(fn, repeat: int) -> float:
    t = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000])
    parser.add_argument("--blocks", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    import dask
    import dask.array as da

    print(f"{'n':>6} {'block':>6} {'numpy':>9} {'tilegraph':>10} {'dask':>9}   "
          f"{'tg/numpy':>8} {'dask/numpy':>10} {'tg/dask':>8}")
    ok = True
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a = rng.random((n, n))
        b = rng.random((n, n))
        gflop = 2 * n**3 / 1e9
        t_np = best(lambda a=a, b=b: a @ b, args.repeat)
        ref = a @ b
        for bs in args.blocks:
            ta, tb = tg.from_numpy(a, chunks=bs), tg.from_numpy(b, chunks=bs)
            out = (ta @ tb).compute()
            assert np.allclose(out, ref), "tilegraph result differs from NumPy"
            del out
            t_tg = best(lambda ta=ta, tb=tb: (ta @ tb).compute(), args.repeat)
            xa, xb = da.from_array(a, chunks=bs), da.from_array(b, chunks=bs)
            with dask.config.set(scheduler="threads"):
                t_da = best(lambda xa=xa, xb=xb: (xa @ xb).compute(), args.repeat)
            r_np, r_da = t_np / t_tg, t_da / t_tg
            meets = r_da > 1 and (bs < 1000 or r_np >= 0.95)
            ok &= meets
            print(f"{n:6d} {bs:6d} {gflop / t_np:7.1f} GF {gflop / t_tg:8.1f} GF "
                  f"{gflop / t_da:7.1f} GF   {r_np:8.2f} {t_np / t_da:10.2f} {r_da:8.2f}"
                  f"  {'meets' if meets else 'MISSES'}")
        del a, b, ref
    print("targets (>= 0.95x NumPy at blocks >= 1000, ahead of dask everywhere):",
          "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
