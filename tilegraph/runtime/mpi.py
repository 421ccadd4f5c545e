"""The MPI backend: one plan, many processes, blocks sent once.

Every rank runs the same script (``tilegraph run -n 4 script.py``, or ``mpiexec`` directly,
with ``backend="mpi"``), so every rank lowers the same program to the same TaskGraph and
plans it with the one pipeline (:mod:`tilegraph.pipeline`). This module answers the
pipeline through the backend seam (``partition``, ``transport``) and through the steps the
ranks take together, the backend's ``collective`` (:class:`RankCollective`, the only
:class:`~tilegraph.runtime.backends.Collective`): the placement is computed once, on rank
0, and sent to the others (``decide``); before running, the ranks check that they hold the
same graph and placement (``check_same_plan``, a fingerprint of its structure) and the same
values in every task (:mod:`tilegraph.runtime.digest`: the arrays given to ``from_numpy``
and every literal operand by content, and the tasks' functions with their closure
variables, defaults and the globals they read), so that a script that branches on its
rank, builds its inputs from unseeded random numbers or lets a function read a per-rank
value fails on every rank with an error naming the task and the value, instead of a hang
or a silent mix of the ranks' data. ``share_array`` (``from_numpy(..., root=0)``) sends
rank 0's array instead; the ``mpi_values="rank0"`` option sends rank 0's functions and
values of every task that differs (pickled by cloudpickle), and every rank runs them.

Every step the ranks take together (the set-up of tilegraph's communicator, the plan check,
the placement, the memory check, the start of the run, the results, the report) is made of
point-to-point messages without blocking, under a watchdog (:class:`_Steps`): a rank that
waited ``mpi_timeout`` seconds (the collective's ``timeout``) fails with "compute() is
collective: ranks [1, 2] did not call it (... at the plan check)", naming the ranks whose
message never came (a script that calls ``compute()`` on rank 0 only, or once more on one
rank). Only the communicator's own duplication (``Idup``) cannot name the missing ranks;
``tilegraph run`` makes it as every rank starts (:mod:`tilegraph.runtime.mpi_start`).
Waiting ranks sleep between polls.

``partition`` gives each rank the tasks placed on it, run with the executor core (its own
worker threads, BLAS threads, memory budget and spill): its local graph holds its own tasks
plus one *external* task for every block it receives, and the partition
(:class:`RankPartition`) carries the rank's part of the plan (where each result it makes
goes) to the run's transport; the backend object keeps nothing of a run. The transport
(``_Exchange``, one per run) is a communication thread that does all MPI calls:

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
leaves while a message to or from it is in flight and no message outlives its run. A
rank stopped by SIGTERM (how ``mpiexec`` stops its ranks) cancels its run as Ctrl-C does,
removes its spill and staging files and ends by the signal
(:mod:`tilegraph.runtime.signals`): it tells the others it stops, but waits for none.

A rank whose host dies (its power or network gone: nothing more comes from it, not even a
reset) is named on every other rank within ``mpi_timeout``: during a run every rank's
communication thread sends the others a small heartbeat (every quarter of the timeout, at
most every 2 s) and receives without blocking, so a rank from which nothing came for
``mpi_timeout`` seconds fails the run on the rank that noticed with
:class:`RankLostError` ("MPI rank 2 (on host node7) stopped answering ..."), which that rank
sends to the others as it would a task's error. The job cannot go on without the rank: the
error ends it (``python -m mpi4py`` aborts the job on an uncaught exception); a rerun with
``checkpoint=`` resumes from the blocks that were finished (:mod:`tilegraph.checkpoint`).

Known limits: blocks larger than 2 GiB cannot be sent in one message; a rank that dies
while its host stays up (killed, a segfault) is usually noticed first by ``mpiexec``, which
then stops the job; a host lost during the steps before or after a run (the plan check, the
placement, the results) is named by those steps' own watchdog as a rank that did not call
``compute()``; a rank takes part
in one run at a time (a message does not say which run it belongs to: two ``compute()``
calls at once from two threads of a rank would mix their messages), though the plans of
several runs may be partitioned before any of them runs, as long as every rank does the
same in the same order.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph
from tilegraph.runtime.backends import (
    Backend,
    BackendOption,
    Collective,
    Partition,
    ThreadsBackend,
    Transport,
    register_backend,
    threads_policy,
)
from tilegraph.runtime.core import Execution
from tilegraph.runtime.digest import PlanValues, describe_part, differing_parts
from tilegraph.runtime.events import Transfer, nbytes_of
from tilegraph.runtime.memory import MemoryLimitError
from tilegraph.runtime.signals import Terminated
from tilegraph.util import cores, positive_seconds, unique

TAG_HEADER = 101
TAG_DATA = 102
TAG_ABORT = 103
TAG_PLAN = 104
TAG_ROOT = 105
TAG_BEAT = 106
BEAT_MAX = 2.0  # seconds between a rank's heartbeats during a run, at most
_LAUNCHED = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")  # set by mpiexec
_PIECE = 1 << 28  # bytes of one message of an array sent from a root rank
_SLEEP_MIN = 50e-6
_SLEEP_MAX = 2e-3
SEND_COPIES = 32 << 20  # bytes the transport pickles or copies to send, in flight at most
SEND_SHARE = 8  # ... and at most this fraction of the rank's memory limit (1/8)
_WATCH_SLEEP_MAX = 0.01  # seconds between polls of a rank waiting for the others
_LEAVE_WAIT = 0.2  # seconds a rank stopped by a signal gives its abort messages to leave

_comm_cache: dict[str, Any] = {}
T = TypeVar("T")


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - the [mpi] extra is installed in tests
        raise ImportError(
            "backend='mpi' needs mpi4py and an MPI library: install the MPI extra from the "
            "checkout, pip install -e '.[mpi]'"
        ) from exc
    return MPI


class RemoteTaskError(RuntimeError):
    """A task failed on another rank; raised on the ranks where the original cannot be."""


class CollectiveTimeoutError(RuntimeError):
    """Some ranks did not join a collective step (``compute()``) within ``mpi_timeout``."""


class RankLostError(RuntimeError):
    """Nothing came from an MPI rank for ``mpi_timeout`` seconds during a run: its host or
    process is gone, or its network cut. ``rank`` and ``host`` name it."""

    def __init__(self, message: str, rank: int = -1, host: str = ""):
        super().__init__(message)
        self.rank = rank
        self.host = host

    def __reduce__(self) -> tuple:
        return RankLostError, (str(self), self.rank, self.host)


def host_of(rank: int) -> str:
    """The host name (MPI's processor name) of a rank of tilegraph's communicator, as
    the ranks told each other when it was set up ('?' before)."""
    hosts = _comm_cache.get("hosts") or []
    return hosts[rank] if 0 <= rank < len(hosts) else "?"


def _where(ranks: list[int]) -> str:
    """`` (on hosts node1, node2)``: where ``ranks`` run ('' before the ranks said)."""
    if not _comm_cache.get("hosts"):
        return ""
    where = sorted({host_of(r) for r in ranks})
    return f" (on host{'s' if len(where) > 1 else ''} {', '.join(where)})"


def world(timeout: float = 60.0) -> Any:
    """tilegraph's own communicator (a duplicate of ``COMM_WORLD``, made once per process,
    so its messages never mix with the user's).

    Making it is the first collective of all: every rank must arrive. It is made without
    blocking (``Idup``) and waited for under the watchdog: a rank that waited ``timeout``
    seconds (the backend passes the ``mpi_timeout`` option) raises
    :class:`CollectiveTimeoutError`.
    Which ranks are missing cannot be known at this step (the communicator that would ask
    them does not exist yet); ``tilegraph run`` makes the communicator as every rank starts,
    so that a later ``compute()`` called on some ranks only is named rank by rank. A rank
    that timed out waits for the same duplicate again at its next call."""
    comm = _comm_cache.get("comm")
    if comm is not None:
        return comm
    MPI = _mpi()
    pending = _comm_cache.get("pending")
    if pending is None:
        pending = _comm_cache["pending"] = MPI.COMM_WORLD.Idup()
    new, request = pending
    deadline = time.monotonic() + timeout
    sleep = _SLEEP_MIN
    while not request.Test():
        if time.monotonic() > deadline:
            size = MPI.COMM_WORLD.Get_size()
            raise CollectiveTimeoutError(
                f"compute() is collective: not every one of the {size} MPI ranks called it "
                f"(MPI rank {MPI.COMM_WORLD.Get_rank()} waited {timeout:g} s, mpi_timeout, "
                "for the others to set up tilegraph's communicator, the first step of the "
                "first compute(); the missing ranks cannot be named at this step: "
                "`tilegraph run` sets it up as every rank starts and names them). Every "
                "rank must call compute(), to_npy() etc. the same number of times, with "
                "the same arrays; do not call them under `if rank == 0:`")
        sleep = min(_WATCH_SLEEP_MAX, sleep * 2)
        time.sleep(sleep)
    del _comm_cache["pending"]
    _comm_cache["comm"] = new
    # every rank has joined: the ranks on this host, from their processor names
    hosts = _Steps(new, timeout).exchange(MPI.Get_processor_name(), "the set-up")
    _comm_cache["local_size"] = hosts.count(hosts[new.Get_rank()])
    _comm_cache["hosts"] = hosts
    return new


def share_array(x: Any, root: int = 0, timeout: float = 60.0) -> np.ndarray:
    """Rank ``root``'s array ``x`` on every rank of ``COMM_WORLD`` (a collective: every rank
    calls it; ``x`` may be ``None`` on the other ranks, whose shape and dtype come from the
    root too). Sent in pieces of at most 256 MiB under the watchdog (``timeout`` seconds;
    ``from_numpy`` passes the ``mpi_timeout`` option): a rank that never calls it is
    named. Outside MPI (one process) ``x`` itself is returned."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or root < 0:
        raise ValueError(f"root must be a rank number (an int >= 0), got {root!r}")
    if "mpi4py.MPI" not in sys.modules and not any(v in os.environ for v in _LAUNCHED):
        return np.asarray(x)  # not launched by mpiexec: one process, nothing to send
    comm = world(timeout)
    rank, size = comm.Get_rank(), comm.Get_size()
    if root >= size:
        raise ValueError(f"root={root}, but there are only {size} MPI rank(s)")
    header: Any = None
    if rank == root:
        try:
            x = np.asarray(x)
            if x.dtype.hasobject:
                raise TypeError("arrays of Python objects cannot be sent between ranks")
            header = ("array", x.shape, x.dtype)
        except Exception as exc:
            header = ("error", f"{type(exc).__name__}: {exc}")
    steps = _Steps(comm, timeout)
    heads = steps.exchange(header, f"from_numpy(root={root})")
    kind, *rest = heads[root]
    if kind == "error":
        raise ValueError(f"from_numpy(root={root}): rank {root}'s data cannot be sent: "
                         f"{rest[0]}")
    shape, dtype = rest
    MPI = _mpi()
    if rank == root:
        flat = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        requests = [comm.Issend([flat[i:i + _PIECE], MPI.BYTE], dest=r, tag=TAG_ROOT)
                    for r in range(size) if r != root
                    for i in range(0, max(len(flat), 1), _PIECE) if len(flat)]
        MPI.Request.Waitall(requests)  # every rank is here (the exchange above)
        return x
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1).view(np.uint8)
    for i in range(0, len(flat), _PIECE):
        comm.Recv([flat[i:i + _PIECE], MPI.BYTE], source=root, tag=TAG_ROOT)
    return out


def _step_error(missing: list[int], rank: int, timeout: float, step: str
                ) -> CollectiveTimeoutError:
    return CollectiveTimeoutError(
        f"compute() is collective: ranks {missing} did not call it, or are gone"
        f"{_where(missing)} (MPI rank {rank} waited {timeout:g} s, mpi_timeout, at {step}). "
        "Every rank must "
        "call compute(), to_npy() etc. the same number of times, with the same arrays; do "
        "not call them under `if rank == 0:`")


class _Steps:
    """The collective steps of tilegraph's communicator, made of point-to-point messages
    under the watchdog instead of MPI's blocking collectives, so that no step can wait
    forever: a rank that waited ``timeout`` seconds for another fails, naming the ranks
    that never came.

    Steps are numbered (the same count on every rank that takes them all); each message
    carries its step's number and a kind. A message left over from a step that failed
    earlier on this rank is dropped; one from a rank already at a later step (it skipped
    this one) is an error. Sends stay referenced until they complete."""

    def __init__(self, comm: Any, timeout: float):
        self.comm = comm
        self.timeout = timeout
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def _begin(self) -> int:
        seq = _comm_cache["steps"] = _comm_cache.get("steps", 0) + 1
        return seq

    def _post(self, dest: int, message: tuple) -> None:
        _comm_cache.setdefault("sends", []).append(
            self.comm.isend(message, dest=dest, tag=TAG_PLAN))

    def _await(self, sources: list[int], seq: int, step: str, *, watched: bool = True
               ) -> dict[int, tuple[str, Any]]:
        """The next message of step ``seq`` from each of ``sources``: ``{rank: (kind,
        payload)}``. ``watched=False``: no time limit (the sources are known to be at this
        step and working)."""
        MPI = _mpi()
        comm, status = self.comm, MPI.Status()
        got: dict[int, tuple[str, Any]] = {}
        ahead: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout
        sleep = _SLEEP_MIN
        while len(got) + len(ahead) < len(sources):
            busy = False
            for source in sources:
                # only the ranks not heard from: the next message of one that was may
                # already belong to the next step
                while source not in got and source not in ahead and comm.Iprobe(
                        source=source, tag=TAG_PLAN, status=status):
                    their_seq, kind, payload = comm.recv(source=source, tag=TAG_PLAN)
                    busy = True
                    if their_seq == seq:
                        got[source] = (kind, payload)
                    elif their_seq > seq:  # only after a step failed on some ranks
                        ahead[source] = their_seq
            if len(got) + len(ahead) == len(sources):
                break
            if watched and time.monotonic() > deadline:
                missing = [r for r in sources if r not in got and r not in ahead]
                raise _step_error(missing, self.rank, self.timeout, step)
            sleep = _SLEEP_MIN if busy else min(_WATCH_SLEEP_MAX, sleep * 2)
            if not busy:
                time.sleep(sleep)
        if ahead:
            raise CollectiveTimeoutError(
                f"compute() is collective: ranks {sorted(ahead)} called it more often than "
                f"MPI rank {self.rank} (they are at step {max(ahead.values())}, this rank at "
                f"{seq}, {step}); every rank must call compute() the same number of times")
        return got

    def _settle(self) -> None:
        """Wait (at most ``timeout``) for this rank's sends to complete; the values are
        small or their receivers are waiting for them."""
        MPI = _mpi()
        sends = _comm_cache.get("sends", [])
        deadline = time.monotonic() + self.timeout
        while sends and not MPI.Request.Testall(sends) and time.monotonic() < deadline:
            time.sleep(_SLEEP_MAX)
        _comm_cache["sends"] = [r for r in sends if not r.Test()]

    def exchange(self, value: Any, step: str, *, root: int | None = None) -> list[Any] | None:
        """Every rank's ``value`` in rank order, on every rank (``root=None``) or on rank
        ``root`` only (``None`` on the others)."""
        seq = self._begin()
        others = [r for r in range(self.size) if r != self.rank]
        for dest in others if root is None else ([root] if root != self.rank else []):
            self._post(dest, (seq, "value", value))
        out = None
        if root is None or root == self.rank:
            got = self._await(others, seq, step)
            got[self.rank] = ("value", value)
            out = [got[r][1] for r in range(self.size)]
        self._settle()
        return out

    def from_root(self, fn: Callable[[], T], step: str) -> T:
        """``fn()`` computed on rank 0 and known to every rank; an error in ``fn`` is raised
        on every rank. Rank 0 says it has arrived before it starts: the others wait for that
        under the watchdog, then for the value as long as ``fn`` takes."""
        seq = self._begin()
        if self.rank == 0:
            others = list(range(1, self.size))
            for dest in others:
                self._post(dest, (seq, "here", None))
            try:
                value = fn()
            except BaseException as exc:
                for dest in others:
                    self._post(dest, (seq, "error", f"{type(exc).__name__}: {exc}"))
                self._settle()
                raise
            for dest in others:
                self._post(dest, (seq, "value", value))
            self._settle()
            return value
        self._await([0], seq, step)
        kind, payload = self._await([0], seq, step, watched=False)[0]
        if kind == "error":
            raise RemoteTaskError(f"{step} failed on MPI rank 0: {payload}")
        return payload


class RankCollective(Collective):
    """The steps the ranks of ``comm`` take together during one ``compute()`` (the
    collective of :class:`MPIBackend`), each under the watchdog of :class:`_Steps`: a rank
    that waited ``timeout`` seconds fails, naming the ranks that never came."""

    def __init__(self, comm: Any, timeout: float = 60.0, values: str = "same"):
        self.comm = comm
        self.timeout = timeout
        self.values = _check_mpi_values(values)
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def steps(self) -> _Steps:
        """The watchdog of the next steps, under the current ``timeout``."""
        return _Steps(self.comm, self.timeout)

    def decide(self, fn: Callable[[], T]) -> T:
        """``fn()`` computed on rank 0 and sent to every rank (e.g. the placement)."""
        return self.steps().from_root(fn, "the placement")

    def check_same_plan(self, graph: TaskGraph, placement: np.ndarray | None = None,
                        literals: bool = False) -> TaskGraph:
        """Raise on every rank if the ranks do not hold the same graph (and placement).

        ``literals``: also everything the tasks read (:mod:`tilegraph.runtime.digest`:
        literal arguments, arrays by content, and the functions with their closures,
        defaults and the globals they read). Where it differs, the error names the first
        task that differs, what differs in it and the ranks that hold it; unless the
        collective's ``values`` is ``"rank0"`` (the ``mpi_values`` option): then rank 0
        sends its functions and values of the tasks that differ, and every rank runs
        them. Returns the graph to run (``graph``, or it with rank 0's tasks)."""
        h = hashlib.sha1(usedforsecurity=False)
        h.update(np.int64(len(graph)).tobytes())
        h.update(np.ascontiguousarray(graph.dep_ptr, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(graph.dep_idx, dtype=np.int64).tobytes())
        if placement is not None:
            h.update(np.ascontiguousarray(placement, dtype=np.int64).tobytes())
        kinds = graph.meta.get("kind")
        if kinds is not None:
            h.update("|".join(k or "" for k in kinds).encode())
        values = PlanValues() if literals and self.size > 1 else None
        try:
            data = values.total(graph) if values is not None else ""
        except Exception as exc:  # told to every rank: none is left waiting for this one
            data = f"error: {type(exc).__name__}: {exc}"
        prints = self.steps().exchange((h.hexdigest(), data), "the plan check")
        odd = [r for r, p in enumerate(prints) if p[0] != prints[0][0]]
        if odd:
            raise RuntimeError(
                f"MPI ranks {odd} built a different plan from rank 0 ({len(graph)} tasks "
                "here): every rank must run the same program on the same shapes and blocks "
                "(compute() is collective; do not call it on some ranks only)")
        failed = [r for r, p in enumerate(prints) if p[1].startswith("error: ")]
        if failed:
            raise RuntimeError(
                f"the plan check could not read the values of the tasks on MPI ranks "
                f"{failed} ({prints[failed[0]][1][len('error: '):]})")
        if values is None or all(p[1] == prints[0][1] for p in prints):
            return graph
        differs = self._differing_tasks(graph, values)
        if self.values == "rank0":
            graph = self._take_rank0(graph, differs)
            values = PlanValues()
            again = self._differing_tasks(graph, values, differs)
            if not again.any():
                return graph
            self._name_differences(graph, values, again, sent=True)
        self._name_differences(graph, values, differs)
        return graph  # (not reached: the line above raises)

    def _differing_tasks(self, graph: TaskGraph, values: PlanValues,
                         among: np.ndarray | None = None) -> np.ndarray:
        """Every rank's digest of every task (of the tasks marked in ``among``), compared:
        a mask of the tasks that differ on some rank from rank 0."""
        tasks = None if among is None else np.flatnonzero(among).tolist()
        mine = b"".join(values.digest(graph, tasks))
        every = self.steps().exchange(mine, "the data check")
        width = hashlib.sha1(usedforsecurity=False).digest_size
        tables = [np.frombuffer(t, dtype=np.uint8).reshape(-1, width) for t in every]
        differs = np.zeros(len(tables[0]), dtype=bool)
        for t in tables[1:]:
            differs |= (t != tables[0]).any(axis=1)
        if among is None:
            return differs
        out = np.zeros(len(graph), dtype=bool)
        out[np.flatnonzero(among)[differs]] = True
        return out

    def _take_rank0(self, graph: TaskGraph, differs: np.ndarray) -> TaskGraph:
        """The graph with rank 0's function, arguments and keywords in every task marked
        in ``differs`` (pickled by cloudpickle on rank 0: functions of the script, lambdas
        and closures by value, with the globals they read)."""
        tasks = np.flatnonzero(differs).tolist()

        def rank0_tasks() -> bytes:
            import cloudpickle

            return cloudpickle.dumps([(graph.funcs[i], graph.args[i], graph.kwargs.get(i),
                                       graph.modes[i]) for i in tasks],
                                     protocol=pickle.HIGHEST_PROTOCOL)

        blob = self.steps().from_root(rank0_tasks, "the values of rank 0")
        if self.rank == 0:
            return graph
        funcs, args, kwargs = list(graph.funcs), list(graph.args), dict(graph.kwargs)
        modes = bytearray(graph.modes)
        for i, (func, template, kw, mode) in zip(tasks, pickle.loads(blob), strict=True):
            funcs[i] = func
            args[i] = template
            modes[i] = mode
            if kw:
                kwargs[i] = kw
            else:
                kwargs.pop(i, None)
        return graph.replace(funcs=funcs, args=args, kwargs=kwargs, modes=modes)

    def _name_differences(self, graph: TaskGraph, values: PlanValues, differs: np.ndarray,
                          sent: bool = False) -> None:
        """Raise on every rank an error naming the first task in ``differs``, what differs
        in it (each rank's parts of it, compared) and the ranks that differ from rank 0.
        ``sent``: rank 0's values were sent and still differ."""
        i = int(np.flatnonzero(differs)[0])
        every = self.steps().exchange(values.parts(graph, i), "the data check")
        ranks, paths = differing_parts(every)
        what = ", and ".join(describe_part(p) for p in paths[:3]) or "a value"
        if len(paths) > 3:
            what += f" (and {len(paths) - 3} more)"
        in_function = any(not _is_literal_part(p) for p in paths)
        head = (f"MPI ranks {ranks or 'other than 0'} hold different data from rank 0 for "
                f"the same input: task {graph.keys[i]!r} (op {graph.opname(i)}) reads "
                f"{what}, whose values differ ({int(differs.sum())} task(s) in all). ")
        if sent:
            raise ValueError(
                head + "These differ even after rank 0's functions and values were sent "
                "(mpi_values='rank0'): a function of an importable module is sent by name, "
                "so the module globals it reads stay each rank's own. Set them the same "
                "way on every rank, or pass them to the function as arguments")
        if in_function:
            raise ValueError(
                head + "Every rank must run the same functions with the same values: a "
                "task's function, its closure variables, defaults and the module globals it "
                "reads are part of the plan. Compute per-rank values outside the functions "
                "the tasks run, or pass mpi_values='rank0' (compute(..., "
                "mpi_values='rank0')) to run rank 0's functions and values on every rank")
        raise ValueError(
            head + "Every rank must build its inputs from the same data (seed random "
            "generators the same way on every rank), or take rank 0's: "
            "tg.from_numpy(data, chunks, root=0) sends rank 0's array to every rank, and "
            "mpi_values='rank0' sends rank 0's values of every task that differs")

    def gather(self, value: T) -> list[T] | None:
        return self.steps().exchange(value, "the report", root=0)

    def share_results(self, values: Callable[[], Any] | None, limit: int) -> Any:
        """Rank 0's values, sent to every rank when they take at most ``limit`` bytes
        together (``limit > 0``); else rank 0's alone (``None`` on the others). A failure
        to read them on rank 0 is raised on every rank."""
        if self.size == 1:
            return values() if values is not None else None
        mine: list[Any] = [None]

        def message() -> tuple[str, Any]:
            mine[0] = values() if values is not None else None
            if mine[0] is not None and limit > 0 and nbytes_of(mine[0]) <= limit:
                return ("values", mine[0])
            return ("large", None)

        kind, payload = self.steps().from_root(message, "the results")
        if self.rank == 0:
            return mine[0]
        return payload if kind == "values" else None

    def all_ready(self, error: BaseException | None) -> None:
        """Every rank stops before anything runs if one rank cannot run its part."""
        fits = self.steps().exchange(error is None, "the memory check")
        if not all(fits):
            raise error or MemoryLimitError(
                f"a task placed on MPI rank {fits.index(False)} cannot fit under its "
                "memory limit")


class MPIBackend(Backend):
    """Runs a scheduled TaskGraph on every rank of ``MPI.COMM_WORLD``; see the module
    docstring. ``workers``: threads per rank (default: cores / ranks on this host)."""

    name = "mpi"
    collective: RankCollective

    def __init__(self, workers: int | None = None, timeout: float = 60.0,
                 values: str = "same"):
        self.comm = world(timeout)
        self.collective = RankCollective(self.comm, timeout, values)
        self.rank = self.comm.Get_rank()
        self.processes = self.comm.Get_size()
        self.local_processes = _comm_cache["local_size"]
        self.workers = workers or max(1, cores() // self.local_processes)

    def run(self, part: Partition, execution: Execution) -> None:
        """Drive one rank's local execution with its worker threads (the threads backend,
        sharing this host's cores with the other ranks on it)."""
        ThreadsBackend(self.workers, share=_comm_cache["local_size"]).run(part, execution)

    def task_policy(self, graph: TaskGraph, seconds: np.ndarray) -> bytearray | None:
        return threads_policy(graph, seconds) if self.workers > 1 else None

    # -- the seam ----------------------------------------------------------------------------

    def partition(self, graph: TaskGraph, outputs: np.ndarray, priority: np.ndarray
                  ) -> RankPartition:
        """This rank's tasks (by the graph's ``worker`` column) plus an external task for
        every block it receives, with the rank's part of the plan (``plan``: where each
        result it makes goes) for its transport; the outputs' values are returned on rank
        0."""
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
        graph = self.collective.check_same_plan(graph, placement, literals=True)
        local = _LocalPlan(graph, placement, outputs, self.rank, self.processes)
        return RankPartition(local.graph, local.outputs, local.priority(priority),
                             local.external, local.exported_tasks, self.rank == 0,
                             plan=local)

    def transport(self, part: Partition) -> Transport:
        """The exchange of ``part``'s blocks with the other ranks (a new one per run)."""
        if not isinstance(part, RankPartition):
            raise TypeError(f"the MPI backend's transport takes the RankPartition its "
                            f"partition() made, got {type(part).__name__}")
        return _Exchange(self, part.plan)


@dataclass(frozen=True, kw_only=True)
class RankPartition(Partition):
    """One rank's part of a run (:meth:`MPIBackend.partition`): a :class:`Partition` with
    ``plan``, the :class:`_LocalPlan` its transport sends and receives by."""

    plan: _LocalPlan


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
    """The transport of one rank for one run (of ``local``, its part of the plan): a
    communication thread, the only thread making MPI calls during the run."""

    def __init__(self, backend: MPIBackend, local: _LocalPlan):
        self.MPI = _mpi()
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
        sleep = _SLEEP_MIN
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
            sleep = _SLEEP_MIN if busy else min(_SLEEP_MAX, sleep * 2)
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


def _check_mpi_timeout(value: Any) -> float:
    return positive_seconds("mpi_timeout", value)


MPI_VALUES = ("same", "rank0")


def _check_mpi_values(value: Any) -> str:
    if not isinstance(value, str) or value not in MPI_VALUES:
        raise ValueError(f"mpi_values must be one of {', '.join(map(repr, MPI_VALUES))}, "
                         f"got {value!r}")
    return value


def _is_literal_part(path: tuple[str, ...]) -> bool:
    """Whether a differing part is a literal argument of the task (not in a function)."""
    return len(path) == 1 and not path[0].startswith("the function ")


def _make_backend(workers: int | None = None, mpi_timeout: float = 60.0,
                  mpi_values: str = "same") -> MPIBackend:
    """``backend="mpi"`` of :func:`~tilegraph.runtime.backends.make_backend`."""
    return MPIBackend(workers, mpi_timeout, mpi_values)


register_backend("mpi", _make_backend, options={
    "mpi_timeout": BackendOption(
        60.0, _check_mpi_timeout,
        "seconds an MPI rank waits for the others to join a compute() (or from_numpy(..., "
        "root=)) before failing with an error that names the ranks that did not call it"),
    "mpi_values": BackendOption(
        "same", _check_mpi_values,
        "what the ranks do when a task reads values that differ per rank (its literal "
        "arguments, its function with the closure, defaults and globals it reads): 'same' "
        "fails on every rank naming the task and the value; 'rank0' runs rank 0's "
        "functions and values of those tasks on every rank"),
})
