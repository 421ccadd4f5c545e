"""The Array API standard (2023.12) namespace of tilegraph arrays.

``x.__array_namespace__()`` returns this module, so library code written against the
standard (``xp = x.__array_namespace__()``) runs on blocked, lazy arrays. Everything is
built from tilegraph's blocked operations; functions whose result shape depends on values
(``nonzero``, ``unique_*``, boolean-mask indexing) compute the sizes first (see
:mod:`tilegraph.array.indexing`).

``x[key] = value`` and the in-place operators rebind ``x`` to a new lazy plan in which only
the blocks ``key`` touches are new (see :mod:`tilegraph.array.assignment`); arrays built
from ``x`` before keep the old values, and ``asarray(x, copy=True)`` is a new array object
while ``asarray(x)`` is ``x`` itself. The Array API conformance suite runs against this
module with ``make array-api`` (the tests tilegraph skips, if any, are listed with their
reasons in ``array_api_skips.txt``).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([3.0, -1.0, 2.0]), chunks=2)
>>> xp = x.__array_namespace__()
>>> xp.sort(xp.abs(x), descending=True).compute()
array([3., 2., 1.])
>>> xp.cumulative_sum(x, include_initial=True).compute()
array([0., 3., 2., 4.])
"""

from __future__ import annotations

import builtins
import operator
import sys as _sys
from types import SimpleNamespace
from typing import Any

import numpy as np

import tilegraph.array.indexing as _indexing
import tilegraph.array.linalg as _tl
import tilegraph.array.manipulation as _manip
import tilegraph.array.numpy_functions as _npf
import tilegraph.array.padding as _padding
import tilegraph.array.reductions as _red
import tilegraph.array.scans as _scans
import tilegraph.array.sorting as _sorting
import tilegraph.array.windows as _windows
from tilegraph.array.array_api_dtypes import *  # noqa: F403  (the dtypes, their functions)
from tilegraph.array.array_api_dtypes import bool, complex128, float64, int64, uint64
from tilegraph.array.array_api_dtypes import check_device as _check_device
from tilegraph.array.array_api_dtypes import dtype_or_none as _dtype
from tilegraph.array.array_api_elementwise import *  # noqa: F403  (the elementwise functions)
from tilegraph.array.contraction import einsum as _einsum
from tilegraph.array.contraction import matmul as _matmul
from tilegraph.array.contraction import tensordot as _tensordot
from tilegraph.array.core import Array
from tilegraph.array.core import asarray as _asarray
from tilegraph.array.creation import arange as _arange
from tilegraph.array.creation import eye as _eye
from tilegraph.array.creation import full as _full
from tilegraph.array.creation import linspace as _linspace
from tilegraph.array.elementwise import elemwise as _elemwise
from tilegraph.array.elementwise import isin as _isin

__array_api_version__ = "2023.12"

# -- creation ----------------------------------------------------------------------------------


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Array:
    """An Array from an Array, a NumPy array, a Python scalar or nested sequences. Python
    scalars get the default dtypes (bool, int64, float64, complex128)."""
    _check_device(device)
    dtype = _dtype(dtype)
    if isinstance(obj, Array):
        if dtype is not None and dtype != obj.dtype:
            if copy is False:
                raise ValueError("asarray: copy=False, but a change of dtype needs a copy")
            return obj.astype(dtype)
        return obj.copy() if copy else obj
    if copy is False and not isinstance(obj, np.ndarray):
        try:
            memoryview(obj)
        except TypeError:
            raise ValueError("asarray: copy=False, but the object is not an array that can "
                             "be shared without a copy") from None
    if isinstance(obj, builtins.bool | np.bool_) and dtype is None:
        dtype = bool
    arr = np.array(obj, dtype=dtype, copy=True if copy else None)
    if copy is False and isinstance(obj, np.ndarray) and not np.shares_memory(arr, obj):
        raise ValueError("asarray: copy=False, but a copy is needed")
    return _asarray(arr)


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None,
           device: Any = None) -> Array:
    """Evenly spaced values in ``[start, stop)``."""
    _check_device(device)
    return _arange(start, stop, step, dtype=_dtype(dtype))


def empty(shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of the shape (filled with zeros: tilegraph arrays are never uninitialised)."""
    _check_device(device)
    return _full(shape, 0, dtype=float64 if dtype is None else _dtype(dtype))


def zeros(shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of zeros (float64 unless ``dtype`` is given)."""
    _check_device(device)
    return _full(shape, 0, dtype=float64 if dtype is None else _dtype(dtype))


def ones(shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of ones (float64 unless ``dtype`` is given)."""
    _check_device(device)
    return _full(shape, 1, dtype=float64 if dtype is None else _dtype(dtype))


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of ``fill_value`` (its default dtype for Python scalars)."""
    _check_device(device)
    if dtype is None:
        dtype = (bool if isinstance(fill_value, builtins.bool) else
                 int64 if isinstance(fill_value, int) else
                 float64 if isinstance(fill_value, float) else
                 complex128 if isinstance(fill_value, complex) else None)
    return _full(shape, fill_value, dtype=_dtype(dtype))


def _like(x: Array, shape_value: Any, dtype: Any, device: Any) -> Array:
    _check_device(device)
    return _full(x.shape, shape_value, dtype=x.dtype if dtype is None else _dtype(dtype),
                 chunks=x.chunks)


def empty_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    """An array of ``x``'s shape, blocks and dtype (filled with zeros)."""
    return _like(x, 0, dtype, device)


def zeros_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    """Zeros of ``x``'s shape, blocks and dtype."""
    return _like(x, 0, dtype, device)


def ones_like(x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
    """Ones of ``x``'s shape, blocks and dtype."""
    return _like(x, 1, dtype, device)


def full_like(x: Array, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Array:
    """``fill_value`` in ``x``'s shape, blocks and dtype."""
    return _like(x, fill_value, dtype, device)


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None) -> Array:
    """Ones on diagonal ``k``, zeros elsewhere."""
    _check_device(device)
    return _eye(n_rows, n_cols, k=k, dtype=float64 if dtype is None else _dtype(dtype))


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: Any = None,
             endpoint: builtins.bool = True) -> Array:
    """``num`` evenly spaced values from ``start`` to ``stop``."""
    _check_device(device)
    if dtype is None and (isinstance(start, complex) or isinstance(stop, complex)):
        dtype = complex128
    return _linspace(start, stop, num, endpoint=endpoint,
                     dtype=float64 if dtype is None else _dtype(dtype))


def from_dlpack(x: Any, /, *, device: Any = None, copy: Any = None) -> Array:
    """An Array from an object with ``__dlpack__`` (through NumPy)."""
    _check_device(device)
    return _asarray(np.from_dlpack(x))


def meshgrid(*arrays: Array, indexing: str = "xy") -> list[Array]:
    """Coordinate matrices from 1-d coordinate vectors."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [_asarray(a) for a in arrays]
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        ax = i
        if indexing == "xy" and n > 1 and i < 2:
            ax = 1 - i
        view = tuple(slice(None) if j == ax else None for j in range(n))
        out.append(_scans.broadcast_to(a[view], tuple(shape)))
    return out


def tril(x: Array, /, *, k: int = 0) -> Array:
    """The lower triangle (elements with ``col - row <= k``)."""
    return _tl.triangle(x, k, upper=False)


def triu(x: Array, /, *, k: int = 0) -> Array:
    """The upper triangle (elements with ``col - row >= k``)."""
    return _tl.triangle(x, k, upper=True)


# -- indexing, linear algebra, manipulation --------------------------------------------------------


def take(x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
    """The elements at ``indices`` along ``axis``."""
    if axis is None and x.ndim != 1:
        raise ValueError("take: axis is required for arrays of more than one dimension")
    return _indexing.take(x, indices, axis=0 if axis is None else axis)


def matmul(x1: Array, x2: Array, /) -> Array:
    """The matrix product."""
    return _matmul(x1, x2)


def matrix_transpose(x: Array, /) -> Array:
    """The transpose of the last two axes."""
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got shape {x.shape}")
    return x.mT


def tensordot(x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
    """The tensor contraction over ``axes``."""
    return _tensordot(x1, x2, axes)


def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """The dot product of vectors along ``axis`` (the first argument conjugated)."""
    n = builtins.max(x1.ndim, x2.ndim)
    if not -n <= axis < n or builtins.min(x1.ndim, x2.ndim) == 0:
        raise ValueError(f"vecdot: axis {axis} is out of range for shapes {x1.shape} and "
                         f"{x2.shape}")
    ax = axis if axis < 0 else axis - n
    if -ax > builtins.min(x1.ndim, x2.ndim) or x1.shape[ax] != x2.shape[ax]:
        raise ValueError(f"vecdot: shapes {x1.shape} and {x2.shape} differ along axis {axis}")
    prod = _elemwise(np.multiply, _elemwise(np.conjugate, x1, name="conj"), x2,
                     name="vecdot")
    return _red.sum(prod, axis=ax, dtype=prod.dtype)


def broadcast_arrays(*arrays: Array) -> list[Array]:
    """The arrays broadcast against each other."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [_scans.broadcast_to(a, shape) for a in arrays]


def broadcast_to(x: Array, /, shape: Any) -> Array:
    """``x`` broadcast to ``shape``."""
    return _scans.broadcast_to(x, shape)


def concat(arrays: Any, /, *, axis: int | None = 0) -> Array:
    """Join arrays along an existing axis (``axis=None``: flattened)."""
    return _manip.concatenate(list(arrays), axis=axis)


def expand_dims(x: Array, /, axis: int = 0) -> Array:
    """Insert an axis of length one at ``axis``."""
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"expand_dims: axis {axis} is out of range for shape {x.shape}")
    return _npf.expand_dims(x, axis)


def flip(x: Array, /, *, axis: Any = None) -> Array:
    """Reverse the order of elements along ``axis`` (all axes by default)."""
    return _npf.flip(x, axis)


def moveaxis(x: Array, source: Any, destination: Any, /) -> Array:
    """Move axes to new positions."""
    return _npf.moveaxis(x, source, destination)


def permute_dims(x: Array, /, axes: Any) -> Array:
    """Permute the axes."""
    return _manip.transpose(x, axes)


def transpose(x: Array, /, axes: Any = None) -> Array:
    """The axes permuted (reversed when ``axes`` is None), as ``numpy.transpose``: not in
    the standard, but libraries written for NumPy and the standard (xarray's
    ``apply_ufunc`` with core dimensions) call it on the namespace."""
    return _manip.transpose(x, axes)


def reshape(x: Array, /, shape: Any, *, copy: Any = None) -> Array:
    """``x`` in a new shape (row-major)."""
    if copy is False and x.npartitions > 1 and tuple(shape) != x.shape:
        raise ValueError("reshape: copy=False, but a reshape of blocked data may copy")
    return _manip.reshape(x, shape)


def squeeze(x: Array, /, axis: Any) -> Array:
    """Remove axes of length one."""
    return _npf.squeeze(x, axis)


def stack(arrays: Any, /, *, axis: int = 0) -> Array:
    """Join arrays of one shape along a new axis."""
    return _manip.stack(list(arrays), axis=axis)


def unstack(x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``."""
    if x.ndim == 0:
        raise ValueError("unstack: a 0-d array has no axis to unstack")
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"unstack: axis {axis} is out of range for shape {x.shape}")
    axis %= x.ndim
    return tuple(x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis]))


def roll(x: Array, /, shift: Any, *, axis: Any = None) -> Array:
    """Elements shifted along ``axis`` (the flattened array by default), wrapping around."""
    if axis is not None and not isinstance(shift, int) and (
            isinstance(axis, int) or len(tuple(shift)) != len(tuple(axis))):
        raise ValueError("roll: shift and axis must have the same length")
    return _padding.roll(x, shift, axis=axis)


def pad(x: Array, /, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Array:
    """``numpy.pad`` (every mode) as blocked edge pieces; see :func:`tilegraph.pad`."""
    return _padding.pad(x, pad_width, mode, **kwargs)


def einsum(subscripts: str, /, *operands: Any, **kwargs: Any) -> Array:
    """``numpy.einsum`` as blocked contractions; see :func:`tilegraph.einsum`."""
    return _einsum(subscripts, *operands, **kwargs)


# NumPy functions beyond the standard that xarray calls on a duck array's namespace (its
# duck-array test suite: quantile and median without skipna, cumsum, differentiate, isin)


def quantile(a: Array, q: Any, axis: Any = None, **kwargs: Any) -> Array:
    """``numpy.quantile``; see :func:`tilegraph.quantile`."""
    import tilegraph.array.statistics as _stats

    return _stats.quantile(a, q, axis=axis, **kwargs)


def nanquantile(a: Array, q: Any, axis: Any = None, **kwargs: Any) -> Array:
    """``numpy.nanquantile``; see :func:`tilegraph.nanquantile`."""
    import tilegraph.array.statistics as _stats

    return _stats.nanquantile(a, q, axis=axis, **kwargs)


def median(a: Array, axis: Any = None, **kwargs: Any) -> Array:
    """``numpy.median``; see :func:`tilegraph.median`."""
    import tilegraph.array.statistics as _stats

    return _stats.median(a, axis=axis, **kwargs)


def nanmedian(a: Array, axis: Any = None, **kwargs: Any) -> Array:
    """``numpy.nanmedian``; see :func:`tilegraph.nanmedian`."""
    import tilegraph.array.statistics as _stats

    return _stats.nanmedian(a, axis=axis, **kwargs)


def cumsum(x: Array, axis: int | None = None, dtype: Any = None) -> Array:
    """``numpy.cumsum`` (the flattened array by default)."""
    return _scans.cumsum(x, axis=axis, dtype=dtype)


def cumprod(x: Array, axis: int | None = None, dtype: Any = None) -> Array:
    """``numpy.cumprod`` (the flattened array by default)."""
    return _scans.cumprod(x, axis=axis, dtype=dtype)


def gradient(f: Array, *varargs: Any, **kwargs: Any) -> Any:
    """``numpy.gradient``; see :func:`tilegraph.gradient`."""
    return _windows.gradient(f, *varargs, **kwargs)


def isin(element: Any, test_elements: Any, assume_unique: bool = False,
         invert: bool = False) -> Array:
    """``numpy.isin``; see :func:`tilegraph.isin`."""
    return _isin(element, test_elements, assume_unique=assume_unique, invert=invert)


# ``xp.lib.stride_tricks.sliding_window_view``, as xarray's rolling windows call it
lib = SimpleNamespace(stride_tricks=SimpleNamespace(
    sliding_window_view=_windows.sliding_window_view))


def repeat(x: Array, repeats: Any, /, *, axis: int | None = None) -> Array:
    """Each element repeated ``repeats`` times along ``axis`` (flattened by default)."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = operator.index(axis) % x.ndim
    n = x.shape[axis]
    reps = np.asarray(repeats.compute() if isinstance(repeats, Array) else repeats)
    index = np.repeat(np.arange(n), np.broadcast_to(reps, (n,)))
    return _indexing.take(x, index, axis=axis)


def tile(x: Array, repetitions: Any, /) -> Array:
    """``x`` repeated ``repetitions`` times along each axis."""
    reps = tuple(repetitions)
    if len(reps) > x.ndim:
        x = x.reshape((1,) * (len(reps) - x.ndim) + x.shape)
    reps = (1,) * (x.ndim - len(reps)) + reps
    out = x
    for a, r in enumerate(reps):
        if r != 1:
            out = _manip.concatenate([out] * r, axis=a) if r else out[
                (slice(None),) * a + (slice(0, 0),)]
    return out


# -- searching, sets, sorting --------------------------------------------------------------------


def argmax(x: Array, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Array:
    """Index of the first maximum."""
    return _red.argmax(x, axis=axis, keepdims=keepdims).astype(int64, copy=False)


def argmin(x: Array, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Array:
    """Index of the first minimum."""
    return _red.argmin(x, axis=axis, keepdims=keepdims).astype(int64, copy=False)


def nonzero(x: Array, /) -> tuple[Array, ...]:
    """Indices of the non-zero elements, one array per axis (sizes computed first)."""
    return _indexing.nonzero(x)


def searchsorted(x1: Array, x2: Array, /, *, side: str = "left", sorter: Any = None) -> Array:
    """Where each value of ``x2`` would go in the sorted 1-d ``x1``."""
    if sorter is not None:
        x1 = _indexing.take(x1, sorter, axis=0)
    return _sorting.searchsorted(x1, x2, side=side).astype(int64, copy=False)


def where(condition: Array, x1: Any, x2: Any, /) -> Array:
    """``x1`` where ``condition`` is true, else ``x2``."""
    return _elemwise(np.where, condition, x1, x2, name="where")


def unique_all(x: Array, /) -> Any:
    """Values, first indices, inverse indices and counts of the unique values."""
    return _sorting.unique_all(x)


def unique_counts(x: Array, /) -> Any:
    """Values and counts of the unique values."""
    return _sorting.unique_counts(x)


def unique_inverse(x: Array, /) -> Any:
    """Values and inverse indices of the unique values."""
    return _sorting.unique_inverse(x)


def unique_values(x: Array, /) -> Array:
    """The unique values, sorted."""
    return _sorting.unique_values(x)


def argsort(x: Array, /, *, axis: int = -1, descending: builtins.bool = False,
            stable: builtins.bool = True) -> Array:
    """Indices that sort ``x`` along ``axis`` (stable)."""
    return _sorting.argsort(x, axis, descending=descending).astype(int64, copy=False)


def sort(x: Array, /, *, axis: int = -1, descending: builtins.bool = False,
         stable: builtins.bool = True) -> Array:
    """``x`` sorted along ``axis``."""
    return _sorting.sort(x, axis, descending=descending)


# -- statistics and utility ------------------------------------------------------------------------


def _sum_dtype(x: Array, dtype: Any) -> Any:
    if dtype is not None:
        return _dtype(dtype)
    if x.dtype.kind == "i":
        return int64
    if x.dtype.kind == "u":
        return uint64
    if x.dtype.kind == "b":
        return int64
    return x.dtype


def cumulative_sum(x: Array, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: builtins.bool = False) -> Array:
    """Cumulative sum along ``axis`` (a blocked scan)."""
    if axis is None:
        if x.ndim > 1:
            raise ValueError("cumulative_sum: axis is required for arrays of more than one "
                             "dimension")
        axis = 0
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"cumulative_sum: axis {axis} is out of range for shape {x.shape}")
    axis %= x.ndim
    dt = _sum_dtype(x, dtype)
    out = _scans.cumsum(x, axis=axis, dtype=dt) if x.shape[axis] else x.astype(dt)
    if include_initial:
        shape = tuple(1 if a == axis else s for a, s in enumerate(x.shape))
        out = _manip.concatenate([_full(shape, 0, dtype=dt), out], axis=axis)
    return out


def max(x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
    """Maximum along ``axis``."""
    return _red.max(x, axis=axis, keepdims=keepdims)


def min(x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
    """Minimum along ``axis``."""
    return _red.min(x, axis=axis, keepdims=keepdims)


def mean(x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
    """Arithmetic mean along ``axis``."""
    return _red.mean(x, axis=axis, keepdims=keepdims)


def prod(x: Array, /, *, axis: Any = None, dtype: Any = None,
         keepdims: builtins.bool = False) -> Array:
    """Product along ``axis`` (integers in the default integer dtype)."""
    return _red.prod(x, axis=axis, dtype=_sum_dtype(x, dtype), keepdims=keepdims)


def sum(x: Array, /, *, axis: Any = None, dtype: Any = None,
        keepdims: builtins.bool = False) -> Array:
    """Sum along ``axis`` (integers in the default integer dtype)."""
    return _red.sum(x, axis=axis, dtype=_sum_dtype(x, dtype), keepdims=keepdims)


def std(x: Array, /, *, axis: Any = None, correction: float = 0.0,
        keepdims: builtins.bool = False, ddof: float | None = None) -> Array:
    """Standard deviation with ``correction`` degrees of freedom removed (``ddof``, NumPy's
    name for it, is accepted too: xarray passes it to any namespace)."""
    return _red.std(x, axis=axis, ddof=correction if ddof is None else ddof,
                    keepdims=keepdims)


def var(x: Array, /, *, axis: Any = None, correction: float = 0.0,
        keepdims: builtins.bool = False, ddof: float | None = None) -> Array:
    """Variance with ``correction`` degrees of freedom removed (or ``ddof``, as for
    :func:`std`)."""
    return _red.var(x, axis=axis, ddof=correction if ddof is None else ddof,
                    keepdims=keepdims)


def all(x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
    """Whether every element along ``axis`` is true."""
    return _red.all(x, axis=axis, keepdims=keepdims)


def any(x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
    """Whether any element along ``axis`` is true."""
    return _red.any(x, axis=axis, keepdims=keepdims)


import tilegraph.array.array_api_ext as _ext  # noqa: E402  (it uses this module)

linalg = _ext.linalg_namespace(_sys.modules[__name__])
fft = _ext.fft_namespace(_sys.modules[__name__])

