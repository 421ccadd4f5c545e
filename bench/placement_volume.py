"""Simulated communication volume of a blocked matmul C = A @ B (n blocks per side, default
32) on p = 4, 16, 64, 256 workers: tilegraph's placement against round-robin placement of the
tasks and against SUMMA's volume for the same initial distribution of A and B.
Target: tilegraph <= 1.1x SUMMA's bytes and far below round-robin.

SUMMA computes C[i, j] on the worker of grid cell (i mod D, j mod C), so every block of A must
reach each worker of one grid row and every block of B each worker of one grid column; its
volume, for the inputs where they are, is the number of those workers that do not hold the
block already. The gather of C to one worker is left out of all three (it is the same for
any placement that computes C where SUMMA does). Nothing is computed; blocks are 1000 x 1000
float64 (7.6 MiB). Also prints the simulated makespan of tilegraph's placement.
Run: ``python bench/placement_volume.py [--blocks 32] [--workers 4 16 64 256]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tilegraph as tg
from tilegraph.algebra.demand import lower
from tilegraph.plan.place import grid_shape, grid_workers, place
from tilegraph.plan.simulate import communication_volume, simulate


def summa_volume(graph, placement: np.ndarray, nb: int, p: int) -> int:
    """Bytes SUMMA moves for the inputs as ``placement`` put them."""
    d, c = grid_shape(p)
    kinds, coords, keys = graph.meta["kind"], graph.meta["coords"], graph.keys
    nbytes = graph.meta["nbytes"]
    rows = [grid_workers([(r, j) for j in range(nb)], p) for r in range(d)]
    cols = [grid_workers([(i, s) for i in range(nb)], p) for s in range(c)]
    total = 0
    for t, kind in enumerate(kinds):
        if kind != "random":
            continue
        i, j = coords[t]
        left = keys[t][0] == _left_name
        needed = set(rows[i % d].tolist()) if left else set(cols[j % c].tolist())
        total += nbytes[t] * len(needed - {int(placement[t])})
    return total


_left_name = ""


def main() -> int:
    global _left_name
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=32)
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 16, 64, 256])
    args = parser.parse_args()
    nb, bs = args.blocks, 1000
    a = tg.random.random((nb * bs, nb * bs), chunks=bs, seed=1)
    b = tg.random.random((nb * bs, nb * bs), chunks=bs, seed=2)
    _left_name = a.collection.name
    g = lower([(a @ b).collection]).build()
    print(f"matmul of {nb} x {nb} blocks of {bs} x {bs} float64: {len(g):,} tasks "
          "(volumes without the gather of C)")
    print(f"{'p':>4} {'grid':>7} {'tilegraph':>11} {'SUMMA':>11} {'round-robin':>12} "
          f"{'tg/SUMMA':>9} {'rr/tg':>7} {'makespan':>9} {'place s':>8}")
    ok = True
    for p in args.workers:
        t0 = time.perf_counter()
        where = place(g, p)
        t_place = time.perf_counter() - t0
        ours, _ = communication_volume(g, where, gather_to=None)
        summa = summa_volume(g, where, nb, p)
        robin = np.arange(len(g), dtype=np.int64) % p
        rr, _ = communication_volume(g, robin, gather_to=None)
        sim = simulate(g, where, p)
        ratio = ours / summa if summa else float("nan")
        ok &= ratio <= 1.1
        d, c = grid_shape(p)
        print(f"{p:>4} {f'{d}x{c}':>7} {ours / 2**30:>8.1f}GiB {summa / 2**30:>8.1f}GiB "
              f"{rr / 2**30:>9.1f}GiB {ratio:>9.3f} {rr / ours:>7.1f} "
              f"{sim.makespan:>8.2f}s {t_place:>8.3f}")
    print("target (tilegraph <= 1.1x SUMMA at every p):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
