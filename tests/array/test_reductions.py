"""Reductions against NumPy: sum, prod, mean, var, std, min, max, argmin, argmax, any, all
over random shapes, uneven blocks, dtypes, axes and keepdims; tree reductions; ties and NaN;
zero-size reductions; build-time errors; laziness."""

import itertools

import numpy as np
import pytest
from _blocked import check_values
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays

SETTINGS = settings(max_examples=60, deadline=None)

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.complex128]

pytestmark = pytest.mark.filterwarnings(
    "ignore:(Mean of empty slice|Degrees of freedom|invalid value|divide by zero)"
    ":RuntimeWarning")


@st.composite
def axis_chunks(draw, length, empty_blocks=False):
    """Explicit, usually uneven, block sizes adding up to ``length`` (with some blocks of
    size 0 when ``empty_blocks``)."""
    if length <= 1:
        sizes = [length]
    else:
        cuts = sorted(draw(st.sets(st.integers(1, length - 1), max_size=length - 1)))
        bounds = [0, *cuts, length]
        sizes = [b - a for a, b in itertools.pairwise(bounds)]
    if empty_blocks and length and draw(st.integers(0, 3)) == 0:
        sizes.insert(draw(st.integers(0, len(sizes))), 0)
    return tuple(sizes)


def elements(dtype, small=False):
    dtype = np.dtype(dtype)
    bound = 2 if small else 10
    if dtype.kind == "f":
        return st.floats(-bound, bound, width=8 * dtype.itemsize, allow_subnormal=False)
    if dtype.kind == "c":
        return st.complex_numbers(max_magnitude=bound, allow_nan=False, allow_infinity=False,
                                  allow_subnormal=False)
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(-bound, bound)


@st.composite
def blocked(draw, dtypes=DTYPES, small=False, empty_blocks=True, elements_of=elements):
    """(NumPy array, tilegraph Array over it) with 0-3 dims, random uneven blocks."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    ref = draw(hnp.arrays(dtype, shape, elements=elements_of(dtype, small)))
    chunks = tuple(draw(axis_chunks(n, empty_blocks)) for n in shape)
    x = tg.from_numpy(ref, chunks=chunks)
    assert x.chunks == chunks
    return ref, x


@st.composite
def axes_for(draw, ndim, single=False):
    """None, an int (maybe negative) or a tuple of distinct axes (maybe empty)."""
    choices = [st.none()]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
        if not single:
            choices.append(st.lists(st.integers(-ndim, ndim - 1), unique_by=lambda a: a % ndim,
                                    max_size=ndim).map(tuple))
    elif not single:
        choices.append(st.just(()))
    return draw(st.one_of(choices))


def check(result, expected):
    """``result`` (an Array) computes to ``expected``: same shape, dtype and values."""
    return check_values(result, expected, tol32=(1e-4, 1e-3), tol64=(1e-10, 1e-10))


def numpy_or_error(fn):
    try:
        with np.errstate(all="ignore"):
            return fn(), None
    except (ValueError, TypeError) as exc:
        return None, exc


def check_like_numpy(build, reference):
    """The tilegraph result of ``build()`` equals NumPy's ``reference()``; where NumPy
    raises, building (not computing) raises the same kind of error."""
    expected, error = numpy_or_error(reference)
    if error is not None:
        with pytest.raises(type(error)):
            build()
        return
    check(build(), expected)


# -- property tests against NumPy -----------------------------------------------------------


@SETTINGS
@given(data=st.data(), keepdims=st.booleans(),
       name=st.sampled_from(["sum", "mean", "min", "max", "any", "all"]))
def test_reductions_match_numpy(data, keepdims, name):
    a, x = data.draw(blocked())
    axis = data.draw(axes_for(a.ndim))
    check_like_numpy(lambda: getattr(x, name)(axis=axis, keepdims=keepdims),
                     lambda: getattr(np, name)(a, axis=axis, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), keepdims=st.booleans())
def test_prod_matches_numpy(data, keepdims):
    a, x = data.draw(blocked(small=True))
    axis = data.draw(axes_for(a.ndim))
    check_like_numpy(lambda: x.prod(axis=axis, keepdims=keepdims),
                     lambda: np.prod(a, axis=axis, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), keepdims=st.booleans(), ddof=st.integers(0, 2),
       name=st.sampled_from(["var", "std"]))
def test_var_std_match_numpy(data, keepdims, ddof, name):
    a, x = data.draw(blocked())
    axis = data.draw(axes_for(a.ndim))
    check_like_numpy(lambda: getattr(x, name)(axis=axis, ddof=ddof, keepdims=keepdims),
                     lambda: getattr(np, name)(a, axis=axis, ddof=ddof, keepdims=keepdims))


def tie_elements(dtype, small=False):
    """Few distinct values (so ties are common), and NaN for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return st.sampled_from([-1.0, 0.0, 2.0, np.nan])
    if dtype.kind == "c":
        return st.sampled_from([0j, 1 + 0j, 1 - 1j, -1j, complex(0, np.nan)])
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(-1, 1)


@SETTINGS
@given(data=st.data(), keepdims=st.booleans(), name=st.sampled_from(["argmin", "argmax"]))
def test_argmin_argmax_match_numpy_with_ties_and_nan(data, keepdims, name):
    a, x = data.draw(blocked(elements_of=tie_elements))
    axis = data.draw(axes_for(a.ndim, single=True))
    check_like_numpy(lambda: getattr(x, name)(axis=axis, keepdims=keepdims),
                     lambda: getattr(np, name)(a, axis=axis, keepdims=keepdims))


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["min", "max"]))
def test_min_max_with_nan_and_ties_match_numpy(data, name):
    a, x = data.draw(blocked(dtypes=[np.float32, np.float64, np.complex128],
                             elements_of=tie_elements))
    axis = data.draw(axes_for(a.ndim))
    check_like_numpy(lambda: getattr(x, name)(axis=axis),
                     lambda: getattr(np, name)(a, axis=axis))


@SETTINGS
@given(data=st.data(), name=st.sampled_from(["sum", "prod", "mean", "var", "std", "min",
                                             "max", "argmin", "argmax", "any", "all"]))
def test_numpy_functions_dispatch_to_reductions(data, name):
    a, x = data.draw(blocked(dtypes=[np.float64, np.int32], small=True, empty_blocks=False))
    axis = data.draw(axes_for(a.ndim, single=name.startswith("arg")))
    func = getattr(np, name)
    expected, error = numpy_or_error(lambda: func(a, axis=axis))
    if error is not None:
        with pytest.raises(type(error)):
            func(x, axis=axis)
        return
    result = func(x, axis=axis)  # through __array_function__
    check(result, expected)


# -- tree reductions ---------------------------------------------------------------------------


def tree_levels(array):
    graph = plan_arrays([array], fuse=False).graph
    return {k[-2] for k in graph if isinstance(k, tuple) and str(k[0]).endswith("-tree")}


def test_tree_reduction_with_many_blocks_and_split_every_2(backend_options):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(100)
    x = tg.from_numpy(a, chunks=((3,) * 33 + (1,),))
    assert x.npartitions == 34
    results = {
        "sum": x.sum(split_every=2), "prod": (x / 2 + 1).prod(split_every=2),
        "mean": x.mean(split_every=2), "var": x.var(split_every=2, ddof=1),
        "std": x.std(split_every=2), "min": x.min(split_every=2),
        "max": x.max(split_every=2), "argmin": x.argmin(split_every=2),
        "argmax": x.argmax(split_every=2), "any": (x > 2.5).any(split_every=2),
        "all": (x > -5).all(split_every=2),
    }
    assert len(tree_levels(results["sum"])) >= 4  # 34 -> 17 -> 9 -> 5 -> 3 -> final
    expected = {
        "sum": a.sum(), "prod": (a / 2 + 1).prod(), "mean": a.mean(), "var": a.var(ddof=1),
        "std": a.std(), "min": a.min(), "max": a.max(), "argmin": a.argmin(),
        "argmax": a.argmax(), "any": (a > 2.5).any(), "all": (a > -5).all(),
    }
    got = tg.compute(*results.values(), **backend_options)
    for (name, g), e in zip(zip(results, got, strict=True), expected.values(), strict=True):
        assert np.asarray(g).dtype == np.asarray(e).dtype, name
        np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=name)


def test_tree_reduction_2d_over_both_axes_and_one_axis():
    rng = np.random.default_rng(1)
    a = rng.integers(-50, 50, size=(37, 23)).astype(np.float64)
    x = tg.from_numpy(a, chunks=((2,) * 18 + (1,), (4, 4, 4, 4, 4, 3)))
    assert x.npartitions == 19 * 6
    for axis in (None, 0, 1, (0, 1), -1):
        r = x.sum(axis=axis, split_every=2)
        assert len(tree_levels(r)) >= 2
        check(r, a.sum(axis=axis))
        check(x.mean(axis=axis, split_every=3), a.mean(axis=axis))
        check(x.var(axis=axis, split_every=2), a.var(axis=axis))
        check(x.max(axis=axis, split_every=2, keepdims=True), a.max(axis=axis, keepdims=True))
    for axis in (None, 0, 1):
        check(x.argmin(axis=axis, split_every=2), a.argmin(axis=axis))
        check(x.argmax(axis=axis, split_every=2), a.argmax(axis=axis))


def test_argmin_argmax_first_occurrence_across_many_blocks():
    # the minimum value appears in many blocks: the first flat index must win, although
    # blocks are combined in their own (C) order, which is not flat-index order
    a = np.zeros((12, 12))
    a[[1, 3, 5, 7, 9, 11], [11, 0, 4, 8, 2, 5]] = -1.0
    a[[0, 2, 4, 6, 8], [10, 1, 7, 3, 0]] = 1.0
    for chunks in (3, (5, 2), ((1, 11), (11, 1)), 1):
        x = tg.from_numpy(a, chunks=chunks)
        for split_every in (2, 8):
            for axis in (None, 0, 1):
                check(x.argmin(axis=axis, split_every=split_every), a.argmin(axis=axis))
                check(x.argmax(axis=axis, split_every=split_every), a.argmax(axis=axis))


def test_argmin_argmax_nan_gives_first_nan_index():
    a = np.array([[3.0, np.nan, 1.0, 0.0], [np.nan, -1.0, np.nan, 5.0], [2, 2, 2, np.nan]])
    x = tg.from_numpy(a, chunks=((2, 1), (1, 3)))
    for axis in (None, 0, 1):
        check(x.argmin(axis=axis, split_every=2), np.argmin(a, axis=axis))
        check(x.argmax(axis=axis, split_every=2), np.argmax(a, axis=axis))
    assert x.argmax().compute() == 1
    b = np.array([0.0, 1.0, 2.0, np.nan, 5.0, np.nan])
    y = tg.from_numpy(b, chunks=1)
    assert y.argmin(split_every=2).compute() == 3 == b.argmin()


def test_min_max_with_nan_propagate_like_numpy():
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    x = tg.from_numpy(a, chunks=1)
    for axis in (None, 0, 1):
        check(x.min(axis=axis), np.min(a, axis=axis))
        check(x.max(axis=axis), np.max(a, axis=axis))


def test_blocks_of_size_zero_inside_a_reduced_axis():
    a = np.arange(12.0).reshape(3, 4)[::-1]
    x = tg.from_numpy(a, chunks=((0, 2, 0, 1), (1, 0, 3)))
    for name in ("sum", "prod", "mean", "var", "min", "max", "argmin", "argmax", "any", "all"):
        for axis in (None, 0, 1):
            check(getattr(x, name)(axis=axis, split_every=2), getattr(np, name)(a, axis=axis))


# -- dtypes ---------------------------------------------------------------------------------


def test_result_dtypes_follow_numpy():
    ints = np.arange(10, dtype=np.int32)
    x = tg.from_numpy(ints, chunks=3)
    check(x.mean(), ints.mean())
    assert x.mean().dtype == np.float64
    check(x.sum(), ints.sum())
    assert x.sum().dtype == np.sum(ints).dtype
    check(x.var(), ints.var())
    check(x.std(ddof=1), ints.std(ddof=1))
    check(x.sum(dtype=np.float32), ints.sum(dtype=np.float32))
    check(x.mean(dtype=np.float32), ints.mean(dtype=np.float32))
    check(x.prod(dtype=np.float64), ints.prod(dtype=np.float64))
    check(x.min(), ints.min())
    f32 = np.linspace(0, 1, 11, dtype=np.float32)
    y = tg.from_numpy(f32, chunks=4)
    check(y.sum(), f32.sum())
    check(y.mean(), f32.mean())
    check(y.var(), f32.var())
    check(y.sum(dtype=np.float64), f32.sum(dtype=np.float64))
    c = np.array([1 + 2j, 3 - 1j, -2 + 0.5j])
    z = tg.from_numpy(c, chunks=2)
    check(z.var(), c.var())
    check(z.std(ddof=1), c.std(ddof=1))
    check(z.mean(), c.mean())


def test_mean_of_float16_accumulates_in_float32_like_numpy():
    a = np.full(3000, 0.1, dtype=np.float16)
    x = tg.from_numpy(a, chunks=1000)
    assert x.mean().dtype == np.float16
    np.testing.assert_allclose(x.mean().compute(), a.mean(), rtol=1e-3)


def test_sum_and_mean_of_bool():
    b = np.array([[True, False, True], [True, True, False]])
    x = tg.from_numpy(b, chunks=1)
    for axis in (None, 0, 1):
        check(x.sum(axis=axis), b.sum(axis=axis))
        check(x.mean(axis=axis), b.mean(axis=axis))
        check(x.prod(axis=axis), b.prod(axis=axis))
        check(x.min(axis=axis), b.min(axis=axis))
        check(x.argmax(axis=axis), b.argmax(axis=axis))
    assert x.sum().compute() == 4 and x.sum().dtype == np.sum(b).dtype


def test_ufunc_reduce():
    a = np.arange(24.0).reshape(4, 6) - 7
    x = tg.from_numpy(a, chunks=((1, 3), (4, 2)))
    check(np.add.reduce(x), np.add.reduce(a))
    check(np.add.reduce(x, axis=1, keepdims=True), np.add.reduce(a, axis=1, keepdims=True))
    check(np.multiply.reduce(x, axis=None), np.multiply.reduce(a, axis=None))
    check(np.maximum.reduce(x, axis=0), np.maximum.reduce(a, axis=0))
    check(np.minimum.reduce(x, axis=1), np.minimum.reduce(a, axis=1))
    check(np.logical_or.reduce(x > 10, axis=0), np.logical_or.reduce(a > 10, axis=0))
    check(np.add.reduce(x, dtype=np.float32), np.add.reduce(a, dtype=np.float32))
    with pytest.raises(TypeError, match=r"subtract\.reduce"):
        np.subtract.reduce(x)


def test_zero_dim_reductions():
    a = np.array(2.5)
    x = tg.from_numpy(a)
    for name in ("sum", "prod", "mean", "var", "min", "max", "argmin", "argmax", "any",
                 "all"):
        check(getattr(x, name)(), getattr(np, name)(a))
    check(x.sum(axis=()), np.sum(a, axis=()))


# -- zero-size reductions -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["min", "max", "argmin", "argmax"])
def test_zero_size_reductions_numpy_rejects_raise_at_build_time(name, forbid_compute):
    x = tg.zeros((3, 0, 2), chunks=2)
    for axis in (None, 1, -2):
        with pytest.raises(ValueError, match=r"\(3, 0, 2\)") as info:
            getattr(x, name)(axis=axis)
        assert name in str(info.value)
        with pytest.raises(ValueError):
            getattr(np, name)(np.zeros((3, 0, 2)), axis=axis)


@pytest.mark.parametrize("name", ["min", "max", "argmin", "argmax"])
def test_zero_size_reductions_numpy_allows(name):
    a = np.zeros((3, 0, 2))
    x = tg.from_numpy(a, chunks=2)
    for axis in (0, 2, -1):
        check(getattr(x, name)(axis=axis), getattr(np, name)(a, axis=axis))


def test_reductions_over_empty_axes_with_identity():
    a = np.zeros((0, 3))
    x = tg.from_numpy(a, chunks=2)
    for axis in (None, 0, 1):
        check(x.sum(axis=axis), a.sum(axis=axis))
        check(x.prod(axis=axis), a.prod(axis=axis))
        check(x.any(axis=axis), a.any(axis=axis))
        check(x.all(axis=axis), a.all(axis=axis))
        check(x.mean(axis=axis), np.mean(a, axis=axis))  # nan where nothing is averaged
        check(x.var(axis=axis), np.var(a, axis=axis))


# -- errors at build time -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "min", "max",
                                  "argmin", "argmax", "any", "all"])
def test_bad_axis_raises_axis_error_naming_the_shape(name, forbid_compute):
    x = tg.ones((3, 4), chunks=2)
    for axis in (2, -3):
        with pytest.raises(np.exceptions.AxisError, match=r"\(3, 4\)"):
            getattr(x, name)(axis=axis)
        with pytest.raises(np.exceptions.AxisError):
            getattr(np, name)(np.ones((3, 4)), axis=axis)
    with pytest.raises(TypeError, match="axis"):
        getattr(x, name)(axis=1.0)


@pytest.mark.parametrize("name", ["sum", "mean", "var", "min", "any"])
def test_repeated_or_out_of_bounds_axis_in_tuple(name, forbid_compute):
    x = tg.ones((3, 4), chunks=2)
    with pytest.raises(ValueError, match="repeated"):
        getattr(x, name)(axis=(0, -2))
    with pytest.raises(np.exceptions.AxisError, match=r"\(3, 4\)"):
        getattr(x, name)(axis=(0, 5))


def test_argmin_rejects_tuple_axis_like_numpy(forbid_compute):
    x = tg.ones((3, 4), chunks=2)
    with pytest.raises(TypeError, match="axis"):
        x.argmin(axis=(0, 1))
    with pytest.raises(TypeError):
        np.argmin(np.ones((3, 4)), axis=(0, 1))


def test_split_every_below_two_raises(forbid_compute):
    with pytest.raises(ValueError, match="split_every"):
        tg.ones(10, chunks=2).sum(split_every=1)


# -- laziness -------------------------------------------------------------------------------


def test_building_reductions_computes_nothing(forbid_compute):
    x = tg.random.random((60, 40), chunks=(7, 9), seed=3)
    built = [x.sum(), x.mean(axis=0), x.var(axis=1, ddof=1), x.std(), x.min(axis=(0, 1)),
             x.max(keepdims=True), x.argmin(), x.argmax(axis=0), (x > 0.5).any(axis=1),
             (x > 0).all(), np.sum(x, axis=0), x.prod(axis=-1, split_every=2),
             np.add.reduce(x), (x - x.mean(axis=0)).sum(axis=1)]
    assert built[1].shape == (40,) and built[5].shape == (1, 1)
    assert built[13].shape == (60,)


def test_compute_of_a_reduction_under_forbid_compute_raises(forbid_compute):
    with pytest.raises(AssertionError, match="a run of") as info:
        tg.ones((4, 4), chunks=2).sum().compute()
    assert type(info.value).__name__ == "ComputeForbidden"


def test_compute_several_reductions_shares_one_plan(backend_options):
    a = np.arange(30.0).reshape(5, 6)
    x = tg.from_numpy(a, chunks=((2, 3), (1, 5)))
    s, m, v = tg.compute(x.sum(axis=0), x.mean(), x.var(axis=1), **backend_options)
    np.testing.assert_array_equal(s, a.sum(axis=0))
    assert m == a.mean()
    np.testing.assert_allclose(v, a.var(axis=1))


def _funcs_named(array, name):
    graph = plan_arrays([array]).graph
    return sum(getattr(f, "__name__", "") == name for f in graph.funcs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex128])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_sum_of_a_product_fuses_into_one_einsum_with_numpy_values(backend_options, dtype,
                                                                  reduce):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((7, 5, 6)) * 10).astype(dtype)
    b = (rng.standard_normal((7, 5, 6)) * 10).astype(dtype)
    x = tg.from_numpy(a, chunks=(3, 2, 4))  # uneven edge blocks on every axis
    y = tg.from_numpy(b, chunks=(3, 2, 4))
    for axis in (0, (0, 2), None, 1):
        for left, right, na, nb in ((x, y, a, b), (x, x, a, a), (y, 2, b, 2)):
            got = getattr(left * right, reduce)(axis=axis)
            want = getattr(np, reduce)(na * nb, axis=axis)
            assert got.dtype == want.dtype
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got.compute(**backend_options), want, rtol=tol,
                                       atol=tol * abs(want).max())
    # the product block is never made: each partial task is one sum of products
    assert _funcs_named(tg.mean(x * y, axis=0), "sum_of_products") == 18
    assert _funcs_named(tg.mean(x + y, axis=0), "sum_of_products") == 0
    assert _funcs_named(tg.max(x * y, axis=0), "sum_of_products") == 0


@pytest.mark.parametrize("axis", [(0, 2), (1, 0), (0, 1, 2), (2,), [1, 2]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_quantiles_over_several_axes_match_numpy(axis, keepdims):
    a = np.random.default_rng(4).random((5, 6, 7))
    a[1, 2, 3] = np.nan
    x = tg.from_numpy(a, chunks=(2, 4, 3))
    for got, want in [
        (np.quantile(x, [0.2, 0.7], axis=axis, keepdims=keepdims),
         np.quantile(a, [0.2, 0.7], axis=axis, keepdims=keepdims)),
        (np.median(x, axis=axis, keepdims=keepdims), np.median(a, axis=axis, keepdims=keepdims)),
        (np.nanpercentile(x, 30, axis=axis, keepdims=keepdims),
         np.nanpercentile(a, 30, axis=axis, keepdims=keepdims)),
    ]:
        assert got.shape == want.shape
        np.testing.assert_allclose(got.compute(), want, equal_nan=True)


def test_quantile_rejects_repeated_or_bad_axes(forbid_compute):
    x = tg.from_numpy(np.ones((3, 4, 5)), chunks=2)
    with pytest.raises(ValueError, match="repeated axis"):
        np.quantile(x, 0.5, axis=(0, 0))
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        np.median(x, axis=(0, 3))


def _ffill(a, axis=0, dtype=None):
    """Forward fill of NaNs along ``axis`` in NumPy (each NaN takes the last value)."""
    a = np.moveaxis(np.asarray(a, dtype=dtype), axis, 0)
    idx = np.where(np.isnan(a), 0, np.arange(a.shape[0]).reshape(-1, *[1] * (a.ndim - 1)))
    idx = np.maximum.accumulate(idx, axis=0)
    out = np.take_along_axis(a, idx, axis=0)
    return np.moveaxis(out, 0, axis)


def _fill_from(carry, block):
    return np.where(np.isnan(block), carry, block)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumreduction_is_a_blocked_cumsum(dtype, axis):
    a = (np.random.default_rng(9).random((11, 7)) * 20).astype(dtype)
    x = tg.from_numpy(a, chunks=((4, 0, 5, 2), (3, 3, 1)))
    got = tg.cumreduction(np.cumsum, np.add, 0, x, axis=axis)
    assert got.dtype == a.dtype and got.shape == a.shape
    np.testing.assert_allclose(got.compute(), np.cumsum(a, axis=axis), rtol=1e-5)
    flat = tg.cumreduction(np.cumsum, np.add, 0, x, axis=None, dtype=np.float64)
    np.testing.assert_allclose(flat.compute(), np.cumsum(a.astype(np.float64)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cumreduction_forward_fill_across_blocks(dtype):
    rng = np.random.default_rng(10)
    a = rng.random((13, 4)).astype(dtype)
    a[rng.random(a.shape) < 0.4] = np.nan
    a[:2, 0] = np.nan      # leading NaNs stay NaN
    a[3:9, 1] = np.nan     # a whole block of NaNs takes the carry from two blocks back
    x = tg.from_numpy(a, chunks=(3, 3))
    got = tg.cumreduction(_ffill, _fill_from, np.nan, x, axis=0)
    np.testing.assert_array_equal(got.compute(), _ffill(a, 0))
    assert np.isnan(got.compute()[:2, 0]).all()


def test_cumreduction_bad_input():
    x = tg.from_numpy(np.ones((4, 3)), chunks=2)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        tg.cumreduction(np.cumsum, np.add, 0, x, axis=2)
    with pytest.raises(TypeError, match="must be callable"):
        tg.cumreduction(np.cumsum, "add", 0, x, axis=0)
    with pytest.raises(ValueError, match="0-d"):
        tg.cumreduction(np.cumsum, np.add, 0, tg.asarray(np.float64(1.0)), axis=0)


# -- large partials accumulate as they arrive ------------------------------------------------

WIDE = (3000, 23)  # column blocks of 24 KB (float64): partials as large as their blocks
WIDE_LIMIT = "150KB"  # about 6 column blocks: a tree of 8 partials does not fit


def _wide(dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(WIDE).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, WIDE).astype(bool)
    return rng.integers(-50, 50, WIDE).astype(dtype)


def _options(limit, workers=None):
    return tg.config.per_process(
        tg.config.resolve({"memory_limit": limit, "workers": workers}, "test"), 1)


def _kinds(arrays, limit=WIDE_LIMIT):
    graph = plan_arrays(arrays, options=_options(limit)).graph
    return graph, [k or "other" for k in graph.meta["kind"]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64, np.bool_])
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max", "mean", "var", "argmax", "any"])
def test_large_partials_accumulate_as_they_arrive(op, dtype):
    ref = _wide(dtype)
    if op == "prod" and ref.dtype.kind != "b":
        ref = np.where(ref == 0, 1, np.sign(ref)).astype(dtype)  # no overflow
    x = tg.from_numpy(ref, chunks=(-1, 1))
    got = getattr(x, op)(axis=1).compute(memory_limit=WIDE_LIMIT)
    want = getattr(ref, op)(axis=1)
    assert got.dtype == want.dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    run = tg.last_run()
    assert run.spilled_bytes == 0
    assert run.peak_bytes <= run.memory_limit


def test_a_wide_sum_accumulates_into_one_partial_per_worker():
    x = tg.random.random(WIDE, chunks=(-1, 1), seed=2)
    s = x.sum(axis=1)
    graph, kinds = _kinds([s])
    assert kinds.count("partial") == 23 and kinds.count("reduce") == 0
    steps = [i for i, k in enumerate(kinds) if k == "accumulate"]
    assert len(steps) == 23 - 2  # 23 partials in 2 chains (each starts from a partial)
    names = graph.meta["name"]
    assert [names[i] for i, k in enumerate(kinds) if k == "aggregate"] == ["sum-combine+sum"]
    assert all(graph.overwritten(i) == (0,) for i in steps)  # in place: kept for retries
    # a run with room for a tree keeps the tree
    _, roomy = _kinds([s], limit="1GB")
    assert "accumulate" not in roomy and roomy.count("reduce") >= 3
    for workers in (1, 2):
        got = s.compute(memory_limit=WIDE_LIMIT, workers=workers)
        np.testing.assert_allclose(got, x.compute().sum(axis=1), rtol=1e-12)
        run = tg.last_run()
        assert run.spilled_bytes == 0 and run.peak_bytes <= run.memory_limit


def test_fewer_chains_when_fewer_partials_fit_the_limit():
    from tilegraph.algebra.fold import fold_chains

    opts = _options("100KB", 4)
    assert fold_chains(24_000, 23, 8, opts) == 1  # a quarter of the limit holds one partial
    assert fold_chains(24_000, 23, 8, _options("400KB", 4)) == 4
    assert fold_chains(24_000, 23, 8, _options("400KB", 2)) == 2
    assert fold_chains(24_000, 2, 8, opts) == 0  # two partials: one combine
    assert fold_chains(None, 23, 8, opts) == 0  # sizes unknown: the tree
    x = tg.random.random(WIDE, chunks=(-1, 1), seed=2)
    _, kinds = _kinds([x.sum(axis=1)], limit="100KB")
    assert kinds.count("accumulate") == 22 - 1  # one chain, its last step fused into sum
    np.testing.assert_allclose(x.sum(axis=1).compute(memory_limit="100KB"),
                               x.compute().sum(axis=1), rtol=1e-12)


def test_accumulation_skips_blocks_of_no_elements_and_keeps_edge_blocks():
    ref = _wide(np.float64)[:, :20]
    x = tg.from_numpy(ref, chunks=((1000, 1000, 1000), (1,) * 5 + (0,) + (3,) * 5))
    for op in ("sum", "max", "argmin"):
        got = getattr(x, op)(axis=1).compute(memory_limit="100KB")
        np.testing.assert_allclose(got, getattr(ref, op)(axis=1))
    got = x.sum(axis=1, keepdims=True).compute(memory_limit="100KB")
    np.testing.assert_allclose(got, ref.sum(axis=1, keepdims=True))


def test_an_accumulator_is_written_in_place_only_when_it_can_hold_the_result():
    from tilegraph.algebra.fold import accumulate_into

    step = accumulate_into(np.add)
    acc = np.ones(4, dtype=np.float32)
    assert step(acc, np.ones(4, dtype=np.float32)) is acc
    widened = step(np.ones(4, dtype=np.int8), np.ones(4, dtype=np.int64))
    assert widened.dtype == np.int64  # a new array, not a wrapped int8
    frozen = np.ones(3)
    frozen.flags.writeable = False
    assert step(frozen, np.ones(3)) is not frozen and frozen.tolist() == [1.0] * 3
    assert step(np.ones((1, 3)), np.ones((2, 3))).shape == (2, 3)  # broadcast: new
    assert step(None, acc) is acc and step(acc, None) is acc


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_a_slice_of_an_accumulated_reduction_plans_the_chains_of_its_blocks_only(dtype):
    from tilegraph.algebra.demand import LoweringPlan
    from tilegraph.array.lowering import lower_arrays

    ref = _wide(dtype)[:2900]  # three output blocks, the last of 900 rows
    x = tg.from_numpy(ref, chunks=(1000, 1)) * 2  # 23 partials of 8 KB per output block
    s = x.sum(axis=1)
    opts = _options("100KB", 2)  # 8 partials over a quarter of the limit: 2 chains
    for part, out in ((s[1200:1700], 1), (s[-5:], 2)):
        graph, _ = lower_arrays([part], opts)
        kinds = [k or "other" for k in graph.meta["kind"]]
        # the partials and chains of the one output block read, none of the others
        assert kinds.count("partial") == 23 and kinds.count("accumulate") == 23 - 2
        assert {k[1] for k in graph.keys if isinstance(k, tuple) and k[0].startswith(
            "sum-combine") and len(k) == 3} == {out}
        assert LoweringPlan([part.collection], opts).count() == len(graph.keys)
        # exactly what the whole plan, culled to the slice, keeps
        both, results = lower_arrays([s, part], opts)
        own = [k for k in results.keys
               if not (isinstance(k, tuple) and k[0] == f"store-{s.name}")]
        assert set(graph.keys) == set(both.cull(own).keys)
        got = part.compute(memory_limit="100KB", workers=2)
        np.testing.assert_allclose(got, (ref * 2).sum(axis=1)[
            slice(1200, 1700) if out == 1 else slice(-5, None)], rtol=1e-12)
        run = tg.last_run()
        assert run.spilled_bytes == 0 and run.peak_bytes <= run.memory_limit
    # the whole sum plans the chains of all three output blocks
    whole, _ = lower_arrays([s], opts)
    assert list(whole.meta["kind"]).count("accumulate") == 3 * (23 - 2)
