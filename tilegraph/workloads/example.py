"""The body of the example scripts (``examples/<workload>.py``): run one workload, written
the way a user writes it, at a size given on the command line, and check it against NumPy."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from tilegraph.array import compute
from tilegraph.workloads.registry import WORKLOADS


def run_example(name: str, build: Callable[[int, int], Any],
                argv: Sequence[str] | None = None) -> int:
    """The body of ``examples/<name>.py``: parse ``--n``, ``--block``, ``--backend`` and
    ``--workers``, compute ``build(n, block)`` (a lazy tilegraph array or a tuple of
    them) and print the time and GFLOP/s, then check tilegraph against NumPy at the
    workload's small size. Returns the exit status: 0, or 1 on a mismatch."""
    wl = WORKLOADS[name]
    parser = argparse.ArgumentParser(description=f"{name}: {wl.description}")
    parser.add_argument("--n", type=int, default=wl.sizes[0],
                        help=f"problem size (default {wl.sizes[0]})")
    parser.add_argument("--block", type=int, default=None,
                        help="block size (default: the suite's rule for n)")
    parser.add_argument("--backend", default=None, choices=["threads", "sync", "mpi"],
                        help="tilegraph backend (default: threads)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker threads (default: one per core)")
    args = parser.parse_args(argv)
    try:
        n = wl.validate(args.n)
    except ValueError as exc:
        parser.error(str(exc))
    if args.block is not None and args.block < 1:
        parser.error(f"--block must be a positive integer, got {args.block}")
    block = args.block or wl.block(n)
    options = {k: v for k, v in (("backend", args.backend), ("workers", args.workers))
               if v is not None}

    out = build(n, block)
    t0 = time.perf_counter()
    result = compute(*out, **options) if isinstance(out, tuple) else out.compute(**options)
    seconds = time.perf_counter() - t0
    root = result is not None and not (isinstance(result, tuple) and result[0] is None)
    if root:
        print(f"{name} n={n} block={block}: {seconds:.3f} s, "
              f"{wl.flops(n) / seconds / 1e9:.2f} GFLOP/s")
    check = wl.check_details(progress=False, **options)
    if root:
        print(f"check against NumPy at n={check.size} on identical inputs: error "
              f"{check.error:.1e}, tolerance {check.tolerance:.0e}: "
              f"{'ok' if check.ok else 'MISMATCH'}")
    return 0 if check.ok else 1
