"""The ``"dask"`` backend: a planned TaskGraph run on an existing dask.distributed cluster.

``tilegraph.compute(x, backend="dask", client=c)`` (``c`` a ``distributed.Client`` or a
scheduler address; without ``client=``, the current client) plans as for any backend and
then drives the one executor core (:meth:`~tilegraph.runtime.core.Execution.worker_loop`)
with a ``call`` that *submits* each task to the cluster and returns its ``Future`` at once.
So the results the executor holds are Futures: consumers are submitted with them as
arguments and dask resolves them on its workers (blocks never pass through this process),
and a result released by the executor drops its Future, which lets dask free the block.
Tasks are submitted in tilegraph's priority order with that priority, and when the plan
has a placement (the cluster has several workers: a ``worker`` column), each task is
restricted to its worker (``workers=[address]``, ``allow_other_workers=True`` so a lost
worker does not stall the run).

Two kinds of task run here instead: a task whose arguments hold a large NumPy array (a
view of an in-memory input) runs here and its result is scattered to the cluster (the
array is not sent with every task), and a ``store`` task that ends the plan (it writes a
block into the result or a file this process holds) runs here as soon as its block is
ready, in the order blocks arrive. The outputs' values are gathered at the end. A task that
fails on the cluster fails the run with its exception and a note naming the task (the task
that failed first, not one of its dependents).

distributed is imported only when this backend is made.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np

from tilegraph.graph.taskgraph import (
    MODE_DATA,
    MODE_DIRECT,
    MODE_FLAT,
    MODE_NESTED,
    Call,
    Dep,
    Lit,
    TaskGraph,
    fill,
)
from tilegraph.runtime.backends import Backend, BackendOption, Partition, register_backend
from tilegraph.runtime.blas import blas_threads
from tilegraph.runtime.core import Execution
from tilegraph.util import cores

WORKERS_TIMEOUT = 10.0  # seconds a run waits for a cluster with no workers yet
LARGE_ARGUMENT = 1 << 20  # bytes: arrays this large in a task's arguments are not sent
_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()
_RUN_NUMBERS = itertools.count(1)  # a run's number in its tasks' keys (next() is atomic)


def resolve_client(client: Any) -> Any:
    """The ``distributed.Client`` for ``client``: a Client, a scheduler address (one
    client per address is kept), or ``None`` (the current client)."""
    import distributed

    if isinstance(client, distributed.Client):
        return client
    if isinstance(client, str):
        with _clients_lock:
            got = _clients.get(client)
            if got is None or got.status not in ("running", "connecting"):
                got = _clients[client] = distributed.Client(client, set_as_default=False)
            return got
    if client is None:
        try:
            return distributed.get_client()
        except ValueError:
            raise ValueError("backend='dask' needs a dask.distributed cluster: pass "
                             "client= (a distributed.Client or a scheduler address such as "
                             "'tcp://127.0.0.1:8786'), or create a Client first") from None
    raise TypeError(f"client must be a distributed.Client or a scheduler address, got "
                    f"{type(client).__name__}")


class Filled:
    """A task's call as one function of its inputs: its argument template is filled in
    (and nested calls run) where the task runs, not where it is submitted."""

    __slots__ = ("args", "func", "kwargs", "mode")

    def __init__(self, func: Callable, args: tuple, kwargs: dict | None, mode: int):
        self.func, self.args, self.kwargs, self.mode = func, args, kwargs, mode

    def __call__(self, *inputs: Any) -> Any:
        if self.mode == MODE_FLAT:
            args = [inputs[a.slot] if type(a) is Dep else a for a in self.args]
        else:
            args = fill(self.args, inputs)
        if self.kwargs:
            return self.func(*args, **fill(self.kwargs, inputs))
        return self.func(*args)

    def __reduce__(self) -> tuple:
        return Filled, (self.func, self.args, self.kwargs, self.mode)


def remote_calls(graph: TaskGraph) -> TaskGraph:
    """``graph`` with every task that has an argument template or keywords turned into a
    :class:`Filled` call of its inputs alone (``MODE_DIRECT``)."""
    modes = graph.modes
    if all(m in (MODE_DATA, MODE_DIRECT) for m in modes) and not graph.kwargs:
        return graph
    funcs = list(graph.funcs)
    args = list(graph.args)
    new_modes = bytearray(modes)
    for i, m in enumerate(modes):
        kw = graph.kwargs.get(i)
        if m == MODE_DATA or (m == MODE_DIRECT and not kw):
            continue
        ndeps = int(graph.dep_ptr[i + 1] - graph.dep_ptr[i])
        template = tuple(Dep(k) for k in range(ndeps)) if m == MODE_DIRECT else graph.args[i]
        funcs[i] = Filled(graph.funcs[i], template, kw,
                          MODE_NESTED if m == MODE_DIRECT else m)
        args[i] = ()
        new_modes[i] = MODE_DIRECT
    return TaskGraph(keys=graph.keys, index=graph.index, funcs=funcs, args=args, kwargs={},
                     modes=new_modes, dep_ptr=graph.dep_ptr, dep_idx=graph.dep_idx,
                     meta=graph.meta)


def _holds_large_array(x: Any) -> bool:
    """Whether an argument template holds a NumPy array of ``LARGE_ARGUMENT`` bytes or
    more (an in-memory input that should not travel with every task)."""
    tp = type(x)
    if tp is Filled:
        return _holds_large_array(x.args) or _holds_large_array(x.kwargs)
    if tp is Lit:
        return _holds_large_array(x.value)
    if tp is Call:
        return _holds_large_array(x.args) or _holds_large_array(x.kwargs)
    if tp in (list, tuple):
        return any(_holds_large_array(v) for v in x)
    if tp is dict:
        return any(_holds_large_array(v) for v in x.values())
    return isinstance(x, np.ndarray) and x.nbytes >= LARGE_ARGUMENT


class _Deferred:
    """A store task that runs here once its inputs are ready (see the module docstring)."""

    __slots__ = ("args", "func", "i", "kwargs")

    def __init__(self, i: int, func: Callable, args: Any, kwargs: dict):
        self.i, self.func, self.args, self.kwargs = i, func, args, kwargs

    nbytes = 0


def _futures_in(x: Any, out: list) -> list:
    """The Futures inside the argument structure ``x``."""
    tp = type(x)
    if tp in (list, tuple):
        for v in x:
            _futures_in(v, out)
    elif tp is dict:
        for v in x.values():
            _futures_in(v, out)
    elif tp.__name__ == "Future" and hasattr(x, "key"):
        out.append(x)
    return out


class DaskBackend(Backend):
    """Runs a plan on a dask.distributed cluster (see the module docstring)."""

    name = "dask"
    workers = 1  # one loop here submits every task; the cluster's threads run them

    def __init__(self, client: Any = None, workers: int | None = None):
        if workers is not None:
            raise ValueError("workers= is not used with backend='dask': the cluster's "
                             "workers run the tasks")
        self.client = resolve_client(client)
        info = self.client.scheduler_info()
        if not info.get("workers"):  # a client that has just connected may not know yet
            try:
                self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT)
            except (TimeoutError, OSError):
                pass
            info = self.client.scheduler_info()
        self.addresses = sorted(info.get("workers", {}))
        if not self.addresses:
            raise RuntimeError(f"the dask cluster at {self.client.scheduler.address} has "
                               "no workers")
        self.processes = len(self.addresses)
        # workers in this process (LocalCluster(processes=False)) share its BLAS: limit it
        # so that their threads x BLAS threads = cores, as the threads backend does (dask
        # sets one BLAS thread in the worker processes it starts itself)
        workers = info.get("workers", {})
        self.local_threads = sum(int(w.get("nthreads", 1)) for a, w in workers.items()
                                 if a.startswith("inproc://"))

    def partition(self, graph: TaskGraph, outputs: np.ndarray, priority: np.ndarray
                  ) -> Partition:
        """All of ``graph``, each task's whole call (its argument template, with nested
        calls) made one function of its inputs, so that it runs on the cluster."""
        return Partition(remote_calls(graph), [int(o) for o in outputs], priority)

    def run(self, part: Partition, execution: Execution) -> None:
        """Submit ``part``'s tasks (which ``execution`` runs) from one loop here; the run's
        submissions are its own :class:`_Run`, named by a token no other run has."""
        run = _Run(self, execution, f"{id(execution):x}-{next(_RUN_NUMBERS)}")
        blas = (blas_threads(max(1, cores() // self.local_threads)) if self.local_threads
                else nullcontext())
        try:
            with blas:
                execution.worker_loop(0, call=run.call)
                if execution.error is None:
                    run.finish()
        except BaseException as exc:
            execution.cancel(exc)
            raise
        finally:
            run.forget()
            execution.finish_io()


class _Run:
    """One run's submissions: the task being submitted, keys, and the deferred stores."""

    def __init__(self, backend: DaskBackend, execution: Execution, token: str):
        self.client = backend.client
        self.execution = execution
        graph = execution.graph
        self.graph = graph
        self.token = token
        n = len(graph)
        kinds = graph.meta.get("kind") or [None] * n
        placed = graph.meta.get("worker")
        self.where = (None if placed is None else
                      [None if w is None else [backend.addresses[int(w) % len(
                          backend.addresses)]] for w in placed])
        outdeg = graph.out_degree().tolist()
        self.deferred_kind = [k == "store" and outdeg[i] == 0 for i, k in enumerate(kinds)]
        self.here = [_holds_large_array(f) or _holds_large_array(a)
                     for f, a in zip(graph.funcs, graph.args, strict=True)]
        self.keys: dict[str, int] = {}  # dask key -> task index
        self.deferred: list[_Deferred] = []

    def call(self, func: Callable, args: Any, kwargs: dict) -> Any:
        """Submit one task (see the module docstring); called by ``worker_loop``."""
        i = _current_task(self.execution)
        if self.deferred_kind[i]:
            d = _Deferred(i, func, args, kwargs)
            self.deferred.append(d)
            return d
        if self.here[i]:
            value = func(*args, **kwargs)
            return self.client.scatter(value, workers=self.where[i] if self.where else None,
                                       direct=False, hash=False)
        key = f"{self.graph.opname(i)}-{self.token}-{i}"
        self.keys[key] = i
        where = self.where[i] if self.where else None
        if where is None:
            return self.client.submit(func, *args, **kwargs, key=key, pure=False,
                                      priority=-int(self.execution.priority[i]))
        return self.client.submit(func, *args, **kwargs, key=key, pure=False,
                                  priority=-int(self.execution.priority[i]), workers=where,
                                  allow_other_workers=True)

    def finish(self) -> None:
        """Run the deferred stores as their blocks arrive, then gather the outputs."""
        ex = self.execution
        try:
            waiting: dict[str, list[_Deferred]] = {}  # future's key -> stores waiting
            pending: dict[int, int] = {}  # id of a store -> its inputs not yet arrived
            futures: dict[str, Any] = {}
            for d in self.deferred:
                fs = {f.key: f for f in _futures_in(d.args, []) + _futures_in(d.kwargs, [])}
                pending[id(d)] = len(fs)
                if not fs:
                    self._run_here(d, {})
                for key, f in fs.items():
                    waiting.setdefault(key, []).append(d)
                    futures[key] = f
            values: dict[int, dict] = {}
            arrived: queue.SimpleQueue = queue.SimpleQueue()
            for f in futures.values():
                f.add_done_callback(arrived.put)
            for _ in range(len(futures)):
                fut = arrived.get()
                if fut.status != "finished":
                    self._raise(fut)
                value = fut.result()
                for d in waiting.pop(fut.key, ()):
                    values.setdefault(id(d), {})[fut.key] = value
                    pending[id(d)] -= 1
                    if pending[id(d)] == 0:
                        self._run_here(d, values.pop(id(d)))
            outs = [o for o in ex.outputs if type(ex.results.get(o)).__name__ == "Future"]
            if outs:
                fs = [ex.results[o] for o in outs]
                got = self.client.gather(fs, errors="skip")
                for f in fs:
                    if f.status == "error":
                        self._raise(f)
                for o, v in zip(outs, got, strict=True):
                    ex.results[o] = v
        except BaseException as exc:
            ex.cancel(exc)
            raise

    def _run_here(self, d: _Deferred, values: dict) -> None:
        ex = self.execution
        args = _replace(d.args, values)
        kwargs = _replace(d.kwargs, values)
        try:
            value = d.func(*args, **kwargs)
        except Exception as exc:
            exc.add_note(ex.describe_task(d.i, failed=True))
            raise
        ex.results[d.i] = value

    def _raise(self, fut: Any) -> None:
        """Raise the exception of the task that failed first (``fut`` or what it needs)."""
        exc = fut.exception() if fut.status == "error" else None
        if exc is None:  # cancelled: no exception to raise (e.g. the client lost the key)
            exc = RuntimeError(f"the dask cluster gave no result for task {fut.key!r} "
                               f"(its future is {fut.status}): a worker could not run it "
                               "(a function it could not import?) or the key was lost")
        key = self._blame(fut.key)
        i = self.keys.get(key, self.keys.get(fut.key))
        if i is not None and isinstance(exc, Exception):
            exc.add_note(self.execution.describe_task(i, failed=True))
        raise exc

    def _blame(self, key: str) -> str:
        def blame(dask_scheduler: Any, key: str = key) -> str:
            ts = dask_scheduler.tasks.get(key)
            culprit = getattr(ts, "exception_blame", None) if ts is not None else None
            return culprit.key if culprit is not None else key

        try:
            return self.client.run_on_scheduler(blame)
        except Exception:
            return key

    def forget(self) -> None:
        self.deferred.clear()
        self.keys.clear()


def _replace(x: Any, values: dict) -> Any:
    tp = type(x)
    if tp is list:
        return [_replace(v, values) for v in x]
    if tp is tuple:
        return tuple(_replace(v, values) for v in x)
    if tp is dict:
        return {k: _replace(v, values) for k, v in x.items()}
    if tp.__name__ == "Future" and hasattr(x, "key") and x.key in values:
        return values[x.key]
    return x


def _current_task(execution: Execution) -> int:
    """The task the submitting loop is running: with one loop, the one RUNNING task."""
    (i,) = execution.running
    return i


def _check_client(value: Any) -> Any:
    if value is None or isinstance(value, str) or (
            hasattr(value, "submit") and hasattr(value, "scheduler_info")):
        return value
    raise TypeError(f"client must be a distributed.Client or a scheduler address such as "
                    f"'tcp://127.0.0.1:8786', got {type(value).__name__}")


def _make_backend(workers: int | None = None, client: Any = None) -> DaskBackend:
    """``backend="dask"`` of :func:`~tilegraph.runtime.backends.make_backend`."""
    return DaskBackend(client, workers)


register_backend("dask", _make_backend, options={
    "client": BackendOption(
        None, _check_client,
        "the distributed.Client or scheduler address of the cluster to run on (None: the "
        "current client)"),
})
