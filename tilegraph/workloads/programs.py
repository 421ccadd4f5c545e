"""The programs of the workload suite, each a plain function of its input arrays.

The same code runs on lazy tilegraph arrays, on NumPy arrays (SciPy sparse arrays for sparse
inputs) and on the arrays of other libraries with NumPy's operators, such as dask arrays:
each takes arrays of one library and returns arrays of the same library (lazy for tilegraph,
computed for NumPy). The linear algebra programs call the ``linalg`` functions of their
operand's library (:func:`linalg_module`), or of the ``linalg`` namespace they are given.

>>> import numpy as np
>>> a = np.arange(4.0).reshape(2, 2)
>>> matmul_chain(a, a, a, a).tolist() == np.linalg.matrix_power(a, 4).tolist()
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.array import Array
from tilegraph.array import linalg as tilegraph_linalg


def matmul(a: Any, b: Any) -> Any:
    """Dense matrix product ``a @ b``."""
    return a @ b


def matmul_chain(a: Any, b: Any, c: Any, d: Any) -> Any:
    """The chain ``a @ b @ c @ d``, multiplied left to right."""
    return ((a @ b) @ c) @ d


def linear_regression(X: Any, y: Any, w: Any, iterations: int = 10,
                      lr: float | None = None) -> Any:
    """Least squares by gradient descent: ``w <- w - lr * X^T (X w - y) / n``.

    ``X`` is n x d, ``y`` n x 1, ``w`` (the start) d x 1. The default step, 1 / d, is stable
    for features in [0, 1)."""
    n, d = X.shape
    lr = 1.0 / d if lr is None else lr
    for _ in range(iterations):
        w = w - (lr / n) * (X.T @ (X @ w - y))
    return w


def neural_network(X: Any, Y: Any, W1: Any, b1: Any, W2: Any, b2: Any, epochs: int = 10,
                   lr: float = 0.5) -> tuple[Any, Any, Any, Any]:
    """One hidden layer (sigmoid), a ReLU output and the squared loss
    ``sum((out - Y)^2) / (2 n)``, trained by full-batch gradient descent; returns the
    weights and biases after ``epochs`` steps.

    ``X`` is n x d, ``Y`` n x o, ``W1`` d x h, ``b1`` (h,), ``W2`` h x o, ``b2`` (o,)."""
    n = X.shape[0]
    for _ in range(epochs):
        # forward
        H = 1.0 / (1.0 + np.exp(-(X @ W1 + b1)))  # hidden activations, n x h
        Z = H @ W2 + b2
        out = np.maximum(Z, 0.0)  # ReLU output, n x o
        # backward: gradients of the loss
        G = (out - Y) * (Z > 0) / n  # d loss / d Z
        gW2 = H.T @ G
        gb2 = G.sum(axis=0)
        D = (G @ W2.T) * H * (1.0 - H)  # d loss / d (X W1 + b1)
        gW1 = X.T @ D
        gb1 = D.sum(axis=0)
        W1, b1 = W1 - lr * gW1, b1 - lr * gb1
        W2, b2 = W2 - lr * gW2, b2 - lr * gb2
    return W1, b1, W2, b2


def sparse_matmul(S: Any, B: Any) -> Any:
    """Sparse times dense: ``S @ B``."""
    return S @ B


def pagerank(A: Any, r: Any, iterations: int = 20, damping: float = 0.85) -> Any:
    """PageRank by power iteration on the graph with weighted adjacency ``A`` (``A[i, j]``:
    the weight of the edge j -> i), starting from the n x 1 vector ``r``.

    The transition matrix is ``A`` with each column divided by its sum (column-stochastic);
    it is never formed: ``M r = A (r / outdegree)``. A dangling node (a column without
    edges) spreads its rank evenly over all nodes, so the ranks keep summing to 1."""
    n = A.shape[0]
    outdegree = A.sum(axis=0).reshape(n, 1)
    dangling = outdegree == 0
    inverse = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, outdegree))
    for _ in range(iterations):
        leaked = (dangling * r).sum()  # rank held by dangling nodes
        r = damping * (A @ (r * inverse)) + (damping * leaked + (1.0 - damping)) / n
    return r


def funk_svd(R: Any, M: Any, P: Any, Q: Any, epochs: int = 5, lr: float = 0.01,
             reg: float = 0.02) -> tuple[Any, Any]:
    """Matrix factorisation ``R ~ P Q^T`` of sparse ratings (Funk SVD) by full-batch
    gradient descent on the observed entries only; returns ``P, Q`` after ``epochs`` steps.

    ``R`` (users x items) holds the ratings, ``M`` ones where a rating is observed (the
    same pattern), ``P`` users x k, ``Q`` items x k. The predictions at the observed
    entries are ``S = M * (P Q^T)``, sparse; ``P Q^T`` itself is made dense, block by block,
    which is affordable at the sizes of the suite (a production code would compute only the
    observed entries). With the error ``E = R - S``, each step is
    ``P += lr (E Q - reg P)`` and ``Q += lr (E^T P - reg Q)``."""
    for _ in range(epochs):
        S = M * (P @ Q.T)
        gP = R @ Q - S @ Q - reg * P  # E Q - reg P
        gQ = R.T @ P - S.T @ P - reg * Q  # E^T P - reg Q
        P, Q = P + lr * gP, Q + lr * gQ
    return P, Q


def linalg_module(a: Any) -> Any:
    """The linear algebra functions of ``a``'s library: ``tilegraph.linalg`` for tilegraph
    arrays, ``numpy.linalg`` otherwise (a library of its own is passed to the programs as
    ``linalg=``)."""
    return tilegraph_linalg if isinstance(a, Array) else np.linalg


def cholesky(a: Any, linalg: Any = None) -> Any:
    """The lower Cholesky factor ``L`` of ``a = L L^T``, by ``linalg.cholesky`` (default:
    :func:`linalg_module` of ``a``)."""
    return (linalg or linalg_module(a)).cholesky(a)


def qr(a: Any, linalg: Any = None) -> tuple[Any, Any]:
    """Reduced QR of a tall-skinny ``a``: ``(q, r)`` (tilegraph: TSQR), by ``linalg.qr``."""
    q, r = (linalg or linalg_module(a)).qr(a)
    return q, r


def svd(a: Any, linalg: Any = None) -> tuple[Any, Any, Any]:
    """Thin SVD of a tall-skinny ``a``: ``(u, s, vt)`` with ``a = u @ diag(s) @ vt``, by
    ``linalg.svd(a, full_matrices=False)``."""
    u, s, vt = (linalg or linalg_module(a)).svd(a, full_matrices=False)
    return u, s, vt
