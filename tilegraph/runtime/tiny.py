"""The tiny-task policy of workers sharing one interpreter: which ready task a free worker
may take while another is busy.

Tiny tasks are not worth a second worker: when tasks take microseconds, two threads hand
the lock and the GIL back and forth and one thread alone is three times faster. The backend
marks each task (the execution's ``parallel`` flags, e.g. :func:`threads_policy`):
``PARALLEL`` ones (BLAS kernels; tasks planned to take ``PARALLEL_TASK_TIME`` or more) are
taken by any free worker, ``TINY`` ones only when no worker is busy or every busy worker is
inside a ``PARALLEL`` task (its kernel leaves the GIL free, or it is long enough that one
tiny task beside it costs nothing: the sliver gathers of a sliced difference beside the
random draws they wait on), and for ``UNKNOWN`` ones the moving average of task times
(``task_time``) decides. A worker that may not take the next task sleeps, waking every
``POLL_INTERVAL``, and joins in when the next task is worth it or a busy worker has been
inside one task for ``STUCK_TIME`` (well above CPython's 5 ms GIL switch interval, whose
pauses would otherwise look like long tasks).

The functions read the execution's state; they are called with its lock held.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import TaskGraph

PARALLEL_TASK_TIME = 200e-6  # seconds: tasks shorter than this on average run on one worker
STUCK_TIME = 0.02  # seconds in one task after which idle workers help with the rest
TINY, PARALLEL, UNKNOWN = range(3)  # values of ``parallel``


def may_take(ex: Any) -> bool:
    """Whether a free worker of execution ``ex`` should take a ready task now."""
    if not ex.ready:
        return False
    if ex.nrunning == 0 or worth_second(ex, ex.task_of[ex.ready[0]]) or beside_long(ex):
        return True
    stuck = time.perf_counter() - STUCK_TIME
    return any(t < stuck for t in ex.busy_since.values())


def beside_long(ex: Any) -> bool:
    """Whether every running task of ``ex`` is a long or GIL-free one (``PARALLEL``): a
    tiny task then runs beside them without two threads handing the GIL back and forth."""
    flags = ex.parallel
    if flags is None or len(ex.running) != ex.nrunning:
        return False
    return all(flags[j] == PARALLEL for j in ex.running)


def worth_second(ex: Any, i: int) -> bool:
    """Whether task i of ``ex`` is worth running beside a busy worker."""
    flags = ex.parallel
    flag = UNKNOWN if flags is None else flags[i]
    if flag == PARALLEL:
        return True
    return flag == UNKNOWN and ex.task_time >= PARALLEL_TASK_TIME


def threads_policy(graph: TaskGraph, seconds: np.ndarray) -> bytearray:
    """The tiny-task policy of threads sharing one interpreter: a task whose kind releases
    the GIL (BLAS/LAPACK kernels) or that is planned to take at least
    ``PARALLEL_TASK_TIME`` is worth a second worker (``PARALLEL``); a shorter planned task
    is not (``TINY``); a task with no kind and no planned cost is ``UNKNOWN`` (measured).

    >>> from tilegraph.graph import GraphBuilder
    >>> b = GraphBuilder()
    >>> b.add("p", print, kind="product", cost=1.0)
    >>> b.add("e", print, kind="elementwise", nbytes=8)
    >>> b.add("o", print)
    >>> list(threads_policy(b.build(), np.array([1e-6, 1e-6, 0.0])))
    [1, 0, 2]
    """
    n = len(graph)
    kinds = graph.meta.get("kind") or [None] * n
    costs = graph.meta.get("cost") or [None] * n
    sizes = graph.meta.get("nbytes") or [None] * n
    long_enough = (np.asarray(seconds) >= PARALLEL_TASK_TIME).tolist()
    gil_free = {k: kind_info(k).releases_gil for k in set(kinds) if k is not None}
    out = bytearray(n)
    for i, k in enumerate(kinds):
        if (k is not None and gil_free[k]) or long_enough[i]:
            out[i] = PARALLEL
        elif k is None and not costs[i] and not sizes[i]:
            out[i] = UNKNOWN
        else:
            out[i] = TINY
    return out
