"""dask.array's reductions beyond NumPy's: the general ``reduction`` (a block function, a
combine and an aggregate, as a tree), ``coarsen``, ``moment``, ``push`` (a forward fill
along an axis) and the histograms of several dimensions (``histogramdd``,
``histogram2d``).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.coarsen(np.sum, x, {0: 2}).compute()
array([1., 5., 9.])
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import tilegraph.array.reductions as reductions
from tilegraph.array.core import Array, asarray, compute, tokenize
from tilegraph.array.creation import arange, full
from tilegraph.array.elementwise import map_blocks, where
from tilegraph.array.reordering import axis_of, not_lazy
from tilegraph.array.scans import broadcast_to, cumreduction

# -- reductions and scans ---------------------------------------------------------------------


def _coarsen_block(block: np.ndarray, reduction: Callable, factors: tuple[int, ...],
                   kwargs: dict) -> np.ndarray:
    shape = []
    for n, f in zip(block.shape, factors, strict=True):
        shape += [n // f, f]
    reduced = tuple(range(1, 2 * block.ndim, 2))
    return np.asarray(reduction(block.reshape(shape), axis=reduced, **kwargs))


def coarsen(reduction: Callable, x: Any, axes: dict[int, int], trim_excess: bool = False,
            **kwargs: Any) -> Array:
    """dask's ``coarsen``: ``reduction`` (``np.sum``, ``np.mean``, ...; called with
    ``axis=`` a tuple and ``kwargs``) of each neighbourhood of ``axes[i]`` elements along
    axis ``i``. An axis whose length is not a multiple of its factor is refused unless
    ``trim_excess`` drops the remainder at its end. Blocks are recut to multiples of the
    factors first where they are not."""
    x = x if isinstance(x, Array) else asarray(x)
    if not callable(reduction):
        raise TypeError(f"coarsen: {reduction!r} is not callable")
    if not isinstance(axes, dict):
        raise TypeError(f"coarsen: axes must be a dict of axis -> factor, got {axes!r}")
    factors = [1] * x.ndim
    for ax, f in axes.items():
        f = operator.index(f)
        if f < 1:
            raise ValueError(f"coarsen: factor {f} of axis {ax} must be positive")
        factors[axis_of("coarsen", x, ax)] = f
    if not trim_excess and any(n % f for n, f in zip(x.shape, factors, strict=True)):
        raise ValueError(f"coarsen: factors {axes} do not align with array shape "
                         f"{x.shape}; pass trim_excess=True to drop the remainder")
    if trim_excess:
        x = x[tuple(slice(0, n - n % f) for n, f in zip(x.shape, factors, strict=True))]
    new = {}
    for ax, (sizes, f) in enumerate(zip(x.chunks, factors, strict=True)):
        if f > 1 and any(c % f for c in sizes):
            step = builtins.max(f, builtins.max(sizes) // f * f)
            new[ax] = step
    if new:
        x = x.rechunk(new)
    sample = np.ones(tuple(factors), dtype=x.dtype)
    dtype = _coarsen_block(sample, reduction, tuple(factors), kwargs).dtype
    chunks = tuple(tuple(c // f for c in sizes) for sizes, f in
                   zip(x.chunks, factors, strict=True))
    return map_blocks(_coarsen_block, x, reduction, tuple(factors), kwargs, chunks=chunks,
                      dtype=dtype, name=f"coarsen-{getattr(reduction, '__name__', 'f')}")


def moment(a: Any, order: int, axis: Any = None, dtype: Any = None, keepdims: bool = False,
           ddof: int = 0, split_every: Any = None, out: Any = None) -> Array:
    """The ``order``-th central moment, ``sum((a - mean) ** order) / (n - ddof)``, as
    dask's ``moment`` (two passes: the mean, then the sum of powers)."""
    if out is not None:
        raise TypeError("moment: out= is not supported on tilegraph arrays")
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"moment: order must be an integer >= 0, got {order!r}")
    a = a if isinstance(a, Array) else asarray(a)
    dt = np.dtype(dtype) if dtype is not None else np.var(np.ones(1, dtype=a.dtype)).dtype
    if order < 2:
        shape_ = reductions.sum(a, axis=axis, keepdims=keepdims).shape
        return full(shape_, 1.0 if order == 0 else 0.0, dtype="f8")
    axes = reductions.normalize_axes("moment", axis, a.ndim, a.shape)
    n = math.prod(a.shape[i] for i in axes)
    mean = reductions.mean(a, axis=axes, dtype=dt, keepdims=True)
    total = reductions.sum((a.astype(dt) - mean) ** order, axis=axes, dtype=dt,
                           keepdims=keepdims)
    return total / builtins.max(n - ddof, 0)


def _ffill(block: np.ndarray, axis: int, dtype: Any = None) -> np.ndarray:
    """Forward fill of NaN along ``axis`` within a block (the leading NaN stay)."""
    if block.size == 0:
        return block
    view = [1] * block.ndim
    view[axis] = block.shape[axis]
    pos = np.arange(block.shape[axis]).reshape(view)
    last = np.where(np.isnan(block), 0, pos)
    last = np.maximum.accumulate(last, axis=axis)
    return np.take_along_axis(block, last, axis=axis)


def _fill_from(carry: Any, block: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(block), carry, block)


def push(array: Any, n: int | None, axis: int) -> Array:
    """Forward fill of NaN along ``axis`` (``bottleneck.push``, as dask's ``push``): each
    NaN takes the last value before it, at most ``n`` places back (any distance with
    ``n=None``); a blocked scan that carries each block's last values to the next."""
    array = array if isinstance(array, Array) else asarray(array)
    if array.dtype.kind not in "fc":
        return array
    axis = axis_of("push", array, axis)
    if n is not None:
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"push: n must be non-negative or None, got {n}")
    if n is not None and n < array.shape[axis] - 1:
        view = tuple(array.shape[axis] if i == axis else 1 for i in range(array.ndim))
        pos = broadcast_to(arange(array.shape[axis], chunks=(array.chunks[axis],),
                                  dtype=np.float64).reshape(view), array.shape)
        pos = pos.rechunk(array.chunks)
        last = push(where(np.isnan(array), np.nan, pos), None, axis)
        return where(pos - last <= n, push(array, None, axis), np.nan)
    return cumreduction(_ffill, _fill_from, np.nan, array, axis=axis, dtype=array.dtype)


class _Partial:
    """The pieces of dask's ``reduction`` bound to the reduced axes (picklable)."""

    def __init__(self, chunk: Callable, combine: Callable, aggregate: Callable,
                 axes: tuple[int, ...], keepdims: bool, kwargs: dict):
        self.chunk, self.combine, self.aggregate = chunk, combine, aggregate
        self.axes, self.keepdims, self.kwargs = axes, keepdims, kwargs

    def on_block(self, block: np.ndarray, axes: tuple[int, ...]) -> Any:
        return self.chunk(block, axis=self.axes, keepdims=True, **self.kwargs)

    def merge(self, p: Any, q: Any) -> Any:
        return self.combine(np.concatenate([p, q], axis=self.axes[0]) if self.axes else p,
                            axis=self.axes, keepdims=True, **self.kwargs)

    def finish(self, p: Any) -> Any:
        # the reduced axes are dropped after (tilegraph.array.reductions.reduction)
        return self.aggregate(p, axis=self.axes, keepdims=True, **self.kwargs)


def reduction(x: Any, chunk: Callable, aggregate: Callable, axis: Any = None,
              keepdims: bool = False, dtype: Any = None, split_every: Any = None,
              combine: Callable | None = None, name: str | None = None, out: Any = None,
              concatenate: bool = True, output_size: int = 1, meta: Any = None,
              weights: Any = None) -> Array:
    """dask's general ``reduction``: ``chunk(block, axis=, keepdims=True)`` makes each
    block's partial, ``combine(partials, axis=, keepdims=True)`` merges partials joined
    along the reduced axes (``aggregate`` when not given), and ``aggregate(partials,
    axis=, keepdims=)`` makes the result, as a tree of fan-in ``split_every``. Partials
    must be arrays joined with ``np.concatenate`` (dask's ``concatenate=True``); over
    several axes, ``combine`` receives two partials joined along the first of them, so
    it must reduce over all of ``axis`` (as NumPy's reductions do)."""
    if out is not None:
        raise TypeError("reduction: out= is not supported on tilegraph arrays")
    if not concatenate:
        raise TypeError("reduction: concatenate=False (partials that are not arrays) is "
                        "not supported; make the partials NumPy arrays")
    if weights is not None:
        raise TypeError("reduction: weights= is not supported; multiply the data by the "
                        "weights first (or pass them as a second array to map_blocks)")
    if output_size != 1:
        raise TypeError("reduction: output_size other than 1 is not supported")
    x = x if isinstance(x, Array) else asarray(x)
    axes = reductions.normalize_axes("reduction", axis, x.ndim, x.shape)
    if dtype is None:
        dtype = getattr(meta, "dtype", None)
    if dtype is None:
        sample = np.ones((1,) * x.ndim, dtype=x.dtype)
        dtype = np.asarray(aggregate(chunk(sample, axis=axes, keepdims=True), axis=axes,
                                     keepdims=keepdims)).dtype
    part = _Partial(chunk, combine or aggregate, aggregate, axes, keepdims, {})
    every = reductions.SPLIT_EVERY if split_every is None else (
        split_every if isinstance(split_every, int) else builtins.max(
            2, math.prod(split_every.values()) if isinstance(split_every, dict) else 4))
    return reductions.reduction(x, name or getattr(chunk, "__name__", "reduction"),
                                part.on_block, part.merge, part.finish, axes, keepdims,
                                dtype, split_every=builtins.max(2, every),
                                params=(tokenize(chunk, combine, aggregate),))


# -- histograms of several dimensions ---------------------------------------------------------


def _histdd_block(edges: tuple, *cols: np.ndarray, weights: bool = False) -> np.ndarray:
    if weights:
        *cols, w = cols
    else:
        w = None
    sample = np.stack([c.reshape(-1) for c in cols], axis=1)
    return np.histogramdd(sample, bins=list(edges), weights=None if w is None else
                          w.reshape(-1))[0]


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, normed: Any = None,
                weights: Any = None, density: Any = None) -> tuple[Array, list[np.ndarray]]:
    """``numpy.histogramdd``: the counts (a lazy array: a sum of per-block histograms) and
    the edges of each dimension (NumPy arrays). ``sample`` is an ``(N, D)`` array or a
    sequence of ``D`` arrays of one shape; ``bins`` a number, one number per dimension, or
    edges per dimension. Where a number of bins comes without ``range``, a small pass
    computes that dimension's minimum and maximum first."""
    if normed is not None:
        raise TypeError("histogramdd: normed= was removed from NumPy; use density=")
    if isinstance(sample, (list, tuple)):
        cols = [c if isinstance(c, Array) else asarray(c) for c in sample]
        shapes = {c.shape for c in cols}
        if len(shapes) != 1:
            raise ValueError(f"histogramdd: the sample's arrays have different shapes "
                             f"{sorted(shapes)}")
        cols = [c.reshape(-1) for c in cols]
    else:
        s = sample if isinstance(sample, Array) else asarray(sample)
        if s.ndim != 2:
            raise ValueError(f"histogramdd: sample must be an (N, D) array or a sequence "
                             f"of arrays, got shape {s.shape}")
        cols = [s[:, i] for i in builtins.range(s.shape[1])]
    d = len(cols)
    if _number(bins):
        bins = [bins] * d
    bins = list(bins)
    if len(bins) != d:
        raise ValueError(f"histogramdd: {len(bins)} bins for {d} dimensions")
    ranges = [None] * d if range is None else list(range)
    if len(ranges) != d:
        raise ValueError(f"histogramdd: {len(ranges)} ranges for {d} dimensions")
    need = [i for i in builtins.range(d) if _number(bins[i]) and ranges[i] is None]
    if need:  # phase one: the data's range where the edges depend on it
        found = compute(*[f(cols[i]) for i in need for f in (reductions.min,
                                                             reductions.max)])
        for j, i in enumerate(need):
            lo, hi = float(found[2 * j]), float(found[2 * j + 1])
            ranges[i] = (lo, hi) if cols[i].size else (0.0, 1.0)
    edges = []
    for i in builtins.range(d):
        if _number(bins[i]):
            not_lazy("histogramdd", "bins", bins[i])
            edges.append(np.histogram_bin_edges(np.array([], dtype=float),
                                                operator.index(bins[i]), range=ranges[i]))
        else:
            not_lazy("histogramdd", "bins", bins[i])
            e = np.asarray(bins[i], dtype=float)
            if e.ndim != 1 or np.any(np.diff(e) < 0):
                raise ValueError("histogramdd: bins must increase monotonically, when an "
                                 "array")
            edges.append(e)
    n = cols[0].shape[0]
    arrays = list(cols)
    if weights is not None:
        w = (weights if isinstance(weights, Array) else asarray(weights)).reshape(-1)
        if w.shape != (n,):
            raise ValueError(f"histogramdd: weights of shape {w.shape} do not match the "
                             f"{n} samples")
        arrays.append(w)
    ref = arrays[0].chunks
    arrays = [a.rechunk(ref) if a.chunks != ref else a for a in arrays]
    shape_ = tuple(len(e) - 1 for e in edges)
    dtype = np.histogramdd(np.zeros((1, d)), bins=edges, weights=None if weights is None
                           else np.ones(1, arrays[-1].dtype))[0].dtype
    hist = _histdd_parts(edges, arrays, weights is not None, shape_, dtype)
    if density:
        widths = np.ones(shape_)
        for i, e in enumerate(edges):
            view = [1] * d
            view[i] = len(e) - 1
            widths = widths * np.diff(e).reshape(view)
        hist = hist / hist.sum() / widths
    return hist, edges


def _histdd_parts(edges: list[np.ndarray], arrays: list[Array], weighted: bool,
                  shape_: tuple[int, ...], dtype: np.dtype) -> Array:
    from tilegraph.algebra.blocks import apply_blocks, reduce_by_key
    from tilegraph.graph.taskgraph import Dep

    token = tokenize("histogramdd", *arrays, *(tuple(e.tolist()) for e in edges))
    keys = [a.collection.key for a in arrays]
    spec = tuple(edges)

    def task_of(c: tuple[int, ...]) -> tuple:
        return (_histdd_task, [k(c) for k in keys],
                (spec, weighted, *(Dep(i) for i in builtins.range(len(keys)))))

    parts = apply_blocks(f"histogramdd-partial-{token}", arrays[0].numblocks,
                         [a.collection for a in arrays], task_of, kind="partial",
                         name="histogramdd-partial")
    d = len(shape_)
    tree = reduce_by_key(f"histogramdd-{token}", parts, lambda c: (0,) * d, (1,) * d,
                         np.add, kind="reduce", name="histogramdd")
    return Array(tree, shape_, tuple((s,) for s in shape_), dtype)


def _number(v: Any) -> bool:
    """Whether a ``bins`` entry is a count (not a sequence of edges)."""
    return not isinstance(v, (list, tuple, np.ndarray, Array))


def _histdd_task(edges: tuple, weighted: bool, *cols: np.ndarray) -> np.ndarray:
    return _histdd_block(edges, *cols, weights=weighted)


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, normed: Any = None,
                weights: Any = None, density: Any = None
                ) -> tuple[Array, np.ndarray, np.ndarray]:
    """``numpy.histogram2d``: the counts of the points ``(x, y)`` (a lazy array) and the
    edges of ``x`` and of ``y`` (see :func:`histogramdd`)."""
    count = 1 if _number(bins) else len(bins)
    if count not in (1, 2):  # one array of edges for both dimensions, as NumPy reads it
        bins = [np.asarray(bins), np.asarray(bins)]
    hist, edges = histogramdd([x, y], bins=bins, range=range, normed=normed,
                              weights=weights, density=density)
    return hist, edges[0], edges[1]


