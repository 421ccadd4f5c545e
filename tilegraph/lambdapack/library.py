"""The LambdaPACK library: tiled linear algebra as loop programs.

Each entry is a :class:`LibraryProgram`: ``entry.program`` is the :class:`Program`
(``entry.bind(N=32)`` its DAG) and calling the entry on tilegraph Arrays returns lazy Arrays
(``L = library.cholesky(A)``); the Array front ends live with the arrays
(:mod:`tilegraph.array.linalg`) and register themselves here.

- ``cholesky(S, L, N)``: right-looking Cholesky. ``S[0, i, j]`` is the input's block
  ``(i, j)`` (lower triangle), ``S[k, i, j]`` its version after step ``k``, ``L[i, j]`` the
  factor. Tasks: ``N + N(N-1)/2 + N(N^2-1)/6``.
- ``gemm(A, B, C, M, N, K)``: ``C[i, j, K] = sum_k A[i, k] @ B[k, j]``, a chain over k.
- ``syrk(A, C, N, K)``: the lower triangle of ``A @ A^H``: ``C[i, j, K]`` for ``j <= i``.
- ``trsm(A, B, X, N, M, F, LOW, TR, UNIT)``: ``X = inv(op(A)) @ B`` for a triangular
  ``A`` (its lower triangle if ``LOW``; ``UNIT``: unit diagonal), ``B[i, j, 0]`` the
  right-hand side, by forward (``F = 1``) or backward (``F = 0``) substitution; ``trsm_t``
  the same with ``op`` a transpose (``TR = 1``) or conjugate transpose (``TR = 2``), which
  reads the blocks of ``A`` mirrored.
- ``tsqr(A, R, N, B)``: the R factor of a tall-skinny matrix of ``N`` row blocks
  ``A[i, 0]``, combined ``B`` at a time in a tree (a ``reduce``).
- ``tsqr_q(A, T, U, Q, R, N, B, L)``: Q and R: the tree of ``tsqr`` with its nodes kept
  (``T[l, g]``, gathered ``B`` at a time), R with a non-negative diagonal, and Q's blocks
  ``Q[i, 0]`` from each node's Q down the tree (``U[l, g]``).
- ``qr(A, I, ..., RS, QS, M, N, K)``: tiled Householder QR of ``M x N`` tiles in
  ``K = min(M, N)`` steps (PLASMA's tile QR with LAPACK's ``geqrt``, ``gemqrt``, ``tpqrt``
  and ``tpmqrt``): ``T[k, i, j]`` is tile ``(i, j)`` before step ``k``, ``E[k]`` the
  factored diagonal tile, ``F[k, i]`` R so far stacked on tile ``(i, k)``, ``C``/``H`` the
  updated tiles to the right; Q by applying the reflectors to the identity's tiles ``I``,
  last step first (``W``, ``G``); ``RS`` and ``QS`` the factors with R's diagonal real and
  non-negative.
- ``svd(A, ..., M, N, UV, RL)``: numpywren's BDFAC for ``M x N`` tiles, ``M >= N``: step
  ``k`` factors column panel ``k`` as ``qr`` does (``E``, ``F``, ``C``, ``H``; ``P`` the
  trailing tiles), then the row panel right of the diagonal tile by LQ, computed as the QR
  of its conjugate transpose (``EL``, ``FL``), its ``Q'`` applied to the trailing rows from
  the right (``CL``, ``HL``; ``T[k + 1, i, j]`` the next version). ``BR[k]`` is tile row
  ``k`` of the upper band (R on the diagonal, L right of it), ``Z[0]`` the band's SVD in
  one task (values alone: the band narrowed and made bidiagonal, ``tilegraph.algebra.band``;
  with vectors: gesdd), ``S[0]`` the singular values; with ``UV = 1`` the column panels' reflectors
  turn the band's ``U`` (``X``, stacked on zeros; ``RL`` rows in tile row ``N - 1``) into
  ``U`` (``Y``, ``G``) and the row panels' its ``V`` (``XV``) into ``V`` (``YV``,
  ``GV``), last step first; ``VH`` is ``V^H``.
- ``tslu(A, W, T, F, L, U, PR, N, B, RB)``: LU of a tall-skinny matrix of ``N`` row tiles
  ``A[i, 0]`` (``RB`` rows each, the last may have fewer) with tournament pivoting
  (CALU's TSLU): ``W[i]`` a tile's candidate rows (its partial-pivoting pivots), ``T[0]``
  the winners of rounds of ``B`` candidate sets, ``U[0, 0]`` their factor, ``PR[0]`` the
  matrix's pivot rows in order and ``L[i, 0] = A[i, 0] @ inv(U)``: ``A = L @ U`` with
  ``L[PR]`` unit lower triangular.
- ``caqr(A, I, T, ..., R, RS, ..., QS, M, N, K, G)``: communication-avoiding QR of
  ``M x N`` tiles in ``K = min(M, N)`` steps: step ``k``'s panel by TSQR
  in a two-level tree, groups of ``G`` tile rows (group ``g`` from row ``k + G g``)
  factored each by a chain (``E[k, g]``, ``F[k, g, q]``, trailing tiles ``C``, ``H``; the
  group's R ``RG[k, g]`` and first row's tiles ``LT[k, g, j]``), then the groups' R
  factors merged into the first group's by ttqrt (``X[k, g]``, trailing tiles ``Y``);
  ``G = 1`` makes every tile a TSQR leaf, ``G >= M`` is ``qr``'s flat tree. Q by the
  reflectors applied to the identity's tiles ``I``, step ``K - 1`` first (``CU`` a step's
  input tiles, ``MY`` the merges undone, ``LM`` the groups' first rows after them, ``GY``
  and ``GL`` the groups' chains, ``W`` the step's output). ``RS`` and ``QS``: R with a
  non-negative real diagonal and Q to match.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from tilegraph.lambdapack.program import DAG, Program, program


class _Source(NamedTuple):
    """A library program's function and the arguments of :func:`program` for it."""

    fn: Callable
    options: dict[str, Any]


def _deferred(fn: Callable | None = None, **options: Any) -> Any:
    """As :func:`~tilegraph.lambdapack.program.program`, but the program is parsed and
    checked when first used (:attr:`LibraryProgram.program`): ``import tilegraph`` does not
    pay for every program of the library (checking one expands it several times)."""
    if fn is not None:
        return _Source(fn, options)
    return lambda f: _Source(f, options)


_COMPILE = threading.Lock()


class LibraryProgram:
    """A library program, callable on tilegraph Arrays once its front end is registered;
    ``program`` is its :class:`~tilegraph.lambdapack.program.Program`, made when first
    asked for."""

    def __init__(self, source: _Source, doc: str):
        self._source = source
        self._program: Program | None = None
        self.name = source.fn.__name__
        self.__doc__ = doc
        self._front_end: Callable[..., Any] | None = None

    @property
    def program(self) -> Program:
        if self._program is None:
            with _COMPILE:
                if self._program is None:
                    self._program = program(self._source.fn, **self._source.options)
        return self._program

    def bind(self, **params: int) -> DAG:
        return self.program.bind(**params)

    def implement(self, front_end: Callable[..., Any]) -> Callable[..., Any]:
        """Register the function that runs this program on Arrays."""
        self._front_end = front_end
        return front_end

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._front_end is None:
            raise RuntimeError(f"lambdapack.library.{self.name}: no Array front end is "
                               "registered (import tilegraph first)")
        return self._front_end(*args, **kwargs)

    def __repr__(self) -> str:
        return f"lambdapack.library.{self.name}"


@_deferred(tile_coords={"S": (1, 2)})
def _cholesky(S, L, N: int):
    for k in range(N):
        L[k, k] = potrf(S[k, k, k], where=(k, k))  # noqa: F821
        for i in range(k + 1, N):
            L[i, k] = trsm_right(L[k, k], S[k, i, k])  # noqa: F821
        for i in range(k + 1, N):
            S[k + 1, i, i] = syrk_update(S[k, i, i], L[i, k])  # noqa: F821
            for j in range(k + 1, i):
                S[k + 1, i, j] = gemm_update(S[k, i, j], L[i, k], L[j, k])  # noqa: F821


@_deferred
def _gemm(A, B, C, M: int, N: int, K: int):
    for i in range(M):
        for j in range(N):
            C[i, j, 1] = matmul(A[i, 0], B[0, j])  # noqa: F821
            for k in range(1, K):
                C[i, j, k + 1] = matmul_acc(C[i, j, k], A[i, k], B[k, j])  # noqa: F821


@_deferred
def _syrk(A, C, N: int, K: int):
    for i in range(N):
        for j in range(i + 1):
            if i == j:
                C[i, j, 1] = herk(A[i, 0])  # noqa: F821
                for k in range(1, K):
                    C[i, j, k + 1] = herk_acc(C[i, j, k], A[i, k])  # noqa: F821
            else:
                C[i, j, 1] = gram(A[i, 0], A[j, 0])  # noqa: F821
                for k in range(1, K):
                    C[i, j, k + 1] = gram_acc(C[i, j, k], A[i, k], A[j, k])  # noqa: F821


@_deferred(tile_coords={"B": (0, 1)})
def _trsm(A, B, X, N: int, M: int, F: int, LOW: int, TR: int, UNIT: int):
    # op(A) stored as is (TR = 0: its block (p, q) is A[p, q]); F = 1: forward
    # substitution (row blocks in order), F = 0: backward
    for j in range(M):
        for i in range(N):
            p = F * i + (1 - F) * (N - 1 - i)
            X[p, j] = trsm_left(A[p, p], B[p, j, i], lower=LOW, trans=TR, unit=UNIT)  # noqa: F821
            for r in range(i + 1, N):
                q = F * r + (1 - F) * (N - 1 - r)
                B[q, j, i + 1] = gemm_sub(B[q, j, i], A[q, p], X[p, j], trans=TR)  # noqa: F821


@_deferred(tile_coords={"B": (0, 1)})
def _trsm_t(A, B, X, N: int, M: int, F: int, LOW: int, TR: int, UNIT: int):
    # op(A) transposed (TR = 1 or 2: its block (p, q) is op(A[q, p])); F as in _trsm
    for j in range(M):
        for i in range(N):
            p = F * i + (1 - F) * (N - 1 - i)
            X[p, j] = trsm_left(A[p, p], B[p, j, i], lower=LOW, trans=TR, unit=UNIT)  # noqa: F821
            for r in range(i + 1, N):
                q = F * r + (1 - F) * (N - 1 - r)
                B[q, j, i + 1] = gemm_sub(B[q, j, i], A[p, q], X[p, j], trans=TR)  # noqa: F821


@_deferred
def _tsqr(A, R, N: int, B: int):
    R[0, 0] = reduce(qr_r, (A[i, 0] for i in range(N)), branch=B)  # noqa: F821


@_deferred
def _tsqr_q(A, T, U, Q, R, N: int, B: int, L: int):
    # up the tree: the row blocks, then B nodes at a time, L levels
    for i in range(N):
        T[0, i] = qr_leaf(A[i, 0])  # noqa: F821
    for l in range(1, L + 1):  # noqa: E741
        for g in range(ceil_div(N, B ** l)):  # noqa: F821
            T[l, g] = qr_node(  # noqa: F821
                T[l - 1, c] for c in range(B * g, min(B * g + B, ceil_div(N, B ** (l - 1)))))  # noqa: F821
    R[0, 0] = r_top(T[L, 0])  # noqa: F821
    # down the tree: each node's Q times the factor from above
    U[L, 0] = q_signs(T[L, 0])  # noqa: F821
    for d in range(L):
        l = L - d  # noqa: E741
        for g in range(ceil_div(N, B ** l)):  # noqa: F821
            for k in range(min(B, ceil_div(N, B ** (l - 1)) - B * g)):  # noqa: F821
                U[l - 1, B * g + k] = q_part(T[l, g], U[l, g], k)  # noqa: F821
    for i in range(N):
        Q[i, 0] = q_leaf(T[0, i], U[0, i])  # noqa: F821


@_deferred
def _qr(A, I, T, E, C, F, H, R, W, G, Q, RS, QS, M: int, N: int, K: int):  # noqa: E741
    # tiled Householder QR of M x N tiles, K = min(M, N) steps (PLASMA's tile QR)
    for i in range(M):
        for j in range(N):
            T[0, i, j] = same(A[i, j])  # noqa: F821
    for k in range(K):
        E[k] = hh_geqrt(T[k, k, k])  # noqa: F821
        for j in range(k + 1, N):
            C[k, j] = hh_unmqr(E[k], T[k, k, j])  # noqa: F821
        for i in range(k + 1, M):
            if i == k + 1:
                F[k, i] = hh_tsqrt(E[k], T[k, i, k])  # noqa: F821
            if i >= k + 2:
                F[k, i] = hh_tsqrt(F[k, i - 1], T[k, i, k])  # noqa: F821
            for j in range(k + 1, N):
                if i == k + 1:
                    H[k, j, i] = hh_tsmqr(F[k, i], C[k, j], T[k, i, j])  # noqa: F821
                if i >= k + 2:
                    H[k, j, i] = hh_tsmqr(F[k, i], H[k, j, i - 1], T[k, i, j])  # noqa: F821
                T[k + 1, i, j] = part1(H[k, j, i])  # noqa: F821
    # R: K x N tiles on and above the diagonal
    for k in range(K):
        if k <= M - 2:
            R[k, k] = r_final(F[k, M - 1])  # noqa: F821
            for j in range(k + 1, N):
                R[k, j] = part0(H[k, j, M - 1])  # noqa: F821
        if k == M - 1:
            R[k, k] = r_final(E[k])  # noqa: F821
            for j in range(k + 1, N):
                R[k, j] = same(C[k, j])  # noqa: F821
    # Q (M x K tiles): the reflectors applied to the identity's tiles I, step K-1 first
    # (kk = K - 1 - k); W[kk, j, ii] is the pair (row k, row M-1-ii) of column j
    for kk in range(K):
        for j in range(K - 1 - kk, K):
            for ii in range(M - K + kk):
                if ii == 0:
                    if kk == 0:
                        W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii], I[K - 1 - kk, j],  # noqa: F821
                                                I[M - 1 - ii, j], trans=0)
                    if kk >= 1:
                        if j == K - 1 - kk:
                            W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                    I[K - 1 - kk, j], I[M - 1 - ii, j],
                                                    trans=0)
                        if j >= K - kk:
                            if ii == M - 1 - K + kk:
                                W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                        I[K - 1 - kk, j], G[kk - 1, j],
                                                        trans=0)
                            if ii <= M - 2 - K + kk:
                                W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                        I[K - 1 - kk, j], W[kk - 1, j, ii],
                                                        trans=0)
                if ii >= 1:
                    if kk == 0:
                        W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                W[kk, j, ii - 1], I[M - 1 - ii, j], trans=0)
                    if kk >= 1:
                        if j == K - 1 - kk:
                            W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                    W[kk, j, ii - 1], I[M - 1 - ii, j],
                                                    trans=0)
                        if j >= K - kk:
                            if ii == M - 1 - K + kk:
                                W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                        W[kk, j, ii - 1], G[kk - 1, j],
                                                        trans=0)
                            if ii <= M - 2 - K + kk:
                                W[kk, j, ii] = hh_tsmqr(F[K - 1 - kk, M - 1 - ii],  # noqa: F821
                                                        W[kk, j, ii - 1], W[kk - 1, j, ii],
                                                        trans=0)
            if M - K + kk >= 1:
                G[kk, j] = hh_unmqr(E[K - 1 - kk], W[kk, j, M - K + kk - 1], trans=0)  # noqa: F821
            if M - K + kk == 0:
                G[kk, j] = hh_unmqr(E[K - 1 - kk], I[K - 1 - kk, j], trans=0)  # noqa: F821
    for j in range(K):
        Q[0, j] = same(G[K - 1, j])  # noqa: F821
        for i in range(1, M):
            Q[i, j] = part1(W[K - 1, j, M - 1 - i])  # noqa: F821
    # R with a real non-negative diagonal (RS), and Q to match (QS)
    for k in range(K):
        for j in range(k, N):
            RS[k, j] = rows_signed(R[k, j], R[k, k])  # noqa: F821
    for i in range(M):
        for j in range(K):
            QS[i, j] = cols_signed(Q[i, j], R[j, j])  # noqa: F821


@_deferred
def _svd(A, T, E, C, F, H, P, EL, CL, FL, HL, BR, Z, S, X, Y, G, U, XV, YV, GV, VH,
         M: int, N: int, UV: int, RL: int):
    # numpywren's BDFAC: M x N tiles (M >= N) reduced to upper band form (bandwidth one
    # tile): step k factors the column panel k (QR, Q^H applied to the tiles right of it),
    # then the row panel right of the diagonal tile (LQ as the QR of its conjugate
    # transpose, Q' applied to the trailing rows from the right). UV = 1: singular vectors;
    # RL: the rows of tile row N-1 (the last tile row of U's band part)
    for i in range(M):
        for j in range(N):
            T[0, i, j] = same(A[i, j])  # noqa: F821
    for k in range(N):
        E[k] = hh_geqrt(T[k, k, k])  # noqa: F821
        for j in range(k + 1, N):
            C[k, j] = hh_unmqr(E[k], T[k, k, j])  # noqa: F821
        for i in range(k + 1, M):
            if i == k + 1:
                F[k, i] = hh_tsqrt(E[k], T[k, i, k])  # noqa: F821
            else:
                F[k, i] = hh_tsqrt(F[k, i - 1], T[k, i, k])  # noqa: F821
            for j in range(k + 1, N):
                if i == k + 1:
                    H[k, j, i] = hh_tsmqr(F[k, i], C[k, j], T[k, i, j])  # noqa: F821
                else:
                    H[k, j, i] = hh_tsmqr(F[k, i], H[k, j, i - 1], T[k, i, j])  # noqa: F821
                P[k, i, j] = part1(H[k, j, i])  # noqa: F821
        # the row panel: the tops of the column panel's last pairs (M >= N leaves tiles
        # below every diagonal tile that has tiles right of it)
        if k <= N - 2:
            EL[k] = lq_geqrt(H[k, k + 1, M - 1])  # noqa: F821
            for i in range(k + 1, M):
                CL[k, i] = lq_unmqr(EL[k], P[k, i, k + 1])  # noqa: F821
            for j in range(k + 2, N):
                if j == k + 2:
                    FL[k, j] = lq_tsqrt(EL[k], H[k, j, M - 1])  # noqa: F821
                else:
                    FL[k, j] = lq_tsqrt(FL[k, j - 1], H[k, j, M - 1])  # noqa: F821
                for i in range(k + 1, M):
                    if j == k + 2:
                        HL[k, i, j] = lq_tsmqr(FL[k, j], CL[k, i], P[k, i, j])  # noqa: F821
                    else:
                        HL[k, i, j] = lq_tsmqr(FL[k, j], HL[k, i, j - 1], P[k, i, j])  # noqa: F821
            for i in range(k + 1, M):
                if k == N - 2:
                    T[k + 1, i, k + 1] = same(CL[k, i])  # noqa: F821
                else:
                    T[k + 1, i, k + 1] = part0(HL[k, i, N - 1])  # noqa: F821
                for j in range(k + 2, N):
                    T[k + 1, i, j] = part1(HL[k, i, j])  # noqa: F821
    # the band: tile row k is R (upper triangular) on the diagonal and L (lower triangular)
    # right of it; its SVD in one task
    for k in range(N):
        if k <= M - 2:
            if k <= N - 3:
                BR[k] = band_row(F[k, M - 1], FL[k, N - 1])  # noqa: F821
            if k == N - 2:
                BR[k] = band_row(F[k, M - 1], EL[k])  # noqa: F821
            if k == N - 1:
                BR[k] = band_row(F[k, M - 1])  # noqa: F821
        if k == M - 1:
            BR[k] = band_row(E[k])  # noqa: F821
    Z[0] = band_svd((BR[k] for k in range(N)), uv=UV)  # noqa: F821
    S[0] = svd_s(Z[0])  # noqa: F821
    if UV == 1:
        for i in range(N):
            for j in range(N):
                X[i, j] = svd_u(Z[0], i, j, last=RL)  # noqa: F821
                XV[i, j] = svd_v(Z[0], i, j)  # noqa: F821
        # U = Q_0 Q_1 ... Q_{N-1} [U_band; 0]: step k = N-1-kk applies its pairs (row k,
        # row M-1-ii) bottom row first, then its diagonal tile's reflectors to row k;
        # rows N.. are zeros until step N-1 reaches them
        for kk in range(N):
            k = N - 1 - kk
            for j in range(N):
                for ii in range(M - 1 - k):
                    if ii == 0:
                        if kk == 0:
                            Y[kk, j, ii] = hh_tsmqr_zero(F[k, M - 1 - ii], X[k, j], trans=0)  # noqa: F821
                        else:
                            if ii == M - N - 1 + kk:
                                Y[kk, j, ii] = hh_tsmqr(F[k, M - 1 - ii], X[k, j],  # noqa: F821
                                                        G[kk - 1, j], trans=0)
                            if ii <= M - N - 2 + kk:
                                Y[kk, j, ii] = hh_tsmqr(F[k, M - 1 - ii], X[k, j],  # noqa: F821
                                                        Y[kk - 1, j, ii], trans=0)
                    else:
                        if kk == 0:
                            Y[kk, j, ii] = hh_tsmqr_zero(F[k, M - 1 - ii], Y[kk, j, ii - 1],  # noqa: F821
                                                         trans=0)
                        else:
                            if ii == M - N - 1 + kk:
                                Y[kk, j, ii] = hh_tsmqr(F[k, M - 1 - ii], Y[kk, j, ii - 1],  # noqa: F821
                                                        G[kk - 1, j], trans=0)
                            if ii <= M - N - 2 + kk:
                                Y[kk, j, ii] = hh_tsmqr(F[k, M - 1 - ii], Y[kk, j, ii - 1],  # noqa: F821
                                                        Y[kk - 1, j, ii], trans=0)
                if M - N + kk >= 1:
                    G[kk, j] = hh_unmqr(E[k], Y[kk, j, M - N + kk - 1], trans=0)  # noqa: F821
                else:
                    G[kk, j] = hh_unmqr(E[k], X[k, j], trans=0)  # noqa: F821
        for j in range(N):
            U[0, j] = same(G[N - 1, j])  # noqa: F821
            for i in range(1, M):
                U[i, j] = part1(Y[N - 1, j, M - 1 - i])  # noqa: F821
        # V = P_0 P_1 ... P_{N-2} V_band: step k = N-2-kv of the row panels acts on rows
        # k+1.. of V from the left, as the column panels' steps act on U
        for kv in range(N - 1):
            k = N - 2 - kv
            for j in range(N):
                for ii in range(kv):
                    if ii == 0:
                        if ii == kv - 1:
                            YV[kv, j, ii] = hh_tsmqr(FL[k, N - 1 - ii], XV[k + 1, j],  # noqa: F821
                                                     GV[kv - 1, j], trans=0)
                        if ii <= kv - 2:
                            YV[kv, j, ii] = hh_tsmqr(FL[k, N - 1 - ii], XV[k + 1, j],  # noqa: F821
                                                     YV[kv - 1, j, ii], trans=0)
                    else:
                        if ii == kv - 1:
                            YV[kv, j, ii] = hh_tsmqr(FL[k, N - 1 - ii], YV[kv, j, ii - 1],  # noqa: F821
                                                     GV[kv - 1, j], trans=0)
                        if ii <= kv - 2:
                            YV[kv, j, ii] = hh_tsmqr(FL[k, N - 1 - ii], YV[kv, j, ii - 1],  # noqa: F821
                                                     YV[kv - 1, j, ii], trans=0)
                if kv >= 1:
                    GV[kv, j] = hh_unmqr(EL[k], YV[kv, j, kv - 1], trans=0)  # noqa: F821
                else:
                    GV[kv, j] = hh_unmqr(EL[k], XV[k + 1, j], trans=0)  # noqa: F821
        # V^H: tile (i, j) is tile (j, i) of V conjugate-transposed
        for i in range(N):
            VH[i, 0] = adjoint_tile(XV[0, i])  # noqa: F821
            for j in range(1, N):
                if j == 1:
                    VH[i, j] = adjoint_tile(GV[N - 2, i])  # noqa: F821
                else:
                    VH[i, j] = adjoint_tile(YV[N - 2, i, N - 1 - j], part=1)  # noqa: F821


@_deferred
def _tslu(A, W, T, F, L, U, PR, N: int, B: int, RB: int):
    # tournament pivoting: each row tile's pivot rows by partial pivoting, then rounds of B
    # candidate sets at a time up a tree; RB rows per tile (the last may have fewer)
    for i in range(N):
        W[i] = lu_leaf(A[i, 0], i, RB)  # noqa: F821
    T[0] = reduce(lu_node, (W[i] for i in range(N)), branch=B)  # noqa: F821
    F[0] = lu_top(T[0])  # noqa: F821
    U[0, 0] = part0(F[0])  # noqa: F821
    PR[0] = part1(F[0])  # noqa: F821
    for i in range(N):
        L[i, 0] = lu_l(A[i, 0], F[0])  # noqa: F821


@_deferred
def _caqr(A, I, T, E, C, F, H, RG, LT, X, Y, R, RS, CU, MY, LM, GY, GL, W, QS,  # noqa: E741
          M: int, N: int, K: int, G: int):
    # step k's panel (tile rows k..M-1) by TSQR in a two-level tree: groups of G tile rows
    # (group g from row k + G*g) factored at once, each a chain (geqrt on its first tile,
    # tsqrt down the others), then the groups' R factors combined by a chain of ttqrt on
    # the first group's; each level's Q^H applied to the tiles right of the panel
    for i in range(M):
        for j in range(N):
            T[0, i, j] = same(A[i, j])  # noqa: F821
    for k in range(K):
        for g in range(ceil_div(M - k, G)):  # noqa: F821
            E[k, g] = hh_geqrt(T[k, k + G * g, k])  # noqa: F821
            for j in range(k + 1, N):
                C[k, g, j] = hh_unmqr(E[k, g], T[k, k + G * g, j])  # noqa: F821
            for q in range(1, min(G, M - k - G * g)):
                if q == 1:
                    F[k, g, q] = hh_tsqrt(E[k, g], T[k, k + G * g + q, k])  # noqa: F821
                else:
                    F[k, g, q] = hh_tsqrt(F[k, g, q - 1], T[k, k + G * g + q, k])  # noqa: F821
                for j in range(k + 1, N):
                    if q == 1:
                        H[k, g, q, j] = hh_tsmqr(F[k, g, q], C[k, g, j],  # noqa: F821
                                                 T[k, k + G * g + q, j])
                    else:
                        H[k, g, q, j] = hh_tsmqr(F[k, g, q], H[k, g, q - 1, j],  # noqa: F821
                                                 T[k, k + G * g + q, j])
            # the group's R factor and its first row's tiles after the group's chain
            if min(G, M - k - G * g) >= 2:
                RG[k, g] = same(F[k, g, min(G, M - k - G * g) - 1])  # noqa: F821
                for j in range(k + 1, N):
                    LT[k, g, j] = part0(H[k, g, min(G, M - k - G * g) - 1, j])  # noqa: F821
            else:
                RG[k, g] = same(E[k, g])  # noqa: F821
                for j in range(k + 1, N):
                    LT[k, g, j] = same(C[k, g, j])  # noqa: F821
        for g in range(1, ceil_div(M - k, G)):  # noqa: F821
            if g == 1:
                X[k, g] = hh_ttqrt(RG[k, 0], RG[k, g])  # noqa: F821
            else:
                X[k, g] = hh_ttqrt(X[k, g - 1], RG[k, g])  # noqa: F821
            for j in range(k + 1, N):
                if g == 1:
                    Y[k, g, j] = hh_tsmqr(X[k, g], LT[k, 0, j], LT[k, g, j])  # noqa: F821
                else:
                    Y[k, g, j] = hh_tsmqr(X[k, g], Y[k, g - 1, j], LT[k, g, j])  # noqa: F821
        # the next version of the trailing tiles: a group's other rows from its chain,
        # its first row from the chain of groups
        for i in range(k + 1, M):
            for j in range(k + 1, N):
                if (i - k) % G >= 1:
                    T[k + 1, i, j] = part1(H[k, (i - k) // G, (i - k) % G, j])  # noqa: F821
                else:
                    T[k + 1, i, j] = part1(Y[k, (i - k) // G, j])  # noqa: F821
        # R's tile row k
        if M - k >= G + 1:
            R[k, k] = r_final(X[k, ceil_div(M - k, G) - 1])  # noqa: F821
            for j in range(k + 1, N):
                R[k, j] = part0(Y[k, ceil_div(M - k, G) - 1, j])  # noqa: F821
        else:
            R[k, k] = r_final(RG[k, 0])  # noqa: F821
            for j in range(k + 1, N):
                R[k, j] = same(LT[k, 0, j])  # noqa: F821
    for k in range(K):
        for j in range(k, N):
            RS[k, j] = rows_signed(R[k, j], R[k, k])  # noqa: F821
    # Q (M x K tiles): the reflectors applied to the identity's tiles I, step k = K-1-kk
    # first; within a step the merges undone last first, then each group's chain.
    # CU[kk, i, j]: tile (i, j) before step k is applied (rows i >= k)
    for kk in range(K):
        k = K - 1 - kk
        for i in range(k, M):
            for j in range(K):
                if kk == 0:
                    CU[kk, i, j] = same(I[i, j])  # noqa: F821
                else:
                    if i == k:
                        CU[kk, i, j] = same(I[i, j])  # noqa: F821
                    else:
                        CU[kk, i, j] = same(W[kk - 1, i, j])  # noqa: F821
        for j in range(K):
            # the merges, the last group's first: pairs (row k, the group's first row)
            for gg in range(ceil_div(M - k, G) - 1):  # noqa: F821
                if gg == 0:
                    MY[kk, gg, j] = hh_tsmqr(  # noqa: F821
                        X[k, ceil_div(M - k, G) - 1 - gg], CU[kk, k, j],  # noqa: F821
                        CU[kk, k + G * (ceil_div(M - k, G) - 1 - gg), j], trans=0)  # noqa: F821
                else:
                    MY[kk, gg, j] = hh_tsmqr(  # noqa: F821
                        X[k, ceil_div(M - k, G) - 1 - gg], MY[kk, gg - 1, j],  # noqa: F821
                        CU[kk, k + G * (ceil_div(M - k, G) - 1 - gg), j], trans=0)  # noqa: F821
            # each group's first row after the merges
            if M - k >= G + 1:
                LM[kk, 0, j] = part0(MY[kk, ceil_div(M - k, G) - 2, j])  # noqa: F821
            else:
                LM[kk, 0, j] = same(CU[kk, k, j])  # noqa: F821
            for g in range(1, ceil_div(M - k, G)):  # noqa: F821
                LM[kk, g, j] = part1(MY[kk, ceil_div(M - k, G) - 1 - g, j])  # noqa: F821
            # each group's chain, its last row first: pairs (first row, row q), then the
            # first row's own reflectors
            for g in range(ceil_div(M - k, G)):  # noqa: F821
                for qq in range(min(G, M - k - G * g) - 1):
                    if qq == 0:
                        GY[kk, g, qq, j] = hh_tsmqr(  # noqa: F821
                            F[k, g, min(G, M - k - G * g) - 1 - qq], LM[kk, g, j],
                            CU[kk, k + G * g + min(G, M - k - G * g) - 1 - qq, j], trans=0)
                    else:
                        GY[kk, g, qq, j] = hh_tsmqr(  # noqa: F821
                            F[k, g, min(G, M - k - G * g) - 1 - qq], GY[kk, g, qq - 1, j],
                            CU[kk, k + G * g + min(G, M - k - G * g) - 1 - qq, j], trans=0)
                if min(G, M - k - G * g) >= 2:
                    GL[kk, g, j] = hh_unmqr(  # noqa: F821
                        E[k, g], GY[kk, g, min(G, M - k - G * g) - 2, j], trans=0)
                else:
                    GL[kk, g, j] = hh_unmqr(E[k, g], LM[kk, g, j], trans=0)  # noqa: F821
        # tile (i, j) after step k: a group's first row from its own reflectors, the
        # others from the group's chain
        for i in range(k, M):
            for j in range(K):
                if (i - k) % G == 0:
                    W[kk, i, j] = same(GL[kk, (i - k) // G, j])  # noqa: F821
                else:
                    W[kk, i, j] = part1(GY[kk, (i - k) // G,  # noqa: F821
                                           min(G, M - k - G * ((i - k) // G)) - 1 - (i - k) % G,
                                           j])
    for i in range(M):
        for j in range(K):
            QS[i, j] = cols_signed(W[K - 1, i, j], R[j, j])  # noqa: F821


cholesky = LibraryProgram(_cholesky, "Cholesky factor L of a Hermitian positive definite "
                                     "Array (lower, as numpy.linalg.cholesky).")
gemm = LibraryProgram(_gemm, "A @ B for 2-D Arrays, a chain of block products per output "
                             "block.")
syrk = LibraryProgram(_syrk, "The lower triangle of A @ A^H (the strict upper triangle "
                             "zero).")
trsm = LibraryProgram(_trsm, "X with op(A) @ X = B for a triangular A (forward or backward "
                             "substitution; op: none).")
trsm_t = LibraryProgram(_trsm_t, "X with op(A) @ X = B for a triangular A, op a transpose or "
                                 "conjugate transpose.")
tsqr = LibraryProgram(_tsqr, "The R factor of the QR of a tall-skinny Array (one column of "
                             "blocks), its row blocks combined in a tree.")
tsqr_q = LibraryProgram(_tsqr_q, "Q and R of a tall-skinny Array (one column of blocks): "
                                 "its row blocks factored, their R factors combined B at a "
                                 "time up a tree of L levels, and Q assembled down the tree.")

qr = LibraryProgram(_qr, "Q and R of an M x N tiled matrix by tiled Householder QR (PLASMA's "
                         "tile QR: geqrt, tsqrt, unmqr and tsmqr kernels from LAPACK; the "
                         "reflectors of each step applied to the tiles below and right); Q "
                         "by applying them to the identity's tiles, last step first; RS "
                         "and QS: R with a non-negative real diagonal and Q to match.")

svd = LibraryProgram(_svd, "The SVD of an M x N tiled matrix (M >= N) by numpywren's BDFAC: "
                           "tiled QR of each column panel and LQ of each row panel reduce it "
                           "to upper band form of one tile's bandwidth (LAPACK's geqrt, "
                           "tpqrt, gemqrt and tpmqrt); the band's SVD in one task on the band "
                           "gathered into a dense n x n block (values alone: band reduction, "
                           "gbbrd and bdsqr; with UV = 1 gesdd, and U and "
                           "V^H by the panels' reflectors applied to the band's vectors.")

tslu = LibraryProgram(_tslu, "LU of a tall-skinny Array (one column of blocks) with "
                             "tournament pivoting: each row block's pivot rows by partial "
                             "pivoting, B candidate sets at a time up a tree, the winners "
                             "factored (U) and every row block solved against U (L).")

caqr = LibraryProgram(_caqr, "Q and R of an M x N tiled matrix by communication-avoiding QR: "
                             "each column panel by TSQR in a two-level tree (groups of G tile "
                             "rows, then the groups' R factors), the tree's reflectors applied "
                             "to the tiles right of the panel; Q by applying them to the "
                             "identity's tiles, last step first; RS and QS: R with a "
                             "non-negative real diagonal and Q to match.")

PROGRAMS = {p.name: p for p in (cholesky, gemm, syrk, trsm, trsm_t, tsqr, tsqr_q, qr, svd,
                                tslu, caqr)}
