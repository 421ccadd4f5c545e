"""``tilegraph.linalg``: blocked linear algebra as task graphs.

Every function plans block tasks from shapes alone, like the rest of the array API; the
block kernels are LAPACK and BLAS calls that release the GIL
(:mod:`tilegraph.algebra.linalg_kernels`). The tiled algorithms are loop programs over block
coordinates recorded by a task grid (:mod:`tilegraph.algebra.grid`): each statement writes
one tile from others, tiles updated in place keep one version alive at a time, and the grid
lowers them like every other block collection.

- :func:`cholesky`: right-looking tiled Cholesky, the LambdaPACK program
  ``lambdapack.library.cholesky`` (:mod:`tilegraph.lambdapack`). Step k factors the diagonal
  block (potrf), solves the blocks below it (trsm), and updates the trailing lower triangle
  (syrk on the diagonal, gemm below it) in place where no other task reads the block.
- :func:`solve_triangular`: blocked substitution; :func:`solve` by Cholesky
  (``assume_a="pos"``) or by LU with partial pivoting; :func:`lu`, :func:`inv`,
  :func:`det`, :func:`slogdet` from the same LU (these live in
  :mod:`tilegraph.array.linalg_lu`; the checks every factorisation shares, in
  :mod:`tilegraph.array.linalg_base`).
- :func:`qr`: TSQR for tall-skinny matrices (one column of blocks): every row block is
  factored on its own, the stacked R factors once more, and Q is assembled block by block;
  for general shapes, tiled Householder QR (the LambdaPACK program ``library.qr``:
  LAPACK's geqrt/tpqrt on the tiles of each step's column, gemqrt/tpmqrt on the tiles to
  their right, Q by the reflectors applied to the identity's tiles).
- :func:`svd`: for tall-skinny matrices, TSQR and the SVD of the small R; for matrices of
  several blocks in both dimensions, numpywren's BDFAC (the LambdaPACK program
  ``library.svd``: tiled QR/LQ of the panels down to upper band form; the band's values by
  successive band reduction, gbbrd and bdsqr, or with vectors gesdd on the band gathered
  into one block, the panels' reflectors applied to its vectors);
  :func:`svd_compressed`: randomized SVD of any shape (Halko, Martinsson and Tropp).
- :func:`lstsq` by QR, :func:`norm` by reductions (and the SVD for the 2-norm).

Sign conventions: QR factors have R with a non-negative diagonal where LAPACK's gives
negative entries are flipped (so Q and R are unique for full-rank inputs); the singular
vectors of :func:`svd` are those of LAPACK's SVD of the small factor (or the band), so they
match NumPy's up to the sign of each pair (u_i, v_i). Square blocks are needed on the
diagonal, so the functions that factor square matrices give both axes the row blocks.
Integer inputs are computed in float64, as NumPy does.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from tilegraph.algebra import linalg_kernels as kern
from tilegraph.algebra.grid import Kernel, TaskGrid, task_grid
from tilegraph.algebra.linalg_kernels import LinAlgError
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.linalg_base import ROWS, ZEROS, as_matrix, as_square, float_dtype, real_dtype  # noqa: F401
from tilegraph.array.linalg_lu import (  # noqa: F401  (the LU program's kernels, as before)
    GEMM_COPY,
    GETRF,
    LASWP,
    PANEL_L,
    PANEL_U,
    PIVOTS,
    TRSM_UNIT,
    det,
    inv,
    lu,
    slogdet,
    solve,
)
from tilegraph.array.linalg_lu import lu_program as lu_program
from tilegraph.array.lp_arrays import band_svd as lp_band_svd
from tilegraph.array.lp_arrays import cholesky as lp_cholesky
from tilegraph.array.lp_arrays import householder_qr
from tilegraph.array.lp_arrays import trsm as lp_trsm
from tilegraph.array.lp_arrays import tsqr as lp_tsqr
from tilegraph.graph.taskgraph import Dep
from tilegraph.util import human

__all__ = [
    "LinAlgError", "cholesky", "compression_level", "compression_matrix", "det", "inv",
    "lstsq", "lu", "norm", "qr", "sfqr", "slogdet", "solve", "solve_triangular", "svd",
    "svd_compressed", "svd_flip", "tsqr",
]


# -- Cholesky -------------------------------------------------------------------------------

def cholesky(a: Any, upper: bool = False, lower: bool | None = None) -> Array:
    """The Cholesky factor of a Hermitian positive definite matrix: lower ``L`` with
    ``a = L @ L^H`` (or upper ``L^H`` with ``upper=True``), as ``numpy.linalg.cholesky``.
    dask's ``lower=`` is taken too (``lower=False``: the upper factor); note that dask's
    default is the upper factor and NumPy's (this one's) the lower.
    Only the lower triangle of ``a`` is read. A matrix that is not positive definite raises
    :class:`LinAlgError` (a ``numpy.linalg.LinAlgError``) naming the diagonal block where it
    was detected.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    >>> L = tg.linalg.cholesky(tg.from_numpy(m, chunks=2)).compute()
    >>> bool(np.allclose(L @ L.T, m)) and bool(np.allclose(L, np.linalg.cholesky(m)))
    True
    """
    a = as_square(a, "cholesky")
    if lower is not None:
        upper = not lower
    out = lp_cholesky(a)
    return out.conj().T if upper else out


# -- triangular solves ----------------------------------------------------------------------


def _trans_code(trans: Any) -> str:
    codes = {0: "N", 1: "T", 2: "C", "N": "N", "T": "T", "C": "C"}
    try:
        return codes[trans]
    except (KeyError, TypeError):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', "
                         f"got {trans!r}") from None


def solve_triangular(a: Any, b: Any, lower: bool = False, trans: Any = 0,
                     unit_diagonal: bool = False) -> Array:
    """Solve ``op(a) @ x = b`` for x, with ``a`` triangular (only that triangle is read),
    as ``scipy.linalg.solve_triangular``: ``trans`` 0/'N', 1/'T' or 2/'C'; ``b`` a vector
    or a matrix.

    >>> import numpy as np, tilegraph as tg
    >>> L = np.tril(np.arange(1.0, 10.0).reshape(3, 3))
    >>> x = tg.linalg.solve_triangular(tg.from_numpy(L, chunks=2), np.ones(3), lower=True)
    >>> bool(np.allclose(L @ x.compute(), np.ones(3)))
    True
    """
    return lp_trsm(as_square(a, "solve_triangular"), b, bool(lower), _trans_code(trans),
                   bool(unit_diagonal), op="solve_triangular")


# -- QR -------------------------------------------------------------------------------------


def tsqr(a: Any, split_every: int = 16, compute_svd: bool = False) -> Any:
    """QR of a tall-skinny matrix with one column of blocks (the columns are put in one
    block if they are not): ``q`` has ``a``'s row blocks, ``r`` is one block. The R factors
    of the row blocks are combined in a tree, ``split_every`` at a time. With dask's
    ``compute_svd=True``: ``(u, s, vt)``, the SVD through the same QR (:func:`svd`).

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(0).random((100, 5))
    >>> q, r = tg.linalg.tsqr(tg.from_numpy(m, chunks=(30, 5)))
    >>> bool(np.allclose((q @ r).compute(), m))
    True
    """
    if compute_svd:
        return svd(a)
    return lp_tsqr(a, split_every)


def qr(a: Any, mode: str = "reduced") -> Any:
    """QR factorisation ``a = q @ r`` of a matrix of any shape, as ``numpy.linalg.qr`` with
    ``mode="reduced"`` (``q``: m x k orthonormal columns, ``r``: k x n upper triangular,
    k = min(m, n)) or ``mode="r"`` (``r`` only). The diagonal of ``r`` is made real and
    non-negative. A matrix with one column of blocks is factored by TSQR; otherwise by
    tiled Householder QR in square tiles of its first row block's height (see the module
    docstring).

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(1).random((9, 7))
    >>> q, r = tg.linalg.qr(tg.from_numpy(m, chunks=3))
    >>> bool(np.allclose((q @ r).compute(), m))
    True
    """
    if mode not in ("reduced", "r"):
        raise ValueError(f"qr: mode must be 'reduced' or 'r', got {mode!r} (the complete Q "
                         "of a blocked matrix is not built; use mode='reduced')")
    a = as_matrix(a, "qr")
    if a.numblocks[1] == 1:
        q, r = tsqr(a)
    else:
        q, r = householder_qr(a)
    # zeros below the diagonal whatever the input (NaN does not leak there)
    r = triangle(r, 0, upper=True)
    return r if mode == "r" else (q, r)


def triangle(x: Array, k: int = 0, upper: bool = True) -> Array:
    """The upper (``col - row >= k``) or lower (``col - row <= k``) triangle of the last two
    axes, the other elements zero (``triu``/``tril`` of the Array API namespace)."""
    from tilegraph.array.creation import arange
    from tilegraph.array.elementwise import elemwise

    rows = arange(x.shape[-2], dtype=np.dtype(np.int64))[:, None]
    cols = arange(x.shape[-1], dtype=np.dtype(np.int64))[None, :]
    mask = (cols - rows >= k) if upper else (cols - rows <= k)
    return elemwise(np.where, mask, x, x.dtype.type(0), dtype=x.dtype, name="tri")


# -- SVD ------------------------------------------------------------------------------------


GESDD = Kernel(kern.svd_small, "svd", "gesdd")


def _small_factors(r: Array, name: str) -> tuple[Array, Array, Array]:
    """The SVD of a matrix held in one block, as three one-block Arrays."""
    k, n = r.shape
    kk = min(k, n)
    dtype = r.dtype

    def program(g: TaskGrid) -> None:
        g.call(GESDD, ("svd", 0, 0), [("R", 0, 0)], flops=14.0 * k * n * kk,
               nbytes=dtype.itemsize * (k + n + 1) * kk)
        for j, part in enumerate(("u", "s", "vt")):
            tile = ("s", 0) if part == "s" else (part, 0, 0)
            g.call(Kernel(kern.PARTS[j], "getitem", part), tile, [("svd", 0, 0)],
                   coords=(0, 0))

    s, u, vt = task_grid(name, program, [("s", (1,)), ("u", (1, 1)), ("vt", (1, 1))],
                         sources={"R": r.collection}, ntasks=4)
    return (Array(u, (k, kk), ((k,), (kk,)), dtype), Array(s, (kk,), ((kk,),), real_dtype(dtype)),
            Array(vt, (kk, n), ((kk,), (n,)), dtype))


BAND_SVD_WORDS = 6  # k x k matrices the band's SVD task holds with vectors (band, u, vh,
# and gesdd's workspace); 2 without vectors


def _band_svd_fits(k: int, dtype: np.dtype, compute_uv: bool, shape: tuple[int, int],
                   options: Any) -> None:
    """Refuse, when the graph is built for a run of ``options`` and before anything runs,
    a band SVD whose one dense task cannot fit under the memory limit each process of the
    run enforces (``options.memory_limit``); a graph built for no run (``None``) is not
    checked."""
    if options is None:
        return
    need = (BAND_SVD_WORDS if compute_uv else 2) * k * k * dtype.itemsize
    limit = options.memory_limit
    if need > limit:
        raise ValueError(f"svd: the {shape[0]} x {shape[1]} matrix is reduced to band form in "
                         f"parallel, but the band's SVD is one task holding {k} x {k} dense "
                         f"matrices ({human(need)}, more than memory_limit={human(limit)}, "
                         "what each process of the run may hold); use svd_compressed(a, k) "
                         "for the leading k singular triplets")


def svd(a: Any, full_matrices: bool = False, compute_uv: bool = True,
        coerce_signs: bool = False) -> Any:
    """Singular value decomposition ``a = u @ diag(s) @ vt`` of a matrix, as
    ``numpy.linalg.svd(a, full_matrices=False)`` (``s`` alone with ``compute_uv=False``).
    Singular vectors match NumPy's up to the sign (complex: phase) of each pair
    (u_i, v_i).

    - Tall-skinny (or short-fat) matrices whose smaller dimension is one block (at most
      20000): TSQR, then the SVD of the small R.
    - Matrices of several blocks in both dimensions: numpywren's BDFAC, the LambdaPACK
      program ``library.svd``: tiled QR of each column panel and LQ of each row panel
      reduce the matrix to upper band form (one tile wide) in parallel. The band stage is
      one task on the band gathered into a dense k x k matrix, k = min(m, n) (about 6 k^2
      numbers with vectors, 2 k^2 without, refused when the graph is built for a run, before
      anything runs, when that exceeds the run's ``memory_limit``). Values alone: the
      band is narrowed by successive band reduction (BLAS-3 bulge chasing) and made
      bidiagonal by LAPACK's gbbrd
      (:mod:`tilegraph.algebra.band`), about 8 k^2 b flops for tiles of b. With vectors:
      LAPACK's gesdd on the band, and the panels' reflectors turn its vectors into ``u``
      and ``vt`` tile by tile. Known gap: gesdd does not exploit the band, so with vectors
      that task costs about what a dense SVD of a k x k matrix does.

    For the leading singular triplets of a large matrix use :func:`svd_compressed`.
    ``coerce_signs=True`` flips each pair (u_i, v_i) so that the entries of v_i sum to a
    non-negative number (dask's ``svd_flip``; dask's default, not this one's), which makes
    the vectors the same whatever the algorithm.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(2).random((50, 4))
    >>> u, s, vt = tg.linalg.svd(tg.from_numpy(m, chunks=(20, 4)))
    >>> bool(np.allclose(s.compute(), np.linalg.svd(m, compute_uv=False)))
    True
    >>> sq = np.random.default_rng(3).random((30, 30))
    >>> s = tg.linalg.svd(tg.from_numpy(sq, chunks=10), compute_uv=False)
    >>> bool(np.allclose(s.compute(), np.linalg.svd(sq, compute_uv=False)))
    True
    """
    if full_matrices:
        raise ValueError("svd: full_matrices=True is not supported for blocked arrays (the "
                         "full U of a tall matrix is m x m); use full_matrices=False")
    if coerce_signs and compute_uv:
        return svd_flip(*svd(a, compute_uv=True))
    a = as_matrix(a, "svd")
    m, n = a.shape
    if m < n:  # short-fat: the SVD of the conjugate transpose
        res = svd(a.conj().T, compute_uv=compute_uv)
        if not compute_uv:
            return res
        u, s, vt = res
        return vt.conj().T, s, u.conj().T
    if a.numblocks[1] > 1 and a.numblocks[0] > 1:
        fits = partial(_band_svd_fits, n, a.dtype, compute_uv, (m, n))
        return lp_band_svd(a, compute_uv=compute_uv, block=a.chunks[1][0], fits=fits)
    if n > 20000:
        raise ValueError(f"svd: the {m} x {n} matrix has its {n} columns in one block; the "
                         "TSQR path factors an n x n R in one task (n at most 20000): give "
                         "it several column blocks (the tiled band reduction), or use "
                         "svd_compressed(a, k) for the leading k singular triplets")
    q, r = tsqr(a)
    name = f"svd-{tokenize('svd', a)}"
    ur, s, vt = _small_factors(r, name)
    if not compute_uv:
        return s
    return q @ ur, s, vt


def svd_compressed(a: Any, k: int, n_power_iter: int = 2, oversample: int = 10,
                   seed: Any = None, compute_uv: bool = True, *, iterator: str = "QR",
                   n_oversamples: int | None = None, compute: bool = False,
                   coerce_signs: bool = False) -> Any:
    """The leading ``k`` singular triplets of a matrix of any shape by randomized SVD: a
    Gaussian sketch ``a @ omega`` with ``k + oversample`` columns, ``n_power_iter`` power
    iterations (each re-orthonormalised by TSQR), and the exact SVD of the small projection.
    Returns ``u`` (m x k), ``s`` (k,) and ``vt`` (k x n), or ``s`` with
    ``compute_uv=False``. ``seed`` makes the sketch reproducible.

    dask's keywords are taken: ``n_oversamples`` (``oversample``), ``coerce_signs``
    (:func:`svd_flip`), ``iterator`` (``"QR"`` or ``"power"``: the iterations are
    re-orthonormalised either way, which is dask's ``"QR"`` and at least as accurate as
    its ``"power"``), ``compute`` (nothing to do: one plan computes the sketch once).
    Note dask's ``n_power_iter`` default is 0.

    >>> import numpy as np, tilegraph as tg
    >>> rng = np.random.default_rng(3)
    >>> m = rng.random((60, 5)) @ rng.random((5, 40))  # rank 5
    >>> s = tg.linalg.svd_compressed(tg.from_numpy(m, chunks=20), 5, seed=0,
    ...                              compute_uv=False)
    >>> bool(np.allclose(s.compute(), np.linalg.svd(m, compute_uv=False)[:5]))
    True
    """

    a = as_matrix(a, "svd_compressed")
    m, n = a.shape
    if iterator not in ("power", "QR"):
        raise ValueError(f"svd_compressed: iterator must be 'power' or 'QR', got "
                         f"{iterator!r}")
    if n_oversamples is not None:
        oversample = n_oversamples
    for label, value, low in (("k", k, 1), ("n_power_iter", n_power_iter, 0),
                              ("oversample", oversample, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"svd_compressed: {label} must be an int >= {low}, got {value!r}")
    if k > min(m, n):
        raise ValueError(f"svd_compressed: k={k} is more than min(m, n) = {min(m, n)} for a "
                         f"matrix of shape {a.shape}")
    q = _range_basis(a, min(k + oversample, min(m, n)), n_power_iter, seed)
    b = q.conj().T @ a  # width x n, short-fat
    ub, s, vt = svd(b, compute_uv=True)
    if not compute_uv:
        return s[:k]
    u = q @ ub
    out = u[:, :k], s[:k], vt[:k]
    return svd_flip(*out) if coerce_signs else out


def svd_flip(u: Array, s: Array, vt: Array) -> tuple[Array, Array, Array]:
    """The SVD ``(u, s, vt)`` with each pair (u_i, v_i) negated where the entries of v_i
    sum to a negative number (dask's ``svd_flip``): one fixed choice of sign."""
    signs = 2.0 * ((vt.sum(axis=1) >= 0).astype(vt.dtype) - 0.5)
    return u * signs[None, :], s, vt * signs[:, None]


def compression_level(n: int, q: int, n_oversamples: int = 10,
                      min_subspace_size: int = 20) -> int:
    """The width of the sketch of a randomized SVD of ``q`` triplets in a space of ``n``:
    ``q + n_oversamples``, at least ``min_subspace_size``, at most ``n`` (dask's).

    >>> compression_level(100, 10)
    20
    """
    return min(max(min_subspace_size, q + n_oversamples), n)


def compression_matrix(data: Any, q: int, iterator: str = "power", n_power_iter: int = 0,
                       n_oversamples: int = 10, seed: Any = None, compute: bool = False
                       ) -> Array:
    """An orthonormal basis (``m x compression_level(min(m, n), q)``, transposed: dask's
    ``compression_matrix`` returns its conjugate transpose) of the range of ``data``
    sketched by a Gaussian matrix, with ``n_power_iter`` re-orthonormalised power
    iterations, as the first step of :func:`svd_compressed`."""
    a = as_matrix(data, "compression_matrix")
    if iterator not in ("power", "QR"):
        raise ValueError(f"compression_matrix: iterator must be 'power' or 'QR', got "
                         f"{iterator!r}")
    m, n = a.shape
    width = compression_level(min(m, n), q, n_oversamples=n_oversamples)
    return _range_basis(a, width, n_power_iter, seed).conj().T


def _range_basis(a: Array, width: int, n_power_iter: int, seed: Any) -> Array:
    """An orthonormal basis (m x width) of the range of ``a`` sketched by a Gaussian
    matrix, refined by ``n_power_iter`` power iterations each re-orthonormalised by TSQR."""
    from tilegraph.array.random import normal

    n = a.shape[1]
    omega = normal(size=(n, width), chunks=(a.chunks[1], width), seed=seed)
    if a.dtype != omega.dtype:
        omega = omega.astype(a.dtype)
    q, _ = tsqr(a @ omega)
    for _ in range(n_power_iter):
        z, _ = tsqr(a.conj().T @ q)
        q, _ = tsqr(a @ z)
    return q


def sfqr(data: Any, name: str | None = None) -> tuple[Array, Array]:
    """QR of a short-and-fat matrix (dask's ``sfqr``): :func:`qr`, which takes any shape."""
    return qr(data)


# -- least squares and norms ------------------------------------------------------------------


def lstsq(a: Any, b: Any, rcond: float | None = None) -> tuple[Array, Array, Array, Array]:
    """Least-squares solution of ``a @ x = b``, as ``numpy.linalg.lstsq``: returns
    ``(x, residuals, rank, s)`` as lazy Arrays (``rank`` 0-d). For a tall ``a`` (m >= n)
    by TSQR and the SVD of R, so rank-deficient matrices get NumPy's minimum-norm solution;
    ``residuals`` holds the squared residual norm of each column of ``b`` when the rank is n
    and m > n; where NumPy returns an empty array (rank below n) it holds NaN, since the
    shape of a planned array cannot depend on the data, and it is empty when m == n. The
    columns of ``a`` must fit in one block (n at most 20000).

    >>> import numpy as np, tilegraph as tg
    >>> rng = np.random.default_rng(4)
    >>> m, y = rng.random((40, 3)), rng.random(40)
    >>> x, res, rank, s = tg.linalg.lstsq(tg.from_numpy(m, chunks=(15, 3)), y)
    >>> bool(np.allclose(x.compute(), np.linalg.lstsq(m, y)[0])), int(rank.compute())
    (True, 3)
    """
    from tilegraph.array.creation import zeros

    a = as_matrix(a, "lstsq")
    b = asarray(b)
    m, n = a.shape
    if b.ndim not in (1, 2) or b.shape[0] != m:
        raise ValueError(f"lstsq: b of shape {b.shape} does not match a of shape {a.shape} "
                         f"(b needs {m} rows)")
    if m < n:
        raise ValueError(f"lstsq: a of shape {a.shape} is wide (m < n); the blocked least "
                         "squares needs m >= n (solve the transposed problem, or use a "
                         "NumPy array)")
    if n > 20000:
        raise ValueError(f"lstsq: a has {n} columns; at most 20000 fit the blocked solver")
    vector = b.ndim == 1
    bb = b[:, None] if vector else b
    dtype = np.result_type(a.dtype, float_dtype(bb.dtype, "lstsq"))
    a = a.astype(dtype) if a.dtype != dtype else a
    bb = bb.astype(dtype) if bb.dtype != dtype else bb
    q, r = tsqr(a)
    if bb.chunks[0] != q.chunks[0]:
        bb = bb.rechunk((q.chunks[0], bb.chunks[1]))
    qtb = (q.conj().T @ bb).rechunk((n, bb.shape[1]))
    nrhs = bb.shape[1]
    real = real_dtype(dtype)

    def program(g: TaskGrid) -> None:
        g.call(Kernel(kern.lstsq_small, "svd", "lstsq"), ("solve", 0, 0),
               [("R", 0, 0), ("QtB", 0, 0)], args=(Dep(0), Dep(1), rcond, (m, n)))
        for j, tile in enumerate((("x", 0, 0), ("rank",), ("s", 0))):
            g.call(Kernel(kern.PARTS[j], "getitem", "lstsq"), tile, [("solve", 0, 0)],
                   coords=(0, 0))

    xb, rank_b, s_b = task_grid(f"lstsq-{tokenize('lstsq', a, bb, rcond)}", program,
                                [("x", (1, 1)), ("rank", ()), ("s", (1,))],
                                sources={"R": r.collection, "QtB": qtb.collection}, ntasks=4)
    x = Array(xb, (n, nrhs), ((n,), (nrhs,)), dtype)
    rank = Array(rank_b, (), (), np.int64)
    s = Array(s_b, (n,), ((n,),), real)
    if m > n:
        resid = (abs(bb - a @ x) ** 2).sum(axis=0)
        full_rank = (rank == n)
        resid = _where_full_rank(resid, full_rank)
    else:
        resid = zeros((0,), dtype=real)
    return (x[:, 0] if vector else x), resid, rank, s


def _where_full_rank(resid: Array, full_rank: Array) -> Array:
    """``resid`` when the rank is full, else NaN: NumPy returns an empty array then, but the
    shape of a planned array cannot depend on data."""
    from tilegraph.array.elementwise import where

    return where(full_rank, resid, np.nan)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Array:
    """Matrix or vector norm, as ``numpy.linalg.norm``. Vector norms of any order; matrix
    norms ``'fro'``, ``'nuc'``, 1, -1, inf, -inf, 2 and -2. The last three come from the
    singular values: of the matrix by :func:`svd` for a 2-D array; of each matrix by
    NumPy for a stack of matrices (``axis`` a pair of axes of a larger array), whose
    matrices are then gathered whole into blocks (one matrix must fit in a task).

    >>> import numpy as np, tilegraph as tg
    >>> m = np.arange(12.0).reshape(3, 4) - 5
    >>> a = tg.from_numpy(m, chunks=2)
    >>> [bool(np.isclose(tg.linalg.norm(a, o).compute(), np.linalg.norm(m, o)))
    ...  for o in (None, "fro", 1, -1, np.inf, 2, "nuc")]
    [True, True, True, True, True, True, True]
    """
    x = asarray(x)
    if x.dtype.kind not in "biufc":
        raise TypeError(f"norm: arrays of dtype {x.dtype} are not supported")
    if x.dtype.kind in "biu":
        x = x.astype(np.float64)
    if axis is None:
        if ord is None:
            out = (abs(x) ** 2).sum() ** 0.5 if x.dtype.kind == "c" else (x * x).sum() ** 0.5
            if keepdims:
                out = out.reshape((1,) * x.ndim)
            return out
        axes = tuple(range(x.ndim))
    elif isinstance(axis, (int, np.integer)):
        axes = (int(axis),)
    else:
        axes = tuple(int(a) for a in axis)
    axes = tuple(a + x.ndim if a < 0 else a for a in axes)
    if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"norm: invalid axis {axis!r} for an array of {x.ndim} dimensions")
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"norm: improper number of dimensions to norm ({len(axes)}); give ord "
                     "with a vector or a matrix, or axis")


def _vector_norm(x: Array, ord: Any, axis: int, keepdims: bool) -> Array:
    ax = abs(x)
    if ord is None or ord == 2:
        return ((ax * ax).sum(axis=axis, keepdims=keepdims)) ** 0.5
    if ord == np.inf:
        return ax.max(axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return ax.min(axis=axis, keepdims=keepdims)
    if ord == 0:
        return (x != 0).astype(ax.dtype).sum(axis=axis, keepdims=keepdims)
    if ord == 1:
        return ax.sum(axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid norm order {ord!r} for vectors")
    p = float(ord)
    return ((ax ** p).sum(axis=axis, keepdims=keepdims)) ** (1.0 / p)


def _matrix_norm(x: Array, ord: Any, axes: tuple[int, int], keepdims: bool) -> Array:
    r, c = axes
    ax = abs(x)
    if ord is None or ord == "fro":
        out = ((ax * ax).sum(axis=axes)) ** 0.5
    elif ord in (1, -1):
        col = ax.sum(axis=r)
        out = col.max(axis=c - 1 if c > r else c) if ord == 1 else \
            col.min(axis=c - 1 if c > r else c)
    elif ord in (np.inf, -np.inf):
        row = ax.sum(axis=c)
        out = row.max(axis=r if r < c else r - 1) if ord == np.inf else \
            row.min(axis=r if r < c else r - 1)
    elif ord in (2, -2, "nuc") and x.ndim > 2:
        return _stacked_matrix_norm(x, ord, axes, ax.dtype, keepdims)
    elif ord in (2, -2, "nuc"):
        m = x if axes == (0, 1) else x.T
        s = svd(m, compute_uv=False)
        out = s.max() if ord == 2 else (s.min() if ord == -2 else s.sum())
    else:
        raise ValueError(f"norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        shape = list(x.shape)
        for a in axes:
            shape[a] = 1
        out = out.reshape(tuple(shape))
    return out


def _stacked_matrix_norm(x: Array, ord: Any, axes: tuple[int, int], dtype: np.dtype,
                         keepdims: bool) -> Array:
    """Norms 2, -2 or 'nuc' of a stack of matrices: each block is made to hold whole
    matrices (the two matrix axes in one block each), and NumPy's norm runs on every
    block. So one matrix must fit in a task's memory; the stack may be any size."""
    r, c = axes
    whole = x.rechunk({r: -1, c: -1})
    chunks = tuple((1,) if a in axes else bd for a, bd in enumerate(whole.chunks))
    out = whole.map_blocks(_block_matrix_norm, ord, axes, chunks=chunks, dtype=dtype,
                           name=f"norm-{ord}")
    return out if keepdims else out.squeeze(axis=axes)


def _block_matrix_norm(block: np.ndarray, ord: Any, axes: tuple[int, int]) -> np.ndarray:
    return np.linalg.norm(block, ord, axis=axes, keepdims=True)


