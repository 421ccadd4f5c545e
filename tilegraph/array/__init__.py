"""The lazy blocked Array and the NumPy-like functions over it (and the sparse arrays of
:mod:`tilegraph.array.sparse`)."""

import functools as _functools
from collections.abc import Callable as _Callable
from typing import Any as _Any

from tilegraph.array import api_table as _api_table
from tilegraph.array import lp_arrays as _lp_arrays  # noqa: F401  (LambdaPACK front ends)
from tilegraph.array import ma
from tilegraph.array import manipulation as _manipulation
from tilegraph.array import reductions as _reductions
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
from tilegraph.array.indexing import (
    argwhere,
    compress,
    extract,
    flatnonzero,
    nonzero,
    take,
)
from tilegraph.array.io import from_array, from_npy, from_zarr, store, to_npy, to_zarr
from tilegraph.array.loops import while_loop
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

__all__ = [
    "Array",
    "SparseArray",
    "accumulate",
    "all",
    "allclose",
    "any",
    "apply_along_axis",
    "arange",
    "argmax",
    "argmin",
    "argsort",
    "argtopk",
    "argwhere",
    "array_equal",
    "asarray",
    "astype",
    "average",
    "bincount",
    "blockwise",
    "broadcast_to",
    "clip",
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
    "diagonal",
    "diff",
    "dot",
    "dstack",
    "einsum",
    "elemwise",
    "expand_dims",
    "extract",
    "eye",
    "flatnonzero",
    "flip",
    "from_array",
    "from_dask",
    "from_npy",
    "from_numpy",
    "from_scipy",
    "from_zarr",
    "full",
    "gradient",
    "histogram",
    "hstack",
    "isclose",
    "isin",
    "isnull",
    "linspace",
    "ma",
    "map_blocks",
    "map_overlap",
    "matmul",
    "max",
    "mean",
    "median",
    "min",
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
    "nonzero",
    "notnull",
    "ones",
    "outer",
    "overlap",
    "pad",
    "percentile",
    "persist",
    "prod",
    "ptp",
    "quantile",
    "ravel_multi_index",
    "rechunk",
    "reshape",
    "reshape_blockwise",
    "roll",
    "round",
    "searchsorted",
    "semiring_matmul",
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
    "to_npy",
    "to_zarr",
    "topk",
    "trace",
    "transpose",
    "trim_internal",
    "unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "unravel_index",
    "var",
    "visualize",
    "vstack",
    "where",
    "while_loop",
    "zeros",
]
