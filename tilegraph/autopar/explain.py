"""Showing a script's task graph: the table of edges, the critical path, Graphviz dot."""

from __future__ import annotations

from tilegraph.autopar.analysis import EDGE_TYPES, ScriptGraph

_COLOURS = {"def-use": "black", "anti": "orange", "output": "red",
            "output-stream": "gray50", "file": "blue", "cwd": "purple", "env": "purple",
            "random": "darkgreen", "figure": "brown", "import": "gray70", "state": "darkviolet",
            "barrier": "red"}


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
    if graph.serial_reason is not None:
        out.append(f"runs serially, in one process: {graph.serial_reason}")
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
    loops = [t for t in graph.tasks if t.loop is not None]
    if loops:
        out.append("")
        out.append("loops over items:")
        for t in loops:
            how = ("splits: its iterations run in chunks on all the workers, joined in order"
                   if t.loop == "split" else f"does not split: {t.loop}")
            if t.sliced is not None:
                how += f"; each chunk receives only its part of {t.sliced}"
            out.append(f"  {t.label:<14} {how}")
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


def _noop(*_: object) -> None:
    return None


def simulate_workers(graph: ScriptGraph, seconds: list[float] | tuple[float, ...],
                     nbytes: list[int] | tuple[int, ...],
                     workers: tuple[int, ...] = (1, 2, 4, 8)) -> list[tuple[int, float, int]]:
    """``(workers, seconds, peak bytes per worker)`` for each worker count: the task graph
    with the measured seconds and sizes, placed as the runner places it (each task on the
    worker where it would finish first, counting the time to move its inputs; tasks that
    share state on one worker) and run by :func:`tilegraph.plan.simulate.simulate` with
    the default cost model for moving values. A loop that splits (``Task.loop ==
    "split"``) is its chunks, as the runner makes them (:func:`~tilegraph.autopar.loops.
    guided_sizes`), each timed as its share of the loop's items, and a join; each chunk
    goes to the worker free first, as the runner hands them out."""
    import numpy as np

    from tilegraph.autopar.loops import guided_sizes
    from tilegraph.graph import GraphBuilder
    from tilegraph.plan.cost import CostModel
    from tilegraph.plan.simulate import simulate

    if len(seconds) != len(graph.tasks) or len(nbytes) != len(graph.tasks):
        raise ValueError(f"need one time and one size per task ({len(graph.tasks)}), got "
                         f"{len(seconds)} and {len(nbytes)}")
    model = CostModel()
    preds = graph.predecessors(skip=("output-stream",))
    rows = []
    for p in workers:
        builder = GraphBuilder()
        steps = []   # (key, task index, seconds, nbytes, the keys it waits for)
        for t in graph.tasks:
            i = t.index
            size = 0 if t.replicated else int(nbytes[i])
            deps = [("task", q) for q in sorted(preds[i])]
            secs = max(float(seconds[i]), 1e-9)
            if p > 1 and t.loop == "split":
                sizes = guided_sizes(p)
                parts = [("chunk", i, k) for k in range(len(sizes))]
                for key, share in zip(parts, sizes, strict=True):
                    steps.append((key, i, secs * share / sum(sizes), size * share // sum(sizes),
                                  deps))
                steps.append((("task", i), i, 1e-9, size, parts))
            else:
                steps.append((("task", i), i, secs, size, deps))
        for key, _, secs, size, deps in steps:
            builder.add(key, _noop, deps=deps, cost=secs * model.flop_rate, nbytes=size,
                        name=str(key))
        tg = builder.build()
        placement = np.zeros(len(tg), dtype=np.int64)
        free = [0.0] * p
        finish: dict = {}
        where_of: dict = {}
        size_of = {key: size for key, _, _, size, _ in steps}
        for key, i, secs, _, deps in steps:
            t = graph.tasks[i]
            choices = range(p)
            if t.group is not None and t.group != i and key[0] == "task":
                choices = [where_of[("task", t.group)]]
            best, where = float("inf"), 0
            for w in choices:
                start = free[w]
                for d in deps:
                    arrive = finish[d]
                    src = graph.tasks[d[1]]
                    if where_of[d] != w and not src.replicated:
                        arrive += model.transfer_seconds(size_of[d])
                    start = max(start, arrive)
                if start + secs < best - 1e-12:
                    best, where = start + secs, w
            placement[tg.index[key]] = where
            where_of[key] = where
            finish[key] = best
            free[where] = best
        sim = simulate(tg, placement, p, model=model, gather_to=None)
        rows.append((p, sim.makespan, int(sim.peak_memory.max()) if p else 0))
    return rows


def profile_lines(graph: ScriptGraph, seconds: list[float] | tuple[float, ...],
                  nbytes: list[int] | tuple[int, ...]) -> str:
    """The answer to "how long on 1, 2, 4, 8 workers, and with how much memory"."""
    from tilegraph.util import human

    total = float(sum(seconds))
    out = [f"profile: the serial run took {total:.3f} s (statements only); simulated:"]
    base = None
    for p, secs, peak in simulate_workers(graph, seconds, nbytes):
        base = secs if base is None else base
        speed = base / secs if secs > 0 else float("inf")
        out.append(f"  {p} worker{'s' if p > 1 else ' '}  {secs:9.3f} s  "
                   f"speed-up {speed:5.2f}x  peak {human(peak)} per worker")
    return "\n".join(out) + "\n"


_HTML_COLOURS = {"def-use": "#222", "anti": "#ff7f0e", "output": "#d62728",
                 "output-stream": "#999", "file": "#1f77b4", "cwd": "#9467bd",
                 "env": "#9467bd", "random": "#2ca02c", "figure": "#8c564b",
                 "import": "#bbb", "barrier": "#d62728"}


def _levels(graph: ScriptGraph) -> list[int]:
    preds = graph.predecessors()
    level: list[int] = []
    for i in range(len(graph.tasks)):
        level.append(1 + max((level[p] for p in preds[i]), default=-1))
    return level


def to_html(graph: ScriptGraph, profile: list[float] | None = None) -> str:
    """A self-contained HTML page of the graph: the tasks drawn in layers (a task below
    every task it waits for; the critical path in bold), edges coloured by type with their
    variable on hover, and the text of :func:`explain` beneath."""
    from html import escape

    level = _levels(graph)
    rows: dict[int, list[int]] = {}
    for i, lv in enumerate(level):
        rows.setdefault(lv, []).append(i)
    box_w, box_h, gap_x, gap_y, pad = 260, 34, 24, 46, 16
    width = pad * 2 + max((len(r) for r in rows.values()), default=1) * (box_w + gap_x)
    height = pad * 2 + len(rows) * (box_h + gap_y)
    pos: dict[int, tuple[float, float]] = {}
    for lv, members in rows.items():
        for k, i in enumerate(members):
            pos[i] = (pad + k * (box_w + gap_x), pad + lv * (box_h + gap_y))
    crit = set(graph.critical_path(profile))
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="task graph">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
           'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/>'
           "</marker></defs>"]
    for e in graph.edges:
        (x1, y1), (x2, y2) = pos[e.src], pos[e.dst]
        colour = _HTML_COLOURS.get(e.type, "#222")
        dash = "" if e.type == "def-use" else ' stroke-dasharray="5,3"'
        svg.append(f'<line x1="{x1 + box_w / 2:.0f}" y1="{y1 + box_h:.0f}" '
                   f'x2="{x2 + box_w / 2:.0f}" y2="{y2:.0f}" stroke="{colour}" '
                   f'stroke-width="1.3"{dash} marker-end="url(#arrow)"><title>'
                   f"{escape(f'{e.type} {e.variable}')}</title></line>")
    for t in graph.tasks:
        x, y = pos[t.index]
        bold = ' stroke-width="2.5"' if t.index in crit else ""
        fill = "#eef5ff" if not t.replicated else "#f3f3f3"
        secs = f" ({profile[t.index]:.3f} s)" if profile is not None else ""
        text = f"{t.label}: {t.headline}"
        short = text if len(text) <= 38 else text[:35] + "..."
        svg.append(f'<g><rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="4" '
                   f'fill="{fill}" stroke="#333"{bold}/><text x="{x + 6}" y="{y + 21}" '
                   f'font-family="monospace" font-size="11">{escape(short)}</text>'
                   f"<title>{escape(t.source + secs)}</title></g>")
    svg.append("</svg>")
    legend = "".join(f'<li><span style="color:{c}">&#9644;</span> {escape(k)}</li>'
                     for k, c in _HTML_COLOURS.items())
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(graph.path)}: task graph</title>\n<style>body{{font:14px "
            "system-ui,sans-serif;margin:1.5em}} ul{{list-style:none;padding:0}} li{{display:"
            "inline-block;margin-right:1em}} pre{{background:#f6f6f6;padding:.8em}}</style>\n"
            f"</head>\n<body>\n<h1>{escape(graph.path)}</h1>\n<p>{len(graph.tasks)} tasks, "
            f"{len(graph.edges)} edges; a task is drawn below the tasks it waits for; bold: "
            "the critical path; grey: run on every worker.</p>\n<ul>" + legend + "</ul>\n"
            + "\n".join(svg) + "\n<h2>Explanation</h2>\n<pre>"
            + escape(explain(graph, profile)) + "</pre>\n</body>\n</html>\n")
