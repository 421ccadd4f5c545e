"""The workload registry: for each program of :mod:`tilegraph.workloads.programs`, how its
inputs are made, its flop count, its block sizes, its default sizes, the memory it needs and
the check of tilegraph's result against NumPy's.

Inputs are random. :class:`TilegraphInputs` makes them lazily, block by block, with
``tilegraph.random`` and ``tilegraph.sparse.random``; :class:`NumPyInputs` with
``numpy.random.default_rng(seed)`` and ``scipy.sparse.random_array``. The values differ
between the two; the shapes, densities and work do not. :meth:`Workload.check` runs
tilegraph and NumPy on identical inputs instead (:class:`CheckInputs`): made once with NumPy
and wrapped with ``tilegraph.from_numpy`` / ``tilegraph.from_scipy`` in uneven blocks. (Funk
SVD's ratings, with the mask of the observed entries, are made as SciPy arrays for every
system, as if read from a file, and given to tilegraph with ``tilegraph.from_scipy``.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.array import compute, eye, from_numpy, from_scipy, full
from tilegraph.array import random as tilegraph_random
from tilegraph.array import sparse as tilegraph_sparse
from tilegraph.workloads.programs import (
    cholesky,
    funk_svd,
    linear_regression,
    matmul,
    matmul_chain,
    neural_network,
    pagerank,
    qr,
    sparse_matmul,
    svd,
)

DENSITY = 0.01  # fraction of stored entries of the sparse inputs


# -- making the inputs ------------------------------------------------------------------------


def _scipy_random(shape: tuple[int, int], density: float, seed: int) -> Any:
    import scipy.sparse

    rng = np.random.default_rng(seed)
    return scipy.sparse.random_array(shape, density=density, rng=rng, format="csr")


class NumPyInputs:
    """Inputs as NumPy arrays and SciPy sparse arrays (``chunks`` is ignored).

    An input maker has these five methods, and a recipe makes every input of its program
    with them: ``random(shape, chunks, seed)`` (uniform in [0, 1)), ``full(shape, value,
    chunks)``, ``eye(n, chunks)``, ``sparse_random(shape, chunks, seed)`` (:data:`DENSITY` of
    the entries stored) and ``from_scipy(matrix, chunks)``."""

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


class TilegraphInputs:
    """Lazy tilegraph inputs, made block by block in the run."""

    system = "tilegraph"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        return tilegraph_random.random(shape, chunks=chunks, seed=seed)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        return full(shape, value, chunks=chunks)

    def eye(self, n: int, chunks: Any) -> Any:
        return eye(n, chunks=chunks)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        return tilegraph_sparse.random(shape, density=DENSITY, chunks=chunks, seed=seed)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        return from_scipy(matrix, chunks=chunks)


class CheckInputs(NumPyInputs):
    """The NumPy maker's arrays, wrapped as tilegraph arrays in the given blocks: the
    identical inputs of :meth:`Workload.check`."""

    system = "tilegraph"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        return from_numpy(super().random(shape, chunks, seed), chunks=chunks)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        return from_numpy(super().full(shape, value, chunks), chunks=chunks)

    def eye(self, n: int, chunks: Any) -> Any:
        return from_numpy(super().eye(n, chunks), chunks=chunks)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        return from_scipy(super().sparse_random(shape, chunks, seed), chunks=chunks)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        return from_scipy(matrix, chunks=chunks)


#: The input maker of each system named in :meth:`Workload.inputs`.
MAKERS = {"numpy": NumPyInputs(), "tilegraph": TilegraphInputs(), "check": CheckInputs()}


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
    """One program of the suite, with its inputs for each system, its flop count, its
    default sizes and the size of its correctness check.

    ``program`` is the function every system runs; ``recipe(xp, n, block)`` makes
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
        """The block size of the suite's runs at ``size``."""
        return self.block_rule(self.validate(size))

    def flops(self, size: int) -> float:
        """Useful floating-point operations of one run at ``size`` (expected counts for the
        random sparse inputs)."""
        return float(self.flops_of(self.validate(size)))

    def inputs(self, system: str | Any, size: int,
               block: int | None = None) -> tuple[tuple, dict]:
        """The program's ``(args, kwargs)`` for ``system``: ``"tilegraph"`` (lazy),
        ``"numpy"``, ``"check"`` (NumPy arrays wrapped as tilegraph arrays; see
        :data:`MAKERS`) or the input maker of another library (an object with the methods
        of :class:`NumPyInputs`)."""
        size = self.validate(size)
        maker = MAKERS[system] if isinstance(system, str) else system
        return self.recipe(maker, size, block or self.block_rule(size))

    def run_tilegraph(self, size: int, backend: str | None = None, workers: int | None = None,
                      block: int | None = None, **options: Any) -> Any:
        """Make the inputs lazily, run the program with tilegraph and return its result (a
        NumPy array, or a tuple of them). With MPI, ranks other than 0 get ``None`` for
        results larger than ``mpi_broadcast_limit``."""
        args, kwargs = self.inputs("tilegraph", size, block)
        return _compute_tilegraph(self.program(*args, **kwargs), backend, workers, options)

    def run_numpy(self, size: int) -> Any:
        """The NumPy/SciPy reference: the same program on NumPy arrays made with NumPy."""
        args, kwargs = self.inputs("numpy", size)
        return self.program(*args, **kwargs)

    def check_details(self, size: int | None = None, backend: str | None = None,
                      workers: int | None = None, **options: Any) -> CheckResult:
        """Run tilegraph and NumPy on identical inputs (made with NumPy, wrapped in uneven
        blocks) and measure how far apart the results are."""
        size = self.check_size if size is None else self.validate(size)
        block = check_block(size)
        args, kwargs = self.inputs("check", size, block)
        got = _compute_tilegraph(self.program(*args, **kwargs), backend, workers, options)
        if got is None:  # an MPI rank other than 0: large results are on rank 0
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
    opts = dict(options)
    if backend is not None:
        opts["backend"] = backend
    if workers is not None:
        opts["workers"] = workers
    if isinstance(out, tuple):
        values = compute(*out, **opts)
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
