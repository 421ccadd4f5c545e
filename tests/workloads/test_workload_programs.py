"""The programs run on tilegraph and NumPy arrays alike, and the linear algebra programs
call the linalg namespace they are given."""

import numpy as np

import tilegraph as tg
from tilegraph.workloads import programs


def test_linalg_module_of_each_library():
    a = tg.from_numpy(np.eye(3), chunks=2)
    assert programs.linalg_module(a) is tg.linalg
    assert programs.linalg_module(tg.sparse.random((4, 4), chunks=2, seed=0)) is tg.linalg
    assert programs.linalg_module(np.eye(3)) is np.linalg


def test_linalg_programs_use_the_given_namespace():
    calls = []

    class Recording:
        @staticmethod
        def cholesky(a):
            calls.append("cholesky")
            return np.linalg.cholesky(a)

        @staticmethod
        def qr(a):
            calls.append("qr")
            return np.linalg.qr(a)

        @staticmethod
        def svd(a, full_matrices):
            calls.append(("svd", full_matrices))
            return np.linalg.svd(a, full_matrices=full_matrices)

    a = np.array([[4.0, 1.0], [1.0, 3.0], [0.5, 0.25]])
    spd = a.T @ a
    np.testing.assert_allclose(programs.cholesky(spd, linalg=Recording),
                               np.linalg.cholesky(spd))
    q, r = programs.qr(a, linalg=Recording)
    np.testing.assert_allclose(q @ r, a)
    u, s, vt = programs.svd(a, linalg=Recording)
    np.testing.assert_allclose((u * s) @ vt, a)
    assert calls == ["cholesky", "qr", ("svd", False)]


def test_the_same_program_on_tilegraph_and_numpy_arrays():
    rng = np.random.default_rng(0)
    X, y, w = rng.random((50, 4)), rng.random((50, 1)), np.zeros((4, 1))
    want = programs.linear_regression(X, y, w, iterations=3)
    got = programs.linear_regression(tg.from_numpy(X, chunks=(13, 4)),
                                     tg.from_numpy(y, chunks=(13, 1)),
                                     tg.from_numpy(w, chunks=(4, 1)), iterations=3)
    np.testing.assert_allclose(got.compute(), want, rtol=1e-12)
