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
``guard``      dict, task -> dependency slots its call writes over in place, for the tasks
               that may be retried (:meth:`TaskGraph.overwritten`); empty when none may be
``nrunning``   tasks currently RUNNING
``ndone``      tasks that finished (DONE or RELEASED); the run is complete at ``ndone == n``
``finished``   no more tasks will start (complete, failed or cancelled); ``done_event`` is set
``error``      the exception that ended the run, or ``None``
``busy_since`` dict, worker -> ``perf_counter()`` when its current task started
``task_time``  moving average of task durations, seconds
``parallel``   bytearray[n] or ``None``: ``TINY``, ``PARALLEL`` or ``UNKNOWN`` per task
               (:mod:`tilegraph.runtime.tiny`); ``None``: every task is ``UNKNOWN``
``running``    set of RUNNING tasks; their inputs are pinned (see :meth:`pinned`)
``awaiting``   external tasks (results made elsewhere, e.g. by another MPI rank) not yet
               delivered; each waits on one virtual dependency until :meth:`deliver`
``exported``   bytearray[n]: 1 for tasks whose result is also needed elsewhere; when one
               finishes, ``on_export(i, value)`` is called (with the lock held)
``memory``     the :class:`~tilegraph.runtime.memory.MemoryManager` (budget, admission, spill,
               read-back, read-ahead), which sees this execution through its ``ExecutorView``
=============  ===================================================================================

Memory (kept by ``memory``, asked before a task starts): a ready task is admitted when the
results held, the reservations, the reads ahead and its own estimate fit under ``limit``;
otherwise the coldest results that are not pinned are spilled or dropped to be made again,
never one whose next consumer comes before the task being admitted, and when nothing can go
the worker waits (or, with nothing running, runs the task anyway so that the run
progresses). How, and what an input that cannot come back does, is in
:mod:`tilegraph.runtime.memory`. With several workers the results held can exceed ``limit``
by about one task's result; with one worker they stay under it.

Tiny tasks are not worth a second worker: see :mod:`tilegraph.runtime.tiny` (the
``parallel`` flags, :func:`~tilegraph.runtime.tiny.may_take`).

Retries. A task that raised an ``Exception`` runs again, up to ``retries`` more times (or its
``retries`` column), from the very inputs its first attempt saw: an attempt that may be
followed by another one gets the inputs its call writes over in place (``guard``: an
accumulator, a factorisation's tile, also fused before a step that fails) as private
copies, so those held for the retry are never half-updated. Runs without retries copy
nothing; with ``retries=r``, the last allowed attempt copies nothing.

Serial failure. A graph whose tasks have side effects (a script's statements) may give each
task its position in the program (a ``serial`` column, consistent with the dependencies).
A task that fails for good then stops the run as the program would: no task after it starts,
every task before it runs to its end, and only then does the run end with its exception
(or with that of an earlier task that fails meanwhile: the earliest failure in program
order; ``stop`` is its position, ``before`` the tasks before it not finished yet). An
interruption (``KeyboardInterrupt``) or :meth:`cancel` still stops everything at once.

Warnings. Every worker runs under ``site``, the user's line that started the run
(:mod:`tilegraph.runtime.warning_site`): a warning raised in tilegraph's code (NumPy's
``RuntimeWarning`` in a block kernel) is shown there; one from the user's function keeps
its own line.

Transitions are small methods: READY -> RUNNING in :meth:`worker_loop`, :meth:`_task_done`
(RUNNING -> DONE, consumers' ``waiting`` drops, inputs' ``refs`` drop), :meth:`deliver` (an
external task WAITING -> DONE when its result arrives), :meth:`_release` (DONE -> RELEASED),
:meth:`_task_failed` (RUNNING -> READY on retry, else FAILED), :meth:`_cancel` (every
unfinished task -> CANCELLED).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from heapq import heapify, heappop, heappush, nsmallest
from typing import Any

import numpy as np

from tilegraph.graph.remake import spoil
from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph, prepare_call
from tilegraph.runtime.blas import widened
from tilegraph.runtime.events import (
    Release,
    RunEnd,
    Subscriber,
    TaskEnd,
    TaskFailed,
    TaskStart,
    nbytes_of,
)
from tilegraph.runtime.memory import POLL_INTERVAL, MemoryManager
from tilegraph.runtime.preparation import (
    check_serial,
    guarded_slots,
    priority_lists,
    private_inputs,
    staging_tasks,
)
from tilegraph.runtime.spill import SpillStore
from tilegraph.runtime.tiny import PARALLEL, PARALLEL_TASK_TIME, may_take
from tilegraph.runtime.warning_site import enter as enter_site
from tilegraph.runtime.warning_site import install as install_site_hook
from tilegraph.runtime.warning_site import leave as leave_site
from tilegraph.runtime.warning_site import user_site

WAITING, READY, RUNNING, DONE, RELEASED, FAILED, CANCELLED = range(7)
STATE_NAMES = ("waiting", "ready", "running", "done", "released", "failed", "cancelled")


class SchedulerStalled(RuntimeError):
    """No task is ready or running but the run is not complete (an internal invariant broke)."""


class Execution:
    """One run of a task graph; see the module docstring for its state.

    ``graph`` must already be culled to what ``outputs`` (task indices) need; ``priority`` is
    a permutation of ``0..n-1`` (lower runs first), e.g. from :func:`tilegraph.plan.order`.
    ``estimates``: the tasks' :func:`~tilegraph.graph.memory.task_estimates`, if the caller
    already has them (computed here otherwise); ``parallel``: see "Tiny tasks" above;
    ``may_spill=False``: nothing goes to disk (``spill=False``), remakeable results may still
    be dropped; ``watch_rss``: the process's resident set is watched during the run and
    bounded by ``memory_limit`` (:mod:`tilegraph.runtime.rss`)."""

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
        estimates: list[int] | None = None,
        may_spill: bool = True,
        watch_rss: bool = False,
    ):
        self.graph = graph
        self.ntasks = len(graph)
        self.outputs = [int(o) for o in outputs]
        self.retries = retries
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self.done_event = threading.Event()
        self._emit: tuple[Subscriber, ...] = tuple(subscribers)
        self._nidle = 0
        self.started = time.perf_counter()
        self._read_graph(graph)
        self._task_retries = graph.meta.get("retries")
        self.guard = guarded_slots(graph, retries, self._task_retries)
        self.priority, self.task_of = priority_lists(priority)
        self._make_state(external, exported, on_export, parallel)
        remake, refused = graph.remakeable(), graph.remake_refused()
        if len(external):  # made elsewhere: nothing here can make them, or their chains, again
            spoil(graph, remake, external)
            spoil(graph, refused, external)
        self.memory = MemoryManager(self, graph, memory_limit, spill, remake, estimates,
                                    may_spill, refused, self.send if self._emit else None,
                                    watch_rss)
        self._start()

    def _read_graph(self, graph: TaskGraph) -> None:
        """The graph's structure as plain lists (the loops index them per task), and its
        ``serial`` column checked (see "Serial failure" above)."""
        self._dep_ptr = graph.dep_ptr.tolist()
        self._dep_idx = graph.dep_idx.tolist()
        ptr, idx = graph.dependents_csr()
        self._cons_ptr = ptr.tolist()
        self._cons_idx = idx.tolist()
        self._funcs = graph.funcs
        self._args = graph.args
        self._kwargs = graph.kwargs
        self._modes = graph.modes
        serial = graph.meta.get("serial")
        self._serial: list[int] | None = None if serial is None else check_serial(graph,
                                                                                   serial)
        self.stop: int | None = None
        self.before = 0
        self._stop_error: BaseException | None = None
        self.staging_tasks = staging_tasks(graph)
        self.staged_bytes = 0  # written by tasks to a rechunk's intermediate store

    def _make_state(self, external: Sequence[int], exported: Sequence[int],
                    on_export: Callable[[int, Any], None] | None,
                    parallel: bytearray | None) -> None:
        """The state table of the module docstring, before any task is done."""
        n = self.ntasks
        graph = self.graph
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
        self.busy_seconds = 0.0  # the workers' time in finished tasks (core-seconds)
        self.task_time = PARALLEL_TASK_TIME
        self.parallel = parallel
        self.running: set[int] = set()
        self.awaiting = len(external)
        for i in external:
            self.waiting[i] = 1  # the virtual dependency: the result's arrival
        self.solo_blas = 0  # BLAS threads a GIL-free task running alone may use (see widen)
        self.exported = bytearray(n)
        for i in exported:
            self.exported[i] = 1
        self._on_export = on_export
        self.finished = False
        self.error: BaseException | None = None
        self.status = "running"
        # the user's line that started the run: warnings of its tasks are shown there
        self.site = user_site()
        install_site_hook()

    def _start(self) -> None:
        """Data tasks are done before anything runs; tasks with no dependencies are ready;
        a run with nothing to run is complete before any worker starts."""
        n = self.ntasks
        state, waiting, modes, prio = self.state, self.waiting, self._modes, self.priority
        data = [i for i in range(n) if modes[i] == MODE_DATA]
        for i in data:
            state[i] = DONE
            self.results[i] = self._args[i][0]
            self.memory.hold(i, self.results[i])
        self.ndone = len(data)
        for i in data:
            for c in self._cons_idx[self._cons_ptr[i] : self._cons_ptr[i + 1]]:
                waiting[c] -= 1
        ready = []
        for i in range(n):
            if waiting[i] == 0 and state[i] == WAITING:
                state[i] = READY
                ready.append(prio[i])
        heapify(ready)
        self.ready = ready
        if self.ndone == n:
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
        memory = self.memory
        clock = time.perf_counter
        site = enter_site(self.site)
        lock.acquire()
        try:
            while True:
                while not self.finished and not may_take(self):
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
                if memory.limit is not None and not memory.admit(task_of[ready[0]]):
                    continue
                i = task_of[heappop(ready)]
                self.state[i] = RUNNING
                self.nrunning += 1
                memory.start(i)
                deps = dep_idx[dep_ptr[i] : dep_ptr[i + 1]]
                self.running.add(i)
                if ready and self._nidle and may_take(self):
                    self._cond.notify()
                if memory.disk and any(d not in results for d in deps):
                    try:
                        memory.read_back([d for d in deps if d not in results], i)
                    except BaseException as exc:  # an input could not be read or made again
                        self.running.discard(i)
                        self.nrunning -= 1
                        memory.stop(i)
                        self.state[i] = CANCELLED
                        if isinstance(exc, Exception):
                            exc.add_note(self.describe_task(i) + " needed it as an input")
                        self.fail(exc)
                        return
                    if self.finished:
                        self.running.discard(i)
                        self.nrunning -= 1
                        memory.stop(i)
                        self.state[i] = CANCELLED
                        return
                if memory.disk:
                    memory.plan_prefetch()
                inputs = [results[d] for d in deps]
                t0 = busy_since[worker] = clock()
                if emit:
                    self.send(TaskStart(self.graph.keys[i], self.graph.opname(i), worker, t0,
                                         self._kind(i)))
                solo = (self.solo_blas and self.nrunning == 1 and not ready
                        and not self.awaiting and self.parallel[i] == PARALLEL)
                lock.release()
                try:
                    if self.guard and i in self.guard and self.attempts[i] < self._allowed(i):
                        inputs = private_inputs(inputs, self.guard[i])
                    func, args, kwargs = self._prepare(i, inputs)
                    if solo:
                        with widened(self.solo_blas):
                            value = (func(*args, **kwargs) if call is None
                                     else call(func, args, kwargs))
                    else:
                        value = func(*args, **kwargs) if call is None else call(func, args,
                                                                                kwargs)
                except BaseException as exc:
                    lock.acquire()
                    del busy_since[worker]
                    self._task_failed(i, worker, exc)
                    continue
                t1 = clock()
                lock.acquire()
                del busy_since[worker]
                self.busy_seconds += t1 - t0
                self.task_time = 0.9 * self.task_time + 0.1 * (t1 - t0)
                if emit:
                    nb = nbytes_of(value)
                    self.send(TaskEnd(self.graph.keys[i], self.graph.opname(i), worker, t0, t1,
                                       nb, self._kind(i),
                                       memory.live + nb if self.refs[i] else memory.live))
                self._task_done(i, value)
                # hold nothing of this task while waiting for the next: its inputs and
                # result may have been released (the memory manager counts them freed)
                inputs = args = value = None
        finally:
            lock.release()
            leave_site(site)

    def _prepare(self, i: int, inputs: list) -> tuple[Callable, list, dict]:
        """The call of task i as ``(func, args, kwargs)`` with its inputs filled in."""
        return prepare_call(self._funcs[i], self._modes[i], self._args[i],
                            self._kwargs.get(i) if self._kwargs else None, inputs)

    # -- transitions (called with the lock held) -------------------------------------------

    def _task_done(self, i: int, value: Any) -> None:
        self.nrunning -= 1
        self.memory.stop(i)
        self.running.discard(i)
        if self.finished:  # the run was cancelled while this task ran
            self.state[i] = CANCELLED
            self._notify_if_idle()
            return
        if self.exported[i]:
            self._on_export(i, value)
        if i in self.staging_tasks:
            self.staged_bytes += getattr(value, "stored_bytes", 0)
        self._settle(i, value)

    def deliver(self, i: int, value: Any, event: Any = None) -> None:
        """The result of external task i arrived: it is DONE and its consumers may run.
        ``event`` (e.g. a Transfer) is sent to the subscribers once the result is held.
        Beyond the memory budget, the coldest results go to disk (possibly this one)."""
        with self.lock:
            if self.finished or self.state[i] != WAITING or self.waiting[i] != 1:
                return
            self.waiting[i] = 0
            self.awaiting -= 1
            self._settle(i, value)
            if self.memory.limit is not None and not self.finished:
                self.memory.make_room()  # an arrival is admitted like a result made here
            if self._emit and event is not None:
                self.send(replace(event, held=self.memory.live) if hasattr(event, "held")
                          else event)
            if self.ready or self.finished:
                self._cond.notify_all()

    def _settle(self, i: int, value: Any) -> None:
        """Task i has its result: hold it if needed, release inputs, ready consumers."""
        self.ndone += 1
        if self.refs[i]:
            self.state[i] = DONE
            self.results[i] = value
            self.memory.hold(i, value)
        else:
            self.state[i] = RELEASED
        refs = self.refs
        for d in self._dep_idx[self._dep_ptr[i] : self._dep_ptr[i + 1]]:
            refs[d] -= 1
            if refs[d] == 0:
                self._release(d)
        waiting = self.waiting
        prio = self.priority
        stop = self.stop
        for c in self._cons_idx[self._cons_ptr[i] : self._cons_ptr[i + 1]]:
            waiting[c] -= 1
            if waiting[c] == 0:
                if stop is not None and self._serial[c] > stop:
                    self.state[c] = CANCELLED  # after a serial failure: never starts
                    continue
                self.state[c] = READY
                heappush(self.ready, prio[c])
        if stop is not None:
            self._serial_step(i)
        elif self.ndone == self.ntasks:
            self._complete()

    def _release(self, i: int) -> None:
        self.state[i] = RELEASED
        value = self.results.pop(i, None)
        size = self.memory.drop(i)
        if self._emit:
            self.send(Release(self.graph.keys[i],
                              size if value is None else nbytes_of(value), self.memory.live))

    def _task_failed(self, i: int, worker: int, exc: BaseException) -> None:
        self.nrunning -= 1
        self.memory.stop(i)
        self.running.discard(i)
        if self.finished:
            self.state[i] = CANCELLED
            self._notify_if_idle()
            return
        if self.stop is not None and self._serial[i] > self.stop:
            self.state[i] = CANCELLED  # started before an earlier task failed for good
            self._notify_if_idle()
            return
        self.attempts[i] += 1
        retry = isinstance(exc, Exception) and self.attempts[i] <= self._allowed(i)
        if self._emit:
            self.send(TaskFailed(self.graph.keys[i], self.graph.opname(i), worker, exc, retry))
        if retry:
            self.state[i] = READY
            heappush(self.ready, self.priority[i])
            return
        self.state[i] = FAILED
        if isinstance(exc, Exception):
            if self._serial is not None:
                self._serial_failure(i, exc)
                return
            exc.add_note(self.describe_task(i, failed=True))
            self._cancel(exc, status="failed")
        else:  # KeyboardInterrupt, SystemExit: the user stopped the run
            self._cancel(exc, status="cancelled")

    def _serial_failure(self, i: int, exc: Exception) -> None:
        """Task i failed for good in a graph with a ``serial`` column (see "Serial
        failure" above)."""
        serial = self._serial
        pos = serial[i]
        exc.add_note(self.describe_task(i, failed=True))
        self.stop, self._stop_error = pos, exc
        state = self.state
        ready = self.ready
        keep = []
        for p in ready:
            t = self.task_of[p]
            if serial[t] < pos:
                keep.append(p)
            else:
                state[t] = CANCELLED
        ready[:] = keep
        heapify(ready)
        self.before = sum(1 for t in range(self.ntasks)
                          if serial[t] < pos and state[t] in (WAITING, READY, RUNNING))
        if self.before == 0:
            self._cancel(exc, status="failed")

    def _serial_step(self, i: int) -> None:
        """Task i finished (or failed) after a serial failure: the run ends once every task
        before the failure has finished."""
        if self._serial[i] < self.stop:
            self.before -= 1
            if self.before == 0:
                self._cancel(self._stop_error, status="failed")

    def _allowed(self, i: int) -> int:
        """The retries task i is allowed: its ``retries`` column, else the run's."""
        col = self._task_retries
        if col is not None and col[i] is not None:
            return col[i]
        return self.retries

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
        self.memory.forget_all()
        self._cond.notify_all()
        self._end()

    def _complete(self) -> None:
        self.finished = True
        self.status = "done"
        self._cond.notify_all()
        self._end()

    def _end(self) -> None:
        if self._emit:
            f = self.memory.figures()
            self.send(RunEnd(self.status, self.ndone, time.perf_counter() - self.started,
                             f.peak_live, f.spilled_bytes, f.unspilled_bytes,
                             f.recomputed_bytes, self.staged_bytes, f.remade,
                             f.spilled_unrepeatable, f.unrepeatable_reasons, f.peak_rss))
        self.done_event.set()

    # -- what the memory manager asks (called with the lock held) -----------------------------

    def deps(self, i: int) -> list[int]:
        """The tasks whose results task i reads."""
        return self._dep_idx[self._dep_ptr[i] : self._dep_ptr[i + 1]]

    def pinned(self) -> set[int]:
        """Inputs of the running tasks: never spilled (computed only when spilling)."""
        dep_ptr, dep_idx = self._dep_ptr, self._dep_idx
        return {d for t in self.running for d in dep_idx[dep_ptr[t] : dep_ptr[t + 1]]}

    def last_reads(self) -> list[int]:
        """Results in memory that nothing but the running tasks still reads: released when
        those end (computed only when admission weighs a spill against waiting)."""
        dep_ptr, dep_idx, refs, results = self._dep_ptr, self._dep_idx, self.refs, self.results
        return [d for t in self.running for d in dep_idx[dep_ptr[t] : dep_ptr[t + 1]]
                if refs[d] == 1 and d in results]

    def next_use(self, v: int) -> int:
        """The priority of the next consumer of v still to run (``ntasks``: none)."""
        prio, state = self.priority, self.state
        cons = self._cons_idx[self._cons_ptr[v] : self._cons_ptr[v + 1]]
        return min((prio[c] for c in cons if state[c] in (WAITING, READY)),
                   default=self.ntasks)

    def next_ready(self, k: int) -> list[int]:
        """The ``k`` ready tasks that run next."""
        return [self.task_of[p] for p in nsmallest(k, self.ready)]

    def is_held(self, v: int, in_memory: bool = True) -> bool:
        """Whether v's result is still wanted (DONE, not released), and in memory."""
        return self.state[v] == DONE and (not in_memory or v in self.results)

    def idle_wait(self) -> None:
        """Wait a moment for another worker's progress (counted as idle)."""
        self._nidle += 1
        self._cond.wait(POLL_INTERVAL)
        self._nidle -= 1

    def wait(self, timeout: float | None) -> None:
        self._cond.wait(timeout)

    def wake_all(self) -> None:
        self._cond.notify_all()

    @property
    def emitting(self) -> bool:
        return bool(self._emit)

    def send(self, event: Any) -> None:
        for fn in self._emit:
            fn(event)

    def fail(self, exc: BaseException) -> None:
        """End the run with ``exc`` (an I/O error of the memory manager)."""
        self._cancel(exc, status="failed")

    def run_again(self, i: int, inputs: list) -> Any:
        """Run task i's step again on ``inputs`` (its dependencies' values, in order) to make
        its result again (a remakeable task: repeatable, writing over none of them). Called
        without the lock."""
        func, args, kwargs = self._prepare(i, inputs)
        return func(*args, **kwargs)

    def finish_io(self) -> None:
        """Wait for the read-ahead thread to end (it ends once the run is finished)."""
        with self.lock:
            if not self.finished:
                self._cancel(RuntimeError("run stopped before it finished"), "cancelled")
            self._cond.notify_all()
        self.memory.join_io()

    def _notify_if_idle(self) -> None:
        if self._nidle:
            self._cond.notify_all()

    def widen(self, threads: int) -> None:
        """Let a task worth a second worker (``PARALLEL`` in the tiny-task policy: a
        BLAS/LAPACK kernel, or a long task) use ``threads`` BLAS threads when it runs alone:
        no other task running or ready (the last panel of a factorisation, the one task on
        a band's SVD), so the cores the other workers would use are idle. Called by a
        backend whose workers share one process's cores; nothing without a policy."""
        if self.parallel is not None:
            self.solo_blas = int(threads)

    def _kind(self, i: int) -> str:
        kinds = self.graph.meta.get("kind")
        return (kinds[i] or "") if kinds is not None else ""

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
        return [self.results[o] if o in self.results
                else self.memory.reload(o, self.memory.disk[o]) for o in self.outputs]

    def clear(self) -> None:
        """Drop every result held (after the outputs were read) and remove spill files."""
        with self.lock:
            self.results.clear()
            self.memory.close()
        self.memory.stop_watching()
        self.memory.spill.close()

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
                "sizes": {keys[i]: b for i, b in self.memory.sizes.items()},
                "live": self.memory.live,
                "reserved": self.memory.reserved,
                "disk": sorted((keys[i] for i in self.memory.disk), key=repr),
                "running": sorted((keys[i] for i in self.running), key=repr),
            }

    def key_of(self, i: int) -> Hashable:
        return self.graph.keys[i]
