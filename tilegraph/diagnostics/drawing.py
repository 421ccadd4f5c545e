"""The drawing vocabulary of the HTML run report (:mod:`tilegraph.diagnostics.report`): the
layout of its SVG charts, the colours of op kinds and ranks, the time scale of the charts
(:class:`Scale`), numbers and times as the report writes them, and the time axis."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape

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

LEFT = 170  # room for row labels and y-axis labels
PLOT = 1000  # width of the time axis in pixels
RIGHT = 24  # room right of the time axis
ROW = 16  # height of a worker's row
LANE = 4  # height of one lane of a transfers row
MAX_LANES = 4  # lanes of a transfers row, at most
GAP = 2  # between two rows
RANK_GAP = 8  # between the rows of two ranks
AXIS = 28  # room below a chart for the time axis
CHART_HEIGHT = 180  # height of the memory and pool charts


@dataclass(frozen=True)
class Scale:
    """Seconds ``lo``..``hi`` of the run on ``PLOT`` pixels right of ``LEFT``."""

    lo: float
    hi: float

    def x(self, t: float) -> float:
        """The pixel of second ``t``."""
        return LEFT + (t - self.lo) / (self.hi - self.lo) * PLOT

    @property
    def pixel(self) -> float:
        """Seconds per pixel."""
        return (self.hi - self.lo) / PLOT


def coord(v: float) -> str:
    """A coordinate, to a tenth of a pixel."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def duration(s: float) -> str:
    """``s`` seconds as the report writes a duration (µs, ms or s)."""
    if s < 1e-3:
        return f"{s * 1e6:.0f} \u00b5s"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def time_label(t: float) -> str:
    """A time ``t`` of the report's time axis, in seconds."""
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


def nice_step(span: float, count: int) -> float:
    """A step of 1, 2 or 5 times a power of ten giving about ``count`` ticks over ``span``."""
    raw = span / max(count, 1)
    if raw <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power


def _time_ticks(scale: Scale) -> list[tuple[float, str]]:
    step = nice_step(scale.hi - scale.lo, 6)
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    first = math.ceil(scale.lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= scale.hi + step * 1e-9:
        ticks.append((k * step, f"{k * step:.{decimals}f} s"))
        k += 1
    return ticks


def time_axis(scale: Scale, top: float, bottom: float) -> Iterator[str]:
    """Vertical grid lines from ``top`` to ``bottom`` and tick labels under them."""
    yield (f'<g class="axis"><line x1="{LEFT}" y1="{coord(bottom)}" x2="{LEFT + PLOT}" '
           f'y2="{coord(bottom)}" stroke="#888"/>')
    for t, label in _time_ticks(scale):
        x = coord(scale.x(t))
        yield (f'<line x1="{x}" y1="{coord(top)}" x2="{x}" y2="{coord(bottom + 4)}" '
               f'stroke="#ddd"/><text x="{x}" y="{coord(bottom + 16)}" '
               f'text-anchor="middle">{escape(label)}</text>')
    yield "</g>"


def svg_open(width: float, height: float, label: str) -> str:
    """The opening tag of a chart's SVG, ``label`` read to those who cannot see it."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{coord(width)}" '
            f'height="{coord(height)}" viewBox="0 0 {coord(width)} {coord(height)}" role="img" '
            f'aria-label="{escape(label)}">')
