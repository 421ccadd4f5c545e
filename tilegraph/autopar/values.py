"""What the value of an expression may be, in the script's context: which variables' objects
it may hold (so that changing one changes the others), whether it is an iterator (its every
use may advance it), the standard input or an iterator over it, or a value that cannot be
pickled (its variable stays on one worker).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from tilegraph.autopar.astnames import comprehension_locals
from tilegraph.autopar.effects import (
    FRESH_BUILTINS,
    ITERATOR_CALLS,
    STDIN_PATHS,
    UNPICKLABLE_CALLS,
)

if TYPE_CHECKING:
    from tilegraph.autopar.context import Context


def alias_sources(ctx: Context, value: ast.AST, is_local: Callable[[str], bool]
                  ) -> set[str]:
    """Names whose objects the value of ``value`` may hold a reference to (the script's
    functions and classes included: one that keeps state shares it with what holds
    it; the analysis drops the others); ``is_local(name)``: whether a name is local where
    the expression is (a function's, a comprehension's), not a global."""
    out: set[str] = set()
    stack = [value]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Constant):
            continue
        if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr)):
            continue
        if isinstance(n, ast.Call):
            fq = ctx.qualname(n.func)
            if isinstance(n.func, ast.Name) and n.func.id in FRESH_BUILTINS:
                continue
            if fq is not None and (fq.startswith("math.") or fq in FRESH_BUILTINS):
                continue
            if isinstance(n.func, ast.Name) and n.func.id in ctx.summaries:
                out |= (ctx.summaries[n.func.id].reads - ctx.user_callables
                        - set(ctx.modules))
        if isinstance(n, ast.Name):
            if not is_local(n.id) and n.id not in ctx.modules:
                out.add(n.id)
            continue
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                          ast.GeneratorExp)):
            inner = comprehension_locals(n)
            for m in ast.walk(n):
                if isinstance(m, ast.Name) and not is_local(m.id) and \
                        m.id not in inner and m.id not in ctx.modules:
                    out.add(m.id)
            continue
        stack.extend(ast.iter_child_nodes(n))
    return out


def stdin_stream(ctx: Context, value: ast.AST) -> bool:
    """Whether ``value`` may be the standard input itself or an iterator over it (its
    every use may read it): ``sys.stdin``, ``iter(sys.stdin)``, ``csv.reader(...)``,
    ``(line for line in sys.stdin)``, ``open(0)``, ``fileinput.input()``."""
    if isinstance(value, ast.Call):
        q = ctx.qualname(value.func) or ""
        if q.startswith("fileinput."):
            return True
        if q in ("open", "io.open", "os.fdopen") and value.args and \
                isinstance(value.args[0], ast.Constant) and (
                    value.args[0].value in STDIN_PATHS or
                    (value.args[0].value == 0 and type(value.args[0].value) is int)):
            return True
    if not any(ctx.qualname(n) in ("sys.stdin", "sys.__stdin__")
               for n in ast.walk(value)):
        return False
    if isinstance(value, ast.Attribute):
        return True
    return iterator_value(ctx, value) or unpicklable_value(ctx, value)


def unpicklable_value(ctx: Context, value: ast.AST) -> bool:
    """Whether ``value`` may be an object that cannot be pickled (a generator, a file, a
    reader, a lock...): its variables stay on one worker."""
    if isinstance(value, ast.GeneratorExp):
        return True
    if isinstance(value, ast.Call):
        q = ctx.qualname(value.func)
        if isinstance(value.func, ast.Name) and value.func.id in ctx.generators:
            return True
        return q in UNPICKLABLE_CALLS
    return False


def iterator_value(ctx: Context, value: ast.AST) -> bool:
    """Whether ``value`` may be an iterator, whose every use may advance it."""
    if isinstance(value, ast.GeneratorExp):
        return True
    if isinstance(value, ast.Call):
        q = ctx.qualname(value.func) or ""
        if isinstance(value.func, ast.Name) and value.func.id in ctx.iterator_funcs:
            return True
        return q in ITERATOR_CALLS or q.startswith("itertools.") or \
            q in UNPICKLABLE_CALLS
    return False
