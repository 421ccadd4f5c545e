"""tilegraph.fft (numpy.fft's and dask.array.fft's signatures) and np.fft.* on tilegraph
arrays through __array_function__: against NumPy on uneven blocks (the transformed axis
in several blocks too), float32/float64/complex, every norm; fft_wrap; bad input."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg

rng = np.random.default_rng(5)
R = rng.standard_normal((9, 6))
Z = R + 1j * rng.standard_normal((9, 6))
DATA = {"f8": R, "f4": R.astype(np.float32), "c16": Z, "c8": Z.astype(np.complex64)}


def close(got, want, dtype):
    assert isinstance(got, tg.Array)
    value = got.compute()
    assert value.dtype == want.dtype and value.shape == want.shape
    rtol = 1e-4 if dtype in ("f4", "c8") else 1e-10
    np.testing.assert_allclose(value, want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("key", sorted(DATA))
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_one_axis_transforms_through_tg_fft_and_np_fft(key, name, norm, forbid_compute):
    a = DATA[key]
    if name in ("rfft", "ihfft") and a.dtype.kind == "c":
        return  # NumPy refuses complex input there
    x = tg.from_numpy(a, chunks=(4, 4))  # the transformed axis in two blocks
    want = getattr(np.fft, name)(a, n=7, axis=0, norm=norm)
    got_tg = getattr(tg.fft, name)(x, n=7, axis=0, norm=norm)
    got_np = getattr(np.fft, name)(x, n=7, axis=0, norm=norm)
    assert len(got_tg.chunks[1]) > 1  # the other axis stays cut
    with tg.config.set(backend="sync"):
        close(got_tg, want, key)
        close(got_np, want, key)
        close(getattr(np.fft, name)(x), getattr(np.fft, name)(a), key)


@pytest.mark.parametrize("key", ["f8", "c16", "f4"])
@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "irfft2",
                                  "rfftn", "irfftn"])
def test_several_axis_transforms(key, name, forbid_compute):
    a = DATA[key]
    if name.startswith("rfft") and a.dtype.kind == "c":
        return
    x = tg.from_numpy(a, chunks=(4, 5))
    with tg.config.set(backend="sync"):
        close(getattr(np.fft, name)(x), getattr(np.fft, name)(a), key)
        close(getattr(tg.fft, name)(x, s=(6, 4), axes=(0, 1)),
              getattr(np.fft, name)(a, s=(6, 4), axes=(0, 1)), key)
        close(getattr(np.fft, name)(x, axes=(1, 0)), getattr(np.fft, name)(a, axes=(1, 0)),
              key)


def test_shifts_frequencies_and_a_round_trip():
    x = tg.from_numpy(R, chunks=(4, 4))
    np.testing.assert_allclose(np.fft.fftshift(x).compute(), np.fft.fftshift(R))
    np.testing.assert_allclose(tg.fft.ifftshift(x, axes=1).compute(),
                               np.fft.ifftshift(R, axes=1))
    f = tg.fft.fftfreq(9, 0.5, chunks=4)
    assert f.chunks == ((4, 4, 1),)
    np.testing.assert_allclose(f.compute(), np.fft.fftfreq(9, 0.5))
    np.testing.assert_allclose(tg.fft.rfftfreq(10).compute(), np.fft.rfftfreq(10))
    back = np.fft.irfftn(np.fft.rfftn(x), s=R.shape)
    np.testing.assert_allclose(back.compute(), R, atol=1e-12)


def test_fft_wrap_makes_a_blocked_transform_of_any_numpy_like_function():
    import scipy.fft

    x = tg.from_numpy(R, chunks=(4, 4))
    got = tg.fft.fft_wrap(scipy.fft.rfft)(x, n=8, axis=0)
    np.testing.assert_allclose(got.compute(), scipy.fft.rfft(R, n=8, axis=0))
    got2 = tg.fft.fft_wrap(np.fft.ifft2)(tg.from_numpy(Z, chunks=3))
    np.testing.assert_allclose(got2.compute(), np.fft.ifft2(Z))
    got3 = tg.fft.fft_wrap(scipy.fft.irfftn, kind="irfftn")(tg.from_numpy(Z, chunks=3),
                                                           s=(9, 6))
    np.testing.assert_allclose(got3.compute(), scipy.fft.irfftn(Z, s=(9, 6)))
    with pytest.raises(ValueError, match="unknown kind"):
        tg.fft.fft_wrap(np.sum)
    with pytest.raises(TypeError, match="not callable"):
        tg.fft.fft_wrap(3)


def test_bad_input_is_refused_before_anything_runs(forbid_compute):
    x = tg.from_numpy(R, chunks=4)
    with pytest.raises(ValueError, match="invalid number of data points"):
        tg.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="norm"):
        np.fft.fft(x, norm="sideways")
    with pytest.raises(TypeError, match="out="):
        np.fft.fft(x, out=np.empty((9, 6), complex))
    with pytest.raises(ValueError, match="repeat an axis"):
        tg.fft.fftn(x, axes=(0, 0))
    with pytest.raises(ValueError, match="different lengths"):
        tg.fft.fft2(x, s=(3,))
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        tg.fft.fftn(x, axes=(0, 5))
    with pytest.raises(ValueError, match="0-d"):
        tg.fft.fft(tg.from_numpy(np.float64(3.0)))
