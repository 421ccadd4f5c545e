"""Arrays made block by block from their shape alone: zeros, ones, full, eye, arange,
linspace (and the random arrays of :mod:`tilegraph.random`)."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import source
from tilegraph.array.chunks import block_shape, normalize_chunks, numblocks, offsets
from tilegraph.array.core import Array, tokenize


def shape_tuple(shape: Any) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple of non-negative ints; a
    TypeError or ValueError naming the bad value otherwise."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        if isinstance(shape, (str, bytes)) or any(isinstance(s, bool) for s in shape):
            raise TypeError
        out = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise ValueError(f"negative dimensions are not allowed, got shape {out}")
    return out


def from_block_function(op: str, func: Callable[..., np.ndarray], shape: Any, chunks: Any,
                        dtype: Any, args_of: Callable[[tuple, tuple], tuple],
                        kind: str = "creation", params: tuple = ()) -> Array:
    """An array whose block at ``coord`` is ``func(*args_of(coord, block_shape))``."""
    shape = shape_tuple(shape)
    dtype = np.dtype(dtype)
    chunks = normalize_chunks(chunks, shape, dtype)
    token = tokenize(op, func, shape, chunks, dtype, *params)
    itemsize = dtype.itemsize

    def task_of(coord: tuple[int, ...]) -> tuple:
        return func, args_of(coord, block_shape(chunks, coord))

    blocks = source(f"{op}-{token}", numblocks(chunks), task_of, kind=kind, name=op,
                    nbytes=lambda c: itemsize * math.prod(block_shape(chunks, c)))
    return Array(blocks, shape, chunks, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None, chunks: Any = "auto") -> Array:
    """An array of ``fill_value``."""
    if dtype is None:
        dtype = np.array(fill_value).dtype
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        raise TypeError(f"full: arrays of Python objects are not supported "
                        f"(fill value {fill_value!r})")
    if np.ndim(fill_value) > 0:
        # an array fill value broadcasts to the shape, as in numpy.full
        from tilegraph.array.core import from_numpy

        shape = shape_tuple(shape)
        try:
            filled = np.broadcast_to(np.asarray(fill_value, dtype=dtype), shape)
        except ValueError:
            raise ValueError(f"full: fill value of shape {np.shape(fill_value)} cannot be "
                             f"broadcast to shape {shape}") from None
        return from_numpy(filled, chunks=chunks)
    # fail now, not in a task, if the value cannot fit
    if not any(np.full((), fill_value, dtype=dtype).tobytes()):
        return _zeros(shape, dtype, chunks)  # all bits zero (not -0.0): the same blocks
    return from_block_function("full", np.full, shape, chunks, dtype,
                               lambda c, s: (s, fill_value, dtype), params=(fill_value,))


def _zeros(shape: Any, dtype: np.dtype, chunks: Any) -> Array:
    # NumPy's zeros: a large block is pages the kernel maps on first touch, so a block that
    # is only read (summed, say) is never written
    return from_block_function("zeros", np.zeros, shape, chunks, dtype,
                               lambda c, s: (s, dtype))


def zeros(shape: Any, dtype: Any = float, chunks: Any = "auto") -> Array:
    """An array of zeros (float64 unless ``dtype`` is given, as in NumPy): NumPy's
    ``zeros`` per block (an empty string for a string dtype, as there)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        return full(shape, 0, dtype=dtype, chunks=chunks)  # refused there, by name
    return _zeros(shape, dtype, chunks)


def ones(shape: Any, dtype: Any = float, chunks: Any = "auto") -> Array:
    """An array of ones (float64 unless ``dtype`` is given, as in NumPy)."""
    return full(shape, 1, dtype=np.dtype(dtype), chunks=chunks)


def _eye_block(shape: tuple[int, int], k: int, dtype: np.dtype) -> np.ndarray:
    return np.eye(shape[0], shape[1], k=k, dtype=dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = float,
        chunks: Any = "auto") -> Array:
    """The identity-like matrix with ones on diagonal ``k``."""
    M = N if M is None else M
    shape = shape_tuple((N, M))
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"eye: diagonal offset k must be an int, got {k!r}") from None
    norm = normalize_chunks(chunks, shape, dtype)
    offs = [offsets(c) for c in norm]
    return from_block_function(
        "eye", _eye_block, shape, norm, dtype,
        lambda c, s: (s, k + offs[0][c[0]] - offs[1][c[1]], np.dtype(dtype)), params=(k,))


def _arange_block(first: int, size: int, start: Any, second: Any, dtype: np.dtype
                  ) -> np.ndarray:
    # NumPy's arange stores start and start + step in the result dtype, then fills element
    # i with start + i * (second - start) in that dtype; doing the same gives NumPy's values
    # bit for bit (integer dtypes with float steps included).
    # (One-element arrays, not scalars: integer wrap-around, as in NumPy's fill, is silent.)
    head = np.array([start, second], dtype=dtype)
    index = first + np.arange(size)
    if dtype.kind == "b":  # at most two values: start, start + step
        return head[index]
    out = head[:1] + index.astype(dtype) * (head[1:] - head[:1])
    if first <= 1 < first + size:
        out[1 - first] = head[1]
    return out


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None,
           chunks: Any = "auto") -> Array:
    """Evenly spaced values in ``[start, stop)``, like ``numpy.arange``."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    length = (stop - start) / step
    if not np.isfinite(length):
        raise ValueError(f"arange: cannot compute the length of [{start}, {stop}) in steps "
                         f"of {step}")
    n = max(0, math.ceil(length))
    if dtype is None:  # as NumPy (which computes in double): a float stop makes floats too
        dtype = np.arange(start, start + step, step).dtype
        if dtype.kind in "iub" and isinstance(stop, (float, np.floating)):
            dtype = np.dtype(np.float64)
    dtype = np.dtype(dtype)
    if dtype == np.bool_ and n > 2:
        raise TypeError(f"arange: booleans are only supported for at most 2 values, got {n}")
    second = start + step if n > 1 else start
    if n:
        # start and start + step must fit the dtype (NumPy raises OverflowError if not)
        np.array([start, second], dtype=dtype)
    norm = normalize_chunks(chunks, (n,), dtype)
    offs = offsets(norm[0])
    return from_block_function(
        "arange", _arange_block, (n,), norm, dtype,
        lambda c, s: (offs[c[0]], s[0], start, second, dtype), params=(start, stop, step))


def _linspace_block(first: int, size: int, start: float, step: float, stop: float,
                    last: bool, dtype: np.dtype) -> np.ndarray:
    out = start + (first + np.arange(size)) * step
    if last and size:
        out[-1] = stop
    if dtype.kind in "iu":
        out = np.floor(out)  # NumPy floors (not truncates) for integer dtypes
    return out.astype(dtype, copy=False)


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True,
             dtype: Any = None, chunks: Any = "auto") -> Array:
    """``num`` evenly spaced values from ``start`` to ``stop``, like ``numpy.linspace``."""
    try:
        num = operator.index(num)
    except TypeError:
        raise TypeError(f"linspace: number of samples must be an int, got {num!r}") from None
    if num < 0:
        raise ValueError(f"linspace: number of samples {num} must be non-negative")
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    dtype = np.dtype(dtype if dtype is not None else np.result_type(start, stop, 1.0))
    norm = normalize_chunks(chunks, (num,), dtype)
    offs = offsets(norm[0])
    return from_block_function(
        "linspace", _linspace_block, (num,), norm, dtype,
        lambda c, s: (offs[c[0]], s[0], start, step, stop,
                      endpoint and num > 1 and offs[c[0]] + s[0] == num, dtype),
        params=(start, stop, num, endpoint))
