"""The lazy blocked Array and the NumPy-like functions over it (and the sparse arrays of
:mod:`tilegraph.array.sparse`)."""

import functools as _functools
import sys as _sys
import types as _types
from collections.abc import Callable as _Callable
from typing import Any as _Any

from tilegraph.array import api_table as _api_table
from tilegraph.array import dask_names as _dask_names
from tilegraph.array import (
    fft,  # tg.fft (tg.stats and tg.random load when first used)
    ma,
)
from tilegraph.array import lp_arrays as _lp_arrays  # noqa: F401  (LambdaPACK front ends)
from tilegraph.array import manipulation as _manipulation
from tilegraph.array import numpy_functions as _numpy_functions
from tilegraph.array import reductions as _reductions
from tilegraph.array import ufuncs as _ufuncs
from tilegraph.array.blockwise import blockwise, reshape_blockwise
from tilegraph.array.contraction import (
    dot,
    einsum,
    matmul,
    outer,
    semiring_matmul,
    tensordot,
)
from tilegraph.array.core import Array, asarray, compute, from_numpy
from tilegraph.array.creation import arange, eye, full, linspace, ones, zeros
from tilegraph.array.dask_interop import from_dask
from tilegraph.array.dask_names import atop, lib
from tilegraph.array.elementwise import (
    astype,
    elemwise,
    isin,
    isnull,
    map_blocks,
    notnull,
    ravel_multi_index,
    unravel_index,
    where,
)
from tilegraph.array.gufunc import apply_gufunc, as_gufunc, gufunc
from tilegraph.array.indexing import (
    argwhere,
    compress,
    extract,
    flatnonzero,
    nonzero,
    take,
)
from tilegraph.array.io import from_array, from_npy, from_zarr, store, to_npy, to_zarr
from tilegraph.array.io_formats import from_npy_stack, to_hdf5, to_npy_stack
from tilegraph.array.loops import while_loop
from tilegraph.array.lowering import PerformanceWarning
from tilegraph.array.manipulation import concatenate, stack
from tilegraph.array.methods import persist_arrays as persist
from tilegraph.array.methods import visualize_arrays as visualize
from tilegraph.array.numpy_functions import (
    apply_along_axis,
    clip,
    column_stack,
    dstack,
    expand_dims,
    flip,
    hstack,
    moveaxis,
    squeeze,
    vstack,
)
from tilegraph.array.numpy_functions import round_ as round
from tilegraph.array.padding import pad, roll
from tilegraph.array.routines import (
    append,
    apply_over_axes,
    array,
    asanyarray,
    assert_eq,
    block,
    broadcast_arrays,
    choose,
    coarsen,
    delete,
    diag,
    digitize,
    ediff1d,
    empty,
    empty_like,
    fromfunction,
    full_like,
    histogram2d,
    histogramdd,
    indices,
    insert,
    meshgrid,
    moment,
    ndim,
    ones_like,
    piecewise,
    push,
    ravel,
    reduction,
    repeat,
    result_type,
    rollaxis,
    rot90,
    select,
    shape,
    shuffle,
    tile,
    tri,
    tril,
    tril_indices,
    tril_indices_from,
    triu,
    triu_indices,
    triu_indices_from,
    unify_chunks,
    union1d,
    vdot,
    zeros_like,
)
from tilegraph.array.scans import (
    accumulate,
    broadcast_to,
    cumprod,
    cumreduction,
    cumsum,
    diff,
    nancumprod,
    nancumsum,
)
from tilegraph.array.sorting import (
    argsort,
    argtopk,
    searchsorted,
    sort,
    topk,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from tilegraph.array.sparse import SparseArray, from_scipy
from tilegraph.array.statistics import (
    allclose,
    array_equal,
    average,
    bincount,
    corrcoef,
    count_nonzero,
    cov,
    diagonal,
    histogram,
    isclose,
    median,
    nanargmax,
    nanargmin,
    nanmax,
    nanmean,
    nanmedian,
    nanmin,
    nanpercentile,
    nanprod,
    nanquantile,
    nanstd,
    nansum,
    nanvar,
    percentile,
    ptp,
    quantile,
    trace,
)
from tilegraph.array.stencil import map_overlap, overlap, trim_internal
from tilegraph.array.windows import gradient, sliding_window_view

_api_table.install()  # Array's methods, operators and NumPy and dask protocols, bound once


def _via_method(name: str, impl: _Callable) -> _Callable:
    """The top-level ``tilegraph.<name>(x, ...)``: the implementation for dense arrays, the
    array's own method for arrays that define it differently (sparse arrays)."""

    def function(x: _Any, *args: _Any, **kwargs: _Any) -> _Any:
        x = asarray(x)
        if x.is_sparse:
            return getattr(x, name)(*args, **kwargs)
        return impl(x, *args, **kwargs)

    _functools.update_wrapper(function, impl)
    return function


sum = _via_method("sum", _reductions.sum)
prod = _via_method("prod", _reductions.prod)
mean = _via_method("mean", _reductions.mean)
var = _via_method("var", _reductions.var)
std = _via_method("std", _reductions.std)
min = _via_method("min", _reductions.min)
max = _via_method("max", _reductions.max)
argmin = _via_method("argmin", _reductions.argmin)
argmax = _via_method("argmax", _reductions.argmax)
any = _via_method("any", _reductions.any)
all = _via_method("all", _reductions.all)
transpose = _via_method("transpose", _manipulation.transpose)
swapaxes = _via_method("swapaxes", _manipulation.swapaxes)
reshape = _via_method("reshape", _manipulation.reshape)
rechunk = _via_method("rechunk", _manipulation.rechunk)

atleast_1d = _numpy_functions.atleast_nd(1)
atleast_2d = _numpy_functions.atleast_nd(2)
atleast_3d = _numpy_functions.atleast_nd(3)
around = round


def fliplr(m: _Any) -> Array:
    """The array with its columns reversed (axis 1)."""
    return flip(m, 1)


def flipud(m: _Any) -> Array:
    """The array with its rows reversed (axis 0)."""
    return flip(m, 0)


class _CallablePackage(_types.ModuleType):
    """``tilegraph.array`` is this package and, called, dask's ``da.array(...)``
    (:func:`tilegraph.array.routines.array`): ``tg.array`` names both."""

    def __call__(self, *args: _Any, **kwargs: _Any) -> Array:
        return array(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage

# dask.array's ufunc names (NumPy's ufuncs, lazy on tilegraph arrays), its other
# elementwise functions, dtype and constant names, and the names answered with a pointer
globals().update(_ufuncs.UFUNCS)
globals().update(_ufuncs.FUNCTIONS)
globals().update(_dask_names.DTYPES)
globals().update(_dask_names.CONSTANTS)
globals().update(_dask_names.FUNCTIONS)

__all__ = [
    "Array",
    "PerformanceWarning",
    "SparseArray",
    "accumulate",
    "all",
    "allclose",
    "any",
    "append",
    "apply_along_axis",
    "apply_gufunc",
    "apply_over_axes",
    "arange",
    "argmax",
    "argmin",
    "argsort",
    "argtopk",
    "argwhere",
    "around",
    "array",
    "array_equal",
    "as_gufunc",
    "asanyarray",
    "asarray",
    "assert_eq",
    "astype",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "atop",
    "average",
    "bincount",
    "block",
    "blockwise",
    "broadcast_arrays",
    "broadcast_to",
    "choose",
    "clip",
    "coarsen",
    "column_stack",
    "compress",
    "compute",
    "concatenate",
    "corrcoef",
    "count_nonzero",
    "cov",
    "cumprod",
    "cumreduction",
    "cumsum",
    "delete",
    "diag",
    "diagonal",
    "diff",
    "digitize",
    "dot",
    "dstack",
    "ediff1d",
    "einsum",
    "elemwise",
    "empty",
    "empty_like",
    "expand_dims",
    "extract",
    "eye",
    "fft",
    "flatnonzero",
    "flip",
    "fliplr",
    "flipud",
    "from_array",
    "from_dask",
    "from_npy",
    "from_npy_stack",
    "from_numpy",
    "from_scipy",
    "from_zarr",
    "fromfunction",
    "full",
    "full_like",
    "gradient",
    "gufunc",
    "histogram",
    "histogram2d",
    "histogramdd",
    "hstack",
    "indices",
    "insert",
    "isclose",
    "isin",
    "isnull",
    "lib",
    "linspace",
    "ma",
    "map_blocks",
    "map_overlap",
    "matmul",
    "max",
    "mean",
    "median",
    "meshgrid",
    "min",
    "moment",
    "moveaxis",
    "nanargmax",
    "nanargmin",
    "nancumprod",
    "nancumsum",
    "nanmax",
    "nanmean",
    "nanmedian",
    "nanmin",
    "nanpercentile",
    "nanprod",
    "nanquantile",
    "nanstd",
    "nansum",
    "nanvar",
    "ndim",
    "nonzero",
    "notnull",
    "ones",
    "ones_like",
    "outer",
    "overlap",
    "pad",
    "percentile",
    "persist",
    "piecewise",
    "prod",
    "ptp",
    "push",
    "quantile",
    "ravel",
    "ravel_multi_index",
    "rechunk",
    "reduction",
    "repeat",
    "reshape",
    "reshape_blockwise",
    "result_type",
    "roll",
    "rollaxis",
    "rot90",
    "round",
    "searchsorted",
    "select",
    "semiring_matmul",
    "shape",
    "shuffle",
    "sliding_window_view",
    "sort",
    "squeeze",
    "stack",
    "std",
    "store",
    "sum",
    "swapaxes",
    "take",
    "tensordot",
    "tile",
    "to_hdf5",
    "to_npy",
    "to_npy_stack",
    "to_zarr",
    "topk",
    "trace",
    "transpose",
    "tri",
    "tril",
    "tril_indices",
    "tril_indices_from",
    "trim_internal",
    "triu",
    "triu_indices",
    "triu_indices_from",
    "unify_chunks",
    "union1d",
    "unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "unravel_index",
    "var",
    "vdot",
    "visualize",
    "vstack",
    "where",
    "while_loop",
    "zeros",
    "zeros_like",
]
__all__ += sorted({*_ufuncs.UFUNCS, *_ufuncs.FUNCTIONS, *_dask_names.DTYPES,
                    *_dask_names.CONSTANTS, *_dask_names.FUNCTIONS} - set(__all__))
