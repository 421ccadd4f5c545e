"""Random arrays, seeded per block: block ``(i, j)`` draws from a generator seeded with
``(seed, i, j)``, so the values never depend on the number of workers or the order in which
blocks are made. The same ``seed`` and ``chunks`` give the same array every time.

>>> import tilegraph as tg
>>> a = tg.random.random((4, 4), chunks=2, seed=7).compute()
>>> b = tg.random.random((4, 4), chunks=2, seed=7).compute(backend="sync")
>>> bool((a == b).all())
True
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np

from tilegraph.array.core import Array
from tilegraph.array.creation import from_block_function

__all__ = ["Generator", "default_rng", "integers", "normal", "random", "standard_normal",
           "uniform"]


class FreshSeed(int):
    """A seed drawn here because none was given. Under MPI each rank draws its own; that is
    no mix of data, since each block is drawn once, on the rank it is placed on, so the
    ranks' check of literal inputs leaves these seeds out."""

    __slots__ = ()


def _seed(seed: Any) -> int:
    if seed is None:
        return FreshSeed(secrets.randbits(63))
    if isinstance(seed, FreshSeed):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise TypeError(f"seed must be a non-negative int or None, got {seed!r}")


def _generator(seed: int, coord: tuple[int, ...]) -> np.random.Generator:
    """The generator of block ``coord``: the block coordinate is the spawn key of the
    user's seed. (Seeding with the list ``[seed, *coord]`` would not do: NumPy's
    SeedSequence treats ``[s]`` and ``[s, 0]`` alike and splits seeds of 2**32 and more
    into several words, so different seeds and blocks could share one stream.)"""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=coord))


def _draw(method: str, seed: tuple[int, ...], shape: tuple[int, ...], params: tuple,
          dtype: np.dtype) -> np.ndarray:
    rng = _generator(seed[0], tuple(seed[1:]))
    if method == "random":
        return rng.random(shape, dtype=dtype)
    if method == "normal":
        out = rng.standard_normal(shape, dtype=dtype)
        loc, scale = params
        if scale != 1:
            out *= scale
        if loc != 0:
            out += loc
        return out
    if method == "uniform":
        low, high = params
        return (low + (high - low) * rng.random(shape)).astype(dtype, copy=False)
    low, high, endpoint = params
    return rng.integers(low, high, size=shape, dtype=dtype, endpoint=endpoint)


def _make(method: str, shape: Any, chunks: Any, seed: Any, params: tuple, dtype: Any
          ) -> Array:
    s = _seed(seed)
    dtype = np.dtype(dtype)
    return from_block_function(
        f"random-{method}", _draw, shape, chunks, dtype,
        lambda c, bs: (method, (s, *c), bs, params, dtype), kind="random",
        params=(s, method, *params))


def random(shape: Any, chunks: Any = "auto", seed: Any = None, dtype: Any = np.float64
           ) -> Array:
    """Uniform floats in [0, 1)."""
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"random: dtype must be float32 or float64, got {dtype}")
    return _make("random", shape, chunks, seed, (), dtype)


def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, chunks: Any = "auto",
           seed: Any = None, dtype: Any = np.float64) -> Array:
    """Normally distributed floats with mean ``loc`` and standard deviation ``scale``."""
    if size is None:
        raise TypeError("normal: give the array shape as size=")
    if scale < 0:
        raise ValueError(f"normal: scale must be non-negative, got {scale}")
    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"normal: dtype must be float32 or float64, got {dtype}")
    return _make("normal", size, chunks, seed, (loc, scale), dtype)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None, chunks: Any = "auto",
            seed: Any = None) -> Array:
    """Uniform floats in [low, high)."""
    if size is None:
        raise TypeError("uniform: give the array shape as size=")
    return _make("uniform", size, chunks, seed, (low, high), np.float64)


def integers(low: int, high: int | None = None, size: Any = None, chunks: Any = "auto",
             seed: Any = None, dtype: Any = np.int64, endpoint: bool = False) -> Array:
    """Random integers in [low, high) (or [0, low) with one bound), like
    ``Generator.integers``."""
    if size is None:
        raise TypeError("integers: give the array shape as size=")
    if high is None:
        low, high = 0, low
    if high < low or (high == low and not endpoint):
        raise ValueError(f"integers: empty range [{low}, {high})")
    if np.dtype(dtype).kind not in "iu":
        raise TypeError(f"integers: dtype must be an integer type, got {dtype}")
    info = np.iinfo(dtype)
    top = high if endpoint else high - 1
    if low < info.min or top > info.max:
        raise ValueError(
            f"integers: range [{low}, {high}{']' if endpoint else ')'} is out of bounds for "
            f"{np.dtype(dtype)} (values {info.min} to {info.max})")
    return _make("integers", size, chunks, seed, (low, high, endpoint), dtype)


def standard_normal(size: Any = None, chunks: Any = "auto", seed: Any = None,
                    dtype: Any = np.float64) -> Array:
    """Standard normal floats (mean 0, standard deviation 1)."""
    return normal(0.0, 1.0, size=size, chunks=chunks, seed=seed, dtype=dtype)


class Generator:
    """Random arrays from one seed, as ``numpy.random.default_rng(seed)`` (and dask's
    ``da.random.default_rng``) hands them out: each call draws a new array from the next
    child of the seed's ``SeedSequence``, so the same seed gives the same arrays in the
    same order, and every array's blocks are seeded by block coordinate as in
    :func:`random`.

    >>> import tilegraph as tg
    >>> a = tg.random.default_rng(3).random((4,), chunks=2).compute()
    >>> b = tg.random.default_rng(3).random((4,), chunks=2).compute()
    >>> bool((a == b).all())
    True
    """

    def __init__(self, seed: Any = None):
        if isinstance(seed, np.random.SeedSequence):
            self._seq = seed
        elif isinstance(seed, Generator):
            self._seq = seed._seq.spawn(1)[0]
        else:
            self._seq = np.random.SeedSequence(_seed(seed))
        self._fresh = seed is None or (isinstance(seed, Generator) and seed._fresh)

    def _next(self) -> int:
        child = self._seq.spawn(1)[0]
        value = int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))
        return FreshSeed(value) if self._fresh else value

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None,
               chunks: Any = "auto") -> Array:
        """Uniform floats in [0, 1)."""
        _no_out(out)
        return random(_size(size), chunks=chunks, seed=self._next(), dtype=dtype)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None,
                        chunks: Any = "auto") -> Array:
        """Standard normal floats."""
        _no_out(out)
        return standard_normal(_size(size), chunks=chunks, seed=self._next(), dtype=dtype)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None,
               chunks: Any = "auto") -> Array:
        """Normal floats with mean ``loc`` and standard deviation ``scale``."""
        return normal(loc, scale, size=_size(size), chunks=chunks, seed=self._next())

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None,
                chunks: Any = "auto") -> Array:
        """Uniform floats in [low, high)."""
        return uniform(low, high, size=_size(size), chunks=chunks, seed=self._next())

    def integers(self, low: int, high: int | None = None, size: Any = None,
                 dtype: Any = np.int64, endpoint: bool = False, chunks: Any = "auto"
                 ) -> Array:
        """Random integers in [low, high) (or [0, low) with one bound)."""
        return integers(low, high, size=_size(size), chunks=chunks, seed=self._next(),
                        dtype=dtype, endpoint=endpoint)

    def __repr__(self) -> str:
        return f"tilegraph.random.Generator(entropy={self._seq.entropy})"


def _size(size: Any) -> Any:
    if size is None:
        raise TypeError("Generator: give the array shape as size= (a tilegraph Generator "
                        "draws arrays; for one number use numpy.random.default_rng)")
    return size


def _no_out(out: Any) -> None:
    if out is not None:
        raise TypeError("Generator: out= is not supported (tilegraph arrays are lazy)")


def default_rng(seed: Any = None) -> Generator:
    """A :class:`Generator` from ``seed`` (a non-negative int, a ``SeedSequence``, another
    Generator, or ``None`` for fresh entropy), as ``numpy.random.default_rng``."""
    return Generator(seed)
