"""What a call in the script does, read by :func:`collect_call` for the
:class:`~tilegraph.autopar.collector.Collector` of a statement: the effects and changes of a
builtin (``print``, ``open``, ``setattr``, ``next``...), of a function of a module (by its
qualified name, from the tables of :mod:`tilegraph.autopar.effects`) and of a method (any
method not known to be read-only changes its object); the values it calls (a variable
holding a closure or an object with ``__call__`` may change); the arguments a function of
the script changes or calls; the module objects handed to a function; the files it reads or
writes.
"""

from __future__ import annotations

import ast
import os
from typing import TYPE_CHECKING

from tilegraph.autopar.astnames import root_name
from tilegraph.autopar.effects import (
    BARRIER_BUILTINS,
    BARRIER_CALLS,
    BUILTINS,
    FILE_CALLS,
    FILE_METHODS,
    HOOK_CALLS,
    INPLACE_ARG,
    LOGGER_SETTERS,
    MODULE_READERS,
    PURE_METHODS,
    RANDOM_PURE,
    STATE_CALLS,
    STDIN_CALLS,
    STDIN_PATHS,
    replaced_builtin,
    replaced_hook,
)
from tilegraph.autopar.values import alias_sources

if TYPE_CHECKING:
    from tilegraph.autopar.collector import Collector
    from tilegraph.autopar.summary import Summary


def collect_call(col: Collector, node: ast.Call) -> None:
    """What a call does, added to the collector's summary: a builtin's, a module function's
    or a method's effects and changes, a value called, the arguments a function of the
    script changes or calls, the module objects handed to a function, an ``out=``
    argument. (The collector then visits the call's parts.)"""
    func = node.func
    q = col.ctx.qualname(func)
    args = node.args
    kw = {k.arg: k.value for k in node.keywords if k.arg is not None}
    if isinstance(func, ast.Name) and not col.is_local(func.id) and \
            func.id not in col.ctx.user_names and func.id in BUILTINS:
        _builtin_call(col, func.id, args, kw)
    elif q is not None:
        _module_call(col, q, args, kw, func)
    elif isinstance(func, ast.Attribute):
        _method_call(col, func, args, kw)
    else:
        _called_value(col, func)
    if isinstance(func, ast.Name) and func.id in col.ctx.user_callables:
        fn = col.ctx.summaries.get(func.id)
        if fn is not None and fn.mutated_params:
            for a in _mutated_arguments(col, func.id, node, fn):
                col.change(a, store=False)
        if fn is not None and fn.called_param_names:   # apply(counter, x)
            for a in _mutated_arguments(col, func.id, node, fn, fn.called_param_names):
                _called_value(col, a)
    _called_arguments(col, func, q, args, kw)
    _module_arguments(col, node, func, q)
    for a in [*args, *kw.values()]:  # a stateful module handed to a function
        if isinstance(a, ast.Name) and a.id in col.ctx.modules:
            mq = col.ctx.modules[a.id]
            if mq == "random" or mq.startswith("numpy.random"):
                col.effect("random", "global", "w")
            elif mq.startswith(("matplotlib.pyplot", "pylab")):
                col.effect("figure", "pyplot", "w")
    if "out" in kw:
        root = root_name(kw["out"])
        if root is not None:
            col.mutate(root)


def _mutated_arguments(col: Collector, name: str, call: ast.Call, fn: Summary,
                       params: set[str] | None = None) -> list[ast.expr]:
    """The arguments of a call of the user function ``name`` bound to parameters it
    mutates (or to ``params``; every argument when the call or the signature is not
    plain)."""
    wanted = fn.mutated_param_names if params is None else params
    every = [a.value if isinstance(a, ast.Starred) else a for a in call.args]
    every += [k.value for k in call.keywords]
    sig = col.ctx.signatures.get(name)
    if sig is None or sig[2] or any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords):
        return every
    positional, kwonly, _ = sig
    if len(call.args) > len(positional):
        return every
    out = [a for p, a in zip(positional, call.args, strict=False) if p in wanted]
    out += [k.value for k in call.keywords
            if k.arg in wanted or k.arg not in (*positional, *kwonly)]
    return out


def _called_value(col: Collector, func: ast.AST) -> None:
    """A value is called (``handler(x)``, ``table[k](x)``): a closure or an object with
    ``__call__`` may change its own state, so calling a variable changes it; a called
    parameter is noted (a call of the function then calls its argument)."""
    if isinstance(func, ast.Name):
        name = func.id
        if col.is_local(name):
            col.s.called_param_names |= col.params_of(name)
            return
        if name in col.ctx.modules or name in col.ctx.user_callables or \
                name in col.ctx.wrappers or \
                (name in BUILTINS and name not in col.ctx.user_names):
            return   # (what a partial(f) calls comes in with f: callable_vars)
        col.mutate(name)
    elif isinstance(func, (ast.Subscript, ast.Attribute)):
        root, _, _, _ = col.chain(func)
        if isinstance(root, ast.Name) and root.id not in col.ctx.modules and \
                root.id not in col.ctx.user_callables and (
                    col.is_local(root.id) or root.id in col.ctx.user_names):
            col.change(func, store=False)


def _called_arguments(col: Collector, func: ast.AST, q: str | None, args: list[ast.expr],
                      kw: dict) -> None:
    """The values a builtin or library function calls (``map(f, xs)``, ``sorted(xs,
    key=f)``, ``functools.reduce(f, xs)``) are called: see :func:`_called_value`."""
    name = func.id if col.is_builtin(func, "map", "filter", "sorted", "min", "max",
                                      "reduce") else q   # type: ignore[attr-defined]
    called: list[ast.expr] = []
    if name in ("map", "filter", "functools.reduce", "itertools.starmap",
                "itertools.filterfalse", "itertools.takewhile",
                "itertools.dropwhile") and args:
        called.append(args[0])
    if name in ("sorted", "min", "max", "itertools.groupby") and "key" in kw:
        called.append(kw["key"])
    if name == "itertools.accumulate" and len(args) > 1:
        called.append(args[1])
    for c in called:
        if isinstance(c, ast.Name):
            _called_value(col, c)


def _module_arguments(col: Collector, node: ast.Call, func: ast.AST, q: str | None) -> None:
    """A module object handed to a call may have its attributes changed by it: a
    setting of process state (``state``), unless the callee only reads it (a builtin
    such as ``getattr``, a function of the script that stores nothing into that
    parameter). ``random``, ``numpy.random`` and pyplot have effect classes of their
    own."""
    mods = []
    for a in [*node.args, *[k.value for k in node.keywords]]:
        a = a.value if isinstance(a, ast.Starred) else a
        root, steps, _, _ = col.chain(a)   # a module, vars(m) or m.__dict__
        if not steps and isinstance(root, ast.Name) and not col.is_local(root.id) \
                and (root.id in col.ctx.module_imports or
                     root.id in col.ctx.module_vars):
            mods.append(a)
    if not mods:
        return
    if isinstance(func, ast.Name) and not col.is_local(func.id) and \
            func.id not in col.ctx.user_names and \
            func.id in MODULE_READERS | {"setattr", "delattr"}:
        return
    if q is not None and any(q == p or q.startswith(p) for p, _ in BARRIER_CALLS):
        return
    if isinstance(func, ast.Name) and func.id in col.ctx.user_callables:
        fn = col.ctx.summaries.get(func.id)
        if fn is not None:
            stored = {id(a) for a in _mutated_arguments(col,
                func.id, node, fn, fn.stored_param_names)}
            mods = [a for a in mods if id(a) in stored]
    for a in mods:
        mq = col.ctx.modules.get(col.chain(a)[0].id, "")  # type: ignore[attr-defined]
        if mq == "random" or mq.startswith(("numpy.random", "matplotlib.pyplot",
                                            "pylab")):
            continue
        col.change(a)


def _builtin_call(col: Collector, name: str, args: list[ast.expr], kw: dict) -> None:
    if name in BARRIER_BUILTINS and (name not in ("vars", "locals") or not args) and \
            not (name == "locals" and col.scopes):
        col.barrier(BARRIER_BUILTINS[name])
    elif name == "next" and args:
        root = root_name(args[0])
        if root is not None:
            col.mutate(root)
    elif name in ("setattr", "delattr") and args:
        key = args[1] if len(args) > 1 else None
        col.change(args[0], key.value if isinstance(key, ast.Constant) and
                    isinstance(key.value, str) else None)
    elif name == "input":
        col.effect("stdin", "stdin", "w")
        col.effect("output", "stdout", "w")   # the prompt
    elif name == "print":
        target = kw.get("file")
        tq = col.ctx.qualname(target) if target is not None else None
        if target is None or (isinstance(target, ast.Constant) and target.value is None):
            col.effect("output", "stdout", "w")
        elif tq in ("sys.stdout", "sys.stderr"):
            col.effect("output", tq.split(".")[1], "w")
        else:
            root = root_name(target)
            if root is not None:
                col.mutate(root)
    elif name == "open":
        mode_node = args[1] if len(args) > 1 else kw.get("mode")
        if mode_node is None:
            mode = "r"
        elif isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str):
            mode = "w" if set(mode_node.value) & set("wax+") else "r"
        else:
            mode = "w"
        target = args[0] if args else kw.get("file")
        if isinstance(target, ast.Constant) and (target.value == 0 or (
                isinstance(target.value, str) and target.value in STDIN_PATHS)):
            col.effect("stdin", "stdin", "w")
        _file(col, target, mode)


def _module_call(col: Collector, q: str, args: list[ast.expr], kw: dict,
                 func: ast.AST | None = None) -> None:
    for prefix, reason in BARRIER_CALLS:
        if q == prefix or q.startswith(prefix):
            col.barrier(reason)
            return
    if q in HOOK_CALLS:
        col.barrier(replaced_hook(HOOK_CALLS[q]))
    elif q == "sys.displayhook":   # it sets builtins._
        col.barrier(replaced_builtin("_"))
    if q.startswith((*STDIN_CALLS, "sys.stdin", "sys.__stdin__")) or (
            q in ("os.read", "os.fdopen") and not (
            args and isinstance(args[0], ast.Constant) and args[0].value != 0)):
        col.effect("stdin", "stdin", "w")
    last = q.rsplit(".", 1)[-1]
    if ".__dict__." in q and last not in PURE_METHODS and \
            isinstance(func, ast.Attribute):   # m.__dict__.update(...)
        col.change(func.value, store=False)
    if q in ("object.__setattr__", "object.__delattr__", "type.__setattr__",
             "type.__delattr__") and args:
        key = args[1] if len(args) > 1 else None
        col.change(args[0], key.value if isinstance(key, ast.Constant) and
                    isinstance(key.value, str) else None)
    for prefix, what in STATE_CALLS.items():
        if q == prefix or (prefix.endswith(".") and q.startswith(prefix)):
            if q != "decimal.getcontext":  # only reading it, unless changed after
                col.state(what)
            break
    if q.startswith(("random.", "numpy.random.")) and last not in RANDOM_PURE:
        col.effect("random", "global", "w")
    if q.startswith(("matplotlib.pyplot.", "pylab.")) or q == "matplotlib.use":
        col.effect("figure", "pyplot", "w")
    if q in ("os.chdir", "os.fchdir"):
        col.effect("cwd", "cwd", "w")
    elif q in ("os.getcwd", "os.path.abspath", "os.path.realpath", "pathlib.Path.cwd"):
        col.effect("cwd", "cwd", "r")
    if q in ("os.putenv", "os.unsetenv"):
        col.effect("env", "os.environ", "w")
    elif q == "os.getenv":
        col.effect("env", "os.environ", "r")
    if q.startswith(("sys.stdout.", "sys.stderr.")):
        col.effect("output", q.split(".")[1], "w")
    elif q.startswith(("pprint.", "logging.")) and last not in ("pformat", "getLogger"):
        col.effect("output", "stdout" if q.startswith("pprint.") else "stderr", "w")
    if q.startswith("os.environ."):
        if last not in ("get", "keys", "items", "values", "copy"):
            col.effect("env", "os.environ", "w")
    if q.startswith("sys.path."):
        col.effect("import", "sys.path", "w")
    for name, (mode, idx) in FILE_CALLS.items():
        if q == name or (name.endswith(("_", ".")) and q.startswith(name)):
            path = None if idx < 0 else (args[idx] if len(args) > idx else None)
            if idx >= 0 and path is None:
                path = kw.get("fname") or kw.get("file") or kw.get("path")
            _file(col, path, "w" if mode == "?" else mode)
            break
    if q in INPLACE_ARG:
        idx = INPLACE_ARG[q]
        if len(args) > idx and not (isinstance(args[idx], ast.Name)
                                    and args[idx].id in col.ctx.modules):
            col.change(args[idx], store=False)


def _method_call(col: Collector, func: ast.Attribute, args: list[ast.expr], kw: dict) -> None:
    attr = func.attr
    col.s.methods.add(attr)
    if isinstance(func.value, ast.Call):
        made_by = col.ctx.qualname(func.value.func)
        if made_by == "logging.getLogger" and attr in LOGGER_SETTERS:
            col.state("logging's configuration")
        elif made_by == "decimal.getcontext" and attr not in PURE_METHODS:
            col.state("the decimal context")
    if attr in FILE_METHODS:
        receiver = func.value
        path = None
        if isinstance(receiver, ast.Call) and col.ctx.qualname(receiver.func) in (
                "pathlib.Path", "pathlib.PurePath") and receiver.args:
            path = receiver.args[0]
        elif attr in ("to_csv", "to_json", "to_parquet", "savefig", "tofile",
                      "to_excel", "to_pickle", "to_html", "to_hdf", "to_feather"):
            path = args[0] if args else None
        _file(col, path, FILE_METHODS[attr])
    root = root_name(func.value)
    if root is None:
        return
    if root in col.ctx.file_vars_all:
        col.mutate(root)
        col.effect("file", col.ctx.file_var_paths.get(root, "?"), "w")
    elif attr not in PURE_METHODS and attr not in col.ctx.pure_user_methods:
        col.change(func.value, store=False)
        for a in [*args, *kw.values()]:
            srcs = alias_sources(col.ctx, a, col.is_local)
            if srcs:
                col.s.aliases.append(({root}, srcs))


def _file(col: Collector, node: ast.AST | None, mode: str) -> None:
    path = col.ctx.literal_path(node)
    if path is None or not os.path.isabs(path):
        col.effect("cwd", "cwd", "r")
        if col.ctx.changes_cwd:
            path = None
    col.effect("file", "?" if path is None else os.path.normpath(path), mode)
