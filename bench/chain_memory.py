"""Peak memory of a long chain of large intermediates: O(1) blocks, not O(chain).

The graph is ``x0 = ones(block)``, ``x_i = x_{i-1} + 1`` for ``--length`` steps, each block
``--mb`` megabytes. A scheduler that frees each intermediate once its consumer has run holds
two blocks at a time; one that keeps them holds the whole chain. Each scheduler runs in a
fresh subprocess, and its peak resident memory (``ru_maxrss``) above the baseline before the
run is reported in blocks. Run: ``python bench/chain_memory.py [--length 40 --mb 200]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def add_one(x):
    return x + 1.0


def chain_graph(length: int, mb: int) -> tuple[dict, tuple]:
    n = mb * 2**20 // 8
    dsk = {("x", 0): (np.ones, n)}
    dsk.update({("x", i): (add_one, ("x", i - 1)) for i in range(1, length)})
    return dsk, ("x", length - 1)


def child(name: str, length: int, mb: int) -> None:
    dsk, key = chain_graph(length, mb)
    if name.startswith("tilegraph"):
        import tilegraph

        backend = name.split()[1]
        run = lambda: tilegraph.get(dsk, key, backend=backend)
    else:
        import dask.local
        import dask.threaded

        run = lambda: (dask.threaded.get if "threaded" in name else dask.local.get_sync)(
            dsk, key)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    out = run()
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert out[0] == length and out[-1] == length
    print(json.dumps({"peak": peak - base, "elapsed": elapsed}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.length, args.mb)
        return 0
    block = args.mb * 2**20
    print(f"chain of {args.length} blocks of {args.mb} MB "
          f"(all of it: {args.length * args.mb / 1024:.1f} GB)")
    ok = True
    for name in ["tilegraph threads", "tilegraph sync", "dask threaded", "dask sync"]:
        res = subprocess.run(
            [sys.executable, __file__, "--child", name, "--length", str(args.length),
             "--mb", str(args.mb)], capture_output=True, text=True, check=True)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        blocks = r["peak"] / block
        if name.startswith("tilegraph"):
            ok &= blocks <= 3
        print(f"  {name:18s} peak {r['peak'] / 2**20:8.0f} MB = {blocks:4.1f} blocks "
              f"in {r['elapsed']:.2f} s")
    print("target (tilegraph peak <= 3 blocks, independent of chain length):",
          "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
