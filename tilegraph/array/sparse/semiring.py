"""Sparse linear algebra: the ``(+, x)`` semiring over sparse and dense blocks, under which
a matmul with a sparse operand is the same group-by-join as a dense one
(:mod:`tilegraph.array.contraction`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import scipy.sparse as sps

from tilegraph.algebra.semiring import Semiring
from tilegraph.array.sparse.kernels import finish
from tilegraph.array.sparse_blocks import check_dtype, check_format


def _product(dtype: np.dtype, fmt: str | None, a: Any, b: Any) -> Any:
    return finish(a @ b, dtype, fmt)


def _accumulate(dtype: np.dtype, fmt: str | None, acc: Any, a: Any, b: Any) -> Any:
    prod = a @ b
    if isinstance(acc, np.ndarray):
        prod = prod.toarray() if sps.issparse(prod) else np.asarray(prod)
        if prod.dtype != acc.dtype:
            prod = prod.astype(acc.dtype)
        if acc.flags.writeable:
            np.add(acc, prod, out=acc)  # the partial result is private to the chain
            return acc
        return finish(acc + prod, dtype, fmt)
    return finish(acc + prod, dtype, fmt)


def _add(dtype: np.dtype, fmt: str | None, x: Any, y: Any) -> Any:
    return finish(x + y, dtype, fmt)


def sparse_semiring(dtype: Any, fmt: str | None) -> Semiring:
    """The ``(+, x)`` semiring over sparse and dense blocks, for the group-by-join of a
    matmul with a sparse operand.

    ``product(a, b)`` is ``a @ b``; ``accumulate(acc, a, b)`` is ``acc + a @ b``, in place
    (``acc += a @ b``) when ``acc`` is a NumPy block; ``add`` adds two partial results.
    Results are ``fmt`` blocks (``"csr"``/``"csc"``: sparse @ sparse) or NumPy blocks
    (``fmt=None``: a dense operand), of ``dtype``.

    >>> import numpy as np, scipy.sparse as sps
    >>> s = sparse_semiring("float64", None)
    >>> a = sps.csr_array(np.eye(2))
    >>> s.accumulate(np.ones((2, 2)), a, np.full((2, 2), 2.0))
    array([[3., 3.],
           [3., 3.]])
    """
    if fmt is not None:
        check_format("sparse_semiring", fmt)
    dtype = check_dtype("sparse_semiring", dtype)
    return Semiring(f"sparse_plus_times[{fmt or 'dense'}]", partial(_add, dtype, fmt),
                    partial(_product, dtype, fmt), partial(_accumulate, dtype, fmt), 0)
