"""tilegraph with dask: dask's graphs on tilegraph, tilegraph's plans on a dask cluster, and
an h5py dataset larger than the memory budget, in one process run.

1. ``tg.from_dask`` of dask's own ``(x @ y + x).sum()`` (n = 8000, blocks of 1000, x and y
   dask random arrays) against dask's threaded scheduler on the same expression; and the
   cost of one tiny compute (``da.ones(10, chunks=5).sum()``) with ``tilegraph.get`` as
   dask's scheduler against dask's threaded scheduler. Target: tilegraph at least as fast.
2. ``backend="dask"``: a tilegraph matmul (n = 8000, blocks of 1000, random inputs made on
   the cluster) on a 2-worker ``LocalCluster`` (one thread each) against the threads
   backend with 2 workers. Target: >= 0.8x the threads backend.
3. An h5py dataset twice ``memory_limit`` streamed through a reduction (``x.sum(axis=0)``
   under ``memory_limit=``) in a fresh process; peak RSS (sampled every 2 ms) above the
   process's RSS before the compute must stay within the limit + 300 MB.

Runs of the competitors alternate, best of ``--repeat``. The machine may be shared: the
figures are noisy. Run: ``python bench/interop.py [--n 8000] [--block 1000] [--repeat 2]
[--h5-mb 1024]`` (``--skip`` any of ``from_dask dask_backend h5py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable

import numpy as np
from measure import best_alternating

import tilegraph as tg


def bench_from_dask(n: int, block: int, repeat: int) -> bool:
    import dask
    import dask.array as da

    rng = da.random.default_rng(0)
    x = rng.random((n, n), chunks=block)
    y = rng.random((n, n), chunks=block)
    expr = (x @ y + x).sum()
    ours = tg.from_dask(expr)
    got, want = ours.compute(), expr.compute(scheduler="threads")
    assert np.isclose(got, want, rtol=1e-9), (got, want)
    t = best_alternating({"dask threads": lambda: expr.compute(scheduler="threads"),
                          "tg.from_dask": lambda: ours.compute()}, repeat)
    ratio = t["dask threads"] / t["tg.from_dask"]
    print(f"from_dask (x @ y + x).sum() n={n} block={block}: dask threads "
          f"{t['dask threads']:.2f} s, tilegraph {t['tg.from_dask']:.2f} s "
          f"-> tilegraph {ratio:.2f}x dask (target >= 1.0)")
    tiny = da.ones(10, chunks=5).sum()
    k = 300

    def many(scheduler: Callable) -> Callable[[], None]:
        def run() -> None:
            for _ in range(k):
                tiny.compute(scheduler=scheduler)
        return run

    tt = best_alternating({"dask": many(dask.threaded.get), "tg": many(tg.get)}, 3)
    print(f"tiny compute (4 tasks) as dask's scheduler: dask threads "
          f"{tt['dask'] / k * 1e3:.2f} ms, tilegraph.get {tt['tg'] / k * 1e3:.2f} ms "
          f"-> tilegraph {tt['dask'] / tt['tg']:.2f}x dask (target >= 1.0)")
    return ratio >= 1.0


def bench_dask_backend(n: int, block: int, repeat: int) -> bool:
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        a = tg.random.random((n, n), chunks=block, seed=1)
        b = tg.random.random((n, n), chunks=block, seed=2)
        c = a @ b
        check = (c[:3, :3]).compute()
        want = (a[:3] @ b[:, :3]).compute()
        np.testing.assert_allclose(check, want)

        def threads() -> None:
            c.compute(backend="threads", workers=2)

        def on_dask() -> None:
            c.compute(backend="dask", client=client)

        on_dask()
        t = best_alternating({"threads": threads, "dask": on_dask}, repeat)
    ratio = t["threads"] / t["dask"]
    gflop = 2 * n**3 / 1e9
    print(f"matmul n={n} block={block}: threads backend (2 workers) {t['threads']:.2f} s "
          f"({gflop / t['threads']:.1f} GFLOP/s), backend='dask' on a 2-worker LocalCluster "
          f"{t['dask']:.2f} s ({gflop / t['dask']:.1f} GFLOP/s) -> dask backend {ratio:.2f}x "
          "threads (target >= 0.8)")
    return ratio >= 0.8


H5_CHILD = textwrap.dedent("""
    import sys, threading, time
    import h5py, numpy as np, psutil
    import tilegraph as tg
    path, limit = sys.argv[1], int(sys.argv[2])
    proc = psutil.Process()
    peak, stop = [0], threading.Event()

    def sample():  # (ru_maxrss would include the parent's peak: it survives exec)
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    with h5py.File(path, "r") as f:
        ds = f["v"]
        x = tg.asarray(ds, chunks=(ds.chunks[0], ds.shape[1]))
        before = proc.memory_info().rss
        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.perf_counter()
        got = x.sum(axis=0).compute(memory_limit=limit)
        seconds = time.perf_counter() - t0
        stop.set()
        sampler.join()
        assert np.isfinite(got).all() and got.shape == (ds.shape[1],)
        print(before, peak[0], seconds, float(got[0]))
""")


def bench_h5py(mb: int) -> bool:
    import h5py

    limit = mb * 2**20 // 2
    cols = 4096
    rows = mb * 2**20 // (8 * cols)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.h5")
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("v", shape=(rows, cols), dtype="f8", chunks=(256, cols))
            step = 4096
            for r in range(0, rows, step):
                k = min(step, rows - r)
                ds[r:r + k] = np.random.default_rng(r).random((k, cols))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [os.path.dirname(os.path.dirname(tg.__file__)), os.environ.get("PYTHONPATH", "")])}
        out = subprocess.run([sys.executable, "-c", H5_CHILD, path, str(limit)], env=env,
                             capture_output=True, text=True, check=True).stdout.split()
    before, peak, seconds = int(out[0]), int(out[1]), float(out[2])
    grown = peak - before
    ok = grown <= limit + 300 * 2**20
    print(f"h5py dataset of {mb} MiB, memory_limit {limit / 2**20:.0f} MiB: sum(axis=0) in "
          f"{seconds:.2f} s ({mb / seconds:.0f} MiB/s); RSS grew {grown / 2**20:.0f} MiB "
          f"(bound: limit + 300 MiB = {(limit + 300 * 2**20) / 2**20:.0f} MiB) -> "
          f"{'within' if ok else 'OVER'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--block", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--h5-mb", type=int, default=1024)
    parser.add_argument("--skip", nargs="*", default=[])
    args = parser.parse_args()
    print(f"tilegraph from {tg.__file__}")
    ok = True
    if "from_dask" not in args.skip:
        ok &= bench_from_dask(args.n, args.block, args.repeat)
    if "dask_backend" not in args.skip:
        ok &= bench_dask_backend(args.n, args.block, args.repeat)
    if "h5py" not in args.skip:
        ok &= bench_h5py(args.h5_mb)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
