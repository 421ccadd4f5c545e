"""Which maps over items of a script may split into chunks of iterations run on all the
workers: comprehensions, ``list(map(f, items))``, and ``for`` loops that only collect into
lists and dicts (see :mod:`tilegraph.autopar.loops` for how a split loop runs).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tilegraph.autopar.astnames import comprehension_locals
from tilegraph.autopar.collector import Collector
from tilegraph.autopar.context import Context
from tilegraph.autopar.effects import PURE_METHODS
from tilegraph.autopar.summary import Summary

if TYPE_CHECKING:
    from tilegraph.autopar.analysis import Task


@dataclass(frozen=True)
class ForLoop:
    """What a ``for`` loop that only collects does: the lists it appends to (``R.append(e)``
    as a statement of its body), the dicts it sets entries of (``D[k] = e``), and the names
    its body and target bind (they keep their last values after the loop)."""

    lists: tuple[str, ...]
    dicts: tuple[str, ...]
    bound: tuple[str, ...]


def _stored(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Store)]


def _loaded(node: ast.AST, inner: set[str] = frozenset()) -> list[str]:
    """Names a node reads (not those local to its comprehensions or lambdas)."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
                          ast.Lambda)):
            local = comprehension_locals(n) if not isinstance(n, ast.Lambda) else {
                a.arg for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs]}
            out += [m.id for m in ast.walk(n) if isinstance(m, ast.Name)
                    and isinstance(m.ctx, ast.Load) and m.id not in local]
    skip = {id(m) for n in ast.walk(node) if isinstance(
        n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda))
        for m in ast.walk(n)}
    out += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and id(n) not in skip]
    return [x for x in out if x not in inner]


def _carried(stmts: list[ast.stmt], bound: set[str], assigned: set[str]) -> str | None:
    """A name of ``bound`` that ``stmts`` may read before this iteration assigns it (a
    value carried from one iteration to the next), or None. Only assignments that surely
    happen count (not those inside ``if``, ``try`` or an inner loop's body)."""
    for st in stmts:
        if isinstance(st, (ast.For, ast.AsyncFor)):
            bad = set(_loaded(st.iter)) & (bound - assigned)
            if bad:
                return sorted(bad)[0]
            inner = _carried(st.body, bound, assigned | set(_stored(st.target)))
            if inner:
                return inner
            continue
        if isinstance(st, (ast.If, ast.While)):
            bad = set(_loaded(st.test)) & (bound - assigned)
            if bad:
                return sorted(bad)[0]
            for part in (st.body, st.orelse):
                inner = _carried(part, bound, set(assigned))
                if inner:
                    return inner
            continue
        if isinstance(st, (ast.With, ast.AsyncWith)):
            for item in st.items:
                bad = set(_loaded(item.context_expr)) & (bound - assigned)
                if bad:
                    return sorted(bad)[0]
                if item.optional_vars is not None:
                    assigned = assigned | set(_stored(item.optional_vars))
            inner = _carried(st.body, bound, assigned)
            if inner:
                return inner
            for b in st.body:
                if isinstance(b, (ast.Assign, ast.AnnAssign)):
                    assigned = assigned | set(_stored(b))
            continue
        if isinstance(st, ast.Try):
            for part in (st.body, *[h.body for h in st.handlers], st.orelse, st.finalbody):
                inner = _carried(part, bound, set(assigned))
                if inner:
                    return inner
            continue
        bad = set(_loaded(st)) & (bound - assigned)
        if bad:
            return sorted(bad)[0]
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            assigned = assigned | set(_stored(st))
    return None


def for_loop_parts(st: ast.stmt) -> ForLoop | str | None:
    """For a ``for`` loop over a variable or a ``range`` whose body, besides binding names,
    only appends to lists and sets dict entries (``R.append(e)``, ``D[k] = e``, never
    reading ``R`` or ``D`` otherwise), and whose iterations carry no value from one to the
    next, its :class:`ForLoop`; why not as a string for another ``for`` loop; ``None`` for
    any other statement."""
    if not isinstance(st, ast.For):
        return None
    if st.orelse:
        return "it has an else clause"
    if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store, ast.Load))
               for n in ast.walk(st.target)):
        return "its target is not a name or a tuple of names"
    lists: list[str] = []
    dicts: list[str] = []
    target = _stored(st.target)
    bound = list(target)
    sinks: set[int] = set()
    body = ast.Module(body=st.body, type_ignores=[])
    comp_nodes = {id(m) for n in ast.walk(body) if isinstance(
        n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda))
        for m in ast.walk(n)}
    for node in ast.walk(body):
        if isinstance(node, (ast.Break, ast.Return, ast.Yield, ast.YieldFrom, ast.Global,
                             ast.Nonlocal, ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef, ast.Await, ast.NamedExpr, ast.Delete,
                             ast.AugAssign, ast.While, ast.Raise)):
            return f"its body has {type(node).__name__.lower()}, which the split cannot keep"
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                isinstance(node.value.func, ast.Attribute) and \
                node.value.func.attr == "append" and \
                isinstance(node.value.func.value, ast.Name) and len(node.value.args) == 1 \
                and not node.value.keywords:
            lists.append(node.value.func.value.id)
            sinks.add(id(node.value.func.value))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                        isinstance(node, ast.Assign) and len(node.targets) == 1:
                    dicts.append(t.value.id)
                    sinks.add(id(t.value))
                elif isinstance(t, ast.Name) or (isinstance(t, (ast.Tuple, ast.List)) and all(
                        isinstance(e, ast.Name) for e in t.elts)):
                    bound.extend(_stored(t))
                else:
                    return f"it assigns to {ast.unparse(t)}"
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and \
                id(node) not in comp_nodes:
            bound.append(node.id)   # an inner loop's or a with's target
    if not lists and not dicts:
        return "its body neither appends to a list nor sets a dict entry"
    collected = set(lists) | set(dicts)
    if set(lists) & set(dicts):
        return "it appends to and sets entries of the same name"
    for node in ast.walk(body):
        if isinstance(node, ast.Name) and node.id in collected and id(node) not in sinks:
            return f"it reads {node.id}, which it collects into, inside the loop"
    if collected & set(bound):
        return f"it rebinds {sorted(collected & set(bound))[0]}, which it collects into"
    carried = _carried(st.body, set(bound), set(target))
    if carried is not None:
        return f"its iterations carry {carried} from one to the next"
    return ForLoop(tuple(dict.fromkeys(lists)), tuple(dict.fromkeys(dicts)),
                   tuple(dict.fromkeys(bound)))


def loop_parts(st: ast.stmt) -> tuple[str, ast.expr, ast.Name | None] | None:
    """``(kind, the iterable, the target)`` of a statement that maps over items: ``T =
    [... for v in items ...]`` (``"list"``), ``T = {k: v for ...}`` (``"dict"``), ``T =
    list(map(f, items))`` (``"map"``), or a ``for`` loop (``"for"``, no target: see
    :func:`for_loop_parts`); ``None`` for any other statement."""
    if isinstance(st, ast.For):
        return ("for", st.iter, None)
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)):
        return None
    v = st.value
    if isinstance(v, (ast.ListComp, ast.DictComp)) and not any(g.is_async
                                                               for g in v.generators):
        return ("list" if isinstance(v, ast.ListComp) else "dict", v.generators[0].iter,
                st.targets[0])
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "list" \
            and len(v.args) == 1 and not v.keywords and isinstance(v.args[0], ast.Call):
        m = v.args[0]
        if isinstance(m.func, ast.Name) and m.func.id == "map" and len(m.args) == 2 \
                and not m.keywords:
            return ("map", m.args[1], st.targets[0])
    return None


def sliced_items(st: ast.stmt, s: Summary, ctx: Context) -> str | None:
    """For a map over items that splits, the variable of its items when the statement reads
    it nowhere but as the items (not in its body, not in the user functions and methods it
    calls): each chunk then needs only its own part of the value, made where the value is;
    ``None`` otherwise (the items are a ``range``, or the variable is read elsewhere)."""
    parts = loop_parts(st)
    if parts is None or not isinstance(parts[1], ast.Name):
        return None
    name = parts[1].id
    target = parts[2]   # bound by the join step, after the chunks (data = [... in data])
    if sum(isinstance(n, ast.Name) and n.id == name and n is not target
           for n in ast.walk(st)) != 1:
        return None
    called = [ctx.summaries[r] for r in s.refs if r in ctx.summaries]
    called += [ctx.method_summaries[m] for m in s.methods if m in ctx.method_summaries]
    if any(name in c.reads | c.writes | c.mutates for c in called):
        return None
    return name


def loop_split(st: ast.stmt, s: Summary, t: Task, ctx: Context,
                changed: dict[str, int]) -> str | None:
    """``"split"`` when the iterations of a map over items (:func:`loop_parts`) may run in
    chunks on different workers, gathered in order: the items are a variable or a
    ``range``, evaluated once per chunk without effect, and nothing in the body changes
    anything but the result (no effect, no method that may change its object, no ``:=``,
    no function that changes its arguments or globals); else why not (``None``: not such
    a statement)."""
    parts = loop_parts(st)
    if parts is None:
        return None
    kind, items, _ = parts
    collected: set[str] = set()
    if kind == "for":
        shape = for_loop_parts(st)
        if isinstance(shape, str):
            return shape
        collected = set(shape.lists) | set(shape.dicts)
        direct = Collector(ctx)
        direct.visit(st)
        mutated = set(direct.s.mutates)
        for r in direct.s.refs:
            if r in ctx.summaries:
                mutated |= ctx.summaries[r].mutates
        if mutated - collected:
            return "it changes " + ", ".join(sorted(mutated - collected))
        # the values it collects may share objects with the names of its alias class:
        # copies made on other workers must not be told apart from them later
        shared = sorted(v for v in s.mutates if changed[v] > 1 or (
            changed[v] == 1 and v not in s.mutates))
        if shared:
            return (f"what it collects may share objects with {shared[0]}, which another "
                    "statement changes")
    for name in ("list", "map", "range"):
        if name in ctx.user_names:
            return f"{name} is redefined by the script"
    if not (isinstance(items, ast.Name) or (
            isinstance(items, ast.Call) and isinstance(items.func, ast.Name)
            and items.func.id == "range" and not items.keywords
            and all(isinstance(a, (ast.Name, ast.Constant)) for a in items.args))):
        return "the items are not a variable or a range: they would be made once per chunk"
    if t.barrier is not None:
        return f"it is a barrier ({t.barrier})"
    effects = sorted({e.kind for e in s.effects if e.mode == "w" or e.kind in (
        "output", "random", "figure", "state", "file")})
    if effects:
        return "its iterations have effects that must stay in order: " + ", ".join(effects)
    if kind != "for" and s.mutates:
        return "it changes " + ", ".join(sorted(s.mutates))
    if (t.group is not None and kind != "for") or t.replicated:
        return "it is kept on one worker, with values it shares"
    body = st.value if kind != "for" else ast.Module(body=st.body, type_ignores=[])
    for n in ast.walk(body):
        if kind == "for" and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "append" and isinstance(n.func.value, ast.Name) and \
                n.func.value.id in collected:
            continue
        if isinstance(n, ast.NamedExpr):
            return "an assignment expression (:=) binds a variable of the script"
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "it yields or awaits"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                ctx.qualname(n.func) is None and n.func.attr not in PURE_METHODS and \
                n.func.attr not in ctx.pure_user_methods:
            return f"it calls .{n.func.attr}(), which may change its object"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            fn = ctx.summaries.get(n.func.id) if n.func.id in ctx.user_callables else None
            if fn is not None and (fn.mutated_params or fn.writes or fn.mutates):
                return f"{n.func.id}() changes its arguments or the script's variables"
            if n.func.id in ctx.user_names and n.func.id not in ctx.user_callables:
                return f"{n.func.id}() is a value of the script the analysis cannot follow"
    return "split"
