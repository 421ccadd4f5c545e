"""Shapes and order of blocked arrays, as NumPy's and dask's routines: ``shape``,
``ndim``, ``result_type``, ``append``, ``insert``, ``delete``, ``rollaxis``, ``rot90``,
``tile``, ``repeat``, dask's ``shuffle`` and ``broadcast_arrays``; and the two checks the
routines share (:func:`not_lazy`, :func:`axis_of`).

Where the layout of the result depends on an index (``insert``, ``delete``, ``shuffle``),
the index is a NumPy array or list, never a lazy one (a tilegraph array there is refused
rather than computed behind the caller's back).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.insert(x, 2, -1.0, axis=0).compute()
array([ 0.,  1., -1.,  2.,  3.,  4.,  5.])
>>> tg.delete(x, [0, 5]).compute()
array([1., 2., 3., 4.])
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import tilegraph.array.manipulation as manipulation
import tilegraph.array.numpy_functions as npf
from tilegraph.array.core import Array, asarray
from tilegraph.array.indexing import take
from tilegraph.array.scans import broadcast_to


def not_lazy(op: str, what: str, value: Any) -> None:
    """Refuse a lazy tilegraph array as ``value`` (the argument ``what`` of ``op``), where
    the plan's layout depends on it and it must be known when the plan is made."""
    if isinstance(value, Array):
        raise TypeError(f"{op}: {what} must be known when the plan is made (a NumPy array, "
                        "a list or a number), not a lazy tilegraph array; compute it first "
                        "if it must come from one")


# -- shapes and order ---------------------------------------------------------------------------


def shape(a: Any) -> tuple[int, ...]:
    """The shape of ``a`` (known without computing)."""
    return a.shape if isinstance(a, Array) else np.shape(a)


def ndim(a: Any) -> int:
    """The number of dimensions of ``a``."""
    return a.ndim if isinstance(a, Array) else np.ndim(a)


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """``numpy.result_type`` of arrays (by their dtypes; tilegraph arrays too), dtypes
    and scalars."""
    args = [a.dtype if isinstance(a, Array) else a for a in arrays_and_dtypes]
    return np.result_type(*args)


def axis_of(op: str, a: Array, axis: Any) -> int:
    """``axis`` of ``a`` as a non-negative int; an ``AxisError`` naming ``op`` when it is
    out of bounds."""
    axis = operator.index(axis)
    if not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(f"{op}: axis {axis} is out of bounds for an array of "
                                      f"{a.ndim} dimensions")
    return axis % a.ndim


def append(arr: Any, values: Any, axis: int | None = None) -> Array:
    """``numpy.append``: ``values`` joined to the end of ``arr`` along ``axis`` (both
    flattened when ``axis`` is None)."""
    arr = arr if isinstance(arr, Array) else asarray(arr)
    values = values if isinstance(values, Array) else asarray(values)
    if axis is None:
        return manipulation.concatenate([arr.reshape(-1), values.reshape(-1)], axis=0)
    return manipulation.concatenate([arr, values], axis=axis)


def _positions(op: str, obj: Any, n: int) -> np.ndarray:
    not_lazy(op, "obj", obj)
    if isinstance(obj, slice):
        return np.arange(*obj.indices(n))
    return np.asarray(obj)


def delete(arr: Any, obj: Any, axis: int | None = None) -> Array:
    """``numpy.delete``: ``arr`` without the entries ``obj`` (an int, a slice, a list or
    array of ints, or a boolean mask) along ``axis`` (of the flattened array when None);
    the kept entries are gathered block by block."""
    arr = arr if isinstance(arr, Array) else asarray(arr)
    if axis is None:
        arr, axis = arr.reshape(-1), 0
    axis = axis_of("delete", arr, axis)
    n = arr.shape[axis]
    not_lazy("delete", "obj", obj)
    keep = np.delete(np.arange(n), obj if isinstance(obj, slice) else np.asarray(obj))
    if keep.size == n:
        return arr
    return take(arr, keep, axis=axis)


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Array:
    """``numpy.insert``: ``values`` inserted before the entries ``obj`` (an int, a slice or
    a sequence of ints) along ``axis`` (of the flattened array when None), with NumPy's
    broadcasting of ``values`` and cast to ``arr``'s dtype."""
    arr = arr if isinstance(arr, Array) else asarray(arr)
    if axis is None:
        arr, axis = arr.reshape(-1), 0
    axis = axis_of("insert", arr, axis)
    n = arr.shape[axis]
    where_ = _positions("insert", obj, n)
    if where_.dtype.kind == "b":
        raise IndexError("insert: obj must be integers (a boolean array is not an index "
                         "here, as in NumPy)")
    if where_.ndim > 1:
        raise ValueError("insert: obj must be a scalar or a 1-d sequence of indices")
    values = values if isinstance(values, Array) else asarray(np.asarray(values))
    values = values.astype(arr.dtype) if values.dtype != arr.dtype else values
    if where_.ndim == 0:
        index = int(where_)
        if not -n <= index <= n:
            raise IndexError(f"insert: index {index} is out of bounds for axis {axis} with "
                             f"size {n}")
        index = index + n if index < 0 else index
        vals = values.reshape((1,) * (arr.ndim - values.ndim) + values.shape) \
            if values.ndim < arr.ndim else values
        vals = npf.moveaxis(vals, 0, axis) if vals.ndim else vals
        numnew = vals.shape[axis] if vals.ndim else 1
        target = (*arr.shape[:axis], numnew, *arr.shape[axis + 1:])
        vals = broadcast_to(vals, target)
        before = arr[(slice(None),) * axis + (slice(0, index),)]
        after = arr[(slice(None),) * axis + (slice(index, None),)]
        return manipulation.concatenate([before, vals, after], axis=axis)
    where_ = where_.astype(np.intp, copy=False)
    if ((where_ < -n) | (where_ > n)).any():
        raise IndexError(f"insert: an index of {obj!r} is out of bounds for axis {axis} "
                         f"with size {n}")
    where_ = np.where(where_ < 0, where_ + n, where_)
    numnew = where_.size
    target = (*arr.shape[:axis], numnew, *arr.shape[axis + 1:])
    vals = broadcast_to(values, target)
    order = np.argsort(where_, kind="stable")
    placed = where_.copy()
    placed[order] += np.arange(numnew)
    source = np.empty(n + numnew, dtype=np.intp)
    is_new = np.zeros(n + numnew, dtype=bool)
    is_new[placed] = True
    source[placed] = n + np.arange(numnew)
    source[~is_new] = np.arange(n)
    both = manipulation.concatenate([arr, vals], axis=axis)
    return take(both, source, axis=axis)


def rollaxis(a: Any, axis: int, start: int = 0) -> Array:
    """``numpy.rollaxis``: axis ``axis`` moved to before position ``start``."""
    a = a if isinstance(a, Array) else asarray(a)
    n = a.ndim
    axis = axis_of("rollaxis", a, axis)
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(f"rollaxis: start {start} is out of bounds for an "
                                      f"array of {n} dimensions")
    if axis < start:
        start -= 1
    if axis == start:
        return a
    return npf.moveaxis(a, axis, start)


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """``numpy.rot90``: ``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``."""
    m = m if isinstance(m, Array) else asarray(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2")
    if m.ndim < 2:
        raise ValueError(f"rot90: needs an array of at least two dimensions, got shape "
                         f"{m.shape}")
    a0, a1 = (axis_of("rot90", m, a) for a in axes)
    if a0 == a1:
        raise ValueError("rot90: axes must be different")
    k = operator.index(k) % 4
    if k == 0:
        return m
    if k == 2:
        return npf.flip(npf.flip(m, a0), a1)
    order = list(range(m.ndim))
    order[a0], order[a1] = order[a1], order[a0]
    if k == 1:
        return manipulation.transpose(npf.flip(m, a1), order)
    return npf.flip(manipulation.transpose(m, order), a1)


def tile(A: Any, reps: Any) -> Array:
    """``numpy.tile``: ``A`` repeated ``reps`` times along each axis."""
    from tilegraph.array.array_api import tile as _tile

    A = A if isinstance(A, Array) else asarray(A)
    not_lazy("tile", "reps", reps)
    reps = (operator.index(reps),) if np.ndim(reps) == 0 else tuple(
        operator.index(r) for r in reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: negative repetitions {reps}")
    return _tile(A, reps)


def repeat(a: Any, repeats: Any, axis: int | None = None) -> Array:
    """``numpy.repeat``: each element repeated ``repeats`` times (an int, or one count per
    element) along ``axis`` (of the flattened array when None)."""
    from tilegraph.array.array_api import repeat as _repeat

    a = a if isinstance(a, Array) else asarray(a)
    not_lazy("repeat", "repeats", repeats)
    if np.any(np.asarray(repeats) < 0):
        raise ValueError("repeat: negative repeats are not allowed")
    return _repeat(a, repeats, axis=axis)


def shuffle(x: Any, indexer: Sequence[Sequence[int]], axis: int, chunks: Any = "auto"
            ) -> Array:
    """dask's ``shuffle``: ``x`` reordered along ``axis`` so that each group of indices
    in ``indexer`` (a list of lists of positions) is contiguous, groups in order."""
    x = x if isinstance(x, Array) else asarray(x)
    axis = axis_of("shuffle", x, axis)
    not_lazy("shuffle", "indexer", indexer)
    groups = [np.asarray(g, dtype=np.intp).reshape(-1) for g in indexer]
    flat = np.concatenate(groups) if groups else np.empty(0, dtype=np.intp)
    return take(x, flat, axis=axis)


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Array, ...]:
    """``numpy.broadcast_arrays``: the arrays broadcast to their common shape."""
    arrays = [a if isinstance(a, Array) else asarray(a) for a in args]
    shape_ = np.broadcast_shapes(*(a.shape for a in arrays))
    return tuple(a if a.shape == shape_ else broadcast_to(a, shape_) for a in arrays)


