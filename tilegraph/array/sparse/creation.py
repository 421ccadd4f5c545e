"""Random sparse arrays: blocks drawn independently per block coordinate."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import scipy.sparse as sps

from tilegraph.algebra.blocks import source
from tilegraph.array.chunks import block_shape, normalize_chunks, numblocks
from tilegraph.array.core import tokenize
from tilegraph.array.sparse.array import SparseArray
from tilegraph.array.sparse.kernels import finish
from tilegraph.array.sparse_blocks import (
    check_dtype,
    check_format,
    expected_nbytes,
    index_itemsize,
)
from tilegraph.graph.taskgraph import Lit
from tilegraph.util import unique


def _distinct(rng: np.random.Generator, size: int, k: int) -> np.ndarray:
    """``k`` distinct integers of ``[0, size)``, uniformly among all such sets, sorted; with
    memory proportional to ``k`` (to ``size`` when more than half are taken)."""
    if k == 0:
        return np.zeros(0, np.int64)
    if 2 * k > size:
        keep = np.ones(size, dtype=bool)
        keep[_distinct(rng, size, size - k)] = False
        return np.flatnonzero(keep).astype(np.int64, copy=False)
    # draw with replacement a few more than k, keep the distinct ones (one sort), then keep
    # k of those uniformly: every k-subset stays equally likely
    extra = k + k * k // size + 4 * int(np.sqrt(k)) + 16
    while True:
        have = unique(rng.integers(0, size, size=extra, dtype=np.int64))
        if have.size >= k:
            break
        extra *= 2
    if have.size > k:
        keep = np.zeros(have.size, dtype=bool)
        keep[rng.choice(have.size, size=k, replace=False)] = True
        have = have[keep]
    return have


def _random_block(seed: int, coord: tuple[int, ...], shape: tuple[int, int], density: float,
                  fmt: str, dtype: np.dtype) -> Any:
    from tilegraph.array.random_blocks import block_generator

    rng = block_generator(seed, coord)
    m, n = shape
    k = round(density * m * n)
    flat = _distinct(rng, m * n, k)
    index = np.int32 if index_itemsize(m, n, k) == 4 else np.int64
    rows, cols = (c.astype(index) for c in np.divmod(flat, max(n, 1)))
    if dtype.kind == "f":
        values = rng.random(k, dtype=dtype) if dtype in (np.float32, np.float64) else \
            rng.random(k).astype(dtype)
    elif dtype.kind == "c":
        values = (rng.random(k) + 1j * rng.random(k)).astype(dtype)
    elif dtype.kind in "iu":
        values = rng.integers(1, 10, size=k).astype(dtype)
    else:
        values = np.ones(k, dtype=dtype)
    if fmt == "csr":  # the positions are sorted: row pointers by counting, no sort
        indptr = np.zeros(m + 1, dtype=index)
        np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
        return sps.csr_array((values, cols, indptr), shape=(m, n))
    return finish(sps.coo_array((values, (rows, cols)), shape=(m, n)), dtype, fmt)


def random(shape: Any, density: float = 0.01, chunks: Any = "auto", seed: Any = None,
           format: str = "csr", dtype: Any = np.float64) -> SparseArray:
    """A random sparse array: every block holds ``round(density * block size)`` entries at
    distinct positions drawn uniformly, with values uniform in [0, 1) (real and imaginary
    parts for complex dtypes; integers uniform in 1..9; ``True`` for bool).

    Block ``(i, j)`` is drawn from ``default_rng(SeedSequence(seed, spawn_key=(i, j)))``,
    so the values never depend on the workers or the schedule; the same ``seed``,
    ``shape``, ``density`` and ``chunks`` give the same array every time.

    >>> import tilegraph as tg
    >>> x = tg.sparse.random((6, 6), density=0.25, chunks=3, seed=1)
    >>> x.to_scipy().nnz  # 2 of 9 entries in every 3 x 3 block
    8
    >>> bool((x.to_scipy() != tg.sparse.random((6, 6), 0.25, 3, seed=1).to_scipy()).nnz == 0)
    True
    """
    from tilegraph.array.creation import shape_tuple
    from tilegraph.array.random_blocks import seed_value

    shape = shape_tuple(shape)
    if len(shape) != 2:
        raise ValueError(f"random: sparse arrays are 2-D only, got shape {shape}")
    if isinstance(density, bool) or not isinstance(density, numbers.Real):
        raise TypeError(f"random: density must be a number in [0, 1], got {density!r}")
    density = float(density)
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"random: density must be in [0, 1] (the fraction of stored "
                         f"entries), got {density}")
    fmt = check_format("random", format)
    dtype = check_dtype("random", dtype)
    s = seed_value(seed)
    chunks = normalize_chunks(chunks, shape, dtype)
    token = tokenize("sparse-random", s, shape, chunks, density, fmt, dtype)
    blocks = source(
        f"random-sparse-{token}", numblocks(chunks),
        lambda c: (_random_block, (s, Lit(c), Lit(block_shape(chunks, c)), density, fmt,
                                   dtype)),
        kind="random", name="random", nbytes=expected_nbytes(chunks, density, dtype, fmt))
    return SparseArray(blocks, shape, chunks, dtype, fmt, density)
