"""Rechunks under a memory limit of a few blocks: the plan's largest task, the results held
and the resident set against the limit, on the threads or sync backend, a dask.distributed
LocalCluster or MPI ranks.

The cases (``--scale`` multiplies the shapes' first axis; 1 is the sizes below):

- ``issue``: random (6000, 6000) float64 (288 MB) in column blocks of 100 (4.8 MB) to row
  blocks of 100, summed: refused under ``memory_limit="128MB"`` before the planner sized its
  groups by the limit (tilegraph issue 41, item 6);
- ``reverse``: the same from row to column blocks;
- ``era5``: random (248, 721, 1440) float32 (1 GB) in time blocks of 31 (129 MB) to space
  blocks (-1, 10, 10), the ERA5 rechunk of ``bench/pangeo.py`` at a quarter of its size;
- ``tiny-to-huge``: random (4000, 4000) float64 in (40, 40) blocks into (4000, 500) ones;
- ``huge-to-tiny``: random (4000, 4000) float64 in (2000, 4000) blocks into (70, 130) ones;
- ``uneven``: random (3001, 2999) float64 in (37, 511) blocks into (490, 29) ones;
- ``int32``/``complex``: the ``issue`` case at (3000, 3000) in those dtypes.

Each case runs at each ``--blocks`` multiple of its larger block as ``memory_limit``, in a
fresh process (a fresh ``mpiexec`` for ranks), which prints: the stages of the plan, its
largest task as the executor estimates it (inputs, output, temporaries) against the limit,
the most bytes of results held (``tg.last_run().peak_bytes``), the bytes staged on disk, the
process's peak resident set (``ru_maxrss``) and its baseline before the run, and whether the
values equal NumPy's. Goal: largest task <= limit, held <= limit + one block. The seconds
are printed too; compare them only on a quiet machine.

Run: ``python bench/rechunk_budget.py [--case issue era5 ...] [--blocks 3 5 10]
[--backend threads|sync|dask|mpi] [--ranks 2] [--scale 0.25]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time

MiB = 2**20

CASES = {
    # name: (shape, old blocks, new blocks, dtype)
    "issue": ((6000, 6000), (6000, 100), (100, 6000), "float64"),
    "reverse": ((6000, 6000), (100, 6000), (6000, 100), "float64"),
    "era5": ((248, 721, 1440), (31, -1, -1), (-1, 10, 10), "float32"),
    "tiny-to-huge": ((4000, 4000), (40, 40), (4000, 500), "float64"),
    "huge-to-tiny": ((4000, 4000), (2000, 4000), (70, 130), "float64"),
    "uneven": ((3001, 2999), (37, 511), (490, 29), "float64"),
    "int32": ((3000, 3000), (3000, 100), (100, 3000), "int32"),
    "complex": ((3000, 3000), (3000, 100), (100, 3000), "complex128"),
}


def _rss() -> float:
    """This process's resident set now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MiB


def _peak_rss() -> float:
    """The largest resident set this process has had, in MiB (Linux: KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _shape(name: str, scale: float) -> tuple[int, ...]:
    shape = CASES[name][0]
    return (max(1, round(shape[0] * scale)), *shape[1:])


def _source(name: str, scale: float):
    import numpy as np

    import tilegraph as tg

    _, old, _, dtype = CASES[name]
    shape = _shape(name, scale)
    kind = np.dtype(dtype).kind
    if kind == "f":
        return tg.random.random(shape, chunks=old, seed=1, dtype=dtype)
    if kind in "iu":
        return tg.random.integers(0, 1000, shape, chunks=old, seed=1, dtype=dtype)
    return tg.random.random(shape, chunks=old, seed=1).astype(dtype)


def largest_task(graph) -> tuple[int, str]:
    """The task of ``graph`` that holds the most while it runs, as the executor admits it
    (its inputs and its estimate), and its op."""
    from tilegraph.graph.memory import task_estimates

    est = task_estimates(graph)
    nb = graph.meta["nbytes"]
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    need, op = 0, ""
    for i in range(len(graph)):
        n = est[i] + sum(nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]])
        if n > need:
            need, op = n, graph.opname(i)
    return need, op


def run_case(name: str, blocks: float, backend: str, scale: float) -> dict:
    """One case in this (fresh) process: plan, run, measure."""
    import numpy as np

    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays

    rank = 0
    if backend == "mpi":
        from tilegraph.runtime.mpi import world

        rank = world().Get_rank()
    x = _source(name, scale)
    y = x.rechunk(CASES[name][2])
    itemsize = x.itemsize
    block = itemsize * max(int(np.prod([max(c) for c in x.chunks])),
                           int(np.prod([max(c) for c in y.chunks])))
    limit = int(blocks * block)
    target = y.sum(axis=0)
    record = {"case": name, "blocks": blocks, "backend": backend, "rank": rank,
              "limit": limit, "block": block, "nbytes": x.nbytes}
    options = {"memory_limit": limit, "backend": backend}
    try:
        with tg.config.set(memory_limit=limit):
            planned = plan_arrays([target])
            plan = getattr(y.collection, "plan", None)  # none: every new block a view
            record["stages"] = ["rechunk"] if plan is None else [s for s, _ in plan(
                tg.config.per_process(tg.config.resolve({}, "bench"), 1)).stages]
    except tg.MemoryLimitError as exc:
        record["refused"] = str(exc)
        least = re.search(r"\((\d+) bytes\)", str(exc))
        record["least"] = int(least.group(1)) if least else None
        return record
    record["largest"], record["largest_op"] = largest_task(planned.graph)
    cluster = client = None
    if backend == "dask":
        import distributed

        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1,
                                           processes=False, dashboard_address=":0")
        client = distributed.Client(cluster, set_as_default=False)
        options["client"] = client
    baseline = _rss()
    start = time.perf_counter()
    try:
        got = target.compute(**options)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    record["seconds"] = time.perf_counter() - start
    run = tg.last_run()
    record.update(peak=run.peak_bytes, staged=run.staged_bytes, spilled=run.spilled_bytes,
                  processes=run.processes, rss_base=baseline, rss_peak=_peak_rss())
    want = x.sum(axis=0).compute(backend="threads")
    record["ok"] = bool(got is not None and np.allclose(got, want, rtol=1e-5))
    return record


def _launch(name: str, blocks: float, backend: str, ranks: int, scale: float) -> list[dict]:
    here = os.path.abspath(__file__)
    args = ["--one", name, str(blocks), backend, str(scale)]
    if backend == "mpi":
        from tilegraph.cli import mpiexec_command

        cmd = [*mpiexec_command(ranks), sys.executable, "-m", "mpi4py", here, *args]
    else:
        cmd = [sys.executable, here, *args]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line[len("RECORD "):]) for line in proc.stdout.splitlines()
            if line.startswith("RECORD ")]


def table(names: list[str], multiples: list[float], backend: str, ranks: int,
          scale: float) -> tuple[list[str], bool]:
    """The table's lines, and whether every run met the goal."""
    lines = [f"{'case':<13} {'limit':>10} {'blocks':>6} {'largest task':>13} "
             f"{'held':>9} {'RSS-base':>9} {'staged':>9} {'s':>7}  stages / goal",
             "-" * 110]
    met = True
    for name in names:
        for blocks in multiples:
            records = _launch(name, blocks, backend, ranks, scale)
            r = records[0]
            head = f"{name:<13} {r['limit'] / MiB:>9.1f}M {blocks:>6g}"
            if "refused" in r:
                least = r.get("least")
                lines.append(f"{head} refused: the smallest limit that works is "
                             f"{least / MiB:.1f}M" if least else f"{head} refused")
                continue
            held = max(x["peak"] for x in records)
            rss = max(x["rss_peak"] - x["rss_base"] for x in records)
            ok = (all(x["ok"] and x["peak"] <= x["limit"] + x["block"] for x in records)
                  and r["largest"] <= r["limit"])
            met &= ok
            lines.append(
                f"{head} {r['largest'] / MiB:>12.1f}M {held / MiB:>8.1f}M {rss:>8.1f}M "
                f"{sum(x['staged'] for x in records) / MiB:>8.1f}M "
                f"{max(x['seconds'] for x in records):>7.2f}  "
                f"{'+'.join(r['stages'])} / {'met' if ok else 'MISSED'}")
    lines.append("")
    lines.append("largest task: the plan's, as admission estimates it; held: results held "
                 "(most of any process); RSS-base: peak RSS less the RSS before the run; "
                 "goal: largest task <= limit, held <= limit + one block, NumPy's values")
    return lines, met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--blocks", type=float, nargs="*", default=[3, 5, 10],
                        help="memory limits, in multiples of the larger block")
    parser.add_argument("--backend", default="threads",
                        choices=["threads", "sync", "dask", "mpi"])
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks (--backend mpi)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies the first axis of every case")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one fresh process of a run (a rank, under mpiexec)
        name, blocks, backend, scale = args.one
        print("RECORD " + json.dumps(run_case(name, float(blocks), backend, float(scale))),
              flush=True)
        return 0
    if args.scale <= 0 or any(b <= 0 for b in args.blocks) or args.ranks < 1:
        parser.error("--scale, --blocks and --ranks must be positive")
    lines, met = table(args.case, args.blocks, args.backend, args.ranks, args.scale)
    print("\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
