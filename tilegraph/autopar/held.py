"""State the script's functions and classes hold between statements, which no variable
names: a default value changed in place (``def f(acc=[])``), a class attribute changed
through the objects of the class, a decorator whose closure keeps state, the objects a
function or class holds from its definition; and the facts of the script this needs (which
values cannot change, which local names may hold a parameter's or a global's object).

:func:`tilegraph.autopar.functions.summarise_functions` and the analysis use these to
mark such functions and classes as keeping state (``Context.stateful``): every statement
that uses them then runs on one worker, in program order, since a function or class is
defined by reference on each process and its state cannot move.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from tilegraph.autopar.astnames import (
    held_roots,
    holds,
    is_immutable_literal,
    local_names,
    root_name,
    stored_parts,
)
from tilegraph.autopar.effects import BUILTINS, PURE_METHODS

if TYPE_CHECKING:
    from tilegraph.autopar.context import Context
    from tilegraph.autopar.summary import Summary


_CLASS_BODY_CALLS = frozenset({"property", "staticmethod", "classmethod", "field",
                               "dataclasses.field", "typing.ClassVar", "TypeVar",
                               "typing.TypeVar", "namedtuple", "collections.namedtuple",
                               "frozenset", "tuple", "int", "float", "str", "bytes", "bool",
                               "complex", "range", "object"})


def immutable_value(node: ast.AST, ctx: Context) -> bool:
    """Whether the value of ``node`` certainly cannot be changed in place: a literal
    number, string or tuple of them, ``None``, a name only ever bound to one, a builtin,
    a function or class of the script, an attribute of a module (``np.float64``)."""
    if is_immutable_literal(node):
        return True
    if isinstance(node, ast.Name):
        return node.id in ctx.immutables or node.id in ctx.user_callables or \
            node.id in ctx.modules or (node.id in BUILTINS and node.id not in ctx.user_names)
    if isinstance(node, ast.Attribute):
        return ctx.qualname(node) is not None
    if isinstance(node, ast.Tuple):
        return all(immutable_value(e, ctx) for e in node.elts)
    return False


def mutable_class_attributes(cls: ast.ClassDef, ctx: Context) -> list[str]:
    """The attributes a class body binds to values that may be changed in place (``items =
    []``), which every object of the class shares."""
    out = []
    for st in cls.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            v = st.value
            if immutable_value(v, ctx):
                continue
            if isinstance(v, ast.Call) and (ctx.qualname(v.func) in _CLASS_BODY_CALLS or (
                    isinstance(v.func, ast.Name) and v.func.id in _CLASS_BODY_CALLS)):
                continue
            if isinstance(v, ast.Lambda):
                continue
            targets = st.targets if isinstance(st, ast.Assign) else [st.target]
            out += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return out


def local_aliases_of(fn: ast.AST, params: set[str], local: set[str]
                   ) -> dict[str, set[str]]:
    """The local names of a function that may hold (an object inside) the object of a
    parameter or of a global (``xs = acc``, ``row = acc[0]``, ``for row in TABLE``), so
    that changing them changes that object: local name -> those parameters and globals."""
    pairs: list[tuple[set[str], set[str]]] = []
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            pairs.append(({m.id for t in targets for m in ast.walk(t)
                           if isinstance(m, ast.Name)}, held_roots(n.value)))
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            pairs.append(({m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)},
                          held_roots(n.iter)))
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            pairs.append(({m.id for m in ast.walk(n.optional_vars)
                           if isinstance(m, ast.Name)}, held_roots(n.context_expr)))
        elif isinstance(n, ast.NamedExpr):
            pairs.append(({n.target.id}, held_roots(n.value)))
    out: dict[str, set[str]] = {}
    changed = True
    while changed:
        changed = False
        for names, roots in pairs:
            held = roots & params | (roots - local)
            for r in roots:
                held = held | out.get(r, set())
            for name in (names & local) - params:
                if held - out.get(name, set()):
                    out[name] = out.get(name, set()) | held
                    changed = True
    return out


def default_state(fn: ast.AST, s: Summary, ctx: Context) -> str | None:
    """The parameter whose default value a function keeps as state (a value that may be
    changed in place, which the function changes, returns, stores or lets a function it
    defines hold), or ``None``."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults,
                     strict=True))
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
              if d is not None]
    body = fn.body if isinstance(fn.body, list) else [ast.Return(fn.body)]
    declared = local_names(fn)[1] if not isinstance(fn, ast.Lambda) else set()
    for p, default in pairs:
        if immutable_value(default, ctx):
            continue
        name = p.arg
        if name in s.mutated_param_names:
            return name
        for n in (m for st in body for m in ast.walk(st)):
            if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) and \
                    n.value is not None and holds(n.value, name):
                return name
            if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None and \
                    holds(n.value, name):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(not isinstance(t, ast.Name) or t.id in declared for t in targets):
                    return name   # stored into an object or a global
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and any(
                    isinstance(m, ast.Name) and m.id == name for m in ast.walk(n)):
                return name   # a function it defines holds it
    return None


def closure_state(fn: ast.AST) -> bool:
    """Whether a function defines a function that changes a variable of the enclosing one
    (``nonlocal``, or a change in place of an object the enclosing function binds): the
    functions it returns keep state between calls."""
    if isinstance(fn, ast.Lambda):
        return False
    local = local_names(fn)[0]
    for inner in ast.walk(fn):
        if inner is fn or not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda)):
            continue
        if any(isinstance(n, ast.Nonlocal) for n in ast.walk(inner)):
            return True
        free = local - local_names(inner)[0]
        for n in ast.walk(inner):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr not in PURE_METHODS and root_name(n.func.value) in free:
                return True
            targets: list[ast.AST] = []
            if isinstance(n, (ast.Assign, ast.Delete)):
                targets = list(n.targets)
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
                targets = [n.target]
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) and root_name(t) in free
                   for tt in targets for t in stored_parts(tt)):
                return True
    return False
