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
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray

__all__ = ["pad", "roll"]

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
