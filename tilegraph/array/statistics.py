"""Statistics over blocked arrays: histograms, counts, order statistics (median,
percentile, quantile), ``ptp`` and ``average``, covariance and closeness tests; the
NaN-skipping reductions (:mod:`tilegraph.array.nanreductions`) are importable from here
too.

Histograms and counts are tree reductions of per-block counts; when the bin edges depend on
the data (``bins=10`` without ``range=``, ``bincount``'s length) a small pass computes the
minimum and maximum first. Order statistics along an axis make that axis one block (the
other axes stay cut); over the whole array they pick elements of the sample-sorted array.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([1.0, 2.0, 2.0, 3.0, 9.0]), chunks=2)
>>> hist, edges = tg.histogram(x, bins=4)
>>> hist.compute(), edges
(array([3, 1, 0, 1]), array([1., 3., 5., 7., 9.]))
>>> float(tg.median(x).compute())
2.0
"""

from __future__ import annotations

import builtins
import operator
import warnings
from typing import Any

import numpy as np

import tilegraph.array.reductions as reductions
from tilegraph.algebra.blocks import apply_blocks, reduce_by_key
from tilegraph.array.core import Array, asarray, compute, from_numpy, tokenize
from tilegraph.array.elementwise import elemwise
from tilegraph.array.indexing import digest
from tilegraph.array.nanreductions import (
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmin,
    nanprod,
    nanstd,
    nansum,
    nanvar,
)
from tilegraph.array.reductions import no_out
from tilegraph.graph.taskgraph import Dep, Lit

__all__ = [
    "allclose", "array_equal", "average", "bincount", "corrcoef", "count_nonzero", "cov",
    "diagonal", "histogram", "isclose", "median", "nanargmax", "nanargmin", "nanmax",
    "nanmean", "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile", "nanstd",
    "nansum", "nanvar", "percentile", "ptp", "quantile", "trace",
]

# -- histograms and counts --------------------------------------------------------------------


def _block_histogram(bins: Any, range_: Any, block: np.ndarray,
                     weights: np.ndarray | None = None) -> np.ndarray:
    return np.histogram(block, bins=bins, range=range_, weights=weights)[0]


def _sum_all(op: str, parts: Any, dtype: np.dtype, length: int, token: str) -> Array:
    tree = reduce_by_key(f"{op}-{token}", parts, lambda c: (0,), (1,), np.add,
                         kind="reduce", name=op)
    return Array(tree, (length,), ((length,),), dtype)


def histogram(a: Any, bins: Any = 10, range: Any = None, density: bool = False,
              weights: Any = None) -> tuple[Array, np.ndarray]:
    """``numpy.histogram``: ``(counts, bin_edges)``; counts is a lazy array (a sum of
    per-block histograms), the edges a NumPy array (known before the counts are)."""
    a = asarray(a).reshape(-1)
    if isinstance(bins, str):
        raise TypeError(f"histogram: bins={bins!r} (a rule that reads the data) is not "
                        "supported; give a number of bins with range=, or the edges")
    if np.ndim(bins) == 0:
        nbins = operator.index(bins)
        if nbins < 1:
            raise ValueError(f"histogram: bins must be positive, got {nbins}")
        if range is None:  # phase one: the data's range
            if a.size == 0:
                lo, hi = 0.0, 1.0
            else:
                lo, hi = (float(v) for v in compute(a.min(), a.max()))
        else:
            lo, hi = range
        edges = np.histogram_bin_edges(np.array([], dtype=a.dtype if a.dtype.kind == "f"
                                                 else float), nbins, range=(lo, hi))
        # equal bins: NumPy's fast path per block (the same edges and bin of every value)
        spec: tuple = (nbins, (lo, hi))
    else:
        edges = np.asarray(bins)
        if edges.ndim != 1 or np.any(np.diff(edges) < 0):
            raise ValueError("histogram: bins must increase monotonically, when an array")
        spec = (Lit(edges), None)
    nb = len(edges) - 1
    key = a.collection.key
    w = None
    if weights is not None:
        w = asarray(weights).reshape(-1)
        if w.shape != a.shape:
            raise ValueError(f"histogram: weights of shape {w.shape} do not match the "
                             f"{a.shape[0]} elements of a")
        w = w.rechunk(a.chunks)
    dtype = np.histogram(np.zeros(1), edges,
                         weights=None if w is None else np.ones(1, w.dtype))[0].dtype
    token = tokenize("histogram", a, digest(edges), w)
    if w is None:
        parts = apply_blocks(f"histogram-partial-{token}", a.numblocks, [a.collection],
                             lambda c: (_block_histogram, [key(c)], (*spec, Dep(0))),
                             kind="partial", name="histogram-partial")
    else:
        wkey = w.collection.key
        parts = apply_blocks(f"histogram-partial-{token}", a.numblocks,
                             [a.collection, w.collection],
                             lambda c: (_block_histogram, [key(c), wkey(c)],
                                        (*spec, Dep(0), Dep(1))),
                             kind="partial", name="histogram-partial")
    hist = _sum_all("histogram", parts, dtype, nb, token)
    if density:
        widths = np.diff(edges)
        hist = hist / hist.sum() / widths
    return hist, edges


def _block_bincount(length: int, block: np.ndarray, weights: np.ndarray | None = None
                    ) -> np.ndarray:
    return np.bincount(block, weights=weights, minlength=length)


def bincount(x: Any, weights: Any = None, minlength: int = 0) -> Array:
    """``numpy.bincount`` of non-negative ints; a small pass computes the largest value
    (the result's length), then per-block counts are summed as a tree."""
    x = asarray(x)
    if x.ndim != 1:
        raise ValueError(f"bincount: x must be 1-d, got shape {x.shape}")
    if x.dtype.kind not in "iub":
        raise TypeError(f"bincount: x must hold integers, got {x.dtype}")
    length = operator.index(minlength)
    if length < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if x.size:
        lo, hi = (int(v) for v in compute(x.min(), x.max()))
        if lo < 0:
            raise ValueError(f"bincount: x holds the negative value {lo}")
        length = builtins.max(length, hi + 1)
    key = x.collection.key
    token = tokenize("bincount", x, weights,
                     length)
    if weights is None:
        dtype = np.dtype(np.intp)
        parts = apply_blocks(f"bincount-partial-{token}", x.numblocks, [x.collection],
                             lambda c: (_block_bincount, [key(c)], (length, Dep(0))),
                             kind="partial", name="bincount-partial")
    else:
        w = asarray(weights)
        if w.shape != x.shape:
            raise ValueError(f"bincount: weights of shape {w.shape} do not match x of shape "
                             f"{x.shape}")
        w = w.rechunk(x.chunks)
        dtype = np.bincount(np.zeros(1, np.intp), weights=np.ones(1, w.dtype)).dtype
        wkey = w.collection.key
        parts = apply_blocks(f"bincount-partial-{token}", x.numblocks,
                             [x.collection, w.collection],
                             lambda c: (_block_bincount, [key(c), wkey(c)],
                                        (length, Dep(0), Dep(1))),
                             kind="partial", name="bincount-partial")
    if x.size == 0:
        from tilegraph.array.creation import zeros

        return zeros(length, dtype=dtype)
    return _sum_all("bincount", parts, dtype, length, token)


def count_nonzero(a: Any, axis: Any = None, *, keepdims: bool = False) -> Array:
    """The number of non-zero elements along ``axis``."""
    a = asarray(a)
    return reductions.sum(a != 0, axis=axis, dtype=np.intp, keepdims=keepdims)


# -- order statistics -------------------------------------------------------------------------


def _block_quantile(func: Any, q: np.ndarray, axis: int, method: str, dtype: np.dtype,
                    block: np.ndarray) -> np.ndarray:
    # (NumPy gives float64 for a block of no elements whatever its dtype)
    return np.asarray(func(block, q, axis=axis, method=method)).astype(dtype, copy=False)


def _median_block(block: np.ndarray, q: Any, axis: int, method: str) -> np.ndarray:
    """``numpy.median`` in the signature of ``numpy.quantile`` (a median is the mean of the
    middle values, so ``median([1, inf])`` is inf where the 0.5 quantile is NaN)."""
    return np.asarray(np.median(block, axis=axis))


def _nanmedian_block(block: np.ndarray, q: Any, axis: int, method: str) -> np.ndarray:
    """``numpy.nanmedian`` in the signature of ``numpy.quantile``."""
    return np.asarray(np.nanmedian(block, axis=axis))


def _numpy_dtype(npfunc: Any, a: Array, *q: Any) -> np.dtype | None:
    """The dtype NumPy's ``npfunc`` gives for ``a``'s dtype and the user's ``q`` (a Python
    float or a float32 ``q`` keeps a float32 array's dtype, a float64 array ``q`` does not);
    ``None`` when ``q`` is out of range (the caller says so)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(npfunc(np.ones(2, a.dtype), *q)).dtype
    except ValueError:
        return None


def _quantile(op: str, func: Any, a: Any, q: Any, axis: Any, method: str, keepdims: bool,
              nan: bool, dtype: np.dtype | None = None) -> Array:
    from tilegraph.array.sorting import sort, whole_axis

    a = asarray(a)
    q = np.asarray(q, dtype=float)
    if np.any((q < 0) | (q > 1)) or np.any(np.isnan(q)):
        raise ValueError(f"{op}: quantiles must be in the range [0, 1] "
                         "(percentiles in [0, 100])")
    if dtype is None:
        dtype = _numpy_dtype(np.nanquantile if nan else np.quantile, a, q)
    if a.size == 0:
        return _empty_quantile(op, a, q, axis, method, keepdims, nan)
    if isinstance(axis, (tuple, list)):
        from tilegraph.array.reductions import normalize_axes

        axes = normalize_axes(op, tuple(axis), a.ndim, a.shape)
        if len(axes) == a.ndim:
            axis = None
        elif len(axes) == 1:
            axis = axes[0]
        else:  # the axes moved last and merged into one
            kept = [i for i in range(a.ndim) if i not in axes]
            merged = a.transpose([*kept, *axes]).reshape(
                (*[a.shape[i] for i in kept], -1))
            out = _quantile(op, func, merged, q, -1, method, False, nan, dtype)
            if keepdims:
                out = out.reshape((*q.shape, *[1 if i in axes else n
                                               for i, n in enumerate(a.shape)]))
            return out
    if axis is None or a.ndim == 1:
        flat = a.reshape(-1)
        if nan and flat.dtype.kind in "fc":
            flat = flat[~np.isnan(flat)]
        if method != "linear":
            raise TypeError(f"{op}: method={method!r} over the whole array is not supported "
                            "(only 'linear'); give axis= or call .compute() first")
        s = sort(flat)
        n = s.shape[0]
        if n == 0:  # NaNs only (the count is known: the mask's size was computed)
            warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
            out = from_numpy(np.full(q.shape, np.nan))
        elif op in ("median", "nanmedian"):  # NumPy's: the mean of the middle values
            if n % 2:
                out = s[n // 2].astype(np.mean(np.ones(1, s.dtype)).dtype)
            else:
                out = reductions.mean(s[n // 2 - 1:n // 2 + 1])
            if not nan and flat.dtype.kind in "fc":  # a NaN anywhere makes the median NaN
                from tilegraph.array.elementwise import where

                out = where(np.isnan(flat).any(), np.nan, out)
        else:
            # NumPy's linear method and its _lerp, step for step (an inf among the values
            # gives what NumPy gives: inf * 0 is NaN)
            pos = (n - 1) * q.reshape(-1)
            above = pos >= n - 1
            lo = np.where(above, n - 1, np.floor(pos)).astype(np.intp)
            hi = np.where(above, n - 1, lo + 1)
            gamma = pos - np.where(above, -1, lo)
            vlo, vhi = s[lo], s[hi]
            diff = vhi - vlo
            from tilegraph.array.elementwise import where

            out = where(gamma >= 0.5, vhi - diff * (1 - gamma), vlo + diff * gamma)
            out = out.reshape(q.shape)
            if not nan and flat.dtype.kind in "fc":  # a NaN anywhere makes every quantile NaN
                out = where(np.isnan(flat).any(), np.nan, out)
        if out.dtype != dtype:
            out = out.astype(dtype)
        if keepdims:
            out = out.reshape(q.shape + (1,) * a.ndim)
        return out
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(
            f"{op}: axis {axis} is out of bounds for an array of shape {a.shape}")
    axis %= a.ndim
    y = whole_axis(a, axis)
    qshape = q.shape
    chunks = (*[(s,) for s in qshape], *[c for i, c in enumerate(y.chunks) if i != axis])
    key = y.collection.key
    nq = len(qshape)

    def task_of(c: tuple[int, ...]) -> tuple:
        rest = list(c[nq:])
        rest.insert(axis, 0)
        return _block_quantile, [key(tuple(rest))], (func, q, axis, method, dtype, Dep(0))

    from tilegraph.array.chunks import numblocks

    token = tokenize(op, y, digest(q), axis, method)
    blocks = apply_blocks(f"{op}-{token}", numblocks(chunks), [y.collection], task_of,
                          kind="sort", name=op)
    out = Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)
    if keepdims:
        out = out.reshape((*qshape, *[1 if i == axis else s for i, s in enumerate(a.shape)]))
    return out


def _empty_quantile(op: str, a: Array, q: np.ndarray, axis: Any, method: str,
                    keepdims: bool, nan: bool) -> Array:
    """A quantile of an array of no elements, as NumPy gives it: the median and the
    NaN-skipping ones are the (nan)mean of nothing (NaN, with "Mean of empty slice", one
    value per slice whatever ``q``); quantile and percentile raise an IndexError for empty
    slices and give an empty result otherwise."""
    if nan:
        return nanmean(a, axis=axis, keepdims=keepdims)
    axes = reductions.normalize_axes(op, axis, a.ndim, a.shape)
    if op == "median" and (axes or axis is None):
        return reductions.mean(a, axis=axis, keepdims=keepdims)
    if not axes:
        raise ValueError(f"{op}: axis=() of the empty array of shape {a.shape} reduces no "
                         "axis")
    if not builtins.all(a.shape[i] for i in axes):
        raise IndexError(f"{op}: the slices along axes {axes} of the array of shape "
                         f"{a.shape} are empty, so they have no quantile")
    return from_numpy(np.quantile(np.empty(a.shape, a.dtype), q, axis=axis, method=method,
                                  keepdims=keepdims))


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False) -> Array:
    """``numpy.quantile``: along an axis (made one block), or over the whole array (by a
    sample sort and a pick of the elements)."""
    no_out("quantile", out)
    return _quantile("quantile", np.quantile, a, q, axis, method, keepdims, False,
                     _numpy_dtype(np.quantile, asarray(a), q))


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
               overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False) -> Array:
    """``numpy.percentile`` (``q`` in percent); see :func:`quantile`."""
    no_out("percentile", out)
    return _quantile("percentile", np.quantile, a, np.asarray(q, dtype=float) / 100, axis,
                     method, keepdims, False, _numpy_dtype(np.percentile, asarray(a), q))


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Array:
    """``numpy.median``; see :func:`quantile`."""
    no_out("median", out)
    return _quantile("median", _median_block, a, 0.5, axis, "linear", keepdims, False,
                     _numpy_dtype(np.median, asarray(a)))


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False) -> Array:
    """``numpy.nanquantile``: :func:`quantile` ignoring NaNs."""
    no_out("nanquantile", out)
    return _quantile("nanquantile", np.nanquantile, a, q, axis, method, keepdims, True,
                     _numpy_dtype(np.nanquantile, asarray(a), q))


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False) -> Array:
    """``numpy.nanpercentile``: :func:`percentile` ignoring NaNs."""
    no_out("nanpercentile", out)
    return _quantile("nanpercentile", np.nanquantile, a, np.asarray(q, dtype=float) / 100,
                     axis, method, keepdims, True, _numpy_dtype(np.nanpercentile, asarray(a), q))


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Array:
    """``numpy.nanmedian``: :func:`median` ignoring NaNs."""
    no_out("nanmedian", out)
    return _quantile("nanmedian", _nanmedian_block, a, 0.5, axis, "linear", keepdims, True,
                     _numpy_dtype(np.nanmedian, asarray(a)))


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """Range (maximum minus minimum) along ``axis``."""
    no_out("ptp", out)
    a = asarray(a)
    return reductions.max(a, axis=axis, keepdims=keepdims) - reductions.min(
        a, axis=axis, keepdims=keepdims)


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
            keepdims: bool = False) -> Any:
    """Weighted average along ``axis`` (the mean without weights)."""
    a = asarray(a)
    if weights is None:
        avg = reductions.mean(a, axis=axis, keepdims=keepdims)
        scl = avg.dtype.type(a.size / builtins.max(avg.size, 1))
        return (avg, scl) if returned else avg
    w = asarray(weights)
    if w.shape != a.shape:
        if axis is None or w.ndim != 1:
            raise TypeError(f"average: weights of shape {w.shape} differ from a's {a.shape}; "
                            "give axis= for 1-d weights")
        ax = operator.index(axis) % a.ndim
        if w.shape[0] != a.shape[ax]:
            raise ValueError(f"average: {w.shape[0]} weights for axis {ax} of length "
                             f"{a.shape[ax]}")
        w = w.reshape(tuple(-1 if i == ax else 1 for i in builtins.range(a.ndim)))
    scl = reductions.sum(w * np.ones((), dtype=a.dtype) + a * 0, axis=axis,
                         keepdims=keepdims)
    avg = reductions.sum(a * w, axis=axis, keepdims=keepdims) / scl
    return (avg, scl) if returned else avg


# -- covariance -------------------------------------------------------------------------------


def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: Any = None,
        fweights: Any = None, aweights: Any = None, *, dtype: Any = None) -> Array:
    """``numpy.cov``: the covariance matrix of the variables (rows, unless
    ``rowvar=False``), as a blocked product of the centred data with itself."""
    if fweights is not None or aweights is not None:
        raise TypeError("cov: fweights= and aweights= are not supported; call .compute() "
                        "first")
    from tilegraph.array.manipulation import concatenate

    x = asarray(m)
    if x.ndim > 2:
        raise ValueError(f"cov: m has more than 2 dimensions (shape {x.shape})")
    one = x.ndim < 2 and y is None
    if x.ndim < 2:
        x = x.reshape(1, -1)
    if not rowvar and x.shape[0] != 1:
        x = x.T
    if y is not None:
        yy = asarray(y)
        if yy.ndim < 2:
            yy = yy.reshape(1, -1)
        if not rowvar and yy.shape[0] != 1:
            yy = yy.T
        x = concatenate([x, yy], axis=0)
        one = False
    if dtype is None:
        dtype = np.result_type(x.dtype, np.float64)
    x = x.astype(dtype)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    xc = x - reductions.mean(x, axis=1, keepdims=True)
    c = (xc @ np.conj(xc).T) / builtins.max(n - ddof, 0)
    return c.reshape(()) if one else c


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, *, dtype: Any = None) -> Array:
    """``numpy.corrcoef``: Pearson correlation coefficients from :func:`cov`."""
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = np.sqrt(_diagonal(c))
    out = c / d[:, None] / d[None, :]
    if out.dtype.kind == "c":
        return out
    return np.clip(out, -1, 1)


def _diag_block(block: np.ndarray) -> np.ndarray:
    return np.diagonal(block).copy()


def _diagonal(c: Array) -> Array:
    """The diagonal of a square matrix whose row and column blocks agree."""
    if c.chunks[0] != c.chunks[1]:
        c = c.rechunk((c.chunks[0], c.chunks[0]))
    key = c.collection.key
    token = tokenize("diagonal", c)
    blocks = apply_blocks(f"diagonal-{token}", (len(c.chunks[0]),), [c.collection],
                          lambda i: (_diag_block, [key((i[0], i[0]))], None),
                          covers=False, kind="getitem", name="diagonal")  # (i, i) only
    return Array(blocks, (c.shape[0],), (c.chunks[0],), c.dtype)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """``numpy.diagonal``: the ``offset``-th diagonal of the matrices in the plane of
    ``axis1`` and ``axis2``, as the last axis of the result. Of a 2-d array, each
    diagonal block's diagonal; of a stack, the diagonal elements gathered block by block
    (both without gathering a matrix)."""
    a = asarray(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal: needs an array of at least two dimensions, got shape "
                         f"{a.shape}")
    offset = operator.index(offset)
    ax1, ax2 = (reductions.normalize_axes("diagonal", ax, a.ndim, a.shape)[0]
                for ax in (axis1, axis2))
    if ax1 == ax2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    if (ax1, ax2) != (a.ndim - 2, a.ndim - 1):
        rest = [k for k in range(a.ndim) if k not in (ax1, ax2)]
        a = a.transpose((*rest, ax1, ax2))
    rows, cols = a.shape[-2:]
    start_r, start_c = builtins.max(-offset, 0), builtins.max(offset, 0)
    n = builtins.max(0, builtins.min(rows - start_r, cols - start_c))
    if a.ndim == 2 and n:
        return _diagonal(a[start_r:start_r + n, start_c:start_c + n])
    r = np.arange(start_r, start_r + n)
    return a[..., r, r - start_r + start_c]


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None
          ) -> Array:
    """``numpy.trace``: the sums of the ``offset``-th diagonals (see :func:`diagonal`)."""
    return reductions.sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# -- closeness -------------------------------------------------------------------------------


def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Array:
    """``numpy.isclose`` elementwise, with broadcasting."""
    return elemwise(np.isclose, a, b, rtol, atol, equal_nan, dtype=bool, name="isclose")


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> Array:
    """Whether every element is close (a lazy 0-d array; ``bool()`` computes it)."""
    return reductions.all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """Whether two arrays have one shape and equal elements (``False`` at once when the
    shapes differ, a lazy 0-d array otherwise)."""
    a1, a2 = asarray(a1), asarray(a2)
    if a1.shape != a2.shape:
        return False
    eq = a1 == a2
    if equal_nan and a1.dtype.kind in "fc":
        eq = eq | (np.isnan(a1) & np.isnan(a2))
    return reductions.all(eq)

