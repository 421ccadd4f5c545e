"""PageRank (damping 0.85, 20 iterations) of a random weighted graph of n nodes with 1% of
all possible edges; nodes without out-edges spread their rank evenly.

    python examples/pagerank.py --n 20000
"""

import tilegraph as tg
from tilegraph.workloads import DENSITY, pagerank, run_example


def build(n: int, block: int) -> tg.Array:
    A = tg.sparse.random((n, n), density=DENSITY, chunks=block, seed=0)  # A[i, j]: j -> i
    r = tg.full((n, 1), 1.0 / n, chunks=(block, 1))
    return pagerank(A, r, iterations=20, damping=0.85)  # ranks, n x 1, summing to 1


if __name__ == "__main__":
    raise SystemExit(run_example("pagerank", build))
