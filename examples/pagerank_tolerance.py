"""PageRank (damping 0.85) iterated until the ranks change by less than ``--tol`` (L1), with
``tg.while_loop``: one iteration is planned once and its plan reused every time, and the
random graph is made in the first iteration only. Checked against the same loop in
NumPy/SciPy at a small size.

    python examples/pagerank_tolerance.py --n 20000 --tol 1e-10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sps

import tilegraph as tg
from tilegraph.array.loops import last_loop_iterations
from tilegraph.workloads import DENSITY


def pagerank_to_tolerance(A, r0, tol: float, damping: float = 0.85, xp=tg):
    """Ranks of the graph with weighted adjacency ``A`` (``A[i, j]``: edge j -> i) from
    ``r0`` (n x 1) until the L1 change is at most ``tol``; works on tilegraph arrays and,
    with ``xp=None``, on NumPy/SciPy ones."""
    n = A.shape[0]
    outdegree = A.sum(axis=0).reshape(n, 1)
    dangling = outdegree == 0
    inverse = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, outdegree))

    def step(r):
        leaked = (dangling * r).sum()
        return damping * (A @ (r * inverse)) + (damping * leaked + (1.0 - damping)) / n

    if xp is tg:
        def body(r, change):
            new = step(r)
            return new, abs(new - r).sum()

        r, _ = tg.while_loop(lambda r, change: change > tol, body,
                             [r0, tg.asarray(np.array(np.inf))])
        return r, last_loop_iterations()
    r, iterations = r0, 0
    while True:
        new = step(r)
        iterations += 1
        change, r = np.abs(new - r).sum(), new
        if not change > tol:
            return r, iterations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--block", type=int, default=2000)
    parser.add_argument("--tol", type=float, default=1e-10)
    parser.add_argument("--backend", default="threads", choices=["threads", "sync"])
    args = parser.parse_args()
    n, block = args.n, args.block
    A = tg.sparse.random((n, n), density=DENSITY, chunks=block, seed=0)
    r0 = tg.full((n, 1), 1.0 / n, chunks=(block, 1))
    with tg.config.set(backend=args.backend):
        t0 = time.perf_counter()
        r, iterations = pagerank_to_tolerance(A, r0, args.tol)
        ranks = r.compute()
        seconds = time.perf_counter() - t0
    print(f"pagerank n={n}: {iterations} iterations to tolerance {args.tol:g} in "
          f"{seconds:.3f} s; ranks sum to {ranks.sum():.12f}")
    # the check: identical small inputs, NumPy/SciPy loop
    m = sps.random_array((300, 300), density=0.02, rng=1, format="csr")
    want, want_iters = pagerank_to_tolerance(m, np.full((300, 1), 1 / 300), args.tol,
                                             xp=None)
    got, got_iters = pagerank_to_tolerance(tg.from_scipy(m, chunks=(70, 70)),
                                           tg.full((300, 1), 1 / 300, chunks=(70, 1)),
                                           args.tol)
    ok = got_iters == want_iters and np.allclose(got.compute(), want, rtol=1e-10)
    print("check against NumPy/SciPy:", "ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
