"""The lazy blocked Array and the NumPy-like functions over it (and the sparse arrays of
:mod:`tilegraph.array.sparse`)."""

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
from tilegraph.array.elementwise import astype, elemwise, map_blocks, where
from tilegraph.array.io import from_npy, from_zarr, to_npy, to_zarr
from tilegraph.array.loops import while_loop
from tilegraph.array.manipulation import (
    concatenate,
    rechunk,
    reshape,
    stack,
    swapaxes,
    transpose,
)
from tilegraph.array.reductions import (
    all,
    any,
    argmax,
    argmin,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from tilegraph.array.sparse import SparseArray, from_scipy

__all__ = [
    "Array", "SparseArray", "all", "any", "arange", "argmax", "argmin", "asarray", "astype",
    "compute", "concatenate", "dot", "einsum", "elemwise", "eye", "from_npy", "from_numpy",
    "from_scipy", "from_zarr", "full", "linspace", "map_blocks", "matmul", "max", "mean", "min",
    "ones", "outer", "prod", "rechunk", "reshape", "semiring_matmul", "stack", "std", "sum",
    "swapaxes", "tensordot", "to_npy", "to_zarr", "transpose", "var", "where", "while_loop",
    "zeros",
]
