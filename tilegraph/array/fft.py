"""``tilegraph.fft``: discrete Fourier transforms with the signatures of ``numpy.fft`` and
``dask.array.fft`` (``np.fft.fft(x)`` on a tilegraph array comes here too, through
``__array_function__``).

The transforms are those of the Array API namespace's ``fft`` extension
(:func:`tilegraph.array.array_api_ext.fft_namespace`): a transform along an axis makes that
axis one block and keeps the other axes cut; an n-dimensional transform is one-axis
transforms in turn. Unlike dask's, an axis in several blocks is made one block here rather
than refused. :func:`fft_wrap` makes a blocked transform of any function that behaves like
a ``numpy.fft`` one (``scipy.fft.fft``, ...), as dask's does.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([1.0, 2.0, 1.0, 0.0, 1.0]), chunks=2)
>>> np.allclose(tg.fft.fft(x).compute(), np.fft.fft([1.0, 2.0, 1.0, 0.0, 1.0]))
True
>>> np.fft.irfft(np.fft.rfft(x), n=5).compute().round(12)
array([1., 2., 1., 0., 1.])
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray

__all__ = [
    "fft",
    "fft2",
    "fft_wrap",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]


def _xp() -> Any:
    """The Array API namespace's fft extension (one implementation of the transforms)."""
    from tilegraph.array.array_api import fft as namespace

    return namespace


def _prepare(op: str, a: Any, norm: Any, out: Any) -> tuple[Array, str]:
    if out is not None:
        raise TypeError(f"fft.{op}: out= is not supported on tilegraph arrays (arrays are "
                        "lazy; use the returned array)")
    norm = "backward" if norm is None else norm
    if norm not in ("backward", "ortho", "forward"):
        raise ValueError(f"fft.{op}: norm must be 'backward', 'ortho', 'forward' or None, "
                         f"got {norm!r}")
    x = a if isinstance(a, Array) else asarray(a)
    if x.ndim == 0:
        raise ValueError(f"fft.{op}: needs an array of at least one dimension, got a 0-d "
                         "array")
    return x, norm


def _length(op: str, n: Any) -> int | None:
    if n is None:
        return None
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"fft.{op}: invalid number of data points ({n}) specified")
    return n


def _one_axis(name: str) -> Callable:
    def transform(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
                  out: Any = None) -> Array:
        x, norm = _prepare(name, a, norm, out)
        return getattr(_xp(), name)(x, n=_length(name, n), axis=operator.index(axis),
                                    norm=norm)

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = (f"``numpy.fft.{name}`` along ``axis`` (made one block; the other "
                         "axes keep their blocks).")
    return transform


def _axes_of(op: str, x: Array, s: Any, axes: Any, default: Any) -> tuple[Any, Any]:
    if axes is None:
        axes = default if default is not None else (
            tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim)))
    axes = tuple(operator.index(a) for a in axes)
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise np.exceptions.AxisError(f"fft.{op}: axis {a} is out of bounds for an "
                                          f"array of {x.ndim} dimensions")
    if len({a % x.ndim for a in axes}) != len(axes):
        raise ValueError(f"fft.{op}: axes {axes} repeat an axis")
    if s is not None:
        s = tuple(_length(op, v) for v in s)
        if len(s) != len(axes):
            raise ValueError(f"fft.{op}: s {s} and axes {axes} have different lengths")
    return s, axes


def _many_axes(name: str, base: str, default: Any) -> Callable:
    def transform(a: Any, s: Any = None, axes: Any = default, norm: str | None = None,
                  out: Any = None) -> Array:
        x, norm = _prepare(name, a, norm, out)
        s, axes = _axes_of(name, x, s, axes, None)
        return getattr(_xp(), base)(x, s=s, axes=axes, norm=norm)

    transform.__name__ = transform.__qualname__ = name
    where = "the last two axes" if default is not None else "every axis"
    transform.__doc__ = (f"``numpy.fft.{name}`` over ``axes`` ({where} by default): "
                         "one-axis transforms in turn, each axis made one block in turn.")
    return transform


fft = _one_axis("fft")
ifft = _one_axis("ifft")
rfft = _one_axis("rfft")
irfft = _one_axis("irfft")
hfft = _one_axis("hfft")
ihfft = _one_axis("ihfft")
fftn = _many_axes("fftn", "fftn", None)
ifftn = _many_axes("ifftn", "ifftn", None)
rfftn = _many_axes("rfftn", "rfftn", None)
irfftn = _many_axes("irfftn", "irfftn", None)
fft2 = _many_axes("fft2", "fftn", (-2, -1))
ifft2 = _many_axes("ifft2", "ifftn", (-2, -1))
rfft2 = _many_axes("rfft2", "rfftn", (-2, -1))
irfft2 = _many_axes("irfft2", "irfftn", (-2, -1))


def fftfreq(n: int, d: float = 1.0, chunks: Any = "auto", *, device: Any = None) -> Array:
    """The sample frequencies of an FFT of ``n`` points spaced ``d`` apart
    (``numpy.fft.fftfreq``), in blocks of ``chunks``."""
    if device not in (None, "cpu"):
        raise ValueError(f"fft.fftfreq: unknown device {device!r}; tilegraph has 'cpu' only")
    return asarray(np.fft.fftfreq(operator.index(n), d), chunks=chunks)


def rfftfreq(n: int, d: float = 1.0, chunks: Any = "auto", *, device: Any = None) -> Array:
    """The sample frequencies of an ``rfft`` of ``n`` points spaced ``d`` apart
    (``numpy.fft.rfftfreq``), in blocks of ``chunks``."""
    if device not in (None, "cpu"):
        raise ValueError(f"fft.rfftfreq: unknown device {device!r}; tilegraph has 'cpu' "
                         "only")
    return asarray(np.fft.rfftfreq(operator.index(n), d), chunks=chunks)


def fftshift(x: Any, axes: Any = None) -> Array:
    """The zero-frequency term moved to the centre (``numpy.fft.fftshift``, a roll)."""
    return _xp().fftshift(x if isinstance(x, Array) else asarray(x), axes=axes)


def ifftshift(x: Any, axes: Any = None) -> Array:
    """The inverse of :func:`fftshift` (``numpy.fft.ifftshift``, a roll)."""
    return _xp().ifftshift(x if isinstance(x, Array) else asarray(x), axes=axes)


# -- fft_wrap ---------------------------------------------------------------------------------


def _out_length(kind: str, n_in: int, n: int | None) -> int:
    if kind in ("fft", "ifft"):
        return n_in if n is None else n
    if kind in ("rfft", "ihfft"):
        return (n_in if n is None else n) // 2 + 1
    return 2 * (n_in - 1) if n is None else n  # irfft, hfft


def fft_wrap(fft_func: Callable, kind: str | None = None, dtype: Any = None) -> Callable:
    """A blocked transform of ``fft_func``, a function that behaves like the ``numpy.fft``
    function named ``kind`` (``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft``,
    their ``2`` and ``n`` forms; by default ``fft_func``'s name), as dask's ``fft_wrap``:
    the transformed axes are made one block and ``fft_func`` runs on every block.

    >>> import numpy as np, tilegraph as tg
    >>> blocked = tg.fft.fft_wrap(np.fft.rfft)
    >>> x = tg.from_numpy(np.arange(8.0).reshape(2, 4), chunks=1)
    >>> np.allclose(blocked(x).compute(), np.fft.rfft(np.arange(8.0).reshape(2, 4)))
    True
    """
    if not callable(fft_func):
        raise TypeError(f"fft_wrap: {fft_func!r} is not callable")
    kind = kind if kind is not None else getattr(fft_func, "__name__", "")
    base = kind.rstrip("2n")
    if base not in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
        raise ValueError(f"fft_wrap: unknown kind {kind!r}; give one of fft, ifft, rfft, "
                         "irfft, hfft, ihfft or their 2 and n forms")
    several = kind != base

    def transform(a: Any, s: Any = None, axes: Any = None, norm: str | None = None) -> Array:
        from tilegraph.array.elementwise import map_blocks

        x, norm = _prepare(kind, a, norm, None)
        s, axes = _axes_of(kind, x, s, axes, (-2, -1) if kind.endswith("2") else None)
        if not several and len(axes) != 1:
            raise ValueError(f"fft_wrap: a {kind} transform takes one axis, got {axes}")
        axes = tuple(a % x.ndim for a in axes)
        y = x.rechunk({a: -1 for a in axes})
        out_dtype = dtype
        if out_dtype is None:
            sample = np.ones((8,) * y.ndim, dtype=y.dtype)
            out_dtype = np.asarray(fft_func(sample, *_call_args(several, None, axes,
                                                                  norm))).dtype
        chunks = list(y.chunks)
        for i, ax in enumerate(axes):
            n = None if s is None else s[i]
            last = i == len(axes) - 1
            chunks[ax] = ((_out_length(base if last or base in ("fft", "ifft") else
                                       ("fft" if base in ("rfft", "ihfft") else "ifft"),
                                       y.shape[ax], n),))
        return map_blocks(_apply_fft, y, fft_func, _call_args(several, s, axes, norm),
                          dtype=out_dtype, chunks=tuple(chunks),
                          name=f"fft_wrap-{getattr(fft_func, '__name__', kind)}")

    if several:
        transform.__name__ = kind
        transform.__doc__ = f"``{kind}`` of ``fft_func`` over ``axes`` (each one block)."
        return transform

    def one_axis(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None
                 ) -> Array:
        return transform(a, None if n is None else (n,), (axis,), norm)

    one_axis.__name__ = kind
    one_axis.__doc__ = f"``{kind}`` of ``fft_func`` along ``axis`` (made one block)."
    return one_axis


def _call_args(several: bool, s: Any, axes: tuple[int, ...], norm: str) -> tuple:
    if several:
        return (s, axes, norm)
    return (None if s is None else s[0], axes[0], norm)


def _apply_fft(block: np.ndarray, func: Callable, args: tuple) -> np.ndarray:
    return func(block, *args)
