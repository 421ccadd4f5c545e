"""Running task graphs: :func:`run` for a TaskGraph, :func:`get` for dask-style dicts."""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph import config
from tilegraph.diagnostics.progress import ProgressBar, progress_wanted
from tilegraph.graph.dask_spec import from_dask
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.plan.order import order
from tilegraph.runtime.backends import make_backend
from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import RunStart, global_subscribers
from tilegraph.runtime.memory import (
    SpillStore,
    check_fits,
    default_limit,
    human,
    return_freed_blocks_to_os,
)


def _priority(graph: TaskGraph, outputs: np.ndarray) -> np.ndarray:
    """The planner's priorities if every task has one (ranked), else the default order."""
    col = graph.meta.get("priority")
    if col is not None and all(p is not None for p in col):
        ranks = np.empty(len(graph), dtype=np.int64)
        ranks[np.argsort(np.asarray(col), kind="stable")] = np.arange(len(graph))
        return ranks
    return order(graph, outputs)


def run(graph: TaskGraph, outputs: Sequence[Hashable], **options: Any) -> list[Any]:
    """Compute the tasks ``outputs`` (keys) of ``graph``; returns their values in order.

    Options are those of :mod:`tilegraph.config` (``backend``, ``workers``, ``retries``,
    ``progress``, ``callbacks``, ``memory_limit``, ``spill_dir``). A task that could never
    fit under the memory limit is an error before anything runs. Only the tasks the outputs
    need are run; every other result is released as soon as its last consumer has run. If a
    task fails, its exception is raised here, with a note naming the task key and op, after
    the rest of the run was cancelled.

    With ``backend="mpi"`` every rank must call ``run`` with the same graph; the tasks are
    placed on the ranks (unless the graph has a ``worker`` column already), the values are
    returned on rank 0, and ``None`` is returned on the other ranks.
    """
    opts = config.resolve(options, "run()")
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"run() needs a TaskGraph, got {type(graph).__name__}")
    outputs = list(dict.fromkeys(outputs))
    culled = graph.cull(outputs)
    out_idx = culled.indices(outputs)
    priority = _priority(culled, out_idx)
    backend = make_backend(opts["backend"], opts["workers"])
    subscribers = (*opts["callbacks"], *global_subscribers())
    recorder = None
    if opts["report"] is not None:
        from tilegraph.diagnostics.report import Recorder

        recorder = Recorder()
        subscribers = (*subscribers, recorder)
    limit = opts["memory_limit"] or default_limit()
    if opts["memory_limit"]:
        return_freed_blocks_to_os()
    store = SpillStore(opts["spill_dir"])
    if backend.distributed:
        try:
            values = backend.execute(culled, out_idx, priority, retries=opts["retries"],
                                     subscribers=subscribers, memory_limit=limit, spill=store,
                                     initial=opts["placement"])
            _remember(backend, backend.execution, limit, len(culled))
            return values
        finally:
            execution = getattr(backend, "execution", None)
            if execution is not None:
                execution.clear()
            store.close()
            if recorder is not None:
                recordings = backend.comm.gather(recorder.data(), root=0)
                if backend.rank == 0:
                    _write_report(opts["report"], recordings, culled, out_idx, backend)
    execution = Execution(culled, out_idx, priority, retries=opts["retries"],
                          subscribers=subscribers, memory_limit=limit, spill=store)
    check_fits(culled, execution.estimates, limit)
    for fn in subscribers:
        fn(RunStart(len(culled), backend.workers, backend.name, 0, time.perf_counter()))
    try:
        try:
            if progress_wanted(opts["progress"]) and not execution.finished:
                with ProgressBar(execution):
                    backend.run(execution)
            else:
                backend.run(execution)
        except BaseException as exc:
            execution.cancel(exc)
            raise
        if execution.error is not None:
            raise execution.error
        values = execution.output_values()
        _remember(backend, execution, limit, len(culled))
        return values
    finally:
        execution.clear()  # frees results and removes every spill file, whatever happened
        if recorder is not None:
            _write_report(opts["report"], [recorder.data()], culled, out_idx, backend)


@dataclass(frozen=True)
class RunSummary:
    """What the last successful run did: tasks, backend, workers, seconds, the memory budget,
    the most bytes of results held at once, and bytes spilled to and read back from disk.
    With MPI these are this rank's figures (``ntasks``: tasks in its part of the plan), and
    ``processes`` and ``bytes_sent`` give the ranks and the bytes this rank sent."""

    ntasks: int
    backend: str
    workers: int
    elapsed: float
    memory_limit: int
    peak_bytes: int
    spilled_bytes: int
    unspilled_bytes: int
    processes: int = 1
    bytes_sent: int = 0

    def __str__(self) -> str:
        where = f" x {self.processes} ranks" if self.processes > 1 else ""
        sent = f"; sent {human(self.bytes_sent)} to other ranks" if self.processes > 1 else ""
        return (f"{self.ntasks} tasks on {self.workers}{where} {self.backend} worker(s) in "
                f"{self.elapsed:.3f} s; peak {human(self.peak_bytes)} of results held "
                f"(limit {human(self.memory_limit)}); spilled {human(self.spilled_bytes)}, "
                f"read back {human(self.unspilled_bytes)}{sent}")


_last_summary: RunSummary | None = None


def _write_report(path: str, recordings: list, graph: TaskGraph, outputs: np.ndarray,
                  backend: Any) -> None:
    """The HTML report of a run (successful or not), with the plan summary in words."""
    from tilegraph.diagnostics.report import write_report
    from tilegraph.plan.explain import graph_summary, summary_lines

    lines = summary_lines(graph_summary(graph, outputs), backend.workers)
    processes = getattr(backend, "processes", 1)
    if processes > 1:
        from tilegraph.plan.simulate import simulate

        placement = backend.placement  # as the run used it
        sim = simulate(graph, placement, processes, outputs=outputs)
        lines.append(f"placed on {processes} MPI ranks; the placement implies "
                     f"{human(sim.bytes_moved)} moved in {sim.messages} messages")
    write_report(path, recordings, title=f"tilegraph run ({backend.name})",
                 summary="\n".join(lines))


def _remember(backend: Any, execution: Execution, limit: int, ntasks: int) -> None:
    global _last_summary
    _last_summary = RunSummary(
        ntasks, backend.name, backend.workers, time.perf_counter() - execution.started,
        limit, execution.peak_live, execution.spilled_bytes, execution.unspilled_bytes,
        getattr(backend, "processes", 1), getattr(backend, "bytes_sent", 0))


def last_run() -> RunSummary | None:
    """The summary of the last successful run in this process (``None`` before any)."""
    return _last_summary


def _flatten(keys: Any) -> Iterator[Hashable]:
    if isinstance(keys, list):
        for k in keys:
            yield from _flatten(k)
    else:
        yield keys


def _pack(keys: Any, values: dict) -> Any:
    if isinstance(keys, list):
        return tuple([_pack(k, values) for k in keys])
    return values[keys]


def get(dsk: Any, keys: Any, **options: Any) -> Any:
    """Compute ``keys`` of the dask-style graph ``dsk``, like ``dask.get``.

    ``keys`` is one key, or a list (possibly nested) of keys; the result has the same shape,
    with tuples for lists, as ``dask.get`` returns it.
    Works as a dask scheduler: ``dask.compute(x, scheduler=tilegraph.get)``. With
    ``backend="mpi"``, rank 0 gets the values and the other ranks get ``None``.

    >>> from operator import add
    >>> dsk = {"x": 1, "y": (add, "x", 1), "z": (add, "y", "x")}
    >>> get(dsk, "z")
    3
    >>> get(dsk, [["x", "y"], "z"])
    ((1, 2), 3)
    """
    config.resolve(options, "get()")
    graph = from_dask(dsk)
    flat = list(_flatten(keys))
    for k in flat:
        try:
            present = k in graph.index
        except TypeError:
            raise TypeError(f"keys must be hashable, got {k!r} ({type(k).__name__})") from None
        if not present:
            raise KeyError(f"key {k!r} is not in the task graph")
    unique = list(dict.fromkeys(flat))
    values = run(graph, unique, **options)
    if values is None:  # an MPI rank other than 0: the values were gathered on rank 0
        return None
    return _pack(keys, dict(zip(unique, values, strict=True)))
