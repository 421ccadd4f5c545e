"""Backends: where the tasks of a planned graph run, behind one narrow seam.

The pipeline (:mod:`tilegraph.pipeline`) plans every run the same way and then asks the
backend two things:

- ``partition(graph, outputs, priority)``: which tasks run in this process, which results
  arrive from elsewhere (*external* tasks) and which results made here other processes
  need (*exported* tasks), as a :class:`Partition`. One process (threads, sync) runs
  everything: the trivial partition.
- ``transport(part)``: the :class:`Transport` that delivers external results to the
  executor (``execution.deliver``) and sends exported ones (``export(i, value)``, called
  by the executor when such a task finishes); ``None`` when nothing crosses processes.

The partition is the run's own object: it holds everything ``transport(part)`` and
``run(part, execution)`` need of the run, and they read it from the ``part`` they are
given. A backend that needs more of a run than the fields of :class:`Partition` (MPI's
destinations of every result, the serverless pool's part of the plan, autopar's record
of which process holds which variable) returns a subclass of it holding that. The backend
object keeps nothing of a run (no attribute of a backend is set by ``partition``,
``transport`` or ``run``; ``tests/test_layering.py`` checks it), so one backend object
runs any number of plans, one after the other, interleaved or at once from several
threads, and each run's transport and workers see that run's part only. A transport is
made for one run and may keep that run's state (what is in flight, what it sent).

A backend whose processes each run the pipeline on the same program (MPI's ranks) also
carries a :class:`Collective` (``backend.collective``; ``None`` for every other backend):
the steps its processes take together, which the pipeline takes only when it is there.
Before anything runs, ``check_same_plan(graph)`` (which fails within ``timeout`` seconds,
naming the processes that did not join), ``decide(fn)`` (a value computed on one process
and shared by all, e.g. the placement), ``gather(value)`` and ``all_ready(error)`` (every
process stops if one cannot run its part); after the run, ``share_results(values, limit)``
(the outputs' values on every process when they are small, else on the process that
returns them only). Without a collective the pipeline does the one-process thing itself
(``fn()``, ``[value]``, ``raise error``, ``values()``). ``local_processes`` is the number
of processes on this host, among which the default memory budget is divided.

``run(part, execution)`` drives ``execution.worker_loop(w)`` for every worker ``w`` until
the run is finished (``execution`` runs ``part``: its graph, outputs and priorities) and
returns only when no worker is left running and ``execution.finish_io()`` has returned.
Ordering, retries, release of results, memory, errors and events all live in the executor
core, once. A backend that runs task bodies somewhere else passes
``call(func, args, kwargs)`` to ``worker_loop`` (the dask.distributed backend,
:mod:`tilegraph.runtime.dask_backend`, submits each task there and holds its Future;
autopar's processes backend runs each step in a worker process). ``run``, ``partition``
and ``transport`` are the whole of :class:`Backend`.

Optional capabilities: the pipeline uses them when a backend (or its transport) has them,
and does without them otherwise.

- ``backend.task_policy(graph, seconds)``: per task (planned to take ``seconds``), whether
  it is worth a second worker (the executor's ``parallel`` flags, e.g.
  :func:`threads_policy`); asked only when the backend has several workers. Without it
  (or when it returns ``None``) every task is ``UNKNOWN`` and the executor decides from
  the tasks' measured times. The threads and MPI backends and autopar's have one.
- ``backend.place_tasks(graph, processes, initial=, model=)``: the process of every task
  (a ``worker`` column) for a backend of several processes, or ``None``; without it, the
  planner's placement (:func:`tilegraph.plan.place.place`). The serverless backend has
  one (the driver's tasks and the pool's, by
  :func:`tilegraph.plan.place.place_driver_or_pool`).
- ``backend.run_implicit(graph, outputs, inputs, retries=, wait=)``: the values of the nodes
  ``outputs`` of an implicit graph (:mod:`tilegraph.graph.implicit`) run without expanding
  it, for :func:`tilegraph.pipeline.run_implicit`; without it, that function refuses the
  backend. The serverless backend has one.
- ``backend.check_options(options)``: raise if the run's options (a
  :class:`tilegraph.config.Options`) ask for what the backend cannot keep, e.g. a
  ``memory_limit`` its workers do not enforce (the serverless backend); called by the
  pipeline when it makes the backend, before anything is planned or run.
- ``transport.progress(execution)``: ``(tasks done, tasks in all)`` for the progress bar
  when tasks run where the executor does not see them (the serverless driver's); without
  it, the executor's counters.

Backends are made from the registry ``BACKENDS``: each backend module registers its factory
there (:func:`register_backend`) when it is imported, with the options the backend takes
besides ``workers`` (``BACKEND_OPTIONS``: each a :class:`BackendOption`, its default, check
and meaning, declared there only). A run's options record
(:class:`tilegraph.config.Options`, made by :func:`tilegraph.config.resolve` with
:func:`backend_values`) holds the checked values of its backend's options, and the pipeline
makes the backend from them (:func:`create_backend`); :func:`make_backend` does both steps
for a direct caller. The optional backends (MPI, serverless, dask) are listed by module name
until then, and imported only when they (or their options) are asked for, so this module
imports none of the modules of its backends (they import it, for :class:`Backend`).

A backend made outside the runtime (autopar's processes backend, handed to the pipeline as
``backend=``) takes what it needs from this module only: :class:`Backend`, the
:class:`~tilegraph.runtime.core.Execution` it drives and the task policies (``PARALLEL``).
"""

from __future__ import annotations

import importlib
import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

from tilegraph.debris import remove_own
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.runtime.blas import blas_threads
from tilegraph.runtime.core import Execution
from tilegraph.runtime.signals import Terminated
from tilegraph.runtime.tiny import PARALLEL, threads_policy  # noqa: F401 - re-exported
from tilegraph.util import cores

T = TypeVar("T")


@dataclass(frozen=True)
class Partition:
    """This process's part of a planned graph: the one object of a run that the backend's
    ``partition`` makes and its ``transport`` and ``run`` are given (see the module
    docstring).

    ``graph``: the tasks run here plus one external task per result that arrives from
    another process; ``outputs``: indices (in ``graph``) of the outputs whose values this
    process returns; ``priority``: a permutation of ``0..len(graph)-1``; ``external``: the
    tasks whose results arrive; ``exported``: the tasks whose results other processes need;
    ``returns``: whether this process returns the outputs' values (rank 0 of MPI does; the
    others return ``None``). A backend that needs more of the run subclasses it (a frozen
    dataclass with keyword-only fields of its own)."""

    graph: TaskGraph
    outputs: Sequence[int]
    priority: np.ndarray
    external: Sequence[int] = ()
    exported: Sequence[int] = ()
    returns: bool = True


class Transport(ABC):
    """Moves results between processes during one run (see the module docstring). It may
    also count what the executor does not see: ``progress(execution)`` (optional, see the
    module docstring) and ``core_seconds`` (seconds of tasks run elsewhere, for
    :func:`tilegraph.pipeline.last_run`)."""

    bytes_sent = 0

    @abstractmethod
    def export(self, i: int, value: Any) -> None:
        """Task ``i`` of the partition finished and other processes need its result. Called
        by the executor with its lock held: queue the send, never block."""

    @abstractmethod
    def connect(self, execution: Execution) -> AbstractContextManager[None]:
        """A context manager around the run: starts delivering and sending, and on leaving
        finishes every exchange and raises a failure of another process."""


class Collective(ABC):
    """The steps the processes of one backend take together (MPI's ranks), each failing
    within ``timeout`` seconds with an error naming the processes that did not join. Only a
    backend whose processes each run the pipeline carries one (``Backend.collective``); the
    pipeline takes these steps only when it is there."""

    timeout = 60.0  # seconds a process waits for the others (the ``mpi_timeout`` option)

    @abstractmethod
    def check_same_plan(self, graph: TaskGraph, placement: np.ndarray | None = None,
                        literals: bool = False) -> TaskGraph:
        """Raise on every process if the processes do not hold the same plan (and, with
        ``literals``, the same values in every task: literal inputs, functions with what
        they read); returns the graph to run (``graph``, or one whose differing tasks were
        replaced by the first process's when the backend is asked to)."""

    @abstractmethod
    def decide(self, fn: Callable[[], T]) -> T:
        """``fn()`` computed once and known to every process (e.g. the placement)."""

    @abstractmethod
    def gather(self, value: T) -> list[T] | None:
        """The ``value`` of every process, in rank order, on the first process; ``None`` on
        the others."""

    @abstractmethod
    def all_ready(self, error: BaseException | None) -> None:
        """Raise ``error`` (or an error naming the process that failed) on every process if
        any process cannot run its part."""

    @abstractmethod
    def share_results(self, values: Callable[[], Any] | None, limit: int) -> Any:
        """After a successful run: the outputs' values, from ``values()`` on the process
        that returns them (``values`` is ``None`` on the others), on every process when
        they take at most ``limit`` bytes together (and ``limit > 0``), else on that process
        only (``None`` on the others)."""


class Backend(ABC):
    """Base of all backends: ``run`` (abstract), ``partition`` and ``transport``, and the
    attributes below, set when the backend is made and never by a run; see the module
    docstring for the contract (a run's state lives in the :class:`Partition` that
    ``partition`` returns, never on the backend) and for the optional capabilities
    (``task_policy``, ``place_tasks``) the pipeline uses when a backend has them."""

    name = "base"
    workers = 1
    processes = 1  # processes a plan is placed on (MPI ranks); 1: all workers share memory
    rank = 0  # this process among ``processes``
    local_processes = 1  # processes of this backend on this host (share its memory)
    collective: Collective | None = None  # the steps its processes take together, if any

    @abstractmethod
    def run(self, part: Partition, execution: Execution) -> None:
        """Drive ``execution.worker_loop`` on every worker until the run of ``part`` (which
        ``execution`` runs) is finished."""

    def partition(self, graph: TaskGraph, outputs: np.ndarray, priority: np.ndarray
                  ) -> Partition:
        """This process's part of ``graph`` (one process: all of it), a new object per
        run holding what ``transport`` and ``run`` need of it."""
        return Partition(graph, [int(o) for o in outputs], priority)

    def transport(self, part: Partition) -> Transport | None:
        """How results cross processes for ``part`` (one process: nothing crosses): a new
        transport per run, made of ``part`` alone."""
        return None


def _guarded(execution: Execution, worker: int) -> None:
    """A worker loop that never dies silently: anything it raises ends the run."""
    try:
        execution.worker_loop(worker)
    except BaseException as exc:
        execution.cancel(exc)


class SyncBackend(Backend):
    """Runs every task in the caller's thread, one at a time, in priority order (debugging)."""

    name = "sync"
    workers = 1

    def run(self, part: Partition, execution: Execution) -> None:
        try:
            _guarded(execution, 0)
        finally:
            execution.finish_io()


class ThreadsBackend(Backend):
    """``workers`` threads (default: one per core) sharing results by reference, with BLAS
    limited so that threads x BLAS threads = cores. The threads come from :data:`POOL` and
    go back to it after the run (no thread is started per run once the pool is warm). The
    caller's thread only waits, so Ctrl-C reaches it at once: the run is cancelled, the
    workers stop after their current task, and the run returns only when every worker has
    left it. SIGTERM (and SIGHUP) does the same (:mod:`tilegraph.runtime.signals`), and
    removes the process's spill and staging directories at once, before the workers
    stop."""

    name = "threads"

    def __init__(self, workers: int | None = None, share: int = 1):
        """``share``: processes on this host that split its cores (MPI ranks), so that
        processes x threads x BLAS threads = cores."""
        self.workers = workers or cores()
        self.share = share

    def task_policy(self, graph: TaskGraph, seconds: np.ndarray) -> bytearray | None:
        return threads_policy(graph, seconds) if self.workers > 1 else None

    def run(self, part: Partition, execution: Execution) -> None:
        workers = _RunWorkers(self.workers)
        per_worker = max(1, cores() // (self.workers * self.share))
        if self.workers > 1 and cores() // self.share > per_worker:
            execution.widen(cores() // self.share)  # a task alone gets the idle cores
        with blas_threads(per_worker):
            try:
                for w in range(self.workers):
                    if w == 1 and execution.ntasks <= SMALL_RUN:
                        # a small run often ends before a second thread would wake up
                        if execution.done_event.wait(SMALL_RUN_WAIT):
                            break
                    POOL.submit(_pooled_worker, (execution, w, workers),
                                then=partial(workers.left, w))
                while not execution.done_event.wait(0.05):  # Ctrl-C seen in 50 ms
                    pass
            except BaseException as exc:  # KeyboardInterrupt while starting or waiting
                execution.cancel(exc)
                if isinstance(exc, Terminated):
                    # the process ends once the workers stop: its files go first (a
                    # killer such as mpiexec may not wait for a long task)
                    remove_own()
                raise
            finally:
                workers.abandon_unclaimed()
                _wait_workers(workers, execution)
                execution.finish_io()


IDLE_THREAD_NAME = "tilegraph-idle-worker"
SMALL_RUN = 16  # tasks: the other workers of a run this small start after SMALL_RUN_WAIT
SMALL_RUN_WAIT = 0.001  # seconds


class _RunWorkers:
    """The worker loops of one run handed to the pool. A pool thread *claims* worker ``w``
    before running its loop; the caller, once the run is over (or interrupted, perhaps
    while handing the loops out), *abandons* every loop not yet claimed and waits until
    every claimed loop has left. Both happen under one lock, so no loop is waited for that
    will never run, and none runs unwaited for."""

    __slots__ = ("_claimed", "_cond", "_running")

    def __init__(self, n: int):
        self._claimed = [None] * n  # None: not yet; True: claimed; False: abandoned
        self._running = 0
        self._cond = threading.Condition(threading.Lock())

    def claim(self, w: int) -> bool:
        with self._cond:
            if self._claimed[w] is False:
                return False
            self._claimed[w] = True
            self._running += 1
            return True

    def left(self, w: int) -> None:
        """Worker ``w``'s pool thread is idle again (whether it ran the loop or not)."""
        with self._cond:
            if self._claimed[w]:
                self._claimed[w] = False  # (counted once)
                self._running -= 1
                self._cond.notify_all()

    def abandon_unclaimed(self) -> None:
        with self._cond:
            for w, c in enumerate(self._claimed):
                if c is None:
                    self._claimed[w] = False

    def wait(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._running == 0)


def _pooled_worker(execution: Execution, worker: int, workers: _RunWorkers) -> None:
    if not workers.claim(worker):
        return
    thread = threading.current_thread()
    thread.name = f"tilegraph-worker-{worker}"
    try:
        _guarded(execution, worker)
    finally:
        thread.name = IDLE_THREAD_NAME


def _wait_workers(workers: _RunWorkers, execution: Execution) -> None:
    """Wait for every started worker of the run; a further Ctrl-C cannot make us leave a
    worker behind (the run is already cancelled, so each stops after its current task)."""
    while True:
        try:
            workers.wait()
            return
        except KeyboardInterrupt:
            execution.cancel(KeyboardInterrupt())


class WorkerPool:
    """Daemon threads kept between runs, so a run does not pay for starting threads (a tiny
    compute costs about as much as starting two threads). ``submit(fn, args, then)`` hands
    the call ``fn(*args)`` to an idle thread, or to a new one when none is idle (so a task
    that itself runs a graph, a nested compute, never waits for a thread), and calls
    ``then()`` once that thread is idle again (so the next run finds it). At most
    ``max_idle`` threads stay idle; the others end. Idle threads are named
    ``IDLE_THREAD_NAME``. After ``fork`` the child starts with an empty pool."""

    def __init__(self, max_idle: int | None = None):
        self.max_idle = max_idle if max_idle is not None else max(4, 2 * cores())
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue] = []
        self._count = 0

    def submit(self, fn: Callable[..., Any], args: tuple = (),
               then: Callable[[], None] | None = None) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self._count += 1  # threads started, for diagnostics
        if inbox is None:
            inbox = queue.SimpleQueue()
            thread = threading.Thread(target=self._loop, args=(inbox,),
                                      name=IDLE_THREAD_NAME, daemon=True)
            inbox.put((fn, args, then))
            thread.start()
            return
        inbox.put((fn, args, then))

    def _loop(self, inbox: queue.SimpleQueue) -> None:
        while True:
            fn, args, then = inbox.get()
            try:
                fn(*args)
            except BaseException:  # fn reports its own failures; the thread lives on
                pass
            with self._lock:
                stay = len(self._idle) < self.max_idle
                if stay:
                    self._idle.append(inbox)
            if then is not None:
                then()
            # an idle thread holds nothing of the run it served (its execution, whose error
            # keeps the failed task's frame and inputs alive, e.g. a rechunk's staged files)
            fn = args = then = None
            if not stay:
                return

    def idle(self) -> int:
        """Threads waiting for work."""
        with self._lock:
            return len(self._idle)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._idle = []


POOL = WorkerPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=POOL._after_fork)


@dataclass(frozen=True)
class BackendOption:
    """One option of one backend, declared once, beside the backend's factory
    (:func:`register_backend`): its ``default``; ``check``, which takes a value and returns
    the value to use, raising an error that names the option when it is bad; ``doc``, what
    it means; and ``env``, an environment variable whose value, when set, replaces the
    default. The option is set like every other (``compute(redis=...)``,
    ``config.set(...)``); a run gets it only on its own backend."""

    default: Any
    check: Callable[[Any], Any]
    doc: str = ""
    env: str | None = None

    def initial(self) -> Any:
        """The value when none is given or set: the environment variable's, else the
        default."""
        if self.env is not None and os.environ.get(self.env):
            return self.check(os.environ[self.env])
        return self.default


BACKENDS: dict[str, Callable[..., Backend] | str] = {
    "sync": lambda workers=None: SyncBackend(),
    "threads": lambda workers=None: ThreadsBackend(workers),
    # the optional backends, by the module that registers each when imported (mpi4py,
    # redis-py and distributed are imported only when such a backend is asked for)
    "mpi": "tilegraph.runtime.mpi",
    "serverless": "tilegraph.runtime.serverless.backend",
    "dask": "tilegraph.runtime.dask_backend",
}
"""The backends by name: a factory ``(workers=None, **values) -> Backend`` (``values``: one
for each option it declares), or the name of the module that registers the factory when it
is imported."""

BACKEND_OPTIONS: dict[str, Mapping[str, BackendOption]] = {"sync": {}, "threads": {}}
"""The options each registered backend declares (besides ``workers``), by backend name."""


def register_backend(name: str, factory: Callable[..., Backend],
                     options: Mapping[str, BackendOption] | None = None) -> None:
    """Make ``factory`` the backend called ``name`` (a backend module calls this when it is
    imported). ``options``: the options it takes besides ``workers``, declared here only;
    the factory is called with a checked value of every one of them."""
    BACKENDS[name] = factory
    BACKEND_OPTIONS[name] = MappingProxyType(dict(options or {}))


def _factory(name: str) -> Callable[..., Backend]:
    """The factory of backend ``name``, importing the module that registers it if needed."""
    factory = BACKENDS[name]
    if isinstance(factory, str):
        importlib.import_module(factory)
        factory = BACKENDS[name]
        if isinstance(factory, str):
            raise RuntimeError(f"module {factory} did not register backend {name!r}")
    return factory


def backend_options(backend: str | Backend) -> Mapping[str, BackendOption]:
    """The options backend ``backend`` declares (importing its module if needed); a
    :class:`Backend` object, or a factory put in ``BACKENDS`` without
    :func:`register_backend`, takes none."""
    if isinstance(backend, Backend):
        return _NO_OPTIONS
    _factory(backend)
    return BACKEND_OPTIONS.get(backend, _NO_OPTIONS)


_NO_OPTIONS: Mapping[str, BackendOption] = MappingProxyType({})


def option_backend(option: str) -> str | None:
    """The backend that declares ``option``, or ``None``: the backends registered so far are
    looked at first, and the others imported only if none of those declares it."""
    for name in sorted(BACKENDS, key=lambda n: isinstance(BACKENDS[n], str)):
        if option in backend_options(name):
            return name
    return None


def all_backend_options() -> dict[str, str]:
    """Every backend option (every backend's module imported), with the backend that
    declares it."""
    return {option: name for name in sorted(BACKENDS) for option in backend_options(name)}


def backend_values(backend: str | Backend, given: Mapping[str, Any],
                   current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A value for every option ``backend`` declares: the one ``given`` (checked), else the
    one in ``current`` (checked already: those set with ``config.set``), else its initial
    value. An option in ``given`` that ``backend`` does not take is an error naming the
    backend that does (options of other backends in ``current`` are left alone)."""
    declared = backend_options(backend)
    for option in given:
        if option not in declared:
            owner = option_backend(option)
            label = backend.name if isinstance(backend, Backend) else backend
            if owner is None:
                raise TypeError(f"{option!r} is not an option of any backend "
                                f"(backend={label!r})")
            raise ValueError(f"{option}= is an option of backend={owner!r}, not {label!r}")
    current = current or {}
    return {option: (spec.check(given[option]) if option in given
                     else current[option] if option in current else spec.initial())
            for option, spec in declared.items()}


def create_backend(backend: str | Backend, workers: int | None,
                   values: Mapping[str, Any]) -> Backend:
    """The backend called ``backend`` made by its factory from ``values``, checked already
    (:func:`backend_values`); a :class:`Backend` object is returned as it is."""
    if isinstance(backend, Backend):
        return backend
    return _factory(backend)(workers=workers, **values)


def make_backend(name: str | Backend, workers: int | None = None, **options: Any) -> Backend:
    """The backend called ``name`` (see ``BACKENDS``) with ``workers`` and its own
    ``options`` (those it declares; the others take their defaults, and an option of
    another backend is an error). A :class:`Backend` object is returned as it is."""
    if not isinstance(name, Backend) and name not in BACKENDS:
        raise ValueError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        )
    return create_backend(name, workers, backend_values(name, options))
