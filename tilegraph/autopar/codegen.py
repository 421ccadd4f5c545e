"""``tilegraph autopar script.py --saveas parallel.py``: the plan as a standalone script.

The written script holds the original's source and its task graph as plain literals (one
task per top-level statement with the names it uses, defines and mutates, its side effects
and worker group; the edges with their type and variable), a comment table a person can
read (each task, what it waits for, the critical path), and a ``main`` that runs that plan
with tilegraph's runner: ``python parallel.py [--workers N] [script arguments]``. It does not
analyse the original again, so it runs the plan that was saved, even after the original
changed (its tracebacks then name the saved text's lines).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tilegraph.autopar.analysis import Edge, Effect, ScriptGraph, Task

_HEADER = '''\
"""The parallel plan of {name}, written by `tilegraph autopar {name} --saveas {out}`.

Run it as the original would be run: `python {out} [--workers N] [arguments]`.
Every top-level statement of {name} is a task; a task starts once the tasks it waits for
(below) have finished, on one of N forked worker processes, with the standard output and
files of the serial run.
"""
'''


def _task_dict(t: Task) -> dict[str, Any]:
    return {"index": t.index, "lineno": t.lineno, "end_lineno": t.end_lineno,
            "source": t.source, "uses": sorted(t.uses), "defines": sorted(t.defines),
            "mutates": sorted(t.mutates),
            "effects": [(e.kind, e.detail, e.mode) for e in t.effects],
            "barrier": t.barrier, "group": t.group, "replicated": t.replicated,
            "loop": t.loop, "sliced": t.sliced}


def generate(graph: ScriptGraph, saveas: str = "parallel.py") -> str:
    """The text of the standalone script that runs ``graph``'s plan."""
    name = os.path.basename(graph.path)
    out = [_HEADER.format(name=name, out=os.path.basename(saveas)), ""]
    waits: dict[int, dict[int, list[str]]] = {}
    for e in graph.edges:
        waits.setdefault(e.dst, {}).setdefault(e.src, []).append(e.variable)
    out.append("# task  lines       statement                                  waits for "
               "(task: variables)")
    for t in graph.tasks:
        if t.replicated:
            where = "- (run on every worker)"
        else:
            parts = [f"{src}: {', '.join(sorted(set(v)))}"
                     for src, v in sorted(waits.get(t.index, {}).items())]
            where = "; ".join(parts) or "-"
            if len(where) > 60:
                where = where[:57] + "..."
        lines = t.label.split(" ", 1)[1]
        out.append(f"# {t.index:<5} {lines:<11} {t.headline[:42]:<42} {where}")
    chain = graph.critical_path()
    out.append(f"# critical path: {' -> '.join(map(str, chain))}")
    out.append("")
    out.append("from tilegraph.autopar.codegen import run_saved_plan")
    out.append("")
    out.append(f"PATH = {graph.path!r}")
    out.append(f"SOURCE = {graph.source!r}")
    out.append("TASKS = [")
    for t in graph.tasks:
        out.append(f"    {_task_dict(t)!r},")
    out.append("]")
    out.append("EDGES = [  # (from task, to task, type, variable)")
    for e in graph.edges:
        out.append(f"    {(e.src, e.dst, e.type, e.variable)!r},")
    out.append("]")
    out.append(f"GROUP_REASONS = {dict(graph.group_reasons)!r}")
    out.append("")
    out.append('if __name__ == "__main__":')
    out.append("    raise SystemExit(run_saved_plan(PATH, SOURCE, TASKS, EDGES, GROUP_REASONS))")
    return "\n".join(out) + "\n"


def save(graph: ScriptGraph, saveas: str) -> str:
    """Write :func:`generate`'s script to ``saveas`` (its directory must exist)."""
    parent = os.path.dirname(os.path.abspath(saveas))
    if not os.path.isdir(parent):
        raise FileNotFoundError(f"cannot write {saveas!r}: directory {parent!r} does not exist")
    text = generate(graph, saveas)
    compile(text, saveas, "exec")  # what is written is valid Python
    with open(saveas, "w", encoding="utf-8") as f:
        f.write(text)
    return saveas


def load_plan(path: str, source: str, tasks: list[dict], edges: list[tuple],
              group_reasons: dict | None = None) -> ScriptGraph:
    """The :class:`ScriptGraph` a saved script holds."""
    built = []
    for d in tasks:
        d = dict(d)
        d["uses"] = frozenset(d["uses"])
        d["defines"] = frozenset(d["defines"])
        d["mutates"] = frozenset(d["mutates"])
        d["effects"] = tuple(Effect(*e) for e in d["effects"])
        built.append(Task(**d))
    return ScriptGraph(path, source, built, [Edge(*e) for e in edges],
                       dict(group_reasons or {}))


def run_saved_plan(path: str, source: str, tasks: list[dict], edges: list[tuple],
                   group_reasons: dict | None = None, argv: list[str] | None = None) -> int:
    """The ``main`` of a saved script: ``[--workers N] [arguments of the script]``; returns
    the exit status the original would have."""
    from tilegraph.autopar.runner import ScriptError, ScriptExit, run_script

    args = list(sys.argv[1:] if argv is None else argv)
    workers = os.cpu_count() or 1
    if args[:1] == ["--workers"]:
        p = argparse.ArgumentParser(prog=os.path.basename(sys.argv[0]))
        p.add_argument("--workers", type=int, required=True)
        known, args = p.parse_known_args(args[:2])[0], args[2:]
        workers = known.workers
        if workers < 1:
            print(f"--workers must be at least 1, got {workers}", file=sys.stderr)
            return 2
    graph = load_plan(path, source, tasks, edges, group_reasons)
    same = False
    if os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            same = f.read() == source
    try:
        run_script(path if same else source, workers, argv=[path, *args], graph=graph)
    except ScriptError as exc:
        sys.stderr.write(exc.traceback)
        return exc.exit_code
    except ScriptExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0
