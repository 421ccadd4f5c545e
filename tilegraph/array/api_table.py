"""The one table of :class:`~tilegraph.array.core.Array`'s methods, operators and NumPy
protocols.

:mod:`tilegraph.array.core` defines the Array itself (its graph node, shape, chunks and
dtype, and how it computes) and knows no operation. The operations live in their modules
(:mod:`~tilegraph.array.elementwise`, :mod:`~tilegraph.array.reductions`,
:mod:`~tilegraph.array.manipulation`, ...), which import the core; this module imports them
and binds them onto Array once (:func:`install`, called by :mod:`tilegraph.array`). A method
is defined in exactly one place: here when it is a thin wrapper over an operation (argument
habits of ``numpy.ndarray`` methods), in :mod:`~tilegraph.array.methods` for the NumPy and
dask habits with code of their own, in :mod:`~tilegraph.array.dask_interop` for the dask
collection protocol, and NumPy's ``NDArrayOperatorsMixin`` for the operators (``+``, ``@``,
``<``, ...), which call :func:`array_ufunc`. Subclasses (the sparse arrays) override in
their own class body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

import tilegraph.array.dask_interop as dask_interop
import tilegraph.array.dask_names as dask_names
import tilegraph.array.elementwise as elementwise
import tilegraph.array.fft as fft
import tilegraph.array.gufunc as gufunc
import tilegraph.array.methods as methods
import tilegraph.array.numpy_functions as numpy_functions
import tilegraph.array.numpy_linalg as numpy_linalg
import tilegraph.array.reductions as reductions
import tilegraph.array.routines as routines
import tilegraph.array.scans as scans
from tilegraph.array.contraction import dot as _dot
from tilegraph.array.contraction import matmul as _matmul
from tilegraph.array.core import Array, register_lazy_source
from tilegraph.array.indexing import getitem as _getitem
from tilegraph.array.indexing import nonzero as _nonzero
from tilegraph.array.indexing import take as _take
from tilegraph.array.io import from_array, is_lazy_source
from tilegraph.array.io import to_npy as _to_npy
from tilegraph.array.io import to_zarr as _to_zarr
from tilegraph.array.manipulation import rechunk as _rechunk
from tilegraph.array.manipulation import reshape as _reshape
from tilegraph.array.manipulation import swapaxes as _swapaxes
from tilegraph.array.manipulation import transpose as _transpose
from tilegraph.array.sorting import argsort as _argsort
from tilegraph.array.sorting import argtopk as _argtopk
from tilegraph.array.sorting import searchsorted as _searchsorted
from tilegraph.array.sorting import topk as _topk
from tilegraph.array.statistics import diagonal as _diagonal
from tilegraph.array.statistics import ptp as _ptp
from tilegraph.array.statistics import trace as _trace
from tilegraph.array.stencil import map_overlap as _map_overlap

# -- NumPy protocols -------------------------------------------------------------------------


def array_ufunc(self: Array, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any
                ) -> Any:
    """NumPy's ufuncs on Arrays: calls block by block (``matmul`` as a contraction, a
    generalized ufunc such as ``np.vecdot`` or a numba ``@guvectorize`` function by
    :func:`~tilegraph.array.gufunc.apply_gufunc` with its signature), ``reduce`` as a tree
    reduction, ``accumulate`` as a blocked scan, ``outer`` as a broadcast."""
    if kwargs.get("out") is not None:
        raise TypeError(f"{ufunc.__name__}: out= is not supported on tilegraph arrays "
                        "(arrays are lazy; use the returned array, or x[...] = result)")
    kwargs.pop("out", None)
    if method == "__call__":
        if ufunc is np.matmul and not kwargs:
            return _matmul(*inputs)
        if ufunc.signature is not None:
            return gufunc.ufunc_call(ufunc, *inputs, **kwargs)
        return elementwise.apply_ufunc(ufunc, *inputs, **kwargs)
    if method == "reduce":
        return reductions.ufunc_reduce(ufunc, *inputs, **kwargs)
    if method == "accumulate":
        return scans.accumulate(ufunc, *inputs, **kwargs)
    if method == "outer":
        return elementwise.ufunc_outer(ufunc, *inputs, **kwargs)
    raise TypeError(f"{ufunc.__name__}.{method} is not supported on tilegraph arrays; "
                    "call .compute() first")


def array_function(self: Array, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
    """NumPy's functions on Arrays, by the table
    :data:`tilegraph.array.numpy_functions.IMPLEMENTATIONS`; a function not in it runs on
    the values of 0-d arrays passed as numbers
    (:func:`~tilegraph.array.numpy_functions.call_with_scalars`) and is refused, naming
    the alternative, for any other array."""
    impl = numpy_functions.IMPLEMENTATIONS.get(func)
    if impl is None:
        out = numpy_functions.call_with_scalars(func, args, kwargs)
        if out is NotImplemented:
            raise numpy_functions.unsupported(func)
        return out
    return impl(*args, **kwargs)


def _is_lazy(x: Any) -> bool:
    """Whether :func:`~tilegraph.array.core.asarray` must not read ``x`` (a dask array, an
    h5py or zarr array): :func:`~tilegraph.array.io.from_array` takes it block by block."""
    return hasattr(type(x), "__dask_graph__") or is_lazy_source(x)


# -- methods: the argument habits of numpy.ndarray over the operations ------------------------


def __getitem__(self: Array, index: Any) -> Array:
    """``x[index]``: basic indexing, integer arrays and boolean masks (lazy)."""
    return _getitem(self, index)


def T(self: Array) -> Array:
    """The transpose (axes reversed)."""
    return self.transpose()


def mT(self: Array) -> Array:
    """The transpose of the last two axes (a stack of matrices)."""
    return self.swapaxes(-1, -2)


def transpose(self: Array, *axes: Any) -> Array:
    """The axes permuted (reversed by default), like ``numpy.ndarray.transpose``."""
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list, np.ndarray))):
        axes = axes[0]
    return _transpose(self, None if axes is None or len(axes) == 0 else axes)


def swapaxes(self: Array, a: int, b: int) -> Array:
    """Axes ``a`` and ``b`` exchanged."""
    return _swapaxes(self, a, b)


def reshape(self: Array, *shape: Any, **kwargs: Any) -> Array:
    """The array in a new shape (row-major), like ``numpy.ndarray.reshape``."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, np.ndarray)):
        shape = tuple(np.asarray(shape[0]).tolist())
    return _reshape(self, shape, **kwargs)


def ravel(self: Array) -> Array:
    """The array as one axis, in row-major order."""
    return self.reshape(-1)


def rechunk(self: Array, chunks: Any, *, max_mem: Any = None) -> Array:
    """The same values in new blocks (``chunks`` as in :func:`from_numpy`); a rechunk
    whose tasks would hold more than ``max_mem`` bytes is planned in stages
    (:func:`tilegraph.array.manipulation.rechunk`)."""
    return _rechunk(self, chunks, max_mem=max_mem)


def astype(self: Array, dtype: Any, copy: bool = True, casting: str = "unsafe") -> Array:
    """``x`` converted to ``dtype`` block by block (``casting`` as in NumPy)."""
    return elementwise.astype(self, dtype, copy=copy, casting=casting)


def map_blocks(self: Array, func: Callable, *args: Any, **kwargs: Any) -> Array:
    """``func`` applied to every block (see :func:`tilegraph.map_blocks`)."""
    return elementwise.map_blocks(func, self, *args, **kwargs)


def map_overlap(self: Array, func: Callable, depth: Any, boundary: Any = None,
                trim: bool = True, **kwargs: Any) -> Array:
    """``func`` on every block extended by ``depth`` neighbouring elements, as dask's
    ``Array.map_overlap`` (see :func:`tilegraph.map_overlap`)."""
    return _map_overlap(func, self, depth=depth, boundary=boundary, trim=trim, **kwargs)


def dot(self: Array, other: Any) -> Array:
    """The dot product with ``other`` (see :func:`tilegraph.dot`)."""
    return _dot(self, other)


def to_zarr(self: Array, path: str, **options: Any) -> None:
    """Compute and write the array to a Zarr store at ``path``."""
    return _to_zarr(self, path, **options)


def to_npy(self: Array, path: str, **options: Any) -> None:
    """Compute and write the array to a ``.npy`` file at ``path``."""
    return _to_npy(self, path, **options)


def conj(self: Array) -> Array:
    """The complex conjugate, elementwise."""
    return np.conjugate(self)


def real(self: Array) -> Array:
    """The real part, elementwise."""
    return np.real(self)


def imag(self: Array) -> Array:
    """The imaginary part, elementwise."""
    return np.imag(self)


def _reduction_method(name: str) -> Callable:
    impl = getattr(reductions, name)

    def method(self: Array, *args: Any, **kwargs: Any) -> Array:
        return impl(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Like ``numpy.ndarray.{name}``, computed blockwise with a tree reduction."
    method.operation = impl  # what it calls (tilegraph.api_index lists it)
    return method


def _scan_method(name: str) -> Callable:
    impl = getattr(scans, name)

    def method(self: Array, axis: Any = None, dtype: Any = None) -> Array:
        return impl(self, axis=axis, dtype=dtype)

    method.__name__ = name
    method.__doc__ = f"Like ``numpy.ndarray.{name}``, a blocked scan (flattened by default)."
    method.operation = impl
    return method


def squeeze(self: Array, axis: Any = None) -> Array:
    """Remove axes of length one."""
    return numpy_functions.squeeze(self, axis)


def clip(self: Array, min: Any = None, max: Any = None) -> Array:
    """Values limited to ``[min, max]``, block by block."""
    return numpy_functions.clip(self, min, max)


def round(self: Array, decimals: int = 0) -> Array:
    """Values rounded to ``decimals`` decimals, block by block."""
    return numpy_functions.round_(self, decimals)


def argsort(self: Array, axis: Any = -1, kind: Any = None, order: Any = None) -> Array:
    """The indices that sort the array along ``axis`` (see :func:`tilegraph.argsort`)."""
    return _argsort(self, axis, kind, order)


def nonzero(self: Array) -> tuple[Array, ...]:
    """The indices of the non-zero elements, one array per axis (two-phase)."""
    return _nonzero(self)


def searchsorted(self: Array, v: Any, side: str = "left") -> Array:
    """Where the values ``v`` would go in this sorted 1-d array."""
    return _searchsorted(self, v, side)


def take(self: Array, indices: Any, axis: Any = None) -> Array:
    """The elements at ``indices`` along ``axis`` (see :func:`tilegraph.take`)."""
    return _take(self, indices, axis)


def trace(self: Array, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None
          ) -> Array:
    """Sum of the main diagonal."""
    return _trace(self, offset, axis1, axis2, dtype)


def diagonal(self: Array, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The main diagonal of a 2-d array."""
    return _diagonal(self, offset, axis1, axis2)


def ptp(self: Array, axis: Any = None, keepdims: bool = False) -> Array:
    """Maximum minus minimum along ``axis``."""
    return _ptp(self, axis, keepdims=keepdims)


def topk(self: Array, k: int, axis: int = -1, split_every: Any = None) -> Array:
    """The ``k`` largest elements along ``axis``, descending (see :func:`tilegraph.topk`)."""
    return _topk(self, k, axis=axis)


def argtopk(self: Array, k: int, axis: int = -1, split_every: Any = None) -> Array:
    """The indices of :meth:`topk`'s elements (see :func:`tilegraph.argtopk`)."""
    return _argtopk(self, k, axis=axis)


def choose(self: Array, choices: Any) -> Array:
    """The elements of ``choices`` that the indices in this array pick (see
    :func:`tilegraph.choose`)."""
    from tilegraph.array.routines import choose as _choose

    return _choose(self, choices)


def repeat(self: Array, repeats: Any, axis: Any = None) -> Array:
    """Each element repeated ``repeats`` times along ``axis`` (see
    :func:`tilegraph.repeat`)."""
    from tilegraph.array.routines import repeat as _repeat

    return _repeat(self, repeats, axis)


def moment(self: Array, order: int, axis: Any = None, dtype: Any = None,
           keepdims: bool = False, ddof: int = 0, split_every: Any = None,
           out: Any = None) -> Array:
    """The ``order``-th central moment (see :func:`tilegraph.moment`)."""
    from tilegraph.array.routines import moment as _moment

    return _moment(self, order, axis, dtype, keepdims, ddof, split_every, out)


def shuffle(self: Array, indexer: Any, axis: int, chunks: Any = "auto") -> Array:
    """The array reordered along ``axis`` by groups of positions (see
    :func:`tilegraph.shuffle`)."""
    from tilegraph.array.routines import shuffle as _shuffle

    return _shuffle(self, indexer, axis, chunks)


def A(self: Array) -> Array:
    """The array itself (dask's, for code written for ``numpy.matrix``)."""
    return self


def __format__(self: Array, spec: str) -> str:
    """``format(x, ".3f")`` of a 0-d array formats its value (computed); an empty spec, or
    an array of one dimension or more, formats as ``str(x)``."""
    if spec and self.ndim == 0:
        return format(self.compute(), spec)
    if spec:
        raise TypeError(f"unsupported format string {spec!r} passed to a tilegraph Array of "
                        f"shape {self.shape} (only a 0-d array formats its value)")
    return str(self)


def __array_namespace__(self: Array, *, api_version: str | None = None) -> Any:
    """The Array API namespace of tilegraph arrays (:mod:`tilegraph.array.array_api`,
    also ``tilegraph.array_api``)."""
    if api_version not in (None, "2021.12", "2022.12", "2023.12"):
        raise ValueError(f"__array_namespace__: api_version {api_version!r} is not "
                         "supported (2023.12 and earlier)")
    import tilegraph.array.array_api as xp  # loaded when first asked for

    return xp


def __setitem__(self: Array, index: Any, value: Any) -> None:
    """``x[index] = value``: ``x`` is rebound to a new lazy plan with ``value`` written at
    ``index`` (see :mod:`tilegraph.array.assignment`). Only the blocks the index touches get
    new tasks; arrays built from ``x`` earlier keep the old values."""
    from tilegraph.array.assignment import assign  # loaded when first used

    new = assign(self, index, value)
    self.collection = new.collection
    self.chunks = new.chunks


# -- the table --------------------------------------------------------------------------------

_OPERATORS = {name: value for name, value in vars(NDArrayOperatorsMixin).items()
              if name not in ("__module__", "__doc__", "__slots__")
              and not (name.startswith("__i") and name[3:-2] in methods.INPLACE)}

_REDUCTIONS = ("sum", "prod", "mean", "var", "std", "min", "max", "argmin", "argmax", "any",
               "all")

TABLE: dict[str, Any] = {
    # NumPy protocols and operators (``__hash__`` is None: arrays compare elementwise)
    "__array_ufunc__": array_ufunc,
    "__array_function__": array_function,
    **_OPERATORS,
    **{f"__i{name}__": methods.inplace(name) for name in methods.INPLACE},
    "__array_namespace__": __array_namespace__,
    "__index__": methods.__index__,
    "__dlpack__": methods.__dlpack__,
    "__dlpack_device__": methods.__dlpack_device__,
    "__reduce__": methods.__reduce__,
    # indexing
    "__getitem__": __getitem__,
    "__setitem__": __setitem__,
    "blocks": property(methods.blocks),
    "vindex": property(methods.vindex),
    "oindex": property(methods.oindex),
    "take": take,
    "nonzero": nonzero,
    # shape and blocks
    "T": property(T),
    "mT": property(mT),
    "transpose": transpose,
    "swapaxes": swapaxes,
    "reshape": reshape,
    "ravel": ravel,
    "flatten": methods.flatten,
    "squeeze": squeeze,
    "rechunk": rechunk,
    # elementwise
    "astype": astype,
    "map_blocks": map_blocks,
    "map_overlap": map_overlap,
    "conj": conj,
    "real": property(real),
    "imag": property(imag),
    "clip": clip,
    "round": round,
    # reductions, scans, sorting, statistics, products
    **{name: _reduction_method(name) for name in _REDUCTIONS},
    "cumsum": _scan_method("cumsum"),
    "cumprod": _scan_method("cumprod"),
    "argsort": argsort,
    "searchsorted": searchsorted,
    "topk": topk,
    "argtopk": argtopk,
    "trace": trace,
    "diagonal": diagonal,
    "ptp": ptp,
    "dot": dot,
    # results, files, devices
    "choose": choose,
    "repeat": repeat,
    "moment": moment,
    "shuffle": shuffle,
    "view": methods.view,
    "A": property(A),
    "partitions": property(methods.blocks),
    "compute_chunk_sizes": methods.compute_chunk_sizes,
    "__format__": __format__,
    "store": methods.store,
    "to_hdf5": methods.to_hdf5,
    **dask_names.METHODS,
    "persist": methods.persist,
    "tolist": methods.tolist,
    "item": methods.item,
    "to_zarr": to_zarr,
    "to_npy": to_npy,
    "to_dot": methods.to_dot,
    "visualize": methods.visualize,
    "to_device": methods.to_device,
    "device": property(methods.device),
    # the dask collection protocol
    **dask_interop.PROTOCOL,
}


def install() -> None:
    """Bind the table onto :class:`Array` (idempotent) and let
    :func:`~tilegraph.array.core.asarray` take lazy array-likes block by block."""
    for name, value in TABLE.items():
        setattr(Array, name, value)
    register_lazy_source(_is_lazy, from_array)
    # the NumPy functions whose modules import numpy_functions join its table here
    numpy_functions.IMPLEMENTATIONS.update(numpy_linalg.IMPLEMENTATIONS)
    numpy_functions.IMPLEMENTATIONS.update(routines.NUMPY_FUNCTIONS)
    numpy_functions.IMPLEMENTATIONS.update(
        {getattr(np.fft, name): getattr(fft, name) for name in fft.__all__
         if name != "fft_wrap"})


__all__ = ["TABLE", "array_function", "array_ufunc", "install"]
