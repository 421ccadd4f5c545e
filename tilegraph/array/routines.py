"""The rest of ``dask.array``'s routines over blocked arrays, gathered in one place: set and
product helpers (``union1d``, ``vdot``, ``ediff1d``, ``apply_over_axes``), ``unify_chunks``,
``assert_eq``, ``ravel``, and the NumPy functions all of them answer through
``__array_function__`` (:data:`NUMPY_FUNCTIONS`). The others live by job and are importable
from here too: building arrays (``array``, ``empty``, ``*_like``, ``indices``,
``fromfunction``, ``tri``, ``meshgrid``, ``diag``, ``block``) in
:mod:`~tilegraph.array.construction`; shapes and order (``append``, ``insert``,
``delete``, ``rot90``, ``rollaxis``, ``tile``, ``repeat``, ``shuffle``,
``broadcast_arrays``) in :mod:`~tilegraph.array.reordering`; selecting (``choose``,
``select``, ``piecewise``, ``digitize``) in :mod:`~tilegraph.array.selection`; dask's
reductions (``coarsen``, ``moment``, ``reduction``, ``push``, ``histogram2d``/
``histogramdd``) in :mod:`~tilegraph.array.general_reductions`.

Each builds a lazy plan from shapes and block sizes only, with NumPy's (and dask's)
semantics.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.ediff1d(x, to_begin=-1.0).compute()
array([-1.,  1.,  1.,  1.,  1.,  1.])
>>> tg.union1d(x, [9.0, 1.0]).compute()
array([0., 1., 2., 3., 4., 5., 9.])
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

import tilegraph.array.manipulation as manipulation
import tilegraph.array.numpy_functions as npf
from tilegraph.array.chunks import common_refinement
from tilegraph.array.construction import (
    array,
    asanyarray,
    block,
    diag,
    empty,
    empty_like,
    fromfunction,
    full_like,
    indices,
    meshgrid,
    ones_like,
    tri,
    tril,
    tril_indices,
    tril_indices_from,
    triu,
    triu_indices,
    triu_indices_from,
    zeros_like,
)
from tilegraph.array.core import Array, asarray
from tilegraph.array.general_reductions import (
    coarsen,
    histogram2d,
    histogramdd,
    moment,
    push,
    reduction,
)
from tilegraph.array.reordering import (
    append,
    axis_of,
    broadcast_arrays,
    delete,
    insert,
    ndim,
    repeat,
    result_type,
    rollaxis,
    rot90,
    shape,
    shuffle,
    tile,
)
from tilegraph.array.selection import choose, digitize, piecewise, select

__all__ = [
    "NUMPY_FUNCTIONS", "append", "apply_over_axes", "array", "asanyarray", "assert_eq",
    "block", "broadcast_arrays", "choose", "coarsen", "delete", "diag", "digitize",
    "ediff1d", "empty", "empty_like", "fromfunction", "full_like", "histogram2d",
    "histogramdd", "indices", "insert", "meshgrid", "moment", "ndim", "ones_like",
    "piecewise", "push", "ravel", "reduction", "repeat", "result_type", "rollaxis", "rot90",
    "select", "shape", "shuffle", "tile", "tri", "tril", "tril_indices",
    "tril_indices_from", "triu", "triu_indices", "triu_indices_from", "unify_chunks",
    "union1d", "vdot", "zeros_like",
]

# -- sets, products, differences ----------------------------------------------------------------


def union1d(ar1: Any, ar2: Any) -> Array:
    """``numpy.union1d``: the sorted unique values of both arrays (two-phase: the size of
    the result is computed first, as for :func:`tilegraph.unique`)."""
    from tilegraph.array.sorting import unique

    a = (ar1 if isinstance(ar1, Array) else asarray(ar1)).reshape(-1)
    b = (ar2 if isinstance(ar2, Array) else asarray(ar2)).reshape(-1)
    return unique(manipulation.concatenate([a, b]))


def vdot(a: Any, b: Any) -> Array:
    """``numpy.vdot``: the dot product of the flattened arrays, ``a`` conjugated."""
    from tilegraph.array.contraction import dot

    a = (a if isinstance(a, Array) else asarray(a)).reshape(-1)
    b = (b if isinstance(b, Array) else asarray(b)).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"vdot: vectors have different lengths {a.size} and {b.size}")
    if a.dtype.kind == "c":
        a = np.conjugate(a)
    return dot(a, b)


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Array:
    """``numpy.ediff1d``: the differences of consecutive elements of the flattened array,
    with ``to_begin`` and ``to_end`` (flattened) put before and after."""
    a = (ary if isinstance(ary, Array) else asarray(ary)).reshape(-1)
    parts = [a[1:] - a[:-1]]
    if to_begin is not None:
        parts.insert(0, _flat_extra("ediff1d", to_begin, a.dtype))
    if to_end is not None:
        parts.append(_flat_extra("ediff1d", to_end, a.dtype))
    return parts[0] if len(parts) == 1 else manipulation.concatenate(parts)


def _flat_extra(op: str, extra: Any, dtype: np.dtype) -> Array:
    e = extra if isinstance(extra, Array) else asarray(np.asarray(extra))
    if not np.can_cast(e.dtype, dtype, "same_kind"):
        raise TypeError(f"{op}: dtype of to_begin/to_end ({e.dtype}) must be compatible "
                        f"with the array's ({dtype})")
    return e.reshape(-1).astype(dtype)


def apply_over_axes(func: Callable, a: Any, axes: Any) -> Array:
    """``numpy.apply_over_axes``: ``func(a, axis)`` applied for each axis in turn, each
    result kept with the reduced axis (of length one)."""
    a = a if isinstance(a, Array) else asarray(a)
    axes = (axes,) if np.ndim(axes) == 0 else tuple(axes)
    for ax in axes:
        ax = axis_of("apply_over_axes", a, ax)
        res = func(a, ax)
        res = res if isinstance(res, Array) else asarray(res)
        if res.ndim != a.ndim:
            res = npf.expand_dims(res, ax)
            if res.ndim != a.ndim:
                raise ValueError("apply_over_axes: function is not returning an array of "
                                 "the correct shape")
        a = res
    return a


# -- chunks ------------------------------------------------------------------------------------


def unify_chunks(*args: Any, warn: bool = True) -> tuple[dict, list]:
    """dask's ``unify_chunks``: ``args`` alternate arrays and their index strings
    (``x, "ij", y, "jk"``; a non-array with index ``None``); every index letter gets the
    common refinement of the blocks of the axes that carry it, and the arrays are
    rechunked to it. Returns ``({letter: blocks}, arrays)``."""
    if len(args) % 2:
        raise ValueError("unify_chunks: give pairs of an array and its index (a string "
                         "or tuple of letters), or a value and None")
    pairs = [(args[i], args[i + 1]) for i in builtins.range(0, len(args), 2)]
    pairs = [(a if ind is None or isinstance(a, Array) else asarray(a), ind)
             for a, ind in pairs]
    sizes: dict[Any, list] = {}
    for a, ind in pairs:
        if ind is None:
            continue
        ind = tuple(ind)
        if len(ind) != a.ndim:
            raise ValueError(f"unify_chunks: index {ind} has {len(ind)} letters for an "
                             f"array of {a.ndim} dimensions")
        for letter, c, n in zip(ind, a.chunks, a.shape, strict=True):
            if n != 1 or len(c) > 1:
                sizes.setdefault(letter, []).append(c)
    chunkss = {}
    for letter, cs in sizes.items():
        lengths = {sum(c) for c in cs}
        if len(lengths) != 1:
            raise ValueError(f"unify_chunks: index {letter!r} has different lengths "
                             f"{sorted(lengths)}")
        chunkss[letter] = common_refinement(*cs)
    arrays = []
    for a, ind in pairs:
        if ind is None:
            arrays.append(a)
            continue
        want = tuple(chunkss.get(letter, c) if n == sum(chunkss.get(letter, c)) else c
                     for letter, c, n in zip(tuple(ind), a.chunks, a.shape, strict=True))
        arrays.append(a.rechunk(want) if want != a.chunks else a)
    return chunkss, arrays


# -- testing -----------------------------------------------------------------------------------


def assert_eq(a: Any, b: Any, check_shape: bool = True, check_graph: bool = True,
              check_meta: bool = True, check_chunks: bool = True, check_ndim: bool = True,
              check_type: bool = True, check_dtype: bool = True, equal_nan: bool = True,
              scheduler: Any = "sync", **kwargs: Any) -> bool:
    """dask's ``assert_eq`` for tests: ``a`` and ``b`` (tilegraph arrays, NumPy arrays or
    scalars; lazy ones are computed) have the same shape, dtype and values (within
    ``rtol``/``atol`` of ``kwargs`` for inexact values, NaN equal to NaN). Each tilegraph
    array's blocks are checked to add up to its shape. Returns True or raises
    AssertionError."""
    rtol = kwargs.pop("rtol", 1e-7)
    atol = kwargs.pop("atol", 0.0)
    values = []
    for v in (a, b):
        if isinstance(v, Array):
            if check_chunks:
                assert tuple(sum(c) for c in v.chunks) == v.shape, (v.chunks, v.shape)
            got = v.compute(backend="sync" if scheduler in ("sync", "synchronous",
                                                            "single-threaded")
                            else "threads")
            if check_dtype:
                assert np.asarray(got).dtype == v.dtype, (np.asarray(got).dtype, v.dtype)
            v = got
        values.append(np.asarray(v))
    x, y = values
    if check_shape or check_ndim:
        assert x.shape == y.shape, f"shapes differ: {x.shape} != {y.shape}"
    if check_dtype:
        assert x.dtype == y.dtype, f"dtypes differ: {x.dtype} != {y.dtype}"
    if x.dtype.kind in "fc" or y.dtype.kind in "fc":
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)
    else:
        np.testing.assert_array_equal(x, y)
    return True


def ravel(a: Any) -> Array:
    """``a`` as one axis, in row-major order (``numpy.ravel``)."""
    return (a if isinstance(a, Array) else asarray(a)).reshape(-1)


def _isin(element: Any, test_elements: Any, assume_unique: bool = False,
          invert: bool = False, *, kind: Any = None) -> Array:
    from tilegraph.array.elementwise import isin

    return isin(element, test_elements, assume_unique=assume_unique, invert=invert)


# the NumPy functions these answer through ``__array_function__`` (joined to
# tilegraph.array.numpy_functions.IMPLEMENTATIONS when the package binds its table)
NUMPY_FUNCTIONS: dict[Callable, Callable] = {
    np.append: append, np.apply_over_axes: apply_over_axes, np.block: block,
    np.broadcast_arrays: broadcast_arrays, np.choose: choose, np.delete: delete,
    np.diag: diag, np.digitize: digitize, np.ediff1d: ediff1d,
    np.histogram2d: histogram2d, np.histogramdd: histogramdd, np.insert: insert,
    np.meshgrid: meshgrid, np.ndim: ndim, np.shape: shape, np.piecewise: piecewise,
    np.repeat: repeat, np.result_type: result_type, np.rollaxis: rollaxis, np.rot90: rot90,
    np.select: select, np.tile: tile, np.tril: tril, np.triu: triu,
    np.tril_indices_from: tril_indices_from, np.triu_indices_from: triu_indices_from,
    np.union1d: union1d, np.vdot: vdot, np.ravel: ravel, np.isin: _isin,
}
