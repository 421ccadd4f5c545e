"""Memory budgets and the memory manager of each run (:class:`MemoryManager`: admission,
spill, read-back and read-ahead), on the memory model of :mod:`tilegraph.graph.memory`; the
spill store itself is :mod:`tilegraph.runtime.spill`.

The budget (``memory_limit=``) is the bytes of task results a worker process may hold at
once. The executor admits a ready task only when the results it holds, the estimates of the
tasks running, and the new task's own estimate fit under it; when they do not, the coldest
results (those whose next use is furthest away) go to a
:class:`~tilegraph.runtime.spill.SpillStore` on disk and come back just before a consumer
runs; a result that is cheaper to make again than to write and read back is dropped instead
(before any result is written), and made again when a consumer needs it: a load, a random
or constant block, and the chain of cheap steps between such a source and the result
(views, casts, a rechunk's pieces, elementwise steps), run again from what is still in
memory or, where nothing is, from the sources, provided the whole chain gives the same block
again and costs less than a spill (:meth:`~tilegraph.graph.TaskGraph.remakeable`,
:mod:`tilegraph.graph.remake`: a seeded generator, a file whose fingerprint every read
checks, a source the user declared repeatable). A cheap result that may not come back the
same (an object read by ``from_array`` without ``repeatable=True``, or a chain over one) is
spilled like any other (or kept, without disk), and counted with the reason.

A dropped result's checksum (crc32 of its bytes) is kept, and the block made again is
compared with it: a source that changed under the run, or was declared repeatable and is
not, is an :class:`~tilegraph.io.snapshot.InputChangedError` naming the task, never a mix
of two versions of one block. A block whose chain starts only at seeded generators and
constants (:func:`~tilegraph.graph.remake.generated`) is computed from the plan alone,
reads nothing that could change, and is made again unchecked. The checksum costs one pass
over a block when it is dropped and one when it is made again, far less than writing it to
disk and reading it back (but a fifth of a pass over seeded random rows made twice).

The manager and its execution talk through a narrow protocol. The execution makes the
manager with the graph, the run's budget, the spill store, the remake masks, the tasks'
estimates and ``send`` (its subscribers' sink, or None), and calls the manager's public
methods (:class:`MemoryManager`). Of the execution, the manager reads and calls these
names and no others (:class:`ExecutorView`; ``tests/test_layering.py`` checks this module's
source against it), with the execution's lock held (``run_again`` without it):

===================  =============================================================================
name                 what the manager does with it
===================  =============================================================================
``lock``             releases it around its own I/O (spill writes, reads back, remakes) only, and
                     takes it again before it touches any state
``results``          the execution's dict, task -> result in memory: the manager deletes the entry
                     of a result it wrote to disk or dropped, and puts back one it read or made
                     again while the result is still wanted; it adds nothing else
``priority``         list[n], the tasks' priorities (read only)
``nrunning``         tasks running (read only)
``running``          the set of the tasks running (read only)
``finished``         whether the run is over (read only)
``deps(i)``          the tasks whose results task i reads
``pinned()``         the inputs of the running tasks (never spilled)
``last_reads()``     the results only the running tasks still read (freed when they end)
``next_use(v)``      the priority of the next consumer of v still to run
``next_ready(k)``    the k ready tasks that run next (read-ahead)
``is_held(v)``       whether v's result is still wanted (``in_memory=False``: wherever it is)
``idle_wait()``      wait a moment for other workers' progress (admission found no room)
``wait(t)``          wait on the execution's condition (the read-ahead thread; a read underway)
``wake_all()``       wake every waiting worker (read-ahead brought a result back)
``fail(exc)``        end the run with ``exc`` (the read-ahead thread could not read a result)
``run_again(i, x)``  run task i's step again on its inputs' values ``x`` (a step of a remake,
                     with the lock released)
===================  =============================================================================
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tilegraph.graph.memory import task_estimates
from tilegraph.graph.remake import generated
from tilegraph.io.snapshot import InputChangedError
from tilegraph.runtime.budget import (  # noqa: F401 - re-exported
    MemoryFigures,
    MemoryLimitError,
    default_limit,
)
from tilegraph.runtime.events import Spill, Unspill, nbytes_of
from tilegraph.runtime.recipes import recipe as make_recipe
from tilegraph.runtime.recipes import run as run_recipe
from tilegraph.runtime.rss import ResidentWatch, resident_bytes
from tilegraph.runtime.spill import SpillRecord, SpillStore, block_digest, spillable
from tilegraph.util import human, parse_bytes  # noqa: F401 - re-exported

PREFETCH_TASKS = 2  # ready tasks whose spilled inputs are read ahead
POLL_INTERVAL = 0.01  # seconds between checks of a waiting worker

class ExecutorView(Protocol):
    """What a :class:`MemoryManager` may read and call of the execution it serves; see the
    module docstring for what it does with each name."""

    lock: threading.Lock
    results: dict[int, Any]
    priority: list[int]
    nrunning: int
    running: set[int]
    finished: bool

    def deps(self, i: int) -> list[int]: ...

    def pinned(self) -> set[int]: ...

    def last_reads(self) -> list[int]: ...

    def next_use(self, v: int) -> int: ...

    def next_ready(self, k: int) -> list[int]: ...

    def is_held(self, v: int, in_memory: bool = True) -> bool: ...

    def idle_wait(self) -> None: ...

    def wait(self, timeout: float | None) -> None: ...

    def wake_all(self) -> None: ...

    def fail(self, exc: BaseException) -> None: ...

    def run_again(self, i: int, inputs: list) -> Any: ...


class MemoryManager:
    """The memory budget of one :class:`~tilegraph.runtime.core.Execution`: admission,
    spill to a :class:`SpillStore`, read-back and read-ahead of spilled results.

    The execution owns the results and the task states; the manager owns what is known
    about their bytes. Every method is called with the execution's lock held (the I/O
    happens with it released). State:

    ==================  ==========================================================================
    field               meaning and invariant
    ==================  ==========================================================================
    ``limit``           the run's memory limit in bytes (``None``: no budget, nothing is admitted
                        or spilled)
    ``budget``          what admission fills: ``limit`` less ``baseline`` when the resident set
                        is bounded, else ``limit``
    ``baseline``,       the process's RSS when the run started, the largest RSS sampled during
    ``peak_rss``        it, and the RSS the counts here do not explain (``unseen``, counted
    ``unseen``          against ``budget`` when the resident set is bounded); 0 when not watched
    ``estimates``       list[n]: bytes task i adds while it runs (output + temporaries)
    ``sizes``           dict, task -> bytes of its result while the result is in memory
    ``live``            sum of ``sizes``: bytes of results held in memory
    ``peak_live``       the largest ``live`` so far
    ``reserved``        sum of the estimates of the running tasks, and of the bytes they have
                        still to read back from disk (``reading``, task -> bytes)
    ``disk``            dict, task -> SpillRecord of a result with a copy on disk (a result is in
                        memory iff it is in the execution's ``results``; it may be in both)
    ``io_busy``         results being written or read right now (pinned)
    ``remakeable``      bytearray[n]: 1 for tasks cheaper to make again than to spill that
                        give the same block again (checked loads, random and constant
                        blocks, and chains of cheap steps over them:
                        :meth:`TaskGraph.remakeable`; 0 for results that arrive from
                        elsewhere and what is made of them); under pressure their results
                        are dropped without writing (their checksum kept in ``disk``) and
                        made again, with the steps of their chain that are no longer in
                        memory, when a consumer needs them (:meth:`_recipe`)
    ``refused``         bytearray[n]: 1 for tasks that would be remakeable but may not give
                        the same block again (:meth:`TaskGraph.remake_refused`): spilled or
                        kept like any other result
    ``remade``          dict, op kind -> blocks made again for a consumer (after being dropped),
                        and the blocks of their chains made again with them
    ``spilled_unrepeatable``  dict, op kind -> blocks of ``refused`` tasks written to disk;
                        ``unrepeatable_reasons``: op kind -> why (up to three different
                        reasons, joined by " | ")
    ``may_spill``       False when the run refuses disk (``spill=False``): only remakeable results
                        are dropped; beyond that, tasks wait for running ones, or run over
    ``prefetch``        deque of results queued for read-ahead; ``prefetching`` the set of them
                        plus the one being read (all also in ``io_busy``); ``prefetch_bytes``
                        their sizes
    ``spilled_bytes``,  bytes written to disk and read back so far, and bytes of dropped
    ``unspilled_bytes`` results made again (``recomputed_bytes``)
    ``recomputed_bytes``
    ==================  ==========================================================================

    The resident set. With ``watch_rss`` (a ``memory_limit`` the user gave), the limit bounds
    what the operating system sees, not only the bytes of results: the RSS when the run
    starts (the interpreter, its libraries, what the program holds) is the ``baseline``,
    reserved from the limit as Cubed's ``reserved_mem`` is, and a thread samples the RSS
    (:class:`~tilegraph.runtime.rss.ResidentWatch`), so that what grows with the work
    beyond the results and estimates counted here (temporaries beyond an estimate, a
    remake's steps, staging buffers, blocks in flight, BLAS workspaces, memory freed but not
    given back) is ``unseen`` and counts against the budget like results do. A limit less
    than twice the baseline (a test's few blocks) bounds the results alone; the peak RSS is
    still reported.
    """

    def __init__(self, ex: ExecutorView, graph: Any, limit: int | None,
                 spill: SpillStore | None, remakeable: bytearray,
                 estimates: list[int] | None = None, may_spill: bool = True,
                 refused: bytearray | None = None,
                 send: Callable[[Any], None] | None = None, watch_rss: bool = False):
        self.ex = ex
        self.graph = graph
        self._send = send  # the subscribers' sink (None: nobody listens)
        self.limit = limit
        self.may_spill = may_spill  # False: only results that can be made again are dropped
        self.spill = spill if spill is not None else SpillStore()
        n = len(graph)
        if limit is None:
            estimates = [0] * n
        elif estimates is None:
            estimates = task_estimates(graph)
        self.estimates = estimates
        self.sizes: dict[int, int] = {}
        self.live = 0
        self.peak_live = 0
        self.reserved = 0
        self.reading: dict[int, int] = {}
        self.disk: dict[int, SpillRecord] = {}
        self.io_busy: set[int] = set()
        self.remakeable = remakeable
        self.refused = refused if refused is not None else bytearray(n)
        self._kinds = graph.meta.get("kind") or [None] * n
        self._nb = graph.meta.get("nbytes") or [None] * n
        self._data = graph.remake_verdicts().data  # literals: a remake reads the graph's
        self._unchecked = generated(graph) if limit is not None else bytearray(n)
        self.remade: dict[str, int] = {}
        self.spilled_unrepeatable: dict[str, int] = {}
        self.unrepeatable_reasons: dict[str, str] = {}
        self._reasons: dict[str, list[str]] = {}
        self.prefetch: deque[int] = deque()
        self.prefetching: set[int] = set()
        self.prefetch_bytes = 0
        self.spilled_bytes = 0
        self.unspilled_bytes = 0
        self.recomputed_bytes = 0
        self._io_thread: threading.Thread | None = None
        self._watch_rss(limit if watch_rss else None)  # last: its thread reads the above

    def figures(self) -> MemoryFigures:
        """What the manager has counted so far, as a record (copies of its dicts)."""
        return MemoryFigures(self.peak_live, self.spilled_bytes, self.unspilled_bytes,
                             self.recomputed_bytes, dict(self.remade),
                             dict(self.spilled_unrepeatable), dict(self.unrepeatable_reasons),
                             self.peak_rss, self.baseline)

    # -- the resident set -----------------------------------------------------------------------

    def _watch_rss(self, limit: int | None) -> None:
        """Set ``budget``, ``baseline``, ``unseen`` and ``peak_rss``, and with a ``limit``
        start watching the process's RSS (see "The resident set" in the class docstring)."""
        self.budget = self.limit
        self.baseline = self.unseen = self.peak_rss = 0
        self._bound_rss = False
        self._watch: ResidentWatch | None = None
        if limit is None:
            return
        self.baseline = self.peak_rss = resident_bytes()
        self._bound_rss = 0 < self.baseline <= limit // 2
        if self._bound_rss:
            self.budget = limit - self.baseline
        self._watch = ResidentWatch(self._observe, lambda: self.ex.finished,
                                    trim_above=max(limit // 16, 1))

    def _observe(self, rss: int) -> int:
        """A sample of the RSS (from the watch's thread, without the lock: the figures it
        reads may be a moment old). Returns the bytes the manager's model does not see."""
        if rss > self.peak_rss:
            self.peak_rss = rss
        unseen = rss - self.baseline - self.live - self.reserved - self.prefetch_bytes
        unseen = unseen if unseen > 0 else 0
        if self._bound_rss:
            self.unseen = unseen
        return unseen

    def stop_watching(self) -> None:
        """Stop sampling the RSS (after one last sample); call without the lock."""
        if self._watch is not None:
            self._watch.stop()

    # -- accounting ---------------------------------------------------------------------------

    def hold(self, i: int, value: Any) -> None:
        """The result of task i is held in memory."""
        size = nbytes_of(value)
        self.sizes[i] = size
        self.live += size
        if self.live > self.peak_live:
            self.peak_live = self.live

    def drop(self, i: int) -> int:
        """The result of task i is released: forget its bytes and remove its spill file.
        Returns the bytes it held in memory."""
        size = self.sizes.pop(i, 0)
        self.live -= size
        record = self.disk.pop(i, None)
        if record is not None and record.path and i not in self.io_busy:
            self.spill.delete(record)
        return size

    def start(self, i: int) -> None:
        """Task i starts: reserve its estimate, and the bytes of its inputs it must read back
        from disk (admission counted them; held from the start, they keep other tasks from
        taking the same room while they are read; those the read-ahead is reading are
        counted by it)."""
        self.reserved += self.estimates[i]
        if self.disk:
            ex = self.ex
            reading = sum(self.disk[d].room for d in ex.deps(i) if d not in ex.results
                          and d in self.disk and d not in self.prefetching)
            if reading:
                self.reading[i] = reading
                self.reserved += reading

    def stop(self, i: int) -> None:
        """Task i stopped (finished, failed or cancelled): release its reservation."""
        self.reserved -= self.estimates[i] + self.reading.pop(i, 0)

    def forget_all(self) -> None:
        """Every result was dropped at once (cancel): nothing is held in memory."""
        self.sizes.clear()
        self.live = 0

    # -- admission and spill ------------------------------------------------------------------

    def _need(self, i: int) -> int:
        """The bytes task i adds when it starts: its estimate, and its inputs to bring back
        (but those the read-ahead is bringing, counted in ``prefetch_bytes``)."""
        ex = self.ex
        need = self.estimates[i]
        for d in ex.deps(i):
            if d not in ex.results and d in self.disk and d not in self.prefetching:
                need += self.disk[d].room
        return need

    def admit(self, i: int) -> bool:
        """Make room for task i if it does not fit; True when it may start now."""
        ex = self.ex
        deficit = (self.live + self.reserved + self.prefetch_bytes + self.unseen + self._need(i)
                   - self.budget)
        if deficit <= 0:
            return True
        victims = self._victims(deficit, i)
        if victims and (ex.nrunning or self.prefetching) and self._wait_rather(victims,
                                                                             deficit):
            ex.idle_wait()
            return False
        if not victims and not ex.nrunning and not self.prefetching:
            # nothing here will free memory (an MPI rank waiting for blocks from others
            # runs later tasks meanwhile): results needed before i go to disk too, rather
            # than i running beyond the budget
            victims = self._victims(deficit, i, in_order=False)
        if victims:
            self._write_out(victims)
            return False  # state changed: look again
        if ex.nrunning or self.prefetching:
            ex.idle_wait()
            return False
        return True  # nothing to free and nothing running: run it anyway

    def _wait_rather(self, victims: list[int], deficit: int) -> bool:
        """Whether to wait for the running tasks rather than move ``victims`` out of memory
        to cover ``deficit``: when they would be written to disk (not merely dropped to be
        made again) and either they do not cover it (the task could not start anyway) or the
        running tasks and reads ahead give back at least as much when they end (the
        reservations beyond the results, the inputs read for the last time, the steps of a
        remake). Writing partials a reduction waits on, to read them back a moment later,
        is then all the spill buys."""
        if all(self.remakeable[v] for v in victims):
            return False
        if sum(self.sizes.get(v, 0) for v in victims) < deficit:
            return True
        ex, nb = self.ex, self._nb
        relief = sum(max(0, self.estimates[j] - (nb[j] or 0)) for j in ex.running)
        relief += sum(self.sizes.get(d, 0) for d in set(ex.last_reads()))
        relief += sum(self.disk[d].working for d in self.prefetching if d in self.disk)
        return relief >= deficit

    def make_room(self) -> None:
        """A result made elsewhere arrived and is held (``Execution.deliver``): if what is
        held now exceeds the budget, the coldest results not pinned by a running task (the
        one that arrived among them) go to disk, as admission would have done before a task
        made it here. The lock is released while writing."""
        if self.limit is None:
            return
        deficit = self.live + self.reserved + self.prefetch_bytes + self.unseen - self.budget
        if deficit <= 0:
            return
        victims = self._victims(deficit)
        if victims:
            self._write_out(victims)

    def _victims(self, deficit: int, task: int | None = None, in_order: bool = True
                 ) -> list[int]:
        """The results to leave memory, enough to cover ``deficit`` bytes: those that are
        made again first, then those that go to disk, the coldest first among each; never
        one pinned by a running task. For the admission of ``task``: never one of its
        inputs, nor (``in_order``) a result whose next consumer comes before ``task`` in
        priority order (the priority order binds every worker)."""
        ex = self.ex
        own = ex.pinned() if task is None else set(ex.deps(task)) | ex.pinned()
        mine = -1 if task is None or not in_order else ex.priority[task]
        candidates = []
        for v, value in ex.results.items():
            if v in own or v in self.io_busy:
                continue
            remake = self.remakeable[v]
            if not (remake or (self.may_spill and spillable(value))):
                continue
            nxt = ex.next_use(v)
            if nxt < mine:  # needed before ``task``: a later task never evicts it
                continue
            # the results made again first (a remake costs less than a write and a read),
            # then those written to disk; the coldest first among each
            candidates.append((remake, nxt, v))
        candidates.sort(reverse=True)
        out, freed = [], 0
        for _, _, v in candidates:
            out.append(v)
            freed += self.sizes.get(v, 0)
            if freed >= deficit:
                break
        return out

    def _write_out(self, victims: list[int]) -> None:
        """Move ``victims`` to disk; the lock is released while writing."""
        ex = self.ex
        todo = [(v, ex.results[v]) for v in victims
                if v not in self.disk and not self.remakeable[v]]
        dropped = [(v, ex.results[v]) for v in victims
                   if v not in self.disk and self.remakeable[v]]
        self.io_busy.update(victims)
        records: dict[int, SpillRecord] = {}
        digests: dict[int, int | None] = {}
        ex.lock.release()
        try:
            for v, value in todo:
                records[v] = self.spill.write(value)
            for v, value in dropped:  # (a block computed from the plan alone: no checksum)
                digests[v] = None if self._unchecked[v] else block_digest(value)
        finally:
            ex.lock.acquire()
            self.io_busy.difference_update(victims)
        pinned = ex.pinned()
        for v in victims:
            record = records.get(v) or self.disk.get(v)
            if record is None:  # remakeable: its task is the copy, run again when needed
                value = ex.results.get(v)
                record = SpillRecord("", getattr(value, "shape", ()),
                                     getattr(value, "dtype", None), self.sizes.get(v, 0),
                                     digests.get(v), self._inputs_bytes(v))
            if not ex.is_held(v):
                if v in records:  # released while being written
                    self.spill.delete(records[v])
                continue
            self.disk[v] = record
            if v in pinned:  # a task took it meanwhile: keep it, the file is a clean copy
                continue
            del ex.results[v]
            size = self.sizes.pop(v, 0)
            self.live -= size
            if v in records:
                self.spilled_bytes += record.nbytes
                if self.refused[v]:
                    self._count_refused(v)
            if self._send is not None:
                self._send(Spill(self.graph.keys[v], record.nbytes or size, v not in records,
                                 self.live))

    def _count_refused(self, v: int) -> None:
        """A result that would have been dropped and made again went to disk: its source
        may not give the same block again. Counted by op kind, with the reason (up to
        three different ones per kind)."""
        kind = self._kinds[v] or "other"
        self.spilled_unrepeatable[kind] = self.spilled_unrepeatable.get(kind, 0) + 1
        reasons = self._reasons.setdefault(kind, [])
        if len(reasons) < 3:
            why = self.graph.unrepeatable_reason(v)
            if why and why not in reasons:
                reasons.append(why)
                self.unrepeatable_reasons[kind] = " | ".join(reasons)

    # -- read-back and read-ahead -------------------------------------------------------------

    def read_back(self, ids: list[int], task: int | None = None) -> None:
        """Bring results back from disk for ``task``, about to run; the lock is released while
        reading. Results the I/O thread is already reading are waited for, not read twice.
        Their files stay as clean copies until the results are released. Once they are held,
        the room ``task`` reserved for them is released. Those only queued for the
        read-ahead are taken from its queue and brought back here, rather than waited for
        behind the one it is reading (a worker would sit idle while one thread makes every
        block of a pass again)."""
        try:
            for d in [d for d in ids if d in self.prefetching and d in self.prefetch]:
                self.prefetch.remove(d)
                record = self.disk.get(d)
                self._done_prefetch(d, record)
                if record is not None and task is not None:
                    self.reading[task] = self.reading.get(task, 0) + record.room
                    self.reserved += record.room
            self._read_back(ids)
        finally:
            if task is not None:
                self.reserved -= self.reading.pop(task, 0)

    def _read_back(self, ids: list[int]) -> None:
        ex = self.ex
        while not ex.finished and any(d in self.prefetching for d in ids):
            ex.wait(POLL_INTERVAL)
        ids = [d for d in ids if d not in ex.results]
        if not ids or ex.finished:
            return
        plans = [(d, self.disk[d], self._recipe(d)) for d in ids]
        self.io_busy.update(ids)
        values: dict[int, tuple[Any, list[int]]] = {}
        ex.lock.release()
        try:
            for d, record, recipe in plans:
                values[d] = self._fetch(d, record, recipe)
        finally:
            ex.lock.acquire()
            self.io_busy.difference_update(ids)
        for d, record, _ in plans:
            value, made = values[d]
            self._count_fetch(d, record, value, made)
            self._put_back(d, value)

    def _count_fetch(self, d: int, record: SpillRecord, value: Any, made: Sequence[int]
                     ) -> None:
        """A result of ``d`` was read back (``record`` has a path) or made again, with the
        other tasks of its remake (``made``): counted, whether or not it is kept."""
        nbytes = nbytes_of(value)
        if record.path:
            self.unspilled_bytes += nbytes
            return
        self.recomputed_bytes += nbytes
        kind = self._kinds[d] or "other"
        self.remade[kind] = self.remade.get(kind, 0) + 1
        self._count_made(made)

    def _put_back(self, d: int, value: Any, ahead: bool = False) -> None:
        """A result read from disk, or made again, is held in memory again (``ahead``: by
        the read-ahead), if it is still wanted and not held already."""
        ex = self.ex
        if d in ex.results or not ex.is_held(d, in_memory=False):
            return
        ex.results[d] = value
        self.hold(d, value)
        if not self.disk[d].path:
            del self.disk[d]  # made again: nothing on disk to keep
        if self._send is not None:
            self._send(Unspill(self.graph.keys[d], nbytes_of(value), ahead, self.live))

    def plan_prefetch(self) -> None:
        """Queue for read-ahead the spilled inputs of the next ready tasks that fit in the
        budget's headroom, and start the I/O thread if it is not running."""
        self._queue_prefetch()
        if self.prefetch and self._io_thread is None:
            self._io_thread = threading.Thread(target=self._io_loop, name="tilegraph-io",
                                               daemon=True)
            self._io_thread.start()
        elif self.prefetch:
            self.ex.wake_all()

    def _queue_prefetch(self) -> None:
        ex = self.ex
        headroom = (self.budget - self.live - self.reserved - self.prefetch_bytes
                    - self.unseen)
        for t in ex.next_ready(PREFETCH_TASKS):
            for d in ex.deps(t):
                if d in ex.results or d in self.io_busy or d not in self.disk:
                    continue
                size = self.disk[d].room
                if size > headroom:
                    return
                headroom -= size
                self.prefetch_bytes += size
                self.prefetch.append(d)
                self.prefetching.add(d)
                self.io_busy.add(d)

    def _io_loop(self) -> None:
        """The read-ahead thread: reads queued results until the run is finished."""
        ex = self.ex
        with ex.lock:
            try:
                while True:
                    while not self.prefetch and not ex.finished:
                        ex.wait(None)
                    if ex.finished:
                        return
                    d = self.prefetch.popleft()
                    record = self.disk.get(d)
                    if record is None or d in ex.results or not ex.is_held(d, in_memory=False):
                        self._done_prefetch(d, record)
                        continue
                    recipe = self._recipe(d)
                    ex.lock.release()
                    try:
                        value, made = self._fetch(d, record, recipe)
                    except BaseException as exc:
                        ex.lock.acquire()
                        self._done_prefetch(d, record)
                        ex.fail(exc)
                        return
                    ex.lock.acquire()
                    self._done_prefetch(d, record)
                    self._count_fetch(d, record, value, made)
                    if (self.live + self.reserved + self.unseen + nbytes_of(value)
                            <= self.budget):
                        self._put_back(d, value, ahead=True)  # else: left where it was
                    value = recipe = None  # held by nothing here while waiting
                    ex.wake_all()
            finally:
                for d in self.prefetch:
                    self._done_prefetch(d, self.disk.get(d))
                self.prefetch.clear()

    def _done_prefetch(self, d: int, record: SpillRecord | None) -> None:
        self.prefetching.discard(d)
        self.io_busy.discard(d)
        if record is not None:
            self.prefetch_bytes -= record.room

    def join_io(self) -> None:
        """Wait for the read-ahead thread to end, and stop watching the RSS (call without
        the lock, once the run is finished)."""
        thread = self._io_thread
        if thread is not None:
            thread.join()
        self.stop_watching()

    # -- making dropped results again ---------------------------------------------------------

    def reload(self, i: int, record: SpillRecord) -> Any:
        """The result of task ``i`` from its spill file, or made again (see :meth:`_make`);
        called with the lock held, or once the run is over."""
        return self._fetch(i, record, self._recipe(i))[0]

    def _fetch(self, i: int, record: SpillRecord, recipe: list | None
               ) -> tuple[Any, list[int]]:
        """(Lock released.) The result of ``i`` read from disk, or made again by
        ``recipe``; and the other tasks the remake ran."""
        if record.path:
            return self.spill.read(record), []
        return self._make(i, recipe)

    def _recipe(self, i: int) -> list[tuple[int, list, int | None]] | None:
        """(Lock held.) The steps that make the dropped result of ``i`` again
        (:func:`~tilegraph.runtime.recipes.recipe`); ``None`` for a result on disk."""
        record = self.disk.get(i)
        if record is not None and record.path:
            return None
        return make_recipe(i, self.ex.results, self.graph, self._data, self.remakeable,
                           self.disk, self.ex.deps)

    def _make(self, i: int, steps: list) -> tuple[Any, list[int]]:
        """(Lock released.) The result of ``i`` made again by ``steps``, each step checked
        against the checksum of its dropped block (:func:`~tilegraph.runtime.recipes.run`);
        and the other tasks run."""
        return run_recipe(i, steps, self.graph, self.ex.run_again, self._check)

    def _check(self, i: int, value: Any, digest: int) -> None:
        """The block made again for ``i`` must be the one dropped (``digest``)."""
        got = block_digest(value)
        if got != digest:
            graph = self.graph
            raise InputChangedError(
                f"task {graph.keys[i]!r} (op {graph.opname(i)}) was made again after its "
                "result was dropped under memory pressure and gave another block "
                f"(checksum {got if got is None else f'{got:08x}'}, first "
                f"{digest:08x}): its source changed during the run, or does not "
                "give the same block twice (a from_array source declared "
                "repeatable=True that is not). The run stops rather than mix two "
                "versions of the block")

    def _count_made(self, made: Sequence[int]) -> None:
        """The tasks a remake ran besides the one it was for: counted as made again."""
        for t in made:
            nb = self._nb[t] or 0
            self.recomputed_bytes += nb
            kind = self._kinds[t] or "other"
            self.remade[kind] = self.remade.get(kind, 0) + 1

    def _inputs_bytes(self, v: int) -> int:
        """The bytes of the inputs of ``v``'s step (its literals aside): what a remake of
        ``v`` may hold beside it."""
        nb, data = self._nb, self._data
        return sum(nb[d] or 0 for d in self.ex.deps(v) if not data[d])

    def close(self) -> None:
        """Forget every result and remove every spill file (with the lock held)."""
        self.sizes.clear()
        self.live = 0
        self.disk.clear()
