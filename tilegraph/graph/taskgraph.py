"""The TaskGraph: the one intermediate representation every front end lowers to.

A task has a *key* (any hashable, usually a ``('name', i, j)`` tuple), an operation (a callable
plus static arguments), the keys it consumes, and optional metadata. Tasks are stored as
columns, not objects, so a graph of a million tasks is cheap to build and to traverse:

========================  ===============================================================
field                     meaning
========================  ===============================================================
``keys``                  list, task index -> key
``index``                 dict, key -> task index (the inverse of ``keys``)
``funcs``                 list, the callable of each task (``None`` for data tasks)
``args``                  list of tuples, the argument *template* of each task (below)
``kwargs``                dict, task index -> static keyword arguments (sparse)
``modes``                 bytearray, how ``args`` turns into a call (``MODE_*`` below)
``dep_ptr, dep_idx``      CSR arrays (int64): dependencies of task i are
                          ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``, unique, in template order
``meta``                  dict of metadata columns, column name -> list (``None`` = unset)
========================  ===============================================================

Argument templates. A task's arguments are its static arguments with :class:`Dep` markers
where the value of a dependency goes (``Dep(j)`` is the j-th dependency of that task). Nested
calls (:class:`Call`), lists, tuples and dicts may hold markers too; :class:`Lit` wraps a
literal container so it is passed as it is. The mode says how much work filling takes:

- ``MODE_DATA``: the task is a literal value, ``args == (value,)``.
- ``MODE_DIRECT``: ``func(*dependency_values)``; ``args`` is empty. The common case of lowered
  array programs, and the fastest.
- ``MODE_FLAT``: only top-level markers in ``args``.
- ``MODE_NESTED``: markers or calls anywhere; filled recursively by :func:`fill`.

Metadata columns (all optional, ``None`` where unset) are declared in one schema,
:data:`META_SCHEMA`: each column's name, the type of its values, what it means and who
writes it. A front end sets the columns of :data:`META_COLUMNS` as keywords of
:class:`GraphBuilder`'s ``add``, ``add_many`` and ``add_data`` (any other name is refused);
the planner writes the others (``overwrites``, ``remake``, ``step_working``,
``chain_blockwise``: :func:`tilegraph.plan.fuse.fuse_chains`). ``tests/test_layering.py``
checks that every column the package reads or writes is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from tilegraph.graph.kinds import kind_info, unrepeatable_reason
from tilegraph.graph.remake import RemakePlan, remake_plan
from tilegraph.util import concat_ranges

MODE_DATA = 0
MODE_DIRECT = 1
MODE_FLAT = 2
MODE_NESTED = 3


class MetaColumn(NamedTuple):
    """One metadata column of a :class:`TaskGraph`: its ``name``, the ``type`` of a value
    (``None`` is always allowed: unset), what it means, who writes it, and whether a front
    end may set it when it adds tasks (``builder``: a keyword of :class:`GraphBuilder`)."""

    name: str
    type: str
    meaning: str
    writer: str
    builder: bool = True


_FUSE = "the planner's fusion (tilegraph.plan.fuse.fuse_chains)"

META_SCHEMA: tuple[MetaColumn, ...] = (
    MetaColumn("name", "str", "the op name shown in errors and plans; of a fused task, the "
               "names of its steps joined with '+'", f"front ends; {_FUSE}"),
    MetaColumn("kind", "str", "the op kind, e.g. 'load', 'gemm': a row of "
               "tilegraph.graph.kinds (an unknown kind is refused)", "front ends"),
    MetaColumn("coords", "tuple[int, ...]", "the block coordinates of the task's result",
               "front ends"),
    MetaColumn("nbytes", "int", "the estimated bytes of the task's result", "front ends"),
    MetaColumn("cost", "float", "the estimated flops of the task; of a fused task, of all "
               "its steps", f"front ends; {_FUSE}"),
    MetaColumn("line", "str", "the user's source line, 'file:line'", "front ends"),
    MetaColumn("retries", "int", "extra attempts allowed", "front ends (autopar)"),
    MetaColumn("priority", "int", "lower runs first; when every task has one, the planner's "
               "order is not used", "front ends (autopar)"),
    MetaColumn("worker", "int", "the worker (process) a placement assigned",
               "the pipeline's placement (tilegraph.pipeline.make_plan, tilegraph.plan.place)"),
    MetaColumn("serial", "int", "the task's position in the program it comes from, for "
               "graphs whose tasks have side effects (a script's statements): a failure "
               "stops the run as the program run in that order would stop",
               "front ends (autopar)"),
    MetaColumn("working", "int", "the bytes the task holds while it runs when more than its "
               "result (a read's buffers); of a fused task, the peak of its steps",
               f"front ends; {_FUSE}"),
    MetaColumn("repeatable", "bool | str", "whether the task's own step gives the same "
               "result when run again (a str: why not); unset, its op kind's row decides "
               "(TaskGraph.repeatable); of a fused task, True or the reason of the first step "
               "that is not", f"sources that prove their reads repeatable; {_FUSE}"),
    MetaColumn("overwrites", "tuple[int, ...]", "the dependency slots a fused task may "
               "write over in place (TaskGraph.overwritten)", _FUSE, builder=False),
    MetaColumn("remake", "bool", "of a fused task: whether every step of it is cheap to "
               "make again", _FUSE, builder=False),
    MetaColumn("step_working", "int", "of a fused task: the bytes its last step works on "
               "(a later fusion pass and the memory model read it; set only on fused tasks)",
               _FUSE, builder=False),
    MetaColumn("chain_blockwise", "bool", "of a fused task: whether every step of it works "
               "block by block (read by a later fusion pass)", _FUSE, builder=False),
)
"""Every metadata column a :class:`TaskGraph` may carry (see :class:`MetaColumn`)."""

META_COLUMNS = tuple(c.name for c in META_SCHEMA if c.builder)
"""The columns a front end sets when it adds tasks (the fields of :class:`TaskMeta`)."""

META_DECLARED = frozenset(c.name for c in META_SCHEMA)


class GraphError(ValueError):
    """A task graph is malformed (missing dependency, duplicate key, bad task)."""


class CycleError(GraphError):
    """The task graph has a cycle; ``cycle`` lists the keys on it, in dependency order."""

    def __init__(self, cycle: Sequence[Hashable]):
        self.cycle = list(cycle)
        path = " -> ".join(repr(k) for k in [*self.cycle, self.cycle[0]])
        super().__init__(
            f"task graph has a cycle through key {self.cycle[0]!r}: {path} "
            "(each task on it depends on the next)"
        )


class Dep:
    """Placeholder in an argument template for the value of the task's ``slot``-th dependency."""

    __slots__ = ("slot",)

    def __init__(self, slot: int):
        self.slot = slot

    def __repr__(self) -> str:
        return f"Dep({self.slot})"

    def __eq__(self, other: object) -> bool:
        return type(other) is Dep and other.slot == self.slot

    def __hash__(self) -> int:
        return hash(("Dep", self.slot))


class Call:
    """A nested call inside an argument template: ``func(*args, **kwargs)``, filled first.

    A call with ``shared = n > 1`` appears ``n`` times in its template (fusion inlined a
    block that several steps of one task read): it is evaluated once per task, and its
    value is kept until its last use.

    ``mem``, set by fusion, is the step's ``(result bytes, bytes it works on)``: the memory
    model of a fused task walks its calls (:func:`tilegraph.plan.fuse.template_working`).
    """

    __slots__ = ("args", "func", "kwargs", "mem", "shared")

    def __init__(self, func: Callable, args: tuple = (), kwargs: dict | None = None,
                 shared: int = 0, mem: tuple[int, int] | None = None):
        self.func = func
        self.args = tuple(args)
        self.kwargs = kwargs
        self.shared = shared
        self.mem = mem

    def __repr__(self) -> str:
        shared = ", shared" if self.shared else ""
        return f"Call({funcname(self.func)}, {self.args!r}, {self.kwargs!r}{shared})"


class Lit:
    """A literal container inside an argument template, passed through without being walked."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"Lit({self.value!r})"


def fill(template: Any, values: Sequence[Any]) -> Any:
    """Substitute dependency values into a (nested) argument template and run nested calls."""
    tp = type(template)
    if tp is Dep:
        return values[template.slot]
    if tp is Call:
        if template.shared:
            return _fill_shared(template, values)
        args = [fill(a, values) for a in template.args]
        if template.kwargs:
            kwargs = {k: fill(v, values) for k, v in template.kwargs.items()}
            return template.func(*args, **kwargs)
        return template.func(*args)
    if tp is list:
        return [fill(a, values) for a in template]
    if tp is tuple:
        return tuple([fill(a, values) for a in template])
    if tp is dict:
        return {k: fill(v, values) for k, v in template.items()}
    if tp is Lit:
        return template.value
    return template


class _Inputs(list):
    """A task's input values, with the values of its shared calls once evaluated."""

    __slots__ = ("memo",)

    def __init__(self, values: Sequence[Any]):
        super().__init__(values)
        self.memo: dict[int, Any] = {}


def _fill_shared(template: Call, values: Sequence[Any]) -> Any:
    memo = getattr(values, "memo", None)
    key = id(template)
    if memo is not None and key in memo:
        held = memo[key]
        held[1] -= 1
        if held[1] <= 0:
            del memo[key]  # its last use: the task no longer holds it
        return held[0]
    args = [fill(a, values) for a in template.args]
    kwargs = {k: fill(v, values) for k, v in template.kwargs.items()} if template.kwargs \
        else _NO_KWARGS
    value = template.func(*args, **kwargs)
    if memo is not None:
        memo[key] = [value, template.shared - 1]
    return value


def prepare_call(func: Callable, mode: int, template: Any, kwargs: dict | None,
                 inputs: list) -> tuple[Callable, Any, dict]:
    """A task's call ``(func, args, kwargs)`` with its dependency values ``inputs`` filled
    into its argument ``template`` (by its ``mode``) and ``kwargs``."""
    if mode == MODE_DIRECT:
        args = inputs
    elif mode == MODE_FLAT:
        args = [inputs[a.slot] if type(a) is Dep else a for a in template]
    else:
        inputs = _Inputs(inputs)
        args = fill(template, inputs)
    return func, args, fill(kwargs, inputs) if kwargs else _NO_KWARGS


def call_of(graph: TaskGraph, i: int, inputs: list) -> tuple[Callable, Any, dict]:
    """The call of task ``i`` of ``graph`` given its dependency values (see
    :func:`prepare_call`); a literal task's call returns its value."""
    if graph.modes[i] == MODE_DATA:
        return _identity, graph.args[i], _NO_KWARGS
    return prepare_call(graph.funcs[i], graph.modes[i], graph.args[i], graph.kwargs.get(i),
                        inputs)


def _identity(value: Any) -> Any:
    return value


_NO_KWARGS: dict = {}


def dep_slots(template: Any) -> set[int]:
    """The slots of every :class:`Dep` marker in a (nested) argument template."""
    tp = type(template)
    if tp is Dep:
        return {template.slot}
    if tp is Call:
        out = set().union(*map(dep_slots, template.args))
        return out.union(*map(dep_slots, template.kwargs.values())) if template.kwargs else out
    if tp in (list, tuple):
        return set().union(*map(dep_slots, template))
    if tp is dict:
        return set().union(*map(dep_slots, template.values()))
    return set()


def funcname(func: Any) -> str:
    """A short readable name for a callable (unwrapping ``functools.partial``)."""
    while hasattr(func, "func") and callable(func.func) and func is not func.func:
        func = func.func
    name = getattr(func, "__name__", None)
    if name is None:
        name = type(func).__name__
    return name


_NEEDS_FILL = frozenset((Call, Lit, list, tuple, dict))


def is_plain_arg(a: Any) -> bool:
    """True for an argument that needs no filling beyond a top-level :class:`Dep`."""
    return type(a) not in _NEEDS_FILL


class TaskMeta(NamedTuple):
    """Metadata of one task, as stored in the graph's columns (``None`` where unset)."""

    name: str | None
    kind: str | None
    coords: tuple | None
    nbytes: int | None
    cost: float | None
    line: str | None
    retries: int | None
    priority: int | None
    worker: int | None = None
    serial: int | None = None
    working: int | None = None  # bytes the task holds while it runs, when more than modelled
    repeatable: bool | str | None = None  # its step gives the same result again (str: why not)


_COLUMNS = frozenset(("keys", "index", "funcs", "args", "kwargs", "modes", "dep_ptr",
                      "dep_idx", "meta"))


_SMALL_GRAPH = 256  # tasks: graphs up to this size are culled by a walk in Python


def _reached(ptr: np.ndarray, idx: np.ndarray, targets: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask of the tasks reached from ``targets`` (indices, included) along the
    edges of the CSR arrays ``(ptr, idx)`` (dependencies: what they need; dependents: what
    needs them)."""
    mask = np.zeros(n, dtype=bool)
    if len(targets) == 0:
        return mask
    if n <= _SMALL_GRAPH:  # a walk in Python beats building a sparse matrix
        ptr_l, idx_l = ptr.tolist(), idx.tolist()
        seen = bytearray(n)
        stack = [int(t) for t in targets]
        while stack:
            i = stack.pop()
            if not seen[i]:
                seen[i] = 1
                stack.extend(idx_l[ptr_l[i] : ptr_l[i + 1]])
        return np.frombuffer(bytes(seen), dtype=bool).copy()
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    # A virtual root n reaches every target, then BFS along the edges in C.
    full = np.concatenate([ptr, [ptr[-1] + len(targets)]])
    both = np.concatenate([idx, np.asarray(targets, dtype=np.int64)])
    adj = csr_matrix((np.ones(len(both), dtype=np.int8), both, full), shape=(n + 1, n + 1))
    reached = breadth_first_order(adj, n, directed=True, return_predecessors=False)
    mask[reached[reached < n]] = True
    return mask


class TaskGraph:
    """An immutable graph of tasks over blocks. Build one with :class:`GraphBuilder` or
    ``TaskGraph.from_dask(dsk)`` (and back: ``graph.to_dask()``), which are
    :func:`tilegraph.graph.dask_spec.from_dask` and ``to_dask``, bound onto this class by
    that module (this one imports nothing from it); see the module docstring for the
    layout."""

    __slots__ = (
        "_dependents", "_remake", "_repeatable", "args", "dep_idx", "dep_ptr", "funcs", "index",
        "keys", "kwargs", "meta", "modes",
    )

    def __init__(
        self,
        *,
        keys: list[Hashable],
        index: dict[Hashable, int],
        funcs: list[Callable | None],
        args: list[tuple],
        kwargs: dict[int, dict],
        modes: bytearray,
        dep_ptr: np.ndarray,
        dep_idx: np.ndarray,
        meta: dict[str, list[Any]],
    ):
        self.keys = keys
        self.index = index
        self.funcs = funcs
        self.args = args
        self.kwargs = kwargs
        self.modes = modes
        self.dep_ptr = dep_ptr
        self.dep_idx = dep_idx
        self.meta = meta
        self._dependents: tuple[np.ndarray, np.ndarray] | None = None
        self._remake: RemakePlan | None = None
        self._repeatable: bytes | None = None

    def replace(self, **columns: Any) -> TaskGraph:
        """The same graph with some of its columns (the constructor's arguments) replaced;
        the others are shared, not copied. The caller keeps them consistent (e.g. ``args``
        of the same length as ``keys``)."""
        unknown = sorted(columns.keys() - _COLUMNS)
        if unknown:
            raise TypeError(f"TaskGraph.replace(): unknown column(s) {unknown}; "
                            f"columns: {', '.join(sorted(_COLUMNS))}")
        cols = {name: getattr(self, name) for name in _COLUMNS}
        cols.update(columns)
        return TaskGraph(**cols)

    def with_meta(self, **columns: list[Any]) -> TaskGraph:
        """The same graph with the metadata ``columns`` added or replaced (one value per
        task; each a column of :data:`META_SCHEMA`); everything else is shared, not copied."""
        meta = dict(self.meta)
        for name, col in columns.items():
            if name not in META_DECLARED:
                raise TypeError(f"with_meta(): unknown metadata column {name!r}; declared: "
                                f"{', '.join(c.name for c in META_SCHEMA)}")
            if len(col) != len(self.keys):
                raise GraphError(f"metadata column {name!r} has {len(col)} values for "
                                 f"{len(self.keys)} tasks")
            meta[name] = list(col)
        g = self.replace(meta=meta)
        g._dependents = self._dependents
        return g

    # -- queries --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.index

    def __iter__(self):
        return iter(self.keys)

    def __repr__(self) -> str:
        return f"<TaskGraph: {len(self)} tasks, {self.nedges} edges>"

    @property
    def nedges(self) -> int:
        return int(self.dep_idx.shape[0])

    def _idx(self, key: Hashable) -> int:
        try:
            return self.index[key]
        except (KeyError, TypeError):
            raise KeyError(f"key {key!r} is not in the task graph") from None

    def dependencies(self, key: Hashable) -> list[Hashable]:
        """Keys the task ``key`` consumes, in argument order."""
        i = self._idx(key)
        keys = self.keys
        return [keys[j] for j in self.dep_idx[self.dep_ptr[i] : self.dep_ptr[i + 1]].tolist()]

    def dependents(self, key: Hashable) -> list[Hashable]:
        """Keys of the tasks that consume ``key``."""
        i = self._idx(key)
        ptr, idx = self.dependents_csr()
        keys = self.keys
        return [keys[j] for j in idx[ptr[i] : ptr[i + 1]].tolist()]

    def dependents_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR arrays ``(ptr, idx)`` of the reverse edges: consumers of task i are
        ``idx[ptr[i]:ptr[i+1]]``, in increasing index order."""
        if self._dependents is None:
            n = len(self.keys)
            src = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.dep_ptr))
            order = np.argsort(self.dep_idx, kind="stable")
            ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(self.dep_idx, minlength=n), out=ptr[1:])
            self._dependents = (ptr, src[order])
        return self._dependents

    def remakeable(self) -> bytearray:
        """1 for each task whose result a memory manager may drop under pressure and make
        again by running its chain once more: a cheap step (the registry's ``remake``; for a
        fused task its ``remake`` column), repeatable (:meth:`repeatable`), every input a
        literal or remakeable itself (a chain of views, casts, rechunk pieces and
        elementwise steps back to its sources), and cheaper to make again than to spill
        (:mod:`tilegraph.graph.remake`). Computed once per graph (the order, the executor
        and ``explain`` ask); each caller gets a copy."""
        return bytearray(self.remake_verdicts().remake)

    def remake_refused(self) -> bytearray:
        """1 for each task that would be remade (:meth:`remakeable`) were it repeatable:
        cheap to make again, but a step of its chain may not give the same block again
        (:meth:`unrepeatable_reason` says which and why); under pressure its result is
        spilled (or kept) instead."""
        return bytearray(self.remake_verdicts().refused)

    def remake_verdicts(self) -> RemakePlan:
        """The remake rule's verdict on every task (:class:`~tilegraph.graph.remake.RemakePlan`,
        computed once per graph): :meth:`remakeable`, :meth:`remake_refused`, and the
        seconds of making each again."""
        if self._remake is None:
            modes = self.modes
            data = bytes(1 if m == MODE_DATA else 0 for m in modes)
            self._remake = remake_plan(self, data)
        return self._remake

    def repeatable(self) -> bytearray:
        """1 for each task whose result comes back the same when it is made again: its own
        step is repeatable (a literal; else its ``repeatable`` column, else its op kind's
        row: :attr:`~tilegraph.graph.kinds.OpKind.repeatable`) and so is every task on its
        chain back to its sources. A remake may run such a chain again (views, casts,
        elementwise steps over a checked file or a seeded generator); a chain with one step
        that is not repeatable (an object read by ``from_array`` without
        ``repeatable=True``, a user's function, an in-place update) never is. Computed once
        per graph; each caller gets a copy."""
        if self._repeatable is None:
            n = len(self.keys)
            kinds = self.meta.get("kind") or [None] * n
            column = self.meta.get("repeatable") or [None] * n
            rows = {k: kind_info(k).repeatable for k in set(kinds)}
            modes = self.modes
            bad = [i for i in range(n) if modes[i] != MODE_DATA and not (
                rows[kinds[i]] if column[i] is None else column[i] is True)]
            if not bad:
                self._repeatable = b"\x01" * n
            else:
                ptr, idx = self.dependents_csr()
                spoilt = _reached(ptr, idx, np.array(bad, dtype=np.int64), n)
                self._repeatable = (~spoilt).astype(np.uint8).tobytes()
        return bytearray(self._repeatable)

    def unrepeatable_reason(self, i: int) -> str:
        """Why the result of task ``i`` may not come back the same when it is made again
        (``""`` when it does, see :meth:`repeatable`): the reason of the step nearest its
        sources on its chain that is not repeatable (a source, usually), named by its op."""
        rep = self._repeatable if self._repeatable is not None else self.repeatable()
        if rep[i]:
            return ""
        ptr, idx = self.dep_ptr, self.dep_idx
        while True:
            d = next((d for d in idx[ptr[i]:ptr[i + 1]].tolist() if not rep[d]), None)
            if d is None:
                return self._own_reason(i)
            i = d

    def _own_reason(self, i: int) -> str:
        """Why task ``i``'s own step is not repeatable (``""``: it is)."""
        if self.modes[i] == MODE_DATA:
            return ""
        column = self.meta.get("repeatable")
        value = None if column is None else column[i]
        if value is True:
            return ""
        if isinstance(value, str) and value:
            return value
        kinds = self.meta.get("kind")
        kind = None if kinds is None else kinds[i]
        why = ("declared not repeatable" if value is not None
               else unrepeatable_reason(kind))
        return f"{self.opname(i)} ({kind or 'other'}): {why}" if why else ""

    def in_degree(self) -> np.ndarray:
        """Number of dependencies of each task."""
        return np.diff(self.dep_ptr)

    def out_degree(self) -> np.ndarray:
        """Number of consumers of each task."""
        return np.diff(self.dependents_csr()[0])

    def task_meta(self, key: Hashable) -> TaskMeta:
        """The metadata of one task."""
        i = self._idx(key)
        return TaskMeta(*(self.meta[c][i] if c in self.meta else None for c in META_COLUMNS))

    def opname(self, i: int) -> str:
        """The op name of task index ``i``: its ``name`` metadata, else its callable's name."""
        col = self.meta.get("name")
        if col is not None and col[i] is not None:
            return col[i]
        func = self.funcs[i]
        return "data" if func is None else funcname(func)

    def overwritten(self, i: int) -> tuple[int, ...]:
        """The dependency slots of task ``i`` whose values its call may write over in place:
        the ``overwrites`` column if set (fused tasks), else the argument its op kind writes
        over (:attr:`~tilegraph.graph.kinds.OpKind.overwrites`; none with ``copy=True``).
        An overwritten argument that is a nested call counts every dependency it reads (it
        may be a view of one of them)."""
        col = self.meta.get("overwrites")
        if col is not None and col[i] is not None:
            return tuple(col[i])
        kinds = self.meta.get("kind")
        pos = kind_info(kinds[i] if kinds is not None else None).overwrites
        if pos is None:
            return ()
        kwargs = self.kwargs.get(i)
        if kwargs and kwargs.get("copy") is True:
            return ()
        mode = self.modes[i]
        if mode == MODE_DATA:
            return ()
        if mode == MODE_DIRECT:
            return (pos,) if pos < self.dep_ptr[i + 1] - self.dep_ptr[i] else ()
        args = self.args[i]
        return tuple(sorted(dep_slots(args[pos]))) if pos < len(args) else ()

    def indices(self, keys: Iterable[Hashable]) -> np.ndarray:
        """Task indices of ``keys``; a missing key raises ``KeyError`` naming it."""
        return np.fromiter((self._idx(k) for k in keys), dtype=np.int64)

    # -- transformations ------------------------------------------------------------------------

    def ancestors_mask(self, targets: np.ndarray) -> np.ndarray:
        """Boolean mask of the tasks the ``targets`` (indices) need, targets included."""
        return _reached(self.dep_ptr, self.dep_idx, targets, len(self.keys))

    def cull(self, keys: Iterable[Hashable]) -> TaskGraph:
        """The subgraph of the tasks needed to compute ``keys`` (same keys, reindexed)."""
        targets = self.indices(keys)
        mask = self.ancestors_mask(targets)
        if mask.all():
            return self
        return self.subgraph(np.flatnonzero(mask))

    def subgraph(self, keep: np.ndarray, detach: np.ndarray | None = None) -> TaskGraph:
        """The tasks ``keep`` (sorted indices, closed under dependencies), reindexed.

        ``detach`` (a boolean mask over this graph's tasks) marks kept tasks whose
        dependencies are dropped: they stay as tasks without inputs, whose results come from
        elsewhere (the graph need not be closed under their dependencies)."""
        n = len(self.keys)
        keep = np.asarray(keep, dtype=np.int64)
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[keep] = np.arange(len(keep), dtype=np.int64)
        counts = np.diff(self.dep_ptr)[keep]
        if detach is not None:
            counts = np.where(np.asarray(detach, dtype=bool)[keep], 0, counts)
        dep_ptr = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(counts, out=dep_ptr[1:])
        # gather the dependency slices of the kept tasks
        starts = self.dep_ptr[keep]
        pos = concat_ranges(starts, counts)
        dep_idx = new_of_old[self.dep_idx[pos]]
        if (dep_idx < 0).any():
            raise GraphError("subgraph is not closed under dependencies")
        kl = keep.tolist()
        keys = [self.keys[i] for i in kl]
        index = dict(zip(keys, range(len(keys)), strict=True))
        funcs = [self.funcs[i] for i in kl]
        args = [self.args[i] for i in kl]
        modes = bytearray(self.modes[i] for i in kl)
        new_list = new_of_old.tolist()
        kwargs = {new_list[i]: kw for i, kw in self.kwargs.items() if new_list[i] >= 0}
        meta = {name: [col[i] for i in kl] for name, col in self.meta.items()}
        return TaskGraph(keys=keys, index=index, funcs=funcs, args=args, kwargs=kwargs,
                         modes=modes, dep_ptr=dep_ptr, dep_idx=dep_idx, meta=meta)

    def topological_order(self) -> np.ndarray:
        """Task indices with every task after its dependencies (Kahn's algorithm).

        Raises :class:`CycleError` naming the keys on a cycle if there is one.
        """
        n = len(self.keys)
        ptr, idx = self.dependents_csr()
        ptr_l, idx_l = ptr.tolist(), idx.tolist()
        waiting = self.in_degree().tolist()
        order = [i for i in range(n) if waiting[i] == 0]
        pos = 0
        while pos < len(order):
            i = order[pos]
            pos += 1
            for c in idx_l[ptr_l[i] : ptr_l[i + 1]]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    order.append(c)
        if len(order) < n:
            raise CycleError(self.find_cycle([i for i in range(n) if waiting[i] > 0]))
        return np.array(order, dtype=np.int64)

    def find_cycle(self, candidates: Sequence[int] | None = None) -> list[Hashable]:
        """Keys on one cycle (following dependencies), searched from ``candidates``."""
        ptr, idx = self.dep_ptr.tolist(), self.dep_idx.tolist()
        color = {}  # absent: unseen, 1: on the current path, 2: finished
        starts = range(len(self.keys)) if candidates is None else candidates
        for s in starts:
            if s in color:
                continue
            path = [s]
            iters = [iter(idx[ptr[s] : ptr[s + 1]])]
            color[s] = 1
            while path:
                for d in iters[-1]:
                    c = color.get(d)
                    if c == 1:
                        return [self.keys[j] for j in path[path.index(d) :]]
                    if c is None:
                        color[d] = 1
                        path.append(d)
                        iters.append(iter(idx[ptr[d] : ptr[d + 1]]))
                        break
                else:
                    color[path.pop()] = 2
                    iters.pop()
        return []
