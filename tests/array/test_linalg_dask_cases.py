"""dask's own cases for ``svd`` and ``norm`` (dask/array/tests/test_linalg.py: the shapes,
block layouts, dtypes and norm orders it checks) run against tg.linalg and NumPy.

Where dask refuses a case tilegraph computes it: ``svd`` of a matrix in several blocks each
way (dask needs one dimension in one block), norms 2, -2 and 'nuc' without a rechunk, and
those norms over a pair of axes of a stacked array (dask raises NotImplementedError)."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg


def _blocks(chunks, shape):
    """dask's ``-1`` (the whole axis) in tilegraph's terms."""
    return tuple(s if c == -1 else c for c, s in zip(chunks, shape, strict=True))


def _flip(u, v):
    """Fix each singular pair's sign: the largest entry of each column of u positive."""
    idx = np.argmax(np.abs(u), axis=0)
    signs = np.sign(u[idx, np.arange(u.shape[1])])
    signs[signs == 0] = 1
    return u * signs, v * signs[:, None]


@pytest.mark.parametrize("m,n", [(10, 20), (15, 15), (20, 10)])
def test_svd_results_have_the_shapes_and_dtypes_they_announce(m, n):
    a = np.random.default_rng(0).random((m, n))
    lazy = tg.linalg.svd(tg.from_numpy(a, chunks=(3, n)))
    for d in lazy:
        e = d.compute()
        assert d.shape == e.shape
        assert d.dtype == e.dtype


@pytest.mark.parametrize("chunks", [(10, 50), (50, 10), (-1, -1), (10, 10), (7, 13)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_svd_keeps_the_precision(chunks, dtype):
    x = np.random.default_rng(1).random((50, 50)).astype(dtype)
    u, s, v = tg.linalg.svd(tg.from_numpy(x, chunks=_blocks(chunks, x.shape)))
    real = np.finfo(dtype).dtype
    assert u.dtype == v.dtype == dtype and s.dtype == real
    uc, sc, vc = u.compute(), s.compute(), v.compute()
    assert uc.dtype == vc.dtype == dtype and sc.dtype == real
    tol = 1e-4 if real == np.float32 else 1e-10
    np.testing.assert_allclose((uc * sc) @ vc, x, atol=tol * 50)


@pytest.mark.parametrize("shape", [(10, 20), (10, 10), (20, 10)])
@pytest.mark.parametrize("chunks", [(-1, -1), (10, -1), (-1, 10), (3, 4)])
@pytest.mark.parametrize("dtype", ["f4", "f8"])
def test_sign_fixed_factors_still_rebuild_the_matrix(shape, chunks, dtype):
    x = np.random.default_rng(2).random(shape).astype(dtype)
    u, s, v = tg.linalg.svd(tg.from_numpy(x, chunks=_blocks(chunks, shape)))
    uf, vf = _flip(u.compute(), v.compute())
    assert uf.dtype == u.dtype and vf.dtype == v.dtype
    np.testing.assert_almost_equal((uf * s.compute()) @ vf, x,
                                   decimal=9 if np.dtype(dtype).itemsize > 4 else 5)


@pytest.mark.parametrize("chunks", [(10, -1), (-1, 10), (9, -1), (-1, 9), (9, 9), (33, 7)])
@pytest.mark.parametrize("shape", [(10, 100), (100, 10), (10, 10), (100, 100)])
def test_svd_of_tall_wide_and_square_matrices_in_any_blocks(chunks, shape):
    x = np.random.default_rng(3).random(shape)
    du, ds, dv = tg.linalg.svd(tg.from_numpy(x, chunks=_blocks(chunks, shape)))
    du, dv = _flip(du.compute(), dv.compute())
    nu, ns, nv = np.linalg.svd(x, full_matrices=False)
    nu, nv = _flip(nu, nv)
    np.testing.assert_allclose(ds.compute(), ns, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((du * ns) @ dv, x, atol=1e-10)
    np.testing.assert_allclose(du.conj().T @ du, np.eye(du.shape[1]), atol=1e-10)
    # a pair is unique (up to its sign) only when its value is well apart from the others
    gaps = np.abs(np.diff(ns))
    apart = np.ones(ns.size, bool)
    apart[:-1] &= gaps > 1e-3
    apart[1:] &= gaps > 1e-3
    np.testing.assert_allclose(du[:, apart], nu[:, apart], atol=1e-7)
    np.testing.assert_allclose(dv[apart], nv[apart], atol=1e-7)


@pytest.mark.parametrize("ndim", [0, 1, 3])
def test_svd_refuses_what_is_not_a_matrix(ndim):
    x = tg.from_numpy(np.random.default_rng(4).random((4,) * ndim))
    with pytest.raises(ValueError, match="expected a 2-D matrix"):
        tg.linalg.svd(x)


def test_svd_refuses_full_matrices():
    x = tg.from_numpy(np.random.default_rng(5).random((10, 10)))
    with pytest.raises(ValueError, match="full_matrices"):
        tg.linalg.svd(x, full_matrices=True)


@pytest.mark.parametrize("shape, chunks, axis", [((5,), (2,), None), ((5,), (2,), 0),
                                                 ((5,), (2,), (0,)), ((5, 6), (2, 2), None)])
@pytest.mark.parametrize("ord_", [None, 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_of_any_dimension(shape, chunks, axis, ord_, keepdims):
    a = np.random.default_rng(6).random(shape)
    got = tg.linalg.norm(tg.from_numpy(a, chunks=chunks), ord=ord_, axis=axis,
                         keepdims=keepdims).compute()
    np.testing.assert_allclose(got, np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("ord_", [None, 1, -1, np.inf, -np.inf])
def test_norm_has_numpy_s_precision(ord_, keepdims, dtype):
    a = np.random.default_rng(7).random(5).astype(dtype)
    got = tg.linalg.norm(tg.from_numpy(a, chunks=2), ord=ord_, keepdims=keepdims)
    want = np.linalg.norm(a, ord=ord_, keepdims=keepdims)
    assert got.dtype == want.dtype
    assert got.compute().dtype == want.dtype


@pytest.mark.parametrize("shape, chunks", [((5,), (2,)), ((5, 3), (2, 2)), ((4, 5, 3), (2, 2, 2)),
                                           ((4, 5, 2, 3), (2, 2, 2, 2)),
                                           ((2, 5, 2, 4, 3), (2, 2, 2, 2, 2))])
@pytest.mark.parametrize("ord_", [None, 1, -1, np.inf, -np.inf])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_over_every_axis_and_pair_of_axes(shape, chunks, ord_, keepdims):
    a = np.random.default_rng(8).random(shape)
    d = tg.from_numpy(a, chunks=chunks)
    for first in range(len(shape)):
        for second in range(len(shape)):
            axis = (first, second) if first != second else first
            np.testing.assert_allclose(
                tg.linalg.norm(d, ord=ord_, axis=axis, keepdims=keepdims).compute(),
                np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims), rtol=1e-12)


@pytest.mark.parametrize("axis", [None, 0, (0,)])
@pytest.mark.parametrize("ord_", [0, 2, -2, 0.5])
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norms_of_other_orders(axis, ord_, keepdims):
    a = np.random.default_rng(9).random(5)
    got = tg.linalg.norm(tg.from_numpy(a, chunks=2), ord=ord_, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got.compute(),
                               np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("axis", [None, (0, 1), (1, 0)])
@pytest.mark.parametrize("ord_", ["fro", "nuc", 2, -2])
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms_need_no_rechunk(axis, ord_, keepdims):
    a = np.random.default_rng(10).random((5, 6))
    got = tg.linalg.norm(tg.from_numpy(a, chunks=2), ord=ord_, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(got.compute(),
                               np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("shape, axis", [((3, 2, 4), (1, 2)), ((2, 3, 4, 5), (-1, -2)),
                                         ((3, 7, 4), (2, 0)), ((5, 4, 3), (0, 1))])
@pytest.mark.parametrize("ord_", ["nuc", 2, -2])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_spectral_norms_of_a_stack_of_matrices(shape, axis, ord_, keepdims, dtype):
    rng = np.random.default_rng(11)
    a = rng.random(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.random(shape)
    got = tg.linalg.norm(tg.from_numpy(a, chunks=2), ord=ord_, axis=axis, keepdims=keepdims)
    want = np.linalg.norm(a, ord=ord_, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-5 if np.dtype(dtype) == np.float32 else 1e-12
    np.testing.assert_allclose(got.compute(), want, rtol=tol)


def test_a_stack_of_matrices_refuses_a_repeated_axis_and_a_bad_order():
    d = tg.from_numpy(np.ones((3, 4, 5)), chunks=2)
    with pytest.raises(ValueError, match="invalid axis"):
        tg.linalg.norm(d, 2, axis=(1, 1))
    with pytest.raises(ValueError, match="invalid norm order"):
        tg.linalg.norm(d, "bogus", axis=(1, 2))
