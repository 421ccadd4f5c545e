"""The singular values of a square upper band matrix, by stages that use the band.

The reduction of a tiled matrix to band form (numpywren's BDFAC, ``library.svd``) leaves an
upper band as wide as a tile. LAPACK's dense SVD of it (``gesdd``) costs what the SVD of the
original matrix does: its bidiagonalisation (``gebrd``) does not see the zeros, and half of
its work is matrix-vector products bound by memory. Here the band is narrowed instead:

1. **Successive band reduction** (Bischof, Lang and Sun's scheme, two-sided here): the
   upper bandwidth goes from ``B`` to ``b`` in sweeps of ``b`` rows. A block Householder
   transformation from the right (LAPACK ``geqrt`` on the conjugate transpose,
   ``gemqrt`` to apply it) clears a sweep's rows beyond the new band. That fills a block
   below the diagonal; a transformation from the left clears the fill's first ``b``
   columns, which fills a block beyond the band one band further down; a transformation
   from the right clears that block's first ``b`` rows, and so on to the end of the
   matrix. What a sweep leaves of a block lies inside the window of the next sweep at the
   same place, so after the last sweep the band is ``b`` wide and nothing lies outside it.
   Every transformation is a BLAS-3 update of a window about ``B`` by ``2B``; the work is
   about ``8 n^2 B`` flops, against ``8/3 n^3`` for a dense reduction. Wide bands go down
   in steps (``B -> B/8 -> ...``) so that each sweep's blocks stay large enough for BLAS-3.
2. **Band to bidiagonal** by LAPACK's ``gbbrd`` (Givens rotations chasing one bulge at a
   time; cheap once the band is a few dozen wide), then the bidiagonal's singular values
   by ``bdsqr`` (dqds, to high relative accuracy).

The LAPACK routines are NumPy's own OpenBLAS, called through LAPACKE with ctypes (the
GIL is released; windows of the matrix are passed with its leading dimension, so nothing
is copied). Where NumPy's BLAS does not export them, :func:`singular_values` falls back to
the dense ``gesdd``. Singular vectors are not computed here: with vectors, the band's SVD
stays the dense ``gesdd`` (accumulating the Givens rotations of ``gbbrd`` costs more than
``gesdd`` does).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from tilegraph.algebra.linalg_kernels import CODES, LinAlgError, address, lapacke

_COL_MAJOR = 102

# bandwidth handed to gbbrd: its rotations cost about 6 n^2 b flops at BLAS-1 speed
GBBRD_BAND = 32
# one reduction step narrows the band at most this many times (the sweeps' blocks are the
# new bandwidth wide; much narrower and the updates stop being BLAS-3 sized)
STEP_FACTOR = 8
# inner block of the compact WY reflectors (geqrt's nb)
_INNER = 32


class _Routines:
    """The LAPACKE ``_work`` routines for one element type (no NaN checks, no allocation
    inside), or ``ok`` False when NumPy's BLAS lacks one of them."""

    def __init__(self, dtype: np.dtype) -> None:
        code = CODES[dtype]
        real = "s" if code in "sc" else "d"
        self.dtype = dtype
        self.real = np.dtype(np.float32 if real == "s" else np.float64)
        self.complex = dtype.kind == "c"
        names = {"geqrt": f"{code}geqrt", "gemqrt": f"{code}gemqrt", "gbbrd": f"{code}gbbrd",
                 "bdsqr": f"{real}bdsqr"}
        self.funcs: dict[str, Any] = {}
        self.int_t: Any = ctypes.c_int
        self.ok = True
        for key, name in names.items():
            entry = lapacke(f"LAPACKE_{name}_work")
            if entry is None:
                self.ok = False
                return
            self.funcs[key], self.int_t = entry


_routines: dict[np.dtype, _Routines] = {}


def _lapack(dtype: np.dtype) -> _Routines:
    if dtype not in _routines:
        _routines[dtype] = _Routines(dtype)
    return _routines[dtype]


def available(dtype: Any) -> bool:
    """Whether NumPy's BLAS has the routines the band stages need for ``dtype``."""
    dtype = np.dtype(dtype)
    return dtype in CODES and _lapack(dtype).ok


def _at(a: np.ndarray, i: int, j: int) -> ctypes.c_void_p:
    """Element (i, j) of the Fortran-ordered ``a`` as a pointer (a window's origin)."""
    return ctypes.c_void_p(a.ctypes.data + (i + j * a.shape[0]) * a.itemsize)


def _check(info: int, what: str) -> None:
    if info != 0:  # arguments are computed here: a refusal is a bug, not bad input
        raise RuntimeError(f"LAPACKE {what} returned {info}")


def _clear_left(lp: _Routines, a: np.ndarray, r0: int, r1: int, c0: int, c1: int,
                cend: int) -> None:
    """Zero ``a[r0:r1, c0:c1]`` below its diagonal by a block reflector from the left
    (QR in place), applied to the same rows' columns ``c1:cend``."""
    m, w = r1 - r0, c1 - c0
    k = min(m, w)
    if k == 0 or m == 1:
        return
    it, n = lp.int_t, a.shape[0]
    nb = min(_INNER, k)
    t = np.empty((nb, k), dtype=a.dtype, order="F")
    work = np.empty(max(1, nb * max(w, cend - c1)), dtype=a.dtype)
    _check(lp.funcs["geqrt"](_COL_MAJOR, it(m), it(w), it(nb), _at(a, r0, c0), it(n), address(t),
                             it(nb), address(work)), "geqrt")
    if cend > c1:
        _check(lp.funcs["gemqrt"](_COL_MAJOR, ctypes.c_char(b"L"),
                                  ctypes.c_char(b"C" if lp.complex else b"T"), it(m),
                                  it(cend - c1), it(k), it(nb), _at(a, r0, c0), it(n), address(t),
                                  it(nb), _at(a, r0, c1), it(n), address(work)), "gemqrt")
    block = a[r0:r1, c0:c1]
    block[np.tri(m, w, -1, dtype=bool)] = 0


def _clear_right(lp: _Routines, a: np.ndarray, r0: int, r1: int, c0: int, c1: int,
                 rend: int) -> None:
    """Zero ``a[r0:r1, c0:c1]`` above its diagonal by a block reflector from the right
    (LQ, as the QR of the conjugate transpose), applied to the same columns' rows
    ``r1:rend``."""
    m, w = r1 - r0, c1 - c0
    k = min(m, w)
    if k == 0 or w == 1:
        return
    it = lp.int_t
    x = np.asfortranarray(a[r0:r1, c0:c1].conj().T)  # w x m
    nb = min(_INNER, k)
    t = np.empty((nb, k), dtype=a.dtype, order="F")
    work = np.empty(max(1, nb * max(m, rend - r1)), dtype=a.dtype)
    _check(lp.funcs["geqrt"](_COL_MAJOR, it(w), it(m), it(nb), address(x), it(w), address(t),
                             it(nb), address(work)), "geqrt")
    if rend > r1:
        _check(lp.funcs["gemqrt"](_COL_MAJOR, ctypes.c_char(b"R"), ctypes.c_char(b"N"),
                                  it(rend - r1), it(w), it(k), it(nb), address(x), it(w),
                                  address(t), it(nb), _at(a, r1, c0), it(a.shape[0]),
                                  address(work)), "gemqrt")
    block = a[r0:r1, c0:c1]
    block[...] = 0
    block[:, :k] = np.triu(x[:k, :]).conj().T


def reduce_band(a: np.ndarray, bandwidth: int, target: int) -> np.ndarray:
    """Narrow the square upper band matrix ``a`` (Fortran order, changed in place) from
    upper bandwidth ``bandwidth`` to ``target`` by orthogonal transformations from both
    sides, in one step (see the module docstring); its singular values are kept.
    Returns ``a``."""
    if a.ndim != 2 or a.shape[0] != a.shape[1] or not a.flags.f_contiguous \
            or not a.flags.writeable or a.dtype not in CODES or not available(a.dtype):
        raise ValueError("reduce_band takes a writable, Fortran-ordered square matrix of "
                         "float32, float64, complex64 or complex128 (and NumPy's LAPACKE); "
                         f"got shape {a.shape}, dtype {a.dtype}, "
                         f"{'Fortran' if a.flags.f_contiguous else 'not Fortran'} order")
    lp = _lapack(a.dtype)
    n = a.shape[0]
    big, b = bandwidth, target
    if not (0 < b < big) or n <= b + 1:
        return a
    for r in range(0, n - 1, b):
        r1 = min(n, r + b)
        c0, c1 = r + b, min(n, r1 + big)
        if c0 >= n:
            break
        # the sweep's rows: clear beyond the new band
        _clear_right(lp, a, r, r1, c0, c1, c1)
        while True:
            # the fill below the diagonal in columns c0:c0+b
            q1 = min(n, c0 + b)
            _clear_left(lp, a, c0, c1, c0, q1, min(n, c1 + big))
            # the fill beyond the band in rows c0:c0+b
            u0, u1 = c0 + big, min(n, c1 + big)
            if u0 >= n:
                break
            _clear_right(lp, a, c0, q1, u0, u1, u1)
            c0, c1 = u0, u1
    return a


def _steps(bandwidth: int, final: int) -> list[int]:
    """The bandwidths the reduction goes through after ``bandwidth``, down to ``final``."""
    out, b = [], bandwidth
    while b > final:
        b = -(-b // STEP_FACTOR)
        if b < 2 * final:  # a last step of less than half is not worth its sweeps
            b = final
        out.append(b)
    return out


def _to_bidiagonal(lp: _Routines, a: np.ndarray, ku: int) -> tuple[np.ndarray, np.ndarray]:
    """(diagonal, superdiagonal) of a bidiagonal matrix with ``a``'s singular values, from
    the upper band ``a`` of bandwidth ``ku`` (gbbrd)."""
    n = a.shape[0]
    ab = np.zeros((ku + 1, n), dtype=a.dtype, order="F")
    for k in range(ku + 1):
        ab[ku - k, k:] = np.diagonal(a, k)
    d = np.empty(n, dtype=lp.real)
    e = np.zeros(n + 1, dtype=lp.real)  # bdsqr's dqds uses e[n - 1] as scratch
    one = np.zeros(1, dtype=a.dtype)
    it = lp.int_t
    args = [_COL_MAJOR, ctypes.c_char(b"N"), it(n), it(n), it(0), it(0), it(ku), address(ab),
            it(ku + 1), address(d), address(e), address(one), it(1), address(one), it(1),
            address(one), it(1)]
    # the scratch arrays are named so that they live through the call
    if lp.complex:
        work, rwork = np.empty(n, dtype=a.dtype), np.empty(n, dtype=lp.real)
        args += [address(work), address(rwork)]
    else:
        work = np.empty(2 * n, dtype=a.dtype)
        args.append(address(work))
    _check(lp.funcs["gbbrd"](*args), "gbbrd")
    return d, e


def _bidiagonal_values(lp: _Routines, d: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The singular values of the upper bidiagonal (d, e), largest first (bdsqr)."""
    n = d.shape[0]
    it = lp.int_t
    one, work = np.zeros(1, dtype=lp.real), np.empty(4 * n, dtype=lp.real)
    info = lp.funcs["bdsqr"](_COL_MAJOR, ctypes.c_char(b"U"), it(n), it(0), it(0), it(0),
                             address(d), address(e), address(one), it(1), address(one),
                             it(1), address(one), it(1), address(work))
    if info > 0:
        raise LinAlgError(f"svd: the singular values did not converge ({info} of the "
                          f"bidiagonal's off-diagonal entries stayed non-zero)")
    _check(info, "bdsqr")
    return d


def singular_values(a: np.ndarray, bandwidth: int, *, final: int = GBBRD_BAND,
                    overwrite: bool = False) -> np.ndarray:
    """The singular values, largest first, of the square upper band matrix ``a`` (zero
    below the diagonal and more than ``bandwidth`` above it; what lies there is not read
    reliably). The band is narrowed to ``final`` in steps of at most :data:`STEP_FACTOR`,
    then made bidiagonal (see the module docstring). ``overwrite``: ``a`` may be used as
    scratch (when it is Fortran-ordered). Falls back to LAPACK's dense ``gesdd`` when
    NumPy's BLAS lacks the routines. Raises :class:`LinAlgError` for NaN or infinite
    values, or if the bidiagonal's iteration does not converge."""
    import scipy.linalg

    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"singular_values takes a square matrix, got shape {a.shape}")
    if bandwidth < 0 or final < 1:
        raise ValueError(f"bandwidth must be >= 0 and final >= 1, got {bandwidth} and {final}")
    n = a.shape[0]
    if not np.isfinite(a).all():
        raise LinAlgError("svd: the matrix has NaN or infinite values")
    dtype = a.dtype if a.dtype in CODES else np.result_type(a.dtype, np.float64)
    if n == 0:
        return np.empty(0, dtype=np.empty(0, dtype).real.dtype)
    if not available(dtype):
        return scipy.linalg.svd(a, compute_uv=False, check_finite=False,
                                lapack_driver="gesdd")
    lp = _lapack(np.dtype(dtype))
    work = a if overwrite and a.dtype == dtype and a.flags.f_contiguous else \
        np.array(a, dtype=dtype, order="F", copy=True)
    bandwidth = min(bandwidth, n - 1)
    for b in _steps(bandwidth, final):
        reduce_band(work, bandwidth, b)
        bandwidth = b
    d, e = _to_bidiagonal(lp, work, bandwidth)
    return _bidiagonal_values(lp, d, e)
