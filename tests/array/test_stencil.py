"""pad and roll against NumPy: every mode, uneven edge blocks, several dtypes, pads wider
than the axis, and bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
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
