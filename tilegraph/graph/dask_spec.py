"""dask-style dict graphs in and out of :class:`~tilegraph.graph.TaskGraph`.

A dask-style graph maps keys to values. A value is read as dask (2024.12 and later) reads it:

- a tuple whose first element is callable is a task ``(func, *args)``;
- an ``int``, ``float``, ``str`` or ``tuple`` equal to a key of the graph is a reference to
  that key's value (an alias at top level), and so is dask's ``TaskRef``;
- lists, tuples, sets and namedtuples are walked, so keys and task tuples inside them are
  replaced by values; dicts are literal;
- dask's own task objects (``dask._task_spec.Task``, ``Alias``, ``DataNode``, ...) are run
  by calling them with the values of their dependencies;
- anything else is a literal.

Objects with ``__dask_graph__`` (dask collections and expressions) are accepted too.
"""

from __future__ import annotations

import gc
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.taskgraph import MODE_DATA, MODE_DIRECT, Call, Dep, Lit, TaskGraph, funcname

_KEY_TYPES = (int, float, str, tuple)


def identity(x: Any) -> Any:
    """Return ``x`` (aliases and containers built from references)."""
    return x


def apply(func: Any, args: list, kwargs: dict | None = None) -> Any:
    """``func(*args, **kwargs)``: how calls with keyword arguments are written in dask dicts."""
    return func(*args, **kwargs) if kwargs else func(*args)


def _constant(value: Any) -> Any:
    return value


def _make_namedtuple(typ: type, values: list) -> Any:
    return typ(*values)


class DaskNodeCall:
    """Runs one of dask's task objects given the values of its dependencies, in order."""

    __slots__ = ("keys", "node")

    def __init__(self, node: Any, keys: tuple):
        self.node = node
        self.keys = keys

    def __call__(self, *values: Any) -> Any:
        return self.node(dict(zip(self.keys, values, strict=True)))

    def __repr__(self) -> str:
        return f"DaskNodeCall({self.node!r})"


_node_types: dict[type, bool] = {}


def _is_dask_node(value: Any) -> bool:
    """True for dask's task-spec objects (checked without importing dask)."""
    tp = type(value)
    known = _node_types.get(tp)
    if known is None:
        known = _node_types[tp] = _dask_class(value, "GraphNode") is not None
    return known


_ref_types: dict[type, bool] = {}


def _is_task_ref(value: Any) -> bool:
    """True for dask's ``TaskRef`` (a reference to another key's value)."""
    tp = type(value)
    known = _ref_types.get(tp)
    if known is None:
        known = _ref_types[tp] = _dask_class(value, "TaskRef") is not None
    return known


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class _Reader:
    """Turns one dask value into an argument template, collecting its dependencies."""

    __slots__ = ("deps", "keys", "slots")

    def __init__(self, keys: Mapping):
        self.keys = keys
        self.deps: list[Hashable] = []
        self.slots: dict[Hashable, int] = {}

    def reset(self) -> None:
        self.deps = []
        self.slots = {}

    def ref(self, key: Hashable) -> Dep:
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = len(self.deps)
            self.deps.append(key)
        return Dep(slot)

    def is_key(self, x: Any) -> bool:
        if isinstance(x, _KEY_TYPES):
            try:
                return x in self.keys
            except TypeError:  # unhashable tuple
                return False
        return False

    def read(self, x: Any) -> tuple[Any, bool]:
        """(template, dynamic): dynamic is False when ``x`` is a plain literal."""
        if type(x) is tuple and x and callable(x[0]):
            args = tuple(self.read(a)[0] for a in x[1:])
            return Call(x[0], args), True
        if self.is_key(x):
            return self.ref(x), True
        if _is_task_ref(x):
            return self.ref(x.key), True
        if isinstance(x, (list, tuple, set, frozenset)):
            parts = [self.read(a) for a in x]
            if not any(dyn for _, dyn in parts):
                return (Lit(x) if isinstance(x, (list, tuple, dict)) else x), False
            items = [t for t, _ in parts]
            if type(x) is list:
                return items, True
            if type(x) is tuple:
                return tuple(items), True
            if _is_namedtuple(x):
                return Call(_make_namedtuple, (Lit(type(x)), items)), True
            return Call(type(x), (items,)), True
        if isinstance(x, (list, tuple, dict)):
            return Lit(x), False
        return x, False


def from_dask(dsk: Any) -> TaskGraph:
    """Build a :class:`TaskGraph` from a dask-style dict graph.

    >>> from operator import add
    >>> g = from_dask({"x": 1, "y": (add, "x", 10), "z": (sum, ["x", "y"])})
    >>> sorted(g.dependencies("z"))
    ['x', 'y']
    """
    if not isinstance(dsk, Mapping):
        graph_of = getattr(dsk, "__dask_graph__", None)
        if graph_of is None:
            raise TypeError(
                f"a task graph must be a dict mapping keys to tasks, got {type(dsk).__name__}"
            )
        dsk = graph_of()
        if not isinstance(dsk, Mapping):
            raise TypeError(f"__dask_graph__() returned {type(dsk).__name__}, not a mapping")
    if not isinstance(dsk, dict):
        dsk = dict(dsk)
    with gc_paused():
        return _read_graph(dsk)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building big graphs: they make many small
    objects and no cycles, and collection passes triggered by them cost about a third of the
    build time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_graph(dsk: dict) -> TaskGraph:
    builder = GraphBuilder()
    read_into(builder, dsk)
    return builder.build()


def read_into(builder: GraphBuilder, dsk: Mapping) -> None:
    """Add the tasks of the dask-style graph ``dsk`` to ``builder``, except those whose keys
    it has already (a key names one computation in dask, so the same key is the same
    task: two dask collections sharing inputs are read into one plan)."""
    reader = _Reader(dsk)
    is_key = reader.is_key
    for key, value in dsk.items():
        if key in builder:
            continue
        if type(value) is tuple and value and callable(value[0]):
            args = value[1:]
            # fast path: every argument is a distinct key -> func(*values), no template
            if all(is_key(a) for a in args) and len(set(args)) == len(args):
                builder.add(key, value[0], deps=args)
                continue
            reader.reset()
            template = tuple(reader.read(a)[0] for a in args)
            builder.add(key, value[0], deps=reader.deps, args=template)
            continue
        if _is_dask_node(value):
            _add_dask_node(builder, key, value)
            continue
        if _is_task_ref(value):  # a bare reference: an alias, as dask reads it
            if value.key != key:
                builder.add(key, identity, deps=[value.key], name="alias")
            continue
        reader.reset()
        template, dynamic = reader.read(value)
        if not dynamic:
            builder.add_data(key, value)
        elif type(template) is Dep:
            builder.add(key, identity, deps=reader.deps, name="alias")
        else:
            builder.add(key, identity, deps=reader.deps, args=(template,),
                        name=type(value).__name__)


def _add_dask_node(builder: GraphBuilder, key: Hashable, node: Any) -> None:
    kind = type(node).__name__
    if kind == "DataNode":
        builder.add_data(key, node.value)
        return
    if kind == "Alias":
        if node.target == key:
            return  # dask drops self-aliases too
        builder.add(key, identity, deps=[node.target], name="alias")
        return
    name = _dask_node_name(node)
    if _is_plain_dask_task(node):
        reader = _Reader({})
        args = tuple(_node_arg(a, reader) for a in node.args)
        kwargs = {k: _node_arg(v, reader) for k, v in node.kwargs.items()}
        builder.add(key, node.func, deps=reader.deps, args=args, kwargs=kwargs, name=name)
        return
    deps = tuple(node.dependencies)
    builder.add(key, DaskNodeCall(node, deps), deps=deps, name=name)


def _dask_class(node: Any, name: str) -> type | None:
    for cls in type(node).__mro__:
        if cls.__name__ == name and cls.__module__.startswith("dask."):
            return cls
    return None


_plain_task_types: dict[type, bool] = {}


def _is_plain_dask_task(node: Any) -> bool:
    """A dask ``Task`` (or container subclass) whose call is ``Task.__call__``: it evaluates
    its top-level arguments (references and nested nodes) and calls ``func``, so it can be
    translated into a native template and run without dask's per-call checks."""
    tp = type(node)
    plain = _plain_task_types.get(tp)
    if plain is None:
        task_cls = _dask_class(node, "Task")
        plain = _plain_task_types[tp] = (
            task_cls is not None
            and tp.__call__ is task_cls.__call__
            and all(hasattr(node, a) for a in ("func", "args", "kwargs"))
        )
    return plain


def _node_arg(arg: Any, reader: _Reader) -> Any:
    """One top-level argument of a dask Task as a template, the way ``Task.__call__`` reads
    it: references and nested nodes are evaluated, anything else is passed as it is."""
    kind = type(arg).__name__
    if kind == "TaskRef" or (kind == "Alias" and _is_dask_node(arg)):
        return reader.ref(arg.key if kind == "TaskRef" else arg.target)
    if _is_dask_node(arg):
        if kind == "DataNode":
            return Lit(arg.value)
        if _is_plain_dask_task(arg):
            args = tuple(_node_arg(a, reader) for a in arg.args)
            kwargs = {k: _node_arg(v, reader) for k, v in arg.kwargs.items()}
            return Call(arg.func, args, kwargs or None)
        deps = tuple(arg.dependencies)
        return Call(DaskNodeCall(arg, deps), tuple(reader.ref(d) for d in deps))
    return Lit(arg) if type(arg) in (list, tuple, dict) else arg


def _dask_node_name(node: Any) -> str:
    """The op name of a dask task object; for a fused chain, the op of its last task."""
    func = getattr(node, "func", None)
    if func is None:
        return type(node).__name__
    name = funcname(func)
    if name == "_execute_subgraph":  # args: (inner graph, output key, input keys, ...)
        try:
            return _dask_node_name(node.args[0][node.args[1]])
        except (AttributeError, IndexError, KeyError, TypeError):
            pass
    return name


def _literal(value: Any, keys: Mapping) -> Any:
    """``value`` written so that dask reads it back as the same literal."""
    if isinstance(value, (list, tuple, set, frozenset)) or (
        isinstance(value, _KEY_TYPES) and _safe_in(value, keys)
    ):
        return (partial(_constant, value),)
    return value


def _safe_in(value: Any, keys: Mapping) -> bool:
    try:
        return value in keys
    except TypeError:
        return False


def _write(template: Any, deps: list, keys: Mapping) -> Any:
    tp = type(template)
    if tp is Dep:
        return deps[template.slot]
    if tp is Call:
        args = [_write(a, deps, keys) for a in template.args]
        if template.kwargs:
            kwargs = {k: _write(v, deps, keys) for k, v in template.kwargs.items()}
            return (apply, template.func, args, (dict, [[k, v] for k, v in kwargs.items()]))
        return (template.func, *args)
    if tp is list:
        return [_write(a, deps, keys) for a in template]
    if tp is tuple:
        return tuple(_write(a, deps, keys) for a in template)
    if tp is dict:
        return (dict, [[k, _write(v, deps, keys)] for k, v in template.items()])
    if tp is Lit:
        return _literal(template.value, keys)
    return _literal(template, keys)


def to_dask(graph: TaskGraph) -> dict:
    """The graph as a dask-style dict; dask's schedulers compute the same values from it.

    >>> from operator import add
    >>> g = from_dask({"x": 1, "y": (add, "x", 10)})
    >>> d = to_dask(g)
    >>> d["x"], d["y"][0] is add, d["y"][1:]
    (1, True, ('x', 10))
    """
    out: dict = {}
    keys = graph.index
    ptr = graph.dep_ptr.tolist()
    idx = graph.dep_idx.tolist()
    for i, key in enumerate(graph.keys):
        mode = graph.modes[i]
        if mode == MODE_DATA:
            out[key] = _literal(graph.args[i][0], keys)
            continue
        deps = [graph.keys[j] for j in idx[ptr[i] : ptr[i + 1]]]
        func = graph.funcs[i]
        if mode == MODE_DIRECT:
            args = deps
        else:
            args = [_write(a, deps, keys) for a in graph.args[i]]
        kwargs = graph.kwargs.get(i)
        if kwargs:
            written = {k: _write(v, deps, keys) for k, v in kwargs.items()}
            out[key] = (apply, func, list(args), (dict, [[k, v] for k, v in written.items()]))
        else:
            out[key] = (func, *args)
    return out


# TaskGraph.from_dask(dsk) and graph.to_dask() are these two functions, bound onto the class
# here: the graph module imports nothing from this one (which imports it).
TaskGraph.from_dask = staticmethod(from_dask)  # type: ignore[attr-defined]
TaskGraph.to_dask = to_dask  # type: ignore[attr-defined]
