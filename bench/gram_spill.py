"""``A.T @ A`` streamed from a ``.npy`` file under a memory budget smaller than ``A``.

A is ``rows x cols`` float64 (default 240,000 x 500: 960 MB) read in row blocks, the budget
250 MB, two workers. Before the priority order bound every thread, the idle worker loaded
blocks far ahead of the accumulation and pushed out the blocks it needed next (244 MiB
spilled, 320 MiB held with the 960 MB case). Goals: at most 50 MiB spilled, and results held
at most the budget plus one block. Also times NumPy's ``A.T @ A`` on the loaded array (load
time excluded) and the 1-worker run, and checks the result against NumPy.
Run: ``python bench/gram_spill.py [--rows 240000] [--cols 500] [--block 15000]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

import tilegraph as tg

MiB = 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=240_000)
    parser.add_argument("--cols", type=int, default=500)
    parser.add_argument("--block", type=int, default=15_000)
    parser.add_argument("--limit", default="250MB")
    args = parser.parse_args()
    limit = tg.config.resolve({"memory_limit": args.limit}, "bench")["memory_limit"]
    block_bytes = args.block * args.cols * 8
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "a.npy")
        tg.random.random((args.rows, args.cols), chunks=(args.block, args.cols),
                         seed=0).to_npy(path)
        x = tg.from_npy(path, chunks=(args.block, args.cols))
        rows = []
        for workers in (2, 1):
            t0 = time.perf_counter()
            got = (x.T @ x).compute(memory_limit=limit, workers=workers)
            rows.append((workers, time.perf_counter() - t0, tg.last_run()))
        a = np.load(path)
        t0 = time.perf_counter()
        ref = a.T @ a
        t_np = time.perf_counter() - t0
        ok = bool(np.allclose(got, ref))
        del a
    print(f"A.T @ A, A {args.rows} x {args.cols} float64 ({args.rows * args.cols * 8 / 1e6:.0f}"
          f" MB .npy), row blocks of {args.block} ({block_bytes / MiB:.1f} MiB), "
          f"memory_limit={args.limit}")
    met = True
    for workers, seconds, s in rows:
        spill_ok = s.spilled_bytes <= 50 * MiB
        held_ok = s.peak_bytes <= limit + block_bytes
        met &= spill_ok and held_ok
        print(f"  {workers} worker(s): {seconds:.2f} s ({t_np / seconds:.2f}x NumPy's "
              f"{t_np:.2f} s in memory); spilled {s.spilled_bytes / MiB:.1f} MiB "
              f"(goal <= 50 MiB: {'met' if spill_ok else 'NOT met'}); held at most "
              f"{s.peak_bytes / MiB:.1f} MiB (goal <= limit + one block = "
              f"{(limit + block_bytes) / MiB:.1f} MiB: {'met' if held_ok else 'NOT met'})")
    print(f"  result equals NumPy: {ok}")
    return 0 if ok and met else 1


if __name__ == "__main__":
    raise SystemExit(main())
