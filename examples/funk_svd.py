"""Funk SVD: sparse ratings (n users x n/2 items, 1% observed, values 1 to 5) factorised as
P Q^T with rank k = min(32, n // 20), by 5 full-batch gradient steps on the observed
entries. The ratings come as SciPy sparse matrices, as they would from a file.

    python examples/funk_svd.py --n 10000
"""

import tilegraph as tg
from tilegraph.workloads import DENSITY, funk_svd, ratings, run_example


def build(n: int, block: int) -> tuple[tg.Array, tg.Array]:
    users, items, k = n, max(1, n // 2), max(1, min(32, n // 20))
    R, observed = ratings(users, items)  # SciPy CSR arrays: ratings and their 0/1 mask
    R, M = tg.from_scipy(R, chunks=block), tg.from_scipy(observed, chunks=block)
    P = tg.random.random((users, k), chunks=(block, -1), seed=2) * 0.1
    Q = tg.random.random((items, k), chunks=(block, -1), seed=3) * 0.1
    lr = 0.1 / max(1.0, DENSITY * max(users, items))
    return funk_svd(R, M, P, Q, epochs=5, lr=lr, reg=0.02)  # P, Q


if __name__ == "__main__":
    raise SystemExit(run_example("funk_svd", build))
