"""Chain fusion: a task whose only consumer may absorb it is inlined into that consumer.

The rule is a table keyed by op kind. A producer is inlined into its consumer when it has
exactly one consumer, is not a requested output, and either

- the consumer has no other input (fusing cannot make it wait for more blocks), or
- both kinds are *blockwise* (elementwise ops, views, per-block reductions, stores...):
  then the consumer's inputs are blocks of the same region, needed together anyway.

The fused task runs the producer's call inside the consumer's call (a nested template), so
``((a + 1) * b - c).sum()`` becomes one task per block that reads a, b and c and returns the
block's partial sum, and no intermediate block is ever a task result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilegraph.graph.taskgraph import (
    MODE_DATA,
    MODE_DIRECT,
    Call,
    Dep,
    GraphBuilder,
    Lit,
    TaskGraph,
)

# kinds whose tasks work on one region of the array block by block
BLOCKWISE_KINDS = {
    "load", "creation", "random", "elementwise", "getitem", "transpose", "reshape", "astype",
    "map", "partial", "store", "contiguous",
}
# kinds that may be inlined into a single-input consumer
FUSIBLE_PRODUCERS = BLOCKWISE_KINDS | {"reduce", "aggregate", "product", "accumulate",
                                       "rechunk"}
# kinds that may absorb their producers
FUSIBLE_CONSUMERS = BLOCKWISE_KINDS | {"aggregate"}


@dataclass
class FuseStats:
    """What fusion did: tasks before and after, and the op chains that were fused."""

    before: int = 0
    after: int = 0
    chains: dict[str, int] = field(default_factory=dict)
    kinds_before: dict[str, int] = field(default_factory=dict)


def _shift(template: Any, mapping: list[int]) -> Any:
    """The template with ``Dep(j)`` renumbered to ``Dep(mapping[j])``."""
    tp = type(template)
    if tp is Dep:
        return Dep(mapping[template.slot])
    if tp is Call:
        kwargs = ({k: _shift(v, mapping) for k, v in template.kwargs.items()}
                  if template.kwargs else None)
        return Call(template.func, tuple(_shift(a, mapping) for a in template.args), kwargs)
    if tp is list:
        return [_shift(a, mapping) for a in template]
    if tp is tuple:
        return tuple(_shift(a, mapping) for a in template)
    if tp is dict:
        return {k: _shift(v, mapping) for k, v in template.items()}
    return template


def _inline(template: Any, slot: int, expr: Any) -> Any:
    tp = type(template)
    if tp is Dep:
        return expr if template.slot == slot else template
    if tp is Call:
        kwargs = ({k: _inline(v, slot, expr) for k, v in template.kwargs.items()}
                  if template.kwargs else None)
        return Call(template.func, tuple(_inline(a, slot, expr) for a in template.args), kwargs)
    if tp is list:
        return [_inline(a, slot, expr) for a in template]
    if tp is tuple:
        return tuple(_inline(a, slot, expr) for a in template)
    if tp is dict:
        return {k: _inline(v, slot, expr) for k, v in template.items()}
    return template


def fuse_chains(graph: TaskGraph, outputs: np.ndarray) -> tuple[TaskGraph, FuseStats]:
    """The graph with fusible chains inlined (see the module docstring)."""
    n = len(graph)
    stats = FuseStats(before=n, after=n)
    kinds = graph.meta.get("kind")
    if kinds is None or n == 0:
        return graph, stats
    for k in kinds:
        stats.kinds_before[k or "other"] = stats.kinds_before.get(k or "other", 0) + 1
    out_deg = graph.out_degree()
    in_deg = graph.in_degree()
    is_output = np.zeros(n, dtype=bool)
    is_output[np.asarray(outputs, dtype=np.int64)] = True
    ptr, idx = graph.dependents_csr()
    consumer = np.full(n, -1, dtype=np.int64)
    single = np.flatnonzero((out_deg == 1) & ~is_output)
    consumer[single] = idx[ptr[single]]
    fuse = np.zeros(n, dtype=bool)
    modes = graph.modes
    for i in single.tolist():
        c = int(consumer[i])
        kp, kc = kinds[i], kinds[c]
        if kp not in FUSIBLE_PRODUCERS or kc not in FUSIBLE_CONSUMERS:
            continue
        if modes[i] == MODE_DATA:
            continue
        if in_deg[c] == 1 or (kp in BLOCKWISE_KINDS and kc in BLOCKWISE_KINDS):
            fuse[i] = True
    if not fuse.any():
        return graph, stats

    dep_ptr = graph.dep_ptr.tolist()
    dep_idx = graph.dep_idx.tolist()
    names = graph.meta.get("name")
    # expression of every fused task over the deps of the task that will absorb it
    exprs: dict[int, tuple[Any, list[int], str, float]] = {}
    costs = graph.meta.get("cost")
    builder = GraphBuilder()
    keys = graph.keys
    meta_cols = graph.meta
    for i in _topological(graph):
        deps = dep_idx[dep_ptr[i] : dep_ptr[i + 1]]
        if not any(fuse[d] for d in deps) and not fuse[i]:
            _copy_task(builder, graph, i, keys, deps)
            continue
        # the call of task i over its (flattened) deps
        func = graph.funcs[i]
        if modes[i] == MODE_DIRECT:
            args: tuple = tuple(Dep(j) for j in range(len(deps)))
        elif modes[i] == MODE_DATA:
            args = ()
        else:
            args = graph.args[i]
        kwargs = graph.kwargs.get(i)
        new_deps: list[int] = []
        slot_of: dict[int, int] = {}
        label = [names[i] if names is not None and names[i] else graph.opname(i)]
        cost = float(costs[i] or 0) if costs is not None else 0.0
        mapping = []
        for d in deps:
            if fuse[d]:
                mapping.append(-1)
            else:
                mapping.append(slot_of.setdefault(d, len(new_deps)))
                if mapping[-1] == len(new_deps):
                    new_deps.append(d)
        # renumber the own deps, then inline every fused producer
        tmpl_args = _renumber(args, mapping)
        tmpl_kwargs = _renumber(kwargs, mapping) if kwargs else None
        for j, d in enumerate(deps):
            if not fuse[d]:
                continue
            expr, edeps, elabel, ecost = exprs.pop(d)
            cost += ecost
            emap = []
            for e in edeps:
                s = slot_of.get(e)
                if s is None:
                    s = slot_of[e] = len(new_deps)
                    new_deps.append(e)
                emap.append(s)
            inlined = _shift(expr, emap)
            tmpl_args = _inline(tmpl_args, _PENDING_BASE + j, inlined)
            if tmpl_kwargs:
                tmpl_kwargs = _inline(tmpl_kwargs, _PENDING_BASE + j, inlined)
            label.insert(0, elabel)
        text = "+".join(label)
        if fuse[i]:
            exprs[i] = (Call(func, tmpl_args, tmpl_kwargs), new_deps, text, cost)
            continue
        meta = {c: meta_cols[c][i] for c in meta_cols if meta_cols[c][i] is not None}
        meta["name"] = text
        if cost:
            meta["cost"] = cost
        builder.add(keys[i], func, deps=[keys[d] for d in new_deps], args=tmpl_args,
                    kwargs=tmpl_kwargs, **meta)
        stats.chains[text] = stats.chains.get(text, 0) + 1
    fused = builder.build()
    stats.after = len(fused)
    return fused, stats


def _topological(graph: TaskGraph) -> list[int]:
    """Index order when every task comes after its dependencies (as lowering emits them),
    else Kahn's order."""
    src = np.repeat(np.arange(len(graph), dtype=np.int64), np.diff(graph.dep_ptr))
    if (graph.dep_idx < src).all():
        return list(range(len(graph)))
    return graph.topological_order().tolist()


_PENDING_BASE = 1 << 40  # marks a dependency slot still to be replaced by an inlined call


def _renumber(template: Any, own: list[int]) -> Any:
    """Own deps get their new slot; deps to be inlined get a pending marker."""
    tp = type(template)
    if tp is Dep:
        j = template.slot
        return Dep(own[j] if own[j] >= 0 else _PENDING_BASE + j)
    if tp is Call:
        kwargs = ({k: _renumber(v, own) for k, v in template.kwargs.items()}
                  if template.kwargs else None)
        return Call(template.func, tuple(_renumber(a, own) for a in template.args), kwargs)
    if tp is list:
        return [_renumber(a, own) for a in template]
    if tp is tuple:
        return tuple(_renumber(a, own) for a in template)
    if tp is dict:
        return {k: _renumber(v, own) for k, v in template.items()}
    if tp is Lit:
        return template
    return template


def _copy_task(builder: GraphBuilder, graph: TaskGraph, i: int, keys: list, deps: list[int]
               ) -> None:
    meta = {c: col[i] for c, col in graph.meta.items() if col[i] is not None}
    if graph.modes[i] == MODE_DATA:
        builder.add_data(keys[i], graph.args[i][0], **meta)
        return
    args = None if graph.modes[i] == MODE_DIRECT else graph.args[i]
    builder.add(keys[i], graph.funcs[i], deps=[keys[d] for d in deps], args=args,
                kwargs=graph.kwargs.get(i), **meta)
