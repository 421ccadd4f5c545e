"""The memory model of a task graph: the bytes each task holds while it runs, and what
running a step or moving a block to disk and back costs.

One model for every stage that reasons about memory: the executor's admission and
``check_fits``, the plan's projection (``explain()``, ``spill=False``), the choice between
making a block again and spilling it (:mod:`tilegraph.graph.remake`), the cost model and the
simulator (:class:`tilegraph.plan.cost.CostModel` takes its machine figures from here). It
reads only the graph's metadata and the op-kind registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.graph.kinds import kind_info

FLOP_RATE = 50e9  # flop/s of one core running a BLAS kernel
MEM_BANDWIDTH = 5e9  # bytes/s one core streams through a memory-bound step
DISK_BANDWIDTH = 1e9  # bytes/s of writing a spilled block, and of reading it back
DISK_LATENCY = 50e-6  # seconds of making, opening and closing a spill file, each way
TASK_OVERHEAD = 10e-6  # seconds the scheduler spends on a task


def task_estimates(graph: Any, tasks: Sequence[int] | None = None) -> list[int]:
    """Estimated bytes each task adds while it runs (of ``tasks``, indices, when given):
    its output plus temporaries.

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
        return [0] * (n if tasks is None else len(tasks))
    nb = nb or [None] * n
    kinds = graph.meta.get("kind") or [None] * n
    names = graph.meta.get("name") or [None] * n
    rows = {k: kind_info(k) for k in set(kinds)}
    fused = graph.meta.get("step_working") or [None] * n
    out = []
    for i in range(n) if tasks is None else tasks:
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


def step_seconds(graph: Any, estimates: list[int] | None = None, *,
                 flop_rate: float = FLOP_RATE, mem_bandwidth: float = MEM_BANDWIDTH,
                 task_overhead: float = TASK_OVERHEAD,
                 tasks: Sequence[int] | None = None) -> np.ndarray:
    """Estimated seconds of every task's step (float64 array; of ``tasks``, indices, when
    given, with ``estimates`` of those): its flop count (the ``cost`` column) over
    ``flop_rate``, or, for a task without one (memory-bound), its estimate
    (:func:`task_estimates`) streamed in and out, ``2 * estimate / mem_bandwidth``; plus
    ``task_overhead``."""
    col = graph.meta.get("cost")
    which = range(len(graph)) if tasks is None else tasks
    flops = (np.zeros(len(which)) if col is None else np.fromiter(
        (0.0 if col[i] is None else float(col[i]) for i in which), np.float64, len(which)))
    streamed = np.asarray(task_estimates(graph, tasks) if estimates is None else estimates,
                          dtype=np.float64)
    seconds = np.where(flops > 0, flops / flop_rate, 2.0 * streamed / mem_bandwidth)
    return seconds + task_overhead


def spill_seconds(nbytes: float, disk_bandwidth: float = DISK_BANDWIDTH) -> float:
    """Seconds to write a block of ``nbytes`` to its own file on disk and read it back."""
    return 2.0 * (DISK_LATENCY + float(nbytes) / disk_bandwidth)
