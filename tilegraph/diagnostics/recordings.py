"""The recordings a run report is drawn from, read: each process's
:meth:`~tilegraph.diagnostics.recorder.Recorder.data` checked
(:func:`validate_recordings`), its times put on the report's time axis (seconds since the
earliest start among the processes; clocks of several machines aligned on the wall-clock
time of each start) as a :class:`ProcessRecord` (:func:`read_processes`), and the time
scale of the charts (:func:`time_scale`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilegraph.diagnostics.drawing import Scale
from tilegraph.diagnostics.recorder import FORMAT, VERSION, TaskRecord, TransferRecord


@dataclass
class ProcessRecord:
    """One process's recording, its times in seconds of the report's time axis."""

    rank: int
    host: str
    backend: str
    ntasks: int
    nworkers: int
    start: float | None
    tasks: list[TaskRecord]
    transfers: list[TransferRecord]
    memory: list[tuple[float, int]]
    failures: int
    end: dict[str, Any] | None
    alive: list[tuple[float, int]] = field(default_factory=list)
    expired: list[tuple[float, str]] = field(default_factory=list)
    queue: list[tuple[float, int]] = field(default_factory=list)

    @property
    def stop(self) -> float | None:
        """When the process's run ended (``None``: not recorded)."""
        if self.end is None or self.start is None:
            return None
        return self.start + float(self.end.get("elapsed", 0.0))


def validate_recordings(recordings: object) -> list[dict[str, Any]]:
    """``recordings`` as a list, once each is known to be a :meth:`Recorder.data` of its own
    rank; else a ``ValueError`` naming the recording and what is wrong with it."""
    what = "the Recorder.data() of every process of the run"
    if not isinstance(recordings, (list, tuple)):
        raise ValueError(f"recordings must be a list of {what}, "
                         f"got {type(recordings).__name__}")
    if not recordings:
        raise ValueError(f"recordings is empty: pass {what}")
    ranks: set[int] = set()
    for i, rec in enumerate(recordings):
        if not isinstance(rec, dict):
            raise ValueError(f"recordings[{i}] is a {type(rec).__name__}, not the dict of "
                             "Recorder.data()")
        if rec.get("format") != FORMAT:
            raise ValueError(f"recordings[{i}] was not made by Recorder.data() "
                             f"(its 'format' is not {FORMAT!r})")
        if rec.get("version") != VERSION:
            raise ValueError(f"recordings[{i}] has version {rec.get('version')!r}; this "
                             f"report reads version {VERSION}")
        for name in ("tasks", "transfers", "memory"):
            if not isinstance(rec.get(name), (list, tuple)):
                raise ValueError(f"recordings[{i}][{name!r}] is missing or not a list")
        rank = rec.get("rank")
        if not isinstance(rank, int):
            raise ValueError(f"recordings[{i}]['rank'] is {rank!r}, not an int")
        if rank in ranks:
            raise ValueError(f"two recordings of rank {rank}: pass one per process of the run")
        ranks.add(rank)
    return list(recordings)


def _first_time(rec: dict[str, Any]) -> float | None:
    times = [t[1] for t in rec["tasks"]] + [t[4] for t in rec["transfers"]]
    times += [m[0] for m in rec["memory"]]
    return min(times) if times else None


def _origins(recs: list[dict[str, Any]]) -> list[float]:
    """Per recording, the reading of its clock that is time 0 of the report."""
    starts = [rec.get("start") if rec.get("start") is not None else _first_time(rec)
              for rec in recs]
    walls = [rec.get("wall") for rec in recs]
    one_clock = len({rec.get("host") for rec in recs}) <= 1
    if one_clock or any(s is None for s in starts) or any(w is None for w in walls):
        t0 = min((s for s in starts if s is not None), default=0.0)
        return [t0] * len(recs)
    w0 = min(walls)
    return [s - (w - w0) for s, w in zip(starts, walls, strict=True)]


def read_processes(recs: list[dict[str, Any]]) -> list[ProcessRecord]:
    """The :class:`ProcessRecord` of each recording, on the report's time axis, by rank."""
    procs = []
    for rec, o in zip(recs, _origins(recs), strict=True):
        start = rec.get("start")
        procs.append(ProcessRecord(
            rank=rec["rank"], host=str(rec.get("host", "")), backend=str(rec.get("backend", "")),
            ntasks=int(rec.get("ntasks") or 0), nworkers=int(rec.get("nworkers") or 0),
            start=None if start is None else start - o,
            tasks=[(int(w), s - o, e - o, int(nb), str(k), str(n), str(key))
                   for w, s, e, nb, k, n, key in rec["tasks"]],
            transfers=[(str(key), int(src), int(dst), int(nb), s - o, e - o)
                       for key, src, dst, nb, s, e in rec["transfers"]],
            memory=[(t - o, int(h)) for t, h in rec["memory"]],
            failures=len(rec.get("failures") or ()),
            end=rec.get("end"),
            alive=[(t - o, int(n)) for t, n in rec.get("alive") or ()],
            expired=[(t - o, str(k)) for t, k in rec.get("expired") or ()],
            queue=[(t - o, int(n)) for t, n in rec.get("queue") or ()],
        ))
    return sorted(procs, key=lambda p: p.rank)


def time_scale(procs: list[ProcessRecord]) -> Scale:
    """The time scale of the charts: from the first start to the last end of anything
    recorded (at least a microsecond)."""
    lows, highs = [0.0], [0.0]
    for p in procs:
        lows += [t[1] for t in p.tasks] + [t[4] for t in p.transfers]
        highs += [t[2] for t in p.tasks] + [t[5] for t in p.transfers]
        highs += [m[0] for m in p.memory]
        if p.stop is not None:
            highs.append(p.stop)
    lo, hi = min(lows), max(highs)
    return Scale(lo, hi if hi - lo > 1e-9 else lo + 1e-6)
