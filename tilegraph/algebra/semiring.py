"""Semirings for :func:`~tilegraph.algebra.blocks.group_by_join`.

A semiring gives the block-level operations of a contraction: ``product(a, b)`` (the
"multiply" of two blocks, summing over their shared inner index), ``accumulate(acc, a, b)``
(``add(acc, product(a, b))``, in place where possible), and ``add`` (combine two partial
results). ``(+, x)`` is matrix multiplication, done by BLAS; ``(min, +)`` gives shortest
paths, ``(max, x)`` most reliable paths, ``(or, and)`` reachability.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_BLAS_TYPES = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}
_gemm_cache: dict[np.dtype, Callable] = {}

# rows of the inner index processed at once by the broadcasting kernels (bounds temporaries)
_SLAB = 64


def matmul_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for two blocks."""
    return np.matmul(a, b)


def _gemm(dtype: np.dtype) -> Callable:
    f = _gemm_cache.get(dtype)
    if f is None:
        from scipy.linalg import blas

        f = _gemm_cache[dtype] = blas.get_blas_funcs("gemm", dtype=dtype)
    return f


def gemm_accumulate(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``acc += a @ b`` in place, with one BLAS gemm (beta=1) when the types allow.

    Row-major blocks are handled as their column-major transposes: ``acc.T += b.T @ a.T``.
    """
    if (
        acc.dtype in _BLAS_TYPES and a.dtype == acc.dtype and b.dtype == acc.dtype
        and acc.ndim == 2 and a.ndim == 2 and b.ndim == 2
        and acc.flags.c_contiguous and acc.flags.writeable and acc.size and a.shape[1]
    ):
        a = np.ascontiguousarray(a)
        b = np.ascontiguousarray(b)
        out = _gemm(acc.dtype)(1.0, b.T, a.T, beta=1.0, c=acc.T, overwrite_c=True)
        if out.ctypes.data != acc.ctypes.data:  # the wrapper had to copy: write back
            acc[...] = out.T
        return acc
    prod = np.matmul(a, b)
    if acc.dtype == prod.dtype and acc.flags.writeable:
        np.add(acc, prod, out=acc)
        return acc
    return acc + prod


def _slab_product(add: np.ufunc, mul: np.ufunc) -> Callable:
    """``C[i, j] = add.reduce_k mul(A[i, k], B[k, j])`` by broadcasting over slabs of k."""

    def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        k = a.shape[1]
        if k == 0:
            raise ValueError("product over an empty inner index")
        out = None
        for s in range(0, k, _SLAB):
            part = add.reduce(mul(a[:, s : s + _SLAB, None], b[None, s : s + _SLAB, :]), axis=1)
            out = part if out is None else add(out, part, out=out)
        return out

    product.__name__ = f"{add.__name__}_{mul.__name__}_product"
    return product


def _slab_accumulate(add: np.ufunc, product: Callable) -> Callable:
    def accumulate(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return add(acc, product(a, b), out=acc)

    accumulate.__name__ = f"{add.__name__}_accumulate"
    return accumulate


@dataclass(frozen=True)
class Semiring:
    """The block operations of a contraction; see the module docstring."""

    name: str
    add: Callable
    product: Callable
    accumulate: Callable
    zero: object

    @classmethod
    def from_ufuncs(cls, name: str, add: np.ufunc, mul: np.ufunc, zero: object) -> Semiring:
        """A semiring of two NumPy ufuncs, e.g. ``(np.minimum, np.add, np.inf)``."""
        product = _slab_product(add, mul)
        return cls(name, add, product, _slab_accumulate(add, product), zero)


PLUS_TIMES = Semiring("plus_times", np.add, matmul_block, gemm_accumulate, 0)
MIN_PLUS = Semiring.from_ufuncs("min_plus", np.minimum, np.add, np.inf)
MAX_PLUS = Semiring.from_ufuncs("max_plus", np.maximum, np.add, -np.inf)
MAX_TIMES = Semiring.from_ufuncs("max_times", np.maximum, np.multiply, 0)
OR_AND = Semiring.from_ufuncs("or_and", np.logical_or, np.logical_and, False)

SEMIRINGS = {s.name: s for s in (PLUS_TIMES, MIN_PLUS, MAX_PLUS, MAX_TIMES, OR_AND)}
