"""The singular values of an upper band matrix by band reduction, gbbrd and bdsqr."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.algebra import band
from tilegraph.algebra.linalg_kernels import LinAlgError

# the band stages call LAPACKE in NumPy's own BLAS; a NumPy built on another BLAS takes the
# dense fallback, tested below on every build
needs_lapacke = pytest.mark.skipif(not band.available(np.float64),
                                   reason="NumPy's BLAS lacks LAPACKE gbbrd/bdsqr")


def test_numpy_s_openblas_has_the_band_routines():
    """With NumPy's OpenBLAS (its wheels, and this project's test environment) the band
    stages must run: the tests marked ``needs_lapacke`` may not be skipped there."""
    from threadpoolctl import threadpool_info

    openblas = [i for i in threadpool_info()
                if i.get("internal_api") == "openblas" and "numpy" in i.get("filepath", "")]
    if not openblas:
        pytest.skip("NumPy is not built on OpenBLAS here")
    for dtype in (np.float32, np.float64, np.complex64, np.complex128):
        assert band.available(dtype), dtype


def _band(n: int, width: int, dtype, seed: int = 0, shift: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    a = np.triu(a) - np.triu(a, width + 1)
    return (a + shift * np.eye(n)).astype(dtype)


def _want(a: np.ndarray) -> np.ndarray:
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return np.linalg.svd(a.astype(wide), compute_uv=False)


@needs_lapacke
@pytest.mark.parametrize(("n", "width", "final"), [(300, 100, 32), (301, 100, 7), (200, 50, 1),
                                                   (257, 60, 31), (123, 122, 5), (64, 63, 2),
                                                   (400, 30, 29), (90, 12, 32)])
def test_reduce_band_leaves_the_narrower_band_and_keeps_the_values(n, width, final):
    a = _band(n, width, np.float64, seed=n, shift=2 * np.sqrt(width))
    work = np.asfortranarray(a.copy())
    band.reduce_band(work, width, final)
    rows, cols = np.indices(work.shape)
    assert not work[rows > cols].any()  # exactly zero below the diagonal
    assert not work[cols - rows > min(final, width)].any()  # and beyond the new band
    got = np.linalg.svd(work, compute_uv=False)
    np.testing.assert_allclose(got, _want(a), rtol=1e-12)


@needs_lapacke
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize(("n", "width"), [(250, 100), (97, 40), (33, 32), (40, 3), (1, 0),
                                          (2, 1), (150, 0)])
def test_singular_values_match_numpy(n, width, dtype):
    single = np.dtype(dtype) in (np.float32, np.complex64)
    tol = 2e-5 if single else 1e-12
    # diagonally dominant: every value to relative accuracy
    a = _band(n, width, dtype, seed=width + 7, shift=4.0 * (width + 1))
    s = band.singular_values(a, width, final=8)
    assert s.dtype == np.empty(0, dtype).real.dtype
    np.testing.assert_allclose(s, _want(a), rtol=tol)
    assert (np.diff(s) <= 0).all()
    # a random triangle is graded (its smallest values far below its largest): accuracy
    # relative to the largest, as LAPACK's dense SVD has
    a = _band(n, width, dtype, seed=width + 8)
    want = _want(a)
    np.testing.assert_allclose(band.singular_values(a, width, final=8), want, rtol=0,
                               atol=tol * max(want[0], 1e-30))


@needs_lapacke
@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 70), width=st.integers(0, 80), final=st.integers(1, 20),
       seed=st.integers(0, 2**16))
def test_any_band_and_any_final_width(n, width, final, seed):
    a = _band(n, min(width, max(n - 1, 0)), np.float64, seed=seed)
    s = band.singular_values(a, width, final=final)
    want = _want(a)
    # absolute accuracy, as LAPACK's dense SVD has: these random triangles are graded
    np.testing.assert_allclose(s, want, rtol=0, atol=1e-12 * max(1.0, want[0]))


@needs_lapacke
def test_ill_conditioned_values_are_as_accurate_as_gesdd():
    rng = np.random.default_rng(3)
    n, width = 200, 40
    # a band with singular values from 1 to 1e-12: Givens rotations of a diagonal kept
    # inside the band
    a = np.diag(np.logspace(0, -12, n))
    for _ in range(3):
        for i in range(n - 1):
            c, s = np.cos(rng.uniform(0, 6.3)), np.sin(rng.uniform(0, 6.3))
            g = np.array([[c, s], [-s, c]]) / np.hypot(c, s)
            a[:, i:i + 2] = a[:, i:i + 2] @ g
            a[i:i + 2, :] = g.T @ a[i:i + 2, :]
    a = np.triu(a) - np.triu(a, width + 1)  # the rotations' small fill below is dropped
    want = _want(a)
    got = band.singular_values(a, width, final=8)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15 * want[0] * n)
    big = want > 1e-4
    np.testing.assert_allclose(got[big], want[big], rtol=1e-10)


def test_the_steps_narrow_the_band_at_most_eightfold():
    assert band._steps(1000, 32) == [125, 32]
    assert band._steps(5000, 32) == [625, 79, 32]
    assert band._steps(40, 32) == [32]
    assert band._steps(32, 32) == []
    assert band._steps(250, 32) == [32]  # 250 / 8 is under twice 32: straight to 32


@needs_lapacke
def test_input_is_checked_and_not_changed():
    a = _band(30, 5, np.float64, shift=1.0)
    keep = a.copy()
    band.singular_values(a, 5)
    np.testing.assert_array_equal(a, keep)
    with pytest.raises(ValueError, match="square matrix"):
        band.singular_values(np.ones((3, 4)), 1)
    with pytest.raises(ValueError, match="bandwidth must be >= 0"):
        band.singular_values(np.ones((3, 3)), -1)
    with pytest.raises(ValueError, match="Fortran-ordered square matrix"):
        band.reduce_band(np.zeros((4, 4)), 3, 1)  # C order: its windows would be wrong
    with pytest.raises(ValueError, match="Fortran-ordered square matrix"):
        band.reduce_band(np.zeros((4, 4), dtype=int, order="F"), 3, 1)
    with pytest.raises(ValueError, match="final >= 1"):
        band.singular_values(np.ones((3, 3)), 1, final=0)
    bad = a.copy()
    bad[3, 4] = np.nan
    with pytest.raises(LinAlgError, match="NaN or infinite"):
        band.singular_values(bad, 5)
    ints = np.triu(np.arange(16).reshape(4, 4)) + np.eye(4, dtype=int)
    np.testing.assert_allclose(band.singular_values(ints, 3), _want(ints.astype(float)))
    assert band.singular_values(np.zeros((0, 0)), 0).shape == (0,)


def test_without_the_lapacke_routines_the_dense_svd_is_used(monkeypatch):
    a = _band(60, 20, np.float64, shift=1.0)
    monkeypatch.setattr(band, "available", lambda dtype: False)
    called = []
    monkeypatch.setattr(band, "reduce_band", lambda *args: called.append(args))
    np.testing.assert_allclose(band.singular_values(a, 20), _want(a), rtol=1e-12)
    assert not called


@needs_lapacke
def test_tiled_svd_values_use_the_band_stages(monkeypatch):
    m = np.random.default_rng(5).standard_normal((130, 110))
    calls = []
    real = band.singular_values

    def spy(a, width, **kw):
        calls.append((a.shape, width))
        return real(a, width, **kw)

    monkeypatch.setattr(band, "singular_values", spy)
    x = tg.from_numpy(m, chunks=(40, 30))  # uneven tiles: the last is 20 wide
    s = tg.linalg.svd(x, compute_uv=False).compute()
    assert calls == [((110, 110), 30)]
    np.testing.assert_allclose(s, np.linalg.svd(m, compute_uv=False), rtol=1e-10)
    bad = m.copy()
    bad[70, 50] = np.inf
    with pytest.raises(np.linalg.LinAlgError, match="NaN or infinite"):
        tg.linalg.svd(tg.from_numpy(bad, chunks=(40, 30)), compute_uv=False).compute()
