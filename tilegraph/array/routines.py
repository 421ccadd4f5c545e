"""The rest of ``dask.array``'s routines over blocked arrays: building arrays (``array``,
``empty``, ``*_like``, ``indices``, ``fromfunction``, ``tri``, ``meshgrid``, ``diag``,
``block``), reshaping and reordering (``append``, ``insert``, ``delete``, ``rot90``,
``rollaxis``, ``tile``, ``repeat``, ``shuffle``, ``broadcast_arrays``), selecting
(``choose``, ``select``, ``piecewise``, ``digitize``), reductions (``coarsen``, ``moment``,
dask's general ``reduction``, ``histogram2d``/``histogramdd``), ``push``, set and product
helpers (``union1d``, ``vdot``, ``ediff1d``), ``unify_chunks`` and ``assert_eq``.

Each builds a lazy plan from shapes and block sizes only, with NumPy's (and dask's)
semantics; where the layout of the result depends on an index (``insert``, ``delete``,
``shuffle``), the index is a NumPy array or list, never a lazy one (a tilegraph array
there is refused rather than computed behind the caller's back).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.insert(x, 2, -1.0, axis=0).compute()
array([ 0.,  1., -1.,  2.,  3.,  4.,  5.])
>>> tg.coarsen(np.sum, x, {0: 2}).compute()
array([1., 5., 9.])
>>> tg.select([x < 2, x > 4], [x, -x], default=0).compute()
array([ 0.,  1.,  0.,  0.,  0., -5.])
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tilegraph.array.manipulation as manipulation
import tilegraph.array.numpy_functions as npf
import tilegraph.array.reductions as reductions
from tilegraph.array.chunks import common_refinement, normalize_chunks, offsets
from tilegraph.array.core import Array, asarray, compute, tokenize
from tilegraph.array.creation import arange, from_block_function, full
from tilegraph.array.elementwise import elemwise, map_blocks, where
from tilegraph.array.indexing import take
from tilegraph.array.scans import broadcast_to, cumreduction

# -- creation -----------------------------------------------------------------------------------


def _not_lazy(op: str, what: str, value: Any) -> None:
    if isinstance(value, Array):
        raise TypeError(f"{op}: {what} must be known when the plan is made (a NumPy array, "
                        "a list or a number), not a lazy tilegraph array; compute it first "
                        "if it must come from one")


def array(object: Any, dtype: Any = None, copy: bool | None = True, order: str = "K",
          subok: bool = False, ndmin: int = 0, chunks: Any = "auto", like: Any = None
          ) -> Array:
    """``numpy.array`` as a blocked array (dask's ``da.array``): an Array is returned as
    it is (a new Array object with ``copy``), anything else is taken as NumPy takes it and
    cut into ``chunks``; ``ndmin`` prepends axes of length one."""
    if like is not None and not isinstance(like, Array):
        raise TypeError("array: like= must be a tilegraph array (or None)")
    if isinstance(object, Array):
        out = object if dtype is None else object.astype(dtype)
        out = out.copy() if copy and out is object else out
    else:
        out = asarray(object, chunks=chunks, dtype=dtype)
    if out.ndim < ndmin:
        out = out.reshape((1,) * (ndmin - out.ndim) + out.shape)
    return out


def asanyarray(a: Any, dtype: Any = None, order: Any = None, like: Any = None,
               chunks: Any = "auto") -> Array:
    """``a`` as a blocked array (tilegraph has no array subclasses: as :func:`asarray`)."""
    return asarray(a, chunks=chunks, dtype=dtype)


def empty(shape: Any, dtype: Any = float, chunks: Any = "auto", order: str = "C",
          like: Any = None) -> Array:
    """An array whose values are not to be read (made of zeros here, so every run gives
    the same values)."""
    return full(shape, 0, dtype=dtype, chunks=chunks)


def _like(op: str, a: Any, fill: Any, dtype: Any, chunks: Any, shape: Any) -> Array:
    a = a if isinstance(a, Array) else asarray(a)
    dtype = a.dtype if dtype is None else dtype
    if shape is None:
        return full(a.shape, fill, dtype=dtype, chunks=a.chunks if chunks is None else chunks)
    return full(shape, fill, dtype=dtype, chunks="auto" if chunks is None else chunks)


def empty_like(a: Any, dtype: Any = None, order: str = "C", chunks: Any = None,
               name: Any = None, shape: Any = None) -> Array:
    """An array shaped and cut like ``a`` (zeros here, see :func:`empty`)."""
    return _like("empty_like", a, 0, dtype, chunks, shape)


def zeros_like(a: Any, dtype: Any = None, order: str = "C", chunks: Any = None,
               name: Any = None, shape: Any = None) -> Array:
    """Zeros shaped and cut like ``a`` (``shape``/``chunks`` override)."""
    return _like("zeros_like", a, 0, dtype, chunks, shape)


def ones_like(a: Any, dtype: Any = None, order: str = "C", chunks: Any = None,
              name: Any = None, shape: Any = None) -> Array:
    """Ones shaped and cut like ``a`` (``shape``/``chunks`` override)."""
    return _like("ones_like", a, 1, dtype, chunks, shape)


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "C",
              chunks: Any = None, name: Any = None, shape: Any = None) -> Array:
    """``fill_value`` shaped and cut like ``a`` (``shape``/``chunks`` override)."""
    return _like("full_like", a, fill_value, dtype, chunks, shape)


def _index_block(shape: tuple[int, ...], starts: tuple[int, ...], axis: int,
                 dtype: np.dtype) -> np.ndarray:
    view = [1] * len(shape)
    view[axis] = shape[axis]
    line = np.arange(starts[axis], starts[axis] + shape[axis], dtype=dtype).reshape(view)
    return np.broadcast_to(line, shape).copy()


def indices(dimensions: Sequence[int], dtype: Any = int, chunks: Any = "auto") -> Array:
    """``numpy.indices``: an array of shape ``(len(dimensions), *dimensions)`` whose
    ``i``-th entry holds each element's index along axis ``i``; ``chunks`` cuts the
    ``dimensions`` axes (the first axis is one block per dimension)."""
    dims = tuple(operator.index(d) for d in dimensions)
    dtype = np.dtype(dtype)
    norm = normalize_chunks(chunks, dims, dtype)
    if not dims:
        return asarray(np.empty((0,), dtype=dtype))
    starts = [offsets(c) for c in norm]
    grids = []
    for axis in range(len(dims)):
        grids.append(from_block_function(
            "indices", _index_block, dims, norm, dtype,
            lambda c, bs, axis=axis: (bs, tuple(starts[a][k] for a, k in enumerate(c)),
                                      axis, dtype), params=(axis,)))
    return manipulation.stack(grids, axis=0)


def _fromfunction_block(func: Callable, dtype: np.dtype, kwargs: dict,
                        block_info: Any = None) -> np.ndarray:
    loc = block_info[None]["array-location"]
    shape = block_info[None]["chunk-shape"]
    coords = np.indices(shape, dtype=dtype)
    coords += np.array([start for start, _ in loc], dtype=dtype).reshape(
        (len(loc),) + (1,) * len(loc))
    return np.asarray(func(*coords, **kwargs))


def fromfunction(function: Callable, chunks: Any = "auto", shape: Any = None,
                 dtype: Any = None, **kwargs: Any) -> Array:
    """``numpy.fromfunction`` block by block, as dask's: each block is ``function`` of
    that block's coordinate arrays (of ``dtype``, float by default), with ``kwargs``.
    The result's dtype is what ``function`` returns on one-element coordinate arrays."""
    if not callable(function):
        raise TypeError(f"fromfunction: {function!r} is not callable")
    if shape is None:
        raise TypeError("fromfunction: give the array's shape as shape=")
    shape = tuple(operator.index(s) for s in ((shape,) if np.ndim(shape) == 0 else shape))
    coord_dtype = np.dtype(float if dtype is None else dtype)
    norm = normalize_chunks(chunks, shape, coord_dtype)
    probe = np.asarray(function(*np.zeros((len(shape),) + (1,) * len(shape),
                                          dtype=coord_dtype), **kwargs))
    return map_blocks(_fromfunction_block, function, coord_dtype, kwargs, chunks=norm,
                      dtype=probe.dtype, name="fromfunction")


def _tri_block(shape: tuple[int, int], row0: int, col0: int, k: int, dtype: np.dtype
               ) -> np.ndarray:
    rows = np.arange(row0, row0 + shape[0])[:, None] + k
    return (rows >= np.arange(col0, col0 + shape[1])[None, :]).astype(dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = float, chunks: Any = "auto",
        *, like: Any = None) -> Array:
    """``numpy.tri``: ones at and below the ``k``-th diagonal of an ``N x M`` array."""
    N = operator.index(N)
    M = N if M is None else operator.index(M)
    k = operator.index(k)
    dtype = np.dtype(dtype)
    norm = normalize_chunks(chunks, (N, M), dtype)
    r0, c0 = offsets(norm[0]), offsets(norm[1])
    return from_block_function("tri", _tri_block, (N, M), norm, dtype,
                               lambda c, bs: (bs, r0[c[0]], c0[c[1]], k, dtype),
                               params=(k,))


def tril(m: Any, k: int = 0) -> Array:
    """``numpy.tril``: the elements at and below the ``k``-th diagonal (of the last two
    axes), zeros above."""
    from tilegraph.array.linalg import triangle

    m = m if isinstance(m, Array) else asarray(m)
    if m.ndim < 2:
        raise ValueError(f"tril: needs an array of at least two dimensions, got shape "
                         f"{m.shape}")
    return triangle(m, operator.index(k), upper=False)


def triu(m: Any, k: int = 0) -> Array:
    """``numpy.triu``: the elements at and above the ``k``-th diagonal (of the last two
    axes), zeros below."""
    from tilegraph.array.linalg import triangle

    m = m if isinstance(m, Array) else asarray(m)
    if m.ndim < 2:
        raise ValueError(f"triu: needs an array of at least two dimensions, got shape "
                         f"{m.shape}")
    return triangle(m, operator.index(k), upper=True)


def tril_indices(n: int, k: int = 0, m: int | None = None, chunks: Any = "auto"
                 ) -> tuple[Array, Array]:
    """``numpy.tril_indices``: the row and column indices of the lower triangle (as
    blocked arrays of ``chunks``)."""
    rows, cols = np.tril_indices(operator.index(n), operator.index(k),
                                 None if m is None else operator.index(m))
    return asarray(rows, chunks=chunks), asarray(cols, chunks=chunks)


def triu_indices(n: int, k: int = 0, m: int | None = None, chunks: Any = "auto"
                 ) -> tuple[Array, Array]:
    """``numpy.triu_indices``: the row and column indices of the upper triangle."""
    rows, cols = np.triu_indices(operator.index(n), operator.index(k),
                                 None if m is None else operator.index(m))
    return asarray(rows, chunks=chunks), asarray(cols, chunks=chunks)


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Array, Array]:
    """The indices of the lower triangle of the 2-d ``arr`` (only its shape is read)."""
    shape = np.shape(arr) if not isinstance(arr, Array) else arr.shape
    if len(shape) != 2:
        raise ValueError(f"tril_indices_from: needs a 2-d array, got shape {shape}")
    return tril_indices(shape[-2], k, shape[-1])


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Array, Array]:
    """The indices of the upper triangle of the 2-d ``arr`` (only its shape is read)."""
    shape = np.shape(arr) if not isinstance(arr, Array) else arr.shape
    if len(shape) != 2:
        raise ValueError(f"triu_indices_from: needs a 2-d array, got shape {shape}")
    return triu_indices(shape[-2], k, shape[-1])


def meshgrid(*xi: Any, sparse: bool = False, indexing: str = "xy", copy: bool = True
             ) -> tuple[Array, ...]:
    """``numpy.meshgrid``: coordinate arrays from coordinate vectors (each flattened),
    ``indexing="xy"`` (Cartesian, the first two axes swapped) or ``"ij"`` (matrix);
    ``sparse=True`` keeps each one broadcastable instead of full size."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    vectors = [(x if isinstance(x, Array) else asarray(x)).reshape(-1) for x in xi]
    n = len(vectors)
    out = []
    for i, v in enumerate(vectors):
        ax = (1 - i if i < 2 else i) if indexing == "xy" and n > 1 else i
        out.append(v[tuple(slice(None) if j == ax else None for j in range(n))])
    if not sparse and out:
        shape = np.broadcast_shapes(*(o.shape for o in out))
        out = [broadcast_to(o, shape) for o in out]
    return tuple(out)


def diag(v: Any, k: int = 0) -> Array:
    """``numpy.diag``: the ``k``-th diagonal of a 2-d array, or a 2-d array with the 1-d
    ``v`` on its ``k``-th diagonal (zeros elsewhere; blocks cut as ``v`` is)."""
    from tilegraph.array.statistics import diagonal

    v = v if isinstance(v, Array) else asarray(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: input must be 1- or 2-d, got shape {v.shape}")
    n = v.shape[0] + abs(k)
    if abs(k):  # v runs from the diagonal's first element; zeros fill the rest
        v = manipulation.concatenate([v, full((abs(k),), 0, dtype=v.dtype, chunks=-1)])
    chunks = v.chunks[0]
    rows = arange(n, chunks=(chunks,))[:, None]
    cols = arange(n, chunks=(chunks,))[None, :]
    along = v[:, None] if k >= 0 else v[None, :]
    return where(cols - rows == k, along, np.zeros((), dtype=v.dtype))


def _depth(x: Any, where: str) -> int:
    if isinstance(x, tuple):
        raise TypeError(f"block: {where} is a tuple; only lists may be nested (as NumPy's "
                        "block)")
    if not isinstance(x, list):
        return 0
    if not x:
        raise ValueError(f"block: {where} is an empty list")
    depths = {_depth(e, f"{where}[{i}]") for i, e in enumerate(x)}
    if len(depths) != 1:
        raise ValueError(f"block: the lists in {where} are nested to different depths "
                         f"{sorted(depths)}")
    return 1 + depths.pop()


def block(arrays: Any, allow_unknown_chunksizes: bool = False) -> Array:
    """``numpy.block``: an array assembled from nested lists of arrays, the innermost lists
    joined along the last axis, the next along the one before, and so on."""
    depth = _depth(arrays, "arrays")
    leaves: list[Array] = []

    def collect(x: Any) -> None:
        if isinstance(x, list):
            for e in x:
                collect(e)
        else:
            leaves.append(x if isinstance(x, Array) else asarray(x))

    collect(arrays)
    ndim = builtins.max([depth, *(a.ndim for a in leaves)])
    it = iter(leaves)

    def build(x: Any, level: int) -> Array:
        if not isinstance(x, list):
            a = next(it)
            return a.reshape((1,) * (ndim - a.ndim) + a.shape) if a.ndim < ndim else a
        parts = [build(e, level + 1) for e in x]
        return manipulation.concatenate(parts, axis=level - depth)

    return build(arrays, 0)


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


def _axis_of(op: str, a: Array, axis: Any) -> int:
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
    _not_lazy(op, "obj", obj)
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
    axis = _axis_of("delete", arr, axis)
    n = arr.shape[axis]
    _not_lazy("delete", "obj", obj)
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
    axis = _axis_of("insert", arr, axis)
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
    axis = _axis_of("rollaxis", a, axis)
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
    a0, a1 = (_axis_of("rot90", m, a) for a in axes)
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
    _not_lazy("tile", "reps", reps)
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
    _not_lazy("repeat", "repeats", repeats)
    if np.any(np.asarray(repeats) < 0):
        raise ValueError("repeat: negative repeats are not allowed")
    return _repeat(a, repeats, axis=axis)


def shuffle(x: Any, indexer: Sequence[Sequence[int]], axis: int, chunks: Any = "auto"
            ) -> Array:
    """dask's ``shuffle``: ``x`` reordered along ``axis`` so that each group of indices
    in ``indexer`` (a list of lists of positions) is contiguous, groups in order."""
    x = x if isinstance(x, Array) else asarray(x)
    axis = _axis_of("shuffle", x, axis)
    _not_lazy("shuffle", "indexer", indexer)
    groups = [np.asarray(g, dtype=np.intp).reshape(-1) for g in indexer]
    flat = np.concatenate(groups) if groups else np.empty(0, dtype=np.intp)
    return take(x, flat, axis=axis)


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Array, ...]:
    """``numpy.broadcast_arrays``: the arrays broadcast to their common shape."""
    arrays = [a if isinstance(a, Array) else asarray(a) for a in args]
    shape_ = np.broadcast_shapes(*(a.shape for a in arrays))
    return tuple(a if a.shape == shape_ else broadcast_to(a, shape_) for a in arrays)


# -- selection ----------------------------------------------------------------------------------


def _choose_block(mode: str, a: np.ndarray, *choices: np.ndarray) -> np.ndarray:
    return np.choose(a, choices, mode=mode)


def choose(a: Any, choices: Sequence[Any], out: Any = None, mode: str = "raise") -> Array:
    """``numpy.choose``: from each element's index in ``a``, the element of that choice
    (all broadcast together); an index out of range fails when its block is computed
    (``mode="raise"``) or wraps/clips as NumPy's ``mode`` says."""
    if out is not None:
        raise TypeError("choose: out= is not supported on tilegraph arrays")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    choices = list(choices)
    if not choices:
        raise ValueError("choose: give at least one choice")
    a = a if isinstance(a, Array) else asarray(a)
    if a.dtype.kind not in "iub":
        raise TypeError(f"choose: a must hold integers, got dtype {a.dtype}")
    dtype = np.result_type(*(c.dtype if isinstance(c, Array) else np.asarray(c).dtype
                             for c in choices))
    return elemwise(_choose_block, mode, a, *choices, dtype=dtype, name="choose")


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Array:
    """``numpy.select``: for each element, the choice of the first condition that holds
    (``default`` where none does)."""
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select: select with an empty condition list is not possible")
    conds = [c if isinstance(c, Array) else asarray(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != bool:
            raise TypeError(f"select: invalid entry {i} in condlist: should be boolean "
                            f"ndarray, got dtype {c.dtype}")
    choices = [c if isinstance(c, Array) else asarray(c) for c in choicelist]
    # NumPy's result dtype, from its own select on one-element stand-ins
    dtype = np.select([np.zeros(1, bool)] * len(choices),
                      [np.zeros(1, c.dtype) for c in choices], default).dtype
    out: Any = asarray(np.asarray(default, dtype=dtype))
    for cond, choice in zip(reversed(conds), reversed(choices), strict=True):
        out = where(cond, choice.astype(dtype) if choice.dtype != dtype else choice, out)
    shape_ = np.broadcast_shapes(*(c.shape for c in conds), *(c.shape for c in choices))
    return out if out.shape == shape_ else broadcast_to(out, shape_)


def _piecewise_block(x: np.ndarray, *conds: np.ndarray, funclist: list, args: tuple,
                     kw: dict) -> np.ndarray:
    return np.piecewise(x, list(conds), funclist, *args, **kw)


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any
              ) -> Array:
    """``numpy.piecewise`` block by block: ``x`` with each function of ``funclist`` (or
    value) applied where its condition holds (a last extra function where none does)."""
    x = x if isinstance(x, Array) else asarray(x)
    if (isinstance(condlist, (Array, np.ndarray)) and condlist.ndim == x.ndim) or \
            isinstance(condlist, bool):
        condlist = [condlist]
    conds = [c if isinstance(c, Array) else asarray(np.asarray(c, dtype=bool))
             for c in condlist]
    funclist = list(funclist)
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ValueError(f"piecewise: with {len(conds)} condition(s), {len(conds)} or "
                         f"{len(conds) + 1} functions are expected, got {len(funclist)}")
    return elemwise(_piecewise_block, x, *conds, dtype=x.dtype, name="piecewise",
                    kwargs={"funclist": funclist, "args": args, "kw": kw})


def digitize(x: Any, bins: Any, right: bool = False) -> Array:
    """``numpy.digitize`` block by block: the index of the bin of each element, ``bins``
    a 1-d monotonic NumPy array (sent whole to every block)."""
    _not_lazy("digitize", "bins", bins)
    bins = np.asarray(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-dimensional, got shape {bins.shape}")
    x = x if isinstance(x, Array) else asarray(x)
    return elemwise(np.digitize, x, kwargs={"bins": bins, "right": bool(right)},
                    dtype=np.intp, name="digitize")


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
        factors[_axis_of("coarsen", x, ax)] = f
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
    axis = _axis_of("push", array, axis)
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
            _not_lazy("histogramdd", "bins", bins[i])
            edges.append(np.histogram_bin_edges(np.array([], dtype=float),
                                                operator.index(bins[i]), range=ranges[i]))
        else:
            _not_lazy("histogramdd", "bins", bins[i])
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
        ax = _axis_of("apply_over_axes", a, ax)
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
