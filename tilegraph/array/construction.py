"""Building blocked arrays the way NumPy and dask.array do: ``array``, ``asanyarray``,
``empty`` and the ``*_like`` functions, ``indices``, ``fromfunction``, ``tri``, ``tril``/
``triu`` and their indices, ``meshgrid``, ``diag`` and ``block``.

Each builds a lazy plan from shapes and block sizes only (``tilegraph.array.routines``
re-exports them with the rest of dask.array's routines).

>>> import numpy as np, tilegraph as tg
>>> tg.tri(3, chunks=2).compute()
array([[1., 0., 0.],
       [1., 1., 0.],
       [1., 1., 1.]])
>>> tg.block([[np.eye(2), np.zeros((2, 1))]]).compute()
array([[1., 0., 0.],
       [0., 1., 0.]])
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tilegraph.array.manipulation as manipulation
from tilegraph.array.chunks import normalize_chunks, offsets
from tilegraph.array.core import Array, asarray
from tilegraph.array.creation import arange, from_block_function, full
from tilegraph.array.elementwise import map_blocks, where
from tilegraph.array.scans import broadcast_to


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


