"""The workload suite: the programs users run on tilegraph, each written once with array
operations, and run by tilegraph, by NumPy/SciPy and by dask.array for comparison.

Every program below (:func:`matmul`, :func:`linear_regression`, :func:`pagerank`, ...) is a
plain function of its input arrays: the same code runs on lazy tilegraph arrays, on NumPy
arrays (SciPy sparse arrays for sparse inputs) and on dask arrays, so the three systems run
the same algorithm with the same iteration counts. :data:`WORKLOADS` maps each name to a
:class:`Workload`, which makes the inputs for each system, runs the program, counts its
flops and checks tilegraph against NumPy:

>>> from tilegraph.workloads import WORKLOADS
>>> wl = WORKLOADS["matmul"]
>>> wl.check(120)
True
>>> wl.run_tilegraph(120).shape
(120, 120)
>>> wl.flops(120) == 2 * 120**3
True

``tilegraph bench`` (see :mod:`tilegraph.cli`) times them against NumPy and dask.

Inputs are random and made inside the timed run by each system its own way: tilegraph with
``tilegraph.random`` and ``tilegraph.sparse.random`` (block by block, lazily), NumPy with
``numpy.random.default_rng(seed)`` and ``scipy.sparse.random_array``, dask with
``dask.array.random.default_rng(seed)`` and blockwise SciPy sparse blocks. The values differ
between systems; the shapes, densities and work do not. :meth:`Workload.check` runs tilegraph
and NumPy on identical inputs instead: made once with NumPy and wrapped with
``tilegraph.from_numpy`` / ``tilegraph.from_scipy`` in uneven blocks. (Funk SVD's ratings,
with the mask of the observed entries, are made as SciPy arrays by every system, as if read
from a file, and given to tilegraph with ``tilegraph.from_scipy``.)

=====================  ================================  ===============  ==================
workload               size n means                      default sizes    flops counted
=====================  ================================  ===============  ==================
``matmul``             A, B: n x n                       4000, 8000       2 n^3
``matmul_chain``       A, B, C, D: n x n                 3000, 6000       6 n^3
``linear_regression``  X: n x d, d = min(500, n // 20)   200000, 1000000  10 (4 n d + ...)
``neural_network``     X: n x d, hidden h, 10 outputs    50000, 150000    10 (4 n d h + ...)
``sparse_matmul``      S (1%) and B: n x n               4000, 8000       2 nnz n
``pagerank``           n nodes, 1% of edges              20000, 60000     20 (2 nnz + 5 n)...
``funk_svd``           R (1%): n x n // 2, rank k        10000, 30000     5 (10 nnz k + ...)
``cholesky``           A: n x n, positive definite       6000, 12000      n^3 / 3
``qr``                 A: n x c, c = min(256, n // 10)   200000, 500000   4 n c^2 - 4 c^3 / 3
``svd``                A: n x c, c = min(256, n // 10)   200000, 500000   6 n c^2 + 20 c^3
=====================  ================================  ===============  ==================

:meth:`Workload.flops` and ``tilegraph bench --list`` give the exact formulas. The sizes are
chosen for a machine of 2 cores and 24 GiB: NumPy needs at most about 4 GiB and half a
minute for any of them.
"""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DENSITY = 0.01  # fraction of stored entries of the sparse inputs

# -- the programs ----------------------------------------------------------------------------
# Each takes arrays of one system (tilegraph, NumPy/SciPy or dask) and returns arrays of the
# same system: lazy for tilegraph and dask, computed for NumPy.


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
    arrays, ``dask.array.linalg`` for dask arrays (with ``cholesky`` returning the lower
    factor, as in NumPy) and ``numpy.linalg`` otherwise."""
    module = type(a).__module__
    if module.startswith("tilegraph"):
        import tilegraph

        return tilegraph.linalg
    if module.startswith("dask"):
        return _DaskLinalg
    return np.linalg


def cholesky(a: Any) -> Any:
    """The lower Cholesky factor ``L`` of ``a = L L^T``."""
    return linalg_module(a).cholesky(a)


def qr(a: Any) -> tuple[Any, Any]:
    """Reduced QR of a tall-skinny ``a``: ``(q, r)`` (tilegraph and dask: TSQR)."""
    q, r = linalg_module(a).qr(a)
    return q, r


def svd(a: Any) -> tuple[Any, Any, Any]:
    """Thin SVD of a tall-skinny ``a``: ``(u, s, vt)`` with ``a = u @ diag(s) @ vt``."""
    u, s, vt = linalg_module(a).svd(a, full_matrices=False)
    return u, s, vt


class _DaskLinalg:
    @staticmethod
    def cholesky(a: Any) -> Any:
        import dask.array as da

        return da.linalg.cholesky(a, lower=True)

    @staticmethod
    def qr(a: Any) -> Any:
        import dask.array as da

        return da.linalg.qr(a)

    @staticmethod
    def svd(a: Any, full_matrices: bool = False) -> Any:
        import dask.array as da

        if full_matrices:
            raise ValueError("dask.array.linalg.svd gives the thin SVD only: use "
                             "full_matrices=False")
        return da.linalg.svd(a)


# -- making the inputs, one maker per system ------------------------------------------------


def _seed_block(seed: int, coord: tuple[int, ...]) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=coord))


def _scipy_random(shape: tuple[int, int], density: float, seed: int) -> Any:
    import scipy.sparse

    rng = np.random.default_rng(seed)
    return scipy.sparse.random_array(shape, density=density, rng=rng, format="csr")


class _NumPy:
    """Inputs as NumPy arrays and SciPy sparse arrays (``chunks`` is ignored)."""

    system = "numpy"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        return np.random.default_rng(seed).random(shape)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        return np.full(shape, value)

    def eye(self, n: int, chunks: Any) -> Any:
        return np.eye(n)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        return _scipy_random(shape, DENSITY, seed)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        return matrix.tocsr()


class _Tilegraph:
    """Lazy tilegraph inputs, made block by block in the run."""

    system = "tilegraph"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        import tilegraph as tg

        return tg.random.random(shape, chunks=chunks, seed=seed)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        import tilegraph as tg

        return tg.full(shape, value, chunks=chunks)

    def eye(self, n: int, chunks: Any) -> Any:
        import tilegraph as tg

        return tg.eye(n, chunks=chunks)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        import tilegraph as tg

        return tg.sparse.random(shape, density=DENSITY, chunks=chunks, seed=seed)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        import tilegraph as tg

        return tg.from_scipy(matrix, chunks=chunks)


class _Wrapped(_NumPy):
    """The NumPy maker's arrays, wrapped as tilegraph arrays in the given blocks: the
    identical inputs of :meth:`Workload.check`."""

    system = "tilegraph"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        import tilegraph as tg

        return tg.from_numpy(super().random(shape, chunks, seed), chunks=chunks)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        import tilegraph as tg

        return tg.from_numpy(super().full(shape, value, chunks), chunks=chunks)

    def eye(self, n: int, chunks: Any) -> Any:
        import tilegraph as tg

        return tg.from_numpy(super().eye(n, chunks), chunks=chunks)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        import tilegraph as tg

        return tg.from_scipy(super().sparse_random(shape, chunks, seed), chunks=chunks)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        import tilegraph as tg

        return tg.from_scipy(matrix, chunks=chunks)


def _sparse_block(density: float, seed: int, block_info: Any = None) -> Any:
    import scipy.sparse

    info = block_info[None]
    rng = _seed_block(seed, tuple(info["chunk-location"]))
    return scipy.sparse.random_array(tuple(info["chunk-shape"]), density=density, rng=rng,
                                     format="csr")


class _Dask:
    """Lazy dask arrays; sparse inputs are dask arrays of SciPy sparse blocks."""

    system = "dask"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        import dask.array as da

        return da.random.default_rng(seed).random(shape, chunks=chunks)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        import dask.array as da

        return da.full(shape, value, chunks=chunks)

    def eye(self, n: int, chunks: Any) -> Any:
        import dask.array as da

        return da.eye(n, chunks=chunks[0] if isinstance(chunks, tuple) else chunks)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        import dask.array as da
        import scipy.sparse
        from dask.array.core import normalize_chunks

        chunks = normalize_chunks(chunks, shape, dtype=np.float64)
        arr = da.map_blocks(_sparse_block, DENSITY, seed, chunks=chunks,
                            dtype=np.float64, meta=scipy.sparse.csr_array((0, 0)))
        return DaskSparse(arr)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        import dask.array as da

        return DaskSparse(da.from_array(matrix.tocsr(), chunks=chunks, asarray=False))


def _block_products(a_blocks: Sequence[Any], b_blocks: Sequence[Any]) -> np.ndarray:
    out = None
    for a, b in zip(a_blocks, b_blocks, strict=True):
        p = np.asarray(a @ b)
        out = p if out is None else out + p
    return out


def _block_sums(blocks: Sequence[Any], axis: int) -> np.ndarray:
    return sum(np.asarray(b.sum(axis=axis)).ravel() for b in blocks)


class DaskSparse:
    """A dask array of SciPy sparse blocks with the operations the sparse programs use:
    ``@`` a dense dask array, ``.T``, ``sum(axis=)`` and ``*`` (elementwise, by a scalar or
    a dense dask array of the same blocks). dask.array's own matmul and reductions do not
    take SciPy sparse blocks, so these are written with ``dask.array.blockwise``."""

    def __init__(self, array: Any):
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def T(self) -> DaskSparse:
        return DaskSparse(self.array.T)

    def __matmul__(self, other: Any) -> Any:
        import dask.array as da

        other = other.rechunk({0: self.array.chunks[1]})
        if other.ndim == 1:
            return (self @ other.reshape(-1, 1)).reshape(-1)
        return da.blockwise(_block_products, "ij", self.array, "ik", other, "kj",
                            concatenate=False, dtype=np.result_type(self.array.dtype, other.dtype),
                            meta=np.empty((0, 0)))

    def __mul__(self, other: Any) -> DaskSparse:
        return DaskSparse(self.array * other)

    __rmul__ = __mul__

    def sum(self, axis: int | None = None) -> Any:
        import dask.array as da

        if axis is None:
            return self.sum(axis=0).sum()
        axis = axis % 2
        return da.blockwise(_block_sums, "j" if axis == 0 else "i", self.array, "ij",
                            axis=axis, concatenate=False, dtype=self.array.dtype,
                            meta=np.empty((0,)))


_MAKERS = {"numpy": _NumPy(), "tilegraph": _Tilegraph(), "dask": _Dask(), "check": _Wrapped()}


# -- the inputs of each workload -------------------------------------------------------------
# Each recipe(xp, n, block) returns (args, kwargs) of the program for the maker xp.


def _cols(n: int, cap: int, ratio: int) -> int:
    return max(1, min(cap, n // ratio))


def _nn_dims(n: int) -> tuple[int, int, int]:
    """Features, hidden units and outputs of the network for n samples."""
    return _cols(n, 500, 20), _cols(n, 256, 40), 10


def _funk_dims(n: int) -> tuple[int, int, int]:
    """Users, items and rank of the factorisation."""
    return n, max(1, n // 2), _cols(n, 32, 20)


def _square_inputs(count: int) -> Callable:
    def recipe(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
        return tuple(xp.random((n, n), (block, block), seed) for seed in range(count)), {}

    return recipe


def _regression_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    d = _cols(n, 500, 20)
    X = xp.random((n, d), (block, -1), 0)
    y = xp.random((n, 1), (block, 1), 1)
    w = xp.full((d, 1), 0.0, (-1, 1))
    return (X, y, w), {"iterations": 10}


def _network_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    d, h, o = _nn_dims(n)
    X = xp.random((n, d), (block, -1), 0)
    Y = xp.random((n, o), (block, -1), 1)
    W1 = (xp.random((d, h), (-1, -1), 2) - 0.5) / math.sqrt(d)
    W2 = (xp.random((h, o), (-1, -1), 3) - 0.5) / math.sqrt(h)
    b1 = xp.full((h,), 0.0, (-1,))
    b2 = xp.full((o,), 0.0, (-1,))
    return (X, Y, W1, b1, W2, b2), {"epochs": 10}


def _sparse_matmul_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    return (xp.sparse_random((n, n), (block, block), 0),
            xp.random((n, n), (block, block), 1)), {}


def _pagerank_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    A = xp.sparse_random((n, n), (block, block), 0)
    r = xp.full((n, 1), 1.0 / n, (block, 1))
    return (A, r), {"iterations": 20, "damping": 0.85}


def ratings(users: int, items: int, seed: int = 0) -> tuple[Any, Any]:
    """Sparse ratings 1 to 5 with :data:`DENSITY` of them observed, and the mask of the
    observed entries (SciPy CSR arrays with the same pattern)."""
    mask = _scipy_random((users, items), DENSITY, seed)
    mask.data[:] = 1.0
    R = mask.copy()
    R.data = np.random.default_rng(seed + 1).integers(1, 6, size=R.nnz).astype(np.float64)
    return R, mask


def _funk_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    users, items, k = _funk_dims(n)
    R, mask = ratings(users, items)  # loaded as SciPy matrices by every system
    R, mask = xp.from_scipy(R, (block, block)), xp.from_scipy(mask, (block, block))
    P = xp.random((users, k), (block, -1), 2) * 0.1
    Q = xp.random((items, k), (block, -1), 3) * 0.1
    # a stable step for the ~DENSITY * items ratings of a user (and * users of an item)
    lr = 0.1 / max(1.0, DENSITY * max(users, items))
    return (R, mask, P, Q), {"epochs": 5, "lr": lr, "reg": 0.02}


def _spd_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    b = xp.random((n, n), (block, block), 0)
    # symmetric, diagonally dominant with a positive diagonal: positive definite
    return ((b + b.T) * 0.5 + n * xp.eye(n, (block, block)),), {}


def _tall_inputs(xp: Any, n: int, block: int) -> tuple[tuple, dict]:
    return (xp.random((n, _cols(n, 256, 10)), (block, -1), 0),), {}


# -- flop counts -----------------------------------------------------------------------------


def _regression_flops(n: int) -> float:
    d = _cols(n, 500, 20)
    return 10.0 * (4.0 * n * d + n + 2.0 * d)


def _network_flops(n: int) -> float:
    d, h, o = _nn_dims(n)
    forward = 2.0 * n * d * h + 5.0 * n * h + 2.0 * n * h * o + 2.0 * n * o
    backward = 5.0 * n * o + 4.0 * n * h * o + 4.0 * n * h + 2.0 * n * d * h
    update = 2.0 * (d * h + h + h * o + o)
    return 10.0 * (forward + backward + update)


def _pagerank_flops(n: int) -> float:
    nnz = DENSITY * n * n
    return 20.0 * (2.0 * nnz + 5.0 * n) + nnz + 3.0 * n


def _funk_flops(n: int) -> float:
    users, items, k = _funk_dims(n)
    nnz = DENSITY * users * items
    return 5.0 * (10.0 * nnz * k + nnz + 5.0 * (users + items) * k)


def _tall_flops(n: int, rows_cols_formula: Callable[[float, float], float]) -> float:
    return rows_cols_formula(float(n), float(_cols(n, 256, 10)))


# -- memory needed (NumPy's inputs, result and main temporaries, in bytes) ------------------


def _network_bytes(n: int) -> float:
    d, h, o = _nn_dims(n)
    return 8.0 * (n * d + 5 * n * h + 5 * n * o)


def _funk_bytes(n: int) -> float:
    users, items, k = _funk_dims(n)
    return 8.0 * users * items + 48.0 * DENSITY * users * items + 64.0 * (users + items) * k


def _tall_bytes(n: int, copies: int) -> float:
    return 8.0 * copies * n * _cols(n, 256, 10)


# -- comparing results -----------------------------------------------------------------------


def _rel(diff: Any, scale: Any) -> float:
    """max |diff| relative to max |scale| (or absolute when scale is all zeros)."""
    d = float(np.max(np.abs(diff))) if np.size(diff) else 0.0
    s = float(np.max(np.abs(scale))) if np.size(scale) else 0.0
    return d / s if s > 0 else d


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _compare_close(got: Any, ref: Any, args: tuple) -> float:
    return max(_rel(np.asarray(g) - np.asarray(r), r)
               for g, r in zip(_as_tuple(got), _as_tuple(ref), strict=True))


def _compare_cholesky(got: Any, ref: Any, args: tuple) -> float:
    a = np.asarray(args[0])
    return max(_compare_close(got, ref, args), _rel(np.triu(got, 1), ref),
               _rel(got @ got.T - a, a))


def _compare_qr(got: Any, ref: Any, args: tuple) -> float:
    """Signs of QR factors are not unique: compare reconstruction, orthogonality, the
    triangle and the magnitudes of R."""
    (q, r), (_, r_ref), a = got, ref, np.asarray(args[0])
    return max(_rel(q @ r - a, a), _rel(q.T @ q - np.eye(q.shape[1]), 1.0),
               _rel(np.tril(r, -1), r_ref), _rel(np.abs(r) - np.abs(r_ref), r_ref))


def _compare_svd(got: Any, ref: Any, args: tuple) -> float:
    """Singular vectors are unique up to signs: compare the singular values, the
    reconstruction and orthogonality."""
    (u, s, vt), (_, s_ref, _), a = got, ref, np.asarray(args[0])
    return max(_rel(s - s_ref, s_ref), _rel((u * s) @ vt - a, a),
               _rel(u.T @ u - np.eye(u.shape[1]), 1.0),
               _rel(vt @ vt.T - np.eye(vt.shape[0]), 1.0))


# -- the registry ----------------------------------------------------------------------------


def square_block(n: int) -> int:
    """Block side for n x n operands: a quarter of n, at most 2000 (blocks of 1000 to 2000
    keep BLAS efficient while giving every core several tasks)."""
    return max(1, min(2000, math.ceil(n / 4)))


def row_block(rows: int, cols: int) -> int:
    """Rows per block of a tall matrix with ``cols`` columns (kept whole): blocks of about
    64 MiB of float64, and at least four blocks."""
    return max(1, min(math.ceil(rows / 4), (64 << 20) // (8 * max(cols, 1))))


def divisor_block(n: int) -> int:
    """:func:`square_block`, moved down to a divisor of n when one is at most a factor of two
    smaller (dask's Cholesky takes only equal square blocks)."""
    block = square_block(n)
    for b in range(block, max(1, block // 2) - 1, -1):
        if n % b == 0:
            return b
    return block


def check_block(n: int) -> int:
    """A block size for the checks that leaves an uneven last block."""
    block = n // 3 + 1
    while block < n and n % block == 0:
        block += 1
    return max(1, block)


@dataclass(frozen=True)
class CheckResult:
    workload: str
    size: int
    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return bool(self.error <= self.tolerance)


@dataclass(frozen=True)
class Workload:
    """One program of the suite, with its inputs for each system, its flop count, default
    bench sizes and the size of its correctness check.

    ``program`` is the function run by all three systems; ``recipe(xp, n, block)`` makes
    its inputs with the maker of one system; ``block_rule(n)`` is the block size (rows per
    block for tall matrices); ``compare(got, ref, inputs)`` is the error of tilegraph's
    result against NumPy's, relative to the scale of the reference; ``tolerance`` bounds
    it."""

    name: str
    description: str
    program: Callable[..., Any]
    recipe: Callable[[Any, int, int], tuple[tuple, dict]]
    flops_of: Callable[[int], float]
    flops_formula: str
    block_rule: Callable[[int], int]
    sizes: tuple[int, ...]
    check_size: int
    compare: Callable[[Any, Any, tuple], float] = _compare_close
    tolerance: float = 1e-8
    min_size: int = 1
    bytes_of: Callable[[int], float] | None = None

    def validate(self, size: Any) -> int:
        """``size`` as an int, or ValueError if it is not a size this workload can run: not
        a positive integer, below ``min_size``, or needing more memory than the machine
        has."""
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise ValueError(f"{self.name}: size must be an integer, got {size!r}")
        if size < self.min_size:
            raise ValueError(f"{self.name}: size must be at least {self.min_size}, got {size}")
        need, total = self.memory(size), _total_memory()
        if need > total:
            raise ValueError(
                f"{self.name}: size {size} needs about {need / 2**30:.1f} GiB, more than this "
                f"machine's {total / 2**30:.1f} GiB of memory")
        return int(size)

    def memory(self, size: int) -> float:
        """Estimated bytes of the NumPy run at ``size`` (inputs, result, main
        temporaries): the order of what each system holds."""
        return float(self.bytes_of(int(size))) if self.bytes_of else 0.0

    def block(self, size: int) -> int:
        """The block size of the bench at ``size``."""
        return self.block_rule(self.validate(size))

    def flops(self, size: int) -> float:
        """Useful floating-point operations of one run at ``size`` (expected counts for the
        random sparse inputs)."""
        return float(self.flops_of(self.validate(size)))

    def inputs(self, system: str, size: int, block: int | None = None) -> tuple[tuple, dict]:
        """The program's ``(args, kwargs)`` for ``system``: ``"tilegraph"`` (lazy),
        ``"numpy"``, ``"dask"`` (lazy) or ``"check"`` (NumPy arrays wrapped as tilegraph
        arrays)."""
        size = self.validate(size)
        return self.recipe(_MAKERS[system], size, block or self.block_rule(size))

    def run_tilegraph(self, size: int, backend: str | None = None, workers: int | None = None,
                      block: int | None = None, **options: Any) -> Any:
        """Make the inputs lazily, run the program with tilegraph and return its result (a
        NumPy array, or a tuple of them). With MPI, ranks other than 0 get ``None``."""
        args, kwargs = self.inputs("tilegraph", size, block)
        return _compute_tilegraph(self.program(*args, **kwargs), backend, workers, options)

    def run_numpy(self, size: int) -> Any:
        """The NumPy/SciPy reference: the same program on NumPy arrays made with NumPy."""
        args, kwargs = self.inputs("numpy", size)
        return self.program(*args, **kwargs)

    def run_dask(self, size: int, block: int | None = None) -> Any:
        """The same program with dask.array and its threaded scheduler (ImportError if dask
        is not installed)."""
        try:
            import dask
        except ImportError as exc:
            raise ImportError(
                "dask is not installed: pip install 'tilegraph[bench]'") from exc
        args, kwargs = self.inputs("dask", size, block)
        out = self.program(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(dask.compute(*out, scheduler="threads"))
        return dask.compute(out, scheduler="threads")[0]

    def check_details(self, size: int | None = None, backend: str | None = None,
                      workers: int | None = None, **options: Any) -> CheckResult:
        """Run tilegraph and NumPy on identical inputs (made with NumPy, wrapped in uneven
        blocks) and measure how far apart the results are."""
        size = self.check_size if size is None else self.validate(size)
        block = check_block(size)
        args, kwargs = self.inputs("check", size, block)
        got = _compute_tilegraph(self.program(*args, **kwargs), backend, workers, options)
        if got is None:  # an MPI rank other than 0: results are on rank 0
            return CheckResult(self.name, size, 0.0, self.tolerance)
        ref_args, ref_kwargs = self.inputs("numpy", size, block)
        ref = self.program(*ref_args, **ref_kwargs)
        return CheckResult(self.name, size, float(self.compare(got, ref, ref_args)),
                           self.tolerance)

    def check(self, size: int | None = None, **options: Any) -> bool:
        """Whether tilegraph agrees with NumPy on identical inputs at ``size`` (default:
        ``check_size``) within ``tolerance``."""
        return self.check_details(size, **options).ok


def _total_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


def _compute_tilegraph(out: Any, backend: str | None, workers: int | None,
                       options: dict) -> Any:
    import tilegraph as tg

    opts = dict(options)
    if backend is not None:
        opts["backend"] = backend
    if workers is not None:
        opts["workers"] = workers
    if isinstance(out, tuple):
        values = tg.compute(*out, **opts)
        return None if all(v is None for v in values) else values
    return out.compute(**opts)


def _registry() -> dict[str, Workload]:
    tall_block = lambda n: row_block(n, _cols(n, 256, 10))
    workloads = [
        Workload("matmul", "dense C = A @ B", matmul, _square_inputs(2),
                 lambda n: 2.0 * n**3, "2 n^3", square_block, (4000, 8000), 300,
                 bytes_of=lambda n: 24.0 * n * n),
        Workload("matmul_chain", "A @ B @ C @ D, left to right", matmul_chain,
                 _square_inputs(4), lambda n: 6.0 * n**3, "6 n^3", square_block,
                 (3000, 6000), 200, bytes_of=lambda n: 48.0 * n * n),
        Workload("linear_regression",
                 "least squares by 10 steps of gradient descent, X: n x min(500, n/20)",
                 linear_regression, _regression_inputs, _regression_flops,
                 "10 (4 n d + n + 2 d), d = min(500, n // 20)",
                 lambda n: row_block(n, _cols(n, 500, 20)), (200_000, 1_000_000), 600,
                 bytes_of=lambda n: 8.0 * n * (_cols(n, 500, 20) + 3)),
        Workload("neural_network",
                 "one hidden layer (sigmoid), ReLU output, squared loss, 10 epochs",
                 neural_network, _network_inputs, _network_flops,
                 "10 (4 n d h + 6 n h o + 9 n h + 7 n o + 2 (d h + h + h o + o)), "
                 "d = min(500, n // 20), h = min(256, n // 40), o = 10",
                 lambda n: row_block(n, _nn_dims(n)[0]), (50_000, 150_000), 400,
                 bytes_of=_network_bytes),
        Workload("sparse_matmul", "sparse S (1%) @ dense B, both n x n", sparse_matmul,
                 _sparse_matmul_inputs, lambda n: 2.0 * DENSITY * n**3,
                 "2 nnz n = 0.02 n^3", square_block, (4000, 8000), 300,
                 bytes_of=lambda n: (16.0 + 24.0 * DENSITY) * n * n),
        Workload("pagerank", "20 power iterations, damping 0.85, 1% of edges, dangling nodes",
                 pagerank, _pagerank_inputs, _pagerank_flops,
                 "20 (2 nnz + 5 n) + nnz + 3 n, nnz = 0.01 n^2", square_block,
                 (20_000, 60_000), 400, bytes_of=lambda n: 48.0 * DENSITY * n * n + 64.0 * n),
        Workload("funk_svd",
                 "ratings n x n/2 (1% observed) ~ P Q^T, 5 gradient steps (P Q^T made dense)",
                 funk_svd, _funk_inputs, _funk_flops,
                 "5 (10 nnz k + nnz + 5 (n + m) k), m = n // 2, nnz = 0.01 n m, "
                 "k = min(32, n // 20) (the dense P Q^T is not counted)",
                 square_block, (10_000, 30_000), 300, min_size=2, bytes_of=_funk_bytes),
        Workload("cholesky", "Cholesky factor of an n x n symmetric positive definite matrix",
                 cholesky, _spd_inputs, lambda n: n**3 / 3.0, "n^3 / 3", divisor_block,
                 (6000, 12000), 300, compare=_compare_cholesky,
                 bytes_of=lambda n: 32.0 * n * n),
        Workload("qr", "reduced QR of a tall-skinny n x min(256, n/10) matrix (TSQR)", qr,
                 _tall_inputs,
                 lambda n: _tall_flops(n, lambda m, c: 4 * m * c**2 - 4 * c**3 / 3),
                 "4 n c^2 - 4 c^3 / 3, c = min(256, n // 10)", tall_block,
                 (200_000, 500_000), 600, compare=_compare_qr,
                 bytes_of=lambda n: _tall_bytes(n, 2)),
        Workload("svd", "thin SVD of a tall-skinny n x min(256, n/10) matrix", svd,
                 _tall_inputs,
                 lambda n: _tall_flops(n, lambda m, c: 6 * m * c**2 + 20 * c**3),
                 "6 n c^2 + 20 c^3, c = min(256, n // 10)", tall_block,
                 (200_000, 500_000), 600, compare=_compare_svd,
                 bytes_of=lambda n: _tall_bytes(n, 3)),
    ]
    return {w.name: w for w in workloads}


WORKLOADS: dict[str, Workload] = _registry()


# -- measuring -------------------------------------------------------------------------------


class PeakRSS:
    """Peak growth of this process's resident memory while the block runs, sampled by a
    thread every ``interval`` seconds with psutil (BLAS and NumPy allocations included,
    which ``tracemalloc`` would miss)."""

    def __init__(self, interval: float = 0.002):
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        import psutil

        proc = psutil.Process()
        while True:
            self.peak = max(self.peak, proc.memory_info().rss)
            if self._stop.wait(self.interval):
                self.peak = max(self.peak, proc.memory_info().rss)
                return

    def __enter__(self) -> PeakRSS:
        import psutil

        self.baseline = self.peak = psutil.Process().memory_info().rss
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def growth(self) -> int:
        """Peak resident bytes above the level at entry."""
        return max(0, self.peak - self.baseline)


def measure(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, int, Any]:
    """Best of ``repeat`` runs of ``fn``: (seconds, peak RSS growth in bytes, the last
    result). Each run starts after a garbage collection; the result of the previous run is
    dropped first."""
    best_t, best_mem, result = math.inf, 0, None
    for i in range(repeat):
        result = None
        gc.collect()
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - t0
        if i == 0 or elapsed < best_t:
            best_t = elapsed
        best_mem = mem.growth if i == 0 else min(best_mem, mem.growth)
    return best_t, best_mem, result


SYSTEMS = ("tilegraph", "numpy", "dask")


@dataclass
class BenchRow:
    """One line of ``tilegraph bench``: a system's best time on a workload at one size.

    ``ratio`` (competitor rows only) is the competitor's seconds over tilegraph's: above 1,
    tilegraph is faster. ``status`` is ``"ok"``, ``"unavailable: ..."`` or
    ``"error: ..."``."""

    workload: str
    size: int
    system: str
    seconds: float | None
    gflops: float | None
    peak_bytes: int | None
    ratio: float | None
    status: str


def bench(names: Sequence[str] | None = None, sizes: Sequence[int] | None = None,
          against: Sequence[str] = ("numpy", "dask"), backend: str | None = None,
          workers: int | None = None, repeat: int = 1, root: bool = True,
          barrier: Callable[[], None] | None = None,
          on_row: Callable[[BenchRow], None] | None = None) -> list[BenchRow]:
    """Time the workloads ``names`` (default: all) at ``sizes`` (default: each workload's
    own) with tilegraph and the systems of ``against``, in this process, best of
    ``repeat``; returns the rows, and ``on_row`` sees each one as soon as it is measured.

    Each system first runs once at the small check size, untimed, so that no timed run
    pays for imports, first calls or the start of thread pools. With MPI every rank calls
    ``bench``; only the ``root`` rank runs the competitors and gets rows, and ``barrier``
    (if given) is called by every rank before each tilegraph run, so that the other ranks
    can wait there without taking the cores the competitors run on."""
    names = list(WORKLOADS) if not names else list(names)
    for name in names:
        if name not in WORKLOADS:
            raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    for system in against:
        if system not in SYSTEMS[1:]:
            raise ValueError(f"unknown competitor {system!r}; choose from numpy, dask")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    competitors = list(against) if root else []
    rows: list[BenchRow] = []

    def emit(row: BenchRow) -> None:
        if root:
            rows.append(row)
            if on_row is not None:
                on_row(row)

    for name in names:
        wl = WORKLOADS[name]
        for size in (sizes or wl.sizes):
            size = wl.validate(size)
            flops = wl.flops(size)
            _warm_up(wl, competitors, backend, workers)
            touch_memory(2 * wl.memory(size))
            if barrier is not None:
                barrier()
            _warm_up(wl, ["tilegraph"], backend, workers)
            row = _bench_one(wl.name, size, "tilegraph", lambda wl=wl, size=size: (
                wl.run_tilegraph(size, backend=backend, workers=workers, progress=False)),
                flops, repeat, None)
            emit(row)
            tg_seconds = row.seconds if row.status == "ok" else None
            for system in competitors:
                emit(_bench_one(wl.name, size, system,
                                lambda wl=wl, size=size, s=system: getattr(wl, f"run_{s}")(size),
                                flops, repeat, tg_seconds))
    if barrier is not None:
        barrier()
    return rows


def touch_memory(nbytes: float) -> None:
    """Write ``nbytes`` (at most half the available memory) once and free it again.

    On virtual machines the first write to memory the process has never used can be many
    times slower than any later one (the host backs the guest's pages on first touch), and
    it would be charged to whichever system runs first; touching it beforehand makes the
    timed runs equal. Freed pages return to the OS and are reused at full speed."""
    import psutil

    limit = 0.5 * psutil.virtual_memory().available
    count = int(min(max(nbytes, 0.0), limit) // 8)
    if count:
        block = np.ones(count)
        del block


def _warm_up(wl: Workload, systems: Sequence[str], backend: str | None,
             workers: int | None) -> None:
    """Run each system once at the small check size, untimed. Failures here are left for
    the timed run to report."""
    small = min(wl.check_size, *wl.sizes)
    for system in systems:
        try:
            if system == "tilegraph":
                wl.run_tilegraph(small, backend=backend, workers=workers, progress=False)
            else:
                getattr(wl, f"run_{system}")(small)
        except Exception:
            pass


def _bench_one(name: str, size: int, system: str, fn: Callable[[], Any], flops: float,
               repeat: int, tg_seconds: float | None) -> BenchRow:
    if system == "dask":
        try:
            import dask  # noqa: F401
        except ImportError:
            return BenchRow(name, size, system, None, None, None, None,
                            "unavailable: dask is not installed")
    try:
        seconds, peak, _ = measure(fn, repeat)
    except Exception as exc:  # a failing system is reported; the other runs go on
        message = str(exc).splitlines()[0] if str(exc) else ""
        return BenchRow(name, size, system, None, None, None, None,
                        f"error: {type(exc).__name__}: {message}")
    ratio = None
    if system != "tilegraph" and tg_seconds:
        ratio = seconds / tg_seconds
    return BenchRow(name, size, system, seconds, flops / seconds / 1e9 if seconds else None,
                    peak, ratio, "ok")


# -- the example scripts ---------------------------------------------------------------------


def run_example(name: str, build: Callable[[int, int], Any],
                argv: Sequence[str] | None = None) -> int:
    """The body of ``examples/<name>.py``: parse ``--n``, ``--block``, ``--backend`` and
    ``--workers``, compute ``build(n, block)`` (a lazy tilegraph array or a tuple of
    them) and print the time and GFLOP/s, then check tilegraph against NumPy at the
    workload's small size. Returns the exit status: 0, or 1 on a mismatch."""
    import argparse

    import tilegraph as tg

    wl = WORKLOADS[name]
    parser = argparse.ArgumentParser(description=f"{name}: {wl.description}")
    parser.add_argument("--n", type=int, default=wl.sizes[0],
                        help=f"problem size (default {wl.sizes[0]})")
    parser.add_argument("--block", type=int, default=None,
                        help="block size (default: the suite's rule for n)")
    parser.add_argument("--backend", default=None, choices=["threads", "sync", "mpi"],
                        help="tilegraph backend (default: threads)")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker threads (default: one per core)")
    args = parser.parse_args(argv)
    try:
        n = wl.validate(args.n)
    except ValueError as exc:
        parser.error(str(exc))
    if args.block is not None and args.block < 1:
        parser.error(f"--block must be a positive integer, got {args.block}")
    block = args.block or wl.block(n)
    options = {k: v for k, v in (("backend", args.backend), ("workers", args.workers))
               if v is not None}

    out = build(n, block)
    t0 = time.perf_counter()
    result = tg.compute(*out, **options) if isinstance(out, tuple) else out.compute(**options)
    seconds = time.perf_counter() - t0
    root = result is not None and not (isinstance(result, tuple) and result[0] is None)
    if root:
        print(f"{name} n={n} block={block}: {seconds:.3f} s, "
              f"{wl.flops(n) / seconds / 1e9:.2f} GFLOP/s")
    check = wl.check_details(progress=False, **options)
    if root:
        print(f"check against NumPy at n={check.size} on identical inputs: error "
              f"{check.error:.1e}, tolerance {check.tolerance:.0e}: "
              f"{'ok' if check.ok else 'MISMATCH'}")
    return 0 if check.ok else 1
