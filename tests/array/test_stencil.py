"""pad and roll against NumPy: every mode, uneven edge blocks, several dtypes, pads wider
than the axis, and bad input."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays

MODES = ["constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum",
         "reflect", "symmetric", "wrap"]

EXTRA = {
    "constant": [{"constant_values": ((1.5, 2), (3, 4), (-1, 0))}],
    "linear_ramp": [{"end_values": (5, -3)}],
    "maximum": [{"stat_length": ((2, 1), (3, 4), (1, 1))}],
    "mean": [{"stat_length": 2}],
    "median": [{"stat_length": ((3, 1),)}],
    "minimum": [{"stat_length": 1}],
    "reflect": [{"reflect_type": "odd"}],
    "symmetric": [{"reflect_type": "odd"}],
}


def _data(dtype):
    a = np.random.default_rng(1).standard_normal((7, 5, 3)) * 10
    return (a > 0) if dtype == np.bool_ else a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64])
@pytest.mark.parametrize("mode", MODES)
def test_pad_matches_numpy_in_every_mode(mode, dtype):
    a = _data(dtype)
    x = tg.from_numpy(a, chunks=(3, 2, 2))  # uneven edge blocks on every axis
    widths = [1, (2, 3), ((0, 4), (6, 1), (2, 0)), ((9, 12), (1, 0), (0, 0)), 0]
    for kwargs in [{}, *EXTRA.get(mode, [])]:
        for width in widths:
            want = np.pad(a, width, mode=mode, **kwargs)
            got = tg.pad(x, width, mode=mode, **kwargs)
            assert got.shape == want.shape and got.dtype == want.dtype
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(got.compute(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["constant", "edge", "maximum", "reflect", "symmetric",
                                  "wrap"])
def test_pad_of_bool_arrays(mode):
    a = _data(np.bool_)
    x = tg.from_numpy(a, chunks=(4, 3, 2))
    np.testing.assert_array_equal(tg.pad(x, ((1, 2), (3, 0), (0, 1)), mode=mode).compute(),
                                  np.pad(a, ((1, 2), (3, 0), (0, 1)), mode=mode))


def test_pad_through_numpy_and_the_array_api_namespace():
    a = np.arange(20.0).reshape(4, 5)
    x = tg.from_numpy(a, chunks=(3, 2))
    got = np.pad(x, ((1, 0), (2, 2)), mode="wrap")
    assert isinstance(got, tg.Array)
    np.testing.assert_array_equal(got.compute(), np.pad(a, ((1, 0), (2, 2)), mode="wrap"))
    xp = x.__array_namespace__()
    np.testing.assert_array_equal(xp.pad(x, 1, constant_values=-1).compute(),
                                  np.pad(a, 1, constant_values=-1))


def test_pad_with_a_function_as_numpy_calls_it():
    def padder(vector, width, axis, kwargs):
        vector[:width[0]] = kwargs.get("value", 10) + axis
        if width[1]:
            vector[-width[1]:] = -axis

    a = np.arange(30.0).reshape(6, 5)
    x = tg.from_numpy(a, chunks=(4, 2))
    np.testing.assert_array_equal(tg.pad(x, ((2, 1), (1, 3)), padder, value=7).compute(),
                                  np.pad(a, ((2, 1), (1, 3)), padder, value=7))


def test_pad_empty_mode_gives_the_shape_and_dtype():
    x = tg.from_numpy(np.ones((3, 4), np.int16), chunks=2)
    got = tg.pad(x, 2, mode="empty")
    assert got.shape == (7, 8) and got.dtype == np.int16
    np.testing.assert_array_equal(got.compute()[2:5, 2:6], 1)


def test_pad_pieces_are_edge_blocks_not_a_gather():
    # a wrap pad of one element reads only the block holding it: no task reads the
    # whole axis
    a = np.arange(40.0).reshape(10, 4)
    x = tg.from_numpy(a, chunks=(2, 4))
    padded = tg.pad(x, ((0, 1), (0, 0)), mode="wrap")
    assert padded.chunks[0] == (2, 2, 2, 2, 2, 1)
    graph = plan_arrays([padded], fuse=False).graph
    assert max(len(graph.dependencies(k)) for k in graph.keys) <= 1
    np.testing.assert_array_equal(padded.compute(), np.pad(a, ((0, 1), (0, 0)), mode="wrap"))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 9), chunk=st.integers(1, 4), before=st.integers(0, 20),
       after=st.integers(0, 20), mode=st.sampled_from(MODES),
       odd=st.booleans())
def test_pad_one_axis_any_width(n, chunk, before, after, mode, odd):
    a = np.random.default_rng(n).integers(-50, 50, size=(n, 2)).astype(np.float64)
    kwargs = {"reflect_type": "odd"} if odd and mode in ("reflect", "symmetric") else {}
    want = np.pad(a, ((before, after), (0, 0)), mode=mode, **kwargs)
    got = tg.pad(tg.from_numpy(a, chunks=(chunk, 2)), ((before, after), (0, 0)), mode=mode,
                 **kwargs)
    np.testing.assert_allclose(got.compute(), want)


def test_pad_of_an_empty_axis():
    a = np.zeros((0, 3))
    x = tg.from_numpy(a)
    np.testing.assert_array_equal(tg.pad(x, 1, constant_values=5).compute(),
                                  np.pad(a, 1, constant_values=5))
    with pytest.raises(ValueError, match="empty axis 0"):
        tg.pad(x, 1, mode="wrap")


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((-1,), {}, ValueError, "non-negative"),
    ((1.5,), {}, TypeError, "integers"),
    ((((1, 2), (3, 4), (5, 6)),), {}, ValueError, "broadcast"),
    ((1, "spiral"), {}, ValueError, "mode 'spiral' is not supported"),
    ((1, "edge"), {"constant_values": 3}, ValueError, "unsupported keyword"),
    ((1, "reflect"), {"reflect_type": "sideways"}, ValueError, "reflect_type"),
    ((1, "mean"), {"stat_length": -2}, ValueError, "stat_length"),
    ((1, "minimum"), {"stat_length": 0}, ValueError, "stat_length of 0"),
])
def test_pad_rejects_bad_input(args, kwargs, error, match, forbid_compute):
    x = tg.from_numpy(np.ones((3, 4)), chunks=2)
    with pytest.raises(error, match=match):
        tg.pad(x, *args, **kwargs)


def test_pad_rejects_array_constants(forbid_compute):
    x = tg.from_numpy(np.ones((3, 4)), chunks=2)
    with pytest.raises(TypeError, match="constant_values must be numbers"):
        tg.pad(x, 1, constant_values=x)


@pytest.mark.parametrize(("shift", "axis"), [
    (2, None), (3, 0), ((1, 2), (0, 1)), (1, (0, 1)), (-9, 1), ((1, 1), (0, 0)), (0, 0),
    (25, -1),
])
def test_roll_matches_numpy(shift, axis):
    a = np.arange(35).reshape(7, 5)
    x = tg.from_numpy(a, chunks=(3, 2))
    np.testing.assert_array_equal(np.roll(x, shift, axis).compute(), np.roll(a, shift, axis))
    np.testing.assert_array_equal(tg.roll(x, shift, axis).compute(), np.roll(a, shift, axis))


def test_roll_rejects_bad_input(forbid_compute):
    x = tg.from_numpy(np.ones((3, 4)), chunks=2)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        tg.roll(x, 1, axis=2)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        tg.roll(x, (1, 2, 3), axis=(0, 1))
    with pytest.raises(ValueError, match="same length"):
        x.__array_namespace__().roll(x, (1, 2), axis=0)


@pytest.mark.parametrize(("window", "axis"), [
    (3, 0), (2, 1), ((2, 3), (0, 1)), ((2, 2), (0, 0)), ((7, 5, 3), None), (1, 2), (7, 0),
    (3, -1),
])
@pytest.mark.parametrize("dtype", [np.float64, np.int16])
def test_sliding_window_view_matches_numpy(window, axis, dtype):
    a = np.arange(7 * 5 * 3).reshape(7, 5, 3).astype(dtype)
    x = tg.from_numpy(a, chunks=(3, 2, 2))
    want = np.lib.stride_tricks.sliding_window_view(a, window, axis=axis)
    for got in (tg.sliding_window_view(x, window, axis=axis),
                np.lib.stride_tricks.sliding_window_view(x, window, axis=axis)):
        assert isinstance(got, tg.Array) and got.dtype == want.dtype
        np.testing.assert_array_equal(got.compute(), want)


def test_sliding_window_view_reads_each_block_and_its_halo_only():
    x = tg.from_numpy(np.arange(100.0), chunks=10)
    w = tg.sliding_window_view(x, 4)
    assert w.chunks == ((10,) * 9 + (7,), (4,))
    graph = plan_arrays([w], fuse=False).graph
    reads = [len(graph.dependencies(k)) for k in graph.keys]
    assert max(reads) <= 2  # a block and the next one's first elements


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_sliding_window_view_automatic_rechunk_keeps_blocks_small(dtype):
    a = (np.random.default_rng(16).random((40, 30, 12)) * 9).astype(dtype)
    x = tg.from_numpy(a, chunks=(-1, (17, 13), 2))
    want = np.lib.stride_tricks.sliding_window_view(a, 9, axis=2)
    split = tg.sliding_window_view(x, 9, axis=2)  # dask's default: automatic_rechunk=True
    whole = tg.sliding_window_view(x, 9, axis=2, automatic_rechunk=False)
    for got in (split, whole):
        np.testing.assert_array_equal(got.compute(), want)
    # growth 9 spread over the two other axes: their blocks cut in 3
    assert split.chunks[:2] == ((14, 13, 13), (6, 6, 5, 5, 4, 4))
    assert whole.chunks[:2] == x.chunks[:2]
    assert split.chunks[2:] == whole.chunks[2:] == ((2, 2), (9,))
    def largest_block(y):
        return int(np.prod([max(c) for c in y.chunks]))

    assert largest_block(split) <= 1.25 * largest_block(x)  # about the input's blocks
    assert largest_block(whole) == 9 * largest_block(x)
    # no other axis to split, or a window of 1: nothing to do
    one = tg.from_numpy(a[:, 0, 0], chunks=7)
    assert tg.sliding_window_view(one, 5).chunks[0] == (7, 7, 7, 7, 7, 1)
    assert tg.sliding_window_view(x, 1, axis=2).chunks[:2] == x.chunks[:2]


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((8,), {"axis": 0}, ValueError, "larger than axis 0"),
    ((0,), {"axis": 0}, ValueError, "must be positive"),
    ((2,), {}, ValueError, "one entry per axis"),
    ((2,), {"axis": 3}, np.exceptions.AxisError, "out of bounds"),
    (((2, 2),), {"axis": 0}, ValueError, "same length"),
    ((1.5,), {"axis": 0}, TypeError, "integers"),
])
def test_sliding_window_view_rejects_bad_input(args, kwargs, error, match, forbid_compute):
    x = tg.from_numpy(np.ones((7, 5)), chunks=3)
    with pytest.raises(error, match=match):
        tg.sliding_window_view(x, *args, **kwargs)


COORDS = np.cumsum(np.random.default_rng(2).random(7)) + 1


@pytest.mark.parametrize(("args", "kwargs"), [
    ((), {}), ((2.0,), {}), ((COORDS, np.arange(5) * 2.0, 0.5), {}),
    ((COORDS,), {"axis": 0}), ((np.arange(5) * 2,), {"axis": 1, "edge_order": 2}),
    ((), {"axis": (0, 2), "edge_order": 2}), ((COORDS, 3), {"axis": (0, -1)}),
    ((), {"axis": -1}),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_gradient_matches_numpy(args, kwargs, dtype):
    a = (np.random.default_rng(1).random((7, 5, 4)) * 100).astype(dtype)
    x = tg.from_numpy(a, chunks=(3, 2, 3))
    got, want = np.gradient(x, *args, **kwargs), np.gradient(a, *args, **kwargs)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
    else:
        got, want = (got,), (want,)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.chunks == x.chunks
        np.testing.assert_allclose(g.compute(), w, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((), {"edge_order": 3}, ValueError, "edge_order must be 1 or 2"),
    ((), {"axis": 2}, np.exceptions.AxisError, "out of bounds"),
    ((), {"axis": (0, 0)}, ValueError, "repeated axis"),
    ((1.0, 2.0, 3.0), {}, TypeError, "one spacing, or one per axis"),
    ((np.arange(4.0),), {"axis": 0}, ValueError, "must match the length"),
    ((np.ones((2, 2)),), {"axis": 0}, ValueError, "scalars or 1d"),
])
def test_gradient_rejects_bad_input(args, kwargs, error, match, forbid_compute):
    x = tg.from_numpy(np.ones((3, 4)), chunks=2)
    with pytest.raises(error, match=match):
        tg.gradient(x, *args, **kwargs)
    with pytest.raises(ValueError, match="at least 3 elements"):
        tg.gradient(tg.from_numpy(np.ones(2)), edge_order=2)


def _laplacian(b):
    out = b.copy()
    out[1:-1, 1:-1] = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
                       - 4 * b[1:-1, 1:-1])
    return out


BOUNDARIES = ["periodic", "reflect", "nearest", "none", 0.5,
              {0: "periodic", 1: "none"}]


@pytest.mark.parametrize("boundary", BOUNDARIES, ids=str)
@pytest.mark.parametrize("depth", [1, (2, 1), {0: 1}])
def test_map_overlap_and_overlap_match_dask(boundary, depth):
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(0).random((11, 9))
    x = tg.from_numpy(a, chunks=(4, 3))  # uneven edge blocks
    d = da.from_array(a, chunks=(4, 3))
    np.testing.assert_allclose(
        tg.map_overlap(_laplacian, x, depth=depth, boundary=boundary).compute(),
        da.map_overlap(_laplacian, d, depth=depth, boundary=boundary).compute())
    ours = tg.overlap(x, depth, boundary)
    theirs = da.overlap.overlap(d, depth=depth, boundary=boundary)
    assert ours.chunks == theirs.chunks
    np.testing.assert_allclose(ours.compute(), theirs.compute())
    np.testing.assert_array_equal(tg.trim_internal(ours, depth, boundary).compute(), a)


def test_map_overlap_periodic_laplacian_matches_numpy_rolls():
    a = np.random.default_rng(1).random((12, 10)).astype(np.float32)
    x = tg.from_numpy(a, chunks=(5, 4))

    def lap(b):
        return (np.roll(b, 1, 0) + np.roll(b, -1, 0) + np.roll(b, 1, 1) + np.roll(b, -1, 1)
                - 4 * b)

    got = x.map_overlap(lap, depth=1, boundary="periodic")
    assert got.dtype == np.float32 and got.chunks == x.chunks
    np.testing.assert_allclose(got.compute(), lap(a), rtol=1e-5)
    # two arrays, the second rechunked to the first's blocks; trim=False keeps the halos
    y = tg.from_numpy(a * 2, chunks=(6, 5))
    both = tg.map_overlap(lambda p, q: p + q, x, y, depth=1, boundary="nearest")
    np.testing.assert_allclose(both.compute(), 3 * a, rtol=1e-6)
    kept = tg.map_overlap(lambda b: b, x, depth=1, boundary="none", trim=False)
    assert kept.chunks == ((6, 7, 3), (5, 6, 3))


def test_map_overlap_reads_only_the_neighbours_edge_slabs():
    x = tg.from_numpy(np.arange(400.0).reshape(20, 20), chunks=5)
    y = x.map_overlap(lambda b: b + 1, depth=1, boundary="none")
    graph = plan_arrays([y]).graph
    # each task reads at most its block and its eight neighbours (corners included)
    assert max(len(graph.dependencies(k)) for k in graph.keys) <= 9
    np.testing.assert_array_equal(y.compute(), np.arange(400.0).reshape(20, 20) + 1)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"depth": -1}, ValueError, "non-negative"),
    ({"depth": 1.5}, TypeError, "integers"),
    ({"depth": 3}, ValueError, "larger than the smallest block"),
    ({"depth": (1, 1, 1)}, ValueError, "one value per axis"),
    ({"depth": {2: 1}}, np.exceptions.AxisError, "out of bounds"),
    ({"depth": 1, "boundary": "mirror"}, ValueError, "boundary 'mirror'"),
    ({"depth": {0: (1, 2, 3)}}, ValueError, r"\(before, after\) pair"),
    ({"depth": {0: (1, -1)}}, ValueError, "non-negative"),
    ({"depth": {1: (0, 4)}}, ValueError, "larger than the smallest block"),
])
def test_map_overlap_rejects_bad_input(kwargs, error, match, forbid_compute):
    x = tg.from_numpy(np.ones((6, 5)), chunks=(2, 3))
    with pytest.raises(error, match=match):
        tg.map_overlap(lambda b: b, x, **kwargs)
    with pytest.raises(TypeError, match="not callable"):
        tg.map_overlap(3, x, depth=1)
    with pytest.raises(ValueError, match="same shape"):
        tg.map_overlap(np.add, x, tg.ones((6, 6)), depth=1)


def _window_sums(block, before, after):
    """Each element's sum with ``before`` elements before it and ``after`` after it along
    axis 0 (zeros beyond the block)."""
    padded = np.pad(block, ((before, after), (0, 0)))
    return sum(padded[i:i + block.shape[0]] for i in range(before + after + 1))


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("widths", [(2, 0), (0, 1), (1, 3)])
@pytest.mark.parametrize("boundary", ["none", "periodic", "reflect", 0])
def test_asymmetric_depth_matches_numpy(dtype, widths, boundary):
    before, after = widths
    a = (np.random.default_rng(12).random((13, 5)) * 10).astype(dtype)
    x = tg.from_numpy(a, chunks=((3, 4, 3, 3), (2, 3)))
    got = tg.map_overlap(_window_sums, x, depth={0: widths}, boundary=boundary,
                         before=before, after=after)
    # NumPy: the array extended at its ends as ``boundary`` says, summed over the window
    mode = {"none": None, "periodic": "wrap", "reflect": "symmetric", 0: "constant"}[boundary]
    ext = a if mode is None else np.pad(a, ((before, after), (0, 0)), mode=mode)
    want = _window_sums(ext, before, after)
    if mode is not None:
        want = want[before:before + a.shape[0]]
    np.testing.assert_array_equal(got.compute(), want)
    ours = tg.overlap(x, {0: widths}, boundary)
    left = before if boundary != "none" else 0
    right = after if boundary != "none" else 0
    assert ours.chunks[0] == (3 + left + after, 4 + before + after, 3 + before + after,
                              3 + before + right)
    np.testing.assert_array_equal(tg.trim_internal(ours, {0: widths}, boundary).compute(), a)


def test_asymmetric_depth_and_default_boundary_match_dask():
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(13).random((11, 9))
    x = tg.from_numpy(a, chunks=(4, 3))
    d = da.from_array(a, chunks=(4, 3))
    for depth in ({0: (2, 1)}, {0: (0, 2), 1: (1, 0)}, 1):
        # dask's map_overlap leaves the array's edges alone unless a boundary is given
        np.testing.assert_allclose(
            tg.map_overlap(_laplacian, x, depth=depth).compute(),
            da.map_overlap(_laplacian, d, depth=depth).compute())
        ours = tg.overlap(x, depth, "none")
        theirs = da.overlap.overlap(d, depth=depth, boundary="none")
        assert ours.chunks == theirs.chunks
        np.testing.assert_allclose(ours.compute(), theirs.compute())


def _lap_periodic(a):
    """The 5-point Laplacian with periodic ends, in the same order of operations as
    ``_laplacian`` (so float32 results agree to the last bit)."""
    return _laplacian(np.pad(a, 1, mode="wrap"))[1:-1, 1:-1]


def _map_names(arrays):
    graph = plan_arrays(arrays).graph
    return [n for n, k in zip(graph.meta["name"], graph.meta["kind"], strict=True)
            if k == "map" or (n and "_laplacian" in n)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex128])
def test_iterated_periodic_stencil_is_one_step_per_block(dtype):
    rng = np.random.default_rng(21)
    a = (rng.standard_normal((90, 77)) * 10).astype(dtype)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal(a.shape)
    x = tg.from_numpy(a, chunks=(40, 36))  # uneven edge blocks: (40, 40, 10), (36, 36, 5)
    y, want = x, a
    for _ in range(4):
        y = y.map_overlap(_laplacian, depth=1, boundary="periodic")
        want = _lap_periodic(want)
    assert y.dtype == a.dtype and y.chunks == x.chunks
    np.testing.assert_array_equal(y.compute(), want)
    # one task per block runs the four steps (halos of 4 + 4 are at most a quarter of 36,
    # and 4 is at most the smallest block)
    names = _map_names([y])
    assert len(names) == 9 and all("*4" in n for n in names), names


def test_stencil_chain_keeps_an_intermediate_asked_for_and_splits_where_the_halo_is_large():
    a = np.random.default_rng(22).random((50, 44))
    x = tg.from_numpy(a, chunks=(20, 18))
    one = x.map_overlap(_laplacian, depth=1, boundary="periodic")
    two = one.map_overlap(_laplacian, depth=1, boundary="periodic")
    got_one, got_two = tg.compute(one, two)  # ``one`` is a result: it is not fused away
    np.testing.assert_allclose(got_one, _lap_periodic(a))
    np.testing.assert_allclose(got_two, _lap_periodic(_lap_periodic(a)))
    assert not any("*" in n for n in _map_names([one, two]))
    # halos of 2 + 2 fit in a quarter of 18 on axis 1, 3 + 3 do not: chains of two steps
    # (and a last one alone)
    y, want = x, a
    for _ in range(5):
        y = y.map_overlap(_laplacian, depth=1, boundary="periodic")
        want = _lap_periodic(want)
    np.testing.assert_allclose(y.compute(), want)
    names = _map_names([y])
    assert sorted({n.split("*")[-1] if "*" in n else "1" for n in names}) == ["1", "2"]


def test_stencil_chain_with_asymmetric_depths_kwargs_and_other_steps_between():
    a = np.random.default_rng(23).random((40, 6))
    x = tg.from_numpy(a, chunks=((15, 15, 10), 6))
    y = x.map_overlap(_window_sums, depth={0: (2, 1)}, boundary="periodic", before=2,
                      after=1)
    y = y.map_overlap(_window_sums, depth={0: (0, 3)}, boundary="periodic", before=0,
                      after=3)
    ext = np.pad(a, ((2, 1), (0, 0)), mode="wrap")
    want = _window_sums(ext, 2, 1)[2:42]
    ext = np.pad(want, ((0, 3), (0, 0)), mode="wrap")
    want = _window_sums(ext, 0, 3)[:40]
    np.testing.assert_allclose(y.compute(), want)
    assert len(_map_names([y])) == 3  # one task per block for both steps
    # a step with another boundary, or an elementwise step, between periodic steps
    z = x.map_overlap(_laplacian, depth=1, boundary="periodic")
    z = (z * 2).map_overlap(_laplacian, depth=1, boundary="periodic")
    z = z.map_overlap(_laplacian, depth=1, boundary="nearest")
    z = z.map_overlap(_laplacian, depth=1, boundary="periodic")
    want = _lap_periodic(2 * _lap_periodic(a))
    want = _laplacian(np.pad(want, 1, mode="edge"))[1:-1, 1:-1]
    np.testing.assert_allclose(z.compute(), _lap_periodic(want))


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_overlap_3d_corners_and_mixed_boundaries_match_dask(dtype):
    da = pytest.importorskip("dask.array")
    a = (np.random.default_rng(24).random((9, 8, 7)) * 100).astype(dtype)
    chunks = ((4, 3, 2), (3, 5), (2, 2, 3))
    x = tg.from_numpy(a, chunks=chunks)
    d = da.from_array(a, chunks=chunks)
    for depth, boundary in [
            ({0: 1, 1: 2, 2: 1}, {0: "reflect", 1: "periodic", 2: 7}),
            ({0: 2, 1: 0, 2: 1}, {0: "nearest", 1: "none", 2: "periodic"}),
            (1, "periodic"), (2, "reflect"), (1, "none")]:
        ours = tg.overlap(x, depth, boundary)
        theirs = da.overlap.overlap(d, depth=depth, boundary=boundary)
        assert ours.chunks == theirs.chunks, (depth, boundary)
        np.testing.assert_array_equal(ours.compute(), theirs.compute())
        np.testing.assert_array_equal(
            tg.trim_internal(ours, depth, boundary).compute(), a)


def _smooth(block, depth):
    """A local function of reach ``depth`` per axis (np.roll inside the block: what wraps
    around lies within ``depth`` of the block's edge, which map_overlap cuts off)."""
    out = block * 0.5
    for axis, d in enumerate(depth):
        for k in range(1, d + 1):
            out = out + 0.1 * k * (np.roll(block, k, axis) - np.roll(block, -k, axis))
    return out


@settings(max_examples=30, deadline=None)
@given(shape=st.tuples(st.integers(4, 90), st.integers(4, 90)),
       chunk=st.tuples(st.integers(2, 45), st.integers(2, 45)),
       depth=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       boundary=st.sampled_from(["periodic", "periodic", "periodic", "none", "reflect",
                                 "nearest", 1.5, ("periodic", "none"),
                                 ("reflect", "periodic")]),
       steps=st.integers(1, 4))
# found by this test: np.roll in the function makes results next to an edge without halo
# from the far side of the block, so steps with boundary "none" must not be chained
@example(shape=(4, 18), chunk=(2, 16), depth=(0, 1), boundary="none", steps=2)
def test_chained_map_overlap_matches_dask(shape, chunk, depth, boundary, steps):
    """Steps of map_overlap (chained into one where periodic and the blocks are large
    enough) against dask's, on shapes, blocks, depths and boundaries drawn at random."""
    da = pytest.importorskip("dask.array")
    chunks = tuple(min(c, n) for c, n in zip(chunk, shape, strict=True))
    if any(d > min(n % c or c, c) for d, c, n in zip(depth, chunks, shape, strict=True)):
        return  # a depth larger than a block (refused by both)
    a = np.random.default_rng(sum(shape)).random(shape)
    x, d = tg.from_numpy(a, chunks=chunks), da.from_array(a, chunks=chunks)
    b = dict(enumerate(boundary)) if isinstance(boundary, tuple) else boundary

    def f(blk):
        return _smooth(blk, depth)

    for _ in range(steps):
        x = tg.map_overlap(f, x, depth=depth, boundary=b)
        d = da.map_overlap(f, d, depth=depth, boundary=b)
    np.testing.assert_allclose(x.compute(), d.compute(), rtol=1e-12, atol=1e-12)


def test_steps_with_no_halo_at_the_edges_are_not_chained_and_match_dask():
    """boundary "none" (map_overlap's default): the function's results next to the
    array's edges are kept, so steps are not chained (a function may make those results
    from the far side of its block)."""
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(25).random((70, 50)).astype(np.float32)
    chunks = ((30, 30, 10), (24, 26))
    x, d = tg.from_numpy(a, chunks=chunks), da.from_array(a, chunks=chunks)
    for _ in range(3):
        x = x.map_overlap(_laplacian, depth=1)
        d = d.map_overlap(_laplacian, depth=1)
    np.testing.assert_array_equal(x.compute(), d.compute())
    assert not any("*" in n for n in _map_names([x]))
    # periodic then none along the same axis: not chained either, same values
    y = tg.from_numpy(a, chunks=chunks).map_overlap(_laplacian, depth=1, boundary="periodic")
    y = y.map_overlap(_laplacian, depth=1)
    e = da.from_array(a, chunks=chunks).map_overlap(_laplacian, depth=1, boundary="periodic")
    e = e.map_overlap(_laplacian, depth=1)
    np.testing.assert_array_equal(y.compute(), e.compute())
    assert not any("*" in n for n in _map_names([y]))
