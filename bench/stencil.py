"""Stencils out of core: tilegraph beside dask (and Cubed for the vorticity) in one run.

- ``laplacian``: a 5-point Laplacian with periodic boundaries, ``map_overlap(depth=1)``,
  iterated ``--steps`` times (10) on a float32 zarr store of ``--gb`` GB in (4096, 4096)
  chunks (made once in ``--data-dir`` and kept), every block of the result stored into a
  target that drops it (``arr_to_devnull`` of coiled/benchmarks); the program is the same
  text for both systems (``x.map_overlap(lap, depth=1, boundary="periodic")``).
- ``vorticity``: coiled/benchmarks ``test_vorticity`` as published (``np.pad`` with wrap,
  rechunk, weighted differences), at ``--t`` time steps (see ``bench/pangeo.py``, which
  runs it under the same rules).

Each system runs in its own process (its own peak RSS), 2 threads; tilegraph under
``--limit``; each process's address space is capped at ``--cap`` GB (0.9x RAM), so a
system that outgrows memory fails with MemoryError instead of bringing the machine down.
Prints seconds, peak RSS and the ratios to dask.

Run: ``python bench/stencil.py [--workload laplacian|vorticity|all] [--gb 48] [--steps 10]
[--t 60] [--limit 2GB] [--cap GB]`` (the default ``--gb`` is twice this machine's 24 GB of RAM).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from pangeo import DevNull  # (the script's folder is on sys.path)

DATA_DIR = os.path.join(tempfile.gettempdir(), "tilegraph-bench-stencil")
CHUNK = 4096


def lap(b: np.ndarray) -> np.ndarray:
    """The 5-point Laplacian of a block with its halo (the halo rows come back as they
    are; map_overlap trims them)."""
    out = b.copy()
    out[1:-1, 1:-1] = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
                       - 4 * b[1:-1, 1:-1])
    return out


def source(gb: float, data_dir: str) -> str:
    """The input store, made once: smooth waves plus noise, float32."""
    import zarr

    n = int((gb * 1e9 / 4) ** 0.5) // CHUNK * CHUNK
    path = os.path.join(data_dir, f"field-{n}.zarr")
    if os.path.exists(os.path.join(path, ".complete")):
        return path
    os.makedirs(data_dir, exist_ok=True)
    z = zarr.create_array(path, shape=(n, n), chunks=(CHUNK, CHUNK), dtype="float32",
                          overwrite=True)
    rng = np.random.default_rng(0)
    cols = np.sin(np.arange(n, dtype=np.float32) * 0.01)[None, :]
    for i in range(0, n, CHUNK):
        rows = np.cos(np.arange(i, i + CHUNK, dtype=np.float32) * 0.02)[:, None]
        z[i:i + CHUNK] = rows * cols + rng.standard_normal((CHUNK, n), dtype=np.float32)
    open(os.path.join(path, ".complete"), "w").close()
    return path


def _ram_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


def child(system: str, workload: str, args: argparse.Namespace) -> None:
    if args.cap:  # a process over the cap fails with MemoryError, not the machine
        cap = int(args.cap * 1e9)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if workload == "laplacian":
        path = source(args.gb, args.data_dir)
        if system == "tilegraph":
            import tilegraph.array
        else:
            import dask.array  # noqa: F401
        t0 = time.perf_counter()  # (building the graph is timed, importing is not)
        if system == "tilegraph":
            import tilegraph as tg

            x = tg.from_zarr(path)
            for _ in range(args.steps):
                x = x.map_overlap(lap, depth=1, boundary="periodic")
            tg.store(x, DevNull(), memory_limit=args.limit, workers=2)
        else:
            import dask.array as da

            x = da.from_zarr(path)
            for _ in range(args.steps):
                x = x.map_overlap(lap, depth=1, boundary="periodic")
            da.store(x, DevNull(), lock=False, scheduler="threads", num_workers=2)
        elapsed = time.perf_counter() - t0
    else:
        if system == "tilegraph":
            import tilegraph as xp

            def rng(shape, chunks, seed):
                return xp.random.random(shape, chunks=chunks, seed=seed)
        else:
            import dask.array as xp

            def rng(shape, chunks, seed):
                return xp.random.default_rng(seed).random(shape, chunks=chunks)

        side = 5000
        u = rng((side, side, args.t), (side, side, 1), 6)
        v = rng((side, side, args.t), (side, side, 1), 7)
        dx, dy = rng((side + 1, side), (side + 1, side), 8), rng((side + 1, side),
                                                                   (side + 1, side), 9)

        def pad_rechunk(arr):
            padded = np.pad(arr, pad_width=[(0, 1), (0, 0), (0, 0)], mode="wrap")
            new_chunks = list(padded.chunks)
            new_chunks[0] = side + 1
            return padded.rechunk(new_chunks)

        result = dx[..., None] * pad_rechunk(u) - dy[..., None] * pad_rechunk(v)
        t0 = time.perf_counter()
        if system == "tilegraph":
            xp.store(result, DevNull(), memory_limit=args.limit, workers=2)
        else:
            xp.store(result, DevNull(), lock=False, scheduler="threads", num_workers=2)
        elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": elapsed, "peak_rss": peak}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="all", choices=["all", "laplacian", "vorticity"])
    parser.add_argument("--gb", type=float, default=48.0)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--t", type=int, default=60)
    parser.add_argument("--limit", default="2GB")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--data-dir", default=DATA_DIR)
    parser.add_argument("--cap", type=float, default=_ram_gb() * 0.9,
                        help="address space of each system's process, GB (0: none; default "
                             "0.9x RAM), so that one that outgrows memory fails alone")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.workload, args)
        return 0
    workloads = ["laplacian", "vorticity"] if args.workload == "all" else [args.workload]
    for w in workloads:
        if w == "laplacian":
            path = source(args.gb, args.data_dir)  # made before anything is timed
            print(f"laplacian x{args.steps}: {path}, memory_limit={args.limit}, 2 threads")
        else:
            print(f"vorticity: T={args.t}, memory_limit={args.limit}, 2 threads")
        got = {}
        for system in ("tilegraph", "dask"):
            cmd = [sys.executable, __file__, "--child", system, "--workload", w,
                   "--gb", str(args.gb), "--steps", str(args.steps), "--t", str(args.t),
                   "--limit", args.limit, "--data-dir", args.data_dir,
                   "--cap", str(args.cap)]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True,
                                     timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"  {system:10s} did not finish in {args.timeout:.0f} s")
                continue
            if out.returncode != 0:
                last = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"]
                        )[-1]
                print(f"  {system:10s} failed: {last[:120]}")
                continue
            r = got[system] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {system:10s} {r['seconds']:7.1f} s  peak RSS {r['peak_rss'] / 1e9:.2f} GB")
        if len(got) == 2:
            tg, dk = got["tilegraph"], got["dask"]
            print(f"  tilegraph/dask: time {tg['seconds'] / dk['seconds']:.2f}x, "
                  f"peak RSS {tg['peak_rss'] / dk['peak_rss']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
