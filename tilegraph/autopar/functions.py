"""The summaries of the script's own functions and methods, before any statement is read:
what each body does (a :class:`~tilegraph.autopar.collector.Collector` of the body, with its
parameters, local names and global declarations), closed over the functions it references
and the methods it calls; which of them keep state between calls (a default value changed
in place, a decorator that keeps state, a function or class changed by a function); the
signatures of plain functions; and the methods of the script's classes that change nothing.
All of it goes into the :class:`~tilegraph.autopar.context.Context`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from typing import TYPE_CHECKING

from tilegraph.autopar.astnames import function_nodes, local_names
from tilegraph.autopar.collector import Collector
from tilegraph.autopar.effects import KNOWN_MUTATORS
from tilegraph.autopar.held import closure_state, default_state, local_aliases_of
from tilegraph.autopar.summary import Summary

if TYPE_CHECKING:
    from tilegraph.autopar.context import Context


def summarise_functions(ctx: Context, tree: ast.Module) -> None:
    """Every user function's summary, closed over the user functions it references."""
    direct: dict[str, Summary] = {}
    methods: dict[str, list[str]] = defaultdict(list)   # method name -> keys
    class_members: dict[str, list[str]] = defaultdict(list)
    decorated: list[tuple[str, str, str]] = []   # (key, its owner, a decorator of the script)
    nodes = {}
    for name, node, cls in function_nodes(tree):
        key = f"{cls}.{name}" if cls else name
        owner = cls or name
        s, decorators = _body_summary(ctx, node, key, owner, cls)
        nodes[key] = node
        for d in sorted(decorators & ctx.user_callables):   # @decorator of the script
            s.refs.add(d)
            decorated.append((key, owner, d))
        _add_definition(ctx, direct, key, node, cls, s)
        if cls:
            methods[name].append(key)
            class_members[cls].append(key)
    # a function wrapped by a decorator of the script that keeps state (a closure that
    # changes its cells, an object of a class whose methods change it) keeps that state
    for key, owner, d in decorated:
        wrapper = nodes.get(d)
        keeps = (wrapper is not None and closure_state(wrapper)) or any(
            direct[k].mutated_params for k in class_members.get(d, []))
        if keeps:
            ctx.stateful.setdefault(owner, f"{key}() is wrapped by {d}, which keeps state "
                                           "between calls")
            direct[key].mutates.add(owner)
            direct[key].reads.add(owner)
    # a function or class of the script changed by a function (its attributes, a class
    # attribute changed through an object) keeps that state
    for key, s in direct.items():
        for c in sorted(s.mutates & ctx.user_callables):
            ctx.stateful.setdefault(c, f"{c} is changed by {key}()")
    _store_summaries(ctx, _closed_summaries(direct, methods, class_members), class_members)
    # methods of the script's classes that change neither their object nor any global
    for name, keys in methods.items():
        if name not in KNOWN_MUTATORS and not any(
                direct[k].mutated_params or direct[k].writes or direct[k].mutates
                for k in keys):
            ctx.pure_user_methods.add(name)


def _body_summary(ctx: Context, node: ast.AST, key: str, owner: str, cls: str | None
                  ) -> tuple[Summary, set[str]]:
    """``(summary, names of its decorators)`` of the body of one function or method (``key``:
    ``name`` or ``Class.name``; ``owner``: the function, or the class of a method), with
    the standard input read through a default value and the state a default value keeps
    (``ctx.stateful``)."""
    local, declared = local_names(node)
    params = {a.arg for a in [*node.args.posonlyargs, *node.args.args,
                              *node.args.kwonlyargs]}
    decorators = getattr(node, "decorator_list", [])
    names = {(d.func if isinstance(d, ast.Call) else d) for d in decorators}
    names = {d.id for d in names if isinstance(d, ast.Name)}
    positional = [*node.args.posonlyargs, *node.args.args]
    cls_param = positional[0].arg if cls and "classmethod" in names and positional \
        else None
    col = Collector(ctx, local=local | {"__function__"}, params=params,
                    local_aliases=local_aliases_of(node, params, local), owner_class=cls,
                    cls_param=cls_param, declared_global=declared)
    body = node.body if isinstance(node.body, list) else [node.body]
    for st in body:
        col.visit(st)
    if any(ctx.qualname(n) in ("sys.stdin", "sys.__stdin__")
           for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None
           for n in ast.walk(d)):   # def f(src=sys.stdin): src.read()
        col.effect("stdin", "stdin", "w")
    held = default_state(node, col.s, ctx)
    if held is not None:   # def f(acc=[]): acc.append(1)
        ctx.stateful.setdefault(owner, f"{key}() keeps the object of its default value "
                                       f"of {held} from call to call")
        col.s.mutates.add(owner)
        col.s.reads.add(owner)
    return col.s, names


def _add_definition(ctx: Context, direct: dict[str, Summary], key: str, node: ast.AST,
                    cls: str | None, s: Summary) -> None:
    """Record the summary ``s`` of a definition of ``key`` in ``direct``: merged into an
    earlier one of the same name (either may be called: no signature then), else with the
    signature of a plain function (``ctx.signatures``)."""
    if key in direct:
        prev = direct[key]
        prev.merge(s)
        prev.refs |= s.refs
        prev.methods |= s.methods
        prev.mutated_params |= s.mutated_params
        prev.mutated_param_names |= s.mutated_param_names
        prev.stored_param_names |= s.stored_param_names
        prev.called_param_names |= s.called_param_names
        ctx.signatures.pop(key, None)   # defined twice: either may be called
    else:
        direct[key] = s
        a = node.args
        if not cls and not isinstance(node, ast.Lambda):
            ctx.signatures[key] = ([p.arg for p in [*a.posonlyargs, *a.args]],
                                   {p.arg for p in a.kwonlyargs},
                                   a.vararg is not None or a.kwarg is not None)


def _closed_summaries(direct: dict[str, Summary], methods: dict[str, list[str]],
                      class_members: dict[str, list[str]]) -> dict[str, Summary]:
    """Close over references: each function's summary includes what the functions it names
    and the methods it calls do (what it does to its parameters is its own)."""
    closed: dict[str, Summary] = {}
    for key in direct:
        total = Summary()
        seen = {key}
        stack = [key]
        while stack:
            k = stack.pop()
            s = direct[k]
            total.merge(s)
            if k == key:
                total.mutated_params |= s.mutated_params
                total.mutated_param_names |= s.mutated_param_names
                total.stored_param_names |= s.stored_param_names
                total.called_param_names |= s.called_param_names
            nxt = [*s.refs, *[m for name in s.methods for m in methods.get(name, [])]]
            for r in list(nxt):
                nxt += class_members.get(r, [])
            for r in nxt:
                if r in direct and r not in seen:
                    seen.add(r)
                    stack.append(r)
        closed[key] = total
    return closed


def _store_summaries(ctx: Context, closed: dict[str, Summary],
                     class_members: dict[str, list[str]]) -> None:
    """The closed summaries into the context: a function's under its name; a method's
    merged into those of every method of that name and into its class's."""
    for key, s in closed.items():
        name = key.split(".")[-1]
        if "." in key:
            ctx.method_summaries[name].merge(s)
            cls = key.split(".")[0]
            ctx.summaries.setdefault(cls, Summary()).merge(s)
        else:
            ctx.summaries[name] = s
    for cls in class_members:
        ctx.summaries.setdefault(cls, Summary())
