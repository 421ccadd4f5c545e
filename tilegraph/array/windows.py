"""Windows and differences along axes: :func:`sliding_window_view` (each output block made
from one block and the first ``width - 1`` elements after it) and :func:`gradient` (NumPy's
second-order differences, the edges by one-sided formulas), block by block.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.sliding_window_view(x, 3).compute()[:2]
array([[0., 1., 2.],
       [1., 2., 3.]])
>>> tg.gradient(x * x).compute()
array([1., 2., 4., 6., 8., 9.])
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray
from tilegraph.array.padding import replace_at

__all__ = ["gradient", "sliding_window_view"]


def _windows(x: Array, axis: int, width: int) -> Array:
    """The sliding windows of ``width`` along ``axis`` (a new last axis): output block j
    holds the windows starting in x's block j, made from that block and the first
    ``width - 1`` elements after it (the halo), joined into one block."""
    from tilegraph.array.elementwise import map_blocks
    from tilegraph.array.manipulation import concatenate

    n = x.shape[axis]
    count = n - width + 1
    starts, lengths = [], []
    pos = 0
    for c in x.chunks[axis]:
        take = builtins.min(c, count - pos)
        if take > 0:
            starts.append(pos)
            lengths.append(take)
        pos += c
    lead = (slice(None),) * axis
    pieces = []
    for s, m in zip(starts, lengths, strict=True):
        piece = x[(*lead, slice(s, s + m + width - 1))]
        pieces.append(piece.rechunk(replace_at(piece.chunks, axis, (m + width - 1,))))
    halo = pieces[0] if len(pieces) == 1 else concatenate(pieces, axis=axis)
    halo = halo.rechunk(replace_at(halo.chunks, axis, tuple(m + width - 1 for m in lengths)))

    def windows(block: np.ndarray) -> np.ndarray:  # (the block has a last axis of 1)
        return np.lib.stride_tricks.sliding_window_view(block[..., 0], width, axis=axis)

    windows.__name__ = "sliding_window_view"
    chunks = (*replace_at(halo.chunks, axis, tuple(lengths)), (width,))
    return map_blocks(windows, halo[..., None], dtype=x.dtype, chunks=chunks,
                      name="sliding_window_view")


def sliding_window_view(x: Any, window_shape: Any, axis: Any = None, *,
                        subok: bool = False, writeable: bool = False,
                        automatic_rechunk: bool = True) -> Array:
    """``numpy.lib.stride_tricks.sliding_window_view``: every window of ``window_shape``
    along ``axis`` (all axes when ``None``), the window axes appended last. Each output
    block is made from one input block and the ``window - 1`` elements after it, so no
    axis is gathered. A block of the result would be the windows' product times its input
    block: with ``automatic_rechunk`` (dask's keyword, on by default) the blocks of the
    other axes are split by as much first, so the result's blocks are about the size of
    the input's. The result is a new array (``writeable`` and ``subok`` are accepted for
    their callers' signatures and change nothing); windows of length 0 are refused."""
    x = asarray(x)
    shape = tuple(window_shape) if np.iterable(window_shape) else (window_shape,)
    try:
        shape = tuple(operator.index(w) for w in shape)
    except TypeError:
        raise TypeError(f"sliding_window_view: window_shape must be integers, got "
                        f"{window_shape!r}") from None
    if axis is None:
        if len(shape) != x.ndim:
            raise ValueError(f"sliding_window_view: window_shape {shape} needs one entry per "
                             f"axis of an array of shape {x.shape} when axis is None")
        axes = tuple(range(x.ndim))
    else:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        if len(axes) != len(shape):
            raise ValueError(f"sliding_window_view: window_shape {shape} and axis {axis!r} "
                             "must have the same length")
        for a in axes:
            if not -x.ndim <= operator.index(a) < x.ndim:
                raise np.exceptions.AxisError(
                    f"sliding_window_view: axis {a} is out of bounds for an array of shape "
                    f"{x.shape}")
        axes = tuple(operator.index(a) % x.ndim for a in axes)
    if any(w <= 0 for w in shape):
        raise ValueError(f"sliding_window_view: window_shape must be positive, got {shape}")
    for a, w in zip(axes, shape, strict=True):
        if w > x.shape[a]:
            raise ValueError(f"sliding_window_view: a window of {w} is larger than axis {a} "
                             f"of length {x.shape[a]}")
    out = _split_for_windows(x, axes, shape) if automatic_rechunk else x
    for a, w in zip(axes, shape, strict=True):
        out = _windows(out, a, w)
    return out


def _split_for_windows(x: Array, axes: tuple[int, ...], widths: tuple[int, ...]) -> Array:
    """``x`` with the blocks of the axes that get no window split so that the windows'
    growth (the product of the widths) is spread over them: each such axis' blocks are cut
    into about growth ** (1 / number of such axes) pieces (never below one element)."""
    growth = math.prod(widths)
    others = [a for a in range(x.ndim) if a not in axes and builtins.max(
        x.chunks[a], default=1) > 1]
    if growth <= 1 or not others:
        return x
    pieces = math.ceil(growth ** (1 / len(others)) - 1e-9)
    if pieces <= 1:
        return x
    chunks = list(x.chunks)
    for a in others:
        cut = []
        for c in x.chunks[a]:
            k = builtins.max(1, builtins.min(c, pieces))
            size, extra = divmod(c, k)
            cut.extend(size + (i < extra) for i in range(k))
        chunks[a] = tuple(cut)
    return x.rechunk(tuple(chunks))


def _spacing(varargs: tuple, f: Array, axes: tuple[int, ...]) -> list[Any]:
    """Per axis: a scalar step, or the differences of 1-d coordinates (a scalar when they
    are even), as ``numpy.gradient`` reads its ``varargs``."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        return [varargs[0]] * len(axes)
    if len(varargs) != len(axes):
        raise TypeError(f"gradient: give one spacing, or one per axis ({len(axes)}), got "
                        f"{len(varargs)}")
    out = []
    for axis, d in zip(axes, varargs, strict=True):
        if isinstance(d, Array):
            d = d.compute()
        d = np.asarray(d)
        if d.ndim == 0:
            out.append(d[()])
            continue
        if d.ndim != 1:
            raise ValueError("gradient: distances must be either scalars or 1d")
        if len(d) != f.shape[axis]:
            raise ValueError(f"gradient: when 1d, distances must match the length of the "
                             f"corresponding dimension ({f.shape[axis]} on axis {axis}), got "
                             f"{len(d)}")
        if np.issubdtype(d.dtype, np.integer):
            d = d.astype(np.float64)
        step = np.diff(d)
        out.append(step[0] if (step == step[0]).all() else step)
    return out


def _along(coeffs: Any, axis: int, ndim: int) -> Any:
    """Coefficients per position along ``axis``, shaped to broadcast against the array."""
    if np.ndim(coeffs) == 0:
        return coeffs
    return np.asarray(coeffs).reshape([-1 if k == axis else 1 for k in range(ndim)])


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """``numpy.gradient``: second-order central differences inside, first- or second-order
    one-sided differences at the edges, with even (scalar) or uneven (1-d coordinate)
    spacing per axis. Each derivative is slices of the array combined block by block and
    cut like the input; one axis gives an array, several a tuple. datetime64 and
    timedelta64 arrays are not supported (convert them to numbers first)."""
    f = asarray(f)
    if f.dtype.kind in "mM":
        raise TypeError("gradient: datetime64 and timedelta64 arrays are not supported; "
                        "convert them to numbers (e.g. .astype('int64')) first")
    if axis is None:
        axes = tuple(range(f.ndim))
    else:
        given = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        for a in given:
            if not -f.ndim <= operator.index(a) < f.ndim:
                raise np.exceptions.AxisError(
                    f"gradient: axis {a} is out of bounds for an array of shape {f.shape}")
        axes = tuple(operator.index(a) % f.ndim for a in given)
        if len(set(axes)) != len(axes):
            raise ValueError(f"gradient: repeated axis in {axis!r}")
    edge_order = operator.index(edge_order)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
    spacing = _spacing(varargs, f, axes)
    if f.dtype.kind not in "fc":
        f = f.astype(np.float64)
    from tilegraph.array.manipulation import concatenate

    nd = f.ndim
    outs = []
    for axis, dx in zip(axes, spacing, strict=True):
        n = f.shape[axis]
        if n < edge_order + 1:
            raise ValueError("gradient: shape of array too small to calculate a numerical "
                             f"gradient on axis {axis}: at least {edge_order + 1} elements "
                             "are required")
        uniform = np.ndim(dx) == 0

        def at(start: int | None, stop: int | None, axis: int = axis) -> Array:
            return f[(slice(None),) * axis + (slice(start, stop),)]

        parts = []
        if edge_order == 1:
            d0 = dx if uniform else dx[0]
            parts.append((at(1, 2) - at(0, 1)) / d0)
        else:
            if uniform:
                a, b, c = -1.5 / dx, 2.0 / dx, -0.5 / dx
            else:
                d1, d2 = dx[0], dx[1]
                a = -(2.0 * d1 + d2) / (d1 * (d1 + d2))
                b = (d1 + d2) / (d1 * d2)
                c = -d1 / (d2 * (d1 + d2))
            parts.append(a * at(0, 1) + b * at(1, 2) + c * at(2, 3))
        if n > 2:
            if uniform:
                parts.append((at(2, None) - at(None, -2)) / (2.0 * dx))
            else:
                d1, d2 = dx[:-1], dx[1:]
                a = _along(-d2 / (d1 * (d1 + d2)), axis, nd)
                b = _along((d2 - d1) / (d1 * d2), axis, nd)
                c = _along(d1 / (d2 * (d1 + d2)), axis, nd)
                parts.append(a * at(None, -2) + b * at(1, -1) + c * at(2, None))
        if edge_order == 1:
            dn = dx if uniform else dx[-1]
            parts.append((at(n - 1, None) - at(n - 2, n - 1)) / dn)
        else:
            if uniform:
                a, b, c = 0.5 / dx, -2.0 / dx, 1.5 / dx
            else:
                d1, d2 = dx[-2], dx[-1]
                a = d2 / (d1 * (d1 + d2))
                b = -(d2 + d1) / (d1 * d2)
                c = (2.0 * d2 + d1) / (d2 * (d1 + d2))
            parts.append(a * at(n - 3, n - 2) + b * at(n - 2, n - 1) + c * at(n - 1, None))
        out = concatenate(parts, axis=axis).astype(f.dtype)
        outs.append(out.rechunk(f.chunks))
    return outs[0] if len(outs) == 1 else tuple(outs)
