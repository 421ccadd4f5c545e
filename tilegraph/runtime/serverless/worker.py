"""A stateless serverless worker: ``tilegraph worker --redis URL``.

A worker holds nothing that the run needs after it dies. It loops: take the best ready task
under a lease, read the task's inputs from the object store (or from its memory), run the
kernel, write the output under the task's own key (atomically), and record the completion,
which makes the task's children ready. The completion and the take of the next task are one
round trip (:data:`~tilegraph.runtime.serverless.state.STEP`), so a child the completion made
ready is usually taken by the worker that made its input, and reads it from memory: a worker
keeps the blocks it made or read lately (:class:`BlockCache`, ``cache_bytes``). The output
is written to the store all the same, before the completion is recorded, so another worker
that takes a child, or redoes a task after this worker dies, reads it there. While it
computes, a worker holds the next task and reads that task's inputs (when at least two
tasks are ready, so that it never holds a task another idle worker could run;
``pipeline_width=2``, the default), and with ``pipeline_width=3`` it also writes the last
task's output meanwhile (numpywren's pipelining; ``1``: one step at a time). With nothing to
do it blocks on the server's wake list until a task is made ready. The objects a completion
names as read by no unfinished task are removed by a background thread. A background thread
renews the leases it has held for a third of a lease and publishes its heartbeat (pid, host,
current task, resident memory), in one round trip.

A task that raises is offered again up to the run's ``retries``, then fails the run with the
task's exception. A worker that dies (killed, out of memory, its machine gone) or stops
(SIGSTOP) leaves its leases to expire; any worker (or the driver) then puts the tasks back in
the ready queue (:data:`~tilegraph.runtime.serverless.state.RECLAIM`). Delivery is at least once and
every task is idempotent, so a task run twice writes the same object twice and its second
completion changes nothing.

A worker exits on SIGTERM/SIGINT after its current task, after ``runtime_limit`` seconds
(as AWS Lambda's 900 s; it does not start a task it expects to overrun, and it stops
renewing its leases once past the limit, so a task that overran is taken by another), or
after ``idle_exit`` seconds without work. Workers may run on any machine that reaches the Redis
server and the object store named by each run.

A worker needs the pool's credentials (:mod:`tilegraph.runtime.serverless.auth`): the
server's password, if it has one, and the pool's MAC secret, from its environment
(``TILEGRAPH_REDIS_PASSWORD``, ``TILEGRAPH_SECRET``; a pool's provisioner sets them) or a
file only its user may read (``--credentials FILE`` or ``TILEGRAPH_CREDENTIALS``), never
from its command line. It trusts nothing it reads back: it opens a run's store and reads its
task source only if the run's record is signed with the secret, and every input it reads
from the store carries a MAC (an input that fails is the task's error, naming the object).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import numpy as np

from tilegraph.debris import host_id
from tilegraph.runtime.blas import blas_threads
from tilegraph.runtime.serverless.auth import (
    CREDENTIALS_ENV,
    SECRET_ENV,
    Credentials,
    Signer,
    credentials_for,
    split_url,
)
from tilegraph.runtime.serverless.state import (
    EVENTS_MAXLEN,
    MAX_LOST,
    Scripts,
    check_namespace,
    check_run,
    connect,
    default_namespace,
    seal_error,
)
from tilegraph.runtime.serverless.store import ObjectStore, open_store, pickle_dumps
from tilegraph.runtime.serverless.tasks import Literal


class _Run:
    """What a worker knows of one run: its task source, store and retry count."""

    def __init__(self, source: Any, store: ObjectStore, retries: int):
        self.source = source
        self.store = store
        self.retries = retries
        self.literals: dict[str, Any] = {}  # large literal arguments, read once


def _quiet_delete(store: ObjectStore, key: str) -> None:
    try:
        store.delete_prefix(key)
    except Exception:  # gone already, or the store is unreachable: the run's end removes it
        pass


class BlockCache:
    """The blocks a worker made or read lately, by object key, least recently used first,
    at most ``limit`` bytes: a task whose input this worker holds reads it from memory (a
    block just made by its parent, a panel block read by many tasks of one step). Stored
    blocks never change (each object is one task's output, and a duplicate writes the same
    value), so a held block is never stale; a block handed to a task that may write over
    it in place is a copy. Thread-safe (the reader thread and the main loop share it)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.nbytes = 0
        self.blocks: OrderedDict[str, Any] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        with self.lock:
            value = self.blocks.get(key)
            if value is None:
                self.misses += 1
                return None
            self.blocks.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: Any) -> None:
        if type(value) is not np.ndarray or value.nbytes > self.limit // 2:
            return
        with self.lock:
            old = self.blocks.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self.blocks[key] = value
            self.nbytes += value.nbytes
            while self.nbytes > self.limit:
                _, out = self.blocks.popitem(last=False)
                self.nbytes -= out.nbytes

    def drop(self, key: str) -> None:
        with self.lock:
            old = self.blocks.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes

    def drop_prefix(self, prefix: str) -> None:
        with self.lock:
            for key in [k for k in self.blocks if k.startswith(prefix)]:
                self.nbytes -= self.blocks.pop(key).nbytes


CACHE_BYTES = 256 << 20  # default bytes of blocks a worker keeps in memory


class Worker:
    """One worker process's loop (see the module docstring). ``credentials``: the server's
    password and the pool's MAC secret (default: this process's environment, see
    :meth:`~tilegraph.runtime.serverless.auth.Credentials.from_env`; a password in the URL
    counts too)."""

    def __init__(self, redis: str, *, namespace: str | None = None, lease: float = 30.0,
                 runtime_limit: float | None = 900.0, idle_exit: float | None = None,
                 blas_threads: int | None = None, worker_id: str | None = None,
                 pipeline_width: int = 2, cache_bytes: int = CACHE_BYTES,
                 credentials: Credentials | None = None):
        if lease <= 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        if pipeline_width not in (1, 2, 3) or isinstance(pipeline_width, bool):
            raise ValueError(f"pipeline_width must be 1, 2 or 3, got {pipeline_width!r}")
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative integer, got {cache_bytes!r}")
        redis, creds = credentials_for(redis, credentials)
        if creds.secret is None:
            raise ValueError(
                f"a worker needs the pool's MAC secret to check what it reads: set "
                f"{SECRET_ENV} (hex), or name a credentials file in {CREDENTIALS_ENV} or "
                f"--credentials (a pool writes one with pool.credentials.write(path))")
        self.url = redis
        self.secret = creds.secret
        self.signer = Signer(creds.secret)
        self.ns = check_namespace(namespace) if namespace is not None else \
            default_namespace()
        self.r = connect(redis, creds)
        self.scripts = Scripts(self.r)
        self.lease = float(lease)
        self.runtime_limit = runtime_limit
        self.idle_exit = idle_exit
        self.blas_threads = blas_threads
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # 1: take, read, compute, write one task at a time; 2: read the next task's inputs
        # while computing; 3: also write the last output while computing the next
        self.pipeline_width = pipeline_width
        self.prefetch = pipeline_width >= 2
        self.cache = BlockCache(cache_bytes)
        self.writer: ThreadPoolExecutor | None = None
        self.pending_write: Any = None
        # removes the objects no task reads any more, off the task loop's path (a removal
        # is a file unlink or an object-store request; it waited in every step before)
        self.deleter: ThreadPoolExecutor | None = None
        self.started = time.time()
        self.stopping = threading.Event()
        # leased members -> when this worker took or renewed them (its own clock); the
        # heartbeat thread renews the leases older than a third of the lease
        self.held: dict[bytes, float] = {}
        self.held_lock = threading.Lock()
        self.current: str | None = None
        self.runs: OrderedDict[str, _Run | None] = OrderedDict()
        self.stores: dict[str, ObjectStore] = {}
        self.task_seconds = 0.0
        self.ntasks = 0
        self.last_end = self.started
        self.last_reclaim = 0.0
        self.round_trips = 0  # calls to the server by the task loop (not the heartbeat)

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Work until told to stop; returns the number of tasks completed.

        Each finished task costs one round trip (:data:`STEP`): its completion, and the
        take of the worker's next task, which may be a child the completion made ready
        (its input then comes from this worker's memory). With ``pipeline_width >= 2`` the
        worker holds one task ahead, whose inputs are read while the current one
        computes. With nothing to do, it blocks on the wake list until a task is made
        ready (no polling)."""
        beat = threading.Thread(target=self._heartbeat, name="tilegraph-lease", daemon=True)
        beat.start()
        reader = ThreadPoolExecutor(1, thread_name_prefix="tilegraph-prefetch")
        if self.pipeline_width >= 3:
            self.writer = ThreadPoolExecutor(1, thread_name_prefix="tilegraph-write")
        self.deleter = ThreadPoolExecutor(1, thread_name_prefix="tilegraph-delete")
        limit = ExitStack()
        if self.blas_threads:
            limit.enter_context(blas_threads(self.blas_threads))
        cur: tuple | None = None    # the task to run next, its inputs read
        ahead: Any = None           # a Future of the task after it (inputs being read)
        try:
            idle_since = time.monotonic()
            while not self.stopping.is_set():
                if cur is None and ahead is not None:
                    cur, ahead = ahead.result(), None
                if cur is None:
                    got = self._step([], [1, 2] if self.prefetch else [1])
                    if not got:
                        now = time.monotonic()
                        if self.idle_exit is not None and now - idle_since > self.idle_exit:
                            break
                        if self._out_of_time():
                            break
                        # woken by a task made ready; at the latest when a reclaim is due
                        self.r.blpop(f"{self.ns}:wake", timeout=self._reclaim_period())
                        continue
                    cur = self._prepare(got[0])
                    if len(got) > 1:
                        ahead = reader.submit(self._prepare, got[1])
                    if cur is None:
                        continue
                if self.writer is not None and ahead is None:
                    ahead = reader.submit(self._take_ahead)
                item, cur = cur, None
                done = self._work(*item)
                idle_since = time.monotonic()
                if done is None:  # failed, or written by the writer thread
                    continue
                stop = self._out_of_time() or self.stopping.is_set()
                takes = [] if stop else ([2] if ahead is not None else
                                         [1, 2] if self.prefetch else [1])
                got = self._step([done], takes)
                if got:
                    if ahead is None:
                        cur = self._prepare(got[0])
                        if len(got) > 1:
                            ahead = reader.submit(self._prepare, got[1])
                    else:
                        cur, ahead = ahead.result(), reader.submit(self._prepare, got[0])
                if stop:
                    break
            self._wait_write()
        finally:
            held = [cur] if cur is not None else []
            if ahead is not None:
                try:
                    held.append(ahead.result())
                except Exception:  # its read failed: its lease expires and it is redone
                    pass
            for item in held:  # give the tasks taken ahead back at once
                if item is not None:
                    try:
                        self._give_back(item)
                    except Exception:  # the server is gone: the leases expire instead
                        pass
            reader.shutdown(wait=True)
            if self.writer is not None:
                self.writer.shutdown(wait=True)
            self.deleter.shutdown(wait=True)  # the removals asked for are done
            self.deleter = None
            self.stopping.set()
            beat.join(timeout=5)
            limit.close()
            try:
                self.r.hdel(f"{self.ns}:workers", self.id)
            except Exception:
                pass
        return self.ntasks

    def _reclaim_period(self) -> float:
        return min(1.0, self.lease / 3)

    def _past_limit(self) -> bool:
        return self.runtime_limit is not None and \
            time.time() - self.started > self.runtime_limit

    def _out_of_time(self) -> bool:
        if self.runtime_limit is None:
            return False
        left = self.runtime_limit - (time.time() - self.started)
        return left < max(1.0, 2 * self.task_seconds)

    def _step(self, done: list[tuple], takes: list[int]) -> list[tuple[bytes, int]]:
        """One round trip (:data:`STEP`): record the completions ``done`` (argument lists
        of :meth:`_write`), reclaim expired leases when due, take up to ``len(takes)``
        tasks (``takes``: the ready tasks each take needs). Returns ``[(member, score)]``
        of the tasks taken, now leased and held."""
        now = time.monotonic()
        due = now - self.last_reclaim > self._reclaim_period()
        if due:
            self.last_reclaim = now
        args: list[Any] = [self.ns, self.id, self.lease, EVENTS_MAXLEN, MAX_LOST,
                           "1" if due else "0", len(done)]
        for fields, _ in done:
            args.extend(fields)
        args.append(len(takes))
        args.extend(takes)
        out = self.scripts.step(args=args)
        self.round_trips += 1
        for res, (_, finish) in zip(out[0], done, strict=True):
            finish(res)
        got = [(member, int(float(score))) for member, score in out[1:]]
        if got:
            with self.held_lock:
                for member, _ in got:
                    self.held[member] = now
        return got

    def _take_ahead(self) -> tuple | None:
        """(pipeline width 3) Take a task ahead while another computes, when at least two
        are ready, and read its inputs."""
        while not self.stopping.is_set():
            got = self._step([], [2])
            if not got:
                return None
            item = self._prepare(got[0])
            if item is not None:
                return item
        return None

    def _prepare(self, taken: tuple[bytes, int]) -> tuple | None:
        """Read the inputs of a task taken: ``(rid, task, score, run, values)`` (values an
        exception if they could not be read), or None if its run has ended."""
        member, score = taken
        rid, _, task = member.decode().partition("|")
        try:
            run = self._run_of(rid)
            if run is None:
                self._drop(member)
                return None
            values = self._read(run, task)
        except Exception as exc:
            if self.r.hget(f"{self.ns}:run:{rid}", "state") != b"running":
                self._drop(member)  # the run ended (its objects are gone)
                self.cache.drop_prefix(f"{rid}/")
                return None
            return rid, task, score, self.runs.get(rid), exc
        return rid, task, score, run, values

    def _give_back(self, item: tuple) -> None:
        rid, task, score, _, _ = item
        member = f"{rid}|{task}"
        pipe = self.r.pipeline()
        pipe.zrem(f"{self.ns}:leases", member)
        pipe.hdel(f"{self.ns}:lease", member)
        pipe.zadd(f"{self.ns}:ready", {member: score})
        pipe.rpush(f"{self.ns}:wake", 1)
        pipe.execute()
        self._drop(member.encode())

    def _drop(self, member: bytes) -> None:
        with self.held_lock:
            self.held.pop(member, None)

    def _run_of(self, rid: str) -> _Run | None:
        if rid in self.runs:
            self.runs.move_to_end(rid)
            return self.runs[rid]
        info = self.r.hgetall(f"{self.ns}:run:{rid}")
        run = None
        if info.get(b"state") == b"running":
            # a record not signed by the run's driver names no store this worker opens
            check_run(self.signer, self.ns, rid, info, self.url)
            url = info[b"store"].decode()
            store = self.stores.get(url)
            if store is None:  # a directory store missing here is not the driver's
                store = self.stores[url] = open_store(url, secret=self.secret, create=False)
            blob = info[b"blob"].decode()
            try:
                source = store.get_value(blob)
            except KeyError:
                raise FileNotFoundError(
                    f"the task source {blob!r} of run {rid} is not in its object store "
                    f"{url} as this worker sees it (worker {self.id} on host "
                    f"{socket.gethostname()}): the store must be one that the driver and "
                    "every worker share (a shared filesystem mounted at the same path, or "
                    "an fsspec URL such as s3://bucket/prefix)") from None
            run = _Run(source, store, int(info.get(b"retries", b"0")))
        self.runs[rid] = run
        while len(self.runs) > 8:
            old, _ = self.runs.popitem(last=False)
            self.cache.drop_prefix(f"{old}/")
        return run

    def _read(self, run: _Run, task: str) -> list[Any]:
        """The input values of ``task``: from this worker's memory when it holds them
        (a copy for an input the task may write over), else from the store."""
        store, cache = run.store, self.cache
        specs = run.source.specs
        for key in run.source.refs(task):
            if key not in run.literals:
                run.literals[key] = store.get_shared(key, specs.get(key))
        over = run.source.overwritten(task)
        values = []
        for k, x in enumerate(run.source.inputs(task)):
            if type(x) is Literal:
                values.append(x.value)
                continue
            value = cache.get(x)
            if value is not None:
                values.append(value.copy() if k in over else value)
                continue
            value = store.get_value(x, specs.get(x))
            if k not in over:   # a block written over in place is the task's own
                cache.put(x, value)
            values.append(value)
        return values

    def _work(self, rid: str, task: str, score: int, run: _Run | None,
              values: list[Any] | Exception) -> tuple | None:
        """Run a task and store its output; returns its completion for :meth:`_step`, or
        None (it failed and was reported, or the writer thread completes it)."""
        if isinstance(values, Exception):  # its source or inputs could not be read
            self._failed(rid, task, score, run, values)
            return None
        member = f"{rid}|{task}"
        source = run.source
        self.current = member
        t0 = time.time()
        try:
            value = source.call(task, values, run.literals)
            del values
        except Exception as exc:
            self.current = None
            self._failed(rid, task, score, run, exc)
            return None
        self.cache.put(source.output(task), value)
        if self.writer is None:
            done = self._write(rid, task, score, run, value, t0)
            self.current = None
            return done
        # written while the next task computes; one write in flight at most
        self._wait_write()
        self.pending_write = self.writer.submit(self._write_and_complete, rid, task, score,
                                                run, value, t0)
        self.current = None
        return None

    def _wait_write(self) -> None:
        if self.pending_write is not None:
            self.pending_write.result()
            self.pending_write = None

    def _write_and_complete(self, *args: Any) -> None:
        done = self._write(*args)
        if done is not None:
            self._step([done], [])

    def _write(self, rid: str, task: str, score: int, run: _Run, value: Any,
               t0: float) -> tuple | None:
        """Store a task's output (before its completion is recorded: a child may run on
        another worker); returns its completion (the fields of :data:`STEP`, and what to do
        with its result), or None if the write failed (reported as the task's failure)."""
        member = f"{rid}|{task}"
        source = run.source
        try:
            nbytes = run.store.put_value(source.output(task), value)
        except Exception as exc:
            self.cache.drop(source.output(task))
            self._failed(rid, task, score, run, exc)
            return None
        del value
        t1 = time.time()
        self.task_seconds = 0.8 * self.task_seconds + 0.2 * (t1 - t0)
        fields: list[Any] = [rid, task, nbytes, f"{t0:.6f}", f"{t1:.6f}",
                             "1" if source.is_wanted(task) else "0"]
        kids = source.children(task)
        fields.append(len(kids))
        base = score - source.score(task)
        for child, nparents, prio in kids:
            fields.extend((child, nparents, prio + base))
        frees = source.frees(task)
        fields.append(len(frees))
        for obj, uses in frees:
            fields.extend((obj, uses))

        def finish(res: Any) -> None:
            if res == -1:  # the run ended meanwhile: leave nothing behind (the driver
                # removed the run's objects; this write came after, with its folder)
                run.store.delete_prefix(rid)
                self.cache.drop_prefix(f"{rid}/")
            elif isinstance(res, list):
                for obj in res[1:]:  # inputs no unfinished task reads any more
                    key = source.object_of(obj.decode())
                    self.cache.drop(key)
                    self._delete(run.store, key)
            self.ntasks += 1
            self.last_end = time.time()
            self._drop(member.encode())

        return fields, finish

    def _delete(self, store: ObjectStore, key: str) -> None:
        """Remove ``key`` from ``store``: in the background while the loop runs. A removal
        that fails leaves the object to the removal of the run's whole folder when the run
        ends."""
        deleter = self.deleter
        if deleter is None:
            _quiet_delete(store, key)
        else:
            deleter.submit(_quiet_delete, store, key)

    def _failed(self, rid: str, task: str, score: int, run: _Run | None,
                exc: Exception) -> None:
        name = run.source.name(task) if run is not None else f"task {task} of run {rid}"
        tb = "".join(traceback.format_exception(exc))
        exc.add_note(f"in {name}, on serverless worker {self.id}")
        try:
            blob = pickle_dumps(exc)
        except Exception:
            blob = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}\n{tb}"))
        blob = seal_error(self.signer, self.ns, rid, blob)
        msg = f"{type(exc).__name__}: {exc}"[:500]
        retries = run.retries if run is not None else 0
        self.scripts.fail(args=[self.ns, rid, task, self.id, retries, blob, msg, score,
                                EVENTS_MAXLEN])
        self._drop(f"{rid}|{task}".encode())

    # -- leases and heartbeat ------------------------------------------------------------

    def _heartbeat(self) -> None:
        import psutil

        proc = psutil.Process()
        period = max(0.05, min(1.0, self.lease / 3))
        while True:
            now = time.monotonic()
            with self.held_lock:
                # a lease taken or renewed less than a third of a lease ago needs nothing
                stale = [m for m, t in self.held.items() if now - t >= self.lease / 3]
            try:
                pipe = self.r.pipeline(transaction=False)
                # past its runtime limit a worker holds on to nothing: its leases expire
                # and another worker takes what it still runs
                if stale and not self._past_limit():
                    self.scripts.renew(args=[self.ns, self.id, self.lease, *stale],
                                       client=pipe)
                info = {"pid": os.getpid(), "host": socket.gethostname(), "hid": host_id(),
                        "started": self.started, "task": self.current,
                        "rss": proc.memory_info().rss, "seen": time.time(),
                        "done": self.ntasks, "last_end": self.last_end}
                if not self.stopping.is_set():
                    pipe.hset(f"{self.ns}:workers", self.id, json.dumps(info))
                pipe.execute()
                if stale:
                    with self.held_lock:
                        for m in stale:
                            if m in self.held:
                                self.held[m] = now
            except Exception:
                pass  # the main loop meets the same error and reports it
            if self.stopping.wait(period):
                return


def main(argv: list[str] | None = None) -> int:
    """``tilegraph worker``: serve the runs of a Redis server until stopped."""
    p = argparse.ArgumentParser(
        prog="tilegraph worker",
        description="A stateless serverless worker: takes tasks of any run on the Redis "
                    "server under a lease, reads inputs from and writes outputs to the run's "
                    "object store, until SIGTERM/SIGINT, the runtime limit or the idle limit. "
                    "It needs the pool's credentials, never on its command line: the server's "
                    "password and the pool's MAC secret in $TILEGRAPH_REDIS_PASSWORD and "
                    "$TILEGRAPH_SECRET, or a --credentials file.")
    p.add_argument("--redis", required=True,
                   help="Redis/Valkey URL, e.g. redis://host:6379/0 or unix:///path?db=0 "
                        "(without a password: other users see command lines)")
    p.add_argument("--credentials", default=None, metavar="FILE",
                   help="file of the server's password and the pool's secret, mode 0600 "
                        "(written by pool.credentials.write; default: $TILEGRAPH_CREDENTIALS, "
                        "else $TILEGRAPH_REDIS_PASSWORD and $TILEGRAPH_SECRET)")
    p.add_argument("--store", default=None,
                   help="accepted for symmetry; each run names its own object store")
    p.add_argument("--namespace", default=None, help="key prefix of the pool (default tg)")
    p.add_argument("--lease", type=float, default=30.0,
                   help="seconds a task stays leased without renewal (default 30)")
    p.add_argument("--runtime-limit", type=float, default=900.0,
                   help="exit after this many seconds (default 900; 0: never)")
    p.add_argument("--idle-exit", type=float, default=None,
                   help="exit after this many seconds without a task (default: never)")
    p.add_argument("--blas-threads", type=int, default=None, help="BLAS threads per worker")
    p.add_argument("--pipeline-width", type=int, default=2, choices=(1, 2, 3),
                   help="tasks in flight: 1 one at a time, 2 the next task's inputs read "
                        "while computing (default), 3 the last output also written meanwhile")
    p.add_argument("--cache-mb", type=int, default=CACHE_BYTES >> 20,
                   help="megabytes of blocks kept in memory for the next tasks (default "
                        f"{CACHE_BYTES >> 20}; 0: read every input from the store)")
    p.add_argument("--id", default=None, help="worker id (default host-pid-random)")
    args = p.parse_args(argv)
    try:
        bare, _, password = split_url(args.redis)
        if password is not None:
            raise ValueError(
                f"--redis {bare}: the URL holds a password, which every user of this machine "
                "can read in the command line; give it in TILEGRAPH_REDIS_PASSWORD or a "
                "--credentials file instead")
        creds = Credentials.load(args.credentials) if args.credentials else \
            Credentials.from_env()
        w = Worker(args.redis, namespace=args.namespace, lease=args.lease,
                   runtime_limit=args.runtime_limit or None, idle_exit=args.idle_exit,
                   blas_threads=args.blas_threads, worker_id=args.id,
                   pipeline_width=args.pipeline_width, cache_bytes=args.cache_mb << 20,
                   credentials=creds)
    except (ConnectionError, ValueError, OSError) as exc:
        print(f"tilegraph worker: {exc}", file=sys.stderr)
        return 2

    def stop(signum: int, frame: Any) -> None:
        w.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        w.run()
    except ConnectionError as exc:
        print(f"tilegraph worker: lost the Redis server at {args.redis}: {exc}",
              file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
