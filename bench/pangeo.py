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

And from ``tests/benchmarks/test_xarray.py`` again, written with arrays:

- ``anom_array``: ``test_anom_mean`` with a ``reshape`` in place of the groupby: ``data``
  random ``(T, X)`` in one-row blocks of 10 MiB, ``g = T // 100`` groups (row ``t`` in group
  ``t % g``), ``reshape`` to ``(T / g, g, X)``, the climatology its mean over axis 0, the
  anomaly ``data - climatology`` and its mean over axes 0 and 1 (``T=1200``: 12 GB).

And from ``tests/benchmarks/test_array.py``:

- ``sum_thin``, ``sum_square``: ``test_basic_sum`` ("fast"): ``zeros((13107200, T))``
  (100 MiB columns) in ``(-1, 1)`` blocks (one column: 100 MiB each) or ``(3350, 3925)``
  blocks, summed over axis 1 (``T=439``: 46 GB).
- ``double_diff``: ``test_double_diff``: ``a``, ``b`` random ``(T, T)`` in "20MiB" blocks,
  ``a[1:, 1:] - b[:-1, :-1]`` stored to a sink (``T=40000``: 25.6 GB generated).
- ``overlap_sample``: ``test_map_overlap_sample``: random ``(T, T)`` in ``(50, 50)`` blocks,
  ``map_overlap`` of the identity with depth 1, and the ``[5000:5010, 5000:5010]`` slice
  computed (``T=10000``; the slice's corner scales with ``T``).

And a diagnostic after ``tests/geospatial/workloads/atmospheric_circulation.py`` (ERA5's
winds and temperature: zonal means, the anomalies against them, their products' zonal means,
a daily resample):

- ``circulation``: ``u``, ``v``, ``t``, ``w`` random float32 ``(T, 37, 721, 1440)`` in one
  time step blocks (153 MiB each, as ERA5's ``chunk-1`` store); each variable's zonal mean
  (over the last axis, per time step), its zonal anomaly (the variable minus that mean),
  the zonal means of ``u'v'``, ``v't'`` and ``u'w'``, and each of these seven made daily
  (the mean of every 24 time steps, ``reshape`` then ``mean``), all computed together
  (``T=48``: 29.5 GB generated).

Each system runs in its own process of the same run (so its peak resident set is its own),
with 2 threads: tilegraph under ``--limit`` (its ``memory_limit``), dask's threaded
scheduler, dask.distributed (a ``LocalCluster`` of one worker process with 2 threads, its
own default memory limit; its peak is the worker's) and Cubed under the same
``allowed_mem`` when it is installed. Printed per workload and system: seconds, peak RSS,
and for tilegraph the bytes spilled, read back, recomputed and staged on disk (a rechunk's
intermediate store), the most bytes of results held and the plan's projection of it; then
the ratios to dask. ``--check`` also computes each system's inputs and compares its
results with NumPy's on them (small sizes: with ``--shrink N`` every fixed dimension and
block of a workload is N times smaller).

Run: ``python bench/pangeo.py [--workload NAME|all] [--t 1000] [--limit 2GB]
[--systems tilegraph,dask,distributed,cubed] [--check] [--shrink N]``
(``--t`` sets T; the default sizes are 1-2x this machine's 24 GB).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SIZES = {"quadratic": 1000, "anomaly": 1200, "rechunk": 1240, "swap": 20000, "vorticity": 60,
         "dot": 12000, "anom_array": 1200, "sum_thin": 439, "sum_square": 439,
         "double_diff": 40000, "overlap_sample": 10000, "circulation": 48}
GRID = (721, 1440)
DATA_DIR = os.path.join(tempfile.gettempdir(), "tilegraph-bench-pangeo")
_SHRINK = 1  # --shrink: every fixed dimension and block of a workload this many times smaller


def _n(size: int) -> int:
    """A fixed dimension or block length of a workload at the ``--shrink`` in force."""
    return max(1, size // _SHRINK)


def _rechunk_to(arr, chunks):
    """``arr.rechunk(chunks)`` (``chunks`` may be a function of ``arr``); a NumPy array
    (the reference of ``--check``) as it is."""
    if not hasattr(arr, "rechunk"):
        return arr
    return arr.rechunk(chunks(arr) if callable(chunks) else chunks)


def _quadratic(xp, t: int, rng):
    shape, chunks = (t, 1, _n(987), _n(1920)), (10, 1, _n(987), _n(1920))
    u, v = rng(shape, chunks, 1), rng(shape, chunks, 2)
    return [xp.mean(u * u, axis=0), xp.mean(v * v, axis=0), xp.mean(u * v, axis=0)]


def _anomaly(xp, t: int, rng):
    import numpy as np

    x = _n(10 * 2**20 // 8)
    data = rng((t, x), (1, x), 3)
    ngroups = max(1, t // 100)
    day = np.arange(t) % ngroups
    clim = xp.stack([xp.mean(xp.take(data, xp.asarray(np.flatnonzero(day == g)), axis=0),
                             axis=0) for g in range(ngroups)])
    anom = data - xp.take(clim, xp.asarray(day), axis=0)
    return [xp.mean(anom, axis=0)]


def _anom_array(xp, t: int, rng):
    """coiled/benchmarks tests/benchmarks/test_xarray.py::test_anom_mean with arrays: the
    groups of ``time % g`` are the second axis of a ``reshape``."""
    x = _n(10 * 2**20 // 8)
    g = max(1, t // 100)
    if t % g:
        raise ValueError(f"anom_array: T={t} is not a multiple of its {g} groups (T // 100)")
    data = rng((t, x), (1, x), 3)
    grouped = xp.reshape(data, (t // g, g, x))
    climatology = xp.mean(grouped, axis=0)
    return [xp.mean(grouped - climatology, axis=(0, 1))]


def _sum_thin(xp, t: int, rng):
    """coiled/benchmarks tests/benchmarks/test_array.py::test_basic_sum["fast", "thin"]."""
    data = rng.zeros((_n(100 * 2**20 // 8), t), (-1, 1))
    return [xp.sum(data, axis=1)]


def _sum_square(xp, t: int, rng):
    """coiled/benchmarks tests/benchmarks/test_array.py::test_basic_sum["fast", "square"]."""
    data = rng.zeros((_n(100 * 2**20 // 8), t), (_n(3350), _n(3925)))
    return [xp.sum(data, axis=1)]


def _double_diff(xp, t: int, rng):
    """coiled/benchmarks tests/benchmarks/test_array.py::test_double_diff (its shape scaled
    by ``T``; "20MiB" blocks as dask chooses them, the same for every system)."""
    from dask.array.core import normalize_chunks

    chunks = normalize_chunks(f"{max(64, 20 * 2**20 // _SHRINK**2)}B", (t, t), dtype="float64")
    a, b = rng((t, t), chunks, 15), rng((t, t), chunks, 16)
    return [a[1:, 1:] - b[:-1, :-1]]


def _identity(block):
    return block


def _trim_one(block):
    return block[1:-1, 1:-1]


def _overlap_sample(xp, t: int, rng):
    """coiled/benchmarks tests/benchmarks/test_array.py::test_map_overlap_sample: the
    identity with a halo of 1 over small blocks, and a 10 x 10 slice of it computed (at
    the middle of the array, (5000, 5000) for T=10000). Cubed's ``map_overlap`` pads the
    edges with a constant and does not trim: its function trims the halo itself."""
    x = rng((t, t), (_n(50), _n(50)), 17)
    name = xp.__name__
    if name == "numpy":
        y = x
    elif name.startswith("cubed"):
        import cubed

        y = cubed.map_overlap(_trim_one, x, dtype=x.dtype, chunks=x.chunks, depth=1,
                              boundary=0.0)
    else:
        y = x.map_overlap(_identity, depth=1, boundary="none")
    c = t // 2
    return [y[c:c + 10, c:c + 10]]


STEPS_PER_DAY = 24


def _circulation(xp, t: int, rng):
    """The zonal means of ERA5-like winds and temperature, the anomalies against them, the
    zonal means of their products and a daily mean of each (see the module docstring)."""
    if t % STEPS_PER_DAY:
        raise ValueError(f"circulation: T={t} is not a whole number of days of "
                         f"{STEPS_PER_DAY} time steps")
    levels, nlat, nlon = _n(37), _n(721), _n(1440)
    shape, chunks = (t, levels, nlat, nlon), (1, levels, nlat, nlon)
    u, v, temp, w = (rng(shape, chunks, seed, "float32") for seed in (11, 12, 13, 14))
    zonal = [xp.mean(x, axis=-1, keepdims=True) for x in (u, v, temp, w)]
    ua, va, ta, wa = (x - m for x, m in zip((u, v, temp, w), zonal, strict=True))
    fluxes = [xp.mean(ua * va, axis=-1), xp.mean(va * ta, axis=-1), xp.mean(ua * wa, axis=-1)]
    diagnostics = [xp.squeeze(m, axis=-1) for m in zonal] + fluxes
    days = t // STEPS_PER_DAY
    return [xp.mean(xp.reshape(d, (days, STEPS_PER_DAY, levels, nlat)), axis=1)
            for d in diagnostics]


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
    return [xp.sum(_rechunk_to(x, ("auto", -1)))]


def _pad_wrap(xp, arr):
    """One element padded at the end of axis 0 with wrap (Cubed's ``pad`` has only
    ``symmetric`` with (1, 0): there, the same values as a concatenation)."""
    if xp.__name__.startswith("cubed"):
        return xp.concat([arr, arr[0:1]], axis=0)
    return xp.pad(arr, pad_width=[(0, 1), (0, 0), (0, 0)], mode="wrap")


def _vorticity(xp, t: int, rng):
    side = _n(5000)
    u, v = rng((side, side, t), (side, side, 1), 6), rng((side, side, t), (side, side, 1), 7)
    dx, dy = rng((side + 1, side), (side + 1, side), 8), rng((side + 1, side), (side + 1, side), 9)

    def pad_rechunk(arr):
        padded = _pad_wrap(xp, arr)
        return _rechunk_to(padded, lambda a: (side + 1, *a.chunksize[1:]))

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
             "vorticity": _vorticity, "dot": _dot, "anom_array": _anom_array,
             "sum_thin": _sum_thin, "sum_square": _sum_square, "double_diff": _double_diff,
             "overlap_sample": _overlap_sample, "circulation": _circulation}
STORED = {"vorticity", "double_diff"}  # written to DevNull (store), not computed into memory
TARGET = (10, 10)  # the space blocks of the rechunk
SYSTEMS = ("tilegraph", "dask", "distributed", "cubed")


def _peak_rss() -> int:
    """This process's peak resident set, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.contextmanager
def _distributed():
    """A dask.distributed client of a ``LocalCluster`` on loopback: one worker process
    with 2 threads, as many threads as the other systems get."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def _worker_peak(client) -> int:
    """The peak resident set of the cluster's busiest worker process."""
    return max(client.run(_peak_rss).values())


def _tilegraph_summary() -> dict:
    import tilegraph as tg

    run = tg.last_run()
    return {"spilled": run.spilled_bytes, "read_back": run.unspilled_bytes,
            "recomputed": run.recomputed_bytes, "staged": run.staged_bytes,
            "held": run.peak_bytes, "projected": run.projected_bytes}


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
            extra = _tilegraph_summary()
        elif system == "dask":
            import dask
            import dask.array as da

            with dask.config.set(scheduler="threads", num_workers=2):
                da.from_zarr(source).rechunk((t, *TARGET)).to_zarr(out)
        elif system == "distributed":
            import dask.array as da

            with _distributed() as client:
                t0 = time.perf_counter()  # (the cluster's start is not the rechunk's)
                da.from_zarr(source).rechunk((t, *TARGET)).to_zarr(out)
                extra = {"peak_rss": _worker_peak(client)}
        else:
            import cubed
            from cubed.runtime.executors.local import ThreadsExecutor

            spec = cubed.Spec(work_dir=tempfile.mkdtemp(dir=data_dir), allowed_mem=limit)
            x = cubed.from_zarr(source, spec=spec).rechunk((t, *TARGET))
            cubed.to_zarr(x, out, executor=ThreadsExecutor(max_workers=2))
        elapsed = time.perf_counter() - t0
        # the run's own peak, before the check below reads (and decodes) whole chunks
        peak = extra.pop("peak_rss", None) or _peak_rss()
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


class _Sources:
    """A system's inputs of a workload: ``sources(shape, chunks, seed, dtype)`` a random
    array, ``sources.zeros(shape, chunks)`` zeros; each is kept in ``made`` (for
    ``--check``)."""

    def __init__(self, random, zeros):
        self._random, self._zeros = random, zeros
        self.made: list = []

    def __call__(self, shape, chunks, seed, dtype="float64"):
        self.made.append(self._random(shape, chunks, seed, dtype))
        return self.made[-1]

    def zeros(self, shape, chunks):
        self.made.append(self._zeros(shape, chunks))
        return self.made[-1]


class _Given:
    """The inputs a system made, in the same order, for the NumPy reference of
    ``--check``."""

    def __init__(self, values):
        self._values = iter(values)

    def __call__(self, shape, chunks, seed, dtype="float64"):
        return next(self._values)

    def zeros(self, shape, chunks):
        return next(self._values)


def _check(workload: str, t: int, results, inputs) -> None:
    """Raise AssertionError unless ``results`` are the workload's over ``inputs`` as NumPy
    computes them."""
    import numpy as np

    expected = WORKLOADS[workload](np, t, _Given([np.asarray(v) for v in inputs]))
    if len(expected) != len(results):
        raise AssertionError(f"{workload}: {len(results)} results, NumPy has {len(expected)}")
    for k, (got, want) in enumerate(zip(results, expected, strict=True)):
        got = np.asarray(got)
        tol = 1e-4 if want.dtype == np.float32 else 1e-9
        if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
            raise AssertionError(f"{workload}: result {k} differs from NumPy's "
                                 f"(shape {got.shape} against {want.shape})")


def _run_tilegraph(workload: str, t: int, limit: str, check: bool) -> tuple[float, dict]:
    import numpy as np

    import tilegraph as xp

    sources = _Sources(lambda shape, chunks, seed, dtype: xp.random.random(
        shape, chunks=chunks, seed=seed, dtype=np.dtype(dtype)),
        lambda shape, chunks: xp.zeros(shape, chunks=chunks))
    outs = WORKLOADS[workload](xp, t, sources)
    t0 = time.perf_counter()
    if check:
        values = xp.compute(*outs, *sources.made, memory_limit=limit, workers=2)
        _check(workload, t, values[:len(outs)], values[len(outs):])
    elif workload in STORED:
        xp.store(outs, [DevNull()] * len(outs), memory_limit=limit, workers=2)
    else:
        xp.compute(*outs, memory_limit=limit, workers=2)
    return time.perf_counter() - t0, _tilegraph_summary()


def _dask_sources(xp) -> _Sources:
    return _Sources(lambda shape, chunks, seed, dtype: xp.random.default_rng(seed).random(
        shape, chunks=chunks, dtype=dtype), lambda shape, chunks: xp.zeros(shape, chunks=chunks))


def _run_dask(workload: str, t: int, check: bool, client=None) -> tuple[float, dict]:
    """dask's threaded scheduler, or ``client``'s cluster."""
    import dask
    import dask.array as xp

    sources = _dask_sources(xp)
    outs = WORKLOADS[workload](xp, t, sources)
    how = ({} if client is not None else {"scheduler": "threads", "num_workers": 2})
    t0 = time.perf_counter()
    if check:
        values = dask.compute(*outs, *sources.made, **how)
        _check(workload, t, values[:len(outs)], values[len(outs):])
    elif workload in STORED:
        xp.store(outs, [DevNull()] * len(outs), lock=False, **how)
    else:
        dask.compute(*outs, **how)
    elapsed = time.perf_counter() - t0
    return elapsed, ({} if client is None else {"peak_rss": _worker_peak(client)})


def _run_cubed(workload: str, t: int, limit: str, check: bool) -> tuple[float, dict]:
    import cubed
    import cubed.array_api as xp
    import cubed.random
    from cubed.runtime.executors.local import ThreadsExecutor

    spec = cubed.Spec(work_dir=tempfile.mkdtemp(), allowed_mem=limit)
    executor = ThreadsExecutor(max_workers=2)
    sources = _Sources(lambda shape, chunks, seed, dtype: cubed.random.random(
        shape, chunks=chunks, spec=spec, dtype=dtype),
        lambda shape, chunks: xp.zeros(shape, chunks=chunks, spec=spec))
    try:
        outs = WORKLOADS[workload](xp, t, sources)
        t0 = time.perf_counter()
        if check:
            values = cubed.compute(*outs, *sources.made, executor=executor)
            _check(workload, t, values[:len(outs)], values[len(outs):])
        elif workload in STORED:  # Cubed stores only into zarr: its writes are real
            for k, out in enumerate(outs):
                cubed.to_zarr(out, os.path.join(spec.work_dir, f"out-{k}.zarr"),
                              executor=executor)
        else:
            cubed.compute(*outs, executor=executor)
        return time.perf_counter() - t0, {}
    finally:
        shutil.rmtree(spec.work_dir, ignore_errors=True)


def child(system: str, workload: str, t: int, limit: str, data_dir: str,
          check: bool = False) -> None:
    """Run ``workload`` on ``system`` in this process and print its figures as JSON."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; systems: {', '.join(SYSTEMS)}")
    if workload == "rechunk":
        extra = _rechunk(system, t, limit, data_dir)
        elapsed = extra.pop("seconds")
    elif system == "tilegraph":
        elapsed, extra = _run_tilegraph(workload, t, limit, check)
    elif system == "dask":
        elapsed, extra = _run_dask(workload, t, check)
    elif system == "distributed":
        with _distributed() as client:
            elapsed, extra = _run_dask(workload, t, check, client)
    else:
        elapsed, extra = _run_cubed(workload, t, limit, check)
    peak = extra.pop("peak_rss", None) or _peak_rss()
    print(json.dumps({"seconds": elapsed, "peak_rss": peak, "checked": check, **extra}))


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def run(system: str, workload: str, t: int, limit: str, timeout: float, data_dir: str,
        check: bool = False, shrink: int = 1) -> dict:
    """Run one workload on one system in a child process: its figures, or ``{"error":
    why}``."""
    cmd = [sys.executable, __file__, "--child", system, "--workload", workload, "--t", str(t),
           "--limit", limit, "--data-dir", data_dir, "--shrink", str(shrink)]
    if check:
        cmd.append("--check")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:.0f} s"}
    if out.returncode != 0:
        code = out.returncode
        said = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        last = (out.stderr.strip().splitlines() or [said])[-1]
        return {"error": last[:200] if code > 0 else said}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _ratios(got: dict) -> list[str]:
    """The lines comparing tilegraph with the other systems of one workload."""
    ok = {k: r for k, r in got.items() if "error" not in r}
    tg = ok.get("tilegraph")
    lines = []
    for other in ("dask", "distributed"):
        if tg and other in ok:
            lines.append(f"  tilegraph/{other}: time {tg['seconds'] / ok[other]['seconds']:.2f}x, "
                         f"peak RSS {tg['peak_rss'] / ok[other]['peak_rss']:.2f}x")
    if tg and "cubed" in ok:
        lines.append(f"  cubed/tilegraph time: {ok['cubed']['seconds'] / tg['seconds']:.2f}x")
    return lines


def main() -> int:
    global _SHRINK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="all", choices=["all", *WORKLOADS])
    parser.add_argument("--t", type=_positive, default=None,
                        help="time steps (default: 1-2x RAM)")
    parser.add_argument("--limit", default="2GB")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--data-dir", default=DATA_DIR,
                        help="where the rechunk's source store is kept")
    parser.add_argument("--check", action="store_true",
                        help="compare each system's results with NumPy's on its inputs")
    parser.add_argument("--shrink", type=_positive, default=1,
                        help="every fixed dimension and block N times smaller")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    _SHRINK = args.shrink
    if args.child:
        if args.t is None:
            parser.error("--child needs --t")
        child(args.child, args.workload, args.t, args.limit, args.data_dir, args.check)
        return 0
    systems = args.systems.split(",")
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; systems: {', '.join(SYSTEMS)}")
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
            r = got[system] = run(system, w, t, args.limit, args.timeout, args.data_dir,
                                  args.check, args.shrink)
            if "error" in r:
                print(f"  {system:11s} failed: {r['error']}")
                continue
            line = f"  {system:11s} {r['seconds']:7.1f} s  peak RSS {_gb(r['peak_rss'])}"
            if system == "tilegraph":
                line += (f"  spilled {_gb(r['spilled'])}, read back {_gb(r['read_back'])}, "
                         f"recomputed {_gb(r['recomputed'])}, staged on disk "
                         f"{_gb(r.get('staged', 0))}; results held "
                         f"{_gb(r['held'])}, projected {_gb(r['projected'])}")
            print(line + ("  (checked against NumPy)" if r.get("checked") else ""))
        for line in _ratios(got):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
