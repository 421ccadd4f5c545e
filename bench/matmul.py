"""Blocked matmul, tilegraph against one NumPy ``A @ B`` and dask.array, in one process run.

For each n and block size: GFLOP/s of NumPy (BLAS on all cores), of tilegraph's threads
backend and of dask.array with the same blocks, each the best of ``--repeat`` runs, inputs
in memory and the result assembled into one NumPy array. The runs of the three alternate
(NumPy, tilegraph, dask, NumPy, ...), so that on a shared machine they meet the same load.
Targets: tilegraph >= 0.95x NumPy at blocks >= 1000, and ahead of dask at every block size
(``--no-dask`` skips dask and that target).
Run: ``python bench/matmul.py [--sizes 4000 8000] [--blocks 500 1000 2000] [--repeat 2]``
(the first line printed names the tilegraph it measures: run from a source tree with
``PYTHONPATH=.``).
"""

from __future__ import annotations

import argparse

import numpy as np
from measure import best_alternating

import tilegraph as tg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 8000])
    parser.add_argument("--blocks", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-dask", action="store_true", help="time NumPy and tilegraph only")
    args = parser.parse_args()
    import dask
    import dask.array as da

    print(f"tilegraph from {tg.__file__}")
    print(f"{'n':>6} {'block':>6} {'numpy':>9} {'tilegraph':>10} {'dask':>9}   "
          f"{'tg/numpy':>8} {'dask/numpy':>10} {'tg/dask':>8}")
    ok = True
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a = rng.random((n, n))
        b = rng.random((n, n))
        gflop = 2 * n**3 / 1e9
        ref = a @ b
        for bs in args.blocks:
            ta, tb = tg.from_numpy(a, chunks=bs), tg.from_numpy(b, chunks=bs)
            out = (ta @ tb).compute()
            assert np.allclose(out, ref), "tilegraph result differs from NumPy"
            del out
            fns = {"numpy": lambda a=a, b=b: a @ b,
                   "tilegraph": lambda ta=ta, tb=tb: (ta @ tb).compute()}
            if not args.no_dask:
                xa, xb = da.from_array(a, chunks=bs), da.from_array(b, chunks=bs)

                def run_dask(xa=xa, xb=xb):
                    with dask.config.set(scheduler="threads"):
                        return (xa @ xb).compute()

                fns["dask"] = run_dask
            t = best_alternating(fns, args.repeat)
            t_np, t_tg, t_da = t["numpy"], t["tilegraph"], t.get("dask", float("nan"))
            r_np, r_da = t_np / t_tg, t_da / t_tg
            meets = (args.no_dask or r_da > 1) and (bs < 1000 or r_np >= 0.95)
            ok &= meets
            print(f"{n:6d} {bs:6d} {gflop / t_np:7.1f} GF {gflop / t_tg:8.1f} GF "
                  f"{gflop / t_da:7.1f} GF   {r_np:8.2f} {t_np / t_da:10.2f} {r_da:8.2f}"
                  f"  {'meets' if meets else 'MISSES'}")
        del a, b, ref
    print("targets (>= 0.95x NumPy at blocks >= 1000"
          f"{'' if args.no_dask else ', ahead of dask everywhere'}):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
