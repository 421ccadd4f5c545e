"""The memory model of a task graph: the bytes each task holds while it runs.

One model for every stage that reasons about memory: the executor's admission and
``check_fits``, the plan's projection (``explain()``, ``spill=False``), the cost model and
the simulator. It reads only the graph's metadata and the op-kind registry.
"""

from __future__ import annotations

from typing import Any

from tilegraph.graph.kinds import kind_info


def task_estimates(graph: Any) -> list[int]:
    """Estimated bytes each task adds while it runs: its output plus temporaries.

    Temporaries are the output's bytes times the ``temp_factor`` of the task's op kind
    (:mod:`tilegraph.graph.kinds`: views and in-place accumulations need none); a fused chain
    of a kind with ``chain_temporaries`` (elementwise ops, per-block reductions, user
    functions) makes one more temporary block per step it fuses (its name joins the steps
    with ``+``) when fusion did not walk it. A task made by fusion takes its ``working``
    column: the peak of filling its template step by step (:mod:`tilegraph.plan.fuse`), so
    that a chain whose output is small but whose steps make large blocks
    (``random(...).sum()``) is known to need them."""
    n = len(graph)
    nb = graph.meta.get("nbytes")
    working = graph.meta.get("working")
    if nb is None and working is None:
        return [0] * n
    nb = nb or [None] * n
    kinds = graph.meta.get("kind") or [None] * n
    names = graph.meta.get("name") or [None] * n
    rows = {k: kind_info(k) for k in set(kinds)}
    fused = graph.meta.get("step_working") or [None] * n
    out = []
    for i in range(n):
        size = nb[i] or 0
        if fused[i] is not None and working[i] is not None:
            # a task made by fusion: its working set walked step by step
            out.append(max(int(size), int(working[i])))
            continue
        row = rows[kinds[i]]
        steps = names[i].count("+") if names[i] and row.chain_temporaries else 0
        need = int(size * (1 + row.temp_factor + steps))
        if working is not None and working[i] is not None and working[i] > need:
            need = int(working[i])
        out.append(need)
    return out
