"""A chain that cannot fit: ``((A @ B) @ C).sum()`` with n x n random matrices and a memory
limit of one matrix's size, so the intermediate products must spill. Checks the result
against NumPy on the same matrices and reports time, peak bytes held, bytes spilled.
Run: ``python bench/spill_chain.py [--n 8000] [--block 2000]``.
"""

from __future__ import annotations

import argparse
import resource
import time

import tilegraph as tg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--block", type=int, default=2000)
    args = parser.parse_args()
    n, bs = args.n, args.block
    limit = n * n * 8
    a = tg.random.random((n, n), chunks=bs, seed=1)
    b = tg.random.random((n, n), chunks=bs, seed=2)
    c = tg.random.random((n, n), chunks=bs, seed=3)
    expr = ((a @ b) @ c).sum()
    t0 = time.perf_counter()
    value = float(expr.compute(memory_limit=limit))
    elapsed = time.perf_counter() - t0
    summary = tg.last_run()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"((A @ B) @ C).sum(), n={n}, blocks {bs}, memory_limit={limit / 1e6:.0f} MB "
          f"(one matrix)")
    print(f"  tilegraph {elapsed:.1f} s; {summary}")
    print(f"  peak RSS of the process so far: {peak_rss / 1e9:.2f} GB")
    an, bn, cn = a.compute(), b.compute(), c.compute()
    t0 = time.perf_counter()
    ref = float(((an @ bn) @ cn).sum())
    t_np = time.perf_counter() - t0
    ok = abs(value - ref) <= 1e-9 * abs(ref) and summary.spilled_bytes > 0
    print(f"  numpy in memory {t_np:.1f} s; results equal: {abs(value - ref) <= 1e-9 * abs(ref)}")
    print("target (completes, spills, correct):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
