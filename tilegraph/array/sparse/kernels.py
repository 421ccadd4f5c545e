"""The block kernels of sparse arrays: what the tasks of a
:class:`~tilegraph.array.sparse.SparseArray` run on its ``scipy.sparse`` blocks.

Elementwise operations, transposes, slices and assembly of blocks (rechunks, the whole array
as one CSR array), per-block sums. They are module-level functions so that process backends
can pickle them; :func:`finish` puts every result in the layout its task promised.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sps

from tilegraph.array.sparse_blocks import BLOCK_CLASSES, index_itemsize


def finish(out: Any, dtype: np.dtype, fmt: str | None) -> Any:
    """A kernel's result in the promised layout: a ``fmt`` block (a NumPy block when
    ``fmt`` is None) of ``dtype``."""
    if fmt is None:
        out = out.toarray() if sps.issparse(out) else np.asarray(out)
        return out if out.dtype == dtype else out.astype(dtype)
    if not sps.issparse(out):
        out = BLOCK_CLASSES[fmt](np.asarray(out))
    elif out.format != fmt or not isinstance(out, sps.sparray):
        out = BLOCK_CLASSES[fmt](out)
    return out if out.dtype == dtype else out.astype(dtype)


def load_block(matrix: Any, r0: int, r1: int, c0: int, c1: int) -> Any:
    """Rows ``r0:r1`` and columns ``c0:c1`` of a SciPy sparse matrix, as one block."""
    return matrix[r0:r1, c0:c1]


def unary_block(name: str, block: Any, dtype: np.dtype, fmt: str) -> Any:
    """``name`` (negative, absolute, conjugate, real, imag, positive, or astype) of
    one block, in the layout its task promised."""
    if name == "negative":
        out = -block
    elif name == "absolute":
        out = abs(block)
    elif name == "conjugate":
        out = block.conj()
    elif name == "real":
        out = block.real
    elif name == "imag":
        out = block.imag
    elif name == "positive":
        out = block
    else:  # astype
        out = block.astype(dtype)
    return finish(out, dtype, fmt)


def binary_block(name: str, x: Any, y: Any, dtype: np.dtype, fmt: str) -> Any:
    """``name`` (add, subtract, or multiply) of two blocks of the same shape, in
    the layout its task promised."""
    if name == "add":
        out = x + y
    elif name == "subtract":
        out = x - y
    else:  # multiply, by a sparse or a dense block of the same shape
        out = x.multiply(y)
    return finish(out, dtype, fmt)


def scalar_block(name: str, block: Any, value: Any, dtype: np.dtype, fmt: str) -> Any:
    """A block's stored values multiplied or divided (``name``) by the scalar
    ``value``."""
    # on the stored values with NumPy's own operation (SciPy divides by multiplying with
    # the reciprocal, which rounds differently)
    func = np.multiply if name == "multiply" else np.true_divide
    data = func(block.data, value).astype(dtype, copy=False)
    return BLOCK_CLASSES[fmt]((data, block.indices, block.indptr), shape=block.shape)


def transpose_block(block: Any) -> Any:
    """A block transposed."""
    return block.T


def toarray_block(block: Any) -> np.ndarray:
    """A sparse block as a dense NumPy block."""
    return block.toarray()


def take_block(block: Any, rows: slice, cols: slice) -> Any:
    """Rows ``rows`` and columns ``cols`` of a block (the block itself when that is
    all of it)."""
    m, n = block.shape
    if rows == slice(0, m) and cols == slice(0, n):
        return block
    return block[rows, cols]


def assemble(shape: tuple[int, int], pieces: tuple, dtype: np.dtype, fmt: str,
             *blocks: Any) -> Any:
    """One ``fmt`` block of ``shape`` from parts of ``blocks``: ``pieces[n]`` is
    ``(rows, cols, row offset, col offset)``: the part of block n and where it goes."""
    data, rows, cols = [], [], []
    for (rs, cs, r0, c0), block in zip(pieces, blocks, strict=True):
        part = block[rs, cs].tocoo() if (rs, cs) != (slice(None), slice(None)) else \
            block.tocoo()
        data.append(part.data)
        rows.append(part.coords[0].astype(np.int64) + r0)
        cols.append(part.coords[1].astype(np.int64) + c0)
    index = np.int32 if index_itemsize(*shape) == 4 else np.int64
    if data:
        values = np.concatenate(data).astype(dtype, copy=False)
        coords = (np.concatenate(rows).astype(index), np.concatenate(cols).astype(index))
    else:
        values = np.zeros(0, dtype)
        coords = (np.zeros(0, index), np.zeros(0, index))
    out = sps.coo_array((values, coords), shape=shape)
    return finish(out, dtype, fmt)


def assemble_all(row_offsets: tuple[int, ...], col_offsets: tuple[int, ...],
                 grid: tuple[int, int], dtype: np.dtype, *blocks: Any) -> sps.csr_array:
    """The whole array from its blocks (in C order over the block grid), as one CSR array."""
    pieces = tuple((slice(None), slice(None), row_offsets[i], col_offsets[j])
                   for i in range(grid[0]) for j in range(grid[1]))
    return assemble((row_offsets[-1], col_offsets[-1]), pieces, dtype, "csr", *blocks)


def sum_block(dtype: np.dtype, block: Any, axes: tuple[int, ...]) -> np.ndarray:
    """A block's partial sum over ``axes``, with the reduced axes kept (length 1)."""
    m, n = block.shape
    if block.dtype != dtype:  # SciPy would sum in the block's dtype and cast afterwards
        block = block.astype(dtype)
    if axes == (0, 1):
        return np.full((1, 1), block.sum(dtype=dtype), dtype=dtype)
    if axes == (0,):
        return np.asarray(block.sum(axis=0, dtype=dtype)).reshape(1, n).astype(dtype,
                                                                               copy=False)
    if axes == (1,):
        return np.asarray(block.sum(axis=1, dtype=dtype)).reshape(m, 1).astype(dtype,
                                                                               copy=False)
    return block.toarray().astype(dtype, copy=False)


def identity(p: Any) -> Any:
    """``p`` as it is (the finish of a sparse sum's tree of partials)."""
    return p
