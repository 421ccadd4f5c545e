"""Padding and shifts along axes as blocked operations: a pad becomes edge blocks made from
slices of the array near its edges (or from constants, statistics of the edge region, or
ramps), joined to the array's own blocks; nothing is gathered into one block.

:func:`pad` follows ``numpy.pad``: every mode, axes padded one after the other (so corner
regions hold what NumPy puts there), widths larger than the axis included.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.pad(x, (2, 1), mode="wrap").compute()
array([4., 5., 0., 1., 2., 3., 4., 5., 0.])
>>> tg.roll(x, 2).compute()
array([4., 5., 0., 1., 2., 3.])
>>> tg.sliding_window_view(x, 3).compute()[:2]
array([[0., 1., 2.],
       [1., 2., 3.]])
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray

__all__ = ["gradient", "map_overlap", "overlap", "pad", "roll", "sliding_window_view",
           "trim_internal"]

_MODE_KWARGS = {
    "constant": ("constant_values",),
    "edge": (),
    "linear_ramp": ("end_values",),
    "maximum": ("stat_length",),
    "mean": ("stat_length",),
    "median": ("stat_length",),
    "minimum": ("stat_length",),
    "reflect": ("reflect_type",),
    "symmetric": ("reflect_type",),
    "wrap": (),
    "empty": (),
}


def _at(t: tuple, axis: int, value: Any) -> tuple:
    """``t`` with its item ``axis`` replaced by ``value``."""
    return (*t[:axis], value, *t[axis + 1:])


def _pairs(name: str, value: Any, ndim: int, *, index: bool) -> list[tuple[Any, Any]]:
    """``value`` as one (before, after) pair per axis, broadcast as ``numpy.pad`` does."""
    if value is None:
        return [(None, None)] * ndim
    arr = np.asarray(value, dtype=object if not index else None)
    try:
        pairs = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(
            f"pad: {name} {value!r} cannot be broadcast to one (before, after) pair for each "
            f"of the {ndim} axes") from None
    out = []
    for before, after in pairs.tolist():
        if index:
            try:
                before, after = operator.index(before), operator.index(after)
            except TypeError:
                raise TypeError(f"pad: {name} must be integers, got {value!r}") from None
            if before < 0 or after < 0:
                raise ValueError(f"pad: {name} must be non-negative, got {value!r}")
        out.append((before, after))
    return out


def _axis_chunks(x: Array, axis: int, width: int) -> tuple[tuple[int, ...], ...]:
    """Blocks of a piece ``width`` long along ``axis``, cut like ``x`` on the other axes and
    no longer than ``x``'s largest block along ``axis``."""
    step = builtins.max(1, builtins.max(x.chunks[axis], default=1))
    along = tuple(builtins.min(step, width - s) for s in range(0, width, step)) or (0,)
    return _at(x.chunks, axis, along)


def _take_runs(x: Array, axis: int, index: np.ndarray) -> Array:
    """``take(x, index, axis)`` for an index made of runs that step by +1, -1 or 0: one
    slice (a view of the blocks it touches) per run."""
    lead = (slice(None),) * axis
    parts = []
    k = 0
    while k < len(index):
        start = int(index[k])
        step = int(index[k + 1] - index[k]) if k + 1 < len(index) else 1
        if step not in (-1, 0, 1):
            step = 1
        end = k + 1
        while end < len(index) and index[end] - index[end - 1] == step:
            end += 1
        n = end - k
        if step == 1:
            parts.append(x[(*lead, slice(start, start + n))])
        elif step == -1:
            stop = start - n
            parts.append(x[(*lead, slice(start, None if stop < 0 else stop, -1))])
        else:
            from tilegraph.array.scans import broadcast_to

            one = x[(*lead, slice(start, start + 1))]
            shape = _at(x.shape, axis, n)
            parts.append(broadcast_to(one, shape))
        k = end
    if len(parts) == 1:
        return parts[0]
    from tilegraph.array.manipulation import concatenate

    return concatenate(parts, axis=axis)


def _linear_piece(x: Array, axis: int, coeffs: np.ndarray) -> Array:
    """Rows of ``coeffs @ x`` along ``axis`` (an odd reflection is linear in the values):
    only the columns with a coefficient are read, as one block along ``axis``."""
    from tilegraph.array.elementwise import map_blocks

    cols = np.flatnonzero(coeffs.any(axis=0))
    src = _take_runs(x, axis, cols)
    src = src.rechunk(_at(src.chunks, axis, (len(cols),)))
    sub = coeffs[:, cols]
    dtype = x.dtype
    work = dtype if dtype.kind in "fc" else np.dtype(np.int64)

    def rows(block: np.ndarray) -> np.ndarray:
        moved = np.moveaxis(block.astype(work, copy=False), axis, 0)
        out = np.tensordot(sub.astype(work), moved, axes=1)
        return np.moveaxis(out, 0, axis).astype(dtype, copy=False)

    rows.__name__ = "pad-reflect-odd"
    chunks = _at(src.chunks, axis, (len(sub),))
    return map_blocks(rows, src, dtype=dtype, chunks=chunks, name="pad-reflect-odd")


def _constant(x: Array, axis: int, width: int, value: Any) -> Array:
    from tilegraph.array.creation import full

    chunks = _axis_chunks(x, axis, width)
    fill = np.asarray(value).astype(x.dtype) if value is not None else x.dtype.type(0)
    return full(tuple(builtins.sum(c) for c in chunks), fill[()] if isinstance(
        fill, np.ndarray) else fill, dtype=x.dtype, chunks=chunks)


def _stat_pieces(x: Array, axis: int, widths: tuple[int, int], lengths: tuple, mode: str
                 ) -> list[Array | None]:
    import tilegraph.array.reductions as reductions
    import tilegraph.array.statistics as statistics
    from tilegraph.array.scans import broadcast_to

    n = x.shape[axis]
    func: Callable = {"maximum": reductions.max, "minimum": reductions.min,
                      "mean": reductions.mean, "median": statistics.median}[mode]
    lead = (slice(None),) * axis
    out: list[Array | None] = []
    for side, (width, length) in enumerate(zip(widths, lengths, strict=True)):
        if not width:
            out.append(None)
            continue
        length = n if length is None else builtins.min(operator.index(length), n)
        if length == 0 and mode in ("maximum", "minimum"):
            raise ValueError("pad: stat_length of 0 yields no value for padding")
        region = x[(*lead, slice(0, length))] if side == 0 else x[(*lead, slice(n - length, n))]
        stat = func(region, axis=axis, keepdims=True)
        if x.dtype.kind in "iub" and stat.dtype.kind == "f":
            stat = stat.round()  # NumPy rounds a mean or median into an integer array
        stat = stat.astype(x.dtype)
        shape = _at(x.shape, axis, width)
        out.append(broadcast_to(stat, shape))
    return out


def _ramp_pieces(x: Array, axis: int, widths: tuple[int, int], ends: tuple) -> list:
    from tilegraph.array.elementwise import map_blocks

    n = x.shape[axis]
    lead = (slice(None),) * axis
    dtype = x.dtype
    out = []
    for side, (width, end) in enumerate(zip(widths, ends, strict=True)):
        if not width:
            out.append(None)
            continue
        edge = x[(*lead, slice(0, 1))] if side == 0 else x[(*lead, slice(n - 1, n))]
        edge = edge.rechunk(_axis_chunks(edge, axis, 1))
        end_value = 0 if end is None else end

        def ramp(block: np.ndarray, width: int = width, end_value: Any = end_value,
                 reverse: bool = side == 1) -> np.ndarray:
            r = np.linspace(end_value, block.squeeze(axis), num=width, endpoint=False,
                            dtype=dtype, axis=axis)
            return np.flip(r, axis) if reverse else r

        ramp.__name__ = "pad-linear-ramp"
        chunks = _at(edge.chunks, axis, (width,))
        out.append(map_blocks(ramp, edge, dtype=dtype, chunks=chunks, name="pad-linear-ramp"))
    return out


def _index_pieces(x: Array, axis: int, widths: tuple[int, int], mode: str, reflect_type: str
                 ) -> list:
    """Left and right pieces of the modes that copy (or, for an odd reflection, combine)
    elements of the axis: found by padding the positions ``0..n-1`` with NumPy itself."""
    n = x.shape[axis]
    before, after = widths
    if reflect_type == "odd" and mode in ("reflect", "symmetric"):
        eye = np.eye(n, dtype=np.int64)
        coeffs = np.pad(eye, ((before, after), (0, 0)), mode=mode, reflect_type="odd")
        return [_linear_piece(x, axis, coeffs[:before]) if before else None,
                _linear_piece(x, axis, coeffs[before + n:]) if after else None]
    index = np.pad(np.arange(n), (before, after), mode=mode)
    return [_take_runs(x, axis, index[:before]) if before else None,
            _take_runs(x, axis, index[before + n:]) if after else None]


def _with_function(x: Array, widths: list[tuple[int, int]], function: Callable,
                   kwargs: dict) -> Array:
    """NumPy's callable mode: zeros padded on every axis, then ``function(vector,
    iaxis_pad_width, iaxis, kwargs)`` on each vector along each axis in turn (each axis
    made one block for its turn, the others stay cut)."""
    from tilegraph.array.elementwise import map_blocks

    out = pad(x, widths, mode="constant")
    for axis in range(out.ndim):
        if out.shape[axis] == 0:
            continue
        out = out.rechunk(_at(out.chunks, axis, (out.shape[axis],)))

        def apply(block: np.ndarray, axis: int = axis) -> np.ndarray:
            block = block.copy()
            view = np.moveaxis(block, axis, -1)
            for ind in np.ndindex(view.shape[:-1]):
                function(view[ind], widths[axis], axis, kwargs)
            return block

        apply.__name__ = f"pad-{getattr(function, '__name__', 'function')}"
        out = map_blocks(apply, out, dtype=out.dtype, name=apply.__name__)
    return out


def _holds_array(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return builtins.any(_holds_array(v) for v in value)
    return isinstance(value, Array)


def pad(array: Any, pad_width: Any, mode: str | Callable = "constant", **kwargs: Any
        ) -> Array:
    """``numpy.pad`` as blocked pieces joined to the array (see the module docstring).

    Modes: ``constant`` (``constant_values``), ``edge``, ``linear_ramp`` (``end_values``),
    ``maximum``, ``mean``, ``median``, ``minimum`` (``stat_length``), ``reflect`` and
    ``symmetric`` (``reflect_type`` ``"even"`` or ``"odd"``), ``wrap``, ``empty`` (zeros
    here), or a function as NumPy takes it (that mode makes each axis one block in turn).
    Constants, end values and stat lengths are plain numbers, not arrays.
    """
    x = asarray(array)
    widths = _pairs("pad_width", pad_width, x.ndim, index=True)
    if callable(mode):
        return _with_function(x, widths, mode, kwargs)
    if not isinstance(mode, str) or mode not in _MODE_KWARGS:
        raise ValueError(f"pad: mode {mode!r} is not supported; choose one of "
                         f"{', '.join(_MODE_KWARGS)} or a function")
    unknown = set(kwargs) - set(_MODE_KWARGS[mode])
    if unknown:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: "
                         f"{sorted(unknown)}")
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    for name in ("constant_values", "end_values", "stat_length"):
        if _holds_array(kwargs.get(name)):
            raise TypeError(f"pad: {name} must be numbers, not arrays")
    constants = _pairs("constant_values", kwargs.get("constant_values", 0), x.ndim,
                       index=False)
    ends = _pairs("end_values", kwargs.get("end_values", 0), x.ndim, index=False)
    lengths = _pairs("stat_length", kwargs.get("stat_length"), x.ndim, index=False)
    for pair in lengths:
        for v in pair:
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 0):
                raise ValueError(f"pad: stat_length must be non-negative integers or None, "
                                 f"got {kwargs.get('stat_length')!r}")
    from tilegraph.array.manipulation import concatenate

    out = x
    for axis, (before, after) in enumerate(widths):
        if not before and not after:
            continue
        if out.shape[axis] == 0 and mode not in ("constant", "empty"):
            raise ValueError(f"pad: can't extend empty axis {axis} using modes other than "
                             "'constant' or 'empty'")
        if mode in ("constant", "empty"):
            values = constants[axis] if mode == "constant" else (None, None)
            pieces = [_constant(out, axis, w, v) if w else None
                      for w, v in zip((before, after), values, strict=True)]
        elif mode == "linear_ramp":
            pieces = _ramp_pieces(out, axis, (before, after), ends[axis])
        elif mode in ("maximum", "mean", "median", "minimum"):
            pieces = _stat_pieces(out, axis, (before, after), lengths[axis], mode)
        else:
            pieces = _index_pieces(out, axis, (before, after), mode, reflect_type)
        parts = [p for p in (pieces[0], out, pieces[1]) if p is not None]
        out = concatenate(parts, axis=axis)
    return out


def roll(x: Any, shift: Any, axis: Any = None) -> Array:
    """``numpy.roll``: elements shifted along ``axis`` (the flattened array when ``None``),
    wrapping around; ``shift`` and ``axis`` broadcast against each other and shifts along
    one axis add up, as in NumPy. Two slices of the blocks, joined."""
    x = asarray(x)
    if axis is None:
        return roll(x.reshape(-1), shift, axis=0).reshape(x.shape)
    try:
        pairs = np.broadcast(np.asarray(shift), np.asarray(axis))
    except ValueError:
        raise ValueError(f"roll: shift {shift!r} and axis {axis!r} cannot be broadcast "
                         "together") from None
    total = [0] * x.ndim
    for s, a in pairs:
        s, a = operator.index(s), operator.index(a)
        if not -x.ndim <= a < x.ndim:
            raise np.exceptions.AxisError(
                f"roll: axis {a} is out of bounds for an array of shape {x.shape}")
        total[a % x.ndim] += s
    from tilegraph.array.manipulation import concatenate

    out = x
    for a, s in enumerate(total):
        n = x.shape[a]
        if n == 0 or s % n == 0:
            continue
        s %= n
        lead = (slice(None),) * a
        out = concatenate([out[(*lead, slice(n - s, None))], out[(*lead, slice(0, n - s))]],
                          axis=a)
    return out


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
        pieces.append(piece.rechunk(_at(piece.chunks, axis, (m + width - 1,))))
    halo = pieces[0] if len(pieces) == 1 else concatenate(pieces, axis=axis)
    halo = halo.rechunk(_at(halo.chunks, axis, tuple(m + width - 1 for m in lengths)))

    def windows(block: np.ndarray) -> np.ndarray:  # (the block has a last axis of 1)
        return np.lib.stride_tricks.sliding_window_view(block[..., 0], width, axis=axis)

    windows.__name__ = "sliding_window_view"
    chunks = (*_at(halo.chunks, axis, tuple(lengths)), (width,))
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


_BOUNDARY_MODES = {"periodic": "wrap", "reflect": "symmetric", "nearest": "edge"}


def _per_axis(name: str, value: Any, ndim: int, default: Any) -> list[Any]:
    """dask's per-axis argument: one value for every axis, a tuple (one per axis) or a dict
    {axis: value} (the others ``default``)."""
    if isinstance(value, dict):
        out = [default] * ndim
        for a, v in value.items():
            a = operator.index(a)
            if not -ndim <= a < ndim:
                raise np.exceptions.AxisError(f"{name}: axis {a} is out of bounds for a "
                                              f"{ndim}-d array")
            out[a % ndim] = v
        return out
    if isinstance(value, (tuple, list)):
        if len(value) != ndim:
            raise ValueError(f"{name}: give one value per axis ({ndim}), got {value!r}")
        return list(value)
    return [value] * ndim


def _depth_pairs(name: str, depth: Any, ndim: int) -> list[tuple[int, int]]:
    """dask's ``depth``: per axis one number of elements (the same on both sides) or a
    ``(before, after)`` pair (in a dict {axis: depth}), as (before, after) pairs."""
    if isinstance(depth, (tuple, list)) and len(depth) == ndim:
        values = list(depth)
    else:
        values = _per_axis(name, 0 if depth is None else depth, ndim, 0)
    out = []
    for d in values:
        pair = tuple(d) if isinstance(d, (tuple, list)) else (d, d)
        if len(pair) != 2:
            raise ValueError(f"{name}: a depth is a number or a (before, after) pair, got "
                             f"{d!r} in {depth!r}")
        try:
            pair = (operator.index(pair[0]), operator.index(pair[1]))
        except TypeError:
            raise TypeError(f"{name}: depth must be integers, got {depth!r}") from None
        if pair[0] < 0 or pair[1] < 0:
            raise ValueError(f"{name}: depth must be non-negative, got {depth!r}")
        out.append(pair)
    return out


def _depths(depth: Any, x: Array) -> list[tuple[int, int]]:
    out = _depth_pairs("overlap", depth, x.ndim)
    for a, (before, after) in enumerate(out):
        d = max(before, after)
        if d and d > min(x.chunks[a], default=0):
            raise ValueError(
                f"overlap: depth {d} on axis {a} is larger than the smallest block there "
                f"({min(x.chunks[a])}): rechunk to larger blocks first")
    return out


def _boundaries(boundary: Any, x: Array) -> list[Any]:
    out = _per_axis("overlap", "reflect" if boundary is None else boundary, x.ndim, "none")
    for b in out:
        if isinstance(b, str) and b not in (*_BOUNDARY_MODES, "none"):
            raise ValueError(f"overlap: boundary {b!r} is not one of 'periodic', 'reflect', "
                             "'nearest', 'none' or a constant")
    return out


def _halo_sides(x: Array, depths: list[tuple[int, int]], bounds: list[Any]
                ) -> list[list[tuple[Any, Any]]]:
    """Per axis, per block: what fills its halo before and after: ``"slab"`` (a
    neighbour's edge: inside the array, or across it when periodic), ``None`` (no halo: a
    width of 0, or boundary "none" at the array's edge), or a boundary mode or constant
    made from the block's own edge."""
    out = []
    for a, (widths, b) in enumerate(zip(depths, bounds, strict=True)):
        k = len(x.chunks[a])
        periodic = isinstance(b, str) and b == "periodic"
        none = isinstance(b, str) and b == "none"
        axis = []
        for j in range(k):
            sides = []
            for side, neighbour in ((0, j - 1), (1, j + 1)):
                if widths[side] == 0:
                    sides.append(None)
                elif 0 <= neighbour < k or periodic:
                    sides.append("slab")
                elif none:
                    sides.append(None)
                else:
                    sides.append(b)
            axis.append(tuple(sides))
        out.append(axis)
    return out


def _assemble(shape: tuple[int, ...], centre: tuple, places: tuple, fills: tuple,
              own: np.ndarray, *slabs: np.ndarray) -> np.ndarray:
    """A block with its halos on every axis, made in one array: the block at ``centre``,
    each neighbour's slab at its place (corners from the diagonal neighbours), then the
    halos at the array's edges from the block's own edge, axis after axis (``fills``:
    (axis, side, width, mode) each), as :func:`overlap` extends one axis after the
    other."""
    out = np.empty(shape, dtype=own.dtype)
    out[centre] = own
    for place, slab in zip(places, slabs, strict=True):
        out[place] = slab
    full = [slice(None)] * out.ndim
    for axis, side, d, how in fills:
        n = out.shape[axis]
        # the d elements next to the halo, on the side of the block's own data
        src = _at(full, axis, slice(d, 2 * d) if side == 0 else slice(n - 2 * d, n - d))
        dst = _at(full, axis, slice(0, d) if side == 0 else slice(n - d, n))
        edge = out[tuple(src)]
        if isinstance(how, str):
            if how == "reflect":  # mirrored, the edge element included
                index = [slice(None)] * out.ndim
                index[axis] = slice(None, None, -1)
                out[tuple(dst)] = edge[tuple(index)]
            else:  # nearest: the edge element repeated
                index = [slice(None)] * out.ndim
                index[axis] = slice(0, 1) if side == 0 else slice(d - 1, d)
                out[tuple(dst)] = edge[tuple(index)]
        else:
            out[tuple(dst)] = how
    return out


def _overlap_all(x: Array, depths: list[tuple[int, int]], bounds: list[Any]) -> Array:
    """:func:`overlap` in one step for every axis: each block's halo regions (faces, and
    corners from the diagonal neighbours) are copied out of the neighbours as slabs, and a
    block is joined with its slabs into one new array in one task, so each element is
    copied once whatever the number of axes, and a block need not stay in memory for its
    neighbours' halos."""
    import itertools

    from tilegraph.algebra.blocks import Blocks, apply_blocks
    from tilegraph.array.chunks import numblocks
    from tilegraph.array.core import tokenize
    from tilegraph.array.manipulation import _take_copy
    from tilegraph.graph.taskgraph import Dep, Lit

    n = x.ndim
    grid = x.numblocks
    key = x.collection.key
    token = tokenize("overlap", x, tuple(depths), tuple(map(str, bounds)))
    sides = _halo_sides(x, depths, bounds)
    itemsize = x.itemsize
    halo_axes = [a for a in range(n) if any(depths[a])]

    def neighbour(c: tuple[int, ...], o: tuple[int, ...]) -> tuple[int, ...] | None:
        """The block at offset ``o`` (per axis -1, 0, 1) from ``c`` whose slab fills part
        of c's halo, or None when that part comes from no neighbour."""
        out = []
        for a, (j, step) in enumerate(zip(c, o, strict=True)):
            if step and sides[a][j][0 if step < 0 else 1] != "slab":
                return None
            out.append((j + step) % grid[a])
        return tuple(out)

    def region(s: tuple[int, ...], o: tuple[int, ...]) -> tuple:
        """The part of block ``s`` that the block at offset ``-o`` from it needs: along an
        axis of step -1 (s comes before that block), s's last elements (the other's halo
        before it); along +1, s's first elements (its halo after)."""
        index = []
        for a, (j, step) in enumerate(zip(s, o, strict=True)):
            size = x.chunks[a][j]
            if step < 0:
                index.append(slice(size - depths[a][0], size))
            elif step > 0:
                index.append(slice(0, depths[a][1]))
            else:
                index.append(slice(None))
        return tuple(index)

    offsets = [o for o in itertools.product(*[(-1, 0, 1) if a in halo_axes else (0,)
                                              for a in range(n)]) if any(o)]
    # which source blocks each offset's slab collection must cut
    needed: dict[tuple[int, ...], set[tuple[int, ...]]] = {o: set() for o in offsets}
    for c in np.ndindex(*grid):
        for o in offsets:
            s = neighbour(c, o)
            if s is not None:
                needed[o].add(s)

    def slab_collection(o: tuple[int, ...]) -> Blocks:
        label = f"overlap-slab{''.join('-0+'[d + 1] for d in o)}-{token}"
        sources = sorted(needed[o])

        def emit(builder: Any) -> None:
            for s in sources:
                nbytes = itemsize * math.prod(
                    (sl.stop - sl.start) if sl.stop is not None else x.chunks[a][s[a]]
                    for a, sl in enumerate(region(s, o)))
                builder.add((label, *s), _take_copy, deps=[key(s)],
                            args=(Dep(0), Lit(region(s, o))), kind="rechunk", name="halo",
                            nbytes=nbytes, coords=s)

        return Blocks(label, grid, [x.collection], emit, ntasks=len(sources))

    slabs = {o: slab_collection(o) for o in offsets if needed[o]}

    def widths_of(a: int, j: int) -> tuple[int, int]:
        return tuple(depths[a][side] if sides[a][j][side] is not None else 0
                     for side in (0, 1))

    chunks = tuple(tuple(c + sum(widths_of(a, j)) for j, c in enumerate(x.chunks[a]))
                   for a in range(n))

    def task_of(c: tuple[int, ...]) -> tuple:
        shape = tuple(chunks[a][j] for a, j in enumerate(c))
        before = [widths_of(a, j)[0] for a, j in enumerate(c)]
        centre = tuple(slice(before[a], before[a] + x.chunks[a][j]) for a, j in enumerate(c))
        deps = [key(c)]
        places = []
        for o in offsets:
            s = neighbour(c, o)
            if s is None:
                continue
            deps.append(slabs[o].key(s))
            place = []
            for a, step in enumerate(o):
                if step < 0:
                    place.append(slice(0, before[a]))
                elif step > 0:
                    place.append(slice(shape[a] - depths[a][1], shape[a]))
                else:
                    place.append(centre[a])
            places.append(tuple(place))
        fills = tuple((a, side, depths[a][side], how)
                      for a in range(n) for side, how in enumerate(sides[a][c[a]])
                      if how is not None and not (isinstance(how, str) and how == "slab"))
        args = (Lit(shape), Lit(centre), Lit(tuple(places)), Lit(fills),
                *[Dep(i) for i in range(len(deps))])
        return _assemble, deps, args

    blocks = apply_blocks(
        f"overlap-{token}", numblocks(chunks), [x.collection, *slabs.values()],
        task_of, kind="rechunk", name="overlap",
        nbytes=lambda c: itemsize * math.prod(chunks[a][j] for a, j in enumerate(c)))
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, x.dtype)


def overlap(x: Any, depth: Any, boundary: Any = None) -> Array:
    """Each block extended by ``depth`` elements of its neighbours on every side (dask's
    ``overlap``); at the array's edges by ``boundary``: ``"periodic"`` (the other end),
    ``"reflect"`` (mirrored, the edge element included), ``"nearest"`` (the edge element
    repeated), a constant, or ``"none"`` (no extension there). ``depth`` and ``boundary``
    may be one value, a tuple per axis or a dict {axis: value}; a depth in a dict may be a
    ``(before, after)`` pair (``{0: (2, 0)}``: two elements before each block along axis 0,
    none after). The result is what extending one axis after the other gives (corners
    come from the diagonal neighbours, and at the array's edges from the halos already
    made along earlier axes). Every block's edge slabs are copied out of it, and a block
    is joined with all its neighbours' slabs in one task, one copy of each element, so a
    block need not stay in memory for its neighbours' halos."""
    x = asarray(x)
    depths = _depths(depth, x)
    bounds = _boundaries(boundary, x)
    if not any(any(w) for w in depths):
        return x
    return _overlap_all(x, depths, bounds)


def trim_internal(x: Any, depth: Any, boundary: Any = None, *, original: Any = None
                  ) -> Array:
    """The inverse of :func:`overlap`: ``depth`` elements cut from every side of every block
    (none at the array's edges where ``boundary`` was ``"none"``)."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.chunks import numblocks
    from tilegraph.array.core import tokenize
    from tilegraph.array.manipulation import _take_view
    from tilegraph.graph.taskgraph import Dep, Lit

    x = asarray(x)
    depths = _depth_pairs("trim_internal", depth, x.ndim)
    bounds = _boundaries(boundary, x)
    cuts = []  # per axis, per block: (cut before, cut after)
    for axis, ((d0, d1), b) in enumerate(zip(depths, bounds, strict=True)):
        none = isinstance(b, str) and b == "none"
        k = len(x.chunks[axis])
        axis_cuts = []
        for j, c in enumerate(x.chunks[axis]):
            before = 0 if (none and j == 0) else d0
            after = 0 if (none and j == k - 1) else d1
            if before + after > c:
                raise ValueError(f"trim_internal: a block of {c} on axis {axis} is smaller "
                                 f"than the {before + after} elements to cut")
            axis_cuts.append((before, after))
        cuts.append(axis_cuts)
    chunks = tuple(tuple(c - bf - af for c, (bf, af) in zip(x.chunks[a], cuts[a],
                                                             strict=True))
                   for a in range(x.ndim))
    key = x.collection.key

    def task_of(coord: tuple[int, ...]) -> tuple:
        index = tuple(slice(cuts[a][j][0], x.chunks[a][j] - cuts[a][j][1])
                      for a, j in enumerate(coord))
        return _take_view, [key(coord)], (Dep(0), Lit(index))

    token = tokenize("trim_internal", x, tuple(depths), tuple(map(str, bounds)))
    blocks = apply_blocks(f"trim-{token}", numblocks(chunks), [x.collection], task_of,
                          kind="getitem", name="trim",
                          nbytes=lambda c: x.itemsize * math.prod(
                              chunks[a][j] for a, j in enumerate(c)))
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, x.dtype)


# a chain of stencil steps is made one step while the halo of all of them is at
# most this fraction of the largest block along each axis
_CHAIN_HALO = 0.25


class _Chain:
    """Stencil steps applied one after the other to a block that has the halo of all of
    them: each step's function, then its own depth cut off every side that has a halo (a
    view), so the next step sees its own halo. The result is the block without halo."""

    __slots__ = ("__name__", "steps")

    def __init__(self, steps: tuple) -> None:
        self.steps = steps  # (func, kwargs, depth pairs) per step, first first
        names = [getattr(f, "__name__", "map_overlap") for f, _, _ in steps]
        self.__name__ = (names[0] if len(set(names)) == 1 else "+".join(names)) + (
            f"*{len(names)}" if len(names) > 1 and len(set(names)) == 1 else "")

    def __call__(self, block: np.ndarray, edges: tuple) -> np.ndarray:
        """``edges``: per axis, whether the block has no halo before and after it (it is at
        the array's edge, with boundary "none")."""
        for func, kwargs, depths in self.steps:
            block = func(block, **kwargs)
            shape = np.shape(block)
            block = block[tuple(
                slice(0 if e0 else b, n - (0 if e1 else e))
                for n, (b, e), (e0, e1) in zip(shape, depths, edges, strict=True))]
        return block

    def __reduce__(self) -> tuple:
        return _Chain, (self.steps,)


class _StencilStep:
    """The rewrite of a map_overlap's result whose halos are periodic or none (see
    :class:`~tilegraph.algebra.blocks.Blocks`): when its input is itself such a result
    that nothing else in the plan reads, with the same boundaries, the two become one
    step, applied to the first input extended by the depth of both (so no intermediate
    array is made, and no halo is exchanged between the steps)."""

    __slots__ = ("bounds", "dtype", "label", "readers", "source", "steps")

    def __init__(self, source: Array, steps: tuple, bounds: tuple, label: str,
                 dtype: np.dtype, readers: frozenset[str]) -> None:
        self.source = source
        self.steps = steps
        self.bounds = bounds  # per axis "periodic" or "none" (None: no step has a halo)
        self.label = label
        self.dtype = dtype
        self.readers = readers  # the step's collections that read ``source``

    def __call__(self, consumers: dict, replaced: dict) -> Any:
        src = self.source.collection
        prev = replaced.get(src.name, src).rewrite
        if not isinstance(prev, _StencilStep) or consumers.get(src.name) != self.readers:
            return None  # not a stencil step, or its result is read elsewhere
        bounds = []
        for mine, theirs in zip(self.bounds, prev.bounds, strict=True):
            if mine is not None and theirs is not None and mine != theirs:
                return None
            bounds.append(mine if mine is not None else theirs)
        steps = prev.steps + self.steps
        first = prev.source
        total = _total_depths(steps, first.ndim)
        for a, (before, after) in enumerate(total):
            sizes = first.chunks[a] or (0,)
            # a halo comes from the next block only; the work it adds is that of the
            # halo's share of a (full) block
            if max(before, after) > min(sizes) or before + after > _CHAIN_HALO * max(sizes):
                return None
        return _stencil_chain(first, steps, tuple(bounds), self.label, self.dtype).collection


def _chain_bounds(depths: list[tuple[int, int]], bounds: list[Any]) -> tuple | None:
    """Per axis the boundary of a stencil step that can be chained ("periodic"; None on an
    axis without halo), or None when it cannot (no halo at all, or another boundary on an
    axis with one). With "none" the function's results next to the array's edges are kept,
    and a function may make them from the far side of what it is given (``np.roll``), so
    a chain, which gives it more, could change them: such steps are not chained."""
    out = []
    for d, b in zip(depths, bounds, strict=True):
        if not any(d):
            out.append(None)
        elif isinstance(b, str) and b == "periodic":
            out.append(b)
        else:
            return None
    return tuple(out) if any(b is not None for b in out) else None


def _total_depths(steps: tuple, ndim: int) -> list[tuple[int, int]]:
    return [(sum(d[a][0] for _, _, d in steps), sum(d[a][1] for _, _, d in steps))
            for a in range(ndim)]


def _stencil_chain(x: Array, steps: tuple, bounds: tuple, label: str, dtype: np.dtype
                   ) -> Array:
    """Stencil ``steps`` applied to ``x`` as one map over its blocks extended by the depth
    of all of them (:class:`_Chain`), with ``bounds`` ("periodic" or "none" per axis) at
    the array's edges, named ``label``."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.graph.taskgraph import Dep, Lit

    ov = _overlap_all(x, _total_depths(steps, x.ndim),
                      ["periodic" if b is None else b for b in bounds])
    chain = _Chain(steps)
    itemsize = dtype.itemsize
    chunks = x.chunks
    grid = x.numblocks
    key = ov.collection.key
    # while a step runs, the previous step's result is held beside its own result and
    # temporaries (about one block, as for any user function), each the size of the block
    # with its halo
    held = 2 if len(steps) == 1 else 3

    def task_of(c: tuple[int, ...]) -> tuple:
        edges = tuple((b == "none" and j == 0, b == "none" and j == g - 1)
                      for b, j, g in zip(bounds, c, grid, strict=True))
        return chain, [key(c)], (Dep(0), Lit(edges))

    blocks = apply_blocks(
        label, grid, [ov.collection], task_of, kind="map", name=chain.__name__,
        nbytes=lambda c: itemsize * math.prod(chunks[a][j] for a, j in enumerate(c)),
        working=lambda c: held * itemsize * math.prod(ov.chunks[a][j]
                                                      for a, j in enumerate(c)))
    readers = frozenset(c.name for c in (ov.collection, *ov.collection.deps)
                        if any(d.name == x.collection.name for d in c.deps))
    blocks.rewrite = _StencilStep(x, steps, bounds, label, dtype, readers)
    return Array(blocks, x.shape, chunks, dtype)


def map_overlap(func: Callable, *args: Any, depth: Any = None, boundary: Any = None,
                trim: bool = True, dtype: Any = None, name: str | None = None,
                **kwargs: Any) -> Array:
    """dask's ``map_overlap``: ``func`` applied to every block extended by ``depth``
    neighbouring elements (see :func:`overlap` for ``depth`` and ``boundary``; as in dask,
    the array's own edges are not extended unless ``boundary`` says how), the extension
    cut off again afterwards when ``trim`` (so ``func`` must keep its block's shape).
    Several arrays are aligned to the first one's blocks first. The halo of a block is
    read from the neighbours' edge slabs only, and is made inside the task that applies
    ``func`` where fusion allows it.

    Periodic stencils are chained: when the input of a ``map_overlap`` (one array,
    ``trim=True``, boundaries "periodic") is itself the result of one that nothing else in
    the plan reads, both functions run in one task on the first
    input extended by the depth of both (``x.map_overlap(f, depth=1, boundary=
    "periodic")`` ten times reads each block and a halo of 10 once, and makes no
    intermediate array). This relies on what ``trim`` already assumes: ``func``'s result
    at a distance of at least ``depth`` from the edge of what it is given depends only on
    the elements within ``depth``, not on the block's size or place. A chain stops where
    its halo would exceed a quarter of the largest block along an axis (or the smallest
    block). To keep two steps apart, ask for the first one in the same ``compute`` as a
    result too, or give ``trim=False`` and call
    :func:`trim_internal` yourself.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.array([1.0, np.nan, np.nan, 4.0, np.nan]), chunks=2)
    >>> def ffill(b):
    ...     keep = np.where(np.isnan(b), 0, np.arange(b.size))
    ...     return b[np.maximum.accumulate(keep)]
    >>> # one element before each block: a forward fill of at most one step
    >>> x.map_overlap(ffill, depth={0: (1, 0)}).compute()
    array([ 1.,  1., nan,  4.,  4.])
    """
    from tilegraph.array.elementwise import map_blocks

    if not callable(func):
        raise TypeError(f"map_overlap: {func!r} is not callable")
    for dask_only in ("align_arrays", "allow_rechunk", "meta"):  # (arrays are always aligned)
        kwargs.pop(dask_only, None)
    arrays = [a for a in args if isinstance(a, Array) or isinstance(a, np.ndarray)]
    if not arrays:
        raise TypeError("map_overlap: give at least one array argument")
    first = asarray(arrays[0])
    if boundary is None:  # dask's map_overlap leaves the array's edges alone by default
        boundary = "none"
    depths = _depths(depth, first)
    bounds = _boundaries(boundary, first)
    chain_bounds = _chain_bounds(depths, bounds)
    if trim and len(args) == 1 and not {"chunks", "drop_axis", "new_axis"} & kwargs.keys() \
            and chain_bounds is not None:
        from tilegraph.array.core import tokenize
        from tilegraph.array.elementwise import result_dtype

        if dtype is None:
            try:
                dtype = result_dtype(func, [first], kwargs)
            except Exception:
                dtype = first.dtype
        dtype = np.dtype(dtype)
        op = name or getattr(func, "__name__", "map_overlap")
        label = f"{op}-{tokenize('map_overlap', func, first, kwargs, depths, dtype)}"
        return _stencil_chain(first, ((func, kwargs, tuple(depths)),), chain_bounds, label,
                              dtype)
    extended = []
    for a in args:
        if isinstance(a, (Array, np.ndarray)):
            a = asarray(a)
            if a.shape != first.shape:
                raise ValueError(f"map_overlap: arrays of shapes {first.shape} and {a.shape} "
                                 "must have the same shape")
            if a.chunks != first.chunks:
                a = a.rechunk(first.chunks)
            a = overlap(a, depth, boundary)
        extended.append(a)
    out = map_blocks(func, *extended, dtype=dtype, name=name or getattr(
        func, "__name__", "map_overlap"), **kwargs)
    if not trim:
        return out
    return trim_internal(out, depth, boundary)
