"""``backend="serverless"``: a planned graph run by a pool of stateless workers.

The backend plugs into the one pipeline through the seam (:mod:`tilegraph.runtime.backends`):

- ``place_tasks`` puts each task either in this process (the *driver*: literal inputs,
  views of them such as the blocks of ``from_numpy``, and the tasks whose op kind gathers
  on the driver, e.g. the stores of the result's blocks) or in the pool, by the op-kind
  rule of :func:`tilegraph.plan.place.place_driver_or_pool`; fusion then fuses chains
  within the pool only.
- ``partition`` gives the driver's executor its own tasks plus one external task per pool
  result it needs (the outputs, and the inputs of its stores), and carries the pool's part
  of the plan to the transport (:class:`PoolPartition`); the backend object keeps nothing
  of a run, so one object runs several plans, one after the other or at once.
- the transport (:class:`_Driver`, one per run) makes the run: it stores the pool's part
  of the plan once in the object store
  (:class:`~tilegraph.runtime.serverless.tasks.GraphTasks`), stores the inputs the pool
  reads, marks them done (which makes the first tasks ready), and then only
  listens: pool results the driver needs are read from the store and delivered to the
  executor, worker events become the run's events (TaskStart/TaskEnd per worker, retries,
  LeaseExpired, WorkersScaled), expired leases are reclaimed, a task that runs more than
  ``straggler_factor`` times the median time of the finished tasks of its kind gets a backup
  copy on another worker (:data:`~tilegraph.runtime.serverless.state.BACKUP`; the first
  completion counts, the later one changes nothing, since every task's write is
  idempotent), and a run whose pool has no live worker for ``wait`` seconds fails with a
  message naming the server. On leaving, the
  run's keys and objects are removed whatever happened.

An implicit graph (:mod:`tilegraph.graph.implicit`, e.g. a LambdaPACK DAG) runs without
being expanded (``run_implicit``, called by :func:`tilegraph.pipeline.run_implicit`): the
graph (whose size does not depend on its number of nodes) and the external inputs are
stored, and the workers ask the graph for each finished node's children.

Without ``redis=`` or ``pool=``, a run starts its own :class:`~tilegraph.runtime.serverless.Pool`
(an embedded Valkey server and ``workers`` local worker processes) and stops it after.

With ``redis=`` (a server whose workers were started elsewhere) the run needs the pool's
credentials (:mod:`tilegraph.runtime.serverless.auth`): the server's password (in the URL,
or ``TILEGRAPH_REDIS_PASSWORD``) and the pool's MAC secret (``TILEGRAPH_SECRET``), or a
credentials file (``credentials=path``, or ``TILEGRAPH_CREDENTIALS``). The driver signs the
fields of its run's record that workers act on, and reads back nothing unverified: a task's
error is unpickled only with a valid MAC, and every result it reads from the store carries
one. ``memory_limit`` is refused: the workers have no memory manager that would keep it (a
worker bounds the blocks it keeps, ``tilegraph worker --cache-mb``).
"""

from __future__ import annotations

import pickle
import statistics
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.graph.implicit import ImplicitGraph
from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph
from tilegraph.plan.place import DRIVER, POOL, place_driver_or_pool
from tilegraph.runtime.backends import (
    Backend,
    BackendOption,
    Partition,
    ThreadsBackend,
    Transport,
    register_backend,
)
from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import (
    BackupStarted,
    LeaseExpired,
    PoolQueue,
    RunEnd,
    RunStart,
    TaskEnd,
    TaskFailed,
    TaskStart,
    WorkersScaled,
)
from tilegraph.runtime.serverless.auth import (
    CREDENTIALS_ENV,
    SECRET_ENV,
    Credentials,
    IntegrityError,
    Signer,
    credentials_for,
)
from tilegraph.runtime.serverless.pool import Pool, workers_info
from tilegraph.runtime.serverless.state import (
    EVENTS_MAXLEN,
    MAX_LOST,
    RUN_SCORE,
    Scripts,
    connect,
    default_namespace,
    delete_run,
    driver_fields,
    open_error,
    remove_dead_runs,
    run_signature,
)
from tilegraph.runtime.serverless.store import ObjectStore, block_spec, open_store
from tilegraph.runtime.serverless.tasks import GraphTasks, ImplicitTasks
from tilegraph.util import cores, path_value, positive_seconds

DRIVER_ID = "driver"
UPLOAD_BATCH = 8  # values the driver stores before it marks them done (see _Driver._upload)


class PoolFailure(RuntimeError):
    """A serverless run failed for a reason other than a task's own exception (a task lost
    too many times, no live worker, the Redis server gone)."""


class ServerlessBackend(Backend):
    """See the module docstring. ``pool``: a :class:`~tilegraph.runtime.serverless.Pool`; ``redis``
    and ``store``: URLs of a server whose workers run the tasks (started elsewhere: a pool,
    ``tilegraph worker`` processes, the service); ``credentials``: with ``redis``, the
    server's password and the pool's MAC secret (a
    :class:`~tilegraph.runtime.serverless.auth.Credentials` or the path of a credentials
    file; default: the environment's); ``workers``: the workers of a pool the run
    starts for itself (default: cores); ``wait``: seconds without any live worker after
    which the run fails; ``lease``: lease seconds of the workers a run starts."""

    name = "serverless"
    processes = 2  # the plan is placed on the driver and on the pool

    def __init__(self, workers: int | None = None, *, pool: Any = None,
                 redis: str | None = None, store: str | None = None, lease: float = 30.0,
                 wait: float = 60.0, credentials: Credentials | str | None = None):
        self.workers = workers or cores()
        self.pool = pool
        self.redis = redis
        self.store = store
        self.lease = lease
        self.wait = wait
        self.credentials = credentials
        self._local = ThreadsBackend(1)

    def check_options(self, options: Any) -> None:
        """Refuse the run's options this backend cannot keep: ``memory_limit`` (its
        workers have no memory manager; a worker bounds only the blocks it keeps)."""
        if options.limit_given:
            from tilegraph.util import human

            raise ValueError(
                f"memory_limit={human(options.memory_limit)} is not supported by backend "
                "'serverless': its workers have no memory manager to keep a limit (each "
                "worker process holds its task's blocks and up to --cache-mb of blocks read "
                "lately, 256 MB by default); leave memory_limit unset, or use backend="
                "'threads' or 'mpi'")

    # -- the seam ------------------------------------------------------------------------

    def place_tasks(self, graph: TaskGraph, processes: int, *, initial: str = "cyclic",
                    model: Any = None) -> list[int]:
        return place_driver_or_pool(graph)

    def partition(self, graph: TaskGraph, outputs: np.ndarray, priority: np.ndarray
                  ) -> PoolPartition:
        """The driver's tasks plus an external task per pool result it reads, with the
        pool's part of the plan (``pool``) for the run's transport."""
        n = len(graph)
        col = graph.meta.get("worker")
        where = np.asarray(col if col is not None else self.place_tasks(graph, 2),
                           dtype=np.int64)
        local = where == DRIVER
        is_data = np.frombuffer(bytes(graph.modes), dtype=np.uint8) == MODE_DATA
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
        dep = graph.dep_idx
        outputs = np.asarray(outputs, dtype=np.int64)
        needed = np.zeros(n, dtype=bool)  # pool results the driver reads
        needed[dep[local[src] & ~local[dep]]] = True
        needed[outputs[~local[outputs]]] = True
        sent = np.zeros(n, dtype=bool)  # driver values the pool reads
        sent[dep[~local[src] & local[dep]]] = True
        keep = np.flatnonzero(local | needed)
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[keep] = np.arange(len(keep), dtype=np.int64)
        part_graph = graph.subgraph(keep, detach=needed)
        exported = new_of_old[np.flatnonzero(sent & ~is_data)].tolist()
        part_priority = np.argsort(np.argsort(np.asarray(priority)[keep], kind="stable"),
                                   kind="stable")
        return PoolPartition(
            part_graph, new_of_old[outputs].tolist(), part_priority,
            external=new_of_old[np.flatnonzero(needed)].tolist(), exported=exported,
            pool=_GraphRun(graph, where, priority, needed, sent & is_data, new_of_old))

    def transport(self, part: Partition) -> Transport:
        """The driver of ``part``'s run on the pool (a new one per run)."""
        if not isinstance(part, PoolPartition):
            raise TypeError(f"the serverless backend's transport takes the PoolPartition "
                            f"its partition() made, got {type(part).__name__}")
        return _Driver(self, part.pool, len(part.external))

    def run(self, part: Partition, execution: Execution) -> None:
        self._local.run(part, execution)

    # -- implicit graphs -----------------------------------------------------------------

    def run_implicit(self, graph: ImplicitGraph, outputs: Sequence[str],
                     inputs: Mapping[str, Any], *, retries: int = 0,
                     wait: float | None = None, subscribers: Sequence[Any] = (),
                     watch: Callable[[Callable[[], tuple[int, int]]], Any] | None = None
                     ) -> list[Any]:
        """The results of the nodes ``outputs`` of the implicit graph ``graph``, in order,
        the graph never expanded (called by :func:`tilegraph.pipeline.run_implicit`).

        The graph (pickled once), the external ``inputs`` (name -> value) and the pool's
        queue entries are stored; the workers ask the graph for each finished node's
        children. This thread sleeps until the last output arrives or the run fails (a
        task's exception, a lost task, no live worker for ``wait`` seconds, default the
        backend's): no polling. An interruption (Ctrl-C) cancels the run; its keys and
        objects are removed whatever happened.

        ``subscribers`` get the run's events, as from any run: its start and end, each
        task's start and end on the pool's workers, failures, expired leases, backup
        copies, the workers alive and the queue's length. ``watch(progress)``: a context
        manager kept open while the run goes (the progress bar), ``progress()`` giving
        ``(tasks done, tasks in all)`` (in all: the graph's ``size()``, or the tasks done
        while it does not know)."""
        wanted = list(dict.fromkeys(outputs))
        if not wanted:
            return []
        rid = uuid.uuid4().hex[:16]
        source = ImplicitTasks(graph, wanted, rid)
        results: dict[str, Any] = {}
        lock = threading.Lock()
        run: _PoolRun | None = None
        sink = _Events(subscribers)
        total = graph.size()

        def got(task: str, value: Any) -> None:
            with lock:
                results[task] = value
                if len(results) == len(wanted):
                    run.done.set()

        def progress() -> tuple[int, int]:
            try:
                done = run.pool_done()
            except Exception:   # the state is unreachable: the run reports that itself
                done = sink.ndone
            return done, total if total is not None else done

        status = "failed"
        started = time.perf_counter()
        with self._connection() as (url, store, ns, pool, creds):
            run = _PoolRun(url, creds, store, ns, pool, rid, source, self, None, None,
                           retries=retries, on_value=got, wait=wait, events=sink)
            sink.send(RunStart(total if total is not None else 0,
                               len(workers_info(run.r, ns)), self.name, 0, started))
            try:
                with run.running([], {f"in/{name}": v for name, v in inputs.items()}), \
                        (watch(progress) if watch is not None else nullcontext()):
                    try:
                        run.done.wait()  # set by the last result, or by a failure
                    except BaseException:
                        run.failure = None
                        status = "cancelled"
                        run.r.hset(f"{ns}:run:{rid}", "state", "cancelled")
                        raise
                status = "done"
            finally:
                sink.send(RunEnd(status, sink.ndone, time.perf_counter() - started))
        return [results[o] for o in outputs]

    @contextmanager
    def _connection(self) -> Iterator[tuple[str, ObjectStore, str, Any, Credentials]]:
        """``(redis url, store, namespace, pool or None, credentials)``: the pool to run
        on, started here when the run has none of its own."""
        own = None
        if self.pool is not None:
            pool = self.pool
            if pool.closed:
                raise ValueError("backend='serverless': the pool given is closed")
            url, store, ns = pool.redis_url, pool.store, pool.namespace
            creds = pool.credentials
        elif self.redis is not None:
            ns = default_namespace()
            url, creds = credentials_for(self.redis, self.credentials)
            if creds.secret is None:
                raise ValueError(
                    f"backend='serverless' with redis={url!r} needs the pool's MAC secret, "
                    f"which its workers check: set {SECRET_ENV} (hex), or {CREDENTIALS_ENV} "
                    "or credentials= to a credentials file (pool.credentials.write(path)), "
                    "or run with pool=")
            store = open_store(self.store, secret=creds.secret) \
                if self.store is not None else None
            pool = None
        else:
            own = pool = Pool(self.workers, store=self.store, lease=self.lease)
            url, store, ns = pool.redis_url, pool.store, pool.namespace
            creds = pool.credentials
        tmp = None
        try:
            if store is None:
                import tempfile

                from tilegraph.debris import STORE_PREFIX, owner_tag, remove_debris

                remove_debris(tempfile.gettempdir())  # what killed drivers left
                tmp = tempfile.mkdtemp(prefix=f"{STORE_PREFIX}{owner_tag()}-")
                store = open_store(tmp, secret=creds.secret)
            store.check_writable()
            yield url, store, ns, pool, creds
        finally:
            if own is not None:
                own.close()
            if tmp is not None:
                import shutil

                shutil.rmtree(tmp, ignore_errors=True)


@dataclass(frozen=True, kw_only=True)
class PoolPartition(Partition):
    """The driver's part of a run (:meth:`ServerlessBackend.partition`): a
    :class:`Partition` with ``pool``, the pool's part of the plan (:class:`_GraphRun`),
    which the run's transport stores and listens to."""

    pool: _GraphRun


class _GraphRun:
    """The pool's part of a planned graph, from the partition (indices of the plan)."""

    def __init__(self, graph: TaskGraph, where: np.ndarray, priority: np.ndarray,
                 needed: np.ndarray, data_sent: np.ndarray, new_of_old: np.ndarray):
        self.graph = graph
        self.where = where
        self.priority = np.asarray(priority, dtype=np.int64)
        self.needed = needed
        self.data_sent = data_sent
        self.new_of_old = new_of_old
        self.old_of_new = {int(new_of_old[i]): i for i in np.flatnonzero(new_of_old >= 0).tolist()}

    def upload_order(self) -> list[int]:
        """The plan's data the pool reads (``data_sent``), in the order the pool first
        needs them: by the least priority of the tasks that read each."""
        sent = np.flatnonzero(self.data_sent)
        if sent.size == 0:
            return []
        ptr, idx = self.graph.dependents_csr()
        first = [int(self.priority[idx[ptr[i]:ptr[i + 1]]].min()) if ptr[i + 1] > ptr[i]
                 else int(self.priority[i]) for i in sent.tolist()]
        return [int(i) for _, i in sorted(zip(first, sent.tolist(), strict=True))]

    def source(self, prefix: str) -> GraphTasks:
        return GraphTasks(self.graph, np.flatnonzero(self.where == POOL), self.priority,
                          np.flatnonzero(self.needed), prefix)


class _Driver(Transport):
    """The driver side of one serverless run (see the module docstring)."""

    def __init__(self, backend: ServerlessBackend, run: _GraphRun, nexternal: int):
        self.backend = backend
        self.plan = run
        self.nexternal = nexternal  # the partition's tasks that run on the pool
        self.rid = uuid.uuid4().hex[:16]
        self._exports: list[tuple[int, Any]] = []
        self._export_cv = threading.Condition()
        self.pool_run: _PoolRun | None = None
        self.failure: BaseException | None = None

    def progress(self, execution: Execution) -> tuple[int, int]:
        """The driver's own tasks plus the pool's (counted by the run's state in Valkey)."""
        pool_run = self.pool_run
        if pool_run is None:
            return execution.ndone, execution.ntasks
        npool = int(np.count_nonzero(self.plan.where == POOL))
        total = execution.ntasks - self.nexternal + npool
        try:
            pool_done = pool_run.pool_done()
        except Exception:   # the state is unreachable: the run reports that itself
            pool_done = 0
        return execution.ndone - pool_run.ndelivered + pool_done, total

    def export(self, i: int, value: Any) -> None:
        with self._export_cv:
            self._exports.append((str(self.plan.old_of_new[i]), value))
            self._export_cv.notify()

    @property
    def core_seconds(self) -> float:
        """The pool workers' time in the run's finished tasks."""
        return self.pool_run.core_seconds if self.pool_run is not None else 0.0

    @contextmanager
    def connect(self, execution: Execution) -> Iterator[None]:
        with self.backend._connection() as (url, store, ns, pool, creds):
            source = self.plan.source(self.rid)
            run = _PoolRun(url, creds, store, ns, pool, self.rid, source, self.backend,
                           execution, lambda task: int(self.plan.new_of_old[int(task)]))
            self.pool_run = run
            # the plan's data go up while the pool works, those read first first: the
            # tasks that read the first blocks start as soon as these are stored
            self._exports = [(str(i), self.plan.graph.args[i][0])
                             for i in self.plan.upload_order()]
            for task, value in self._exports:  # their planned shapes, for the workers
                spec = block_spec(value)
                if spec is not None:
                    source.specs[source.output(task)] = spec
            with run.running([]):
                stop = threading.Event()
                up = threading.Thread(target=self._upload, args=(run, stop), daemon=True,
                                      name="tilegraph-serverless-upload")
                up.start()
                try:
                    yield
                finally:
                    stop.set()
                    with self._export_cv:
                        self._export_cv.notify()
                    up.join()

    def _upload(self, run: _PoolRun, stop: threading.Event) -> None:
        """Store the plan's data and the results of driver tasks that pool tasks read, and
        mark them done, in their order, :data:`UPLOAD_BATCH` at a time (the tasks that
        read one batch may start while the next is written). Stops when the run does
        (what it has not stored by then, no task needs)."""
        while True:
            with self._export_cv:
                while not self._exports and not stop.is_set():
                    self._export_cv.wait(0.2)
                if stop.is_set():
                    return
                batch = self._exports[:UPLOAD_BATCH]
                del self._exports[:UPLOAD_BATCH]
            try:
                run.provide(batch)
            except BaseException as exc:
                run.execution.cancel(exc)
                return


class _Events:
    """Where the events of an implicit run go (it has no executor to send them): its
    subscribers, called one event at a time, and the count of tasks done."""

    def __init__(self, subscribers: Sequence[Any]):
        self.subscribers = tuple(subscribers)
        self.lock = threading.Lock()
        self.ndone = 0

    @property
    def emitting(self) -> bool:
        return bool(self.subscribers)

    def send(self, event: Any) -> None:
        if isinstance(event, TaskEnd):
            self.ndone += 1
        for fn in self.subscribers:
            fn(event)


class _PoolRun:
    """One run on a pool: set-up, listening, clean-up (shared by planned graphs and implicit
    ones)."""

    def __init__(self, url: str, credentials: Credentials, store: ObjectStore, ns: str,
                 pool: Any, rid: str, source: Any, backend: ServerlessBackend,
                 execution: Execution | None, local_of: Callable[[str], int] | None,
                 retries: int | None = None,
                 on_value: Callable[[str, Any], None] | None = None,
                 wait: float | None = None, events: _Events | None = None):
        self.url = url
        self.r = connect(url, credentials)
        self.signer = Signer(credentials.secret)
        self.scripts = Scripts(self.r)
        self.store = store
        self.ns = ns
        self.pool = pool
        self.rid = rid
        self.source = source
        self.backend = backend
        self.execution = execution
        # where the run's events go: the executor's subscribers, or an implicit run's own
        self.sink: Any = execution if execution is not None else events
        self.local_of = local_of
        self.on_value = on_value
        self.retries = retries if retries is not None else (
            execution.retries if execution is not None else 0)
        self.wait = backend.wait if wait is None else wait  # seconds without live workers
        self.failure: BaseException | None = None
        # set when the run fails, or (by ``on_value``) when every wanted result arrived
        self.done = threading.Event()
        self.worker_index: dict[str, int] = {}
        self.offset = time.perf_counter() - time.time()
        self.started = time.time()
        self.ndelivered = 0
        self.nwanted = 0
        self.nprovided = 0
        # stragglers: when each running task started (server clock) and on which worker,
        # recent durations of each kind, the tasks given a backup copy
        self.factor = float(getattr(pool, "straggler_factor", STRAGGLER_FACTOR) or 0)
        self.running_since: dict[str, tuple[float, str]] = {}
        self.durations: dict[str, deque[float]] = {}
        self.backed: set[str] = set()
        self.nbackups = 0
        self.core_seconds = 0.0  # the pool workers' time in finished tasks

    # -- set-up and clean-up -------------------------------------------------------------

    @contextmanager
    def running(self, inputs: Sequence[tuple[str, Any]],
                objects: Mapping[str, Any] | None = None) -> Iterator[None]:
        """Set the run up (its source, ``objects`` stored by key under the run's prefix, the
        values of ``inputs`` provided, its first tasks ready), listen while the block runs,
        and remove every key and object of the run on leaving."""
        r, ns, rid = self.r, self.ns, self.rid
        remove_dead_runs(r, ns)  # what killed drivers left in this namespace
        seq = int(r.incr(f"{ns}:seq"))
        self.base = (seq % (1 << 26)) * RUN_SCORE
        blob = f"{rid}/source"
        stop = threading.Event()
        listener = None
        literals = getattr(self.source, "literals", None)
        for key, value in {**(literals or {}), **{f"{rid}/{k}": v for k, v in
                                                  (objects or {}).items()}}.items():
            spec = block_spec(value)
            if spec is not None:
                self.source.specs[key] = spec
        try:
            self.store.put_code(blob, self.source)
            signed = {"kind": self.source.kind, "store": self.store.url, "blob": blob,
                      "retries": self.retries}
            sec, usec = r.time()
            r.hset(f"{ns}:run:{rid}", mapping={
                **signed, "state": "running", "ndone": 0, "seen": f"{sec + usec / 1e6:.6f}",
                "base": self.base, "sig": run_signature(self.signer, ns, rid, signed),
                **driver_fields()})
            r.sadd(f"{ns}:runs", rid)
            if literals:
                with ThreadPoolExecutor(min(4, len(literals))) as ex:
                    list(ex.map(lambda kv: self.store.put_value(*kv), literals.items()))
            if objects:
                with ThreadPoolExecutor(min(4, len(objects))) as ex:
                    list(ex.map(lambda kv: self.store.put_value(f"{rid}/{kv[0]}", kv[1]),
                                objects.items()))
            self.provide(inputs)
            starters = self.source.starters()
            if starters:
                r.zadd(f"{ns}:ready", {f"{rid}|{t}": self.base + self.source.score(t)
                                       for t in starters})
                r.rpush(f"{ns}:wake", *([1] * min(len(starters), 256)))
                r.ltrim(f"{ns}:wake", -256, -1)
            listener = threading.Thread(target=self._listen, args=(stop,), daemon=True,
                                        name="tilegraph-serverless-listen")
            listener.start()
            yield
        finally:
            stop.set()
            if listener is not None:
                listener.join()
            try:
                r.hset(f"{ns}:run:{rid}", "state", "ended")
                delete_run(r, ns, rid)
            except Exception:
                pass
            self.store.delete_prefix(rid)
            if self.failure is not None and self.execution is None:
                raise self.failure

    def provide(self, items: Sequence[tuple[str, Any]]) -> None:
        """Store the values of tasks made outside the pool and mark them done."""
        if not items:
            return
        source = self.source
        with ThreadPoolExecutor(min(4, len(items))) as ex:
            sizes = list(ex.map(lambda kv: self.store.put_value(source.output(kv[0]), kv[1]),
                                items))
        pipe = self.r.pipeline(transaction=False)
        now = f"{time.time():.6f}"
        for (task, _), nb in zip(items, sizes, strict=True):
            args = [self.ns, self.rid, task, DRIVER_ID, nb, now, now,
                    "1" if source.is_wanted(task) else "0", EVENTS_MAXLEN]
            kids = source.children(task)
            args.append(len(kids))
            for child, nparents, prio in kids:
                args.extend((child, nparents, self.base + prio))
            self.scripts.complete(args=args, client=pipe)
        pipe.execute()
        self.nprovided += len(items)

    def pool_done(self) -> int:
        """Tasks of the pool finished so far (the run's count, less the values provided)."""
        ndone = self.r.hget(f"{self.ns}:run:{self.rid}", "ndone")
        return max(0, int(ndone or 0) - self.nprovided)

    # -- listening -----------------------------------------------------------------------

    def _listen(self, stop: threading.Event) -> None:
        r, ns, rid = self.r, self.ns, self.rid
        want = f"{ns}:{rid}:want"
        ev = f"{ns}:{rid}:ev"
        last = "0-0"
        last_check = 0.0
        no_worker_since: float | None = None
        readers = ThreadPoolExecutor(2, thread_name_prefix="tilegraph-serverless-read")
        alive_before = -1
        is_wanted = self.source.is_wanted
        check = True  # whether the want list may hold something
        try:
            while not stop.is_set():
                try:
                    # a task's event is in the stream before it is on the want list (one
                    # transition writes both), so reading the events after popping the
                    # list gives every event of a result before the result is delivered.
                    # The list is read only when an event says it grew (a wanted task
                    # done, a failure) and twice a second, not at every turn.
                    tasks = r.lpop(want, 1000) if check else None
                    check = False
                    block: int | None = None if tasks else 50
                    nread = 0
                    while True:
                        got = r.xread({ev: last}, count=2000, block=block)
                        n = 0
                        for _, entries in got:
                            for eid, fields in entries:
                                last = eid
                                n += 1
                                kind = fields[b"e"]
                                if kind in (b"f", b"x") or (
                                        kind == b"d" and is_wanted(fields[b"t"].decode())):
                                    check = True
                                self._track(fields)
                                self._event(fields)
                        nread += n
                        if n < 2000:
                            break
                        block = None
                    now = time.monotonic()
                    if now - last_check > 0.5:
                        last_check = now
                        check = True
                        self.scripts.reclaim(args=[ns, MAX_LOST, EVENTS_MAXLEN])
                        # the heartbeat; no state: the run's keys were deleted
                        if self.scripts.heartbeat(args=[f"{ns}:run:{rid}"]) is None:
                            raise PoolFailure(
                                f"the run's keys on {self.url} (namespace {ns!r}) were "
                                "deleted while it ran: another client removed them (a "
                                "FLUSH, or a pool closed on the same namespace)")
                        alive = len(workers_info(r, ns))
                        if alive != alive_before:
                            alive_before = alive
                            self._send(WorkersScaled(time.perf_counter(), alive, "alive"))
                        if alive > 1:
                            self._back_up_stragglers()
                        if self.sink is not None and self.sink.emitting:
                            pipe = r.pipeline()
                            pipe.zcard(f"{ns}:ready")
                            pipe.zcard(f"{ns}:leases")
                            ready, running = pipe.execute()
                            self._send(PoolQueue(time.perf_counter(), ready, running))
                        if alive:
                            no_worker_since = None
                        elif no_worker_since is None:
                            no_worker_since = now
                        elif now - no_worker_since > self.wait:
                            raise PoolFailure(
                                f"no serverless worker served {self.url} for "
                                f"{self.wait:.0f} s: start workers with `tilegraph "
                                f"worker --redis {self.url}`, or run with a Pool")
                except PoolFailure as exc:
                    self._fail(exc)
                    return
                except Exception as exc:
                    import redis

                    if isinstance(exc, (redis.exceptions.ConnectionError,
                                        redis.exceptions.TimeoutError)):
                        self._fail(ConnectionError(
                            f"lost the Redis server at {self.url} during the run: {exc}"))
                        return
                    raise
                if not tasks:
                    if nread and not check:
                        # events come a few at a time: gather more per read (a result is
                        # delivered at most this much later; the driver's turns cost CPU
                        # the workers share)
                        stop.wait(0.02)
                    continue
                fail = False
                good = []
                for t in tasks:
                    t = t.decode()
                    if t == "!fail":
                        fail = True
                    else:
                        good.append(t)
                for _ in readers.map(self._deliver, good):
                    pass
                if fail:
                    self._fail(self._run_error())
                    return
        except BaseException as exc:
            self._fail(exc)
        finally:
            readers.shutdown(wait=True)

    def _track(self, f: dict) -> None:
        """Follow the tasks running and the durations of the finished ones, by kind."""
        if f.get(b"w") == DRIVER_ID.encode():
            return
        kind = f[b"e"]
        task = f[b"t"].decode()
        if kind == b"s":
            self.running_since[task] = (float(f[b"at"]), f[b"w"].decode())
        elif kind == b"d":
            self.running_since.pop(task, None)
            times = self.durations.setdefault(self.source.opname(task), deque(maxlen=50))
            seconds = float(f[b"t1"]) - float(f[b"t0"])
            times.append(seconds)
            self.core_seconds += seconds
        elif kind in (b"x", b"r", b"f"):
            self.running_since.pop(task, None)

    def _back_up_stragglers(self) -> None:
        """Offer a second copy of every task running longer than ``factor`` times the
        median duration of its kind's last finished tasks (at least 3 of them, and at least
        ``MIN_BACKUP_SECONDS``): a worker other than the straggler's takes it."""
        if self.factor <= 0 or not self.running_since:
            return
        sec, usec = self.r.time()
        now = sec + usec / 1e6
        for task, (since, _) in list(self.running_since.items()):
            if task in self.backed:
                continue
            times = self.durations.get(self.source.opname(task))
            if times is None or len(times) < 3:
                continue
            if now - since > max(self.factor * statistics.median(times), MIN_BACKUP_SECONDS):
                self.backed.add(task)
                if self.scripts.backup(args=[self.ns, f"{self.rid}|{task}", EVENTS_MAXLEN]):
                    self.nbackups += 1

    def _deliver(self, task: str) -> None:
        value = self.store.get_value(self.source.output(task))
        self.ndelivered += 1
        if self.on_value is not None:
            self.on_value(task, value)
        if self.execution is not None:
            self.execution.deliver(self.local_of(task), value)

    def _run_error(self) -> BaseException:
        info = self.r.hgetall(f"{self.ns}:run:{self.rid}")
        task = info.get(b"errtask", b"?").decode(errors="replace")
        try:
            name = self.source.name(task)
        except Exception:  # not a task of this run
            name = f"task {task!r}"
        if b"error" in info:
            try:  # unpickled only if a holder of the pool's secret wrote it
                payload = open_error(self.signer, self.ns, self.rid, info[b"error"], self.url)
            except IntegrityError as exc:
                return exc
            try:
                return pickle.loads(payload)
            except Exception as exc:
                return PoolFailure(f"{name} failed; its error could not be read: {exc}")
        lost = info.get(b"lost", b"?").decode()
        return PoolFailure(f"{name} was lost {lost} times: each worker that took it died or "
                           "stalled before finishing it (killed, out of memory, a crash)")

    def _fail(self, exc: BaseException) -> None:
        self.failure = exc
        try:
            self.r.hset(f"{self.ns}:run:{self.rid}", "state", "failed")
        except Exception:
            pass
        if self.execution is not None:
            self.execution.cancel(exc)
        self.done.set()

    def _worker(self, wid: str) -> int:
        """The worker number of a pool worker in events: 1, 2, ... (0 is the driver's own
        thread, which runs the stores of the result)."""
        n = self.worker_index.get(wid)
        if n is None:
            n = self.worker_index[wid] = len(self.worker_index) + 1
        return n

    def _send(self, event: Any) -> None:
        ex = self.sink
        if ex is not None and ex.emitting:
            with ex.lock:
                ex.send(event)

    def _event(self, f: dict) -> None:
        ex = self.sink
        if ex is None or not ex.emitting:
            return
        kind = f[b"e"]
        task = f[b"t"].decode()
        wid = f[b"w"].decode()
        if wid == DRIVER_ID:
            return
        src = self.source
        if kind == b"s":
            self._send(TaskStart(src.key(task), src.opname(task), self._worker(wid),
                                 float(f[b"at"]) + self.offset, "pool"))
        elif kind == b"d":
            self._send(TaskEnd(src.key(task), src.opname(task), self._worker(wid),
                               float(f[b"t0"]) + self.offset, float(f[b"t1"]) + self.offset,
                               int(f[b"b"]), "pool"))
        elif kind == b"r":
            self._send(TaskFailed(src.key(task), src.opname(task), self._worker(wid),
                                  RuntimeError(f[b"msg"].decode()), True))
        elif kind == b"x":
            self._send(LeaseExpired(src.key(task), wid, time.perf_counter(), int(f[b"n"])))
        elif kind == b"b":
            self._send(BackupStarted(src.key(task), wid, time.perf_counter()))


STRAGGLER_FACTOR = 3.0  # a task this many times slower than its kind's median is backed up
MIN_BACKUP_SECONDS = 0.5  # ... when it has run at least this long


def _check_pool(value: Any) -> Any:
    if value is not None and not isinstance(value, Pool):
        raise TypeError(f"pool must be a tilegraph.runtime.serverless.Pool or None, got "
                        f"{type(value).__name__}")
    return value


def _check_redis(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("redis://", "rediss://", "unix://",
                                                             "valkey://")):
        raise ValueError(f"redis must be a URL such as 'redis://host:6379/0', got {value!r}")
    return value


def _check_store(value: Any) -> str | None:
    if value is None:
        return None
    path = path_value("store", value, "a directory path or an fsspec URL")
    if not path:
        raise ValueError("store must be a directory path or an fsspec URL, got ''")
    return path


def _check_lease(value: Any) -> float:
    return positive_seconds("lease", value)


def _check_credentials(value: Any) -> Any:
    if value is None or isinstance(value, Credentials):
        return value
    return path_value("credentials", value, "the path of a credentials file or a Credentials")


def _make_backend(workers: int | None = None, pool: Any = None, redis: str | None = None,
                  store: str | None = None, lease: float = 30.0,
                  credentials: Any = None) -> ServerlessBackend:
    """``backend="serverless"`` of :func:`~tilegraph.runtime.backends.make_backend`."""
    return ServerlessBackend(workers, pool=pool, redis=redis, store=store, lease=lease,
                             credentials=credentials)


register_backend("serverless", _make_backend, options={
    "pool": BackendOption(
        None, _check_pool,
        "the Pool to run on (None: redis, else a pool of workers processes started for "
        "the run)"),
    "redis": BackendOption(
        None, _check_redis, "URL of a Redis/Valkey server whose workers run the tasks",
        env="TILEGRAPH_REDIS"),
    "store": BackendOption(
        None, _check_store,
        "object store of the blocks, a directory or an fsspec URL (default: a temporary "
        "directory)", env="TILEGRAPH_STORE"),
    "lease": BackendOption(30.0, _check_lease, "lease seconds of the workers a run starts"),
    "credentials": BackendOption(
        None, _check_credentials,
        "with redis=: a credentials file (the server's password and the pool's MAC secret, "
        "mode 0600; default: TILEGRAPH_REDIS_PASSWORD and TILEGRAPH_SECRET)",
        env="TILEGRAPH_CREDENTIALS"),
})
