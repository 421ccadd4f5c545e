"""``explain()``: the plan in words, like a database EXPLAIN.

It lowers and fuses the plan without running it, then reports tasks per kind, blocks read
and written, flops, fused chains, and the peak memory of running the tasks one at a time in
the executor's order, freeing each block after its last consumer (with several workers, up
to one more working block per extra worker).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.plan.order import order


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def sequential_peak(graph: Any, outputs: np.ndarray, priority: np.ndarray) -> tuple[int, int]:
    """(peak bytes, largest task bytes) of running the graph in priority order on one worker,
    releasing every block after its last consumer."""
    nb = graph.meta.get("nbytes")
    size = [0 if nb is None or nb[i] is None else int(nb[i]) for i in range(len(graph))]
    refs = graph.out_degree().tolist()
    for o in np.asarray(outputs).tolist():
        refs[o] += 1
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    live = peak = biggest = 0
    for i in np.argsort(priority).tolist():
        live += size[i]
        working = size[i] + sum(size[d] for d in idx[ptr[i]:ptr[i + 1]])
        biggest = max(biggest, working)
        peak = max(peak, live)
        for d in idx[ptr[i]:ptr[i + 1]]:
            refs[d] -= 1
            if refs[d] == 0:
                live -= size[d]
    return peak, biggest


def plan_summary(arrays: Sequence[Any]) -> dict[str, Any]:
    """The numbers behind :func:`explain`, as a dict."""
    from tilegraph.plan.lower import plan_arrays

    plan = plan_arrays(arrays)
    g = plan.graph
    kinds = g.meta.get("kind") or [None] * len(g)
    counts = Counter(k or "other" for k in kinds)
    nbytes = g.meta.get("nbytes") or [None] * len(g)
    cost = g.meta.get("cost") or [None] * len(g)
    before = plan.fuse_stats.kinds_before or dict(counts)
    written = [i for i, k in enumerate(kinds) if k == "store"]
    out_idx = g.indices(plan.outputs)
    priority = order(g, out_idx)
    peak, biggest = sequential_peak(g, out_idx, priority)
    flops = float(sum(c for c in cost if c))
    return {
        "tasks": len(g),
        "tasks_before_fusion": plan.fuse_stats.before,
        "kinds": dict(counts.most_common()),
        "kinds_text": ", ".join(f"{n} {k}" for k, n in counts.most_common()),
        "blocks_read": before.get("load", 0),
        "blocks_written": len(written),
        "bytes_written": int(sum(nbytes[i] or 0 for i in written)),
        "flops": flops,
        "peak_bytes": peak,
        "largest_task_bytes": biggest,
        "fused_chains": dict(sorted(plan.fuse_stats.chains.items(), key=lambda kv: -kv[1])),
    }


def explain(arrays: Sequence[Any], workers: int | None = None) -> str:
    """The plan of computing ``arrays`` in words."""
    from tilegraph.runtime.blas import cores

    s = plan_summary(arrays)
    p = workers or cores()
    lines = [
        f"plan: {s['tasks']} tasks ({s['tasks_before_fusion']} before fusion)",
        "tasks per kind: " + (s["kinds_text"] or "none"),
        f"blocks read: {s['blocks_read']}; blocks written: {s['blocks_written']} "
        f"({_human(s['bytes_written'])})",
        f"flops: {s['flops']:.3g}",
        f"estimated peak memory: {_human(s['peak_bytes'])} on one worker, up to "
        f"{_human(s['peak_bytes'] + (p - 1) * s['largest_task_bytes'])} with {p} workers "
        f"(largest task works on {_human(s['largest_task_bytes'])})",
    ]
    if s["fused_chains"]:
        chains = ", ".join(f"{n} x {name}" for name, n in list(s["fused_chains"].items())[:5])
        lines.append(f"fused chains: {chains}")
    return "\n".join(lines)
