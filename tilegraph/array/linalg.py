"""``tilegraph.linalg``: blocked linear algebra as task graphs.

Every function plans block tasks from shapes alone, like the rest of the array API; the
block kernels are LAPACK and BLAS calls that release the GIL
(:mod:`tilegraph.array.linalg_kernels`).

- :func:`cholesky`: right-looking tiled Cholesky. Step k factors the diagonal block (potrf),
  solves the blocks below it (trsm), and updates the trailing lower triangle (syrk on the
  diagonal, gemm below it) in place, so each block keeps one version alive at a time.
- :func:`solve_triangular`: blocked substitution; :func:`solve` by Cholesky
  (``assume_a="pos"``) or by LU with partial pivoting; :func:`lu`, :func:`inv`,
  :func:`det`, :func:`slogdet` from the same LU.
- :func:`qr`: TSQR for tall-skinny matrices (one column of blocks): every row block is
  factored on its own, the stacked R factors once more, and Q is assembled block by block;
  for general shapes, a blocked QR over column panels (each panel by TSQR, orthogonalised
  against the panels before it twice, "BCGS2", which keeps Q orthogonal to working
  precision for matrices that are not nearly rank-deficient).
- :func:`svd`: for tall-skinny matrices, TSQR and the SVD of the small R;
  :func:`svd_compressed`: randomized SVD of any shape (Halko, Martinsson and Tropp).
- :func:`lstsq` by QR, :func:`norm` by reductions (and the SVD for the 2-norm).

Sign conventions: QR factors have R with a non-negative diagonal where LAPACK's gives
negative entries are flipped (so Q and R are unique for full-rank inputs); the singular
vectors of :func:`svd` are those of LAPACK's SVD of the small factor, so they match NumPy's
up to the sign of each pair (u_i, v_i). Square blocks are needed on the diagonal, so the
functions that factor square matrices give both axes the row blocks. Integer inputs are
computed in float64, as NumPy does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.linalg_kernels import (
    LinAlgError,
    gemm_update,
    herk_update,
    potrf,
    trsm,
)
from tilegraph.graph.taskgraph import Dep, GraphBuilder

__all__ = [
    "LinAlgError", "cholesky", "det", "inv", "lstsq", "lu", "norm", "qr", "slogdet", "solve",
    "solve_triangular", "svd", "svd_compressed",
]


# -- helpers --------------------------------------------------------------------------------


def _float_dtype(dtype: np.dtype, op: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype.itemsize <= 4 else np.dtype(np.float64)
    if dtype.kind == "c":
        return np.dtype(np.complex64) if dtype.itemsize <= 8 else np.dtype(np.complex128)
    raise TypeError(f"{op}: arrays of dtype {dtype} are not supported (use numbers)")


def _matrix(a: Any, op: str) -> Array:
    a = asarray(a)
    if a.ndim != 2:
        raise ValueError(f"{op}: expected a 2-D matrix, got an array of shape {a.shape} "
                         f"({a.ndim}-D); stacks of matrices are not supported")
    dtype = _float_dtype(a.dtype, op)
    return a if a.dtype == dtype else a.astype(dtype)


def _square(a: Any, op: str) -> Array:
    """``a`` as a square matrix whose two axes have the same blocks (the row blocks)."""
    a = _matrix(a, op)
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"{op}: expected a square matrix, got shape {a.shape}")
    if a.chunks[1] != a.chunks[0]:
        a = a.rechunk((a.chunks[0], a.chunks[0]))
    return a


def _nbytes(dtype: np.dtype, *shape: int) -> int:
    return dtype.itemsize * math.prod(shape)


def _zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def _result(name: str, grid: tuple[int, ...], deps: list[Blocks], emit: Callable,
            keys: np.ndarray, ntasks: int) -> Blocks:
    return Blocks(name, grid, deps, emit, keys=keys, ntasks=ntasks)


def _count(emit: Callable[[GraphBuilder], None]) -> int:
    """Tasks ``emit`` adds (by emitting into a scratch builder)."""
    builder = GraphBuilder()
    emit(builder)
    return len(builder)


def _view(name: str, grid: tuple[int, ...], inner: Blocks, keys: np.ndarray) -> Blocks:
    """A collection whose blocks are tasks of ``inner`` (no tasks of its own)."""
    return Blocks(name, grid, [inner], None, keys=keys, ntasks=0)


# -- Cholesky -------------------------------------------------------------------------------


def cholesky(a: Any, upper: bool = False) -> Array:
    """The Cholesky factor of a Hermitian positive definite matrix: lower ``L`` with
    ``a = L @ L^H`` (or upper ``L^H`` with ``upper=True``), as ``numpy.linalg.cholesky``.
    Only the lower triangle of ``a`` is read. A matrix that is not positive definite raises
    :class:`LinAlgError` (a ``numpy.linalg.LinAlgError``) naming the diagonal block where it
    was detected.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.array([[4.0, 2.0, 0.0], [2.0, 5.0, 1.0], [0.0, 1.0, 3.0]])
    >>> L = tg.linalg.cholesky(tg.from_numpy(m, chunks=2)).compute()
    >>> bool(np.allclose(L @ L.T, m)) and bool(np.allclose(L, np.linalg.cholesky(m)))
    True
    """
    a = _square(a, "cholesky")
    out = _cholesky(a)
    return out.conj().T if upper else out


def _cholesky(a: Array) -> Array:
    chunks = a.chunks[0]
    nb = len(chunks)
    dtype = a.dtype
    name = f"cholesky-{tokenize('cholesky', a)}"
    keys = np.empty((nb, nb), dtype=object)
    for i in range(nb):
        for j in range(nb):
            keys[i, j] = (f"{name}-L", i, j) if j <= i else (f"{name}-zero", i, j)
    akey = a.blocks.key

    def emit(builder: GraphBuilder) -> None:
        add = builder.add
        cur = {(i, j): akey((i, j)) for i in range(nb) for j in range(i + 1)}
        private = set()  # blocks whose current version is ours to write in place
        for k in range(nb):
            bk = chunks[k]
            lkk = keys[k, k]
            add(lkk, potrf, deps=[cur[k, k]], kwargs={"where": (k, k)}, kind="potrf",
                name="potrf", coords=(k, k), nbytes=_nbytes(dtype, bk, bk), cost=bk**3 / 3)
            for i in range(k + 1, nb):
                add(keys[i, k], trsm, deps=[lkk, cur[i, k]], kind="trsm", name="trsm",
                    kwargs={"side": "R", "lower": True, "trans": "C",
                            "copy": (i, k) not in private},
                    coords=(i, k), nbytes=_nbytes(dtype, chunks[i], bk),
                    cost=chunks[i] * bk * bk)
            for j in range(k + 1, nb):
                for i in range(j, nb):
                    key = (f"{name}-update", i, j, k)
                    copy = (i, j) not in private
                    if i == j:
                        add(key, herk_update, deps=[cur[i, i], keys[i, k]],
                            kwargs={"copy": copy}, kind="syrk", name="syrk", coords=(i, i),
                            nbytes=_nbytes(dtype, chunks[i], chunks[i]),
                            cost=chunks[i] ** 2 * bk)
                    else:
                        add(key, gemm_update, deps=[cur[i, j], keys[i, k], keys[j, k]],
                            kwargs={"trans_b": "C", "copy": copy}, kind="gemm",
                            name="gemm", coords=(i, j),
                            nbytes=_nbytes(dtype, chunks[i], chunks[j]),
                            cost=2 * chunks[i] * chunks[j] * bk)
                    cur[i, j] = key
                    private.add((i, j))
        for i in range(nb):
            for j in range(i + 1, nb):
                add(keys[i, j], _zeros, args=((chunks[i], chunks[j]), dtype), kind="creation",
                    name="zeros", coords=(i, j), nbytes=_nbytes(dtype, chunks[i], chunks[j]))

    ntasks = nb * nb + sum((nb - k - 1) * (nb - k) // 2 for k in range(nb))
    blocks = _result(name, (nb, nb), [a.blocks], emit, keys, ntasks)
    return Array(blocks, a.shape, (chunks, chunks), dtype)


# -- triangular solves ----------------------------------------------------------------------


def _trans_code(trans: Any) -> str:
    codes = {0: "N", 1: "T", 2: "C", "N": "N", "T": "T", "C": "C"}
    try:
        return codes[trans]
    except (KeyError, TypeError):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', "
                         f"got {trans!r}") from None


def _gemm_op_a(c: np.ndarray, a: np.ndarray, x: np.ndarray, trans: str,
               copy: bool) -> np.ndarray:
    """``c - op(a) @ x`` (in place unless ``copy``)."""
    opa = a if trans == "N" else (a.T if trans == "T" else a.conj().T)
    return gemm_update(c, opa, x, copy=copy)


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
    t = _trans_code(trans)
    a = _square(a, "solve_triangular")
    b = asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"solve_triangular: b of shape {b.shape} does not match the matrix "
                         f"of shape {a.shape} (b needs {a.shape[0]} rows)")
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    dtype = np.result_type(a.dtype, _float_dtype(b.dtype, "solve_triangular"))
    a = a.astype(dtype) if a.dtype != dtype else a
    b = b.astype(dtype) if b.dtype != dtype else b
    if b.chunks[0] != a.chunks[0]:
        b = b.rechunk((a.chunks[0], b.chunks[1]))
    x = _solve_triangular(a, b, lower, t, bool(unit_diagonal))
    return x[:, 0] if vector else x


def _solve_triangular(a: Array, b: Array, lower: bool, trans: str, unit: bool) -> Array:
    rows, cols = b.chunks
    nb, nc = len(rows), len(cols)
    dtype = b.dtype
    name = f"trsolve-{tokenize('solve_triangular', a, b, lower, trans, unit)}"
    forward = lower == (trans == "N")  # the effective matrix is lower triangular
    order = list(range(nb)) if forward else list(range(nb - 1, -1, -1))
    keys = np.empty((nb, nc), dtype=object)
    for i in range(nb):
        for j in range(nc):
            keys[i, j] = (name, i, j)
    akey, bkey = a.blocks.key, b.blocks.key

    def block_of_op(i: int, k: int) -> Hashable:
        """The stored block holding op(a)[i, k]."""
        return akey((i, k)) if trans == "N" else akey((k, i))

    def emit(builder: GraphBuilder) -> None:
        add = builder.add
        for j in range(nc):
            done: list[int] = []
            for i in order:
                acc = bkey((i, j))
                for step, k in enumerate(done):
                    key = (f"{name}-update", i, j, k)
                    add(key, _gemm_op_a, deps=[acc, block_of_op(i, k), keys[k, j]],
                        args=None, kwargs={"trans": trans, "copy": step == 0},
                        kind="gemm", name="gemm", coords=(i, j),
                        nbytes=_nbytes(dtype, rows[i], cols[j]),
                        cost=2 * rows[i] * rows[k] * cols[j])
                    acc = key
                add(keys[i, j], trsm, deps=[akey((i, i)), acc],
                    kwargs={"side": "L", "lower": lower, "trans": trans, "unit": unit,
                            "copy": not done},
                    kind="trsm", name="trsm", coords=(i, j),
                    nbytes=_nbytes(dtype, rows[i], cols[j]), cost=rows[i] ** 2 * cols[j])
                done.append(i)

    ntasks = nc * (nb + nb * (nb - 1) // 2)
    blocks = _result(name, (nb, nc), [a.blocks, b.blocks], emit, keys, ntasks)
    return Array(blocks, b.shape, b.chunks, dtype)


# -- QR -------------------------------------------------------------------------------------


def _qr_block(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reduced QR of one block (LAPACK geqrf + orgqr; NumPy releases the GIL)."""
    return np.linalg.qr(a, mode="reduced")


def _pick(pair: tuple, i: int) -> Any:
    return pair[i]


def _qr_stacked(*rs: np.ndarray, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """QR of the R factors stacked; with ``normalize``, R's diagonal is made >= 0 (and Q's
    columns flipped to match)."""
    q, r = np.linalg.qr(np.concatenate(rs, axis=0), mode="reduced")
    if normalize:
        d = np.diagonal(r)
        sign = np.where(d == 0, 1, d / np.where(d == 0, 1, np.abs(d))).astype(r.dtype)
        r = sign.conj()[:, None] * r
        q = q * sign[None, :]
    return q, r


def _rows(x: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` of a block (a view)."""
    return x[start:stop]


def _times(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b


def tsqr(a: Any, split_every: int = 16) -> tuple[Array, Array]:
    """QR of a tall-skinny matrix with one column of blocks (the columns are put in one
    block if they are not): ``q`` has ``a``'s row blocks, ``r`` is one block. The R factors
    of the row blocks are combined in a tree, ``split_every`` at a time.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(0).random((100, 5))
    >>> q, r = tg.linalg.tsqr(tg.from_numpy(m, chunks=(30, 5)))
    >>> bool(np.allclose((q @ r).compute(), m))
    True
    """
    a = _matrix(a, "qr")
    m, n = a.shape
    if a.numblocks[1] != 1:
        a = a.rechunk((a.chunks[0], (n,)))
    if not isinstance(split_every, int) or split_every < 2:
        raise ValueError(f"tsqr: split_every must be an int >= 2, got {split_every!r}")
    rows = a.chunks[0]
    nb = len(rows)
    dtype = a.dtype
    k = min(m, n)
    name = f"tsqr-{tokenize('tsqr', a, split_every)}"
    akey = a.blocks.key
    qkeys = np.empty((nb, 1), dtype=object)
    for i in range(nb):
        qkeys[i, 0] = (f"{name}-Q", i)
    rkey = np.empty((1, 1), dtype=object)
    rkey[0, 0] = (f"{name}-R",)
    counter = [0]

    def emit(builder: GraphBuilder) -> None:
        add = builder.add
        # leaves: (key of the QR pair, rows of its R, rows of its Q block)
        items = []
        for i in range(nb):
            pair = (f"{name}-leaf", i)
            add(pair, _qr_block, deps=[akey((i, 0))], kind="qr", name="geqrf",
                coords=(i, 0), nbytes=_nbytes(dtype, rows[i] + n, n),
                cost=4.0 * rows[i] * n * n)
            rk = (f"{name}-leafR", i)
            add(rk, _pick, deps=[pair], args=(Dep(0), 1), kind="getitem", name="R",
                coords=(i, 0), nbytes=_nbytes(dtype, min(rows[i], n), n))
            items.append((rk, min(rows[i], n), pair))
        factors = _combine(builder, items, top=True)
        for i in range(nb):
            qi = (f"{name}-leafQ", i)
            add(qi, _pick, deps=[items[i][2]], args=(Dep(0), 0), kind="getitem", name="Q",
                coords=(i, 0), nbytes=_nbytes(dtype, rows[i], min(rows[i], n)))
            add(qkeys[i, 0], _times, deps=[qi, factors[i]], kind="gemm", name="Q",
                coords=(i, 0), nbytes=_nbytes(dtype, rows[i], k),
                cost=2.0 * rows[i] * min(rows[i], n) * k)

    def _combine(builder: GraphBuilder, items: list, top: bool) -> list[Hashable]:
        """Combine the R factors of ``items``; returns, per item, the key of the factor its
        Q block must be multiplied by."""
        add = builder.add
        level = counter[0] = counter[0] + 1
        groups = [items[g:g + split_every] for g in range(0, len(items), split_every)]
        last = len(groups) == 1
        out: list[Hashable] = []
        parents = []
        for g, group in enumerate(groups):
            pair = (f"{name}-node", level, g)
            total = sum(r for _, r, _ in group)
            add(pair, _qr_stacked, deps=[key for key, _, _ in group],
                kwargs={"normalize": last and top}, kind="qr", name="geqrf",
                coords=(g, 0), nbytes=_nbytes(dtype, total + n, n), cost=4.0 * total * n * n)
            rk = rkey[0, 0] if last else (f"{name}-nodeR", level, g)
            add(rk, _pick, deps=[pair], args=(Dep(0), 1), kind="getitem", name="R",
                coords=(g, 0), nbytes=_nbytes(dtype, min(total, n), n))
            parents.append((rk, min(total, n), pair))
        if last:
            tops = [parents[0][2]]
            qtop = (f"{name}-nodeQ", level, 0)
            add(qtop, _pick, deps=[tops[0]], args=(Dep(0), 0), kind="getitem", name="Q",
                coords=(0, 0), nbytes=_nbytes(dtype, parents[0][1], n))
            above = [qtop]
        else:
            above = []
            node_factors = _combine(builder, parents, top)
            for g, (_, _, pair) in enumerate(parents):
                qg = (f"{name}-nodeQ", level, g)
                add(qg, _pick, deps=[pair], args=(Dep(0), 0), kind="getitem", name="Q",
                    coords=(g, 0), nbytes=_nbytes(dtype, sum(r for _, r, _ in groups[g]), n))
                fg = (f"{name}-nodeF", level, g)
                add(fg, _times, deps=[qg, node_factors[g]], kind="gemm", name="Q",
                    coords=(g, 0))
                above.append(fg)
        for g, group in enumerate(groups):
            start = 0
            for j, (_, r, _) in enumerate(group):
                fk = (f"{name}-slice", level, g, j)
                add(fk, _rows, deps=[above[g]], args=(Dep(0), start, start + r),
                    kind="getitem", name="rows", coords=(g, j))
                out.append(fk)
                start += r
        return out

    internal = Blocks(name, (nb, 1), [a.blocks], emit, keys=qkeys,
                      ntasks=lambda: _count(emit))
    q = Array(internal, (m, k), (rows, (k,)), dtype)
    r = Array(_view(f"{name}-r", (1, 1), internal, rkey), (k, n), ((k,), (n,)), dtype)
    return q, r


def qr(a: Any, mode: str = "reduced") -> Any:
    """QR factorisation ``a = q @ r`` of a matrix of any shape, as ``numpy.linalg.qr`` with
    ``mode="reduced"`` (``q``: m x k orthonormal columns, ``r``: k x n upper triangular,
    k = min(m, n)) or ``mode="r"`` (``r`` only). The diagonal of ``r`` is made real and
    non-negative. A matrix with one column of blocks is factored by TSQR; otherwise by
    column panels (see the module docstring), whose blocks give ``q``'s and ``r``'s.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(1).random((9, 7))
    >>> q, r = tg.linalg.qr(tg.from_numpy(m, chunks=3))
    >>> bool(np.allclose((q @ r).compute(), m))
    True
    """
    if mode not in ("reduced", "r"):
        raise ValueError(f"qr: mode must be 'reduced' or 'r', got {mode!r} (the complete Q "
                         "of a blocked matrix is not built; use mode='reduced')")
    a = _matrix(a, "qr")
    if a.numblocks[1] == 1:
        q, r = tsqr(a)
    else:
        q, r = _panel_qr(a)
    return r if mode == "r" else (q, r)


def _panel_qr(a: Array) -> tuple[Array, Array]:
    """Blocked QR by column panels: each panel is orthogonalised against the earlier panels'
    Q twice (BCGS2), then factored by TSQR."""
    from tilegraph.array.creation import zeros
    from tilegraph.array.manipulation import concatenate

    m, n = a.shape
    k = min(m, n)
    cols = list(a.chunks[1])
    if k < n:  # put a panel boundary at column k: the panels after it only need R
        edges = np.cumsum([0, *cols])
        cut = sorted({int(e) for e in edges} | {k})
        cols = [b - c for c, b in itertools.pairwise(cut) if b > c]
        a = a.rechunk((a.chunks[0], tuple(cols)))
    starts = np.cumsum([0, *cols])
    qs: list[Array] = []
    rblocks: dict[tuple[int, int], Array] = {}
    npanels_q = int(np.searchsorted(starts, k, side="left"))
    for p in range(len(cols)):
        w = a[:, int(starts[p]):int(starts[p + 1])]
        if p >= npanels_q:  # beyond column k: Q is complete, R = Q^H A
            for q_idx, qq in enumerate(qs):
                rblocks[q_idx, p] = qq.conj().T @ w
            continue
        coeffs: dict[int, Array] = {}
        for _ in range(2):
            for q_idx, qq in enumerate(qs):
                c = qq.conj().T @ w
                w = w - qq @ c
                coeffs[q_idx] = coeffs[q_idx] + c if q_idx in coeffs else c
        qp, rp = tsqr(w)
        qs.append(qp)
        for q_idx, c in coeffs.items():
            rblocks[q_idx, p] = c
        rblocks[p, p] = rp
    q = concatenate(qs, axis=1) if len(qs) > 1 else qs[0]
    qcols = cols[:npanels_q]
    rows = []
    for i in range(npanels_q):
        row = []
        for p, width in enumerate(cols):
            block = rblocks.get((i, p))
            if block is None:
                block = zeros((qcols[i], width), dtype=a.dtype, chunks=(qcols[i], width))
            row.append(block)
        rows.append(concatenate(row, axis=1) if len(row) > 1 else row[0])
    r = concatenate(rows, axis=0) if len(rows) > 1 else rows[0]
    return q, r


# -- SVD ------------------------------------------------------------------------------------


def _svd_small(r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.linalg.svd(r, full_matrices=False)


def _small_factors(r: Array, name: str) -> tuple[Array, Array, Array]:
    """The SVD of a matrix held in one block, as three one-block Arrays."""
    rk = r.blocks.key((0, 0))
    k, n = r.shape
    kk = min(k, n)
    dtype = r.dtype
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    keys = {part: np.empty((1, 1) if part != "s" else (1,), dtype=object)
            for part in ("u", "s", "vt")}
    for part, arr in keys.items():
        arr[(0,) * arr.ndim] = (f"{name}-{part}",)

    def emit(builder: GraphBuilder) -> None:
        builder.add((f"{name}-svd",), _svd_small, deps=[rk], kind="svd", name="gesdd",
                    coords=(0, 0), nbytes=_nbytes(dtype, k + n + 1, kk), cost=14.0 * k * n * kk)
        for j, part in enumerate(("u", "s", "vt")):
            builder.add((f"{name}-{part}",), _pick, deps=[(f"{name}-svd",)],
                        args=(Dep(0), j), kind="getitem", name=part, coords=(0, 0))

    inner = Blocks(f"{name}-svd", (1,), [r.blocks], emit, keys=keys["s"], ntasks=4)
    u = Array(_view(f"{name}-U", (1, 1), inner, keys["u"]), (k, kk), ((k,), (kk,)), dtype)
    s = Array(inner, (kk,), ((kk,),), real)
    vt = Array(_view(f"{name}-Vt", (1, 1), inner, keys["vt"]), (kk, n), ((kk,), (n,)), dtype)
    return u, s, vt


def svd(a: Any, full_matrices: bool = False, compute_uv: bool = True) -> Any:
    """Singular value decomposition ``a = u @ diag(s) @ vt`` of a tall-skinny (or short-fat)
    matrix, as ``numpy.linalg.svd(a, full_matrices=False)``: by TSQR, then the SVD of the
    small R. The smaller dimension must fit in one block (at most 20000); for matrices
    large in both dimensions use :func:`svd_compressed`. Singular vectors match NumPy's up
    to the sign of each pair (u_i, v_i).

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(2).random((50, 4))
    >>> u, s, vt = tg.linalg.svd(tg.from_numpy(m, chunks=(20, 4)))
    >>> bool(np.allclose(s.compute(), np.linalg.svd(m, compute_uv=False)))
    True
    """
    if full_matrices:
        raise ValueError("svd: full_matrices=True is not supported for blocked arrays (the "
                         "full U of a tall matrix is m x m); use full_matrices=False")
    a = _matrix(a, "svd")
    m, n = a.shape
    if min(m, n) > 20000:
        raise ValueError(f"svd: both dimensions of the {m} x {n} matrix are large; the "
                         "blocked SVD needs a tall-skinny or short-fat matrix (the smaller "
                         "dimension at most 20000): use svd_compressed(a, k) for the "
                         "leading k singular triplets")
    if m < n:  # short-fat: the SVD of the conjugate transpose
        res = svd(a.conj().T, compute_uv=compute_uv)
        if not compute_uv:
            return res
        u, s, vt = res
        return vt.conj().T, s, u.conj().T
    q, r = tsqr(a)
    name = f"svd-{tokenize('svd', a)}"
    ur, s, vt = _small_factors(r, name)
    if not compute_uv:
        return s
    return q @ ur, s, vt


def svd_compressed(a: Any, k: int, n_power_iter: int = 2, oversample: int = 10,
                   seed: Any = None, compute_uv: bool = True) -> Any:
    """The leading ``k`` singular triplets of a matrix of any shape by randomized SVD: a
    Gaussian sketch ``a @ omega`` with ``k + oversample`` columns, ``n_power_iter`` power
    iterations (each re-orthonormalised by TSQR), and the exact SVD of the small projection.
    Returns ``u`` (m x k), ``s`` (k,) and ``vt`` (k x n), or ``s`` with
    ``compute_uv=False``. ``seed`` makes the sketch reproducible.

    >>> import numpy as np, tilegraph as tg
    >>> rng = np.random.default_rng(3)
    >>> m = rng.random((60, 5)) @ rng.random((5, 40))  # rank 5
    >>> s = tg.linalg.svd_compressed(tg.from_numpy(m, chunks=20), 5, seed=0,
    ...                              compute_uv=False)
    >>> bool(np.allclose(s.compute(), np.linalg.svd(m, compute_uv=False)[:5]))
    True
    """
    from tilegraph.array.random import normal

    a = _matrix(a, "svd_compressed")
    m, n = a.shape
    for label, value, low in (("k", k, 1), ("n_power_iter", n_power_iter, 0),
                              ("oversample", oversample, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"svd_compressed: {label} must be an int >= {low}, got {value!r}")
    if k > min(m, n):
        raise ValueError(f"svd_compressed: k={k} is more than min(m, n) = {min(m, n)} for a "
                         f"matrix of shape {a.shape}")
    width = min(k + oversample, min(m, n))
    omega = normal(size=(n, width), chunks=(a.chunks[1], width), seed=seed)
    if a.dtype != omega.dtype:
        omega = omega.astype(a.dtype)
    y = a @ omega
    q, _ = tsqr(y)
    for _ in range(n_power_iter):
        z, _ = tsqr(a.conj().T @ q)
        q, _ = tsqr(a @ z)
    b = q.conj().T @ a  # width x n, short-fat
    ub, s, vt = svd(b, compute_uv=True)
    if not compute_uv:
        return s[:k]
    u = q @ ub
    return u[:, :k], s[:k], vt[:k]


# -- least squares and norms ------------------------------------------------------------------


def _lstsq_small(r: np.ndarray, qtb: np.ndarray, rcond: float | None,
                 shape: tuple[int, int]) -> tuple[np.ndarray, int, np.ndarray]:
    """Minimum-norm solution of ``r @ x = qtb`` by the SVD of ``r``: (x, rank, s)."""
    u, s, vt = np.linalg.svd(r, full_matrices=False)
    if rcond is None:
        rcond = np.finfo(s.dtype if s.size else np.float64).eps * max(shape)
    cutoff = rcond * (s[0] if s.size else 0.0)
    keep = s > cutoff
    rank = int(keep.sum())
    inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
    x = vt.conj().T @ (inv[:, None] * (u.conj().T @ qtb))
    return x, rank, s


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

    a = _matrix(a, "lstsq")
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
    dtype = np.result_type(a.dtype, _float_dtype(bb.dtype, "lstsq"))
    a = a.astype(dtype) if a.dtype != dtype else a
    bb = bb.astype(dtype) if bb.dtype != dtype else bb
    q, r = tsqr(a)
    if bb.chunks[0] != q.chunks[0]:
        bb = bb.rechunk((q.chunks[0], bb.chunks[1]))
    qtb = (q.conj().T @ bb).rechunk((n, bb.shape[1]))
    name = f"lstsq-{tokenize('lstsq', a, bb, rcond)}"
    nrhs = bb.shape[1]
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    keys = np.empty((1, 1), dtype=object)
    keys[0, 0] = (f"{name}-x",)
    rank_key = np.empty((), dtype=object)
    rank_key[()] = (f"{name}-rank",)
    s_key = np.empty((1,), dtype=object)
    s_key[0] = (f"{name}-s",)

    def emit(builder: GraphBuilder) -> None:
        solved = (f"{name}-solve",)
        builder.add(solved, _lstsq_small, deps=[r.blocks.key((0, 0)), qtb.blocks.key((0, 0))],
                    args=(Dep(0), Dep(1), rcond, (m, n)), kind="svd", name="lstsq",
                    coords=(0, 0))
        for j, key in enumerate((keys[0, 0], rank_key[()], s_key[0])):
            builder.add(key, _pick, deps=[solved], args=(Dep(0), j), kind="getitem",
                        name="lstsq", coords=(0, 0))

    inner = Blocks(name, (1, 1), [r.blocks, qtb.blocks], emit, keys=keys, ntasks=4)
    x = Array(inner, (n, nrhs), ((n,), (nrhs,)), dtype)
    rank = Array(_view(f"{name}-rk", (), inner, rank_key), (), (), np.int64)
    s = Array(_view(f"{name}-sv", (1,), inner, s_key), (n,), ((n,),), real)
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
    norms ``'fro'``, ``'nuc'``, 1, -1, inf, -inf, 2 and -2 (the last three from the
    singular values, so one dimension must fit in one block, as for :func:`svd`).

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
    elif ord in (2, -2, "nuc"):
        if x.ndim != 2:
            raise ValueError("norm: ord 2, -2 and 'nuc' are supported for 2-D arrays only")
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


# -- LU with partial pivoting -----------------------------------------------------------------


def _panel_lu(*blocks: np.ndarray, where: Any, check: bool) -> tuple[np.ndarray, np.ndarray]:
    """LU with partial pivoting of a column panel (its blocks stacked): the packed factors
    and the permutation ``perm`` of the panel's rows (``panel[perm] = L @ U``)."""
    import warnings

    import scipy.linalg

    panel = np.concatenate(blocks, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        lu_, piv = scipy.linalg.lu_factor(panel, check_finite=False)
    width = panel.shape[1]
    if check:
        diag = np.diagonal(lu_)[:width]
        zero = np.flatnonzero(diag == 0)
        if zero.size:
            raise LinAlgError(f"singular matrix: zero pivot in diagonal block {where} "
                              f"(column {int(zero[0])} of the block)")
    perm = np.arange(panel.shape[0])
    for j, p in enumerate(piv.tolist()):
        perm[j], perm[p] = perm[p], perm[j]
    return lu_, perm


def _panel_l(pair: tuple, start: int, stop: int, diagonal: bool) -> np.ndarray:
    """Rows ``start:stop`` of the panel's L (unit lower triangular on the diagonal block)."""
    lu_ = pair[0][start:stop]
    if not diagonal:
        return lu_.copy()
    out = np.tril(lu_, -1)
    np.fill_diagonal(out, 1)
    return out


def _panel_u(pair: tuple, width: int) -> np.ndarray:
    return np.triu(pair[0][:width])


def _permuted(pair: tuple, *blocks: np.ndarray) -> np.ndarray:
    """The column segment (blocks stacked) with the panel's row permutation applied."""
    return np.concatenate(blocks, axis=0)[pair[1]]


def _next_order(rows: np.ndarray, pair: tuple, offset: int) -> np.ndarray:
    out = rows.copy()
    out[offset:] = rows[offset:][pair[1]]
    return out


def _inverse_perm(rows: np.ndarray) -> np.ndarray:
    inv = np.empty_like(rows)
    inv[rows] = np.arange(len(rows))
    return inv


def _perm_matrix_block(pi: np.ndarray, r0: int, r1: int, c0: int, c1: int,
                       dtype: np.dtype) -> np.ndarray:
    out = np.zeros((r1 - r0, c1 - c0), dtype=dtype)
    sel = pi[r0:r1]
    hit = (sel >= c0) & (sel < c1)
    out[np.flatnonzero(hit), sel[hit] - c0] = 1
    return out


class _LU:
    """The tasks of one blocked LU: keys of L, U, the row order, and of the panels."""

    def __init__(self, a: Array, check: bool):
        self.a = a
        self.check = check
        self.chunks = a.chunks[0]
        self.nb = len(self.chunks)
        self.dtype = a.dtype
        self.name = f"lu-{tokenize('lu', a, check)}"
        nb, name = self.nb, self.name
        self.lkeys = np.empty((nb, nb), dtype=object)
        self.ukeys = np.empty((nb, nb), dtype=object)
        for i in range(nb):
            for j in range(nb):
                self.lkeys[i, j] = (f"{name}-Lz", i, j) if j > i else (f"{name}-Lf", i, j)
                self.ukeys[i, j] = (f"{name}-Uz", i, j) if j < i else (f"{name}-U", i, j)
        self.order_key = (f"{name}-rows",)

    def emit(self, builder: GraphBuilder) -> None:
        add = builder.add
        nb, name, chunks, dtype = self.nb, self.name, self.chunks, self.dtype
        offs = np.cumsum([0, *chunks]).tolist()
        akey = self.a.blocks.key
        cur = {(i, j): akey((i, j)) for i in range(nb) for j in range(nb)}
        lcur: dict[tuple[int, int], Hashable] = {}
        order = (f"{name}-order", 0)
        add(order, np.arange, args=(offs[-1],), kind="creation", name="arange", coords=(0,))
        for k in range(nb):
            bk = chunks[k]
            below = range(k, nb)
            height = offs[-1] - offs[k]
            panel = (f"{name}-panel", k)
            add(panel, _panel_lu, deps=[cur[i, k] for i in below],
                kwargs={"where": (k, k), "check": self.check}, kind="lu", name="getrf",
                coords=(k, k), nbytes=_nbytes(dtype, height, bk),
                cost=height * bk * bk - bk**3 / 3)
            for i in below:
                key = (f"{name}-L", i, k)
                add(key, _panel_l, deps=[panel],
                    args=(Dep(0), offs[i] - offs[k], offs[i + 1] - offs[k], i == k),
                    kind="getitem", name="L", coords=(i, k),
                    nbytes=_nbytes(dtype, chunks[i], bk))
                lcur[i, k] = key
            add(self.ukeys[k, k], _panel_u, deps=[panel], args=(Dep(0), bk), kind="getitem",
                name="U", coords=(k, k), nbytes=_nbytes(dtype, bk, bk))
            nxt = (f"{name}-order", k + 1)
            add(nxt, _next_order, deps=[order, panel], args=(Dep(0), Dep(1), offs[k]),
                kind="lu", name="pivots", coords=(0,))
            order = nxt
            for j in range(nb):
                if j == k:
                    continue
                seg = (f"{name}-swap", k, j)
                deps = [panel] + ([cur[i, j] for i in below] if j > k
                                  else [lcur[i, j] for i in below])
                add(seg, _permuted, deps=deps, kind="lu", name="laswp", coords=(k, j),
                    nbytes=_nbytes(dtype, height, chunks[j]))
                for i in below:
                    rows = (f"{name}-rows", k, i, j)
                    add(rows, _rows, deps=[seg],
                        args=(Dep(0), offs[i] - offs[k], offs[i + 1] - offs[k]),
                        kind="getitem", name="rows", coords=(i, j))
                    if j < k:
                        lcur[i, j] = rows
                    else:
                        cur[i, j] = rows
                if j > k:
                    ukj = self.ukeys[k, j]
                    add(ukj, trsm, deps=[lcur[k, k], cur[k, j]],
                        kwargs={"side": "L", "lower": True, "unit": True, "copy": True},
                        kind="trsm", name="trsm", coords=(k, j),
                        nbytes=_nbytes(dtype, bk, chunks[j]), cost=bk * bk * chunks[j])
                    for i in range(k + 1, nb):
                        key = (f"{name}-update", i, j, k)
                        add(key, gemm_update, deps=[cur[i, j], lcur[i, k], ukj],
                            kwargs={"copy": True}, kind="gemm", name="gemm", coords=(i, j),
                            nbytes=_nbytes(dtype, chunks[i], chunks[j]),
                            cost=2 * chunks[i] * chunks[j] * bk)
                        cur[i, j] = key
        add(self.order_key, _identity, deps=[order], kind="getitem", name="order",
            coords=(0,))
        for i in range(nb):
            for j in range(nb):
                if j > i:
                    add(self.lkeys[i, j], _zeros, args=((chunks[i], chunks[j]), dtype),
                        kind="creation", name="zeros", coords=(i, j))
                else:
                    add(self.lkeys[i, j], _identity, deps=[lcur[i, j]], kind="getitem",
                        name="L", coords=(i, j))
                if j < i:
                    add(self.ukeys[i, j], _zeros, args=((chunks[i], chunks[j]), dtype),
                        kind="creation", name="zeros", coords=(i, j))

    def blocks(self) -> tuple[Blocks, Blocks, Blocks]:
        nb = self.nb
        lkeys = self.lkeys
        okeys = np.empty((1,), dtype=object)
        okeys[0] = self.order_key
        inner = Blocks(self.name, (nb, nb), [self.a.blocks], self.emit, keys=self.ukeys,
                       ntasks=lambda: _count(self.emit))
        lview = _view(f"{self.name}-Lv", (nb, nb), inner, lkeys)
        order = _view(f"{self.name}-ord", (1,), inner, okeys)
        return inner, lview, order


def _identity(x: Any) -> Any:
    return x


def _lu_arrays(a: Array, check: bool) -> tuple[Array, Array, Array]:
    """(order, L, U): ``a[order] = L @ U``."""
    plan = _LU(a, check)
    ublocks, lblocks, oblocks = plan.blocks()
    chunks = (a.chunks[0], a.chunks[0])
    n = a.shape[0]
    u = Array(ublocks, a.shape, chunks, a.dtype)
    l_ = Array(lblocks, a.shape, chunks, a.dtype)
    order = Array(oblocks, (n,), ((n,),), np.int64)
    return order, l_, u


def lu(a: Any, permute_l: bool = False, p_indices: bool = False) -> Any:
    """LU factorisation with partial pivoting of a square matrix, as ``scipy.linalg.lu``:
    ``a = p @ l @ u`` with ``l`` unit lower and ``u`` upper triangular; ``p_indices=True``
    gives the row indices ``p`` with ``a = l[p] @ u``; ``permute_l=True`` gives
    ``(p @ l, u)``. Pivots are searched down the whole column (each column panel is
    factored at once, then its row swaps are applied to the other columns), so the
    factors are those of LAPACK's partial pivoting.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.random.default_rng(5).random((5, 5))
    >>> p, l, u = tg.compute(*tg.linalg.lu(tg.from_numpy(m, chunks=2)))
    >>> bool(np.allclose(p @ l @ u, m))
    True
    """
    from tilegraph.array.elementwise import map_blocks

    a = _square(a, "lu")
    order, l_, u = _lu_arrays(a, check=False)
    pi = map_blocks(_inverse_perm, order, dtype=np.int64)
    if p_indices and not permute_l:
        return pi, l_, u
    p = _perm_matrix(pi, a.chunks[0], a.dtype)
    if permute_l:
        return p @ l_, u
    return p, l_, u


def _perm_matrix(pi: Array, chunks: tuple[int, ...], dtype: np.dtype) -> Array:
    """The permutation matrix with ones at ``(i, pi[i])``, block by block."""
    nb = len(chunks)
    offs = np.cumsum([0, *chunks]).tolist()
    name = f"perm-{tokenize('perm', pi, chunks, dtype)}"
    pk = pi.blocks.key((0,))

    def emit(builder: GraphBuilder) -> None:
        for i in range(nb):
            for j in range(nb):
                builder.add((name, i, j), _perm_matrix_block, deps=[pk],
                            args=(Dep(0), offs[i], offs[i + 1], offs[j], offs[j + 1], dtype),
                            kind="creation", name="perm", coords=(i, j),
                            nbytes=_nbytes(dtype, chunks[i], chunks[j]))

    blocks = Blocks(name, (nb, nb), [pi.blocks], emit, ntasks=nb * nb)
    return Array(blocks, (offs[-1], offs[-1]), (chunks, chunks), dtype)


def _gather_rows(order: np.ndarray, *blocks: np.ndarray) -> np.ndarray:
    return np.concatenate(blocks, axis=0)[order]


def _take_rows(b: Array, order: Array) -> Array:
    """``b[order]`` for a data-dependent row order (one task per column of blocks)."""
    rows, cols = b.chunks
    nb, nc = len(rows), len(cols)
    offs = np.cumsum([0, *rows]).tolist()
    name = f"take-{tokenize('take_rows', b, order)}"
    ok = order.blocks.key((0,))
    keys = np.empty((nb, nc), dtype=object)
    for i in range(nb):
        for j in range(nc):
            keys[i, j] = (f"{name}-rows", i, j)

    def emit(builder: GraphBuilder) -> None:
        for j in range(nc):
            col = (name, j)
            builder.add(col, _gather_rows, deps=[ok] + [b.blocks.key((i, j)) for i in range(nb)],
                        kind="lu", name="laswp", coords=(0, j),
                        nbytes=_nbytes(b.dtype, offs[-1], cols[j]))
            for i in range(nb):
                builder.add(keys[i, j], _rows, deps=[col],
                            args=(Dep(0), offs[i], offs[i + 1]), kind="getitem",
                            name="rows", coords=(i, j))

    blocks = Blocks(name, (nb, nc), [b.blocks, order.blocks], emit, keys=keys,
                    ntasks=nc * (nb + 1))
    return Array(blocks, b.shape, b.chunks, b.dtype)


def solve(a: Any, b: Any, assume_a: str = "gen") -> Array:
    """Solve ``a @ x = b`` for a square ``a``, as ``scipy.linalg.solve``: by LU with
    partial pivoting (``assume_a="gen"``, also used for ``"sym"`` and ``"her"``) or by
    Cholesky (``assume_a="pos"``). A singular matrix raises :class:`LinAlgError` naming
    the diagonal block where a zero pivot was met; a matrix that is not positive definite
    with ``"pos"`` names the block where Cholesky failed.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.array([[3.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 2.0, 5.0]])
    >>> x = tg.linalg.solve(tg.from_numpy(m, chunks=2), np.ones(3))
    >>> bool(np.allclose(m @ x.compute(), 1))
    True
    """
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', "
                         f"got {assume_a!r}")
    a = _square(a, "solve")
    b = asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"solve: b of shape {b.shape} does not match a of shape {a.shape} "
                         f"(b needs {a.shape[0]} rows)")
    vector = b.ndim == 1
    bb = b[:, None] if vector else b
    dtype = np.result_type(a.dtype, _float_dtype(bb.dtype, "solve"))
    a = a.astype(dtype) if a.dtype != dtype else a
    bb = bb.astype(dtype) if bb.dtype != dtype else bb
    if bb.chunks[0] != a.chunks[0]:
        bb = bb.rechunk((a.chunks[0], bb.chunks[1]))
    if assume_a == "pos":
        low = _cholesky(a)
        y = _solve_triangular(low, bb, True, "N", False)
        x = _solve_triangular(low, y, True, "C", False)
    else:
        order, l_, u = _lu_arrays(a, check=True)
        y = _solve_triangular(l_, _take_rows(bb, order), True, "N", True)
        x = _solve_triangular(u, y, False, "N", False)
    return x[:, 0] if vector else x


def inv(a: Any) -> Array:
    """The inverse of a square matrix (LU with partial pivoting, then two triangular solves
    against the identity); a singular matrix raises :class:`LinAlgError`.

    >>> import numpy as np, tilegraph as tg
    >>> m = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> bool(np.allclose(tg.linalg.inv(tg.from_numpy(m, chunks=1)).compute(), np.linalg.inv(m)))
    True
    """
    from tilegraph.array.creation import eye

    a = _square(a, "inv")
    return solve(a, eye(a.shape[0], dtype=a.dtype, chunks=a.chunks))


def _diag_logdet(u: np.ndarray) -> np.ndarray:
    d = np.diagonal(u)
    absd = np.abs(d)
    with np.errstate(divide="ignore"):
        logabs = np.log(absd).sum()
    phase = np.prod(np.where(absd == 0, 0, d / np.where(absd == 0, 1, absd)))
    return np.array([phase, logabs], dtype=np.result_type(u.dtype, np.float64))


def _combine_logdet(order: np.ndarray, *parts: np.ndarray) -> np.ndarray:
    phase = np.prod([p[0] for p in parts]) if parts else 1.0
    logabs = float(np.sum([p[1].real for p in parts]))
    # the parity of the row order
    seen = np.zeros(len(order), dtype=bool)
    swaps = 0
    for start in range(len(order)):
        if seen[start]:
            continue
        length = 0
        j = start
        while not seen[j]:
            seen[j] = True
            j = order[j]
            length += 1
        swaps += length - 1
    sign = phase * (-1 if swaps % 2 else 1)
    if logabs == -np.inf:
        sign = sign * 0
    return np.array([sign, logabs])


def slogdet(a: Any) -> tuple[Array, Array]:
    """``(sign, logabsdet)`` of a square matrix, as ``numpy.linalg.slogdet``, from the blocked
    LU (a singular matrix gives sign 0 and logabsdet -inf, as NumPy does).

    >>> import numpy as np, tilegraph as tg
    >>> m = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> sign, logdet = tg.linalg.slogdet(tg.from_numpy(m, chunks=1))
    >>> float(sign.compute()), bool(np.isclose(logdet.compute(), np.log(2.0)))
    (-1.0, True)
    """
    a = _square(a, "slogdet")
    order, _, u = _lu_arrays(a, check=False)
    nb = u.numblocks[0]
    name = f"slogdet-{tokenize('slogdet', a)}"
    real = np.dtype(a.dtype.char.lower()) if a.dtype.kind == "c" else a.dtype
    keys = {part: np.empty((), dtype=object) for part in ("sign", "log")}
    keys["sign"][()] = (f"{name}-sign",)
    keys["log"][()] = (f"{name}-log",)

    def emit(builder: GraphBuilder) -> None:
        parts = []
        for k in range(nb):
            key = (f"{name}-diag", k)
            builder.add(key, _diag_logdet, deps=[u.blocks.key((k, k))], kind="partial",
                        name="logdet", coords=(k, k))
            parts.append(key)
        both = (f"{name}-both",)
        builder.add(both, _combine_logdet, deps=[order.blocks.key((0,)), *parts],
                    kind="aggregate", name="slogdet", coords=(0, 0))
        builder.add(keys["sign"][()], _sign_of, deps=[both], args=(Dep(0), a.dtype),
                    kind="getitem", name="sign", coords=(0, 0))
        builder.add(keys["log"][()], _log_of, deps=[both], args=(Dep(0), real),
                    kind="getitem", name="logabsdet", coords=(0, 0))

    inner = Blocks(name, (), [u.blocks, order.blocks], emit, keys=keys["log"],
                   ntasks=nb + 3)
    sign = Array(_view(f"{name}-s", (), inner, keys["sign"]), (), (), a.dtype)
    logdet = Array(inner, (), (), real)
    return sign, logdet


def _sign_of(pair: np.ndarray, dtype: np.dtype) -> np.ndarray:
    value = pair[0]
    return np.asarray(value if dtype.kind == "c" else value.real, dtype=dtype)


def _log_of(pair: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.asarray(pair[1].real, dtype=dtype)


def det(a: Any) -> Array:
    """The determinant of a square matrix, as ``numpy.linalg.det`` (``sign * exp(logdet)``
    of :func:`slogdet`).

    >>> import numpy as np, tilegraph as tg
    >>> float(tg.linalg.det(tg.from_numpy(np.array([[1.0, 2.0], [3.0, 4.0]]), chunks=1))
    ...       .compute())
    -2.0000000000000004
    """
    sign, logdet = slogdet(a)
    return sign * np.exp(logdet)
