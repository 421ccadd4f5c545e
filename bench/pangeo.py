"""The Pangeo community's "bigger than memory" workloads, tilegraph beside dask and Cubed.

Ported from coiled/benchmarks (``tests/benchmarks/test_xarray.py``):

- ``quadratic``: ``test_quadratic_mean`` (pangeo-data/distributed-array-examples#2). ``u``
  and ``v`` random of shape ``(T, 1, 987, 1920)`` in ``(10, 1, 987, 1920)`` blocks; the time
  means of ``u*u``, ``v*v`` and ``u*v`` computed together (``T=1000``: 30 GB generated).
- ``anomaly``: ``test_anom_mean`` (dask/distributed#2602). ``data`` random of shape
  ``(T, X)`` in one-row blocks of 10 MiB, ``ngroups = T // 100`` groups by ``time % ngroups``;
  the climatology (group means), the anomaly (data minus its group's mean) and its time mean.
  Written with Array API functions (``take``, ``mean``, ``stack``), as the xarray groupby
  without flox lowers it, so that the same code runs on all three.

Each system runs in its own process of the same run (so its peak resident set is its own),
with 2 threads; tilegraph under ``--limit`` (its ``memory_limit``), Cubed under the same
``allowed_mem`` when it is installed. Printed per workload and system: seconds, peak RSS,
and for tilegraph the bytes spilled, read back and recomputed; then the ratios to dask.

Run: ``python bench/pangeo.py [--workload quadratic|anomaly|all] [--t 1000] [--limit 2GB]``
(``--t`` sets T; the default sizes are 1-2x this machine's 24 GB).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SIZES = {"quadratic": 1000, "anomaly": 1200}  # T: 30 GB and 12 GB generated


def _quadratic(xp, t: int, rng):
    shape, chunks = (t, 1, 987, 1920), (10, 1, 987, 1920)
    u, v = rng(shape, chunks, 1), rng(shape, chunks, 2)
    return [xp.mean(u * u, axis=0), xp.mean(v * v, axis=0), xp.mean(u * v, axis=0)]


def _anomaly(xp, t: int, rng):
    import numpy as np

    x = 10 * 2**20 // 8
    data = rng((t, x), (1, x), 3)
    ngroups = max(1, t // 100)
    day = np.arange(t) % ngroups
    clim = xp.stack([xp.mean(xp.take(data, xp.asarray(np.flatnonzero(day == g)), axis=0),
                             axis=0) for g in range(ngroups)])
    anom = data - xp.take(clim, xp.asarray(day), axis=0)
    return [xp.mean(anom, axis=0)]


WORKLOADS = {"quadratic": _quadratic, "anomaly": _anomaly}


def child(system: str, workload: str, t: int, limit: str) -> None:
    extra: dict = {}
    if system == "tilegraph":
        import tilegraph as xp

        def rng(shape, chunks, seed):
            return xp.random.random(shape, chunks=chunks, seed=seed)

        outs = WORKLOADS[workload](xp, t, rng)
        t0 = time.perf_counter()
        xp.compute(*outs, memory_limit=limit, workers=2)
        elapsed = time.perf_counter() - t0
        run = xp.last_run()
        extra = {"spilled": run.spilled_bytes, "read_back": run.unspilled_bytes,
                 "recomputed": run.recomputed_bytes, "held": run.peak_bytes}
    elif system == "dask":
        import dask
        import dask.array as xp

        def rng(shape, chunks, seed):
            return xp.random.default_rng(seed).random(shape, chunks=chunks)

        outs = WORKLOADS[workload](xp, t, rng)
        t0 = time.perf_counter()
        dask.compute(*outs, scheduler="threads", num_workers=2)
        elapsed = time.perf_counter() - t0
    else:
        import tempfile

        import cubed
        import cubed.array_api as xp
        import cubed.random
        from cubed.runtime.executors.local import ThreadsExecutor

        spec = cubed.Spec(work_dir=tempfile.mkdtemp(), allowed_mem=limit)

        def rng(shape, chunks, seed):
            return cubed.random.random(shape, chunks=chunks, spec=spec)

        outs = WORKLOADS[workload](xp, t, rng)
        t0 = time.perf_counter()
        cubed.compute(*outs, executor=ThreadsExecutor(max_workers=2))
        elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": elapsed, "peak_rss": peak, **extra}))


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def run(system: str, workload: str, t: int, limit: str, timeout: float) -> dict | None:
    cmd = [sys.executable, __file__, "--child", system, "--workload", workload, "--t", str(t),
           "--limit", limit]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    if out.returncode != 0:
        code = out.returncode
        said = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        last = (out.stderr.strip().splitlines() or [said])[-1]
        return {"error": last[:120] if code > 0 else said}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="all", choices=["all", *WORKLOADS])
    parser.add_argument("--t", type=int, default=None, help="time steps (default: 1-2x RAM)")
    parser.add_argument("--limit", default="2GB")
    parser.add_argument("--systems", default="tilegraph,dask,cubed")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workload, args.t, args.limit)
        return 0
    systems = args.systems.split(",")
    if "cubed" in systems:
        try:
            import cubed  # noqa: F401
        except ImportError:
            systems.remove("cubed")
            print("(Cubed is not installed: pip install cubed to run it too)")
    workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    for w in workloads:
        t = args.t or SIZES[w]
        print(f"{w}: T={t}, memory_limit={args.limit}, 2 threads")
        got = {}
        for system in systems:
            r = got[system] = run(system, w, t, args.limit, args.timeout)
            if "error" in r:
                print(f"  {system:10s} failed: {r['error']}")
                continue
            line = f"  {system:10s} {r['seconds']:7.1f} s  peak RSS {_gb(r['peak_rss'])}"
            if system == "tilegraph":
                line += (f"  spilled {_gb(r['spilled'])}, read back {_gb(r['read_back'])}, "
                         f"recomputed {_gb(r['recomputed'])}")
            print(line)
        tg, dk = got.get("tilegraph"), got.get("dask")
        if tg and dk and "error" not in tg and "error" not in dk:
            print(f"  tilegraph/dask: time {tg['seconds'] / dk['seconds']:.2f}x, "
                  f"peak RSS {tg['peak_rss'] / dk['peak_rss']:.2f}x")
        cb = got.get("cubed")
        if tg and cb and "error" not in tg and "error" not in cb:
            print(f"  cubed/tilegraph time: {cb['seconds'] / tg['seconds']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
