"""Static analysis of a serial Python script: its top-level statements as a task graph.

Nothing of the script runs: the analysis reads its ``ast``. Every top-level statement is a
task (a compound statement -- ``for``, ``while``, ``with``, ``if``, ``try``, ``def``,
``class`` -- is one task, analysed as a whole). For each task the analysis finds

- ``uses``: the global names it reads, including the globals read by the user-defined
  functions it calls or references (transitively), and the names it mutates;
- ``defines``: the global names it binds (assignment, ``import``, ``def``, ``for`` targets,
  ``del``, ``global`` writes inside called functions) or mutates;
- ``mutates``: names whose object it changes in place: a method call ``x.m(...)`` (unless
  ``m`` is a known read-only method such as ``mean`` or ``get``), ``x[k] = v``,
  ``x.a = v``, ``x += v``, ``del x[k]``, an ``out=`` argument, an argument of a known
  in-place function (``random.shuffle``) or of a user function that mutates its
  parameters; a mutation of ``x`` mutates every name that may alias it (``y = x``,
  ``y = x[0]``, ``y = f(x)``, ``x.append(y)``, ...);
- ``effects``: side effects on shared resources, each a class with a detail and a mode
  (read or write): ``output`` (print, ``sys.stdout``/``sys.stderr``, logging), ``file``
  (by path when the path is a literal, ``?`` when unknown), ``cwd`` (``os.chdir`` and
  relative paths), ``env`` (``os.environ``), ``random`` (the global ``random`` and
  ``numpy.random`` state), ``figure`` (matplotlib's current figure), ``import`` (imports
  and ``sys.path``), ``state`` (process-wide settings that later statements read without
  naming them: NumPy's print options and error handling, warning filters, matplotlib's
  and pandas' options, the recursion limit, the locale, the decimal context, the time
  zone, logging's configuration, an attribute of a module, also when set through
  ``setattr``, ``vars()`` or ``__dict__``: :data:`STATE_CALLS`), ``stdin`` (reading the
  standard input);
- ``barrier``: why the statement cannot be analysed (``exec``, ``eval``, ``globals()``,
  ``locals()``, a star import of a module that is not in the standard library, ``del``
  through an alias, an assignment to a module attribute, ``subprocess``...), or ``None``.
  A barrier is ordered after everything before it and before everything after it.

Edges go from an earlier task to a later one: ``def-use`` (read after write), ``anti``
(write after read), ``output`` (write after write), and one edge type per effect class
(writes are ordered with every earlier read or write of the same resource; reads of a
resource among themselves are not), and ``barrier``. A statement that sets process state
is a fence (``state`` edges): it runs after every statement before it and before every
statement after it, on every worker (the paper's preamble: the setting is made on each
process, so whatever later statement reads it sees it); one that cannot run on every
worker (it also writes files, draws random numbers, binds names) makes the whole script
run serially, as do threads, exit handlers, signal handlers and processes the script
starts itself, a replaced builtin or hook of ``sys`` (:attr:`ScriptGraph.serial_reason`).
Functions and classes of the script that keep state between statements (a mutable default
value, a class attribute changed through objects...: :mod:`tilegraph.autopar.held`) keep the
statements that use them on one worker, as the statements reading the standard input are.

Unsure means sequential: what the analysis does not understand adds edges, never removes
them.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from tilegraph.autopar.collector import Collector
from tilegraph.autopar.context import Context
from tilegraph.autopar.edges import Edge, ordering_edges
from tilegraph.autopar.effects import (
    EDGE_TYPES,
    PROCESS_BOUND,
    STATE_CALLS,
    Effect,
    process_bound,
)
from tilegraph.autopar.functions import summarise_functions
from tilegraph.autopar.groups import alias_classes, worker_groups
from tilegraph.autopar.loopsplit import (
    ForLoop,
    for_loop_parts,
    loop_parts,
    loop_split,
    sliced_items,
)
from tilegraph.autopar.summary import Summary

__all__ = ["EDGE_TYPES", "PROCESS_BOUND", "STATE_CALLS", "AnalysisError", "Edge", "Effect",
           "ForLoop", "ScriptGraph", "Task", "analyze", "for_loop_parts", "load_script",
           "loop_parts", "parse_script"]

class AnalysisError(ValueError):
    """The script cannot be analysed (it does not exist or is not valid Python)."""


@dataclass(frozen=True)
class Task:
    """One top-level statement of the script."""

    index: int
    lineno: int
    end_lineno: int
    source: str
    uses: frozenset[str]
    defines: frozenset[str]
    mutates: frozenset[str]
    effects: tuple[Effect, ...]
    barrier: str | None = None
    group: int | None = None
    """Tasks with the same group run on the same worker (shared state such as the global
    random generator or the current figure, values that cannot be pickled, aliases that
    are mutated); the group is named by its first task's index."""
    replicated: bool = False
    """An import, ``def`` or ``class`` that depends on nothing but other such statements:
    every worker runs it, so functions, classes and modules never move."""
    loop: str | None = None
    """For a map over items (``x = [f(v) for v in items]``, a dict comprehension,
    ``x = list(map(f, items))``, a ``for`` loop that only appends to lists or sets dict
    entries): ``"split"`` when its iterations may run in chunks on all the workers, else
    why not."""
    sliced: str | None = None
    """For a loop that splits over the value of a variable it reads nowhere else: that
    variable (each chunk receives only its own part of the value, sliced where it is)."""

    @property
    def label(self) -> str:
        """``line N`` or ``lines N-M``."""
        if self.end_lineno > self.lineno:
            return f"lines {self.lineno}-{self.end_lineno}"
        return f"line {self.lineno}"

    @property
    def headline(self) -> str:
        """The first line of the statement's source, shortened."""
        first = self.source.splitlines()[0] if self.source else ""
        return first if len(first) <= 60 else first[:57] + "..."


@dataclass
class ScriptGraph:
    """The task graph of a script: its tasks in program order and the edges between them."""

    path: str
    source: str
    tasks: list[Task]
    edges: list[Edge]
    group_reasons: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def serial_reason(self) -> str | None:
        """Why the script must run serially, in one process (``None``: it need not): it
        starts threads, processes or exit or signal handlers, or replaces a builtin or a
        hook of ``sys``, which live in the process that made them, or it sets process state
        in a statement that cannot run on every worker."""
        for t in self.tasks:
            for reason in (t.barrier or "").split("; "):
                if process_bound(reason):
                    return f"{t.label}: {reason}"
            kinds = {e.kind for e in t.effects}
            if "state" in kinds and not t.replicated:
                what = sorted(e.detail for e in t.effects if e.kind == "state")[0]
                why = _replicable_state(t, kinds) or "it is kept on one worker"
                return f"{t.label} sets {what} and cannot run on every worker: {why}"
        return None

    def predecessors(self, *, skip: Iterable[str] = ()) -> list[set[int]]:
        """For every task, the tasks it waits for (edges of the types in ``skip`` left out)."""
        skip = set(skip)
        preds: list[set[int]] = [set() for _ in self.tasks]
        for e in self.edges:
            if e.type not in skip:
                preds[e.dst].add(e.src)
        return preds

    def critical_path(self, weights: list[float] | None = None) -> list[int]:
        """The longest chain of tasks (by ``weights``, one per task; default 1 each), as
        task indices in order. Edges of the ``output-stream`` class do not count: the runner
        captures each statement's output and prints it in program order anyway."""
        w = weights if weights is not None else [1.0] * len(self.tasks)
        best = [0.0] * len(self.tasks)
        prev: list[int | None] = [None] * len(self.tasks)
        preds = self.predecessors(skip=("output-stream",))
        for i in range(len(self.tasks)):
            top, arg = 0.0, None
            for p in sorted(preds[i]):
                if best[p] > top:
                    top, arg = best[p], p
            best[i] = top + w[i]
            prev[i] = arg
        if not self.tasks:
            return []
        end = max(range(len(self.tasks)), key=lambda i: (best[i], -i))
        chain = [end]
        while prev[chain[-1]] is not None:
            chain.append(prev[chain[-1]])  # type: ignore[arg-type]
        return chain[::-1]

    def edge_set(self) -> set[tuple[int, int, str, str]]:
        """The edges as ``(src line, dst line, type, variable)`` tuples, for comparisons."""
        return {(self.tasks[e.src].lineno, self.tasks[e.dst].lineno, e.type, e.variable)
                for e in self.edges}


# -- reading a script --------------------------------------------------------------------------


def load_script(path_or_source: str | os.PathLike) -> tuple[str, str]:
    """``(path, source)``: a path to an existing ``.py`` file is read; a string holding a
    newline (or not naming a file) is taken as source text, with path ``<script>``."""
    if isinstance(path_or_source, os.PathLike) or (
            isinstance(path_or_source, str) and "\n" not in path_or_source
            and path_or_source.endswith(".py")):
        path = os.fspath(path_or_source)
        if not os.path.isfile(path):
            raise AnalysisError(f"no such script: {path}")
        with open(path, "rb") as f:
            data = f.read()
        try:
            return path, data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AnalysisError(f"{path} is not UTF-8 text: {exc}") from None
    if not isinstance(path_or_source, str):
        raise TypeError("analyze() needs a path or the source text of a script, got "
                        f"{type(path_or_source).__name__}")
    return "<script>", path_or_source


def parse_script(path: str, source: str) -> ast.Module:
    """The script's AST; a syntax error becomes an :class:`AnalysisError` naming the line."""
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as exc:
        where = f"{exc.filename or path}, line {exc.lineno}"
        text = f": {exc.text.strip()}" if exc.text else ""
        raise AnalysisError(f"syntax error in {where}: {exc.msg}{text}") from None


# -- the graph ---------------------------------------------------------------------------------


def analyze(path_or_source: str | os.PathLike) -> ScriptGraph:
    """The task graph of a script, from its path or its source text, without running it.

    >>> g = analyze("x = 1\\ny = x + 1\\nx = 2\\nprint(y)\\n")
    >>> [(e.src, e.dst, e.type, e.variable) for e in g.edges]
    [(0, 1, 'def-use', 'x'), (1, 2, 'anti', 'x'), (0, 2, 'output', 'x'), (1, 3, 'def-use', 'y')]
    """
    path, source = load_script(path_or_source)
    tree = parse_script(path, source)
    ctx = Context(tree)
    summarise_functions(ctx, tree)
    lines = source.splitlines()
    raw = _statement_summaries(ctx, tree)
    # a name defined at top level, or a module, is a global; anything else read is a builtin
    defined = set(ctx.user_names) | set(ctx.modules)
    for _, s in raw:
        defined |= s.writes
    # aliases: names that may share an object, and which of them are mutated
    names = sorted(defined)
    ids = {n: i for i, n in enumerate(names)}
    alias, members, mutated_classes = alias_classes(raw, ctx, names, ids)
    # a function or class holding from its definition an object that a statement changes
    # (def f(x, d=CONFIG), then CONFIG["k"] = 5) keeps that state: it shares it
    held = {c: sorted(h for h in ctx.held_by.get(c, ()) if h in ids and
                      alias.find(ids[h]) in mutated_classes)
            for c in sorted(ctx.held_by) if c not in ctx.stateful}
    held = {c: h for c, h in held.items() if h}
    if held:
        for c, h in held.items():
            ctx.stateful[c] = (f"{c} holds the object of {h[0]} from its definition on, "
                               "which a statement changes")
        alias, members, mutated_classes = alias_classes(raw, ctx, names, ids)
    # mutation through an alias mutates every member; del through an alias is a barrier
    for _, s in raw:
        for m in list(s.mutates):
            if m in ids and len(members[alias.find(ids[m])]) > 1:
                extra = members[alias.find(ids[m])] - {m}
                s.mutates |= extra
                s.reads |= extra
    for col, m in ctx.del_through:
        if m in ids and len(members[alias.find(ids[m])]) > 1:
            col.barrier(f"del through {m}, which may alias "
                        + ", ".join(sorted(members[alias.find(ids[m])] - {m})))
    for _, s in raw:  # a module's settings are process state, not a variable's value
        if any(e.kind == "state" for e in s.effects):
            s.mutates -= set(ctx.modules)
    tasks_info = []
    after_barrier = False
    for st, s in raw:
        # after a barrier any name may exist: every name read may be a variable
        visible = defined if not after_barrier else defined | s.reads
        after_barrier = after_barrier or bool(s.barriers)
        uses = (s.reads | s.mutates) & visible
        defines = (s.writes | s.mutates) & defined
        tasks_info.append((st, s, uses, defines))
    edges = ordering_edges(tasks_info)
    groups, reasons = worker_groups(tasks_info, ctx, members, alias, ids, mutated_classes,
                              ctx.stateful)
    tasks = []
    for i, (st, s, uses, defines) in enumerate(tasks_info):
        end = st.end_lineno or st.lineno
        first = min([st.lineno, *[d.lineno for d in getattr(st, "decorator_list", [])]])
        text = "\n".join(lines[first - 1:end])
        tasks.append(Task(
            index=i, lineno=first, end_lineno=end, source=text, uses=frozenset(uses),
            defines=frozenset(defines), mutates=frozenset(s.mutates & defined),
            effects=tuple(sorted(s.effects, key=lambda e: (e.kind, e.detail, e.mode))),
            barrier="; ".join(s.barriers) if s.barriers else None, group=groups[i]))
    tasks = _mark_replicated(tasks, edges, raw)
    changed: dict[str, int] = defaultdict(int)   # name -> statements that change it
    for _, s in raw:
        for v in s.mutates:
            changed[v] += 1
    tasks = [replace(t, loop=loop_split(st, s, t, ctx, changed)) for t, (st, s) in
             zip(tasks, raw, strict=True)]
    tasks = [replace(t, sliced=sliced_items(st, s, ctx)) if t.loop == "split" else t
             for t, (st, s) in zip(tasks, raw, strict=True)]
    return ScriptGraph(path, source, tasks, edges, reasons)


def _statement_summaries(ctx: Context, tree: ast.Module) -> list[tuple[ast.stmt, Summary]]:
    """Each top-level statement with the summary of what it does, what the functions it
    references and the methods it calls do included, read in program order (the context
    learns the files opened so far and the functions and classes a statement changes)."""
    raw: list[tuple[ast.stmt, Summary]] = []
    for st in tree.body:
        col = Collector(ctx)
        col.visit(st)
        s = col.s
        # what the referenced user functions and the called methods do
        extra = Summary()
        for r in s.refs:
            if r in ctx.summaries:
                extra.merge(ctx.summaries[r])
        for m in s.methods:
            if m in ctx.method_summaries:
                extra.merge(ctx.method_summaries[m])
        s.reads |= extra.reads
        s.writes |= extra.writes
        s.mutates |= extra.mutates
        s.reads |= extra.mutates
        s.effects |= extra.effects
        s.barriers += [b for b in extra.barriers if b not in s.barriers]
        ctx.file_vars_all |= s.file_vars
        raw.append((st, s))
        for c in sorted(s.mutates & ctx.user_callables):   # f.calls = 0, a.items.append(1)
            ctx.stateful.setdefault(c, f"{c} is changed at line {st.lineno}")
    return raw


def _replicable_state(t: Task, kinds: set[str]) -> str | None:
    """Why a statement that sets process state cannot run on every worker (``None``: it
    can: besides the setting it only reads values, imports, prints or reads the
    environment, the working directory or ``sys.path``)."""
    if t.barrier is not None:
        return f"it is also a barrier ({t.barrier})"
    if t.group is not None:
        return "it shares values kept on one worker"
    if t.defines:
        return "it also binds or changes " + ", ".join(sorted(t.defines))
    others = kinds - {"state", "import", "output"}
    writes = {e.kind for e in t.effects if e.mode == "w"} - {"state", "import", "output"}
    if writes or others - {"env", "cwd"}:
        return "it also changes " + ", ".join(sorted(writes or others - {"env", "cwd"}))
    return None


def _mark_replicated(tasks: list[Task], edges: list[Edge], raw) -> list[Task]:
    """Imports, defs and classes that depend only on each other run on every worker."""
    preds: list[set[int]] = [set() for _ in tasks]
    for e in edges:
        preds[e.dst].add(e.src)
    ok: list[bool] = []
    out = []
    for t, (st, s) in zip(tasks, raw, strict=True):
        kinds = {e.kind for e in s.effects}
        if "state" in kinds:  # set on every worker, if nothing else it does forbids it
            good = _replicable_state(t, kinds) is None
            ok.append(good)   # a def after it may run everywhere too
            out.append(replace(t, replicated=True) if good else t)
            continue
        good = (isinstance(st, (ast.Import, ast.ImportFrom, ast.FunctionDef,
                                ast.AsyncFunctionDef, ast.ClassDef))
                and t.barrier is None and t.group is None and kinds <= {"import"}
                and not any(e.mode == "w" and e.detail == "sys.path" for e in s.effects)
                and all(ok[p] for p in preds[t.index]))
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            good = good and not (t.mutates or kinds)
        ok.append(good)
        out.append(replace(t, replicated=True) if good else t)
    return out
