"""The NaN-skipping reductions over blocked arrays: ``nansum``, ``nanprod``, ``nanmin``,
``nanmax``, ``nanmean``, ``nanvar``, ``nanstd``, ``nanargmin`` and ``nanargmax`` (each a
tree reduction of per-block partials; importable from :mod:`tilegraph.array.statistics`
too, and as ``tilegraph.nan*``). The NaN-skipping order statistics (``nanmedian``,
``nanquantile``, ``nanpercentile``) live with the others in
:mod:`tilegraph.array.statistics`.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([1.0, np.nan, 3.0, np.nan]), chunks=2)
>>> float(tg.nanmean(x).compute()), int(tg.nanargmax(x).compute())
(2.0, 2)
"""

from __future__ import annotations

import math
import operator
import warnings
from typing import Any

import numpy as np

import tilegraph.array.reductions as reductions
from tilegraph.array.core import Array, asarray
from tilegraph.array.elementwise import elemwise
from tilegraph.array.reductions import no_out

# -- NaN-skipping reductions --------------------------------------------------------------------
#
# NumPy's semantics, value for value and warning for warning: a NaN (a complex one: either
# part) is skipped, an inf is not (a mean or a variance with an inf is inf or NaN as NumPy's);
# a slice of NaNs only gives NaN with NumPy's RuntimeWarning ("Mean of empty slice", "All-NaN
# slice encountered", "Degrees of freedom <= 0 for slice."), emitted when the block is
# computed, since only the data tell; nanargmin/nanargmax raise NumPy's ValueError there.
# Integer and boolean arrays have no NaN: they take the plain reduction, as in NumPy.


def _nan_filled(a: Array, value: Any) -> Array:
    if a.dtype.kind not in "fc":
        return a
    return elemwise(np.where, np.isnan(a), a.dtype.type(value), a, dtype=a.dtype,
                    name="nan-fill")


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
           keepdims: bool = False) -> Array:
    """Sum treating NaNs as zero (an inf stays: ``inf + -inf`` is NaN, as in NumPy)."""
    no_out("nansum", out)
    a = asarray(a)
    return reductions.sum(_nan_filled(a, 0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False) -> Array:
    """Product treating NaNs as one."""
    no_out("nanprod", out)
    a = asarray(a)
    return reductions.prod(_nan_filled(a, 1), axis=axis, dtype=dtype, keepdims=keepdims)


def _warn_all_nan(part: np.ndarray) -> np.ndarray:
    """The result of nanmin/nanmax, with NumPy's warning where a slice was NaNs only."""
    if np.isnan(part).any():
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=2)
    return part


def _nan_minmax(op: str, ufunc: np.ufunc, a: Any, axis: Any, keepdims: bool) -> Array:
    a = asarray(a)
    if a.dtype.kind not in "fc":
        return getattr(reductions, op[3:])(a, axis=axis, keepdims=keepdims)
    reductions.check_nonempty(op, a, axis)

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        return ufunc.reduce(block, axis=axes, keepdims=True)

    chunk.__name__ = op
    return reductions.reduction(a, op, chunk, ufunc, _warn_all_nan, axis, keepdims,
                                a.dtype)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """Minimum ignoring NaNs (NaN, with NumPy's RuntimeWarning, where every element is NaN;
    a zero-size reduction is a ValueError, as in NumPy)."""
    no_out("nanmin", out)
    return _nan_minmax("nanmin", np.fmin, a, axis, keepdims)


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """Maximum ignoring NaNs (NaN, with NumPy's RuntimeWarning, where every element is NaN;
    a zero-size reduction is a ValueError, as in NumPy)."""
    no_out("nanmax", out)
    return _nan_minmax("nanmax", np.fmax, a, axis, keepdims)


def _inexact_dtype(op: str, a: Array, dtype: Any) -> np.dtype | None:
    """``dtype`` checked as NumPy's nan-functions check it for an inexact ``a``."""
    if dtype is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind not in "fc":
        raise TypeError(f"{op}: a has dtype {a.dtype}, so dtype must be inexact (a float or "
                        f"complex type), got {dtype}")
    return dtype


def _accumulator(a: Array, dtype: np.dtype | None) -> np.dtype:
    """The dtype partial sums are kept in: ``dtype`` or a's, float32 for float16, complex
    for a complex ``a``."""
    acc = a.dtype if dtype is None else dtype
    if acc == np.float16:
        acc = np.dtype(np.float32)
    if a.dtype.kind == "c" and acc.kind != "c":
        acc = np.result_type(acc, np.complex64)
    return acc


def _nan_sum_count(block: np.ndarray, axes: tuple[int, ...], acc: np.dtype) -> tuple:
    """(count of numbers, their sum, the NaN mask or None when there is no NaN) over
    ``axes`` of a block, the axes kept."""
    nan = np.isnan(block)
    n = math.prod(block.shape[a] for a in axes)
    if nan.any():
        count = n - np.sum(nan, axis=axes, dtype=np.intp, keepdims=True)
        filled = np.where(nan, 0, block)
    else:
        nan = None
        count = np.full(tuple(1 if a in axes else s for a, s in enumerate(block.shape)), n,
                        dtype=np.intp)
        filled = block
    return count, np.sum(filled, axis=axes, dtype=acc, keepdims=True), nan


def _add_pairs(p: tuple, q: tuple) -> tuple:
    return p[0] + q[0], p[1] + q[1]


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: bool = False) -> Array:
    """Mean of the non-NaN elements: one tree reduction of (count, sum) pairs. A slice of
    NaNs only (or of no elements) gives NaN with NumPy's RuntimeWarning "Mean of empty
    slice"; integer and boolean arrays take :func:`tilegraph.mean`."""
    no_out("nanmean", out)
    a = asarray(a)
    if a.dtype.kind not in "fc":
        return reductions.mean(a, axis=axis, dtype=dtype, keepdims=keepdims)
    dtype = _inexact_dtype("nanmean", a, dtype)
    acc = _accumulator(a, dtype)
    out_dtype = np.nanmean(np.ones(1, a.dtype), dtype=dtype).dtype

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> tuple:
        return _nan_sum_count(block, axes, acc)[:2]

    chunk.__name__ = "nanmean"

    def aggregate(part: tuple) -> np.ndarray:
        count, total = part
        empty = count == 0
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.true_divide(total, count.astype(total.real.dtype))
        if empty.any():
            warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=2)
        return mean

    return reductions.reduction(a, "nanmean", chunk, _add_pairs, aggregate, axis, keepdims,
                                out_dtype)


def _nan_moments(block: np.ndarray, axes: tuple[int, ...], acc: np.dtype) -> tuple:
    """(count, mean, M2) of the numbers of a block over ``axes`` (kept), per slice: the
    deviations of NaNs are zero, as in ``numpy.nanvar``; an inf makes M2 NaN (``inf -
    inf``), so the variance is NaN, as NumPy's."""
    count, total, nan = _nan_sum_count(block, axes, acc)
    real = np.zeros((), acc).real.dtype
    mean = total / np.maximum(count, 1).astype(real)
    d = np.asarray(np.subtract(block, mean, dtype=acc))  # inf - inf warns, as in nanvar
    if nan is not None:
        d[nan] = 0
    sq = (d * np.conj(d)).real if d.dtype.kind == "c" else np.square(d, out=d)
    return count, mean, np.sum(sq, axis=axes, keepdims=True)


def _merge_nan_moments(p: tuple, q: tuple) -> tuple:
    """Chan's parallel update of (count, mean, M2), slice by slice (counts may be zero)."""
    na, ma, m2a = p
    nb, mb, m2b = q
    n = na + nb
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = (nb / np.maximum(n, 1)).astype(m2a.dtype)  # 0 where nothing is counted
        delta = mb - ma
        mean = ma + delta * frac
        sq = (delta * np.conj(delta)).real if delta.dtype.kind == "c" else delta * delta
        m2 = m2a + m2b + sq * (na * frac)
    # a side with no numbers adds nothing (its zero mean must not meet an inf of the other)
    none_a, none_b = na == 0, nb == 0
    if none_a.any() or none_b.any():
        mean = np.where(none_a, mb, np.where(none_b, ma, mean))
        m2 = np.where(none_a, m2b, np.where(none_b, m2a, m2))
    return n, mean, m2


def _nan_var_std(op: str, a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: bool
                 ) -> Array:
    a = asarray(a)
    if a.dtype.kind not in "fc":
        return getattr(reductions, op[3:])(a, axis=axis, dtype=dtype, ddof=ddof,
                                           keepdims=keepdims)
    dtype = _inexact_dtype(op, a, dtype)
    try:
        ddof = operator.index(ddof) if not isinstance(ddof, (float, np.floating)) else ddof
    except TypeError:
        raise TypeError(f"{op}: ddof must be a number, got {ddof!r}") from None
    acc = _accumulator(a, dtype)
    out_dtype = getattr(np, op)(np.ones(2, a.dtype), dtype=dtype).dtype

    def chunk(block: np.ndarray, axes: tuple[int, ...]) -> tuple:
        return _nan_moments(block, axes, acc)

    chunk.__name__ = f"{op}-moments"

    def aggregate(part: tuple) -> np.ndarray:
        count, _, m2 = part
        dof = count - ddof
        bad = dof <= 0
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.true_divide(m2, dof)
        if bad.any():
            warnings.warn("Degrees of freedom <= 0 for slice.", RuntimeWarning, stacklevel=2)
            var = np.where(bad, np.nan, var)
        return np.sqrt(var) if op == "nanstd" else var

    return reductions.reduction(a, op, chunk, _merge_nan_moments, aggregate, axis, keepdims,
                                out_dtype, params=(ddof,))


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
           keepdims: bool = False) -> Array:
    """Variance of the non-NaN elements, in one pass: each block's (count, mean, M2) per
    slice, merged by Chan's formula. An inf among the numbers gives NaN, as NumPy's; a
    slice with ``ddof`` or fewer numbers gives NaN with NumPy's RuntimeWarning "Degrees of
    freedom <= 0 for slice."; integer and boolean arrays take :func:`tilegraph.var`."""
    no_out("nanvar", out)
    return _nan_var_std("nanvar", a, axis, dtype, ddof, keepdims)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
           keepdims: bool = False) -> Array:
    """Standard deviation of the non-NaN elements: the square root of :func:`nanvar`."""
    no_out("nanstd", out)
    return _nan_var_std("nanstd", a, axis, dtype, ddof, keepdims)


def nanargmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """Index of the minimum ignoring NaNs. A slice of NaNs only raises NumPy's ValueError
    "All-NaN slice encountered" when the result is computed (only the data tell)."""
    no_out("nanargmin", out)
    return reductions.arg_reduction("argmin", asarray(a), axis, keepdims,
                                    reductions.SPLIT_EVERY, skip_nan=True)


def nanargmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Array:
    """Index of the maximum ignoring NaNs. A slice of NaNs only raises NumPy's ValueError
    "All-NaN slice encountered" when the result is computed (only the data tell)."""
    no_out("nanargmax", out)
    return reductions.arg_reduction("argmax", asarray(a), axis, keepdims,
                                    reductions.SPLIT_EVERY, skip_nan=True)


