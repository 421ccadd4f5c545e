"""The remake rule: which results the memory manager drops under pressure and makes again
instead of writing them to disk and reading them back.

A task's result is *remakeable* when

- its own step is cheap to run again: its op kind's ``remake`` (a read, a random or constant
  block, a view, a cast, a rechunk's pieces, an elementwise step, a per-block partial); for
  a fused task its ``remake`` column (every step of its chain is);
- it gives the same block again: :meth:`~tilegraph.graph.TaskGraph.repeatable`, its whole
  chain back to its sources;
- every input can be had again when it is made: a literal the graph holds, or a result that
  is remakeable itself, so the chain is made again from its sources, through the views,
  casts, rechunk pieces and elementwise steps between them, wherever nothing of it is left in
  memory (at a remake, inputs still in memory are used as they are);
- and making it again costs less than spilling it: the seconds of running its chain again
  from its sources with nothing in memory (every step of it, counted once per path to it:
  :func:`~tilegraph.graph.memory.step_seconds`) are at most the seconds of writing its
  block and reading it back (:func:`~tilegraph.graph.memory.spill_seconds`; a result of
  unknown size is taken to be empty, so its chain may be a few steps long).

A task that passes every test but the second is *refused*: under pressure it is spilled (or
kept), and counted with the reason (a source that may not give the same block again).
:func:`remake_reason` says in words why a task is remade or not, with the two costs
(``explain()`` shows it per op).

>>> import numpy as np
>>> import tilegraph as tg
>>> from tilegraph.array.lowering import plan_arrays
>>> x = tg.random.random((40, 30), chunks=(1, 30), seed=1)
>>> rows = x.rechunk((4, 30)).astype(np.float32)  # pieces of four random blocks, cast
>>> g = plan_arrays([rows - rows.mean(axis=0)], fuse=False).graph
>>> i = g.meta["name"].index("astype")
>>> g.remakeable()[i], remake_reason(g, i)[:49]
(1, 'made again: 6 steps back to its sources (random),')
>>> remake_reason(g, g.meta["name"].index("subtract"))
'spilled: its input mean (aggregate) is not made again'

"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tilegraph.graph.kinds import kind_info
from tilegraph.graph.memory import spill_seconds, step_seconds


@dataclass(frozen=True)
class RemakePlan:
    """The remake rule's verdict on every task of a graph: ``remake`` and ``refused`` (one
    byte per task, see the module docstring), ``chain`` (seconds of making each remakeable
    or refused task again from its sources, 0 for the others), ``steps`` (the tasks that
    takes, the task included) and ``data`` (1 for a literal)."""

    remake: bytes
    refused: bytes
    chain: list[float]
    steps: list[int]
    data: bytes


def remake_plan(graph: Any, data: bytes, among: Sequence[int] | None = None) -> RemakePlan:
    """The :class:`RemakePlan` of ``graph``; ``data``: one byte per task, 1 for a literal
    (its value is held by the graph, so a remake may always read it). ``among``: the
    tasks to judge (the others are judged not remade); exact for tasks that hold every
    input of theirs among them (the tasks without inputs, say)."""
    n = len(graph)
    kinds = graph.meta.get("kind")
    if kinds is None:
        return RemakePlan(bytes(n), bytes(n), [0.0] * n, [0] * n, bytes(data))
    cheap = graph.meta.get("remake") or [None] * n
    rows = {k: kind_info(k).remake for k in set(kinds)}
    # only a cheap step can be made again: the others are never visited
    candidate = bytearray(n)
    for i in range(n) if among is None else among:
        if not data[i] and (rows[kinds[i]] if cheap[i] is None else cheap[i]):
            candidate[i] = 1
    remake, refused = bytearray(n), bytearray(n)
    chain, steps = [0.0] * n, [0] * n
    if any(candidate):
        rep = graph.repeatable()
        nb = graph.meta.get("nbytes") or [None] * n
        which = [i for i, c in enumerate(candidate) if c]
        seconds = dict(zip(which, step_seconds(graph, tasks=which).tolist(), strict=True))
        ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()

        def decide(i: int) -> None:
            cost, count = seconds[i], 1
            for d in idx[ptr[i] : ptr[i + 1]]:
                if data[d]:
                    continue
                if not (remake[d] or refused[d]):
                    return  # an input that cannot be had again
                cost += chain[d]
                count += steps[d]
            if cost > spill_seconds(nb[i] or 0):
                return
            chain[i], steps[i] = cost, count
            if rep[i]:
                remake[i] = 1
            else:
                refused[i] = 1

        _visit_inputs_first(graph, candidate, ptr, idx, decide)
    return RemakePlan(bytes(remake), bytes(refused), chain, steps, bytes(data))


def _visit_inputs_first(graph: Any, candidate: bytearray, ptr: list[int], idx: list[int],
                        visit: Callable[[int], None]) -> None:
    """Call ``visit`` on every task marked in ``candidate``, each after the candidates it
    reads (a depth-first walk over the candidates alone); a cycle among them raises the
    graph's :class:`~tilegraph.graph.CycleError`."""
    state = bytearray(len(candidate))  # 0: unseen, 1: on the path, 2: visited
    for root, is_candidate in enumerate(candidate):
        if not is_candidate or state[root]:
            continue
        state[root] = 1
        stack = [(root, ptr[root])]
        while stack:
            t, p = stack[-1]
            end = ptr[t + 1]
            while p < end:
                d = idx[p]
                p += 1
                if candidate[d] and state[d] != 2:
                    if state[d] == 1:
                        graph.topological_order()  # raises, naming the cycle
                    state[d] = 1
                    stack[-1] = (t, p)
                    stack.append((d, ptr[d]))
                    break
            else:
                stack.pop()
                state[t] = 2
                visit(t)


def spoil(graph: Any, mask: bytearray, tasks: Sequence[int]) -> None:
    """Clear ``mask`` (a :class:`RemakePlan`'s ``remake`` or ``refused``, as a bytearray)
    at ``tasks`` and at every task whose chain reads one of them: results that arrive from
    elsewhere cannot be made again here, nor can what is made from them."""
    ptr, idx = graph.dependents_csr()
    stack = list(tasks)
    for t in stack:
        mask[t] = 0
    while stack:
        t = stack.pop()
        for c in idx[ptr[t] : ptr[t + 1]].tolist():
            if mask[c]:
                mask[c] = 0
                stack.append(c)


GENERATORS = frozenset({"random", "creation"})  # op kinds of sources computed from the plan


def generated(graph: Any) -> bytearray:
    """1 for each task whose chain back to its sources starts only at generators (seeded
    random blocks, constants: :data:`GENERATORS`) and literals: made again, its block is
    computed from the plan alone, with nothing read from outside the run that could have
    changed, so a remake need not be checked against a checksum of the block dropped (a
    file, or an object declared repeatable, is still checked at every remake). A source
    counts as a generator only when its function is tilegraph's or NumPy's: a function of
    the user's given a generator's kind in a hand-built graph is still checked.

    >>> import numpy as np
    >>> from tilegraph.graph import GraphBuilder
    >>> b = GraphBuilder()
    >>> b.add("z", np.zeros, args=(3,), kind="creation")
    >>> b.add("u", print, kind="creation")  # not a generator of tilegraph or NumPy
    >>> list(generated(b.build()))
    [1, 0]
    """
    n = len(graph)
    kinds = graph.meta.get("kind") or [None] * n
    data = graph.remake_verdicts().data
    indeg = graph.in_degree().tolist()
    mask = bytearray(b"\x01") * n
    spoil(graph, mask, [i for i in range(n) if not indeg[i] and not data[i]
                        and not (kinds[i] in GENERATORS and _ours(graph.funcs[i]))])
    return mask


def _ours(func: Any) -> bool:
    """Whether ``func`` is tilegraph's or NumPy's own."""
    module = getattr(func, "__module__", None) or ""
    return module == "numpy" or module.startswith(("numpy.", "tilegraph."))


def remake_reason(graph: Any, i: int) -> str:
    """Why task ``i``'s result is made again under memory pressure, or spilled (or kept)
    instead, in words, with what making it again and spilling it would cost."""
    plan = graph.remake_verdicts()
    if plan.data[i]:
        return "a literal the plan holds"
    nb = (graph.meta.get("nbytes") or [None] * len(graph))[i]
    spill = f"{_seconds(spill_seconds(nb or 0))} to write and read back"
    if plan.remake[i] or plan.refused[i]:
        kinds = graph.meta.get("kind") or [None] * len(graph)
        sources = sorted({kinds[s] or "other" for s in _sources(graph, i, plan)})
        steps = plan.steps[i]
        made = (f"{steps} step{'s' if steps != 1 else ''} back to its sources "
                f"({', '.join(sources)}), "
                f"about {_seconds(plan.chain[i])} against {spill}")
        if plan.remake[i]:
            return f"made again: {made}"
        return f"spilled, not made again (though {made}): {graph.unrepeatable_reason(i)}"
    kind = (graph.meta.get("kind") or [None] * len(graph))[i]
    cheap = (graph.meta.get("remake") or [None] * len(graph))[i]
    if not (kind_info(kind).remake if cheap is None else cheap):
        what = ("a step of its fused chain is" if cheap is not None
                else f"its kind ({kind or 'other'}) is")
        return f"spilled: {what} not cheaper to make again than to spill"
    for d in graph.dep_idx[graph.dep_ptr[i] : graph.dep_ptr[i + 1]].tolist():
        if not (plan.data[d] or plan.remake[d] or plan.refused[d]):
            kinds = graph.meta.get("kind") or [None] * len(graph)
            return (f"spilled: its input {graph.opname(d)} ({kinds[d] or 'other'}) is not "
                    "made again")
    seconds = step_seconds(graph).tolist()
    cost = seconds[i] + sum(plan.chain[d] for d in
                            graph.dep_idx[graph.dep_ptr[i] : graph.dep_ptr[i + 1]].tolist())
    return (f"spilled: making it again from its sources takes about {_seconds(cost)}, "
            f"more than the {spill}")


def _sources(graph: Any, i: int, plan: RemakePlan) -> list[int]:
    """The tasks without inputs on the chain that makes ``i`` again."""
    ptr, idx = graph.dep_ptr, graph.dep_idx
    seen, stack, out = {i}, [i], []
    while stack:
        t = stack.pop()
        deps = idx[ptr[t] : ptr[t + 1]].tolist()
        if not deps:
            out.append(t)
        for d in deps:
            if d not in seen and (plan.remake[d] or plan.refused[d]):
                seen.add(d)
                stack.append(d)
    return out


def _seconds(s: float) -> str:
    """``s`` seconds in words, e.g. '1.2 ms'."""
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"
