"""Advanced indexing: integer arrays and boolean masks, ``take``, ``compress``,
``nonzero`` and the other selections whose result shape depends on data.

An integer index known when the plan is built (a list, a NumPy array) is planned at once:
each output block gathers its elements from the few input blocks that hold them. An index
that is itself a lazy Array, and a boolean mask, make a result whose length depends on
values, so these are planned in two phases: a small pass computes the sizes (the number of
true elements of each mask block, or the index values), then the rest is planned with those
sizes as its block sizes. The size pass runs with the current options
(``tilegraph.config.set(backend=...)``), so it runs under MPI too.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(10.0), chunks=4)
>>> x[[5, 3, 9]].compute()
array([5., 3., 9.])
>>> x[x > 6.5].compute()
array([7., 8., 9.])
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import apply_blocks
from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.array.chunks import numblocks, offsets
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.slicing import getitem_basic
from tilegraph.graph.taskgraph import Dep, Lit


def digest(values: np.ndarray) -> str:
    """A name for the contents of a NumPy array (index values, splitters) in a token."""
    import hashlib

    data = np.ascontiguousarray(values)
    return f"{data.dtype.str}{data.shape}" + hashlib.sha1(
        data.tobytes(), usedforsecurity=False).hexdigest()


def is_advanced(item: Any) -> bool:
    """Whether an index item asks for advanced (integer-array or boolean) indexing."""
    if isinstance(item, (Array, list)):
        return True
    if isinstance(item, np.ndarray):
        return item.ndim > 0 or item.dtype.kind == "b"
    return isinstance(item, (bool, np.bool_))


def _as_index_array(item: Any) -> Any:
    """A list or NumPy array as a NumPy index array (an Array stays lazy)."""
    if isinstance(item, Array):
        if item.dtype.kind not in "biu":
            raise IndexError(f"arrays used as indices must be of integer or boolean type, "
                             f"got {item.dtype}")
        return item
    arr = np.asarray(item)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.intp)  # x[[]] selects nothing, as in NumPy
    if arr.dtype.kind not in "biu":
        raise IndexError(f"arrays used as indices must be of integer or boolean type, got "
                         f"{arr.dtype} ({item!r:.60})")
    return arr


def _is_int(item: Any) -> bool:
    return (isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))) \
        or (isinstance(item, np.ndarray) and item.ndim == 0 and item.dtype.kind in "iu")


def lazy_scalars(index: tuple) -> tuple:
    """0-d integer Arrays in an index replaced by their values (computed now)."""
    out = []
    for item in index:
        if isinstance(item, Array) and item.ndim == 0 and item.dtype.kind in "iu":
            item = int(item.compute())
        out.append(item)
    return tuple(out)


def advanced_adjacent(index: tuple) -> bool:
    """NumPy's rule for where the broadcast axes of several advanced indices go: when the
    advanced indices (integer arrays, boolean arrays and, once there is an array, plain
    integers) stand next to each other in the index, the result axes replace them there;
    when a slice, ``None`` or ``...`` separates them, the result axes come first."""
    has_array = any(is_advanced(i) for i in index)
    pos = [k for k, i in enumerate(index) if is_advanced(i) or (has_array and _is_int(i))]
    return not pos or pos[-1] - pos[0] + 1 == len(pos)


def expand_index(index: tuple, ndim: int, shape: tuple[int, ...]) -> list[tuple]:
    """The index as one entry per item, ``...`` expanded: ``("none",)``, ``("slice", axis,
    slice)``, ``("int", axis, i)`` or ``("array", axis, values)`` where ``values`` is a
    NumPy integer array (a lazy index Array is computed now: phase one). A boolean array
    over ``k`` axes becomes ``k`` integer arrays (its ``nonzero``), as in NumPy."""
    n_ell = sum(1 for i in index if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    arrays = []
    used = 0
    for item in index:
        if item is None or item is Ellipsis:
            arrays.append(item)
            continue
        if isinstance(item, (bool, np.bool_)):
            raise IndexError("a boolean scalar index cannot be combined with other "
                             "integer-array indices; index in two steps")
        if is_advanced(item):
            arr = _as_index_array(item)
            if isinstance(arr, Array):
                arr = np.asarray(arr.compute())
            arrays.append(arr)
            used += arr.ndim if arr.dtype.kind == "b" else 1
        else:
            arrays.append(item)
            used += 1
    if used > ndim:
        raise IndexError(f"too many indices: array of shape {shape} has {ndim} axes, "
                         f"{used} indexed")
    out: list[tuple] = []
    axis = 0
    for item in arrays:
        if item is None:
            out.append(("none",))
        elif item is Ellipsis:
            for _ in range(ndim - used):
                out.append(("slice", axis, slice(None)))
                axis += 1
        elif isinstance(item, np.ndarray) and item.dtype.kind == "b":
            span = shape[axis:axis + item.ndim]
            if span != item.shape:
                raise IndexError(
                    f"boolean index of shape {item.shape} does not match the indexed array "
                    f"of shape {shape} at axes {axis}..{axis + item.ndim - 1} (sizes {span})")
            for values in np.nonzero(item):
                out.append(("array", axis, values))
                axis += 1
        elif isinstance(item, np.ndarray) and item.ndim:
            out.append(("array", axis, item))
            axis += 1
        elif isinstance(item, slice):
            out.append(("slice", axis, item))
            axis += 1
        elif _is_int(item):
            out.append(("int", axis, int(item)))
            axis += 1
        else:
            raise TypeError(f"index {item!r} of type {type(item).__name__} is not supported")
    while axis < ndim:
        out.append(("slice", axis, slice(None)))
        axis += 1
    for entry in out:  # bounds, negative values wrapped
        if entry[0] in ("int", "array"):
            _, ax, v = entry
            length = shape[ax]
            flat = np.asarray(v, dtype=np.int64)
            bad = (flat < -length) | (flat >= length)
            if bad.any():
                raise IndexError(f"index {int(flat[bad].reshape(-1)[0])} is out of bounds for "
                                 f"axis {ax} with size {length} (shape {shape})")
    return out


def broadcast_index_arrays(entries: list[tuple], shape: tuple[int, ...]
                           ) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """The integer arrays and integers of ``entries`` broadcast together (NumPy's rule),
    negative values wrapped; and the broadcast shape."""
    values = [np.asarray(e[2], dtype=np.int64) for e in entries if e[0] in ("int", "array")]
    try:
        values = np.broadcast_arrays(*values)
    except ValueError:
        shapes = " ".join(str(v.shape) for v in values)
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {shapes}") from None
    axes = [e[1] for e in entries if e[0] in ("int", "array")]
    out = [np.where(v < 0, v + shape[a], v) for v, a in zip(values, axes, strict=True)]
    return out, (out[0].shape if out else ())


def getitem(x: Array, index: Any) -> Array:
    """``x[index]``: basic indexes (ints, slices, ``None``, ``...``) by
    :func:`tilegraph.array.slicing.getitem_basic`; an integer array or a boolean mask among
    them by :func:`getitem_advanced`."""
    items = index if isinstance(index, tuple) else (index,)
    if any(is_advanced(i) for i in items):
        return getitem_advanced(x, items)
    return getitem_basic(x, index)


def getitem_advanced(x: Array, index: tuple) -> Array:
    """``x[index]`` where items of ``index`` are integer arrays or boolean masks and the
    others are basic (ints, slices, ``None``, ``...``).

    One array (next to any plain integers) is planned directly: the basic part first, then
    :func:`take` or :func:`boolean_select` (a lazy mask in two phases). Several arrays are
    broadcast together and their axes flattened into one, so that the same :func:`take`
    gathers them by a linear index; the result axes land where NumPy puts them."""
    lazy = [k for k, item in enumerate(index) if is_lazy_int(item)]
    if lazy and not any(is_advanced(item) for k, item in enumerate(index) if k not in lazy):
        return _getitem_dynamic(x, index, lazy)
    index = lazy_scalars(index)
    adv = [i for i, item in enumerate(index) if is_advanced(item)]
    if not adv:
        return getitem(x, index)
    if len(adv) > 1 or not advanced_adjacent(index):
        return _getitem_several(x, index)
    return _getitem_one(x, index, adv[0])


def is_lazy_int(item: Any) -> bool:
    """Whether ``item`` is a 0-d integer Array (an index whose value is read when the plan
    runs)."""
    return isinstance(item, Array) and item.ndim == 0 and item.dtype.kind in "iu"


def _getitem_dynamic(x: Array, index: tuple, lazy: list[int]) -> Array:
    """``x[index]`` where the items at ``lazy`` are 0-d integer Arrays and the others basic:
    the basic part with those axes kept whole, then :func:`dynamic_index` on each of them.
    The plan does not depend on the index values (they are read when the plan runs), so a
    loop-carried index works in a :func:`~tilegraph.while_loop` body."""
    basic = tuple(slice(None) if k in lazy else item for k, item in enumerate(index))
    used = sum(1 for item in index if item is not None and item is not Ellipsis)
    axes = {}
    out = 0
    for k, item in enumerate(index):
        if k in lazy:
            axes[k] = out
            out += 1
        elif item is Ellipsis:
            out += x.ndim - used
        elif item is None or isinstance(item, slice):
            out += 1
    if used > x.ndim:
        raise IndexError(f"too many indices: array of shape {x.shape} has {x.ndim} axes, "
                         f"{used} indexed")
    y = getitem(x, basic)
    for k in sorted(lazy, reverse=True):   # the last first: earlier axes keep their number
        y = dynamic_index(y, index[k], axes[k])
    return y


def _pick_local(offset: int, length: int, total: int, axis: int, i: Any,
                block: np.ndarray) -> np.ndarray | None:
    """The slice of ``block`` (starting at ``offset`` along ``axis``) at index ``i`` of the
    whole axis, or ``None`` when another block holds it."""
    k = int(i)
    if k < 0:
        k += total
    if offset <= k < offset + length:
        return np.take(block, k - offset, axis=axis)
    return None


def _picked(total: int, axis: int, i: Any, *parts: np.ndarray | None) -> np.ndarray:
    k = int(i)
    if not -total <= k < total:
        raise IndexError(f"index {k} is out of bounds for axis {axis} with size {total}")
    return next(p for p in parts if p is not None)


def dynamic_index(x: Array, i: Array, axis: int) -> Array:
    """``x`` indexed by the 0-d integer Array ``i`` along ``axis`` (the axis dropped),
    planned without knowing ``i``: every block looks whether it holds index ``i`` (a few
    bytes when it does not), then one task per result block keeps the slice that was found.
    An index out of bounds raises ``IndexError`` when the plan runs."""
    if not is_lazy_int(i):
        raise TypeError(f"dynamic_index: the index must be a 0-d integer Array, got {i!r:.60}")
    axis = operator.index(axis)
    if not 0 <= axis < x.ndim:
        raise np.exceptions.AxisError(f"dynamic_index: axis {axis} is out of bounds for an "
                                      f"array of shape {x.shape}")
    total = x.shape[axis]
    if total == 0:
        raise IndexError(f"index into an empty axis {axis} (shape {x.shape})")
    offs = offsets(x.chunks[axis])
    xkey, ikey = x.collection.key, i.collection.key
    token = tokenize("dynamic-index", x, i, axis)

    def local(coord: tuple[int, ...]) -> tuple:
        b = coord[axis]
        return (_pick_local, [xkey(coord), ikey(())],
                (offs[b], offs[b + 1] - offs[b], total, axis, Dep(1), Dep(0)))

    found = apply_blocks(f"dynamic-index-local-{token}", x.numblocks,
                         [x.collection, i.collection], local, kind="getitem",
                         name="dynamic-index")
    chunks = (*x.chunks[:axis], *x.chunks[axis + 1:])
    nb = x.numblocks[axis]

    def pick(coord: tuple[int, ...]) -> tuple:
        keys = [ikey(())] + [found.key((*coord[:axis], b, *coord[axis:])) for b in range(nb)]
        return _picked, keys, (total, axis, *[Dep(k) for k in range(nb + 1)])

    itemsize = x.dtype.itemsize
    blocks = apply_blocks(f"dynamic-index-{token}", numblocks(chunks),
                          [found, i.collection], pick, kind="getitem", name="dynamic-index",
                          nbytes=lambda c: itemsize * math.prod(
                              chunks[a][k] for a, k in enumerate(c)))
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, x.dtype)


def _getitem_several(x: Array, index: tuple) -> Array:
    entries = expand_index(index, x.ndim, x.shape)
    values, _ = broadcast_index_arrays(entries, x.shape)
    # the basic part: advanced axes kept whole
    basic = tuple(None if e[0] == "none" else e[2] if e[0] == "slice" else slice(None)
                  for e in entries)
    y = getitem(x, basic)
    adv_y = [k for k, e in enumerate(entries) if e[0] in ("int", "array")]
    rest = [k for k, e in enumerate(entries) if e[0] not in ("int", "array")]
    p = len([k for k in rest if k < adv_y[0]]) if advanced_adjacent(index) else 0
    perm = rest[:p] + adv_y + rest[p:]
    if perm != list(range(len(perm))):
        y = y.transpose(perm)
    dims = tuple(x.shape[entries[k][1]] for k in adv_y)
    if len(dims) > 1:
        linear = np.ravel_multi_index(tuple(values), dims) if values[0].size else \
            np.zeros(values[0].shape, dtype=np.int64)
        y = y.reshape((*y.shape[:p], math.prod(dims), *y.shape[p + len(dims):]))
    else:
        linear = values[0]
    return take(y, linear, axis=p)


def _getitem_one(x: Array, index: tuple, pos: int) -> Array:
    item = _as_index_array(index[pos])
    # a boolean scalar adds an axis of length one, kept where the scalar is true
    k = item.ndim if item.dtype.kind == "b" else 1
    fill = [None] if item.ndim == 0 else [slice(None)] * k
    if item.ndim == 0:
        item = item.reshape(1)
    basic = (*index[:pos], *fill, *index[pos + 1:])
    n_ell = sum(1 for i in basic if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for i in basic if i is not None and i is not Ellipsis)
    if used > x.ndim:
        raise IndexError(f"too many indices: array of shape {x.shape} has {x.ndim} axes, "
                         f"{used} indexed")
    # the output axis where the advanced index lands: one per slice or None before it, and
    # the axes an ellipsis before it stands for
    axis = 0
    for i in basic[:pos]:
        if i is Ellipsis:
            axis += x.ndim - used
        elif i is None or isinstance(i, slice):
            axis += 1
    y = getitem(x, basic)
    if item.dtype.kind == "b":
        return boolean_select(y, item, axis)
    return take(y, item, axis)


# -- integer arrays --------------------------------------------------------------------------


def _gather(axis: int, shape: tuple[int, ...], dtype: np.dtype, plan: tuple,
            *blocks: np.ndarray) -> np.ndarray:
    """One output block: for each input block, its elements ``local`` go to ``positions``."""
    out = np.empty(shape, dtype=dtype)
    lead = (slice(None),) * axis
    for (positions, local), block in zip(plan, blocks, strict=True):
        out[(*lead, positions)] = np.take(block, local, axis=axis)
    return out


def _take_block(block: np.ndarray, local: np.ndarray, axis: int) -> np.ndarray:
    return np.take(block, local, axis=axis)


def _array_axis(x: Any, axis: Any, what: str) -> tuple[Array, int]:
    """``x`` as an Array and ``axis`` as a non-negative axis of it (``None``: ``x``
    flattened, axis 0), as NumPy's ``take`` and ``compress`` read them."""
    x = asarray(x)
    if axis is None:
        return x.reshape(-1), 0
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(
            f"{what}: axis {axis} is out of bounds for an array of shape {x.shape}")
    return x, axis % x.ndim


def take(x: Any, indices: Any, axis: int | None = None, *,
         block_sizes: Sequence[int] | None = None) -> Array:
    """The elements of ``x`` at integer ``indices`` along ``axis`` (``numpy.take``; with
    ``axis=None`` the flattened array). Output blocks have about the input's block size
    along ``axis`` (or ``block_sizes``, which must add up to the number of indices, taken
    flat); each gathers from the input blocks that hold its elements.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(12).reshape(3, 4), chunks=2)
    >>> tg.take(x, [3, 0], axis=1).compute()
    array([[ 3,  0],
           [ 7,  4],
           [11,  8]])
    """
    x, axis = _array_axis(x, axis, "take")
    idx = _as_index_array(indices)
    if isinstance(idx, Array):  # phase one: the index values
        idx = np.asarray(idx.compute())
    if idx.dtype.kind == "b":
        raise IndexError("take: indices must be integers, got a boolean array; use "
                         "compress() or a boolean mask")
    length = x.shape[axis]
    flat = idx.astype(np.int64, copy=False).reshape(-1)
    bad = (flat < -length) | (flat >= length)
    if bad.any():
        raise IndexError(f"index {int(flat[bad][0])} is out of bounds for axis {axis} with "
                         f"size {length} (shape {x.shape})")
    flat = np.where(flat < 0, flat + length, flat)
    n = flat.size
    if block_sizes is not None:
        out_sizes = tuple(int(b) for b in block_sizes)
        if sum(out_sizes) != n or any(b < 0 for b in out_sizes) or not out_sizes:
            raise ValueError(f"take: block_sizes {tuple(block_sizes)} must be sizes >= 0 "
                             f"adding up to the {n} indices")
    else:
        piece = max(1, max(x.chunks[axis]))
        out_sizes = tuple(min(piece, n - s) for s in range(0, n, piece)) or (0,)
    offs = np.asarray(offsets(x.chunks[axis]))
    owner = np.searchsorted(offs, flat, side="right") - 1
    local = flat - offs[owner] if n else flat
    plans = []  # per output piece: [(input block, positions, local indices)]
    for p, start in enumerate(offsets(out_sizes)[:-1]):
        sl = slice(start, start + out_sizes[p])
        own, loc = owner[sl], local[sl]
        if own.size == 0:
            plans.append([(0, np.arange(0), loc)])
            continue
        plans.append([(int(b), np.flatnonzero(own == b), loc[own == b])
                      for b in np.unique(own)])
    chunks = (*x.chunks[:axis], out_sizes, *x.chunks[axis + 1:])
    grid = numblocks(chunks)
    dtype = x.dtype
    xkey = x.collection.key
    token = tokenize("take", x, axis, digest(flat), out_sizes)

    def task_of(coord: tuple[int, ...]) -> tuple:
        parts = plans[coord[axis]]
        keys = [xkey((*coord[:axis], b, *coord[axis + 1:])) for b, _, _ in parts]
        if len(parts) == 1:
            return _take_block, keys, (Dep(0), Lit(parts[0][2]), axis)
        shape = tuple(c[i] for c, i in zip(chunks, coord, strict=True))
        plan = tuple((pos, loc) for _, pos, loc in parts)
        return (_gather, keys,
                (axis, shape, dtype, Lit(plan), *[Dep(i) for i in range(len(keys))]))

    itemsize = dtype.itemsize
    blocks = apply_blocks(f"take-{token}", grid, [x.collection], task_of, covers=False,
                          kind="getitem", name="take",
                          nbytes=lambda c: itemsize * math.prod(
                              chunks[a][k] for a, k in enumerate(c)))
    out = Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)
    if idx.ndim != 1:
        out = out.reshape((*x.shape[:axis], *idx.shape, *x.shape[axis + 1:]))
    return out


# -- boolean masks ---------------------------------------------------------------------------


def _count_true(block: np.ndarray) -> np.ndarray:
    return np.full((1,) * block.ndim, np.count_nonzero(block), dtype=np.int64)


def block_counts(mask: Array) -> np.ndarray:
    """Phase one of a data-dependent selection: the number of true elements of each block
    of ``mask`` (an int array of the block grid's shape), computed now."""
    grid = mask.numblocks
    ones = tuple((1,) * g for g in grid)
    blocks = _map_blocks(f"count-true-{tokenize('count-true', mask)}", _count_true,
                         [mask.collection], grid, kind="partial", name="count-true")
    counts = Array(blocks, grid, ones, np.int64)
    return np.asarray(counts.compute()).reshape(grid)


def _select(axis: int, block: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return block[(slice(None),) * axis + (mask,)]


def boolean_select(x: Array, mask: Any, axis: int = 0) -> Array:
    """``x[..., mask, ...]`` with ``mask`` over axes ``axis .. axis + mask.ndim - 1``: those
    axes become one axis of the selected elements, in NumPy's (row-major) order.

    A mask of several axes keeps its blocks along the first and is one block along the
    others, so that each block of the result is a contiguous run of the selection."""
    mask = asarray(mask) if not isinstance(mask, Array) else mask
    if mask.dtype.kind != "b":
        raise IndexError(f"a boolean mask must have a boolean dtype, got {mask.dtype}")
    k = mask.ndim
    span = x.shape[axis:axis + k]
    if span != mask.shape:
        raise IndexError(
            f"boolean index of shape {mask.shape} does not match the indexed array of shape "
            f"{x.shape} at axes {axis}..{axis + k - 1} (sizes {span})")
    want = (x.chunks[axis], *[(s,) if s else (0,) for s in mask.shape[1:]])
    if mask.chunks != want:
        mask = mask.rechunk(want)
    xwant = (*x.chunks[:axis], *want, *x.chunks[axis + k:])
    if x.chunks != xwant:
        x = x.rechunk(xwant)
    counts = block_counts(mask).reshape(-1)  # phase one: mask blocks along the first axis
    sizes = tuple(int(c) for c in counts) or (0,)
    chunks = (*x.chunks[:axis], sizes, *x.chunks[axis + k:])
    grid = numblocks(chunks)
    xkey, mkey = x.collection.key, mask.collection.key
    rest = (0,) * (k - 1)

    def task_of(coord: tuple[int, ...]) -> tuple:
        b = coord[axis]
        xc = (*coord[:axis], b, *rest, *coord[axis + 1:])
        return _select, [xkey(xc), mkey((b, *rest))], (axis, Dep(0), Dep(1))

    dtype = x.dtype
    itemsize = dtype.itemsize
    token = tokenize("mask", x, mask, axis)
    blocks = apply_blocks(f"mask-{token}", grid, [x.collection, mask.collection], task_of,
                          kind="getitem", name="mask",
                          nbytes=lambda c: itemsize * math.prod(
                              chunks[a][i] for a, i in enumerate(c)))
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)


def compress(condition: Any, a: Any, axis: int | None = None) -> Array:
    """``numpy.compress``: the slices of ``a`` along ``axis`` where ``condition`` is true
    (a 1-D boolean array, as long as the axis or shorter)."""
    a, axis = _array_axis(a, axis, "compress")
    cond = condition if isinstance(condition, Array) else np.asarray(condition)
    if cond.ndim != 1:
        raise ValueError(f"compress: condition must be a 1-d array, got shape {cond.shape}")
    if cond.shape[0] > a.shape[axis]:
        raise IndexError(f"compress: condition of length {cond.shape[0]} is longer than axis "
                         f"{axis} of length {a.shape[axis]}")
    cond = cond.astype(bool)
    if cond.shape[0] < a.shape[axis]:
        a = a[(slice(None),) * axis + (slice(0, cond.shape[0]),)]
    return boolean_select(a, cond, axis)


def _nonzero_block(ndim: int, offs: tuple[int, ...], block: np.ndarray) -> np.ndarray:
    idx = np.nonzero(block)
    out = np.empty((len(idx[0]), ndim), dtype=np.intp)
    for a in range(ndim):
        out[:, a] = idx[a] + offs[a]
    return out


def argwhere(a: Any) -> Array:
    """``numpy.argwhere``: the indices of the non-zero elements, one row each, in row-major
    order (shape ``(count, a.ndim)``); planned in two phases (counts, then indices)."""
    a = asarray(a)
    if a.ndim == 0:
        a = a.reshape(1)
        return argwhere(a)[:, :0]
    nz = a if a.dtype.kind == "b" else a != 0
    want = (a.chunks[0], *[(s,) if s else (0,) for s in a.shape[1:]])
    if nz.chunks != want:
        nz = nz.rechunk(want)
    sizes = tuple(int(c) for c in block_counts(nz).reshape(-1)) or (0,)
    starts = offsets(nz.chunks[0])
    rest = (0,) * (a.ndim - 1)
    chunks = (sizes, (a.ndim,))
    key = nz.collection.key
    ndim = a.ndim

    def task_of(coord: tuple[int, ...]) -> tuple:
        b = coord[0]
        return (_nonzero_block, [key((b, *rest))],
                (ndim, (starts[b], *rest), Dep(0)))

    token = tokenize("argwhere", nz)
    blocks = apply_blocks(f"argwhere-{token}", numblocks(chunks), [nz.collection], task_of,
                          kind="getitem", name="argwhere")
    return Array(blocks, (sum(sizes), a.ndim), chunks, np.intp)


def nonzero(a: Any) -> tuple[Array, ...]:
    """``numpy.nonzero``: a tuple of index arrays, one per axis (two-phase, as
    :func:`argwhere`)."""
    a = asarray(a)
    if a.ndim == 0:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed; use "
                         "atleast_1d(a).nonzero() instead")
    w = argwhere(a)
    return tuple(w[:, i] for i in range(a.ndim))


def flatnonzero(a: Any) -> Array:
    """``numpy.flatnonzero``: indices of the non-zero elements of the flattened array."""
    return nonzero(asarray(a).reshape(-1))[0]


def extract(condition: Any, arr: Any) -> Array:
    """``numpy.extract``: the elements of ``arr`` where ``condition`` is true (flattened)."""
    arr = asarray(arr)
    cond = asarray(condition)
    if cond.shape != arr.shape:
        raise ValueError(f"extract: condition of shape {cond.shape} does not match the "
                         f"array of shape {arr.shape}")
    return boolean_select(arr.reshape(-1), cond.astype(bool).reshape(-1), 0)
