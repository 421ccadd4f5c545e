"""The kernels LambdaPACK programs call, by name.

A kernel is a block function plus what the planner needs to know of it: its op ``kind`` (a
row of :mod:`tilegraph.graph.kinds`: placement, fusion and memory rules), its flops from the
shapes of the tiles it reads, and, if it may write over one of the tiles it reads, which one
(``overwrites``: its position among the reads; the function then takes ``copy=``, and the
lowering passes ``copy=False`` only when no other task reads that tile).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.algebra import linalg_kernels as kern
from tilegraph.graph.kinds import (
    kind_info,
    lu_flops,
    matmul_flops,
    potrf_flops,
    qr_flops,
    syrk_flops,
    trsm_flops,
)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class LPKernel:
    """A kernel: ``func(*tiles, **kwargs)``; ``flops(*shapes)`` of the tiles read (or None);
    ``overwrites``: see the module docstring."""

    name: str
    func: Callable
    kind: str
    flops: Callable[..., float] | None = None
    overwrites: int | None = None
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise TypeError(f"kernel {self.name!r}: {self.func!r} is not callable")
        kind_info(self.kind)  # an unknown kind is an error here, not when planning


KERNELS: dict[str, LPKernel] = {}


def register_kernel(kernel: LPKernel) -> LPKernel:
    """Make ``kernel`` callable by name from every program."""
    if not isinstance(kernel, LPKernel):
        raise TypeError(f"register_kernel takes an LPKernel, got {type(kernel).__name__}")
    KERNELS[kernel.name] = kernel
    return kernel


# -- the block kernels of the library ---------------------------------------------------------


def _trsm_right(l_kk: np.ndarray, s: np.ndarray, copy: bool = True) -> np.ndarray:
    """``s @ inv(l_kk)^H``: a block of Cholesky's factor below the diagonal."""
    return kern.trsm(l_kk, s, side="R", lower=True, trans="C", copy=copy)


_TRANS = "NTC"


def _trsm_left(t: np.ndarray, b: np.ndarray, lower: int = 1, trans: int = 0, unit: int = 0,
               copy: bool = True) -> np.ndarray:
    """``inv(op(t)) @ b`` for a triangular block ``t`` (its ``lower`` or upper triangle;
    ``op`` by ``trans``: 0 none, 1 transpose, 2 conjugate transpose; ``unit``: ones on the
    diagonal, not read)."""
    return kern.trsm(t, b, side="L", lower=bool(lower), trans=_TRANS[trans], unit=bool(unit),
                     copy=copy)


def _syrk_update(c: np.ndarray, a: np.ndarray, copy: bool = True) -> np.ndarray:
    """The lower triangle of ``c - a @ a^H``."""
    return kern.herk_update(c, a, copy=copy)


def _gemm_update(c: np.ndarray, a: np.ndarray, b: np.ndarray, copy: bool = True
                 ) -> np.ndarray:
    """``c - a @ b^H``."""
    return kern.gemm_update(c, a, b, trans_b="C", copy=copy)


def _gemm_sub(c: np.ndarray, a: np.ndarray, b: np.ndarray, trans: int = 0,
              copy: bool = True) -> np.ndarray:
    """``c - op(a) @ b`` (``op`` by ``trans``: 0 none, 1 transpose, 2 conjugate
    transpose)."""
    return kern.gemm_op_a(c, a, b, trans=_TRANS[trans], copy=copy)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b)


def _matmul_acc(c: np.ndarray, a: np.ndarray, b: np.ndarray, copy: bool = True
                ) -> np.ndarray:
    """``c + a @ b``."""
    return kern.gemm_update(c, a, b, alpha=1.0, copy=copy)


def _gram(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b^H``."""
    return np.matmul(a, b.conj().T)


def _gram_acc(c: np.ndarray, a: np.ndarray, b: np.ndarray, copy: bool = True) -> np.ndarray:
    """``c + a @ b^H``."""
    return kern.gemm_update(c, a, b, trans_b="C", alpha=1.0, copy=copy)


def _herk(a: np.ndarray) -> np.ndarray:
    """The lower triangle of ``a @ a^H`` (zeros above)."""
    return np.tril(np.matmul(a, a.conj().T))


def _herk_acc(c: np.ndarray, a: np.ndarray, copy: bool = True) -> np.ndarray:
    """The lower triangle of ``c + a @ a^H`` (the strict upper triangle left as it was)."""
    return kern.herk_update(c, a, alpha=1.0, copy=copy)


def _qr_r(*blocks: np.ndarray) -> np.ndarray:
    """The R factor of the blocks stacked on top of each other (R's rows: at most the
    columns)."""
    stacked = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=0)
    r = np.linalg.qr(stacked, mode="r")
    return np.ascontiguousarray(r)


def _qr_leaf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, R)`` of one row block (reduced)."""
    return np.linalg.qr(a, mode="reduced")


def _qr_node(*children: tuple) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """``(Q, R, offsets)`` of the children's R factors stacked: rows ``offsets[k]`` to
    ``offsets[k + 1]`` of Q belong to child ``k``."""
    rs = [c[1] for c in children]
    q, r = np.linalg.qr(np.concatenate(rs, axis=0), mode="reduced")
    offsets = [0]
    for x in rs:
        offsets.append(offsets[-1] + x.shape[0])
    return q, r, offsets


def _signs(r: np.ndarray) -> np.ndarray:
    d = np.diagonal(r)
    safe = np.where(d == 0, 1, d)
    return (safe / np.abs(safe)).astype(r.dtype)


def _r_top(node: tuple) -> np.ndarray:
    """R of the top node with a non-negative real diagonal."""
    r = node[1]
    return np.ascontiguousarray(_signs(r).conj()[:, None] * r)


def _q_signs(node: tuple) -> np.ndarray:
    """The diagonal matrix that turns the top node's Q into the Q of :func:`_r_top`."""
    return np.diag(_signs(node[1]))


def _q_part(node: tuple, u: np.ndarray, k: int) -> np.ndarray:
    """Child ``k``'s rows of the node's Q, times the node's own factor from above."""
    q, _, offsets = node
    return q[offsets[k]:offsets[k + 1]] @ u


def _q_leaf(leaf: tuple, u: np.ndarray) -> np.ndarray:
    """A block of Q: the leaf's Q times its factor from above."""
    return np.ascontiguousarray(leaf[0] @ u)


# -- tiled Householder QR (the kernels of PLASMA's tile QR, from LAPACK) -----------------------


INNER_BLOCK = 128  # columns per block reflector inside a tile (LAPACK's nb, PLASMA's ib)


def _lapack(name: str, *arrays: np.ndarray) -> Any:
    from scipy.linalg import get_lapack_funcs

    return get_lapack_funcs((name,), arrays)[0]


def _check(info: int, what: str) -> None:
    if info < 0:
        raise ValueError(f"{what}: LAPACK argument {-info} is invalid")


def _adjoint(a: np.ndarray) -> str:
    return "C" if np.iscomplexobj(a) else "T"


def _hh_geqrt(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The QR factorisation of a diagonal tile as LAPACK's ``geqrt`` leaves it:
    ``(reflectors below the diagonal and R on and above it, the block reflector's T)``."""
    m, n = a.shape
    vr, t, info = _lapack("geqrt", a)(max(1, min(m, n, INNER_BLOCK)), a)
    _check(info, "geqrt")
    return vr, t


def _hh_unmqr(e: tuple, c: Any, trans: int = 1) -> np.ndarray:
    """``Q^H c`` (``trans`` 1) or ``Q c`` (0) for the ``Q`` of a diagonal tile's
    :func:`_hh_geqrt` (``c`` a tile, or the pair of :func:`_hh_tsmqr` whose top it is)."""
    vr, t = e
    if isinstance(c, tuple):
        c = c[0]
    k = min(vr.shape)
    side_trans = _adjoint(vr) if trans else "N"
    out, info = _lapack("gemqrt", vr, c)(vr[:, :k], t, c, side="L", trans=side_trans)
    _check(info, "gemqrt")
    return out


def _r_of(prev: tuple) -> np.ndarray:
    """R so far: of a :func:`_hh_geqrt` pair (its upper triangle) or a :func:`_hh_tsqrt`
    triple."""
    if len(prev) == 3:
        return prev[0]
    vr = prev[0]
    n = vr.shape[1]
    return np.triu(vr[:n, :])


def _hh_tsqrt(prev: tuple, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The QR factorisation of R so far stacked on the tile ``b`` below it (``tpqrt``):
    ``(the new R, the reflectors, T)``."""
    r = _r_of(prev)
    n = r.shape[1]
    r2, v, t, info = _lapack("tpqrt", r, b)(0, max(1, min(n, INNER_BLOCK)), r, b)
    _check(info, "tpqrt")
    return r2, v, t


def _hh_tsmqr(f: tuple, top: Any, bottom: Any, trans: int = 1
              ) -> tuple[np.ndarray, np.ndarray]:
    """The pair (top tile, tile below) with ``Q^H`` (``trans`` 1) or ``Q`` (0) of a
    :func:`_hh_tsqrt` applied: ``(new top, new bottom)``. A pair given as ``top`` gives its
    top, as ``bottom`` its bottom (the tiles a previous call made)."""
    _, v, t = f
    if isinstance(top, tuple):
        top = top[0]
    if isinstance(bottom, tuple):
        bottom = bottom[1]
    side_trans = _adjoint(v) if trans else "N"
    k = v.shape[1]  # the reflectors act on the top tile's first k rows (R's rows) only
    head = top[:k] if top.shape[0] > k else top
    # and on the bottom tile's first rows only when they eliminated a triangle (ttqrt)
    low = bottom[:v.shape[0]] if bottom.shape[0] > v.shape[0] else bottom
    a, b, info = _lapack("tpmqrt", v, head, low)(0, v, t, head, low, side="L",
                                                 trans=side_trans)
    _check(info, "tpmqrt")
    if head is not top:
        a = np.concatenate([a, top[k:]], axis=0)
    if low is not bottom:
        b = np.concatenate([b, bottom[v.shape[0]:]], axis=0)
    return a, b


def _hh_ttqrt(prev: tuple, other: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R so far stacked on the R factor of another tile row (``other``: a
    :func:`_hh_geqrt` pair or a :func:`_hh_tsqrt` triple), factored (PLASMA's ttqrt, by
    ``tpqrt``): ``(the new R, the reflectors, T)``; the reflectors reach only the other
    tile row's first rows (its R's)."""
    return _hh_tsqrt(prev, np.ascontiguousarray(_r_final(other)))


def _part0(x: tuple) -> np.ndarray:
    return x[0]


def _part1(x: tuple) -> np.ndarray:
    return x[1]


def _r_final(x: tuple) -> np.ndarray:
    """The R tile of a diagonal tile: upper triangle of a geqrt pair or of a tsqrt R."""
    return np.ascontiguousarray(np.triu(x[0] if len(x) == 3 else x[0][: min(x[0].shape)]))


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _rows_signed(r: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """A tile of R in block row k with its rows scaled so that R's diagonal (``diag``: the
    tile R[k, k]) becomes real and non-negative."""
    return np.ascontiguousarray(_signs(diag).conj()[:, None] * r)


def _cols_signed(q: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """A tile of Q in block column j scaled to match :func:`_rows_signed` (``diag``: the
    tile R[j, j])."""
    return np.ascontiguousarray(q * _signs(diag)[None, :])


# -- reduction to band form (the first stage of numpywren's BDFAC) and the band's SVD ----------


def _top(x: Any) -> np.ndarray:
    return x[0] if isinstance(x, tuple) else x


def _hh_tsmqr_zero(f: tuple, top: Any, trans: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_hh_tsmqr` with a tile of zeros below ``top`` (the rows of an m x n matrix
    below its n x n top part, before any reflector has reached them)."""
    v = f[1]
    top = _top(top)
    return _hh_tsmqr(f, top, np.zeros((v.shape[0], top.shape[1]), dtype=top.dtype),
                     trans=trans)


def _lq_geqrt(a: Any) -> tuple[np.ndarray, np.ndarray]:
    """The LQ factorisation of the first tile of a row panel as the QR factorisation of its
    conjugate transpose (``a``, or the top of a pair): ``a = L Q`` with ``a^H = Q^H L^H``."""
    return _hh_geqrt(np.ascontiguousarray(_top(a).conj().T))


def _lq_tsqrt(prev: tuple, b: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The next tile of a row panel (``b``, or the top of a pair) eliminated against L so
    far, as :func:`_hh_tsqrt` of its conjugate transpose."""
    return _hh_tsqrt(prev, np.ascontiguousarray(_top(b).conj().T))


def _lq_unmqr(e: tuple, c: Any) -> np.ndarray:
    """``c Q'`` for the ``Q'`` of an :func:`_lq_geqrt` (the panel's first tile's right
    reflectors applied to a tile of the trailing rows, from the right)."""
    vr, t = e
    c = _top(c)
    k = min(vr.shape)
    out, info = _lapack("gemqrt", vr, c)(vr[:, :k], t, c, side="R", trans="N")
    _check(info, "gemqrt")
    return out


def _lq_tsmqr(f: tuple, left: Any, right: Any) -> tuple[np.ndarray, np.ndarray]:
    """The tiles ``[left right]`` of one trailing row with the ``Q'`` of an
    :func:`_lq_tsqrt` applied from the right: ``(new left, new right)``. A pair given as
    ``left`` gives its first tile, as ``right`` its second."""
    _, v, t = f
    if isinstance(left, tuple):
        left = left[0]
    if isinstance(right, tuple):
        right = right[1]
    k = v.shape[1]  # the reflectors act on the left tile's first k columns only
    head = left[:, :k] if left.shape[1] > k else left
    a, b, info = _lapack("tpmqrt", v, head, right)(0, v, t, head, right, side="R", trans="N")
    _check(info, "tpmqrt")
    if head is not left:
        a = np.concatenate([a, left[:, k:]], axis=1)
    return a, b


def _band_row(q: tuple, lq: tuple | None = None) -> tuple[np.ndarray, ...]:
    """Tile row k of the band: ``(R, L)``, the upper triangular diagonal tile left by the
    column panel's QR (``q``) and the lower triangular tile right of it left by the row
    panel's LQ (``lq``; none in the last tile row)."""
    r = _r_final(q)
    return (r,) if lq is None else (r, np.ascontiguousarray(_r_final(lq).conj().T))


def _band_svd(*rows: tuple, uv: int = 1) -> tuple[Any, np.ndarray, Any, list[int]]:
    """The SVD of the band gathered into one dense n x n matrix: ``(u, s, vh, offsets)``
    (``u``, ``vh`` None without vectors); ``offsets`` the tile boundaries. The values alone
    come from the band's own stages (:func:`tilegraph.algebra.band.singular_values`: the
    band narrowed, then made bidiagonal); with vectors, LAPACK's gesdd on the dense band."""
    import scipy.linalg

    from tilegraph.algebra import band

    offsets = [0]
    for row in rows:
        offsets.append(offsets[-1] + row[0].shape[1])
    n = offsets[-1]
    dense = np.zeros((n, n), dtype=rows[0][0].dtype, order="F")
    for k, row in enumerate(rows):
        o, p = offsets[k], offsets[k + 1]
        r = row[0]
        dense[o:o + r.shape[0], o:p] = r
        if len(row) > 1:
            low = row[1]
            dense[o:o + low.shape[0], p:p + low.shape[1]] = low
    if not uv:
        width = int(np.diff(offsets).max())  # the band's upper width: the widest tile
        s = band.singular_values(dense, width, overwrite=True)
        return None, s, None, offsets
    u, s, vh = scipy.linalg.svd(dense, full_matrices=False, overwrite_a=True,
                                check_finite=False, lapack_driver="gesdd")
    return u, s, vh, offsets


def _svd_s(z: tuple) -> np.ndarray:
    return z[1]


def _svd_u(z: tuple, i: int, j: int, last: int = 0) -> np.ndarray:
    """Tile (i, j) of the band's left singular vectors stacked on zeros, cut as the
    matrix's rows: the last tile row has ``last`` rows (its zeros below the band's)."""
    u, off = z[0], z[3]
    tile = u[off[i]:off[i + 1], off[j]:off[j + 1]]
    if i == len(off) - 2 and last > tile.shape[0]:
        out = np.zeros((last, tile.shape[1]), dtype=u.dtype)
        out[:tile.shape[0]] = tile
        return out
    return np.ascontiguousarray(tile)


def _svd_v(z: tuple, i: int, j: int) -> np.ndarray:
    """Tile (i, j) of the band's right singular vectors V (not V^H)."""
    vh, off = z[2], z[3]
    return np.ascontiguousarray(vh[off[j]:off[j + 1], off[i]:off[i + 1]].conj().T)


def _adjoint_tile(x: Any, part: int = 0) -> np.ndarray:
    """The conjugate transpose of a tile (of the pair's ``part`` for a pair)."""
    if isinstance(x, tuple):
        x = x[part]
    return np.ascontiguousarray(x.conj().T)


# -- TSLU: LU of a tall-skinny matrix with tournament pivoting ---------------------------------


def _gepp_rows(a: np.ndarray) -> np.ndarray:
    """The rows Gaussian elimination with partial pivoting picks as pivots, in order (the
    first ``min(rows, columns)`` of LAPACK's getrf's row permutation)."""
    _, piv, info = _lapack("getrf", a)(a)
    _check(info, "getrf")
    perm = np.arange(a.shape[0])
    for j, p in enumerate(piv):
        perm[j], perm[p] = perm[p], perm[j]
    return perm[:min(a.shape)]


def _lu_leaf(a: np.ndarray, i: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """A row tile's candidates in the tournament: ``(its pivot rows, their indices in the
    matrix)``; the tile is tile ``i`` of ``rows`` rows each."""
    pick = _gepp_rows(a)
    return np.ascontiguousarray(a[pick]), pick + i * rows


def _lu_node(*children: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A round of the tournament: the children's candidates stacked and the pivot rows of
    their elimination with partial pivoting kept."""
    if len(children) == 1:
        return children[0]
    stacked = np.concatenate([c[0] for c in children], axis=0)
    index = np.concatenate([c[1] for c in children])
    pick = _gepp_rows(stacked)
    return np.ascontiguousarray(stacked[pick]), index[pick]


def _lu_top(winners: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The tournament's winners factored: ``(U, the matrix's rows in pivot order)``, U
    upper triangular with the winners (in that order) ``= L_top @ U``."""
    rows, index = winners
    lu, piv, info = _lapack("getrf", rows)(rows)
    _check(info, "getrf")
    if info > 0:
        raise kern.LinAlgError(f"tslu: the matrix is singular (U[{info - 1}, {info - 1}] is "
                               "zero: its columns are linearly dependent)")
    order = np.arange(rows.shape[0])
    for j, p in enumerate(piv):
        order[j], order[p] = order[p], order[j]
    return np.ascontiguousarray(np.triu(lu)), index[order]


def _lu_l(a: np.ndarray, top: tuple) -> np.ndarray:
    """A row tile of L: ``a @ inv(U)``."""
    import scipy.linalg

    u = top[0]
    return np.ascontiguousarray(scipy.linalg.solve_triangular(
        u, a.T, trans="T", lower=False, check_finite=False).T)


def _gemm_flops(c: Shape, a: Shape, b: Shape) -> float:
    return matmul_flops(a[0], a[1], b[0] if len(b) > 1 else 1)


for _k in (
    LPKernel("potrf", kern.potrf, "potrf", lambda s: potrf_flops(s[0])),
    LPKernel("trsm_right", _trsm_right, "trsm", lambda t, s: trsm_flops(s[0], s[1]),
             overwrites=1),
    LPKernel("trsm_left", _trsm_left, "trsm", lambda t, b: trsm_flops(b[1], b[0]),
             overwrites=1),
    LPKernel("syrk_update", _syrk_update, "syrk", lambda c, a: syrk_flops(a[0], a[1]),
             overwrites=0),
    LPKernel("gemm_update", _gemm_update, "gemm", _gemm_flops, overwrites=0),
    LPKernel("gemm_sub", _gemm_sub, "gemm",
             lambda c, a, b: matmul_flops(c[0], b[0], b[1]), overwrites=0),
    LPKernel("matmul", _matmul, "product", lambda a, b: matmul_flops(a[0], a[1], b[1])),
    LPKernel("matmul_acc", _matmul_acc, "accumulate",
             lambda c, a, b: matmul_flops(a[0], a[1], b[1]), overwrites=0),
    LPKernel("gram", _gram, "product", lambda a, b: matmul_flops(a[0], a[1], b[0])),
    LPKernel("gram_acc", _gram_acc, "accumulate",
             lambda c, a, b: matmul_flops(a[0], a[1], b[0]), overwrites=0),
    LPKernel("herk", _herk, "syrk", lambda a: syrk_flops(a[0], a[1])),
    LPKernel("herk_acc", _herk_acc, "syrk", lambda c, a: syrk_flops(a[0], a[1]),
             overwrites=0),
    LPKernel("qr_leaf", _qr_leaf, "qr", lambda a: qr_flops(a[0], a[1])),
    LPKernel("qr_node", _qr_node, "qr"),
    LPKernel("r_top", _r_top, "getitem"),
    LPKernel("q_signs", _q_signs, "getitem"),
    LPKernel("q_part", _q_part, "gemm"),
    LPKernel("q_leaf", _q_leaf, "gemm"),
    LPKernel("qr_r", _qr_r, "qr",
             lambda *s: qr_flops(sum(x[0] for x in s), s[0][1])),
    LPKernel("hh_geqrt", _hh_geqrt, "qr", lambda a: qr_flops(a[0], a[1])),
    LPKernel("hh_unmqr", _hh_unmqr, "qr"),
    LPKernel("hh_tsqrt", _hh_tsqrt, "qr"),
    LPKernel("hh_tsmqr", _hh_tsmqr, "qr"),
    LPKernel("part0", _part0, "getitem"),
    LPKernel("part1", _part1, "getitem"),
    LPKernel("r_final", _r_final, "getitem"),
    LPKernel("same", _same, "getitem"),
    LPKernel("hh_ttqrt", _hh_ttqrt, "qr"),
    LPKernel("hh_tsmqr_zero", _hh_tsmqr_zero, "qr"),
    LPKernel("lq_geqrt", _lq_geqrt, "qr", lambda a: qr_flops(a[1], a[0])),
    LPKernel("lq_tsqrt", _lq_tsqrt, "qr"),
    LPKernel("lq_unmqr", _lq_unmqr, "qr"),
    LPKernel("lq_tsmqr", _lq_tsmqr, "qr"),
    LPKernel("band_row", _band_row, "elementwise"),
    LPKernel("band_svd", _band_svd, "svd"),
    LPKernel("svd_s", _svd_s, "getitem"),
    LPKernel("svd_u", _svd_u, "elementwise"),
    LPKernel("svd_v", _svd_v, "elementwise"),
    LPKernel("adjoint_tile", _adjoint_tile, "elementwise"),
    LPKernel("lu_leaf", _lu_leaf, "lu", lambda a: lu_flops(a[0], a[1])),
    LPKernel("lu_node", _lu_node, "lu"),
    LPKernel("lu_top", _lu_top, "lu"),
    LPKernel("lu_l", _lu_l, "lu", lambda a, t: trsm_flops(a[0], a[1])),
    LPKernel("rows_signed", _rows_signed, "elementwise"),
    LPKernel("cols_signed", _cols_signed, "elementwise"),
):
    register_kernel(_k)
