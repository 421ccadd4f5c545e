"""A stateless serverless worker: ``tilegraph worker --redis URL``.

A worker holds nothing that the run needs after it dies. It loops: take the best ready task
under a lease (:data:`~tilegraph.runtime.serverless.state.TAKE`), read the task's inputs from the
object store, run the kernel, write the output under the task's own key (atomically), and
record the completion (:data:`~tilegraph.runtime.serverless.state.COMPLETE`), which makes the task's
children ready. While it computes, it takes the next task and reads that task's inputs
(when at least two tasks are ready, so that it never holds a task another idle worker could
run; ``pipeline_width=2``, the default), and with ``pipeline_width=3`` it also writes the
last task's output meanwhile (numpywren's pipelining; ``1``: one step at a time); a
background thread renews the leases it holds and publishes its heartbeat (pid,
host, current task, resident memory).

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

from tilegraph.runtime.blas import blas_threads
from tilegraph.runtime.serverless.state import (
    EVENTS_MAXLEN,
    MAX_LOST,
    Scripts,
    connect,
    default_namespace,
)
from tilegraph.runtime.serverless.store import ObjectStore, loads, open_store, pickle_dumps
from tilegraph.runtime.serverless.tasks import Literal


class _Run:
    """What a worker knows of one run: its task source, store and retry count."""

    def __init__(self, source: Any, store: ObjectStore, retries: int):
        self.source = source
        self.store = store
        self.retries = retries
        self.literals: dict[str, Any] = {}  # large literal arguments, read once


class Worker:
    """One worker process's loop (see the module docstring)."""

    def __init__(self, redis: str, *, namespace: str | None = None, lease: float = 30.0,
                 runtime_limit: float | None = 900.0, idle_exit: float | None = None,
                 blas_threads: int | None = None, worker_id: str | None = None,
                 pipeline_width: int = 2):
        if lease <= 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        if pipeline_width not in (1, 2, 3) or isinstance(pipeline_width, bool):
            raise ValueError(f"pipeline_width must be 1, 2 or 3, got {pipeline_width!r}")
        self.url = redis
        self.r = connect(redis)
        self.scripts = Scripts(self.r)
        self.ns = namespace or default_namespace()
        self.lease = float(lease)
        self.runtime_limit = runtime_limit
        self.idle_exit = idle_exit
        self.blas_threads = blas_threads
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # 1: take, read, compute, write one task at a time; 2: read the next task's inputs
        # while computing; 3: also write the last output while computing the next
        self.pipeline_width = pipeline_width
        self.prefetch = pipeline_width >= 2
        self.writer: ThreadPoolExecutor | None = None
        self.pending_write: Any = None
        self.started = time.time()
        self.stopping = threading.Event()
        self.held: set[bytes] = set()  # leased members (renewed by the heartbeat thread)
        self.held_lock = threading.Lock()
        self.current: str | None = None
        self.runs: OrderedDict[str, _Run | None] = OrderedDict()
        self.stores: dict[str, ObjectStore] = {}
        self.task_seconds = 0.0
        self.ntasks = 0
        self.last_end = self.started

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Work until told to stop; returns the number of tasks completed."""
        beat = threading.Thread(target=self._heartbeat, name="tilegraph-lease", daemon=True)
        beat.start()
        reader = ThreadPoolExecutor(1, thread_name_prefix="tilegraph-prefetch")
        if self.pipeline_width >= 3:
            self.writer = ThreadPoolExecutor(1, thread_name_prefix="tilegraph-write")
        limit = ExitStack()
        if self.blas_threads:
            limit.enter_context(blas_threads(self.blas_threads))
        try:
            nxt = None
            idle_since = time.monotonic()
            last_reclaim = 0.0
            sleep = 0.01
            while not self.stopping.is_set():
                now = time.monotonic()
                if now - last_reclaim > min(1.0, self.lease / 3):
                    self.scripts.reclaim(args=[self.ns, MAX_LOST, EVENTS_MAXLEN])
                    last_reclaim = now
                item = nxt if nxt is not None else self._take(1)
                nxt = None
                if item is None:
                    if self.idle_exit is not None and now - idle_since > self.idle_exit:
                        break
                    if self._out_of_time():
                        break
                    self.r.blpop(f"{self.ns}:wake", timeout=sleep)  # woken by new tasks
                    sleep = min(sleep * 2, 0.25)
                    continue
                sleep = 0.01
                ahead = reader.submit(self._take, 2) if self.prefetch else None
                self._work(*item)
                idle_since = time.monotonic()
                if ahead is not None:
                    nxt = ahead.result()
                if self._out_of_time():
                    break
            self._wait_write()
            if nxt is not None:  # give the prefetched task back at once
                self._give_back(nxt)
        finally:
            reader.shutdown(wait=True)
            if self.writer is not None:
                self.writer.shutdown(wait=True)
            self.stopping.set()
            beat.join(timeout=5)
            limit.close()
            try:
                self.r.hdel(f"{self.ns}:workers", self.id)
            except Exception:
                pass
        return self.ntasks

    def _past_limit(self) -> bool:
        return self.runtime_limit is not None and \
            time.time() - self.started > self.runtime_limit

    def _out_of_time(self) -> bool:
        if self.runtime_limit is None:
            return False
        left = self.runtime_limit - (time.time() - self.started)
        return left < max(1.0, 2 * self.task_seconds)

    def _take(self, min_ready: int) -> tuple | None:
        """Lease the best ready task and read its inputs: ``(rid, task, score, run,
        values)``, or None."""
        while not self.stopping.is_set():
            got = self.scripts.take(args=[self.ns, self.id, self.lease, min_ready,
                                          EVENTS_MAXLEN])
            if not got:
                return None
            member, score = got
            with self.held_lock:
                self.held.add(member)
            rid, _, task = member.decode().partition("|")
            score = int(float(score))
            try:
                run = self._run_of(rid)
                if run is None:
                    self._drop(member)
                    continue
                values = self._read(run, task)
            except Exception as exc:
                if self.r.hget(f"{self.ns}:run:{rid}", "state") != b"running":
                    self._drop(member)  # the run ended (its objects are gone)
                    continue
                return rid, task, score, self.runs.get(rid), exc
            return rid, task, score, run, values
        return None

    def _give_back(self, item: tuple) -> None:
        rid, task, score, _, _ = item
        member = f"{rid}|{task}"
        pipe = self.r.pipeline()
        pipe.zrem(f"{self.ns}:leases", member)
        pipe.hdel(f"{self.ns}:lease", member)
        pipe.zadd(f"{self.ns}:ready", {member: score})
        pipe.execute()
        self._drop(member.encode())

    def _drop(self, member: bytes) -> None:
        with self.held_lock:
            self.held.discard(member)

    def _run_of(self, rid: str) -> _Run | None:
        if rid in self.runs:
            self.runs.move_to_end(rid)
            return self.runs[rid]
        info = self.r.hgetall(f"{self.ns}:run:{rid}")
        run = None
        if info.get(b"state") == b"running":
            url = info[b"store"].decode()
            store = self.stores.get(url)
            if store is None:
                store = self.stores[url] = open_store(url)
            source = loads(store.get(info[b"blob"].decode()))
            run = _Run(source, store, int(info.get(b"retries", b"0")))
        self.runs[rid] = run
        while len(self.runs) > 8:
            self.runs.popitem(last=False)
        return run

    def _read(self, run: _Run, task: str) -> list[Any]:
        get = run.store.get_value
        for key in run.source.refs(task):
            if key not in run.literals:
                run.literals[key] = run.store.get_shared(key)
        return [x.value if type(x) is Literal else get(x) for x in run.source.inputs(task)]

    def _work(self, rid: str, task: str, score: int, run: _Run | None,
              values: list[Any] | Exception) -> None:
        member = f"{rid}|{task}"
        if isinstance(values, Exception):  # its source or inputs could not be read
            self._failed(rid, task, score, run, values)
            return
        source = run.source
        self.current = member
        t0 = time.time()
        try:
            value = source.call(task, values, run.literals)
            del values
        except Exception as exc:
            self.current = None
            self._failed(rid, task, score, run, exc)
            return
        if self.writer is None:
            self._finish(rid, task, score, run, value, t0)
        else:  # written while the next task computes; one write in flight at most
            self._wait_write()
            self.pending_write = self.writer.submit(self._finish, rid, task, score, run,
                                                    value, t0)
            self.current = None

    def _wait_write(self) -> None:
        if self.pending_write is not None:
            self.pending_write.result()
            self.pending_write = None

    def _finish(self, rid: str, task: str, score: int, run: _Run, value: Any,
                t0: float) -> None:
        """Store a task's output and record its completion (which makes its children
        ready)."""
        member = f"{rid}|{task}"
        source = run.source
        try:
            nbytes = run.store.put_value(source.output(task), value)
        except Exception as exc:
            if self.writer is None:
                self.current = None
            self._failed(rid, task, score, run, exc)
            return
        del value
        t1 = time.time()
        self.task_seconds = 0.8 * self.task_seconds + 0.2 * (t1 - t0)
        args = [self.ns, rid, task, self.id, nbytes, f"{t0:.6f}", f"{t1:.6f}",
                "1" if source.is_wanted(task) else "0", EVENTS_MAXLEN]
        kids = source.children(task)
        args.append(len(kids))
        for child, nparents, prio in kids:
            args.extend((child, nparents, prio + score - source.score(task)))
        frees = source.frees(task)
        args.append(len(frees))
        for obj, uses in frees:
            args.extend((obj, uses))
        done = self.scripts.complete(args=args)
        if done == -1:  # the run ended meanwhile: leave nothing behind
            run.store.delete_prefix(source.output(task))
        elif isinstance(done, list):
            for obj in done[1:]:  # inputs no unfinished task reads any more
                run.store.delete_prefix(source.object_of(obj.decode()))
        if self.writer is None:   # with a writer, the next task is current already
            self.current = None
        self.ntasks += 1
        self.last_end = time.time()
        self._drop(member.encode())

    def _failed(self, rid: str, task: str, score: int, run: _Run | None,
                exc: Exception) -> None:
        name = run.source.name(task) if run is not None else f"task {task} of run {rid}"
        tb = "".join(traceback.format_exception(exc))
        exc.add_note(f"in {name}, on serverless worker {self.id}")
        try:
            blob = pickle_dumps(exc)
        except Exception:
            blob = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}\n{tb}"))
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
            with self.held_lock:
                held = list(self.held)
            try:
                # past its runtime limit a worker holds on to nothing: its leases expire
                # and another worker takes what it still runs
                if held and not self._past_limit():
                    self.scripts.renew(args=[self.ns, self.id, self.lease, *held])
                info = {"pid": os.getpid(), "host": socket.gethostname(),
                        "started": self.started, "task": self.current,
                        "rss": proc.memory_info().rss, "seen": time.time(),
                        "done": self.ntasks, "last_end": self.last_end}
                if not self.stopping.is_set():
                    self.r.hset(f"{self.ns}:workers", self.id, json.dumps(info))
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
                    "object store, until SIGTERM/SIGINT, the runtime limit or the idle limit.")
    p.add_argument("--redis", required=True, help="Redis/Valkey URL, e.g. redis://host:6379/0")
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
    p.add_argument("--id", default=None, help="worker id (default host-pid-random)")
    args = p.parse_args(argv)
    try:
        w = Worker(args.redis, namespace=args.namespace, lease=args.lease,
                   runtime_limit=args.runtime_limit or None, idle_exit=args.idle_exit,
                   blas_threads=args.blas_threads, worker_id=args.id,
                   pipeline_width=args.pipeline_width)
    except (ConnectionError, ValueError) as exc:
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
