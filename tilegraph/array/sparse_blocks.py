"""Sparse blocks: their formats and dtypes, their sizes and expected densities, and the block
kernels shared by :mod:`tilegraph.array.sparse` (sparse arrays) and
:mod:`tilegraph.array.contraction` (the matmul lowering with a sparse operand).

A sparse block is a ``scipy.sparse.csr_array`` (format ``"csr"``) or ``csc_array`` (format
``"csc"``). Densities are expected fractions of stored entries, ``None`` when unknown; the
nbytes functions give the per-block ``nbytes`` metadata of a plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sps

from tilegraph.array.chunks import Chunks, block_shape

#: The formats of sparse blocks.
FORMATS = ("csr", "csc")
#: The SciPy class of the blocks of each format.
BLOCK_CLASSES = {"csr": sps.csr_array, "csc": sps.csc_array}


# -- checks -----------------------------------------------------------------------------------


def check_format(op: str, fmt: Any) -> str:
    """``fmt`` if it is a format of sparse blocks (``"csr"`` or ``"csc"``), else a ValueError
    naming ``op``."""
    if fmt not in FORMATS:
        raise ValueError(f"{op}: format must be 'csr' or 'csc', got {fmt!r}")
    return fmt


def check_dtype(op: str, dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy dtype if SciPy's sparse arrays hold it, else a TypeError naming
    ``op``.

    >>> check_dtype("matmul", "f8")
    dtype('float64')
    """
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{op}: {dtype!r} is not a dtype") from exc
    if dtype.kind not in "biufc" or dtype == np.float16:
        raise TypeError(
            f"{op}: dtype {dtype} is not supported for sparse arrays (scipy.sparse holds "
            "bool, integers, float32, float64 and complex values); use float32 or float64")
    return dtype


# -- sizes and densities ----------------------------------------------------------------------


def index_itemsize(*sizes: int) -> int:
    """Bytes of one index of a SciPy sparse array with these dimensions and entries."""
    return 4 if max(sizes, default=0) < 2**31 - 1 else 8


def sparse_block_nbytes(shape: Sequence[int], nnz: int, dtype: Any, fmt: str) -> int:
    """Bytes of a CSR (CSC) array of ``shape`` holding ``nnz`` stored entries: its ``data``,
    ``indices`` and ``indptr`` arrays.

    >>> sparse_block_nbytes((4, 5), 3, "float64", "csr")  # 3 * (8 + 4) + 5 * 4
    56
    """
    if fmt not in FORMATS:
        raise ValueError(f"sparse_block_nbytes: format must be 'csr' or 'csc', got {fmt!r}")
    m, n = (int(s) for s in shape)
    nnz = int(nnz)
    if nnz < 0 or m < 0 or n < 0:
        raise ValueError(f"sparse_block_nbytes: shape {tuple(shape)} and nnz {nnz} must not "
                         "be negative")
    idx = index_itemsize(m, n, nnz)
    major = m if fmt == "csr" else n
    return nnz * (np.dtype(dtype).itemsize + idx) + (major + 1) * idx


def expected_nbytes(chunks: Chunks, density: float | None, dtype: np.dtype, fmt: str
                    ) -> Callable[[tuple[int, ...]], int | None]:
    """Per-block nbytes metadata: the sparse size at ``density`` (None when unknown)."""

    def nbytes(coord: tuple[int, ...]) -> int | None:
        if density is None:
            return None
        m, n = block_shape(chunks, coord)
        return sparse_block_nbytes((m, n), round(density * m * n), dtype, fmt)

    return nbytes


def dense_nbytes(chunks: Chunks, dtype: np.dtype) -> Callable[[tuple[int, ...]], int]:
    """Per-block nbytes metadata of dense (NumPy) blocks of ``dtype`` on ``chunks``."""
    itemsize = dtype.itemsize
    return lambda c: itemsize * math.prod(block_shape(chunks, c))


def union_density(a: float | None, b: float | None) -> float | None:
    """Expected density of the sum of two independent random patterns (None when either
    is unknown)."""
    if a is None or b is None:
        return None
    return min(1.0, a + b - a * b)


def product_density(a: float | None, b: float | None, inner: int) -> float | None:
    """Expected density of a product of independent random patterns with ``inner`` terms
    (None when either density is unknown)."""
    if a is None or b is None:
        return None
    if inner == 0:
        return 0.0
    return float(-math.expm1(inner * math.log1p(-min(a * b, 1.0)))) if a * b < 1 else 1.0


# -- block kernels (module level so that process backends can pickle them) ---------------------


def empty_block(shape: tuple[int, int], dtype: np.dtype, fmt: str) -> Any:
    """A ``fmt`` block of ``shape`` and ``dtype`` without stored entries (the zero of a
    sparse product)."""
    return BLOCK_CLASSES[fmt](shape, dtype=dtype)
