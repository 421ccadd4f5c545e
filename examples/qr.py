"""Reduced QR of a tall-skinny random matrix (n x c, c = min(256, n // 10)) by TSQR: the
rows are cut into blocks, the columns kept whole.

    python examples/qr.py --n 200000
"""

import tilegraph as tg
from tilegraph.workloads import run_example


def build(n: int, block: int) -> tuple[tg.Array, tg.Array]:
    c = max(1, min(256, n // 10))
    a = tg.random.random((n, c), chunks=(block, -1), seed=0)
    return tg.linalg.qr(a)  # q (n x c), r (c x c)


if __name__ == "__main__":
    raise SystemExit(run_example("qr", build))
