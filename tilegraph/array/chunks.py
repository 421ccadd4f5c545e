"""Block shapes ("chunks"): normalising the user's ``chunks=`` and block-grid arithmetic.

Chunks are stored as a tuple per axis of block sizes, e.g. ``((3, 3, 1), (4,))`` for a 7 x 4
array cut into blocks of 3 rows. These functions are pure and look at shapes only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate, pairwise
from typing import Any

import numpy as np

Chunks = tuple[tuple[int, ...], ...]

AUTO_BLOCK_BYTES = 128 * 2**20  # dask's array.chunk-size


def _axis_chunks(size: int, spec: Any, axis: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    if spec is None or spec == -1:
        return (size,) if size else (0,)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        step = int(spec)
        if step <= 0:
            raise ValueError(
                f"chunks: block size along axis {axis} must be positive or -1, got {step} "
                f"(shape {shape})"
            )
        if size == 0:
            return (0,)
        full, rest = divmod(size, step)
        _check_count(full + (1 if rest else 0), f"along axis {axis}", shape, step)
        return (step,) * full + ((rest,) if rest else ())
    if isinstance(spec, Sequence) and not isinstance(spec, str):
        sizes = tuple(int(s) for s in spec)
        if any(s < 0 for s in sizes) or sum(sizes) != size:
            raise ValueError(
                f"chunks: block sizes {sizes} along axis {axis} must be non-negative and add "
                f"up to the axis length {size} (shape {shape})"
            )
        if not sizes:
            raise ValueError(f"chunks: no block sizes given for axis {axis} (shape {shape})")
        return sizes
    raise TypeError(
        f"chunks: cannot read {spec!r} for axis {axis}; use an int, -1, 'auto', or a tuple "
        "of block sizes"
    )


def normalize_chunks(chunks: Any, shape: Sequence[int], dtype: Any = float, *,
                     limit: Any = None, previous_chunks: Any = None) -> Chunks:
    """Block sizes per axis from the forms users write, as ``dask.array``'s
    ``normalize_chunks`` reads them.

    ``chunks`` may be an int (the same block size on every axis), ``-1``/``None`` (one
    block along an axis), a tuple with one entry per axis (each an int, -1, ``None``,
    ``"auto"``, a size in bytes such as ``"64 MB"``, or a tuple of sizes), a dict of such
    entries by axis (axes not named: one block), ``"auto"``, or a size in bytes (every axis
    ``"auto"`` with blocks of about that size). A 1-d array also takes its block sizes as a
    flat tuple. The ``"auto"`` axes share what the others leave of a block of about
    ``limit`` bytes (a size in bytes in ``chunks`` sets it; :data:`AUTO_BLOCK_BYTES`,
    dask's ``array.chunk-size``, by default), square-ish among themselves, or, given
    ``previous_chunks`` (a rechunk's current blocks), in the proportions of those blocks
    (see :func:`auto_chunks`: dask's rules, which give dask's blocks).

    >>> normalize_chunks(3, (7, 4))
    ((3, 3, 1), (3, 1))
    >>> normalize_chunks((3, -1), (7, 4))
    ((3, 3, 1), (4,))
    >>> normalize_chunks(((2, 5), (4,)), (7, 4))
    ((2, 5), (4,))
    >>> normalize_chunks((2, 5), (7,))
    ((2, 5),)
    >>> normalize_chunks("800B", (30, 30))
    ((10, 10, 10), (10, 10, 10))
    >>> normalize_chunks((-1, "auto"), (4096, 8192))  # whole columns, 128 MiB blocks
    ((4096,), (4096, 4096))
    >>> normalize_chunks(("1 KiB", None), (500, 4), "float32")
    ((64, 64, 64, 64, 64, 64, 64, 52), (4,))
    """
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative length")
    out = _normalize(chunks, shape, dtype, limit, previous_chunks)
    _check_count(math.prod(len(c) for c in out), "in all", shape, None)
    return out


CHECKED_GRID = 100_000  # blocks: larger grids are checked against max_tasks when made


def _check_count(nblocks: int, where: str, shape: tuple[int, ...], step: int | None) -> None:
    """Refuse block grids larger than any plan may be (the ``max_tasks`` option in force,
    resolved as a run's options are), before the block sizes are listed (a grid of 10^60
    blocks would exhaust the memory). Grids of at most ``CHECKED_GRID`` blocks are cheap to
    list: the run that plans them checks its own ``max_tasks``."""
    if nblocks <= CHECKED_GRID:
        return
    from tilegraph import config

    limit = config.resolve({}, "chunks").max_tasks
    if nblocks > limit:
        size = f" of {step:,} elements" if step is not None else ""
        raise ValueError(
            f"chunks: shape {shape} in blocks{size} makes {nblocks:,} blocks {where}, more "
            f"than max_tasks={limit:,} a plan may hold; use larger blocks")


def _bytes(spec: str, shape: tuple[int, ...]) -> int:
    from tilegraph.util import parse_bytes

    try:
        return parse_bytes(spec)
    except (TypeError, ValueError):
        raise ValueError(f"chunks: unknown value {spec!r} for shape {shape}; use 'auto', a "
                         "size such as '64MB', an int or a tuple") from None


def _normalize(chunks: Any, shape: tuple[int, ...], dtype: Any, limit: Any,
               previous: Any) -> Chunks:
    if isinstance(chunks, str):
        if chunks != "auto":
            limit = _limit(limit, _bytes(chunks, shape), shape)
        return _per_axis(["auto"] * len(shape), shape, dtype, limit, previous)
    if chunks is None or (isinstance(chunks, (int, np.integer)) and not isinstance(chunks, bool)):
        return tuple(_axis_chunks(s, chunks, a, shape) for a, s in enumerate(shape))
    if isinstance(chunks, dict):
        specs = [chunks.get(a, chunks.get(a - len(shape), -1)) for a in range(len(shape))]
        return _per_axis(specs, shape, dtype, limit, previous)
    if isinstance(chunks, np.ndarray):
        chunks = chunks.tolist()
    if isinstance(chunks, Sequence):
        if (len(shape) == 1 and len(chunks) > 1 and all(
                isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in chunks)):
            chunks = (tuple(chunks),)  # a 1-d array's block sizes, given flat
        if len(chunks) != len(shape):
            raise ValueError(
                f"chunks {chunks!r} has {len(chunks)} entries but the array has "
                f"{len(shape)} axes (shape {shape})"
            )
        return _per_axis(list(chunks), shape, dtype, limit, previous)
    raise TypeError(f"chunks: cannot read {chunks!r}; use an int, a tuple, or 'auto'")


def _limit(limit: Any, given: int, shape: tuple[int, ...]) -> int:
    """The one byte limit of a normalisation: sizes in ``chunks`` must agree with each
    other and with ``limit``."""
    if limit is not None:
        from tilegraph.util import parse_bytes

        if parse_bytes(limit) != given:
            raise ValueError(f"chunks: block sizes in bytes must agree (and with limit=): "
                             f"{given} != {parse_bytes(limit)} (shape {shape})")
    return given


def _per_axis(specs: list[Any], shape: tuple[int, ...], dtype: Any, limit: Any,
              previous: Any) -> Chunks:
    """One spec per axis; the axes given as ``"auto"`` (or as a size in bytes, which sets
    the limit) share what the others leave of a block of about the limit."""
    for a, c in enumerate(specs):
        if isinstance(c, str) and c != "auto":
            try:
                given = _bytes(c, shape)
            except ValueError:
                raise TypeError(f"chunks: cannot read {c!r} for axis {a}; use an int, -1, "
                                "'auto', a size such as '64MB', or a tuple of block "
                                "sizes") from None
            limit = _limit(limit, given, shape)
            specs[a] = "auto"
    auto = [a for a, c in enumerate(specs) if isinstance(c, str)]
    fixed = {a: _axis_chunks(s, c, a, shape) for a, (s, c) in enumerate(zip(shape, specs,
                                                                          strict=True))
             if a not in auto}
    if not auto:
        return tuple(fixed[a] for a in range(len(shape)))
    if 0 in shape:  # an empty array: one block along each "auto" axis
        return tuple(fixed[a] if a in fixed else _axis_chunks(shape[a], -1, a, shape)
                     for a in range(len(shape)))
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError("chunks: 'auto' cannot size blocks of Python objects; give the "
                        "block sizes")
    if dtype.itemsize == 0:
        raise ValueError(f"chunks: 'auto' cannot size blocks of {dtype} (0 bytes per "
                         "element); give the block sizes")
    from tilegraph.util import parse_bytes

    target = AUTO_BLOCK_BYTES if limit is None else parse_bytes(limit)
    if target < dtype.itemsize and limit is not None:
        raise ValueError(f"chunks: blocks of {limit!r} are smaller than one element of "
                         f"{dtype}")
    spec = [("auto" if a in auto else fixed[a]) for a in range(len(shape))]
    if previous is not None:
        previous = tuple(
            tuple(int(v) for v in p) if isinstance(p, (tuple, list)) else int(p)
            for p in previous)
        if len(previous) != len(shape):
            raise ValueError(f"chunks: previous_chunks {previous} do not match shape {shape}")
    done = auto_chunks(spec, shape, target, dtype, previous)
    return tuple(fixed[a] if a not in auto else _axis_chunks(
        shape[a], done[a] if isinstance(done[a], tuple) else int(done[a]), a, shape)
        for a in range(len(shape)))


CHUNK_SIZE_TOLERANCE = 1.25  # dask's array.chunk-size-tolerance


def _round_to(c: float, s: int) -> int:
    """A block size near ``c`` for an axis of ``s``: ``int(c)`` (at least 1) when it fits,
    else the largest multiple of ``s`` below ``c`` (dask's ``round_to``)."""
    return max(1, int(c)) if c <= s else int(c // s * s)


def _largest(entry: Any) -> float:
    return max(entry) if isinstance(entry, tuple) else entry


def _multiplier(limit: int, itemsize: int, largest_block: float, result: dict) -> float:
    return limit / itemsize / largest_block / math.prod(
        _largest(r) for r in result.values() if r)


def auto_chunks(chunks: list[Any], shape: tuple[int, ...], limit: int, dtype: Any,
                previous_chunks: Any = None) -> list[Any]:
    """The ``"auto"`` entries of ``chunks`` (the others block sizes or tuples of them)
    replaced by block sizes such that a block holds about ``limit`` bytes: dask's rules
    (``dask.array.core.auto_chunks``), so the same inputs give dask's blocks.

    Without ``previous_chunks`` every ``"auto"`` axis gets the same size, the root of what
    the fixed axes leave; an axis shorter than that is taken whole and the others share
    what is left. With ``previous_chunks`` (the blocks a rechunk starts from) each ``"auto"``
    axis grows or shrinks from its median block by the same factor: growing merges whole
    previous blocks up to that size (so new blocks are unions of old ones), shrinking
    rounds to a factor of the axis' most common block; an axis that reaches its length is
    taken whole and the factor is shared among the rest again. (Previous blocks of length
    zero are left out; dask counts them, and then cuts a small array in pieces.)

    >>> auto_chunks(["auto", "auto"], (1000, 1000), 80_000, np.dtype(float))
    [100, 100]
    >>> auto_chunks([1000, "auto"], (1000, 1000), 80_000, np.dtype(float))
    [1000, 10]
    >>> auto_chunks(["auto", 10], (400, 10), 16_000, np.dtype(float),
    ...             previous_chunks=((50,) * 8, (10,)))
    [(200, 200), 10]
    """
    dtype = np.dtype(dtype)
    chunks = list(chunks)
    autos = {i for i, c in enumerate(chunks) if c == "auto"}
    if not autos:
        return chunks
    limit = max(1, int(limit))
    itemsize = dtype.itemsize
    largest_block = math.prod(_largest(c) for c in chunks if c != "auto")
    if previous_chunks:
        # a previous axis of one block stands for blocks of that size (dask's reading)
        previous = [_split(s, int(p[0]) if isinstance(p, tuple) and len(p) == 1 else p)
                    if not isinstance(p, tuple) or len(p) == 1 else tuple(p)
                    for p, s in zip(previous_chunks, shape, strict=True)]
        # empty blocks say nothing of the block size (dask's medians would take them)
        previous = [tuple(c for c in p if c) or p for p in previous]
        median: dict[int, Any] = {a: float(np.median(previous[a])) for a in autos}
        result: dict[int, Any] = {}
        multiplier = _multiplier(limit, itemsize, largest_block, median)
        if multiplier < 1:
            result = median  # shrinking updates the medians in place, as dask's does
        ideal = []
        for i, s in enumerate(shape):
            counts = Counter(previous[i])
            mode, count = max(counts.items(), key=lambda kv: kv[1])
            ideal.append(mode if mode > 1 and count >= len(previous[i]) / 2 else s)
        remaining = True
        reduce_case = multiplier < 1
        while remaining:
            last_autos = set(autos)
            remaining = False
            for a in sorted(autos):
                this = multiplier ** (1 / len(last_autos))
                proposed = median[a] * this
                max_chunk = proposed * CHUNK_SIZE_TOLERANCE ** (1 / len(last_autos))
                if proposed > shape[a]:  # the whole axis
                    chunks[a] = shape[a]
                    autos.remove(a)
                    del median[a]
                    remaining = True
                    largest_block *= shape[a]
                    result[a] = (shape[a],)
                    continue
                if reduce_case or max(previous[a]) > max_chunk:
                    result[a] = _round_to(proposed, ideal[a])
                    if proposed < 1:
                        remaining = True
                        autos.discard(a)
                    continue
                merged, current = [], 0
                for c in previous[a]:  # whole previous blocks, merged up to the size
                    if c + current <= proposed:
                        current += c
                    else:
                        if current > 0:
                            merged.append(current)
                        current = c
                if current > 0:
                    merged.append(current)
                result[a] = tuple(merged)
            if remaining or reduce_case:
                last = multiplier
                multiplier = _multiplier(limit, itemsize, largest_block, median)
                if multiplier != last:
                    remaining = True
        for k, v in result.items():
            chunks[k] = v or 0
        return chunks
    size = (limit / itemsize / largest_block) ** (1 / len(autos))
    small = [i for i in autos if shape[i] < size]
    if small:
        for i in small:
            chunks[i] = (shape[i],) if shape[i] else (0,)
        return auto_chunks(chunks, shape, limit, dtype)
    for i in autos:
        chunks[i] = _round_to(size, shape[i])
    return chunks


def _split(length: int, step: int) -> tuple[int, ...]:
    if length == 0 or step <= 0:
        return (length,)
    full, rest = divmod(length, step)
    return (step,) * full + ((rest,) if rest else ())


def numblocks(chunks: Chunks) -> tuple[int, ...]:
    return tuple(len(c) for c in chunks)


def offsets(sizes: Sequence[int]) -> tuple[int, ...]:
    """Start of each block along an axis, plus the end: ``(0, s0, s0+s1, ...)``."""
    return (0, *accumulate(sizes))


def block_slices(chunks: Chunks, coord: Sequence[int]) -> tuple[slice, ...]:
    """The slices of the whole array that block ``coord`` covers."""
    out = []
    for sizes, c in zip(chunks, coord, strict=True):
        start = sum(sizes[:c])
        out.append(slice(start, start + sizes[c]))
    return tuple(out)


class BlockSlices:
    """``block_slices`` of any block by its coordinate (``slices[coord]``), from slices
    made once per axis: as :func:`all_block_slices` without listing every block (a plan
    of a few blocks of a large array looks up those only)."""

    __slots__ = ("_axes",)

    def __init__(self, chunks: Chunks):
        self._axes = [[slice(o, o + s) for o, s in zip(offsets(sz), sz, strict=False)]
                      for sz in chunks]

    def __getitem__(self, coord: Sequence[int]) -> tuple[slice, ...]:
        return tuple(axis[c] for axis, c in zip(self._axes, coord, strict=True))


def all_block_slices(chunks: Chunks) -> dict[tuple[int, ...], tuple[slice, ...]]:
    """``block_slices`` for every block, computed once per axis."""
    axes = [[slice(o, o + s) for o, s in zip(offsets(sz), sz, strict=False)] for sz in chunks]
    return {coord: tuple(axes[a][c] for a, c in enumerate(coord))
            for coord in np.ndindex(*numblocks(chunks))}


def block_shape(chunks: Chunks, coord: Sequence[int]) -> tuple[int, ...]:
    return tuple(sizes[c] for sizes, c in zip(chunks, coord, strict=True))


def common_refinement(*sizes_list: Sequence[int]) -> tuple[int, ...]:
    """The coarsest block sizes whose boundaries include every input's boundaries.

    >>> common_refinement((4, 4), (2, 6))
    (2, 2, 4)
    """
    total = sum(sizes_list[0])
    for sizes in sizes_list[1:]:
        if sum(sizes) != total:
            raise ValueError(f"cannot align blocks {sizes_list}: axis lengths differ")
    cuts = sorted(set().union(*(offsets(s) for s in sizes_list)))
    return tuple(b - a for a, b in pairwise(cuts)) or (0,)


def blocks_bytes(chunks: Chunks, dtype: Any) -> int:
    """Bytes of the largest block."""
    return math.prod(max(c) if c else 0 for c in chunks) * np.dtype(dtype).itemsize
