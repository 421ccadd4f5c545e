"""Sorting, searching and set functions: ``sort``, ``argsort``, ``topk``, ``argtopk``,
``searchsorted``, ``unique`` and its ``unique_*`` forms.

Along an axis of an array of several axes, the sorted axis is made one block (the other
axes are cut finer so blocks keep their size) and each block is sorted on its own. A
1-d array is sorted with a sample sort in two phases: a small pass draws a sample of every
block and counts how many elements of each block fall between the splitters the sample
gives; then every block is sorted and cut at the splitters, and each output block merges
its pieces from all blocks. ``unique`` merges the blocks' unique values as a tree; its size
depends on the data, so the values are computed first and the inverse indices are planned
after.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([5, 1, 4, 1, 3, 9, 2]), chunks=3)
>>> tg.sort(x).compute()
array([1, 1, 2, 3, 4, 5, 9])
>>> tg.unique(x).compute()
array([1, 2, 3, 4, 5, 9])
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import apply_blocks, pick_part, reduce_by_key
from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.array.chunks import blocks_bytes, offsets
from tilegraph.array.core import Array, asarray, from_numpy, tokenize
from tilegraph.array.indexing import digest
from tilegraph.graph.taskgraph import Dep, Lit

SAMPLES_PER_BLOCK = 64


def normalized_axis(op: str, x: Array, axis: Any) -> int:
    """``axis`` of ``x`` as a non-negative int; an ``AxisError`` naming ``op`` and ``x``'s
    shape when it is out of bounds."""
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise np.exceptions.AxisError(
            f"{op}: axis {axis} is out of bounds for an array of shape {x.shape}")
    return axis % x.ndim


def whole_axis(x: Array, axis: int) -> Array:
    """``x`` rechunked so that ``axis`` is one block, with the largest other axis cut so
    blocks keep about the bytes of ``x``'s largest block."""
    if len(x.chunks[axis]) == 1:
        return x
    target = max(1, blocks_bytes(x.chunks, x.dtype) // max(1, x.itemsize))
    others = [a for a in range(x.ndim) if a != axis]
    chunks: dict[int, Any] = {axis: -1}
    if others:
        split = max(others, key=lambda a: x.shape[a])
        rest = math.prod(max(x.chunks[a]) for a in others if a != split)
        chunks[split] = max(1, target // max(1, x.shape[axis] * rest))
    return x.rechunk(chunks)


def _sort_block(axis: int, kind: Any, descending: bool, block: np.ndarray) -> np.ndarray:
    out = np.sort(block, axis=axis, kind=kind)
    return np.flip(out, axis=axis) if descending else out


def _argsort_block(axis: int, kind: Any, descending: bool, block: np.ndarray) -> np.ndarray:
    if descending:  # stable descending: sort the reversed block, map indices back
        n = block.shape[axis]
        rev = np.flip(block, axis=axis)
        idx = np.argsort(rev, axis=axis, kind="stable")
        return np.flip(n - 1 - idx, axis=axis)
    return np.argsort(block, axis=axis, kind=kind)


def sort(x: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *,
         descending: bool = False, stable: bool = True) -> Array:
    """The sorted array along ``axis`` (``None``: the flattened array), like
    ``numpy.sort``; ``descending=`` as in the Array API."""
    return _sort("sort", x, axis, kind, order, descending)


def argsort(x: Any, axis: int | None = -1, kind: Any = None, order: Any = None, *,
            descending: bool = False, stable: bool = True) -> Array:
    """The indices that sort ``x`` along ``axis``, like ``numpy.argsort`` (stable: equal
    elements keep their order)."""
    return _sort("argsort", x, axis, kind, order, descending)


def _sort(op: str, x: Any, axis: Any, kind: Any, order: Any, descending: bool) -> Array:
    if order is not None:
        raise TypeError(f"{op}: order= (structured arrays) is not supported")
    x = asarray(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise np.exceptions.AxisError(f"{op}: axis {axis} is out of bounds for a 0-d array")
    axis = normalized_axis(op, x, axis)
    if x.ndim == 1 and len(x.chunks[0]) > 1 and x.size:
        out = _sample_sort(x, op == "argsort")
        if descending:
            if op == "argsort":  # stable descending order of equal elements
                return (x.shape[0] - 1) - _sample_sort(x[::-1], True)[::-1]
            out = out[::-1]
        return out
    y = whole_axis(x, axis)
    func = _sort_block if op == "sort" else _argsort_block
    dtype = x.dtype if op == "sort" else np.dtype(np.intp)
    token = tokenize(op, y, axis, kind, descending)
    blocks = _map_blocks(f"{op}-{token}", func, [y.collection], y.numblocks,
                         args=(axis, kind, descending, Dep(0)), kind="sort", name=op)
    return Array(blocks, y.shape, y.chunks, dtype)


# -- sample sort of a 1-d array ------------------------------------------------------------


def _sample(seed: int, size: int, block: np.ndarray) -> np.ndarray:
    if block.size == 0:
        return block[:0]
    pick = np.random.default_rng(seed).integers(0, block.size, size)
    return block[pick]


def _bucket_counts(splitters: np.ndarray, block: np.ndarray) -> np.ndarray:
    where = np.searchsorted(splitters, block, side="left")  # as _partition cuts
    return np.bincount(where, minlength=splitters.size + 1).reshape(1, -1)


def _partition(splitters: np.ndarray, start: int, with_index: bool, block: np.ndarray
               ) -> tuple:
    if with_index:
        order = np.argsort(block, kind="stable")
        vals = block[order]
        idx = order.astype(np.intp) + start
    else:
        vals = np.sort(block)
        idx = None
    cuts = np.searchsorted(vals, splitters, side="right")
    pieces = np.split(vals, cuts)
    if idx is None:
        return tuple(pieces)
    return tuple(zip(pieces, np.split(idx, cuts), strict=True))


def _merge(j: int, with_index: bool, *parts: tuple) -> np.ndarray:
    if not with_index:
        return np.sort(np.concatenate([p[j] for p in parts]), kind="stable")
    vals = np.concatenate([p[j][0] for p in parts])
    idx = np.concatenate([p[j][1] for p in parts])
    # pieces arrive in block order, each sorted: a stable sort keeps equal values in
    # index order
    return idx[np.argsort(vals, kind="stable")]


def _splitters(x: Array) -> tuple[np.ndarray, np.ndarray]:
    """Phase one of the sample sort: splitters from a sample of every block, and how many
    elements of each block fall in each bucket."""
    nb = len(x.chunks[0])
    size = SAMPLES_PER_BLOCK
    sizes = tuple(size if c else 0 for c in x.chunks[0])
    token = tokenize("sample", x, size)
    key = x.collection.key
    samples = apply_blocks(f"sample-{token}", (nb,), [x.collection],
                           lambda c: (_sample, [key(c)], (c[0], sizes[c[0]], Dep(0))),
                           kind="partial", name="sample")
    sample = np.sort(np.asarray(Array(samples, (sum(sizes),), (sizes,), x.dtype).compute()))
    picks = (np.arange(1, nb) * sample.size) // nb
    splitters = sample[picks]
    counts = _map_blocks(f"bucket-counts-{tokenize('buckets', x, digest(splitters))}",
                         _bucket_counts, [x.collection], (nb, 1), [lambda c: (c[0],)],
                         args=(Lit(splitters), Dep(0)), kind="partial", name="bucket-counts")
    table = Array(counts, (nb, nb), ((1,) * nb, (nb,)), np.int64).compute()
    return splitters, np.asarray(table).reshape(nb, nb)


def _sample_sort(x: Array, with_index: bool) -> Array:
    splitters, table = _splitters(x)
    nb = len(x.chunks[0])
    sizes = tuple(int(s) for s in table.sum(axis=0))
    starts = offsets(x.chunks[0])
    token = tokenize("sample-sort", x, with_index, digest(splitters))
    key = x.collection.key
    parts = apply_blocks(
        f"partition-{token}", (nb,), [x.collection],
        lambda c: (_partition, [key(c)], (Lit(splitters), starts[c[0]], with_index, Dep(0))),
        kind="sort", name="partition")
    pkeys = [parts.key((b,)) for b in range(nb)]
    dtype = np.dtype(np.intp) if with_index else x.dtype
    itemsize = dtype.itemsize
    blocks = apply_blocks(
        f"{'argsort' if with_index else 'sort'}-{token}", (nb,), [parts],
        lambda c: (_merge, pkeys, (c[0], with_index, *[Dep(i) for i in range(nb)])),
        kind="sort", name="merge", nbytes=lambda c: itemsize * sizes[c[0]])
    return Array(blocks, x.shape, (sizes,), dtype)


# -- searchsorted ---------------------------------------------------------------------------


def _count_before(side: str, sorter_block: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorter_block, v, side=side).astype(np.intp)


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Array:
    """``numpy.searchsorted`` on a sorted 1-d array: where each value of ``v`` would go.
    Each block of ``a`` counts the elements before every value; the counts add up."""
    if sorter is not None:
        raise TypeError("searchsorted: sorter= is not supported; index a with it first "
                        "(a[sorter])")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a = asarray(a)
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {a.shape}")
    v = asarray(v)

    total = _count_block(a, 0, v, side)
    for b in range(1, len(a.chunks[0])):
        total = total + _count_block(a, b, v, side)
    return total


def _count_block(a: Array, b: int, v: Array, side: str) -> Array:
    key = a.collection.key((b,))
    token = tokenize("searchsorted", a, b, v, side)
    vkey = v.collection.key
    blocks = apply_blocks(f"searchsorted-{token}", v.numblocks, [a.collection, v.collection],
                          lambda c: (_count_before, [key, vkey(c)], (side, Dep(0), Dep(1))),
                          kind="elementwise", name="searchsorted")
    return Array(blocks, v.shape, v.chunks, np.intp)


# -- unique ---------------------------------------------------------------------------------


def _unique_part(start: int, block: np.ndarray) -> tuple:
    values, index, counts = np.unique(block.reshape(-1), return_index=True,
                                      return_counts=True)
    return values, index.astype(np.intp) + start, counts.astype(np.intp)


def _unique_merge(p: tuple, q: tuple) -> tuple:
    values = np.concatenate([p[0], q[0]])
    index = np.concatenate([p[1], q[1]])
    counts = np.concatenate([p[2], q[2]])
    u, inverse = np.unique(values, return_inverse=True)
    first = np.full(u.size, np.iinfo(np.intp).max, dtype=np.intp)
    np.minimum.at(first, inverse, index)
    total = np.zeros(u.size, dtype=np.intp)
    np.add.at(total, inverse, counts)
    return u, first, total


def _unique_parts(x: Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    flat = x.reshape(-1)
    nb = len(flat.chunks[0])
    starts = offsets(flat.chunks[0])
    token = tokenize("unique", flat)
    key = flat.collection.key
    parts = apply_blocks(f"unique-partial-{token}", (nb,), [flat.collection],
                         lambda c: (_unique_part, [key(c)], (starts[c[0]], Dep(0))),
                         kind="partial", name="unique-partial")
    tree = reduce_by_key(f"unique-{token}", parts, lambda c: (0,), (1,), _unique_merge,
                         kind="reduce", name="unique")
    values, index, counts = Array(tree, (1,), ((1,),), object).compute()
    return values, index, counts


def _inverse_block(values: np.ndarray, block: np.ndarray) -> np.ndarray:
    return np.searchsorted(values, block).astype(np.intp)


def unique(x: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: Any = None, *, equal_nan: bool = True) -> Any:
    """``numpy.unique``: the sorted unique values (and, on request, first indices, the
    inverse and the counts). Blocks' unique values merge as a tree; the values are computed
    first (their number depends on the data), the inverse is planned after."""
    if axis is not None:
        raise TypeError("unique: axis= is not supported; call .compute() first and use "
                        "numpy.unique")
    x = asarray(x)
    values, index, counts = _unique_parts(x)
    out = [from_numpy(values)]
    if return_index:
        out.append(from_numpy(index))
    if return_inverse:
        out.append(_inverse(x, values))
    if return_counts:
        out.append(from_numpy(counts))
    return out[0] if len(out) == 1 else tuple(out)


def _inverse(x: Array, values: np.ndarray) -> Array:
    token = tokenize("unique-inverse", x, digest(values))
    blocks = _map_blocks(f"unique-inverse-{token}", _inverse_block, [x.collection],
                         x.numblocks, args=(Lit(values), Dep(0)), kind="elementwise",
                         name="unique-inverse")
    return Array(blocks, x.shape, x.chunks, np.intp)


def unique_values(x: Any) -> Array:
    """The sorted unique values of ``x`` (Array API)."""
    return unique(x)


def unique_counts(x: Any) -> tuple[Array, Array]:
    """``(values, counts)`` of the unique values (Array API)."""
    from collections import namedtuple

    v, c = unique(x, return_counts=True)
    return namedtuple("UniqueCountsResult", ["values", "counts"])(v, c)


def unique_inverse(x: Any) -> tuple[Array, Array]:
    """``(values, inverse_indices)``; the inverse has ``x``'s shape (Array API)."""
    from collections import namedtuple

    v, i = unique(x, return_inverse=True)
    return namedtuple("UniqueInverseResult", ["values", "inverse_indices"])(v, i)


def unique_all(x: Any) -> tuple[Array, Array, Array, Array]:
    """``(values, indices, inverse_indices, counts)`` (Array API)."""
    from collections import namedtuple

    v, i, inv, c = unique(x, return_index=True, return_inverse=True, return_counts=True)
    return namedtuple("UniqueAllResult",
                      ["values", "indices", "inverse_indices", "counts"])(v, i, inv, c)


def _top(k: int, axis: int, with_index: bool, offset: int, block: np.ndarray) -> Any:
    """The ``|k|`` largest (k > 0, descending) or smallest (k < 0, ascending) elements of a
    block along ``axis``, with their indices along it (plus ``offset``) when asked."""
    n = block.shape[axis]
    m = min(abs(k), n)
    order = np.argsort(block, axis=axis, kind="stable")
    if k > 0:  # the largest first
        order = np.flip(order, axis=axis)
    index = [slice(None)] * block.ndim
    index[axis] = slice(0, m)
    order = order[tuple(index)]
    values = np.take_along_axis(block, order, axis=axis)
    return (values, order + offset) if with_index else values


def _top_of_parts(k: int, axis: int, with_index: bool, values: np.ndarray,
                  index: np.ndarray) -> np.ndarray:
    top, where = _top(k, axis, True, 0, values)
    return np.take_along_axis(index, where, axis=axis) if with_index else top


def _topk(op: str, a: Any, k: Any, axis: Any, with_index: bool) -> Array:
    from tilegraph.array.elementwise import map_blocks

    a = asarray(a)
    k = operator.index(k)
    if k == 0:
        raise ValueError(f"{op}: k must not be 0 (k > 0: the largest, k < 0: the smallest)")
    if a.ndim == 0:
        raise ValueError(f"{op}: needs an array of at least one dimension")
    axis = normalized_axis(op, a, axis)
    n = a.shape[axis]
    if abs(k) > n:
        raise ValueError(f"{op}: |k| = {abs(k)} is larger than axis {axis} of length {n}")
    starts = offsets(a.chunks[axis])
    token = tokenize(op, a, k, axis)
    key = a.collection.key
    sizes = tuple(min(abs(k), c) for c in a.chunks[axis])
    chunks = tuple(sizes if i == axis else c for i, c in enumerate(a.chunks))
    grid = a.numblocks

    def part_of(c: tuple[int, ...]) -> tuple:
        return _top, [key(c)], (k, axis, True, int(starts[c[axis]]), Dep(0))

    parts = apply_blocks(f"{op}-part-{token}", grid, [a.collection], part_of, kind="sort",
                         name=f"{op}-part")
    shape = (*a.shape[:axis], sum(sizes), *a.shape[axis + 1:])
    values = Array(_map_blocks(f"{op}-values-{token}", pick_part(0), [parts], grid,
                               kind="getitem", name=f"{op}-values"), shape, chunks, a.dtype)
    index = Array(_map_blocks(f"{op}-index-{token}", pick_part(1), [parts], grid,
                              kind="getitem", name=f"{op}-index"), values.shape, chunks,
                  np.dtype(np.intp))
    one = tuple((sum(sizes),) if i == axis else c for i, c in enumerate(chunks))
    values, index = values.rechunk(one), index.rechunk(one)
    out_chunks = tuple((abs(k),) if i == axis else c for i, c in enumerate(one))
    return map_blocks(_top_of_parts, k, axis, with_index, values, index,
                      dtype=np.dtype(np.intp) if with_index else a.dtype, chunks=out_chunks,
                      name=op)


def topk(a: Any, k: int, axis: int = -1, split_every: Any = None) -> Array:
    """The ``k`` largest elements along ``axis`` in descending order (``k < 0``: the ``-k``
    smallest, ascending), as dask's ``topk``: each block's own top ``k`` first, then the top
    ``k`` of those (``split_every`` is accepted for dask's signature)."""
    return _topk("topk", a, k, axis, with_index=False)


def argtopk(a: Any, k: int, axis: int = -1, split_every: Any = None) -> Array:
    """The indices along ``axis`` of :func:`topk`'s elements, as dask's ``argtopk``."""
    return _topk("argtopk", a, k, axis, with_index=True)
