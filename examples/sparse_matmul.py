"""A random sparse n x n matrix (1% of entries stored) times a dense n x n matrix.

    python examples/sparse_matmul.py --n 4000 --block 1000
"""

import tilegraph as tg
from tilegraph.workloads import DENSITY, run_example, sparse_matmul


def build(n: int, block: int) -> tg.Array:
    S = tg.sparse.random((n, n), density=DENSITY, chunks=block, seed=0)
    B = tg.random.random((n, n), chunks=block, seed=1)
    return sparse_matmul(S, B)  # S @ B, dense


if __name__ == "__main__":
    raise SystemExit(run_example("sparse_matmul", build))
