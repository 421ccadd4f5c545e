"""Task priorities: which ready task runs first.

The default order is a depth-first post-order from the requested outputs: a task's
dependencies are visited in argument order, and a task gets its number once all of them
have theirs. Among ready tasks the executor runs the smallest number first, so one output's
subtree is finished (and its intermediates freed) before the next one is started; that keeps
the live set small, where breadth-first order would hold a whole level of the graph at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tilegraph.graph.taskgraph import CycleError, TaskGraph


def order(graph: TaskGraph, outputs: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Priority of every task (a permutation of ``0..n-1``; lower runs first).

    ``outputs`` are task indices, visited in the order given; tasks no output needs come last.
    Raises :class:`~tilegraph.graph.CycleError` if the graph has a cycle.

    >>> from operator import add
    >>> from tilegraph.graph import from_dask
    >>> g = from_dask({"a": 1, "b": (add, "a", 1), "c": 2, "d": (add, "b", "c")})
    >>> [g.keys[i] for i in np.argsort(order(g))]
    ['a', 'b', 'c', 'd']
    """
    n = len(graph)
    ptr = graph.dep_ptr.tolist()
    idx = graph.dep_idx.tolist()
    prio = [-1] * n
    seen = bytearray(n)  # 0: unseen, 1: on the current path, 2: numbered
    count = 0
    roots = range(n) if outputs is None else [int(o) for o in outputs]
    for root in (*roots, *range(n)):
        if seen[root]:
            continue
        seen[root] = 1
        stack = [root]
        cursor = [ptr[root]]
        while stack:
            i = stack[-1]
            p = cursor[-1]
            end = ptr[i + 1]
            child = -1
            while p < end:
                d = idx[p]
                p += 1
                s = seen[d]
                if s == 0:
                    child = d
                    break
                if s == 1:
                    raise CycleError([graph.keys[j] for j in stack[stack.index(d) :]])
            if child < 0:
                prio[i] = count
                count += 1
                seen[i] = 2
                stack.pop()
                cursor.pop()
            else:
                cursor[-1] = p
                seen[child] = 1
                stack.append(child)
                cursor.append(ptr[child])
    return np.array(prio, dtype=np.int64)
