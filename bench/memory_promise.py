"""The memory promise on the patterns that broke it: what each run spills, makes again and
holds, and its peak resident set against the limit.

Workloads (each in a fresh process, two workers, under ``memory_limit``):

- ``anomaly``: the array form of coiled/benchmarks' ``test_anom_mean``
  (``tests/benchmarks/test_xarray.py``, dask/distributed#2602): a random ``(T, X)`` input in
  one-row blocks, reshaped to ``(T/g, g, X)`` (``g = 12`` groups), the climatology (mean over
  axis 0), the anomaly (input minus climatology) and its mean over ``(0, 1)``. The input is
  needed twice; its blocks are made again from their random rows through the reshape's
  pieces rather than spilled.
- ``wide``: coiled/benchmarks' ``test_basic_sum`` (``tests/benchmarks/test_array.py``):
  ``zeros((N, M), chunks=(-1, 1)).sum(axis=1)``, column blocks as large as their partials,
  which accumulate as they arrive.
- ``quadratic``: coiled/benchmarks' ``test_quadratic_mean`` (``test_xarray.py``): the time
  means of ``u*u``, ``v*v`` and ``u*v`` for random ``u``, ``v`` of shape ``(T, 1, Y, X)``
  in blocks of 10 time steps.

Sizes: by default small (about 0.5-1 GB generated per workload, the limit about as many
blocks as at the large size: 15 of the anomaly's, 20 of the sum's, 13 of the means');
``--gb`` runs them at 1-2x this machine's memory as the issue measured them (anomaly
T=2400, 24 GB, under 1.8 GB; the sum 13107200 x 439, 46 GB, under 2 GB; the means T=1000,
30 GB, under 2 GB). Printed per workload: bytes spilled, read back and made again, blocks
made again per op kind, the most bytes of results held, the peak RSS the run sampled and
the peak RSS read from outside the process (``/proc/<pid>/status`` VmHWM, after the run,
before any check), each against the limit, and whether the values are NumPy's (small sizes;
``--no-check`` to skip). The goals: nothing spilled, peak RSS <= 1.1 x limit. Seconds are
printed too; compare them only on a quiet machine.

Run: ``python bench/memory_promise.py [--workload anomaly|wide|quadratic|all] [--gb]
[--limit 2GB] [--no-check]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

SMALL = {
    "anomaly": ({"t": 240, "x": 262144}, "450MB"),
    "wide": ({"n": 2_000_000, "m": 60}, "400MB"),
    "quadratic": ({"t": 200, "y": 300, "x": 500}, "250MB"),
}
LARGE = {
    "anomaly": ({"t": 2400, "x": 10 * 2**20 // 8}, "1.8GB"),
    "wide": ({"n": 13107200, "m": 439}, "2GB"),
    "quadratic": ({"t": 1000, "y": 987, "x": 1920}, "2GB"),
}
GROUPS = 12


def build(name: str, size: dict) -> tuple[list, object]:
    """The arrays of a workload, and a function of their values that says whether they are
    NumPy's (it computes the inputs again, block by block where it can)."""
    import tilegraph as tg

    if name == "anomaly":
        t, x = size["t"], size["x"]
        data = tg.random.random((t, x), chunks=(1, x), seed=3)
        r = data.reshape((t // GROUPS, GROUPS, x))

        def check(got):
            arr = data.compute(backend="sync").reshape(t // GROUPS, GROUPS, x)
            return np.allclose(got[0], (arr - arr.mean(axis=0)).mean(axis=(0, 1)))

        return [(r - r.mean(axis=0)).mean(axis=(0, 1))], check
    if name == "wide":
        n, m = size["n"], size["m"]
        return ([tg.zeros((n, m), chunks=(-1, 1)).sum(axis=1)],
                lambda got: got[0].shape == (n,) and not got[0].any())
    t, y, x = size["t"], size["y"], size["x"]
    shape, chunks = (t, 1, y, x), (10, 1, y, x)
    u = tg.random.random(shape, chunks=chunks, seed=1)
    v = tg.random.random(shape, chunks=chunks, seed=2)

    def check(got):
        un, vn = u.compute(backend="sync"), v.compute(backend="sync")
        want = [(un * un).mean(axis=0), (vn * vn).mean(axis=0), (un * vn).mean(axis=0)]
        return all(np.allclose(g, w) for g, w in zip(got, want, strict=True))

    return [(u * u).mean(axis=0), (v * v).mean(axis=0), (u * v).mean(axis=0)], check


def child(name: str, size: dict, limit: str, check: bool) -> None:
    """One run in this fresh process: prints its record, waits for the parent to read the
    peak RSS, then checks the values."""
    import tilegraph as tg

    arrays, is_right = build(name, size)
    t0 = time.perf_counter()
    got = tg.compute(*arrays, memory_limit=limit, workers=2)
    seconds = time.perf_counter() - t0
    run = tg.last_run()
    print("RECORD " + json.dumps({
        "seconds": seconds, "limit": run.memory_limit, "spilled": run.spilled_bytes,
        "read_back": run.unspilled_bytes, "recomputed": run.recomputed_bytes,
        "remade": run.remade, "held": run.peak_bytes, "peak_rss": run.peak_rss,
        "baseline": run.rss_baseline}), flush=True)
    sys.stdin.readline()
    print("CHECK " + ("skipped" if not check else "ok" if is_right(got) else "WRONG"),
          flush=True)


def run(name: str, size: dict, limit: str, check: bool) -> dict:
    """The record of one workload run in a fresh process, with its peak RSS read from
    outside (VmHWM) and the check's verdict."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, json.dumps(size),
           limit, "1" if check else "0"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    hwm = 0
    if line.startswith("RECORD "):
        with open(f"/proc/{proc.pid}/status") as f:
            hwm = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM"))
    out, err = proc.communicate("\n")
    if not line.startswith("RECORD "):
        return {"error": (err.strip().splitlines() or ["no output"])[-1]}
    record = json.loads(line[len("RECORD "):])
    record["hwm"] = hwm
    record["check"] = out.strip().removeprefix("CHECK ")
    return record


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="all", choices=["all", *SMALL])
    parser.add_argument("--gb", action="store_true", help="1-2x this machine's memory")
    parser.add_argument("--limit", default=None, help="memory_limit (default: per workload)")
    parser.add_argument("--no-check", action="store_true", help="skip the checks")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, size, limit, check = args.child
        child(name, json.loads(size), limit, check == "1")
        return 0
    sizes = LARGE if args.gb else SMALL
    names = list(SMALL) if args.workload == "all" else [args.workload]
    met = True
    for name in names:
        size, limit = sizes[name]
        limit = args.limit or limit
        check = not args.no_check and not (args.gb and name != "wide")
        r = run(name, size, limit, check)
        dims = ", ".join(f"{k}={v}" for k, v in size.items())
        print(f"{name} ({dims}), memory_limit={limit}, 2 workers")
        if "error" in r:
            print(f"  failed: {r['error']}")
            met = False
            continue
        remade = ", ".join(f"{k} {n}" for k, n in sorted(r["remade"].items())) or "none"
        ok = r["spilled"] == 0 and r["hwm"] <= 1.1 * r["limit"] and r["check"] != "WRONG"
        met &= ok
        print(f"  spilled {_gb(r['spilled'])}, read back {_gb(r['read_back'])}, made again "
              f"{_gb(r['recomputed'])} (blocks: {remade})")
        print(f"  results held at most {_gb(r['held'])}; peak RSS {_gb(r['peak_rss'])} "
              f"sampled, {_gb(r['hwm'])} from outside ({r['hwm'] / r['limit']:.2f} x the "
              f"limit), {_gb(r['baseline'])} at the start")
        print(f"  values: {r['check']}; {r['seconds']:.1f} s; goals (nothing spilled, RSS "
              f"<= 1.1 x limit): {'met' if ok else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
