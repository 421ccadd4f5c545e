"""The ``linalg`` and ``fft`` extensions of the Array API namespace
(:mod:`tilegraph.array.array_api`).

Matrix functions of a 2-d array use the blocked algorithms of :mod:`tilegraph.linalg` where
it has them (cholesky, qr, svd, solve, inv, det, slogdet, norms, products); the others, and
stacks of matrices, run NumPy's routine on each matrix, with the stack kept in blocks (one
block per group of matrices). An FFT along an axis makes that axis one block and keeps the
other axes cut.

>>> import numpy as np, tilegraph as tg
>>> xp = tg.array_api
>>> a = tg.from_numpy(np.array([[4.0, 2.0], [2.0, 3.0]]))
>>> np.round(xp.linalg.cholesky(a).compute(), 3)
array([[2.   , 0.   ],
       [1.   , 1.414]])
>>> xp.fft.fft(tg.from_numpy(np.array([1.0, 0.0, 0.0, 0.0]), chunks=2)).compute()
array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
"""

from __future__ import annotations

import builtins
import operator
from collections import namedtuple
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np

import tilegraph.array.linalg as _tl
import tilegraph.array.reductions as _red
from tilegraph.algebra.blocks import apply_blocks
from tilegraph.array.chunks import numblocks
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.sorting import whole_axis
from tilegraph.graph.taskgraph import Dep


def apply_to_matrices(label: str, x: Array, func: Any, out_tail: tuple[int, ...],
                      dtype: Any, core: int = 2, index: int | None = None) -> Array:
    """``func`` on every matrix of a stack (the last ``core`` axes one block, the batch
    axes kept in blocks); each output block has the batch blocks and the tail
    ``out_tail``. ``index`` picks one element of a tuple result."""
    if core:
        x = x.rechunk({a: -1 for a in range(x.ndim - core, x.ndim)})
    batch = x.chunks[:x.ndim - core]
    chunks = (*batch, *[(s,) for s in out_tail])
    key = x.collection.key
    nb = len(batch)
    tail0 = (0,) * core

    def call(block: np.ndarray) -> np.ndarray:
        out = func(block)
        return np.asarray(out if index is None else out[index], dtype=dtype)

    call.__name__ = label
    token = tokenize(label, x, out_tail, np.dtype(dtype), index, func)
    blocks = apply_blocks(f"{label}-{token}", numblocks(chunks), [x.collection],
                          lambda c: (call, [key((*c[:nb], *tail0))], (Dep(0),)),
                          kind="map", name=label)
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)


def _float(x: Array) -> np.dtype:
    return x.dtype if x.dtype.kind in "fc" else np.dtype(np.float64)


def _square(op: str, x: Array) -> None:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.{op}: needs a stack of square matrices, got shape {x.shape}")


def _real(dtype: np.dtype) -> np.dtype:
    return np.empty(0, dtype).real.dtype


def linalg_namespace(xp: ModuleType) -> SimpleNamespace:
    """The ``linalg`` extension (``xp``: the Array API namespace it completes): the
    factorisations and solvers (:func:`_linalg_factorizations`) and the products, powers,
    norms and diagonals (:func:`_linalg_products`)."""
    return SimpleNamespace(**_linalg_factorizations(xp), **_linalg_products(xp))


def _linalg_factorizations(xp: ModuleType) -> dict[str, Any]:
    """The factorisations, inverses, determinants and solvers of the ``linalg``
    extension: blocked (:mod:`tilegraph.array.linalg`) for one real matrix, NumPy's on
    each matrix of a stack otherwise."""

    def cholesky(x: Array, /, *, upper: bool = False) -> Array:
        _square("cholesky", x)
        if x.ndim == 2 and x.dtype.kind == "f":
            return _tl.cholesky(x, upper=upper)
        f = (lambda b: np.conj(np.swapaxes(np.linalg.cholesky(b), -1, -2))) if upper else \
            np.linalg.cholesky
        return apply_to_matrices("cholesky", x, f, x.shape[-2:], _float(x))

    def det(x: Array, /) -> Array:
        _square("det", x)
        if x.ndim == 2 and x.dtype.kind == "f":
            return _tl.det(x)
        return apply_to_matrices("det", x, np.linalg.det, (), _float(x))

    def eigh(x: Array, /) -> Any:
        _square("eigh", x)
        n = x.shape[-1]
        w = apply_to_matrices("eigh", x, np.linalg.eigh, (n,), _real(_float(x)), index=0)
        v = apply_to_matrices("eigh", x, np.linalg.eigh, (n, n), _float(x), index=1)
        return namedtuple("EighResult", ["eigenvalues", "eigenvectors"])(w, v)

    def eigvalsh(x: Array, /) -> Array:
        _square("eigvalsh", x)
        return apply_to_matrices("eigvalsh", x, np.linalg.eigvalsh, (x.shape[-1],),
                                 _real(_float(x)))

    def inv(x: Array, /) -> Array:
        _square("inv", x)
        if x.ndim == 2 and x.dtype.kind == "f":
            return _tl.inv(x)
        return apply_to_matrices("inv", x, np.linalg.inv, x.shape[-2:], _float(x))

    def pinv(x: Array, /, *, rtol: Any = None) -> Array:
        if isinstance(rtol, Array):
            rtol = rtol.compute()
        return apply_to_matrices("pinv", x, lambda b: np.linalg.pinv(b, rtol=rtol),
                                 (x.shape[-1], x.shape[-2]), _float(x))

    def qr(x: Array, /, *, mode: str = "reduced") -> Any:
        if mode not in ("reduced", "complete"):
            raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
        m, n = x.shape[-2:]
        k = builtins.min(m, n) if mode == "reduced" else m
        q = apply_to_matrices("qr", x, lambda b: np.linalg.qr(b, mode), (m, k), _float(x),
                              index=0)
        r = apply_to_matrices("qr", x, lambda b: np.linalg.qr(b, mode), (k, n), _float(x),
                              index=1)
        return namedtuple("QRResult", ["Q", "R"])(q, r)

    def slogdet(x: Array, /) -> Any:
        _square("slogdet", x)
        sign = apply_to_matrices("slogdet", x, np.linalg.slogdet, (), _float(x), index=0)
        logabs = apply_to_matrices("slogdet", x, np.linalg.slogdet, (), _real(_float(x)),
                                   index=1)
        return namedtuple("SlogdetResult", ["sign", "logabsdet"])(sign, logabs)

    def solve(x1: Array, x2: Array, /) -> Array:
        _square("solve", x1)
        if x1.ndim == 2 and x2.ndim in (1, 2) and x1.dtype.kind == "f" \
                and x2.dtype.kind == "f":
            return _tl.solve(x1, x2)
        if x2.ndim == 1:
            b = x2[:, None]
            shape = np.broadcast_shapes(x1.shape[:-2], ())
            a = xp.broadcast_to(x1, (*shape, *x1.shape[-2:]))
            return solve(a, xp.broadcast_to(b, (*shape, *b.shape)))[..., 0]
        shape = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
        a = xp.broadcast_to(x1, (*shape, *x1.shape[-2:]))
        b = xp.broadcast_to(x2, (*shape, *x2.shape[-2:]))
        stacked = xp.concat([a, b], axis=-1)
        n = x1.shape[-1]
        return apply_to_matrices("solve", stacked,
                                 lambda s: np.linalg.solve(s[..., :n], s[..., n:]),
                                 x2.shape[-2:], np.result_type(_float(x1), _float(x2)))

    def svd(x: Array, /, *, full_matrices: bool = True) -> Any:
        m, n = x.shape[-2:]
        k = builtins.min(m, n)
        mu, nv = (m, n) if full_matrices else (k, k)
        f = lambda b: np.linalg.svd(b, full_matrices=full_matrices)
        u = apply_to_matrices("svd", x, f, (m, mu), _float(x), index=0)
        s = apply_to_matrices("svd", x, f, (k,), _real(_float(x)), index=1)
        vh = apply_to_matrices("svd", x, f, (nv, n), _float(x), index=2)
        return namedtuple("SVDResult", ["U", "S", "Vh"])(u, s, vh)

    def svdvals(x: Array, /) -> Array:
        return apply_to_matrices("svdvals", x, lambda b: np.linalg.svd(b, compute_uv=False),
                                 (builtins.min(x.shape[-2:]),), _real(_float(x)))

    names = dict(locals())
    names.pop("xp")
    return names


def _linalg_products(xp: ModuleType) -> dict[str, Any]:
    """The products, powers, ranks, norms, diagonals and traces of the ``linalg``
    extension."""

    def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        if not (-builtins.min(x1.ndim, x2.ndim) <= axis < 0) and not (
                0 <= axis < builtins.min(x1.ndim, x2.ndim) and x1.ndim == x2.ndim):
            raise ValueError(f"linalg.cross: axis {axis} is out of range for shapes "
                             f"{x1.shape} and {x2.shape}")
        if x1.shape[axis] != 3 or x2.shape[axis] != 3:
            raise ValueError("linalg.cross: both arrays need length 3 along axis")
        np.broadcast_shapes(x1.shape, x2.shape)  # must broadcast (a ValueError if not)
        from tilegraph.array.elementwise import elemwise

        x1 = x1.rechunk({axis: -1})
        x2 = x2.rechunk({axis: -1})
        return elemwise(np.cross, x1, x2, kwargs={"axis": axis}, name="cross",
                        dtype=np.result_type(x1.dtype, x2.dtype))

    def diagonal(x: Array, /, *, offset: int = 0) -> Array:
        n = builtins.max(0, builtins.min(x.shape[-2] + builtins.min(offset, 0),
                                         x.shape[-1] - builtins.max(offset, 0)))
        return apply_to_matrices("diagonal", x, lambda b: np.diagonal(b, offset, -2, -1), (n,),
                                 x.dtype)

    def matmul(x1: Array, x2: Array, /) -> Array:
        return xp.matmul(x1, x2)

    def matrix_norm(x: Array, /, *, keepdims: bool = False, ord: Any = "fro") -> Array:
        out = apply_to_matrices("matrix_norm", x,
                                lambda b: np.linalg.norm(b, ord, axis=(-2, -1)), (),
                                _real(_float(x)))
        return out[..., None, None] if keepdims else out

    def matrix_power(x: Array, n: int, /) -> Array:
        _square("matrix_power", x)
        dt = x.dtype if n >= 0 else _float(x)
        return apply_to_matrices("matrix_power", x, lambda b: np.linalg.matrix_power(b, n),
                                 x.shape[-2:], dt)

    def matrix_rank(x: Array, /, *, rtol: Any = None) -> Array:
        if isinstance(rtol, Array):
            rtol = rtol.compute()
        return apply_to_matrices("matrix_rank", x,
                                 lambda b: np.linalg.matrix_rank(b, rtol=rtol), (), np.int64)

    def matrix_transpose(x: Array, /) -> Array:
        return xp.matrix_transpose(x)

    def outer(x1: Array, x2: Array, /) -> Array:
        if x1.ndim != 1 or x2.ndim != 1:
            raise ValueError("linalg.outer: needs two 1-d arrays")
        return xp.multiply(x1[:, None], x2[None, :])

    def tensordot(x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        return xp.tensordot(x1, x2, axes=axes)

    def trace(x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
        d = diagonal(x, offset=offset)
        if dtype is None:
            dtype = xp._sum_dtype(x, None)
        return _red.sum(d, axis=-1, dtype=dtype)

    def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        return xp.vecdot(x1, x2, axis=axis)

    def vector_norm(x: Array, /, *, axis: Any = None, keepdims: bool = False,
                    ord: Any = 2) -> Array:
        a = xp.abs(x)
        dt = _real(_float(x))
        a = a.astype(dt)
        if ord == np.inf:
            return _red.max(a, axis=axis, keepdims=keepdims)
        if ord == -np.inf:
            return _red.min(a, axis=axis, keepdims=keepdims)
        if ord == 0:
            return _red.sum((a != 0).astype(dt), axis=axis, keepdims=keepdims)
        return _red.sum(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)

    names = dict(locals())
    names.pop("xp")
    return names


def _along(label: str, x: Array, axis: int, func: Any, n_out: int, dtype: Any) -> Array:
    """``func`` of every 1-d slice along ``axis`` (made one block), with ``n_out`` output
    elements along it."""
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"fft.{label}: axis {axis} is out of range for shape {x.shape}")
    axis %= x.ndim
    y = whole_axis(x, axis)
    chunks = tuple((n_out,) if a == axis else c for a, c in enumerate(y.chunks))
    key = y.collection.key

    def call(block: np.ndarray) -> np.ndarray:
        return np.asarray(func(block, axis), dtype=dtype)

    call.__name__ = label
    token = tokenize(label, y, axis, n_out, np.dtype(dtype), func)
    blocks = apply_blocks(f"{label}-{token}", numblocks(chunks), [y.collection],
                          lambda c: (call, [key(c)], (Dep(0),)), kind="map", name=label)
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)


def fft_namespace(xp: ModuleType) -> SimpleNamespace:
    """The ``fft`` extension (``xp``: the Array API namespace it completes)."""

    def _cdtype(x: Array) -> np.dtype:
        return np.dtype(np.complex64) if x.dtype in (np.float32, np.complex64) else \
            np.dtype(np.complex128)

    def _rdtype(x: Array) -> np.dtype:
        return np.dtype(np.float32) if x.dtype in (np.float32, np.complex64) else \
            np.dtype(np.float64)

    def _one(name: str, real_in: bool, real_out: bool) -> Any:
        npf = getattr(np.fft, name)

        def func(x: Array, /, *, n: int | None = None, axis: int = -1,
                 norm: str = "backward") -> Array:
            length = x.shape[axis] if n is None else n
            if name == "rfft":
                n_out = length // 2 + 1
            elif name in ("irfft", "hfft"):
                length = 2 * (x.shape[axis] - 1) if n is None else n
                n_out = length
            elif name == "ihfft":
                n_out = length // 2 + 1
            else:
                n_out = length
            dtype = _rdtype(x) if real_out else _cdtype(x)
            return _along(name, x, axis, lambda b, ax: npf(b, n=n, axis=ax, norm=norm), n_out,
                          dtype)

        func.__name__ = name
        func.__doc__ = f"``numpy.fft.{name}`` along ``axis`` (that axis one block)."
        return func

    def _many(name: str) -> Any:
        one = {"fftn": fft, "ifftn": ifft, "rfftn": rfft, "irfftn": irfft}[name]

        def func(x: Array, /, *, s: Any = None, axes: Any = None,
                 norm: str = "backward") -> Array:
            if axes is None:
                axes = tuple(range(x.ndim)) if s is None else tuple(
                    range(x.ndim - len(s), x.ndim))
            axes = tuple(axes)
            sizes = [None] * len(axes) if s is None else list(s)
            out = x
            order = list(range(len(axes)))
            if name in ("rfftn", "irfftn"):  # the real transform on the last axis only
                last = order.pop()
                if name == "rfftn":
                    out = rfft(out, n=sizes[last], axis=axes[last], norm=norm)
                    for i in order[::-1]:
                        out = fft(out, n=sizes[i], axis=axes[i], norm=norm)
                    return out
                for i in order:
                    out = ifft(out, n=sizes[i], axis=axes[i], norm=norm)
                return irfft(out, n=sizes[last], axis=axes[last], norm=norm)
            for i in order[::-1]:
                out = one(out, n=sizes[i], axis=axes[i], norm=norm)
            return out

        func.__name__ = name
        func.__doc__ = f"``numpy.fft.{name}``: one-axis transforms in turn."
        return func

    fft = _one("fft", False, False)
    ifft = _one("ifft", False, False)
    rfft = _one("rfft", True, False)
    irfft = _one("irfft", False, True)
    hfft = _one("hfft", False, True)
    ihfft = _one("ihfft", True, False)
    fftn, ifftn, rfftn, irfftn = (_many(n) for n in ("fftn", "ifftn", "rfftn", "irfftn"))

    def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None
                ) -> Array:
        return asarray(np.fft.fftfreq(n, d).astype(dtype or np.float64))

    def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None
                 ) -> Array:
        return asarray(np.fft.rfftfreq(n, d).astype(dtype or np.float64))

    def _shift(name: str) -> Any:
        def func(x: Array, /, *, axes: Any = None) -> Array:
            axs = tuple(range(x.ndim)) if axes is None else (
                (axes,) if isinstance(axes, int) else tuple(axes))
            shifts = [(x.shape[a] // 2) if name == "fftshift" else -(x.shape[a] // 2)
                      for a in axs]
            return xp.roll(x, tuple(shifts), axis=axs)

        func.__name__ = name
        func.__doc__ = f"``numpy.fft.{name}`` (a roll)."
        return func

    fftshift, ifftshift = _shift("fftshift"), _shift("ifftshift")
    names = dict(locals())
    for k in ("xp", "_cdtype", "_rdtype", "_one", "_many", "_shift"):
        names.pop(k)
    return SimpleNamespace(**names)
