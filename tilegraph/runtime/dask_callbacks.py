"""dask's scheduler callbacks (``dask.callbacks.Callback``) on tilegraph runs.

dask's local schedulers call five hooks of every active callback: ``start(dsk)``,
``start_state(dsk, state)``, ``pretask(key, dsk, state)``, ``posttask(key, result, dsk,
state, worker_id)`` and ``finish(dsk, state, errored)``; ``dask.diagnostics.ProgressBar``,
``Profiler`` and ``CacheProfiler`` are such callbacks. :func:`tilegraph.get` calls the same
hooks, the same way: callbacks given as ``callbacks=`` (``Callback`` objects or 5-tuples)
are used, else the globally registered ones (``Callback.active``), which are switched off
for nested runs while the outer run uses them (as dask's ``local_callbacks`` does).

Each task's call is wrapped so that ``pretask``/``posttask`` run around it, on the worker
thread that runs it, one hook at a time (a lock). ``state`` is a dict shaped as dask's
(``cache``, ``ready``, ``waiting``, ``running``, ``finished``, ``released``,
``dependencies``, ``dependents``, ``waiting_data``), kept up to date as tasks start and end.
With callbacks, runs are not fused, so every key of the graph gets its hooks.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph

Hooks = tuple  # (start, start_state, pretask, posttask, finish), each a callable or None


def _dask_callback_class() -> type | None:
    """``dask.callbacks.Callback`` if dask is already imported (else no callback can exist)."""
    mod = sys.modules.get("dask.callbacks")
    return getattr(mod, "Callback", None) if mod is not None else None


def is_dask_callback(obj: Any) -> bool:
    """Whether ``obj`` is one of dask's callbacks: a ``Callback`` or a tuple of hooks."""
    cls = _dask_callback_class()
    if cls is not None and isinstance(obj, cls):
        return True
    return (type(obj) is tuple and 1 <= len(obj) <= 5
            and all(f is None or callable(f) for f in obj))


def _hooks(cb: Any) -> Hooks:
    cls = _dask_callback_class()
    if cls is not None and isinstance(cb, cls):
        return tuple(cb._callback)
    return tuple(cb) + (None,) * (5 - len(cb))


def split_callbacks(value: Any) -> tuple[list[Hooks] | None, Any]:
    """``callbacks=`` of a ``get`` call as (dask's hooks or ``None`` if none were given,
    tilegraph's event subscribers). Other values are left for the option check."""
    if value is None:
        return None, ()
    if callable(value) and not is_dask_callback(value):
        return None, value
    if is_dask_callback(value):
        return [_hooks(value)], ()
    try:
        items = list(value)
    except TypeError:
        return None, value
    dask_cbs = [_hooks(v) for v in items if is_dask_callback(v)]
    rest = [v for v in items if not is_dask_callback(v)]
    return (dask_cbs or None), rest


@contextmanager
def active_callbacks(given: list[Hooks] | None) -> Iterator[list[Hooks]]:
    """The hooks a run uses: ``given``, else the global ones, which are switched off for
    the run's nested runs and restored after it (dask's ``local_callbacks``)."""
    if given is not None:
        yield given
        return
    cls = _dask_callback_class()
    if cls is None or not cls.active:
        yield []
        return
    active, cls.active = cls.active, set()
    try:
        yield [tuple(cb) for cb in active]
    finally:
        cls.active = active


class _Announced:
    """One task's call with its ``pretask``/``posttask`` hooks around it."""

    __slots__ = ("func", "key", "run")

    def __init__(self, func: Callable, key: Hashable, run: RunHooks):
        self.func = func
        self.key = key
        self.run = run

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.run.before(self.key)
        value = self.func(*args, **kwargs)
        self.run.after(self.key, value)
        return value


class RunHooks:
    """The hooks of one run and the dask-shaped ``state`` they are given."""

    def __init__(self, hooks: Sequence[Hooks], dsk: Mapping, outputs: Sequence[Hashable]):
        self.dsk = dsk
        self.pre = [h[2] for h in hooks if h[2] is not None]
        self.post = [h[3] for h in hooks if h[3] is not None]
        self.hooks = list(hooks)
        self.lock = threading.Lock()
        self.outputs = set(outputs)
        self.started: list[Hooks] = []
        self.state: dict[str, Any] = {}

    def start(self) -> None:
        for h in self.hooks:
            if h[0] is not None:
                h[0](self.dsk)
            self.started.append(h)

    def start_state(self, g: TaskGraph) -> None:
        keys = g.keys
        ptr, idx = g.dep_ptr.tolist(), g.dep_idx.tolist()
        deps = {k: {keys[j] for j in idx[ptr[i]:ptr[i + 1]]} for i, k in enumerate(keys)}
        dependents: dict[Hashable, set] = {k: set() for k in keys}
        for k, ds in deps.items():
            for d in ds:
                dependents[d].add(k)
        data = {keys[i] for i in range(len(keys)) if g.modes[i] == MODE_DATA}
        cache = {keys[i]: g.args[i][0] for i in range(len(keys)) if g.modes[i] == MODE_DATA}
        waiting = {k: set(ds) - data for k, ds in deps.items() if k not in data}
        ready = [k for k, w in waiting.items() if not w]
        for k in ready:
            del waiting[k]
        self.state = {
            "dependencies": deps, "dependents": dependents, "cache": cache,
            "waiting": waiting, "waiting_data": {k: set(v) for k, v in dependents.items()},
            "ready": ready, "running": set(), "finished": set(), "released": set(),
        }
        for h in self.hooks:
            if h[1] is not None:
                h[1](self.dsk, self.state)

    def before(self, key: Hashable) -> None:
        with self.lock:
            st = self.state
            try:
                st["ready"].remove(key)
            except ValueError:
                st["waiting"].pop(key, None)
            st["running"].add(key)
            for f in self.pre:
                f(key, self.dsk, st)

    def after(self, key: Hashable, value: Any) -> None:
        with self.lock:
            st = self.state
            st["running"].discard(key)
            st["finished"].add(key)
            st["cache"][key] = value
            for c in st["dependents"][key]:
                w = st["waiting"].get(c)
                if w is not None:
                    w.discard(key)
                    if not w:
                        del st["waiting"][c]
                        st["ready"].append(c)
            for d in st["dependencies"][key]:
                wd = st["waiting_data"].get(d)
                if wd is not None:
                    wd.discard(key)
                    if not wd and d not in self.outputs:
                        st["cache"].pop(d, None)
                        st["released"].add(d)
            for f in self.post:
                f(key, value, self.dsk, st, threading.get_ident())

    def finish(self, errored: bool) -> None:
        for h in self.started:
            if h[4] is not None:
                h[4](self.dsk, self.state, errored)

    def announced(self, graph: TaskGraph) -> TaskGraph:
        """``graph`` (culled) with every task's call wrapped in the hooks, once ``state``
        is made and the ``start_state`` hooks have seen it."""
        self.start_state(graph)
        funcs = [f if graph.modes[i] == MODE_DATA or f is None
                 else _Announced(f, graph.keys[i], self)
                 for i, f in enumerate(graph.funcs)]
        return TaskGraph(keys=graph.keys, index=graph.index, funcs=funcs, args=graph.args,
                         kwargs=graph.kwargs, modes=graph.modes, dep_ptr=graph.dep_ptr,
                         dep_idx=graph.dep_idx, meta=graph.meta)
