"""Creation functions (zeros, ones, full, eye, arange, linspace, from_numpy, asarray) and
tilegraph.random, checked against NumPy on uneven blocks; chunks= forms and their errors;
laziness."""

import math

import numpy as np
import pytest
from _blocked import uneven_chunks as axis_chunks
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.array.chunks import AUTO_BLOCK_BYTES

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def shape_and_chunks(draw, min_dims=0, max_dims=3, max_side=6):
    shape = tuple(draw(st.lists(st.integers(0, max_side), min_size=min_dims,
                                max_size=max_dims)))
    return shape, tuple(draw(axis_chunks(n)) for n in shape)


def check(result, expected, exact=True):
    """``result`` (an Array) computes to ``expected``: same shape, dtype and values."""
    assert result.shape == expected.shape
    assert result.dtype == expected.dtype
    got = result.compute()
    assert np.asarray(got).dtype == expected.dtype
    assert np.shape(got) == expected.shape
    if exact:
        np.testing.assert_array_equal(got, expected, strict=True)
    else:
        rtol = 1e-6 if expected.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)
    return got


# -- zeros, ones, full ---------------------------------------------------------------------

CREATION_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.complex128]


@SETTINGS
@given(sc=shape_and_chunks(), dtype=st.sampled_from(CREATION_DTYPES))
def test_zeros_ones_match_numpy(sc, dtype):
    shape, chunks = sc
    z = tg.zeros(shape, dtype=dtype, chunks=chunks)
    o = tg.ones(shape, dtype=dtype, chunks=chunks)
    assert z.chunks == chunks and o.chunks == chunks
    check(z, np.zeros(shape, dtype=dtype))
    check(o, np.ones(shape, dtype=dtype))


@SETTINGS
@given(sc=shape_and_chunks(),
       fill=st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.booleans(),
                      st.complex_numbers(max_magnitude=5, allow_nan=False)))
def test_full_matches_numpy_dtype_inference(sc, fill):
    shape, chunks = sc
    check(tg.full(shape, fill, chunks=chunks), np.full(shape, fill))


def test_full_with_dtype_and_nan():
    check(tg.full((3, 5), 2.5, dtype=np.float32, chunks=((1, 2), (4, 1))),
          np.full((3, 5), 2.5, dtype=np.float32))
    got = tg.full((4,), np.nan, chunks=3).compute()
    assert got.dtype == np.float64 and np.isnan(got).all()


def test_full_with_array_fill_value_broadcasts():
    check(tg.full((4, 3), [1, 2, 3], chunks=((1, 3), (2, 1))), np.full((4, 3), [1, 2, 3]))
    check(tg.full((2, 3), [[1.5], [2.5]], dtype=np.float32, chunks=1),
          np.full((2, 3), [[1.5], [2.5]], dtype=np.float32))
    with pytest.raises(ValueError, match=r"\(4, 3\)"):
        tg.full((4, 3), [1, 2])


def test_full_value_that_does_not_fit_fails_at_build_time(forbid_compute):
    with pytest.raises(OverflowError):
        tg.full((3,), 300, dtype=np.uint8)
    with pytest.raises(OverflowError):
        np.full((3,), 300, dtype=np.uint8)
    with pytest.raises(ValueError):
        tg.full((3,), "abc", dtype=np.float64)
    with pytest.raises(TypeError, match="object"):
        tg.full((3,), None)


@pytest.mark.parametrize("dtype", ["U3", "S2", "M8[s]", "m8[ms]", np.float16, np.uint8])
def test_zeros_of_every_dtype_are_numpys_zeros_and_writeable(dtype):
    """NumPy's zeros per block (an empty string for a string dtype, not "0"); a fill of
    all-zero bits takes the same blocks, a fill of -0.0 keeps its sign."""
    got = tg.zeros((5, 4), dtype=dtype, chunks=((2, 3), (3, 1))).compute()
    want = np.zeros((5, 4), dtype=dtype)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    got[0, 0] = want[0, 0]  # an array of the caller's, as NumPy's is
    negative = tg.full((3,), -0.0, chunks=2).compute()
    assert np.signbit(negative).all() and negative.dtype == np.float64
    check(tg.full((3, 2), 0, dtype=np.complex64, chunks=2), np.zeros((3, 2), np.complex64))


def test_zeros_and_ones_default_dtype_is_float64_like_numpy():
    assert tg.zeros(3).dtype == np.float64
    assert tg.zeros(3, dtype=None).dtype == np.zeros(3, dtype=None).dtype
    assert tg.ones((2, 2), dtype=None).dtype == np.ones((2, 2), dtype=None).dtype
    check(tg.ones((2, 3), dtype=None, chunks=1), np.ones((2, 3), dtype=None))


def test_shape_as_int_and_zero_dim():
    check(tg.ones(4, chunks=3), np.ones(4))
    assert tg.zeros((), chunks=()).compute() == 0.0
    assert tg.zeros(()).shape == ()


def test_negative_shape_raises_naming_shape():
    with pytest.raises(ValueError, match=r"negative dimensions.*\(3, -1\)"):
        tg.zeros((3, -1))
    with pytest.raises(TypeError, match="shape"):
        tg.ones("abc")


# -- chunks= forms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (3, ((3, 3, 1), (3, 2))),
        ((3, 2), ((3, 3, 1), (2, 2, 1))),
        ((-1, 2), ((7,), (2, 2, 1))),
        (-1, ((7,), (5,))),
        (None, ((7,), (5,))),
        (((1, 6), (2, 3)), ((1, 6), (2, 3))),
        ((4, (1, 1, 3)), ((4, 3), (1, 1, 3))),
        ({0: 2}, ((2, 2, 2, 1), (5,))),
        ({-1: 4}, ((7,), (4, 1))),
        ("auto", ((7,), (5,))),
    ],
)
def test_chunks_forms(chunks, expected):
    ref = np.arange(35.0).reshape(7, 5)
    for x in (tg.ones((7, 5), chunks=chunks), tg.from_numpy(ref, chunks=chunks),
              tg.asarray(ref, chunks=chunks)):
        assert x.chunks == expected
        assert x.numblocks == tuple(len(c) for c in expected)
    check(tg.from_numpy(ref, chunks=chunks), ref)
    check(tg.full((7, 5), 3, chunks=chunks), np.full((7, 5), 3))


def test_auto_chunks_cut_a_big_array_into_blocks_of_at_most_128_mib(forbid_compute):
    x = tg.zeros((20000, 10000), chunks="auto")
    assert x.npartitions > 1
    assert all(sum(c) == s for c, s in zip(x.chunks, x.shape, strict=True))
    assert math.prod(x.chunksize) * x.itemsize <= AUTO_BLOCK_BYTES


def test_chunks_on_zero_length_axes():
    for chunks in (2, -1, "auto", ((0,), (3, 1))):
        x = tg.ones((0, 4), chunks=chunks)
        assert x.chunks[0] == (0,)
        check(x, np.ones((0, 4)))


@pytest.mark.parametrize(
    ("chunks", "exc"),
    [
        (((3, 3), (5,)), ValueError),  # rows add up to 6, not 7
        (((7,), (2, 2)), ValueError),  # columns add up to 4, not 5
        (((8, -1), (5,)), ValueError),  # negative block size
        (0, ValueError),
        (-2, ValueError),
        ((3,), ValueError),  # one entry for a 2-d array
        ((3, 3, 3), ValueError),  # three entries for a 2-d array
        ((0, 2), ValueError),
    ],
)
def test_bad_chunks_raise_value_error_naming_the_shape(chunks, exc):
    with pytest.raises(exc, match=r"\(7, 5\)"):
        tg.zeros((7, 5), chunks=chunks)
    with pytest.raises(exc, match=r"\(7, 5\)"):
        tg.from_numpy(np.zeros((7, 5)), chunks=chunks)


def test_unknown_chunks_string_names_the_shape():
    with pytest.raises(ValueError, match=r"\(7, 5\)"):
        tg.zeros((7, 5), chunks="bogus")


def test_unreadable_chunks_raise_type_error():
    with pytest.raises(TypeError, match="chunks"):
        tg.zeros((7, 5), chunks=(2.5, 1))
    with pytest.raises(TypeError, match="chunks"):
        tg.zeros((7, 5), chunks=object())


def test_from_numpy_rejects_object_arrays():
    with pytest.raises(TypeError, match="object"):
        tg.from_numpy(np.array([1, "a"], dtype=object))


@SETTINGS
@given(sc=shape_and_chunks(), dtype=st.sampled_from(CREATION_DTYPES))
def test_from_numpy_and_asarray_roundtrip(sc, dtype):
    shape, chunks = sc
    ref = (np.arange(math.prod(shape)).reshape(shape) % 7).astype(dtype)
    check(tg.from_numpy(ref, chunks=chunks), ref)
    as_list = ref.tolist() if 0 not in shape else ref  # nested lists lose empty axes
    check(tg.asarray(as_list, chunks=chunks, dtype=dtype), ref)


def test_asarray_of_array_casts_and_keeps_plan():
    x = tg.from_numpy(np.arange(6), chunks=4)
    assert tg.asarray(x) is x
    check(tg.asarray(x, dtype=np.float32), np.arange(6, dtype=np.float32))


# -- eye -----------------------------------------------------------------------------------


@SETTINGS
@given(n=st.integers(0, 7), m=st.one_of(st.none(), st.integers(0, 7)), k=st.integers(-8, 8),
       dtype=st.sampled_from([np.float64, np.float32, np.int32, np.bool_, np.complex128]),
       data=st.data())
def test_eye_matches_numpy(n, m, k, dtype, data):
    cols = n if m is None else m
    chunks = (data.draw(axis_chunks(n)), data.draw(axis_chunks(cols)))
    x = tg.eye(n, m, k=k, dtype=dtype, chunks=chunks)
    assert x.chunks == chunks
    check(x, np.eye(n, m, k=k, dtype=dtype))


@pytest.mark.parametrize("chunks", [2, (3, -1), -1, "auto", ((1, 4), (2, 1, 3))])
def test_eye_chunk_forms(chunks):
    check(tg.eye(5, 6, k=1, chunks=chunks), np.eye(5, 6, k=1))


def test_eye_bad_arguments(forbid_compute):
    with pytest.raises(TypeError, match="k"):
        tg.eye(3, k=1.5)
    with pytest.raises(TypeError, match="shape"):
        tg.eye(3.0)
    with pytest.raises(ValueError, match="negative"):
        tg.eye(3, -2)


# -- arange ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        (10,), (0,), (-3,), (2, 11), (2, 11, 3), (11, 2, -3), (5, 5), (0, 1, 0.1),
        (0.5, 3.2, 0.25), (1.0, -2.0, -0.3), (-1, 1, 0.5), (0, 10, 2.5),
        (np.float32(0), np.float32(2), np.float32(0.25)),
    ],
)
@pytest.mark.parametrize("chunks", [1, 3, "auto", -1])
def test_arange_matches_numpy(args, chunks):
    ref = np.arange(*args)
    x = tg.arange(*args, chunks=chunks)
    check(x, ref, exact=ref.dtype.kind in "iub")


@SETTINGS
@given(start=st.integers(-20, 20), length=st.integers(0, 30), data=st.data(),
       step=st.sampled_from([1, 2, 3, -1, -2, 0.5, -0.75, 1.25]))
def test_arange_uneven_chunks(start, length, step, data):
    stop = start + length * step
    ref = np.arange(start, stop, step)
    chunks = data.draw(axis_chunks(len(ref)))
    x = tg.arange(start, stop, step, chunks=(chunks,))
    assert x.chunks == (chunks,)
    check(x, ref, exact=ref.dtype.kind == "i")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.complex128])
def test_arange_with_dtype(dtype):
    check(tg.arange(1, 9, 2, dtype=dtype, chunks=3), np.arange(1, 9, 2, dtype=dtype))


def test_arange_zero_step_and_infinite_length_raise(forbid_compute):
    with pytest.raises(ValueError, match="step"):
        tg.arange(0, 10, 0)
    with pytest.raises(ValueError, match="length"):
        tg.arange(0, np.inf)
    with pytest.raises(ValueError, match="length"):
        tg.arange(0, np.nan)


def test_arange_integer_dtype_with_float_step_matches_numpy():
    # NumPy casts start and start + step to the dtype first: [0, 1, 2, 3], not [0, 1, 3, 4]
    for args in ((0, 5, 1.5), (0.5, 4, 1), (-2.5, 3, 1.25)):
        ref = np.arange(*args, dtype=np.int64)
        check(tg.arange(*args, dtype=np.int64, chunks=2), ref)


@pytest.mark.filterwarnings("error")  # no overflow warnings: integer wrap-around is silent
def test_arange_unsigned_and_small_integer_dtypes_match_numpy():
    for args in ((5, 0, -1), (250, 257, 1), (255, 256, 2), (0, 300, 100), (3, 9, 2)):
        check(tg.arange(*args, dtype=np.uint8, chunks=2), np.arange(*args, dtype=np.uint8))
    check(tg.arange(120, 130, 3, dtype=np.int8, chunks=3), np.arange(120, 130, 3, dtype=np.int8))


def test_arange_start_that_does_not_fit_the_dtype_fails_at_build_time(forbid_compute):
    with pytest.raises(OverflowError, match="-1"):
        tg.arange(-1, 3, dtype=np.uint8)
    with pytest.raises(OverflowError):
        np.arange(-1, 3, dtype=np.uint8)


def test_arange_bool():
    check(tg.arange(2, dtype=bool, chunks=1), np.arange(2, dtype=bool))
    with pytest.raises(TypeError, match="bool"):
        tg.arange(3, dtype=bool)


# -- linspace -------------------------------------------------------------------------------


@SETTINGS
@given(start=st.floats(-100, 100), stop=st.floats(-100, 100), num=st.integers(0, 30),
       endpoint=st.booleans(), data=st.data())
def test_linspace_matches_numpy(start, stop, num, endpoint, data):
    ref = np.linspace(start, stop, num, endpoint=endpoint)
    chunks = data.draw(axis_chunks(num))
    x = tg.linspace(start, stop, num, endpoint=endpoint, chunks=(chunks,))
    assert x.chunks == (chunks,)
    check(x, ref, exact=False)


@pytest.mark.parametrize("num", [0, 1, 2, 7])
@pytest.mark.parametrize("endpoint", [True, False])
@pytest.mark.parametrize("chunks", [1, 3, "auto"])
def test_linspace_small_counts(num, endpoint, chunks):
    check(tg.linspace(2, 10, num, endpoint=endpoint, chunks=chunks),
          np.linspace(2, 10, num, endpoint=endpoint), exact=False)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.complex128])
def test_linspace_with_dtype(dtype):
    # integer dtypes floor, like numpy (-4.33.. becomes -5, not -4)
    ref = np.linspace(-7, 6, 10, dtype=dtype)
    check(tg.linspace(-7, 6, 10, dtype=dtype, chunks=((3, 3, 4),)), ref,
          exact=np.dtype(dtype).kind == "i")


def test_linspace_negative_or_fractional_num_raises(forbid_compute):
    with pytest.raises(ValueError, match="-1"):
        tg.linspace(0, 1, -1)
    with pytest.raises(TypeError, match=r"2\.5"):
        tg.linspace(0, 1, 2.5)


def test_linspace_endpoint_with_an_empty_last_block():
    check(tg.linspace(0, 1, 5, chunks=((3, 2, 0),)), np.linspace(0, 1, 5), exact=False)
    check(tg.arange(5, chunks=((0, 3, 0, 2, 0),)), np.arange(5))


# -- laziness -------------------------------------------------------------------------------


def test_building_creation_and_random_arrays_computes_nothing(forbid_compute):
    arrays = [
        tg.zeros((50, 40), chunks=7), tg.ones((9,), chunks=2), tg.full((3, 3), 7, chunks=2),
        tg.eye(30, 20, k=3, chunks=(4, 6)), tg.arange(0, 10, 0.5, chunks=3),
        tg.linspace(0, 1, 33, chunks=5), tg.random.random((20, 20), chunks=3, seed=1),
        tg.random.normal(size=(10,), chunks=3, seed=1),
        tg.random.integers(0, 10, size=(10, 4), chunks=3, seed=1),
        tg.random.uniform(-1, 1, size=8, chunks=3, seed=1),
        tg.from_numpy(np.arange(12.0), chunks=5),
    ]
    assert [a.npartitions for a in arrays][:2] == [8 * 6, 5]
    for a in arrays:
        repr(a)


def test_compute_under_forbid_compute_raises(forbid_compute):
    x = tg.ones((4, 4), chunks=2)
    with pytest.raises(AssertionError, match="a run of") as info:
        x.compute()
    assert type(info.value).__name__ == "ComputeForbidden"


# -- random ---------------------------------------------------------------------------------


def _random_arrays(seed, chunks):
    return [
        tg.random.random((13, 7), chunks=chunks, seed=seed),
        tg.random.random((13, 7), chunks=chunks, seed=seed, dtype=np.float32),
        tg.random.normal(2.0, 3.0, size=(13, 7), chunks=chunks, seed=seed),
        tg.random.uniform(-2, 5, size=(13, 7), chunks=chunks, seed=seed),
        tg.random.integers(-5, 5, size=(13, 7), chunks=chunks, seed=seed),
    ]


def test_random_same_seed_same_values_on_every_backend(backend_options):
    chunks = ((4, 1, 8), (2, 5))
    reference = [a.compute(backend="sync") for a in _random_arrays(42, chunks)]
    got = tg.compute(*_random_arrays(42, chunks), **backend_options)
    for g, r in zip(got, reference, strict=True):
        np.testing.assert_array_equal(g, r, strict=True)


def test_random_values_do_not_depend_on_workers():
    x = tg.random.normal(size=(40, 30), chunks=(7, 11), seed=3)
    runs = [x.compute(backend="sync")]
    runs += [x.compute(backend="threads", workers=w) for w in (1, 2, 4)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r, runs[0])


def test_random_different_seeds_differ():
    values = [tg.random.random((6, 5), chunks=(2, 3), seed=s).compute()
              for s in (0, 1, 2, 2**32, 2**40)]
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            assert not np.isin(values[i], values[j]).any(), (i, j)


def test_random_blocks_of_one_array_differ():
    x = tg.random.random((40,), chunks=10, seed=5).compute()
    blocks = x.reshape(4, 10)
    for i in range(4):
        for j in range(i + 1, 4):
            assert not np.isin(blocks[i], blocks[j]).any()


def test_random_seed_none_gives_fresh_values():
    a = tg.random.random((50,), chunks=20).compute()
    b = tg.random.random((50,), chunks=20).compute()
    assert not np.array_equal(a, b)


def test_random_seed_does_not_collide_across_large_seeds_and_block_coordinates():
    # the block stream of seed 0 at block 1 must not be the stream of seed 2**32 at block 0
    a = tg.random.random((8,), chunks=4, seed=0).compute()
    b = tg.random.random((8,), chunks=4, seed=2**32).compute()
    assert not np.isin(a, b).any()
    c = tg.random.random((4, 2), chunks=(4, 1), seed=9).compute()
    d = tg.random.random((4,), chunks=4, seed=9).compute()
    assert not np.isin(c, d).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_uniform_distribution(dtype):
    x = tg.random.random((100_000,), chunks=((30_000, 30_000, 40_000),), seed=11, dtype=dtype)
    assert x.dtype == dtype
    v = x.compute()
    assert v.dtype == dtype and v.shape == (100_000,)
    assert v.min() >= 0 and v.max() < 1
    assert abs(v.mean() - 0.5) < 0.01
    assert abs(v.var() - 1 / 12) < 0.005
    assert abs(float(x.mean().compute()) - 0.5) < 0.01


def test_random_normal_and_uniform_distribution():
    n = tg.random.normal(3.0, 2.0, size=(200, 500), chunks=(60, 130), seed=4)
    v = n.compute()
    assert v.dtype == np.float64
    assert abs(v.mean() - 3.0) < 0.05
    assert abs(v.std() - 2.0) < 0.05
    f = tg.random.normal(size=(1000,), chunks=300, seed=4, dtype=np.float32).compute()
    assert f.dtype == np.float32
    u = tg.random.uniform(-2, 6, size=(100_000,), chunks=33_333, seed=4).compute()
    assert u.dtype == np.float64 and u.min() >= -2 and u.max() < 6
    assert abs(u.mean() - 2.0) < 0.05


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int8])
def test_random_integers_within_bounds(dtype):
    x = tg.random.integers(-3 if np.dtype(dtype).kind == "i" else 0, 7, size=(50, 40),
                           chunks=(9, 13), seed=2, dtype=dtype)
    v = x.compute()
    assert v.dtype == dtype and x.dtype == dtype and v.shape == (50, 40)
    low = -3 if np.dtype(dtype).kind == "i" else 0
    assert v.min() == low and v.max() == 6
    assert set(np.unique(v)) == set(range(low, 7))
    hi = tg.random.integers(5, size=1000, chunks=300, seed=2, endpoint=True).compute()
    assert hi.min() == 0 and hi.max() == 5
    one = tg.random.integers(4, 4, size=10, chunks=3, seed=1, endpoint=True).compute()
    np.testing.assert_array_equal(one, np.full(10, 4))


def test_random_zero_size_and_zero_dim():
    check(tg.random.random((0, 3), chunks=2, seed=1), np.empty((0, 3)))
    v = tg.random.random((), seed=1).compute()
    assert np.shape(v) == () and 0 <= v < 1


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: tg.random.random((3,), seed=-1), TypeError, "seed"),
        (lambda: tg.random.random((3,), seed=1.5), TypeError, "seed"),
        (lambda: tg.random.random((3,), seed="a"), TypeError, "seed"),
        (lambda: tg.random.random((3,), dtype=np.int32), TypeError, "dtype"),
        (lambda: tg.random.random((-3,)), ValueError, "negative"),
        (lambda: tg.random.random((4,), chunks=(3, 3)), ValueError, r"\(4,\)"),
        (lambda: tg.random.normal(size="3"), TypeError, "size"),
        (lambda: tg.random.normal(0, -1, size=3), ValueError, "scale"),
        (lambda: tg.random.normal(size=3, dtype=np.int64), TypeError, "dtype"),
        (lambda: tg.random.uniform(size=(2, 1.5)), TypeError, "size"),
        (lambda: tg.random.integers(5, 2, size=3), ValueError, "empty"),
        (lambda: tg.random.integers(2, 2, size=3), ValueError, "empty"),
        (lambda: tg.random.integers(0, 5, size=[[3]]), TypeError, "size"),
        (lambda: tg.random.integers(0, 5, size=3, dtype=np.float64), TypeError, "dtype"),
        (lambda: tg.random.integers(0, 300, size=3, dtype=np.uint8), ValueError, "uint8"),
        (lambda: tg.random.integers(-1, 3, size=3, dtype=np.uint8), ValueError, "uint8"),
        (lambda: tg.random.integers(0, 128, size=3, dtype=np.int8, endpoint=True), ValueError,
         "int8"),
    ],
)
def test_random_bad_arguments_raise_at_build_time(make, exc, match, forbid_compute):
    with pytest.raises(exc, match=match):
        make()


def test_random_integers_full_dtype_range_is_allowed():
    v = tg.random.integers(0, 256, size=2000, chunks=500, seed=3, dtype=np.uint8).compute()
    assert v.dtype == np.uint8 and v.max() > 250
    w = tg.random.integers(-128, 127, size=2000, chunks=500, seed=3, dtype=np.int8,
                           endpoint=True).compute()
    assert w.min() == -128 and w.max() == 127


def test_auto_chunks_of_an_impossible_shape_is_a_clear_value_error():
    for make in (lambda: tg.ones(10**122, chunks="auto"),
                 lambda: tg.random.random((10**61, 10**61), chunks="auto", seed=0),
                 lambda: tg.zeros((10**9, 10**9), chunks=1000)):
        with pytest.raises(ValueError, match=r"blocks .*more than max_tasks=50,000,000 a plan "
                                             r"may hold; use larger blocks"):
            make()


def test_from_numpy_root_outside_mpi_is_the_array_itself_and_bad_roots_are_refused():
    x = np.arange(12.0).reshape(3, 4)
    a = tg.from_numpy(x, chunks=2, root=0)
    np.testing.assert_array_equal(a.compute(), x)
    for bad in (-1, "0", 1.0, True):
        with pytest.raises(ValueError, match="root must be a rank number"):
            tg.from_numpy(x, root=bad)
