"""Basic indexing: integers, slices (any start, stop and step, unaligned with the blocks),
``None`` and ``...`` (integer arrays and boolean masks: :mod:`tilegraph.array.indexing`).
Each output block is a view of exactly one input block, so slicing costs one cheap task per
output block and copies nothing."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import apply_blocks
from tilegraph.array.chunks import offsets
from tilegraph.array.core import Array, tokenize
from tilegraph.graph.taskgraph import Dep, Lit


def normalize_index(index: Any, shape: tuple[int, ...]) -> tuple:
    """The index as a tuple of ints, slices and None with ``...`` expanded; advanced
    indexing is rejected with a message saying what is supported."""
    if not isinstance(index, tuple):
        index = (index,)
    for item in index:
        if (isinstance(item, (Array, list, bool, np.bool_))
                or (isinstance(item, np.ndarray) and (item.ndim or item.dtype.kind == "b"))):
            raise TypeError(
                f"index {item!r}: only basic indexing (ints, slices, None, ...) is supported; "
                "integer-array and boolean-mask indexing are not"
            )
        if not (item is None or item is Ellipsis or isinstance(item, slice)
                or isinstance(item, (int, np.integer))
                or (isinstance(item, np.ndarray) and item.ndim == 0
                    and item.dtype.kind in "iu")):
            raise TypeError(f"index {item!r} of type {type(item).__name__} is not supported: "
                            "only basic indexing (ints, slices, None, ...) is supported")
    n_ell = sum(1 for i in index if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > len(shape):
        raise IndexError(
            f"too many indices: array of shape {shape} has {len(shape)} axes, {used} indexed")
    out = []
    for item in index:
        if item is Ellipsis:
            out.extend([slice(None)] * (len(shape) - used))
        else:
            out.append(int(item) if isinstance(item, (np.integer, np.ndarray)) else item)
    if n_ell == 0:
        out.extend([slice(None)] * (len(shape) - used))
    return tuple(out)


def slice_pieces(sizes: tuple[int, ...], sl: slice, length: int) -> list[tuple[int, slice, int]]:
    """For a slice of an axis with block sizes ``sizes``: the output pieces in order, as
    ``(input block, local slice, piece length)``."""
    start, stop, step = sl.indices(length)
    offs = offsets(sizes)
    pieces = []
    n = len(range(start, stop, step))
    if n == 0:
        return [(0, slice(0, 0), 0)]
    if step > 0:
        last = start + (n - 1) * step
        for b, (lo, hi) in enumerate(itertools.pairwise(offs)):
            if hi <= start or lo > last:
                continue
            first = start if start >= lo else start + -(-(lo - start) // step) * step
            if first >= hi or first > last:
                continue
            end = min(hi - 1, last)
            count = (end - first) // step + 1
            pieces.append((b, slice(first - lo, first - lo + (count - 1) * step + 1, step),
                           count))
    else:
        last = start + (n - 1) * step  # smallest index
        for b in range(len(sizes) - 1, -1, -1):
            lo, hi = offs[b], offs[b + 1]
            if lo > start or hi - 1 < last:
                continue
            first = start if start < hi else start - -(-(start - (hi - 1)) // -step) * -step
            if first < lo or first < last:
                continue
            end = max(lo, last)
            count = (first - end) // -step + 1
            stop_local = first - lo + count * step
            pieces.append((b, slice(first - lo, stop_local if stop_local >= 0 else None, step),
                           count))
    return pieces


def _take(block: np.ndarray, index: tuple) -> np.ndarray:
    return block[index]


def getitem_basic(x: Array, index: Any) -> Array:
    """``x[index]`` for basic indexes, as in the module docstring (``x[index]`` itself is
    :func:`tilegraph.array.indexing.getitem`, which sends integer arrays and boolean masks to
    the advanced indexing)."""
    idx = normalize_index(index, x.shape)
    if all(isinstance(i, slice) and i == slice(None) for i in idx):
        return x.copy()  # a new object: assigning into x later does not change it
    axis_plan = []  # per output axis: list of (block, local index, length) or a new axis
    fixed: dict[int, tuple[int, int]] = {}  # input axis -> (block, local int)
    in_axis = 0
    out_axes: list[tuple[str, int]] = []
    for item in idx:
        if item is None:
            out_axes.append(("new", -1))
            axis_plan.append(None)
            continue
        length = x.shape[in_axis]
        if isinstance(item, slice):
            axis_plan.append(slice_pieces(x.chunks[in_axis], item, length))
            out_axes.append(("slice", in_axis))
        else:
            i = item + length if item < 0 else item
            if not 0 <= i < length:
                raise IndexError(
                    f"index {item} is out of bounds for axis {in_axis} with length {length} "
                    f"(shape {x.shape})")
            offs = offsets(x.chunks[in_axis])
            b = int(np.searchsorted(offs, i, side="right") - 1)
            fixed[in_axis] = (b, i - offs[b])
        in_axis += 1
    chunks = tuple((1,) if plan is None else tuple(p[2] for p in plan) for plan in axis_plan)
    shape = tuple(sum(c) for c in chunks)
    grid = tuple(len(c) for c in chunks)
    token = tokenize("getitem", x, idx)
    name = f"getitem-{token}"
    xkey = x.collection.key
    itemsize = x.dtype.itemsize

    def task_of(coord: tuple[int, ...]) -> tuple:
        in_coord = [0] * x.ndim
        local: list[Any] = []
        for out_ax, (kind, ax) in enumerate(out_axes):
            if kind == "new":
                local.append(None)
                continue
            b, sl, _ = axis_plan[out_ax][coord[out_ax]]
            in_coord[ax] = b
            local.append((ax, sl))
        for ax, (b, _) in fixed.items():
            in_coord[ax] = b
        # rebuild the local index in input-axis order with None in place
        full: list[Any] = []
        it = iter(local)
        ax = 0
        for item in idx:
            if item is None:
                full.append(next(it))
            elif isinstance(item, slice):
                full.append(next(it)[1])
                ax += 1
            else:
                full.append(fixed[ax][1])
                ax += 1
        return _take, [xkey(tuple(in_coord))], (Dep(0), Lit(tuple(full)))

    def nbytes(coord: tuple[int, ...]) -> int:
        return itemsize * math.prod(chunks[a][k] for a, k in enumerate(coord))

    def reads() -> Iterable[tuple[int, ...]]:
        """The input blocks the slice reads: per input axis, those its pieces cut."""
        per_axis: list[list[int]] = [[] for _ in range(x.ndim)]
        for (kind, ax), plan in zip(out_axes, axis_plan, strict=True):
            if kind != "new":
                per_axis[ax] = sorted({b for b, _, _ in plan})
        for ax, (b, _) in fixed.items():
            per_axis[ax] = [b]
        return itertools.product(*per_axis)

    # a slice reads the input blocks it overlaps only
    blocks = apply_blocks(name, grid, [x.collection], task_of, covers=reads, kind="getitem",
                          name="getitem", nbytes=nbytes)
    return Array(blocks, shape, chunks, x.dtype)
