"""One MPI rank's part of a run: its part of the plan (:class:`LocalPlan`: its tasks, an
external task for every block it receives, where each result it makes goes) and the run's
transport (:class:`Exchange`: the communication thread that sends results once to each rank
that consumes them, delivers the blocks that arrive to the executor, sends heartbeats and
names a rank that stopped answering, and carries an abort to every rank). The backend that
makes them is :mod:`tilegraph.runtime.mpi`."""

from __future__ import annotations

import pickle
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph
from tilegraph.runtime.backends import Transport
from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import Transfer
from tilegraph.runtime.mpi_steps import (
    SLEEP_MAX,
    SLEEP_MIN,
    TAG_ABORT,
    TAG_BEAT,
    TAG_DATA,
    TAG_HEADER,
    RankLostError,
    RemoteTaskError,
    host_of,
    load_mpi,
)
from tilegraph.runtime.signals import Terminated
from tilegraph.util import unique

if TYPE_CHECKING:
    from tilegraph.runtime.mpi import MPIBackend

BEAT_MAX = 2.0  # seconds between a rank's heartbeats during a run, at most
SEND_COPIES = 32 << 20  # bytes the transport pickles or copies to send, in flight at most
SEND_SHARE = 8  # ... and at most this fraction of the rank's memory limit (1/8)
_LEAVE_WAIT = 0.2  # seconds a rank stopped by a signal gives its abort messages to leave


class LocalPlan:
    """One rank's part of the plan: its tasks plus external tasks for blocks it receives."""

    def __init__(self, graph: TaskGraph, placement: np.ndarray, outputs: np.ndarray,
                 rank: int, size: int):
        n = len(graph)
        # literal data tasks are known to every rank: never sent
        is_data = np.frombuffer(bytes(graph.modes), dtype=np.uint8) == MODE_DATA
        mine = (placement == rank) | is_data
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
        dep = graph.dep_idx
        # blocks this rank receives: inputs of its tasks made elsewhere (+ outputs on rank 0)
        needed = np.zeros(n, dtype=bool)
        needed[dep[mine[src] & ~mine[dep]]] = True
        outputs = np.asarray(outputs, dtype=np.int64)
        if rank == 0:
            needed[outputs[~mine[outputs]]] = True
        keep = np.flatnonzero(mine | needed)
        self.graph = graph.subgraph(keep, detach=needed)
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[keep] = np.arange(len(keep), dtype=np.int64)
        self.keep = keep
        self.new_of_old = new_of_old
        self.external = new_of_old[np.flatnonzero(needed)].tolist()
        self.outputs = new_of_old[outputs].tolist() if rank == 0 else []
        # where each local result goes: every other rank consuming it, once (+ rank 0 for
        # outputs made here)
        remote = mine[dep] & ~mine[src] & ~is_data[dep]
        pairs = unique(dep[remote] * size + placement[src[remote]]).tolist()
        dests: dict[int, list[int]] = {}
        for code in pairs:
            dests.setdefault(int(new_of_old[code // size]), []).append(int(code % size))
        if rank != 0:
            for o in outputs[mine[outputs]].tolist():
                lst = dests.setdefault(int(new_of_old[o]), [])
                if 0 not in lst:
                    lst.append(0)
        self.dests = dests
        self.exported_tasks = list(dests)

    def priority(self, priority: np.ndarray) -> np.ndarray:
        """The global priorities of the kept tasks, re-ranked to ``0..m-1``."""
        sub = np.asarray(priority)[self.keep]
        ranks = np.empty(len(sub), dtype=np.int64)
        ranks[np.argsort(sub, kind="stable")] = np.arange(len(sub), dtype=np.int64)
        return ranks


class Exchange(Transport):
    """The transport of one rank for one run (of ``local``, its part of the plan): a
    communication thread, the only thread making MPI calls during the run."""

    def __init__(self, backend: MPIBackend, local: LocalPlan):
        self.MPI = load_mpi()
        self.backend = backend
        self.comm = backend.comm
        self.rank = backend.rank
        self.size = backend.processes
        self.local = local
        self.keys = local.graph.keys
        self.sendq: deque[tuple[int, Any]] = deque()  # (local task, result) to send, in order
        # (request, object kept alive until done, bytes of it the transport made to send)
        self.pending: list[tuple[Any, Any, int]] = []
        self.copied = 0  # sum of the last field of ``pending``: about ``window`` at most
        self.window = SEND_COPIES  # (set for the run by ``connect``)
        self.local_done = threading.Event()
        self.aborted = False
        self.leaving = False
        self.remote_error: tuple[int, bytes | None, str] | None = None
        self.failure: BaseException | None = None
        self.bytes_sent = 0
        self.old_of_new = local.keep
        # liveness: when each rank was last heard from, this rank's heartbeats in flight
        self.timeout = backend.collective.timeout
        self.beat_every = min(BEAT_MAX, self.timeout / 4)
        self.heard = [0.0] * self.size
        self.beats: list[Any] = []
        self.told: list[Any] = []  # abort messages sent, until received
        self.next_beat = 0.0
        # blocks being received: (request, buffer, task, source, pickled, bytes, start)
        self.receiving: deque[tuple[Any, np.ndarray, int, int, bool, int, float]] = deque()

    def export(self, i: int, value: Any) -> None:
        self.sendq.append((i, value))

    @contextmanager
    def connect(self, execution: Execution) -> Iterator[None]:
        """Meet the other ranks, exchange blocks while the run goes on, and on leaving
        finish every send and raise another rank's failure (or this rank's MPI error)."""
        self.execution = execution
        limit = execution.memory.limit  # the copies in flight count beside what it holds
        self.window = SEND_COPIES if limit is None else min(SEND_COPIES, limit // SEND_SHARE)
        self.backend.collective.steps().exchange(None, "the start of the run")
        thread = threading.Thread(target=self.loop, name="tilegraph-mpi", daemon=True)
        thread.start()
        try:
            yield
        except Terminated:
            self.leaving = True  # the process ends by a signal: tell the others, wait for none
            raise
        finally:
            self.local_done.set()
            while thread.is_alive():
                try:
                    thread.join()
                except KeyboardInterrupt:
                    execution.cancel(KeyboardInterrupt())
        if self.failure is not None:
            raise self.failure
        error = execution.error
        if error is not None and not isinstance(error, RemoteTaskError):
            raise error  # this rank's own failure (or Ctrl-C)
        if self.remote_error is not None:
            raise self.remote_error_for(self.rank)

    def loop(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # an MPI error: end the local run, report it
            self.failure = exc
            self.execution.cancel(exc)
            self.local_done.set()

    def _loop(self) -> None:
        MPI = self.MPI
        status = MPI.Status()
        barrier = None
        told = False
        sleep = SLEEP_MIN
        leave_by = None
        self.heard = [time.monotonic()] * self.size
        while True:
            busy = False
            ex = self.execution
            if ex.finished and ex.error is not None and not told:
                told = True
                self._abort_all(ex.error)
            now = time.monotonic()
            if now >= self.next_beat:
                self._beat(now)
            lost = self._lost(now) if self.failure is None else None
            if lost is not None:
                # the run cannot finish: tell the ranks still there, wait for none
                self.failure = lost
                ex.cancel(lost)
                self._abort_all(lost, skip=lost.rank)
                self.leaving = True
                self.local_done.set()
                # the ranks still there get the error before this one may leave
                leave_by = now + self.timeout
            if self.leaving and self.local_done.is_set():
                # a signal ends this process: its abort message gets a moment to leave,
                # no barrier is waited for (the other ranks may be stopping too)
                leave_by = leave_by or time.monotonic() + _LEAVE_WAIT
                self.pending = [p for p in self.pending if not p[0].Test()]
                self.told = [r for r in self.told if not r.Test()]
                if (not self.pending or (self.failure is not None and not self.told)
                        or time.monotonic() > leave_by):
                    return
            while self.sendq and (self.copied < self.window or not self.copied):
                i, value = self.sendq.popleft()
                if not self.aborted:
                    self._send(i, value)
                busy = True
            if self.pending:
                still = [p for p in self.pending if not p[0].Test()]
                busy |= len(still) != len(self.pending)
                self.pending = still
                self.copied = sum(p[2] for p in still)
            # not TAG_PLAN: a rank may be at its next run
            for tag in (TAG_ABORT, TAG_HEADER, TAG_BEAT):
                while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=tag, status=status):
                    self._receive(status.Get_source(), status.Get_tag())
                    busy = True
            if self.receiving:
                still: deque = deque()
                for item in self.receiving:
                    if item[0].Test():
                        self._received(*item[1:])
                        busy = True
                    else:
                        still.append(item)
                self.receiving = still
            if barrier is None and self.local_done.is_set() and not self.sendq \
                    and not self.pending and not self.receiving \
                    and (ex.finished or self.aborted):
                barrier = self.comm.Ibarrier()
            if barrier is not None and barrier.Test():
                return
            sleep = SLEEP_MIN if busy else min(SLEEP_MAX, sleep * 2)
            if not busy:
                time.sleep(sleep)

    def _send(self, i: int, value: Any) -> None:
        MPI = self.MPI
        gi = int(self.old_of_new[i])
        payload = buf = None  # copied or pickled once for every destination
        for dest in self.local.dests[i]:
            if isinstance(value, np.ndarray) and not value.dtype.hasobject:
                # (np.ascontiguousarray would make a 0-d array 1-d)
                if buf is None:
                    buf = value if value.flags.c_contiguous else value.copy(order="C")
                header = (gi, buf.dtype.str if buf.dtype.fields is None else buf.dtype.descr,
                          buf.shape)
                self.pending.append((self.comm.issend(header, dest=dest, tag=TAG_HEADER), None,
                                     0))
                flat = buf.reshape(-1).view(np.uint8)
                made = 0 if buf is value else buf.nbytes
                self.pending.append(
                    (self.comm.Issend([flat, MPI.BYTE], dest=dest, tag=TAG_DATA), buf, made))
                nbytes = buf.nbytes
            else:
                if payload is None:
                    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                header = (gi, None, len(payload))
                self.pending.append((self.comm.issend(header, dest=dest, tag=TAG_HEADER), None,
                                     0))
                arr = np.frombuffer(payload, dtype=np.uint8)
                self.pending.append(
                    (self.comm.Issend([arr, MPI.BYTE], dest=dest, tag=TAG_DATA), arr,
                     arr.nbytes))
                nbytes = len(payload)
            self.bytes_sent += nbytes
            self.copied += self.pending[-1][2]

    def _beat(self, now: float) -> None:
        """Tell every other rank this one is alive (a small message, not waited for)."""
        self.beats = [r for r in self.beats if not r.Test()]
        for dest in range(self.size):
            if dest != self.rank:
                self.beats.append(self.comm.isend(None, dest=dest, tag=TAG_BEAT))
        self.next_beat = now + self.beat_every

    def _lost(self, now: float) -> RankLostError | None:
        """The error naming the first rank nothing came from for ``timeout`` seconds."""
        for r, t in enumerate(self.heard):
            if r != self.rank and now - t > self.timeout:
                host = host_of(r)
                return RankLostError(
                    f"MPI rank {r} (on host {host}) stopped answering: nothing came from it "
                    f"for {now - t:.1f} s (mpi_timeout={self.timeout:g}) during the run, "
                    f"noticed on rank {self.rank} (on host {host_of(self.rank)}); its host or "
                    "process is gone, or its network is cut. The job cannot go on without "
                    "it: run it again (with checkpoint=PATH, a rerun resumes from the "
                    "blocks that were finished)", r, host)
        return None

    def _receive(self, source: int, tag: int) -> None:
        MPI = self.MPI
        self.heard[source] = time.monotonic()
        if tag == TAG_BEAT:
            self.comm.recv(source=source, tag=TAG_BEAT)
            return
        if tag == TAG_ABORT:
            info = self.comm.recv(source=source, tag=TAG_ABORT)
            if self.remote_error is None:
                self.remote_error = info
            self.aborted = True
            self.execution.cancel(RemoteTaskError(f"the run was aborted by rank {info[0]}"))
            return
        if tag != TAG_HEADER:  # pragma: no cover - data always follows its header
            raise RuntimeError(f"unexpected MPI message with tag {tag} from rank {source}")
        t0 = time.perf_counter()
        gi, dtype, shape = self.comm.recv(source=source, tag=TAG_HEADER)
        # the data follows its header; received without blocking, so that a rank whose
        # host dies mid-message is noticed (messages of one source arrive in order)
        if dtype is None:
            buf = np.empty(shape, dtype=np.uint8)
            flat = buf
        else:
            buf = np.empty(shape, dtype=np.dtype(dtype))
            flat = buf.reshape(-1).view(np.uint8)
        request = self.comm.Irecv([flat, MPI.BYTE], source=source, tag=TAG_DATA)
        self.receiving.append((request, buf, gi, source, dtype is None, flat.nbytes, t0))

    def _received(self, buf: np.ndarray, gi: int, source: int, pickled: bool, nbytes: int,
                  t0: float) -> None:
        """A block has arrived whole: delivered to the executor."""
        self.heard[source] = time.monotonic()
        if self.aborted or self.execution.finished:
            return
        value = pickle.loads(buf) if pickled else buf
        i = int(self.local.new_of_old[gi])
        event = Transfer(self.keys[i], source, self.rank, nbytes, t0, time.perf_counter())
        self.execution.deliver(i, value, event)

    def _abort_all(self, error: BaseException, skip: int = -1) -> None:
        """Tell every other rank (but ``skip``) to stop; they get the pickled exception
        and its text."""
        if self.aborted:  # stopped by another rank's abort: nothing to tell
            return
        self.aborted = True
        text = "".join(traceback.format_exception(error))
        try:
            blob: bytes | None = pickle.dumps(error)
            pickle.loads(blob)
        except Exception:
            blob = None
        info = (self.rank, blob, text)
        for dest in range(self.size):
            if dest not in (self.rank, skip):
                request = self.comm.issend(info, dest=dest, tag=TAG_ABORT)
                self.pending.append((request, None, 0))
                self.told.append(request)

    def remote_error_for(self, rank: int) -> BaseException:
        """The exception a rank raises for another rank's failure: the task's own exception
        (unpickled) with a note naming the rank, or a RemoteTaskError with its traceback."""
        source, blob, text = self.remote_error
        exc: BaseException | None = None
        if blob is not None:
            try:
                exc = pickle.loads(blob)
            except Exception:
                exc = None
        if exc is None:
            exc = RemoteTaskError(f"a task failed on MPI rank {source}:\n{text}")
        else:
            exc.add_note(f"tilegraph: traceback on MPI rank {source}:\n{text.rstrip()}")
        exc.add_note(f"tilegraph: raised on MPI rank {source}; this is rank {rank}")
        return exc
