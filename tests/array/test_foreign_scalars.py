"""0-d lazy arrays handed to a foreign library as numbers: Python's conversions, NumPy
functions without a blocked implementation called with 0-d tilegraph arrays (computed
then, NumPy's result), SciPy's ndimage.histogram(x, np.min(x), np.max(x), bins); and the
refusal, with nothing computed, when such a function gets an array of one dimension or
more."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import scipy.ndimage

import tilegraph as tg

rng = np.random.default_rng(2)
A = rng.random((7, 5))
INTS = rng.integers(0, 9, (7, 5))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_scipy_ndimage_histogram_of_lazy_bounds(dtype):
    a = (A * 10).astype(dtype)
    x = tg.from_numpy(a, chunks=3)
    got = scipy.ndimage.histogram(x, np.min(x), np.max(x), 10)
    np.testing.assert_array_equal(got, scipy.ndimage.histogram(a, a.min(), a.max(), 10))
    labels = (a > a.mean()).astype(int) + 1
    got = scipy.ndimage.histogram(x, np.min(x), np.max(x), 4, labels, [1, 2])
    want = scipy.ndimage.histogram(a, a.min(), a.max(), 4, labels, [1, 2])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_numpy_functions_on_0d_arrays_run_on_their_values():
    x = tg.from_numpy(A, chunks=3)
    lo, hi = np.min(x), np.max(x)
    got = np.linspace(lo, hi, 5)
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, np.linspace(A.min(), A.max(), 5))
    np.testing.assert_allclose(np.arange(0, hi * 10, 2.5), np.arange(0, A.max() * 10, 2.5))
    assert np.isscalar(np.hypot(1.0, 2.0))
    np.testing.assert_allclose(np.interp(lo, [0.0, 1.0], [0.0, 10.0]),
                               np.interp(A.min(), [0.0, 1.0], [0.0, 10.0]))


def test_python_conversions_of_0d_arrays():
    x = tg.from_numpy(INTS, chunks=3)
    m = x.max()
    assert int(m) == INTS.max() and float(m) == float(INTS.max())
    assert complex(m) == complex(INTS.max()) and bool(m) is bool(INTS.max())
    assert operator.index(m) == INTS.max() and list(range(20))[m] == INTS.max()
    assert math.floor(tg.from_numpy(A).mean()) == math.floor(A.mean())
    assert format(tg.from_numpy(A).sum(), ".4f") == format(A.sum(), ".4f")
    np.testing.assert_array_equal(np.asarray(m), INTS.max())
    with pytest.raises(TypeError, match="0-d integer"):
        operator.index(tg.from_numpy(A).max())  # as NumPy: a float is no index


def test_a_function_without_a_blocked_form_refuses_arrays_and_computes_nothing(
        forbid_compute):
    x = tg.from_numpy(A, chunks=3)
    with pytest.raises(TypeError, match=r"numpy.trapezoid is not supported.*\.compute"):
        np.trapezoid(x)
    with pytest.raises(TypeError, match=r"numpy.linspace is not supported"):
        np.linspace(x[0], x[1], 3)  # arrays of one dimension: not numbers
    with pytest.raises(TypeError, match=r"numpy.partition .*tilegraph.sort"):
        np.partition(x, 2)
