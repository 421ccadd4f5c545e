"""Basic indexing ``x[...]`` against NumPy: ints, slices (any start, stop and step), ``None``
and ``...`` over uneven blocks, chained with transpose and rechunk; errors at build time."""

from __future__ import annotations

import numpy as np
import pytest
from _blocked import axis_chunks, block_values, check, make, shapes_and_chunks  # noqa: F401
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import tilegraph as tg

SETTINGS = settings(max_examples=150, deadline=None)
DTYPES = ["int8", "int64", "uint16", "float32", "float64", "complex128", "bool"]




@st.composite
def arrays(draw, min_dims: int = 1, max_dims: int = 4):
    shape, chunks = draw(shapes_and_chunks(min_dims, max_dims))
    x = make(shape, draw(st.sampled_from(DTYPES)))
    return x, tg.from_numpy(x, chunks=chunks)


def _int(draw, value: int):
    return draw(st.sampled_from([int, np.int64, np.intp, np.int8 if -128 <= value < 128
                                 else int]))(value)


@st.composite
def index_item(draw, n: int):
    """An int (negative too) or a slice (any bounds, any non-zero step) for an axis of
    length ``n``."""
    bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
    step = st.one_of(st.none(), st.integers(-n - 2, n + 2).filter(bool))
    if n and draw(st.integers(0, 2)) == 0:
        return _int(draw, draw(st.integers(-n, n - 1)))
    return slice(draw(bound), draw(bound), draw(step))


@st.composite
def basic_indexes(draw, shape: tuple[int, ...]):
    """A basic index for ``shape``: ints, slices, ``None`` and at most one ``...``, as a tuple
    or (sometimes) a bare item."""
    nd = len(shape)
    k = draw(st.integers(0, nd))  # axes indexed explicitly
    if draw(st.booleans()):
        j = draw(st.integers(0, k))  # items before the ellipsis
        lengths = list(shape[:j]) + list(shape[nd - (k - j):])
        items: list = [draw(index_item(n)) for n in lengths]
        items.insert(j, Ellipsis)
    else:
        items = [draw(index_item(n)) for n in shape[:k]]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


# -- property tests -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data(), xa=arrays(min_dims=0))
def test_basic_index_matches_numpy(data, xa):
    x, a = xa
    index = data.draw(basic_indexes(x.shape), label="index")
    check(a[index], x[index])


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_slice_only_indexes_keep_dims_and_block_count_bound(data, xa):
    x, a = xa
    index = tuple(data.draw(index_item(n).filter(lambda i: isinstance(i, slice)))
                  for n in x.shape)
    out = a[index]
    check(out, x[index])
    assert out.ndim == a.ndim
    # slicing never makes more blocks along an axis than the input has there
    for axis in range(a.ndim):
        assert out.numblocks[axis] <= max(1, a.numblocks[axis])


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_slice_of_slice_of_transpose(data, xa):
    x, a = xa
    perm = data.draw(st.permutations(range(x.ndim)), label="perm")
    xt, at = x.transpose(perm), a.transpose(perm)
    i1 = data.draw(basic_indexes(xt.shape), label="i1")
    x1, a1 = xt[i1], at[i1]
    i2 = data.draw(basic_indexes(np.shape(x1)), label="i2")
    check(a1[i2], x1[i2])


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_slicing_after_rechunk(data, xa):
    x, a = xa
    new = tuple(data.draw(axis_chunks(n), label=f"chunks{ax}") for ax, n in enumerate(x.shape))
    r = a.rechunk(new)
    assert r.chunks == tuple(tuple(c) for c in new)
    index = data.draw(basic_indexes(x.shape), label="index")
    check(r[index], x[index])


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_rechunk_after_slicing(data, xa):
    x, a = xa
    index = data.draw(basic_indexes(x.shape), label="index")
    expected = x[index]
    new = tuple(data.draw(axis_chunks(n)) for n in np.shape(expected))
    out = a[index].rechunk(new)
    assert out.chunks == new
    check(out, expected)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), xa=arrays(min_dims=0))
def test_indexing_is_lazy(forbid_compute, data, xa):
    x, a = xa
    index = data.draw(basic_indexes(x.shape), label="index")
    out = a[index][...]
    expected_shape = np.shape(x[index])
    assert out.shape == expected_shape
    assert tuple(sum(c) for c in out.chunks) == expected_shape


# -- particular cases ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "index",
    [(), Ellipsis, None, (None, Ellipsis, None), (Ellipsis, None)],
    ids=["empty", "ellipsis", "none", "none-ell-none", "ell-none"],
)
def test_zero_dimensional(index):
    x = np.array(2.5)
    a = tg.from_numpy(x)
    check(a[index], x[index])


def test_zero_d_result_is_a_numpy_scalar():
    x = make((4, 5), "int32")
    a = tg.from_numpy(x, chunks=((1, 3), (2, 2, 1)))
    out = a[2, -1]
    assert out.shape == () and out.chunks == ()
    got = out.compute(backend="sync")
    assert got == x[2, -1] and got.dtype == x.dtype and np.ndim(got) == 0


@pytest.mark.parametrize(
    "index",
    [slice(None, None, -1), slice(None, None, -3), slice(8, 1, -2), slice(-1, -11, -1),
     slice(100, -100, -4), slice(-100, 100, 3), slice(3, 3), slice(5, 2), slice(None, None, 11),
     slice(None, None, -11), slice(9, None, -9)],
    ids=str,
)
def test_slices_across_uneven_blocks(index):
    x = make((10,), "float64")
    for chunks in [((3, 3, 4),), ((1,) * 10,), ((10,),), ((0, 5, 0, 5),), ((4, 0, 6),)]:
        check(tg.from_numpy(x, chunks=chunks)[index], x[index])


def test_int_indexes_on_every_block_edge():
    x = make((7, 5), "int64")
    a = tg.from_numpy(x, chunks=((2, 0, 4, 1), (3, 2)))
    for i in range(-7, 7):
        check(a[i], x[i])
        check(a[:, i % 5], x[:, i % 5])
        check(a[np.int64(i), None], x[np.int64(i), None])
    check(a[np.array(3)], x[np.array(3)])


def test_full_slices_keep_blocks():
    x = make((4, 6))
    a = tg.from_numpy(x, chunks=((1, 3), (2, 4)))
    for index in [slice(None), (slice(None), slice(None)), Ellipsis, (Ellipsis, slice(None))]:
        out = a[index]
        assert out.chunks == a.chunks
        check(out, x[index])


def test_iterating_rows():
    x = make((3, 4), "complex128")
    a = tg.from_numpy(x, chunks=((2, 1), (3, 1)))
    rows = list(a)
    assert len(rows) == 3
    for got, want in zip(rows, x, strict=True):
        check(got, want)


@pytest.mark.parametrize(
    ("index", "axis"),
    [(5, 0), (-6, 0), ((0, 4), 1), ((0, -5), 1), ((Ellipsis, 3), 2), ((None, 1, 1, -4), 2)],
    ids=str,
)
def test_out_of_bounds_int_raises_index_error(forbid_compute, index, axis):
    x = make((5, 4, 3))
    a = tg.from_numpy(x, chunks=2)
    with pytest.raises(IndexError):
        x[index]
    with pytest.raises(IndexError, match=rf"axis {axis}\b") as info:
        a[index]
    assert str((5, 4, 3)) in str(info.value)


def test_index_into_empty_axis_raises(forbid_compute):
    a = tg.from_numpy(np.zeros((3, 0)), chunks=2)
    with pytest.raises(IndexError, match=r"axis 1\b.*\(3, 0\)"):
        a[:, 0]


@pytest.mark.parametrize(
    "index",
    [(0, 0, 0), (0, 0, Ellipsis, 0), (None, 0, 0, 0), (slice(None),) * 3],
    ids=str,
)
def test_too_many_indices_raise_index_error(forbid_compute, index):
    x = make((2, 3))
    with pytest.raises(IndexError):
        x[index]
    with pytest.raises(IndexError, match=r"too many indices.*\(2, 3\)"):
        tg.from_numpy(x, chunks=1)[index]


def test_too_many_indices_on_zero_d(forbid_compute):
    with pytest.raises(IndexError, match="too many indices"):
        tg.from_numpy(np.array(1.0))[0]


def test_two_ellipses_raise_index_error(forbid_compute):
    a = tg.from_numpy(make((2, 3)), chunks=1)
    with pytest.raises(IndexError, match="ellipsis"):
        a[..., 0, ...]


@pytest.mark.parametrize(
    "index",
    [
        [0, 1],
        [],
        np.array([0, 1]),
        np.array([[1]]),
        np.array([True, False, True]),
        (slice(None), [0, 1]),
        (0, np.array([1, 2])),
        (Ellipsis, np.array([True, False, True, False])),
    ],
    ids=["list", "empty-list", "int-array", "int-array-2d", "bool-mask", "tuple-with-list",
         "tuple-with-array", "tuple-with-mask"],
)
def test_advanced_indexing_equals_numpy(index):
    data = make((3, 4))
    a = tg.from_numpy(data, chunks=2)
    np.testing.assert_array_equal(a[index].compute(), data[index])


@pytest.mark.parametrize("index", [True, np.True_, np.array(True), False,
                                   (0, np.False_, slice(1, 3))])
def test_boolean_scalar_index_adds_an_axis_as_numpy(index):
    data = make((3, 4))
    a = tg.from_numpy(data, chunks=2)
    np.testing.assert_array_equal(a[index].compute(), data[index])
    assert a[index].shape == data[index].shape


@pytest.mark.parametrize("index", [1.0, "a", (0, 1.5), {0}], ids=str)
def test_other_index_types_raise_type_error(forbid_compute, index):
    a = tg.from_numpy(make((3, 4)), chunks=2)
    with pytest.raises(TypeError, match="only basic indexing"):
        a[index]


def test_zero_step_raises_value_error(forbid_compute):
    a = tg.from_numpy(make((3, 4)), chunks=2)
    with pytest.raises(ValueError, match="step"):
        a[::0]


# -- laziness and backends ----------------------------------------------------------------


def test_forbid_compute_fixture_catches_a_compute(forbid_compute):
    """The laziness tests rely on this: under ``forbid_compute`` a compute fails."""
    a = tg.from_numpy(make((4, 4)), chunks=2)[1:, ::-1]
    with pytest.raises(AssertionError, match="a run of"):
        a.compute()


def test_building_many_slices_is_lazy(forbid_compute):
    x = make((6, 5, 4))
    a = tg.from_numpy(x, chunks=((1, 2, 3), (5,), (3, 1)))
    out = a[::-2, None, 1:][..., 0][1, ..., None][:, :, ::-1]
    want = x[::-2, None, 1:][..., 0][1, ..., None][:, :, ::-1]
    assert out.shape == want.shape
    assert tuple(sum(c) for c in out.chunks) == want.shape


CASES = [
    (lambda v: v[1:, ::-2], "rows-and-reversed-cols"),
    (lambda v: v[::-1, None, 3], "reverse-newaxis-int"),
    (lambda v: v.T[2:0:-1][..., 1:], "slice-of-slice-of-transpose"),
    (lambda v: v[-1, -1], "scalar"),
    (lambda v: v[5:, 2:2], "empty"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_same_result_on_every_backend(backend_options, case):
    func, _ = case
    x = make((5, 7), "float32")
    a = tg.from_numpy(x, chunks=((2, 1, 2), (3, 3, 1)))
    expected = func(x)
    got = func(a).compute(**backend_options)
    assert_array_equal(got, expected, strict=True)
