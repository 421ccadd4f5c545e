"""Facts about a whole script that the analysis of each statement reads: the names its
imports bind (and so which names are modules), its functions, classes and generators, the
names bound once to a string or only to immutable values, the variables that may hold a
module object or the script's functions, the class attributes its classes share, and the
summaries of its functions (filled in by
:func:`~tilegraph.autopar.functions.summarise_functions`). The collectors add to it as the
statements are read in order (iterators, the standard input, files, functions and classes
that keep state).
"""

from __future__ import annotations

import ast
import os
import sys
from collections import defaultdict
from typing import TYPE_CHECKING

from tilegraph.autopar.astnames import (
    bare_names,
    is_immutable_literal,
    returns_iterator,
    top_bindings,
)
from tilegraph.autopar.effects import BUILTINS, STATELESS_WRAPPERS
from tilegraph.autopar.held import mutable_class_attributes
from tilegraph.autopar.summary import Summary

if TYPE_CHECKING:
    from tilegraph.autopar.collector import Collector


class Context:
    """Facts about the whole script: imports, user functions and classes, constants."""

    def __init__(self, tree: ast.Module):
        self.modules: dict[str, str] = {}       # name bound by an import -> qualified name
        self.constants: dict[str, str] = {}     # names bound once, to a string literal
        self.user_callables: set[str] = set()   # top-level functions, classes and lambdas
        self.user_names: set[str] = set()       # every name bound at top level
        self.generators: set[str] = set()       # user functions that contain yield
        self.summaries: dict[str, Summary] = {}
        # a plain function's (positional parameters, keyword-only ones, *args or **kwargs)
        self.signatures: dict[str, tuple[list[str], set[str], bool]] = {}
        self.method_summaries: dict[str, Summary] = defaultdict(Summary)
        self.del_through: list[tuple[Collector, str]] = []
        self.file_vars_all: set[str] = set()
        self.file_var_paths: dict[str, str] = {}
        self.iterators: set[str] = set()         # names bound to iterators (so far)
        self.iterator_funcs: set[str] = set()    # user functions that may return one
        self.pure_user_methods: set[str] = set()  # methods that change nothing
        self.module_imports: set[str] = set()    # names certainly bound to module objects
        self.module_vars: set[str] = set()       # variables that may hold a module object
        self.callable_vars: dict[str, set[str]] = {}  # variable -> functions it may hold
        self.wrappers: set[str] = set()          # variables only ever bound to partial(...)
        self.stdin_vars: set[str] = set()        # names bound to the standard input (so far)
        self.classes: set[str] = set()           # the script's classes
        self.class_state: dict[str, set[str]] = defaultdict(set)  # attribute -> classes
        # the script's functions and classes that keep state between statements -> why
        self.stateful: dict[str, str] = {}
        # function or class -> the variables whose objects it holds from its definition
        self.held_by: dict[str, set[str]] = {}
        self.changes_cwd = False
        self._read_imports(tree)
        self._read_bindings(tree)
        self._values_held(tree)
        for st in tree.body:
            for node in top_bindings(st):
                if isinstance(node, ast.ClassDef):
                    self.classes.add(node.name)
                    for attr in mutable_class_attributes(node, self):
                        self.class_state[attr].add(node.name)

    def _read_imports(self, tree: ast.Module) -> None:
        """The names the script's imports bind (anywhere in it), those certainly bound to
        module objects, and whether it changes the working directory."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.modules[a.asname] = a.name
                        self.module_imports.add(a.asname)
                    else:
                        top = a.name.split(".")[0]
                        self.modules[top] = top
                        self.module_imports.add(top)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    if a.name != "*":
                        self.modules[a.asname or a.name] = f"{node.module}.{a.name}"
                        if _is_submodule(node.module, a.name):
                            self.module_imports.add(a.asname or a.name)
            elif isinstance(node, ast.Call):
                q = self.qualname(node.func)
                if q in ("os.chdir", "os.fchdir"):
                    self.changes_cwd = True

    def _read_bindings(self, tree: ast.Module) -> None:
        """The names bound at top level (outside function bodies), the script's functions,
        classes, lambdas, generators and functions that return iterators, the names bound
        once to a string and those only bound to immutable literals; an import name the
        script rebinds is a variable."""
        assigned: dict[str, int] = defaultdict(int)
        const_bound: dict[str, int] = defaultdict(int)
        for st in tree.body:
            local_targets = {id(m) for n in top_bindings(st) if isinstance(n, ast.comprehension)
                             for m in ast.walk(n.target)}
            for node in top_bindings(st):
                if id(node) in local_targets:
                    continue
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.user_callables.add(node.name)
                    self.user_names.add(node.name)
                    if not isinstance(node, ast.ClassDef) and any(
                            isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(node)):
                        self.generators.add(node.name)
                        self.iterator_funcs.add(node.name)
                    elif not isinstance(node, ast.ClassDef) and returns_iterator(node):
                        self.iterator_funcs.add(node.name)
                elif isinstance(node, ast.Assign):
                    if is_immutable_literal(node.value):
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
        self.module_imports &= set(self.modules)

    def _values_held(self, tree: ast.Module) -> None:
        """The variables that may hold a module object (``m = json``, ``m =
        importlib.import_module(...)``) and those that may hold the script's functions
        (``handler = f``, ``ops = {"f": f}``, ``p = functools.partial(f, 1)``, ``c =
        make_counter()`` when ``make_counter`` returns a function), through other variables
        too (``g = handler``)."""
        returns_callable = _functions_returning_callables(tree)
        pairs: list[tuple[set[str], ast.AST]] = []
        for st in tree.body:
            for node in top_bindings(st):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = {n.id for t in targets for n in ast.walk(t)
                             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                    pairs.append((names, node.value))
                elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                    names = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
                    pairs.append((names, node.iter))
                elif isinstance(node, ast.NamedExpr):
                    pairs.append(({node.target.id}, node.value))
        held: list[tuple[set[str], set[str], bool]] = []
        factory: dict[str, bool] = {}   # every binding a stateless wrapper (partial...)
        for names, value in pairs:
            made = isinstance(value, ast.Call) and \
                self.qualname(value.func) in STATELESS_WRAPPERS
            for n in names:
                factory[n] = factory.get(n, True) and made
            bare = bare_names(value)
            called = {n.func.id for n in ast.walk(value) if isinstance(n, ast.Call)
                      and isinstance(n.func, ast.Name) and n.func.id in returns_callable}
            module = any(self.qualname(n) in ("sys.modules", "importlib.import_module",
                                              "__import__")
                         for n in ast.walk(value))
            held.append((names, bare | called, module))
        changed = True
        while changed:
            changed = False
            for names, sources, module in held:
                mod = module or bool(sources & (self.module_imports | self.module_vars))
                funcs = sources & self.user_callables
                for v in sources & set(self.callable_vars):
                    funcs = funcs | self.callable_vars[v]
                for n in names:
                    if mod and n not in self.module_vars:
                        self.module_vars.add(n)
                        changed = True
                    if funcs - self.callable_vars.get(n, set()):
                        self.callable_vars[n] = self.callable_vars.get(n, set()) | funcs
                        changed = True
        self.module_vars -= set(self.modules)
        self.wrappers = {n for n, made in factory.items() if made}

    def qualname(self, node: ast.AST | None) -> str | None:
        """``np.random.rand`` -> ``numpy.random.rand`` when ``np`` is an imported module;
        ``print`` -> ``print``; ``None`` for anything rooted at a variable."""
        if isinstance(node, ast.Name):
            if node.id in self.modules:
                return self.modules[node.id]
            if node.id in BUILTINS and node.id not in self.user_names:
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


def _is_submodule(module: str, name: str) -> bool:
    """Whether ``from module import name`` binds a module of the standard library (those of
    other packages are not looked up: that would import them)."""
    top = module.split(".")[0]
    if top not in sys.stdlib_module_names:
        return False
    import importlib.util

    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except (ImportError, ValueError, AttributeError):
        return False


def _functions_returning_callables(tree: ast.Module) -> set[str]:
    """The script's functions that may return a function: a ``lambda``, a function defined
    in their body, one of the script's functions, or a ``functools.partial``."""
    top_funcs = {n.name for st in tree.body for n in top_bindings(st)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    out: set[str] = set()
    for st in tree.body:
        for fn in top_bindings(st):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            inner = {n.name for n in ast.walk(fn) if n is not fn and isinstance(
                n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
            for r in ast.walk(fn):
                if isinstance(r, ast.Return) and r.value is not None:
                    held = bare_names(r.value)
                    if held & (inner | top_funcs) or any(
                            isinstance(n, ast.Lambda) or (isinstance(n, ast.Call) and
                                                          "partial" in ast.unparse(n.func))
                            for n in ast.walk(r.value)):
                        out.add(fn.name)
    return out
