"""Task sources: what a serverless worker needs to run a task of a run and to find the
task's children, without the driver.

A run's source is stored once in the object store (its key is in the run's record) and read
by a worker the first time it takes one of the run's tasks:

- :class:`GraphTasks`, for any planned TaskGraph: the part of the plan the pool runs, with
  its children, parent counts and priorities as arrays. Task ids are indices.
- :class:`ImplicitTasks`, for an implicit graph (:mod:`tilegraph.graph.implicit`, e.g. a
  LambdaPACK DAG): the graph alone, of a size that does not depend on its number of nodes.
  Task ids are the graph's node ids; children and parent counts are asked of the graph
  when a task finishes, so it is never expanded.

Both answer the same questions: ``inputs(task)`` (object keys, or literal values),
``overwritten(task)`` (the positions among them of the blocks the task may write over),
``call(task, values)``, ``output(task)`` (the object key of its result), ``children(task)``
as ``(child, parents of child, priority)`` and ``wanted(task)`` (the driver reads it). Their
``specs`` map the object keys of the blocks the driver stores (input blocks, large
literals) to the ``(shape, dtype)`` the plan gives them, filled by the driver before the
source is stored: a worker refuses such an object read back with another shape or dtype.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from tilegraph.graph.implicit import INPUT, NODE, VALUE, ImplicitGraph
from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import MODE_DATA, Lit, TaskGraph, call_of, prepare_call


class Literal:
    """An input given by value in the task source (not read from the store)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class Ref:
    """A large literal argument of a task, stored once as its own object and read (memory
    mapped where the store allows) by each worker once per run."""

    __slots__ = ("key",)

    def __init__(self, key: str):
        self.key = key


HOIST_BYTES = 1 << 20  # literal arrays at least this large are stored apart from the plan


def _hoist(args: tuple, found: dict[int, tuple[str, Any]], prefix: str) -> tuple:
    out = []
    changed = False
    for a in args:
        inner = a.value if type(a) is Lit else a
        if type(inner) is np.ndarray and inner.nbytes >= HOIST_BYTES and inner.dtype != object:
            key, _ = found.setdefault(id(inner), (f"{prefix}/lit/{len(found)}", inner))
            out.append(Ref(key))
            changed = True
        else:
            out.append(a)
    return tuple(out) if changed else args


class GraphTasks:
    """The tasks ``run`` of a planned graph that the pool computes.

    ``graph`` holds them and their inputs; an input made elsewhere (by the driver: an input
    block, a literal, a result of a task run in the driver's process) is detached, and its
    value is stored under its index before the run starts or when it is made. ``priority``
    ranks the plan's tasks (lower first); ``wanted`` are the tasks whose results the driver
    reads."""

    kind = "graph"

    def __init__(self, graph: TaskGraph, run: np.ndarray, priority: np.ndarray,
                 wanted: Sequence[int], prefix: str):
        n = len(graph)
        self.prefix = prefix
        self.keys = graph.keys
        self.names = [graph.opname(i) for i in range(n)]
        is_run = np.zeros(n, dtype=bool)
        is_run[np.asarray(run, dtype=np.int64)] = True
        self.is_run = is_run
        # unique (task, parent) edges
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
        pairs = np.unique(src * n + graph.dep_idx) if n else np.zeros(0, np.int64)
        child, parent = pairs // max(n, 1), pairs % max(n, 1)
        self.nparents = np.bincount(child, minlength=n).astype(np.int64)
        order = np.argsort(parent, kind="stable")
        self.child_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(parent, minlength=n), out=self.child_ptr[1:])
        self.child_idx = child[order]
        self.priority = np.asarray(priority, dtype=np.int64)
        self.wanted = np.zeros(n, dtype=bool)
        self.wanted[np.asarray(list(wanted), dtype=np.int64)] = True
        # the pool's part: functions and arguments of its tasks only
        funcs = [graph.funcs[i] if is_run[i] else None for i in range(n)]
        found: dict[int, tuple[str, Any]] = {}
        args = [_hoist(graph.args[i], found, prefix) if is_run[i] else () for i in range(n)]
        self.hoisted = frozenset(i for i in range(n) if is_run[i] and args[i] is not graph.args[i])
        # the large literals, stored by the driver before the run and not pickled with it
        self.literals: dict[str, Any] = {key: value for key, value in found.values()}
        kwargs = {i: kw for i, kw in graph.kwargs.items() if is_run[i]}
        # the input slots each task may write over in place (read from the plan's kinds,
        # which the pool's copy of the graph does not keep): a worker hands such a task
        # its own copy of a block it holds in memory
        self.overwrites: dict[int, tuple[int, ...]] = {}
        kinds, col = graph.meta.get("kind"), graph.meta.get("overwrites")
        if kinds is not None or col is not None:
            may = {k: kind_info(k).overwrites is not None for k in set(kinds or ())}
            for i in np.flatnonzero(is_run).tolist():
                if (col is not None and col[i] is not None) or (
                        kinds is not None and may[kinds[i]]):
                    slots = graph.overwritten(i)
                    if slots:
                        self.overwrites[i] = slots
        modes = bytearray(m if is_run[i] else MODE_DATA for i, m in enumerate(graph.modes))
        self.graph = graph.replace(funcs=funcs, args=args, kwargs=kwargs, modes=modes,
                                   meta={})
        self.specs: dict[str, tuple] = {}  # see the module docstring

    def __len__(self) -> int:
        return int(self.is_run.sum())

    def starters(self) -> list[str]:
        """Tasks of the pool with no parents."""
        return [str(i) for i in np.flatnonzero(self.is_run & (self.nparents == 0)).tolist()]

    def score(self, task: str) -> int:
        return int(self.priority[int(task)])

    def name(self, task: str) -> str:
        i = int(task)
        return f"task {self.keys[i]!r} (op {self.names[i]!r})"

    def key(self, task: str) -> Hashable:
        return self.keys[int(task)]

    def opname(self, task: str) -> str:
        return self.names[int(task)]

    def output(self, task: str) -> str:
        return f"{self.prefix}/b/{task}"

    def inputs(self, task: str) -> list[Any]:
        g = self.graph
        i = int(task)
        return [f"{self.prefix}/b/{d}" for d in g.dep_idx[g.dep_ptr[i]:g.dep_ptr[i + 1]].tolist()]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["literals"] = {}
        return state

    def refs(self, task: str) -> list[str]:
        """Keys of the stored literals task ``task`` reads."""
        i = int(task)
        if i not in self.hoisted:
            return []
        return [a.key for a in self.graph.args[i] if type(a) is Ref]

    def call(self, task: str, values: list[Any], literals: dict[str, Any] | None = None
             ) -> Any:
        i = int(task)
        g = self.graph
        if literals:
            args = tuple(literals[a.key] if type(a) is Ref else a for a in g.args[i])
            func, args, kwargs = prepare_call(g.funcs[i], g.modes[i], args, g.kwargs.get(i),
                                              values)
        else:
            func, args, kwargs = call_of(g, i, values)
        return func(*args, **kwargs)

    def overwritten(self, task: str) -> tuple[int, ...]:
        """Positions in :meth:`inputs` of the blocks the task may write over in place."""
        return self.overwrites.get(int(task), ())

    def children(self, task: str) -> list[tuple[str, int, int]]:
        i = int(task)
        kids = self.child_idx[self.child_ptr[i]:self.child_ptr[i + 1]]
        kids = kids[self.is_run[kids]]
        return [(str(c), int(self.nparents[c]), int(self.priority[c])) for c in kids.tolist()]

    def is_wanted(self, task: str) -> bool:
        return bool(self.wanted[int(task)])

    def frees(self, task: str) -> list[tuple[str, int]]:
        """The inputs of ``task`` whose objects go once all their consumers finished:
        ``(input, number of consumers)``; the results the driver reads are kept."""
        g = self.graph
        i = int(task)
        out = []
        for d in np.unique(g.dep_idx[g.dep_ptr[i]:g.dep_ptr[i + 1]]).tolist():
            if not self.wanted[d]:
                out.append((str(d), int(self.child_ptr[d + 1] - self.child_ptr[d])))
        return out

    def object_of(self, name: str) -> str:
        return self.output(name)


class ImplicitTasks:
    """The nodes of an implicit graph (:class:`~tilegraph.graph.implicit.ImplicitGraph`; see
    the module docstring). External inputs (an input tile of a LambdaPACK program) are
    stored by the driver under ``in/<name>``; a node's result under ``n/<node>``.
    ``wanted``: the nodes whose results the driver reads."""

    kind = "implicit"

    def __init__(self, graph: ImplicitGraph, wanted: Sequence[str], prefix: str):
        self.graph = graph
        self.prefix = prefix
        self.wanted = frozenset(wanted)
        self.specs: dict[str, tuple] = {}  # see the module docstring

    def starters(self) -> list[str]:
        return list(self.graph.starters())

    def score(self, task: str) -> int:
        return int(self.graph.priority(task))

    def name(self, task: str) -> str:
        return self.graph.describe(task)

    def key(self, task: str) -> Hashable:
        return self.graph.key(task)

    def opname(self, task: str) -> str:
        return self.graph.opname(task)

    def output(self, task: str) -> str:
        return f"{self.prefix}/n/{task}"

    def inputs(self, task: str) -> list[Any]:
        out: list[Any] = []
        for what, value in self.graph.inputs(task):
            if what == VALUE:
                out.append(Literal(value))
            elif what == NODE:
                out.append(self.output(value))
            elif what == INPUT:
                out.append(f"{self.prefix}/in/{value}")
            else:
                raise _bad_input(self.graph, task, what)
        return out

    def refs(self, task: str) -> list[str]:
        return []

    def call(self, task: str, values: list[Any], literals: dict[str, Any] | None = None
             ) -> Any:
        return self.graph.call(task, values)

    def overwritten(self, task: str) -> tuple[int, ...]:
        """Positions in :meth:`inputs` of the blocks the node's call writes over in place
        (it is given its own copies of them)."""
        return tuple(self.graph.overwritten(task))

    def children(self, task: str) -> list[tuple[str, int, int]]:
        graph = self.graph
        return [(c, len(graph.parents(c)), self.score(c)) for c in graph.children(task)]

    def is_wanted(self, task: str) -> bool:
        return task in self.wanted

    def frees(self, task: str) -> list[tuple[str, int]]:
        """As :meth:`GraphTasks.frees`: a parent node (``n/<node>``) with its number of
        children, an external input (``in/<name>``) with its number of readers."""
        graph = self.graph
        out: list[tuple[str, int]] = []
        seen = set()
        for what, value in graph.inputs(task):
            if what == VALUE:
                continue
            if what == NODE:
                if value in self.wanted:
                    continue
                name = f"n/{value}"
                if name not in seen:
                    out.append((name, len(graph.children(value))))
            elif what == INPUT:
                name = f"in/{value}"
                if name not in seen:
                    out.append((name, len(graph.readers(value))))
            else:
                raise _bad_input(graph, task, what)
            seen.add(name)
        return out

    def object_of(self, name: str) -> str:
        return f"{self.prefix}/{name}"


def _bad_input(graph: ImplicitGraph, task: str, what: Any) -> TypeError:
    return TypeError(f"{type(graph).__name__}.inputs({task!r}) gave an input of kind {what!r}: "
                     f"an implicit graph's inputs are ({VALUE!r}, value), ({NODE!r}, node) or "
                     f"({INPUT!r}, name)")
