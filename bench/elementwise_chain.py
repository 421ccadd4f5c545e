"""A fused elementwise chain with a reduction, ``((a + 1) * b - c).sum()`` over n x n random
arrays made block by block, tilegraph against dask.array: time and peak memory.

Each system runs in a fresh subprocess so its peak resident memory (``ru_maxrss``) is its
own. Targets: tilegraph at least as fast as dask, and its peak a small multiple of one block
per worker (the three inputs are never held whole).
Run: ``python bench/elementwise_chain.py [--n 20000] [--block 2000]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def child(system: str, n: int, block: int) -> None:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if system == "tilegraph":
        import tilegraph as tg

        a = tg.random.random((n, n), chunks=block, seed=1)
        b = tg.random.random((n, n), chunks=block, seed=2)
        c = tg.random.random((n, n), chunks=block, seed=3)
        expr = ((a + 1) * b - c).sum()
        t0 = time.perf_counter()
        value = float(expr.compute())
    else:
        import dask
        import dask.array as da

        rng = da.random.default_rng(1)
        a = rng.random((n, n), chunks=block)
        b = rng.random((n, n), chunks=block)
        c = rng.random((n, n), chunks=block)
        expr = ((a + 1) * b - c).sum()
        t0 = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            value = float(expr.compute())
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    expected = n * n * (1.5 * 0.5 - 0.5)  # E[(a+1)b - c] = 1.5*0.5 - 0.5
    assert abs(value - expected) / expected < 0.01, (value, expected)
    print(json.dumps({"elapsed": elapsed, "peak": peak, "base": base}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--block", type=int, default=2000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.n, args.block)
        return 0
    block_bytes = args.block**2 * 8
    print(f"((a + 1) * b - c).sum(), n={args.n}, blocks {args.block} "
          f"({block_bytes / 2**20:.0f} MiB each; each input {args.n**2 * 8 / 2**30:.1f} GiB)")
    res = {}
    for system in ("tilegraph", "dask"):
        out = subprocess.run([sys.executable, __file__, "--child", system, "--n", str(args.n),
                              "--block", str(args.block)], capture_output=True, text=True,
                             check=True)
        res[system] = json.loads(out.stdout.strip().splitlines()[-1])
        r = res[system]
        print(f"  {system:10s} {r['elapsed']:7.2f} s   peak RSS {r['peak'] / 2**20:7.0f} MiB "
              f"= {r['peak'] / block_bytes:5.1f} blocks")
    speed = res["dask"]["elapsed"] / res["tilegraph"]["elapsed"]
    print(f"  tilegraph speed vs dask: {speed:.2f}x")
    from tilegraph.util import cores

    blocks_per_worker = res["tilegraph"]["peak"] / block_bytes / cores()
    ok = speed >= 1.0 and blocks_per_worker <= 8
    print(f"  tilegraph peak per worker: {blocks_per_worker:.1f} blocks")
    print("targets (>= dask speed, peak a small multiple of a block per worker):",
          "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
