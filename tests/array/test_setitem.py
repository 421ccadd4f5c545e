"""Item assignment (x[index] = value), in-place operators and several advanced indices in
one getitem, against NumPy on small arrays with uneven edge blocks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg

DTYPES = [np.int64, np.float32, np.float64, np.complex128, np.bool_]
SHAPE = (7, 5)
CHUNKS = [(3, 2), (7, 5), (2, 4)]


def _base(dtype, shape=SHAPE):
    a = np.arange(np.prod(shape)).reshape(shape)
    return (a % 2 == 0) if dtype is np.bool_ else a.astype(dtype)


def _value(dtype, shape):
    v = (np.arange(np.prod(shape), dtype=np.int64).reshape(shape) * 3 + 100)
    return (v % 3 == 0) if dtype is np.bool_ else v.astype(dtype)


BASIC = [
    (2, 1),
    (slice(None), slice(1, 5, 2)),
    (slice(None, None, -2),),
    (slice(6, 0, -3), slice(None, None, -1)),
    (Ellipsis, 3),
    (None, 2),
    (-1, slice(-3, None)),
    (slice(1, 6), Ellipsis, None),
    (slice(5, 2), 0),  # an empty region
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", BASIC, ids=repr)
def test_basic_assignment_matches_numpy(dtype, index):
    a = _base(dtype)
    region = a[index].shape
    for chunks in CHUNKS:
        for value in (_value(dtype, region), _value(dtype, (1,) * len(region))[0 if region
                                                                               else ()]):
            x = tg.from_numpy(a, chunks=chunks)
            before = x * 1
            expected = a.copy()
            expected[index] = value
            x[index] = value
            assert x.dtype == a.dtype and x.shape == a.shape
            np.testing.assert_array_equal(x.compute(), expected)
            np.testing.assert_array_equal(before.compute(), a)  # built earlier: old value
    np.testing.assert_array_equal(a, _base(dtype))  # the source array is never written


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.complex128])
def test_lazy_values_and_broadcasting(dtype):
    a = _base(dtype)
    v = _value(dtype, (4, 1))
    x = tg.from_numpy(a, chunks=(3, 2))
    x[1:5, ::2] = tg.from_numpy(v, chunks=(3, 1))
    expected = a.copy()
    expected[1:5, ::2] = v
    np.testing.assert_array_equal(x.compute(), expected)
    # leading length-one axes of the value are dropped, as in NumPy
    x[...] = np.ones((1, 1, 7, 5), dtype=dtype)
    np.testing.assert_array_equal(x.compute(), np.ones(SHAPE, dtype))
    # a lazy one-element value, and a value computed from x itself
    x[0] = tg.asarray(np.array(5, dtype=dtype))
    x[1:3] = x[4:6] + 1
    expected = np.ones(SHAPE, dtype)
    expected[0] = 5
    expected[1:3] = expected[4:6] + 1
    np.testing.assert_array_equal(x.compute(), expected)


def test_only_touched_blocks_get_new_tasks():
    a = np.arange(40.0).reshape(8, 5)
    x = tg.from_numpy(a, chunks=(3, 2))
    old = x.collection.keys.copy()
    x[4, 1:3] = -1.0  # block row 1, block columns 0 and 1
    new = x.collection.keys
    changed = {c for c in np.ndindex(*new.shape) if new[c] != old[c]}
    assert changed == {(1, 0), (1, 1)}
    assert x.collection.ntasks == 2
    x[np.arange(40).reshape(8, 5) == 39] = 0.0  # a NumPy mask: only its block
    assert x.collection.ntasks == 1
    expected = a.copy()
    expected[4, 1:3] = -1
    expected[7, 4] = 0
    np.testing.assert_array_equal(x.compute(), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mask_assignment_matches_numpy(dtype):
    a = _base(dtype)
    mask = (np.arange(35).reshape(SHAPE) % 3) == 0
    n = int(mask.sum())
    for chunks in CHUNKS:
        for m in (mask, tg.from_numpy(mask, chunks=2)):
            for value in (_value(dtype, ())[()], _value(dtype, ()), _value(dtype, (n,)),
                          tg.from_numpy(_value(dtype, (n,)), chunks=4)):
                x = tg.from_numpy(a, chunks=chunks)
                expected = a.copy()
                expected[mask] = np.asarray(value)
                x[m] = value
                np.testing.assert_array_equal(x.compute(), expected)
    # a mask over the leading axis: rows, with a row value or one row per true element
    rows = np.array([True, False, True, True, False, False, True])
    for value in (_value(dtype, (5,)), _value(dtype, (4, 5)), 1):
        x = tg.from_numpy(a, chunks=(3, 2))
        expected = a.copy()
        expected[rows] = value
        x[tg.asarray(rows)] = value
        np.testing.assert_array_equal(x.compute(), expected)


def test_mask_from_the_array_itself():
    a = np.linspace(-1, 1, 23)
    x = tg.from_numpy(a, chunks=5)
    x[x < 0] = 0.0
    x[x > 0.5] *= 2
    expected = a.copy()
    expected[expected < 0] = 0
    expected[expected > 0.5] *= 2
    np.testing.assert_allclose(x.compute(), expected)


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.complex128])
def test_integer_array_assignment_along_one_axis(dtype):
    a = _base(dtype)
    cases = [
        ((np.array([5, 0, -1, 2]),), (4, 5)),
        ((slice(1, 6), [4, 0, 2]), (5, 3)),
        ((2, [1, 3]), (2,)),
        ((slice(None), np.array([[0, 1], [4, 3]])), (7, 2, 2)),
        (([3, 1], slice(None, None, -2)), (2, 3)),
        ((np.array([1, 1, 1]),), (3, 5)),  # repeated: the last write wins, as in NumPy
        ((np.array([True, False, False, True, True, False, True]), slice(1, 3)), (4, 2)),
        ((slice(None, None, 2), np.array([False, True, True, False, True])), (4, 3)),
        (([], 0), (0,)),
    ]
    for index, region in cases:
        for chunks in CHUNKS:
            value = _value(dtype, region)
            x = tg.from_numpy(a, chunks=chunks)
            expected = a.copy()
            expected[index] = value
            x[index] = value
            np.testing.assert_array_equal(x.compute(), expected)
            y = tg.from_numpy(a, chunks=chunks)
            lazy_index = tuple(tg.asarray(np.asarray(i) if len(i) else np.arange(0))
                               if isinstance(i, (list, np.ndarray)) else i for i in index)
            y[lazy_index] = tg.from_numpy(value, chunks=2)
            np.testing.assert_array_equal(y.compute(), expected)


def test_integer_array_with_separated_integer_follows_numpy_placement():
    a = np.arange(60.0).reshape(3, 4, 5)
    index = (0, slice(None), [1, 3])  # advanced axes first: region (2, 4)
    value = np.arange(8.0).reshape(2, 4)
    x = tg.from_numpy(a, chunks=(2, 3, 2))
    x[index] = value
    expected = a.copy()
    expected[index] = value
    np.testing.assert_array_equal(x.compute(), expected)


def test_values_are_cast_as_numpy_casts_them():
    x = tg.from_numpy(np.zeros(6, dtype=np.int64), chunks=4)
    x[1:3] = 2.9  # truncated
    x[3:5] = np.array([1.7, -1.7])
    x[5] = tg.asarray(np.array(7.9))
    assert x.dtype == np.int64
    np.testing.assert_array_equal(x.compute(), [0, 2, 2, 1, -1, 7])
    i8 = tg.from_numpy(np.zeros(3, dtype=np.int8), chunks=2)
    with pytest.raises(OverflowError):
        i8[0] = 300
    with pytest.raises(TypeError):
        i8[0] = 1j
    with pytest.raises(ValueError):
        i8[0] = "abc"
    f = tg.from_numpy(np.zeros(3), chunks=2)
    f[0] = True
    assert f.compute().tolist() == [1.0, 0.0, 0.0]


def test_later_changes_to_the_value_do_not_reach_the_array():
    value = np.array([1.0, 2.0])
    x = tg.from_numpy(np.zeros(4), chunks=3)
    x[1:3] = value
    value[:] = 99
    assert x.compute().tolist() == [0.0, 1.0, 2.0, 0.0]


def test_copies_and_aliases():
    a = np.arange(6.0)
    x = tg.from_numpy(a, chunks=4)
    alias, copy, whole, flat = x, x.copy(), x[...], x.flatten()
    x[0] = -1.0
    assert alias.compute()[0] == -1.0  # the same object, as in NumPy
    for other in (copy, whole, flat):
        assert other.compute()[0] == 0.0
    copy[1] = 5.0
    assert x.compute()[1] == 1.0


def test_in_place_operators_keep_shape_and_dtype():
    a = np.arange(12).reshape(3, 4)
    x = tg.from_numpy(a, chunks=2)
    y = x
    before = x + 0
    x += 1
    x *= np.array([1, 2, 3, 4])
    x[...] -= 1
    x[1:, ::2] //= 2
    assert x is y and x.dtype == np.int64
    expected = (a + 1) * np.array([1, 2, 3, 4]) - 1
    expected[1:, ::2] //= 2
    np.testing.assert_array_equal(x.compute(), expected)
    np.testing.assert_array_equal(before.compute(), a)
    with pytest.raises(TypeError, match="same_kind"):
        x += 1.5
    with pytest.raises(TypeError, match="same_kind"):
        x /= 2
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 3, 4\)"):
        x += np.ones((2, 3, 4), dtype=int)
    f = tg.from_numpy(np.ones(3, dtype=np.float32), chunks=2)
    f += np.ones(3)  # float64 into float32: same kind
    assert f.dtype == np.float32 and f.compute().tolist() == [2.0, 2.0, 2.0]


def test_bad_assignments_fail_at_assignment_time():
    x = tg.from_numpy(np.zeros((4, 5)), chunks=3)
    with pytest.raises(ValueError, match=r"shape \(3,\) into shape \(2, 5\)"):
        x[1:3] = np.ones(3)
    with pytest.raises(ValueError, match=r"shape \(2, 2\) into shape \(5,\)"):
        x[0] = tg.from_numpy(np.ones((2, 2)), chunks=1)
    with pytest.raises(IndexError, match="out of bounds for axis 0"):
        x[4] = 1.0
    with pytest.raises(IndexError, match="out of bounds for axis 1"):
        x[:, [0, 5]] = 1.0
    with pytest.raises(IndexError, match="does not match"):
        x[np.ones((4, 4), bool)] = 1.0
    with pytest.raises(IndexError, match="does not match"):
        x[tg.from_numpy(np.ones(5, bool), chunks=2)] = 1.0
    with pytest.raises(ValueError, match=r"value of shape \(3,\).*4 elements"):
        x[np.eye(4, 5, dtype=bool)] = np.ones(3)
    with pytest.raises(IndexError, match="could not be broadcast together"):
        x[[0, 1, 2], [1, 2]] = 1.0
    with pytest.raises(ValueError, match=r"shape \(3,\) into shape \(2,\)"):
        x[[0, 1], [1, 2]] = np.ones(3)
    y = tg.from_numpy(np.zeros((3, 4, 5)), chunks=2)
    for index in [(slice(None), [0, 1], [1, 2]), ([0, 1], slice(1, 3), [0, 1])]:
        with pytest.raises(IndexError, match="index the leading axes and every other axis "
                                             "is whole"):
            y[index] = 1.0
    assert np.all(y.compute() == 0)
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0] = 1.0
    with pytest.raises(TypeError, match="not supported"):
        x["a"] = 1.0
    sp = tg.from_scipy(__import__("scipy.sparse").sparse.csr_array(np.eye(3)), chunks=2)
    with pytest.raises(TypeError, match="sparse"):
        sp[0, 0] = 1.0
    assert np.all(x.compute() == 0)  # nothing was written by the refused assignments


@settings(max_examples=40, deadline=None)
@given(data=st.data(), chunks=st.tuples(st.integers(1, 6), st.integers(1, 6)),
       dtype=st.sampled_from([np.int32, np.float64, np.complex64, np.bool_]))
def test_random_slices_property(data, chunks, dtype):
    a = _base(dtype, (9, 6))
    x = tg.from_numpy(a, chunks=chunks)
    expected = a.copy()

    def a_slice(n):
        start = data.draw(st.none() | st.integers(-n - 1, n + 1))
        stop = data.draw(st.none() | st.integers(-n - 1, n + 1))
        step = data.draw(st.none() | st.integers(-4, 4).filter(bool))
        return slice(start, stop, step)

    for _ in range(data.draw(st.integers(1, 3))):
        index = (a_slice(9), a_slice(6))
        shape = expected[index].shape
        value = _value(dtype, shape) if data.draw(st.booleans()) else _value(dtype, ())
        expected[index] = value
        x[index] = value
    np.testing.assert_array_equal(x.compute(), expected)


# -- several advanced indices in one getitem -----------------------------------------------------


GETITEM = [
    ([0, 2], [1, 3]),
    (0, slice(None), [1, 2]),
    ([[0], [2]], slice(1, 3), [1, 3, 4]),
    (slice(None), [0, 1], None, [1, 2]),
    (slice(None), [0], Ellipsis, [1]),
    (slice(None), [0], [1], Ellipsis),
    (np.array([[1, 0], [2, 2]]), np.array([3, -1])),
    (Ellipsis, [1, 2], [0, 5]),
    ([1, 2], slice(None, None, -2), [0, 3], [5, 0]),
    (np.ones((3, 4), bool), [1]),
    (0, slice(None), np.array([True, False, True, True, False])),
    ([], []),
    (None, [2, 0], 1, slice(3, 0, -1), 4),
]


@pytest.mark.parametrize("index", GETITEM, ids=repr)
@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.complex128, np.bool_])
def test_several_advanced_indices_match_numpy(index, dtype):
    a = _base(dtype, (3, 4, 5, 6))
    x = tg.from_numpy(a, chunks=(2, 3, 2, 4))
    got = x[index]
    expected = a[index]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got.compute(), expected)


def test_several_advanced_indices_as_lazy_arrays():
    a = np.arange(60.0).reshape(3, 4, 5)
    x = tg.from_numpy(a, chunks=2)
    i = tg.from_numpy(np.array([2, 0, 1, 2]), chunks=3)
    j = tg.from_numpy(np.array([[1], [3]]), chunks=1)
    np.testing.assert_array_equal(x[i, :, j].compute(),
                                  a[np.array([2, 0, 1, 2]), :, np.array([[1], [3]])])
    np.testing.assert_array_equal(x[i % 3, j].compute(),
                                  a[np.array([2, 0, 1, 2]), np.array([[1], [3]])])


def test_several_advanced_indices_bad_input():
    x = tg.from_numpy(np.ones((3, 4)), chunks=2)
    with pytest.raises(IndexError, match=r"broadcast together with shapes \(2,\) \(3,\)"):
        x[[0, 1], [1, 2, 0]]
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 4"):
        x[[0, 1], [1, 4]]
    with pytest.raises(IndexError, match="integer or boolean"):
        x[[0, 1], np.array([0.5, 1.0])]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], [0], [0]]


def test_zero_d_and_boolean_scalar_indices():
    x = tg.asarray(np.float64(3.0))
    x[()] = 5
    assert float(x.compute()) == 5.0
    x[...] = np.array(6.0)
    assert float(x.compute()) == 6.0
    x[np.array(False)] = 7.0
    x[tg.asarray(np.array(True))] = np.array(8.0)
    assert float(x.compute()) == 8.0
    w = tg.from_numpy(np.zeros((3, 2)), chunks=2)
    w[0, True] = 1.0
    w[False] = 2.0
    w[1, np.array(True)] = 3.0
    w[2, tg.asarray(np.array(False))] = 4.0
    expected = np.zeros((3, 2))
    expected[0, True] = 1.0
    expected[False] = 2.0
    expected[1, np.array(True)] = 3.0
    expected[2, np.array(False)] = 4.0
    np.testing.assert_array_equal(w.compute(), expected)


def test_assignment_inside_a_while_loop_body():
    def body(x, i):
        x[1::3] = x[1::3] * 10  # a NumPy habit: write into the loop variable
        x[x > 500] = 500.0
        return x, i + 1

    x0 = tg.from_numpy(np.arange(1.0, 8.0), chunks=3)
    x, n = tg.while_loop(lambda x, i: i < 5, body, [x0, tg.asarray(np.int64(0))])
    expected = np.arange(1.0, 8.0)
    for _ in range(5):
        expected[1::3] *= 10
        expected[expected > 500] = 500
    np.testing.assert_array_equal(x.compute(), expected)
    assert int(n.compute()) == 5
    np.testing.assert_array_equal(x0.compute(), np.arange(1.0, 8.0))


def test_dask_value_joins_the_plan():
    da = pytest.importorskip("dask.array")
    x = tg.from_numpy(np.zeros((5, 4)), chunks=2)
    x[1:4, ::2] = da.from_array(np.arange(6.0).reshape(3, 2), chunks=2)
    expected = np.zeros((5, 4))
    expected[1:4, ::2] = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(x.compute(), expected)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), sep=st.sampled_from(["adjacent", "slice", "none", "int"]))
def test_several_advanced_indices_property(data, sep):
    a = np.arange(5 * 6 * 7).reshape(5, 6, 7)
    chunks = data.draw(st.tuples(st.integers(1, 5), st.integers(1, 6), st.integers(1, 7)))
    x = tg.from_numpy(a, chunks=chunks)
    bshape = data.draw(st.sampled_from([(3,), (2, 1), (1, 4), ()]))
    i = np.array(data.draw(st.lists(st.integers(-5, 4), min_size=1, max_size=12)))
    j = np.array(data.draw(st.lists(st.integers(-7, 6), min_size=1, max_size=12)))
    size = max(1, int(np.prod(bshape)))
    i = np.resize(i, size).reshape(bshape)
    j = np.resize(j, bshape[-1] if bshape else 1).reshape(bshape[-1:])
    middle = {"adjacent": (), "slice": (slice(None, None, -2),), "none": (None, 1),
              "int": (2,)}[sep]
    index = (i, *middle, j) if sep != "adjacent" else (slice(1, 5), i, j)
    np.testing.assert_array_equal(x[index].compute(), a[index])


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.complex128, np.bool_])
@pytest.mark.parametrize("index", [
    (np.array([0, 6, 3, 3]), np.array([1, 8, 2, 2])),     # a point named twice: last wins
    ([0, -1], [2, 3]),
    (np.arange(5), np.arange(5)),                          # a diagonal
    (np.array([[0, 1], [2, 3]]), np.array([4, 5])),        # broadcast index arrays
    (np.array([1, 2]), 3),                                 # an int among the arrays
    (np.array([1, 2]), np.array([3, 4]), slice(None)),
    (np.array([1, 2]), np.array([3, 4]), np.array([0, 4])),
])
def test_several_integer_arrays_assign_points_as_numpy(index, dtype):
    rng = np.random.default_rng(3)
    a = (rng.random((7, 9, 5)) * 10).astype(dtype)
    want = a.copy()
    x = tg.from_numpy(a, chunks=(3, 4, 2))
    before = x + 0
    val = (rng.random(want[index].shape) * 10).astype(dtype)
    want[index] = val
    x[index] = val
    np.testing.assert_array_equal(x.compute(), want)
    want[index] = 7
    x[index] = 7
    np.testing.assert_array_equal(x.compute(), want)
    lazy = tg.from_numpy(val[..., ::-1].copy(), chunks=2)
    want[index] = val[..., ::-1]
    x[index] = lazy
    np.testing.assert_array_equal(x.compute(), want)
    np.testing.assert_array_equal(before.compute(), a)   # built before: the old values


def test_point_assignment_touches_only_the_blocks_of_its_points():
    x = tg.from_numpy(np.zeros((9, 9)), chunks=3)
    x[np.arange(3), np.arange(3)] = 1.0      # the diagonal of block (0, 0) only
    np.testing.assert_array_equal(x.compute()[:3, :3], np.eye(3))
    assert x.compute().sum() == 3
    keys = x.collection.keys
    changed = [c for c in np.ndindex(3, 3) if keys[c][0].startswith("setitem")]
    assert changed == [(0, 0)]


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
@pytest.mark.parametrize("k", [0, 3, -1])
@pytest.mark.parametrize("form", ["i", ":,i", "...,i", "i,..."])
def test_assignment_at_a_lazy_scalar_index_is_read_when_run(form, k, dtype):
    rng = np.random.default_rng(5)
    a = (rng.random((7, 9)) * 10).astype(dtype)

    def index(i):
        return {"i": i, ":,i": (slice(None), i), "...,i": (Ellipsis, i),
                "i,...": (i, Ellipsis)}[form]

    x = tg.from_numpy(a, chunks=(3, 4))
    want = a.copy()
    calls = []
    with tg.config.set(callbacks=[calls.append]):
        val = (rng.random(want[index(k)].shape) * 10).astype(dtype)
        want[index(k)] = val
        x[index(tg.asarray(np.int64(k)) + 0)] = val
        assert calls == []   # planning the assignment computed nothing
    np.testing.assert_array_equal(x.compute(), want)
    want[index(k)] = 4
    x[index(tg.asarray(np.int64(k)))] = 4
    np.testing.assert_array_equal(x.compute(), want)
    want[index(k)] = val[::-1]
    x[index(tg.asarray(np.int64(k)))] = tg.from_numpy(val[::-1].copy(), chunks=2)
    np.testing.assert_array_equal(x.compute(), want)


def test_assignment_at_a_loop_carried_index_in_a_while_loop_body():
    def body(i, x):
        x[i] = i * 10.0
        return i + 1, x

    i, y = tg.while_loop(lambda i, x: i < 5, body,
                         (tg.asarray(np.int64(0)), tg.from_numpy(np.zeros(10), chunks=4)))
    np.testing.assert_array_equal(y.compute(), [0, 10, 20, 30, 40, 0, 0, 0, 0, 0])
    assert int(i.compute()) == 5
    x = tg.from_numpy(np.zeros(5), chunks=2)
    x[tg.asarray(np.int64(5))] = 1.0
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        x.compute()
    with pytest.raises(ValueError, match=r"shape \(3,\) into shape \(\)"):
        x[tg.asarray(np.int64(1))] = np.ones(3)
