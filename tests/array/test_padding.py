"""``pad`` at widths far beyond the array: refused at once when the result would have more
blocks than a plan may hold (an error naming the widths, the shape and ``max_tasks``),
planned lazily otherwise (pieces in a few big blocks, each reading only the blocks of the
array its values come from, a slice planning only what it reads), and equal to NumPy in
every mode at widths of several periods, uneven blocks and several dtypes. Also
``broadcast_to`` along a stretched axis: blocks of about the automatic size."""

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.pipeline import PlanTooLargeError

MODES = ["constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum",
         "reflect", "symmetric", "wrap"]


@pytest.mark.parametrize("mode", [*MODES, "empty"])
@pytest.mark.parametrize("width", [10**9, 10**7])
def test_a_pad_too_large_to_plan_is_refused_at_once(mode, width, forbid_compute):
    x = tg.from_numpy(np.arange(20.0).reshape(4, 5), chunks=2)
    start = time.perf_counter()
    with pytest.raises(PlanTooLargeError) as info:
        np.pad(x, width, mode=mode)
    assert time.perf_counter() - start < 0.5
    message = str(info.value)
    assert message.startswith("pad: pad_width ")
    assert f"({width}, {width})" in message
    assert f"shape ({2 * width + 4}, {2 * width + 5})" in message
    assert "max_tasks=50,000,000" in message


def test_the_limit_is_the_max_tasks_option(forbid_compute):
    x = tg.from_numpy(np.arange(20.0).reshape(4, 5), chunks=2)
    with tg.config.set(max_tasks=10):
        with pytest.raises(PlanTooLargeError, match=r"in 16 blocks \(4 x 4\).*max_tasks=10"):
            tg.pad(x, ((1, 1), (1, 0)))
        with pytest.raises(PlanTooLargeError, match="pad_width"):
            tg.pad(x, 1, mode=lambda v, w, a, k: None)
        assert tg.pad(x, ((0, 0), (0, 0))).shape == (4, 5)


@pytest.mark.parametrize("mode", MODES)
def test_a_wide_pad_plans_lazily_in_few_blocks_and_a_slice_reads_little(mode):
    a = np.arange(20.0).reshape(4, 5)
    x = tg.from_numpy(a, chunks=2)
    start = time.perf_counter()
    big = np.pad(x, 10**5, mode=mode)
    assert big.shape == (200004, 200005)
    assert big.numblocks[0] < 10 and big.numblocks[0] * big.numblocks[1] < 20_000
    window = big[99_990:100_012, 99_990:100_011]
    assert len(plan_arrays([window], fuse=False).graph) < 200
    got = window.compute()
    assert time.perf_counter() - start < 10
    if mode != "linear_ramp":  # (a ramp's slope depends on the width)
        np.testing.assert_allclose(got, np.pad(a, 12, mode=mode)[2:24, 2:23])


def test_a_wide_linear_ramp_matches_numpy():
    a = np.array([3.0, -1.0, 4.0, 1.5])
    x = tg.from_numpy(a, chunks=3)
    got = tg.pad(x, (10**5, 7 * 10**4), mode="linear_ramp", end_values=(2.5, -9))
    assert got.numblocks[0] < 10
    np.testing.assert_array_equal(got.compute(),
                                  np.pad(a, (10**5, 7 * 10**4), mode="linear_ramp",
                                         end_values=(2.5, -9)))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), chunk=st.integers(1, 4), before=st.integers(0, 40),
       after=st.integers(0, 40),
       mode=st.sampled_from(["edge", "reflect", "symmetric", "wrap", "linear_ramp"]),
       odd=st.booleans(), dtype=st.sampled_from(["float64", "float32", "int16", "uint8"]))
def test_wide_index_pads_match_numpy(n, chunk, before, after, mode, odd, dtype):
    """Widths of many periods, odd reflections drifting by the end-to-end difference each
    period, integer wrap-around as NumPy's own arithmetic gives it."""
    a = np.random.default_rng(n).integers(0, 50, size=(n, 3)).astype(dtype)
    kwargs = {"reflect_type": "odd"} if odd and mode in ("reflect", "symmetric") else {}
    if mode == "linear_ramp":
        kwargs = {"end_values": 7}
    want = np.pad(a, ((before, after), (1, 2)), mode=mode, **kwargs)
    x = tg.from_numpy(a, chunks=(chunk, 2))
    with tg.config.set(max_tasks=10**6):
        got = tg.pad(x, ((before, after), (1, 2)), mode=mode, **kwargs)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.compute(), want, rtol=tol, atol=tol)


def test_a_piece_reads_only_the_blocks_its_values_come_from():
    a = np.arange(40.0).reshape(20, 2)
    x = tg.from_numpy(a, chunks=(4, 2))
    padded = tg.pad(x, ((3, 0), (0, 0)), mode="reflect")  # rows 3, 2, 1: block 0 only
    graph = plan_arrays([padded], fuse=False).graph
    pad_tasks = [k for k in graph.keys if str(k[0]).startswith("pad-reflect")]
    assert pad_tasks and all(len(graph.dependencies(k)) == 1 for k in pad_tasks)
    np.testing.assert_array_equal(padded.compute(), np.pad(a, ((3, 0), (0, 0)), "reflect"))


def test_odd_reflection_of_a_boolean_array_is_refused():
    x = tg.from_numpy(np.array([True, False, True]), chunks=2)
    with pytest.raises(TypeError, match="reflect_type='odd' of a boolean array"):
        tg.pad(x, 2, mode="reflect", reflect_type="odd")


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_pad_warns_as_numpy_for_a_mean_of_nothing():
    a = np.arange(4.0)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        got = tg.pad(tg.from_numpy(a, chunks=2), 1, mode="mean", stat_length=0)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        want = np.pad(a, 1, mode="mean", stat_length=0)
    np.testing.assert_array_equal(got.compute(), want)


def test_broadcast_to_a_stretched_axis_makes_few_blocks():
    row = tg.ones((1, 5), chunks=(1, 2))
    start = time.perf_counter()
    tall = tg.broadcast_to(row, (10**7, 5))
    assert time.perf_counter() - start < 1
    assert tall.chunks[1] == (2, 2, 1) and tall.numblocks[0] <= 4  # 128 MiB blocks
    assert tg.broadcast_to(row, (10**9, 5)).numblocks[0] < 1000
    np.testing.assert_array_equal(tg.broadcast_to(row, (7, 5)).compute(), np.ones((7, 5)))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        tg.broadcast_to(row, (3, 4))
