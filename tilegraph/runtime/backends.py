"""Backends: where the tasks of a planned graph run, behind one narrow seam.

The pipeline (:mod:`tilegraph.pipeline`) plans every run the same way and then asks the
backend two things:

- ``partition(graph, outputs, priority)``: which tasks run in this process, which results
  arrive from elsewhere (*external* tasks) and which results made here other processes
  need (*exported* tasks), as a :class:`Partition`. One process (threads, sync) runs
  everything: the trivial partition.
- ``transport(partition)``: the :class:`Transport` that delivers external results to the
  executor (``execution.deliver``) and sends exported ones (``export(i, value)``, called
  by the executor when such a task finishes); ``None`` when nothing crosses processes.

Besides, a backend with several processes answers the collective questions the pipeline
asks (trivial for one process): before anything runs, ``check_same_plan(graph)`` (which
fails within ``collective_timeout`` seconds, naming the processes that did not join),
``decide(fn)`` (a value computed on one process and shared by all, e.g. the placement),
``gather(value)`` and ``all_ready(error)`` (every process stops if one cannot run its part);
after the run, ``share_results(values, limit)`` (the outputs' values on every process when
they are small, else on the process that returns them only). ``local_processes`` is the number of
processes on this host, among which the default memory budget is divided.

``run(execution)`` drives ``execution.worker_loop(w)`` for every worker ``w`` until the run
is finished and returns only when no worker is left running and ``execution.finish_io()``
has returned. Ordering, retries, release of results, memory, errors and events all live in
the executor core, once. A backend that runs task bodies somewhere else passes
``call(func, args, kwargs)`` to ``worker_loop``. Optional backends are created by
:func:`make_backend`, which imports them only when they are asked for.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.runtime.blas import blas_threads, cores
from tilegraph.runtime.core import PARALLEL, PARALLEL_TASK_TIME, TINY, UNKNOWN, Execution

T = TypeVar("T")


@dataclass(frozen=True)
class Partition:
    """This process's part of a planned graph.

    ``graph``: the tasks run here plus one external task per result that arrives from
    another process; ``outputs``: indices (in ``graph``) of the outputs whose values this
    process returns; ``priority``: a permutation of ``0..len(graph)-1``; ``external``: the
    tasks whose results arrive; ``exported``: the tasks whose results other processes need;
    ``returns``: whether this process returns the outputs' values (rank 0 of MPI does; the
    others return ``None``)."""

    graph: TaskGraph
    outputs: Sequence[int]
    priority: np.ndarray
    external: Sequence[int] = ()
    exported: Sequence[int] = ()
    returns: bool = True


class Transport(ABC):
    """Moves results between processes during one run (see the module docstring)."""

    bytes_sent = 0

    @abstractmethod
    def export(self, i: int, value: Any) -> None:
        """Task ``i`` of the partition finished and other processes need its result. Called
        by the executor with its lock held: queue the send, never block."""

    @abstractmethod
    def connect(self, execution: Execution) -> AbstractContextManager[None]:
        """A context manager around the run: starts delivering and sending, and on leaving
        finishes every exchange and raises a failure of another process."""


class Backend(ABC):
    """Base of all backends; see the module docstring for the contract."""

    name = "base"
    workers = 1
    processes = 1  # processes a plan is placed on (MPI ranks); 1: all workers share memory
    rank = 0  # this process among ``processes``
    local_processes = 1  # processes of this backend on this host (share its memory)
    collective_timeout = 60.0  # seconds a process waits for the others to join a run

    @abstractmethod
    def run(self, execution: Execution) -> None:
        """Drive ``execution.worker_loop`` on every worker until the run is finished."""

    def task_policy(self, graph: TaskGraph, seconds: np.ndarray) -> bytearray | None:
        """Per task of ``graph`` (planned to take ``seconds``), whether it is worth a second
        worker (the executor's ``parallel`` flags); ``None``: every task is."""
        return None

    def place_tasks(self, graph: TaskGraph, processes: int, *, initial: str = "cyclic",
                    model: Any = None) -> list[int] | None:
        """The process of every task of ``graph`` (a ``worker`` column), for a backend of
        several processes; ``None``: the planner's placement (:func:`tilegraph.plan.place`)."""
        return None

    def partition(self, graph: TaskGraph, outputs: np.ndarray, priority: np.ndarray
                  ) -> Partition:
        """This process's part of ``graph`` (one process: all of it)."""
        return Partition(graph, [int(o) for o in outputs], priority)

    def transport(self, part: Partition) -> Transport | None:
        """How results cross processes for ``part`` (one process: nothing crosses)."""
        return None

    def check_same_plan(self, graph: TaskGraph, placement: np.ndarray | None = None) -> None:
        """Raise on every process if the processes do not hold the same plan (one process:
        nothing to compare)."""
        return None

    def decide(self, fn: Callable[[], T]) -> T:
        """``fn()`` computed once and known to every process."""
        return fn()

    def gather(self, value: T) -> list[T] | None:
        """The ``value`` of every process, in rank order, on the first process; ``None`` on
        the others."""
        return [value]

    def all_ready(self, error: BaseException | None) -> None:
        """Raise ``error`` (or an error naming the process that failed) on every process if
        any process cannot run its part."""
        if error is not None:
            raise error

    def share_results(self, values: Callable[[], Any] | None, limit: int) -> Any:
        """After a successful run: the outputs' values, from ``values()`` on the process
        that returns them (``values`` is ``None`` on the others), on every process when
        they take at most ``limit`` bytes together (and ``limit > 0``), else on that process
        only (``None`` on the others)."""
        return values() if values is not None else None


def _guarded(execution: Execution, worker: int) -> None:
    """A worker loop that never dies silently: anything it raises ends the run."""
    try:
        execution.worker_loop(worker)
    except BaseException as exc:
        execution.cancel(exc)


def threads_policy(graph: TaskGraph, seconds: np.ndarray) -> bytearray:
    """The tiny-task policy of threads sharing one interpreter: a task whose kind releases
    the GIL (BLAS/LAPACK kernels) or that is planned to take at least
    ``PARALLEL_TASK_TIME`` is worth a second worker (``PARALLEL``); a shorter planned task
    is not (``TINY``); a task with no kind and no planned cost is ``UNKNOWN`` (measured).

    >>> from tilegraph.graph import GraphBuilder
    >>> b = GraphBuilder()
    >>> b.add("p", print, kind="product", cost=1.0)
    >>> b.add("e", print, kind="elementwise", nbytes=8)
    >>> b.add("o", print)
    >>> list(threads_policy(b.build(), np.array([1e-6, 1e-6, 0.0])))
    [1, 0, 2]
    """
    n = len(graph)
    kinds = graph.meta.get("kind") or [None] * n
    costs = graph.meta.get("cost") or [None] * n
    sizes = graph.meta.get("nbytes") or [None] * n
    long_enough = (np.asarray(seconds) >= PARALLEL_TASK_TIME).tolist()
    gil_free = {k: kind_info(k).releases_gil for k in set(kinds) if k is not None}
    out = bytearray(n)
    for i, k in enumerate(kinds):
        if (k is not None and gil_free[k]) or long_enough[i]:
            out[i] = PARALLEL
        elif k is None and not costs[i] and not sizes[i]:
            out[i] = UNKNOWN
        else:
            out[i] = TINY
    return out


class SyncBackend(Backend):
    """Runs every task in the caller's thread, one at a time, in priority order (debugging)."""

    name = "sync"
    workers = 1

    def run(self, execution: Execution) -> None:
        try:
            _guarded(execution, 0)
        finally:
            execution.finish_io()


class ThreadsBackend(Backend):
    """``workers`` threads (default: one per core) sharing results by reference, with BLAS
    limited so that threads x BLAS threads = cores. The caller's thread only waits, so Ctrl-C
    reaches it at once: the run is cancelled and the workers stop after their current task."""

    name = "threads"

    def __init__(self, workers: int | None = None, share: int = 1):
        """``share``: processes on this host that split its cores (MPI ranks), so that
        processes x threads x BLAS threads = cores."""
        self.workers = workers or cores()
        self.share = share

    def task_policy(self, graph: TaskGraph, seconds: np.ndarray) -> bytearray | None:
        return threads_policy(graph, seconds) if self.workers > 1 else None

    def run(self, execution: Execution) -> None:
        threads = [
            threading.Thread(
                target=_guarded, args=(execution, w), name=f"tilegraph-worker-{w}", daemon=True
            )
            for w in range(self.workers)
        ]
        with blas_threads(max(1, cores() // (self.workers * self.share))):
            try:
                for t in threads:
                    t.start()
                while not execution.done_event.wait(0.5):
                    pass
            except BaseException as exc:  # KeyboardInterrupt while starting or waiting
                execution.cancel(exc)
                raise
            finally:
                _join_all(threads, execution)
                execution.finish_io()


def _join_all(threads: list[threading.Thread], execution: Execution) -> None:
    """Wait for every started worker; a further Ctrl-C cannot make us leave threads behind
    (the run is already cancelled, so each worker stops after its current task)."""
    for t in threads:
        while t.ident is not None:
            try:
                t.join()
                break
            except KeyboardInterrupt:
                execution.cancel(KeyboardInterrupt())


def _mpi_backend(workers: int | None = None) -> Backend:
    from tilegraph.runtime.mpi import MPIBackend  # mpi4py is imported only when asked for

    return MPIBackend(workers)


def _serverless_backend(workers: int | None = None, **options: Any) -> Backend:
    # redis-py is imported only when the backend is asked for
    from tilegraph.runtime.serverless.backend import ServerlessBackend

    return ServerlessBackend(workers, pool=options.get("pool"), redis=options.get("redis"),
                             store=options.get("store"), lease=options.get("lease", 30.0))


BACKENDS: dict[str, Callable[..., Backend]] = {
    "sync": lambda workers=None, **options: SyncBackend(),
    "threads": lambda workers=None, **options: ThreadsBackend(workers),
    "mpi": lambda workers=None, **options: _mpi_backend(workers),
    "serverless": _serverless_backend,
}


def make_backend(name: str, workers: int | None = None, **options: Any) -> Backend:
    """The backend called ``name`` (see ``BACKENDS``); ``options``: the run's options
    (a backend takes those it uses)."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        ) from None
    import inspect

    params = inspect.signature(factory).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return factory(workers=workers)  # a factory that takes no options
    return factory(workers=workers, **options)
