"""The HTML report of a run, rendered from recordings: the task stream, memory over time,
the processes and the plan.

:func:`write_report` turns the recordings of every process of the run (the
:meth:`~tilegraph.diagnostics.recorder.Recorder.data` of one recorder on a single machine, one
per rank under MPI) into one self-contained HTML file with inline SVG charts and no external
resources::

    rec = Recorder()
    x.compute(callbacks=[rec])
    write_report("run.html", [rec.data()], summary=x.explain())

Under MPI every rank records its own events and rank 0 writes the report::

    recordings = comm.gather(rec.data(), root=0)
    if comm.rank == 0:
        write_report("run.html", recordings)

Times are seconds since the earliest start of a run among the processes. Processes on one
machine share its monotonic clock (``time.perf_counter``); when the recordings come from
several machines, each process's clock is aligned on the wall-clock time of its start.

:class:`~tilegraph.diagnostics.recorder.Recorder` is importable from here too, beside the
function that reads what it records.
"""

from __future__ import annotations

import contextlib
import math
import os
import pathlib
import secrets
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from html import escape
from itertools import pairwise
from typing import Any

import numpy as np

from tilegraph.diagnostics.recorder import (
    FORMAT,
    VERSION,
    Recorder,
    TaskRecord,
    TransferRecord,
)
from tilegraph.util import human

__all__ = ["Recorder", "kind_colour", "rank_colour", "write_report"]


#: Above this many tasks in a report, tasks closer than a pixel on a worker's row are drawn
#: as one rect, so that the file stays a few MB however long the run.
MERGE_ABOVE = 20_000
#: Most points of a process's memory line (each bucket of time keeps its highest value).
MAX_MEMORY_POINTS = 4_000

#: Fill of each op kind in the task stream.
KIND_COLOURS: dict[str, str] = {
    "product": "#1f77b4", "accumulate": "#aec7e8", "elementwise": "#ff7f0e",
    "map": "#ffbb78", "reduce": "#2ca02c", "partial": "#98df8a", "aggregate": "#17becf",
    "load": "#9467bd", "random": "#c5b0d5", "store": "#d62728", "creation": "#e377c2",
    "rechunk": "#8c564b", "stage": "#5c3c32", "getitem": "#c49c94", "transpose": "#bcbd22",
    "reshape": "#dbdb8d", "astype": "#9edae5",
}
#: Fills of kinds not in :data:`KIND_COLOURS`, chosen by a hash of the kind's name.
OTHER_KIND_COLOURS = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
                      "#e6550d", "#31a354")
#: Fill of tasks without a kind.
NO_KIND_COLOUR = "#9e9e9e"
#: Colour of each rank (cycled): its memory line, and transfers coming from it.
RANK_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")

_LEFT = 170  # room for row labels and y-axis labels
_PLOT = 1000  # width of the time axis in pixels
_RIGHT = 24
_ROW = 16  # height of a worker's row
_LANE = 4  # height of one lane of a transfers row
_MAX_LANES = 4
_GAP = 2
_RANK_GAP = 8
_AXIS = 28  # room below a chart for the time axis
_MEMORY_HEIGHT = 180


# -- reading recordings ------------------------------------------------------------------------


@dataclass
class _Process:
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
        if self.end is None or self.start is None:
            return None
        return self.start + float(self.end.get("elapsed", 0.0))


def _validate(recordings: object) -> list[dict[str, Any]]:
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


def _processes(recs: list[dict[str, Any]]) -> list[_Process]:
    procs = []
    for rec, o in zip(recs, _origins(recs), strict=True):
        start = rec.get("start")
        procs.append(_Process(
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


@dataclass(frozen=True)
class _Scale:
    """Seconds ``lo``..``hi`` of the run on ``_PLOT`` pixels right of ``_LEFT``."""

    lo: float
    hi: float

    def x(self, t: float) -> float:
        return _LEFT + (t - self.lo) / (self.hi - self.lo) * _PLOT

    @property
    def pixel(self) -> float:
        """Seconds per pixel."""
        return (self.hi - self.lo) / _PLOT


def _scale(procs: list[_Process]) -> _Scale:
    lows, highs = [0.0], [0.0]
    for p in procs:
        lows += [t[1] for t in p.tasks] + [t[4] for t in p.transfers]
        highs += [t[2] for t in p.tasks] + [t[5] for t in p.transfers]
        highs += [m[0] for m in p.memory]
        if p.stop is not None:
            highs.append(p.stop)
    lo, hi = min(lows), max(highs)
    return _Scale(lo, hi if hi - lo > 1e-9 else lo + 1e-6)


# -- drawing helpers ---------------------------------------------------------------------------


def _n(v: float) -> str:
    """A coordinate, to a tenth of a pixel."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _duration(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} \u00b5s"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def _at(t: float) -> str:
    return f"{t:.4f} s"


def kind_colour(kind: str) -> str:
    """The fill of tasks of op kind ``kind`` (grey when it has none)."""
    if not kind:
        return NO_KIND_COLOUR
    colour = KIND_COLOURS.get(kind)
    if colour is None:
        colour = OTHER_KIND_COLOURS[zlib.crc32(kind.encode()) % len(OTHER_KIND_COLOURS)]
    return colour


def rank_colour(rank: int) -> str:
    """The colour of rank ``rank``."""
    return RANK_COLOURS[rank % len(RANK_COLOURS)]


def _nice_step(span: float, count: int) -> float:
    """A step of 1, 2 or 5 times a power of ten giving about ``count`` ticks over ``span``."""
    raw = span / max(count, 1)
    if raw <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power


def _time_ticks(scale: _Scale) -> list[tuple[float, str]]:
    step = _nice_step(scale.hi - scale.lo, 6)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    first = math.ceil(scale.lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= scale.hi + step * 1e-9:
        ticks.append((k * step, f"{k * step:.{decimals}f} s"))
        k += 1
    return ticks


def _time_axis(scale: _Scale, top: float, bottom: float) -> Iterator[str]:
    """Vertical grid lines from ``top`` to ``bottom`` and tick labels under them."""
    yield (f'<g class="axis"><line x1="{_LEFT}" y1="{_n(bottom)}" x2="{_LEFT + _PLOT}" '
           f'y2="{_n(bottom)}" stroke="#888"/>')
    for t, label in _time_ticks(scale):
        x = _n(scale.x(t))
        yield (f'<line x1="{x}" y1="{_n(top)}" x2="{x}" y2="{_n(bottom + 4)}" '
               f'stroke="#ddd"/><text x="{x}" y="{_n(bottom + 16)}" '
               f'text-anchor="middle">{escape(label)}</text>')
    yield "</g>"


def _svg_open(width: float, height: float, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" '
            f'height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" role="img" '
            f'aria-label="{escape(label)}">')


# -- task stream -------------------------------------------------------------------------------


@dataclass
class _Group:
    """Tasks on one row drawn as one rect."""

    start: float
    stop: float
    n: int
    nbytes: int
    counts: Counter[str]
    busy: dict[str, float]
    first: TaskRecord

    def add(self, task: TaskRecord) -> None:
        self.stop = max(self.stop, task[2])
        self.n += 1
        self.nbytes += task[3]
        self.counts[task[4]] += 1
        self.busy[task[4]] = self.busy.get(task[4], 0.0) + (task[2] - task[1])


def _merge_tasks(tasks: list[TaskRecord], pixel: float) -> list[_Group]:
    """Tasks of one row (sorted by start) merged where less than a pixel apart: tasks of one
    kind into one rect; tasks of different kinds too while both the rect so far and the
    next task are narrower than a pixel (they could not be told apart anyway). The rect is
    coloured by the kind that kept it busy longest."""
    groups: list[_Group] = []
    g: _Group | None = None
    for task in tasks:
        s, e, kind = task[1], task[2], task[4]
        if g is not None and s - g.stop < pixel and (
                (len(g.busy) == 1 and kind in g.busy)
                or (g.stop - g.start < pixel and e - s < pixel)):
            g.add(task)
        else:
            g = _Group(s, e, 1, task[3], Counter({kind: 1}), {kind: e - s}, task)
            groups.append(g)
    return groups


def _task_rect(x: float, y: float, w: float, fill: str, tip: str) -> str:
    return (f'<rect class="task" x="{_n(x)}" y="{_n(y)}" width="{_n(max(w, 0.2))}" '
            f'height="{_ROW}" fill="{fill}"><title>{escape(tip)}</title></rect>')


def _task_tip(task: TaskRecord) -> str:
    w, s, e, nb, kind, name, key = task
    return (f"{name}\nkey: {key}\n{_duration(e - s)} on worker {w}, from {_at(s)}\n"
            f"{human(nb)}" + (f"\nkind: {kind}" if kind else ""))


def _task_rects(tasks: list[TaskRecord], scale: _Scale, y: float,
                merge: bool) -> Iterator[str]:
    """The rects of the tasks of one row: one per task, or merged (see _merge_tasks)."""
    tasks = sorted(tasks, key=lambda t: t[1])
    if not merge:
        for task in tasks:
            s, e = task[1], task[2]
            yield _task_rect(scale.x(s), y, scale.x(e) - scale.x(s), kind_colour(task[4]),
                             _task_tip(task))
        return
    for g in _merge_tasks(tasks, scale.pixel):
        main = max(g.busy, key=lambda k: g.busy[k])
        if g.n == 1:
            tip = _task_tip(g.first)
        else:
            kinds = ", ".join(f"{v} {k or 'no kind'}" for k, v in sorted(g.counts.items()))
            tip = (f"{g.n} tasks ({kinds})\n{_at(g.start)} to {_at(g.stop)}, busy "
                   f"{_duration(sum(g.busy.values()))}\n{human(g.nbytes)}")
        yield _task_rect(scale.x(g.start), y, scale.x(g.stop) - scale.x(g.start),
                         kind_colour(main), tip)


def _lanes(transfers: list[TransferRecord]) -> list[int]:
    """A lane for each transfer (sorted by start), so that few of them overlap."""
    ends: list[float] = []
    lanes = []
    for t in transfers:
        free = [i for i, end in enumerate(ends) if end <= t[4]]
        if free:
            lane = free[0]
        elif len(ends) < _MAX_LANES:
            lane = len(ends)
            ends.append(0.0)
        else:
            lane = min(range(len(ends)), key=ends.__getitem__)
        ends[lane] = max(ends[lane], t[5])
        lanes.append(lane)
    return lanes


def _merge_transfers(transfers: list[TransferRecord],
                     pixel: float) -> list[tuple[TransferRecord, int]]:
    """Transfers (sorted by start) from one source less than a pixel apart as one mark,
    each with the number of transfers it stands for; sorted by start."""
    out: list[tuple[TransferRecord, int]] = []
    by_source: dict[int, list[TransferRecord]] = defaultdict(list)
    for t in transfers:
        by_source[t[1]].append(t)
    for ts in by_source.values():
        key, src, dst, nb, s, e = ts[0]
        n = 1
        for t in ts[1:]:
            if t[4] - e < pixel:
                nb, e, n = nb + t[3], max(e, t[5]), n + 1
            else:
                out.append(((key, src, dst, nb, s, e), n))
                key, src, dst, nb, s, e = t
                n = 1
        out.append(((key, src, dst, nb, s, e), n))
    return sorted(out, key=lambda m: m[0][4])


def _transfer_marks(transfers: list[TransferRecord], scale: _Scale, y: float,
                    merge: bool) -> Iterator[str]:
    marks = ([(t, 1) for t in sorted(transfers, key=lambda t: t[4])] if not merge
             else _merge_transfers(sorted(transfers, key=lambda t: t[4]), scale.pixel))
    for (t, n), lane in zip(marks, _lanes([m[0] for m in marks]), strict=True):
        key, src, dst, nb, s, e = t
        x1 = scale.x(s)
        x2 = max(scale.x(e), x1 + 1)
        ly = y + 1 + lane * _LANE + _LANE / 2
        if n == 1:
            tip = (f"{key}\nrank {src} \u2192 rank {dst}\n{human(nb)} in {_duration(e - s)}, "
                   f"from {_at(s)}")
        else:
            tip = (f"{n} transfers, rank {src} \u2192 rank {dst}\n{human(nb)}\n"
                   f"{_at(s)} to {_at(e)}")
        yield (f'<line class="transfer" x1="{_n(x1)}" y1="{_n(ly)}" x2="{_n(x2)}" '
               f'y2="{_n(ly)}" stroke="{rank_colour(src)}" stroke-width="3">'
               f"<title>{escape(tip)}</title></line>")


def _task_stream(procs: list[_Process], scale: _Scale, merge: bool) -> Iterator[str]:
    """The task stream section: legend and chart."""
    yield "<section><h2>Task stream</h2>\n"
    tasks = [t for p in procs for t in p.tasks]
    if not tasks and not any(p.transfers for p in procs):
        yield '<p class="empty">No task ran.</p>\n</section>\n'
        return
    kinds: Counter[str] = Counter(t[4] for t in tasks)
    busy: dict[str, float] = defaultdict(float)
    for t in tasks:
        busy[t[4]] += t[2] - t[1]
    yield '<ul class="legend kinds">'
    for kind in sorted(kinds, key=lambda k: (k == "", k)):
        yield (f'<li><span class="swatch" style="background:{kind_colour(kind)}"></span>'
               f'<span class="kind">{escape(kind or "no kind")}</span> '
               f'<span class="n">{kinds[kind]} tasks, {_duration(busy[kind])}</span></li>')
    yield "</ul>\n"
    sources = sorted({t[1] for p in procs for t in p.transfers})
    if sources:
        yield '<ul class="legend sources"><li>transfers from:</li>'
        for r in sources:
            yield (f'<li><span class="swatch" style="background:{rank_colour(r)}"></span>'
                   f"rank {r}</li>")
        yield "</ul>\n"
    if merge:
        yield ('<p class="note">Tasks less than a pixel apart on a row are drawn as one '
               "rect; its tooltip tells how many.</p>\n")

    multi = len(procs) > 1
    body: list[str] = []
    y = 6.0
    for p in procs:
        prefix = f"rank {p.rank} / " if multi else ""
        by_worker: dict[int, list[TaskRecord]] = defaultdict(list)
        for t in p.tasks:
            by_worker[t[0]].append(t)
        for w in sorted(set(range(p.nworkers)) | set(by_worker)):
            body.append(f'<g class="row"><rect x="{_LEFT}" y="{_n(y)}" width="{_PLOT}" '
                        f'height="{_ROW}" fill="#f4f4f4"/><text x="{_LEFT - 6}" '
                        f'y="{_n(y + _ROW - 4)}" text-anchor="end">'
                        f"{escape(f'{prefix}worker {w}')}</text>")
            body.extend(_task_rects(by_worker[w], scale, y, merge))
            body.append("</g>")
            y += _ROW + _GAP
        if p.transfers:
            nlanes = min(len(p.transfers), _MAX_LANES)
            height = nlanes * _LANE + 2
            body.append(f'<g class="transfers"><rect x="{_LEFT}" y="{_n(y)}" width="{_PLOT}" '
                        f'height="{height}" fill="#fbfbfb"/><text x="{_LEFT - 6}" '
                        f'y="{_n(y + height / 2 + 4)}" text-anchor="end" class="small">'
                        f"{escape(f'{prefix}transfers in')}</text>")
            body.extend(_transfer_marks(p.transfers, scale, y, merge))
            body.append("</g>")
            y += height + _GAP
        y += _RANK_GAP
    bottom = y
    yield _svg_open(_LEFT + _PLOT + _RIGHT, bottom + _AXIS, "task stream")
    yield from _time_axis(scale, 2, bottom)
    yield from body
    yield "</svg>\n</section>\n"


# -- memory ------------------------------------------------------------------------------------


def _downsample(samples: Sequence[tuple[float, int]], scale: _Scale,
                buckets: int) -> list[tuple[float, int]]:
    """``samples`` in time order; over ``buckets`` of them, one per bucket of time with the
    bucket's highest value."""
    t = np.array([s[0] for s in samples], dtype=np.float64)
    h = np.array([s[1] for s in samples], dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t, h = t[order], h[order]
    if len(t) <= buckets:
        return list(zip(t.tolist(), h.tolist(), strict=True))
    idx = ((t - scale.lo) / (scale.hi - scale.lo) * buckets).astype(np.int64)
    idx = np.clip(idx, 0, buckets - 1)
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    return list(zip(t[starts].tolist(), np.maximum.reduceat(h, starts).tolist(), strict=True))


def _byte_ticks(top: int) -> tuple[list[float], int, str]:
    """Ticks from 0 to at least ``top`` bytes, and the unit (bytes, name) to label them."""
    unit, name = 1, "B"
    for i, n in enumerate(("KiB", "MiB", "GiB", "TiB"), start=1):
        if top >= 1024**i:
            unit, name = 1024**i, n
    step = max(_nice_step(top / unit, 4) * unit, 1.0)
    count = max(1, math.ceil(top / step - 1e-9))
    return [k * step for k in range(count + 1)], unit, name


def _memory_chart(procs: list[_Process], scale: _Scale) -> Iterator[str]:
    """The memory section: bytes of results held by each process over time."""
    yield "<section><h2>Memory held</h2>\n"
    series = []
    for p in procs:
        if not p.memory:
            continue
        samples = list(p.memory)
        if p.start is not None and p.start <= samples[0][0]:
            samples.insert(0, (p.start, 0))
        points = _downsample(samples, scale, MAX_MEMORY_POINTS // 2)
        end = p.stop if p.stop is not None and p.stop >= points[-1][0] else scale.hi
        series.append((p, points, end))
    if not series:
        yield '<p class="empty">No memory was recorded.</p>\n'
    else:
        if len(procs) > 1:
            yield '<ul class="legend ranks">'
            for p, _, _ in series:
                yield (f'<li><span class="swatch" style="background:{rank_colour(p.rank)}">'
                       f"</span>rank {p.rank}</li>")
            yield "</ul>\n"
        top = max(1, max(h for _, points, _ in series for _, h in points))
        ticks, unit, name = _byte_ticks(top)
        ymax = max(ticks[-1], 1)
        y0, height = 8.0, float(_MEMORY_HEIGHT)

        def y(v: float) -> float:
            return y0 + height - v / ymax * height

        yield _svg_open(_LEFT + _PLOT + _RIGHT, y0 + height + _AXIS, "memory held over time")
        yield from _time_axis(scale, y0, y0 + height)
        yield '<g class="axis">'
        for v in ticks:
            label = f"{v / unit:g} {name}" if v else "0"
            yield (f'<line x1="{_LEFT - 4}" y1="{_n(y(v))}" x2="{_LEFT + _PLOT}" '
                   f'y2="{_n(y(v))}" stroke="#eee"/><text x="{_LEFT - 6}" y="{_n(y(v) + 4)}" '
                   f'text-anchor="end">{escape(label)}</text>')
        yield "</g>"
        for p, points, end in series:
            xy = [(scale.x(points[0][0]), y(points[0][1]))]
            for (_, before), (t, h) in pairwise(points):
                x = scale.x(t)
                xy += [(x, y(before)), (x, y(h))]
            xy.append((scale.x(end), y(points[-1][1])))
            text = " ".join(f"{_n(a)},{_n(b)}" for a, b in xy)
            peak = max(h for _, h in points)
            yield (f'<polyline class="memory" fill="none" stroke="{rank_colour(p.rank)}" '
                   f'stroke-width="1.5" points="{text}"><title>'
                   f"{escape(f'rank {p.rank}: up to {human(peak)} held')}</title></polyline>")
        yield "</svg>\n"
    ends = [p for p in procs if p.end is not None]
    if ends:
        yield ('<table><thead><tr><th>rank</th><th>peak held</th><th>spilled</th>'
               "<th>read back</th><th>recomputed</th><th>staged on disk</th>"
               "<th>blocks remade</th><th>spilled, source not repeatable</th></tr></thead>"
               "<tbody>")
        for p in ends:
            end = p.end or {}
            yield (f"<tr><td>{p.rank}</td><td>{escape(human(end.get('peak_bytes', 0)))}</td>"
                   f"<td>{escape(human(end.get('spilled_bytes', 0)))}</td>"
                   f"<td>{escape(human(end.get('unspilled_bytes', 0)))}</td>"
                   f"<td>{escape(human(end.get('recomputed_bytes', 0)))}</td>"
                   f"<td>{escape(human(end.get('staged_bytes', 0)))}</td>"
                   f"<td>{escape(_per_kind(end.get('remade') or {}))}</td>"
                   f"<td>{escape(_per_kind(end.get('spilled_unrepeatable') or {}))}</td>"
                   "</tr>")
        yield "</tbody></table>\n"
        reasons = sorted({(k, why) for p in ends
                          for k, why in ((p.end or {}).get("unrepeatable_reasons") or {}
                                         ).items()})
        if reasons:
            yield '<p>Not made again, because a block read again may differ: '
            yield "; ".join(f"{escape(k)}: {escape(why)}" for k, why in reasons)
            yield "</p>\n"
    yield "</section>\n"


def _per_kind(counts: dict[str, int]) -> str:
    """Blocks per op kind, e.g. ``"12 (load 8, random 4)"`` (``"0"`` for none)."""
    if not counts:
        return "0"
    return (f"{sum(counts.values())} ("
            + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) + ")")


def _pool_chart(procs: list[_Process], scale: _Scale) -> Iterator[str]:
    """Serverless runs: workers alive (a step line) against the tasks ready or running
    (numpywren's Figure 10b), and tasks finished per second (bars) over time, with a mark
    at each expired lease: how a pool follows its queue and recovers from lost workers."""
    pools = [p for p in procs if p.alive]
    if not pools:
        return
    p = pools[0]
    yield "<section><h2>Pool: workers alive and tasks per second</h2>\n"
    span = max(scale.hi - scale.lo, 1e-9)
    nbins = max(1, min(120, int(span) + 1))
    width = span / nbins
    counts = [0] * nbins
    for t in p.tasks:
        if t[4] == "pool":
            k = min(nbins - 1, max(0, int((t[2] - scale.lo) / width)))
            counts[k] += 1
    rates = [c / width for c in counts]
    top_rate = max(max(rates), 1e-9)
    top_alive = max(max(n for _, n in p.alive), max((n for _, n in p.queue), default=0), 1)
    y0, height = 8.0, float(_MEMORY_HEIGHT)
    yield _svg_open(_LEFT + _PLOT + _RIGHT, y0 + height + _AXIS,
                    "workers alive and tasks per second over time")
    yield from _time_axis(scale, y0, y0 + height)
    for k, r in enumerate(rates):
        if r:
            x0 = scale.x(scale.lo + k * width)
            x1 = scale.x(scale.lo + (k + 1) * width)
            h = r / top_rate * height
            yield (f'<rect x="{_n(x0)}" y="{_n(y0 + height - h)}" width="{_n(max(x1 - x0 - 1, 1))}"'
                   f' height="{_n(h)}" fill="#9ecae1"><title>{r:.1f} tasks/s</title></rect>')
    for series, colour, what in ((p.queue, "#2ca02c", "tasks ready or running"),
                                 (p.alive, "#d62728", "workers alive")):
        pts = []
        last = None
        for t, n in series:
            yv = y0 + height - n / top_alive * height
            if last is not None:
                pts.append((scale.x(t), last))
            pts.append((scale.x(t), yv))
            last = yv
        if pts:
            pts.append((scale.x(scale.hi), last))
            text = " ".join(f"{_n(a)},{_n(b)}" for a, b in pts)
            most = max(n for _, n in series)
            yield (f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{text}"><title>{what} (most: {most})</title></polyline>')
    for t, key in p.expired:
        x = scale.x(t)
        yield (f'<line x1="{_n(x)}" y1="{y0}" x2="{_n(x)}" y2="{_n(y0 + height)}" '
               f'stroke="#ff7f0e" stroke-dasharray="3,2"><title>lease expired: '
               f"{escape(key)}</title></line>")
    yield "</svg>\n"
    core = sum(t[2] - t[1] for t in p.tasks)
    wall = (p.stop - p.start) if p.stop is not None and p.start is not None else span
    yield (f'<p class="note">Red line: workers alive; green line: tasks ready or running '
           f"(both 0 to {top_alive}); bars: tasks finished per second (most "
           f"{top_rate:.1f}); dashed: {len(p.expired)} expired leases (tasks offered again). "
           f"{core:.2f} core-seconds in tasks over {wall:.2f} s of wall time.</p>\n"
           "</section>\n")


# -- tables and page ---------------------------------------------------------------------------


def _process_table(procs: list[_Process]) -> Iterator[str]:
    """Per process: tasks run, busy seconds per worker, bytes received, peak held."""
    multi = len(procs) > 1
    yield "<section><h2>Processes</h2>\n<table><thead><tr>"
    heads = (["rank", "host"] if multi else []) + [
        "backend", "status", "tasks run", "failed attempts", "run time",
        "busy per worker", "received by transfer", "peak held"]
    yield "".join(f"<th>{escape(h)}</th>" for h in heads)
    yield "</tr></thead><tbody>\n"
    for p in procs:
        busy: dict[int, float] = defaultdict(float)
        for t in p.tasks:
            busy[t[0]] += t[2] - t[1]
        run = p.stop - p.start if p.stop is not None and p.start is not None else None
        per_worker = ", ".join(
            f"{w}: {_duration(busy[w])}" + (f" ({100 * busy[w] / run:.0f}%)" if run else "")
            for w in sorted(set(range(p.nworkers)) | set(busy)))
        received = sum(t[3] for t in p.transfers)
        peak = (p.end or {}).get("peak_bytes") or max((h for _, h in p.memory), default=0)
        cells = ([str(p.rank), p.host] if multi else []) + [
            p.backend or "?", str((p.end or {}).get("status", "?")), str(len(p.tasks)),
            str(p.failures), "?" if run is None else _duration(run), per_worker or "-",
            f"{human(received)} in {len(p.transfers)}" if p.transfers else "-", human(peak)]
        yield "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>\n"
    yield "</tbody></table>\n</section>\n"


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
svg { max-width: 100%; height: auto; display: block; }
svg text { font: 11px sans-serif; fill: #333; } svg text.small { font-size: 9px; }
.legend { list-style: none; padding: 0; margin: 0.3em 0; }
.legend li { display: inline-block; margin-right: 1.2em; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.3em;
          vertical-align: middle; }
.n, .note, .meta { color: #666; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: left; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
"""


def _page(procs: list[_Process], scale: _Scale, title: str,
          summary: str | None) -> Iterator[str]:
    ntasks = sum(len(p.tasks) for p in procs)
    merge = ntasks > MERGE_ABOVE or sum(len(p.transfers) for p in procs) > MERGE_ABOVE
    statuses = sorted({str(p.end.get("status")) for p in procs if p.end})
    yield ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
           f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
           f"<h1>{escape(title)}</h1>\n")
    nworkers = sum(p.nworkers for p in procs)
    meta = (f"{ntasks} tasks on {len(procs)} process{'es' if len(procs) > 1 else ''}"
            f" ({nworkers} workers), {_duration(scale.hi - max(scale.lo, 0.0))}"
            + (f"; status: {', '.join(statuses)}" if statuses else ""))
    yield f'<p class="meta">{escape(meta)}</p>\n'
    yield from _task_stream(procs, scale, merge)
    yield from _memory_chart(procs, scale)
    yield from _pool_chart(procs, scale)
    yield from _process_table(procs)
    if summary is not None:
        yield f"<section><h2>Plan</h2>\n<pre>{escape(summary)}</pre>\n</section>\n"
    yield "</body>\n</html>\n"


def _write_atomically(path: pathlib.Path, parts: Iterable[str]) -> None:
    """Write ``parts`` to a new file beside ``path``, then move it into place: ``path`` is
    either left as it was or replaced whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_report(path: str | os.PathLike[str], recordings: list[dict[str, Any]], *,
                 title: str = "tilegraph run", summary: str | None = None) -> pathlib.Path:
    """Write the HTML report of one run from the :meth:`Recorder.data` of the recorder of
    every process (one dict per process; each one's rank is that of its ``RunStart``).

    ``summary`` is the plan summary text (e.g. the output of ``explain()``), shown as it
    is. The file is self-contained (inline SVG and CSS) and written atomically: a failure
    leaves any earlier file at ``path`` as it was. Returns the path written.

    Raises ``ValueError`` if ``recordings`` is not a non-empty list of such dicts (one per
    rank), ``FileNotFoundError`` if the directory of ``path`` does not exist.
    """
    recs = _validate(recordings)
    if summary is not None and not isinstance(summary, str):
        raise TypeError(f"summary must be a str, got {type(summary).__name__}")
    path = pathlib.Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot write the report {str(path)!r}: its directory "
                                f"{str(path.parent)!r} does not exist")
    procs = _processes(recs)
    _write_atomically(path, _page(procs, _scale(procs), str(title), summary))
    return path
