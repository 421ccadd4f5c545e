"""Elementwise operations against NumPy: operators, ufuncs, broadcasting across different
block sizes, NumPy arrays and Python scalars (NEP 50), where, astype; build-time errors;
laziness."""

import operator
import warnings

import numpy as np
import pytest
from _blocked import check_values as check
from _blocked import uneven_chunks as axis_chunks
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tilegraph as tg

SETTINGS = settings(max_examples=60, deadline=None)

pytestmark = pytest.mark.filterwarnings(
    "ignore:(invalid value|divide by zero|overflow):RuntimeWarning")

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.complex128]


def elements(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return st.floats(-10, 10, width=8 * dtype.itemsize, allow_subnormal=False)
    if dtype.kind == "c":
        return st.complex_numbers(max_magnitude=10, allow_nan=False, allow_infinity=False,
                                  allow_subnormal=False)
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(-10, 10)


@st.composite
def blocked(draw, dtype, shape):
    """A NumPy array and a tilegraph Array over it with random uneven blocks."""
    ref = draw(hnp.arrays(dtype, shape, elements=elements(dtype)))
    chunks = tuple(draw(axis_chunks(n)) for n in shape)
    x = tg.from_numpy(ref, chunks=chunks)
    assert x.chunks == chunks
    return ref, x


shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)

BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
          operator.floordiv, operator.mod]
COMPARE = [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne]


def numpy_or_error(fn):
    """(NumPy's answer, None), or (None, the kind of error) where NumPy refuses."""
    try:
        with np.errstate(all="ignore"):
            return fn(), None
    except (TypeError, ValueError, OverflowError) as exc:
        kind = next(k for k in (OverflowError, ValueError, TypeError) if isinstance(exc, k))
        return None, kind


# -- binary operators with broadcasting ------------------------------------------------------


@SETTINGS
@given(data=st.data(),
       bshapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                  min_side=0, max_side=4),
       dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)),
       op=st.sampled_from(BINARY + COMPARE + [operator.and_, operator.or_, operator.xor]))
def test_binary_ops_broadcast_like_numpy(data, bshapes, dtypes, op):
    (sa, sb), _ = bshapes.input_shapes, bshapes.result_shape
    a, x = data.draw(blocked(dtypes[0], sa))
    b, y = data.draw(blocked(dtypes[1], sb))
    if op in (operator.pow,) and np.dtype(dtypes[1]).kind in "iu":
        b = np.abs(b)  # integers to negative integer powers are an error in NumPy
        y = tg.from_numpy(b, chunks=y.chunks)
    expected, error = numpy_or_error(lambda: op(a, b))
    if error is not None:  # refused at build time, with NumPy's kind of error
        with pytest.raises(error):
            op(x, y)
        return
    with np.errstate(all="ignore"):
        check(op(x, y), expected)
        check(op(x, b), expected)  # Array with NumPy array
        check(op(a, y), np.asarray(op(a, b)))  # NumPy array with Array (reflected)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES),
       scalar=st.one_of(st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.booleans(),
                        st.complex_numbers(max_magnitude=3, allow_nan=False,
                                           allow_infinity=False)),
       op=st.sampled_from([operator.add, operator.sub, operator.mul, operator.truediv,
                           operator.lt, operator.eq, operator.ge]))
def test_python_scalars_follow_nep50(data, shape, dtype, scalar, op):
    a, x = data.draw(blocked(dtype, shape))
    for left, right, ref in ((x, scalar, (a, scalar)), (scalar, x, (scalar, a))):
        expected, error = numpy_or_error(lambda ref=ref: op(*ref))
        if error is not None:
            with pytest.raises(error):
                op(left, right)
            continue
        with np.errstate(all="ignore"):
            check(op(left, right), expected)


def test_float32_plus_python_float_stays_float32():
    x = tg.from_numpy(np.arange(5, dtype=np.float32), chunks=2)
    assert (x + 1.0).dtype == np.float32
    assert (2.5 * x).dtype == np.float32
    assert (x + 1).dtype == np.float32
    assert (x + np.float64(1.0)).dtype == np.float64  # NumPy scalars are not weak
    i = tg.from_numpy(np.arange(5, dtype=np.int32), chunks=2)
    assert (i + 1).dtype == np.int32
    assert (i + 1.5).dtype == np.float64
    assert (i / 2).dtype == np.float64
    check(x + 1.0, np.arange(5, dtype=np.float32) + 1.0)
    check(i * 3, np.arange(5, dtype=np.int32) * 3)


def test_python_int_out_of_range_for_the_dtype_fails_at_build_time(forbid_compute):
    x = tg.from_numpy(np.arange(5, dtype=np.int8), chunks=2)
    with pytest.raises(OverflowError, match=r"add.*\(5,\).*1000"):
        x + 1000
    with pytest.raises(OverflowError):
        np.arange(5, dtype=np.int8) + 1000
    u = tg.ones(3, dtype=np.uint8)
    with pytest.raises(OverflowError, match="-1"):
        u + (-1)


def test_ufunc_dtype_without_a_loop_fails_at_build_time(forbid_compute):
    x = tg.from_numpy(np.arange(4, dtype=np.int32), chunks=3)
    with pytest.raises(TypeError, match="less"):
        np.less(x, 2, dtype=np.float64)
    with pytest.raises(TypeError):
        np.less(np.arange(4), 2, dtype=np.float64)


def test_lists_and_tuples_broadcast_as_arrays():
    a = np.arange(12.0).reshape(4, 3)
    x = tg.from_numpy(a, chunks=((2, 2), (2, 1)))
    row, column, short = [1, 2, 3], [[1], [2], [3], [4]], [1, 2]
    check(x + row, a + row)
    check(np.add(x, (1, 2, 3)), np.add(a, (1, 2, 3)))
    check(column * x, column * a)
    v = tg.from_numpy(np.arange(3.0), chunks=2)
    check(v + column, np.arange(3.0) + column)  # the list adds an axis
    check(tg.where([True, False, True], x, 0), np.where([True, False, True], a, 0))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(2,\)"):
        x + short


def test_comparisons_give_bool_arrays():
    a = np.array([[1.0, 2, np.nan], [3, 2, 1]])
    x = tg.from_numpy(a, chunks=((1, 1), (2, 1)))
    for op in COMPARE:
        check(op(x, 2), op(a, 2))
        check(op(x, x), op(a, a))
        check(op(x, np.array([1, 2, 3])), op(a, np.array([1, 2, 3])))


def test_broadcast_different_block_sizes_on_the_same_axis():
    a = np.arange(60.0).reshape(6, 10)
    b = np.arange(10.0)[::-1].copy()
    c = np.arange(6.0).reshape(6, 1)
    x = tg.from_numpy(a, chunks=((1, 5), (3, 3, 4)))
    y = tg.from_numpy(b, chunks=((2, 2, 2, 2, 2),))
    z = tg.from_numpy(c, chunks=((4, 2), (1,)))
    w = tg.from_numpy(a, chunks=((6,), (7, 3)))
    check(x + y, a + b)
    check(x * z - y, a * c - b)
    check(x + w, a + a)
    check(z + y, c + b)  # (6, 1) with (10,): an outer sum
    check((x + w) / (z + 1), (a + a) / (c + 1))


def test_broadcast_zero_length_and_length_one_axes():
    a = np.ones((0, 3))
    b = np.arange(3.0)
    c = np.ones((1, 3))
    x = tg.from_numpy(a, chunks=2)
    check(x + tg.from_numpy(b, chunks=2), a + b)
    check(x * tg.from_numpy(c, chunks=((1,), (2, 1))), a * c)
    check(tg.from_numpy(np.ones((4, 1)), chunks=2) + tg.from_numpy(np.ones((0,))),
          np.ones((4, 1)) + np.ones((0,)))


def test_zero_dim_arrays():
    s = tg.from_numpy(np.array(2.5))
    v = tg.from_numpy(np.arange(4.0), chunks=3)
    check(s + v, 2.5 + np.arange(4.0))
    check(s * s, np.array(2.5) * np.array(2.5))
    check(v.sum() + v, np.arange(4.0).sum() + np.arange(4.0))
    got = (s + 1).compute()
    assert np.ndim(got) == 0 and got == 3.5


# -- ufuncs ----------------------------------------------------------------------------------

UNARY = [np.sin, np.exp, np.sqrt, np.abs, np.negative, np.floor, np.isnan, np.sign,
         np.log1p, np.square, np.conjugate, np.logical_not, np.invert, np.isfinite, np.real,
         np.imag]


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES),
       ufunc=st.sampled_from(UNARY))
def test_unary_ufuncs_match_numpy(data, shape, dtype, ufunc):
    a, x = data.draw(blocked(dtype, shape))
    expected, error = numpy_or_error(lambda: ufunc(a))
    if error is not None:
        with pytest.raises(error):
            ufunc(x)
        return
    with np.errstate(all="ignore"):
        check(ufunc(x), expected)


@pytest.mark.parametrize("ufunc", [np.add, np.maximum, np.minimum, np.hypot, np.arctan2,
                                   np.fmax, np.logaddexp, np.copysign, np.greater])
def test_binary_ufuncs_called_directly(ufunc):
    a = np.linspace(-3, 3, 24).reshape(4, 6)
    a[1, 2] = np.nan
    b = np.linspace(2, -1, 6).astype(np.float32)
    x = tg.from_numpy(a, chunks=((3, 1), (2, 4)))
    y = tg.from_numpy(b, chunks=((5, 1),))
    check(ufunc(x, y), ufunc(a, b))
    check(ufunc(a, y), ufunc(a, b))
    check(ufunc(x, 1.5), ufunc(a, 1.5))


def test_ufunc_dtype_keyword():
    a = np.arange(6, dtype=np.int32)
    x = tg.from_numpy(a, chunks=4)
    check(np.add(x, 1, dtype=np.float32), np.add(a, 1, dtype=np.float32))
    check(np.multiply(x, x, dtype=np.int64), np.multiply(a, a, dtype=np.int64))


def test_two_output_ufuncs():
    a = np.arange(-7, 8)
    x = tg.from_numpy(a, chunks=4)
    q, r = np.divmod(x, 3)
    check(q, np.divmod(a, 3)[0])
    check(r, np.divmod(a, 3)[1])
    f = np.linspace(-2, 2, 9)
    frac, whole = np.modf(tg.from_numpy(f, chunks=2))
    check(frac, np.modf(f)[0])
    check(whole, np.modf(f)[1])


def test_unsupported_ufunc_uses_raise_type_error():
    x = tg.from_numpy(np.arange(6.0), chunks=4)
    with pytest.raises(TypeError, match="out="):
        np.add(x, 1, out=np.empty(6))
    with pytest.raises(TypeError, match="where="):
        np.add(x, 1, where=np.ones(6, bool))
    with pytest.raises(TypeError, match=r"subtract\.accumulate"):
        np.subtract.accumulate(x)  # not associative: no blocked scan
    with pytest.raises(TypeError, match="cannot be applied"):
        np.bitwise_and(x, x)  # not defined for floats, in NumPy too


def test_numpy_functions_dispatch():
    a = np.linspace(-2, 2, 10)
    x = tg.from_numpy(a, chunks=3)
    check(np.round(x, 1), np.round(a, 1))
    check(np.clip(x, -1, 1.5), np.clip(a, -1, 1.5))
    c = a + 1j * a[::-1]
    z = tg.from_numpy(c, chunks=4)
    check(z.real, c.real)
    check(z.imag, c.imag)
    check(z.conj(), c.conj())
    check(np.real(z), np.real(c))


# -- where -----------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(),
       bshapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3,
                                                  min_side=0, max_side=4),
       dtypes=st.tuples(st.sampled_from(DTYPES), st.sampled_from(DTYPES)))
def test_where_matches_numpy(data, bshapes, dtypes):
    sc, sx, sy = bshapes.input_shapes
    c, cond = data.draw(blocked(np.bool_, sc))
    a, x = data.draw(blocked(dtypes[0], sx))
    b, y = data.draw(blocked(dtypes[1], sy))
    check(tg.where(cond, x, y), np.where(c, a, b))
    check(np.where(cond, x, b), np.where(c, a, b))  # through __array_function__


def test_where_with_scalars_and_conditions_from_comparisons():
    a = np.arange(10, dtype=np.float32)
    x = tg.from_numpy(a, chunks=3)
    check(tg.where(x > 4, x, 0.0), np.where(a > 4, a, 0.0))
    check(tg.where(x > 4, 1, 0), np.where(a > 4, 1, 0))
    check(tg.where(a > 4, x, -x), np.where(a > 4, a, -a))


def test_where_with_x_but_not_y_is_refused():
    """(The one-argument form is nonzero: tests/array/test_habits.py.)"""
    with pytest.raises(TypeError, match="give both x and y"):
        tg.where(tg.ones(3) > 0, 1.0)
    with pytest.raises(TypeError, match="give both x and y"):
        tg.where(tg.ones(3) > 0, y=1.0)


# -- astype ----------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), shape=shapes, src=st.sampled_from(DTYPES),
       dst=st.sampled_from([*DTYPES, np.uint8, np.float16, np.int8]))
def test_astype_matches_numpy(data, shape, src, dst):
    a, x = data.draw(blocked(src, shape))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        expected = a.astype(dst)
        check(x.astype(dst), expected)
        check(tg.astype(x, dst), expected)


def test_astype_same_dtype_and_casting_rules():
    x = tg.from_numpy(np.arange(6.0), chunks=4)
    assert x.astype(np.float64, copy=False) is x
    check(tg.astype(x, np.float32, casting="same_kind"), np.arange(6.0).astype(np.float32))
    with pytest.raises(TypeError, match=r"float64.*int64.*safe"):
        tg.astype(x, np.int64, casting="safe")
    with pytest.raises(TypeError, match=r"float64.*int32.*same_kind"):
        tg.astype(x, np.int32, casting="same_kind")
    with pytest.raises(TypeError):
        x.astype("not-a-dtype")


def test_array_astype_method_accepts_casting():
    x = tg.from_numpy(np.arange(6.0), chunks=4)
    with pytest.raises(TypeError, match="cannot cast"):
        x.astype(np.int64, casting="safe")


# -- errors at build time ------------------------------------------------------------------


def test_incompatible_broadcast_names_both_shapes(forbid_compute):
    x = tg.ones((3, 4), chunks=2)
    y = tg.ones((5,), chunks=2)
    with pytest.raises(ValueError, match=r"add.*\(3, 4\).*\(5,\)"):
        x + y
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 4\)"):
        np.multiply(x, np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"where.*\(3, 4\).*\(5,\)"):
        tg.where(x > 0, x, y)


def test_type_errors_name_the_op_and_the_shapes(forbid_compute):
    x = tg.ones((3, 4), chunks=2)
    with pytest.raises(TypeError, match=r"bitwise_and.*\(3, 4\)"):
        x & x
    with pytest.raises(TypeError):
        x + "a"


# -- map_blocks ---------------------------------------------------------------------------


def test_map_blocks_and_elemwise():
    a = np.arange(12.0).reshape(3, 4)
    x = tg.from_numpy(a, chunks=((2, 1), (3, 1)))
    check(x.map_blocks(np.cumsum, axis=1),
          np.concatenate([np.cumsum(a[:, :3], axis=1), np.cumsum(a[:, 3:], axis=1)], axis=1))
    check(tg.elemwise(np.add, x, 1), a + 1)
    check(tg.elemwise(lambda u, v: u * v, x, x, dtype=np.float32),
          (a * a).astype(np.float32))


# -- laziness -----------------------------------------------------------------------------


def test_building_elementwise_expressions_computes_nothing(forbid_compute):
    x = tg.ones((40, 30), chunks=(7, 11))
    y = tg.from_numpy(np.arange(30.0), chunks=4)
    z = tg.random.random((40, 1), chunks=5, seed=0)
    exprs = [x + y, np.sin(x) * z - 1.5, tg.where(x > y, x, y), (x + y).astype(np.float32),
             np.divmod(y, 3)[0], (x == 1) & (y < 3), abs(-x) ** 2, np.add(x, np.ones(30))]
    assert exprs[0].shape == (40, 30)
    assert exprs[2].dtype == np.float64 and exprs[5].dtype == np.bool_


def test_compute_of_an_expression_under_forbid_compute_raises(forbid_compute):
    x = tg.ones((4, 4), chunks=2)
    with pytest.raises(AssertionError, match="a run of") as info:
        (x + 1).compute()
    assert type(info.value).__name__ == "ComputeForbidden"
    with pytest.raises(AssertionError, match="a run of") as info:
        tg.compute(x * 2, x - 1)
    assert type(info.value).__name__ == "ComputeForbidden"


def test_compute_several_and_backends(backend_options):
    a = np.arange(35.0).reshape(5, 7)
    x = tg.from_numpy(a, chunks=((2, 3), (4, 1, 2)))
    p, q, n = tg.compute(x + 1, np.sqrt(x) * x, "not an array", **backend_options)
    np.testing.assert_array_equal(p, a + 1)
    np.testing.assert_allclose(q, np.sqrt(a) * a)
    assert n == "not an array"


def test_map_blocks_returning_another_block_shape_fails_when_stored(tmp_path):
    x = tg.ones((20, 20), chunks=10)
    halves = x.map_blocks(lambda b: b[:5, :5], dtype=float)
    with pytest.raises(ValueError, match=r"has shape \(5, 5\), but the plan expects \(10, 10\)"
                                         r".*pass chunks="):
        halves.compute()
    one_block = tg.ones((10, 10), chunks=10).map_blocks(lambda b: b[:5, :5], dtype=float)
    with pytest.raises(ValueError, match="pass chunks="):
        one_block.compute()
    with pytest.raises(ValueError, match="pass chunks="):
        halves.to_npy(tmp_path / "h.npy")
    assert not (tmp_path / "h.npy").exists()
    declared = x.map_blocks(lambda b: b[:5, :5], dtype=float, chunks=((5, 5), (5, 5)))
    np.testing.assert_array_equal(declared.compute(), np.ones((10, 10)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "int16", "bool",
                                   "datetime64[ns]", "timedelta64[s]"])
def test_isnull_and_notnull_match_pandas(dtype):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    a = (rng.random((7, 5)) * 50).astype("int64")
    if dtype.startswith(("datetime", "timedelta")):
        a = a.astype(dtype)
        a[rng.random(a.shape) < 0.3] = np.datetime64("NaT") if dtype[0] == "d" else \
            np.timedelta64("NaT")
    else:
        a = a.astype(dtype)
        if np.dtype(dtype).kind in "fc":
            a[rng.random(a.shape) < 0.3] = np.nan
    x = tg.from_numpy(a, chunks=(3, 4))
    want = pd.isnull(a)
    got = tg.isnull(x)
    assert got.dtype == np.bool_ and got.chunks == x.chunks
    np.testing.assert_array_equal(got.compute(), want)
    np.testing.assert_array_equal(tg.notnull(x).compute(), ~want)
    if np.dtype(dtype).kind in "fcmM":
        assert want.any() and not want.all()  # the data has both kinds of element


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16])
@pytest.mark.parametrize(("mode", "order"), [("raise", "C"), ("wrap", "F"),
                                             (("clip", "wrap"), "C")])
def test_ravel_multi_index_and_unravel_index_match_numpy(dtype, mode, order):
    rng = np.random.default_rng(6)
    high = 4 if mode == "raise" else 9
    rows = rng.integers(0, high, size=(9, 4)).astype(dtype)
    cols = rng.integers(0, min(high, 5), size=(4,)).astype(dtype)  # broadcast
    dims = (4, 5)
    r = tg.from_numpy(rows, chunks=(4, 3))
    want = np.ravel_multi_index((rows, cols), dims, mode=mode, order=order)
    for got in (tg.ravel_multi_index((r, cols), dims, mode=mode, order=order),
                np.ravel_multi_index((r, cols), dims, mode=mode, order=order)):
        assert isinstance(got, tg.Array) and got.shape == want.shape
        np.testing.assert_array_equal(got.compute(), want)
    flat = tg.from_numpy(want, chunks=(5, 3))
    back = np.unravel_index(flat, dims, order=order)
    for g, w in zip(back, np.unravel_index(want, dims, order=order), strict=True):
        assert isinstance(g, tg.Array)
        np.testing.assert_array_equal(g.compute(), w)


def test_ravel_multi_index_bad_input():
    r = tg.from_numpy(np.array([0, 1, 5]), chunks=2)
    with pytest.raises(ValueError, match="2 coordinate arrays for 1 dimensions"):
        tg.ravel_multi_index((r, r), (3,))
    with pytest.raises(TypeError, match="dtype float64"):
        tg.ravel_multi_index((r, np.array([0.5, 1.0, 2.0])), (3, 4))
    with pytest.raises(ValueError, match="mode"):
        tg.ravel_multi_index((r, r), (6, 6), mode="bounce")
    with pytest.raises(TypeError, match="sequence of integer arrays"):
        tg.ravel_multi_index(3, (6,))
    with pytest.raises(TypeError, match="must be integers"):
        tg.unravel_index(tg.from_numpy(np.array([1.0]), chunks=1), (3,))
    # an out-of-range coordinate with mode="raise" fails when its block is computed
    with pytest.raises(ValueError, match="invalid entry"):
        tg.ravel_multi_index((r,), (4,)).compute()
