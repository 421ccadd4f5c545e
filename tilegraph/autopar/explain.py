"""Showing a script's task graph: the table of edges, the critical path, Graphviz dot."""

from __future__ import annotations

from tilegraph.autopar.analysis import EDGE_TYPES, ScriptGraph

_COLOURS = {"def-use": "black", "anti": "orange", "output": "red",
            "output-stream": "gray50", "file": "blue", "cwd": "purple", "env": "purple",
            "random": "darkgreen", "figure": "brown", "import": "gray70", "barrier": "red"}


def edge_table(graph: ScriptGraph) -> list[tuple[str, str, str, str]]:
    """``(from, to, type, variable)`` rows, ``from``/``to`` as ``line N``, sorted by the
    lines of the tasks and then by the type of the edge (in :data:`EDGE_TYPES` order)."""
    rank = {t: k for k, t in enumerate(EDGE_TYPES)}
    edges = sorted(graph.edges, key=lambda e: (e.dst, e.src, rank[e.type], e.variable))
    return [(f"line {graph.tasks[e.src].lineno}", f"line {graph.tasks[e.dst].lineno}",
             e.type, e.variable) for e in edges]


def explain(graph: ScriptGraph, profile: list[float] | None = None) -> str:
    """The explanation ``tilegraph autopar script.py --explain`` prints: the tasks, the
    table of edges, the groups of tasks kept on one worker, and the critical path (by the
    measured seconds of each task when ``profile`` is given, else by statement count)."""
    out = [f"{graph.path}: {len(graph.tasks)} tasks, {len(graph.edges)} edges"]
    out.append("")
    out.append("tasks:")
    for t in graph.tasks:
        flags = []
        if t.replicated:
            flags.append("on every worker")
        if t.group is not None:
            flags.append(f"group {graph.tasks[t.group].lineno}")
        if t.barrier:
            flags.append(f"barrier: {t.barrier}")
        secs = f"  {profile[t.index]:.3f} s" if profile is not None else ""
        extra = f"  [{'; '.join(flags)}]" if flags else ""
        out.append(f"  {t.label:<14} {t.headline}{secs}{extra}")
    rows = edge_table(graph)
    out.append("")
    out.append("edges:")
    header = ("from", "to", "type", "variable")
    widths = [max(len(header[k]), *(len(r[k]) for r in rows)) if rows else len(header[k])
              for k in range(4)]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths)
    out.append(fmt.format(*header).rstrip())
    for r in rows:
        out.append(fmt.format(*r).rstrip())
    if not rows:
        out.append("  (none: every statement is independent)")
    if graph.group_reasons:
        out.append("")
        out.append("kept on one worker:")
        for g, reason in sorted(graph.group_reasons.items()):
            lines = [t.lineno for t in graph.tasks if t.group == g]
            out.append(f"  lines {', '.join(map(str, lines))}: {reason}")
    chain = graph.critical_path(profile)
    out.append("")
    if profile is not None:
        total = sum(profile)
        length = sum(profile[i] for i in chain)
        out.append(f"critical path ({len(chain)} statements, {length:.3f} s of "
                   f"{total:.3f} s serial):")
    else:
        out.append(f"critical path ({len(chain)} of {len(graph.tasks)} statements):")
    for i in chain:
        t = graph.tasks[i]
        out.append(f"  {t.label:<14} {t.headline}")
    return "\n".join(out) + "\n"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(graph: ScriptGraph) -> str:
    """Graphviz dot text of the graph: one node per statement (its line and first line of
    source), one edge per dependency, coloured by type and labelled with its variable."""
    lines = ["digraph script {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    crit = set(graph.critical_path())
    for t in graph.tasks:
        style = ', style="bold"' if t.index in crit else ""
        lines.append(f'  t{t.index} [label="{_quote(t.label + ": " + t.headline)}"{style}];')
    for e in graph.edges:
        colour = _COLOURS.get(e.type, "black")
        dashed = "" if e.type == "def-use" else ", style=dashed"
        lines.append(f'  t{e.src} -> t{e.dst} [label="{_quote(e.type + " " + e.variable)}", '
                     f'color="{colour}"{dashed}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
