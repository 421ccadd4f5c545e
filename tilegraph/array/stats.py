"""``tilegraph.stats``: the statistical tests and moments of ``dask.array.stats``, after
``scipy.stats``, on blocked arrays (needs SciPy).

Every result is lazy: the statistics are reductions (the moments are two passes: the mean,
then the sums of powers), and the p-values are SciPy's distribution functions applied to
them block by block. Each test returns SciPy's result names (``statistic``, ``pvalue``)
as a named tuple of tilegraph arrays, to compute together with ``tg.compute(*result)``.
Unlike dask's, ``skew`` and ``kurtosis`` take ``bias=False`` (SciPy's corrections), and a
slice with no spread gives NaN as SciPy's does. Missing values are not skipped
(``nan_policy="propagate"`` only).

>>> import numpy as np, scipy.stats, tilegraph as tg
>>> a = np.random.default_rng(0).normal(size=(40, 3))
>>> res = tg.stats.ttest_1samp(tg.from_numpy(a, chunks=15), 0.1)
>>> bool(np.allclose(res.pvalue.compute(), scipy.stats.ttest_1samp(a, 0.1).pvalue))
True
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

import tilegraph.array.reductions as reductions
from tilegraph.array.core import Array, asarray
from tilegraph.array.elementwise import elemwise, where
from tilegraph.array.manipulation import concatenate

try:
    from scipy import special
    from scipy.stats import distributions
except ImportError as exc:  # pragma: no cover - scipy is a dependency of the tests
    raise ImportError("tilegraph.stats needs SciPy (pip install scipy)") from exc

__all__ = ["chisquare", "f_oneway", "kurtosis", "kurtosistest", "moment", "normaltest",
           "power_divergence", "skew", "skewtest", "ttest_1samp", "ttest_ind", "ttest_rel"]

F_onewayResult = namedtuple("F_onewayResult", ("statistic", "pvalue"))
KurtosistestResult = namedtuple("KurtosistestResult", ("statistic", "pvalue"))
NormaltestResult = namedtuple("NormaltestResult", ("statistic", "pvalue"))
Power_divergenceResult = namedtuple("Power_divergenceResult", ("statistic", "pvalue"))
SkewtestResult = namedtuple("SkewtestResult", ("statistic", "pvalue"))
Ttest_1sampResult = namedtuple("Ttest_1sampResult", ("statistic", "pvalue"))
Ttest_indResult = namedtuple("Ttest_indResult", ("statistic", "pvalue"))
Ttest_relResult = namedtuple("Ttest_relResult", ("statistic", "pvalue"))

_LAMBDAS = {"pearson": 1, "log-likelihood": 0, "freeman-tukey": -0.5,
            "mod-log-likelihood": -1, "neyman": -2, "cressie-read": 2 / 3}


def _array(a: Any) -> Array:
    x = a if isinstance(a, Array) else asarray(a)
    return x if x.dtype.kind in "fc" else x.astype(np.float64)


def _propagate(op: str, nan_policy: str) -> None:
    if nan_policy != "propagate":
        raise NotImplementedError(f"stats.{op}: nan_policy={nan_policy!r} is not "
                                  "supported; only 'propagate' (mask the values first "
                                  "with tg.ma, or drop them)")


def _axis(op: str, a: Array, axis: Any) -> tuple[Array, int]:
    if axis is None:
        return a.reshape(-1), 0
    axis = int(axis)
    if not -a.ndim <= axis < a.ndim:
        raise np.exceptions.AxisError(f"stats.{op}: axis {axis} is out of bounds for an "
                                      f"array of {a.ndim} dimensions")
    return a, axis % a.ndim


def _sf(dist: Any, x: Any, *params: Any) -> Array:
    """``dist.sf(x, *params)`` block by block (``x`` and array ``params`` broadcast)."""
    return elemwise(dist.sf, x, *params, dtype=np.float64, name=f"{dist.name}.sf")


def _central(a: Array, order: int, axis: int, mean: Array) -> Array:
    return reductions.mean((a - mean) ** order, axis=axis)


def moment(a: Any, moment: int = 1, axis: Any = 0, nan_policy: str = "propagate") -> Array:
    """The ``moment``-th central moment along ``axis`` (``scipy.stats.moment``)."""
    from tilegraph.array.routines import moment as _moment

    _propagate("moment", nan_policy)
    a, axis = _axis("moment", _array(a), axis)
    return _moment(a, moment, axis=axis)


def _moments(a: Array, axis: int, orders: tuple[int, ...]) -> tuple[Array, list[Array]]:
    mean = reductions.mean(a, axis=axis, keepdims=True)
    return mean, [_central(a, k, axis, mean) for k in orders]


def _no_spread(m2: Array, mean: Array, axis: int) -> Array:
    eps = np.finfo(m2.dtype if m2.dtype.kind == "f" else np.float64).eps
    return m2 <= (eps * mean.squeeze(axis)) ** 2


def skew(a: Any, axis: Any = 0, bias: bool = True, nan_policy: str = "propagate") -> Array:
    """The sample skewness along ``axis`` (``scipy.stats.skew``; ``bias=False`` the
    adjusted Fisher-Pearson coefficient)."""
    _propagate("skew", nan_policy)
    a, axis = _axis("skew", _array(a), axis)
    n = a.shape[axis]
    mean, (m2, m3) = _moments(a, axis, (2, 3))
    zero = _no_spread(m2, mean, axis)
    ratio = m3 / where(zero, 1.0, m2) ** 1.5  # no division by zero where there is no spread
    vals = where(zero, np.nan, ratio)
    if not bias and n > 2:
        vals = where(zero, vals, math.sqrt((n - 1.0) * n) / (n - 2.0) * ratio)
    return vals


def kurtosis(a: Any, axis: Any = 0, fisher: bool = True, bias: bool = True,
             nan_policy: str = "propagate") -> Array:
    """The sample kurtosis along ``axis`` (``scipy.stats.kurtosis``: Fisher's, 0 for a
    normal distribution, by default; ``bias=False`` corrected for statistical bias)."""
    _propagate("kurtosis", nan_policy)
    a, axis = _axis("kurtosis", _array(a), axis)
    n = a.shape[axis]
    mean, (m2, m4) = _moments(a, axis, (2, 4))
    zero = _no_spread(m2, mean, axis)
    ratio = m4 / where(zero, 1.0, m2) ** 2.0  # no division by zero where there is no spread
    vals = where(zero, np.nan, ratio)
    if not bias and n > 3:
        nval = 1.0 / (n - 2) / (n - 3) * ((n ** 2 - 1.0) * ratio - 3 * (n - 1) ** 2.0)
        vals = where(zero, vals, nval + 3.0)
    return vals - 3 if fisher else vals


def skewtest(a: Any, axis: Any = 0, nan_policy: str = "propagate",
             alternative: str = "two-sided") -> SkewtestResult:
    """Whether the skew differs from a normal distribution's (``scipy.stats.skewtest``)."""
    _propagate("skewtest", nan_policy)
    a, axis = _axis("skewtest", _array(a), axis)
    b2 = skew(a, axis)
    n = float(a.shape[axis])
    if n < 8:
        raise ValueError(f"stats.skewtest: not valid with less than 8 samples; {int(n)} "
                         "samples were given")
    y = b2 * math.sqrt(((n + 1) * (n + 3)) / (6.0 * (n - 2)))
    beta2 = (3.0 * (n ** 2 + 27 * n - 70) * (n + 1) * (n + 3)
             / ((n - 2.0) * (n + 5) * (n + 7) * (n + 9)))
    w2 = -1 + math.sqrt(2 * (beta2 - 1))
    delta = 1 / math.sqrt(0.5 * math.log(w2))
    alpha = math.sqrt(2.0 / (w2 - 1))
    y = where(y == 0, 1, y)
    z = delta * np.log(y / alpha + np.sqrt((y / alpha) ** 2 + 1))
    return SkewtestResult(z, _two_sided("skewtest", z, alternative))


def _two_sided(op: str, z: Array, alternative: str) -> Array:
    if alternative == "two-sided":
        return 2 * _sf(distributions.norm, np.abs(z))
    if alternative == "greater":
        return _sf(distributions.norm, z)
    if alternative == "less":
        return _sf(distributions.norm, -z)
    raise ValueError(f"stats.{op}: alternative must be 'two-sided', 'less' or 'greater', "
                     f"got {alternative!r}")


def kurtosistest(a: Any, axis: Any = 0, nan_policy: str = "propagate",
                 alternative: str = "two-sided") -> KurtosistestResult:
    """Whether the kurtosis differs from a normal distribution's
    (``scipy.stats.kurtosistest``)."""
    _propagate("kurtosistest", nan_policy)
    a, axis = _axis("kurtosistest", _array(a), axis)
    n = float(a.shape[axis])
    if n < 5:
        raise ValueError(f"stats.kurtosistest: not valid with less than 5 samples; {int(n)} "
                         "samples were given")
    b2 = kurtosis(a, axis, fisher=False)
    e = 3.0 * (n - 1) / (n + 1)
    varb2 = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) * (n + 1.0) * (n + 3) * (n + 5))
    x = (b2 - e) / math.sqrt(varb2)
    sqrtbeta1 = (6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9))
                 * math.sqrt((6.0 * (n + 3) * (n + 5)) / (n * (n - 2) * (n - 3))))
    big_a = 6.0 + 8.0 / sqrtbeta1 * (2.0 / sqrtbeta1 + math.sqrt(1 + 4.0 / sqrtbeta1 ** 2))
    term1 = 1 - 2 / (9.0 * big_a)
    denom = 1 + x * math.sqrt(2 / (big_a - 4.0))
    with np.errstate(all="ignore"):
        term2 = np.sign(denom) * where(denom == 0.0, np.nan,
                                       ((1 - 2.0 / big_a) / np.abs(denom)) ** (1 / 3.0))
    z = (term1 - term2) / math.sqrt(2 / (9.0 * big_a))
    return KurtosistestResult(z, _two_sided("kurtosistest", z, alternative))


def normaltest(a: Any, axis: Any = 0, nan_policy: str = "propagate") -> NormaltestResult:
    """D'Agostino and Pearson's test of normality (``scipy.stats.normaltest``)."""
    _propagate("normaltest", nan_policy)
    s, _ = skewtest(a, axis)
    k, _ = kurtosistest(a, axis)
    k2 = s * s + k * k
    return NormaltestResult(k2, _sf(distributions.chi2, k2, 2))


def _ttest_finish(df: Any, t: Array) -> Array:
    return 2 * _sf(distributions.t, np.abs(t), df)


def ttest_1samp(a: Any, popmean: Any, axis: Any = 0, nan_policy: str = "propagate"
                ) -> Ttest_1sampResult:
    """The t-test of the mean of one sample (``scipy.stats.ttest_1samp``)."""
    _propagate("ttest_1samp", nan_policy)
    a, axis = _axis("ttest_1samp", _array(a), axis)
    n = a.shape[axis]
    d = reductions.mean(a, axis=axis) - popmean
    v = reductions.var(a, axis=axis, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = d / np.sqrt(v / float(n))
    return Ttest_1sampResult(t, _ttest_finish(n - 1, t))


def ttest_rel(a: Any, b: Any, axis: Any = 0, nan_policy: str = "propagate"
              ) -> Ttest_relResult:
    """The t-test of two related samples (``scipy.stats.ttest_rel``)."""
    _propagate("ttest_rel", nan_policy)
    a, b = _array(a), _array(b)
    if a.shape != b.shape:
        raise ValueError(f"stats.ttest_rel: unequal shapes {a.shape} and {b.shape}")
    d, axis = _axis("ttest_rel", a - b, axis)
    n = d.shape[axis]
    v = reductions.var(d, axis=axis, ddof=1)
    dm = reductions.mean(d, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = dm / np.sqrt(v / float(n))
    return Ttest_relResult(t, _ttest_finish(float(n - 1), t))


def ttest_ind(a: Any, b: Any, axis: Any = 0, equal_var: bool = True,
              nan_policy: str = "propagate") -> Ttest_indResult:
    """The t-test of the means of two independent samples (``scipy.stats.ttest_ind``;
    Welch's with ``equal_var=False``)."""
    _propagate("ttest_ind", nan_policy)
    a, axis_a = _axis("ttest_ind", _array(a), axis)
    b, axis_b = _axis("ttest_ind", _array(b), axis)
    v1 = reductions.var(a, axis=axis_a, ddof=1)
    v2 = reductions.var(b, axis=axis_b, ddof=1)
    n1, n2 = a.shape[axis_a], b.shape[axis_b]
    with np.errstate(divide="ignore", invalid="ignore"):
        if equal_var:
            df: Any = n1 + n2 - 2.0
            svar = ((n1 - 1) * v1 + (n2 - 1) * v2) / df
            denom = np.sqrt(svar * (1.0 / n1 + 1.0 / n2))
        else:
            vn1, vn2 = v1 / n1, v2 / n2
            df = (vn1 + vn2) ** 2 / (vn1 ** 2 / (n1 - 1) + vn2 ** 2 / (n2 - 1))
            df = where(np.isnan(df), 1, df)
            denom = np.sqrt(vn1 + vn2)
        t = (reductions.mean(a, axis=axis_a) - reductions.mean(b, axis=axis_b)) / denom
    return Ttest_indResult(t, _ttest_finish(df, t))


def power_divergence(f_obs: Any, f_exp: Any = None, ddof: int = 0, axis: Any = 0,
                     lambda_: Any = None) -> Power_divergenceResult:
    """Cressie-Read's power divergence statistic and goodness of fit test
    (``scipy.stats.power_divergence``)."""
    if isinstance(lambda_, str):
        if lambda_ not in _LAMBDAS:
            raise ValueError(f"stats.power_divergence: invalid string for lambda_: "
                             f"{lambda_!r}; valid strings are {sorted(_LAMBDAS)}")
        lambda_ = _LAMBDAS[lambda_]
    elif lambda_ is None:
        lambda_ = 1
    flat = axis is None
    obs, axis = _axis("power_divergence", _array(f_obs), axis)
    if f_exp is None:
        exp: Any = reductions.mean(obs, axis=axis, keepdims=True)
    else:
        exp = _array(f_exp).reshape(-1) if flat else _array(f_exp)
    with np.errstate(all="ignore"):
        if lambda_ == 1:
            terms = (obs - exp) ** 2 / exp
        elif lambda_ == 0:
            terms = 2.0 * elemwise(special.xlogy, obs, obs / exp, name="xlogy")
        elif lambda_ == -1:
            terms = 2.0 * elemwise(special.xlogy, exp, exp / obs, name="xlogy")
        else:
            terms = obs * ((obs / exp) ** lambda_ - 1) / (0.5 * lambda_ * (lambda_ + 1))
    stat = reductions.sum(terms, axis=axis)
    k = terms.shape[axis]
    return Power_divergenceResult(stat, _sf(distributions.chi2, stat, k - 1 - ddof))


def chisquare(f_obs: Any, f_exp: Any = None, ddof: int = 0, axis: Any = 0
              ) -> Power_divergenceResult:
    """Pearson's chi-square test (``scipy.stats.chisquare``)."""
    return power_divergence(f_obs, f_exp=f_exp, ddof=ddof, axis=axis, lambda_="pearson")


def f_oneway(*args: Any) -> F_onewayResult:
    """One-way ANOVA of several 1-d samples (``scipy.stats.f_oneway``)."""
    groups = [_array(a).reshape(-1) for a in args]
    if len(groups) < 2:
        raise TypeError(f"stats.f_oneway: at least two samples are required; "
                        f"{len(groups)} given")
    alldata = concatenate(groups)
    bign = alldata.shape[0]
    offset = reductions.mean(alldata)
    centred = alldata - offset
    sq_of_sums = reductions.sum(centred) ** 2 / float(bign)
    sstot = reductions.sum(centred * centred) - sq_of_sums
    ssbn: Any = 0
    for g in groups:
        ssbn = ssbn + reductions.sum(g - offset) ** 2 / float(g.shape[0])
    ssbn = ssbn - sq_of_sums
    sswn = sstot - ssbn
    dfbn = len(groups) - 1
    dfwn = bign - len(groups)
    with np.errstate(all="ignore"):
        f = (ssbn / float(dfbn)) / (sswn / float(dfwn))
    prob = elemwise(special.fdtrc, dfbn, dfwn, f, dtype=np.float64, name="fdtrc")
    return F_onewayResult(f, prob)
