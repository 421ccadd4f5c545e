"""The memory limit per process: results held against the limit, and the resident set
against its baseline, on the threads of one process and on 2 and 4 MPI ranks.

Two runs under a given ``memory_limit`` (per process, as every backend reads it):

- *staged rechunk*: random (5000, 6000) float64 (229 MiB) in column blocks of 250 to row
  blocks of 250, summed along the rows, under ``150MB`` (143 MiB): larger than half the
  limit, so its pieces go through the intermediate store on disk;
- *matmul*: ``(a @ b).sum(axis=0)`` of random (2000, 2000) float64 operands in blocks of
  250 (0.48 MiB) that a user's function made (spilled, never made again), under ``6MB``.

Each run is a fresh process (a fresh ``mpiexec`` for the ranks), which records its
resident set (RSS) as it starts: the interpreter, then with NumPy, tilegraph and, on a
rank, mpi4py with MPI initialised (the *baseline*, what any process of that kind holds
before a run); and its peak RSS over the run (``ru_maxrss``). The goal (DESIGN.md rule 9):
the results each process holds (``tg.last_run().peak_bytes``) stay within the limit plus
one block; the run's own RSS (peak less baseline) is of the order of the limit, on ranks
as on threads. The figures are bytes, not timings.

Run: ``python bench/limit_per_process.py [--ranks 2 4]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

MiB = 2**20

CASES = {
    # name: (memory_limit, block bytes)
    "staged rechunk": ("150MB", 5000 * 250 * 8),
    "matmul": ("6MB", 250 * 250 * 8),
}


def _rss() -> float:
    """This process's resident set now, in MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MiB


def _peak_rss() -> float:
    """The largest resident set this process has had, in MiB (Linux: KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: str, backend: str) -> dict:
    """One run of ``case`` in this (fresh) process on ``backend`` ("threads" or "mpi")."""
    rss = {"interpreter": _rss()}
    import numpy as np

    rss["numpy"] = _rss()
    import tilegraph as tg

    rss["tilegraph"] = _rss()
    rank = 0
    if backend == "mpi":
        from tilegraph.runtime.mpi import world

        rank = world().Get_rank()
        rss["mpi"] = _rss()
    limit, block = CASES[case]
    if case == "staged rechunk":
        x = tg.random.random((5000, 6000), chunks=(5000, 250), seed=1)
        target = x.rechunk((250, 6000)).sum(axis=1)
        check = x.sum(axis=1)
    else:
        a = tg.random.random((2000, 2000), chunks=250, seed=1).map_blocks(np.add, 0.5)
        b = tg.random.random((2000, 2000), chunks=250, seed=2).map_blocks(np.add, 0.5)
        target = (a @ b).sum(axis=0)
        check = None
    rss["baseline"] = _rss()
    got = target.compute(backend=backend, memory_limit=limit)
    peak_rss = _peak_rss()
    run = tg.last_run()
    if check is not None:
        ok = bool(np.allclose(got, check.compute(backend="sync")))
    else:
        a_np, b_np = a.compute(backend="sync"), b.compute(backend="sync")
        ok = bool(np.allclose(got, (a_np @ b_np).sum(axis=0)))
    return {"case": case, "backend": backend, "rank": rank, "processes": run.processes,
            "limit": run.memory_limit, "peak": run.peak_bytes, "block": block,
            "staged": run.staged_bytes, "spilled": run.spilled_bytes,
            "rss": rss, "peak_rss": peak_rss, "ok": ok}


def _launch(case: str, processes: int | None) -> list[dict]:
    """The records of ``case`` run in a fresh process (``None``: threads) or on fresh
    MPI ranks."""
    here = os.path.abspath(__file__)
    if processes is None:
        cmd = [sys.executable, here, "--one", case, "threads"]
    else:
        from tilegraph.cli import mpiexec_command

        cmd = [*mpiexec_command(processes), sys.executable, "-m", "mpi4py", here, "--one",
               case, "mpi"]
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line[len("RECORD "):]) for line in proc.stdout.splitlines()
            if line.startswith("RECORD ")]


def table(ranks: list[int]) -> tuple[list[str], bool]:
    """The lines of the table, and whether every run met the goal (held <= limit + one
    block on every process, values equal to NumPy's)."""
    lines = [f"{'run':<15} {'where':<10} {'limit':>9} {'held':>9} {'held/limit':>10} "
             f"{'block':>8} {'RSS base':>9} {'RSS peak':>9} {'run RSS':>8}  goal",
             "-" * 98]
    met = True
    baselines: dict[str, dict] = {}
    for case in CASES:
        for processes in [None, *ranks]:
            records = _launch(case, processes)
            where = "threads" if processes is None else f"{processes} ranks"
            held = max(r["peak"] for r in records)
            limit = records[0]["limit"]
            block = records[0]["block"]
            base = max(r["rss"]["baseline"] for r in records)
            peak = max(r["peak_rss"] for r in records)
            run_rss = max(r["peak_rss"] - r["rss"]["baseline"] for r in records)
            ok = all(r["ok"] and r["peak"] <= r["limit"] + r["block"] for r in records)
            met &= ok
            baselines.setdefault("threads" if processes is None else "rank", records[0]["rss"])
            lines.append(f"{case:<15} {where:<10} {limit / MiB:>8.1f}M {held / MiB:>8.1f}M "
                         f"{held / limit:>10.3f} {block / MiB:>7.2f}M {base:>8.1f}M "
                         f"{peak:>8.1f}M {run_rss:>7.1f}M  {'met' if ok else 'MISSED'}")
    lines.append("")
    lines.append("baseline RSS of a process (MiB), as it starts: " + "; ".join(
        f"{kind}: " + ", ".join(f"{step} {value:.1f}" for step, value in rss.items())
        for kind, rss in baselines.items()))
    lines.append("held: the most bytes of results a process held (max over ranks); RSS base: "
                 "before the run; run RSS: peak RSS less that baseline (max over ranks)")
    return lines, met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[2, 4],
                        help="MPI world sizes to run (none: threads only)")
    parser.add_argument("--one", nargs=2, metavar=("CASE", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one fresh process of a run (a rank, under mpiexec)
        print("RECORD " + json.dumps(run_case(*args.one)), flush=True)
        return 0
    lines, met = table(args.ranks)
    print("\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
