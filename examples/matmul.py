"""Dense matrix product C = A @ B of two random n x n matrices.

    python examples/matmul.py --n 4000 --block 1000 --backend threads
"""

import tilegraph as tg
from tilegraph.workloads import matmul, run_example


def build(n: int, block: int) -> tg.Array:
    a = tg.random.random((n, n), chunks=block, seed=0)
    b = tg.random.random((n, n), chunks=block, seed=1)
    return matmul(a, b)  # a @ b


if __name__ == "__main__":
    raise SystemExit(run_example("matmul", build))
