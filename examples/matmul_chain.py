"""The chain A @ B @ C @ D of four random n x n matrices, multiplied left to right.

    python examples/matmul_chain.py --n 3000 --block 750
"""

import tilegraph as tg
from tilegraph.workloads import matmul_chain, run_example


def build(n: int, block: int) -> tg.Array:
    a, b, c, d = (tg.random.random((n, n), chunks=block, seed=s) for s in range(4))
    return matmul_chain(a, b, c, d)  # ((a @ b) @ c) @ d


if __name__ == "__main__":
    raise SystemExit(run_example("matmul_chain", build))
