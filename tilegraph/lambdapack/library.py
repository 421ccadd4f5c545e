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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilegraph.lambdapack.program import DAG, Program, program


class LibraryProgram:
    """A library program, callable on tilegraph Arrays once its front end is registered."""

    def __init__(self, prog: Program, doc: str):
        self.program = prog
        self.name = prog.name
        self.__doc__ = doc
        self._front_end: Callable[..., Any] | None = None

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


@program(tile_coords={"S": (1, 2)})
def _cholesky(S, L, N: int):
    for k in range(N):
        L[k, k] = potrf(S[k, k, k], where=(k, k))  # noqa: F821
        for i in range(k + 1, N):
            L[i, k] = trsm_right(L[k, k], S[k, i, k])  # noqa: F821
        for i in range(k + 1, N):
            S[k + 1, i, i] = syrk_update(S[k, i, i], L[i, k])  # noqa: F821
            for j in range(k + 1, i):
                S[k + 1, i, j] = gemm_update(S[k, i, j], L[i, k], L[j, k])  # noqa: F821


@program
def _gemm(A, B, C, M: int, N: int, K: int):
    for i in range(M):
        for j in range(N):
            C[i, j, 1] = matmul(A[i, 0], B[0, j])  # noqa: F821
            for k in range(1, K):
                C[i, j, k + 1] = matmul_acc(C[i, j, k], A[i, k], B[k, j])  # noqa: F821


@program
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


@program(tile_coords={"B": (0, 1)})
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


@program(tile_coords={"B": (0, 1)})
def _trsm_t(A, B, X, N: int, M: int, F: int, LOW: int, TR: int, UNIT: int):
    # op(A) transposed (TR = 1 or 2: its block (p, q) is op(A[q, p])); F as in _trsm
    for j in range(M):
        for i in range(N):
            p = F * i + (1 - F) * (N - 1 - i)
            X[p, j] = trsm_left(A[p, p], B[p, j, i], lower=LOW, trans=TR, unit=UNIT)  # noqa: F821
            for r in range(i + 1, N):
                q = F * r + (1 - F) * (N - 1 - r)
                B[q, j, i + 1] = gemm_sub(B[q, j, i], A[p, q], X[p, j], trans=TR)  # noqa: F821


@program
def _tsqr(A, R, N: int, B: int):
    R[0, 0] = reduce(qr_r, (A[i, 0] for i in range(N)), branch=B)  # noqa: F821


@program
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

PROGRAMS = {p.name: p for p in (cholesky, gemm, syrk, trsm, trsm_t, tsqr, tsqr_q)}
