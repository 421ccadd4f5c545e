"""The products of sparse arrays: the 2-D matmul with a sparse operand, a group-by-join over
the inner blocks under the sparse ``(+, x)`` semiring. Registered as the product rule of
:class:`~tilegraph.array.sparse.SparseArray` (:mod:`tilegraph.array.product_plans`), which
:mod:`tilegraph.array.contraction` reads for ``matmul``, ``dot`` and the messages of the
products that take dense operands only."""

from __future__ import annotations

import math

import numpy as np

from tilegraph.algebra.blocks import group_by_join
from tilegraph.algebra.semiring import PLUS_TIMES, Semiring
from tilegraph.array.chunks import block_shape, numblocks
from tilegraph.array.core import Array, tokenize
from tilegraph.array.product_plans import (
    PRODUCT_FLOPS,
    ProductRule,
    aligned_operands,
    chains_for,
    register_product_rule,
    small_partials,
    tree_join,
    zeros_block,
)
from tilegraph.array.sparse.array import SparseArray
from tilegraph.array.sparse.semiring import sparse_semiring
from tilegraph.array.sparse_blocks import (
    check_dtype,
    dense_nbytes,
    empty_block,
    expected_nbytes,
    product_density,
)


def sparse_matmul_2d(a: Array, b: Array, semiring: Semiring) -> Array:
    """The 2-D product of two operands of which at least one is sparse: a group-by-join
    over the inner blocks under the sparse ``(+, x)`` semiring."""
    if semiring is not PLUS_TIMES:
        raise ValueError(
            f"{semiring.name}: sparse operands (shapes {a.shape} and {b.shape}) take the "
            f"plus_times semiring only: the implicit zeros of a sparse block are not the "
            f"{semiring.name} zero {semiring.zero!r}; convert with x.todense() first")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned: {a.shape[1]} (axis 1 of "
            f"the first) != {b.shape[0]} (axis 0 of the second)")
    with np.errstate(all="ignore"):
        dtype = np.matmul(np.ones((1, 1), a.dtype), np.ones((1, 1), b.dtype)).dtype
    check_dtype("matmul", dtype)
    a, b = aligned_operands(a, b, dtype)
    inner = a.chunks[1]
    a_sparse, b_sparse = isinstance(a, SparseArray), isinstance(b, SparseArray)
    fmt = a.format if a_sparse and b_sparse else None
    chunks = (a.chunks[0], b.chunks[1])
    grid = numblocks(chunks)
    nk = len(inner) if a.shape[1] else 0
    da = a.density if a_sparse else 1.0
    db = b.density if b_sparse else 1.0
    # flops: 2 per pair of stored entries that meet (a dense operand has density 1)
    work = (1.0 if da is None else da) * (1.0 if db is None else db)
    token = tokenize("sparse-matmul", dtype, fmt, a, b)

    def pairs_of(o: tuple[int, int]) -> list:
        return [((o[0], k), (k, o[1])) for k in range(nk)]

    def cost(lc: tuple[int, int], rc: tuple[int, int]) -> float:
        return PRODUCT_FLOPS(a.chunks[0][lc[0]], a.chunks[1][lc[1]], b.chunks[1][rc[1]]) * work

    if fmt is None:
        zero_task = lambda o: (zeros_block, (block_shape(chunks, o), dtype))
        nbytes = dense_nbytes(chunks, dtype)
        density = None
        # a sparse operand's block counts at its density (a dense one at 1)
        itemsize = dtype.itemsize
        out_bytes = itemsize * max(chunks[0], default=0) * max(chunks[1], default=0)
        big = max(max(a.chunks[0], default=0) * (1.0 if da is None else da),
                  max(b.chunks[1], default=0) * (1.0 if db is None else db))
        block_bytes = int(itemsize * max(inner, default=0) * big)
        if small_partials(grid, nk, out_bytes, block_bytes):
            blocks = tree_join(f"matmul-{token}", a.collection, b.collection, grid, nk,
                                sparse_semiring(dtype, None), cost, nbytes)
            return Array(blocks, (a.shape[0], b.shape[1]), chunks, dtype)
    else:
        zero_task = lambda o: (empty_block, (block_shape(chunks, o), dtype, fmt))
        density = product_density(da, db, a.shape[1])
        nbytes = expected_nbytes(chunks, density, dtype, fmt)
    blocks = group_by_join(
        f"matmul-{token}", a.collection, b.collection, pairs_of, grid, sparse_semiring(dtype, fmt),
        chains=chains_for(math.prod(grid), nk), zero_task=zero_task, cost=cost,
        nbytes=nbytes,
    )
    shape = (a.shape[0], b.shape[1])
    if fmt is None:
        return Array(blocks, shape, chunks, dtype)
    return SparseArray(blocks, shape, chunks, dtype, fmt, density)


register_product_rule(SparseArray, ProductRule("sparse", sparse_matmul_2d))
