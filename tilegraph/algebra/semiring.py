"""Semirings for :func:`~tilegraph.algebra.blocks.group_by_join`.

A semiring gives the block-level operations of a contraction: ``product(a, b)`` (the
"multiply" of two blocks, summing over their shared inner index), ``accumulate(acc, a, b)``
(``add(acc, product(a, b))``, in place where possible), and ``add`` (combine two partial
results). ``(+, x)`` is matrix multiplication, done by BLAS; ``(min, +)`` gives shortest
paths, ``(max, x)`` most reliable paths, ``(or, and)`` reachability.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_BLAS_TYPES = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}

# rows of the inner index processed at once by the broadcasting kernels (bounds temporaries)
_SLAB = 64


def matmul_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for two blocks."""
    return np.matmul(a, b)


class _Cblas:
    """The CBLAS ``?gemm`` of the BLAS library NumPy itself uses, called through ctypes.

    ctypes releases the GIL for the call, so workers multiply in parallel (SciPy's BLAS
    wrappers hold the GIL, which serialises them), and CBLAS takes row-major operands with
    any leading dimension, so blocks that are views of a larger array need no copy.
    """

    _CODES = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
              np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}

    def __init__(self) -> None:
        self.lib = self._numpy_blas()
        self.funcs: dict[np.dtype, tuple[Callable, type]] = {}
        for dtype, code in self._CODES.items():
            entry = self.symbol(f"cblas_{code}gemm")
            if entry is not None:
                entry[0].restype = None
                self.funcs[dtype] = entry

    def symbol(self, base: str) -> tuple[Callable, type] | None:
        """``(function, integer type)`` of the routine ``base`` (e.g. ``"cblas_dtrsm"``,
        ``"LAPACKE_dpotrf"``) in NumPy's BLAS library, under its 64-bit-integer or plain
        name, or None."""
        if self.lib is None:
            return None
        for name, int_t in ((f"scipy_{base}64_", ctypes.c_int64),
                            (f"{base}64_", ctypes.c_int64), (base, ctypes.c_int)):
            func = getattr(self.lib, name, None)
            if func is not None:
                return func, int_t
        return None

    @staticmethod
    def _numpy_blas() -> ctypes.CDLL | None:
        try:
            from threadpoolctl import threadpool_info
        except ImportError:  # pragma: no cover - threadpoolctl is a dependency
            return None
        np_dir = os.path.dirname(os.path.dirname(np.__file__))
        for info in threadpool_info():
            path = info.get("filepath", "")
            if info.get("user_api") == "blas" and path.startswith(np_dir) and "numpy" in path:
                try:
                    return ctypes.CDLL(path)
                except OSError:
                    return None
        return None

    @staticmethod
    def _layout(x: np.ndarray) -> tuple[int, int] | None:
        """(transpose flag, leading dimension) of a 2-D operand in row-major terms."""
        item = x.itemsize
        s0, s1 = x.strides
        if s1 == item and s0 % item == 0 and s0 // item >= max(1, x.shape[1]):
            return 111, s0 // item  # no transpose
        if s0 == item and s1 % item == 0 and s1 // item >= max(1, x.shape[0]):
            return 112, s1 // item  # the transpose of a row-major array
        return None

    def accumulate(self, acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
        """``acc += a @ b`` with one gemm (beta = 1); False if the operands do not allow it."""
        entry = self.funcs.get(acc.dtype)
        if entry is None or a.dtype != acc.dtype or b.dtype != acc.dtype:
            return False
        if not (acc.flags.c_contiguous and acc.flags.writeable) or not acc.size:
            return False
        la, lb = self._layout(a), self._layout(b)
        if la is None or lb is None or a.shape[1] == 0:
            return False
        func, int_t = entry
        m, k = a.shape
        n = b.shape[1]
        if acc.dtype.kind == "c":
            one = (ctypes.c_double * 2)(1.0, 0.0) if acc.dtype == np.complex128 else \
                (ctypes.c_float * 2)(1.0, 0.0)
            alpha = beta = ctypes.cast(one, ctypes.c_void_p)
        elif acc.dtype == np.float64:
            alpha = beta = ctypes.c_double(1.0)
        else:
            alpha = beta = ctypes.c_float(1.0)
        func(ctypes.c_int(101), ctypes.c_int(la[0]), ctypes.c_int(lb[0]), int_t(m), int_t(n),
             int_t(k), alpha, ctypes.c_void_p(a.ctypes.data), int_t(la[1]),
             ctypes.c_void_p(b.ctypes.data), int_t(lb[1]), beta,
             ctypes.c_void_p(acc.ctypes.data), int_t(n))
        return True


_cblas: _Cblas | None = None
_cblas_lock = threading.Lock()


def cblas() -> _Cblas:
    """The process's CBLAS binding (found once)."""
    global _cblas
    if _cblas is None:
        with _cblas_lock:
            if _cblas is None:
                _cblas = _Cblas()
    return _cblas


def gemm_accumulate(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``acc += a @ b`` in place: one CBLAS gemm with beta = 1 when the types allow, else a
    NumPy matmul and an add (both release the GIL)."""
    if acc.ndim == 2 and a.ndim == 2 and b.ndim == 2 and cblas().accumulate(acc, a, b):
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
