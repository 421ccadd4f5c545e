"""The workload suite against NumPy and dask, in this process: every program of
:mod:`tilegraph.workloads` timed with tilegraph, with NumPy/SciPy and with dask.array,
printed as a table of seconds, GFLOP/s, peak memory and tilegraph's speed-up, and written
as CSV and as a PNG bar chart of the speed-ups.

    python bench/suite.py                          # every workload at its default sizes
    python bench/suite.py pagerank qr --sizes 20000 --against numpy --repeat 3
    python bench/suite.py --csv rows.csv --png speedups.png
    python bench/suite.py --check                  # only the checks; exit 1 on a mismatch
    python bench/suite.py --list                   # workloads, default sizes, flop formulas
    tilegraph run -n 2 bench/suite.py              # tilegraph on 2 MPI ranks

dask and matplotlib (for ``--png``) are optional: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dask_adapters import run_dask
from measure import measure, touch_memory

from tilegraph.workloads import WORKLOADS, Workload

#: How each competitor runs a workload at a size: NumPy/SciPy, and dask.array.
COMPETITORS: dict[str, Callable[[Workload, int], Any]] = {
    "numpy": lambda wl, size: wl.run_numpy(size),
    "dask": run_dask,
}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


# -- timing -----------------------------------------------------------------------------------


SYSTEMS = ("tilegraph", "numpy", "dask")


@dataclass
class BenchRow:
    """One line of the suite's table: a system's best time on a workload at one size.

    ``ratio`` (competitor rows only) is the competitor's seconds over tilegraph's: above 1,
    tilegraph is faster. ``status`` is ``"ok"``, ``"unavailable: ..."`` or
    ``"error: ..."``."""

    workload: str
    size: int
    system: str
    seconds: float | None
    gflops: float | None
    peak_bytes: int | None
    ratio: float | None
    status: str


def bench(names: Sequence[str] | None = None, sizes: Sequence[int] | None = None,
          against: Sequence[str] = ("numpy", "dask"), backend: str | None = None,
          workers: int | None = None, repeat: int = 1, root: bool = True,
          barrier: Callable[[], None] | None = None,
          on_row: Callable[[BenchRow], None] | None = None) -> list[BenchRow]:
    """Time the workloads ``names`` (default: all) at ``sizes`` (default: each workload's
    own) with tilegraph and the systems of ``against``, in this process, best of
    ``repeat``; returns the rows, and ``on_row`` sees each one as soon as it is measured.

    Each system first runs once at the small check size, untimed, so that no timed run
    pays for imports, first calls or the start of thread pools. With MPI every rank calls
    ``bench``; only the ``root`` rank runs the competitors and gets rows, and ``barrier``
    (if given) is called by every rank before each tilegraph run, so that the other ranks
    can wait there without taking the cores the competitors run on."""
    names = list(WORKLOADS) if not names else list(names)
    for name in names:
        if name not in WORKLOADS:
            raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    for system in against:
        if system not in SYSTEMS[1:]:
            raise ValueError(f"unknown competitor {system!r}; choose from numpy, dask")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    competitors = list(against) if root else []
    rows: list[BenchRow] = []

    def emit(row: BenchRow) -> None:
        if root:
            rows.append(row)
            if on_row is not None:
                on_row(row)

    for name in names:
        wl = WORKLOADS[name]
        for size in (sizes or wl.sizes):
            size = wl.validate(size)
            flops = wl.flops(size)
            _warm_up(wl, competitors, backend, workers)
            touch_memory(2 * wl.memory(size))
            if barrier is not None:
                barrier()
            _warm_up(wl, ["tilegraph"], backend, workers)
            row = _bench_one(wl.name, size, "tilegraph", lambda wl=wl, size=size: (
                wl.run_tilegraph(size, backend=backend, workers=workers, progress=False)),
                flops, repeat, None)
            emit(row)
            tg_seconds = row.seconds if row.status == "ok" else None
            for system in competitors:
                emit(_bench_one(wl.name, size, system,
                                lambda wl=wl, size=size, s=system: COMPETITORS[s](wl, size),
                                flops, repeat, tg_seconds))
    if barrier is not None:
        barrier()
    return rows


def _warm_up(wl: Workload, systems: Sequence[str], backend: str | None,
             workers: int | None) -> None:
    """Run each system once at the small check size, untimed. Failures here are left for
    the timed run to report."""
    small = min(wl.check_size, *wl.sizes)
    for system in systems:
        try:
            if system == "tilegraph":
                wl.run_tilegraph(small, backend=backend, workers=workers, progress=False)
            else:
                COMPETITORS[system](wl, small)
        except Exception:
            pass


def _bench_one(name: str, size: int, system: str, fn: Callable[[], Any], flops: float,
               repeat: int, tg_seconds: float | None) -> BenchRow:
    if system == "dask":
        try:
            import dask  # noqa: F401
        except ImportError:
            return BenchRow(name, size, system, None, None, None, None,
                            "unavailable: dask is not installed")
    try:
        seconds, peak, _ = measure(fn, repeat)
    except Exception as exc:  # a failing system is reported; the other runs go on
        message = str(exc).splitlines()[0] if str(exc) else ""
        return BenchRow(name, size, system, None, None, None, None,
                        f"error: {type(exc).__name__}: {message}")
    ratio = None
    if system != "tilegraph" and tg_seconds:
        ratio = seconds / tg_seconds
    return BenchRow(name, size, system, seconds, flops / seconds / 1e9 if seconds else None,
                    peak, ratio, "ok")


# -- the table, CSV and PNG -------------------------------------------------------------------


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


def _row_line(row: BenchRow) -> str:
    block = WORKLOADS[row.workload].block(row.size)
    head = f"{row.workload:<18} {row.size:>9} {block:>6}  {row.system:<10}"
    if row.status != "ok":
        return f"{head} {row.status}"
    peak = row.peak_bytes / 2**20
    ratio = "" if row.ratio is None else f"{row.ratio:10.2f}x"
    return f"{head} {row.seconds:9.3f} {_fmt(row.gflops, '9.2f')} {peak:10.1f} {ratio}".rstrip()


def _csv_record(row: BenchRow) -> dict[str, Any]:
    return {
        "workload": row.workload, "size": row.size,
        "block": WORKLOADS[row.workload].block(row.size), "system": row.system,
        "seconds": "" if row.seconds is None else f"{row.seconds:.6f}",
        "gflops": "" if row.gflops is None else f"{row.gflops:.4f}",
        "peak_mib": "" if row.peak_bytes is None else f"{row.peak_bytes / 2**20:.2f}",
        "ratio": "" if row.ratio is None else f"{row.ratio:.4f}",
        "status": row.status,
    }


def write_csv(rows: Sequence[BenchRow], path: str) -> None:
    """All bench rows as CSV with the columns :data:`CSV_COLUMNS`."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(_csv_record(row))


def write_png(rows: Sequence[BenchRow], path: str) -> None:
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


# -- the command ------------------------------------------------------------------------------


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
    """The correctness checks of ``--check``: 0 if all pass, else 1."""
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
    """Run what the parsed ``args`` ask for (the list, the checks or the timed suite);
    argument errors go through ``parser.error``. Returns the exit status: 1 if a check
    or a timed run failed."""
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
            parser.error("--png needs matplotlib: pip install -e '.[bench]'")
    backend = args.backend or os.environ.get("TILEGRAPH_BACKEND") or "threads"
    rank = _mpi_rank(backend)
    if args.check:
        return run_checks(names, args.sizes, args.backend, args.workers, rank)

    if rank == 0:
        print(f"bench/suite.py: backend {backend}, workers "
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
    """Parse ``argv`` (default: the command line) and run the suite, its checks or its list;
    returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="bench/suite.py",
        description="Time the workloads (default: all) with tilegraph and with NumPy/SciPy "
                    "and dask.array, each in this process, and print seconds, GFLOP/s, peak "
                    "memory and tilegraph's speed-up.")
    parser.add_argument("workloads", nargs="*", metavar="workload",
                        help=f"workloads to run (default: all): {', '.join(WORKLOADS)}")
    parser.add_argument("--sizes", type=_positive, nargs="+", metavar="N",
                        help="sizes to run (default: each workload's own)")
    parser.add_argument("--against", type=_against, default=["numpy", "dask"],
                        metavar="SYSTEMS",
                        help="competitors, comma-separated: numpy,dask (default), or none")
    parser.add_argument("--backend", default=None, choices=["threads", "sync", "mpi"],
                        help="tilegraph backend (default: threads, or $TILEGRAPH_BACKEND)")
    parser.add_argument("--workers", type=_positive, default=None,
                        help="tilegraph worker threads (default: one per core)")
    parser.add_argument("--repeat", type=_positive, default=1,
                        help="runs per system; the best is reported (default 1)")
    parser.add_argument("--csv", metavar="FILE", help="write all rows to this CSV file")
    parser.add_argument("--png", metavar="FILE",
                        help="save a bar chart of the speed-ups (needs matplotlib)")
    parser.add_argument("--check", action="store_true",
                        help="only run the small correctness checks against NumPy; exit 1 on "
                             "a mismatch")
    parser.add_argument("--list", action="store_true",
                        help="list the workloads with their sizes and flop counts")
    args = parser.parse_args(argv)
    return run_bench(args, parser)


if __name__ == "__main__":
    sys.exit(main())
