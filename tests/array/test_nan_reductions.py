"""The NaN-skipping reductions (and var/std/mean, median, quantile) against NumPy on
inputs holding NaN, inf and -inf: uneven blocks (zero-size ones too), float32/float64,
complex and int dtypes, axis None/int/tuple, keepdims, ddof up to and past the count,
empty arrays and empty axes, slices of NaNs only.

A result equals NumPy's (NaN where NumPy has NaN, inf where it has inf, dtype and shape);
where NumPy raises, tilegraph raises an error of the same class (at build time or, when
only the data tell, as for nanargmin of a slice of NaNs, at compute time); the warnings
NumPy's functions give by name ("Mean of empty slice", "All-NaN slice encountered",
"Degrees of freedom <= 0 for slice") are given too, and no others of theirs. The
floating-point warnings ("invalid value encountered in subtract") follow the arithmetic,
which is done block by block, so they are not compared.
"""

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tilegraph as tg

SETTINGS = settings(max_examples=40, deadline=None)

SPECIAL = [np.nan, np.inf, -np.inf]


@st.composite
def axis_chunks(draw, length):
    """Uneven block sizes adding up to ``length``, now and then with a zero-size block."""
    if length <= 1:
        sizes = [length]
    else:
        cuts = sorted(draw(st.sets(st.integers(1, length - 1), max_size=length - 1)))
        sizes = [b - a for a, b in itertools.pairwise([0, *cuts, length])]
    if length and draw(st.integers(0, 4)) == 0:
        sizes.insert(draw(st.integers(0, len(sizes))), 0)
    return tuple(sizes)


def values(dtype, small):
    """Mostly small numbers, often NaN, sometimes inf or -inf (complex: in either part;
    not in products, whose complex infinities depend on the order of the factors, so a
    blocked product cannot give NumPy's: (1+0j)*((1+0j)*infj) is nan+nanj, 1*infj nan+infj).
    """
    dtype = np.dtype(dtype)
    bound = 2 if small else 10
    if dtype.kind in "iu":
        return st.integers(-bound, bound)
    special = [np.nan] if small and dtype.kind == "c" else SPECIAL
    real = st.one_of(st.floats(-bound, bound, width=32, allow_subnormal=False),
                     st.sampled_from(special), st.just(np.nan))
    if dtype.kind == "c":
        return st.builds(complex, real, st.one_of(st.just(0.0), real))
    return real


@st.composite
def blocked(draw, dtypes=("float32", "float64"), small=False, max_dims=3):
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=5))
    a = draw(hnp.arrays(dtype, shape, elements=values(dtype, small)))
    if draw(st.integers(0, 5)) == 0 and a.ndim:  # a slice of NaNs only
        a[..., draw(st.integers(0, a.shape[-1] - 1)) if a.shape[-1] else slice(0)] = np.nan \
            if dtype.kind in "fc" else 0
    chunks = tuple(draw(axis_chunks(n)) for n in shape)
    return a, tg.from_numpy(a, chunks=chunks)


@st.composite
def axes_for(draw, ndim, single=False):
    choices = [st.none()]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        if not single:
            choices.append(st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim,
                                    max_size=ndim).map(tuple))
    elif not single:
        choices.append(st.just(()))
    return draw(st.one_of(choices))


def named_warnings(record):
    """The warnings NumPy's functions give by name (not the floating-point ones)."""
    return sorted({str(w.message).rstrip(".") for w in record
                   if " encountered in " not in str(w.message)})


def outcome(fn):
    """(value, error, named warnings) of ``fn()``; an Array is computed."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            value = fn()
            if isinstance(value, tg.Array):
                value = value.compute()
        except (ValueError, TypeError, IndexError) as exc:
            return None, exc, named_warnings(record)
    return value, None, named_warnings(record)


def check_like_numpy(build, reference):
    want, error, want_warnings = outcome(reference)
    got, got_error, got_warnings = outcome(build)
    if error is not None:
        assert type(got_error) is type(error) or isinstance(got_error, type(error)), \
            (error, got_error)
        if "All-NaN" in str(error):
            assert str(got_error).startswith(str(error))
        return
    assert got_error is None, (got_error, want)
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        finite = np.isfinite(want)
        single = want.dtype in (np.float32, np.complex64) or want.dtype == np.float16
        rtol, atol = (2e-4, 2e-4) if single else (1e-9, 1e-9)
        np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)
        np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    else:
        np.testing.assert_array_equal(got, want)
    assert got_warnings == want_warnings


# -- the reductions -------------------------------------------------------------------------

REDUCTIONS = ["nansum", "nanmean", "nanmin", "nanmax", "mean"]


@SETTINGS
@given(data=st.data(), keepdims=st.booleans(), name=st.sampled_from(REDUCTIONS))
def test_nan_reductions_match_numpy(data, keepdims, name):
    a, x = data.draw(blocked(dtypes=("float32", "float64", "complex128", "int64")))
    axis = data.draw(axes_for(a.ndim))
    func = getattr(np, name)
    check_like_numpy(lambda: func(x, axis=axis, keepdims=keepdims),
                     lambda: func(a, axis=axis, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), keepdims=st.booleans())
def test_nanprod_matches_numpy(data, keepdims):
    a, x = data.draw(blocked(dtypes=("float32", "float64", "complex128", "int64"), small=True))
    axis = data.draw(axes_for(a.ndim))
    check_like_numpy(lambda: np.nanprod(x, axis=axis, keepdims=keepdims),
                     lambda: np.nanprod(a, axis=axis, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), keepdims=st.booleans(), ddof=st.integers(0, 4),
       name=st.sampled_from(["nanvar", "nanstd", "var", "std"]))
def test_variances_match_numpy(data, keepdims, ddof, name):
    a, x = data.draw(blocked(dtypes=("float32", "float64", "complex64", "int32")))
    axis = data.draw(axes_for(a.ndim))
    func = getattr(np, name)
    check_like_numpy(lambda: func(x, axis=axis, ddof=ddof, keepdims=keepdims),
                     lambda: func(a, axis=axis, ddof=ddof, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), keepdims=st.booleans(), name=st.sampled_from(["nanargmin",
                                                                      "nanargmax"]))
def test_nanargmin_nanargmax_match_numpy(data, keepdims, name):
    a, x = data.draw(blocked(dtypes=("float32", "float64", "complex128", "int64")))
    axis = data.draw(axes_for(a.ndim, single=True))
    func = getattr(np, name)
    check_like_numpy(lambda: func(x, axis=axis, keepdims=keepdims),
                     lambda: func(a, axis=axis, keepdims=keepdims))


@settings(max_examples=25, deadline=None)
@given(data=st.data(), keepdims=st.booleans(),
       name=st.sampled_from(["nanmedian", "nanquantile", "nanpercentile", "median"]))
def test_order_statistics_match_numpy(data, keepdims, name):
    a, x = data.draw(blocked(dtypes=("float32", "float64", "int64"), max_dims=2))
    axis = data.draw(axes_for(a.ndim))
    func = getattr(np, name)
    q = () if "median" in name else (data.draw(st.sampled_from([0.0, 0.3, 0.5, 1.0])),)
    if "percentile" in name:
        q = (q[0] * 100,)
    check_like_numpy(lambda: func(x, *q, axis=axis, keepdims=keepdims),
                     lambda: func(a, *q, axis=axis, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["nancumsum", "nancumprod"]))
def test_nan_scans_match_numpy(data, name):
    a, x = data.draw(blocked(dtypes=("float32", "float64", "complex128", "int64"),
                             small=True))
    axis = data.draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1))) if a.ndim \
        else None
    func = getattr(np, name)
    check_like_numpy(lambda: func(x, axis=axis), lambda: func(a, axis=axis))


# -- the cases the probes found, spelled out ------------------------------------------------


def test_nanstd_with_inf_is_nan_as_numpy():
    a = np.array([[1.0, np.inf, 3.0, np.nan], [np.nan] * 4, [1, 2, 3, 4.0],
                  [np.inf, -np.inf, 1, 2]])
    x = tg.from_numpy(a, chunks=(3, 3))
    for name in ("nanstd", "nanvar", "var", "std", "nanmean"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(a, axis=1)
            got = getattr(np, name)(x, axis=1).compute()
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_all_nan_slices_warn_and_raise_as_numpy():
    a = np.array([[np.nan, np.nan, np.nan], [1.0, np.nan, 2.0]])
    x = tg.from_numpy(a, chunks=(1, 2))
    with pytest.warns(RuntimeWarning, match="All-NaN slice encountered"):
        got = np.nanmin(x, axis=1).compute()
    np.testing.assert_array_equal(got, [np.nan, 1.0])
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        np.testing.assert_array_equal(np.nanmean(x, axis=1).compute(), [np.nan, 1.5])
    with pytest.warns(RuntimeWarning, match=r"Degrees of freedom <= 0 for slice\."):
        got = np.nanvar(x, axis=1, ddof=2).compute()
    np.testing.assert_array_equal(got, [np.nan, np.nan])
    lazy = np.nanargmax(x, axis=1)  # building is fine: only the data tell
    with pytest.raises(ValueError, match=r"^All-NaN slice encountered"):
        lazy.compute()
    with pytest.raises(ValueError, match=r"^All-NaN slice encountered"):
        np.nanargmin(x[:1]).compute()
    assert np.nanargmin(x[1:]).compute() == 0
    assert np.nanargmax(x[1:], axis=1).compute().tolist() == [2]


def test_nan_functions_reject_bad_input():
    x = tg.from_numpy(np.array([1.0, np.nan, 2.0]), chunks=2)
    with pytest.raises(TypeError, match="dtype must be inexact"):
        np.nanmean(x, dtype=np.int64)
    with pytest.raises(TypeError, match="dtype must be inexact"):
        tg.nanvar(x, dtype=int)
    with pytest.raises(np.exceptions.AxisError, match="nanstd: axis 3"):
        tg.nanstd(x, axis=3)
    with pytest.raises(TypeError, match="nanargmin: axis must be None or an int"):
        tg.nanargmin(x, axis=(0,))
    with pytest.raises(ValueError, match="nanmax: zero-size reduction"):
        tg.nanmax(x[:0])
    with pytest.raises(TypeError, match="out= is not supported"):
        tg.nanstd(x, out=np.empty(()))
    with pytest.raises(TypeError, match="ddof must be a number"):
        tg.nanvar(x, ddof="1")


def test_nanvar_is_one_pass():
    """nanvar reads each block once: one partial task per block, no task over the
    squares of the deviations from a mean computed first."""
    from tilegraph.array.lowering import plan_arrays

    x = tg.from_numpy(np.arange(24.0).reshape(4, 6), chunks=(2, 3))
    names = [getattr(f, "__name__", "") for f in
             plan_arrays([tg.nanvar(x, axis=0)], fuse=False).graph.funcs]
    assert names.count("nanvar-moments") == 4
    assert "nanmean" not in names and "nan-fill" not in names


def test_xarray_rolling_std_with_inf_matches_numpy():
    """xarray's rolling std on tilegraph blocks (nanvar underneath) equals NumPy's."""
    xr = pytest.importorskip("xarray")
    import tilegraph.interop.xarray  # noqa: F401  (registers the chunk manager)

    a = np.array([1.0, 2, np.inf, 4, 5, np.nan, 7, 8, 1, 2])
    da = xr.DataArray(a, dims="t")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = da.rolling(t=3, min_periods=1).std().values
        got = da.chunk({"t": 3}, chunked_array_type="tilegraph").rolling(
            t=3, min_periods=1).std().compute().values
    np.testing.assert_allclose(got, want, equal_nan=True)
