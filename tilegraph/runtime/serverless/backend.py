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

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from tilegraph.runtime.events import RunEnd, RunStart
from tilegraph.runtime.serverless.auth import (
    CREDENTIALS_ENV,
    SECRET_ENV,
    Credentials,
    credentials_for,
)
from tilegraph.runtime.serverless.pool import Pool, workers_info
from tilegraph.runtime.serverless.poolrun import (  # noqa: F401 - re-exported
    DRIVER_ID,
    MIN_BACKUP_SECONDS,
    STRAGGLER_FACTOR,
    PoolFailure,
    PoolRun,
    RunEvents,
)
from tilegraph.runtime.serverless.state import default_namespace
from tilegraph.runtime.serverless.store import ObjectStore, block_spec, open_store
from tilegraph.runtime.serverless.tasks import GraphTasks, ImplicitTasks
from tilegraph.util import cores, path_value, positive_seconds

UPLOAD_BATCH = 8  # values the driver stores before it marks them done (see _Driver._upload)


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
        run: PoolRun | None = None
        sink = RunEvents(subscribers)
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
            run = PoolRun(url, creds, store, ns, pool, rid, source, self, None, None,
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
        self.pool_run: PoolRun | None = None
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
            run = PoolRun(url, creds, store, ns, pool, self.rid, source, self.backend,
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

    def _upload(self, run: PoolRun, stop: threading.Event) -> None:
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
