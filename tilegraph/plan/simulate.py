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
occupies the link for ``(b + message_bytes) / bandwidth`` seconds and arrives at
``link_start + (b + message_bytes) / bandwidth + latency``. With ``share_limit``, outputs of
at most that many bytes together are then sent from ``gather_to`` to every other worker
(as the MPI backend returns small results on every rank), one after another on its link.
The makespan is the time the last task finished or the last gathered (or shared) output
arrived, whichever is later. ``wire_bytes`` adds what the transport itself sends
(:meth:`~tilegraph.plan.cost.CostModel.wire_bytes`).

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

State. A :class:`Simulation` holds it, ``n`` tasks, ``nw`` workers and one *row* per (block,
worker) pair that ever holds the block (the task's own worker, every worker it is sent to):

==============  =================================================================================
field           meaning and invariant
==============  =================================================================================
``missing``     list[n] of int: inputs of task i not yet present on its worker; at 0, i is ready
``ready``       list[nw] of heaps of the ranks (places in priority order) of ready tasks not
                started on each worker
``running``     list[nw] of bool: the worker is computing a task (one at a time)
``refs``        list[rows] of int: holders of a row not done with it: its consumers on that
                worker not finished, plus 1 on the producer's row while a send of it is on the
                link, plus ``n + 1`` for a kept row (an output, a gathered block); the row's
                bytes leave its worker when this hits 0
``held``        list[nw] of int: bytes each worker holds now; ``peak`` its most, taken after
                each addition
``link_free``   list[nw] of float: when each worker's outgoing link has sent all it was given
``times``       heap of the distinct instants with pending events; ``at[t]`` what happens at
                ``t`` (tasks finishing, sends leaving their links, arrivals)
``now``         the current instant; at the end, the makespan
``finished``    tasks finished; the run is complete at ``finished == n``
``dirty``       workers whose state changed at this instant: they may start a task
==============  =================================================================================

Transitions are small methods, as in the executor (:mod:`tilegraph.runtime.core`):
:meth:`Simulation._start` (a free worker starts its first ready task), :meth:`~Simulation._finish`
(a task finishes: temporaries and used inputs released, consumers on its worker delivered,
sends issued), :meth:`~Simulation._send` (a block goes onto its worker's link),
:meth:`~Simulation._arrive` (a sent block arrives), :meth:`~Simulation._deliver` (a block is
present: its consumers there lose a missing input), :meth:`~Simulation._unref` (a holder is done
with a block; the last releases it) and :meth:`~Simulation._hold` (memory grows, peak taken).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

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
    wire_bytes: int = 0
    """Bytes on the network: the blocks, and what the transport adds per message, task
    and run (:meth:`~tilegraph.plan.cost.CostModel.wire_bytes`)."""
    shared_bytes: int = 0
    """Bytes of outputs sent from ``gather_to`` to the other workers (``share_limit``),
    included in ``bytes_moved``."""

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


class _Holdings(NamedTuple):
    """Where every block is ever held: one row per (block, worker) pair, sorted by block then
    worker. Every task has its home row (its block on its own worker); the other rows are the
    transfers (to a worker with a consumer, or the gather)."""

    row_task: np.ndarray  # int64[rows], the block (task index) of each row
    row_worker: np.ndarray  # int64[rows], the worker of each row
    edge_row: np.ndarray  # int64[edges], the row each edge of ``graph.dep_idx`` reads
    home_row: np.ndarray  # int64[n], the home row of each task
    cons_ptr: np.ndarray  # int64[rows + 1], CSR pointers into cons: the consumers of a row
    cons: np.ndarray  # int64[edges], the consuming tasks, grouped by row
    task_ptr: np.ndarray  # int64[n + 1], the rows of task i are task_ptr[i]:task_ptr[i + 1]
    refs: np.ndarray  # int64[rows], the holders each row starts with (see ``refs`` above)


def _holdings(graph: Any, pl: np.ndarray, nw: int, out: np.ndarray,
              gather_to: int | None) -> _Holdings:
    """The rows of a placed graph, as arrays; codes are ``block * nw + worker``."""
    n = len(graph)
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
    edge_row = inverse[:nedges]
    home_row = inverse[nedges : nedges + n]
    keep = np.zeros(nrows, dtype=bool)
    keep[inverse[nedges + n :]] = True
    keep[home_row[out]] = True
    consumers = np.bincount(edge_row, minlength=nrows)
    cons_ptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(consumers, out=cons_ptr[1:])
    task_ptr = np.searchsorted(row_task, np.arange(n + 1, dtype=np.int64))
    refs = consumers.copy()
    refs[home_row] += np.diff(task_ptr) > 1  # the producer's link holds the block until sent
    refs[keep] += n + 1  # kept blocks never run out of holders
    return _Holdings(row_task, uniq % nw, edge_row, home_row, cons_ptr,
                     cons[np.argsort(edge_row, kind="stable")], task_ptr, refs)


class _Instant(NamedTuple):
    """What happens at one instant, in the order it is handled."""

    finishing: list[int]  # tasks that finish
    sent: list[int]  # home rows whose last send leaves the link
    arriving: list[int]  # rows whose block arrives on their worker


class Simulation:
    """One simulated run of a placed graph; see the module docstring for its model and state.

    ``pl``, ``out`` and ``rank`` are checked already (see :func:`simulate`): the worker of
    every task, the outputs, and the rank of every task in priority order. :meth:`run` plays
    every event, :meth:`result` sums it up."""

    def __init__(self, graph: Any, pl: np.ndarray, nw: int, out: np.ndarray,
                 rank: np.ndarray, model: CostModel, gather_to: int | None):
        n = len(graph)
        self.graph = graph
        self.ntasks = n
        self.nworkers = nw
        self.pl = pl
        self.task_seconds = model.task_seconds(graph)
        self.rows = rows = _holdings(graph, pl, nw, out, gather_to)
        self.sizes = _sizes(graph)
        self.row_size = self.sizes[rows.row_task]

        # constants, as plain lists
        self._place = pl.tolist()
        self._size = self.sizes.tolist()
        self._working = task_estimates(graph)  # output + temporaries, while the task runs
        self._rsize = self.row_size.tolist()
        self._seconds = self.task_seconds.tolist()
        self._rank = rank.tolist()
        self._task_of = np.argsort(rank, kind="stable").tolist()
        self._dep_ptr = graph.dep_ptr.tolist()
        self._edge_row = rows.edge_row.tolist()
        self._rworker = rows.row_worker.tolist()
        self._cons_ptr = rows.cons_ptr.tolist()
        self._cons = rows.cons.tolist()
        self._home = rows.home_row.tolist()
        self._task_ptr = rows.task_ptr.tolist()
        self._bandwidth = float(model.bandwidth)
        self._latency = float(model.latency)
        self._message = float(model.message_bytes)

        # state
        self.missing = graph.in_degree().tolist()
        self.refs = rows.refs.tolist()
        self.held = [0] * nw
        self.peak = [0] * nw
        self.link_free = [0.0] * nw
        self.running = [False] * nw
        self.ready: list[list[int]] = [[] for _ in range(nw)]
        for i in range(n):
            if self.missing[i] == 0:
                self.ready[self._place[i]].append(self._rank[i])
        for r in self.ready:
            heapq.heapify(r)
        self.times: list[float] = []
        self.at: dict[float, _Instant] = {}
        self.now = 0.0
        self.finished = 0
        self.dirty = set(range(nw))

    def run(self) -> None:
        """Play every event: start what can start, then handle the next instant, until
        nothing is pending. Raises ``ValueError`` if some task never became ready."""
        while True:
            for w in self.dirty:
                if not self.running[w] and self.ready[w]:
                    self._start(w)
            self.dirty.clear()
            if not self.times:
                break
            self._advance()
        if self.finished < self.ntasks:
            stuck = next(i for i in range(self.ntasks) if self.missing[i] > 0)
            raise ValueError(
                f"{self.ntasks - self.finished} tasks never became ready, e.g. "
                f"{self.graph.keys[stuck]!r}: the graph has a cycle"
            )

    def _advance(self) -> None:
        """Move to the next instant and handle its events (finishes, then sends leaving their
        links, then arrivals); events added for this same instant meanwhile join in."""
        self.now = now = heapq.heappop(self.times)
        instant = self.at[now]
        for i in instant.finishing:
            self._finish(i)
        for r in instant.sent:
            self._unref(r)
        for r in instant.arriving:
            self._arrive(r)
        del self.at[now]

    def _instant(self, t: float) -> _Instant:
        """The events of time ``t``, a new instant if none is pending at ``t``."""
        instant = self.at.get(t)
        if instant is None:
            instant = self.at[t] = _Instant([], [], [])
            heapq.heappush(self.times, t)
        return instant

    # -- transitions -------------------------------------------------------------------------

    def _start(self, w: int) -> None:
        """Free worker ``w`` starts its first ready task: its working set is held until it
        finishes."""
        i = self._task_of[heapq.heappop(self.ready[w])]
        self._hold(w, self._working[i])
        self.running[w] = True
        self._instant(self.now + self._seconds[i]).finishing.append(i)

    def _finish(self, i: int) -> None:
        """Task ``i`` finishes: its temporaries and used inputs go, its local consumers lose a
        missing input, and its block is sent to every other worker that needs it."""
        w = self._place[i]
        working, s = self._working[i], self._size[i]
        if working > s:
            self.held[w] -= working - s  # its temporaries
        self.running[w] = False
        self.dirty.add(w)
        self.finished += 1
        for r in self._edge_row[self._dep_ptr[i] : self._dep_ptr[i + 1]]:
            self._unref(r)
        last = -1.0
        for r in range(self._task_ptr[i], self._task_ptr[i + 1]):
            if self._rworker[r] == w:
                self._deliver(r)
            else:
                last = self._send(w, r, s)
        home = self._home[i]
        if last >= 0.0:
            self._instant(last).sent.append(home)
        elif self.refs[home] == 0:
            self.held[w] -= s  # nothing needs it

    def _send(self, w: int, r: int, nbytes: int) -> float:
        """Worker ``w`` sends ``nbytes`` for row ``r`` on its link, after the sends before it;
        returns when the send leaves the link."""
        start = self.link_free[w]
        if start < self.now:
            start = self.now
        left = start + (nbytes + self._message) / self._bandwidth
        self.link_free[w] = left
        self._instant(left + self._latency).arriving.append(r)
        return left

    def _arrive(self, r: int) -> None:
        """The block of row ``r`` arrives on its worker: held there, its consumers lose a
        missing input."""
        v = self._rworker[r]
        self._hold(v, self._rsize[r])
        self._deliver(r)
        self.dirty.add(v)

    def _deliver(self, r: int) -> None:
        """The block of row ``r`` is present on its worker: each consumer there whose inputs
        are now all present becomes ready."""
        missing = self.missing
        ready = self.ready[self._rworker[r]]
        for c in self._cons[self._cons_ptr[r] : self._cons_ptr[r + 1]]:
            m = missing[c] - 1
            missing[c] = m
            if m == 0:
                heapq.heappush(ready, self._rank[c])

    def _unref(self, r: int) -> None:
        """A holder of row ``r`` is done with it; the last one releases its bytes."""
        left = self.refs[r] - 1
        self.refs[r] = left
        if left == 0:
            self.held[self._rworker[r]] -= self._rsize[r]

    def _hold(self, w: int, nbytes: int) -> None:
        """Worker ``w`` holds ``nbytes`` more; its peak is taken after the addition."""
        h = self.held[w] + nbytes
        self.held[w] = h
        if h > self.peak[w]:
            self.peak[w] = h

    def result(self) -> SimResult:
        """The outcome of the run: every remote row is one message, sent once by the block's
        worker."""
        nw, pl, rows = self.nworkers, self.pl, self.rows
        remote = rows.row_worker != pl[rows.row_task]
        size = self.row_size[remote]
        sent = np.zeros(nw, dtype=np.int64)
        received = np.zeros(nw, dtype=np.int64)
        np.add.at(sent, pl[rows.row_task[remote]], size)
        np.add.at(received, rows.row_worker[remote], size)
        busy = np.zeros(nw, dtype=np.float64)
        np.add.at(busy, pl, self.task_seconds)
        return SimResult(
            workers=nw,
            makespan=self.now,
            bytes_moved=int(size.sum()),
            messages=int(remote.sum()),
            bytes_sent=sent,
            bytes_received=received,
            peak_memory=np.array(self.peak, dtype=np.int64),
            busy=busy,
        )


def simulate(
    graph: Any,
    placement: Any,
    workers: int,
    *,
    priority: Sequence[int] | np.ndarray | None = None,
    outputs: Sequence[int] | np.ndarray | None = None,
    model: CostModel | None = None,
    gather_to: int | None = 0,
    share_limit: int | None = None,
) -> SimResult:
    """Simulate running ``graph`` on ``workers`` workers with task ``i`` on ``placement[i]``.

    ``priority`` orders ready tasks (lower runs first; ties go to the lower task index) and
    defaults to ``order(graph, outputs)``; ``outputs`` (task indices) default to the tasks
    without consumers; ``model`` defaults to ``CostModel()``; outputs placed elsewhere than
    ``gather_to`` are sent there at the end (``None``: no gather), and with ``share_limit``,
    outputs of at most that many bytes together from there to every other worker. The model
    is described in the module docstring. Raises ``ValueError`` on a bad placement, worker
    count, priority or ``gather_to``, and if some task can never run (a cycle).
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
    if priority is None:
        prio = order(graph, out)
    else:
        prio = np.asarray(priority).reshape(-1)
        if len(prio) != n:
            raise ValueError(f"priority has {len(prio)} entries but the graph has {n} tasks")
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(prio, kind="stable")] = np.arange(n, dtype=np.int64)
    sim = Simulation(graph, pl, nw, out, rank, model, gather_to)
    sim.run()
    res = sim.result()
    shared = 0
    if gather_to is not None and share_limit is not None and nw > 1:
        total = int(sim.sizes[out].sum())
        if total <= share_limit:
            shared = total * (nw - 1)
            t = res.makespan
            for _ in range(nw - 1):
                t += (total + model.message_bytes) / model.bandwidth
            res = replace(res, makespan=t + model.latency, bytes_moved=res.bytes_moved + shared,
                          messages=res.messages + nw - 1, shared_bytes=shared)
    wire = model.wire_bytes(res.bytes_moved, res.messages, n)
    return replace(res, wire_bytes=round(wire))
