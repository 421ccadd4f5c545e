"""Cholesky factor L (a = L L^T) of a random n x n symmetric positive definite matrix.

    python examples/cholesky.py --n 6000 --block 1500
"""

import tilegraph as tg
from tilegraph.workloads import run_example


def build(n: int, block: int) -> tg.Array:
    b = tg.random.random((n, n), chunks=block, seed=0)
    a = (b + b.T) * 0.5 + n * tg.eye(n, chunks=block)  # diagonally dominant: positive definite
    return tg.linalg.cholesky(a)


if __name__ == "__main__":
    raise SystemExit(run_example("cholesky", build))
