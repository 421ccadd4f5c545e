"""Thin SVD of a tall-skinny random matrix (n x c, c = min(256, n // 10)): TSQR, then the
SVD of the small R.

    python examples/svd.py --n 200000
"""

import tilegraph as tg
from tilegraph.workloads import run_example


def build(n: int, block: int) -> tuple[tg.Array, tg.Array, tg.Array]:
    c = max(1, min(256, n // 10))
    a = tg.random.random((n, c), chunks=(block, -1), seed=0)
    return tg.linalg.svd(a)  # u (n x c), s (c,), vt (c x c)


if __name__ == "__main__":
    raise SystemExit(run_example("svd", build))
