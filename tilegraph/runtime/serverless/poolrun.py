"""One run on a serverless pool, from the driver's side (:class:`PoolRun`, shared by the
planned graphs of :class:`~tilegraph.runtime.serverless.backend.ServerlessBackend` and its
implicit ones): the run's record, source and inputs stored and its first tasks made ready;
then a listening thread that reads the workers' events and the results the driver wants,
reclaims expired leases, backs up stragglers, and fails the run when a task failed or was
lost too often, no worker served the pool for ``wait`` seconds or the server is gone; on
leaving, every key and object of the run removed. Where an implicit run's events go
(:class:`RunEvents`) and the run's errors (:class:`PoolFailure`) are here too."""

from __future__ import annotations

import pickle
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import (
    BackupStarted,
    LeaseExpired,
    PoolQueue,
    TaskEnd,
    TaskFailed,
    TaskStart,
    WorkersScaled,
)
from tilegraph.runtime.serverless.auth import Credentials, IntegrityError, Signer
from tilegraph.runtime.serverless.pool import workers_info
from tilegraph.runtime.serverless.state import (
    EVENTS_MAXLEN,
    MAX_LOST,
    RUN_SCORE,
    Scripts,
    connect,
    delete_run,
    driver_fields,
    open_error,
    remove_dead_runs,
    run_signature,
)
from tilegraph.runtime.serverless.store import ObjectStore, block_spec

if TYPE_CHECKING:
    from tilegraph.runtime.serverless.backend import ServerlessBackend

DRIVER_ID = "driver"
STRAGGLER_FACTOR = 3.0  # a task this many times slower than its kind's median is backed up
MIN_BACKUP_SECONDS = 0.5  # ... when it has run at least this long


class PoolFailure(RuntimeError):
    """A serverless run failed for a reason other than a task's own exception (a task lost
    too many times, no live worker, the Redis server gone)."""


class RunEvents:
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


class PoolRun:
    """One run on a pool: set-up, listening, clean-up (shared by planned graphs and implicit
    ones)."""

    def __init__(self, url: str, credentials: Credentials, store: ObjectStore, ns: str,
                 pool: Any, rid: str, source: Any, backend: ServerlessBackend,
                 execution: Execution | None, local_of: Callable[[str], int] | None,
                 retries: int | None = None,
                 on_value: Callable[[str, Any], None] | None = None,
                 wait: float | None = None, events: RunEvents | None = None):
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
        # the pool as the listening thread last saw it: live workers (-1: not yet), since
        # when none (None: some)
        self.alive_before = -1
        self.no_worker_since: float | None = None

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
        """The listening thread: read the workers' events and deliver the results the
        driver wants as they come, look after the pool twice a second
        (:meth:`_look_after_pool`), and fail the run on a task's failure, a lost task, no
        live worker or a lost server."""
        r, ns, rid = self.r, self.ns, self.rid
        want = f"{ns}:{rid}:want"
        ev = f"{ns}:{rid}:ev"
        last = "0-0"
        last_check = 0.0
        readers = ThreadPoolExecutor(2, thread_name_prefix="tilegraph-serverless-read")
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
                        self._look_after_pool(now)
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

    def _look_after_pool(self, now: float) -> None:
        """What the listening thread does twice a second (``now``: its monotonic clock):
        reclaim expired leases, beat the run's heartbeat, follow the live workers
        (WorkersScaled events), back up stragglers, report the queue (PoolQueue events).
        Raises :class:`PoolFailure` when the run's keys were deleted or no worker served
        the pool for ``wait`` seconds."""
        r, ns, rid = self.r, self.ns, self.rid
        self.scripts.reclaim(args=[ns, MAX_LOST, EVENTS_MAXLEN])
        # the heartbeat; no state: the run's keys were deleted
        if self.scripts.heartbeat(args=[f"{ns}:run:{rid}"]) is None:
            raise PoolFailure(
                f"the run's keys on {self.url} (namespace {ns!r}) were deleted while it ran: "
                "another client removed them (a FLUSH, or a pool closed on the same "
                "namespace)")
        alive = len(workers_info(r, ns))
        if alive != self.alive_before:
            self.alive_before = alive
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
            self.no_worker_since = None
        elif self.no_worker_since is None:
            self.no_worker_since = now
        elif now - self.no_worker_since > self.wait:
            raise PoolFailure(
                f"no serverless worker served {self.url} for {self.wait:.0f} s: start "
                f"workers with `tilegraph worker --redis {self.url}`, or run with a Pool")

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
