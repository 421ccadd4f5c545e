"""The workload suite: the programs users run on tilegraph, each written once with array
operations, with what it takes to run and check them.

Every program (:func:`matmul`, :func:`linear_regression`, :func:`pagerank`, ... in
:mod:`tilegraph.workloads.programs`) is a plain function of its input arrays: the same code
runs on lazy tilegraph arrays, on NumPy arrays (SciPy sparse arrays for sparse inputs) and
on dask arrays, so that every system runs the same algorithm with the same iteration counts.
:data:`WORKLOADS` (:mod:`tilegraph.workloads.registry`) maps each name to a
:class:`Workload`, which makes the inputs, runs the program, counts its flops and checks
tilegraph against NumPy on identical inputs:

>>> from tilegraph.workloads import WORKLOADS
>>> wl = WORKLOADS["matmul"]
>>> wl.check(120)
True
>>> wl.run_tilegraph(120).shape
(120, 120)
>>> wl.flops(120) == 2 * 120**3
True

:func:`run_example` is the body of the scripts in ``examples/``. Timing the suite against
NumPy and dask is not part of the package: ``python bench/suite.py`` does it, from a
checkout of the repository.

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

:meth:`Workload.flops` and :attr:`Workload.flops_formula` give the exact formulas. The sizes
are chosen for a machine of 2 cores and 24 GiB: NumPy needs at most about 4 GiB and half a
minute for any of them.

The workloads import from tilegraph only :mod:`tilegraph.array`.
"""

from tilegraph.workloads.example import run_example
from tilegraph.workloads.programs import (
    cholesky,
    funk_svd,
    linalg_module,
    linear_regression,
    matmul,
    matmul_chain,
    neural_network,
    pagerank,
    qr,
    sparse_matmul,
    svd,
)
from tilegraph.workloads.registry import (
    DENSITY,
    MAKERS,
    WORKLOADS,
    CheckInputs,
    CheckResult,
    NumPyInputs,
    TilegraphInputs,
    Workload,
    check_block,
    divisor_block,
    ratings,
    row_block,
    square_block,
)

__all__ = [
    "DENSITY", "MAKERS", "WORKLOADS", "CheckInputs", "CheckResult", "NumPyInputs",
    "TilegraphInputs", "Workload", "check_block", "cholesky", "divisor_block", "funk_svd",
    "linalg_module", "linear_regression", "matmul", "matmul_chain", "neural_network",
    "pagerank", "qr", "ratings", "row_block", "run_example", "sparse_matmul", "square_block",
    "svd",
]
