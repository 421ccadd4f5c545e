"""Digests of everything the tasks of a plan read: the ranks of an MPI run compare them.

Every rank of an MPI run builds its own TaskGraph from the same script, so a value that
differs per rank (a rank-dependent constant, data read or drawn on each rank) would mix
the ranks' results silently: each rank would run its own tasks with its own values. Before
running, the ranks compare one digest of each task (:class:`PlanValues`, used by
:meth:`tilegraph.runtime.mpi.RankCollective.check_same_plan`); when they differ, the first
task that differs is described part by part (:meth:`PlanValues.parts`), so the error names
what differs: "the closure variable OFF of <lambda> at job.py:3".

What the digest of a task covers:

- its literal arguments: arrays by content (each array object read once per check),
  numbers, strings, slices and ranges by value, containers walked (dicts and sets whatever
  their order: a set of strings iterates in another order on each rank under hash
  randomisation);
- its functions (the task's own, every nested call's, and callables among its
  arguments), as cloudpickle would capture them:

  - a function of the user's code: one defined in ``__main__`` (the script), a lambda, a
    nested function, or a function of a module outside the Python installation and
    tilegraph (a module of the user's own, imported by each rank): its code, the contents
    of its closure cells, its defaults and keyword defaults, and the module globals it
    reads (the names of ``co_names`` of its code and of its nested code objects, where
    cloudpickle looks for them, that the bytecode loads as globals: ``b.rank`` does not
    read a global ``rank``), each walked in turn;
  - a function of a library (tilegraph, NumPy, the standard library, anything in
    site-packages): by its module and name; when it is a closure (the wrapper an op makes
    around the user's function), also its closure cells and defaults, which hold the
    user's functions and values. A library's own module globals are not read;
  - ``functools.partial``: its function, arguments and keywords; a bound method: its
    function and the object it is bound to; a builtin method (``rng.random``): its name
    and its object;
  - a class of the user's code by value (its attributes and methods), any other class by
    name; any other object by what pickling it sends (``__reduce_ex__``: the attributes
    of an instance of a user's class, the state of a NumPy generator); an object that
    cannot be pickled (a lock, an open file) by its type only: it cannot differ in a way
    that pickling would carry. An object of tilegraph's own classes goes without its
    private attributes (``_name``: a writer's temporary file, locks, each process's own),
    or by what its class's ``_digest_state()`` returns (a tilegraph Array read by a
    function: its shape, blocks and dtype);

- left out: the seeds tilegraph draws for unseeded random arrays
  (:class:`~tilegraph.array.random.FreshSeed`): each rank draws its own, and each block is
  drawn once, on the rank it is placed on.

Each function, object, code object and array is digested once per check (kept by its
identity for the check's duration), whatever the number of tasks that share it: a plan of
100,000 tasks calling one lambda digests the lambda once.

Limits: a module global read by a library function is not covered (a script that sets
``numpy``'s or tilegraph's module state per rank); a value reached only through an object's
``__reduce_ex__`` that makes no state (a C extension object that pickles by name) is
covered by that name; a cycle (a function that reads itself, a list that holds itself) is
cut where it closes; a task whose values nest deeper than Python's recursion limit is not
compared.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tilegraph.graph.taskgraph import Call, Dep, Lit, TaskGraph

_SCALARS = (int, float, complex, bool, str, type(None), type(Ellipsis),
            type(NotImplemented))
# types whose values each rank draws for itself by design (module, qualified name)
_RANK_LOCAL = frozenset({("tilegraph.array.random", "FreshSeed")})
# entries of a class's namespace that say nothing about its behaviour
_CLASS_SKIP = frozenset({"__dict__", "__weakref__", "__module__", "__doc__", "__qualname__",
                         "__firstlineno__", "__static_attributes__", "__slotnames__"})
_MAIN = ("__main__", "__mp_main__")


def _hasher() -> Any:
    return hashlib.sha1(usedforsecurity=False)


@functools.cache
def _library_roots() -> tuple[str, ...]:
    """Directories whose modules are libraries: the Python installation (standard library,
    site-packages) and tilegraph's own package."""
    paths = sysconfig.get_paths()
    roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # pragma: no cover - a virtualenv without the site helpers
        pass
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots if r)


_library_modules: dict[str, bool] = {}


def is_library(module: str | None) -> bool:
    """Whether functions of ``module`` are a library's (compared by name) rather than the
    user's code (compared by value): modules of the Python installation and of tilegraph,
    builtin modules; not ``__main__``, nor a module of the user's own."""
    if module is None or module in _MAIN:
        return False
    known = _library_modules.get(module)
    if known is not None:
        return known
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None) if mod is not None else None
    if mod is None:  # e.g. a function cloudpickle rebuilt from another rank's module
        result = module == "tilegraph" or module.startswith("tilegraph.")
    elif path is None:
        result = True  # builtin, frozen
    else:
        real = os.path.realpath(path)
        result = any(real.startswith(root) for root in _library_roots())
    _library_modules[module] = result
    return result


def _importable(obj: Any) -> bool:
    """Whether ``obj`` is found again by its module and qualified name (so pickling sends
    its name only)."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if module is None or module in _MAIN or not isinstance(qualname, str):
        return False
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
        if found is None:
            return False
    return found is obj


def function_name(fn: Any) -> str:
    """How an error names a function: ``qualname at file.py:line`` for the user's code,
    ``module.qualname`` for a library's."""
    if isinstance(fn, functools.partial):
        return f"functools.partial({function_name(fn.func)})"
    code = getattr(fn, "__code__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) \
        or type(fn).__name__
    module = getattr(fn, "__module__", None)
    if code is not None and not is_library(module):
        return f"{qualname} at {os.path.basename(code.co_filename)}:{code.co_firstlineno}"
    return f"{module}.{qualname}" if module else str(qualname)


def _type_name(tp: type) -> str:
    return f"{tp.__module__}.{tp.__qualname__}"


_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"})


@functools.cache
def _code_names(code: types.CodeType) -> tuple[str, ...]:
    """The global names a code object and its nested code objects read: the names among
    ``co_names`` (where cloudpickle looks for a function's globals) that the bytecode
    loads as globals, so that an attribute (``b.rank``) is not taken for the global of
    the same name."""
    try:
        names = dict.fromkeys(ins.argval for ins in dis.get_instructions(code)
                              if ins.opname in _GLOBAL_OPS and isinstance(ins.argval, str))
    except Exception:  # pragma: no cover - bytecode dis cannot read: every name
        names = dict.fromkeys(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(dict.fromkeys(_code_names(const)))
    return tuple(names)


class PlanValues:
    """The digests of one check: :meth:`digest` (one per task), :meth:`total` (one for
    the plan) and :meth:`parts` (the labelled parts of one task, to name what differs).
    Functions, objects and arrays are digested once per instance; make one per check.

    >>> from tilegraph.graph.builder import GraphBuilder
    >>> def plan(k):
    ...     b = GraphBuilder()
    ...     b.add("y", lambda: k)
    ...     return b.build()
    >>> PlanValues().total(plan(1.0)) == PlanValues().total(plan(1.0))
    True
    >>> PlanValues().total(plan(1.0)) == PlanValues().total(plan(2.0))
    False
    >>> ranks, paths = differing_parts([PlanValues().parts(plan(1.0), 0),
    ...                                 PlanValues().parts(plan(2.0), 0)])
    >>> describe_part(paths[0])
    'the closure variable k of tilegraph.runtime.digest.plan.<locals>.<lambda>'
    """

    def __init__(self) -> None:
        self.known: dict[int, tuple[Any, bytes]] = {}  # id -> (object kept alive, digest)
        self._active: set[int] = set()  # objects being walked (a cycle is cut there)
        self._parts: list[tuple[tuple[str, ...], bytes]] | None = None
        self._path: list[str] = []

    # -- the plan --------------------------------------------------------------------------

    def digest(self, graph: TaskGraph, tasks: Iterable[int] | None = None) -> list[bytes]:
        """One digest of every task in ``tasks`` (default: all), in order: its function,
        its argument template and its keyword arguments."""
        out = []
        funcs, args, kwargs = graph.funcs, graph.args, graph.kwargs
        for i in range(len(graph)) if tasks is None else tasks:
            h = _hasher()
            try:
                self._walk(h, funcs[i])
                self._walk(h, args[i])
                kw = kwargs.get(i)
                if kw:
                    self._walk(h, kw)
            except RecursionError:  # values nested deeper than Python's recursion limit
                h = _hasher()
                h.update(b"<too deep>")
            out.append(h.digest())
        return out

    def total(self, graph: TaskGraph) -> str:
        """One digest of every task of ``graph``."""
        h = _hasher()
        for d in self.digest(graph):
            h.update(d)
        return h.hexdigest()

    def parts(self, graph: TaskGraph, i: int) -> list[tuple[tuple[str, ...], bytes]]:
        """The labelled parts of task ``i`` and their digests, innermost first: each part's
        path of labels (e.g. ``("the function <lambda> at job.py:3", "the closure variable
        OFF of <lambda> at job.py:3")``). The same walk on every rank gives the same
        labels in the same order, so the parts are compared position by position."""
        self._parts, self._path = [], []
        try:
            h = _hasher()
            func = graph.funcs[i]
            if func is not None:
                self._labelled(h, f"the function {function_name(func)}", func)
            self._template(h, graph.args[i])
            kw = graph.kwargs.get(i)
            if kw:
                self._template(h, kw)
            return self._parts
        finally:
            self._parts = None

    def _template(self, h: Any, v: Any) -> None:
        """An argument template, its literal leaves and functions labelled."""
        tp = type(v)
        if tp is Dep:
            h.update(b"D%d;" % v.slot)
        elif tp is Call:
            self._labelled(h, f"the function {function_name(v.func)}", v.func)
            self._template(h, v.args)
            if v.kwargs:
                self._template(h, v.kwargs)
        elif tp is Lit:
            self._template(h, v.value)
        elif tp is tuple or tp is list:
            for x in v:
                self._template(h, x)
        elif tp is dict:
            for k in sorted(v, key=repr):
                self._template(h, k)
                self._template(h, v[k])
        elif tp is np.ndarray:
            self._labelled(h, f"a {v.dtype} array of shape {v.shape}", v)
        elif tp in _SCALARS or tp is slice or tp is bytes:
            self._labelled(h, "a literal argument (a number, string or index)", v)
        elif callable(v) and not isinstance(v, type):
            self._labelled(h, f"the function {function_name(v)}", v)
        else:
            self._labelled(h, f"a literal {_type_name(tp)} argument", v)

    def _labelled(self, h: Any, label: str, value: Any, walk: Any = None) -> None:
        """``value`` walked as one part named ``label`` (recorded when describing)."""
        walk = walk or self._walk
        if self._parts is None:
            walk(h, value)
            return
        sub = _hasher()
        self._path.append(label)
        try:
            walk(sub, value)
            self._parts.append((tuple(self._path), sub.digest()))
        finally:
            self._path.pop()
        h.update(sub.digest())

    # -- values ----------------------------------------------------------------------------

    def _walk(self, h: Any, v: Any) -> None:
        tp = type(v)
        if tp in _SCALAR_TYPES:
            h.update(f"{tp.__name__}:{v!r};".encode())
            return
        walk = _WALKS.get(tp)
        if walk is None:
            if issubclass(tp, np.generic) and not issubclass(tp, np.object_):
                walk = _WALKS[tp] = PlanValues._scalar  # (each NumPy type once)
            elif issubclass(tp, np.dtype):
                walk = _WALKS[tp] = PlanValues._dtype
            elif issubclass(tp, type):  # a class (its type is a metaclass)
                walk = _WALKS[tp] = PlanValues._class
            elif (tp.__module__, tp.__qualname__) in _RANK_LOCAL:
                walk = _WALKS[tp] = PlanValues._rank_local
            else:
                walk = _WALKS[tp] = PlanValues._object
        walk(self, h, v)

    def _rank_local(self, h: Any, v: Any) -> None:
        h.update(b"<rank-local>")

    def _scalar(self, h: Any, v: np.generic) -> None:
        h.update(f"{v.dtype.str}:".encode())
        h.update(v.tobytes())

    def _dtype(self, h: Any, v: np.dtype) -> None:
        h.update(repr(v.descr if v.fields is not None else v.str).encode())

    def _sequence(self, h: Any, v: tuple | list) -> None:
        h.update(b"(" if type(v) is tuple else b"[")
        if _SCALAR_TYPES.issuperset(map(type, v)):  # shapes, coordinates: at once
            h.update(repr(v).encode())
        elif id(v) in self._active:
            h.update(b"<cycle>")  # a list that holds itself
        else:
            self._active.add(id(v))
            try:
                for x in v:
                    self._walk(h, x)
            finally:
                self._active.discard(id(v))
        h.update(b")")

    def _call(self, h: Any, v: Call) -> None:
        h.update(b"call:")
        self._walk(h, v.func)
        self._walk(h, v.args)
        if v.kwargs:
            self._walk(h, v.kwargs)

    def _bytes(self, h: Any, v: Any) -> None:
        data = bytes(v)
        h.update(b"b%d:" % len(data))
        h.update(data)

    def _range(self, h: Any, v: slice | range) -> None:
        start, stop, step = v.start, v.stop, v.step
        if type(start) in _SCALAR_TYPES and type(stop) in _SCALAR_TYPES \
                and type(step) in _SCALAR_TYPES:
            h.update(f"{type(v).__name__}({start!r},{stop!r},{step!r});".encode())
        else:
            h.update(f"{type(v).__name__}:".encode())
            self._walk(h, (start, stop, step))

    def _unordered(self, h: Any, kind: bytes, items: dict | set | frozenset) -> None:
        """A dict's items or a set's elements whatever their order (hash randomisation
        orders a set of strings differently on each rank)."""
        digests = []
        key = id(items)
        if key in self._active:
            h.update(b"<cycle>")
            return
        self._active.add(key)
        try:
            for x in items.items() if type(items) is dict else items:
                sub = _hasher()
                self._walk(sub, x)
                digests.append(sub.digest())
        finally:
            self._active.discard(key)
        digests.sort()
        h.update(kind + b"{%d:" % len(digests))
        for d in digests:
            h.update(d)
        h.update(b"}")

    def _array(self, h: Any, a: np.ndarray) -> None:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        if a.dtype.hasobject:
            for x in a.reshape(-1).tolist():
                self._walk(h, x)
            return
        known = self.known.get(id(a))
        if known is None:
            c = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            d = hashlib.sha1(c.data if c.size else b"", usedforsecurity=False).digest()
            known = self.known[id(a)] = (a, d)  # the array is kept: its id stays its own
        h.update(known[1])

    def _once(self, h: Any, v: Any, walk: Any) -> None:
        """``walk(sub, v)`` once per object (its digest kept by the object's identity), a
        cycle cut where it closes; not kept while describing (its parts are wanted)."""
        key = id(v)
        known = self.known.get(key)
        if known is not None and self._parts is None:
            h.update(known[1])
            return
        if key in self._active:
            h.update(b"<cycle>")
            return
        self._active.add(key)
        try:
            sub = _hasher()
            walk(sub, v)
        finally:
            self._active.discard(key)
        d = sub.digest()
        if self._parts is None:
            self.known[key] = (v, d)
        h.update(d)

    # -- functions -------------------------------------------------------------------------

    def _function(self, h: Any, fn: types.FunctionType) -> None:
        known = self.known.get(id(fn))
        if known is not None and self._parts is None:  # the common case: seen already
            h.update(known[1])
            return
        self._once(h, fn, self._function_parts)

    def _function_parts(self, h: Any, fn: types.FunctionType) -> None:
        module = fn.__module__
        h.update(f"function:{module}:{fn.__qualname__};".encode())
        library = is_library(module)
        if library and _importable(fn):
            return  # a library's function, pickled by name
        name = function_name(fn)
        code = fn.__code__
        if not library:
            self._labelled(h, f"the code of {name}", code, self._code)
        if fn.__defaults__:
            params = code.co_varnames[:code.co_argcount]
            first = len(params) - len(fn.__defaults__)
            for k, value in enumerate(fn.__defaults__):
                self._labelled(h, f"the default of argument {params[first + k]} of {name}",
                               value)
        if fn.__kwdefaults__:
            for key in sorted(fn.__kwdefaults__):
                self._labelled(h, f"the default of keyword argument {key} of {name}",
                               fn.__kwdefaults__[key])
        if fn.__closure__:
            for var, cell in zip(code.co_freevars, fn.__closure__, strict=True):
                try:
                    value = cell.cell_contents
                except ValueError:  # an empty cell (a variable not yet assigned)
                    h.update(b"<empty cell>")
                    continue
                self._labelled(h, f"the closure variable {var} of {name}", value)
        if library:
            return
        glob = fn.__globals__
        for var in _code_names(code):
            if var in glob:
                value = glob[var]
                if value is fn:
                    continue  # a recursive function: itself
                h.update(f"global:{var};".encode())
                self._labelled(h, f"the global {var} read by {name}", value)

    def _code(self, h: Any, code: types.CodeType) -> None:
        self._once(h, code, self._code_parts)

    def _code_parts(self, h: Any, code: types.CodeType) -> None:
        h.update(code.co_code)
        h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                       code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                       code.co_flags)).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._code(h, const)
            else:
                self._walk(h, const)

    # -- classes and objects ---------------------------------------------------------------

    def _class(self, h: Any, cls: type) -> None:
        h.update(f"class:{_type_name(cls)};".encode())
        if not is_library(cls.__module__):
            self._once(h, cls, self._class_parts)

    def _class_parts(self, h: Any, cls: type) -> None:
        """A class of the user's code by value: its bases and its namespace."""
        for base in cls.__bases__:
            self._class(h, base)
        name = cls.__qualname__
        for key in sorted(cls.__dict__):
            if key in _CLASS_SKIP:
                continue
            h.update(f"attr:{key};".encode())
            self._labelled(h, f"the class attribute {key} of {name}", cls.__dict__[key])

    def _object(self, h: Any, v: Any) -> None:
        known = self.known.get(id(v))
        if known is not None and self._parts is None:  # the common case: seen already
            h.update(known[1])
            return
        self._once(h, v, self._object_parts)

    def _object_parts(self, h: Any, v: Any) -> None:
        tp = type(v)
        self._class(h, tp)
        if isinstance(v, functools.partial):
            name = f"functools.partial({function_name(v.func)})"
            self._labelled(h, f"the function of {name}", v.func)
            for k, x in enumerate(v.args):
                self._labelled(h, f"argument {k} of {name}", x)
            for key in sorted(v.keywords):
                h.update(f"kw:{key};".encode())
                self._labelled(h, f"the keyword {key} of {name}", v.keywords[key])
            return
        if tp is types.MethodType:
            name = function_name(v.__func__)
            self._labelled(h, f"the method {name}", v.__func__)
            self._labelled(h, f"the object that the method {name} is bound to",
                           v.__self__)
            return
        if tp is types.BuiltinFunctionType:  # builtin functions and methods of C objects
            h.update(f"{v.__module__}:{v.__qualname__};".encode())
            owner = v.__self__
            if owner is not None and type(owner) is not types.ModuleType:
                self._labelled(h, f"the object that {v.__qualname__} is bound to", owner)
            return
        if tp is staticmethod or tp is classmethod:
            self._walk(h, v.__func__)
            return
        if tp is property:
            for f in (v.fget, v.fset, v.fdel):
                self._walk(h, f)
            return
        if is_library(tp.__module__) and _importable(v):
            # a library's function-like object (NumPy's dispatchers, a Cython function)
            h.update(f"global:{v.__module__}.{v.__qualname__};".encode())
            return
        state = getattr(tp, "_digest_state", None)
        if state is not None and tp.__module__.startswith("tilegraph."):
            # what a tilegraph class says identifies its objects (an Array: its shape,
            # blocks and dtype, not its pickled plan)
            self._labelled(h, f"the state of a {tp.__qualname__} object", state(v))
            return
        try:
            reduced = v.__reduce_ex__(4)
        except Exception:
            h.update(b"<unpicklable>")  # cannot be sent to another rank by pickling either
            return
        if isinstance(reduced, str):
            h.update(f"global:{reduced};".encode())
            return
        sub = _hasher()
        try:
            self._reduced(sub, tp, reduced)
        except Exception:  # its items or state cannot be read: as if unpicklable
            sub = _hasher()
            sub.update(b"<unpicklable>")
        h.update(sub.digest())

    def _reduced(self, h: Any, tp: type, reduced: Sequence[Any]) -> None:
        """What pickling an object sends: its constructor, arguments, state and items. An
        object of tilegraph's own classes: without its private attributes (``_name``: a
        writer's temporary file, locks, caches, each process's own) nor those its class
        names in ``_digest_skip`` (e.g. the target a writer writes into, never read)."""
        reduced = tuple(reduced) + (None,) * (6 - len(reduced))
        make, args, state, items, pairs, setter = reduced[:6]
        what = f"a {tp.__qualname__} object"
        skip: Any = None
        if tp.__module__.startswith("tilegraph."):
            skip = frozenset(getattr(tp, "_digest_skip", ()))
        self._walk(h, make)
        self._walk(h, args)
        if state is not None:
            h.update(b"state:")
            if isinstance(state, tuple) and len(state) == 2 and (
                    state[0] is None or type(state[0]) is dict) and (
                    state[1] is None or type(state[1]) is dict):
                for part in state:  # (the __dict__, the __slots__ values)
                    self._attributes(h, what, part or {}, skip)
            elif type(state) is dict:
                self._attributes(h, what, state, skip)
            else:
                self._labelled(h, f"the state of {what}", state)
        if items is not None:
            self._labelled(h, f"the items of {what}", list(items))
        if pairs is not None:
            self._labelled(h, f"the items of {what}", dict(pairs))
        if setter is not None:
            self._walk(h, setter)

    def _attributes(self, h: Any, what: str, attrs: dict, skip: frozenset | None) -> None:
        for key in sorted(attrs, key=repr):
            if skip is not None and (key in skip or str(key).startswith("_")):
                continue
            h.update(f"attr:{key!r};".encode())
            self._labelled(h, f"the attribute {key} of {what}", attrs[key])


_SCALAR_TYPES = frozenset(_SCALARS)
_WALKS: dict[type, Any] = {
    tuple: PlanValues._sequence,
    list: PlanValues._sequence,
    dict: lambda self, h, v: self._unordered(h, b"dict", v),
    set: lambda self, h, v: self._unordered(h, b"set", v),
    frozenset: lambda self, h, v: self._unordered(h, b"set", v),
    bytes: PlanValues._bytes,
    bytearray: PlanValues._bytes,
    memoryview: PlanValues._bytes,
    Call: PlanValues._call,
    Lit: lambda self, h, v: self._walk(h, v.value),
    Dep: lambda self, h, v: h.update(b"D%d;" % v.slot),
    slice: PlanValues._range,
    range: PlanValues._range,
    np.ndarray: PlanValues._array,
    np.ufunc: lambda self, h, v: h.update(f"ufunc:{v.__name__};".encode()),
    types.FunctionType: PlanValues._function,
    types.ModuleType: lambda self, h, v: h.update(f"module:{v.__name__};".encode()),
}
"""How :meth:`PlanValues._walk` digests a value of each of these exact types."""


def differing_parts(every: Sequence[Sequence[tuple[tuple[str, ...], bytes]]]
                    ) -> tuple[list[int], list[tuple[str, ...]]]:
    """The ranks whose parts of one task differ from rank 0's (``every[r]``: rank ``r``'s
    :meth:`PlanValues.parts`), and the innermost differing parts (no differing part lies
    inside them), in walk order."""
    base = list(every[0])
    ranks: list[int] = []
    differ: dict[tuple[str, ...], None] = {}
    for r, theirs in enumerate(every[1:], start=1):
        theirs = list(theirs)
        odd = False
        for k in range(max(len(base), len(theirs))):
            mine = base[k] if k < len(base) else None
            other = theirs[k] if k < len(theirs) else None
            if mine != other:
                odd = True
                differ[(mine or other)[0]] = None
        if odd:
            ranks.append(r)
    paths = list(differ)
    inner = [p for p in paths
             if not any(len(q) > len(p) and q[:len(p)] == p for q in paths)]
    return ranks, inner


def describe_part(path: tuple[str, ...]) -> str:
    """A differing part for an error message: its label, with the part it lies in."""
    if not path:
        return "a value"
    text = path[-1]
    if len(path) > 1 and not path[-2].startswith(("the function ", "the method ")):
        text += f" (in {path[-2]})"
    return text
