"""Least squares by gradient descent on a tall random X (n x d, d = min(500, n // 20)):
10 steps of w <- w - lr * X^T (X w - y) / n.

    python examples/linear_regression.py --n 200000 --backend threads
"""

import tilegraph as tg
from tilegraph.workloads import linear_regression, run_example


def build(n: int, block: int) -> tg.Array:
    d = max(1, min(500, n // 20))
    X = tg.random.random((n, d), chunks=(block, -1), seed=0)  # row blocks, all columns
    y = tg.random.random((n, 1), chunks=(block, 1), seed=1)
    w = tg.zeros((d, 1), chunks=(-1, 1))
    return linear_regression(X, y, w, iterations=10)  # one lazy graph for all 10 steps


if __name__ == "__main__":
    raise SystemExit(run_example("linear_regression", build))
