"""Running a script: serially, profiled, or in parallel through the one pipeline.

:func:`run_script` lowers the script's analysed graph to a TaskGraph of
:class:`~tilegraph.autopar.steps.CodeStep` tasks (:func:`script_taskgraph`) and runs it
with :func:`tilegraph.pipeline.run` on a :class:`~tilegraph.autopar.processes.ProcessesBackend`:
the executor core schedules the statements (program order first, a failure stopping the run
as the serial run stops), the backend runs each one in a forked worker process holding a
namespace. :func:`run_serial` runs the script as ``python script.py`` does, and
:func:`profile_script` times each statement of one serial run.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import functools
import io
import os
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tilegraph.autopar.analysis import (
    ForLoop,
    ScriptGraph,
    Task,
    analyze,
    for_loop_parts,
    load_script,
    loop_parts,
    parse_script,
)
from tilegraph.autopar.loops import check_workers, chunk_of, guided_sizes
from tilegraph.autopar.processes import ProcessesBackend, StepsDone
from tilegraph.autopar.steps import (
    CodeStep,
    Part,
    ScriptError,
    ScriptExit,
    error_info,
    exit_status,
    value_size,
)
from tilegraph.graph import GraphBuilder
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.pipeline import run as run_pipeline

__all__ = ["Profile", "RunStats", "ScriptError", "ScriptExit", "has_parallelism",
           "profile_script", "run_script", "run_serial", "script_taskgraph"]


def script_filename(path: str) -> str:
    """The file name the script's code carries: absolute, as ``python script.py`` has it."""
    return path if path.startswith("<") else os.path.abspath(path)


def compile_statements(graph: ScriptGraph) -> list[Any]:
    """Every top-level statement compiled alone, keeping the script's file and lines."""
    tree = parse_script(graph.path, graph.source)
    name = script_filename(graph.path)
    return [compile(ast.Module(body=[st], type_ignores=[]), name, "exec") for st in tree.body]


def _changes(t: Task) -> tuple[str, ...]:
    """The parts of the process state statement ``t`` may change."""
    parts = []
    if any(e.kind == "cwd" and e.mode == "w" for e in t.effects):
        parts.append("cwd")
    if any(e.kind == "env" and e.mode == "w" for e in t.effects):
        parts.append("env")
    if any(e.kind == "import" and e.detail == "sys.path" and e.mode == "w"
           for e in t.effects):
        parts.append("path")
    return tuple(parts)


def script_taskgraph(graph: ScriptGraph, split: int = 1) -> TaskGraph:
    """The TaskGraph of a script: task ``("statement", i)`` per top-level statement, a
    :class:`~tilegraph.autopar.steps.CodeStep` (its compiled code, the names it uses and
    defines), with the analysis' edges except the ``output-stream`` class (output is
    captured per statement and written in program order), ``priority`` and ``serial`` =
    program position, and no retries. A statement that writes files waits for every
    statement before it, so that an exception stops the run before any later file is
    written; in a script that may log to files (:func:`logs_to_files`), so does a
    statement that reads files, so that it finds the log lines of the statements before it
    (written when their output is).

    With ``split > 1``, a map over items that may split (``Task.loop == "split"``) becomes
    chunk steps ``("statement", i, k)``, each mapping one part of the items (large parts
    first, then smaller ones: :func:`~tilegraph.autopar.loops.guided_sizes`, taken in
    order by the processes as they become free), and the step ``("statement", i)`` that
    joins their results in order (program positions are renumbered so that each step has
    its own). When the items are a variable the loop
    reads nowhere else (``Task.sliced``), a chunk step needs only its part of it: the
    process holding the items slices them and sends that part alone
    (:class:`~tilegraph.autopar.steps.Part`)."""
    codes = compile_statements(graph)
    tree = parse_script(graph.path, graph.source)
    preds = graph.predecessors(skip=("output-stream",))
    builder = GraphBuilder()
    path = script_filename(graph.path)
    gate = 0   # the last statement that writes files (it waits for all before it)
    pos = 0
    logs = logs_to_files(graph)
    for t, code, st in zip(graph.tasks, codes, tree.body, strict=True):
        i = t.index
        deps = set(preds[i])
        writes = any(e.kind == "file" and e.mode == "w" for e in t.effects)
        if writes or (logs and any(e.kind == "file" for e in t.effects)):
            deps.update(range(gate, i))
        if writes:
            gate = i
        keys = [("statement", d) for d in sorted(deps)]
        meta = {"kind": "statement", "line": f"{path}:{t.lineno}", "retries": 0}
        if split > 1 and t.loop == "split":
            parts = []
            shape = for_loop_parts(st)
            if isinstance(shape, ForLoop):   # the chunks need neither its collections
                collected = frozenset(shape.lists + shape.dicts)   # nor its names' values
                chunk_reads = frozenset(t.uses) - collected - frozenset(shape.bound)
                join_reads = collected | frozenset(shape.bound)
                join_writes = collected | frozenset(shape.bound)
            else:
                chunk_reads, join_reads, join_writes = (frozenset(t.uses), frozenset(),
                                                        frozenset(t.defines))
            sizes = guided_sizes(split)
            for k in range(len(sizes)):
                part = None
                if t.sliced is not None and t.sliced in chunk_reads:
                    part = Part(t.sliced, _items_name(i, k),
                                functools.partial(chunk_of, k=k, n=sizes),
                                sizes[k] / sum(sizes))
                step = CodeStep(pos, _chunk_code(st, i, k, sizes, path, part is not None),
                                chunk_reads, frozenset({_part_name(i, k)}),
                                label=f"{t.label} (part {k + 1} of {len(sizes)})",
                                lineno=t.lineno, part=part)
                builder.add(("statement", i, k), step, deps=keys, name=step.label,
                            priority=pos, serial=pos, **meta)
                parts.append(("statement", i, k))
                pos += 1
            code = _join_code(st, i, len(sizes), path)
            step = CodeStep(pos, code,
                            frozenset(_part_name(i, k) for k in range(len(sizes))) | join_reads,
                            join_writes, label=t.label, lineno=t.lineno, group=t.group)
            builder.add(("statement", i), step, deps=parts, name=t.label, priority=pos,
                        serial=pos, **meta)
            pos += 1
            continue
        step = CodeStep(pos, code, frozenset(t.uses), frozenset(t.defines), label=t.label,
                        lineno=t.lineno, everywhere=t.replicated,
                        reads_all=t.barrier is not None, group=t.group, changes=_changes(t),
                        stdin=any(e.kind == "stdin" for e in t.effects))
        builder.add(("statement", i), step, deps=keys, name=t.label, priority=pos,
                    serial=pos, **meta)
        pos += 1
    return builder.build()


def reads_stdin(graph: ScriptGraph) -> bool:
    """Whether a statement of the script reads the standard input (``input()``,
    ``sys.stdin``, ``fileinput``...)."""
    return any(e.kind == "stdin" for t in graph.tasks for e in t.effects)


def stdin_stays_here() -> str | None:
    """Why the standard input of this process cannot be read by a worker process (its
    statements then run serially, in this process): it is a terminal (a prompt written
    by a statement must show before the statement waits for the answer), or it is closed;
    ``None``: it can."""
    try:
        os.fstat(0)
    except OSError:
        return "the standard input is closed"
    if sys.__stdin__ is None:   # closed when python started (0 may be another file now)
        return "the standard input is closed"
    if os.isatty(0):
        return "the standard input is a terminal"
    return None


def logs_to_files(graph: ScriptGraph) -> bool:
    """Whether the script may log to files: it sets logging's configuration
    (``logging.basicConfig(filename=...)``) or makes a ``FileHandler``. Its log lines reach
    the files in program order, when the output of their statements is written."""
    return any(e.kind == "state" and e.detail == "logging's configuration"
               for t in graph.tasks for e in t.effects) or \
        any("FileHandler" in t.source for t in graph.tasks)


def _part_name(i: int, k: int) -> str:
    return f"_tilegraph_part_{i}_{k}"


def _items_name(i: int, k: int) -> str:
    """The name the part ``k`` of a split loop's items is sent under."""
    return f"_tilegraph_items_{i}_{k}"


def _globals_call() -> ast.expr:
    return ast.Call(ast.Name("globals", ast.Load()), [], [])


def _chunk_items(items: ast.expr, i: int, k: int, n: tuple[int, ...], sent: bool) -> ast.expr:
    """The items of chunk ``k`` (``n``: the chunks' relative sizes): ``chunk_of(items, k,
    n)``; when its part may have been
    sent (``sent``), ``_tilegraph_items_i_k if "_tilegraph_items_i_k" in globals() else
    chunk_of(items, k, n)`` (the process holding the items slices them itself, and a
    missing variable raises the serial ``NameError``)."""
    chunk = ast.Call(_helper("chunk_of"), [items, ast.Constant(k), ast.Constant(n)], [])
    if not sent:
        return chunk
    name = _items_name(i, k)
    test = ast.Compare(ast.Constant(name), [ast.In()], [_globals_call()])
    return ast.IfExp(test, ast.Name(name, ast.Load()), chunk)


def _dropping_items(body: list[ast.stmt], i: int, k: int) -> list[ast.stmt]:
    """``try: body finally: globals().pop("_tilegraph_items_i_k", None)``: the part sent
    for a chunk is freed with it."""
    pop = ast.Expr(ast.Call(ast.Attribute(_globals_call(), "pop", ast.Load()),
                            [ast.Constant(_items_name(i, k)), ast.Constant(None)], []))
    return [ast.Try(body=body, handlers=[], orelse=[], finalbody=[pop])]


def _helper(name: str) -> ast.expr:
    """``__import__("tilegraph.autopar.loops", fromlist=[name]).name`` as an expression."""
    mod = ast.Call(ast.Name("__import__", ast.Load()),
                   [ast.Constant("tilegraph.autopar.loops")],
                   [ast.keyword("fromlist", ast.List([ast.Constant(name)], ast.Load()))])
    return ast.Attribute(mod, name, ast.Load())


def _compile_at(node: ast.stmt | list[ast.stmt], st: ast.stmt, path: str) -> Any:
    module = ast.Module(body=node if isinstance(node, list) else [node], type_ignores=[])
    for n in ast.walk(module):   # every new node at the statement's line
        if isinstance(n, (ast.expr, ast.stmt)) and getattr(n, "lineno", None) is None:
            ast.copy_location(n, st)
    ast.fix_missing_locations(module)
    return compile(module, path, "exec")


class _Collect(ast.NodeTransformer):
    """The collections of a ``for`` loop's body redirected to a chunk's own."""

    def __init__(self, part: str, names: frozenset[str]):
        self.part, self.names = part, names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            return node
        state = ast.Subscript(ast.Name(self.part, ast.Load()), ast.Constant(0), ast.Load())
        return ast.copy_location(ast.Subscript(state, ast.Constant(node.id), node.ctx), node)


def _for_chunk_code(st: ast.For, shape: ForLoop, i: int, k: int, n: tuple[int, ...], path: str,
                    sent: bool) -> Any:
    """``part = for_part(...)``, the loop over chunk ``k`` with the collections redirected
    and ``part[1] = True`` first in its body, then ``snapshot(part, globals(), names)``."""
    part = _part_name(i, k)
    loop = _Collect(part, frozenset(shape.lists + shape.dicts)).visit(copy.deepcopy(st))
    mark = ast.Assign([ast.Subscript(ast.Name(part, ast.Load()), ast.Constant(1),
                                     ast.Store())], ast.Constant(True))
    loop.body = [mark, *loop.body]
    loop.iter = _chunk_items(loop.iter, i, k, n, sent)
    names = ast.Tuple([ast.Constant(x) for x in shape.bound], ast.Load())
    start = ast.Assign([ast.Name(part, ast.Store())], ast.Call(
        _helper("for_part"), [ast.Tuple([ast.Constant(x) for x in shape.lists], ast.Load()),
                              ast.Tuple([ast.Constant(x) for x in shape.dicts], ast.Load())],
        []))
    end = ast.Expr(ast.Call(_helper("snapshot"), [
        ast.Name(part, ast.Load()), ast.Call(ast.Name("globals", ast.Load()), [], []), names],
        []))
    body = [start, loop, end]
    return _compile_at(_dropping_items(body, i, k) if sent else body, st, path)


def _chunk_code(st: ast.stmt, i: int, k: int, n: tuple[int, ...], path: str,
                sent: bool = False) -> Any:
    """``_tilegraph_part_i_k = <the map over chunk_of(items, k, n)>`` (for a ``for`` loop:
    its body over the chunk, into fresh collections); ``sent``: the chunk's part of the
    items may have been sent to it (:func:`_chunk_items`)."""
    kind, _, _ = loop_parts(st)
    if kind == "for":
        return _for_chunk_code(st, for_loop_parts(st), i, k, n, path, sent)
    value = copy.deepcopy(st.value)
    if kind == "map":
        holder, slot = value.args[0].args, 1
    else:
        holder, slot = None, None
    items = holder[slot] if holder is not None else value.generators[0].iter
    chunk = _chunk_items(items, i, k, n, sent)
    if holder is not None:
        holder[slot] = chunk
    else:
        value.generators[0].iter = chunk
    node = ast.Assign([ast.Name(_part_name(i, k), ast.Store())], value)
    return _compile_at(_dropping_items([node], i, k) if sent else node, st, path)


def _join_code(st: ast.stmt, i: int, n: int, path: str) -> Any:
    """``T = join_parts(kind, [_tilegraph_part_i_0, ...])`` (for a ``for`` loop:
    ``join_for(globals(), [parts], lists, dicts)``)."""
    kind, _, target = loop_parts(st)
    parts = ast.List([ast.Name(_part_name(i, k), ast.Load()) for k in range(n)], ast.Load())
    if kind == "for":
        shape = for_loop_parts(st)
        call = ast.Call(_helper("join_for"), [
            ast.Call(ast.Name("globals", ast.Load()), [], []), parts,
            ast.Tuple([ast.Constant(x) for x in shape.lists], ast.Load()),
            ast.Tuple([ast.Constant(x) for x in shape.dicts], ast.Load())], [])
        return _compile_at(ast.Expr(call), st, path)
    value = ast.Call(_helper("join_parts"), [ast.Constant(kind), parts], [])
    node = ast.Assign([ast.Name(target.id, ast.Store())], value)
    return _compile_at(node, st, path)


@dataclass(frozen=True)
class RunStats:
    """What a parallel run did: statements per worker process, values moved and their
    bytes, and the bytes each worker process received."""

    workers: int
    tasks_per_worker: tuple[int, ...]
    transfers: int
    bytes_moved: int
    bytes_received: tuple[int, ...] = ()


_HOOKS = ("excepthook", "displayhook", "unraisablehook", "breakpointhook", "stdin")


@contextlib.contextmanager
def _process_hooks_kept() -> Iterator[dict[str, Any]]:
    """Run a script in this process and put back afterwards what it may replace that this
    process uses too: the builtins and the hooks of ``sys`` (yields their values before)."""
    hooks = {name: getattr(sys, name) for name in _HOOKS}
    names = dict(vars(builtins))
    try:
        yield hooks
    finally:
        for name, value in hooks.items():
            setattr(sys, name, value)
        now = vars(builtins)
        for name in set(now) - set(names):
            del now[name]
        for name, value in names.items():
            if now.get(name, now) is not value:
                now[name] = value


def _run_excepthook(exc: BaseException, path: str, text: str) -> str:
    """Call the ``sys.excepthook`` a script set for the exception that ends it, as the
    interpreter does (its traceback from the script's first frame); what the serial run
    prints besides what the hook prints: nothing, or the hook's own error and the
    original traceback when it raises."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    try:
        sys.excepthook(type(exc), exc, tb if tb is not None else exc.__traceback__)
    except SystemExit as stop:
        code, message = exit_status(stop)
        raise ScriptExit(code, message) from None
    except BaseException as broke:   # what the interpreter prints then
        if broke.__context__ is exc:   # the interpreter calls it once exc is handled
            broke.__context__ = None
        hook_text, _, _ = error_info(broke, path)
        return f"Error in sys.excepthook:\n{hook_text}\nOriginal exception was:\n{text}"
    return ""


def run_serial(path: str, source: str, argv: list[str] | None = None) -> None:
    """Run the script in this process, as ``python script.py`` would (a fresh ``__main__``
    namespace, ``sys.argv`` and ``sys.path[0]`` set for it; a ``sys.excepthook`` it sets
    is called when it fails). The builtins and the hooks of ``sys`` are put back after."""
    tree = parse_script(path, source)
    path = script_filename(path)
    code = compile(tree, path, "exec")
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=builtins)
    saved = sys.modules.get("__main__"), list(sys.argv), list(sys.path)
    sys.modules["__main__"] = main
    sys.argv[:] = argv if argv is not None else [path]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with _process_hooks_kept() as hooks:
            try:
                exec(code, main.__dict__)
            except SystemExit as exc:
                code_, text = exit_status(exc)
                if text:
                    sys.stderr.write(text)
                if code_:
                    raise ScriptExit(code_) from None
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                text, fname, line = error_info(exc, path)
                if sys.excepthook is not hooks["excepthook"]:
                    text = _run_excepthook(exc, path, text)
                raise ScriptError(text, fname, line) from None
    finally:
        if saved[0] is not None:
            sys.modules["__main__"] = saved[0]
        sys.argv[:] = saved[1]
        sys.path[:] = saved[2]


def run_script(path_or_source: str | os.PathLike, workers: int = 2, *,
               argv: list[str] | None = None, graph: ScriptGraph | None = None,
               stdout: Any = None, stderr: Any = None, report: str | None = None,
               callbacks: Any = ()) -> RunStats:
    """Run a script on ``workers`` forked worker processes, in the order its task graph
    allows, with the same standard output, standard error and files as the serial run.

    The run goes through the one pipeline (:func:`tilegraph.pipeline.run`) on a
    :class:`~tilegraph.autopar.processes.ProcessesBackend`: ``report`` writes the run's HTML
    report (a task stream of the statements) to that path, ``callbacks`` are event
    subscribers, as for any run.

    With ``workers=1``, when the graph has no two tasks that may run at once, or when the
    script must run in one process (:attr:`ScriptGraph.serial_reason`: threads, exit
    handlers, replaced builtins or hooks of ``sys``...), the script runs serially in this
    process (unless a report or callbacks are asked for: then it runs through the pipeline
    on that many processes). A script that reads the standard input has it read by the
    worker process its reading statements run on (the analysis keeps them on one, in
    program order), or runs serially when the standard input is a terminal or closed
    (:func:`stdin_stays_here`). An exception
    of the script raises :class:`ScriptError` (its ``traceback`` is what ``python
    script.py`` prints) after the output of every statement before it was written;
    ``sys.exit(n)`` with ``n != 0`` raises :class:`ScriptExit`. No worker process is left
    behind, whatever happens.
    """
    workers = check_workers(workers)
    path, source = load_script(path_or_source)
    g = graph if graph is not None else analyze(path_or_source)
    argv = list(argv) if argv is not None else [path]
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    stdin = reads_stdin(g)
    if (workers == 1 or not has_parallelism(g) or g.serial_reason is not None
            or (stdin and stdin_stays_here() is not None)) \
            and report is None and not callbacks:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            run_serial(path, source, argv)
        finally:
            sys.stdout, sys.stderr = saved
        return RunStats(1, (len(g.tasks),), 0, 0, (0,))
    backend = ProcessesBackend(workers, filename=script_filename(g.path), argv=argv,
                               directory=os.path.dirname(os.path.abspath(path)), out=out,
                               err=err, stdin=stdin)
    tg = script_taskgraph(g, split=workers)
    done: list[StepsDone] = []   # the run's figures, sent by the backend as it ends

    def figures(event: Any) -> None:
        if isinstance(event, StepsDone):
            done.append(event)

    try:
        run_pipeline(tg, tg.keys, backend=backend, fuse=False, retries=0, progress=False,
                     callbacks=(*callbacks, figures), report=report)
    except ScriptExit as exc:
        if exc.message:
            err.write(exc.message)
        if exc.code:
            raise
    (end,) = done
    return RunStats(workers, end.tasks_per_worker, end.transfers, end.bytes_moved,
                    end.bytes_received)


def has_parallelism(graph: ScriptGraph) -> bool:
    """Whether two tasks of the graph (not run on every worker) may run at the same time,
    or a loop's iterations may (a map over items that splits)."""
    if any(t.loop == "split" for t in graph.tasks):
        return True
    preds = graph.predecessors(skip=("output-stream",))
    level: list[int] = []
    seen: set[int] = set()
    for i, t in enumerate(graph.tasks):
        lv = 1 + max((level[p] for p in preds[i]), default=0)
        level.append(lv)
        if not t.replicated:
            if lv in seen:
                return True
            seen.add(lv)
    return False


@dataclass(frozen=True)
class Profile:
    """One serial run, timed: ``seconds[i]`` of task ``i``, and ``nbytes[i]``, the estimated
    bytes of the variables it defines, just after it ran."""

    seconds: tuple[float, ...]
    nbytes: tuple[int, ...]

    @property
    def total(self) -> float:
        return float(sum(self.seconds))


def profile_script(graph: ScriptGraph, argv: list[str] | None = None) -> Profile:
    """Run the script of ``graph`` once, serially in this process, timing every top-level
    statement and sizing the variables it defines. Its standard output and error are
    captured and dropped; its other effects (files...) happen, and the builtins and hooks
    of ``sys`` it replaces are put back after. An exception of the script raises
    :class:`ScriptError`."""
    import time

    codes = compile_statements(graph)
    filename = script_filename(graph.path)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=filename, __builtins__=builtins)
    ns = main.__dict__
    saved = (sys.modules.get("__main__"), list(sys.argv), list(sys.path), sys.stdout,
             sys.stderr, os.getcwd())
    sys.modules["__main__"] = main
    sys.argv[:] = argv if argv is not None else [graph.path]
    sys.path.insert(0, os.path.dirname(os.path.abspath(graph.path)))
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    seconds, sizes = [], []
    try:
        with _process_hooks_kept():
            for t, code in zip(graph.tasks, codes, strict=True):
                t0 = time.perf_counter()
                try:
                    exec(code, ns)
                except SystemExit:
                    break
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:
                    text, fname, line = error_info(exc, filename)
                    raise ScriptError(text, fname, line) from None
                seconds.append(time.perf_counter() - t0)
                sizes.append(sum(value_size(ns[v]) for v in t.defines if v in ns))
    finally:
        if saved[0] is not None:
            sys.modules["__main__"] = saved[0]
        sys.argv[:] = saved[1]
        sys.path[:] = saved[2]
        sys.stdout, sys.stderr = saved[3], saved[4]
        if os.getcwd() != saved[5]:
            os.chdir(saved[5])
    missing = len(graph.tasks) - len(seconds)
    return Profile(tuple(seconds) + (0.0,) * missing, tuple(sizes) + (0,) * missing)
