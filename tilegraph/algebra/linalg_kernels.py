"""Block kernels of the blocked linear algebra: LAPACK and BLAS calls that release the GIL.

The tasks of :mod:`tilegraph.array.linalg` call these on one block (or a few). Where NumPy's
own OpenBLAS exports them, they are called through ctypes (CBLAS ``?trsm``, ``?syrk``/
``?herk``, ``?gemm`` and LAPACKE ``?potrf``): ctypes releases the GIL, so the workers factor
and update blocks in parallel, and CBLAS takes row-major operands with any leading
dimension, so views need no copy. SciPy's wrappers of the same routines hold the GIL, which
would serialise the workers; they are the fallback when the symbols are not found. Kernels
that write in place say so and take ``copy=``; the task grid that plans them passes
``copy=False`` only for a block no other task reads (:mod:`tilegraph.algebra.grid`).

The second half holds the kernels of QR, SVD, LU and determinants, NumPy and SciPy calls on
a few blocks, and the small pieces (pick one part of a kernel's result, slice rows) that
the plans put between them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.algebra.semiring import cblas

_ROW_MAJOR = 101
_NO_TRANS, _TRANS, _CONJ_TRANS = 111, 112, 113
_UPPER, _LOWER = 121, 122
_NON_UNIT, _UNIT = 131, 132
_LEFT, _RIGHT = 141, 142
CODES = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
          np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}


class LinAlgError(np.linalg.LinAlgError):
    """A blocked factorisation failed (singular or not positive definite), naming the
    block where it was detected. A subclass of ``numpy.linalg.LinAlgError``."""


class _Lib:
    """CBLAS/LAPACKE entry points of NumPy's BLAS library (found by
    :meth:`~tilegraph.algebra.semiring._Cblas.symbol`), looked up once each."""

    def __init__(self) -> None:
        self.funcs: dict[str, tuple[Callable, type] | None] = {}

    def get(self, base: str) -> tuple[Callable, type] | None:
        if base not in self.funcs:
            entry = cblas().symbol(base)
            if entry is not None:  # LAPACKE returns lapack_int; CBLAS returns nothing
                entry[0].restype = entry[1] if base.startswith("LAPACKE") else None
            self.funcs[base] = entry
        return self.funcs[base]


_lib: _Lib | None = None


def _library() -> _Lib:
    global _lib
    if _lib is None:
        _lib = _Lib()
    return _lib


def lapacke(base: str) -> tuple[Callable, type] | None:
    """``(function, integer type)`` of the CBLAS or LAPACKE routine ``base`` (e.g.
    ``"LAPACKE_dgeqrt_work"``) in NumPy's BLAS library, or None when it is not there."""
    return _library().get(base)


def _scalar(dtype: np.dtype, value: complex) -> Any:
    """A BLAS scalar argument: by value for real types, by pointer for complex."""
    if dtype.kind == "c":
        pair = (ctypes.c_double * 2) if dtype == np.complex128 else (ctypes.c_float * 2)
        return ctypes.cast(pair(value.real, value.imag), ctypes.c_void_p)
    return ctypes.c_double(value.real) if dtype == np.float64 else ctypes.c_float(value.real)


def _real(dtype: np.dtype, value: float) -> Any:
    return ctypes.c_double(value) if dtype in (np.float64, np.complex128) else \
        ctypes.c_float(value)


def address(x: np.ndarray) -> ctypes.c_void_p:
    """The address of ``x``'s data, for a BLAS or LAPACKE call (the caller keeps ``x``
    alive through the call)."""
    return ctypes.c_void_p(x.ctypes.data)


def _row_major(x: np.ndarray) -> bool:
    return x.flags.c_contiguous or (x.strides[1] == x.itemsize
                                    and x.strides[0] >= x.shape[1] * x.itemsize)


def _ld(x: np.ndarray) -> int:
    return max(1, x.strides[0] // x.itemsize) if x.shape[0] > 1 else max(1, x.shape[1])


def _private(x: np.ndarray, copy: bool) -> np.ndarray:
    """``x`` itself when it may be written in place, else a C-ordered copy."""
    if copy or not x.flags.writeable or not x.flags.c_contiguous:
        return np.array(x, order="C", copy=True)
    return x


# -- Cholesky -------------------------------------------------------------------------------


def potrf(a: np.ndarray, where: Any = None) -> np.ndarray:
    """The lower Cholesky factor of the Hermitian positive definite block ``a`` (a new
    array, zero above the diagonal). Raises :class:`LinAlgError` naming ``where``."""
    import scipy.linalg

    out = np.array(a, order="C", copy=True)
    n = out.shape[0]
    entry = _library().get(f"LAPACKE_{CODES.get(out.dtype, '?')}potrf")
    if entry is not None and n:
        func, int_t = entry
        # row-major lower = column-major upper of the transpose: ask for 'L' row-major
        info = func(ctypes.c_int(_ROW_MAJOR), ctypes.c_char(b"L"), int_t(n), address(out),
                    int_t(n))
    else:
        try:
            out = scipy.linalg.cholesky(out, lower=True, check_finite=False)
            info = 0
        except np.linalg.LinAlgError:
            info = 1
    if info < 0 and not np.isfinite(out).all():  # LAPACKE refuses NaN/inf as argument 4
        raise LinAlgError(f"cholesky: the matrix has NaN or infinite values (found in diagonal "
                          f"block {where}, after the updates by the blocks before it)")
    if info > 0:
        raise LinAlgError(f"cholesky: the matrix is not positive definite (detected in "
                          f"diagonal block {where}, leading minor {info} of the block)")
    if info < 0:  # pragma: no cover - a bad argument is a bug here
        raise RuntimeError(f"LAPACKE potrf: argument {-info} was illegal")
    return np.tril(out) if n else out


def trsm(t: np.ndarray, b: np.ndarray, *, side: str, lower: bool, trans: str = "N",
         unit: bool = False, alpha: float = 1.0, copy: bool = True) -> np.ndarray:
    """Solve ``op(t) @ x = alpha * b`` (``side="L"``) or ``x @ op(t) = alpha * b``
    (``side="R"``) for x, with ``t`` triangular and ``op`` one of N, T, C. Returns x,
    written over ``b`` unless ``copy``."""
    dtype = np.result_type(t.dtype, b.dtype)
    if dtype not in CODES:
        dtype = np.dtype(np.float64)
    x = _private(b.astype(dtype, copy=False), copy or b.dtype != dtype)
    if not x.size:
        return x
    t = t.astype(dtype, copy=False)
    if not _row_major(t):
        t = np.ascontiguousarray(t)
    entry = _library().get(f"cblas_{CODES[dtype]}trsm")
    if entry is None:
        return _trsm_scipy(t, x, side, lower, trans, unit, alpha)
    func, int_t = entry
    m, n = x.shape
    opc = {"N": _NO_TRANS, "T": _TRANS, "C": _CONJ_TRANS}[trans]
    func(ctypes.c_int(_ROW_MAJOR), ctypes.c_int(_LEFT if side == "L" else _RIGHT),
         ctypes.c_int(_LOWER if lower else _UPPER), ctypes.c_int(opc),
         ctypes.c_int(_UNIT if unit else _NON_UNIT), int_t(m), int_t(n),
         _scalar(dtype, alpha), address(t), int_t(_ld(t)), address(x), int_t(_ld(x)))
    return x


def _trsm_scipy(t: np.ndarray, x: np.ndarray, side: str, lower: bool, trans: str,
                unit: bool, alpha: float) -> np.ndarray:
    import scipy.linalg

    code = {"N": 0, "T": 1, "C": 2}[trans]
    if side == "L":
        x[...] = scipy.linalg.solve_triangular(t, alpha * x, lower=lower, trans=code,
                                               unit_diagonal=unit, check_finite=False)
    else:  # x op(t) = b  <=>  op(t)^T x^T = b^T
        flip = {0: 1, 1: 0, 2: 0}[code]
        rhs = alpha * (x.T if trans != "C" else x.conj().T)
        sol = scipy.linalg.solve_triangular(t, rhs, lower=lower, trans=flip,
                                            unit_diagonal=unit, check_finite=False)
        x[...] = sol.T if trans != "C" else sol.conj().T
    return x


def gemm_update(c: np.ndarray, a: np.ndarray, b: np.ndarray, *, trans_b: str = "N",
                alpha: float = -1.0, copy: bool = False) -> np.ndarray:
    """``c + alpha * a @ op(b)`` (op: N, T or C), written over ``c`` unless ``copy``."""
    dtype = np.result_type(c.dtype, a.dtype, b.dtype)
    out = _private(c.astype(dtype, copy=False), copy or c.dtype != dtype)
    if not out.size or a.shape[1] == 0:
        return out
    bb = b if trans_b == "N" else (b.T if trans_b == "T" else b.conj().T)
    entry = cblas().funcs.get(dtype)
    la = cblas()._layout(a) if a.dtype == dtype else None
    lb = cblas()._layout(bb) if bb.dtype == dtype else None
    if entry is None or la is None or lb is None:
        out += alpha * (a @ bb)
        return out
    func, int_t = entry
    m, k = a.shape
    n = bb.shape[1]
    func(ctypes.c_int(_ROW_MAJOR), ctypes.c_int(la[0]), ctypes.c_int(lb[0]), int_t(m),
         int_t(n), int_t(k), _scalar(dtype, alpha), address(a), int_t(la[1]), address(bb),
         int_t(lb[1]), _scalar(dtype, 1.0), address(out), int_t(_ld(out)))
    return out


def herk_update(c: np.ndarray, a: np.ndarray, *, alpha: float = -1.0,
                copy: bool = False) -> np.ndarray:
    """The lower triangle of ``c + alpha * a @ a^H`` (``syrk``/``herk``: half a gemm's
    flops), written over ``c`` unless ``copy``; the strict upper triangle is left as it
    was (the Cholesky of a diagonal block reads only its lower triangle)."""
    dtype = np.result_type(c.dtype, a.dtype)
    out = _private(c.astype(dtype, copy=False), copy or c.dtype != dtype)
    if not out.size or a.shape[1] == 0:
        return out
    base = f"cblas_{CODES.get(dtype, '?')}{'herk' if dtype.kind == 'c' else 'syrk'}"
    entry = _library().get(base)
    if entry is None or a.dtype != dtype or not _row_major(a):
        return gemm_update(out, a, a, trans_b="C", alpha=alpha)
    func, int_t = entry
    n, k = a.shape
    if dtype.kind == "c":
        alpha_arg, beta_arg = _real(dtype, alpha), _real(dtype, 1.0)
    else:
        alpha_arg, beta_arg = _scalar(dtype, alpha), _scalar(dtype, 1.0)
    func(ctypes.c_int(_ROW_MAJOR), ctypes.c_int(_LOWER), ctypes.c_int(_NO_TRANS), int_t(n),
         int_t(k), alpha_arg, address(a), int_t(_ld(a)), beta_arg, address(out), int_t(_ld(out)))
    return out


def gemm_op_a(c: np.ndarray, a: np.ndarray, x: np.ndarray, *, trans: str,
              copy: bool) -> np.ndarray:
    """``c - op(a) @ x`` (op: N, T or C), written over ``c`` unless ``copy``."""
    opa = a if trans == "N" else (a.T if trans == "T" else a.conj().T)
    return gemm_update(c, opa, x, copy=copy)


# -- QR, SVD, LU and the small pieces between kernels ------------------------------------------


def zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def first(parts: tuple) -> Any:
    """The first part of a kernel's tuple result (one function per part, so the task needs
    no argument template)."""
    return parts[0]


def second(parts: tuple) -> Any:
    return parts[1]


def third(parts: tuple) -> Any:
    return parts[2]


PARTS = (first, second, third)


def rows(x: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of a block (a view)."""
    return x[start:stop]


def svd_small(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.linalg.svd(r, full_matrices=False)


def lstsq_small(r: np.ndarray, qtb: np.ndarray, rcond: float | None,
                shape: tuple[int, int]) -> tuple[np.ndarray, int, np.ndarray]:
    """Minimum-norm solution of ``r @ x = qtb`` by the SVD of ``r``: (x, rank, s)."""
    u, s, vt = np.linalg.svd(r, full_matrices=False)
    if rcond is None:
        rcond = np.finfo(s.dtype if s.size else np.float64).eps * max(shape)
    cutoff = rcond * (s[0] if s.size else 0.0)
    keep = s > cutoff
    rank = int(keep.sum())
    inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    x = vt.conj().T @ (inv[:, None] * (u.conj().T @ qtb))
    return x, rank, s


def panel_lu(*blocks: np.ndarray, where: Any, check: bool) -> tuple[np.ndarray, np.ndarray]:
    """LU with partial pivoting of a column panel (its blocks stacked): the packed factors
    and the permutation ``perm`` of the panel's rows (``panel[perm] = L @ U``). With
    ``check``, a zero pivot raises :class:`LinAlgError` naming ``where``."""
    import warnings

    import scipy.linalg

    panel = np.concatenate(blocks, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        lu_, piv = scipy.linalg.lu_factor(panel, check_finite=False)
    width = panel.shape[1]
    if check:
        diag = np.diagonal(lu_)[:width]
        zero = np.flatnonzero(diag == 0)
        if zero.size:
            raise LinAlgError(f"singular matrix: zero pivot in diagonal block {where} "
                              f"(column {int(zero[0])} of the block)")
    perm = np.arange(panel.shape[0])
    for j, p in enumerate(piv.tolist()):
        perm[j], perm[p] = perm[p], perm[j]
    return lu_, perm


def panel_l(pair: tuple, start: int, stop: int, diagonal: bool) -> np.ndarray:
    """Rows ``start:stop`` of the panel's L (unit lower triangular on the diagonal block)."""
    lu_ = pair[0][start:stop]
    if not diagonal:
        return lu_.copy()
    out = np.tril(lu_, -1)
    np.fill_diagonal(out, 1)
    return out


def panel_u(pair: tuple, width: int) -> np.ndarray:
    return np.triu(pair[0][:width])


def permuted(pair: tuple, *blocks: np.ndarray) -> np.ndarray:
    """The column segment (blocks stacked) with the panel's row permutation applied."""
    return np.concatenate(blocks, axis=0)[pair[1]]


def next_order(order: np.ndarray, pair: tuple, offset: int) -> np.ndarray:
    """The row order after a panel's permutation of rows ``offset:``."""
    out = order.copy()
    out[offset:] = order[offset:][pair[1]]
    return out


def inverse_perm(order: np.ndarray) -> np.ndarray:
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    return inv


def perm_matrix_block(pi: np.ndarray, r0: int, r1: int, c0: int, c1: int,
                      dtype: np.dtype) -> np.ndarray:
    """Block ``[r0:r1, c0:c1]`` of the permutation matrix with ones at ``(i, pi[i])``."""
    out = np.zeros((r1 - r0, c1 - c0), dtype=dtype)
    sel = pi[r0:r1]
    hit = (sel >= c0) & (sel < c1)
    out[np.flatnonzero(hit), sel[hit] - c0] = 1
    return out


def gather_rows(order: np.ndarray, *blocks: np.ndarray) -> np.ndarray:
    return np.concatenate(blocks, axis=0)[order]


def diag_logdet(u: np.ndarray) -> np.ndarray:
    """``[phase, log|det|]`` of the diagonal of a triangular block."""
    d = np.diagonal(u)
    absd = np.abs(d)
    with np.errstate(divide="ignore"):
        logabs = np.log(absd).sum()
    phase = np.prod(np.where(absd == 0, 0, d / np.where(absd == 0, 1, absd)))
    return np.array([phase, logabs], dtype=np.result_type(u.dtype, np.float64))


def combine_logdet(order: np.ndarray, *parts: np.ndarray) -> np.ndarray:
    """``[sign, log|det|]`` from the diagonal blocks' parts and the parity of the row
    order."""
    phase = np.prod([p[0] for p in parts]) if parts else 1.0
    logabs = float(np.sum([p[1].real for p in parts]))
    seen = np.zeros(len(order), dtype=bool)
    swaps = 0
    for start in range(len(order)):
        if seen[start]:
            continue
        length = 0
        j = start
        while not seen[j]:
            seen[j] = True
            j = order[j]
            length += 1
        swaps += length - 1
    sign = phase * (-1 if swaps % 2 else 1)
    if logabs == -np.inf:
        sign = sign * 0
    return np.array([sign, logabs])


def sign_of(pair: np.ndarray, dtype: np.dtype) -> np.ndarray:
    value = pair[0]
    return np.asarray(value if dtype.kind == "c" else value.real, dtype=dtype)


def log_of(pair: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.asarray(pair[1].real, dtype=dtype)
