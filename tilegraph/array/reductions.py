"""Reductions over any axes, as trees: one partial result per block, partials combined in
groups of ``split_every`` along the reduced axes, then a final step per output block. When
``split_every`` partials of an output block would not fit a share of the run's memory limit
(100 MiB column sums of a wide array), they are combined as they arrive instead, into one
accumulator per worker, in place where the combine is a ufunc: the accumulation chains of a
matrix product (:func:`tilegraph.algebra.blocks.reduce_by_key`,
:func:`~tilegraph.algebra.fold.fold_chains`).

Means and variances combine (count, mean, M2) triples with Chan's parallel formula, so they
are as stable as NumPy's two-pass variance without reading the data twice.
"""

from __future__ import annotations

import builtins
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.algebra.blocks import reduce_by_key
from tilegraph.array.chunks import numblocks, offsets
from tilegraph.array.core import Array, tokenize
from tilegraph.graph.taskgraph import Call, Dep

SPLIT_EVERY = 8


def normalize_axes(op: str, axis: Any, ndim: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Reduced axes as sorted non-negative ints; errors name the op, the axis and the shape."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axes = (axis,)
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        raise TypeError(f"{op}: axis must be None, an int or a tuple of ints, got {axis!r}")
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {a!r}")
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(
                f"{op}: axis {a} is out of bounds for an array of shape {shape} "
                f"(ndim {ndim})")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _partial(chunk: Callable, axes: tuple[int, ...]) -> Callable:
    def partial(block: np.ndarray) -> Any:
        return chunk(block, axes)

    partial.__name__ = f"{getattr(chunk, '__name__', 'chunk')}"
    acc = getattr(chunk, "sum_dtype", None)
    if acc is not None:
        partial.fuse_rewrite = _product_sum_rule(axes, acc)
    return partial


def _product_sum_rule(axes: tuple[int, ...], acc: np.dtype) -> Callable:
    """Fusion's rewrite of a block sum (or mean) whose input is an inlined product: the
    sum of products is one ``einsum``, which never makes the product block (for the time
    means of ``u*v``, 3x less memory traffic than ``(u*v).sum(axis=0)``)."""

    def sum_of_products(a: Any, b: Any) -> np.ndarray:
        if (type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape
                and a.dtype == b.dtype == acc and acc.kind == "f" and 0 < a.ndim <= 26):
            letters = "abcdefghijklmnopqrstuvwxyz"[:a.ndim]
            kept = "".join(c for k, c in enumerate(letters) if k not in axes)
            out = np.einsum(f"{letters},{letters}->{kept}", a, b)
            return np.expand_dims(out, axes) if axes else out
        return np.sum(np.multiply(a, b), axis=axes, dtype=acc, keepdims=True)

    sum_of_products.__name__ = "sum_of_products"

    def rule(args: tuple) -> tuple[Callable, tuple, int] | None:
        # (the product's bytes stay in the step's working set: a block whose shapes or
        # dtypes einsum does not take is multiplied, then summed)
        inner = args[0] if len(args) == 1 else None
        if (type(inner) is Call and inner.func is np.multiply and not inner.kwargs
                and len(inner.args) == 2
                and builtins.all(type(a) in (Call, Dep) for a in inner.args)):
            return sum_of_products, inner.args, (inner.mem or (0, 0))[0]
        return None

    return rule


def _no_partial(block: np.ndarray) -> None:
    return None


def _skipping_none(combine: Callable) -> Callable:
    def skipping_none(p: Any, q: Any) -> Any:
        if p is None:
            return q
        if q is None:
            return p
        return combine(p, q)

    skipping_none.__name__ = getattr(combine, "__name__", "combine")
    skipping_none.__wrapped__ = combine  # an accumulation step may write in place with it
    return skipping_none


def _finish(aggregate: Callable, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype
            ) -> Callable:
    def finish(part: Any) -> np.ndarray:
        out = aggregate(part)
        out = np.asarray(out).astype(dtype, copy=False)
        return out if keepdims else out.squeeze(axis=axes) if axes else out

    finish.__name__ = f"finish_{getattr(aggregate, '__name__', 'reduce')}"
    return finish


def reduction(
    x: Array,
    op: str,
    chunk: Callable[[np.ndarray, tuple[int, ...]], Any],
    combine: Callable[[Any, Any], Any],
    aggregate: Callable[[Any], Any],
    axis: Any,
    keepdims: bool,
    dtype: Any,
    split_every: int = SPLIT_EVERY,
    block_chunk: Callable[[tuple[int, ...]], Callable] | None = None,
    params: tuple = (),
) -> Array:
    """The tree reduction of ``x`` over ``axis``.

    ``chunk(block, axes)`` makes a block's partial (reduced axes kept with length 1),
    ``combine(p, q)`` merges two partials, ``aggregate(p)`` turns the final partial into the
    result block. ``block_chunk(coord)``, if given, makes the chunk function per block (for
    partials that need the block's position, as argmin does).
    """
    axes = normalize_axes(op, axis, x.ndim, x.shape)
    dtype = np.dtype(dtype)
    token = tokenize(op, x, axes, keepdims, dtype, split_every, *params)
    grid = x.numblocks
    # Blocks of no elements along a reduced axis (chunks such as (2, 0, 4)) have no partial
    # (min, argmax, ... of nothing is an error); when the reduced extent is not empty they
    # give None, which the combine step skips.
    empty = set()
    if builtins.all(x.shape[a] > 0 for a in axes) and builtins.any(
            0 in x.chunks[a] for a in axes):
        empty = {c for c in np.ndindex(*grid)
                 if builtins.any(x.chunks[a][c[a]] == 0 for a in axes)}
    if empty:
        combine = _skipping_none(combine)
    # a partial is about one array of the kept block shape (the larger of the input's and
    # the result's item sizes): the planner's memory model and order need its bytes
    part_item = builtins.max(dtype.itemsize, x.itemsize)

    def part_bytes(c: tuple[int, ...]) -> int:
        return part_item * math.prod(1 if a in axes else x.chunks[a][k]
                                     for a, k in enumerate(c))

    if block_chunk is None and not empty:
        part_func = _partial(chunk, axes)
        parts = _map_blocks(f"{op}-partial-{token}", part_func, [x.collection], grid,
                            kind="partial", name=f"{op}-partial", nbytes=part_bytes)
    else:
        from tilegraph.algebra.blocks import apply_blocks

        def part_of(c: tuple[int, ...]) -> Callable:
            if c in empty:
                return _no_partial
            return _partial(chunk, axes) if block_chunk is None else block_chunk(c)

        parts = apply_blocks(
            f"{op}-partial-{token}", grid, [x.collection],
            lambda c: (part_of(c), [x.collection.key(c)], None),
            kind="partial", name=f"{op}-partial", nbytes=part_bytes,
        )
    out_grid = tuple(1 if a in axes else g for a, g in enumerate(grid))
    reduced = [range(g) for g in grid]

    def members(out: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The partials that combine into output block ``out``, in the grid's order."""
        return list(itertools.product(*(reduced[a] if a in axes else (k,)
                                        for a, k in enumerate(out))))

    tree = reduce_by_key(
        f"{op}-combine-{token}", parts,
        lambda c: tuple(0 if a in axes else k for a, k in enumerate(c)), out_grid, combine,
        split_every=split_every, members=members, accumulate=True, kind="reduce",
        name=f"{op}-combine", nbytes=part_bytes,
    )
    out_chunks = tuple((1,) if a in axes else c for a, c in enumerate(x.chunks))
    finish = _finish(aggregate, axes, keepdims, dtype)
    if keepdims:
        final_chunks, final_grid = out_chunks, out_grid
        index = None
    else:
        final_chunks = tuple(c for a, c in enumerate(out_chunks) if a not in axes)
        final_grid = numblocks(final_chunks)
        kept = [a for a in range(x.ndim) if a not in axes]

        def index(c: tuple[int, ...]) -> tuple[int, ...]:
            full = [0] * x.ndim
            for a, k in zip(kept, c, strict=True):
                full[a] = k
            return tuple(full)

    itemsize = dtype.itemsize
    blocks = _map_blocks(
        f"{op}-{token}", finish, [tree], final_grid, [index], kind="aggregate", name=op,
        nbytes=lambda c: itemsize * math.prod(final_chunks[i][k] for i, k in enumerate(c)),
    )
    shape = tuple(builtins.sum(c) for c in final_chunks)
    return Array(blocks, shape, final_chunks, dtype)


def no_out(op: str, out: Any) -> None:
    """Refuse ``out=`` (given to ``op``): tilegraph arrays are lazy, and the result is the
    returned array."""
    if out is not None:
        raise TypeError(f"{op}: out= is not supported on tilegraph arrays (arrays are "
                        "lazy; use the returned array)")


def reduce_dtype(func: Callable, x: Array, dtype: Any) -> np.dtype:
    """The dtype of a reduction: ``dtype`` when given, else what ``func`` (the reduction on
    one block) gives on one element of ``x``'s dtype."""
    if dtype is not None:
        return np.dtype(dtype)
    return np.asarray(func(np.ones(1, dtype=x.dtype))).dtype


def check_nonempty(op: str, x: Array, axis: Any) -> None:
    """Refuse a reduction ``op`` without identity (min, max, argmin, ...) over a zero-size
    axis of ``x``, when the graph is built."""
    axes = normalize_axes(op, axis, x.ndim, x.shape)
    if builtins.any(x.shape[a] == 0 for a in axes) or (not axes and x.size == 0 and axis is None):
        raise ValueError(
            f"{op}: zero-size reduction over axes {axes} of an array of shape {x.shape} has "
            "no identity")


def _simple(op: str, npfunc: Callable, combine: Callable, x: Array, axis: Any,
            dtype: Any, keepdims: bool, split_every: int) -> Array:
    out_dtype = reduce_dtype(lambda b: npfunc(b, dtype=dtype), x, dtype)

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return npfunc(block, axis=axes, dtype=out_dtype, keepdims=True)

    chunk.__name__ = op
    if npfunc is np.sum:
        chunk.sum_dtype = out_dtype
    return reduction(x, op, chunk, combine, _identity, axis, keepdims, out_dtype, split_every)


def _identity(p: Any) -> Any:
    return p


def sum(x: Array, axis: Any = None, dtype: Any = None, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Sum over ``axis`` (all axes by default), like ``numpy.sum``."""
    return _simple("sum", np.sum, np.add, x, axis, dtype, keepdims, split_every)


def prod(x: Array, axis: Any = None, dtype: Any = None, keepdims: bool = False,
         split_every: int = SPLIT_EVERY) -> Array:
    """Product over ``axis``, like ``numpy.prod``."""
    return _simple("prod", np.prod, np.multiply, x, axis, dtype, keepdims, split_every)


def _minmax(op: str, npfunc: Callable, combine: Callable, x: Array, axis: Any,
            keepdims: bool, split_every: int) -> Array:
    check_nonempty(op, x, axis)

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return npfunc(block, axis=axes, keepdims=True)

    chunk.__name__ = op
    return reduction(x, op, chunk, combine, _identity, axis, keepdims, x.dtype, split_every)


def min(x: Array, axis: Any = None, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Minimum over ``axis`` (NaN wins, as in NumPy)."""
    return _minmax("min", np.min, np.minimum, x, axis, keepdims, split_every)


def max(x: Array, axis: Any = None, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Maximum over ``axis`` (NaN wins, as in NumPy)."""
    return _minmax("max", np.max, np.maximum, x, axis, keepdims, split_every)


def _logical(op: str, npfunc: Callable, combine: Callable, x: Array, axis: Any,
             keepdims: bool, split_every: int) -> Array:
    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return npfunc(block, axis=axes, keepdims=True)

    chunk.__name__ = op
    return reduction(x, op, chunk, combine, _identity, axis, keepdims, bool, split_every)


def any(x: Array, axis: Any = None, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Whether any element along ``axis`` is true."""
    return _logical("any", np.any, np.logical_or, x, axis, keepdims, split_every)


def all(x: Array, axis: Any = None, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Whether every element along ``axis`` is true."""
    return _logical("all", np.all, np.logical_and, x, axis, keepdims, split_every)


def _moment_dtype(x: Array, dtype: Any) -> np.dtype:
    if dtype is not None:
        return np.dtype(dtype)
    return np.mean(np.ones(1, dtype=x.dtype)).dtype


def mean(x: Array, axis: Any = None, dtype: Any = None, keepdims: bool = False,
         split_every: int = SPLIT_EVERY) -> Array:
    """Arithmetic mean over ``axis``, like ``numpy.mean``."""
    axes = normalize_axes("mean", axis, x.ndim, x.shape)
    out_dtype = _moment_dtype(x, dtype)
    acc_dtype = out_dtype if out_dtype.kind in "fc" else np.dtype(np.float64)
    if dtype is None and acc_dtype == np.float16:
        acc_dtype = np.dtype(np.float32)  # as NumPy does for float16 means
    count = math.prod(x.shape[a] for a in axes)
    if count == 0:  # known from the shape: NumPy warns when called, and so does this
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=3)

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return np.sum(block, axis=axes, dtype=acc_dtype, keepdims=True)

    chunk.__name__ = "mean"
    chunk.sum_dtype = acc_dtype

    def aggregate(total: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.true_divide(total, count)

    return reduction(x, "mean", chunk, np.add, aggregate, axis, keepdims, out_dtype,
                     split_every, params=(count,))


def _moments(block: np.ndarray, axes: tuple[int, ...], acc: np.dtype) -> tuple:
    n = math.prod(block.shape[a] for a in axes)
    if n == 0:
        shape = tuple(1 if a in axes else s for a, s in enumerate(block.shape))
        zeros = np.zeros(shape, dtype=acc)
        return 0, zeros, np.zeros(shape, dtype=np.abs(zeros).dtype)
    m = np.mean(block, axis=axes, dtype=acc, keepdims=True)
    d = block - m
    m2 = np.sum((d * np.conj(d)).real if np.iscomplexobj(d) else d * d, axis=axes,
                keepdims=True)
    return n, m, m2


def _merge_moments(p: tuple, q: tuple) -> tuple:
    na, ma, m2a = p
    nb, mb, m2b = q
    if na == 0:
        return q
    if nb == 0:
        return p
    n = na + nb
    delta = mb - ma
    mean_ = ma + delta * (nb / n)
    sq = (delta * np.conj(delta)).real if np.iscomplexobj(delta) else delta * delta
    return n, mean_, m2a + m2b + sq * (na * nb / n)


def var(x: Array, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom, like ``numpy.var``."""
    return _var_std("var", x, axis, dtype, ddof, keepdims, split_every)


def std(x: Array, axis: Any = None, dtype: Any = None, ddof: int = 0, keepdims: bool = False,
        split_every: int = SPLIT_EVERY) -> Array:
    """Standard deviation over ``axis``, like ``numpy.std``."""
    return _var_std("std", x, axis, dtype, ddof, keepdims, split_every)


def _var_std(op: str, x: Array, axis: Any, dtype: Any, ddof: int, keepdims: bool,
             split_every: int) -> Array:
    acc = _moment_dtype(x, dtype)
    out_dtype = np.var(np.ones(1, dtype=acc)).dtype if dtype is None else np.dtype(dtype)
    axes = normalize_axes(op, axis, x.ndim, x.shape)
    if ddof >= math.prod(x.shape[a] for a in axes):  # as NumPy, when called
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> tuple:
        return _moments(block, axes, acc)

    chunk.__name__ = f"{op}-moments"

    def aggregate(p: tuple) -> np.ndarray:
        n, _, m2 = p
        with np.errstate(invalid="ignore", divide="ignore"):
            v = np.true_divide(m2, builtins.max(n - ddof, 0))
        return np.sqrt(v) if op == "std" else v

    return reduction(x, op, chunk, _merge_moments, aggregate, axis, keepdims, out_dtype,
                     split_every, params=(ddof,))


def _arg_chunk(op: str, x: Array, axis: int | None, coord: tuple[int, ...],
               skip_nan: bool = False) -> Callable:
    """The partial of a block: (values, indices), and with ``skip_nan`` a third member,
    whether each slice of the block holds a number (NaNs count as the worst value, as
    ``numpy.nanargmin``'s replacement by +inf does, complex NaNs as ``inf+0j``)."""
    offs = [offsets(c)[k] for c, k in zip(x.chunks, coord, strict=True)]
    shape = x.shape
    pick = np.argmin if op == "argmin" else np.argmax
    fill = np.inf if op == "argmin" else -np.inf

    def chunk(block: np.ndarray) -> tuple:
        if skip_nan:
            nan = np.isnan(block)
            filled = np.where(nan, block.dtype.type(fill), block)
            return (*partial(filled), ~nan.all(axis=axis, keepdims=True))
        return partial(block)

    def partial(block: np.ndarray) -> tuple:
        if axis is None:
            local = int(pick(block))
            idx = np.unravel_index(local, block.shape)
            flat = np.ravel_multi_index(tuple(i + o for i, o in zip(idx, offs, strict=True)),
                                        shape)
            return np.asarray(block.reshape(-1)[local]).reshape((1,) * block.ndim), \
                np.full((1,) * block.ndim, flat, dtype=np.intp)
        local = pick(block, axis=axis, keepdims=True)
        vals = np.take_along_axis(block, local, axis=axis)
        return vals, local + offs[axis]

    chunk.__name__ = f"{'nan' if skip_nan else ''}{op}-partial"
    return chunk


def _arg_combine(op: str) -> Callable:
    better = np.less if op == "argmin" else np.greater

    def combine(p: tuple, q: tuple) -> tuple:
        # Partials may arrive in any block order (with axis=None, C order of blocks is not
        # the order of flat indices), so ties go to the smaller index: NumPy's first
        # occurrence. A NaN beats every number, and the first NaN wins among NaNs.
        va, ia = p[0], p[1]
        vb, ib = q[0], q[1]
        earlier = ib < ia
        with np.errstate(invalid="ignore"):
            wins = better(vb, va) | ((vb == va) & earlier)
            if va.dtype.kind in "fc":
                nan_a, nan_b = np.isnan(va), np.isnan(vb)
                wins = (nan_b & (~nan_a | earlier)) | (~nan_a & ~nan_b & wins)
        if len(p) == 3:  # nanargmin/nanargmax: whether a slice holds a number so far
            return np.where(wins, vb, va), np.where(wins, ib, ia), p[2] | q[2]
        return np.where(wins, vb, va), np.where(wins, ib, ia)

    combine.__name__ = f"{op}-combine"
    return combine


def _arg_index(p: tuple) -> np.ndarray:
    if len(p) == 3 and not p[2].all():
        # NumPy's nanargmin/nanargmax raise, with this message, for a slice of NaNs only
        raise ValueError("All-NaN slice encountered")
    return p[1]


def arg_reduction(op: str, x: Array, axis: Any, keepdims: bool, split_every: int,
                  skip_nan: bool = False) -> Array:
    """``argmin``/``argmax`` (``op``) of ``x`` along ``axis`` (None: of the flattened
    array) as a tree of fan-in ``split_every``: each block's partial holds its extreme
    value and that value's flat index; ``skip_nan`` skips NaNs (``nanargmin``/
    ``nanargmax``)."""
    name = f"nan{op}" if skip_nan else op
    if axis is not None and (not isinstance(axis, (int, np.integer)) or isinstance(axis, bool)):
        raise TypeError(f"{name}: axis must be None or an int, got {axis!r}")
    red_axis = None if axis is None else normalize_axes(name, axis, x.ndim, x.shape)[0]
    check_nonempty(name, x, axis)
    axes = tuple(range(x.ndim)) if red_axis is None else (red_axis,)
    skip_nan = skip_nan and x.dtype.kind in "fc"
    return reduction(
        x, name, None, _arg_combine(op), _arg_index, axes, keepdims, np.intp, split_every,
        block_chunk=lambda c: _arg_chunk(op, x, red_axis, c, skip_nan), params=(red_axis,),
    )


def argmin(x: Array, axis: Any = None, keepdims: bool = False,
           split_every: int = SPLIT_EVERY) -> Array:
    """Index of the minimum (flat index when ``axis`` is None), first occurrence, as NumPy."""
    return arg_reduction("argmin", x, axis, keepdims, split_every)


def argmax(x: Array, axis: Any = None, keepdims: bool = False,
           split_every: int = SPLIT_EVERY) -> Array:
    """Index of the maximum (flat index when ``axis`` is None), first occurrence, as NumPy."""
    return arg_reduction("argmax", x, axis, keepdims, split_every)


_UFUNC_REDUCTIONS = {
    np.add: sum, np.multiply: prod, np.minimum: min, np.maximum: max,
    np.logical_and: all, np.logical_or: any,
}


def ufunc_reduce(ufunc: np.ufunc, x: Any, axis: Any = 0, dtype: Any = None,
                 keepdims: bool = False, **kwargs: Any) -> Array:
    """``ufunc.reduce`` for the ufuncs with a blocked reduction."""
    func = _UFUNC_REDUCTIONS.get(ufunc)
    if func is None or kwargs or not isinstance(x, Array):
        raise TypeError(f"{ufunc.__name__}.reduce is not supported on tilegraph arrays")
    if dtype is not None and func in (sum, prod):
        return func(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return func(x, axis=axis, keepdims=keepdims)


def reduce_axes_shape(shape: Sequence[int], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for a, s in enumerate(shape) if a not in axes)
