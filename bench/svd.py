"""The SVD of a square matrix in tiles against NumPy, same process run: ``tg.linalg.svd``
(numpywren's BDFAC, the LambdaPACK program ``library.svd``: tiled QR/LQ of the panels down
to a band one tile wide, then the band in one task, the panels' reflectors applied to its
vectors) on 2 worker threads against ``np.linalg.svd(a, full_matrices=False)`` (LAPACK's
gesdd, BLAS on every core). Prints the speed ratio (NumPy seconds / tilegraph seconds; goal
>= 1.0x) and the largest relative difference of the singular values (goal 1e-10), with
vectors and with ``compute_uv=False``. ``--serverless W`` also runs the program unexpanded
on a serverless pool of ``W`` local workers (``run_program``, tiles given by value).

The band task finds the values alone by narrowing the band (successive band reduction,
BLAS-3) and LAPACK's gbbrd and bdsqr (``tilegraph.algebra.band``): about 8 k^2 b flops for
tiles of b, against the dense SVD's 8/3 k^3. With vectors it is gesdd on the dense k x k
band, which costs about what NumPy's whole SVD does, so that ratio stays below 1.0x; the
parallel stages are the reduction (about 8/3 k^3 flops in BLAS-3 tile kernels) and the
vectors (about 4 k^3).

Run: ``python bench/svd.py [--size 6000] [--tile 1000] [--repeat 1] [--serverless 2]
[--values-only]``.
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from measure import touch_memory

import tilegraph as tg


def timed(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        out = None
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def rel_err(s: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(s - want) / want))


def serverless(a: np.ndarray, tile: int, workers: int, want: np.ndarray,
               modes: tuple[int, ...]) -> None:
    from tilegraph.lambdapack import library
    from tilegraph.serverless import Pool, run_program

    n = a.shape[0]
    edges = [*range(0, n, tile), n]
    nb = len(edges) - 1
    tiles = {(i, j): np.ascontiguousarray(a[edges[i]:edges[i + 1], edges[j]:edges[j + 1]])
             for i in range(nb) for j in range(nb)}
    with Pool(workers=workers) as pool:
        for uv in modes:
            dag = library.svd.bind(M=nb, N=nb, UV=uv, RL=edges[nb] - edges[nb - 1])
            outs = [("S", (0,))]
            if uv:
                outs += [("U", (i, j)) for i in range(nb) for j in range(nb)]
                outs += [("VH", (i, j)) for i in range(nb) for j in range(nb)]
            t, got = timed(lambda dag=dag, outs=outs: run_program(dag, {"A": tiles}, outs,
                                                                  pool=pool, wait=600.0), 1)
            label = "with vectors" if uv else "values only "
            print(f"  serverless, {workers} workers, {label}: {t:.2f} s "
                  f"({dag.count()} tasks), max rel. error of s "
                  f"{rel_err(got[('S', (0,))], want):.1e}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=6000)
    parser.add_argument("--tile", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--serverless", type=int, default=0, metavar="WORKERS",
                        help="also run the program on a serverless pool of this many workers")
    parser.add_argument("--values-only", action="store_true",
                        help="only the singular values (compute_uv=False)")
    args = parser.parse_args()
    if args.size < 1 or args.tile < 1 or args.repeat < 1 or args.threads < 1:
        parser.error("--size, --tile, --repeat and --threads must be positive")
    n, b = args.size, args.tile
    touch_memory(6 * 8 * n * n)
    a = np.random.default_rng(0).standard_normal((n, n))
    x = tg.from_numpy(a, chunks=b)
    print(f"SVD of a {n} x {n} float64 matrix, tiles of {b}, tilegraph on {args.threads} "
          f"threads (best of {args.repeat}, seconds)")
    ok, goals = True, []
    if not args.values_only:
        t_np, (_, want, _) = timed(lambda: np.linalg.svd(a, full_matrices=False), args.repeat)
        t_tg, (u, s, vt) = timed(lambda: tg.compute(*tg.linalg.svd(x), workers=args.threads),
                                 args.repeat)
        err = rel_err(s, want)
        resid = float(np.abs((u * s) @ vt - a).max() / np.abs(a).max())
        del u, vt
        print(f"  with vectors: numpy {t_np:.2f}, tilegraph {t_tg:.2f} ({t_np / t_tg:.2f}x "
              f"NumPy); max rel. error of s {err:.1e}, of u diag(s) vt {resid:.1e}")
        ok &= err <= 1e-10
        goals.append(("with vectors", t_np / t_tg))
    t_np0, want0 = timed(lambda: np.linalg.svd(a, compute_uv=False), args.repeat)
    t_tg0, s0 = timed(lambda: tg.linalg.svd(x, compute_uv=False).compute(
        workers=args.threads), args.repeat)
    err0 = rel_err(s0, want0)
    print(f"  values only:  numpy {t_np0:.2f}, tilegraph {t_tg0:.2f} ({t_np0 / t_tg0:.2f}x "
          f"NumPy); max rel. error of s {err0:.1e}")
    ok &= err0 <= 1e-10
    goals.append(("values only", t_np0 / t_tg0))
    if args.serverless:
        serverless(a, b, args.serverless, want0, (0,) if args.values_only else (1, 0))
    for label, ratio in goals:
        print(f"speed goal (>= 1.0x NumPy), {label}:", "met" if ratio >= 1.0 else
              "not met" + (" (the band's vectors are one dense gesdd; see the module "
                           "docstring)" if label == "with vectors" else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
