"""Sparse blocked arrays: 2-D arrays whose blocks are ``scipy.sparse`` CSR or CSC arrays.

A :class:`SparseArray` is an :class:`~tilegraph.array.core.Array` whose blocks are
``scipy.sparse.csr_array`` (format ``"csr"``) or ``csc_array`` (format ``"csc"``) objects
(the array API of SciPy, so a sparse block times a NumPy block is a NumPy block). It is made
by :func:`from_scipy` (blocks sliced from one SciPy matrix by load tasks), :func:`random`
(blocks drawn independently per block coordinate) or read back from zarr. Everything is
lazy and block by block, as for dense arrays:

- ``x + y``, ``x - y``: with a SparseArray of the same shape, sparse (the blocks are aligned
  first, as for dense operands); with a dense Array or NumPy array, dense (NumPy's
  broadcasting and promotion, on the dense form of ``x``);
- ``x * y``: with a scalar or a SparseArray, sparse; with a dense operand of the same shape,
  sparse (``block.multiply(dense_block)``); ``x / s`` for a nonzero scalar ``s``;
- ``-x``, ``abs(x)``, ``x.conj()``, ``x.real``, ``x.imag``, ``x.astype(dtype)``: sparse;
- ``x.sum(axis=None | 0 | 1)``: dense, a tree reduction of per-block sums;
- ``x.T`` / ``x.transpose()``: sparse, block by block (the transpose of a CSR block is a CSC
  block, without a copy, as in SciPy, so the format flips);
- ``x @ y``, :func:`tilegraph.matmul`, :func:`tilegraph.dot`: sparse @ dense and
  dense @ sparse are dense Arrays, sparse @ sparse is a SparseArray; the product is the
  same group-by-join as a dense matmul, under the semiring of :func:`sparse_semiring`;
- ``x.todense()``: the dense Array (each block made dense in its own task);
  ``x.compute()`` / ``x.to_scipy()``: one ``scipy.sparse.csr_array`` (see
  :meth:`SparseArray.compute`).

The result dtype of every operation is NumPy's for the same operation on dense arrays.
Other reductions (``mean``, ``max``, ...) are computed on ``x.todense()``.

Limitations. Sparse arrays are 2-D only. Implicit zeros stay exact zeros in products with
a dense operand (``x * y`` and ``x @ y``): a ``nan`` or ``inf`` of the dense operand facing
an implicit zero gives ``0`` (as in SciPy), where NumPy's dense product gives ``nan``.
Operations that would make every implicit zero nonzero (adding a scalar, multiplying by
``inf`` or ``nan``, dividing by ``0``, by ``nan`` or by an array) are refused with an error
naming the dense spelling (``x.todense() + 1``). Indexing and reshaping are not supported
on sparse arrays (use ``x.todense()``). The functions of the top-level namespace that are
not listed above (``tilegraph.sum``, ``tilegraph.transpose``, ``tilegraph.concatenate``,
...) treat their argument as dense; use the methods instead.

The package's modules: the class and :func:`from_scipy` in ``array.py``, the block kernels its
tasks run in ``kernels.py``, the semiring of sparse products in ``semiring.py``, the matmul
with a sparse operand (the sparse arrays' product rule for
:mod:`tilegraph.array.contraction`) in ``products.py``, random sparse arrays in
``creation.py``; block sizes and formats are in :mod:`tilegraph.array.sparse_blocks`
(``sparse_block_nbytes`` is also given here, where :mod:`tilegraph.array.io` takes it).
"""

from tilegraph.array.core import compute
from tilegraph.array.sparse.array import SparseArray, from_scipy
from tilegraph.array.sparse.creation import random
from tilegraph.array.sparse.products import sparse_matmul_2d as sparse_matmul_2d
from tilegraph.array.sparse.semiring import sparse_semiring
from tilegraph.array.sparse_blocks import sparse_block_nbytes as sparse_block_nbytes

__all__ = ["SparseArray", "compute", "from_scipy", "random", "sparse_semiring"]
