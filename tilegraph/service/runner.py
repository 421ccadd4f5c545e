"""The process a job of the service runs in.

``python -m tilegraph.service.runner script FILE [ARGS...]`` runs a Python script as
``python FILE ARGS...`` would (``__main__``, ``sys.argv``, its directory first on
``sys.path``); ``python -m tilegraph.service.runner compute PLAN OUT`` runs a plan sent by
:meth:`tilegraph.Client.compute` (a pickled :class:`tilegraph.array.lowering.ArrayPlan`)
through the pipeline and writes its arrays to ``OUT`` (``.npz``). The backend is the
environment's (``TILEGRAPH_BACKEND`` and the pool's settings, given by the service).

Options before the command, given by the service: ``--workers N``; ``--cgroup DIR`` (the
runner moves itself into the job's cgroup before anything of the job runs) or
``--subreaper`` (it adopts its orphaned descendants and kills them all when it ends; see
:mod:`tilegraph.service.reaper`); for ``compute``, ``--job ID --key-fd FD --plan-bytes N``:
the plan file is unpickled only if it carries the service's MAC for job ``ID`` under the
secret read from the pipe ``FD`` and holds ``N`` bytes of plan
(:func:`tilegraph.service.protect.open_plan`); otherwise the job fails with an error naming
the file, and nothing of it runs.

When ``TILEGRAPH_EVENTS`` names a file, every run of the process sends its typed events
(:mod:`tilegraph.runtime.events`) there as JSON lines: the subscriber only appends to a queue
(it runs under the executor's lock), and a thread writes what has arrived four times a
second. The plan of each run is summarised (``explain``) by that thread, off the run's path.
The same thread keeps the job's progress (runs, tasks done and planned, bytes held, peak and
spilled, the task each worker runs now, the plan summaries) and replaces the small JSON file
``TILEGRAPH_PROGRESS`` names with it, so the service never parses events to show progress.
Events of single tasks (``TaskStart``, ``TaskEnd``, ``Release``, ...) beyond the first
``MAX_TASK_EVENTS`` of the process are counted in the progress, not written.

An exception that escapes the script (or the plan) is written with its traceback to the
file ``TILEGRAPH_ERROR_FILE`` names (``error.json`` in the working directory by default) and
to standard error; the exit status is 1 (130
after Ctrl-C, the script's own status after ``sys.exit``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Hashable
from typing import Any

from tilegraph.runtime import events as ev

FLUSH_SECONDS = 0.25
KEY_CHARS = 80
MAX_TASK_EVENTS = 200_000  # per process: a dashboard draws far fewer; the file stays small
MAX_SUMMARIES = 20  # plan summaries kept in the progress (one per run of a script)


def _key(key: Hashable) -> str:
    text = repr(key)
    return text if len(text) <= KEY_CHARS else text[:KEY_CHARS - 1] + "\u2026"


def _plan_summary(plan: Any, workers: int) -> list[str]:
    from tilegraph.plan.explain import graph_summary, summary_lines

    return summary_lines(graph_summary(plan.graph, plan.outputs, plan.fuse_stats), workers)


class EventSink:
    """An event subscriber that writes the events of every run as JSON lines to ``path``,
    in batches, from its own thread (call :meth:`close` to write what is left)."""

    def __init__(self, path: str, interval: float = FLUSH_SECONDS,
                 progress: str | None = None, max_task_events: int = MAX_TASK_EVENTS):
        self._file = open(path, "a", encoding="utf-8")
        self._queue: deque[tuple[float, ev.Event]] = deque()
        self._stop = threading.Event()
        self._colours: dict[str, str] = {}
        self._progress_path = progress
        self._room = max_task_events
        self.progress: dict[str, Any] = {
            "runs": 0, "tasks_total": 0, "tasks_done": 0, "held_bytes": 0, "peak_bytes": 0,
            "spilled_bytes": 0, "current": {}, "plan": [], "events_dropped": 0}
        self._run_spilled = 0
        self._thread = threading.Thread(target=self._loop, args=(interval,),
                                         name="service-event-sink", daemon=True)
        self._thread.start()

    def __call__(self, event: ev.Event) -> None:
        self._queue.append((time.perf_counter(), event))

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.flush()

    def _colour(self, kind: str) -> str:
        colour = self._colours.get(kind)
        if colour is None:
            from tilegraph.diagnostics.report import kind_colour

            colour = self._colours[kind] = kind_colour(kind)
        return colour

    def _record(self, at: float, e: ev.Event) -> dict[str, Any]:
        tp = type(e)
        if tp is ev.TaskEnd:
            return {"type": "TaskEnd", "key": _key(e.key), "name": e.name, "kind": e.kind,
                    "colour": self._colour(e.kind), "worker": e.worker, "start": e.start,
                    "stop": e.stop, "nbytes": e.nbytes, "held": e.held}
        if tp is ev.TaskStart:
            return {"type": "TaskStart", "key": _key(e.key), "name": e.name, "kind": e.kind,
                    "worker": e.worker, "time": e.time}
        if tp is ev.Release:
            return {"type": "Release", "nbytes": e.nbytes, "held": e.held, "time": at}
        if tp is ev.Spill:
            return {"type": "Spill", "nbytes": e.nbytes, "clean": e.clean, "held": e.held,
                    "time": at}
        if tp is ev.Unspill:
            return {"type": "Unspill", "nbytes": e.nbytes, "ahead": e.ahead, "held": e.held,
                    "time": at}
        if tp is ev.Transfer:
            return {"type": "Transfer", "source": e.source, "dest": e.dest,
                    "nbytes": e.nbytes, "start": e.start, "stop": e.stop, "held": e.held}
        if tp is ev.TaskFailed:
            return {"type": "TaskFailed", "key": _key(e.key), "name": e.name,
                    "worker": e.worker, "error": f"{type(e.error).__name__}: {e.error}",
                    "retry": e.retry, "time": at}
        if tp is ev.RunStart:
            rec: dict[str, Any] = {"type": "RunStart", "ntasks": e.ntasks,
                                   "nworkers": e.nworkers, "backend": e.backend,
                                   "rank": e.rank, "time": e.time}
            if e.plan is not None:
                # a serverless run's events tell of every task of the plan, not only of
                # those the driver runs (its ntasks); some may come after its RunEnd
                rec["plan_tasks"] = len(e.plan.graph)
                try:
                    rec["summary"] = _plan_summary(e.plan, e.nworkers)
                except Exception as exc:  # a summary never fails the run it describes
                    rec["summary"] = [f"(no plan summary: {type(exc).__name__}: {exc})"]
            return rec
        if tp is ev.RunEnd:
            return {"type": "RunEnd", "status": e.status, "ndone": e.ndone,
                    "elapsed": e.elapsed, "peak_bytes": e.peak_bytes,
                    "spilled_bytes": e.spilled_bytes, "unspilled_bytes": e.unspilled_bytes,
                    "time": at}
        rec = {"type": tp.__name__, "time": at}  # an event this writer does not know
        for f in dataclasses.fields(e):
            value = getattr(e, f.name)
            if isinstance(value, (int, float, str, bool)) or value is None:
                rec[f.name] = value
        return rec

    def _count(self, rec: dict[str, Any]) -> bool:
        """Fold one event into the progress; whether it is written to the file."""
        p = self.progress
        kind = rec["type"]
        held = rec.get("held", -1)
        if held >= 0:
            p["held_bytes"] = held
            p["peak_bytes"] = max(p["peak_bytes"], held)
        if kind == "TaskEnd":
            p["tasks_done"] += 1
            p["current"].pop(str(rec["worker"]), None)
        elif kind == "TaskStart":
            p["current"][str(rec["worker"])] = rec["name"]
        elif kind == "Spill" and not rec["clean"]:  # bytes written to disk
            self._run_spilled += rec["nbytes"]
            p["spilled_bytes"] += rec["nbytes"]
        elif kind == "RunStart":
            p["runs"] += 1
            p["tasks_total"] += max(rec["ntasks"], rec.get("plan_tasks", 0))
            self._run_spilled = 0
            if rec.get("summary"):
                p["plan"] = [*p["plan"], rec["summary"]][-MAX_SUMMARIES:]
            return True
        elif kind == "RunEnd":
            p["peak_bytes"] = max(p["peak_bytes"], rec["peak_bytes"])
            # the executor's count is the truth (a clean spill may write nothing)
            p["spilled_bytes"] += rec["spilled_bytes"] - self._run_spilled
            p["current"] = {}
            return True
        if self._room > 0:
            self._room -= 1
            return True
        p["events_dropped"] += 1
        return False

    def flush(self) -> None:
        """Write the events that have arrived so far, and the progress."""
        lines = []
        queue = self._queue
        while True:
            try:
                at, event = queue.popleft()
            except IndexError:
                break
            rec = self._record(at, event)
            if self._count(rec):
                lines.append(json.dumps(rec, separators=(",", ":")))
        if lines:
            self._file.write("\n".join(lines) + "\n")
            self._file.flush()
        if self._progress_path is not None and (lines or self.progress["events_dropped"]):
            tmp = self._progress_path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self.progress, f, separators=(",", ":"))
            os.replace(tmp, self._progress_path)

    def close(self) -> None:
        """Stop the writer thread and write what is left."""
        self._stop.set()
        self._thread.join()
        self.flush()
        self._file.close()


def sink_from_env() -> EventSink | None:
    """An :class:`EventSink` writing to the file ``TILEGRAPH_EVENTS`` names, if it does
    (and its progress to ``TILEGRAPH_PROGRESS``)."""
    path = os.environ.get("TILEGRAPH_EVENTS")
    return EventSink(path, progress=os.environ.get("TILEGRAPH_PROGRESS") or None) \
        if path else None


def _write_error(exc: BaseException, script: str | None) -> None:
    """The traceback of ``exc`` from the script's first frame on (the runner's and runpy's
    frames are not the user's), to error.json and standard error."""
    tb = exc.__traceback__
    if script is not None:
        first = tb
        while first is not None and first.tb_frame.f_code.co_filename != script:
            first = first.tb_next
        tb = first or tb
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    sys.stderr.write(text)
    sys.stderr.flush()
    with open(os.environ.get("TILEGRAPH_ERROR_FILE") or "error.json", "w",
              encoding="utf-8") as f:
        json.dump({"error": f"{type(exc).__name__}: {exc}", "traceback": text}, f)


def run_script(path: str, args: list[str], workers: int | None) -> None:
    """Run the script at ``path`` as ``__main__`` with ``args``."""
    import runpy

    from tilegraph import config

    path = os.path.abspath(path)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    with config.set(workers=workers):
        runpy.run_path(path, run_name="__main__")


def run_plan(plan_path: str, out_path: str, workers: int | None, *, key: bytes,
             job_id: str, size: int) -> None:
    """Run a sealed, pickled array plan through the pipeline (unpickled only when its MAC
    for ``job_id`` under ``key`` is valid and it has ``size`` bytes of plan:
    :func:`tilegraph.service.protect.open_plan`); its arrays go to ``out_path`` (.npz,
    numeric arrays only: nothing in it needs unpickling)."""
    import pickle

    import numpy as np

    from tilegraph import config, pipeline
    from tilegraph.service.protect import open_plan

    planned = pickle.loads(open_plan(plan_path, key, job_id, size))
    with config.set(workers=workers):
        values = pipeline.execute(planned.plan, finish=planned.results.assemble)
    arrays = {f"arr_{i}": np.asarray(v) for i, v in enumerate(values)}
    for name, a in arrays.items():
        if a.dtype.hasobject:
            raise TypeError(f"result {name[4:]} is an array of Python objects ({a.dtype}); "
                            "the service returns numeric arrays only")
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, out_path)


USAGE = ("usage: python -m tilegraph.service.runner [--workers N] [--cgroup DIR | "
         "--subreaper] (script FILE [ARGS...] | --job ID --key-fd FD --plan-bytes N "
         "compute PLAN OUT)")
_VALUED = ("--workers", "--cgroup", "--job", "--key-fd", "--plan-bytes")


def _options(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """The leading options of ``argv`` and the rest (ValueError on a bad one)."""
    opts: dict[str, str] = {}
    while argv and argv[0].startswith("--"):
        if argv[0] == "--subreaper":
            opts["subreaper"] = "1"
            argv = argv[1:]
        elif argv[0] in _VALUED and len(argv) >= 2:
            opts[argv[0][2:]] = argv[1]
            argv = argv[2:]
        else:
            raise ValueError(f"unknown option {argv[0]!r}")
    if not argv or argv[0] not in ("script", "compute") or len(argv) < 2 or (
            argv[0] == "compute" and (len(argv) != 3 or not {"job", "key-fd", "plan-bytes"}
                                      <= set(opts))):
        raise ValueError("no command")
    return opts, argv


def _read_key(fd: int) -> bytes:
    """The service's secret, from the pipe ``fd`` (closed after)."""
    with os.fdopen(fd, "rb") as f:
        return f.read(1024)


def _hold_processes(opts: dict[str, str]) -> None:
    """Before anything of the job runs: join its cgroup, or become the subreaper of its
    processes (:mod:`tilegraph.service.reaper`)."""
    from tilegraph.service import reaper

    if "cgroup" in opts:
        reaper.join_cgroup(opts["cgroup"])
    elif "subreaper" in opts:
        reaper.become_subreaper()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        opts, argv = _options(argv)
        workers = int(opts["workers"]) if "workers" in opts else None
        key = _read_key(int(opts["key-fd"])) if "key-fd" in opts else b""
        _hold_processes(opts)
    except ValueError as exc:
        print(f"{USAGE}\n{exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the job's processes could not be held: nothing of it runs
        _write_error(exc, None)
        return 2
    sink = sink_from_env()
    try:
        with ev.subscribe(sink) if sink is not None else contextlib.nullcontext():
            if argv[0] == "script":
                run_script(argv[1], argv[2:], workers)
            else:
                run_plan(argv[1], argv[2], workers, key=key, job_id=opts["job"],
                         size=int(opts["plan-bytes"]))
        return 0
    except KeyboardInterrupt:
        print("tilegraph: the job was cancelled", file=sys.stderr)
        return 130
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException as exc:
        # frames of main() and run_script/run_plan (and runpy's) are not the user's
        _write_error(exc, os.path.abspath(argv[1]) if argv[0] == "script" else None)
        return 1
    finally:
        if sink is not None:
            sink.close()
        if "subreaper" in opts:
            from tilegraph.service.reaper import end_descendants

            end_descendants()


if __name__ == "__main__":
    sys.exit(main())
