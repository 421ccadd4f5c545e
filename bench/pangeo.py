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

And from ``tests/geospatial/workloads/rechunking.py`` (``era5_rechunking``), at the size
the local machine holds:

- ``rechunk``: a zarr store ``(T, 721, 1440)`` float32 (ERA5's quarter-degree grid; a
  smooth field with noise, zstd-compressed) in ``(31, 721, 1440)`` time blocks, rechunked
  to ``(T, 10, 10)`` space blocks and written to a new zarr store (``T=1240``: 5.2 GB);
  the source is made once and kept in ``--data-dir``.

And from ``tests/benchmarks/test_array.py`` (``test_vorticity``, dask/distributed#6571):

- ``vorticity``: ``u``, ``v`` random ``(5000, 5000, T)`` in ``(5000, 5000, 1)`` blocks of
  190 MiB, each padded by one element at the end of axis 0 (``mode="wrap"``) and rechunked
  back to one block along it, ``dx[..., None] * up - dy[..., None] * vp`` with ``dx``, ``dy``
  random ``(5001, 5000)``; every block stored into a target that drops it
  (``arr_to_devnull``; Cubed stores only into zarr, so it writes its result to disk).
  ``T=60``: 24 GB generated.

And from ``tests/benchmarks/test_spill.py`` (``test_dot_product_spill``):

- ``dot``: ``(a @ a.T).sum()`` for ``a`` random ``(T, T)`` float64 in "auto" blocks
  (``T=12000``: a 1.15 GB input and as large a product, 3.5 Tflop; run it under a limit
  below that, e.g. ``--limit 1GB``; the suite scales the input to 30% of the cluster's
  memory, which here would take an hour of BLAS).

And from ``tests/benchmarks/test_rechunk.py`` (``test_swap_axes_out_of_core``):

- ``swap``: random ``(T, T)`` float64 in ``(-1, "auto")`` blocks (whole columns) rechunked
  to ``("auto", -1)`` (whole rows) and summed, an all-to-all (``T=20000``: 3.2 GB).

Each system runs in its own process of the same run (so its peak resident set is its own),
with 2 threads; tilegraph under ``--limit`` (its ``memory_limit``), Cubed under the same
``allowed_mem`` when it is installed. Printed per workload and system: seconds, peak RSS,
and for tilegraph the bytes spilled, read back, recomputed and staged on disk (a rechunk's
intermediate store), the most bytes of results held and the plan's projection of it; then
the ratios to dask.

Run: ``python bench/pangeo.py [--workload quadratic|anomaly|rechunk|swap|vorticity|dot|all]
[--t 1000] [--limit 2GB]``
(``--t`` sets T; the default sizes are 1-2x this machine's 24 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = {"quadratic": 1000, "anomaly": 1200, "rechunk": 1240, "swap": 20000, "vorticity": 60,
         "dot": 12000}
GRID = (721, 1440)
DATA_DIR = os.path.join(tempfile.gettempdir(), "tilegraph-bench-pangeo")


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


def era5_like(t: int, data_dir: str) -> str:
    """The rechunk's source store, made once: a smooth field plus noise, as float32."""
    import numpy as np
    import zarr

    path = os.path.join(data_dir, f"era5-{t}.zarr")
    if os.path.exists(os.path.join(path, ".complete")):
        return path
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(data_dir, exist_ok=True)
    z = zarr.create_array(path, shape=(t, *GRID), chunks=(31, *GRID), dtype="float32")
    lat = np.linspace(-90, 90, GRID[0], dtype=np.float32)[:, None]
    lon = np.linspace(0, 360, GRID[1], endpoint=False, dtype=np.float32)[None, :]
    base = 15 + 15 * np.cos(np.radians(lat)) + 2 * np.sin(np.radians(3 * lon))
    rng = np.random.default_rng(0)
    for i in range(0, t, 31):
        n = min(31, t - i)
        days = np.arange(i, i + n, dtype=np.float32)[:, None, None]
        season = 5 * np.sin(2 * np.pi * days / 365.25) * np.sin(np.radians(lat))
        noise = rng.standard_normal((n, *GRID), dtype=np.float32) * 0.5
        z[i:i + n] = (base + season + noise).astype(np.float32)
    open(os.path.join(path, ".complete"), "w").close()
    return path


def _swap(xp, t: int, rng):
    x = rng((t, t), (-1, "auto"), 5)
    return [xp.sum(x.rechunk(("auto", -1)))]


def _pad_wrap(xp, arr):
    """One element padded at the end of axis 0 with wrap (Cubed's ``pad`` has only
    ``symmetric`` with (1, 0): there, the same values as a concatenation)."""
    if xp.__name__.startswith("cubed"):
        return xp.concat([arr, arr[0:1]], axis=0)
    return xp.pad(arr, pad_width=[(0, 1), (0, 0), (0, 0)], mode="wrap")


def _vorticity(xp, t: int, rng):
    side = 5000
    u, v = rng((side, side, t), (side, side, 1), 6), rng((side, side, t), (side, side, 1), 7)
    dx, dy = rng((side + 1, side), (side + 1, side), 8), rng((side + 1, side), (side + 1, side), 9)

    def pad_rechunk(arr):
        padded = _pad_wrap(xp, arr)
        return padded.rechunk((side + 1, *padded.chunksize[1:]))

    up, vp = pad_rechunk(u), pad_rechunk(v)
    return [dx[..., None] * up - dy[..., None] * vp]


def _dot(xp, t: int, rng):
    a = rng((t, t), "auto", 10)
    return [xp.sum(a @ a.T)]


class DevNull:
    """``arr_to_devnull``'s target: every block is made and dropped."""

    def __setitem__(self, key, value):
        pass


WORKLOADS = {"quadratic": _quadratic, "anomaly": _anomaly, "rechunk": None, "swap": _swap,
             "vorticity": _vorticity, "dot": _dot}
STORED = {"vorticity"}  # written to DevNull (store), not computed into memory
TARGET = (10, 10)  # the space blocks of the rechunk


def _rechunk(system: str, t: int, limit: str, data_dir: str) -> dict:
    """Run the rechunk on ``system``: seconds, and tilegraph's run summary."""
    source = era5_like(t, data_dir)
    out = os.path.join(data_dir, f"rechunked-{system}.zarr")
    shutil.rmtree(out, ignore_errors=True)
    extra: dict = {}
    try:
        t0 = time.perf_counter()
        if system == "tilegraph":
            import tilegraph as tg

            with tg.config.set(memory_limit=limit, workers=2):
                tg.from_zarr(source).rechunk((t, *TARGET)).to_zarr(out)
            run = tg.last_run()
            extra = {"spilled": run.spilled_bytes, "read_back": run.unspilled_bytes,
                     "recomputed": run.recomputed_bytes, "staged": run.staged_bytes,
                     "held": run.peak_bytes,
                     "projected": run.projected_bytes}
        elif system == "dask":
            import dask
            import dask.array as da

            with dask.config.set(scheduler="threads", num_workers=2):
                da.from_zarr(source).rechunk((t, *TARGET)).to_zarr(out)
        else:
            import cubed
            from cubed.runtime.executors.local import ThreadsExecutor

            spec = cubed.Spec(work_dir=tempfile.mkdtemp(dir=data_dir), allowed_mem=limit)
            x = cubed.from_zarr(source, spec=spec).rechunk((t, *TARGET))
            cubed.to_zarr(x, out, executor=ThreadsExecutor(max_workers=2))
        elapsed = time.perf_counter() - t0
        # the run's own peak, before the check below reads (and decodes) whole chunks
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        import numpy as np
        import zarr

        src, dst = zarr.open_array(source, mode="r"), zarr.open_array(out, mode="r")
        if dst.chunks != (t, *TARGET) or not all(
                np.array_equal(src[:, i:i + 7, j:j + 9], dst[:, i:i + 7, j:j + 9])
                for i, j in ((0, 0), (355, 700), (714, 1431))):
            raise AssertionError(f"{system}: the rechunked store differs from its source")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"seconds": elapsed, "peak_rss": peak, **extra}


def child(system: str, workload: str, t: int, limit: str, data_dir: str) -> None:
    extra: dict = {}
    if workload == "rechunk":
        extra = _rechunk(system, t, limit, data_dir)
        elapsed = extra.pop("seconds")
    elif system == "tilegraph":
        import tilegraph as xp

        def rng(shape, chunks, seed):
            return xp.random.random(shape, chunks=chunks, seed=seed)

        outs = WORKLOADS[workload](xp, t, rng)
        t0 = time.perf_counter()
        if workload in STORED:
            xp.store(outs, [DevNull()] * len(outs), memory_limit=limit, workers=2)
        else:
            xp.compute(*outs, memory_limit=limit, workers=2)
        elapsed = time.perf_counter() - t0
        run = xp.last_run()
        extra = {"spilled": run.spilled_bytes, "read_back": run.unspilled_bytes,
                 "recomputed": run.recomputed_bytes, "staged": run.staged_bytes,
                 "held": run.peak_bytes,
                 "projected": run.projected_bytes}
    elif system == "dask":
        import dask
        import dask.array as xp

        def rng(shape, chunks, seed):
            return xp.random.default_rng(seed).random(shape, chunks=chunks)

        outs = WORKLOADS[workload](xp, t, rng)
        t0 = time.perf_counter()
        if workload in STORED:
            xp.store(outs, [DevNull()] * len(outs), lock=False, scheduler="threads",
                     num_workers=2)
        else:
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
        if workload in STORED:  # Cubed stores only into zarr: its writes are real
            for k, out in enumerate(outs):
                cubed.to_zarr(out, os.path.join(spec.work_dir, f"out-{k}.zarr"),
                              executor=ThreadsExecutor(max_workers=2))
        else:
            cubed.compute(*outs, executor=ThreadsExecutor(max_workers=2))
        elapsed = time.perf_counter() - t0
        shutil.rmtree(spec.work_dir, ignore_errors=True)
    peak = extra.pop("peak_rss", None) or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": elapsed, "peak_rss": peak, **extra}))


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def run(system: str, workload: str, t: int, limit: str, timeout: float, data_dir: str
        ) -> dict | None:
    cmd = [sys.executable, __file__, "--child", system, "--workload", workload, "--t", str(t),
           "--limit", limit, "--data-dir", data_dir]
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
    parser.add_argument("--data-dir", default=DATA_DIR,
                        help="where the rechunk's source store is kept")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workload, args.t, args.limit, args.data_dir)
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
        if w == "rechunk":
            era5_like(t, args.data_dir)  # made before any system is timed
        got = {}
        for system in systems:
            r = got[system] = run(system, w, t, args.limit, args.timeout, args.data_dir)
            if "error" in r:
                print(f"  {system:10s} failed: {r['error']}")
                continue
            line = f"  {system:10s} {r['seconds']:7.1f} s  peak RSS {_gb(r['peak_rss'])}"
            if system == "tilegraph":
                line += (f"  spilled {_gb(r['spilled'])}, read back {_gb(r['read_back'])}, "
                         f"recomputed {_gb(r['recomputed'])}, staged on disk "
                         f"{_gb(r.get('staged', 0))}; results held "
                         f"{_gb(r['held'])}, projected {_gb(r['projected'])}")
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
