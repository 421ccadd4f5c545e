"""tilegraph's MPI communicator and the steps its ranks take together.

:func:`world` makes the communicator (a duplicate of ``COMM_WORLD``, once per process) and
learns where each rank runs (:func:`host_of`); :func:`share_array` sends a root rank's array
to every rank; :class:`Steps` is the watchdog of every step the ranks take together (the
set-up, the plan check, the placement, the memory check, the start of a run, the results,
the report): point-to-point messages without blocking, so that a rank that waited
``mpi_timeout`` seconds fails naming the ranks that never came. The errors of the MPI
backend (:class:`RemoteTaskError`, :class:`CollectiveTimeoutError`, :class:`RankLostError`)
and the message tags of every MPI message tilegraph sends are here too; the backend is
:mod:`tilegraph.runtime.mpi`, the transport of a run :mod:`tilegraph.runtime.mpi_exchange`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

TAG_HEADER = 101
TAG_DATA = 102
TAG_ABORT = 103
TAG_PLAN = 104
TAG_ROOT = 105
TAG_BEAT = 106
_LAUNCHED = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")  # set by mpiexec
_PIECE = 1 << 28  # bytes of one message of an array sent from a root rank
SLEEP_MIN = 50e-6  # seconds a rank waiting for messages first sleeps between polls ...
SLEEP_MAX = 2e-3  # ... doubling up to this while nothing comes (during a run)
_WATCH_SLEEP_MAX = 0.01  # seconds between polls of a rank waiting for the others

comm_cache: dict[str, Any] = {}
"""tilegraph's communicator in this process and what its ranks told each other: ``comm``
(once made), ``pending`` (its duplication while it is made), ``hosts`` (each rank's host
name), ``local_size`` (the ranks on this host), ``steps`` (the number of the last collective
step) and ``sends`` (the steps' messages not yet received)."""
T = TypeVar("T")


def load_mpi() -> Any:
    """mpi4py's ``MPI`` module, or an ImportError saying how to install it."""
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
    hosts = comm_cache.get("hosts") or []
    return hosts[rank] if 0 <= rank < len(hosts) else "?"


def _where(ranks: list[int]) -> str:
    """`` (on hosts node1, node2)``: where ``ranks`` run ('' before the ranks said)."""
    if not comm_cache.get("hosts"):
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
    comm = comm_cache.get("comm")
    if comm is not None:
        return comm
    MPI = load_mpi()
    pending = comm_cache.get("pending")
    if pending is None:
        pending = comm_cache["pending"] = MPI.COMM_WORLD.Idup()
    new, request = pending
    deadline = time.monotonic() + timeout
    sleep = SLEEP_MIN
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
    del comm_cache["pending"]
    comm_cache["comm"] = new
    # every rank has joined: the ranks on this host, from their processor names
    hosts = Steps(new, timeout).exchange(MPI.Get_processor_name(), "the set-up")
    comm_cache["local_size"] = hosts.count(hosts[new.Get_rank()])
    comm_cache["hosts"] = hosts
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
    steps = Steps(comm, timeout)
    heads = steps.exchange(header, f"from_numpy(root={root})")
    kind, *rest = heads[root]
    if kind == "error":
        raise ValueError(f"from_numpy(root={root}): rank {root}'s data cannot be sent: "
                         f"{rest[0]}")
    shape, dtype = rest
    MPI = load_mpi()
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


class Steps:
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
        seq = comm_cache["steps"] = comm_cache.get("steps", 0) + 1
        return seq

    def _post(self, dest: int, message: tuple) -> None:
        comm_cache.setdefault("sends", []).append(
            self.comm.isend(message, dest=dest, tag=TAG_PLAN))

    def _await(self, sources: list[int], seq: int, step: str, *, watched: bool = True
               ) -> dict[int, tuple[str, Any]]:
        """The next message of step ``seq`` from each of ``sources``: ``{rank: (kind,
        payload)}``. ``watched=False``: no time limit (the sources are known to be at this
        step and working)."""
        MPI = load_mpi()
        comm, status = self.comm, MPI.Status()
        got: dict[int, tuple[str, Any]] = {}
        ahead: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout
        sleep = SLEEP_MIN
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
            sleep = SLEEP_MIN if busy else min(_WATCH_SLEEP_MAX, sleep * 2)
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
        MPI = load_mpi()
        sends = comm_cache.get("sends", [])
        deadline = time.monotonic() + self.timeout
        while sends and not MPI.Request.Testall(sends) and time.monotonic() < deadline:
            time.sleep(SLEEP_MAX)
        comm_cache["sends"] = [r for r in sends if not r.Test()]

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


