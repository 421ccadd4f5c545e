"""The checks and small pieces the blocked linear algebra modules share
(:mod:`tilegraph.array.linalg`, :mod:`tilegraph.array.linalg_lu`): the float dtype a
factorisation computes in, a 2-D or square matrix made of any input, block offsets, and the
kernels that make a zero tile and cut rows out of a tile."""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.algebra import linalg_kernels as kern
from tilegraph.algebra.grid import Kernel, TaskGrid
from tilegraph.array.core import Array, asarray


def float_dtype(dtype: np.dtype, op: str) -> np.dtype:
    """The LAPACK dtype ``op`` computes in for inputs of ``dtype``: float64 for integers
    and booleans, float32/float64 or complex64/complex128 by size; a TypeError naming
    ``op`` for anything else."""
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize <= 4 else np.dtype(np.float64)
    if dtype.kind == "c":
        return np.dtype(np.complex64) if dtype.itemsize <= 8 else np.dtype(np.complex128)
    raise TypeError(f"{op}: arrays of dtype {dtype} are not supported (use numbers)")


def as_matrix(a: Any, op: str) -> Array:
    """``a`` as a 2-D Array of its :func:`float_dtype` (a ValueError naming ``op`` when
    it is not 2-D)."""
    a = asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{op}: expected a 2-D matrix, got an array of shape {a.shape} "
                         f"({a.ndim}-D); stacks of matrices are not supported")
    dtype = float_dtype(a.dtype, op)
    return a if a.dtype == dtype else a.astype(dtype)


def as_square(a: Any, op: str) -> Array:
    """``a`` as a square matrix whose two axes have the same blocks (the row blocks)."""
    a = as_matrix(a, op)
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"{op}: expected a square matrix, got shape {a.shape}")
    if a.chunks[1] != a.chunks[0]:
        a = a.rechunk((a.chunks[0], a.chunks[0]))
    return a


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The real dtype of the same precision (singular values, norms, log-determinants)."""
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def block_offsets(sizes: tuple[int, ...]) -> list[int]:
    """Where each block of an axis starts, and the axis' length last."""
    return np.cumsum([0, *sizes]).tolist()


ZEROS = Kernel(kern.zeros, "creation", "zeros")  # a tile of zeros


def zero_tile(g: TaskGrid, tile: tuple, rows: int, cols: int, dtype: np.dtype) -> None:
    """Record in ``g`` the task that makes ``tile`` a ``rows x cols`` block of zeros."""
    g.call(ZEROS, tile, args=((rows, cols), dtype), nbytes=dtype.itemsize * rows * cols)


ROWS = Kernel(kern.rows, "getitem", "rows")  # rows [start, stop) of a tile

