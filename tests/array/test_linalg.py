"""tilegraph.linalg against NumPy/SciPy: random well-conditioned inputs, uneven blocks,
several dtypes; singular and non-positive-definite inputs; bad input; laziness."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.algebra.linalg_kernels import LinAlgError

DTYPES = [np.float64, np.float32, np.complex128]
SQUARE_CHUNKS = [(1, 1), (5, 2), (12, ((5, 4, 3), (6, 6))), (30, 7), (20, 20)]


def _tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if np.dtype(dtype) in (np.float32, np.complex64) \
        else dict(rtol=1e-8, atol=1e-8)


def _random(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.random(shape)
    if np.dtype(dtype).kind == "c":
        m = m + 1j * rng.random(shape)
    return m.astype(dtype)


def _spd(n, dtype, seed=0):
    a = _random((n, n), dtype, seed)
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("n", "chunks"), SQUARE_CHUNKS)
def test_cholesky(n, chunks, dtype):
    m = _spd(n, dtype)
    x = tg.from_numpy(m, chunks=chunks)
    low = tg.linalg.cholesky(x).compute()
    assert low.dtype == np.linalg.cholesky(m).dtype
    np.testing.assert_allclose(low, np.linalg.cholesky(m), **_tol(dtype))
    up = tg.linalg.cholesky(x, upper=True).compute()
    np.testing.assert_allclose(up, np.linalg.cholesky(m).conj().T, **_tol(dtype))


def test_cholesky_of_integers_is_float64_and_reads_the_lower_triangle():
    m = np.array([[4, 2], [2, 3]])
    low = tg.linalg.cholesky(tg.from_numpy(m, chunks=1)).compute()
    assert low.dtype == np.float64
    np.testing.assert_allclose(low, np.linalg.cholesky(m))
    garbage_above = np.tril(m) + np.triu(np.full((2, 2), 99), 1)
    np.testing.assert_allclose(
        tg.linalg.cholesky(tg.from_numpy(garbage_above, chunks=1)).compute(), low)


def test_cholesky_of_a_matrix_that_is_not_positive_definite_names_the_block():
    m = _spd(9, np.float64)
    m[7, 7] = -100.0
    with pytest.raises(np.linalg.LinAlgError, match=r"not positive definite.*block \(2, 2\)"):
        tg.linalg.cholesky(tg.from_numpy(m, chunks=3)).compute()
    with pytest.raises(LinAlgError):
        tg.linalg.solve(tg.from_numpy(m, chunks=3), np.ones(9), assume_a="pos").compute()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(dtype, lower, trans, unit):
    n = 13
    t = _spd(n, dtype)
    t = np.tril(t) if lower else np.triu(t)
    b = _random((n, 4), dtype, 1)
    got = tg.linalg.solve_triangular(tg.from_numpy(t, chunks=((5, 5, 3), (4, 9))),
                                     tg.from_numpy(b, chunks=(6, 3)), lower=lower,
                                     trans=trans, unit_diagonal=unit).compute()
    want = scipy.linalg.solve_triangular(t, b, lower=lower, trans=trans, unit_diagonal=unit)
    np.testing.assert_allclose(got, want, **_tol(dtype))
    vec = tg.linalg.solve_triangular(tg.from_numpy(t, chunks=4), b[:, 0], lower=lower,
                                     trans=trans, unit_diagonal=unit).compute()
    assert vec.shape == (n,)
    np.testing.assert_allclose(vec, want[:, 0], **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("n", "chunks"), SQUARE_CHUNKS)
def test_lu_matches_scipy(n, chunks, dtype):
    m = _random((n, n), dtype)
    x = tg.from_numpy(m, chunks=chunks)
    p, low, up = tg.compute(*tg.linalg.lu(x))
    want_p, want_l, want_u = scipy.linalg.lu(m)
    np.testing.assert_allclose(p @ low @ up, m, **_tol(dtype))
    np.testing.assert_array_equal(p, want_p)  # the same pivots as LAPACK
    np.testing.assert_allclose(low, want_l, **_tol(dtype))
    np.testing.assert_allclose(up, want_u, **_tol(dtype))
    pi, low2, up2 = tg.compute(*tg.linalg.lu(x, p_indices=True))
    np.testing.assert_allclose(low2[pi] @ up2, m, **_tol(dtype))
    pl, up3 = tg.compute(*tg.linalg.lu(x, permute_l=True))
    np.testing.assert_allclose(pl @ up3, m, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("assume_a", ["gen", "pos"])
def test_solve_and_inv(dtype, assume_a):
    n = 17
    m = _spd(n, dtype) if assume_a == "pos" else _random((n, n), dtype) + n * np.eye(n)
    m = m.astype(dtype)
    x = tg.from_numpy(m, chunks=((6, 6, 5), (17,)))
    b = _random((n, 3), dtype, 2)
    got = tg.linalg.solve(x, tg.from_numpy(b, chunks=(4, 2)), assume_a=assume_a).compute()
    np.testing.assert_allclose(got, np.linalg.solve(m, b), **_tol(dtype))
    vec = tg.linalg.solve(x, b[:, 1], assume_a=assume_a).compute()
    np.testing.assert_allclose(vec, np.linalg.solve(m, b[:, 1]), **_tol(dtype))
    np.testing.assert_allclose(tg.linalg.inv(x).compute(), np.linalg.inv(m),
                               **{k: v * 10 for k, v in _tol(dtype).items()})


def test_singular_matrices_raise_linalg_error_naming_the_block():
    m = np.ones((6, 6))
    x = tg.from_numpy(m, chunks=3)
    with pytest.raises(np.linalg.LinAlgError, match=r"singular matrix.*block \(0, 0\)"):
        tg.linalg.solve(x, np.ones(6)).compute()
    with pytest.raises(LinAlgError, match="singular"):
        tg.linalg.inv(x).compute()
    # the factorisation itself and the determinant are defined for singular matrices
    p, low, up = tg.compute(*tg.linalg.lu(x))
    np.testing.assert_allclose(p @ low @ up, m)
    assert tg.linalg.det(x).compute() == 0.0
    sign, logdet = tg.compute(*tg.linalg.slogdet(x))
    assert sign == 0.0 and logdet == -np.inf


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("n", "chunks"), [(1, 1), (7, 3), (12, ((5, 4, 3), (12,)))])
def test_det_and_slogdet(n, chunks, dtype):
    m = _random((n, n), dtype, 3) + np.eye(n)
    m = m.astype(dtype)
    x = tg.from_numpy(m, chunks=chunks)
    sign, logdet = tg.compute(*tg.linalg.slogdet(x))
    want_sign, want_logdet = np.linalg.slogdet(m)
    np.testing.assert_allclose(sign, want_sign, **_tol(dtype))
    np.testing.assert_allclose(logdet, want_logdet, **_tol(dtype))
    np.testing.assert_allclose(tg.linalg.det(x).compute(), np.linalg.det(m),
                               rtol=_tol(dtype)["rtol"] * 10)


def _check_qr(m, q, r, dtype):
    k = min(m.shape)
    assert q.shape == (m.shape[0], k) and r.shape == (k, m.shape[1])
    np.testing.assert_allclose(q @ r, m, **_tol(dtype))
    np.testing.assert_allclose(q.conj().T @ q, np.eye(k), **_tol(dtype))
    np.testing.assert_allclose(r, np.triu(r), **_tol(dtype))
    d = np.diagonal(r)
    assert np.all(d.real >= -_tol(dtype)["atol"]) and np.allclose(d.imag, 0)
    # with the sign convention, R is NumPy's up to the signs of its rows
    want = np.linalg.qr(m, mode="r")[:k]
    np.testing.assert_allclose(np.abs(r), np.abs(want), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "chunks"), [
    ((100, 5), (30, 5)), ((1000, 20), (37, 20)), ((10, 30), (3, 30)), ((7, 7), 7),
    ((200, 50), ((13,) * 15 + (5,), (50,))), ((60, 8), (10, 3)),
])
def test_tsqr(shape, chunks, dtype):
    m = _random(shape, dtype)
    q, r = tg.compute(*tg.linalg.tsqr(tg.from_numpy(m, chunks=chunks), split_every=3))
    _check_qr(m, q, r, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "chunks"), [
    ((9, 7), 3), ((20, 30), (7, 8)), ((30, 12), (10, 5)), ((12, 12), 5), ((40, 9), (40, 2)),
    ((5, 13), (2, 4)),
])
def test_qr_of_general_shapes(shape, chunks, dtype):
    m = _random(shape, dtype)
    x = tg.from_numpy(m, chunks=chunks)
    q, r = tg.compute(*tg.linalg.qr(x))
    _check_qr(m, q, r, dtype)
    np.testing.assert_allclose(tg.linalg.qr(x, mode="r").compute(), r, **_tol(dtype))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 12), rb=st.integers(1, 15),
       cb=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_qr_property(m, n, rb, cb, seed):
    a = _random((m, n), np.float64, seed) + np.eye(m, n)
    q, r = tg.compute(*tg.linalg.qr(tg.from_numpy(a, chunks=(rb, cb))))
    np.testing.assert_allclose(q @ r, a, atol=1e-8)
    np.testing.assert_allclose(q.T @ q, np.eye(min(m, n)), atol=1e-8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "chunks"), [((50, 4), (20, 4)), ((4, 50), (4, 20)),
                                               ((300, 30), (70, 13)), ((6, 6), 6)])
def test_svd(shape, chunks, dtype):
    m = _random(shape, dtype)
    u, s, vt = tg.compute(*tg.linalg.svd(tg.from_numpy(m, chunks=chunks)))
    np.testing.assert_allclose((u * s) @ vt, m, **_tol(dtype))
    np.testing.assert_allclose(s, np.linalg.svd(m, compute_uv=False), **_tol(dtype))
    k = min(shape)
    np.testing.assert_allclose(u.conj().T @ u, np.eye(k), **_tol(dtype))
    np.testing.assert_allclose(vt @ vt.conj().T, np.eye(k), **_tol(dtype))
    only = tg.linalg.svd(tg.from_numpy(m, chunks=chunks), compute_uv=False).compute()
    np.testing.assert_allclose(only, s, **_tol(dtype))


def _check_svd(m, u, s, vt, dtype, s_rtol):
    k = min(m.shape)
    assert u.shape == (m.shape[0], k) and s.shape == (k,) and vt.shape == (k, m.shape[1])
    want = np.linalg.svd(m, compute_uv=False)
    np.testing.assert_allclose(s, want, rtol=s_rtol, atol=s_rtol * want[0])
    np.testing.assert_allclose((u * s) @ vt, m, **_tol(dtype))
    np.testing.assert_allclose(u.conj().T @ u, np.eye(k), **_tol(dtype))
    np.testing.assert_allclose(vt @ vt.conj().T, np.eye(k), **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "chunks"), [((40, 40), 10), ((37, 37), 10),
                                               ((30, 52), (10, 13)), ((53, 29), 8),
                                               ((26, 26), ((9, 9, 8), (9, 9, 8)))])
def test_svd_of_several_blocks_each_way_is_the_band_reduction(shape, chunks, dtype):
    m = _random(shape, dtype, seed=shape[1])
    x = tg.from_numpy(m, chunks=chunks)
    u, s, vt = tg.linalg.svd(x)
    names = {n for n in tg.algebra.lower([u.collection]).build().meta["name"] if n}
    assert {"lq_tsmqr", "band_svd", "hh_tsmqr"} <= names and "qr_leaf" not in names
    u, s, vt = tg.compute(u, s, vt)
    _check_svd(m, u, s, vt, dtype, 1e-4 if dtype == np.float32 else 1e-10)
    only = tg.linalg.svd(x, compute_uv=False)
    assert "svd_u" not in {n for n in tg.algebra.lower([only.collection]).build()
                           .meta["name"] if n}
    np.testing.assert_allclose(only.compute(), s, **_tol(dtype))


def test_svd_of_an_ill_conditioned_matrix_in_blocks():
    rng = np.random.default_rng(11)
    n = 60
    qa, _ = np.linalg.qr(rng.standard_normal((n, n)))
    qb, _ = np.linalg.qr(rng.standard_normal((n, n)))
    sigma = np.logspace(0, -12, n)
    m = (qa * sigma) @ qb.T
    u, s, vt = tg.compute(*tg.linalg.svd(tg.from_numpy(m, chunks=16)))
    want = np.linalg.svd(m, compute_uv=False)
    np.testing.assert_allclose(s, want, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s, sigma, rtol=1e-10, atol=1e-14)
    big = sigma > 1e-4  # relative accuracy where eps * s[0] is small beside s
    np.testing.assert_allclose(s[big], sigma[big], rtol=1e-10)
    np.testing.assert_allclose((u * s) @ vt, m, atol=1e-13)
    np.testing.assert_allclose(u.T @ u, np.eye(n), atol=1e-12)
    np.testing.assert_allclose(vt @ vt.T, np.eye(n), atol=1e-12)


def test_svd_tall_skinny_keeps_tsqr_and_bad_input_is_refused():
    tall = tg.from_numpy(_random((60, 8), np.float64), chunks=(15, 8))
    s = tg.linalg.svd(tall, compute_uv=False)
    names = {n for n in tg.algebra.lower([s.collection]).build().meta["name"] if n}
    assert "qr_leaf" in names and "band_svd" not in names
    sq = tg.ones((20, 20), chunks=5)
    with pytest.raises(ValueError, match="expected a 2-D matrix"):
        tg.linalg.svd(tg.ones((4, 4, 4), chunks=2))
    with pytest.raises(TypeError, match="svd: arrays of dtype <U1 are not supported"):
        tg.linalg.svd(tg.from_numpy(np.array([["a", "b"], ["c", "d"]]), chunks=1))
    with pytest.raises(ValueError, match="full_matrices=True is not supported"):
        tg.linalg.svd(sq, full_matrices=True)


def test_band_svd_is_refused_or_run_by_the_run_s_memory_limit():
    """The band's one dense task is checked against the memory limit of the run the graph
    is built for (given to compute() or set when it runs), not when svd() is called: the
    same svd is refused under a limit it cannot fit, before anything runs, and runs under
    one it fits, equal to NumPy's."""
    m = _random((20, 20), np.float64)
    sq = tg.from_numpy(m, chunks=5)
    with tg.config.set(memory_limit=1000):  # in force when svd() is called: no effect
        u, s, vt = tg.linalg.svd(sq)
        values = tg.linalg.svd(sq.T, compute_uv=False)
    started = []
    with pytest.raises(ValueError, match=r"band's SVD is one task holding 20 x 20 dense "
                                         r"matrices \(18\.8 KiB, more than "
                                         r"memory_limit=1000 B"):
        tg.compute(u, s, vt, memory_limit=1000, callbacks=[started.append])
    assert started == []  # refused before any run started
    with pytest.raises(ValueError, match="svd_compressed"), tg.config.set(memory_limit=1000):
        values.compute()
    got_u, got_s, got_vt = tg.compute(u, s, vt, memory_limit="10MB")
    np.testing.assert_allclose(got_s, np.linalg.svd(m, compute_uv=False), rtol=1e-10)
    np.testing.assert_allclose((got_u * got_s) @ got_vt, m, atol=1e-10)
    # 2 k^2 numbers without vectors: 6.3 KiB fits a limit that the vectors' 18.8 KiB do not
    np.testing.assert_allclose(values.compute(memory_limit="12KiB"),
                               np.linalg.svd(m, compute_uv=False), rtol=1e-10)
    with pytest.raises(ValueError, match=r"18.8 KiB, more than memory_limit=12.0 KiB"):
        s.compute(memory_limit="12KiB")


def test_svd_compressed_recovers_a_low_rank_matrix():
    rng = np.random.default_rng(3)
    m = rng.random((90, 6)) @ rng.random((6, 70))
    x = tg.from_numpy(m, chunks=(25, 30))
    u, s, vt = tg.compute(*tg.linalg.svd_compressed(x, 6, seed=0))
    assert u.shape == (90, 6) and s.shape == (6,) and vt.shape == (6, 70)
    np.testing.assert_allclose((u * s) @ vt, m, atol=1e-8)
    np.testing.assert_allclose(s, np.linalg.svd(m, compute_uv=False)[:6], rtol=1e-8)
    again = tg.linalg.svd_compressed(x, 3, seed=0, compute_uv=False).compute()
    np.testing.assert_allclose(again, s[:3], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_lstsq(dtype):
    a = _random((40, 3), dtype)
    b = _random((40, 2), dtype, 1)
    x, res, rank, s = tg.compute(*tg.linalg.lstsq(tg.from_numpy(a, chunks=(15, 3)), b))
    want = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, want[0], **_tol(dtype))
    np.testing.assert_allclose(res, want[1], **_tol(dtype))
    assert int(rank) == want[2]
    np.testing.assert_allclose(s, want[3], **_tol(dtype))
    xv = tg.linalg.lstsq(tg.from_numpy(a, chunks=(7, 2)), b[:, 0])[0].compute()
    np.testing.assert_allclose(xv, np.linalg.lstsq(a, b[:, 0])[0], **_tol(dtype))


def test_lstsq_of_a_rank_deficient_matrix_is_the_minimum_norm_solution():
    rng = np.random.default_rng(0)
    a = rng.random((30, 3))
    a = np.c_[a, a[:, 0] + a[:, 1]]
    b = rng.random(30)
    x, res, rank, _ = tg.compute(*tg.linalg.lstsq(tg.from_numpy(a, chunks=(8, 4)), b))
    want = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x, want[0], atol=1e-10)
    assert int(rank) == 3 == want[2]
    assert np.isnan(res).all()  # NumPy returns no residuals then


@pytest.mark.parametrize("ord_", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norms(ord_):
    m = np.random.default_rng(8).random((4, 5)) - 0.5
    x = tg.from_numpy(m, chunks=(3, 2))
    np.testing.assert_allclose(tg.linalg.norm(x, ord_).compute(), np.linalg.norm(m, ord_))
    np.testing.assert_allclose(tg.linalg.norm(x, ord_, axis=(1, 0)).compute(),
                               np.linalg.norm(m, ord_, axis=(1, 0)))
    np.testing.assert_allclose(tg.linalg.norm(x, ord_, keepdims=True).compute(),
                               np.linalg.norm(m, ord_, keepdims=True))


@pytest.mark.parametrize("ord_", [None, 0, 1, 2, 3, -1.5, np.inf, -np.inf])
def test_vector_norms(ord_):
    v = np.arange(9.0) - 4 + 0.5
    x = tg.from_numpy(v, chunks=4)
    np.testing.assert_allclose(tg.linalg.norm(x, ord_).compute(), np.linalg.norm(v, ord_))
    m = np.arange(20.0).reshape(4, 5) - 7
    y = tg.from_numpy(m, chunks=3)
    for axis in (0, 1, -1):
        np.testing.assert_allclose(tg.linalg.norm(y, ord_, axis=axis).compute(),
                                   np.linalg.norm(m, ord_, axis=axis))
    c = v + 1j * v[::-1]
    np.testing.assert_allclose(tg.linalg.norm(tg.from_numpy(c, chunks=4), ord_).compute(),
                               np.linalg.norm(c, ord_))


def test_bad_input_is_rejected_before_anything_runs(forbid_compute):
    sq = tg.ones((4, 4), chunks=2)
    tall = tg.ones((8, 3), chunks=2)
    with pytest.raises(ValueError, match="expected a square matrix, got shape"):
        tg.linalg.cholesky(tall)
    with pytest.raises(ValueError, match="expected a 2-D matrix"):
        tg.linalg.cholesky(tg.ones((2, 2, 2), chunks=1))
    with pytest.raises(TypeError, match="not supported"):
        tg.linalg.cholesky(tg.from_numpy(np.array([["a"]])))
    with pytest.raises(ValueError, match="b of shape"):
        tg.linalg.solve(sq, np.ones(5))
    with pytest.raises(ValueError, match="assume_a must be"):
        tg.linalg.solve(sq, np.ones(4), assume_a="banded")
    with pytest.raises(ValueError, match="trans must be"):
        tg.linalg.solve_triangular(sq, np.ones(4), trans=7)
    with pytest.raises(ValueError, match="mode must be"):
        tg.linalg.qr(tall, mode="complete")
    with pytest.raises(ValueError, match="full_matrices=True is not supported"):
        tg.linalg.svd(tall, full_matrices=True)
    with pytest.raises(ValueError, match="k=9 is more than"):
        tg.linalg.svd_compressed(tall, 9)
    with pytest.raises(ValueError, match="wide"):
        tg.linalg.lstsq(tall.T, np.ones(3))
    with pytest.raises(ValueError, match="invalid norm order"):
        tg.linalg.norm(sq, "bogus")
    with pytest.raises(ValueError, match="split_every"):
        tg.linalg.tsqr(tall, split_every=1)


def test_planning_is_lazy_and_tasks_are_counted(forbid_compute):
    x = tg.ones((40, 40), chunks=10)
    low = tg.linalg.cholesky(x)
    # 4 potrf, 6 trsm, 10 updates, 6 zero blocks
    assert low.collection.ntasks == 4 + 6 + 10 + 6
    q, _r = tg.linalg.qr(tg.ones((40, 4), chunks=(10, 4)))
    assert q.collection.ntasks > 0
    tg.linalg.lu(x), tg.linalg.svd(q), tg.linalg.solve(x, x), tg.linalg.slogdet(x)
    tg.linalg.svd(x), tg.linalg.svd(x[:, :25], compute_uv=False)


def test_cholesky_and_solve_under_mpi_placement_rules():
    from tilegraph.array.lowering import plan_arrays

    x = tg.from_numpy(_spd(40, np.float64), chunks=10)
    plan = plan_arrays([tg.linalg.cholesky(x)], processes=4)
    g = plan.graph
    kinds, coords, where = g.meta["kind"], g.meta["coords"], g.meta["worker"]
    for i, kind in enumerate(kinds):
        if kind in ("potrf", "trsm", "syrk", "gemm"):
            r, c = coords[i]
            assert where[i] == (r % 2) * 2 + c % 2  # 2-D block-cyclic


def test_factorisations_keep_their_kinds_and_output_coords(forbid_compute):
    from collections import Counter

    from tilegraph.algebra import lower

    x = tg.ones((30, 30), chunks=10)
    kinds = Counter(lower([tg.linalg.lu(x)[2].collection]).build().meta["kind"])
    assert kinds["lu"] == 3 + 3 + 6  # getrf and pivots per step, laswp per other column
    assert kinds["trsm"] == 3 and kinds["gemm"] == 5
    q, _r = tg.linalg.qr(tg.ones((40, 4), chunks=(10, 4)))
    assert Counter(lower([q.collection]).build().meta["kind"])["qr"] == 4 + 1
    s = tg.linalg.svd(tg.ones((40, 4), chunks=(10, 4)), compute_uv=False)
    assert "svd" in lower([s.collection]).build().meta["kind"]
    g = lower([tg.linalg.cholesky(x).collection]).build()
    dag = tg.lambdapack.library.cholesky.bind(N=3)
    seen = Counter()
    for key, kind, coords in zip(g.keys, g.meta["kind"], g.meta["coords"], strict=True):
        if kind in ("potrf", "trsm", "syrk", "gemm"):
            # keys are (name, statement, *loop index); coords the written tile's block (i, j)
            array, tile = dag.writes((key[1], tuple(key[2:])))
            assert coords == (tile[1:] if array == "S" else tile)
            seen[kind] += 1
    assert seen == {"potrf": 3, "trsm": 3, "syrk": 3, "gemm": 1}


@pytest.mark.parametrize(("where", "value", "block"), [
    ((0, 0), np.nan, (0, 0)), ((25, 3), np.inf, (2, 2)), ((12, 11), np.nan, (1, 1))])
def test_cholesky_of_nan_or_inf_names_the_block(where, value, block):
    rng = np.random.default_rng(0)
    c = rng.random((30, 30))
    m = c @ c.T + 30 * np.eye(30)
    m[where] = m[where[::-1]] = value
    with pytest.raises(np.linalg.LinAlgError,
                       match=rf"NaN or infinite values \(found in diagonal block \({block[0]}, "
                             rf"{block[1]}\)"):
        tg.linalg.cholesky(tg.from_numpy(m, chunks=10)).compute()


@pytest.mark.parametrize("chunks", [(4, 4), (2, 4), (4, 2)])
def test_qr_of_nan_input_keeps_r_upper_triangular_as_numpy(chunks):
    a = np.random.default_rng(0).random((8, 4))
    a[2, 1] = np.nan
    _, r = tg.linalg.qr(tg.from_numpy(a, chunks=chunks))
    got = r.compute()
    assert np.all(np.tril(got, -1) == 0)
    assert np.all(np.tril(np.linalg.qr(a)[1], -1) == 0)
