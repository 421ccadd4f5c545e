"""The MPI backend: one plan, many processes, blocks sent once.

Every rank runs the same script (``tilegraph run -n 4 script.py``, or ``mpiexec`` directly,
with ``backend="mpi"``), so every rank lowers the same program to the same TaskGraph and
plans it with the one pipeline (:mod:`tilegraph.pipeline`). This module answers the
pipeline's questions through the backend seam: the placement is computed once, on rank 0,
and broadcast (``decide``); before running, the ranks check that they hold the same graph
and placement (``check_same_plan``, a fingerprint of its structure), so that a script that
branches on its rank fails with a clear error instead of a hang. The fingerprints are
exchanged point to point, without blocking, under a watchdog: a rank that waited
``mpi_timeout`` seconds (``collective_timeout``) fails with "compute() is collective: ranks
[1, 2] did not call it", naming the ranks whose fingerprint never came (a script that calls
``compute()`` on rank 0 only, or once more on one rank). Waiting ranks sleep between polls.

``partition`` gives each rank the tasks placed on it, run with the executor core (its own
worker threads, BLAS threads, memory budget and spill): its local graph holds its own tasks
plus one *external* task for every block it receives. The transport (``_Exchange``) is a
communication thread that does all MPI calls:

- when a local task finishes whose result is consumed on other ranks, the result is sent
  once to each of those ranks (non-blocking; NumPy arrays as raw bytes after a small
  header, anything else pickled) and kept alive until the send completes;
- arriving blocks are delivered to the executor as the results of their external tasks,
  which makes their consumers ready; reduction partials are computed where their inputs
  live (the placement puts per-block work with its block), so only partials travel;
- results are freed by the executor's reference counts, as on one machine;
- blocks that arrive are held under this rank's memory budget like results made here:
  beyond it the coldest results go to disk (``Execution.deliver``);
- outputs computed on other ranks are sent to rank 0, which assembles the results; results
  of at most ``mpi_broadcast_limit`` bytes (scalars, small arrays) are then broadcast, so
  ``compute()`` returns them on every rank and ``float(a.sum())`` works everywhere; larger
  ones are returned on rank 0 only (``None`` on the other ranks).

Each rank's default memory budget is the host's default divided by the ranks on the host.

A task error (or Ctrl-C) on any rank aborts the whole run: that rank sends an abort message
with the pickled exception to every rank; each rank cancels its executor, and rank 0 raises
the task's own exception (with notes naming the task and the rank). Before returning, every
rank completes its sends (synchronous-mode sends, complete only once received) while
draining what others send, then meets the others in a non-blocking barrier, so no rank
leaves while a message to or from it is in flight and no message outlives its run.

Known limits: blocks larger than 2 GiB cannot be sent in one message; a rank that dies
without raising (killed, segfault) is left to ``mpiexec`` to clean up.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph
from tilegraph.runtime.backends import (
    Backend,
    Partition,
    ThreadsBackend,
    Transport,
    threads_policy,
)
from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import Transfer, nbytes_of
from tilegraph.runtime.memory import MemoryLimitError
from tilegraph.util import cores, unique

TAG_HEADER = 101
TAG_DATA = 102
TAG_ABORT = 103
TAG_PLAN = 104
_SLEEP_MIN = 50e-6
_SLEEP_MAX = 2e-3
_WATCH_SLEEP_MAX = 0.01  # seconds between polls of a rank waiting for the others

_comm_cache: dict[str, Any] = {}
T = TypeVar("T")


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - the [mpi] extra is installed in tests
        raise ImportError(
            "backend='mpi' needs mpi4py and an MPI library: pip install 'tilegraph[mpi]'"
        ) from exc
    return MPI


def world() -> Any:
    """tilegraph's own communicator (a duplicate of ``COMM_WORLD``, made once per process,
    so its messages never mix with the user's)."""
    comm = _comm_cache.get("comm")
    if comm is None:
        MPI = _mpi()
        comm = _comm_cache["comm"] = MPI.COMM_WORLD.Dup()
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        _comm_cache["local_size"] = local.Get_size()
        local.Free()
    return comm


class RemoteTaskError(RuntimeError):
    """A task failed on another rank; raised on the ranks where the original cannot be."""


class CollectiveTimeoutError(RuntimeError):
    """Some ranks did not join a collective step (``compute()``) within ``mpi_timeout``."""


class MPIBackend(Backend):
    """Runs a scheduled TaskGraph on every rank of ``MPI.COMM_WORLD``; see the module
    docstring. ``workers``: threads per rank (default: cores / ranks on this host)."""

    name = "mpi"

    def __init__(self, workers: int | None = None):
        self.comm = world()
        self.rank = self.comm.Get_rank()
        self.processes = self.comm.Get_size()
        self.local_processes = _comm_cache["local_size"]
        self.workers = workers or max(1, cores() // self.local_processes)
        self.bytes_sent = 0
        self.sent: list[tuple[Any, int]] = []

    def run(self, execution: Execution) -> None:
        """Drive one rank's local execution with its worker threads (the threads backend,
        sharing this host's cores with the other ranks on it)."""
        ThreadsBackend(self.workers, share=_comm_cache["local_size"]).run(execution)

    def task_policy(self, graph: TaskGraph, seconds: np.ndarray) -> bytearray | None:
        return threads_policy(graph, seconds) if self.workers > 1 else None

    # -- the collective questions of the pipeline ----------------------------------------------

    def decide(self, fn: Callable[[], T]) -> T:
        """``fn()`` computed on rank 0 and broadcast (e.g. the placement)."""
        return self.comm.bcast(fn() if self.rank == 0 else None, root=0)

    def check_same_plan(self, graph: TaskGraph, placement: np.ndarray | None = None) -> None:
        """Raise on every rank if the ranks do not hold the same graph (and placement)."""
        h = hashlib.sha1(usedforsecurity=False)
        h.update(np.int64(len(graph)).tobytes())
        h.update(np.ascontiguousarray(graph.dep_ptr, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(graph.dep_idx, dtype=np.int64).tobytes())
        if placement is not None:
            h.update(np.ascontiguousarray(placement, dtype=np.int64).tobytes())
        kinds = graph.meta.get("kind")
        if kinds is not None:
            h.update("|".join(k or "" for k in kinds).encode())
        prints = self._exchange_all(h.hexdigest())
        odd = [r for r, p in enumerate(prints) if p != prints[0]]
        if odd:
            raise RuntimeError(
                f"MPI ranks {odd} built a different plan from rank 0 ({len(graph)} tasks "
                "here): every rank must run the same program on the same shapes and blocks "
                "(compute() is collective; do not call it on some ranks only)")

    def _exchange_all(self, value: str) -> list[str]:
        """Every rank's ``value``, in rank order, sent point to point without blocking; fails
        after ``collective_timeout`` seconds naming the ranks whose value did not come.

        Each exchange is numbered (the same count on every rank that calls them all); a
        value left over from an exchange that failed earlier is dropped, and a value from a
        rank that is at a later exchange is an error."""
        MPI = _mpi()
        seq = _comm_cache["exchanges"] = _comm_cache.get("exchanges", 0) + 1
        size, rank, comm = self.processes, self.rank, self.comm
        got: dict[int, str] = {rank: value}
        ahead: dict[int, int] = {}
        requests = [comm.isend((seq, value), dest=r, tag=TAG_PLAN)
                    for r in range(size) if r != rank]
        status = MPI.Status()
        deadline = time.monotonic() + self.collective_timeout
        sleep = _SLEEP_MIN
        while len(got) + len(ahead) < size:
            busy = False
            for source in range(size):
                # only the ranks not heard from: the next message of one that was may
                # already belong to the next exchange
                if source in got or source in ahead:
                    continue
                if not comm.Iprobe(source=source, tag=TAG_PLAN, status=status):
                    continue
                their_seq, their_value = comm.recv(source=source, tag=TAG_PLAN)
                busy = True
                if their_seq == seq:
                    got[source] = their_value
                elif their_seq > seq:  # only after an exchange failed on some ranks
                    ahead[source] = their_seq
            if len(got) + len(ahead) == size:
                break
            if time.monotonic() > deadline:
                missing = [r for r in range(size) if r not in got and r not in ahead]
                raise CollectiveTimeoutError(
                    f"compute() is collective: ranks {missing} did not call it (MPI rank "
                    f"{rank} waited {self.collective_timeout:g} s, mpi_timeout). Every rank "
                    "must call compute(), to_npy() etc. the same number of times, with the "
                    "same arrays; do not call them under `if rank == 0:`")
            sleep = _SLEEP_MIN if busy else min(_WATCH_SLEEP_MAX, sleep * 2)
            if not busy:
                time.sleep(sleep)
        if ahead:
            raise CollectiveTimeoutError(
                f"compute() is collective: ranks {sorted(ahead)} called it more often than "
                f"MPI rank {rank} (they are at call {max(ahead.values())}, this rank at "
                f"{seq}); every rank must call compute() the same number of times")
        # the values are small (sent eagerly): the sends complete once everyone has them
        deadline = time.monotonic() + self.collective_timeout
        while not MPI.Request.Testall(requests) and time.monotonic() < deadline:
            time.sleep(_SLEEP_MAX)
        return [got[r] for r in range(size)]

    def gather(self, value: T) -> list[T] | None:
        return self.comm.gather(value, root=0)

    def share_results(self, values: Callable[[], Any] | None, limit: int) -> Any:
        """Rank 0's values, broadcast to every rank when they take at most ``limit`` bytes
        together (``limit > 0``); else rank 0's alone (``None`` on the others). A failure
        to read them on rank 0 is raised on every rank."""
        if self.processes == 1:
            return values() if values is not None else None
        message: tuple[str, Any] = ("large", None)
        mine: Any = None
        error: BaseException | None = None
        if self.rank == 0:
            try:
                mine = values() if values is not None else None
                if mine is not None and limit > 0 and nbytes_of(mine) <= limit:
                    message = ("values", mine)
            except BaseException as exc:
                error = exc
                message = ("error", f"{type(exc).__name__}: {exc}")
        kind, payload = self.comm.bcast(message, root=0)
        if error is not None:
            raise error
        if kind == "error":
            raise RemoteTaskError(f"reading the results on MPI rank 0 failed: {payload}")
        if self.rank == 0:
            return mine
        return payload if kind == "values" else None

    def all_ready(self, error: BaseException | None) -> None:
        """Every rank stops before anything runs if one rank cannot run its part."""
        fits = self.comm.allgather(error is None)
        if not all(fits):
            raise error or MemoryLimitError(
                f"a task placed on MPI rank {fits.index(False)} cannot fit under its "
                "memory limit")

    # -- the seam ----------------------------------------------------------------------------

    def partition(self, graph: TaskGraph, outputs: np.ndarray, priority: np.ndarray
                  ) -> Partition:
        """This rank's tasks (by the graph's ``worker`` column) plus an external task for
        every block it receives; the outputs' values are returned on rank 0."""
        col = graph.meta.get("worker")
        if col is None and self.processes == 1:
            col = [0] * len(graph)
        if col is None or any(w is None for w in col):
            raise ValueError("the MPI backend runs a placed plan (a 'worker' column on "
                             "every task)")
        placement = np.asarray(col, dtype=np.int64)
        if len(placement) and placement.max() >= self.processes:
            raise ValueError(f"the plan was placed on {placement.max() + 1} workers, "
                             f"but only {self.processes} MPI ranks run it")
        self.check_same_plan(graph, placement)
        self.placement = placement
        local = _LocalPlan(graph, placement, outputs, self.rank, self.processes)
        self._local = local
        return Partition(local.graph, local.outputs, local.priority(priority),
                         local.external, local.exported_tasks, self.rank == 0)

    def transport(self, part: Partition) -> Transport:
        return _Exchange(self, self._local)


class _LocalPlan:
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


class _Exchange(Transport):
    """The transport of one rank: a communication thread, the only thread making MPI calls
    during a run."""

    def __init__(self, backend: MPIBackend, local: _LocalPlan):
        self.MPI = _mpi()
        self.backend = backend
        self.comm = backend.comm
        self.rank = backend.rank
        self.size = backend.processes
        self.local = local
        self.keys = local.graph.keys
        self.sendq: deque[tuple[int, Any]] = deque()  # (local task, result) to send, in order
        self.pending: list[tuple[Any, Any]] = []  # (request, object kept alive until done)
        self.local_done = threading.Event()
        self.aborted = False
        self.remote_error: tuple[int, bytes | None, str] | None = None
        self.failure: BaseException | None = None
        self.bytes_sent = 0
        self.sent: list[tuple[Any, int]] = []
        self.old_of_new = local.keep

    def export(self, i: int, value: Any) -> None:
        self.sendq.append((i, value))

    @contextmanager
    def connect(self, execution: Execution) -> Iterator[None]:
        """Meet the other ranks, exchange blocks while the run goes on, and on leaving
        finish every send and raise another rank's failure (or this rank's MPI error)."""
        self.execution = execution
        self.comm.Barrier()
        thread = threading.Thread(target=self.loop, name="tilegraph-mpi", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self.local_done.set()
            while thread.is_alive():
                try:
                    thread.join()
                except KeyboardInterrupt:
                    execution.cancel(KeyboardInterrupt())
            self.backend.bytes_sent = self.bytes_sent
            self.backend.sent = self.sent
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
        sleep = _SLEEP_MIN
        while True:
            busy = False
            ex = self.execution
            if ex.finished and ex.error is not None and not told:
                told = True
                self._abort_all(ex.error)
            while self.sendq:
                i, value = self.sendq.popleft()
                if not self.aborted:
                    self._send(i, value)
                busy = True
            if self.pending:
                still = [(r, keep) for r, keep in self.pending if not r.Test()]
                busy |= len(still) != len(self.pending)
                self.pending = still
            for tag in (TAG_ABORT, TAG_HEADER):  # not TAG_PLAN: a rank may be at its next run
                while self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=tag, status=status):
                    self._receive(status.Get_source(), status.Get_tag())
                    busy = True
            if barrier is None and self.local_done.is_set() and not self.sendq \
                    and not self.pending and (ex.finished or self.aborted):
                barrier = self.comm.Ibarrier()
            if barrier is not None and barrier.Test():
                return
            sleep = _SLEEP_MIN if busy else min(_SLEEP_MAX, sleep * 2)
            if not busy:
                time.sleep(sleep)

    def _send(self, i: int, value: Any) -> None:
        MPI = self.MPI
        gi = int(self.old_of_new[i])
        for dest in self.local.dests[i]:
            if isinstance(value, np.ndarray) and not value.dtype.hasobject:
                # (np.ascontiguousarray would make a 0-d array 1-d)
                buf = value if value.flags.c_contiguous else value.copy(order="C")
                header = (gi, buf.dtype.str if buf.dtype.fields is None else buf.dtype.descr,
                          buf.shape)
                self.pending.append((self.comm.issend(header, dest=dest, tag=TAG_HEADER), None))
                flat = buf.reshape(-1).view(np.uint8)
                self.pending.append(
                    (self.comm.Issend([flat, MPI.BYTE], dest=dest, tag=TAG_DATA), buf))
                nbytes = buf.nbytes
            else:
                payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                header = (gi, None, len(payload))
                self.pending.append((self.comm.issend(header, dest=dest, tag=TAG_HEADER), None))
                arr = np.frombuffer(payload, dtype=np.uint8)
                self.pending.append(
                    (self.comm.Issend([arr, MPI.BYTE], dest=dest, tag=TAG_DATA), arr))
                nbytes = len(payload)
            self.bytes_sent += nbytes
            self.sent.append((gi, dest))

    def _receive(self, source: int, tag: int) -> None:
        MPI = self.MPI
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
        if dtype is None:
            raw = np.empty(shape, dtype=np.uint8)
            self.comm.Recv([raw, MPI.BYTE], source=source, tag=TAG_DATA)
            value = pickle.loads(raw.tobytes()) if not self.aborted else None
            nbytes = int(shape)
        else:
            value = np.empty(shape, dtype=np.dtype(dtype))
            self.comm.Recv([value.reshape(-1).view(np.uint8), MPI.BYTE], source=source,
                           tag=TAG_DATA)
            nbytes = value.nbytes
        if self.aborted or self.execution.finished:
            return
        i = int(self.local.new_of_old[gi])
        event = Transfer(self.keys[i], source, self.rank, nbytes, t0, time.perf_counter())
        self.execution.deliver(i, value, event)

    def _abort_all(self, error: BaseException) -> None:
        """Tell every other rank to stop; they get the pickled exception and its text."""
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
            if dest != self.rank:
                self.pending.append((self.comm.issend(info, dest=dest, tag=TAG_ABORT), None))

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
