"""Chain fusion: a task whose only consumer may absorb it is inlined into that consumer.

The rule reads the op-kind registry (:mod:`tilegraph.graph.kinds`): a producer whose kind
may be inlined (``fuse_producer``) is inlined into its consumer, whose kind may absorb it
(``fuse_consumer``), when it has exactly one consumer, is not a requested output, and either

- the consumer has no other input (fusing cannot make it wait for more blocks), or
- the producer has inputs and every one of them is an input of the consumer too (fusing
  cannot make it wait for more blocks either: a transposed view of a block that a product
  also reads directly is taken inside the product), or
- both kinds are *blockwise* (elementwise ops, views, per-block reductions, stores...):
  then the consumer's inputs are blocks of the same region, needed together anyway.

When tasks are placed on workers (a ``"worker"`` metadata column), only tasks on the same
worker fuse: fusing across workers would move the producer's work to the consumer's worker.

A step that writes over one of its inputs in place (an op kind with ``overwrites``, e.g. the
accumulation of a matrix product) may end up inside a longer task; the fused task's
``overwrites`` column lists the task inputs any of its steps writes over, so that the
executor can keep them intact for a retry.

Memory. A fused task never holds its inlined steps' results as task results, but it does hold
them while it runs: ``random(...).sum()`` fused makes the whole random block inside one task
whose output is 8 bytes. The ``working`` column of a fused task is the largest working set
along its chain: evaluating a step holds the results of the steps inlined before it (its
siblings already evaluated) plus its own working set, which is its inlined inputs, its output
and its temporaries (output bytes times the kind's ``temp_factor``; views count nothing).
The executor's estimate (:func:`tilegraph.graph.memory.task_estimates`) takes it, so
admission, ``check_fits``, ``explain`` and the simulator all see it.

The fused task runs the producer's call inside the consumer's call (a nested template), so
``((a + 1) * b - c).sum()`` becomes one task per block that reads a, b and c and returns the
block's partial sum, and no intermediate block is ever a task result.

A step's function may carry a ``fuse_rewrite(args)`` rule: given the step's argument template
with its producers inlined, it returns a better ``(func, args)`` or ``None``. The block sum
of a reduction uses it to turn ``sum(multiply(a, b))`` into one ``einsum`` that never makes
the product block (:mod:`tilegraph.array.reductions`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import (
    MODE_DATA,
    MODE_DIRECT,
    MODE_FLAT,
    MODE_NESTED,
    Call,
    Dep,
    TaskGraph,
    _is_plain_arg,
)


@dataclass
class FuseStats:
    """What fusion did: tasks before and after, and the op chains that were fused."""

    before: int = 0
    after: int = 0
    chains: dict[str, int] = field(default_factory=dict)
    kinds_before: dict[str, int] = field(default_factory=dict)


def _map_deps(template: Any, fn: Callable[[Dep], Any]) -> Any:
    """The template with every ``Dep`` replaced by ``fn(dep)`` (literals untouched)."""
    tp = type(template)
    if tp is Dep:
        return fn(template)
    if tp is Call:
        kwargs = ({k: _map_deps(v, fn) for k, v in template.kwargs.items()}
                  if template.kwargs else None)
        return Call(template.func, tuple(_map_deps(a, fn) for a in template.args), kwargs)
    if tp is list:
        return [_map_deps(a, fn) for a in template]
    if tp is tuple:
        return tuple(_map_deps(a, fn) for a in template)
    if tp is dict:
        return {k: _map_deps(v, fn) for k, v in template.items()}
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
    workers = graph.meta.get("worker")
    rows = {k: kind_info(k) for k in set(kinds)}
    dptr, didx = graph.dep_ptr, graph.dep_idx
    for i in single.tolist():
        c = int(consumer[i])
        kp, kc = rows[kinds[i]], rows[kinds[c]]
        if not kp.fuse_producer or not kc.fuse_consumer:
            continue
        if workers is not None and workers[i] != workers[c]:
            continue
        if modes[i] == MODE_DATA:
            continue
        if in_deg[c] == 1 or (kp.blockwise and kc.blockwise):
            fuse[i] = True
        elif in_deg[i] > 0:
            own = set(didx[dptr[i]:dptr[i + 1]].tolist())
            fuse[i] = own <= set(didx[dptr[c]:dptr[c + 1]].tolist())
    if not fuse.any():
        return graph, stats

    return _rebuild(graph, fuse, stats)


def _rebuild(graph: TaskGraph, fuse: np.ndarray, stats: FuseStats) -> tuple[TaskGraph,
                                                                           FuseStats]:
    """The graph without the fused tasks; only their consumers are rewritten, every other
    task's columns are copied as they are."""
    n = len(graph)
    counts = np.diff(graph.dep_ptr)
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    absorbs = np.zeros(n, dtype=bool)
    absorbs[src[fuse[graph.dep_idx]]] = True
    absorbs &= ~fuse
    dep_ptr = graph.dep_ptr.tolist()
    dep_idx = graph.dep_idx.tolist()
    names = graph.meta.get("name")
    costs = graph.meta.get("cost")
    modes = graph.modes
    exprs: dict[int, tuple[Any, list[int], str, float, set[int], int, int, bool]] = {}
    rewritten: dict[int, tuple[Callable, tuple, dict | None, list[int], str, float, set[int], int,
                               bool]] = {}
    nbytes = graph.meta.get("nbytes")
    own_working = graph.meta.get("working") or [None] * n  # a task's own, e.g. a read
    kinds = graph.meta.get("kind")
    rows = {k: kind_info(k) for k in set(kinds)} if kinds is not None else {}
    for i in _work_order(graph, fuse | absorbs):
        deps = dep_idx[dep_ptr[i] : dep_ptr[i + 1]]
        if modes[i] == MODE_DIRECT:
            args: tuple = tuple(Dep(j) for j in range(len(deps)))
        else:
            args = graph.args[i]
        kwargs = graph.kwargs.get(i)
        label = [names[i] if names is not None and names[i] else graph.opname(i)]
        cost = float(costs[i] or 0) if costs is not None else 0.0
        new_deps: list[int] = []
        slot_of: dict[int, int] = {}
        mapping = []
        for d in deps:
            if fuse[d]:
                mapping.append(-1)
                continue
            s = slot_of.get(d)
            if s is None:
                s = slot_of[d] = len(new_deps)
                new_deps.append(d)
            mapping.append(s)
        def own_slot(d: Dep, mapping: list[int] = mapping) -> Dep:
            # own deps get their new slot; deps to be inlined a pending marker
            j = mapping[d.slot]
            return Dep(j if j >= 0 else _PENDING_BASE + d.slot)

        tmpl_args = _map_deps(args, own_slot)
        tmpl_kwargs = _map_deps(kwargs, own_slot) if kwargs else None
        # the new slots of the inputs this call (or a step inlined into it) writes over
        own_written = graph.overwritten(i)
        written = {mapping[s] for s in own_written if mapping[s] >= 0}
        held = peak = 0  # bytes of the inlined steps' results so far; the chain's peak
        remake = True  # every inlined step is cheap to make again
        for j, d in enumerate(deps):
            if not fuse[d] or d not in exprs:
                continue
            expr, edeps, elabel, ecost, ewritten, eout, epeak, eremake = exprs.pop(d)
            cost += ecost
            remake = remake and eremake
            peak = max(peak, held + epeak)
            held += eout
            emap = []
            for e in edeps:
                s = slot_of.get(e)
                if s is None:
                    s = slot_of[e] = len(new_deps)
                    new_deps.append(e)
                emap.append(s)
            written.update(emap[s] for s in ewritten)
            if j in own_written:  # written over: the inlined value may be a view of its inputs
                written.update(emap)
            inlined = _map_deps(expr, lambda e, emap=emap: Dep(emap[e.slot]))
            pending = _PENDING_BASE + j

            def put(d: Dep, pending: int = pending, inlined: Any = inlined) -> Any:
                return inlined if d.slot == pending else d

            tmpl_args = _map_deps(tmpl_args, put)
            if tmpl_kwargs:
                tmpl_kwargs = _map_deps(tmpl_kwargs, put)
            label.insert(0, elabel)
        func = graph.funcs[i]
        rewrite = getattr(func, "fuse_rewrite", None)
        if rewrite is not None and not tmpl_kwargs and len(label) > 1:
            better = rewrite(tmpl_args)
            if better is not None:
                func, tmpl_args = better
        text = "+".join(label)
        out = int(nbytes[i] or 0) if nbytes is not None else 0
        row = rows[kinds[i]] if kinds is not None else None
        if row is not None and row.view:  # shares its input's memory
            out = 0
        factor = row.temp_factor if row is not None else 1.0
        peak = max(peak, held + int(out * (1 + factor)), held + (own_working[i] or 0))
        remake = remake and (row.remake if row is not None else False)
        if fuse[i]:
            exprs[i] = (Call(func, tmpl_args, tmpl_kwargs), new_deps, text, cost,
                        written, out, peak, remake)
        else:
            rewritten[i] = (func, tmpl_args, tmpl_kwargs, new_deps, text, cost, written, peak,
                            remake)
            stats.chains[text] = stats.chains.get(text, 0) + 1

    keep = np.flatnonzero(~fuse)
    new_of_old = np.full(n, -1, dtype=np.int64)
    new_of_old[keep] = np.arange(len(keep), dtype=np.int64)
    new_counts = counts[keep].copy()
    for i, (_, _, _, deps, *_) in rewritten.items():
        new_counts[new_of_old[i]] = len(deps)
    ptr = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(new_counts, out=ptr[1:])
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    plain = keep[~absorbs[keep]]
    if len(plain):
        pc = counts[plain]
        starts_new = ptr[new_of_old[plain]]
        starts_old = graph.dep_ptr[plain]
        within = np.arange(int(pc.sum()), dtype=np.int64) - np.repeat(np.cumsum(pc) - pc, pc)
        idx[np.repeat(starts_new, pc) + within] = new_of_old[
            graph.dep_idx[np.repeat(starts_old, pc) + within]]
    keep_l = keep.tolist()
    keys = [graph.keys[i] for i in keep_l]
    funcs = [graph.funcs[i] for i in keep_l]
    args_col = [graph.args[i] for i in keep_l]
    new_modes = bytearray(modes[i] for i in keep_l)
    meta = {c: [col[i] for i in keep_l] for c, col in graph.meta.items()}
    meta.setdefault("name", [None] * len(keep_l))
    if any(r[5] for r in rewritten.values()):
        meta.setdefault("cost", [None] * len(keep_l))
    if any(r[6] for r in rewritten.values()):
        meta.setdefault("overwrites", [None] * len(keep_l))
    meta.setdefault("working", [None] * len(keep_l))
    meta.setdefault("remake", [None] * len(keep_l))
    nol = new_of_old.tolist()
    kwargs_col = {nol[i]: kw for i, kw in graph.kwargs.items() if nol[i] >= 0}
    for i, (func, t_args, t_kwargs, deps, text, cost, written, peak, remake
            ) in rewritten.items():
        k = nol[i]
        funcs[k] = func
        idx[ptr[k] : ptr[k + 1]] = [nol[d] for d in deps]
        args_col[k] = t_args
        new_modes[k] = MODE_FLAT if all(_is_plain_arg(a) for a in t_args) else MODE_NESTED
        if t_kwargs:
            kwargs_col[k] = t_kwargs
        else:
            kwargs_col.pop(k, None)
        meta["name"][k] = text
        if "overwrites" in meta:
            meta["overwrites"][k] = tuple(sorted(written))
        meta["working"][k] = peak
        meta["remake"][k] = remake
        if cost:
            meta["cost"][k] = cost
    index = dict(zip(keys, range(len(keys)), strict=True))
    fused = TaskGraph(keys=keys, index=index, funcs=funcs, args=args_col, kwargs=kwargs_col,
                      modes=new_modes, dep_ptr=ptr, dep_idx=idx, meta=meta)
    stats.after = len(fused)
    return fused, stats


def _work_order(graph: TaskGraph, mask: np.ndarray) -> list[int]:
    """The tasks of ``mask`` with every task after its dependencies."""
    src = np.repeat(np.arange(len(graph), dtype=np.int64), np.diff(graph.dep_ptr))
    if (graph.dep_idx < src).all():
        return np.flatnonzero(mask).tolist()
    return [i for i in graph.topological_order().tolist() if mask[i]]


_PENDING_BASE = 1 << 40  # marks a dependency slot still to be replaced by an inlined call
