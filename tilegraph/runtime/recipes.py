"""Recipes that make a dropped result again: the steps, inputs first, from what is still in
memory or, where nothing is, from the sources (the chain of
:meth:`~tilegraph.graph.TaskGraph.remakeable`, whose results are never written to disk),
and running them with each step's block checked against the checksum kept when it was
dropped. The memory manager (:mod:`tilegraph.runtime.memory`) builds a recipe with its
execution's lock held and runs it with the lock released.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

MADE = object()  # in a recipe: an input made by an earlier step


def recipe(i: int, results: Mapping[int, Any], graph: Any, data: bytes | bytearray,
           remakeable: bytes | bytearray, disk: Mapping[int, Any],
           deps: Callable[[int], list[int]]) -> list[tuple[int, list, int | None]]:
    """The steps that make the dropped result of ``i`` again, inputs first, each
    ``(task, inputs, digest)``: ``inputs`` one entry per dependency, its value in
    ``results`` now, a literal (``data``: the graph's), or ``MADE`` (made by an earlier
    step); ``digest`` the checksum kept of a step's block when it was dropped (in ``disk``,
    a record without a path). A needed input neither in memory nor ``remakeable`` is a
    ``RuntimeError`` (the remake rule guarantees it never is)."""
    steps: list[tuple[int, list, int | None]] = []
    placed: set[int] = set()
    stack = [(i, False)]
    while stack:
        t, expanded = stack.pop()
        if t in placed:
            continue
        ds = deps(t)
        if not expanded:
            stack.append((t, True))
            for d in ds:
                if d in results or data[d] or d in placed:
                    continue
                if not remakeable[d]:
                    raise RuntimeError(
                        f"making {graph.keys[i]!r} again needs {graph.keys[d]!r}, which "
                        "is neither in memory nor to be made again")
                stack.append((d, False))
            continue
        inputs = [results[d] if d in results else graph.args[d][0] if data[d] else MADE
                  for d in ds]
        rec = disk.get(t)
        steps.append((t, inputs, rec.digest if rec is not None and not rec.path else None))
        placed.add(t)
    return steps


def run(i: int, steps: list, graph: Any, run_again: Callable[[int, list], Any],
        check: Callable[[int, Any, int], None]) -> tuple[Any, list[int]]:
    """Run ``steps`` (:func:`recipe`): each step's result made by ``run_again(task,
    inputs)``, held only until its last consumer among the steps has run, and passed to
    ``check(task, value, digest)`` when a checksum was kept. Returns the result of ``i``
    and the other tasks run."""
    uses: dict[int, int] = {}
    for t, inputs, _ in steps:
        for d, v in zip(graph.dep_idx[graph.dep_ptr[t]:graph.dep_ptr[t + 1]].tolist(),
                        inputs, strict=True):
            if v is MADE:
                uses[d] = uses.get(d, 0) + 1
    made: dict[int, Any] = {}
    for t, inputs, digest in steps:
        ds = graph.dep_idx[graph.dep_ptr[t]:graph.dep_ptr[t + 1]].tolist()
        args = [made[d] if v is MADE else v for d, v in zip(ds, inputs, strict=True)]
        value = run_again(t, args)
        del args
        for d, v in zip(ds, inputs, strict=True):
            if v is MADE:
                uses[d] -= 1
                if not uses[d]:
                    del made[d]
        if digest is not None:
            check(t, value, digest)
        made[t] = value
    return made.pop(i), [t for t, _, _ in steps if t != i]
