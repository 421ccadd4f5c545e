"""What one statement (or a function's body) does to the script's global state: the names it
reads, binds and changes, its side effects and barriers, the aliases it makes, read from the
statement's ``ast`` by :class:`Collector` into a :class:`~tilegraph.autopar.summary.Summary`,
with the script-wide facts of the :class:`~tilegraph.autopar.context.Context` (its modules,
functions and constants, the summaries of its functions).

The collector walks names, scopes, assignments and imports, and follows what a change of an
object changes (:meth:`Collector.change`); what a call does is read by
:func:`tilegraph.autopar.calls.collect_call`, what a value may be (aliases, iterators, the
standard input) by :mod:`tilegraph.autopar.values`.
"""

from __future__ import annotations

import ast
import os

from tilegraph.autopar.astnames import (
    base_attribute,
    held_roots,
    local_names,
    names_in_target,
    root_name,
    stored_parts,
)
from tilegraph.autopar.calls import collect_call
from tilegraph.autopar.context import Context
from tilegraph.autopar.effects import (
    FROM_SYS_MODULES,
    SYS_HOOKS,
    Effect,
    replaced_builtin,
    replaced_hook,
)
from tilegraph.autopar.held import immutable_value
from tilegraph.autopar.summary import Summary
from tilegraph.autopar.values import (
    alias_sources,
    iterator_value,
    stdin_stream,
    unpicklable_value,
)


class Collector(ast.NodeVisitor):
    """Collects a :class:`Summary` of one top-level statement or one function body."""

    def __init__(self, ctx: Context, local: set[str] | None = None,
                 params: set[str] | None = None, *,
                 local_aliases: dict[str, set[str]] | None = None,
                 owner_class: str | None = None, cls_param: str | None = None,
                 declared_global: set[str] | None = None):
        self.ctx = ctx
        self.s = Summary()
        self.scopes: list[set[str]] = [local] if local is not None else []
        self.params = params or set()
        # local names that may hold (an object inside) a parameter's or a global's object
        # (``xs = acc``, ``for row in acc``); and so may a comprehension's variables
        self.local_aliases = local_aliases or {}
        self.comp_roots: dict[str, set[str]] = {}
        self._changing: set[str] = set()
        self.owner_class = owner_class   # the class whose method this body is
        self.cls_param = cls_param       # a classmethod's first parameter (the class)
        self.class_depth = 0
        # the names a function body declares ``global``: binding one binds the global
        self.declared_global = declared_global or set()

    # names ----------------------------------------------------------------------------------

    def is_local(self, name: str) -> bool:
        """Whether ``name`` is local where the collector is (a function's, a lambda's or a
        comprehension's name), not a global."""
        return any(name in sc for sc in self.scopes)

    def read(self, name: str) -> None:
        """The statement reads the global ``name`` (using an iterator advances it, using a
        variable that may hold the script's functions may call them)."""
        if self.is_local(name):
            return
        self.s.reads.add(name)
        if name in self.ctx.iterators and not self.scopes:
            self.s.mutates.add(name)   # using an iterator may advance it
        if name in self.ctx.user_callables:
            self.s.refs.add(name)
        # a variable that may hold the script's functions: using it may call them
        self.s.refs |= self.ctx.callable_vars.get(name, set())
        if name in self.ctx.stdin_vars or (
                not self.is_local(name) and
                self.ctx.modules.get(name) in ("sys.stdin", "sys.__stdin__")):
            self.effect("stdin", "stdin", "w")   # from sys import stdin
        if self.ctx.modules.get(name) == "__main__":
            self.barrier("the __main__ module exposes every variable")

    def params_of(self, name: str) -> set[str]:
        """The parameters whose object the local ``name`` may hold."""
        out = {name} if name in self.params else set()
        return out | (self.local_aliases.get(name, set()) & self.params)

    def bind(self, name: str) -> None:
        """The statement binds ``name``: a global at top level (not in a class body), or
        in a function that declares it ``global``."""
        if self.scopes:
            if name in self.declared_global:
                self.s.writes.add(name)
            return
        if self.class_depth:
            return
        self.s.writes.add(name)

    def mutate(self, name: str) -> None:
        """The object of ``name`` is changed in place: a global is mutated (a module name
        is not: its attributes are process state, see :meth:`change`); a local that may
        hold a parameter's object marks that parameter as changed, and what it may hold
        besides is changed too."""
        if self.is_local(name):
            held = self.params_of(name)
            if held:
                self.s.mutated_params = True
                self.s.mutated_param_names |= held
            # what a comprehension's variable or a local alias may hold is changed too
            outer = (self.comp_roots.get(name, set()) |
                     self.local_aliases.get(name, set())) - self.params - {name}
            if outer and name not in self._changing:
                self._changing.add(name)
                try:
                    for v in sorted(outer):
                        self.mutate(v)
                finally:
                    self._changing.discard(name)
            return
        if name in self.ctx.modules:
            return
        self.s.mutates.add(name)
        self.s.reads.add(name)

    def effect(self, kind: str, detail: str, mode: str) -> None:
        """The statement has the side effect ``Effect(kind, detail, mode)``."""
        self.s.effects.add(Effect(kind, detail, mode))

    def state(self, what: str) -> None:
        """A statement sets process state that later statements may read (at top level,
        or through a function a statement calls)."""
        self.effect("state", what, "w")

    def barrier(self, reason: str) -> None:
        """The statement is a barrier, for ``reason`` (each reason once)."""
        if reason not in self.s.barriers:
            self.s.barriers.append(reason)

    def is_builtin(self, node: ast.AST, *names: str) -> bool:
        """Whether ``node`` names one of the builtins ``names`` (not rebound by the script)."""
        return isinstance(node, ast.Name) and node.id in names and \
            not self.is_local(node.id) and node.id not in self.ctx.user_names

    def chain(self, node: ast.AST) -> tuple[ast.AST, list[str | None], bool, bool]:
        """``(root, steps, namespace, of_class)`` of an object expression: the expression at
        its bottom (a name, or a call the chain cannot see through), the attribute names
        (``None`` for an item) from the root outwards, whether it goes through a namespace
        (``vars(x)``, ``x.__dict__``: an item of it is an attribute of ``x``), and whether
        through the class of an object (``type(x)``, ``x.__class__``)."""
        steps: list[str | None] = []
        namespace = of_class = False
        while True:
            if isinstance(node, ast.Attribute):
                if node.attr == "__dict__":
                    namespace = True
                elif node.attr == "__class__":
                    of_class = True
                else:
                    steps.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Subscript):
                key = node.slice
                steps.append(key.value if isinstance(key, ast.Constant) and
                             isinstance(key.value, str) else None)
                node = node.value
            elif isinstance(node, ast.Call) and node.args and \
                    self.is_builtin(node.func, "vars", "getattr", "type"):
                name = node.func.id   # type: ignore[attr-defined]
                if name == "vars":
                    namespace = True
                elif name == "type":
                    of_class = True
                else:
                    key = node.args[1] if len(node.args) > 1 else None
                    steps.append(key.value if isinstance(key, ast.Constant) and
                                 isinstance(key.value, str) else None)
                node = node.args[0]
            else:
                return node, steps[::-1], namespace, of_class

    def change(self, obj: ast.AST, attr: str | None = None, *, item: bool = False,
               store: bool = True) -> None:
        """The object ``obj`` (an expression) is changed: its attribute ``attr`` (or item
        ``attr`` when ``item``; ``None``: unknown or any) is set or deleted (``store``), or
        a method or function changes it in place (not ``store``).

        What it changes decides the rest: a variable is mutated; a module's attribute is
        process state (a fence run on every worker); a builtin or a hook of ``sys``
        replaced, and a module taken from ``sys.modules``, keep the script in one process;
        the script's own functions and classes keep the state (their statements stay on
        one worker: :func:`tilegraph.autopar.analysis.analyze`); a class attribute that
        holds a mutable value is changed through any object whose attribute of that name
        is changed."""
        if any(self.ctx.qualname(n) == "sys.modules" for n in ast.walk(obj)):
            self.barrier(FROM_SYS_MODULES)
            return
        root, steps, namespace, of_class = self.chain(obj)
        if namespace and steps == [] and item:   # vars(m)["x"], m.__dict__["x"]
            item = False
        first = steps[0] if steps else (attr if not item else None)
        if steps and steps[0] in self.ctx.class_state:   # obj.items.append(...)
            for c in sorted(self.ctx.class_state[steps[0]]):
                self.mutate(c)
        if of_class:   # type(self).n += 1, self.__class__.n = 0
            classes = [self.owner_class] if self.owner_class else sorted(self.ctx.classes)
            for c in classes:
                self.mutate(c)
        if not isinstance(root, ast.Name):
            if isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and \
                    root.func.id in self.ctx.user_callables and \
                    not self.is_local(root.func.id):
                # what a function of the script returns may be an object it reads; an
                # object a class makes is new
                if root.func.id not in self.ctx.classes:
                    held = alias_sources(self.ctx, root, self.is_local)
                    for v in sorted(held - self.ctx.user_callables):
                        self.mutate(v)
                return
            r = root_name(root)
            if r is not None:
                self.mutate(r)
            return
        name = root.id
        if self.is_local(name):
            if name == self.cls_param and self.owner_class:   # cls.n += 1
                self.mutate(self.owner_class)
            if store or namespace:
                self.s.stored_param_names |= self.params_of(name)
            self.mutate(name)
            return
        if name == "__builtins__" and name not in self.ctx.user_names:
            self.barrier(replaced_builtin(first))
            return
        q = self.ctx.modules.get(name)
        if q is not None:
            if not store and not namespace and not steps:
                return   # np.sum(...) through a name of np: its functions change nothing
            full = ".".join([q, *[x for x in steps if x]])
            if q == "builtins":
                self.barrier(replaced_builtin(first))
            elif q == "sys" and first in SYS_HOOKS:
                self.barrier(replaced_hook(f"sys.{first}"))
            elif q == "__main__":
                self.barrier("changes the script's variables through the __main__ module")
            elif full == "sys.path" or full.startswith(("sys.path.", "os.environ")):
                return   # the import and env effects of their own
            elif first is not None:
                shown = ".".join([name, *[x for x in steps if x]])
                if not steps and not item:
                    shown = f"{name}.{first}"
                self.state(f"the module attribute {shown}")
            else:
                self.state(f"the attributes of module {name}")
            return
        if name in self.ctx.module_vars:
            self.state(f"the attributes of the module {name} holds")
        self.mutate(name)

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
        if not self.scopes and not self.class_depth:
            self._held_by(node.name, self._default_values(node.args))
        if self.scopes:  # a nested function: its body counts as part of the enclosing one
            local, _ = local_names(node)
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
        local, _ = local_names(node)
        self.scopes.append(local)
        self.visit(node.body)
        self.scopes.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in [*node.decorator_list, *node.bases, *[k.value for k in node.keywords]]:
            self.visit(d)
        self.bind(node.name)
        if not self.scopes and not self.class_depth:   # what the class holds from here
            held: list[ast.expr] = []
            for st in node.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    held += self._default_values(st.args)
                elif isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None \
                        and not immutable_value(st.value, self.ctx):
                    held.append(st.value)
            self._held_by(node.name, held)
        self.class_depth += 1
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in st.decorator_list:
                    self.visit(d)
                self.visit_arguments(st.args)
            else:
                self.visit(st)
        self.class_depth -= 1

    def _default_values(self, args: ast.arguments) -> list[ast.expr]:
        return [d for d in [*args.defaults, *args.kw_defaults]
                if d is not None and not immutable_value(d, self.ctx)]

    def _held_by(self, name: str, values: list[ast.expr]) -> None:
        """The function or class ``name`` holds the objects of ``values`` from its
        definition on (default values, class attributes): changing them changes it."""
        for v in values:
            held = alias_sources(self.ctx, v, self.is_local) - {name}
            if held:
                self.ctx.held_by[name] = self.ctx.held_by.get(name, set()) | held

    def _comprehension(self, node: ast.AST, elts: list[ast.AST]) -> None:
        local: set[str] = set()
        saved = dict(self.comp_roots)
        for gen in node.generators:
            roots = held_roots(gen.iter)
            for n in ast.walk(gen.target):
                if isinstance(n, ast.Name):
                    local.add(n.id)
                    self.comp_roots[n.id] = roots   # [o.bump() for o in objs]
        try:
            self._comprehension_body(node, elts, local)
        finally:
            self.comp_roots = saved

    def _comprehension_body(self, node: ast.AST, elts: list[ast.AST], local: set[str]
                            ) -> None:
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
            bound, mutated = names_in_target(t)
            bound_all.update(bound)
            for m in mutated:   # changed by _store below
                if value is not None:
                    self.s.aliases.append(({m}, alias_sources(self.ctx, value, self.is_local)))
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Call) and \
                    self.ctx.qualname(t.value.func) == "decimal.getcontext":
                self.state("the decimal context")
            for sub in stored_parts(t):
                self._store(sub)
            if isinstance(t, ast.Subscript) and self.ctx.qualname(t.value) == "os.environ":
                self.effect("env", "os.environ", "w")
            if isinstance(t, (ast.Subscript, ast.Attribute)) and \
                    self.ctx.qualname(base_attribute(t)) == "sys.path":
                self.effect("import", "sys.path", "w")
        for t in targets:
            self.visit(t)
        if value is not None:
            self.visit(value)
            if not self.scopes:
                names = {n for n in bound_all}
                self.s.aliases.append((names, alias_sources(self.ctx, value, self.is_local)))
                if unpicklable_value(self.ctx, value):
                    self.s.unpicklable |= names
                if iterator_value(self.ctx, value):
                    self.ctx.iterators |= names
                if stdin_stream(self.ctx, value):
                    self.ctx.stdin_vars |= names
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

    def _store(self, t: ast.Attribute | ast.Subscript) -> None:
        """An attribute or an item is set or deleted (``t`` is the target)."""
        if isinstance(t, ast.Attribute):
            self.change(t.value, t.attr)
        else:
            key = t.slice
            self.change(t.value, key.value if isinstance(key, ast.Constant) and
                        isinstance(key.value, str) else None, item=True)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assign(node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assign([node.target], node.value)
        self.visit(node.annotation)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        bound, mutated = names_in_target(node.target)
        for name in [*bound, *mutated]:
            self.read(name)
        for name in bound:
            self.mutate(name)
        if isinstance(node.target, (ast.Attribute, ast.Subscript)):
            self._store(node.target)
            self.change(node.target, store=False)   # x.items += [...] changes the list
        if isinstance(node.target, ast.Name):
            self.bind(node.target.id)
            self.s.aliases.append(({node.target.id},
                                   alias_sources(self.ctx, node.value, self.is_local)))
        else:
            self.visit(node.target)
        self.visit(node.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            _, mutated = names_in_target(t)
            for m in mutated:   # changed by _store below
                if not self.scopes:
                    self.ctx.del_through.append((self, m))
            for sub in stored_parts(t):
                self._store(sub)
            self.visit(t)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._assign([node.target], None)
        src = alias_sources(self.ctx, node.iter, self.is_local)
        bound, _ = names_in_target(node.target)
        self.s.aliases.append((set(bound), src))
        for st in [*node.body, *node.orelse]:
            self.visit(st)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._assign([item.optional_vars], None)
                bound, _ = names_in_target(item.optional_vars)
                self.s.aliases.append((set(bound), alias_sources(self.ctx, item.context_expr,
                                                                 self.is_local)))
                if unpicklable_value(self.ctx, item.context_expr):
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
            if q.startswith(("sys.stdin", "sys.__stdin__")) and \
                    isinstance(node.ctx, ast.Load):
                self.effect("stdin", "stdin", "w")
            if q == "sys.modules" and isinstance(node.ctx, ast.Load):
                self.barrier("sys.modules holds the script's own namespace")
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
        collect_call(self, node)
        self.generic_visit(node)
