"""``explain()``: the plan in words, like a database EXPLAIN.

It lowers and fuses the plan without running it, then reports tasks per kind, blocks read
and written, flops, fused chains, and the peak memory of running the tasks one at a time in
the executor's order with the executor's memory model (outputs and temporaries), freeing each
block after its last consumer (with several workers, up to one more working block per extra
worker); and per op, whether its blocks are made again or spilled under memory pressure,
and why (:func:`tilegraph.graph.remake.remake_reason`: the chain back to the sources and the
two costs).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.graph.memory import task_estimates
from tilegraph.graph.remake import remake_reason
from tilegraph.graph.taskgraph import MODE_DATA
from tilegraph.plan.order import order
from tilegraph.util import human


@dataclass(frozen=True)
class Projection:
    """The memory a plan needs when its tasks run one at a time in priority order, in the
    executor's model (:func:`tilegraph.graph.memory.task_estimates`).

    ``peak``: the most bytes held at once, results plus the running task's output and
    temporaries; ``largest_task``: the most one task works on (its inputs, output and
    temporaries); ``without_remake``: the peak when results the memory manager may drop
    and make again (loads, random and creation blocks, cheap chains of them) are counted
    only while a task reads them, i.e. what must stay in memory or go to disk; ``at``: the
    task running at that peak (-1 for an empty plan)."""

    peak: int
    largest_task: int
    without_remake: int
    at: int


def projected_peak(graph: Any, outputs: np.ndarray, priority: np.ndarray,
                   estimates: list[int] | None = None, workers: int = 1) -> Projection:
    """The :class:`Projection` of running ``graph`` in ``priority`` order, releasing every
    block after its last consumer (``estimates``: the executor's, when it has them
    already). With ``workers`` threads, each task is taken to run beside the ``workers - 1``
    tasks before it in that order: their temporaries are still held, and so are their
    results even where their consumers have run in the one-at-a-time order."""
    n = len(graph)
    nb = graph.meta.get("nbytes")
    size = [0 if nb is None or nb[i] is None else int(nb[i]) for i in range(n)]
    working = task_estimates(graph) if estimates is None else estimates
    remake = graph.remakeable()
    refs = graph.out_degree().tolist()
    for o in np.asarray(outputs).tolist():
        refs[o] += 1
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    live = peak = biggest = held = held_peak = 0
    at = -1
    any_remake = any(remake)
    beside = max(0, int(workers) - 1)
    recent: list[int] = []  # the tasks running beside the next one
    gone = bytearray(n) if beside else b""  # results released in the one-at-a-time order
    for i in np.argsort(priority, kind="stable").tolist():
        need = working[i]
        deps = idx[ptr[i]:ptr[i + 1]]
        inputs = 0
        brought = 0  # inputs made again for this task
        for d in deps:
            inputs += size[d]
            if any_remake and remake[d]:
                brought += size[d]
        live += need
        if need + inputs > biggest:
            biggest = need + inputs
        others = 0
        for j in recent:
            others += max(0, working[j] - size[j]) + (size[j] if gone[j] else 0)
        if live + others > peak:
            peak, at = live + others, i
        if held + need + brought + others > held_peak:
            held_peak = held + need + brought + others
        if beside:
            recent.append(i)
            if len(recent) > beside:
                recent.pop(0)
        live -= need - size[i]
        if not remake[i]:
            held += size[i]
        for d in deps:
            refs[d] -= 1
            if refs[d] == 0:
                if beside:
                    gone[d] = 1
                live -= size[d]
                if not remake[d]:
                    held -= size[d]
    return Projection(peak, biggest, held_peak, at)


def sequential_peak(graph: Any, outputs: np.ndarray, priority: np.ndarray) -> tuple[int, int]:
    """(peak bytes, largest task bytes) of running the graph in priority order on one worker,
    releasing every block after its last consumer (:func:`projected_peak`).

    Memory is the executor's model (:func:`tilegraph.graph.memory.task_estimates`): a
    running task holds its output and its temporaries, the temporaries until it finishes.
    A task's bytes are its inputs, its output and its temporaries."""
    p = projected_peak(graph, outputs, priority)
    return p.peak, p.largest_task


def graph_summary(graph: Any, outputs: np.ndarray, fuse_stats: Any = None) -> dict[str, Any]:
    """The numbers behind :func:`explain` for a lowered graph and its output tasks."""
    g = graph
    kinds = g.meta.get("kind") or [None] * len(g)
    counts = Counter(k or "other" for k in kinds)
    nbytes = g.meta.get("nbytes") or [None] * len(g)
    cost = g.meta.get("cost") or [None] * len(g)
    before = (fuse_stats.kinds_before if fuse_stats is not None else None) or dict(counts)
    written = [i for i, k in enumerate(kinds) if k == "store"]
    priority = order(g, outputs)
    projection = projected_peak(g, outputs, priority)
    flops = float(sum(c for c in cost if c))
    chains = fuse_stats.chains if fuse_stats is not None else {}
    remake = [i for i, r in enumerate(g.remakeable()) if r]
    remade_ops: Counter[str] = Counter(g.opname(i) for i in remake)
    refused = [i for i, r in enumerate(g.remake_refused()) if r]
    by_op: dict[str, list] = {}  # op -> [tasks, bytes, first task]
    for i in range(len(g)):
        if g.modes[i] == MODE_DATA or (kinds[i] or "other") == "store":
            continue
        entry = by_op.setdefault(g.opname(i), [0, 0, i])
        entry[0] += 1
        entry[1] += nbytes[i] or 0
    pressure = [(op, n, b, remake_reason(g, i))
                for op, (n, b, i) in sorted(by_op.items(), key=lambda kv: -kv[1][1])]
    spilled_ops: dict[str, list] = {}
    for i in refused:
        entry = spilled_ops.setdefault(g.opname(i), [0, ""])
        entry[0] += 1
        if not entry[1]:
            entry[1] = g.unrepeatable_reason(i)
    return {
        "tasks": len(g),
        "tasks_before_fusion": fuse_stats.before if fuse_stats is not None else len(g),
        "kinds": dict(counts.most_common()),
        "kinds_text": ", ".join(f"{n} {k}" for k, n in counts.most_common()),
        "blocks_read": before.get("load", 0),
        "blocks_written": len(written),
        "bytes_written": int(sum(nbytes[i] or 0 for i in written)),
        "flops": flops,
        "peak_bytes": projection.peak,
        "largest_task_bytes": projection.largest_task,
        "held_bytes": projection.without_remake,
        "remakeable_tasks": len(remake),
        "remakeable_bytes": int(sum(nbytes[i] or 0 for i in remake)),
        "remade_ops": dict(remade_ops.most_common()),
        "spilled_ops": {op: (n, why) for op, (n, why) in spilled_ops.items()},
        "pressure_ops": pressure,
        "fused_chains": dict(sorted(chains.items(), key=lambda kv: -kv[1])),
    }


def summary_lines(s: dict[str, Any], threads: int) -> list[str]:
    """:func:`graph_summary` in words, with the memory estimate for ``threads`` threads."""
    lines = [
        f"plan: {s['tasks']} tasks ({s['tasks_before_fusion']} before fusion)",
        "tasks per kind: " + (s["kinds_text"] or "none"),
        f"blocks read: {s['blocks_read']}; blocks written: {s['blocks_written']} "
        f"({human(s['bytes_written'])})",
        f"flops: {s['flops']:.3g}",
        f"estimated peak memory: {human(s['peak_bytes'])} on one worker, up to "
        f"{human(s['peak_bytes'] + (threads - 1) * s['largest_task_bytes'])} with {threads} "
        f"workers (largest task works on {human(s['largest_task_bytes'])})",
    ]
    if s.get("remakeable_tasks"):
        lines.append(f"made again rather than spilled under memory pressure: "
                     f"{s['remakeable_tasks']} tasks ({human(s['remakeable_bytes'])}); "
                     f"without them the peak is {human(s['held_bytes'])} (what a run with "
                     "spill=False needs)")
        ops = list(s.get("remade_ops", {}).items())
        lines.append("  remade per op: " + ", ".join(f"{op} ({n} tasks)" for op, n in ops[:8])
                     + (f", and {len(ops) - 8} more ops" if len(ops) > 8 else ""))
    for op, (n, why) in list(s.get("spilled_ops", {}).items())[:8]:
        lines.append(f"spilled (or kept), not made again: {op} ({n} tasks), because {why}")
    pressure = s.get("pressure_ops", [])
    if pressure:
        lines.append("under memory pressure, per op (the most bytes first): made again or "
                     "spilled, and why")
        lines += [f"  {op} ({n} tasks, {human(b)}): {why}" for op, n, b, why in pressure[:8]]
        if len(pressure) > 8:
            lines.append(f"  and {len(pressure) - 8} more ops")
    if s["fused_chains"]:
        chains = ", ".join(f"{n} x {name}" for name, n in list(s["fused_chains"].items())[:5])
        lines.append(f"fused chains: {chains}")
    return lines


def explain_plan(graph: Any, outputs: np.ndarray, fuse_stats: Any = None,
                 workers: int | None = None, *, initial: str = "cyclic",
                 model: Any = None) -> str:
    """A planned graph (from :func:`tilegraph.pipeline.make_plan`) in words.

    Without ``workers``: the plan for the threads of this machine. With ``workers=p`` (the
    graph placed on ``p`` worker processes, a ``worker`` column, inputs placed by
    ``initial``): the placement simulated with the cost ``model`` (a
    :class:`~tilegraph.plan.cost.CostModel`; default: its defaults): makespan, bytes moved
    between workers, and peak memory per worker, computed without running anything.
    """
    from tilegraph.util import cores

    s = graph_summary(graph, outputs, fuse_stats)
    if workers is None:
        return "\n".join(summary_lines(s, cores()))
    from tilegraph.plan.cost import CostModel
    from tilegraph.plan.place import grid_shape
    from tilegraph.plan.simulate import simulate

    model = model or CostModel()
    lines = [ln for ln in summary_lines(s, 1) if not ln.startswith("estimated peak memory")]
    placement = np.asarray(graph.meta["worker"], dtype=np.int64)
    sim = simulate(graph, placement, workers, outputs=outputs, model=model)
    d, c = grid_shape(workers)
    per = np.bincount(placement, minlength=workers)
    lines += [
        f"placed on {workers} workers (grid {d} x {c}, inputs {initial}): "
        f"{per.min()} to {per.max()} tasks per worker",
        f"simulated (flop rate {model.flop_rate:.3g}/s, network {human(model.bandwidth)}/s, "
        f"latency {model.latency:.3g} s): makespan {sim.makespan:.4g} s, "
        f"utilisation {sim.utilisation:.0%}",
        f"moved between workers: {human(sim.bytes_moved)} in {sim.messages} messages "
        f"(results gathered on worker 0 included)",
        f"peak memory per worker: max {human(int(sim.peak_memory.max()))}, "
        f"mean {human(float(sim.peak_memory.mean()))}",
    ]
    return "\n".join(lines)
