"""Backends: where the workers of an :class:`~tilegraph.runtime.core.Execution` run.

The seam is narrow: a backend has a ``name``, a number of ``workers``, and ``run(execution)``,
which drives ``execution.worker_loop(w)`` for every worker ``w`` until the run is finished and
returns only when no worker is left running and ``execution.finish_io()`` has returned (the
read-ahead thread of the spill store is gone). Ordering, retries, release of results, errors
and events all live in the core, once. A backend that runs task bodies somewhere else passes
``call(func, args, kwargs)`` to ``worker_loop``. Optional backends are created by
:func:`make_backend`, which imports them only when they are asked for.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable

from tilegraph.runtime.blas import blas_threads, cores
from tilegraph.runtime.core import Execution


class Backend(ABC):
    """Base of all backends; see the module docstring for the contract."""

    name = "base"
    workers = 1
    processes = 1  # processes a plan is placed on (MPI ranks); 1: all workers share memory
    distributed = False  # True: runs a placed plan with ``execute`` (see runtime.mpi)

    @abstractmethod
    def run(self, execution: Execution) -> None:
        """Drive ``execution.worker_loop`` on every worker until the run is finished."""


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


BACKENDS: dict[str, Callable[..., Backend]] = {
    "sync": lambda workers=None: SyncBackend(),
    "threads": lambda workers=None: ThreadsBackend(workers),
    "mpi": _mpi_backend,
}


def make_backend(name: str, workers: int | None = None) -> Backend:
    """The backend called ``name`` (see ``BACKENDS``)."""
    try:
        factory = BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}"
        ) from None
    return factory(workers=workers)
