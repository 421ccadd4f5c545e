"""A discrete-event simulator of a placed task graph: makespan, traffic and memory per worker.

Given a task graph whose tasks are already assigned to workers (a *placement*), the simulator
computes, without running anything, how long the graph takes, how many bytes move between
workers and how much memory each worker holds at its peak. Times come from a
:class:`~tilegraph.plan.cost.CostModel`, sizes from the ``nbytes`` metadata column (missing
values count as 0). It is meant for reasoning about hundreds of workers on a small machine.

Compute. Each worker runs one task at a time. A task is *ready* on its worker once every input
is present there (computed there, or arrived). A free worker starts its ready task with the
lowest priority value (the default priorities are :func:`~tilegraph.plan.order.order`); the
task takes ``model.task_seconds(graph)[i]`` seconds.

Communication. When task ``i`` finishes on worker ``w`` at time ``t``, its block is sent once
to every other worker that has a consumer of it, and to ``gather_to`` if ``i`` is an output
placed elsewhere; sends are issued in increasing order of destination worker. Every worker has
one outgoing link, and its sends use it one after another in the order they are issued: a send
of ``b`` bytes starts at ``link_start = max(t, end of the previous send on that link)``,
occupies the link for ``b / bandwidth`` seconds and arrives at
``link_start + b / bandwidth + latency``. The makespan is the time the last task finished or
the last gathered output arrived, whichever is later.

Memory. The executor's memory model (:func:`tilegraph.graph.memory.task_estimates`), as in
:func:`~tilegraph.plan.explain.sequential_peak`: a task's output and its temporaries count
against its worker from the moment the task starts, the temporaries until it finishes, and a
received block counts from the moment it arrives; the peak is taken after each such
addition. A block held by a worker is released
there once every consumer of it on that worker has finished and, on the worker that produced
it, once every send of it has left the link. Outputs are kept to the end on the worker that
computed them, and on ``gather_to`` once gathered. A block nothing needs is released when its
task finishes.

Simultaneous events. Everything that happens at one instant is handled before any task starts
at that instant: first finished tasks, then sends leaving their links (both release memory),
then arrivals; after that every free worker with a ready task starts one.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.graph.memory import task_estimates
from tilegraph.plan.cost import CostModel
from tilegraph.plan.order import order
from tilegraph.util import human, unique


@dataclass(frozen=True, eq=False)
class SimResult:
    """The outcome of :func:`simulate`. Arrays are indexed by worker."""

    workers: int
    makespan: float
    """Seconds until the last task (and the final gather) finished."""
    bytes_moved: int
    """Total bytes sent between distinct workers, the gather of outputs included."""
    messages: int
    """Number of block transfers."""
    bytes_sent: np.ndarray
    """int64[workers], bytes each worker sent."""
    bytes_received: np.ndarray
    """int64[workers], bytes each worker received."""
    peak_memory: np.ndarray
    """int64[workers], most bytes of blocks held at once by each worker."""
    busy: np.ndarray
    """float64[workers], seconds each worker computed."""

    @property
    def utilisation(self) -> float:
        """Fraction of worker time spent computing: ``sum(busy) / (workers * makespan)``."""
        if self.makespan <= 0:
            return 0.0
        return float(self.busy.sum()) / (self.workers * self.makespan)

    def __str__(self) -> str:
        peak = self.peak_memory
        peak_max = int(peak.max()) if len(peak) else 0
        peak_mean = float(peak.mean()) if len(peak) else 0.0
        return "\n".join([
            f"simulated on {self.workers} workers: makespan {self.makespan:.6g} s",
            f"moved {human(self.bytes_moved)} in {self.messages} messages",
            f"peak memory per worker: max {human(peak_max)}, mean {human(peak_mean)}",
            f"utilisation: {self.utilisation:.1%}",
        ])


def _sizes(graph: Any) -> np.ndarray:
    """The ``nbytes`` column as int64, missing values 0."""
    n = len(graph)
    col = graph.meta.get("nbytes")
    if col is None:
        return np.zeros(n, dtype=np.int64)
    return np.fromiter((0 if v is None else int(v) for v in col), dtype=np.int64, count=n)


def _consumers_of_edges(graph: Any) -> np.ndarray:
    """The consuming task of every edge, in the order of ``graph.dep_idx``."""
    n = len(graph)
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))


def _default_outputs(graph: Any) -> np.ndarray:
    return np.flatnonzero(graph.out_degree() == 0).astype(np.int64)


def _as_outputs(graph: Any, outputs: Sequence[int] | np.ndarray | None) -> np.ndarray:
    if outputs is None:
        return _default_outputs(graph)
    out = np.asarray(outputs, dtype=np.int64).reshape(-1)
    n = len(graph)
    if len(out) and (out.min() < 0 or out.max() >= n):
        bad = int(out[(out < 0) | (out >= n)][0])
        raise ValueError(f"output task index {bad} is out of range for a graph of {n} tasks")
    return unique(out)


def _as_placement(graph: Any, placement: Any, workers: int | None) -> np.ndarray:
    n = len(graph)
    pl = np.asarray(placement)
    if pl.ndim != 1 or len(pl) != n:
        raise ValueError(
            f"placement has shape {pl.shape} but the graph has {n} tasks: "
            "it needs one worker number per task"
        )
    if n == 0:
        return pl.astype(np.int64)
    if pl.dtype.kind not in "iu":
        raise ValueError(f"placement must hold integer worker numbers, got dtype {pl.dtype}")
    pl = pl.astype(np.int64)
    bad = pl < 0 if workers is None else (pl < 0) | (pl >= workers)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        limit = "the workers >= 0" if workers is None else f"[0, {workers})"
        raise ValueError(
            f"placement puts task {i} ({graph.keys[i]!r}) on worker {int(pl[i])}, "
            f"outside {limit}"
        )
    return pl


def transfers(
    graph: Any,
    placement: Any,
    outputs: Sequence[int] | np.ndarray | None = None,
    gather_to: int | None = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The block transfers a placement implies: arrays (task index, destination worker).

    One row per (task, remote worker that consumes it) pair, each pair once; outputs (task
    indices) placed elsewhere than ``gather_to`` are also sent to ``gather_to`` (pass
    ``gather_to=None`` to skip).

    ``outputs`` defaults to the tasks without consumers. Rows are sorted by task, then by
    destination worker.
    """
    pl = _as_placement(graph, placement, None)
    if gather_to is not None and gather_to < 0:
        raise ValueError(f"gather_to must be a worker number >= 0, got {gather_to}")
    n = len(graph)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy()
    nworkers = int(pl.max()) + 1
    if gather_to is not None:
        nworkers = max(nworkers, gather_to + 1)
    prod = graph.dep_idx
    dest = pl[_consumers_of_edges(graph)]
    remote = pl[prod] != dest
    codes = [prod[remote] * nworkers + dest[remote]]
    if gather_to is not None:
        out = _as_outputs(graph, outputs)
        out = out[pl[out] != gather_to]
        codes.append(out * nworkers + gather_to)
    uniq = unique(np.concatenate(codes))
    return uniq // nworkers, uniq % nworkers


def communication_volume(
    graph: Any,
    placement: Any,
    outputs: Sequence[int] | np.ndarray | None = None,
    gather_to: int | None = 0,
) -> tuple[int, int]:
    """(bytes, messages) moved: the sum of ``nbytes`` (meta column "nbytes", missing = 0)
    over :func:`transfers`, and their number."""
    tasks, _ = transfers(graph, placement, outputs, gather_to)
    return int(_sizes(graph)[tasks].sum()), len(tasks)


def simulate(
    graph: Any,
    placement: Any,
    workers: int,
    *,
    priority: Sequence[int] | np.ndarray | None = None,
    outputs: Sequence[int] | np.ndarray | None = None,
    model: CostModel | None = None,
    gather_to: int | None = 0,
) -> SimResult:
    """Simulate running ``graph`` on ``workers`` workers with task ``i`` on ``placement[i]``.

    ``priority`` orders ready tasks (lower runs first; ties go to the lower task index) and
    defaults to ``order(graph, outputs)``; ``outputs`` (task indices) default to the tasks
    without consumers; ``model`` defaults to ``CostModel()``; outputs placed elsewhere than
    ``gather_to`` are sent there at the end (``None``: no gather). The model is described in
    the module docstring. Raises ``ValueError`` on a bad placement, worker count, priority or
    ``gather_to``, and if some task can never run (a cycle).
    """
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    nw = int(workers)
    if gather_to is not None and not 0 <= gather_to < nw:
        raise ValueError(f"gather_to is worker {gather_to}, outside [0, {nw})")
    n = len(graph)
    pl = _as_placement(graph, placement, nw)
    out = _as_outputs(graph, outputs)
    model = CostModel() if model is None else model
    task_seconds = model.task_seconds(graph)

    if priority is None:
        prio = order(graph, out)
    else:
        prio = np.asarray(priority).reshape(-1)
        if len(prio) != n:
            raise ValueError(f"priority has {len(prio)} entries but the graph has {n} tasks")
    by_rank = np.argsort(prio, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[by_rank] = np.arange(n, dtype=np.int64)

    # Holdings: one row per (block, worker) pair that ever holds the block, sorted by block
    # then worker. Every task has its home row (block on its own worker); the others are the
    # transfers. Codes are block * nw + worker.
    prod = graph.dep_idx
    cons = _consumers_of_edges(graph)
    nedges = len(prod)
    edge_codes = prod * nw + pl[cons]
    home_codes = np.arange(n, dtype=np.int64) * nw + pl
    if gather_to is not None:
        gathered = out[pl[out] != gather_to]
    else:
        gathered = np.zeros(0, dtype=np.int64)
    gather_codes = gathered * nw + gather_to if gather_to is not None else gathered
    uniq, inverse = unique(
        np.concatenate([edge_codes, home_codes, gather_codes]), return_inverse=True
    )
    inverse = inverse.reshape(-1)
    nrows = len(uniq)
    row_task = uniq // nw
    row_worker = uniq % nw
    edge_row = inverse[:nedges]
    home_row = inverse[nedges : nedges + n]
    row_keep = np.zeros(nrows, dtype=bool)
    row_keep[inverse[nedges + n :]] = True
    row_keep[home_row[out]] = True
    row_consumers = np.bincount(edge_row, minlength=nrows)
    row_cptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(row_consumers, out=row_cptr[1:])
    row_cons = cons[np.argsort(edge_row, kind="stable")]
    task_rptr = np.searchsorted(row_task, np.arange(n + 1, dtype=np.int64))
    sends = np.diff(task_rptr) - 1
    refs_arr = row_consumers.copy()
    refs_arr[home_row] += sends > 0  # the producer's link holds the block until it is sent
    refs_arr[row_keep] += n + 1  # kept blocks never run out of holders
    sizes = _sizes(graph)
    row_size = sizes[row_task]

    # Plain lists for the event loop.
    place = pl.tolist()
    size = sizes.tolist()
    working = task_estimates(graph)  # output + temporaries, while the task runs
    rsize = row_size.tolist()
    seconds = task_seconds.tolist()
    rank_l = rank.tolist()
    by_rank_l = by_rank.tolist()
    dep_ptr = graph.dep_ptr.tolist()
    edge_row_l = edge_row.tolist()
    rworker = row_worker.tolist()
    rcptr = row_cptr.tolist()
    rcons = row_cons.tolist()
    refs = refs_arr.tolist()
    home = home_row.tolist()
    trptr = task_rptr.tolist()
    missing = graph.in_degree().tolist()
    bandwidth = float(model.bandwidth)
    latency = float(model.latency)

    held = [0] * nw
    peak = [0] * nw
    link_free = [0.0] * nw
    running = [False] * nw
    ready: list[list[int]] = [[] for _ in range(nw)]
    for i in range(n):
        if missing[i] == 0:
            ready[place[i]].append(rank_l[i])
    for r in ready:
        heapq.heapify(r)

    # Pending events, grouped by instant: a heap of distinct times, and for each time the
    # tasks finishing, the blocks whose sends leave the link (home rows) and the arrivals (rows).
    times: list[float] = []
    at: dict[float, tuple[list[int], list[int], list[int]]] = {}
    push = heapq.heappush
    pop = heapq.heappop
    finished = 0
    now = 0.0
    dirty = set(range(nw))
    while True:
        for w in dirty:
            if not running[w] and ready[w]:
                i = by_rank_l[pop(ready[w])]
                h = held[w] + working[i]
                held[w] = h
                if h > peak[w]:
                    peak[w] = h
                running[w] = True
                t = now + seconds[i]
                bucket = at.get(t)
                if bucket is None:
                    bucket = at[t] = ([], [], [])
                    push(times, t)
                bucket[0].append(i)
        dirty.clear()
        if not times:
            break
        now = pop(times)
        finishing, link_free_rows, arriving = at[now]
        for i in finishing:
            w = place[i]
            if working[i] > size[i]:
                held[w] -= working[i] - size[i]  # its temporaries
            running[w] = False
            dirty.add(w)
            finished += 1
            for r in edge_row_l[dep_ptr[i] : dep_ptr[i + 1]]:
                left = refs[r] - 1
                refs[r] = left
                if left == 0:
                    held[w] -= rsize[r]
            s = size[i]
            last = -1.0
            for r in range(trptr[i], trptr[i + 1]):
                v = rworker[r]
                if v == w:
                    rw = ready[w]
                    for c in rcons[rcptr[r] : rcptr[r + 1]]:
                        m = missing[c] - 1
                        missing[c] = m
                        if m == 0:
                            push(rw, rank_l[c])
                else:
                    start = link_free[w]
                    if start < now:
                        start = now
                    last = start + s / bandwidth
                    link_free[w] = last
                    t = last + latency
                    bucket = at.get(t)
                    if bucket is None:
                        bucket = at[t] = ([], [], [])
                        push(times, t)
                    bucket[2].append(r)
            if last >= 0.0:
                bucket = at.get(last)
                if bucket is None:
                    bucket = at[last] = ([], [], [])
                    push(times, last)
                bucket[1].append(home[i])
            elif refs[home[i]] == 0:
                held[w] -= s
        for r in link_free_rows:
            left = refs[r] - 1
            refs[r] = left
            if left == 0:
                held[rworker[r]] -= rsize[r]
        for r in arriving:
            v = rworker[r]
            h = held[v] + rsize[r]
            held[v] = h
            if h > peak[v]:
                peak[v] = h
            rv = ready[v]
            for c in rcons[rcptr[r] : rcptr[r + 1]]:
                m = missing[c] - 1
                missing[c] = m
                if m == 0:
                    push(rv, rank_l[c])
            dirty.add(v)
        del at[now]

    if finished < n:
        stuck = next(i for i in range(n) if missing[i] > 0)
        raise ValueError(
            f"{n - finished} tasks never became ready, e.g. {graph.keys[stuck]!r}: "
            "the graph has a cycle"
        )
    # Every remote row is one message, sent once by the block's worker.
    remote = row_worker != pl[row_task]
    sent = np.zeros(nw, dtype=np.int64)
    received = np.zeros(nw, dtype=np.int64)
    np.add.at(sent, pl[row_task[remote]], row_size[remote])
    np.add.at(received, row_worker[remote], row_size[remote])
    busy = np.zeros(nw, dtype=np.float64)
    np.add.at(busy, pl, task_seconds)
    return SimResult(
        workers=nw,
        makespan=now,
        bytes_moved=int(row_size[remote].sum()),
        messages=int(remote.sum()),
        bytes_sent=sent,
        bytes_received=received,
        peak_memory=np.array(peak, dtype=np.int64),
        busy=busy,
    )
