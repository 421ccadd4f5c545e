"""The Array API namespace against NumPy on small arrays (the full conformance suite runs
with ``make array-api``)."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import array_api as xp


def test_namespace_has_the_standard_names_and_dtypes():
    x = tg.from_numpy(np.arange(6.0), chunks=4)
    assert x.__array_namespace__() is xp and xp.__array_api_version__ == "2023.12"
    assert xp.bool == np.bool_ and xp.float32 == np.float32 and xp.uint64 == np.uint64
    info = xp.__array_namespace_info__()
    assert info.capabilities()["data-dependent shapes"] and info.devices() == ["cpu"]
    for name in ("asarray", "unique_all", "cumulative_sum", "take", "vecdot", "isdtype",
                 "from_dlpack", "meshgrid", "tril", "unstack", "searchsorted"):
        assert callable(getattr(xp, name)), name
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")


def test_functions_match_numpy_on_uneven_blocks():
    a = np.random.default_rng(2).standard_normal((7, 5))
    x = tg.from_numpy(a, chunks=(3, 2))
    np.testing.assert_allclose(xp.cumulative_sum(x, axis=1, include_initial=True).compute(),
                               np.concatenate([np.zeros((7, 1)), np.cumsum(a, 1)], 1))
    np.testing.assert_array_equal(xp.sort(x, axis=0, descending=True).compute(),
                                  -np.sort(-a, axis=0))
    np.testing.assert_allclose(xp.vecdot(x, x).compute(), (a * a).sum(-1))
    np.testing.assert_array_equal(xp.tril(x, k=1).compute(), np.tril(a, 1))
    np.testing.assert_array_equal(xp.roll(x, 3, axis=0).compute(), np.roll(a, 3, 0))
    np.testing.assert_array_equal(xp.tile(x, (2, 1)).compute(), np.tile(a, (2, 1)))
    np.testing.assert_array_equal(xp.repeat(x, 2, axis=1).compute(), np.repeat(a, 2, 1))
    v, i, inv, c = xp.unique_all(xp.asarray([3, 1, 3, 2]))
    assert v.compute().tolist() == [1, 2, 3] and c.compute().tolist() == [1, 1, 2]
    assert i.compute().tolist() == [1, 3, 0] and inv.compute().tolist() == [2, 0, 2, 1]
    assert xp.sum(xp.asarray([1, 2], dtype=xp.int8)).dtype == xp.int64
    s = a[:5] @ a[:5].T + 5 * np.eye(5)
    m = tg.from_numpy(s, chunks=2)
    w, _ = xp.linalg.eigh(m)
    np.testing.assert_allclose(w.compute(), np.linalg.eigvalsh(s))
    np.testing.assert_allclose(xp.linalg.solve(m, m[:, :2]).compute(), np.eye(5)[:, :2],
                               atol=1e-10)
    np.testing.assert_allclose(xp.fft.rfftn(x).compute(), np.fft.rfftn(a), atol=1e-12)
    np.testing.assert_allclose(xp.fft.fftshift(x[0]).compute(), np.fft.fftshift(a[0]))


def test_item_assignment_and_in_place_operators_rebind_the_array():
    x = xp.asarray([1.0, 2.0])
    y = x  # the same object, as in NumPy
    z = x + 0  # built from the old value
    c = xp.asarray(x, copy=True)
    x[0] = 5.0
    x += 1
    assert x.compute().tolist() == [6.0, 3.0] and y.compute().tolist() == [6.0, 3.0]
    assert z.compute().tolist() == [1.0, 2.0] and c.compute().tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="device"):
        xp.zeros(3, device="gpu")


def test_complex_expm1_and_tanh_follow_the_standards_special_cases():
    inf, nan = np.inf, np.nan
    z = np.array([0j, complex(-0.0, 0.0), complex(inf, 0), complex(inf, inf),
                  complex(inf, nan), complex(-inf, inf), complex(-inf, nan), complex(nan, 0),
                  complex(-inf, 2), complex(1e-10, 1e-10), complex(1, 2), complex(0.3, -0.7)],
                 dtype=np.complex128)
    got = np.asarray(xp.expm1(tg.from_numpy(z, chunks=5)))
    want = [0j, 0j, complex(inf, 0), complex(inf, nan), complex(inf, nan), complex(-1, 0),
            complex(-1, 0), complex(nan, 0), complex(-1, 0), None, np.expm1(1 + 2j),
            np.exp(0.3 - 0.7j) - 1]
    for g, w in zip(got, want, strict=True):
        if w is None:   # near 0: z + z**2 / 2, which exp(z) - 1 computes to 8 digits only
            np.testing.assert_allclose(g, complex(1e-10, 1e-10 + 1e-20), rtol=1e-14)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12)
    assert not np.signbit(got[1].real)   # -0 + 0j gives +0 + 0j
    t = np.asarray(xp.tanh(xp.asarray(np.array([complex(inf, 1), complex(-inf, 2),
                                                complex(0.5, 0.3)], np.complex64))))
    np.testing.assert_allclose(t, [1 + 0j, -1 + 0j, np.tanh(np.complex64(0.5 + 0.3j))],
                               rtol=1e-6)
    assert t.dtype == np.complex64 and np.signbit(t[1].imag)   # 0 signed as sin(2 imag)
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(xp.expm1(xp.asarray(x))), np.expm1(x))
    np.testing.assert_array_equal(np.asarray(xp.tanh(xp.asarray(x))), np.tanh(x))
