"""Building a task graph: :class:`GraphBuilder` collects tasks by key, in any order, and
:meth:`GraphBuilder.build` resolves their dependencies into an immutable
:class:`~tilegraph.graph.taskgraph.TaskGraph`."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from tilegraph.graph.kinds import KINDS
from tilegraph.graph.taskgraph import (
    META_COLUMNS,
    MODE_DATA,
    MODE_DIRECT,
    MODE_FLAT,
    MODE_NESTED,
    Dep,
    GraphError,
    TaskGraph,
    is_plain_arg,
)


class GraphBuilder:
    """Collects tasks, then :meth:`build` turns them into an immutable :class:`TaskGraph`.

    Dependencies are given by key and may be added in any order; they are resolved to indices
    when the graph is built. A task's ``kind`` must be registered in
    :mod:`tilegraph.graph.kinds` (or ``None``); an unknown kind is rejected when it is added.

    >>> from operator import add
    >>> b = GraphBuilder()
    >>> b.add_data("x", 1)
    >>> b.add("y", add, deps=["x", "x"])
    >>> b.add("z", add, deps=["y"], args=(Dep(0), 10))
    >>> g = b.build()
    >>> len(g), g.dependencies("z")
    (3, ['y'])
    """

    def __init__(self) -> None:
        self._keys: list[Hashable] = []
        self._index: dict[Hashable, int] = {}
        self._funcs: list[Callable | None] = []
        self._args: list[tuple] = []
        self._kwargs: dict[int, dict] = {}
        self._modes = bytearray()
        self._deps: list[Sequence[Hashable]] = []
        self._meta: dict[str, dict[int, Any]] = {c: {} for c in META_COLUMNS}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._index

    def _new(self, key: Hashable) -> int:
        i = len(self._keys)
        if self._index.setdefault(key, i) != i:
            raise GraphError(f"duplicate task key {key!r}: every task needs its own key")
        self._keys.append(key)
        return i

    @staticmethod
    def _check_kind(key: Hashable, kind: Any) -> None:
        if kind is not None and kind not in KINDS:
            raise GraphError(
                f"task {key!r}: unknown op kind {kind!r}; register it first with "
                f"tilegraph.graph.kinds.register_kind (known kinds: {', '.join(sorted(KINDS))})"
            )

    def _set_meta(self, i: int, meta: dict[str, Any]) -> None:
        cols = self._meta
        for name, value in meta.items():
            if value is not None:
                try:
                    cols[name][i] = value
                except KeyError:
                    raise TypeError(
                        f"unknown task metadata {name!r}; known: {', '.join(META_COLUMNS)}"
                    ) from None

    def add_data(self, key: Hashable, value: Any, **meta: Any) -> None:
        """Add a task whose result is ``value`` itself."""
        if meta:
            self._check_kind(key, meta.get("kind"))
        i = self._new(key)
        self._funcs.append(None)
        self._args.append((value,))
        self._modes.append(MODE_DATA)
        self._deps.append(())
        if meta:
            self._set_meta(i, meta)

    def add_many(self, keys: Sequence[Hashable], func: Callable,
                 deps: Sequence[Sequence[Hashable]], kwargs: Sequence[dict | None] | None = None,
                 **meta: Any) -> None:
        """Add ``len(keys)`` tasks calling ``func(*values_of(deps[n]))`` at once (no task
        lists one dependency twice). A metadata keyword is a list (a value per task, None
        for none) or one value for all."""
        if not callable(func):
            raise GraphError(f"task {keys[0] if keys else None!r}: operation {func!r} is not "
                             "callable")
        n = len(keys)
        if len(deps) != n or (kwargs is not None and len(kwargs) != n):
            raise ValueError(f"add_many: {n} keys but {len(deps)} dependency lists"
                             + ("" if kwargs is None else f" and {len(kwargs)} kwargs"))
        if not n:
            return
        if "kind" in meta:
            kinds = meta["kind"] if isinstance(meta["kind"], list) else [meta["kind"]]
            for k in set(kinds):
                self._check_kind(keys[0], k)
        for d in deps:
            if len(set(d)) != len(d):
                raise GraphError(f"add_many: task dependencies {list(d)!r} repeat a key; "
                                 "use add() with args")
        for name, values in meta.items():
            if name not in self._meta:
                raise TypeError(f"unknown task metadata {name!r}; known: "
                                f"{', '.join(META_COLUMNS)}")
            if isinstance(values, list) and len(values) != n:
                raise ValueError(f"add_many: {n} keys but {len(values)} values of {name!r}")
        start = len(self._keys)
        index = self._index
        for off, key in enumerate(keys):
            if index.setdefault(key, start + off) != start + off:
                del self._keys[start:]
                for k in keys[:off]:
                    index.pop(k, None)
                raise GraphError(f"duplicate task key {key!r}: every task needs its own key")
            self._keys.append(key)
        self._funcs.extend([func] * n)
        self._args.extend([()] * n)
        self._modes.extend(bytes([MODE_DIRECT]) * n)
        self._deps.extend(deps)
        if kwargs is not None:
            own = self._kwargs
            for off, kw in enumerate(kwargs):
                if kw:
                    own[start + off] = dict(kw)
        cols = self._meta
        for name, values in meta.items():
            col = cols[name]
            if isinstance(values, list):
                col.update((start + off, v) for off, v in enumerate(values) if v is not None)
            elif values is not None:
                col.update((start + off, values) for off in range(n))

    def add(
        self,
        key: Hashable,
        func: Callable,
        deps: Sequence[Hashable] = (),
        args: tuple | None = None,
        kwargs: dict | None = None,
        **meta: Any,
    ) -> None:
        """Add a task calling ``func``.

        Without ``args`` the call is ``func(*values_of(deps))``. With ``args`` it is
        ``func(*args)`` where ``Dep(j)`` markers in ``args`` stand for the value of ``deps[j]``.
        Metadata keywords are the columns of :data:`META_COLUMNS` (see :data:`META_SCHEMA`).
        """
        if not callable(func):
            raise GraphError(f"task {key!r}: operation {func!r} is not callable")
        if meta:
            self._check_kind(key, meta.get("kind"))
        i = self._new(key)
        if args is None:
            if len(set(deps)) != len(deps):
                unique = list(dict.fromkeys(deps))
                slot = {k: j for j, k in enumerate(unique)}
                args = tuple(Dep(slot[k]) for k in deps)
                deps = unique
                mode = MODE_FLAT
            else:
                args = ()
                mode = MODE_DIRECT
        else:
            args = tuple(args)
            mode = MODE_FLAT if all(is_plain_arg(a) for a in args) else MODE_NESTED
        self._funcs.append(func)
        self._args.append(args)
        self._modes.append(mode)
        self._deps.append(deps)
        if kwargs:
            self._kwargs[i] = dict(kwargs)
        if meta:
            self._set_meta(i, meta)

    def build(self) -> TaskGraph:
        """Resolve dependency keys to indices and return the immutable graph."""
        n = len(self._keys)
        index = self._index
        counts = np.fromiter((len(d) for d in self._deps), dtype=np.int64, count=n)
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=dep_ptr[1:])
        flat: list[int] = []
        extend = flat.extend
        for i, deps in enumerate(self._deps):
            if deps:
                try:
                    extend([index[k] for k in deps])
                except KeyError:
                    missing = next(k for k in deps if k not in index)
                    raise GraphError(
                        f"task {self._keys[i]!r} depends on key {missing!r}, "
                        "which is not in the graph"
                    ) from None
        dep_idx = np.array(flat, dtype=np.int64)
        meta = {}
        for name, values in self._meta.items():
            if not values:
                continue
            col: list[Any] = [None] * n
            for i, v in values.items():
                col[i] = v
            meta[name] = col
        return TaskGraph(
            keys=self._keys, index=index, funcs=self._funcs, args=self._args,
            kwargs=self._kwargs, modes=self._modes, dep_ptr=dep_ptr, dep_idx=dep_idx, meta=meta,
        )
