"""NumPy functions that dispatch to tilegraph through ``__array_function__``: calling
``np.sum(x)``, ``np.sort(x)``, ``np.cumsum(x)``, ``np.linalg.solve(a, b)`` ... on tilegraph
arrays builds a lazy tilegraph array with a blocked algorithm (no gather to one block).

A NumPy function with no tilegraph implementation fails with a TypeError that names the
tilegraph alternative where there is one, and otherwise says to call ``.compute()`` first
(see :data:`ALTERNATIVES` and the list of what is not supported in docs/guide.md); one
whose tilegraph arguments are all 0-d (lazy scalars passed as numbers) runs on their
values (:func:`call_with_scalars`). The entries of ``numpy.linalg``, ``numpy.fft`` and
the routines of :mod:`tilegraph.array.routines` join :data:`IMPLEMENTATIONS` when the
package binds its table (their modules import this one).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([3.0, 1.0, 2.0]), chunks=2)
>>> np.cumsum(np.sort(x)).compute()
array([1., 3., 6.])
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

import tilegraph.array.contraction as contraction
import tilegraph.array.elementwise as elementwise
import tilegraph.array.indexing as indexing
import tilegraph.array.manipulation as manipulation
import tilegraph.array.padding as padding
import tilegraph.array.reductions as reductions
import tilegraph.array.scans as scans
import tilegraph.array.sorting as sorting
import tilegraph.array.statistics as statistics
import tilegraph.array.ufuncs as ufuncs
import tilegraph.array.windows as windows
from tilegraph.array.core import Array, asarray


def _method(name: str) -> Callable:
    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(asarray(x), name)(*args, **kwargs)

    return call


def _elementwise(func: Callable, name: str) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Array:
        return elementwise.elemwise(func, *args, kwargs=kwargs or None, name=name)

    return call


def round_(a: Any, decimals: int = 0, out: Any = None) -> Array:
    """``numpy.round`` block by block."""
    if out is not None:
        raise TypeError("round: out= is not supported on tilegraph arrays")
    return elementwise.elemwise(np.round, a, operator.index(decimals), name="round")


def clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, *,
         min: Any = None, max: Any = None, **kwargs: Any) -> Array:
    """``numpy.clip`` block by block (bounds may be arrays that broadcast)."""
    if out is not None:
        raise TypeError("clip: out= is not supported on tilegraph arrays")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    a = asarray(a)
    if lo is None and hi is None:
        return a
    if lo is None:
        return elementwise.elemwise(np.minimum, a, hi, name="clip")
    if hi is None:
        return elementwise.elemwise(np.maximum, a, lo, name="clip")
    return elementwise.elemwise(np.clip, a, lo, hi, name="clip")


def squeeze(a: Any, axis: Any = None) -> Array:
    """Remove axes of length one (all of them, or those in ``axis``)."""
    a = asarray(a)
    if axis is None:
        axes = tuple(i for i, s in enumerate(a.shape) if s == 1)
    else:
        axes = reductions.normalize_axes("squeeze", axis, a.ndim, a.shape)
        for ax in axes:
            if a.shape[ax] != 1:
                raise ValueError(f"squeeze: cannot select axis {ax} of length "
                                 f"{a.shape[ax]} (shape {a.shape}): only axes of length one")
    return a[tuple(0 if i in axes else slice(None) for i in range(a.ndim))]


def expand_dims(a: Any, axis: Any) -> Array:
    """Insert axes of length one at ``axis`` (an int or a tuple)."""
    a = asarray(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = a.ndim + len(axes)
    axes = reductions.normalize_axes("expand_dims", axes, nd, a.shape)
    it = iter(range(a.ndim))
    index = tuple(None if i in axes else (next(it), slice(None))[1] for i in range(nd))
    return a[index]


def moveaxis(a: Any, source: Any, destination: Any) -> Array:
    """Move axes to new positions (a block transpose)."""
    a = asarray(a)
    src = reductions.normalize_axes("moveaxis", source, a.ndim, a.shape) if not isinstance(
        source, (int, np.integer)) else (operator.index(source) % a.ndim,)
    dst = (operator.index(destination) % a.ndim,) if isinstance(destination, (
        int, np.integer)) else tuple(operator.index(d) % a.ndim for d in destination)
    if not isinstance(source, (int, np.integer)):
        src = tuple(operator.index(s) % a.ndim for s in source)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of "
                         "elements")
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return manipulation.transpose(a, order)


def flip(a: Any, axis: Any = None) -> Array:
    """Reverse the order of elements along ``axis`` (all axes by default)."""
    a = asarray(a)
    axes = reductions.normalize_axes("flip", axis, a.ndim, a.shape)
    return a[tuple(slice(None, None, -1) if i in axes else slice(None)
                   for i in range(a.ndim))]


def _apply_along(func1d: Callable, axis: int, dtype: np.dtype, width: int, kwargs: dict,
                  block: np.ndarray, *args: Any) -> np.ndarray:
    out = np.apply_along_axis(func1d, axis, block, *args, **kwargs)
    return np.asarray(out, dtype=dtype).reshape(
        (*block.shape[:axis], width, *block.shape[axis + 1:]))


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any,
                     dtype: Any = None, shape: Any = None, **kwargs: Any) -> Array:
    """``numpy.apply_along_axis`` (and dask's, with its ``dtype=`` and ``shape=``): ``axis``
    is made one block, the other axes stay cut, and each block runs NumPy's loop. The
    output of ``func1d`` (its shape and dtype) is found by calling it on a vector of ones of
    the axis' length when ``shape`` or ``dtype`` is not given. A tilegraph array among
    ``args`` reaches ``func1d`` whole, as a NumPy array (xarray's polyfit passes its
    design matrix so)."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.core import tokenize
    from tilegraph.array.sorting import normalized_axis, whole_axis
    from tilegraph.graph.taskgraph import Dep

    if not callable(func1d):
        raise TypeError(f"apply_along_axis: {func1d!r} is not callable")
    a = asarray(arr)
    if a.ndim == 0:
        raise ValueError("apply_along_axis: needs an array of at least one dimension")
    axis = normalized_axis("apply_along_axis", a, axis)
    if shape is None or dtype is None:
        # array arguments are stood in for by ones of their shape and dtype
        stand_ins = [np.ones(v.shape, dtype=v.dtype) if isinstance(v, Array) else v
                     for v in args]
        probe = np.asarray(func1d(np.ones(a.shape[axis], dtype=a.dtype), *stand_ins,
                                  **kwargs))
        shape = probe.shape if shape is None else shape
        dtype = probe.dtype if dtype is None else dtype
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    y = whole_axis(a, axis)
    width = int(np.prod(shape))  # func1d's output, flattened into the axis' place
    whole = [v.rechunk(-1) if isinstance(v, Array) else v for v in args]
    extra = [v for v in whole if isinstance(v, Array)]
    slot = iter(range(1, len(extra) + 1))
    template = tuple(Dep(next(slot)) if isinstance(v, Array) else v for v in whole)
    label = f"apply_along_axis-{getattr(func1d, '__name__', 'func')}"
    chunks = tuple((width,) if i == axis else c for i, c in enumerate(y.chunks))
    extra_keys = [v.collection.key((0,) * v.ndim) for v in extra]
    key = y.collection.key
    itemsize = dtype.itemsize

    def task_of(c: tuple[int, ...]) -> tuple:
        return (_apply_along, [key(c), *extra_keys],
                (func1d, axis, dtype, width, kwargs, Dep(0), *template))

    token = tokenize("apply_along_axis", func1d, y, axis, dtype, width, *whole, kwargs)
    blocks = apply_blocks(f"{label}-{token}", y.numblocks,
                          [y.collection, *[v.collection for v in extra]], task_of,
                          kind="map", name=label,
                          nbytes=lambda c: itemsize * math.prod(
                              chunks[i][k] for i, k in enumerate(c)))
    out = Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)
    return out.reshape((*a.shape[:axis], *shape, *a.shape[axis + 1:]))


def atleast_nd(n: int) -> Callable:
    def at_least(*arrays: Any) -> Any:
        out = []
        for x in arrays:
            x = asarray(x)
            if x.ndim < n:
                if n == 3 and x.ndim == 2:
                    x = x[:, :, None]
                elif n == 3 and x.ndim == 1:
                    x = x[None, :, None]
                else:
                    x = x.reshape((1,) * (n - x.ndim) + x.shape)
            out.append(x)
        return out[0] if len(out) == 1 else tuple(out)

    at_least.__name__ = f"atleast_{n}d"
    return at_least


def vstack(tup: Any, **kwargs: Any) -> Array:
    """Stack arrays vertically (along the first axis, 1-d arrays as rows)."""
    return manipulation.concatenate(atleast_nd(2)(*tup) if len(tup) > 1 else
                                    [atleast_nd(2)(*tup)], axis=0)


def hstack(tup: Any, **kwargs: Any) -> Array:
    """Stack arrays horizontally (along the second axis; 1-d arrays end to end)."""
    arrays = [asarray(t) for t in tup]
    axis = 0 if arrays and arrays[0].ndim == 1 else 1
    return manipulation.concatenate(arrays, axis=axis)


def dstack(tup: Any) -> Array:
    """Stack arrays along the third axis."""
    arrays = atleast_nd(3)(*tup)
    return manipulation.concatenate(arrays if isinstance(arrays, tuple) else [arrays], axis=2)


def column_stack(tup: Any) -> Array:
    """Stack 1-d arrays as the columns of a 2-d array."""
    arrays = [asarray(t) for t in tup]
    arrays = [a[:, None] if a.ndim == 1 else a for a in arrays]
    return manipulation.concatenate(arrays, axis=1)


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: Any = "K",
              subok: bool = True, shape: Any = None) -> Array:
    """An array of ``fill_value`` with ``a``'s shape, blocks and dtype."""
    from tilegraph.array.creation import full

    a = asarray(a)
    return full(a.shape if shape is None else shape, fill_value,
                dtype=a.dtype if dtype is None else dtype,
                chunks=a.chunks if shape is None else "auto")


IMPLEMENTATIONS: dict[Callable, Callable] = {
    # reductions
    np.sum: reductions.sum, np.prod: reductions.prod, np.mean: reductions.mean,
    np.var: reductions.var, np.std: reductions.std, np.min: reductions.min,
    np.max: reductions.max, np.amin: reductions.min, np.amax: reductions.max,
    np.argmin: reductions.argmin, np.argmax: reductions.argmax, np.any: reductions.any,
    np.all: reductions.all,
    np.nansum: statistics.nansum, np.nanprod: statistics.nanprod,
    np.nanmin: statistics.nanmin, np.nanmax: statistics.nanmax,
    np.nanmean: statistics.nanmean, np.nanvar: statistics.nanvar,
    np.nanstd: statistics.nanstd, np.nanargmin: statistics.nanargmin,
    np.nanargmax: statistics.nanargmax, np.ptp: statistics.ptp,
    np.average: statistics.average, np.count_nonzero: statistics.count_nonzero,
    np.median: statistics.median, np.percentile: statistics.percentile,
    np.quantile: statistics.quantile, np.nanmedian: statistics.nanmedian,
    np.nanpercentile: statistics.nanpercentile, np.nanquantile: statistics.nanquantile,
    np.histogram: statistics.histogram, np.bincount: statistics.bincount,
    np.cov: statistics.cov, np.corrcoef: statistics.corrcoef,
    np.isclose: statistics.isclose, np.allclose: statistics.allclose,
    np.array_equal: statistics.array_equal, np.diagonal: statistics.diagonal,
    np.trace: statistics.trace,
    # scans
    np.cumsum: scans.cumsum, np.cumprod: scans.cumprod, np.nancumsum: scans.nancumsum,
    np.nancumprod: scans.nancumprod, np.diff: scans.diff, np.broadcast_to: scans.broadcast_to,
    # sorting, searching, sets
    np.sort: sorting.sort, np.argsort: sorting.argsort, np.unique: sorting.unique,
    np.searchsorted: sorting.searchsorted,
    np.nonzero: indexing.nonzero, np.argwhere: indexing.argwhere,
    np.flatnonzero: indexing.flatnonzero, np.compress: indexing.compress,
    np.extract: indexing.extract, np.take: indexing.take,
    np.ravel_multi_index: elementwise.ravel_multi_index,
    np.unravel_index: elementwise.unravel_index,
    # shape
    np.transpose: lambda x, axes=None: manipulation.transpose(x, axes),
    np.swapaxes: manipulation.swapaxes, np.reshape: _method("reshape"),
    np.ravel: _method("ravel"), np.concatenate: manipulation.concatenate,
    np.stack: manipulation.stack, np.vstack: vstack, np.hstack: hstack, np.dstack: dstack,
    np.column_stack: column_stack, np.atleast_1d: atleast_nd(1),
    np.atleast_2d: atleast_nd(2), np.atleast_3d: atleast_nd(3), np.squeeze: squeeze,
    np.expand_dims: expand_dims, np.moveaxis: moveaxis, np.flip: flip,
    np.fliplr: lambda m: flip(m, 1), np.flipud: lambda m: flip(m, 0),
    np.full_like: full_like, np.pad: padding.pad, np.roll: padding.roll,
    np.lib.stride_tricks.sliding_window_view: windows.sliding_window_view,
    np.gradient: windows.gradient, np.apply_along_axis: apply_along_axis,
    np.zeros_like: lambda a, dtype=None, order="K", subok=True, shape=None: full_like(
        a, 0, dtype, shape=shape),
    np.ones_like: lambda a, dtype=None, order="K", subok=True, shape=None: full_like(
        a, 1, dtype, shape=shape),
    np.empty_like: lambda a, dtype=None, order="K", subok=True, shape=None: full_like(
        a, 0, dtype, shape=shape),
    # elementwise
    np.where: elementwise.where, np.clip: clip, np.round: round_, np.around: round_,
    # contractions and linear algebra
    np.matmul: contraction.matmul, np.dot: contraction.dot,
    np.tensordot: contraction.tensordot, np.einsum: contraction.einsum,
    np.outer: contraction.outer,
}

IMPLEMENTATIONS.update(ufuncs.NUMPY_FUNCTIONS)
# (numpy.linalg's, numpy.fft's and the routines' entries join the table when the package
# binds it: tilegraph.array.api_table.install; their modules import this one)

# NumPy functions with no blocked implementation, and what to use instead
ALTERNATIVES: dict[str, str] = {
    "numpy.linalg.eig": "numpy.linalg.eigh for a symmetric or Hermitian matrix, "
                        "tilegraph.linalg.svd, or .compute() first (eig's dtype, real or "
                        "complex, depends on the values, which a lazy plan does not know)",
    "numpy.linalg.eigvals": "numpy.linalg.eigvalsh for a symmetric or Hermitian matrix, or "
                            ".compute() first (eigvals' dtype depends on the values)",
    "numpy.copyto": "item assignment, dst[...] = src",
    "numpy.put": "item assignment, x[index] = values (or tilegraph.where)",
    "numpy.place": "item assignment with a mask, x[mask] = values",
    "numpy.partition": "tilegraph.sort",
    "numpy.argpartition": "tilegraph.argsort",
    "numpy.lexsort": "tilegraph.argsort of one key",
    "numpy.histogram2d": "tilegraph.histogram of each axis",
    "numpy.histogramdd": "tilegraph.histogram of each axis",
    "numpy.vdot": "tilegraph.dot of the raveled arrays",
    "numpy.inner": "tilegraph.tensordot",
    "numpy.kron": "tilegraph.outer and reshape",
}


def unsupported(func: Callable) -> TypeError:
    """The error for a NumPy function tilegraph does not implement."""
    module = getattr(func, "__module__", "numpy") or "numpy"
    if module.startswith(("numpy.linalg", "numpy.fft")):
        module = module[:12].rstrip("._")
    elif module.startswith("numpy"):
        module = "numpy"
    name = f"{module}.{getattr(func, '__name__', func)}"
    hint = ALTERNATIVES.get(name)
    advice = (f"use {hint}" if hint else "call .compute() first to get a NumPy array")
    return TypeError(f"{name} is not supported on tilegraph arrays: {advice}")


def _arrays_in(value: Any, found: list[Array]) -> None:
    if isinstance(value, Array):
        found.append(value)
    elif type(value) in (list, tuple):
        for v in value:
            _arrays_in(v, found)
    elif type(value) is dict:
        for v in value.values():
            _arrays_in(v, found)


def _replaced(value: Any, values: dict[int, Any]) -> Any:
    if isinstance(value, Array):
        return values[id(value)]
    if type(value) in (list, tuple):
        return type(value)(_replaced(v, values) for v in value)
    if type(value) is dict:
        return {k: _replaced(v, values) for k, v in value.items()}
    return value


def call_with_scalars(func: Callable, args: tuple, kwargs: dict) -> Any:
    """A NumPy function with no blocked implementation whose tilegraph arguments are all
    0-d (a lazy scalar such as ``np.min(x)`` passed where NumPy takes a number: SciPy's
    ``ndimage.histogram`` calls ``np.linspace(min, max, bins + 1)`` so): the scalars are
    computed (in one plan) and NumPy's function runs on their values, giving NumPy's
    result. ``NotImplemented`` when an argument is a tilegraph array of one dimension or
    more (that is refused by :func:`unsupported`, nothing is computed).

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.array([4.0, 1.0, 3.0]), chunks=2)
    >>> np.linspace(np.min(x), np.max(x), 4)
    array([1., 2., 3., 4.])
    """
    found: list[Array] = []
    _arrays_in(args, found)
    _arrays_in(kwargs, found)
    if not found or any(a.ndim != 0 or a.is_sparse for a in found):
        return NotImplemented
    from tilegraph.array.core import compute

    unique = list({id(a): a for a in found}.values())
    values = dict(zip((id(a) for a in unique), compute(*unique), strict=True))
    return func(*_replaced(args, values), **_replaced(kwargs, values))
