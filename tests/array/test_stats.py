"""tilegraph.stats (dask.array.stats) against scipy.stats on uneven blocks: the tests'
statistics and p-values, skew/kurtosis with and without bias correction, a slice with no
spread (NaN, as SciPy), several dtypes, lazy results, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as ss

import tilegraph as tg

rng = np.random.default_rng(21)
S = rng.normal(0.3, 1.0, (40, 3))
T = rng.normal(0.0, 1.3, (40, 3))


def x_of(a, dtype=np.float64):
    return tg.from_numpy(a.astype(dtype), chunks=(15, 2))


def close(got, want, rtol=1e-7):
    """``got`` (a tilegraph array, or a tuple of them) equals ``want`` (the same from
    SciPy)."""
    if isinstance(got, tg.Array):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, tg.Array)
        np.testing.assert_allclose(g.compute(), w, rtol=rtol, atol=rtol * 0.1, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_tests_and_moments_match_scipy(dtype, forbid_compute):
    a, b = S.astype(dtype), T.astype(dtype)
    if np.dtype(dtype).kind == "i":
        a, b = (S * 10).astype(dtype), (T * 10).astype(dtype)
    xa, xb = x_of(a, dtype), x_of(b, dtype)
    rtol = 1e-4 if dtype == np.float32 else 1e-7
    results = [
        (tg.stats.ttest_1samp(xa, 0.1), ss.ttest_1samp(a, 0.1)),
        (tg.stats.ttest_ind(xa, xb), ss.ttest_ind(a, b)),
        (tg.stats.ttest_ind(xa, xb, equal_var=False), ss.ttest_ind(a, b, equal_var=False)),
        (tg.stats.ttest_rel(xa, xb), ss.ttest_rel(a, b)),
        (tg.stats.skewtest(xa), ss.skewtest(a)),
        (tg.stats.kurtosistest(xa), ss.kurtosistest(a)),
        (tg.stats.normaltest(xa), ss.normaltest(a)),
    ]
    with tg.config.set(backend="sync"):
        for got, want in results:
            assert type(got).__name__ == type(want).__name__ or type(got)._fields == (
                "statistic", "pvalue")
            close((got.statistic, got.pvalue), (want.statistic, want.pvalue), rtol)
        for bias in (True, False):
            close(tg.stats.skew(xa, bias=bias), ss.skew(a, bias=bias), rtol)
            close(tg.stats.kurtosis(xa, bias=bias), ss.kurtosis(a, bias=bias), rtol)
            close(tg.stats.kurtosis(xa, fisher=False, bias=bias),
                  ss.kurtosis(a, fisher=False, bias=bias), rtol)
        close(tg.stats.moment(xa, 3), ss.moment(a, 3), rtol)
        close(tg.stats.skew(xa, axis=None), ss.skew(a, axis=None), rtol)


def test_chisquare_power_divergence_f_oneway():
    obs = np.array([16.0, 18, 16, 14, 12, 12])
    x = tg.from_numpy(obs, chunks=4)
    exp = np.full(6, obs.sum() / 6)
    for lam in (None, "log-likelihood", "mod-log-likelihood", "cressie-read", -2, 0.5):
        got = tg.stats.power_divergence(x, lambda_=lam)
        want = ss.power_divergence(obs, lambda_=lam)
        close((got.statistic, got.pvalue), (want.statistic, want.pvalue))
    got = tg.stats.chisquare(x, f_exp=tg.from_numpy(exp, chunks=4), ddof=1)
    close((got.statistic, got.pvalue), tuple(ss.chisquare(obs, exp, ddof=1)))
    two = np.stack([obs, obs[::-1] + 1], axis=1)
    close(tg.stats.chisquare(tg.from_numpy(two, chunks=(4, 1)))[0], ss.chisquare(two)[0])
    groups = [S[:, 0], T[:17, 1], S[5:30, 2]]
    got = tg.stats.f_oneway(*[tg.from_numpy(g, chunks=7) for g in groups])
    want = ss.f_oneway(*groups)
    close((got.statistic, got.pvalue), (want.statistic, want.pvalue))


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # SciPy's
def test_no_spread_is_nan_as_scipy():
    flat = np.ones((10, 2))
    with np.errstate(all="ignore"):
        close(tg.stats.skew(tg.from_numpy(flat, chunks=4)), ss.skew(flat))
        close(tg.stats.kurtosis(tg.from_numpy(flat, chunks=4)), ss.kurtosis(flat))


def test_bad_input(forbid_compute):
    x = x_of(S)
    with pytest.raises(NotImplementedError, match="nan_policy"):
        tg.stats.skew(x, nan_policy="omit")
    with pytest.raises(ValueError, match="less than 8 samples"):
        tg.stats.skewtest(x[:5])
    with pytest.raises(ValueError, match="invalid string for lambda_"):
        tg.stats.power_divergence(x, lambda_="bogus")
    with pytest.raises(ValueError, match="unequal shapes"):
        tg.stats.ttest_rel(x, x[:10])
    with pytest.raises(TypeError, match="at least two samples"):
        tg.stats.f_oneway(x[:, 0])
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        tg.stats.skew(x, axis=4)
    with pytest.raises(ValueError, match="alternative"):
        tg.stats.skewtest(x, alternative="sideways")
