"""numpy.linalg on tilegraph arrays: stacks of matrices (routed to the Array API's
per-matrix linalg), one matrix (the blocked tilegraph.linalg), NumPy's named results,
the functions of numpy.linalg beyond dask's, and the errors naming the alternative."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg

rng = np.random.default_rng(8)
A = rng.standard_normal((4, 5, 5))
SPD = A @ np.swapaxes(A, -1, -2) + 5 * np.eye(5)
TALL = rng.standard_normal((4, 7, 3))


def stack(a):
    return tg.from_numpy(a, chunks=(3, 3, 2))  # matrices split: gathered per matrix


def close(got, want, rtol=1e-8):
    assert isinstance(got, tg.Array), type(got)
    value = got.compute()
    assert value.shape == np.shape(want) and value.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(value, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_stacked_decompositions_match_numpy(dtype, forbid_compute):
    rtol = 1e-3 if dtype == np.float32 else 1e-8
    s = SPD.astype(dtype)
    if dtype == np.complex128:
        s = s + 0.5j * (A - np.swapaxes(A, -1, -2))  # Hermitian positive definite
    x = stack(s)
    with tg.config.set(backend="sync"):
        u, sv, vh = np.linalg.svd(x)
        _nu, ns, _nvh = np.linalg.svd(s)
        close(sv, ns, rtol)
        np.testing.assert_allclose((u.compute() * sv.compute()[..., None, :]) @ vh.compute(),
                                   s, rtol=rtol, atol=rtol * 10)
        assert type(np.linalg.svd(x)).__name__ == "SVDResult"
        close(np.linalg.svd(x, compute_uv=False), ns, rtol)
        w, _v = np.linalg.eigh(x)
        close(w, np.linalg.eigh(s)[0], rtol)
        close(np.linalg.eigvalsh(x, UPLO="U"), np.linalg.eigvalsh(s, UPLO="U"), rtol)
        close(np.linalg.cholesky(x), np.linalg.cholesky(s), rtol)
        close(np.linalg.inv(x), np.linalg.inv(s), rtol)
        close(np.linalg.det(x), np.linalg.det(s), rtol)
        _sign, logdet = np.linalg.slogdet(x)
        close(logdet, np.linalg.slogdet(s)[1], rtol)
        close(np.linalg.solve(x, stack(TALL[:, :5].astype(dtype))),
              np.linalg.solve(s, TALL[:, :5].astype(dtype)), rtol)
        close(np.linalg.pinv(x), np.linalg.pinv(s), rtol)
        close(np.linalg.matrix_rank(x), np.linalg.matrix_rank(s))
        close(np.linalg.matrix_power(x, 3), np.linalg.matrix_power(s, 3), rtol)
        close(np.linalg.cond(x), np.linalg.cond(s), 1e-3 if dtype == np.float32 else 1e-6)
        _q, r = np.linalg.qr(stack(TALL.astype(dtype)))
        _nq, nr = np.linalg.qr(TALL.astype(dtype))
        close(abs(r), abs(nr), rtol)


def test_svd_of_one_non_square_matrix_with_full_matrices():
    m = TALL[0]
    u, s, vh = np.linalg.svd(tg.from_numpy(m, chunks=(3, 2)))
    assert u.shape == (7, 7) and vh.shape == (3, 3)
    nu, ns, _nvh = np.linalg.svd(m)
    np.testing.assert_allclose(abs(u.compute()[:, :3]), abs(nu[:, :3]), atol=1e-10)
    np.testing.assert_allclose(s.compute(), ns)
    reduced = np.linalg.svd(tg.from_numpy(m, chunks=(3, 2)), full_matrices=False)
    assert reduced.U.shape == (7, 3)


def test_the_array_api_functions_of_numpy_linalg():
    x = stack(A)
    v = tg.from_numpy(A[:, 0, :3], chunks=2)
    close(np.linalg.matrix_norm(x, ord=1), np.linalg.matrix_norm(A, ord=1))
    close(np.linalg.vector_norm(x, axis=-1), np.linalg.vector_norm(A, axis=-1))
    close(np.linalg.svdvals(x), np.linalg.svdvals(A))
    close(np.linalg.diagonal(x, offset=1), np.linalg.diagonal(A, offset=1))
    close(np.linalg.trace(x), np.linalg.trace(A))
    close(np.linalg.matrix_transpose(x), np.linalg.matrix_transpose(A))
    close(np.linalg.cross(v, v[::-1]), np.linalg.cross(A[:, 0, :3], A[::-1, 0, :3]))
    close(np.linalg.vecdot(x, x), np.linalg.vecdot(A, A))
    close(np.linalg.outer(v[0], v[1]), np.linalg.outer(A[0, 0, :3], A[1, 0, :3]))
    close(np.linalg.multi_dot([x[0], x[1], x[2, :, :2]]),
          np.linalg.multi_dot([A[0], A[1], A[2, :, :2]]))
    close(np.linalg.multi_dot([x[0, 0], x[1], x[2, :, 0]]),
          np.linalg.multi_dot([A[0, 0], A[1], A[2, :, 0]]))
    t = SPD[0].reshape(5, 5, 1)
    close(np.linalg.tensorinv(tg.from_numpy(t, chunks=2), ind=1), np.linalg.tensorinv(t, 1))
    close(np.linalg.tensorsolve(tg.from_numpy(SPD[0], chunks=2), np.ones(5)),
          np.linalg.tensorsolve(SPD[0], np.ones(5)))


def test_errors_name_the_problem_or_the_alternative(forbid_compute):
    x = stack(A)
    with pytest.raises(np.linalg.LinAlgError, match="at least two-dimensional"):
        np.linalg.inv(tg.from_numpy(np.ones(3)))
    with pytest.raises(TypeError, match=r"numpy.linalg.eig is not supported.*eigh"):
        np.linalg.eig(x)
    with pytest.raises(TypeError, match=r"eigvals .*eigvalsh"):
        np.linalg.eigvals(x)
    with pytest.raises(ValueError, match="UPLO"):
        np.linalg.eigh(x, UPLO="X")
    with pytest.raises(ValueError, match="mode"):
        np.linalg.qr(x, mode="raw")
    with pytest.raises(TypeError, match="tilegraph array"):
        np.linalg.pinv(x, rcond=tg.from_numpy(np.float64(1e-3)))
    with pytest.raises(ValueError, match="at least two arrays"):
        np.linalg.multi_dot([x[0]])
    with pytest.raises(np.linalg.LinAlgError, match="first 1 axes"):
        np.linalg.tensorinv(tg.ones((2, 3)), ind=1)
