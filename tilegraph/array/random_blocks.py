"""How random arrays are drawn block by block (the machinery under
:mod:`tilegraph.array.random`): block ``(i, j)`` draws from a generator whose seed is the
array's seed with the block coordinate as spawn key (:func:`block_generator`), so the values
never depend on the number of workers or the order in which blocks are made.
:func:`draw_blocks` makes the arrays of the four draws with number parameters (``random``,
``normal``, ``uniform``, ``integers``); :func:`distribution` any method of NumPy's
``Generator``, with parameters that may be numbers, NumPy arrays or tilegraph arrays;
:func:`choice_from` draws with replacement from the values of an array.

>>> import numpy as np
>>> from tilegraph.array.random_blocks import draw_blocks
>>> x = draw_blocks("normal", (4, 4), 2, 7, (0.0, 1.0), np.float64)
>>> x.chunks, x.dtype
(((2, 2), (2, 2)), dtype('float64'))
"""

from __future__ import annotations

import math
import operator
import secrets
from typing import Any

import numpy as np

from tilegraph.array.chunks import normalize_chunks, numblocks
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.creation import from_block_function


class FreshSeed(int):
    """A seed drawn here because none was given. Under MPI each rank draws its own; that is
    no mix of data, since each block is drawn once, on the rank it is placed on, so the
    ranks' check of literal inputs leaves these seeds out."""

    __slots__ = ()


# its public home: pickles, the plan digest (runtime/digest.py) and checkpoints name it there
FreshSeed.__module__ = "tilegraph.array.random"


def seed_value(seed: Any) -> int:
    """``seed`` as the int a random array is seeded with: a new :class:`FreshSeed` for
    ``None``; a TypeError for anything but a non-negative int."""
    if seed is None:
        return FreshSeed(secrets.randbits(63))
    if isinstance(seed, FreshSeed):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise TypeError(f"seed must be a non-negative int or None, got {seed!r}")


def block_generator(seed: int, coord: tuple[int, ...]) -> np.random.Generator:
    """The generator of block ``coord``: the block coordinate is the spawn key of the
    user's seed. (Seeding with the list ``[seed, *coord]`` would not do: NumPy's
    SeedSequence treats ``[s]`` and ``[s, 0]`` alike and splits seeds of 2**32 and more
    into several words, so different seeds and blocks could share one stream.)"""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=coord))


def _draw(method: str, seed: tuple[int, ...], shape: tuple[int, ...], params: tuple,
          dtype: np.dtype) -> np.ndarray:
    rng = block_generator(seed[0], tuple(seed[1:]))
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


def draw_blocks(method: str, size: Any, chunks: Any, seed: Any, params: tuple, dtype: Any
                ) -> Array:
    """A random array of shape ``size`` in blocks of ``chunks`` drawn by ``method``
    (``"random"``, ``"normal"``, ``"uniform"`` or ``"integers"``) with the number
    parameters ``params``, each block seeded by ``seed`` and its coordinate."""
    shape = size_tuple(size) or ()
    if any(n < 0 for n in shape):
        raise ValueError(f"random.{method}: negative dimensions are not allowed, got size "
                         f"{shape}")
    s = seed_value(seed)
    dtype = np.dtype(dtype)
    return from_block_function(
        f"random-{method}", _draw, shape, chunks, dtype,
        lambda c, bs: (method, (s, *c), bs, params, dtype), kind="random",
        params=(s, method, *params))


# -- any distribution, with parameters that may be arrays ---------------------------------------


def _draw_method(method: str, seed: tuple[int, ...], shape: tuple[int, ...], extra: int,
                 args: tuple, kwargs: dict, *arrays: np.ndarray) -> np.ndarray:
    """A block of ``Generator.<method>``: ``args``/``kwargs`` with ``Dep``-free array
    parameters substituted from ``arrays`` (``_Slot(i)`` marks where array ``i`` goes)."""
    rng = block_generator(seed[0], tuple(seed[1:]))
    fill = [a for a in arrays]
    a = tuple(fill[v.index] if isinstance(v, _Slot) else v for v in args)
    k = {n: fill[v.index] if isinstance(v, _Slot) else v for n, v in kwargs.items()}
    size = shape[:len(shape) - extra] if extra else shape
    return np.asarray(getattr(rng, method)(*a, size=size, **k))


class _Slot:
    """Where the ``index``-th array parameter goes among a draw's arguments."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"_Slot({self.index})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _Slot) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("_Slot", self.index))

    def __reduce__(self) -> tuple:
        return (_Slot, (self.index,))


def size_tuple(size: Any) -> tuple[int, ...] | None:
    """``size=`` as a tuple of ints (``None`` as it is); a TypeError for anything else."""
    if size is None:
        return None
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        return (int(size),)
    try:
        if isinstance(size, (str, bytes)):
            raise TypeError
        return tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"size must be an int, a tuple of ints or None, got {size!r}") \
            from None


def distribution(method: str, seed: Any, args: tuple, kwargs: dict, size: Any,
                  chunks: Any, extra: tuple[int, ...] = ()) -> Array:
    """``Generator.<method>(*args, size=..., **kwargs)`` as a blocked array: the output's
    shape is ``size`` broadcast with the array parameters' shapes (then ``extra`` trailing
    axes of one block each, for multinomial draws); numbers go to every block, NumPy arrays
    are cut into the output's blocks, and tilegraph arrays are broadcast and rechunked to
    them. The dtype, and any invalid parameter, come from NumPy's own call on the
    parameters (array parameters whole when they are NumPy arrays)."""
    s = seed_value(seed)
    size_t = size_tuple(size)
    args = tuple(np.asarray(v) if isinstance(v, (list, tuple)) else v for v in args)
    whole = {k: v for k, v in kwargs.items() if k in _WHOLE}
    kwargs = {k: np.asarray(v) if isinstance(v, (list, tuple)) else v
              for k, v in kwargs.items() if k not in _WHOLE}
    values = list(args) + list(kwargs.values())
    shapes = [v.shape for v in values if isinstance(v, (np.ndarray, Array))]
    try:
        shape = tuple(np.broadcast_shapes(*shapes, *([size_t] if size_t is not None else [])))
    except ValueError:
        raise ValueError(f"random.{method}: parameters of shapes {shapes} do not broadcast "
                         f"to size {size_t}") from None
    if size_t is not None and shape != size_t:
        raise ValueError(f"random.{method}: parameters of shapes {shapes} broadcast to "
                         f"{shape}, not to the size {size_t} asked for")
    probe_args = [_probe_value(v) for v in args]
    probe_kwargs = {k: _probe_value(v) for k, v in kwargs.items()}
    probe_kwargs.update(whole)
    try:
        sample = getattr(np.random.default_rng(0), method)(*probe_args, **probe_kwargs,
                                                          size=_probe_size(probe_args,
                                                                           probe_kwargs))
    except (ValueError, TypeError, OverflowError) as exc:
        raise type(exc)(f"random.{method}: {exc}") from None
    dtype = np.asarray(sample).dtype
    full_shape = shape + extra
    norm = normalize_chunks(chunks, shape, dtype) + tuple((e,) for e in extra)
    arrays = [v for v in values if isinstance(v, (np.ndarray, Array)) and v.ndim]
    if not arrays:
        plain = tuple(np.asarray(v)[()] if isinstance(v, (np.ndarray, Array)) else v
                      for v in args)
        plain_kw = {k: np.asarray(v)[()] if isinstance(v, (np.ndarray, Array)) else v
                    for k, v in kwargs.items()}
        plain_kw.update(whole)
        if any(isinstance(v, Array) for v in values):  # 0-d lazy parameters
            return _with_arrays(method, s, args, {**kwargs, **whole}, shape, norm, dtype,
                                extra)
        n_extra = len(extra)
        return from_block_function(
            f"random-{method}", _draw_method, full_shape, norm, dtype,
            lambda c, bs: (method, (s, *c), bs, n_extra, plain, plain_kw), kind="random",
            params=(s, method, tuple(map(repr, plain)), tuple(sorted(
                (k, repr(v)) for k, v in plain_kw.items()))))
    return _with_arrays(method, s, args, {**kwargs, **whole}, shape, norm, dtype, extra)


# keyword parameters that are one vector for every draw (not broadcast against ``size``)
_WHOLE = frozenset({"pvals", "colors", "p"})


def _probe_value(v: Any) -> Any:
    if isinstance(v, Array):
        return np.ones((), dtype=v.dtype) if v.dtype.kind != "b" else np.zeros((), bool)
    return v


def _probe_size(args: list, kwargs: dict) -> Any:
    arrays = [v for v in (*args, *kwargs.values()) if isinstance(v, np.ndarray) and v.ndim]
    return None if arrays else (1,)


def _with_arrays(method: str, seed: int, args: tuple, kwargs: dict, shape: tuple[int, ...],
                 norm: tuple, dtype: np.dtype, extra: tuple[int, ...]) -> Array:
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.scans import broadcast_to
    from tilegraph.graph.taskgraph import Dep

    chunks = norm[:len(shape)]
    params: list[Array] = []

    def slot(v: Any) -> Any:
        if not isinstance(v, (np.ndarray, Array)):
            return v
        a = v if isinstance(v, Array) else asarray(v, chunks=-1)
        if a.shape != shape:
            a = broadcast_to(a, shape)
        if a.chunks != chunks:
            a = a.rechunk(chunks)
        params.append(a)
        return _Slot(len(params) - 1)

    a_args = tuple(slot(v) for v in args)
    a_kwargs = {k: v if k in _WHOLE else slot(v) for k, v in kwargs.items()}
    keys = [p.collection.key for p in params]
    n_extra = len(extra)
    itemsize = dtype.itemsize
    token = tokenize(f"random-{method}", seed, *params, a_args, a_kwargs, norm, dtype)

    def task_of(c: tuple[int, ...]) -> tuple:
        bs = tuple(norm[a][k] for a, k in enumerate(c))
        inner = c[:len(shape)]
        return (_draw_method, [k(inner) for k in keys],
                (method, (seed, *c), bs, n_extra, a_args, a_kwargs,
                 *(Dep(i) for i in range(len(keys)))))

    blocks = apply_blocks(f"random-{method}-{token}", numblocks(norm),
                          [p.collection for p in params], task_of, kind="map",
                          name=f"random-{method}",
                          nbytes=lambda c: itemsize * math.prod(
                              norm[a][k] for a, k in enumerate(c)))
    return Array(blocks, shape + extra, norm, dtype)


def _choice_block(seed: tuple[int, ...], shape: tuple[int, ...], p: Any,
                  a: np.ndarray) -> np.ndarray:
    return block_generator(seed[0], tuple(seed[1:])).choice(a, size=shape, replace=True, p=p)


def choice_from(seed: int, source: Array, p: Any, size: tuple[int, ...], chunks: Any
                ) -> Array:
    """Draws with replacement from the values of ``source`` (made one block, an input of
    every output block)."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.graph.taskgraph import Dep

    whole = source.rechunk(-1) if source.numblocks != (1,) else source
    norm = normalize_chunks(chunks, size, source.dtype)
    key = whole.collection.key((0,))
    token = tokenize("random-choice", seed, whole, None if p is None else tuple(p), norm)
    blocks = apply_blocks(
        f"random-choice-{token}", numblocks(norm), [whole.collection],
        lambda c: (_choice_block, [key],
                   ((seed, *c), tuple(norm[a][k] for a, k in enumerate(c)), p, Dep(0))),
        kind="map", name="random-choice")
    return Array(blocks, size, norm, source.dtype)


def has_arrays(*values: Any) -> bool:
    """Whether any parameter is an array (a tilegraph array, or a NumPy array or sequence
    of one dimension or more): such parameters broadcast against ``size``."""
    return any(isinstance(v, Array) or np.ndim(v) for v in values)
