"""Out-of-core matmul: inputs and output are .npy files on disk, memory capped.

tilegraph reads A and B block by block (``from_npy``), multiplies with ``memory_limit``, and
writes C block by block (``to_npy``). Beside it, in separate processes of the same run: an
in-memory NumPy ``A @ B`` (the speed reference) and dask (``da.from_array`` over memory-maps
and ``da.store`` into a memory-mapped output, same blocks). Each process reports its own
peak resident set (``ru_maxrss``, which counts pages of memory-mapped files, as
``/usr/bin/time -v`` does). Targets: tilegraph's peak <= limit + 300 MB, and >= 0.85x the
GFLOP/s of the in-memory NumPy matmul. When the three matrices do not fit in memory
(``--systems tilegraph``, e.g. ``--n 40000``), the speed reference is BLAS's rate on an
in-memory 8000 x 8000 product, measured in its own process of the same run.
Run: ``python bench/out_of_core_matmul.py [--n 12000] [--block 2000] [--limit 1GB]
[--systems numpy,tilegraph,dask]``.
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


def make_inputs(d: str, n: int, block: int) -> tuple[str, str]:
    import tilegraph as tg

    pa, pb = os.path.join(d, "a.npy"), os.path.join(d, "b.npy")
    tg.random.random((n, n), chunks=block, seed=1).to_npy(pa, memory_limit="2GB")
    tg.random.random((n, n), chunks=block, seed=2).to_npy(pb, memory_limit="2GB")
    return pa, pb


def _io() -> dict[str, int]:
    """This process's I/O counters (``/proc/self/io``)."""
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def child(system: str, d: str, n: int, block: int, limit: str) -> None:
    pa, pb = os.path.join(d, "a.npy"), os.path.join(d, "b.npy")
    out = os.path.join(d, f"c-{system}.npy")
    if system == "blas":  # BLAS's rate in memory, at a size that fits
        m = min(n, 8000)
        a = np.random.default_rng(1).random((m, m))
        b = np.random.default_rng(2).random((m, m))
        a @ b
        t0 = time.perf_counter()
        a @ b
        elapsed = (time.perf_counter() - t0) * (n / m) ** 3  # the time at n, at that rate
    elif system == "numpy":
        a, b = np.load(pa), np.load(pb)
        t0 = time.perf_counter()
        c = a @ b
        elapsed = time.perf_counter() - t0
        np.save(os.path.join(d, "c-ref-rows.npy"), c[:64])
    elif system == "tilegraph":
        import tilegraph as tg

        a, b = tg.from_npy(pa, chunks=block), tg.from_npy(pb, chunks=block)
        io0 = _io()
        t0 = time.perf_counter()
        (a @ b).to_npy(out, memory_limit=limit)
        elapsed = time.perf_counter() - t0
        io1 = _io()
        summary = (f"{tg.last_run()}; read {io1['rchar'] - io0['rchar']:,} B through read "
                   f"calls, {io1['read_bytes'] - io0['read_bytes']:,} B from the device")
    else:
        import dask
        import dask.array as da

        a = da.from_array(np.load(pa, mmap_mode="r"), chunks=block)
        b = da.from_array(np.load(pb, mmap_mode="r"), chunks=block)
        target = np.lib.format.open_memmap(out, mode="w+", dtype=np.float64, shape=(n, n))
        t0 = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            da.store(a @ b, target)
        target.flush()
        elapsed = time.perf_counter() - t0
        del target
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = {"elapsed": elapsed, "peak": peak}
    if system == "tilegraph":
        result["summary"] = summary
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12000)
    parser.add_argument("--block", type=int, default=2000)
    parser.add_argument("--limit", default="1GB")
    parser.add_argument("--dir", default=None, help="where the .npy files go (default: temp)")
    parser.add_argument("--systems", default="numpy,tilegraph,dask",
                        help="which to run; without numpy, BLAS's in-memory rate is the "
                             "reference")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    systems = args.systems.split(",")
    if not set(systems) <= {"numpy", "tilegraph", "dask"} or "tilegraph" not in systems:
        parser.error(f"--systems: a comma-separated subset of numpy, tilegraph, dask with "
                     f"tilegraph, got {args.systems!r}")
    if args.child:
        child(args.child, args.dir, args.n, args.block, args.limit)
        return 0
    from tilegraph.runtime.memory import parse_bytes

    limit = parse_bytes(args.limit)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        make_inputs(d, args.n, args.block)
        gflop = 2 * args.n**3 / 1e9
        print(f"out-of-core matmul n={args.n}, blocks {args.block}, memory_limit={args.limit}; "
              f"each matrix {args.n**2 * 8 / 1e9:.2f} GB on disk")
        res = {}
        reference = "numpy" if "numpy" in systems else "blas"
        for system in [reference, *(x for x in ("tilegraph", "dask") if x in systems)]:
            cmd = [sys.executable, __file__, "--child", system, "--dir", d, "--n", str(args.n),
                   "--block", str(args.block), "--limit", args.limit]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = res[system] = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"  {system:10s} {r['elapsed']:7.1f} s {gflop / r['elapsed']:7.1f} GFLOP/s  "
                  f"peak RSS {r['peak'] / 1e9:5.2f} GB")
            if system == "tilegraph":
                print(f"             {r['summary']}")
                c = np.load(os.path.join(d, "c-tilegraph.npy"), mmap_mode="r")
                if reference == "numpy":
                    ref = np.load(os.path.join(d, "c-ref-rows.npy"))
                else:  # its first 64 rows, from the inputs' rows and B
                    ref = np.load(os.path.join(d, "a.npy"), mmap_mode="r")[:64] @ np.load(
                        os.path.join(d, "b.npy"), mmap_mode="r")
                assert np.allclose(c[:64], ref), "tilegraph's C differs from NumPy's"
                del c
            if system in ("tilegraph", "dask"):
                os.remove(os.path.join(d, f"c-{system}.npy"))
        speed = res[reference]["elapsed"] / res["tilegraph"]["elapsed"]
        over = res["tilegraph"]["peak"] - limit
        print(f"  tilegraph: {speed:.2f}x {'NumPy' if reference == 'numpy' else 'BLAS'}'s "
              f"GFLOP/s; peak = limit {'+' if over >= 0 else '-'} {abs(over) / 1e6:.0f} MB"
              + (f"; dask {res[reference]['elapsed'] / res['dask']['elapsed']:.2f}x NumPy, "
                 f"peak {res['dask']['peak'] / 1e9:.2f} GB" if "dask" in res else ""))
        ok = speed >= 0.85 and over <= 300e6
        print("targets (peak <= limit + 300 MB, >= 0.85x NumPy):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
