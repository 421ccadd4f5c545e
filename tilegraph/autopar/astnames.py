"""Helpers over the ``ast`` of a script that the analysis shares: the names an assignment
target binds and changes, the name at the root of an expression, a function's local names,
the nodes of a top-level statement outside function bodies, the script's functions, and
which names the value of an expression may hold (to alias them)."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from tilegraph.autopar.effects import FRESH_BUILTINS, ITERATOR_CALLS


def names_in_target(t: ast.AST) -> tuple[list[str], list[str]]:
    """(names bound, names mutated) by an assignment target."""
    bound: list[str] = []
    mutated: list[str] = []
    if isinstance(t, ast.Name):
        bound.append(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            b, m = names_in_target(e)
            bound += b
            mutated += m
    elif isinstance(t, ast.Starred):
        return names_in_target(t.value)
    elif isinstance(t, (ast.Subscript, ast.Attribute)):
        root = root_name(t)
        if root is not None:
            mutated.append(root)
    return bound, mutated


def stored_parts(t: ast.AST) -> list[ast.Attribute | ast.Subscript]:
    """The attribute and item targets of an assignment or ``del`` target."""
    if isinstance(t, (ast.Attribute, ast.Subscript)):
        return [t]
    if isinstance(t, ast.Starred):
        return stored_parts(t.value)
    if isinstance(t, (ast.Tuple, ast.List)):
        return [p for e in t.elts for p in stored_parts(e)]
    return []


def root_name(node: ast.AST) -> str | None:
    """The name at the root of an expression, through attributes, items and calls (``x`` of
    ``x.a[0].f()``), or ``None`` (the root is not a name)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def local_names(fn: ast.AST) -> tuple[set[str], set[str]]:
    """(local names, names declared global) of a function or lambda body."""
    args = fn.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    if args.vararg:
        params.add(args.vararg.arg)
    if args.kwarg:
        params.add(args.kwarg.arg)
    if isinstance(fn, ast.Lambda):
        return params, set()
    declared: set[str] = set()
    local = set(params)
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            local.add(node.name)
            stack += [*node.decorator_list]
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                local.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return local - declared, declared


def base_attribute(node: ast.AST) -> ast.AST:
    """The attribute of a name at the bottom of an attribute or item chain (``sys.path`` of
    ``sys.path[0]`` and of ``sys.path.x``), or the expression the chain starts from when no
    attribute of a name is in it."""
    while isinstance(node, (ast.Subscript, ast.Attribute)) and not (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        node = node.value
    return node


def comprehension_locals(node: ast.AST) -> set[str]:
    """The names bound by the targets of the comprehensions (or a lambda's parameters)
    inside ``node``."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            out |= {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= local_names(n)[0]
    return out


def is_immutable_literal(node: ast.AST) -> bool:
    """Whether ``node`` is a literal that cannot be changed in place: a constant, a signed
    constant, or a tuple of them."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return is_immutable_literal(node.operand)
    if isinstance(node, ast.Tuple):
        return all(is_immutable_literal(e) for e in node.elts)
    return False


def returns_iterator(fn: ast.AST) -> bool:
    """Whether a function has a ``return`` of a generator expression or of a call to
    ``iter``/``map``/``filter``/``zip``/``enumerate``/``reversed`` or ``itertools``."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            if isinstance(v, ast.GeneratorExp):
                return True
            if isinstance(v, ast.Call):
                f = v.func
                if isinstance(f, ast.Name) and f.id in ITERATOR_CALLS:
                    return True
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                        f.value.id == "itertools":
                    return True
    return False


def top_bindings(st: ast.stmt) -> Iterable[ast.AST]:
    """The nodes of a top-level statement outside function bodies and class bodies."""
    stack: list[ast.AST] = [st]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def function_nodes(tree: ast.Module) -> list[tuple[str, ast.AST, str | None]]:
    """(name, node, class name or None) of every function defined outside other functions
    (at top level, inside top-level compound statements or as methods), and lambdas bound
    to a top-level name."""
    out: list[tuple[str, ast.AST, str | None]] = []
    for st in tree.body:
        for node in top_bindings(st):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((node.name, node, None))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.append((item.name, item, node.name))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda) and \
                    len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                out.append((node.targets[0].id, node.value, None))
    return out


def bare_names(value: ast.AST) -> set[str]:
    """The names whose objects ``value`` may hold itself (not those only called or whose
    attributes only are read: ``f`` and ``g`` in ``[f, partial(g, 1)]``, not ``h`` in
    ``h(1)`` nor ``m`` in ``m.x``)."""
    skip: set[int] = set()
    for n in ast.walk(value):
        if isinstance(n, ast.Call):
            skip.add(id(n.func))
        elif isinstance(n, ast.Attribute):
            skip.add(id(n.value))
    return {n.id for n in ast.walk(value) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and id(n) not in skip}


_COPIES = frozenset({"list", "dict", "set", "tuple", "frozenset", "sorted", "bytearray",
                     "copy", "deepcopy", "array", "astype", "tolist", "tobytes", "join",
                     "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "lower",
                     "upper", "format", "replace", "encode", "decode", "sum", "mean", "std",
                     "var", "prod", "count", "index", "argsort", "cumsum", "cumprod"})
"""Functions and methods whose result is a new object (a copy, a string, a number)."""


def held_roots(value: ast.AST) -> set[str]:
    """The names whose objects (or objects inside them) the value of ``value`` may be."""
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, (ast.Attribute, ast.Subscript, ast.Starred)):
        return held_roots(value.value)
    if isinstance(value, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr,
                          ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                          ast.GeneratorExp)):
        return set()
    if isinstance(value, ast.Call):
        name = value.func.id if isinstance(value.func, ast.Name) else \
            value.func.attr if isinstance(value.func, ast.Attribute) else None
        if name in FRESH_BUILTINS or name in _COPIES:
            return set()
        out: set[str] = set()
        if isinstance(value.func, ast.Attribute):
            out |= held_roots(value.func.value)
        for a in [*value.args, *[k.value for k in value.keywords]]:
            out |= held_roots(a)
        return out
    out = set()
    for c in ast.iter_child_nodes(value):
        out |= held_roots(c)
    return out


def holds(value: ast.AST, name: str) -> bool:
    """Whether the value of ``value`` may be (or hold) the object of the local ``name``."""
    if isinstance(value, ast.Name):
        return value.id == name
    if isinstance(value, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare,
                          ast.JoinedStr)):
        return False
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id in FRESH_BUILTINS:
        return False
    return any(holds(c, name) for c in ast.iter_child_nodes(value))
