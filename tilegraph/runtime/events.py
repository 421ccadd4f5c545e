"""Typed events of a run, for diagnostics to subscribe to.

A subscriber is a callable taking one event. Subscribers are called by the executor while it
holds its scheduling lock, in one total order, so they need no locking of their own, but they
must be quick: a slow subscriber slows the whole run. Events are created only when somebody
listens, so an unobserved run pays nothing for them.

Subscribe for one run with ``callbacks=[fn]`` (an option of ``get``/``compute``), or for every
run in a block with :func:`subscribe`::

    with subscribe(log.append):
        tilegraph.get(dsk, "z")
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

Subscriber = Callable[["Event"], None]


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of all run events."""


@dataclass(frozen=True, slots=True)
class RunStart(Event):
    """A run begins. ``ntasks``: tasks to run; ``nworkers``: workers; ``backend``: its name;
    ``rank``: the process (MPI rank) this run's events come from, 0 on one machine;
    ``time``: ``time.perf_counter()`` when the run began; ``plan``: the pipeline's plan
    (:class:`tilegraph.pipeline.Plan`) for subscribers that describe it (``explain``), or
    ``None``."""

    ntasks: int
    nworkers: int
    backend: str
    rank: int = 0
    time: float = 0.0
    plan: object = None


@dataclass(frozen=True, slots=True)
class TaskStart(Event):
    """Task ``key`` (op ``name``, op kind ``kind``) starts on ``worker`` at ``time``
    (``time.perf_counter``)."""

    key: Hashable
    name: str
    worker: int
    time: float
    kind: str = ""


@dataclass(frozen=True, slots=True)
class TaskEnd(Event):
    """Task ``key`` (op ``name``, op kind ``kind``) ran on ``worker`` from ``start`` to
    ``stop``; its result holds ``nbytes`` bytes; ``held``: bytes of results the process holds
    once this result is kept (it is dropped at once if nothing needs it)."""

    key: Hashable
    name: str
    worker: int
    start: float
    stop: float
    nbytes: int
    kind: str = ""
    held: int = -1


@dataclass(frozen=True, slots=True)
class TaskFailed(Event):
    """Task ``key`` raised ``error`` on ``worker``; ``retry`` says whether it will run again."""

    key: Hashable
    name: str
    worker: int
    error: BaseException
    retry: bool


@dataclass(frozen=True, slots=True)
class Release(Event):
    """The result of ``key`` (``nbytes`` bytes) was freed: its last consumer has run.
    ``held``: bytes of results the process holds afterwards."""

    key: Hashable
    nbytes: int
    held: int = -1


@dataclass(frozen=True, slots=True)
class Spill(Event):
    """The result of ``key`` (``nbytes`` bytes) left memory to make room; ``clean``: nothing
    was written (its copy on disk was already there, or it is a load that can be re-run)."""

    key: Hashable
    nbytes: int
    clean: bool
    held: int = -1


@dataclass(frozen=True, slots=True)
class Unspill(Event):
    """The result of ``key`` (``nbytes`` bytes) was read back from disk for a consumer;
    ``ahead``: by the read-ahead thread, while workers computed. ``held``: bytes of results
    the process holds afterwards."""

    key: Hashable
    nbytes: int
    ahead: bool = False
    held: int = -1


@dataclass(frozen=True, slots=True)
class Transfer(Event):
    """The result of ``key`` (``nbytes`` bytes) arrived from process ``source`` at process
    ``dest`` (MPI ranks); it was on its way from ``start`` to ``stop`` (``perf_counter`` of
    the receiving process). ``held``: bytes of results ``dest`` holds once it is kept."""

    key: Hashable
    source: int
    dest: int
    nbytes: int
    start: float
    stop: float
    held: int = -1


@dataclass(frozen=True, slots=True)
class LeaseExpired(Event):
    """Serverless: the lease of task ``key`` held by ``worker`` (a worker id) expired at
    ``time`` (its worker died or stalled); the task was offered again, for the ``lost``-th
    time."""

    key: Hashable
    worker: str
    time: float
    lost: int


@dataclass(frozen=True, slots=True)
class BackupStarted(Event):
    """Serverless: task ``key``, running on ``worker`` (a worker id) much longer than the
    finished tasks of its kind, was offered to another worker at ``time``; the first of the
    two copies to finish counts."""

    key: Hashable
    worker: str
    time: float


@dataclass(frozen=True, slots=True)
class PoolQueue(Event):
    """Serverless: at ``time``, ``ready`` tasks were waiting in the pool's queue and
    ``running`` were leased to workers (sampled twice a second during a run)."""

    time: float
    ready: int
    running: int


@dataclass(frozen=True, slots=True)
class WorkersScaled(Event):
    """Serverless: ``alive`` workers served the pool at ``time`` (after the provisioner
    started or stopped some, or some died: ``reason``)."""

    time: float
    alive: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RunEnd(Event):
    """A run ended with ``status`` ``"done"``, ``"failed"`` or ``"cancelled"``.
    ``peak_bytes``: most bytes of results held in memory at once; ``spilled_bytes`` and
    ``unspilled_bytes``: bytes written to and read back from disk; ``recomputed_bytes``:
    bytes of results dropped under memory pressure and made again; ``staged_bytes``: bytes
    written by tasks to a rechunk's intermediate store on disk (and read back by others).
    ``remade``: op kind -> blocks dropped under memory pressure and made again;
    ``spilled_unrepeatable``: op kind -> blocks written to disk instead of being made again
    because their source may not give the same block again, ``unrepeatable_reasons``: op
    kind -> why. ``peak_rss``: the process's largest resident set during the run, sampled
    when a ``memory_limit`` was given (0 otherwise)."""

    status: str
    ndone: int
    elapsed: float
    peak_bytes: int = 0
    spilled_bytes: int = 0
    unspilled_bytes: int = 0
    recomputed_bytes: int = 0
    staged_bytes: int = 0
    remade: dict[str, int] = field(default_factory=dict)
    spilled_unrepeatable: dict[str, int] = field(default_factory=dict)
    unrepeatable_reasons: dict[str, str] = field(default_factory=dict)
    peak_rss: int = 0


_global_subscribers: list[Subscriber] = []


def global_subscribers() -> tuple[Subscriber, ...]:
    """The subscribers registered with :func:`subscribe`."""
    return tuple(_global_subscribers)


@contextmanager
def subscribe(fn: Subscriber) -> Iterator[Subscriber]:
    """Send the events of every run started inside the block to ``fn``."""
    if not callable(fn):
        raise TypeError(f"an event subscriber must be callable, got {type(fn).__name__}")
    _global_subscribers.append(fn)
    try:
        yield fn
    finally:
        _global_subscribers.remove(fn)


def nbytes_of(value: object) -> int:
    """Bytes held by a task result: exact for arrays, compressed sparse matrices (their
    data, indices and pointers) and tuples or lists of them, nothing for ``None`` (the one
    shared object: a task whose result is written elsewhere holds nothing), ``sys.getsizeof``
    otherwise."""
    if value is None:
        return 0
    nb = getattr(value, "nbytes", None)
    if isinstance(nb, int):
        return nb
    tp = type(value)
    if tp is tuple or tp is list:
        return sum(nbytes_of(v) for v in value)
    if tp.__module__.startswith("scipy.sparse"):  # no failing attribute lookups per task
        parts = [getattr(value, name, None) for name in ("data", "indices", "indptr")]
        if all(isinstance(getattr(p, "nbytes", None), int) for p in parts):
            return sum(p.nbytes for p in parts)
    try:
        return sys.getsizeof(value)
    except TypeError:
        return 0
