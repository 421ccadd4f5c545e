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
point-to-point messages without blocking, under a watchdog
(:class:`~tilegraph.runtime.mpi_steps.Steps`): a rank that waited ``mpi_timeout`` seconds
(the collective's ``timeout``) fails with "compute() is collective: ranks [1, 2] did not
call it (... at the plan check)", naming the ranks whose message never came (a script that
calls ``compute()`` on rank 0 only, or once more on one rank). Only the communicator's
own duplication (``Idup``) cannot name the missing ranks; ``tilegraph run`` makes it as
every rank starts (:mod:`tilegraph.runtime.mpi_start`). Waiting ranks sleep between polls.

``partition`` gives each rank the tasks placed on it, run with the executor core (its own
worker threads, BLAS threads, memory budget and spill): its local graph holds its own tasks
plus one *external* task for every block it receives, and the partition
(:class:`RankPartition`) carries the rank's part of the plan (where each result it makes
goes) to the run's transport; the backend object keeps nothing of a run. The transport
(:class:`~tilegraph.runtime.mpi_exchange.Exchange`, one per run) is a communication
thread that does all MPI calls:

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

The module holds the backend, its options and the steps of a run's collective; the
communicator, the watchdog of the steps and the MPI errors are in
:mod:`tilegraph.runtime.mpi_steps`, a rank's part of the plan and its transport in
:mod:`tilegraph.runtime.mpi_exchange` (their public names are importable from here too).
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from tilegraph.graph.taskgraph import TaskGraph
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
from tilegraph.runtime.budget import MemoryLimitError
from tilegraph.runtime.core import Execution
from tilegraph.runtime.digest import PlanValues, describe_part, differing_parts
from tilegraph.runtime.events import nbytes_of
from tilegraph.runtime.mpi_exchange import (  # noqa: F401 - re-exported
    BEAT_MAX,
    SEND_COPIES,
    SEND_SHARE,
    Exchange,
    LocalPlan,
)
from tilegraph.runtime.mpi_steps import (  # noqa: F401 - re-exported
    TAG_ABORT,
    TAG_BEAT,
    TAG_DATA,
    TAG_HEADER,
    TAG_PLAN,
    TAG_ROOT,
    CollectiveTimeoutError,
    RankLostError,
    RemoteTaskError,
    Steps,
    comm_cache,
    host_of,
    share_array,
    world,
)
from tilegraph.util import cores, positive_seconds

T = TypeVar("T")


class RankCollective(Collective):
    """The steps the ranks of ``comm`` take together during one ``compute()`` (the
    collective of :class:`MPIBackend`), each under the watchdog of :class:`Steps`: a rank
    that waited ``timeout`` seconds fails, naming the ranks that never came."""

    def __init__(self, comm: Any, timeout: float = 60.0, values: str = "same"):
        self.comm = comm
        self.timeout = timeout
        self.values = _check_mpi_values(values)
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def steps(self) -> Steps:
        """The watchdog of the next steps, under the current ``timeout``."""
        return Steps(self.comm, self.timeout)

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
        self.local_processes = comm_cache["local_size"]
        self.workers = workers or max(1, cores() // self.local_processes)

    def run(self, part: Partition, execution: Execution) -> None:
        """Drive one rank's local execution with its worker threads (the threads backend,
        sharing this host's cores with the other ranks on it)."""
        ThreadsBackend(self.workers, share=comm_cache["local_size"]).run(part, execution)

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
        local = LocalPlan(graph, placement, outputs, self.rank, self.processes)
        return RankPartition(local.graph, local.outputs, local.priority(priority),
                             local.external, local.exported_tasks, self.rank == 0,
                             plan=local)

    def transport(self, part: Partition) -> Transport:
        """The exchange of ``part``'s blocks with the other ranks (a new one per run)."""
        if not isinstance(part, RankPartition):
            raise TypeError(f"the MPI backend's transport takes the RankPartition its "
                            f"partition() made, got {type(part).__name__}")
        return Exchange(self, part.plan)


@dataclass(frozen=True, kw_only=True)
class RankPartition(Partition):
    """One rank's part of a run (:meth:`MPIBackend.partition`): a :class:`Partition` with
    ``plan``, the :class:`LocalPlan` its transport sends and receives by."""

    plan: LocalPlan


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
