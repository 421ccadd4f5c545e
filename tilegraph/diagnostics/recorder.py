"""Recording a run for its report: the :class:`Recorder` event subscriber and the plain
data it produces.

A :class:`Recorder` subscribed to a run keeps, for one process, what the report of the run
needs: its start, every finished task and transfer, the bytes of results held over time,
failures and its end. :meth:`Recorder.data` gives it as plain picklable data (dicts, lists,
tuples, numbers, strings), which can be sent between processes (under MPI, gathered on rank
0) and stored as JSON; :func:`tilegraph.diagnostics.report.write_report` renders it::

    rec = Recorder()
    x.compute(callbacks=[rec])
    write_report("run.html", [rec.data()], summary=x.explain())

The dict of :meth:`Recorder.data` holds ``format`` (:data:`FORMAT`), ``version``
(:data:`VERSION`), ``rank``, ``host``, ``start`` (``time.perf_counter()`` at the run's start),
``wall`` (``time.time()`` at the same moment), ``backend``, ``ntasks``, ``nworkers``,
``tasks`` (:data:`TaskRecord` tuples), ``transfers`` (:data:`TransferRecord` tuples),
``memory`` (``(time, bytes held)`` pairs), ``failures`` (``(key, name, worker, exception
type name, retried)`` tuples) and ``end`` (the figures of the run's ``RunEnd``, or None).
"""

from __future__ import annotations

import socket
import time
from typing import Any

from tilegraph.runtime.events import (
    Event,
    LeaseExpired,
    PoolQueue,
    RunEnd,
    RunStart,
    TaskEnd,
    TaskFailed,
    Transfer,
    WorkersScaled,
)

#: The ``format`` of every recording, and the ``version`` of its layout.
FORMAT = "tilegraph-report-recording"
VERSION = 1

_KEY_CHARS = 200  # longest key text kept

#: A finished task: (worker, start, stop, nbytes, kind, name, key).
TaskRecord = tuple[int, float, float, int, str, str, str]
#: A transfer into the process: (key, source rank, dest rank, nbytes, start, stop).
TransferRecord = tuple[str, int, int, int, float, float]


def _key_text(key: object) -> str:
    text = str(key)
    return text if len(text) <= _KEY_CHARS else text[:_KEY_CHARS - 3] + "..."


class Recorder:
    """An event subscriber keeping what the report of a run needs, for one process.

    Pass it as ``callbacks=[recorder]`` or subscribe it with ``tilegraph.subscribe``. It
    records the run's start (rank and time), every finished task, every transfer, the bytes
    of results held after each event that tells them (for memory over time) and the run's
    end; task keys are kept as they are, and turned into text by :meth:`data`. A recorder
    keeps one run: a new :class:`~tilegraph.runtime.events.RunStart` starts a fresh
    recording. Events without a time of their own (releases, spills) are stamped with
    ``time.perf_counter()`` when they arrive; events reach subscribers as they happen,
    under the executor's lock.
    """

    def __init__(self) -> None:
        self._host = socket.gethostname()
        self._clear()

    def _clear(self) -> None:
        self._rank = 0
        self._start: float | None = None
        self._wall: float | None = None
        self._backend = ""
        self._ntasks = 0
        self._nworkers = 0
        self._tasks: list[tuple[Any, ...]] = []
        self._transfers: list[tuple[Any, ...]] = []
        self._memory: list[tuple[float, int]] = []
        self._failures: list[tuple[str, str, int, str, bool]] = []
        self._alive: list[tuple[float, int]] = []  # serverless: workers alive over time
        self._queue: list[tuple[float, int]] = []  # serverless: tasks ready or running
        self._expired: list[tuple[float, str]] = []  # serverless: leases that expired
        self._end: dict[str, Any] | None = None

    def _held(self, t: float, held: int) -> None:
        # Events arrive in the order they happened; keep their times in that order too.
        if self._memory and t < self._memory[-1][0]:
            t = self._memory[-1][0]
        self._memory.append((t, int(held)))

    def __call__(self, event: Event) -> None:
        """Record ``event``."""
        if isinstance(event, TaskEnd):
            # Keys are turned into text by data(), not here, under the executor's lock.
            self._tasks.append((event.worker, event.start, event.stop, event.nbytes,
                                event.kind, event.name, event.key))
            if event.held >= 0:
                self._held(float(event.stop), event.held)
        elif isinstance(event, Transfer):
            self._transfers.append((event.key, event.source, event.dest, event.nbytes,
                                    event.start, event.stop))
            if event.held >= 0:
                self._held(float(event.stop), event.held)
        elif isinstance(event, RunStart):
            now = time.perf_counter()
            self._clear()
            self._rank = int(event.rank)
            self._start = float(event.time) if event.time > 0 else now
            self._wall = time.time() - (now - self._start)
            self._backend = str(event.backend)
            self._ntasks = int(event.ntasks)
            self._nworkers = int(event.nworkers)
        elif isinstance(event, RunEnd):
            self._end = {"status": str(event.status), "ndone": int(event.ndone),
                         "elapsed": float(event.elapsed), "peak_bytes": int(event.peak_bytes),
                         "spilled_bytes": int(event.spilled_bytes),
                         "unspilled_bytes": int(event.unspilled_bytes),
                         "recomputed_bytes": int(event.recomputed_bytes),
                         "staged_bytes": int(event.staged_bytes),
                         "remade": {str(k): int(n) for k, n in event.remade.items()},
                         "spilled_unrepeatable": {
                             str(k): int(n) for k, n in event.spilled_unrepeatable.items()},
                         "unrepeatable_reasons": {
                             str(k): str(v) for k, v in event.unrepeatable_reasons.items()}}
        elif isinstance(event, WorkersScaled):
            self._alive.append((float(event.time), int(event.alive)))
        elif isinstance(event, PoolQueue):
            self._queue.append((float(event.time), int(event.ready) + int(event.running)))
        elif isinstance(event, LeaseExpired):
            self._expired.append((float(event.time), _key_text(event.key)))
        elif isinstance(event, TaskFailed):
            self._failures.append((_key_text(event.key), str(event.name), int(event.worker),
                                   type(event.error).__name__, bool(event.retry)))
        else:
            held = getattr(event, "held", -1)
            if isinstance(held, int) and held >= 0:
                self._held(time.perf_counter(), held)

    def data(self) -> dict[str, Any]:
        """What was recorded, as plain picklable data (dicts, lists, tuples, numbers,
        strings): task keys as their ``str()``, failures as the name of the exception's
        type. Send it to the process writing the report (under MPI, gather it on rank 0)."""
        return {
            "format": FORMAT, "version": VERSION, "rank": self._rank, "host": self._host,
            "start": self._start, "wall": self._wall, "backend": self._backend,
            "ntasks": self._ntasks, "nworkers": self._nworkers,
            "tasks": [(int(w), float(s), float(e), int(nb), str(kind or ""), str(name),
                       _key_text(key)) for w, s, e, nb, kind, name, key in self._tasks],
            "transfers": [(_key_text(key), int(src), int(dst), int(nb), float(s), float(e))
                          for key, src, dst, nb, s, e in self._transfers],
            "memory": list(self._memory), "failures": list(self._failures),
            "alive": list(self._alive), "expired": list(self._expired),
            "queue": list(self._queue),
            "end": None if self._end is None else dict(self._end),
        }
