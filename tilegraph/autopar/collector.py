"""What one statement (or a function's body) does to the script's global state: the names it
reads, binds and changes, its side effects and barriers, the aliases it makes, read from the
statement's ``ast`` by :class:`_Collector` with the script-wide facts of :class:`_Context`
(its modules, functions and constants) and the summaries of the script's own functions.
"""

from __future__ import annotations

import ast
import os
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tilegraph.autopar.effects import (
    _BARRIER_BUILTINS,
    _BARRIER_CALLS,
    _BUILTINS,
    _FILE_CALLS,
    _FILE_METHODS,
    _FRESH_BUILTINS,
    _INPLACE_ARG,
    _ITERATOR_CALLS,
    _KNOWN_MUTATORS,
    _LOGGER_SETTERS,
    _RANDOM_PURE,
    _UNPICKLABLE_CALLS,
    PURE_METHODS,
    STATE_CALLS,
    Effect,
)


@dataclass
class _Summary:
    """What a statement, or the body of a function, does to global state."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    mutates: set[str] = field(default_factory=set)
    effects: set[Effect] = field(default_factory=set)
    barriers: list[str] = field(default_factory=list)
    refs: set[str] = field(default_factory=set)        # user functions/classes referenced
    methods: set[str] = field(default_factory=set)     # attribute names called
    aliases: list[tuple[set[str], set[str]]] = field(default_factory=list)
    unpicklable: set[str] = field(default_factory=set)
    file_vars: set[str] = field(default_factory=set)
    mutated_params: bool = False
    mutated_param_names: set[str] = field(default_factory=set)
    calls_mutating: list[tuple[str, list[str]]] = field(default_factory=list)

    def merge(self, other: _Summary) -> None:
        self.reads |= other.reads
        self.writes |= other.writes
        self.mutates |= other.mutates
        self.effects |= other.effects
        self.barriers += [b for b in other.barriers if b not in self.barriers]


def _names_in_target(t: ast.AST) -> tuple[list[str], list[str]]:
    """(names bound, names mutated) by an assignment target."""
    bound: list[str] = []
    mutated: list[str] = []
    if isinstance(t, ast.Name):
        bound.append(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            b, m = _names_in_target(e)
            bound += b
            mutated += m
    elif isinstance(t, ast.Starred):
        return _names_in_target(t.value)
    elif isinstance(t, (ast.Subscript, ast.Attribute)):
        root = _root_name(t)
        if root is not None:
            mutated.append(root)
    return bound, mutated


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _local_names(fn: ast.AST) -> tuple[set[str], set[str]]:
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


class _Collector(ast.NodeVisitor):
    """Collects a :class:`_Summary` of one top-level statement or one function body."""

    def __init__(self, ctx: _Context, local: set[str] | None = None,
                 params: set[str] | None = None):
        self.ctx = ctx
        self.s = _Summary()
        self.scopes: list[set[str]] = [local] if local is not None else []
        self.params = params or set()
        self.class_depth = 0

    # names ----------------------------------------------------------------------------------

    def is_local(self, name: str) -> bool:
        return any(name in sc for sc in self.scopes)

    def read(self, name: str) -> None:
        if self.is_local(name):
            return
        self.s.reads.add(name)
        if name in self.ctx.iterators and not self.scopes:
            self.s.mutates.add(name)   # using an iterator may advance it
        if name in self.ctx.user_callables:
            self.s.refs.add(name)

    def bind(self, name: str) -> None:
        if self.scopes:
            if name in self.ctx.declared_global_here(self):
                self.s.writes.add(name)
            return
        if self.class_depth:
            return
        self.s.writes.add(name)

    def mutate(self, name: str) -> None:
        if self.is_local(name):
            if name in self.params:
                self.s.mutated_params = True
                self.s.mutated_param_names.add(name)
            return
        if name in self.ctx.modules:
            return
        self.s.mutates.add(name)
        self.s.reads.add(name)

    def effect(self, kind: str, detail: str, mode: str) -> None:
        self.s.effects.add(Effect(kind, detail, mode))

    def state(self, what: str) -> None:
        """A statement sets process state that later statements may read (at top level,
        or through a function a statement calls)."""
        self.effect("state", what, "w")

    def barrier(self, reason: str) -> None:
        if reason not in self.s.barriers:
            self.s.barriers.append(reason)

    # scopes ---------------------------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read(node.id)
        else:
            self.bind(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        self.visit_arguments(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self.bind(node.name)
        if self.scopes:  # a nested function: its body counts as part of the enclosing one
            local, _ = _local_names(node)
            self.scopes.append(local)
            for st in node.body:
                self.visit(st)
            self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_arguments(self, args: ast.arguments) -> None:
        for d in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(d)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                self.visit(a.annotation)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit_arguments(node.args)
        local, _ = _local_names(node)
        self.scopes.append(local)
        self.visit(node.body)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in [*node.decorator_list, *node.bases, *[k.value for k in node.keywords]]:
            self.visit(d)
        self.bind(node.name)
        self.class_depth += 1
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in st.decorator_list:
                    self.visit(d)
                self.visit_arguments(st.args)
            else:
                self.visit(st)
        self.class_depth -= 1

    def _comprehension(self, node: ast.AST, elts: list[ast.AST]) -> None:
        local: set[str] = set()
        for gen in node.generators:
            for n in ast.walk(gen.target):
                if isinstance(n, ast.Name):
                    local.add(n.id)
        first = True
        for gen in node.generators:
            if first:
                self.visit(gen.iter)  # the first iterable is evaluated outside
            self.scopes.append(local)
            if not first:
                self.visit(gen.iter)
            for cond in gen.ifs:
                self.visit(cond)
            self.scopes.pop()
            first = False
        self.scopes.append(local)
        for e in elts:
            self.visit(e)
        self.scopes.pop()

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_ListComp
    visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        # a walrus binds in the enclosing function or module scope
        saved = self.scopes
        self.scopes = [sc for sc in saved if "__function__" in sc] or []
        self.bind(node.target.id)
        self.scopes = saved

    def visit_Global(self, node: ast.Global) -> None:
        pass

    # statements -----------------------------------------------------------------------------

    def _assign(self, targets: list[ast.AST], value: ast.AST | None) -> None:
        bound_all: set[str] = set()
        for t in targets:
            bound, mutated = _names_in_target(t)
            bound_all.update(bound)
            for m in mutated:
                self.mutate(m)
                if value is not None:
                    self.s.aliases.append(({m}, self._alias_sources(value)))
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Call) and \
                    self.ctx.qualname(t.value.func) == "decimal.getcontext":
                self.state("the decimal context")
            elif isinstance(t, ast.Attribute) and _root_name(t) in self.ctx.modules:
                self.state(f"the module attribute {ast.unparse(t)}")
            if isinstance(t, ast.Subscript) and self.ctx.qualname(t.value) == "os.environ":
                self.effect("env", "os.environ", "w")
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute) and \
                    _root_name(t) in self.ctx.modules and \
                    self.ctx.qualname(_strip(t)) != "sys.path":
                self.state(f"the module attribute {ast.unparse(t.value)}")
            if isinstance(t, (ast.Subscript, ast.Attribute)) and \
                    self.ctx.qualname(_strip(t)) == "sys.path":
                self.effect("import", "sys.path", "w")
        for t in targets:
            self.visit(t)
        if value is not None:
            self.visit(value)
            if not self.scopes:
                names = {n for n in bound_all}
                self.s.aliases.append((names, self._alias_sources(value)))
                if self._unpicklable_value(value):
                    self.s.unpicklable |= names
                if self._iterator_value(value):
                    self.ctx.iterators |= names
                if isinstance(value, ast.Call) and self.ctx.qualname(value.func) in (
                        "open", "io.open", "codecs.open", "gzip.open"):
                    self.s.file_vars |= names
                    path = self.ctx.literal_path(value.args[0] if value.args else None)
                    if path is not None and (os.path.isabs(path) or not self.ctx.changes_cwd):
                        path = os.path.normpath(path)
                    else:
                        path = "?"
                    for n in names:
                        self.ctx.file_var_paths[n] = path

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)
        self.visit(node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        bound, mutated = _names_in_target(node.target)
        for name in [*bound, *mutated]:
            self.read(name)
            self.mutate(name)
        if isinstance(node.target, ast.Name):
            self.bind(node.target.id)
            self.s.aliases.append(({node.target.id}, self._alias_sources(node.value)))
        else:
            self.visit(node.target)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            _, mutated = _names_in_target(t)
            for m in mutated:
                self.mutate(m)
                if not self.scopes:
                    self.ctx.del_through.append((self, m))
            self.visit(t)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._assign([node.target], None)
        src = self._alias_sources(node.iter)
        bound, _ = _names_in_target(node.target)
        self.s.aliases.append((set(bound), src))
        for st in [*node.body, *node.orelse]:
            self.visit(st)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._assign([item.optional_vars], None)
                bound, _ = _names_in_target(item.optional_vars)
                self.s.aliases.append((set(bound), self._alias_sources(item.context_expr)))
                if self._unpicklable_value(item.context_expr):
                    self.s.unpicklable |= set(bound)
                    self.s.file_vars |= set(bound)
        for st in node.body:
            self.visit(st)

    visit_AsyncWith = visit_With

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.bind((a.asname or a.name).split(".")[0])
        self.effect("import", "import", "w")
        self.effect("import", "sys.path", "r")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = "." * node.level + (node.module or "")
        for a in node.names:
            if a.name == "*":
                names = self.ctx.star_names(mod)
                if names is None:
                    self.barrier(f"from {mod} import * binds names the analysis cannot list")
                else:
                    for n in names:
                        self.bind(n)
            else:
                self.bind(a.asname or a.name)
        self.effect("import", "import", "w")
        self.effect("import", "sys.path", "r")

    def visit_Raise(self, node: ast.Raise) -> None:
        if not self.scopes:
            self.barrier("raise ends the program")
        self.generic_visit(node)

    # expressions ----------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        q = self.ctx.qualname(node)
        if q is not None:
            if q == "os.environ" or q.startswith("os.environ."):
                self.effect("env", "os.environ", "r")
            elif q.startswith(("sys.stdout", "sys.stderr")):
                self.effect("output", q.split(".")[1], "w")
            elif q == "sys.path":
                self.effect("import", "sys.path", "r")
            elif q in ("sys.modules", "sys.argv") and isinstance(node.ctx, ast.Store):
                self.barrier(f"assigns {q}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        q = self.ctx.qualname(func)
        args = node.args
        kw = {k.arg: k.value for k in node.keywords if k.arg is not None}
        if isinstance(func, ast.Name) and not self.is_local(func.id) and \
                func.id not in self.ctx.user_names and func.id in _BUILTINS:
            self._builtin_call(func.id, args, kw)
        elif q is not None:
            self._module_call(q, args, kw)
        elif isinstance(func, ast.Attribute):
            self._method_call(func, args, kw)
        if isinstance(func, ast.Name) and func.id in self.ctx.user_callables:
            fn = self.ctx.summaries.get(func.id)
            if fn is not None and fn.mutated_params:
                for a in self._mutated_arguments(func.id, node, fn):
                    root = _root_name(a)
                    if root is not None:
                        self.mutate(root)
        for a in [*args, *kw.values()]:  # a stateful module handed to a function
            if isinstance(a, ast.Name) and a.id in self.ctx.modules:
                mq = self.ctx.modules[a.id]
                if mq == "random" or mq.startswith("numpy.random"):
                    self.effect("random", "global", "w")
                elif mq.startswith(("matplotlib.pyplot", "pylab")):
                    self.effect("figure", "pyplot", "w")
        if "out" in kw:
            root = _root_name(kw["out"])
            if root is not None:
                self.mutate(root)
        self.generic_visit(node)

    def _mutated_arguments(self, name: str, call: ast.Call, fn: _Summary) -> list[ast.expr]:
        """The arguments of a call of the user function ``name`` bound to parameters it
        mutates (every argument when the call or the signature is not plain)."""
        every = [*call.args, *[k.value for k in call.keywords]]
        sig = self.ctx.signatures.get(name)
        if sig is None or sig[2] or any(isinstance(a, ast.Starred) for a in call.args) or \
                any(k.arg is None for k in call.keywords):
            return every
        positional, kwonly, _ = sig
        if len(call.args) > len(positional):
            return every
        out = [a for p, a in zip(positional, call.args, strict=False)
               if p in fn.mutated_param_names]
        out += [k.value for k in call.keywords
                if k.arg in fn.mutated_param_names or k.arg not in (*positional, *kwonly)]
        return out

    def _builtin_call(self, name: str, args: list[ast.expr], kw: dict) -> None:
        if name in _BARRIER_BUILTINS and (name not in ("vars", "locals") or not args) and \
                not (name == "locals" and self.scopes):
            self.barrier(_BARRIER_BUILTINS[name])
        elif name == "next" and args:
            root = _root_name(args[0])
            if root is not None:
                self.mutate(root)
        elif name == "print":
            target = kw.get("file")
            tq = self.ctx.qualname(target) if target is not None else None
            if target is None or (isinstance(target, ast.Constant) and target.value is None):
                self.effect("output", "stdout", "w")
            elif tq in ("sys.stdout", "sys.stderr"):
                self.effect("output", tq.split(".")[1], "w")
            else:
                root = _root_name(target)
                if root is not None:
                    self.mutate(root)
        elif name == "open":
            mode_node = args[1] if len(args) > 1 else kw.get("mode")
            if mode_node is None:
                mode = "r"
            elif isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str):
                mode = "w" if set(mode_node.value) & set("wax+") else "r"
            else:
                mode = "w"
            self._file(args[0] if args else kw.get("file"), mode)

    def _module_call(self, q: str, args: list[ast.expr], kw: dict) -> None:
        for prefix, reason in _BARRIER_CALLS:
            if q == prefix or q.startswith(prefix):
                self.barrier(reason)
                return
        for prefix, what in STATE_CALLS.items():
            if q == prefix or (prefix.endswith(".") and q.startswith(prefix)):
                if q != "decimal.getcontext":  # only reading it, unless changed after
                    self.state(what)
                break
        last = q.rsplit(".", 1)[-1]
        if q.startswith(("random.", "numpy.random.")) and last not in _RANDOM_PURE:
            self.effect("random", "global", "w")
        if q.startswith(("matplotlib.pyplot.", "pylab.")) or q == "matplotlib.use":
            self.effect("figure", "pyplot", "w")
        if q in ("os.chdir", "os.fchdir"):
            self.effect("cwd", "cwd", "w")
        elif q in ("os.getcwd", "os.path.abspath", "os.path.realpath", "pathlib.Path.cwd"):
            self.effect("cwd", "cwd", "r")
        if q in ("os.putenv", "os.unsetenv"):
            self.effect("env", "os.environ", "w")
        elif q == "os.getenv":
            self.effect("env", "os.environ", "r")
        if q.startswith(("sys.stdout.", "sys.stderr.")):
            self.effect("output", q.split(".")[1], "w")
        elif q.startswith(("pprint.", "logging.")) and last not in ("pformat", "getLogger"):
            self.effect("output", "stdout" if q.startswith("pprint.") else "stderr", "w")
        if q.startswith("os.environ."):
            if last not in ("get", "keys", "items", "values", "copy"):
                self.effect("env", "os.environ", "w")
        if q.startswith("sys.path."):
            self.effect("import", "sys.path", "w")
        for name, (mode, idx) in _FILE_CALLS.items():
            if q == name or (name.endswith(("_", ".")) and q.startswith(name)):
                path = None if idx < 0 else (args[idx] if len(args) > idx else None)
                if idx >= 0 and path is None:
                    path = kw.get("fname") or kw.get("file") or kw.get("path")
                self._file(path, "w" if mode == "?" else mode)
                break
        if q in _INPLACE_ARG:
            idx = _INPLACE_ARG[q]
            if len(args) > idx:
                root = _root_name(args[idx])
                if root is not None and root not in self.ctx.modules:
                    self.mutate(root)

    def _method_call(self, func: ast.Attribute, args: list[ast.expr], kw: dict) -> None:
        attr = func.attr
        self.s.methods.add(attr)
        if isinstance(func.value, ast.Call):
            made_by = self.ctx.qualname(func.value.func)
            if made_by == "logging.getLogger" and attr in _LOGGER_SETTERS:
                self.state("logging's configuration")
            elif made_by == "decimal.getcontext" and attr not in PURE_METHODS:
                self.state("the decimal context")
        if attr in _FILE_METHODS:
            receiver = func.value
            path = None
            if isinstance(receiver, ast.Call) and self.ctx.qualname(receiver.func) in (
                    "pathlib.Path", "pathlib.PurePath") and receiver.args:
                path = receiver.args[0]
            elif attr in ("to_csv", "to_json", "to_parquet", "savefig", "tofile",
                          "to_excel", "to_pickle", "to_html", "to_hdf", "to_feather"):
                path = args[0] if args else None
            self._file(path, _FILE_METHODS[attr])
        root = _root_name(func.value)
        if root is None:
            return
        if root in self.ctx.file_vars_all:
            self.mutate(root)
            self.effect("file", self.ctx.file_var_paths.get(root, "?"), "w")
        elif attr not in PURE_METHODS and attr not in self.ctx.pure_user_methods:
            self.mutate(root)
            for a in [*args, *kw.values()]:
                srcs = self._alias_sources(a)
                if srcs:
                    self.s.aliases.append(({root}, srcs))

    def _file(self, node: ast.AST | None, mode: str) -> None:
        path = self.ctx.literal_path(node)
        if path is None or not os.path.isabs(path):
            self.effect("cwd", "cwd", "r")
            if self.ctx.changes_cwd:
                path = None
        self.effect("file", "?" if path is None else os.path.normpath(path), mode)

    def _alias_sources(self, value: ast.AST) -> set[str]:
        """Names whose objects the value of ``value`` may hold a reference to."""
        out: set[str] = set()
        stack = [value]
        while stack:
            n = stack.pop()
            if isinstance(n, ast.Constant):
                continue
            if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.JoinedStr)):
                continue
            if isinstance(n, ast.Call):
                fq = self.ctx.qualname(n.func)
                if isinstance(n.func, ast.Name) and n.func.id in _FRESH_BUILTINS:
                    continue
                if fq is not None and (fq.startswith("math.") or fq in _FRESH_BUILTINS):
                    continue
                if isinstance(n.func, ast.Name) and n.func.id in self.ctx.summaries:
                    out |= (self.ctx.summaries[n.func.id].reads - self.ctx.user_callables
                            - set(self.ctx.modules))
            if isinstance(n, ast.Name):
                if not self.is_local(n.id) and n.id not in self.ctx.modules and \
                        n.id not in self.ctx.user_callables:
                    out.add(n.id)
                continue
            if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                              ast.GeneratorExp)):
                inner = _comprehension_locals(n)
                for m in ast.walk(n):
                    if isinstance(m, ast.Name) and not self.is_local(m.id) and \
                            m.id not in inner and m.id not in self.ctx.modules and \
                            m.id not in self.ctx.user_callables:
                        out.add(m.id)
                continue
            stack.extend(ast.iter_child_nodes(n))
        return out

    def _unpicklable_value(self, value: ast.AST) -> bool:
        if isinstance(value, ast.GeneratorExp):
            return True
        if isinstance(value, ast.Call):
            q = self.ctx.qualname(value.func)
            if isinstance(value.func, ast.Name) and value.func.id in self.ctx.generators:
                return True
            return q in _UNPICKLABLE_CALLS
        return False

    def _iterator_value(self, value: ast.AST) -> bool:
        """Whether ``value`` may be an iterator, whose every use may advance it."""
        if isinstance(value, ast.GeneratorExp):
            return True
        if isinstance(value, ast.Call):
            q = self.ctx.qualname(value.func) or ""
            if isinstance(value.func, ast.Name) and value.func.id in self.ctx.iterator_funcs:
                return True
            return q in _ITERATOR_CALLS or q.startswith("itertools.") or \
                q in _UNPICKLABLE_CALLS
        return False


def _strip(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Subscript, ast.Attribute)) and not (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        node = node.value
    return node


# -- the context of one script -----------------------------------------------------------------


class _Context:
    """Facts about the whole script: imports, user functions and classes, constants."""

    def __init__(self, tree: ast.Module):
        self.modules: dict[str, str] = {}       # name bound by an import -> qualified name
        self.constants: dict[str, str] = {}     # names bound once, to a string literal
        self.user_callables: set[str] = set()   # top-level functions, classes and lambdas
        self.user_names: set[str] = set()       # every name bound at top level
        self.generators: set[str] = set()       # user functions that contain yield
        self.summaries: dict[str, _Summary] = {}
        # a plain function's (positional parameters, keyword-only ones, *args or **kwargs)
        self.signatures: dict[str, tuple[list[str], set[str], bool]] = {}
        self.method_summaries: dict[str, _Summary] = defaultdict(_Summary)
        self.del_through: list[tuple[_Collector, str]] = []
        self.file_vars_all: set[str] = set()
        self.file_var_paths: dict[str, str] = {}
        self.iterators: set[str] = set()         # names bound to iterators (so far)
        self.iterator_funcs: set[str] = set()    # user functions that may return one
        self.pure_user_methods: set[str] = set()  # methods that change nothing
        self._globals_decl: dict[int, set[str]] = {}
        self.changes_cwd = False
        assigned: dict[str, int] = defaultdict(int)
        const_bound: dict[str, int] = defaultdict(int)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.modules[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.modules[top] = top
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        self.modules[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Call):
                q = self.qualname(node.func)
                if q in ("os.chdir", "os.fchdir"):
                    self.changes_cwd = True
        for st in tree.body:
            local_targets = {id(m) for n in _top_bindings(st) if isinstance(n, ast.comprehension)
                             for m in ast.walk(n.target)}
            for node in _top_bindings(st):
                if id(node) in local_targets:
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.user_callables.add(node.name)
                    self.user_names.add(node.name)
                    if not isinstance(node, ast.ClassDef) and any(
                            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)):
                        self.generators.add(node.name)
                        self.iterator_funcs.add(node.name)
                    elif not isinstance(node, ast.ClassDef) and _returns_iterator(node):
                        self.iterator_funcs.add(node.name)
                elif isinstance(node, ast.Assign):
                    if _is_immutable_literal(node.value):
                        for t in node.targets:
                            if isinstance(t, ast.Name):
                                const_bound[t.id] += 1
                    if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                        if isinstance(node.value, ast.Lambda):
                            self.user_callables.add(node.targets[0].id)
                        lit = self.literal_path(node.value)
                        if lit is not None:
                            self.constants[node.targets[0].id] = lit
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    assigned[node.id] += 1
                    self.user_names.add(node.id)
        for name in list(self.constants):
            if assigned[name] != 1:
                del self.constants[name]
        # names only ever bound, by plain assignments, to numbers, strings and the like
        self.immutables: set[str] = {n for n, k in const_bound.items()
                                     if k == assigned[n]}
        for name in self.user_names:  # a rebound import name is a variable
            if name in self.modules and assigned[name]:
                del self.modules[name]

    def declared_global_here(self, col: _Collector) -> set[str]:
        return self._globals_decl.get(id(col), set())

    def qualname(self, node: ast.AST | None) -> str | None:
        """``np.random.rand`` -> ``numpy.random.rand`` when ``np`` is an imported module;
        ``print`` -> ``print``; ``None`` for anything rooted at a variable."""
        if isinstance(node, ast.Name):
            if node.id in self.modules:
                return self.modules[node.id]
            if node.id in _BUILTINS and node.id not in self.user_names:
                return node.id
            return None
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def literal_path(self, node: ast.AST | None) -> str | None:
        """The string a path expression certainly evaluates to, or ``None``."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.Call) and node.args and not node.keywords:
            q = self.qualname(node.func)
            if q == "os.path.join":
                parts = [self.literal_path(a) for a in node.args]
                if all(p is not None for p in parts):
                    return os.path.join(*parts)  # type: ignore[arg-type]
            elif q in ("pathlib.Path", "pathlib.PurePath") and len(node.args) == 1:
                return self.literal_path(node.args[0])
        return None

    def star_names(self, module: str) -> list[str] | None:
        """The names ``from module import *`` binds, for standard-library modules."""
        top = module.split(".")[0]
        if not top or top not in sys.stdlib_module_names:
            return None
        import importlib

        try:
            mod = importlib.import_module(module)
        except Exception:
            return None
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n in dir(mod) if not n.startswith("_")]
        return [str(n) for n in names]


def _comprehension_locals(node: ast.AST) -> set[str]:
    """The names bound by the targets of the comprehensions (or a lambda's parameters)
    inside ``node``."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            out |= {m.id for m in ast.walk(n.target) if isinstance(m, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= _local_names(n)[0]
    return out


def _is_immutable_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _is_immutable_literal(node.operand)
    if isinstance(node, ast.Tuple):
        return all(_is_immutable_literal(e) for e in node.elts)
    return False


def _returns_iterator(fn: ast.AST) -> bool:
    """Whether a function has a ``return`` of a generator expression or of a call to
    ``iter``/``map``/``filter``/``zip``/``enumerate``/``reversed`` or ``itertools``."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            if isinstance(v, ast.GeneratorExp):
                return True
            if isinstance(v, ast.Call):
                f = v.func
                if isinstance(f, ast.Name) and f.id in _ITERATOR_CALLS:
                    return True
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                        f.value.id == "itertools":
                    return True
    return False


def _top_bindings(st: ast.stmt) -> Iterable[ast.AST]:
    """The nodes of a top-level statement outside function bodies and class bodies."""
    stack: list[ast.AST] = [st]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _function_nodes(tree: ast.Module) -> list[tuple[str, ast.AST, str | None]]:
    """(name, node, class name or None) of every function defined outside other functions
    (at top level, inside top-level compound statements or as methods), and lambdas bound
    to a top-level name."""
    out: list[tuple[str, ast.AST, str | None]] = []
    for st in tree.body:
        for node in _top_bindings(st):
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


def _summarise_functions(ctx: _Context, tree: ast.Module) -> None:
    """Every user function's summary, closed over the user functions it references."""
    direct: dict[str, _Summary] = {}
    methods: dict[str, list[str]] = defaultdict(list)   # method name -> keys
    class_members: dict[str, list[str]] = defaultdict(list)
    for name, node, cls in _function_nodes(tree):
        local, declared = _local_names(node)
        col = _Collector(ctx, local=local | {"__function__"}, params={
            a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]})
        ctx._globals_decl[id(col)] = declared
        body = node.body if isinstance(node.body, list) else [node.body]
        for st in body:
            col.visit(st)
        key = f"{cls}.{name}" if cls else name
        if key in direct:
            prev = direct[key]
            prev.merge(col.s)
            prev.refs |= col.s.refs
            prev.methods |= col.s.methods
            prev.mutated_params |= col.s.mutated_params
            prev.mutated_param_names |= col.s.mutated_param_names
            ctx.signatures.pop(key, None)   # defined twice: either may be called
        else:
            direct[key] = col.s
            a = node.args
            if not cls and not isinstance(node, ast.Lambda):
                ctx.signatures[key] = ([p.arg for p in [*a.posonlyargs, *a.args]],
                                       {p.arg for p in a.kwonlyargs},
                                       a.vararg is not None or a.kwarg is not None)
        if cls:
            methods[name].append(key)
            class_members[cls].append(key)
    # close over references: a function includes what the functions it names do
    closed: dict[str, _Summary] = {}
    for key in direct:
        total = _Summary()
        seen = {key}
        stack = [key]
        while stack:
            k = stack.pop()
            s = direct[k]
            total.merge(s)
            if k == key:
                total.mutated_params |= s.mutated_params
                total.mutated_param_names |= s.mutated_param_names
            nxt = [*s.refs, *[m for name in s.methods for m in methods.get(name, [])]]
            for r in list(nxt):
                nxt += class_members.get(r, [])
            for r in nxt:
                if r in direct and r not in seen:
                    seen.add(r)
                    stack.append(r)
        closed[key] = total
    for key, s in closed.items():
        name = key.split(".")[-1]
        if "." in key:
            ctx.method_summaries[name].merge(s)
            cls = key.split(".")[0]
            ctx.summaries.setdefault(cls, _Summary()).merge(s)
        else:
            ctx.summaries[name] = s
    for cls in class_members:
        ctx.summaries.setdefault(cls, _Summary())
    # methods of the script's classes that change neither their object nor any global
    for name, keys in methods.items():
        if name not in _KNOWN_MUTATORS and not any(
                direct[k].mutated_params or direct[k].writes or direct[k].mutates
                for k in keys):
            ctx.pure_user_methods.add(name)
