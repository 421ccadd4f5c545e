"""The executor core: the state machine every backend shares.

One :class:`Execution` runs one culled, ordered :class:`~tilegraph.graph.TaskGraph`. Workers
(threads of a backend, or the caller's thread) each run :meth:`Execution.worker_loop`: take
the highest-priority ready task, run it outside the lock, then record the result and make its
consumers ready. A worker that finishes a task usually takes the next one itself, so a chain
of tasks runs with no thread hand-off at all.

State (``n`` tasks, indices as in the graph; every field is guarded by ``lock``):

=============  ===================================================================================
field          meaning and invariant
=============  ===================================================================================
``state``      bytearray[n], one of ``WAITING READY RUNNING DONE RELEASED FAILED CANCELLED``
``waiting``    list[n] of int: dependencies of task i not yet done; i is READY when it hits 0
``refs``       list[n] of int: consumers of i not yet finished, plus 1 if i is an output;
               the result of i is released the moment this hits 0
``results``    dict, task index -> value, for DONE tasks that are not yet released
``ready``      heap of priorities of READY tasks; ``task_of[p]`` is the task with priority p
``attempts``   list[n] of int: failed attempts of task i so far (retries)
``nrunning``   tasks currently RUNNING
``ndone``      tasks that finished (DONE or RELEASED); the run is complete at ``ndone == n``
``finished``   no more tasks will start (complete, failed or cancelled); ``done_event`` is set
``error``      the exception that ended the run, or ``None``
``busy_since`` dict, worker -> ``perf_counter()`` when its current task started
``task_time``  moving average of task durations, seconds
``parallel``   bytearray[n] or ``None``: ``TINY``, ``PARALLEL`` or ``UNKNOWN`` per task (see
               "Tiny tasks"); ``None``: every task is worth a second worker
``limit``      the memory budget in bytes (``None``: no budget)
``sizes``      dict, task index -> bytes of its result while the result is in memory
``live``       sum of ``sizes``: bytes of results held in memory
``reserved``   sum of the estimates (output + temporaries) of the RUNNING tasks
``disk``       dict, task index -> SpillRecord of a result that has a copy on disk; a result
               is in memory iff it is in ``results`` (it may be in both: a clean copy)
``io_busy``    set of results being written to or read from disk right now (pinned)
``reloadable`` bytearray[n]: 1 for loads (kind "load", no inputs); under pressure their
               results are dropped without writing, and made again by running the load
``running``    set of RUNNING tasks; their inputs are pinned (see :meth:`_pinned`)
``awaiting``   external tasks (results made elsewhere, e.g. by another MPI rank) not yet
               delivered; each waits on one virtual dependency until :meth:`deliver`
``exported``   bytearray[n]: 1 for tasks whose result is also needed elsewhere; when one
               finishes, ``on_export(i, value)`` is called (with the lock held)
``prefetch``   deque of results queued for read-ahead; ``prefetching`` the set of them plus
               the one being read (all also in ``io_busy``); ``prefetch_bytes`` their sizes
=============  ===================================================================================

Memory: a ready task is admitted when ``live + reserved + prefetch_bytes`` plus its estimate
(and the size of its inputs that are on disk) fits under ``limit``. When it does not, the
worker first spills the coldest results that are not pinned (those whose next consumer comes
last in priority order) and tries again. The priority order binds every worker: a result
whose next consumer comes *before* the task being admitted is never evicted for it, so an
idle worker cannot run ahead on later loads by pushing out the blocks the earlier chain is
about to use; it waits instead. If nothing can be spilled it waits for running tasks; if
nothing runs either, it runs the task anyway so that the run always progresses. Spills and
reads happen outside the lock, so the other workers keep computing meanwhile; and while
results are on disk, an I/O thread reads ahead the spilled inputs of the next ready tasks
(within the budget) so that even a single worker computes while they are read.
Admission uses estimates, and tasks that run at once finish together, so with several
workers the results held can exceed ``limit`` by about one task's result; with one worker
they stay under it.

Tiny tasks are not worth a second worker: when tasks take microseconds, two threads spend
their time handing the scheduling lock and the GIL back and forth, and one thread alone is
three times faster. The backend says per task which tasks are worth a second worker
(``parallel``, from the planned cost and op kind: see
:func:`tilegraph.runtime.backends.threads_policy`): ``PARALLEL`` tasks (BLAS kernels, which
release the GIL, and tasks planned to take at least ``PARALLEL_TASK_TIME``) are always taken
by a free worker; ``TINY`` ones only when no worker is busy; for ``UNKNOWN`` ones (opaque
tasks with no planned cost, e.g. from dask-style dicts) the moving average ``task_time`` of
the tasks run so far decides. A worker that may not take the next task stays asleep; it wakes
every ``POLL_INTERVAL`` and joins in as soon as the next task is worth it or a busy worker
has been inside one task for ``STUCK_TIME``. That time
is well above CPython's 5 ms GIL switch interval: a poll that takes the GIL pauses the busy
worker, and a shorter threshold would mistake that pause for a long task.

Transitions are small methods: :meth:`_start` (READY -> RUNNING), :meth:`_task_done`
(RUNNING -> DONE, consumers' ``waiting`` drops, inputs' ``refs`` drop), :meth:`deliver`
(an external task WAITING -> DONE when its result arrives),
:meth:`_release` (DONE -> RELEASED), :meth:`_task_failed` (RUNNING -> READY on retry, else
FAILED and :meth:`_cancel`), :meth:`_cancel` (every unfinished task -> CANCELLED).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from heapq import heapify, heappop, heappush, nsmallest
from typing import Any

import numpy as np

from tilegraph.graph.taskgraph import MODE_DATA, MODE_DIRECT, MODE_FLAT, Dep, TaskGraph, fill
from tilegraph.runtime.events import (
    Release,
    RunEnd,
    Spill,
    Subscriber,
    TaskEnd,
    TaskFailed,
    TaskStart,
    Unspill,
    nbytes_of,
)
from tilegraph.runtime.memory import SpillRecord, SpillStore, spillable, task_estimates

WAITING, READY, RUNNING, DONE, RELEASED, FAILED, CANCELLED = range(7)
_NO_KWARGS: dict = {}
PREFETCH_TASKS = 2  # ready tasks whose spilled inputs are read ahead
PARALLEL_TASK_TIME = 200e-6  # seconds: tasks shorter than this on average run on one worker
STUCK_TIME = 0.02  # seconds in one task after which idle workers help with the rest
POLL_INTERVAL = 0.01  # seconds between checks of an idle worker
TINY, PARALLEL, UNKNOWN = range(3)  # values of ``parallel``
STATE_NAMES = ("waiting", "ready", "running", "done", "released", "failed", "cancelled")


class SchedulerStalled(RuntimeError):
    """No task is ready or running but the run is not complete (an internal invariant broke)."""


class Execution:
    """One run of a task graph; see the module docstring for its state.

    ``graph`` must already be culled to what ``outputs`` (task indices) need; ``priority`` is
    a permutation of ``0..n-1`` (lower runs first), e.g. from :func:`tilegraph.plan.order`.
    """

    def __init__(
        self,
        graph: TaskGraph,
        outputs: Sequence[int],
        priority: np.ndarray,
        *,
        retries: int = 0,
        subscribers: Sequence[Subscriber] = (),
        memory_limit: int | None = None,
        spill: SpillStore | None = None,
        external: Sequence[int] = (),
        exported: Sequence[int] = (),
        on_export: Callable[[int, Any], None] | None = None,
        parallel: bytearray | None = None,
    ):
        n = len(graph)
        self.graph = graph
        self.ntasks = n
        self.outputs = [int(o) for o in outputs]
        self.retries = retries
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self.done_event = threading.Event()
        self._emit: tuple[Subscriber, ...] = tuple(subscribers)
        self._nidle = 0
        self.started = time.perf_counter()

        self._dep_ptr = graph.dep_ptr.tolist()
        self._dep_idx = graph.dep_idx.tolist()
        ptr, idx = graph.dependents_csr()
        self._cons_ptr = ptr.tolist()
        self._cons_idx = idx.tolist()
        self._funcs = graph.funcs
        self._args = graph.args
        self._kwargs = graph.kwargs
        self._modes = graph.modes
        retry_col = graph.meta.get("retries")
        self._task_retries = retry_col

        prio = priority.tolist()
        self.priority = prio
        self.task_of = [0] * n
        for i, p in enumerate(prio):
            self.task_of[p] = i

        self.state = bytearray(n)
        self.waiting = graph.in_degree().tolist()
        self.refs = graph.out_degree().tolist()
        for o in self.outputs:
            self.refs[o] += 1
        self.results: dict[int, Any] = {}
        self.attempts = [0] * n
        self.nrunning = 0
        self.ndone = 0
        self.busy_since: dict[int, float] = {}
        self.task_time = PARALLEL_TASK_TIME
        self.parallel = parallel
        self.limit = memory_limit
        self.spill = spill if spill is not None else SpillStore()
        self.estimates = task_estimates(graph) if memory_limit is not None else [0] * n
        self.sizes: dict[int, int] = {}
        self.live = 0
        self.reserved = 0
        self.peak_live = 0
        self.disk: dict[int, SpillRecord] = {}
        self.io_busy: set[int] = set()
        self.running: set[int] = set()
        self.spilled_bytes = 0
        self.unspilled_bytes = 0
        self.prefetch: deque[int] = deque()
        self.prefetching: set[int] = set()
        self.prefetch_bytes = 0
        self._io_thread: threading.Thread | None = None
        kinds = graph.meta.get("kind")
        in_deg = graph.in_degree()
        self.reloadable = bytearray(
            1 if kinds is not None and kinds[i] == "load" and in_deg[i] == 0
            and graph.modes[i] != MODE_DATA else 0 for i in range(n))
        self.awaiting = len(external)
        for i in external:
            self.waiting[i] = 1  # the virtual dependency: the result's arrival
            self.reloadable[i] = 0
        self.exported = bytearray(n)
        for i in exported:
            self.exported[i] = 1
        self._on_export = on_export
        self.finished = False
        self.error: BaseException | None = None
        self.status = "running"

        # Data tasks are done before anything runs; tasks with no dependencies are ready.
        ready = []
        modes = self._modes
        waiting = self.waiting
        data = [i for i in range(n) if modes[i] == MODE_DATA]
        for i in data:
            self.state[i] = DONE
            self.results[i] = self._args[i][0]
            self._hold(i, self.results[i])
        self.ndone = len(data)
        for i in data:
            for c in self._cons_idx[self._cons_ptr[i] : self._cons_ptr[i + 1]]:
                waiting[c] -= 1
        for i in range(n):
            if waiting[i] == 0 and self.state[i] == WAITING:
                self.state[i] = READY
                ready.append(prio[i])
        heapify(ready)
        self.ready = ready
        if self.ndone == n:  # nothing to run: complete before any worker starts
            self.finished = True
            self.status = "done"
            self.done_event.set()

    # -- the worker loop ---------------------------------------------------------------------

    def worker_loop(self, worker: int, call: Callable[..., Any] | None = None) -> None:
        """Run tasks until the run is finished. ``call(func, args, kwargs)`` runs one task's
        operation where a backend wants it run (default: right here)."""
        lock = self.lock
        ready = self.ready
        results = self.results
        dep_ptr = self._dep_ptr
        dep_idx = self._dep_idx
        task_of = self.task_of
        emit = self._emit
        busy_since = self.busy_since
        clock = time.perf_counter
        lock.acquire()
        try:
            while True:
                while not self.finished and not self._may_take():
                    if not ready and self.nrunning == 0 and not self.awaiting:
                        raise SchedulerStalled(
                            f"no task is ready or running, but {self.ntasks - self.ndone} "
                            "of the tasks have not run"
                        )
                    self._nidle += 1
                    self._cond.wait(POLL_INTERVAL)
                    self._nidle -= 1
                if self.finished:
                    return
                if self.limit is not None and not self._admit(task_of[ready[0]]):
                    continue
                i = task_of[heappop(ready)]
                self.state[i] = RUNNING
                self.nrunning += 1
                self.reserved += self.estimates[i]
                deps = dep_idx[dep_ptr[i] : dep_ptr[i + 1]]
                self.running.add(i)
                if ready and self._nidle and self._worth_second(task_of[ready[0]]):
                    self._cond.notify()
                if self.disk and any(d not in results for d in deps):
                    self._read_back([d for d in deps if d not in results])
                    if self.finished:
                        self._unpin(i)
                        self.nrunning -= 1
                        self.reserved -= self.estimates[i]
                        self.state[i] = CANCELLED
                        return
                if self.disk:
                    self._plan_prefetch()
                inputs = [results[d] for d in deps]
                t0 = busy_since[worker] = clock()
                if emit:
                    self._send(TaskStart(self.graph.keys[i], self.graph.opname(i), worker, t0,
                                         self._kind(i)))
                lock.release()
                try:
                    func, args, kwargs = self._prepare(i, inputs)
                    value = func(*args, **kwargs) if call is None else call(func, args, kwargs)
                except BaseException as exc:
                    lock.acquire()
                    del busy_since[worker]
                    self._task_failed(i, worker, exc)
                    continue
                t1 = clock()
                lock.acquire()
                del busy_since[worker]
                self.task_time = 0.9 * self.task_time + 0.1 * (t1 - t0)
                if emit:
                    nb = nbytes_of(value)
                    self._send(TaskEnd(self.graph.keys[i], self.graph.opname(i), worker, t0, t1,
                                       nb, self._kind(i),
                                       self.live + nb if self.refs[i] else self.live))
                self._task_done(i, value)
        finally:
            lock.release()

    def _may_take(self) -> bool:
        """Whether a free worker should take a ready task now (see "Tiny tasks" above)."""
        if not self.ready:
            return False
        if self.nrunning == 0 or self._worth_second(self.task_of[self.ready[0]]):
            return True
        stuck = time.perf_counter() - STUCK_TIME
        return any(t < stuck for t in self.busy_since.values())

    def _worth_second(self, i: int) -> bool:
        """Whether task i is worth running beside a busy worker."""
        flags = self.parallel
        flag = UNKNOWN if flags is None else flags[i]
        if flag == PARALLEL:
            return True
        return flag == UNKNOWN and self.task_time >= PARALLEL_TASK_TIME

    def _prepare(self, i: int, inputs: list) -> tuple[Callable, list, dict]:
        """The call of task i as ``(func, args, kwargs)`` with its inputs filled in."""
        mode = self._modes[i]
        if mode == MODE_DIRECT:
            args = inputs
        elif mode == MODE_FLAT:
            args = [inputs[a.slot] if type(a) is Dep else a for a in self._args[i]]
        else:
            args = fill(self._args[i], inputs)
        kwargs = self._kwargs.get(i) if self._kwargs else None
        return self._funcs[i], args, fill(kwargs, inputs) if kwargs else _NO_KWARGS

    # -- transitions (called with the lock held) -------------------------------------------

    def _task_done(self, i: int, value: Any) -> None:
        self.nrunning -= 1
        self.reserved -= self.estimates[i]
        self._unpin(i)
        if self.finished:  # the run was cancelled while this task ran
            self.state[i] = CANCELLED
            self._notify_if_idle()
            return
        if self.exported[i]:
            self._on_export(i, value)
        self._settle(i, value)

    def deliver(self, i: int, value: Any, event: Any = None) -> None:
        """The result of external task i arrived: it is DONE and its consumers may run.
        ``event`` (e.g. a Transfer) is sent to the subscribers once the result is held."""
        with self.lock:
            if self.finished or self.state[i] != WAITING or self.waiting[i] != 1:
                return
            self.waiting[i] = 0
            self.awaiting -= 1
            self._settle(i, value)
            if self._emit and event is not None:
                self._send(replace(event, held=self.live) if hasattr(event, "held") else event)
            if self.ready or self.finished:
                self._cond.notify_all()

    def _settle(self, i: int, value: Any) -> None:
        """Task i has its result: hold it if needed, release inputs, ready consumers."""
        self.ndone += 1
        if self.refs[i]:
            self.state[i] = DONE
            self.results[i] = value
            self._hold(i, value)
        else:
            self.state[i] = RELEASED
        refs = self.refs
        for d in self._dep_idx[self._dep_ptr[i] : self._dep_ptr[i + 1]]:
            refs[d] -= 1
            if refs[d] == 0:
                self._release(d)
        waiting = self.waiting
        prio = self.priority
        for c in self._cons_idx[self._cons_ptr[i] : self._cons_ptr[i + 1]]:
            waiting[c] -= 1
            if waiting[c] == 0:
                self.state[c] = READY
                heappush(self.ready, prio[c])
        if self.ndone == self.ntasks:
            self._complete()

    def _release(self, i: int) -> None:
        self.state[i] = RELEASED
        value = self.results.pop(i, None)
        size = self.sizes.pop(i, 0)
        self.live -= size
        record = self.disk.pop(i, None)
        if record is not None and record.path and i not in self.io_busy:
            self.spill.delete(record)
        if self._emit:
            self._send(Release(self.graph.keys[i],
                               size if value is None else nbytes_of(value), self.live))

    def _task_failed(self, i: int, worker: int, exc: BaseException) -> None:
        self.nrunning -= 1
        self.reserved -= self.estimates[i]
        self._unpin(i)
        if self.finished:
            self.state[i] = CANCELLED
            self._notify_if_idle()
            return
        self.attempts[i] += 1
        allowed = self.retries
        if self._task_retries is not None and self._task_retries[i] is not None:
            allowed = self._task_retries[i]
        retry = isinstance(exc, Exception) and self.attempts[i] <= allowed
        if self._emit:
            self._send(TaskFailed(self.graph.keys[i], self.graph.opname(i), worker, exc, retry))
        if retry:
            self.state[i] = READY
            heappush(self.ready, self.priority[i])
            return
        self.state[i] = FAILED
        if isinstance(exc, Exception):
            exc.add_note(self.describe_task(i, failed=True))
            self._cancel(exc, status="failed")
        else:  # KeyboardInterrupt, SystemExit: the user stopped the run
            self._cancel(exc, status="cancelled")

    def _cancel(self, exc: BaseException, status: str = "cancelled") -> None:
        if self.finished:
            return
        self.error = exc
        self.status = status
        self.finished = True
        self.ready.clear()
        state = self.state
        for i in range(self.ntasks):
            if state[i] in (WAITING, READY):
                state[i] = CANCELLED
        self.results.clear()
        self.sizes.clear()
        self.live = 0
        self._cond.notify_all()
        self._end()

    def _complete(self) -> None:
        self.finished = True
        self.status = "done"
        self._cond.notify_all()
        self._end()

    def _end(self) -> None:
        if self._emit:
            self._send(RunEnd(self.status, self.ndone, time.perf_counter() - self.started,
                              self.peak_live, self.spilled_bytes, self.unspilled_bytes))
        self.done_event.set()

    # -- memory (called with the lock held) ----------------------------------------------------

    def _hold(self, i: int, value: Any) -> None:
        size = nbytes_of(value)
        self.sizes[i] = size
        self.live += size
        if self.live > self.peak_live:
            self.peak_live = self.live

    def _unpin(self, i: int) -> None:
        self.running.discard(i)

    def _pinned(self) -> set[int]:
        """Inputs of the running tasks: never spilled (computed only when spilling)."""
        dep_ptr, dep_idx = self._dep_ptr, self._dep_idx
        return {d for t in self.running for d in dep_idx[dep_ptr[t] : dep_ptr[t + 1]]}

    def _need(self, i: int) -> int:
        need = self.estimates[i]
        for d in self._dep_idx[self._dep_ptr[i] : self._dep_ptr[i + 1]]:
            if d not in self.results and d in self.disk:
                need += self.disk[d].nbytes
        return need

    def _admit(self, i: int) -> bool:
        """Make room for task i if it does not fit; True when it may start now."""
        deficit = self.live + self.reserved + self.prefetch_bytes + self._need(i) - self.limit
        if deficit <= 0:
            return True
        victims = self._victims(deficit, i)
        if victims:
            self._write_out(victims)
            return False  # state changed: look again
        if self.nrunning or self.prefetching:
            self._nidle += 1
            self._cond.wait(POLL_INTERVAL)
            self._nidle -= 1
            return False
        return True  # nothing to free and nothing running: run it anyway

    def _victims(self, deficit: int, task: int) -> list[int]:
        """The coldest results that may go to disk, enough to cover ``deficit`` bytes."""
        own = set(self._dep_idx[self._dep_ptr[task] : self._dep_ptr[task + 1]])
        own |= self._pinned()
        prio = self.priority
        mine = prio[task]
        state = self.state
        cons_ptr, cons_idx = self._cons_ptr, self._cons_idx
        candidates = []
        for v, value in self.results.items():
            if v in own or v in self.io_busy:
                continue
            if not (self.reloadable[v] or spillable(value)):
                continue
            nxt = min((prio[c] for c in cons_idx[cons_ptr[v] : cons_ptr[v + 1]]
                       if state[c] in (WAITING, READY)), default=self.ntasks)
            if nxt < mine:  # needed before ``task``: a later task never evicts it
                continue
            candidates.append((nxt, v))
        candidates.sort(reverse=True)
        out, freed = [], 0
        for _, v in candidates:
            out.append(v)
            freed += self.sizes.get(v, 0)
            if freed >= deficit:
                break
        return out

    def _write_out(self, victims: list[int]) -> None:
        """Move ``victims`` to disk; the lock is released while writing."""
        todo = [(v, self.results[v]) for v in victims
                if v not in self.disk and not self.reloadable[v]]
        self.io_busy.update(victims)
        records: dict[int, SpillRecord] = {}
        self.lock.release()
        try:
            for v, value in todo:
                records[v] = self.spill.write(value)
        finally:
            self.lock.acquire()
            self.io_busy.difference_update(victims)
        pinned = self._pinned()
        for v in victims:
            record = records.get(v) or self.disk.get(v)
            if record is None:  # a load: its source is the copy, made again when needed
                value = self.results.get(v)
                record = SpillRecord("", getattr(value, "shape", ()),
                                     getattr(value, "dtype", None), self.sizes.get(v, 0))
            if self.state[v] != DONE or v not in self.results:
                if v in records:  # released while being written
                    self.spill.delete(records[v])
                continue
            self.disk[v] = record
            if v in pinned:  # a task took it meanwhile: keep it, the file is a clean copy
                continue
            del self.results[v]
            size = self.sizes.pop(v, 0)
            self.live -= size
            if v in records:
                self.spilled_bytes += record.nbytes
            if self._emit:
                self._send(Spill(self.graph.keys[v], record.nbytes or size, v not in records,
                                 self.live))

    def _read_back(self, ids: list[int]) -> None:
        """Bring results back from disk for a task about to run; the lock is released while
        reading. Results the I/O thread is already reading are waited for, not read twice.
        Their files stay as clean copies until the results are released."""
        while not self.finished and any(d in self.prefetching for d in ids):
            self._cond.wait(POLL_INTERVAL)
        ids = [d for d in ids if d not in self.results]
        if not ids or self.finished:
            return
        records = [(d, self.disk[d]) for d in ids]
        self.io_busy.update(ids)
        values: dict[int, Any] = {}
        self.lock.release()
        try:
            for d, record in records:
                values[d] = self._reload(d, record)
        finally:
            self.lock.acquire()
            self.io_busy.difference_update(ids)
        for d, value in values.items():
            self._put_back(d, value)

    def _put_back(self, d: int, value: Any, ahead: bool = False) -> None:
        """A result read from disk is held in memory again (``ahead``: by the read-ahead)."""
        if d in self.results or self.state[d] != DONE:
            return
        self.results[d] = value
        self._hold(d, value)
        nbytes = nbytes_of(value)
        if self.disk[d].path:
            self.unspilled_bytes += nbytes
        else:
            del self.disk[d]  # a load made again: nothing on disk to keep
        if self._emit:
            self._send(Unspill(self.graph.keys[d], nbytes, ahead, self.live))

    def _plan_prefetch(self) -> None:
        """Queue for read-ahead the spilled inputs of the next ready tasks that fit in the
        budget's headroom, and start the I/O thread if it is not running."""
        self._queue_prefetch()
        if self.prefetch and self._io_thread is None:
            self._io_thread = threading.Thread(target=self._io_loop, name="tilegraph-io",
                                               daemon=True)
            self._io_thread.start()
        elif self.prefetch:
            self._cond.notify_all()

    def _queue_prefetch(self) -> None:
        headroom = self.limit - self.live - self.reserved - self.prefetch_bytes
        dep_ptr, dep_idx = self._dep_ptr, self._dep_idx
        for p in nsmallest(PREFETCH_TASKS, self.ready):
            t = self.task_of[p]
            for d in dep_idx[dep_ptr[t] : dep_ptr[t + 1]]:
                if d in self.results or d in self.io_busy or d not in self.disk:
                    continue
                size = self.disk[d].nbytes
                if size > headroom:
                    return
                headroom -= size
                self.prefetch_bytes += size
                self.prefetch.append(d)
                self.prefetching.add(d)
                self.io_busy.add(d)

    def _io_loop(self) -> None:
        """The read-ahead thread: reads queued results until the run is finished."""
        with self.lock:
            try:
                while True:
                    while not self.prefetch and not self.finished:
                        self._cond.wait()
                    if self.finished:
                        return
                    d = self.prefetch.popleft()
                    record = self.disk.get(d)
                    if record is None or d in self.results or self.state[d] != DONE:
                        self._done_prefetch(d, record)
                        continue
                    self.lock.release()
                    try:
                        value = self._reload(d, record)
                    except BaseException as exc:
                        self.lock.acquire()
                        self._done_prefetch(d, record)
                        self._cancel(exc, status="failed")
                        return
                    self.lock.acquire()
                    self._done_prefetch(d, record)
                    if self.live + self.reserved + nbytes_of(value) <= self.limit:
                        self._put_back(d, value, ahead=True)  # else: leave it on disk
                    self._cond.notify_all()
            finally:
                for d in self.prefetch:
                    self._done_prefetch(d, self.disk.get(d))
                self.prefetch.clear()

    def _done_prefetch(self, d: int, record: SpillRecord | None) -> None:
        self.prefetching.discard(d)
        self.io_busy.discard(d)
        if record is not None:
            self.prefetch_bytes -= record.nbytes

    def finish_io(self) -> None:
        """Wait for the read-ahead thread to end (it ends once the run is finished)."""
        with self.lock:
            if not self.finished:
                self._cancel(RuntimeError("run stopped before it finished"), "cancelled")
            self._cond.notify_all()
        thread = self._io_thread
        if thread is not None:
            thread.join()

    def _reload(self, i: int, record: SpillRecord) -> Any:
        """A result from its spill file, or, for a load, by running the load again."""
        if record.path:
            return self.spill.read(record)
        func, args, kwargs = self._prepare(i, [])
        return func(*args, **kwargs)

    def _notify_if_idle(self) -> None:
        if self._nidle:
            self._cond.notify_all()

    def _kind(self, i: int) -> str:
        kinds = self.graph.meta.get("kind")
        return (kinds[i] or "") if kinds is not None else ""

    def _send(self, event: Any) -> None:
        for fn in self._emit:
            fn(event)

    # -- outside API ------------------------------------------------------------------------

    def cancel(self, exc: BaseException | None = None) -> None:
        """Stop starting tasks and free every held result; running tasks finish on their own."""
        with self.lock:
            self._cancel(exc if exc is not None else KeyboardInterrupt(), status="cancelled")

    def describe_task(self, i: int, failed: bool = False) -> str:
        """A line naming task i: key, op, and the user's source line if known."""
        graph = self.graph
        text = f"tilegraph: task {graph.keys[i]!r} (op {graph.opname(i)})"
        line = graph.meta.get("line")
        if line is not None and line[i] is not None:
            text += f", from {line[i]}"
        return text + (" failed" if failed else "")

    def output_values(self) -> list[Any]:
        """The values of the outputs, in order, after a successful run (outputs that were
        spilled are read back)."""
        if self.error is not None:
            raise self.error
        return [self.results[o] if o in self.results else self._reload(o, self.disk[o])
                for o in self.outputs]

    def clear(self) -> None:
        """Drop every result held (after the outputs were read) and remove spill files."""
        with self.lock:
            self.results.clear()
            self.sizes.clear()
            self.live = 0
            self.disk.clear()
        self.spill.close()

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data (keys instead of indices), for tests and debugging."""
        with self.lock:
            keys = self.graph.keys
            return {
                "state": {keys[i]: STATE_NAMES[s] for i, s in enumerate(self.state)},
                "waiting": {keys[i]: w for i, w in enumerate(self.waiting)},
                "refs": {keys[i]: r for i, r in enumerate(self.refs)},
                "results": {keys[i]: v for i, v in self.results.items()},
                "ready": [keys[self.task_of[p]] for p in sorted(self.ready)],
                "nrunning": self.nrunning,
                "ndone": self.ndone,
                "finished": self.finished,
                "error": self.error,
                "sizes": {keys[i]: b for i, b in self.sizes.items()},
                "live": self.live,
                "reserved": self.reserved,
                "disk": sorted((keys[i] for i in self.disk), key=repr),
                "running": sorted((keys[i] for i in self.running), key=repr),
            }

    def key_of(self, i: int) -> Hashable:
        return self.graph.keys[i]
