"""Blocked LU with partial pivoting, and what is computed from it: :func:`lu`,
:func:`solve` (by LU, or by Cholesky with ``assume_a="pos"``), :func:`inv`,
:func:`slogdet` and :func:`det` (all in ``tilegraph.linalg``, importable from
:mod:`tilegraph.array.linalg`).

The factorisation is a loop program over block coordinates recorded by a task grid
(:func:`lu_program`): each column panel is factored at once (so the pivots are searched
down the whole column, as LAPACK's partial pivoting), its row swaps are applied to the
other columns, and the trailing blocks are updated by gemm.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.algebra import linalg_kernels as kern
from tilegraph.algebra.grid import Kernel, TaskGrid, task_grid
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.linalg_base import (
    ROWS,
    as_square,
    block_offsets,
    float_dtype,
    real_dtype,
    zero_tile,
)
from tilegraph.array.lp_arrays import cholesky as lp_cholesky
from tilegraph.array.lp_arrays import triangular_solve
from tilegraph.graph.kinds import lu_flops, matmul_flops, trsm_flops
from tilegraph.graph.taskgraph import Dep

# -- LU with partial pivoting -----------------------------------------------------------------
GETRF = Kernel(kern.panel_lu, "lu", "getrf")
PANEL_L = Kernel(kern.panel_l, "getitem", "L")
PANEL_U = Kernel(kern.panel_u, "getitem", "U")
PIVOTS = Kernel(kern.next_order, "lu", "pivots")
LASWP = Kernel(kern.permuted, "lu", "laswp")
TRSM_UNIT = Kernel(kern.trsm, "trsm", "trsm",
                   {"side": "L", "lower": True, "unit": True, "copy": True})
GEMM_COPY = Kernel(kern.gemm_update, "gemm", "gemm", {"copy": True})


def lu_program(chunks: tuple[int, ...], dtype: np.dtype, check: bool):
    """The loop program of blocked LU with partial pivoting. Work tiles: ``("A", i, j)``
    (start as the matrix's blocks), ``("Lw", i, j)`` (blocks of L whose rows later panels
    still swap) and the row order ``("ord", 0)``; output tiles ``("L", i, j)``,
    ``("U", i, j)`` and ``("order", 0)``. At step k the column panel below the diagonal is
    factored at once (getrf), its row swaps are applied to the other columns (laswp), the
    blocks of U right of the diagonal are solved (trsm) and the trailing blocks updated
    (gemm). Row block k of L is final after step k."""
    nb = len(chunks)
    isz = dtype.itemsize
    offs = block_offsets(chunks)

    def order_tile(k: int) -> tuple:
        return ("order", 0) if k == nb - 1 else ("ord", 0)

    def program(g: TaskGrid) -> None:
        call = g.call
        call(Kernel(np.arange, "creation", "arange"), order_tile(-1), args=(offs[-1],))
        for k in range(nb):
            bk = chunks[k]
            below = range(k, nb)
            height = offs[-1] - offs[k]
            panel = ("panel", k, k)
            call(GETRF, panel, [("A", i, k) for i in below],
                 kwargs={"where": (k, k), "check": check},
                 flops=lu_flops(height, bk), nbytes=isz * height * bk)
            for i in below:
                call(PANEL_L, ("L" if i == k else "Lw", i, k), [panel],
                     args=(Dep(0), offs[i] - offs[k], offs[i + 1] - offs[k], i == k),
                     nbytes=isz * chunks[i] * bk)
            call(PANEL_U, ("U", k, k), [panel], args=(Dep(0), bk), nbytes=isz * bk * bk)
            call(PIVOTS, order_tile(k), [("ord", 0), panel], args=(Dep(0), Dep(1), offs[k]))
            for j in range(nb):
                if j == k:
                    continue
                work = "A" if j > k else "Lw"  # right of the panel: A; left of it: L
                seg = ("swap", k, j)
                call(LASWP, seg, [panel, *[(work, i, j) for i in below]],
                     nbytes=isz * height * chunks[j])
                for i in below:
                    out = ("L", i, j) if j < k and i == k else (work, i, j)
                    call(ROWS, out, [seg],
                         args=(Dep(0), offs[i] - offs[k], offs[i + 1] - offs[k]))
                if j > k:
                    call(TRSM_UNIT, ("U", k, j), [("L", k, k), ("A", k, j)],
                         flops=trsm_flops(chunks[j], bk), nbytes=isz * bk * chunks[j])
                    for i in range(k + 1, nb):
                        call(GEMM_COPY, ("A", i, j), [("A", i, j), ("Lw", i, k), ("U", k, j)],
                             flops=matmul_flops(chunks[i], bk, chunks[j]),
                             nbytes=isz * chunks[i] * chunks[j])
        for i in range(nb):
            for j in range(nb):
                if j != i:
                    zero_tile(g, ("L", i, j) if j > i else ("U", i, j), chunks[i],
                               chunks[j], dtype)

    return program


def _lu_arrays(a: Array, check: bool) -> tuple[Array, Array, Array]:
    """(order, L, U): ``a[order] = L @ U``."""
    chunks = a.chunks[0]
    nb = len(chunks)
    u, low, order = task_grid(f"lu-{tokenize('lu', a, check)}",
                              lu_program(chunks, a.dtype, check),
                              [("U", (nb, nb)), ("L", (nb, nb)), ("order", (1,))],
                              sources={"A": a.collection})
    n = a.shape[0]
    return (Array(order, (n,), ((n,),), np.int64),
            Array(low, a.shape, (chunks, chunks), a.dtype),
            Array(u, a.shape, (chunks, chunks), a.dtype))


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

    a = as_square(a, "lu")
    order, l_, u = _lu_arrays(a, check=False)
    pi = map_blocks(kern.inverse_perm, order, dtype=np.int64)
    if p_indices and not permute_l:
        return pi, l_, u
    p = _perm_matrix(pi, a.chunks[0], a.dtype)
    if permute_l:
        return p @ l_, u
    return p, l_, u


def _perm_matrix(pi: Array, chunks: tuple[int, ...], dtype: np.dtype) -> Array:
    """The permutation matrix with ones at ``(i, pi[i])``, block by block."""
    nb = len(chunks)
    offs = block_offsets(chunks)
    perm = Kernel(kern.perm_matrix_block, "creation", "perm")

    def program(g: TaskGrid) -> None:
        for i in range(nb):
            for j in range(nb):
                g.call(perm, ("P", i, j), [("pi", 0)],
                       args=(Dep(0), offs[i], offs[i + 1], offs[j], offs[j + 1], dtype),
                       nbytes=dtype.itemsize * chunks[i] * chunks[j])

    (p,) = task_grid(f"perm-{tokenize('perm', pi, chunks, dtype)}", program,
                     [("P", (nb, nb))], sources={"pi": pi.collection}, ntasks=nb * nb)
    return Array(p, (offs[-1], offs[-1]), (chunks, chunks), dtype)


def _take_rows(b: Array, order: Array) -> Array:
    """``b[order]`` for a data-dependent row order (one task per column of blocks)."""
    rows, cols = b.chunks
    nb, nc = len(rows), len(cols)
    offs = block_offsets(rows)
    gather = Kernel(kern.gather_rows, "lu", "laswp")

    def program(g: TaskGrid) -> None:
        for j in range(nc):
            g.call(gather, ("col", 0, j), [("order", 0), *(("B", i, j) for i in range(nb))],
                   nbytes=b.dtype.itemsize * offs[-1] * cols[j])
            for i in range(nb):
                g.call(ROWS, ("X", i, j), [("col", 0, j)], args=(Dep(0), offs[i], offs[i + 1]))

    (x,) = task_grid(f"take-{tokenize('take_rows', b, order)}", program, [("X", (nb, nc))],
                     sources={"B": b.collection, "order": order.collection}, ntasks=nc * (nb + 1))
    return Array(x, b.shape, b.chunks, b.dtype)


def solve(a: Any, b: Any, assume_a: str = "gen", sym_pos: bool | None = None) -> Array:
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
    if sym_pos:  # dask's (and old SciPy's) name for assume_a="pos"
        assume_a = "pos"
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: assume_a must be 'gen', 'sym', 'her' or 'pos', "
                         f"got {assume_a!r}")
    a = as_square(a, "solve")
    b = asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"solve: b of shape {b.shape} does not match a of shape {a.shape} "
                         f"(b needs {a.shape[0]} rows)")
    vector = b.ndim == 1
    bb = b[:, None] if vector else b
    dtype = np.result_type(a.dtype, float_dtype(bb.dtype, "solve"))
    a = a.astype(dtype) if a.dtype != dtype else a
    bb = bb.astype(dtype) if bb.dtype != dtype else bb
    if bb.chunks[0] != a.chunks[0]:
        bb = bb.rechunk((a.chunks[0], bb.chunks[1]))
    if assume_a == "pos":
        low = lp_cholesky(a)
        y = triangular_solve(low, bb, True, "N", False)
        x = triangular_solve(low, y, True, "C", False)
    else:
        order, l_, u = _lu_arrays(a, check=True)
        y = triangular_solve(l_, _take_rows(bb, order), True, "N", True)
        x = triangular_solve(u, y, False, "N", False)
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

    a = as_square(a, "inv")
    return solve(a, eye(a.shape[0], dtype=a.dtype, chunks=a.chunks))


def slogdet(a: Any) -> tuple[Array, Array]:
    """``(sign, logabsdet)`` of a square matrix, as ``numpy.linalg.slogdet``, from the blocked
    LU (a singular matrix gives sign 0 and logabsdet -inf, as NumPy does).

    >>> import numpy as np, tilegraph as tg
    >>> m = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> sign, logdet = tg.linalg.slogdet(tg.from_numpy(m, chunks=1))
    >>> float(sign.compute()), bool(np.isclose(logdet.compute(), np.log(2.0)))
    (-1.0, True)
    """
    a = as_square(a, "slogdet")
    order, _, u = _lu_arrays(a, check=False)
    nb = u.numblocks[0]
    real = real_dtype(a.dtype)

    def program(g: TaskGrid) -> None:
        diag = Kernel(kern.diag_logdet, "partial", "logdet")
        for k in range(nb):
            g.call(diag, ("diag", k, k), [("U", k, k)])
        g.call(Kernel(kern.combine_logdet, "aggregate", "slogdet"), ("both", 0, 0),
               [("order", 0), *(("diag", k, k) for k in range(nb))])
        g.call(Kernel(kern.sign_of, "getitem", "sign"), ("sign",), [("both", 0, 0)],
               args=(Dep(0), a.dtype), coords=(0, 0))
        g.call(Kernel(kern.log_of, "getitem", "logabsdet"), ("log",), [("both", 0, 0)],
               args=(Dep(0), real), coords=(0, 0))

    logdet, sign = task_grid(f"slogdet-{tokenize('slogdet', a)}", program,
                             [("log", ()), ("sign", ())],
                             sources={"U": u.collection, "order": order.collection}, ntasks=nb + 3)
    return Array(sign, (), (), a.dtype), Array(logdet, (), (), real)


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
