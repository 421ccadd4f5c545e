"""``numpy.linalg`` on tilegraph arrays (``__array_function__``): a matrix by the blocked
algorithms of :mod:`tilegraph.linalg`, a stack of matrices (and what has no blocked
algorithm: ``eigh``, ``pinv``, ``matrix_rank``, ...) by the Array API namespace's linalg
extension, which runs NumPy's routine on each matrix with the stack kept in blocks
(:func:`tilegraph.array.array_api_ext.linalg_namespace`). Results are named as NumPy's
(``SVDResult``, ``EighResult``, ...). The entries join
:data:`tilegraph.array.numpy_functions.IMPLEMENTATIONS` when the package binds its table.

>>> import numpy as np, tilegraph as tg
>>> a = np.random.default_rng(0).random((3, 4, 4))
>>> s = np.linalg.svd(tg.from_numpy(a, chunks=(2, 4, 4)), compute_uv=False)
>>> bool(np.allclose(s.compute(), np.linalg.svd(a, compute_uv=False)))
True
"""

from __future__ import annotations

import math
import operator
from collections import namedtuple
from collections.abc import Callable
from typing import Any

import numpy as np

import tilegraph.array.contraction as contraction
import tilegraph.array.linalg as tlinalg
import tilegraph.array.manipulation as manipulation
import tilegraph.array.reductions as reductions
from tilegraph.array.core import Array, asarray


def _xp_linalg() -> Any:
    from tilegraph.array.array_api import linalg

    return linalg


def _per_matrix(label: str, a: Array, func: Callable, tail: tuple[int, ...], dtype: Any,
                index: int | None = None) -> Array:
    from tilegraph.array.array_api_ext import apply_to_matrices

    return apply_to_matrices(label, a, func, tail, dtype, index=index)


def _stack(op: str, a: Any) -> Array:
    a = asarray(a)
    if a.ndim < 2:
        raise np.linalg.LinAlgError(f"numpy.linalg.{op}: {a.ndim}-dimensional array given. "
                                    "Array must be at least two-dimensional")
    return a


def _inexact(a: Array) -> np.dtype:
    return a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64)


def _real_of(dtype: np.dtype) -> np.dtype:
    return np.empty(0, dtype).real.dtype


def _blocked_2d(a: Array) -> bool:
    """Whether tilegraph.linalg's blocked algorithms take ``a`` (a matrix of floats)."""
    return a.ndim == 2 and a.dtype.kind in "fiub"


def _linalg_svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
                hermitian: bool = False) -> Any:
    a = _stack("svd", a)
    m, n = a.shape[-2:]
    if _blocked_2d(a) and (not full_matrices or m == n or not compute_uv):
        out = tlinalg.svd(a, full_matrices=False, compute_uv=compute_uv)
        return _SVDResult(*out) if compute_uv else out
    xp = _xp_linalg()
    if not compute_uv:
        return xp.svdvals(a)
    return _SVDResult(*xp.svd(a, full_matrices=full_matrices))


def _linalg_lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    x, residuals, rank, s = tlinalg.lstsq(a, b, rcond=rcond)
    # NumPy's rank is LAPACK's int32
    rank = rank.astype(np.int32) if isinstance(rank, Array) else np.int32(rank)
    return x, residuals, rank, s


# the named results of numpy.linalg (same names and fields)
_SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
_EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
_QRResult = namedtuple("QRResult", ["Q", "R"])
_SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


def _linalg_cholesky(a: Any, upper: bool = False) -> Array:
    a = _stack("cholesky", a)
    if _blocked_2d(a):
        return tlinalg.cholesky(a, upper=upper)
    return _xp_linalg().cholesky(a, upper=upper)


def _linalg_qr(a: Any, mode: str = "reduced") -> Any:
    a = _stack("qr", a)
    if _blocked_2d(a) and mode in ("reduced", "r"):
        out = tlinalg.qr(a, mode=mode)
        return out if mode == "r" else _QRResult(*out)
    if mode == "r":
        return _xp_linalg().qr(a).R
    if mode not in ("reduced", "complete"):
        raise ValueError(f"numpy.linalg.qr: mode {mode!r} is not supported on tilegraph "
                         "arrays; use 'reduced', 'complete' or 'r'")
    return _QRResult(*_xp_linalg().qr(a, mode=mode))


def _linalg_solve(a: Any, b: Any) -> Array:
    a = _stack("solve", a)
    b = asarray(b)
    if _blocked_2d(a) and b.ndim in (1, 2) and b.dtype.kind in "fiub":
        return tlinalg.solve(a, b)
    return _xp_linalg().solve(a, b)


def _square_op(op: str, blocked: Callable) -> Callable:
    def call(a: Any) -> Any:
        a = _stack(op, a)
        if _blocked_2d(a):
            return blocked(a)
        out = getattr(_xp_linalg(), op)(a)
        return _SlogdetResult(*out) if op == "slogdet" else out

    call.__name__ = op
    return call


def _linalg_eigh(a: Any, UPLO: str = "L") -> Any:
    a = _stack("eigh", a)
    _uplo("eigh", UPLO)
    if UPLO == "L":
        return _EighResult(*_xp_linalg().eigh(a))
    n = a.shape[-1]
    dt = _inexact(a)
    w = _per_matrix("eigh", a, lambda b: np.linalg.eigh(b, UPLO="U"), (n,), _real_of(dt), 0)
    v = _per_matrix("eigh", a, lambda b: np.linalg.eigh(b, UPLO="U"), (n, n), dt, 1)
    return _EighResult(w, v)


def _linalg_eigvalsh(a: Any, UPLO: str = "L") -> Array:
    a = _stack("eigvalsh", a)
    _uplo("eigvalsh", UPLO)
    return _per_matrix("eigvalsh", a, lambda b: np.linalg.eigvalsh(b, UPLO=UPLO),
                       (a.shape[-1],), _real_of(_inexact(a)))


def _uplo(op: str, uplo: Any) -> None:
    if uplo not in ("L", "U"):
        raise ValueError(f"numpy.linalg.{op}: UPLO must be 'L' or 'U', got {uplo!r}")


_NO_VALUE = object()


def _linalg_pinv(a: Any, rcond: Any = None, hermitian: bool = False, *,
                 rtol: Any = _NO_VALUE) -> Array:
    a = _stack("pinv", a)
    if isinstance(rcond, Array) or isinstance(rtol, Array):
        raise TypeError("numpy.linalg.pinv: rcond/rtol as a tilegraph array is not "
                        "supported; give a number or a NumPy array")
    kw = {"hermitian": hermitian}
    if rcond is not None:
        kw["rcond"] = rcond
    if rtol is not _NO_VALUE:
        kw["rtol"] = rtol
    return _per_matrix("pinv", a, lambda b: np.linalg.pinv(b, **kw),
                       (a.shape[-1], a.shape[-2]), _inexact(a))


def _linalg_matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *,
                        rtol: Any = None) -> Array:
    a = asarray(A)
    if isinstance(tol, Array) or isinstance(rtol, Array):
        raise TypeError("numpy.linalg.matrix_rank: tol/rtol as a tilegraph array is not "
                        "supported; give a number or a NumPy array")
    if a.ndim < 2:
        return reductions.any(a != 0).astype(np.int64)
    return _per_matrix("matrix_rank", a, lambda b: np.linalg.matrix_rank(
        b, tol=tol, hermitian=hermitian, rtol=rtol), (), np.int64)


def _linalg_cond(x: Any, p: Any = None) -> Array:
    a = _stack("cond", x)
    return _per_matrix("cond", a, lambda b: np.linalg.cond(b, p), (), _real_of(_inexact(a)))


def _linalg_matrix_power(a: Any, n: int) -> Array:
    return _xp_linalg().matrix_power(_stack("matrix_power", a), operator.index(n))


def _linalg_multi_dot(arrays: Any, *, out: Any = None) -> Array:
    if out is not None:
        raise TypeError("numpy.linalg.multi_dot: out= is not supported on tilegraph arrays")
    arrays = [asarray(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("numpy.linalg.multi_dot: expecting at least two arrays")
    first, last = arrays[0], arrays[-1]
    if first.ndim == 1:
        arrays[0] = first[None, :]
    if last.ndim == 1:
        arrays[-1] = last[:, None]
    for k, m in enumerate(arrays):
        if m.ndim != 2:
            raise ValueError(f"numpy.linalg.multi_dot: array #{k} has {m.ndim} dimensions; "
                             "all but the first and last must be 2-dimensional")
    out_ = arrays[0]
    for m in arrays[1:]:
        out_ = contraction.matmul(out_, m)
    if first.ndim == 1:
        out_ = out_[0]
    if last.ndim == 1:
        out_ = out_[..., 0]
    return out_


def _linalg_tensorinv(a: Any, ind: int = 2) -> Array:
    a = asarray(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError("numpy.linalg.tensorinv: ind must be a positive integer")
    rows, cols = a.shape[:ind], a.shape[ind:]
    m, n = math.prod(rows), math.prod(cols)
    if m != n:
        raise np.linalg.LinAlgError(f"numpy.linalg.tensorinv: the product of the first {ind} "
                                    f"axes ({m}) differs from that of the others ({n})")
    inv = _square_op("inv", tlinalg.inv)(a.reshape(m, n))
    return inv.reshape(cols + rows)


def _linalg_tensorsolve(a: Any, b: Any, axes: Any = None) -> Array:
    a, b = asarray(a), asarray(b)
    if axes is not None:
        rest = [k for k in range(a.ndim) if k not in [x % a.ndim for x in axes]]
        a = manipulation.transpose(a, rest + [x % a.ndim for x in axes])
    q = a.shape[b.ndim:]
    n = math.prod(q)
    if math.prod(a.shape[:b.ndim]) != n or a.shape[:b.ndim] != b.shape:
        raise np.linalg.LinAlgError(f"numpy.linalg.tensorsolve: a of shape {a.shape} and b "
                                    f"of shape {b.shape} do not make a square system")
    return _linalg_solve(a.reshape(n, n), b.reshape(n)).reshape(q)


def _xp_linalg_call(name: str) -> Callable:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_xp_linalg(), name)(*[asarray(a) if isinstance(a, np.ndarray) else a
                                             for a in args], **kwargs)

    call.__name__ = name
    return call




IMPLEMENTATIONS: dict[Callable, Callable] = {
    np.linalg.cholesky: _linalg_cholesky, np.linalg.qr: _linalg_qr,
    np.linalg.svd: _linalg_svd, np.linalg.solve: _linalg_solve,
    np.linalg.inv: _square_op("inv", tlinalg.inv),
    np.linalg.det: _square_op("det", tlinalg.det),
    np.linalg.slogdet: _square_op("slogdet", lambda a: _SlogdetResult(*tlinalg.slogdet(a))),
    np.linalg.lstsq: _linalg_lstsq, np.linalg.norm: tlinalg.norm,
    np.linalg.matmul: contraction.matmul,
    np.linalg.eigh: _linalg_eigh, np.linalg.eigvalsh: _linalg_eigvalsh,
    np.linalg.pinv: _linalg_pinv, np.linalg.matrix_rank: _linalg_matrix_rank,
    np.linalg.cond: _linalg_cond, np.linalg.matrix_power: _linalg_matrix_power,
    np.linalg.multi_dot: _linalg_multi_dot, np.linalg.tensorinv: _linalg_tensorinv,
    np.linalg.tensorsolve: _linalg_tensorsolve,
    **{getattr(np.linalg, name): _xp_linalg_call(name) for name in (
        "matrix_norm", "vector_norm", "svdvals", "diagonal", "trace", "outer", "cross",
        "matrix_transpose", "vecdot", "tensordot") if hasattr(np.linalg, name)},
}
