"""Elementwise operations with NumPy broadcasting and type promotion, block by block.

Inputs are aligned first: their shapes broadcast as NumPy's do, and along every output axis
the blocks of all inputs are cut at the union of their block boundaries (a rechunk happens
only where they differ). The result dtype is what NumPy gives for the same operation on
one-element arrays of the input dtypes (and the same Python scalars), so promotion rules,
including NEP 50's for Python scalars, are NumPy's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.array.chunks import common_refinement, numblocks
from tilegraph.array.core import Array, asarray, dense_only, from_numpy, tokenize
from tilegraph.graph.taskgraph import Dep, funcname


def _describe(x: Any) -> str:
    return f"shape {x.shape}" if hasattr(x, "shape") else repr(x)


def align(op: str, args: Sequence[Any]) -> tuple[tuple[int, ...], tuple, list[Any]]:
    """Broadcast shape, common chunks, and the arguments with NumPy arrays turned into
    Arrays and every Array rechunked to the common block boundaries."""
    # array-likes (lists, tuples) take part in broadcasting as NumPy arrays, as in NumPy
    args = [np.asarray(a) if isinstance(a, (list, tuple)) else a for a in args]
    args = [asarray(a) if hasattr(type(a), "__dask_graph__") else a for a in args]  # lazily
    args = [from_numpy(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a for a in args]
    arrays = [a for a in args if isinstance(a, Array)]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(
            f"{op}: shapes {shapes} cannot be broadcast together (NumPy broadcasting: axes "
            "aligned from the right must be equal or 1)"
        ) from None
    nd = len(shape)
    out_chunks = []
    for axis in range(nd):
        length = shape[axis]
        sizes = []
        for a in arrays:
            ax = axis - (nd - a.ndim)
            if ax >= 0 and a.shape[ax] == length:
                sizes.append(a.chunks[ax])
        out_chunks.append(common_refinement(*sizes) if sizes else (length,))
    out_chunks = tuple(out_chunks)
    aligned = []
    for a in args:
        if isinstance(a, Array):
            want = tuple(
                out_chunks[ax + nd - a.ndim] if a.shape[ax] == shape[ax + nd - a.ndim]
                else a.chunks[ax] for ax in range(a.ndim)
            )
            if want != a.chunks:
                a = a.rechunk(want)
        aligned.append(a)
    return shape, out_chunks, aligned


def _index_map(a: Array, shape: tuple[int, ...]) -> Callable | None:
    nd = len(shape)
    off = nd - a.ndim
    broadcast = [a.shape[ax] != shape[ax + off] for ax in range(a.ndim)]
    if off == 0 and not any(broadcast):
        return None

    def index(coord: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(0 if broadcast[ax] else coord[ax + off] for ax in range(a.ndim))

    return index


def result_dtype(func: Callable, args: Sequence[Any], kwargs: dict | None = None) -> np.dtype:
    """The dtype NumPy gives for ``func`` on one-element stand-ins of the arguments."""
    dummies = [np.ones((1,) * a.ndim, dtype=a.dtype) if isinstance(a, Array) else a
               for a in args]
    with np.errstate(all="ignore"):
        out = func(*dummies, **(kwargs or {}))
    return np.asarray(out).dtype


def elemwise(
    func: Callable,
    *args: Any,
    dtype: Any = None,
    kwargs: dict | None = None,
    name: str | None = None,
    kind: str = "elementwise",
) -> Array:
    """``func`` applied block by block to aligned, broadcast arguments (Arrays, NumPy
    arrays, scalars)."""
    op = name or funcname(func)
    shape, chunks, args = align(op, args)
    if dtype is None:
        try:
            dtype = result_dtype(func, args, kwargs)
        except Exception as exc:
            shapes = ", ".join(_describe(a) for a in args)
            # keep the kind of NumPy's error (OverflowError for a Python int that does not
            # fit the array dtype, ValueError, TypeError for a missing loop)
            kind = next((k for k in (OverflowError, ValueError) if isinstance(exc, k)),
                        TypeError)
            raise kind(f"{op}: cannot be applied to arguments ({shapes}): {exc}") from exc
    dtype = np.dtype(dtype)
    arrays = [a for a in args if isinstance(a, Array)]
    slot = {}
    template = []
    for a in args:
        if isinstance(a, Array):
            template.append(Dep(slot.setdefault(a.name, len(slot))))
        else:
            template.append(a)
    unique = {a.name: a for a in arrays}
    inputs = list(unique.values())
    maps = [_index_map(a, shape) for a in inputs]
    token = tokenize(op, func, *args, kwargs, dtype)
    itemsize = dtype.itemsize
    direct = all(type(t) is Dep for t in template) and len(inputs) == len(template)
    blocks = _map_blocks(
        f"{op}-{token}", func, [a.collection for a in inputs], numblocks(chunks), maps,
        args=None if direct else tuple(template), kwargs=kwargs or None, kind=kind, name=op,
        nbytes=lambda c: itemsize * math.prod(chunks[i][k] for i, k in enumerate(c)),
    )
    return Array(blocks, shape, chunks, dtype)


_UNSUPPORTED_UFUNC_KWARGS = ("where", "axes", "axis", "signature")


def apply_ufunc(ufunc: np.ufunc, *inputs: Any, **kwargs: Any) -> Any:
    """A NumPy ufunc on blocked arrays (the ``__array_ufunc__`` ``__call__`` path)."""
    for k in _UNSUPPORTED_UFUNC_KWARGS:
        if k in kwargs:
            raise TypeError(f"{ufunc.__name__}: the {k}= argument is not supported on "
                            "tilegraph arrays")
    if ufunc.signature is not None:
        raise TypeError(f"{ufunc.__name__}: generalized ufuncs are not supported elementwise")
    if ufunc.nout == 1:
        # the result dtype comes from NumPy itself, with dtype=/casting= taken into account
        return elemwise(ufunc, *inputs, kwargs=kwargs or None, name=ufunc.__name__)
    return tuple(
        elemwise(_ufunc_output(ufunc, k), *inputs, kwargs=kwargs or None,
                 name=f"{ufunc.__name__}_{k}")
        for k in range(ufunc.nout)
    )


def _ufunc_output(ufunc: np.ufunc, k: int) -> Callable:
    def one_output(*args: Any, **kwargs: Any) -> Any:
        return ufunc(*args, **kwargs)[k]

    one_output.__name__ = f"{ufunc.__name__}_{k}"
    return one_output


def where(condition: Any, x: Any = None, y: Any = None) -> Array | tuple[Array, ...]:
    """``numpy.where(condition, x, y)`` elementwise; ``where(condition)`` alone is, as in
    NumPy, ``nonzero(condition)``: the indices where it holds, one array per axis."""
    if x is None and y is None:
        from tilegraph.array.indexing import nonzero

        return nonzero(condition)
    if x is None or y is None:
        raise TypeError("where: give both x and y (where(condition, x, y)), or neither "
                        "(where(condition): the indices where condition holds)")
    dense_only("where", condition, x, y)
    return elemwise(np.where, condition, x, y, name="where")


def _astype(block: np.ndarray, dtype: np.dtype, casting: str) -> np.ndarray:
    return block.astype(dtype, casting=casting)


def astype(x: Array, dtype: Any, copy: bool = True, casting: str = "unsafe") -> Array:
    """``x`` converted to ``dtype``, block by block."""
    dtype = np.dtype(dtype)
    if dtype == x.dtype and not copy:
        return x
    if not np.can_cast(x.dtype, dtype, casting=casting):
        raise TypeError(f"astype: cannot cast {x.dtype} to {dtype} under casting={casting!r}")
    if dtype == x.dtype:
        return x
    return elemwise(_astype, x, dtype, casting, dtype=dtype, name="astype")


def map_blocks(func: Callable, *args: Any, dtype: Any = None, chunks: Any = None,
               name: str | None = None, **kwargs: Any) -> Array:
    """Apply ``func`` to each block of the array arguments (all with the same blocks), with
    the other arguments passed as they are.

    ``dtype`` defaults to what ``func`` returns on one-element arrays (or the first array's
    dtype if that fails); ``chunks`` (block sizes of the result, one block per input block)
    defaults to the first array's, so give it when ``func`` changes the block shape.
    """
    if not callable(func):
        raise TypeError(f"map_blocks: {func!r} is not callable")
    arrays = [a for a in args if isinstance(a, Array)]
    if not arrays:
        raise TypeError("map_blocks: give at least one tilegraph Array argument")
    first = arrays[0]
    aligned = []
    for a in args:
        if isinstance(a, Array) and a is not first:
            if a.ndim != first.ndim or a.numblocks != first.numblocks:
                if a.shape == first.shape:
                    a = a.rechunk(first.chunks)
                else:
                    raise ValueError(
                        f"map_blocks: arrays of shapes {first.shape} and {a.shape} have "
                        f"different block grids {first.numblocks} and {a.numblocks}")
        aligned.append(a)
    op = name or funcname(func)
    if dtype is None:
        try:
            dtype = result_dtype(func, aligned, kwargs)
        except Exception:
            dtype = first.dtype
    dtype = np.dtype(dtype)
    if chunks is None:
        out_chunks = first.chunks
    else:
        from tilegraph.array.chunks import Chunks

        if not isinstance(chunks, (tuple, list)):
            raise TypeError(f"map_blocks: chunks must be a tuple of per-axis block sizes or "
                            f"one block's shape, got {chunks!r}")
        if any(isinstance(c, (int, np.integer)) for c in chunks):
            # one block's shape, as dask takes it: every block of the output has it
            if len(chunks) != first.ndim or not all(
                    isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 0
                    for c in chunks):
                raise ValueError(
                    f"map_blocks: chunks {chunks!r} is neither one block's shape (one "
                    f"non-negative int per axis of the {first.ndim}-d input) nor a tuple of "
                    f"per-axis block sizes giving the block grid {first.numblocks}")
            chunks = tuple((int(c),) * n for c, n in zip(chunks, first.numblocks,
                                                         strict=True))
        out_chunks: Chunks = tuple(tuple(int(s) for s in c) for c in chunks)
        if numblocks(out_chunks) != first.numblocks:
            raise ValueError(
                f"map_blocks: chunks {out_chunks} give a block grid "
                f"{numblocks(out_chunks)}, but the inputs have {first.numblocks}")
    shape = tuple(sum(c) for c in out_chunks)
    slot = {}
    template = []
    unique = {}
    for a in aligned:
        if isinstance(a, Array):
            unique.setdefault(a.name, a)
            template.append(Dep(slot.setdefault(a.name, len(slot))))
        else:
            template.append(a)
    token = tokenize("map_blocks", func, *aligned, kwargs, dtype, out_chunks)
    itemsize = dtype.itemsize
    blocks = _map_blocks(
        f"{op}-{token}", func, [a.collection for a in unique.values()], first.numblocks,
        args=tuple(template), kwargs=kwargs or None, kind="map", name=op,
        nbytes=lambda c: itemsize * math.prod(out_chunks[i][k] for i, k in enumerate(c)),
    )
    return Array(blocks, shape, out_chunks, dtype)


def isin(element: Any, test_elements: Any, assume_unique: bool = False,
         invert: bool = False) -> Array:
    """``numpy.isin``: whether each element of ``element`` is one of ``test_elements``,
    block by block. ``test_elements`` is made a NumPy array first (a tilegraph Array is
    computed): it is sent whole to every block's task, so it should be small.

    >>> import numpy as np, tilegraph as tg
    >>> tg.isin(tg.from_numpy(np.arange(6), chunks=4), [1, 4]).compute()
    array([False,  True, False, False,  True, False])
    """
    values = test_elements.compute() if isinstance(test_elements, Array) else test_elements
    values = np.unique(np.asarray(values).reshape(-1))
    x = element if isinstance(element, Array) else asarray(element)
    return elemwise(_isin_block, x, kwargs={"values": values, "invert": bool(invert)},
                    dtype=bool, name="isin")


def _isin_block(block: np.ndarray, values: np.ndarray, invert: bool) -> np.ndarray:
    return np.isin(block, values, assume_unique=False, invert=invert)


def isnull(x: Any) -> Array:
    """``pandas.isnull`` block by block: True where an element is missing (NaN for
    floating and complex dtypes, NaT for datetimes and timedeltas, None or NaN for
    objects); integers, booleans and strings are never missing. xarray calls it (through
    its chunk manager's namespace) for the NaT handling of datetime reductions.

    >>> import numpy as np, tilegraph as tg
    >>> tg.isnull(tg.from_numpy(np.array([1.0, np.nan, 3.0]), chunks=2)).compute()
    array([False,  True, False])
    """
    x = x if isinstance(x, Array) else asarray(x)
    return elemwise(_isnull_block, x, dtype=bool, name="isnull")


def notnull(x: Any) -> Array:
    """``pandas.notnull`` block by block: the negation of :func:`isnull`.

    >>> import numpy as np, tilegraph as tg
    >>> d = np.array(["2001-01-01", "NaT"], dtype="datetime64[D]")
    >>> tg.notnull(tg.from_numpy(d, chunks=1)).compute()
    array([ True, False])
    """
    x = x if isinstance(x, Array) else asarray(x)
    return elemwise(_notnull_block, x, dtype=bool, name="notnull")


def _isnull_block(block: np.ndarray) -> np.ndarray:
    kind = block.dtype.kind
    if kind in "fc":
        return np.isnan(block)
    if kind in "mM":
        return np.isnat(block)
    if kind == "O":
        import pandas as pd

        return np.asarray(pd.isnull(block), dtype=bool)
    return np.zeros(block.shape, dtype=bool)


def _notnull_block(block: np.ndarray) -> np.ndarray:
    return ~_isnull_block(block)


def ravel_multi_index(multi_index: Any, dims: Any, mode: Any = "raise",
                      order: str = "C") -> Array:
    """``numpy.ravel_multi_index`` block by block: the flat indices, into an array of
    shape ``dims``, of the coordinates ``multi_index`` (a sequence of ``len(dims)``
    integer arrays, broadcast together). ``mode`` and ``order`` are NumPy's; with
    ``mode="raise"`` an out-of-range coordinate fails when its block is computed.

    >>> import numpy as np, tilegraph as tg
    >>> rows = tg.from_numpy(np.array([0, 1, 2, 1]), chunks=3)
    >>> tg.ravel_multi_index((rows, np.array([3, 0, 1, 2])), (3, 4)).compute()
    array([3, 4, 9, 6])
    """
    if isinstance(multi_index, (Array, np.ndarray)):
        if multi_index.ndim == 0:
            raise TypeError("ravel_multi_index: multi_index must be a sequence of integer "
                            "arrays, one per dimension of dims, not a 0-d array")
        multi_index = [multi_index[i] for i in range(multi_index.shape[0])]
    elif not isinstance(multi_index, (tuple, list)):
        raise TypeError("ravel_multi_index: multi_index must be a sequence of integer "
                        f"arrays, one per dimension of dims, not {type(multi_index).__name__}")
    parts = [a if isinstance(a, Array) else np.asarray(a) for a in multi_index]
    dims = (int(dims),) if np.ndim(dims) == 0 else tuple(int(d) for d in dims)
    if len(parts) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(parts)} coordinate arrays for "
                         f"{len(dims)} dimensions {dims}; give one per dimension")
    for n, p in enumerate(parts):
        if p.dtype.kind not in "iu":
            raise TypeError(f"ravel_multi_index: coordinate array #{n} has dtype {p.dtype}; "
                            "it must be an integer array")
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if any(m not in ("raise", "wrap", "clip") for m in modes) or len(modes) not in (
            1, len(dims)):
        raise ValueError(f"ravel_multi_index: mode {mode!r} must be 'raise', 'wrap' or "
                         f"'clip', or one of those per dimension ({len(dims)})")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    return elemwise(_ravel_block, *parts, dtype=np.intp,
                    kwargs={"dims": dims, "mode": mode, "order": order},
                    name="ravel_multi_index")


def _ravel_block(*coords: np.ndarray, dims: tuple[int, ...], mode: Any,
                 order: str) -> np.ndarray:
    coords = np.broadcast_arrays(*coords)
    return np.ravel_multi_index(tuple(coords), dims, mode=mode, order=order)


def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple[Array, ...]:
    """``numpy.unravel_index`` block by block: one integer array per dimension of
    ``shape``, the coordinates of the flat ``indices``; an index out of range fails when
    its block is computed.

    >>> import numpy as np, tilegraph as tg
    >>> rows, cols = tg.unravel_index(tg.from_numpy(np.array([3, 4, 9]), chunks=2), (3, 4))
    >>> rows.compute(), cols.compute()
    (array([0, 1, 2]), array([3, 0, 1]))
    """
    x = indices if isinstance(indices, Array) else asarray(indices)
    if x.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices have dtype {x.dtype}; they must be "
                        "integers")
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: order must be 'C' or 'F', got {order!r}")
    return tuple(elemwise(_unravel_block, x, dtype=np.intp,
                          kwargs={"shape": shape, "order": order, "axis": i},
                          name="unravel_index") for i in range(len(shape)))


def _unravel_block(block: np.ndarray, shape: tuple[int, ...], order: str,
                   axis: int) -> np.ndarray:
    return np.unravel_index(block, shape, order=order)[axis]
