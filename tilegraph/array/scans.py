"""Blocked scans: ``cumsum``, ``cumprod``, ``ufunc.accumulate``, ``cumreduction`` (any block
scan with a carry) and ``diff``.

A scan along an axis is three small steps per block: the block's total (a reduction along
the axis), the carry from the blocks before it (a chain of slice-sized tasks along the
axis), and the block's own scan with the carry applied in place. Only the carries travel
between blocks and no block waits for another block's scan.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(1, 8), chunks=3)
>>> tg.cumsum(x).compute()
array([ 1,  3,  6, 10, 15, 21, 28])
>>> np.maximum.accumulate(tg.from_numpy(np.array([1, 3, 2, 5, 4]), chunks=2)).compute()
array([1, 3, 3, 5, 5])
"""

from __future__ import annotations

import math
import operator
from builtins import max as builtins_max
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import apply_blocks
from tilegraph.algebra.demand import BlockRule, register_block_rule
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.graph.taskgraph import Dep

# ufuncs whose accumulate is a scan that blocks can compute separately (associative)
ASSOCIATIVE = (np.add, np.multiply, np.maximum, np.minimum, np.fmax, np.fmin,
               np.logical_and, np.logical_or, np.logical_xor, np.bitwise_and,
               np.bitwise_or, np.bitwise_xor)


def _total(ufunc: np.ufunc, axis: int, dtype: np.dtype, block: np.ndarray) -> np.ndarray:
    return ufunc.reduce(block, axis=axis, dtype=dtype, keepdims=True)


def _carry(ufunc: np.ufunc, prev: np.ndarray, total: np.ndarray) -> np.ndarray:
    return ufunc(prev, total)


def _scan(ufunc: np.ufunc, axis: int, dtype: np.dtype, block: np.ndarray,
          carry: np.ndarray | None = None) -> np.ndarray:
    out = ufunc.accumulate(block, axis=axis, dtype=dtype)
    if carry is not None:
        ufunc(carry, out, out=out)  # ``out`` is this task's own new array
    return out


def accumulate(ufunc: np.ufunc, x: Any, axis: int | None = 0, dtype: Any = None) -> Array:
    """``ufunc.accumulate(x, axis)`` as a blocked scan (associative ufuncs: add, multiply,
    maximum, minimum, logical and bitwise and/or/xor). ``axis=None`` scans the flattened
    array."""
    if ufunc not in ASSOCIATIVE:
        names = ", ".join(u.__name__ for u in ASSOCIATIVE)
        raise TypeError(f"{ufunc.__name__}.accumulate is not supported on tilegraph arrays "
                        f"(a blocked scan needs an associative ufunc: {names}); call "
                        ".compute() first to accumulate in NumPy")
    x = asarray(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ValueError(f"{ufunc.__name__}.accumulate: cannot accumulate a 0-d array")
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(f"{ufunc.__name__}.accumulate: axis {axis} is out of "
                                      f"bounds for an array of shape {x.shape}")
    axis %= x.ndim
    if dtype is None:
        dtype = ufunc.accumulate(np.ones(1, dtype=x.dtype)).dtype
    dtype = np.dtype(dtype)
    # blocks of no elements along the axis have no last slice: scan without them
    if any(c == 0 for c in x.chunks[axis]) and x.shape[axis]:
        keep = tuple(c for c in x.chunks[axis] if c)
        x = x.rechunk({axis: keep})
    token = tokenize("accumulate", ufunc, x, axis, dtype)
    grid = x.numblocks
    key = x.collection.key
    op = ufunc.__name__
    carry = f"{op}-carry-{token}"
    itemsize = dtype.itemsize
    chunks = x.chunks

    def nbytes(c: tuple[int, ...]) -> int:
        return itemsize * math.prod(chunks[a][i] for a, i in enumerate(c))

    # the total of every block but the last along the axis; the carry into block j is the
    # total of blocks 0 .. j-1, a chain of slice-sized tasks
    total_grid = tuple(g - 1 if a == axis else g for a, g in enumerate(grid))
    totals = apply_blocks(f"{op}-total-{token}", total_grid, [x.collection],
                          lambda c: (_total, [key(c)], (ufunc, axis, dtype, Dep(0))),
                          kind="partial", name=f"{op}-total")

    def carry_task(c: tuple[int, ...]) -> tuple:
        if c[axis] == 0:
            return _identity, [totals.key(c)], None
        return _carry, [(carry, *c), totals.key(c)], (ufunc, Dep(0), Dep(1))

    carries = _shifted(carry, total_grid, [totals], carry_task, axis)

    def out_of(c: tuple[int, ...]) -> tuple:
        if c[axis] == 0:
            return _scan, [key(c)], (ufunc, axis, dtype, Dep(0))
        return (_scan, [key(c), carries.key(c)], (ufunc, axis, dtype, Dep(0), Dep(1)))

    blocks = apply_blocks(f"{op}-accumulate-{token}", grid, [x.collection, carries], out_of,
                          kind="elementwise", name=f"{op}-accumulate", nbytes=nbytes)
    return Array(blocks, x.shape, x.chunks, dtype)


def _scan_block(func: Any, axis: int, dtype: np.dtype, block: np.ndarray) -> np.ndarray:
    return np.asarray(func(block, axis=axis, dtype=dtype))


def _last_slice(axis: int, block: np.ndarray) -> np.ndarray:
    index = [slice(None)] * block.ndim
    index[axis] = slice(block.shape[axis] - 1, block.shape[axis])
    return block[tuple(index)].copy()


def _with_carry(binop: Any, dtype: np.dtype, carry: np.ndarray,
                block: np.ndarray) -> np.ndarray:
    return np.asarray(binop(carry, block)).astype(dtype, copy=False)


def _from_identity(binop: Any, ident: Any, dtype: np.dtype, axis: int,
                   block: np.ndarray) -> np.ndarray:
    shape = tuple(1 if a == axis else n for a, n in enumerate(block.shape))
    return _with_carry(binop, dtype, np.full(shape, ident, dtype=dtype), block)


def cumreduction(func: Any, binop: Any, ident: Any, x: Any, axis: int | None = None,
                 dtype: Any = None) -> Array:
    """A general blocked scan along ``axis`` (dask's ``cumreduction``): ``func(block,
    axis=, dtype=)`` scans each block on its own (``np.cumsum``, a forward fill, ...),
    and ``binop(carry, scanned)`` applies what the blocks before it carry (``np.add``,
    "fill the gaps from the carry", ...), where the carry into a block is ``binop`` of the
    carry into the block before it and that block's last scanned slice, starting from
    ``ident`` (``binop``'s identity). ``axis=None`` scans the flattened array. Each block
    is scanned once; only the last slices travel.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.array([1, 2, 3, 4, 5]), chunks=2)
    >>> tg.cumreduction(np.cumsum, np.add, 0, x, axis=0).compute()
    array([ 1,  3,  6, 10, 15])
    """
    if not callable(func) or not callable(binop):
        raise TypeError(f"cumreduction: func and binop must be callable, got {func!r} and "
                        f"{binop!r}")
    x = asarray(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ValueError("cumreduction: cannot scan a 0-d array")
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(f"cumreduction: axis {axis} is out of bounds for an "
                                      f"array of shape {x.shape}")
    axis %= x.ndim
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    if any(c == 0 for c in x.chunks[axis]) and x.shape[axis]:
        x = x.rechunk({axis: tuple(c for c in x.chunks[axis] if c)})
    token = tokenize("cumreduction", func, binop, ident, x, axis, dtype)
    grid = x.numblocks
    key = x.collection.key
    chunks = x.chunks
    itemsize = dtype.itemsize

    def nbytes(c: tuple[int, ...]) -> int:
        return itemsize * math.prod(chunks[a][i] for a, i in enumerate(c))

    scanned = apply_blocks(f"scan-block-{token}", grid, [x.collection],
                           lambda c: (_scan_block, [key(c)], (func, axis, dtype, Dep(0))),
                           kind="elementwise", name="scan-block", nbytes=nbytes)
    total_grid = tuple(g - 1 if a == axis else g for a, g in enumerate(grid))
    totals = apply_blocks(f"scan-last-{token}", total_grid, [scanned],
                          lambda c: (_last_slice, [scanned.key(c)], (axis, Dep(0))),
                          kind="partial", name="scan-last")
    carry = f"scan-carry-{token}"

    def carry_task(c: tuple[int, ...]) -> tuple:
        if c[axis] == 0:
            return _from_identity, [totals.key(c)], (binop, ident, dtype, axis, Dep(0))
        return _with_carry, [(carry, *c), totals.key(c)], (binop, dtype, Dep(0), Dep(1))

    carries = _shifted(carry, total_grid, [totals], carry_task, axis)

    def out_of(c: tuple[int, ...]) -> tuple:
        if c[axis] == 0:
            return _from_identity, [scanned.key(c)], (binop, ident, dtype, axis, Dep(0))
        return (_with_carry, [carries.key(c), scanned.key(c)],
                (binop, dtype, Dep(0), Dep(1)))

    blocks = apply_blocks(f"scan-{token}", grid, [scanned, carries], out_of,
                          kind="elementwise", name="scan", nbytes=nbytes)
    return Array(blocks, x.shape, x.chunks, dtype)


def _shifted(label: str, grid: tuple[int, ...], inputs: list, task_of: Any, axis: int) -> Any:
    """The carries: block ``(..., j, ...)`` is the carry into block ``j + 1`` along
    ``axis``, keyed ``(label, ..., j + 1, ...)`` so that block ``j``'s carry is
    ``(label, ..., j, ...)``."""
    from tilegraph.algebra.blocks import Blocks

    def emit(builder: Any, coords: Any = None) -> None:
        # ``coords``: carries wanted, by their own coordinate (along the axis 1 .. g)
        todo = np.ndindex(*grid) if coords is None else (
            (*o[:axis], o[axis] - 1, *o[axis + 1:]) for o in coords if o[axis])
        for c in todo:
            func, deps, args = task_of(c)
            out = (*c[:axis], c[axis] + 1, *c[axis + 1:])
            builder.add((label, *out), func, deps=deps, args=args, kind="reduce",
                        name=label.split("-")[0] + "-carry", coords=out)

    keys = np.empty(tuple(g + 1 if a == axis else g for a, g in enumerate(grid)),
                    dtype=object)
    for c in np.ndindex(*keys.shape):
        keys[c] = (label, *c)
    blocks = Blocks(label, keys.shape, inputs, emit, keys=keys,
                    ntasks=math.prod(grid), op="carries", spec=axis)
    return blocks


def _carries_needs(coll: Any, coords: Any, demand: Any) -> bool:
    """The blocks some carries of :func:`_shifted` read: the carry into block ``j`` is
    made from the carry into block ``j - 1`` (down to block 1), and each of those from
    the totals (or scanned blocks) before it; the chain is added to the carries
    wanted."""
    if coords is None:
        for d in coll.deps:
            demand.every(d)
        return True
    axis = coll.spec
    chain = {(*o[:axis], j, *o[axis + 1:]) for o in coords for j in range(1, o[axis] + 1)}
    demand.some(coll, chain)
    (totals,) = coll.deps
    demand.some(totals, {(*o[:axis], o[axis] - 1, *o[axis + 1:]) for o in chain})
    return True


def _count_carries(coll: Any, coords: Any) -> int:
    return sum(1 for o in coords if o[coll.spec] > 0)


register_block_rule("carries", BlockRule(_carries_needs, _count_carries))


def _identity(block: Any) -> Any:
    return block


def cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Array:
    """Cumulative sum along ``axis`` (the flattened array by default), a blocked scan."""
    x = asarray(x)
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.cumsum(np.ones(1, dtype=x.dtype)).dtype
    return accumulate(np.add, x, axis, dtype)


def cumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Array:
    """Cumulative product along ``axis`` (the flattened array by default), a blocked scan."""
    x = asarray(x)
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.cumprod(np.ones(1, dtype=x.dtype)).dtype
    return accumulate(np.multiply, x, axis, dtype)


def nancumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Array:
    """Cumulative sum treating NaNs as zero."""
    x = asarray(x)
    if x.dtype.kind in "fc":
        x = np.where(np.isnan(x), x.dtype.type(0), x)
    return cumsum(x, axis, dtype)


def nancumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Array:
    """Cumulative product treating NaNs as one."""
    x = asarray(x)
    if x.dtype.kind in "fc":
        x = np.where(np.isnan(x), x.dtype.type(1), x)
    return cumprod(x, axis, dtype)


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None
         ) -> Array:
    """``numpy.diff``: the ``n``-th discrete difference along ``axis`` (slices and one
    elementwise subtraction per step; blocks stay where they are)."""
    from tilegraph.array.manipulation import concatenate

    a = asarray(a)
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    if a.ndim == 0:
        raise ValueError("diff: requires input that is at least one dimensional")
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(
            f"diff: axis {axis} is out of bounds for an array of shape {a.shape}")
    axis %= a.ndim
    def edge(extra: Any) -> Array:
        e = asarray(extra)
        if e.ndim == 0:
            e = broadcast_to(e, tuple(1 if i == axis else s for i, s in enumerate(a.shape)))
        return e

    parts = [*([edge(prepend)] if prepend is not None else []), a,
             *([edge(append)] if append is not None else [])]
    if len(parts) > 1:
        a = concatenate(parts, axis=axis)
    if n == 0:
        return a
    lo = (slice(None),) * axis + (slice(1, None),)
    hi = (slice(None),) * axis + (slice(None, -1),)
    for _ in range(n):
        a = np.not_equal(a[lo], a[hi]) if a.dtype == np.bool_ else a[lo] - a[hi]
    return a


def broadcast_block(shape: tuple[int, ...], block: np.ndarray) -> np.ndarray:
    """``block`` broadcast to ``shape`` (a read-only view)."""
    return np.broadcast_to(block, shape)


def broadcast_to(x: Any, shape: Any) -> Array:
    """``numpy.broadcast_to``: ``x`` repeated along new or length-1 axes (read-only views
    per block; a new or stretched axis in blocks of about the automatic size)."""
    from tilegraph.array.creation import shape_tuple
    from tilegraph.array.elementwise import align, broadcast_index_map

    x = asarray(x)
    shape = shape_tuple(shape)
    try:
        if np.broadcast_shapes(x.shape, shape) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"broadcast_to: array of shape {x.shape} cannot be broadcast to "
                         f"shape {shape}") from None
    if shape == x.shape:
        return x
    from tilegraph.array.creation import full

    # the axes x already has keep its blocks; a new or stretched axis gets blocks of about
    # the automatic size (not blocks of one element: (1, 5) -> (10**7, 5) is a few blocks)
    lead = len(shape) - x.ndim
    like = tuple("auto" if a < lead or x.shape[a - lead] != n else
                 builtins_max(1, x.chunksize[a - lead]) for a, n in enumerate(shape))
    blank = full(shape, np.zeros((), x.dtype)[()], dtype=x.dtype, chunks=like)
    _, chunks, (x, _) = align("broadcast_to", [x, blank])
    imap = broadcast_index_map(x, shape)
    key = x.collection.key
    token = tokenize("broadcast_to", x, shape, chunks)

    def task_of(c: tuple[int, ...]) -> tuple:
        bshape = tuple(chunks[a][i] for a, i in enumerate(c))
        return broadcast_block, [key(imap(c) if imap else c)], (bshape, Dep(0))

    from tilegraph.array.chunks import numblocks

    blocks = apply_blocks(f"broadcast_to-{token}", numblocks(chunks), [x.collection], task_of,
                          kind="getitem", name="broadcast_to")
    return Array(blocks, shape, chunks, x.dtype)
