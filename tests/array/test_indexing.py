"""Integer-array and boolean-mask indexing, take/compress/nonzero, against NumPy on uneven
blocks and several dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays

DTYPES = [np.float64, np.float32, np.int32, np.complex128, np.bool_]


def _data(dtype, shape=(7, 5)):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape) * 10
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return (a > 0) if dtype == np.bool_ else a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index", [
    [5, 3], [-1, 0, 0, 6], (slice(None), [0, 2]), (Ellipsis, [4, 0, 1]), (None, [1, 2]),
    (2, [1, 4]), ([[1, 2], [0, 6]],), (slice(1, 6, 2), [0, 4, 3]), ([],),
    (np.array([6, 0, 3]), slice(None, None, -1)),
])
def test_integer_array_index_equals_numpy(dtype, index):
    a = _data(dtype)
    x = tg.from_numpy(a, chunks=(3, 2))
    got = x[index]
    want = a[index]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.compute(), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_boolean_mask_index_equals_numpy(dtype):
    a = _data(dtype)
    x = tg.from_numpy(a, chunks=(3, 2))
    m = np.abs(a) > 3 if dtype != np.bool_ else a
    xm = abs(x) > 3 if dtype != np.bool_ else x
    for got, want in [(x[xm], a[m]), (x[m], a[m]), (x[:, m[0]], a[:, m[0]]),
                      (x[xm[:, 1]], a[m[:, 1]]), (x[xm[:, 1], 2:], a[m[:, 1], 2:])]:
        np.testing.assert_array_equal(got.compute(), want)
        assert got.shape == want.shape


def test_mask_plans_in_two_phases_sizes_first():
    a = np.arange(20.0).reshape(4, 5)
    x = tg.from_numpy(a, chunks=(3, 2))
    y = x[x > 6.5]
    # phase one ran already: the result's blocks have their real sizes
    assert y.shape == (13,) and sum(y.chunks[0]) == 13
    assert len(plan_arrays([y]).graph) > 0
    np.testing.assert_array_equal((y * 2).compute(), a[a > 6.5] * 2)


def test_lazy_integer_index_array_and_take_compress_nonzero():
    a = _data(np.float64, (9, 4))
    x = tg.from_numpy(a, chunks=(4, 3))
    idx = tg.from_numpy(np.array([8, 1, 1, 0]), chunks=3)
    np.testing.assert_array_equal(x[idx].compute(), a[[8, 1, 1, 0]])
    np.testing.assert_array_equal(tg.take(x, [3, 0], axis=1).compute(), np.take(a, [3, 0], 1))
    np.testing.assert_array_equal(np.take(x, [5, 30]).compute(), np.take(a, [5, 30]))
    cond = [True, False, True, True]
    np.testing.assert_array_equal(np.compress(cond, x, axis=1).compute(),
                                  np.compress(cond, a, axis=1))
    for got, want in zip(np.nonzero(x > 2), np.nonzero(a > 2), strict=True):
        np.testing.assert_array_equal(got.compute(), want)
    np.testing.assert_array_equal(np.argwhere(x > 2).compute(), np.argwhere(a > 2))
    np.testing.assert_array_equal(np.flatnonzero(x > 2).compute(), np.flatnonzero(a > 2))
    np.testing.assert_array_equal(np.extract(x > 2, x).compute(), np.extract(a > 2, a))
    empty = x[x > 1e9]
    assert empty.shape == (0,)
    assert empty.compute().shape == (0,)


def test_bad_indices_fail_clearly():
    x = tg.from_numpy(np.arange(10.0), chunks=4)
    with pytest.raises(IndexError, match="out of bounds"):
        x[[1, 10]]
    with pytest.raises(IndexError, match="integer or boolean"):
        x[np.array([1.5])]
    with pytest.raises(IndexError, match="does not match"):
        x[np.ones(9, bool)]
    y = tg.from_numpy(np.ones((3, 3)), chunks=2)
    with pytest.raises(IndexError, match="could not be broadcast together"):
        y[[0, 1], [1, 2, 0]]
    with pytest.raises(IndexError, match="out of bounds for axis 1"):
        y[[0, 1], [1, 3]]
    with pytest.raises(np.exceptions.AxisError):
        tg.take(y, [0], axis=3)


def test_lazy_scalar_index_is_read_when_the_plan_runs():
    a = np.arange(10.0) * 2
    x = tg.from_numpy(a, chunks=3)
    assert float(x[x.argmax()].compute()) == 18.0
    assert float(x[tg.asarray(np.int64(4))].compute()) == 8.0
    # the plan does not depend on the index value: nothing is computed to build it
    i = tg.asarray(np.int64(4)) + 0
    calls = []
    with tg.config.set(callbacks=[calls.append]):
        y = x[i]
        assert calls == []
        assert float(y.compute()) == 8.0


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128, np.bool_])
@pytest.mark.parametrize("k", [0, 4, 6, -1, -7])
def test_lazy_scalar_indices_with_basic_ones_equal_numpy(dtype, k):
    a = (np.arange(70).reshape(7, 10) % 5).astype(dtype)
    x = tg.from_numpy(a, chunks=(3, 4))
    i = tg.asarray(np.int64(k))
    j = tg.asarray(np.int64(k % 10 - 1))
    for got, want in [(x[i], a[k]), (x[:, i], a[:, k]), (x[1:6:2, j], a[1:6:2, k % 10 - 1]),
                      (x[None, ..., j], a[None, ..., k % 10 - 1]), (x[i, j], a[k, k % 10 - 1]),
                      (x[i, ::-3], a[k, ::-3])]:
        np.testing.assert_array_equal(got.compute(), want)
        assert got.dtype == want.dtype and got.shape == want.shape


def test_lazy_scalar_index_out_of_bounds_fails_when_run():
    x = tg.from_numpy(np.arange(6.0), chunks=4)
    y = x[tg.asarray(np.int64(6))]
    with pytest.raises(IndexError, match="index 6 is out of bounds for axis 0 with size 6"):
        y.compute()
    with pytest.raises(TypeError, match="0-d integer Array"):
        from tilegraph.array.indexing import dynamic_index

        dynamic_index(x, tg.asarray(np.array([1])), 0)


def test_loop_carried_index_in_a_while_loop_body():
    a = np.arange(10.0)
    x = tg.from_numpy(a, chunks=4)
    i, y = tg.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2 + x[i]),
                         (tg.asarray(np.int64(0)), x))
    want = a.copy()
    for k in range(3):
        want = want * 2 + want[k]
    np.testing.assert_array_equal(y.compute(), want)
    assert int(i.compute()) == 3


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.complex128])
@pytest.mark.parametrize("index", [
    ([0, 2, 6], [4, 1]),                                   # two arrays, an outer product
    ([5, 3], [1, 3]),                                      # equal lengths: still outer
    (np.array([True, False, True, True, False, False, True]), [0, 4]),
    (slice(1, 6, 2), [4, 4, 0]),
    (3, [2, 0]),                                           # an integer drops its axis
    ([6, 1], 2),
    (Ellipsis, [1, 3]),
    ([], [0, 1]),
    (np.int64(-1), slice(None, None, -1)),
])
def test_oindex_is_the_outer_product_of_the_selections(dtype, index):
    a = _data(dtype)
    x = tg.from_numpy(a, chunks=(3, 2))
    if any(i is Ellipsis for i in index):  # "..." is the axes not named
        at = [i is Ellipsis for i in index].index(True)
        full = (*index[:at], *[slice(None)] * (a.ndim - len(index) + 1), *index[at + 1:])
    else:
        full = index
    want = a[np.ix_(*[np.arange(n)[i] if not isinstance(i, (int, np.integer)) else [i]
                      for i, n in zip(full, a.shape, strict=True)])]
    want = want.reshape([s for s, i in zip(want.shape, full, strict=True)
                         if not isinstance(i, (int, np.integer))])
    got = x.oindex[index]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.compute(), want)


def test_oindex_three_axes_and_bad_input():
    a = np.arange(5 * 6 * 4).reshape(5, 6, 4)
    x = tg.from_numpy(a, chunks=(2, 4, 3))
    np.testing.assert_array_equal(x.oindex[[4, 0], :, [3, 1, 2]].compute(),
                                  a[[4, 0]][:, :, [3, 1, 2]])
    np.testing.assert_array_equal(x.oindex[[1]].compute(), a[[1]])
    with pytest.raises(IndexError, match="2 dimensions"):
        x.oindex[[[0, 1]], [0]]
    with pytest.raises(IndexError, match="too many indices"):
        x.oindex[[0], [0], [0], [0]]
    with pytest.raises(IndexError, match="single ellipsis"):
        x.oindex[..., [0], ...]
    with pytest.raises(IndexError, match="newaxis"):
        x.oindex[None, [0]]
    with pytest.raises(IndexError):
        x.oindex[[0, 5], [1]]  # 5 is out of bounds for axis 0 of size 5


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_take_with_given_block_sizes(dtype):
    a = _data(dtype, (7, 9))
    x = tg.from_numpy(a, chunks=(3, 4))
    idx = np.array([8, 0, 0, 5, 2, 7])
    got = tg.take(x, idx, axis=1, block_sizes=(1, 4, 0, 1))
    assert got.chunks == ((3, 3, 1), (1, 4, 0, 1))
    np.testing.assert_array_equal(got.compute(), a[:, idx])
    with pytest.raises(ValueError, match="adding up to the 6 indices"):
        tg.take(x, idx, axis=1, block_sizes=(3, 2))
    with pytest.raises(ValueError, match="sizes >= 0"):
        tg.take(x, idx, axis=1, block_sizes=(7, -1))
