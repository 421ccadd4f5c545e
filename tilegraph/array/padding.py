"""Padding and shifts along axes as blocked operations: a pad becomes edge blocks made from
slices of the array near its edges (or from constants, statistics of the edge region, or
ramps), joined to the array's own blocks; nothing is gathered into one block.

:func:`pad` follows ``numpy.pad``: every mode, axes padded one after the other (so corner
regions hold what NumPy puts there), widths larger than the axis included. A piece is cut
in blocks no longer than the array's along the axis, or up to the automatic block size
when the pad is wider; an edge, wrap, reflect or symmetric block reads only the blocks of
the array its values come from (its positions are mapped by the mode's period, never
listed when planning). A pad whose result would have more blocks than a plan may hold
(``max_tasks``) is refused at once, from the widths and the block sizes alone.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.pad(x, (2, 1), mode="wrap").compute()
array([4., 5., 0., 1., 2., 3., 4., 5., 0.])
>>> tg.roll(x, 2).compute()
array([4., 5., 0., 1., 2., 3.])
"""

from __future__ import annotations

import builtins
import itertools
import math
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


def replace_at(t: tuple, axis: int, value: Any) -> tuple:
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


def _block_length(chunks: tuple, axis: int, itemsize: int) -> int:
    """The largest block along ``axis`` of a pad piece of an array cut in ``chunks``: the
    array's largest block there, or more, up to a block of about ``AUTO_BLOCK_BYTES`` with
    the array's largest blocks on the other axes (a pad far wider than the blocks makes
    few big blocks, not many small ones)."""
    from tilegraph.array.chunks import AUTO_BLOCK_BYTES

    step = builtins.max(1, builtins.max(chunks[axis], default=1))
    other = math.prod(builtins.max(1, builtins.max(c, default=1))
                      for a, c in enumerate(chunks) if a != axis)
    return builtins.max(step, AUTO_BLOCK_BYTES // builtins.max(1, itemsize * other))


def _piece_sizes(length: int, width: int) -> tuple[int, ...]:
    q, r = divmod(width, length)
    return (length,) * q + ((r,) if r else ()) or (0,)


def _check_size(x: Array, widths: list[tuple[int, int]]) -> None:
    """Refuse, before anything is planned, a pad whose result has more blocks than a plan
    may hold (the ``max_tasks`` option): found from the widths and the block sizes alone,
    so ``pad(x, 10**9)`` fails at once instead of listing 10**8 blocks."""
    from tilegraph import config

    limit = config.resolve({}, "pad").max_tasks
    chunks = list(x.chunks)
    counts = [len(c) for c in chunks]
    shape = list(x.shape)
    for axis, (before, after) in enumerate(widths):
        if not before and not after:
            continue
        length = _block_length(tuple(chunks), axis, x.dtype.itemsize)
        counts[axis] += -(-before // length) + -(-after // length)
        shape[axis] += before + after
        widest = builtins.min(length, builtins.max(before, after))
        chunks[axis] = (builtins.max(builtins.max(chunks[axis], default=0), widest),)
    total = math.prod(counts)
    if total > limit:
        from tilegraph.pipeline import PlanTooLargeError

        shown = [tuple(w) for w in widths]
        raise PlanTooLargeError(
            f"pad: pad_width {shown} makes an array of shape {tuple(shape)} in {total:,} "
            f"blocks ({' x '.join(map(str, counts))}), more than max_tasks={limit:,} a plan "
            "may hold; pad less, give the array larger blocks first (rechunk), or raise the "
            "limit with tilegraph.config.set(max_tasks=...)")


def _constant(x: Array, axis: int, width: int, value: Any) -> Array:
    from tilegraph.array.creation import full

    sizes = _piece_sizes(_block_length(x.chunks, axis, x.dtype.itemsize), width)
    chunks = replace_at(x.chunks, axis, sizes)
    fill = np.asarray(value).astype(x.dtype) if value is not None else x.dtype.type(0)
    return full(tuple(builtins.sum(c) for c in chunks), fill[()] if isinstance(
        fill, np.ndarray) else fill, dtype=x.dtype, chunks=chunks)


def _repeat_piece(stat: Array, axis: int, width: int, length: int) -> Array:
    """``stat`` (one element along ``axis``) repeated ``width`` times along it, in blocks
    of at most ``length``."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.chunks import numblocks
    from tilegraph.array.core import tokenize
    from tilegraph.array.scans import broadcast_block
    from tilegraph.graph.taskgraph import Dep

    sizes = _piece_sizes(length, width)
    chunks = replace_at(stat.chunks, axis, sizes)
    key = stat.collection.key

    def task_of(c: tuple[int, ...]) -> tuple:
        bshape = tuple(chunks[a][k] for a, k in enumerate(c))
        return broadcast_block, [key(replace_at(c, axis, 0))], (bshape, Dep(0))

    blocks = apply_blocks(f"pad-repeat-{tokenize('pad-repeat', stat, axis, width)}",
                          numblocks(chunks), [stat.collection], task_of, kind="getitem",
                          name="pad-repeat")
    return Array(blocks, tuple(builtins.sum(c) for c in chunks), chunks, stat.dtype)


def _stat_pieces(x: Array, axis: int, widths: tuple[int, int], lengths: tuple, mode: str
                 ) -> list[Array | None]:
    import tilegraph.array.reductions as reductions
    import tilegraph.array.statistics as statistics

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
        if stat.chunks != replace_at(x.chunks, axis, (1,)):  # (a median cuts the others finer)
            stat = stat.rechunk(replace_at(x.chunks, axis, (1,)))
        out.append(_repeat_piece(stat, axis, width,
                                 _block_length(x.chunks, axis, x.dtype.itemsize)))
    return out


def _linspace_part(start: Any, stop: np.ndarray, num: int, first: int, last: int,
                   dtype: np.dtype, axis: int) -> np.ndarray:
    """Items ``first:last`` of ``numpy.linspace(start, stop, num, endpoint=False,
    dtype=dtype, axis=axis)``, computed as NumPy computes them."""
    dt = np.result_type(stop.dtype, start, 1.0)
    delta = np.subtract(stop, start, dtype=dt)
    y = np.arange(first, last, dtype=dt).reshape(-1, *((1,) * delta.ndim))
    step = delta / num
    y = (y / num) * delta if np.any(step == 0) else y * step
    y = y + start
    y = np.moveaxis(y, 0, axis)
    if dtype.kind in "iu":
        y = np.floor(y)
    return y.astype(dtype, copy=False)


def _ramp_block(width: int, end_value: Any, right: bool, axis: int, first: int, last: int,
                dtype: np.dtype, edge: np.ndarray) -> np.ndarray:
    stop = edge.squeeze(axis)
    if not right:
        return _linspace_part(end_value, stop, width, first, last, dtype, axis)
    part = _linspace_part(end_value, stop, width, width - last, width - first, dtype, axis)
    return np.flip(part, axis)


def _ramp_pieces(x: Array, axis: int, widths: tuple[int, int], ends: tuple) -> list:
    """NumPy's linear ramps from the edge values to the end values, block by block along
    the pad (each block computes its own part of the ramp from the edge slab)."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.chunks import numblocks
    from tilegraph.array.core import tokenize
    from tilegraph.graph.taskgraph import Dep

    n = x.shape[axis]
    lead = (slice(None),) * axis
    out = []
    for side, (width, end) in enumerate(zip(widths, ends, strict=True)):
        if not width:
            out.append(None)
            continue
        edge = x[(*lead, slice(0, 1))] if side == 0 else x[(*lead, slice(n - 1, n))]
        edge = edge.rechunk(replace_at(edge.chunks, axis, (1,)))
        end_value = 0 if end is None else end
        sizes = _piece_sizes(_block_length(x.chunks, axis, x.dtype.itemsize), width)
        starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        chunks = replace_at(edge.chunks, axis, sizes)
        key = edge.collection.key

        def task_of(c: tuple[int, ...], width: int = width, end_value: Any = end_value,
                    right: bool = side == 1, starts: list = starts, key: Any = key) -> tuple:
            j = c[axis]
            return _ramp_block, [key(replace_at(c, axis, 0))], (
                width, end_value, right, axis, starts[j], starts[j + 1], x.dtype, Dep(0))

        token = tokenize("pad-linear-ramp", edge, axis, width, end_value, side)
        blocks = apply_blocks(f"pad-linear-ramp-{token}", numblocks(chunks),
                              [edge.collection], task_of, kind="map", name="pad-linear-ramp")
        out.append(Array(blocks, tuple(builtins.sum(c) for c in chunks), chunks, x.dtype))
    return out


def _periodic(mode: str, n: int, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For positions ``p`` of the padded axis (0 is the array's first element): the source
    element of each (``mode`` edge, wrap, reflect or symmetric, as ``numpy.pad`` repeats
    them at any width), whether it is a mirror image, and how many whole periods away it
    is (an odd reflection adds that many times twice the end-to-end difference)."""
    zeros = np.zeros(p.shape, dtype=np.int64)
    if mode == "edge":
        return np.clip(p, 0, n - 1), zeros.astype(bool), zeros
    if mode == "wrap":
        return p % n, zeros.astype(bool), zeros
    period = 2 * (n - 1) if mode == "reflect" else 2 * n
    if period == 0:
        return zeros, zeros.astype(bool), zeros
    k = p // period
    r = p - k * period
    mirror = r >= n
    return np.where(mirror, (period - r) if mode == "reflect" else (period - 1 - r), r), \
        mirror, k


def _index_block(mode: str, odd: bool, n: int, axis: int, first: int, last: int, start: int,
                 nspan: int, *blocks: np.ndarray) -> np.ndarray:
    """One block of an edge/wrap/reflect/symmetric pad: positions ``first:last`` of the
    padded axis, from the blocks of the array covering their sources (starting at element
    ``start``), and with ``odd`` the blocks holding the first and the last element."""
    span = blocks[0] if nspan == 1 else np.concatenate(blocks[:nspan], axis=axis)
    idx, mirror, k = _periodic(mode, n, np.arange(first, last))
    out = np.take(span, idx - start, axis=axis)
    if not odd:
        return out
    head = np.take(blocks[nspan], [0], axis=axis)
    tail = np.take(blocks[nspan + 1], [-1], axis=axis)
    along = replace_at((1,) * out.ndim, axis, -1)
    dtype = out.dtype
    with np.errstate(over="ignore"):
        out = np.where(mirror.reshape(along), 2 * tail - out, out).astype(dtype, copy=False)
        return (out + k.astype(dtype).reshape(along) * (2 * (tail - head))).astype(
            dtype, copy=False)


def _index_piece(x: Array, axis: int, first: int, width: int, mode: str, odd: bool
                 ) -> Array:
    """Positions ``first .. first + width`` of the padded axis (0 being ``x``'s first
    element) in ``mode``: each block's task reads only the blocks of ``x`` that hold its
    sources (with ``odd`` also the first and the last block along the axis), at any
    width, without listing the positions when planning."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.chunks import numblocks, offsets
    from tilegraph.array.core import tokenize
    from tilegraph.graph.taskgraph import Dep

    n = x.shape[axis]
    sizes = _piece_sizes(_block_length(x.chunks, axis, x.dtype.itemsize), width)
    starts = [first, *(first + int(v) for v in np.cumsum(sizes))]
    offs = np.asarray(offsets(x.chunks[axis]))
    period = {"edge": 1, "wrap": n, "reflect": 2 * (n - 1), "symmetric": 2 * n}[mode]
    spans = []
    for a, b in itertools.pairwise(starts):
        if mode == "edge" or period == 0:  # one element (reflect of a single one too)
            lo = hi = builtins.min(builtins.max(a, 0), n - 1) if mode == "edge" else 0
            hi = builtins.min(builtins.max(b - 1, 0), n - 1) if mode == "edge" else 0
        elif b - a >= period:
            lo, hi = 0, n - 1
        else:
            idx = _periodic(mode, n, np.arange(a, b))[0] if b > a else np.zeros(1, np.int64)
            lo, hi = int(idx.min()), int(idx.max())
        k0 = int(np.searchsorted(offs, lo, side="right")) - 1
        k1 = int(np.searchsorted(offs, hi, side="right")) - 1
        spans.append((k0, k1, int(offs[k0])))
    last_block = len(x.chunks[axis]) - 1
    chunks = replace_at(x.chunks, axis, sizes)
    key = x.collection.key

    def task_of(c: tuple[int, ...]) -> tuple:
        j = c[axis]
        k0, k1, start = spans[j]
        deps = [key(replace_at(c, axis, k)) for k in range(k0, k1 + 1)]
        if odd:
            deps += [key(replace_at(c, axis, 0)), key(replace_at(c, axis, last_block))]
        unique = list(dict.fromkeys(deps))
        args = (mode, odd, n, axis, starts[j], starts[j + 1], start, k1 - k0 + 1,
                *(Dep(unique.index(d)) for d in deps))
        return _index_block, unique, args

    token = tokenize("pad-index", x, axis, first, width, mode, odd)
    # a piece reads the blocks near the array's edge only (not all of them)
    blocks = apply_blocks(f"pad-{mode}-{token}", numblocks(chunks), [x.collection], task_of,
                          covers=False, kind="getitem", name=f"pad-{mode}")
    return Array(blocks, tuple(builtins.sum(c) for c in chunks), chunks, x.dtype)


def _index_pieces(x: Array, axis: int, widths: tuple[int, int], mode: str, reflect_type: str
                  ) -> list:
    """Left and right pieces of the modes that copy (or, for an odd reflection, combine)
    elements of the axis."""
    n = x.shape[axis]
    before, after = widths
    odd = reflect_type == "odd" and mode in ("reflect", "symmetric")
    return [_index_piece(x, axis, -before, before, mode, odd) if before else None,
            _index_piece(x, axis, n, after, mode, odd) if after else None]


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
        out = out.rechunk(replace_at(out.chunks, axis, (out.shape[axis],)))

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
        _check_size(x, widths)
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
    if reflect_type == "odd" and mode in ("reflect", "symmetric") and x.dtype == bool:
        raise TypeError("pad: reflect_type='odd' of a boolean array is not supported (NumPy "
                        "casts to bool after each reflection); pad x.astype(int) instead")
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
    _check_size(x, widths)
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
