"""The one pipeline: every front end's TaskGraph is planned and run here.

::

    TaskGraph -> cull -> place -> fuse -> order -> backend.partition -> execute
                         (several   (same-worker  (priority) (this process's  (executor core,
                         processes) chains only)             part; transport) memory budget)

Front ends (``Array.compute``/``tg.compute``, ``get``, ``run``, ``while_loop``,
``to_npy``/``to_zarr``, and every later front end) lower their program to a TaskGraph and call
:func:`run` (or :func:`make_plan` then :func:`execute`, to reuse one plan for several runs);
none of them talks to a backend or to the executor. An implicit graph (a LambdaPACK DAG run
unexpanded) goes to a backend that can run one through :func:`run_implicit`. Backends
implement the seam of :mod:`tilegraph.runtime.backends` (``partition`` and a transport);
the pipeline drives it the same way for all of them. Diagnostics attach here: the progress
bar, the HTML report (an event subscriber) and the run summary (:func:`last_run`).

Stages:

1. **cull**: only the tasks the outputs need.
2. **place**: with several processes (MPI ranks), every task gets a worker by the op-kind
   rules of :func:`tilegraph.plan.place.place`, computed on one process and shared
   (``backend.collective.decide``, for a backend whose processes each run the pipeline);
   a graph with a ``worker`` column keeps it.
3. **fuse**: chains of single-consumer tasks fuse, only on one worker.
4. **order**: the planner's ``priority`` column if every task has one, else
   :func:`tilegraph.plan.order.order`.
5. **execute**: the backend partitions the plan; the executor core runs this process's part
   under the memory budget, the transport moving results between processes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from tilegraph import config
from tilegraph.diagnostics.progress import ProgressBar, progress_wanted
from tilegraph.graph.dask_spec import from_dask, gc_paused
from tilegraph.graph.implicit import ImplicitGraph
from tilegraph.graph.memory import task_estimates
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.plan.cost import CostModel
from tilegraph.plan.explain import Projection, projected_peak
from tilegraph.plan.fuse import FuseStats, fuse_chains
from tilegraph.plan.order import order, tile_accumulations
from tilegraph.plan.place import place
from tilegraph.runtime.backends import Backend, Partition, Transport, create_backend
from tilegraph.runtime.budget import MemoryLimitError, check_fits, remake_text
from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import RunStart, global_subscribers
from tilegraph.runtime.rss import return_freed_blocks_to_os
from tilegraph.runtime.signals import stop_cleanly
from tilegraph.runtime.spill import SpillStore
from tilegraph.util import human

PROJECT_ALWAYS = 100_000  # tasks: larger plans are projected only under a memory_limit


class PlanTooLargeError(ValueError):
    """A plan has more tasks than the ``max_tasks`` option allows; found before it is built."""


def check_plan_size(ntasks: int, limit: int) -> None:
    """Refuse a plan of more than ``limit`` tasks (the run's ``max_tasks`` option) with
    an error naming its task count, before it is built (a plan of 10^12 tasks would
    exhaust the memory long before it ran). A run checks it once: :func:`run` on the graph
    it is given, or the front end that counts the tasks before building the graph
    (``run(..., sized=True)``)."""
    if ntasks > limit:
        raise PlanTooLargeError(
            f"the plan has {ntasks:,} tasks, more than max_tasks={limit:,}: use larger "
            "blocks (fewer, bigger tasks), or raise the limit with "
            "tilegraph.config.set(max_tasks=...) or max_tasks=... in the call")


@dataclass(frozen=True)
class Plan:
    """A planned graph: culled to what ``keys`` need, placed (a ``worker`` column) when it
    runs on several processes, fused, and ordered. ``outputs`` are the indices of ``keys``
    in ``graph``; ``priority`` is a permutation of ``0..len(graph)-1`` (lower runs first)."""

    graph: TaskGraph
    keys: list[Hashable]
    outputs: np.ndarray
    priority: np.ndarray
    fuse_stats: FuseStats


def make_plan(graph: TaskGraph, keys: Sequence[Hashable], *, processes: int | None = None,
              initial: str = "cyclic", model: CostModel | None = None, fuse: bool = True,
              backend: Backend | None = None, memory: int | None = None) -> Plan:
    """Stages 1-4 of the pipeline (cull, place, fuse, order) without running anything.

    ``processes=p`` places the tasks on ``p`` processes (inputs by ``initial``, costs by
    ``model``) in a ``worker`` column, unless the graph has one; ``backend`` (of several
    processes) makes the placement once and shares it with its other processes, after
    checking that they all hold the same graph. ``memory``: the bytes a process may hold,
    for orders that depend on it (:func:`tilegraph.plan.order.tile_accumulations`). The
    plan's size is checked by the run (:func:`check_plan_size`), not here."""
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"expected a TaskGraph, got {type(graph).__name__}")
    keys = list(dict.fromkeys(keys))
    with gc_paused():
        graph = graph.cull(keys)
        if processes is not None and graph.meta.get("worker") is None:
            collective = None if backend is None else backend.collective
            if collective is not None:
                collective.check_same_plan(graph)
            g = graph

            place_tasks = getattr(backend, "place_tasks", None)  # a placement of its own

            def placed() -> list[int]:
                own = None if place_tasks is None else place_tasks(
                    g, processes, initial=initial, model=model)
                return own if own is not None else place(
                    g, processes, initial=initial, model=model).tolist()

            workers = collective.decide(placed) if collective is not None else placed()
            graph = graph.with_meta(worker=workers)
        outputs = graph.indices(keys)
        stats = FuseStats(before=len(graph), after=len(graph))
        if fuse:
            graph, stats = fuse_chains(graph, outputs)
            outputs = graph.indices(keys)
        priority = _priority(graph, outputs, memory)
    return Plan(graph, keys, outputs, priority, stats)


def _priority(graph: TaskGraph, outputs: np.ndarray, memory: int | None = None
              ) -> np.ndarray:
    """The planner's priorities if every task has one (ranked), else the default order,
    with contractions larger than ``memory`` run in tiles."""
    col = graph.meta.get("priority")
    if col is not None and all(p is not None for p in col):
        ranks = np.empty(len(graph), dtype=np.int64)
        ranks[np.argsort(np.asarray(col), kind="stable")] = np.arange(len(graph))
        return ranks
    return tile_accumulations(graph, order(graph, outputs), memory)


def prepare(options: config.Options, backend: Backend | None = None
            ) -> tuple[Backend, config.Options]:
    """The run's backend (``backend``, or made now from ``options``) and the options
    completed for it (:func:`tilegraph.config.per_process`: ``memory_limit`` the bytes each
    of its processes on this host may hold). Called once per run, before its graph is
    built: a front end that builds the graph for the run (a rechunk's stages depend on
    the limit) calls it first and passes both on to :func:`run` (``options=`` the record,
    ``prepared=`` the backend)."""
    if backend is None:  # made from the options as they were given (not completed)
        backend = _backend(options if options.limit_given
                           else options._replace(memory_limit=None))
    elif not isinstance(backend, Backend):
        raise TypeError(f"prepared= must be the Backend made by pipeline.prepare(), got "
                        f"{type(backend).__name__}")
    return backend, config.per_process(options, backend.local_processes)


def run(graph: TaskGraph, outputs: Sequence[Hashable], *, fuse: bool = True,
        finish: Callable[[list[Any]], Any] | None = None,
        options: config.Options | None = None, sized: bool = False,
        prepared: Backend | None = None, **given: Any) -> Any:
    """Plan and compute the tasks ``outputs`` (keys) of ``graph``; their values in order.

    Options are those of :mod:`tilegraph.config` (``backend``, ``workers``, ``retries``,
    ``progress``, ``callbacks``, ``memory_limit``, ``spill_dir``, ``placement``,
    ``report``, ``max_tasks``, and the backend's own), given as keywords, or as the
    :class:`~tilegraph.config.Options` record a front end made of them (``options=``,
    used as it is). A graph of more than ``max_tasks`` tasks is refused
    (:class:`PlanTooLargeError`) unless ``sized``: the front end refused it already,
    counting its tasks before building it. A task that could never fit under the memory
    limit is an error before anything runs. Only the tasks the outputs need are run; every
    other result is released as soon as its last consumer has run. If a task fails, its
    exception is raised here, with a note naming the task key and op, after the rest of the
    run was cancelled.
    ``fuse=False`` runs the tasks as they are (no chain fusion). ``finish``: a function of
    the values whose result is returned instead (e.g. arrays assembled from their blocks);
    under MPI it runs on rank 0 and its result is what is shared with the other ranks.
    ``prepared``: the run's backend, made with ``options`` by :func:`prepare` (by a front
    end that built the graph for the options it returned); without it, it is made here.

    With ``backend="mpi"`` every rank must call ``run`` with the same graph (a rank that
    waits ``mpi_timeout`` seconds for the others fails with an error naming those that did
    not call it); the tasks are placed on the ranks (unless the graph has a ``worker`` column
    already). Values of at most ``mpi_broadcast_limit`` bytes together are returned on every
    rank; larger ones on rank 0, and ``None`` on the other ranks.

    >>> from operator import add
    >>> g = from_dask({"a": 1, "b": (add, "a", 2)})
    >>> run(g, ["b"])
    [3]
    """
    opts = _options(options, given, "run()")
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"run() needs a TaskGraph, got {type(graph).__name__}")
    if not sized:
        check_plan_size(len(graph), opts.max_tasks)
    backend, opts = prepare(opts, prepared)
    plan = make_plan(graph, outputs, processes=_processes(backend),
                     initial=opts.placement, fuse=fuse, backend=backend,
                     memory=opts.memory_limit)
    return _execute(plan, backend, opts, finish)


def execute(plan: Plan, *, finish: Callable[[list[Any]], Any] | None = None,
            options: config.Options | None = None, prepared: Backend | None = None,
            **given: Any) -> Any:
    """Stage 5 alone: run a plan made by :func:`make_plan` (which may be run many times,
    e.g. once per iteration of a loop). Options, ``prepared``, ``finish`` and result as for
    :func:`run`."""
    opts = _options(options, given, "execute()")
    backend, opts = prepare(opts, prepared)
    if _processes(backend) is not None and plan.graph.meta.get("worker") is None:
        plan = make_plan(plan.graph, plan.keys, processes=backend.processes,
                         initial=opts.placement, fuse=False, backend=backend,
                         memory=opts.memory_limit)
    return _execute(plan, backend, opts, finish)


def run_implicit(graph: ImplicitGraph, outputs: Sequence[str], *,
                 inputs: Mapping[str, Any] | None = None, wait: float | None = None,
                 **options: Any) -> list[Any]:
    """Compute the nodes ``outputs`` of an implicit graph (:mod:`tilegraph.graph.implicit`,
    e.g. a LambdaPACK DAG) without expanding it; their values in order.

    ``inputs``: the external inputs the graph's nodes read, by name. Options are those of
    :func:`run`; the backend must be able to run an implicit graph (a ``run_implicit``
    capability: ``backend="serverless"``), and uses ``workers``, ``pool``, ``redis``,
    ``store``, ``lease``, ``retries``, ``callbacks`` (and subscribers of
    :func:`tilegraph.subscribe`: the run's events), ``progress`` (a bar of the pool's
    tasks) and ``report`` (the run's HTML report: the task stream, workers alive and the
    queue's length). A backend refuses ``memory_limit`` if it cannot keep it (the
    serverless one does); ``spill_dir`` is checked but has no effect: the driver holds
    only the outputs, the workers bound their own caches. ``wait``: seconds without
    any live worker after which the run fails (default: the backend's). The backend sleeps
    until the outputs arrive or the run fails; a task's exception is raised here, and
    Ctrl-C cancels the run. A graph that can be expanded runs on any backend through
    :func:`run` instead.
    """
    opts = config.resolve(options, "run_implicit()")
    if not isinstance(graph, ImplicitGraph):
        raise TypeError(f"run_implicit() needs an implicit graph (a subclass of "
                        f"tilegraph.graph.implicit.ImplicitGraph), got {type(graph).__name__}")
    outputs = list(outputs)
    bad = [o for o in outputs if not isinstance(o, str)]
    if bad:
        raise TypeError(f"run_implicit(): outputs are node ids (strings), got {bad[0]!r}")
    backend = _backend(opts)
    runner = getattr(backend, "run_implicit", None)
    if runner is None:
        raise TypeError(f"backend {backend.name!r} cannot run an implicit graph without "
                        "expanding it: use backend='serverless', or lower the graph to a "
                        "TaskGraph and call run()")
    subscribers = (*opts.callbacks, *global_subscribers())
    recorder = None
    if opts.report is not None:
        from tilegraph.diagnostics.report import Recorder

        recorder = Recorder()
        subscribers = (*subscribers, recorder)
    watch = None
    if progress_wanted(opts.progress):
        def watch(progress: Callable[[], tuple[int, int]]) -> ProgressBar:
            return ProgressBar(None, progress=progress)
    try:
        return runner(graph, outputs, dict(inputs or {}), retries=opts.retries, wait=wait,
                      subscribers=subscribers, watch=watch)
    finally:
        if recorder is not None:
            from tilegraph.diagnostics.report import write_report

            size = graph.size()
            write_report(opts.report, [recorder.data()],
                         title=f"tilegraph run ({backend.name}, implicit graph)",
                         summary=f"{type(graph).__name__}: "
                                 f"{size if size is not None else 'an unknown number of'} "
                                 "tasks, run without being expanded")


def _options(options: config.Options | None, given: dict[str, Any], where: str
             ) -> config.Options:
    """The run's options: the record a front end made, else made here of ``given``."""
    if options is None:
        return config.resolve(given, where)
    if given:
        raise TypeError(f"{where} takes options= (a config.Options record) or options as "
                        f"keywords, not both; got options= and {', '.join(sorted(given))}")
    if not isinstance(options, config.Options):
        raise TypeError(f"{where}: options= must be a tilegraph.config.Options (made by "
                        f"tilegraph.config.resolve), got {type(options).__name__}")
    return options


def _backend(opts: config.Options) -> Backend:
    """The run's backend, from the record (its factory gets the backend's own options),
    which may refuse options of the run it cannot keep (its ``check_options``)."""
    backend = create_backend(opts.backend, opts.workers, opts.backend_options)
    check = getattr(backend, "check_options", None)
    if check is not None:
        check(opts)
    return backend


def _processes(backend: Backend) -> int | None:
    """The processes to place a plan on: ``None`` when every worker shares one memory."""
    return backend.processes if backend.processes > 1 else None


@stop_cleanly()
def _execute(plan: Plan, backend: Backend, opts: config.Options,
             finish: Callable[[list[Any]], Any] | None = None) -> Any:
    """Partition ``plan`` on ``backend`` and run this process's part, with ``opts``
    completed for ``backend`` (:func:`prepare`; completed here otherwise). A signal that
    would end the process stops the run cleanly first (:mod:`tilegraph.runtime.signals`)."""
    opts = config.per_process(opts, backend.local_processes)
    subscribers = (*opts.callbacks, *global_subscribers())
    recorder = None
    if opts.report is not None:
        from tilegraph.diagnostics.report import Recorder

        recorder = Recorder()
        subscribers = (*subscribers, recorder)
    limit = opts.memory_limit
    if opts.limit_given:
        return_freed_blocks_to_os()
    part = backend.partition(plan.graph, plan.outputs, plan.priority)
    transport = backend.transport(part)
    store = SpillStore(opts.spill_dir)
    estimates = task_estimates(part.graph)  # one memory model for admission and policy
    execution = Execution(part.graph, part.outputs, part.priority, retries=opts.retries,
                          subscribers=subscribers, memory_limit=limit, spill=store,
                          external=part.external, exported=part.exported,
                          on_export=transport.export if transport is not None else None,
                          estimates=estimates, parallel=_policy(backend, part.graph, estimates),
                          may_spill=opts.spill, watch_rss=opts.limit_given)
    projection = None
    try:
        try:
            check_fits(part.graph, estimates, limit)
            if (opts.limit_given or not opts.spill
                    or len(part.graph) <= PROJECT_ALWAYS):
                projection = projected_peak(part.graph, part.outputs, part.priority,
                                            estimates, backend.workers)
            if projection is not None and not opts.spill:
                check_projection(part.graph, projection, limit)
            problem: BaseException | None = None
        except BaseException as exc:
            problem = exc
        collective = backend.collective
        if collective is not None:
            collective.all_ready(problem)  # every process stops if one cannot run its part
        elif problem is not None:
            raise problem
        start = RunStart(execution.ntasks, backend.workers, backend.name, backend.rank,
                         time.perf_counter(), plan)
        for fn in subscribers:  # before any result can arrive from another process
            fn(start)
        if transport is None:
            _drive(part, execution, backend, None, opts)
        else:
            with transport.connect(execution):
                _drive(part, execution, backend, transport, opts)
        if execution.error is not None:
            raise execution.error
        _remember(backend, execution, limit, len(part.graph), transport, projection)
        values = None
        if part.returns:
            def values() -> Any:
                out = execution.output_values()
                return out if finish is None else finish(out)
        if collective is not None:
            return collective.share_results(values, opts.mpi_broadcast_limit)
        return values() if values is not None else None
    finally:
        execution.clear()  # frees results and removes every spill file, whatever happened
        store.close()
        if recorder is not None:
            _report(opts.report, recorder, plan, backend)


def _policy(backend: Backend, graph: TaskGraph, estimates: list[int]) -> bytearray | None:
    """The backend's per-task tiny-task policy (if it has one: ``task_policy``), from the
    planned seconds of the tasks; ``None``: every task's time is measured."""
    policy = getattr(backend, "task_policy", None)
    if backend.workers == 1 or policy is None:
        return None
    return policy(graph, CostModel().task_seconds(graph, estimates))


def _progress(backend: Backend, transport: Transport | None, execution: Execution
              ) -> Callable[[], tuple[int, int]] | None:
    """The progress bar's ``(done, total)``: the transport's ``progress`` if it has one
    (tasks that run where the executor does not see them); ``None``: the executor's
    counters."""
    own = getattr(transport, "progress", None)
    return None if own is None else partial(own, execution)


def _drive(part: Partition, execution: Execution, backend: Backend,
           transport: Transport | None, opts: config.Options) -> None:
    """Run this process's part on the backend's workers, with the progress bar if wanted."""
    try:
        if progress_wanted(opts.progress) and not execution.finished:
            with ProgressBar(execution, progress=_progress(backend, transport, execution)):
                backend.run(part, execution)
        else:
            backend.run(part, execution)
    except BaseException as exc:
        execution.cancel(exc)
        raise


# -- diagnostics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    """What the last successful run did: tasks, backend, workers, seconds, the memory budget,
    the most bytes of results held at once, bytes spilled to and read back from disk, and
    bytes of results dropped under memory pressure and made again (``recomputed_bytes``),
    bytes a rechunk wrote to its intermediate store on disk (``staged_bytes``),
    and the plan's own projection of its peak (``projected_bytes``: results held and the
    running task's working set, tasks one at a time in priority order, as ``explain()``
    reports it; 0 when not computed: plans of more than ``PROJECT_ALWAYS`` tasks run
    without a ``memory_limit``). With MPI these are this rank's figures (``ntasks``: tasks
    in its part of the plan), and ``processes`` and ``bytes_sent`` give the ranks and the
    bytes this rank sent. ``core_seconds``: the workers' time in finished tasks, the
    serverless pool's included (numpywren's total CPU time, beside ``elapsed``).
    ``remade``: op kind -> blocks dropped under memory pressure and made again for a
    consumer; ``spilled_unrepeatable``: op kind -> blocks that were written to disk rather
    than made again because their source may not give the same block again (an object read
    by ``from_array`` without ``repeatable=True``), ``unrepeatable_reasons``: op kind -> why.
    ``peak_rss``: the largest resident set of the process during the run and
    ``rss_baseline`` its resident set when the run started, when a ``memory_limit`` was
    given (the limit then bounds the RSS: see :class:`tilegraph.runtime.memory.MemoryManager`);
    0 otherwise.
    """

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
    recomputed_bytes: int = 0
    projected_bytes: int = 0
    core_seconds: float = 0.0
    staged_bytes: int = 0
    remade: dict[str, int] = field(default_factory=dict)
    spilled_unrepeatable: dict[str, int] = field(default_factory=dict)
    unrepeatable_reasons: dict[str, str] = field(default_factory=dict)
    peak_rss: int = 0
    rss_baseline: int = 0

    def __str__(self) -> str:
        where = f" x {self.processes} ranks" if self.processes > 1 else ""
        sent = f"; sent {human(self.bytes_sent)} to other ranks" if self.processes > 1 else ""
        staged = (f", staged on disk {human(self.staged_bytes)}" if self.staged_bytes else "")
        rss = (f"; peak RSS {human(self.peak_rss)} (at start {human(self.rss_baseline)})"
               if self.peak_rss else "")
        return (f"{self.ntasks} tasks on {self.workers}{where} {self.backend} worker(s) in "
                f"{self.elapsed:.3f} s; peak {human(self.peak_bytes)} of results held "
                f"(projected {human(self.projected_bytes)}, limit {human(self.memory_limit)}"
                f"){rss}; spilled {human(self.spilled_bytes)}, "
                f"read back {human(self.unspilled_bytes)}, recomputed "
                f"{human(self.recomputed_bytes)}{staged}{sent}; {self.core_seconds:.3f} "
                f"core-seconds in tasks{remake_text(self)}")


_last_summary: RunSummary | None = None


def _remember(backend: Backend, execution: Execution, limit: int, ntasks: int,
              transport: Any, projection: Projection | None) -> None:
    global _last_summary
    f = execution.memory.figures()
    _last_summary = RunSummary(
        ntasks, backend.name, backend.workers, time.perf_counter() - execution.started,
        limit, f.peak_live, f.spilled_bytes, f.unspilled_bytes,
        backend.processes, transport.bytes_sent if transport is not None else 0,
        f.recomputed_bytes, projection.peak if projection is not None else 0,
        execution.busy_seconds + getattr(transport, "core_seconds", 0.0),
        execution.staged_bytes, f.remade, f.spilled_unrepeatable, f.unrepeatable_reasons,
        f.peak_rss, f.rss_baseline)


def check_projection(graph: TaskGraph, projection: Projection, limit: int) -> None:
    """With ``spill=False``: refuse a plan whose projected peak without the results that
    can be made again exceeds ``limit``, naming the task at the peak and what would fit."""
    if projection.without_remake <= limit:
        return
    at = projection.at
    where = (f" (at task {graph.keys[at]!r}, op {graph.opname(at)})" if at >= 0 else "")
    raise MemoryLimitError(
        f"the plan needs about {human(projection.without_remake)} in memory at its peak"
        f"{where}, more than memory_limit={human(limit)}, and spill=False forbids going to "
        f"disk: give memory_limit of at least {human(projection.without_remake)}, use "
        "smaller blocks, or allow spilling (spill=True)")


def last_run() -> RunSummary | None:
    """The summary of the last successful run in this process (``None`` before any)."""
    return _last_summary


def _report(path: str, recorder: Any, plan: Plan, backend: Backend) -> None:
    """The HTML report of a run (successful or not), with the plan summary in words; with
    several processes the recordings are gathered and rank 0 writes it."""
    from tilegraph.diagnostics.report import write_report
    from tilegraph.plan.explain import graph_summary, summary_lines

    collective = backend.collective
    recordings = ([recorder.data()] if collective is None
                  else collective.gather(recorder.data()))
    if recordings is None:  # another process writes the report
        return
    lines = summary_lines(graph_summary(plan.graph, plan.outputs, plan.fuse_stats),
                          backend.workers)
    if backend.processes > 1:
        from tilegraph.plan.simulate import simulate

        placement = np.asarray(plan.graph.meta["worker"], dtype=np.int64)
        sim = simulate(plan.graph, placement, backend.processes, outputs=plan.outputs)
        lines.append(f"placed on {backend.processes} MPI ranks; the placement implies "
                     f"{human(sim.bytes_moved)} moved in {sim.messages} messages")
    write_report(path, recordings, title=f"tilegraph run ({backend.name})",
                 summary="\n".join(lines))


# -- dask-style graphs -------------------------------------------------------------------------


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


def get(dsk: Any, keys: Any, cache: Any = None, num_workers: int | None = None,
        pool: Any = None, **options: Any) -> Any:
    """Compute ``keys`` of the dask-style graph ``dsk``, like ``dask.get``.

    ``keys`` is one key, or a list (possibly nested) of keys; the result has the same shape,
    with tuples for lists, as ``dask.get`` returns it.
    Works as a dask scheduler: ``dask.compute(x, scheduler=tilegraph.get)``, taking what
    dask passes to its schedulers: ``num_workers`` (worker threads, unless ``workers=`` is
    given), ``pool`` (an executor: its ``_max_workers`` sets the worker threads; the tasks
    run on tilegraph's own workers), both also read from dask's config as dask does,
    ``cache`` (a dict of values already known, which replace those keys' tasks, and which
    receives the outputs' values) and any other
    keyword dask forwards from ``compute(...)`` (ignored, as dask's schedulers ignore what
    they do not use; a name close to an option's, a typo, is an error). Options of
    :mod:`tilegraph.config` are used and checked; called directly with a dict graph, an
    unknown option is an error.
    dask's callbacks (``dask.callbacks.Callback`` objects, given as ``callbacks=`` or
    registered globally, e.g. ``dask.diagnostics.ProgressBar``) are called as dask's own
    schedulers call them (:mod:`tilegraph.runtime.dask_callbacks`). With
    ``backend="mpi"``, small values are returned on every rank; larger ones on rank 0 and
    ``None`` on the other ranks (see :func:`run`).

    >>> from operator import add
    >>> dsk = {"x": 1, "y": (add, "x", 1), "z": (add, "y", "x")}
    >>> get(dsk, "z")
    3
    >>> get(dsk, [["x", "y"], "z"])
    ((1, 2), 3)
    """
    own = {k: v for k, v in options.items() if config.is_option(k)}
    if len(own) < len(options) and (isinstance(dsk, Mapping) or _typos(options)):
        config.check_names(options, "get()")  # a direct call: an unknown option is an error
    hooks = None
    if "callbacks" in own:
        from tilegraph.runtime.dask_callbacks import split_callbacks

        hooks, own["callbacks"] = split_callbacks(own["callbacks"])
    if pool is not None and type(pool).__module__.startswith("tilegraph."):
        own["pool"], pool = pool, None  # tilegraph's serverless pool, not dask's executor
    if "workers" not in own:
        dask_config = sys.modules.get("dask.config")
        if num_workers is None and pool is None and dask_config is not None:
            # as dask's threaded scheduler: dask.config.set(num_workers=..., pool=...)
            num_workers = dask_config.get("num_workers", None)
            pool = dask_config.get("pool", None)
        if num_workers is None and pool is not None:
            num_workers = getattr(pool, "_max_workers", None)
        if num_workers is not None:
            own["workers"] = num_workers
    opts = config.resolve(own, "get()")
    flat = list(_flatten(keys))
    if hooks is None and "dask.callbacks" not in sys.modules and not cache:
        values = _get(dsk, flat, opts, None)
    else:
        from tilegraph.runtime.dask_callbacks import active_callbacks

        if cache is not None and not isinstance(cache, Mapping):
            raise TypeError(f"get(): cache must be a dict of known values, got "
                            f"{type(cache).__name__}")
        with active_callbacks(hooks) as active:
            if (active or cache) and not isinstance(dsk, Mapping) and hasattr(
                    dsk, "__dask_graph__"):
                dsk = dsk.__dask_graph__()  # the callbacks are given dask's mapping
            if cache:
                dsk = {**dsk, **{k: (partial(_known, v),) for k, v in cache.items()
                                 if k in dsk}}
            values = _get(dsk, flat, opts, active)
        if cache is not None and values is not None:
            cache.update(values)
    if values is None:  # an MPI rank other than 0: the values were gathered on rank 0
        return None
    return _pack(keys, values)


def _typos(options: dict[str, Any]) -> list[str]:
    """Names among ``options`` that are close to an option's name but are not one."""
    import difflib

    unknown = [k for k in options if not config.is_option(k)]
    if not unknown:
        return []
    known = config.names()
    return [k for k in unknown if difflib.get_close_matches(k, known, n=1, cutoff=0.8)]


def _known(value: Any) -> Any:
    return value


def _get(dsk: Any, flat: list, opts: config.Options, hooks: Any) -> dict | None:
    """The values of the keys ``flat`` of ``dsk`` by key (``None`` on an MPI rank that does
    not return them), with dask's ``hooks`` (:mod:`tilegraph.runtime.dask_callbacks`)."""
    run_hooks = None
    if hooks:
        from tilegraph.runtime.dask_callbacks import RunHooks

        run_hooks = RunHooks(hooks, dsk, flat)
        run_hooks.start()
    errored = True
    try:
        for k in flat:
            try:
                hash(k)
            except TypeError:
                raise TypeError(f"keys must be hashable, got {k!r} "
                                f"({type(k).__name__})") from None
        unique = list(dict.fromkeys(flat))
        graph = from_dask(dsk)
        for k in unique:
            if k not in graph.index:
                raise KeyError(f"key {k!r} is not in the task graph")
        if run_hooks is not None:
            graph = run_hooks.announced(graph.cull(unique))
            values = run(graph, unique, fuse=False, options=opts)
        else:
            values = run(graph, unique, options=opts)
        errored = False
    finally:
        if run_hooks is not None:
            run_hooks.finish(errored)
    return None if values is None else dict(zip(unique, values, strict=True))
