"""Block shapes ("chunks"): normalising the user's ``chunks=`` and block-grid arithmetic.

Chunks are stored as a tuple per axis of block sizes, e.g. ``((3, 3, 1), (4,))`` for a 7 x 4
array cut into blocks of 3 rows. These functions are pure and look at shapes only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate, pairwise
from typing import Any

import numpy as np

Chunks = tuple[tuple[int, ...], ...]

AUTO_BLOCK_BYTES = 64 * 2**20


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


def normalize_chunks(chunks: Any, shape: Sequence[int], dtype: Any = float) -> Chunks:
    """Block sizes per axis from the forms users write.

    ``chunks`` may be an int (the same block size on every axis), ``-1``/``None`` (one block
    along an axis), a tuple with one entry per axis (each an int, -1, ``"auto"`` or a tuple
    of sizes),
    a tuple of per-axis tuples, ``"auto"`` (blocks of about 64 MiB) or a size such as
    ``"10MB"`` (square-ish blocks of about that many bytes).

    >>> normalize_chunks(3, (7, 4))
    ((3, 3, 1), (3, 1))
    >>> normalize_chunks((3, -1), (7, 4))
    ((3, 3, 1), (4,))
    >>> normalize_chunks(((2, 5), (4,)), (7, 4))
    ((2, 5), (4,))
    >>> normalize_chunks("800B", (30, 30))
    ((10, 10, 10), (10, 10, 10))
    >>> normalize_chunks((-1, "auto"), (4096, 8192))  # whole columns, 64 MiB blocks
    ((4096,), (2048, 2048, 2048, 2048))
    """
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative length")
    out = _normalize(chunks, shape, dtype)
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


def _normalize(chunks: Any, shape: tuple[int, ...], dtype: Any) -> Chunks:
    if isinstance(chunks, str):
        if chunks == "auto":
            return auto_chunks(shape, dtype)
        from tilegraph.util import parse_bytes

        try:
            target = parse_bytes(chunks)
        except (TypeError, ValueError):
            raise ValueError(f"chunks: unknown value {chunks!r} for shape {shape}; use 'auto', "
                             "a size such as '64MB', an int or a tuple") from None
        if target < np.dtype(dtype).itemsize:
            raise ValueError(f"chunks: blocks of {chunks!r} are smaller than one element of "
                             f"{np.dtype(dtype)}")
        return auto_chunks(shape, dtype, target)
    if chunks is None or (isinstance(chunks, (int, np.integer)) and not isinstance(chunks, bool)):
        return tuple(_axis_chunks(s, chunks, a, shape) for a, s in enumerate(shape))
    if isinstance(chunks, dict):
        specs = [chunks.get(a, chunks.get(a - len(shape), -1)) for a in range(len(shape))]
        return _per_axis(specs, shape, dtype)
    if isinstance(chunks, Sequence):
        if len(chunks) != len(shape):
            raise ValueError(
                f"chunks {chunks!r} has {len(chunks)} entries but the array has "
                f"{len(shape)} axes (shape {shape})"
            )
        return _per_axis(list(chunks), shape, dtype)
    raise TypeError(f"chunks: cannot read {chunks!r}; use an int, a tuple, or 'auto'")


def _per_axis(specs: list[Any], shape: tuple[int, ...], dtype: Any) -> Chunks:
    """One spec per axis; the axes given as ``"auto"`` share what the others leave of a
    block of about ``AUTO_BLOCK_BYTES`` (``(-1, "auto")``: whole columns, as many as fit)."""
    auto = [a for a, c in enumerate(specs) if isinstance(c, str) and c == "auto"]
    fixed = {a: _axis_chunks(s, c, a, shape) for a, (s, c) in enumerate(zip(shape, specs,
                                                                          strict=True))
             if a not in auto}
    if auto:
        per_block = np.dtype(dtype).itemsize * math.prod(max(c) for c in fixed.values())
        room = max(1.0, AUTO_BLOCK_BYTES / max(per_block, 1))
        side = max(1, int(room ** (1.0 / len(auto))))
        for a in auto:
            fixed[a] = _axis_chunks(shape[a], min(max(shape[a], 1), side), a, shape)
    return tuple(fixed[a] for a in range(len(shape)))


def auto_chunks(shape: tuple[int, ...], dtype: Any, target: int = AUTO_BLOCK_BYTES) -> Chunks:
    """Square-ish blocks of about ``target`` bytes."""
    itemsize = np.dtype(dtype).itemsize
    if not shape:
        return ()
    total = math.prod(shape) * itemsize
    if total <= target:
        return tuple((s,) if s else (0,) for s in shape)
    side = max(1, int((target / itemsize) ** (1.0 / len(shape))))
    return tuple(_axis_chunks(s, min(max(s, 1), side), a, shape) for a, s in enumerate(shape))


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
