"""dask.array's ufunc names at the top level (NumPy's ufuncs, lazy on tilegraph arrays),
dask's other elementwise functions, ``ufunc.outer``, and generalized ufuncs (NumPy's,
``numpy.linalg``'s kernels, signature-bearing ufuncs such as numba's ``@guvectorize``)
through ``__array_ufunc__``: against NumPy and dask on uneven blocks, several dtypes, and
the errors for what is not supported."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from _blocked import check

import tilegraph as tg
from tilegraph.array.ufuncs import FUNCTIONS, UFUNCS

pytestmark = pytest.mark.filterwarnings(
    "ignore:(invalid value|divide by zero|overflow):RuntimeWarning")

rng = np.random.default_rng(3)
DATA = {
    "f8": rng.random((7, 5)) + 0.1,
    "f4": (rng.random((7, 5)) + 0.1).astype(np.float32),
    "i8": rng.integers(1, 9, (7, 5)),
    "i2": rng.integers(1, 9, (7, 5)).astype(np.int16),
    "b": rng.random((7, 5)) > 0.5,
    "c16": rng.standard_normal((7, 5)) * 0.3 + 0.2j,
}
CHUNKS = ((3, 3, 1), (2, 3))


def x_of(a):
    return tg.from_numpy(a, chunks=CHUNKS)


def test_every_dask_ufunc_name_is_numpys_ufunc_and_none_is_missing():
    dask_ufuncs = {n for n in da.__all__ if isinstance(getattr(da, n), da.ufunc.ufunc)}
    assert dask_ufuncs <= set(UFUNCS)
    for name in dask_ufuncs:
        assert getattr(tg, name) is getattr(np, getattr(da, name).__name__)
    assert isinstance(tg.multiply, np.ufunc) and tg.abs is np.absolute


@pytest.mark.parametrize("name", sorted(UFUNCS))
def test_top_level_ufuncs_match_numpy_on_uneven_blocks(name, forbid_compute):
    ufunc = UFUNCS[name]
    tried = 0
    for key, a in DATA.items():
        args = [a, DATA[key][::-1]][:ufunc.nin]
        if name == "ldexp":
            args = [DATA["f8"], DATA["i8"]] if key == "f8" else None
        if args is None:
            continue
        try:
            with np.errstate(all="ignore"):
                want = ufunc(*args)
        except TypeError:
            continue
        got = getattr(tg, name)(*[x_of(v) for v in args])
        tried += 1
        with tg.config.set(backend="sync"):
            for g, w in zip(got if ufunc.nout > 1 else [got], want if ufunc.nout > 1
                            else [want], strict=True):
                check(g, w)
    assert tried >= 1


def test_a_ufunc_on_numpy_values_only_is_numpys():
    assert tg.add(1, 2) == 3 and isinstance(tg.sqrt(np.ones(3)), np.ndarray)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_other_elementwise_functions_match_numpy_and_dispatch(name, forbid_compute):
    a = DATA["c16"] if name in ("angle", "iscomplex", "isreal", "real", "imag") else \
        np.where(DATA["f8"] > 0.9, np.inf, np.where(DATA["f8"] < 0.2, -np.inf,
                                                    DATA["f8"] * 7 - 3))
    if name == "nan_to_num":
        a = np.where(DATA["f8"] > 0.8, np.nan, a)
    fn = getattr(np, name)
    with tg.config.set(backend="sync"):
        check(getattr(tg, name)(x_of(a)), fn(a))
        check(fn(x_of(a)), fn(a))  # through __array_function__
    assert np.array_equal(getattr(tg, name)(a), fn(a), equal_nan=True)  # NumPy in and out


def test_angle_in_degrees_and_nan_to_num_keywords():
    c = DATA["c16"]
    check(tg.angle(x_of(c), deg=True), np.angle(c, deg=True))
    f = np.array([np.nan, np.inf, -np.inf, 1.0])
    check(tg.nan_to_num(tg.from_numpy(f, chunks=3), nan=-1.0, posinf=9.0),
          np.nan_to_num(f, nan=-1.0, posinf=9.0))


@pytest.mark.parametrize("key", ["f8", "f4", "i8", "b"])
def test_outer_of_every_binary_ufunc_kind(key, forbid_compute):
    a = DATA[key]
    for ufunc in (np.add, np.multiply, np.maximum, np.equal, np.logical_and):
        try:
            want = ufunc.outer(a[:, 0], a[0])
        except TypeError:
            continue
        got = ufunc.outer(tg.from_numpy(a[:, 0], chunks=3), tg.from_numpy(a[0], chunks=2))
        with tg.config.set(backend="sync"):
            check(got, want)
    with tg.config.set(backend="sync"):  # a NumPy operand, and 2-d by 1-d
        check(np.subtract.outer(x_of(DATA["f8"]), DATA["f8"][0]),
              np.subtract.outer(DATA["f8"], DATA["f8"][0]))


def test_outer_refuses_what_numpy_refuses():
    x = x_of(DATA["f8"])
    with pytest.raises(ValueError, match="binary"):  # NumPy's own check
        np.sin.outer(x, x)
    with pytest.raises(TypeError, match="reduceat"):
        np.add.reduceat(x, [0, 2])


# -- generalized ufuncs ------------------------------------------------------------------------

STACK = rng.standard_normal((5, 4, 4)) + 4 * np.eye(4)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_numpys_gufuncs_on_uneven_blocks_with_split_core_dimensions(dtype, forbid_compute):
    from numpy._core import _umath_tests as ut

    s = STACK.astype(dtype)
    x = tg.from_numpy(s, chunks=(2, 3, 3))  # core dimensions split: made one block
    v = tg.from_numpy(s[:, 0], chunks=(3, 3))
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    got = [np.vecdot(x, x), np.matvec(x, v), np.vecmat(v, x), np.linalg.det(x),
           np.vecdot(x, x, axis=0), np.vecdot(x, x, keepdims=True)]
    want = [np.vecdot(s, s), np.matvec(s, s[:, 0]), np.vecmat(s[:, 0], s), np.linalg.det(s),
            np.vecdot(s, s, axis=0), np.vecdot(s, s, keepdims=True)]
    if dtype != np.complex128:
        got.append(ut.inner1d(x, x))
        want.append(ut.inner1d(s, s))
    with tg.config.set(backend="sync"):
        for g, w in zip(got, want, strict=True):
            assert isinstance(g, tg.Array)
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g.compute(), w, rtol=rtol)


def test_a_gufunc_of_several_outputs_and_an_axes_keyword():
    from numpy.linalg import _umath_linalg as ul

    sym = STACK + np.swapaxes(STACK, -1, -2)
    x = tg.from_numpy(sym, chunks=(2, 4, 4))
    w, v = ul.eigh_lo(x)
    ww, vv = ul.eigh_lo(sym)
    np.testing.assert_allclose(w.compute(), ww)
    np.testing.assert_allclose(np.abs(v.compute()), np.abs(vv))
    moved = np.moveaxis(STACK, 0, -1)
    got = np.vecdot(tg.from_numpy(moved, chunks=2), tg.from_numpy(moved, chunks=2),
                    axes=[(0,), (0,), ()])
    np.testing.assert_allclose(got.compute(), np.vecdot(moved, moved, axes=[(0,), (0,), ()]))


def test_a_signature_bearing_ufunc_made_by_numpy_is_routed_like_numbas():
    """numba's @guvectorize makes an np.ufunc with a signature; so does NumPy's own
    test module, whose gufunc stands in for numba's here (numba is not installed)."""
    from numpy._core import _umath_tests as ut

    a = rng.standard_normal((6, 3, 2))
    b = rng.standard_normal((6, 2, 4))
    got = ut.matrix_multiply(tg.from_numpy(a, chunks=(4, 1, 1)),
                             tg.from_numpy(b, chunks=(3, 2, 3)))
    assert got.chunks[0] == (3, 1, 2)  # loop blocks cut at the union of the boundaries
    np.testing.assert_allclose(got.compute(), ut.matrix_multiply(a, b))


def test_gufunc_errors_name_the_problem(forbid_compute):
    x = tg.from_numpy(STACK, chunks=2)
    with pytest.raises(ValueError, match="fewer dimensions than its core dimensions"):
        np.vecdot(x, 2.0)
    with pytest.raises(TypeError, match="optional core dimensions"):
        np.matmul(x, x, axes=[(-2, -1), (-2, -1), (-2, -1)])
    with pytest.raises(TypeError, match="where"):  # NumPy's own check
        np.vecdot(x, x, where=True)
    with pytest.raises(TypeError, match="out="):
        np.vecdot(x, x, out=np.empty(5))


def test_gufunc_and_as_gufunc_bind_a_signature_as_dasks():
    g = tg.gufunc(np.linalg.det, signature="(m,m)->()", output_dtypes=float)
    x = tg.from_numpy(STACK, chunks=(2, 4, 4))
    np.testing.assert_allclose(g(x).compute(), np.linalg.det(STACK))

    @tg.as_gufunc(signature="(i)->(),()", output_dtypes=(float, float))
    def stats(v):
        return v.mean(-1), v.std(-1)

    mean, std = stats(tg.from_numpy(STACK[0], chunks=(3, 4)))
    np.testing.assert_allclose(mean.compute(), STACK[0].mean(-1))
    np.testing.assert_allclose(std.compute(), STACK[0].std(-1))
    vec = tg.gufunc(lambda m: np.trace(m), signature="(m,m)->()", vectorize=True,
                    output_dtypes=float)
    np.testing.assert_allclose(vec(x).compute(), np.trace(STACK, axis1=1, axis2=2))
    with pytest.raises(ValueError, match="split into 2 blocks"):
        vec(tg.from_numpy(STACK, chunks=(2, 3, 3)))
    with pytest.raises(TypeError, match="signature="):
        tg.gufunc(np.sum)
    with pytest.raises(ValueError, match="not a gufunc signature"):
        tg.gufunc(np.sum, signature="(i->")
    with pytest.raises(TypeError, match="unknown keyword"):
        tg.as_gufunc(signature="(i)->()", bogus=1)
