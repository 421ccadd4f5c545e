"""The charts of the HTML run report (:mod:`tilegraph.diagnostics.report`), each a section of
the page as pieces of HTML and SVG: the task stream (a row per worker, transfers between
ranks; tasks and transfers less than a pixel apart merged in long runs), the memory held
by each process over time with its spill and remake figures, and a serverless pool's
workers alive against its queue and tasks per second."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html import escape
from itertools import pairwise

import numpy as np

from tilegraph.diagnostics.drawing import (
    AXIS,
    CHART_HEIGHT,
    GAP,
    LANE,
    LEFT,
    MAX_LANES,
    PLOT,
    RANK_GAP,
    RIGHT,
    ROW,
    Scale,
    coord,
    duration,
    kind_colour,
    nice_step,
    rank_colour,
    svg_open,
    time_axis,
    time_label,
)
from tilegraph.diagnostics.recorder import TaskRecord, TransferRecord
from tilegraph.diagnostics.recordings import ProcessRecord
from tilegraph.util import human

#: Most points of a process's memory line (each bucket of time keeps its highest value).
MAX_MEMORY_POINTS = 4_000


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
    return (f'<rect class="task" x="{coord(x)}" y="{coord(y)}" width="{coord(max(w, 0.2))}" '
            f'height="{ROW}" fill="{fill}"><title>{escape(tip)}</title></rect>')


def _task_tip(task: TaskRecord) -> str:
    w, s, e, nb, kind, name, key = task
    return (f"{name}\nkey: {key}\n{duration(e - s)} on worker {w}, from {time_label(s)}\n"
            f"{human(nb)}" + (f"\nkind: {kind}" if kind else ""))


def _task_rects(tasks: list[TaskRecord], scale: Scale, y: float,
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
            tip = (f"{g.n} tasks ({kinds})\n{time_label(g.start)} to {time_label(g.stop)}, busy "
                   f"{duration(sum(g.busy.values()))}\n{human(g.nbytes)}")
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
        elif len(ends) < MAX_LANES:
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


def _transfer_marks(transfers: list[TransferRecord], scale: Scale, y: float,
                    merge: bool) -> Iterator[str]:
    marks = ([(t, 1) for t in sorted(transfers, key=lambda t: t[4])] if not merge
             else _merge_transfers(sorted(transfers, key=lambda t: t[4]), scale.pixel))
    for (t, n), lane in zip(marks, _lanes([m[0] for m in marks]), strict=True):
        key, src, dst, nb, s, e = t
        x1 = scale.x(s)
        x2 = max(scale.x(e), x1 + 1)
        ly = y + 1 + lane * LANE + LANE / 2
        if n == 1:
            tip = (f"{key}\nrank {src} \u2192 rank {dst}\n{human(nb)} in {duration(e - s)}, "
                   f"from {time_label(s)}")
        else:
            tip = (f"{n} transfers, rank {src} \u2192 rank {dst}\n{human(nb)}\n"
                   f"{time_label(s)} to {time_label(e)}")
        yield (f'<line class="transfer" x1="{coord(x1)}" y1="{coord(ly)}" x2="{coord(x2)}" '
               f'y2="{coord(ly)}" stroke="{rank_colour(src)}" stroke-width="3">'
               f"<title>{escape(tip)}</title></line>")


def task_stream(procs: list[ProcessRecord], scale: Scale, merge: bool) -> Iterator[str]:
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
               f'<span class="n">{kinds[kind]} tasks, {duration(busy[kind])}</span></li>')
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
            body.append(f'<g class="row"><rect x="{LEFT}" y="{coord(y)}" width="{PLOT}" '
                        f'height="{ROW}" fill="#f4f4f4"/><text x="{LEFT - 6}" '
                        f'y="{coord(y + ROW - 4)}" text-anchor="end">'
                        f"{escape(f'{prefix}worker {w}')}</text>")
            body.extend(_task_rects(by_worker[w], scale, y, merge))
            body.append("</g>")
            y += ROW + GAP
        if p.transfers:
            nlanes = min(len(p.transfers), MAX_LANES)
            height = nlanes * LANE + 2
            body.append(f'<g class="transfers"><rect x="{LEFT}" y="{coord(y)}" width="{PLOT}" '
                        f'height="{height}" fill="#fbfbfb"/><text x="{LEFT - 6}" '
                        f'y="{coord(y + height / 2 + 4)}" text-anchor="end" class="small">'
                        f"{escape(f'{prefix}transfers in')}</text>")
            body.extend(_transfer_marks(p.transfers, scale, y, merge))
            body.append("</g>")
            y += height + GAP
        y += RANK_GAP
    bottom = y
    yield svg_open(LEFT + PLOT + RIGHT, bottom + AXIS, "task stream")
    yield from time_axis(scale, 2, bottom)
    yield from body
    yield "</svg>\n</section>\n"


# -- memory ------------------------------------------------------------------------------------


def _downsample(samples: Sequence[tuple[float, int]], scale: Scale,
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
    step = max(nice_step(top / unit, 4) * unit, 1.0)
    count = max(1, math.ceil(top / step - 1e-9))
    return [k * step for k in range(count + 1)], unit, name


def memory_chart(procs: list[ProcessRecord], scale: Scale) -> Iterator[str]:
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
        y0, height = 8.0, float(CHART_HEIGHT)

        def y(v: float) -> float:
            return y0 + height - v / ymax * height

        yield svg_open(LEFT + PLOT + RIGHT, y0 + height + AXIS, "memory held over time")
        yield from time_axis(scale, y0, y0 + height)
        yield '<g class="axis">'
        for v in ticks:
            label = f"{v / unit:g} {name}" if v else "0"
            yield (f'<line x1="{LEFT - 4}" y1="{coord(y(v))}" x2="{LEFT + PLOT}" '
                   f'y2="{coord(y(v))}" stroke="#eee"/><text x="{LEFT - 6}" y="{coord(y(v) + 4)}" '
                   f'text-anchor="end">{escape(label)}</text>')
        yield "</g>"
        for p, points, end in series:
            xy = [(scale.x(points[0][0]), y(points[0][1]))]
            for (_, before), (t, h) in pairwise(points):
                x = scale.x(t)
                xy += [(x, y(before)), (x, y(h))]
            xy.append((scale.x(end), y(points[-1][1])))
            text = " ".join(f"{coord(a)},{coord(b)}" for a, b in xy)
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


def pool_chart(procs: list[ProcessRecord], scale: Scale) -> Iterator[str]:
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
    y0, height = 8.0, float(CHART_HEIGHT)
    yield svg_open(LEFT + PLOT + RIGHT, y0 + height + AXIS,
                   "workers alive and tasks per second over time")
    yield from time_axis(scale, y0, y0 + height)
    for k, r in enumerate(rates):
        if r:
            x0 = scale.x(scale.lo + k * width)
            x1 = scale.x(scale.lo + (k + 1) * width)
            h = r / top_rate * height
            yield (f'<rect x="{coord(x0)}" y="{coord(y0 + height - h)}" '
                   f'width="{coord(max(x1 - x0 - 1, 1))}" height="{coord(h)}" fill="#9ecae1">'
                   f"<title>{r:.1f} tasks/s</title></rect>")
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
            text = " ".join(f"{coord(a)},{coord(b)}" for a, b in pts)
            most = max(n for _, n in series)
            yield (f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                   f'points="{text}"><title>{what} (most: {most})</title></polyline>')
    for t, key in p.expired:
        x = scale.x(t)
        yield (f'<line x1="{coord(x)}" y1="{y0}" x2="{coord(x)}" y2="{coord(y0 + height)}" '
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
