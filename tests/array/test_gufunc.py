"""apply_gufunc: generalized ufuncs with core dimensions on blocked arrays, against NumPy's
own gufuncs (np.vecdot, np.matmul, np.linalg) and np.vectorize(..., signature=...)."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.gufunc import apply_gufunc, parse_signature

DTYPES = [np.float32, np.float64, np.int64, np.complex128]


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 10
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _close(got, want, dtype):
    assert got.dtype == np.asarray(want).dtype
    rtol = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(got, want, rtol=rtol)


def test_parse_signature():
    assert parse_signature("(i),(i)->()") == ([("i",), ("i",)], [()], False)
    assert parse_signature(" (m, n) -> (n) ") == ([("m", "n")], [("n",)], False)
    assert parse_signature("(m,m)->()") == ([("m", "m")], [()], False)
    assert parse_signature("()->(i),()") == ([()], [("i",), ()], True)
    assert parse_signature("(i)->(),") == ([("i",)], [()], True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_inner_product_uneven_blocks_and_broadcast_loops(dtype):
    a = _data((7, 5, 4), dtype)
    b = _data((7, 1, 4), dtype, seed=1)
    c = _data((4,), dtype, seed=2)
    x = tg.from_numpy(a, chunks=(3, 2, 4))
    y = tg.from_numpy(b, chunks=(2, 1, 4))
    got = apply_gufunc(np.vecdot, "(i),(i)->()", x, y)
    assert got.shape == (7, 5) and got.chunks == ((2, 1, 1, 2, 1), (2, 2, 1))
    _close(got.compute(), np.vecdot(a, b), dtype)
    _close(apply_gufunc(np.vecdot, "(i),(i)->()", x, c).compute(), np.vecdot(a, c), dtype)
    _close(apply_gufunc(np.vecdot, "(i),(i)->()", x, x).compute(), np.vecdot(a, a), dtype)
    # an argument with fewer loop dimensions (a NumPy array) broadcasts from the left
    d = _data((5, 4), dtype, seed=3)
    _close(apply_gufunc(np.vecdot, "(i),(i)->()", d, x).compute(), np.vecdot(d, a), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_core_output_dims_sort_and_new_dims(dtype):
    a = _data((9, 6), dtype)
    x = tg.from_numpy(a, chunks=(4, 6))
    srt = apply_gufunc(lambda b: np.sort(b, axis=-1), "(i)->(i)", x)
    assert srt.chunks == ((4, 4, 1), (6,))
    _close(srt.compute(), np.sort(a, axis=-1), dtype)

    def spread(s):
        return np.array([s, 2 * s, 3 * s])

    new = apply_gufunc(spread, "()->(k)", x, vectorize=True, output_sizes={"k": 3})
    assert new.shape == (9, 6, 3) and new.chunks == ((4, 4, 1), (6,), (3,))
    _close(new.compute(), np.vectorize(spread, signature="()->(k)")(a), dtype)

    def colmax(m):
        return m.max(axis=0) if not np.iscomplexobj(m) else m.sum(axis=0)

    stack = _data((5, 3, 4), dtype)
    got = apply_gufunc(colmax, "(m,n)->(n)", tg.from_numpy(stack, chunks=(2, 3, 4)),
                       vectorize=True)
    _close(got.compute(), np.vectorize(colmax, signature="(m,n)->(n)")(stack), dtype)
    assert got.chunks == ((2, 2, 1), (4,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linalg_gufuncs(dtype):
    rng = np.random.default_rng(3)
    a = (rng.random((6, 3, 3)) + 3 * np.eye(3)).astype(dtype)
    x = tg.from_numpy(a, chunks=(4, 3, 3))
    _close(apply_gufunc(np.linalg.det, "(m,m)->()", x).compute(), np.linalg.det(a), dtype)
    inv = apply_gufunc(np.linalg.inv, "(m,m)->(m,m)", x)
    assert inv.chunks == ((4, 2), (3,), (3,))
    _close(inv.compute(), np.linalg.inv(a), dtype)
    b = rng.random((6, 3)).astype(dtype)
    got = apply_gufunc(np.linalg.solve, "(m,m),(m,n)->(m,n)", x,
                       tg.from_numpy(b[..., None], chunks=(3, 3, 1)))
    _close(got.compute(), np.linalg.solve(a, b[..., None]), dtype)


def test_several_outputs_one_call_per_block():
    a = _data((10, 6), np.float64)
    x = tg.from_numpy(a, chunks=(3, 6))
    calls = []

    def stats(b):
        calls.append(b.shape)
        return b.mean(axis=-1), np.sort(b, axis=-1)

    mean, srt = apply_gufunc(stats, "(i)->(),(i)", x, output_dtypes=[np.float64, np.float64])
    got_mean, got_srt = tg.compute(mean, srt, backend="sync")
    np.testing.assert_allclose(got_mean, a.mean(axis=-1))
    np.testing.assert_allclose(got_srt, np.sort(a, axis=-1))
    assert len(calls) == 4  # one call per block makes both outputs
    (only,) = apply_gufunc(lambda b: (b.sum(-1),), "(i)->(),", x)  # a 1-tuple signature
    np.testing.assert_allclose(only.compute(), a.sum(axis=-1))
    lo, hi = apply_gufunc(lambda b: (b.min(-1), b.max(-1)), "(i)->(),()", x)  # inferred
    assert lo.dtype == hi.dtype == np.float64
    np.testing.assert_allclose(hi.compute(), a.max(axis=-1))


def test_output_dtypes_cast_and_meta():
    a = _data((8, 5), np.float64)
    x = tg.from_numpy(a, chunks=(3, 5))
    got = apply_gufunc(lambda b: b.sum(-1), "(i)->()", x, output_dtypes=np.float32)
    assert got.dtype == np.float32 and got.compute().dtype == np.float32
    got = apply_gufunc(lambda b: b.sum(-1), "(i)->()", x, meta=np.empty((0,), np.int32))
    np.testing.assert_array_equal(got.compute(), a.sum(-1).astype(np.int32))


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("keepdims", [False, True])
def test_axis_and_keepdims_as_numpy(axis, keepdims):
    a = _data((7, 5, 4), np.float64)
    x = tg.from_numpy(a, chunks=(3, 2, 4))
    got = apply_gufunc(np.vecdot, "(n),(n)->()", x, x, axis=axis, keepdims=keepdims,
                       allow_rechunk=True)
    want = np.vecdot(a, a, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.compute(), want)
    srt = apply_gufunc(lambda b: np.sort(b, axis=-1), "(i)->(i)", x, axis=axis,
                       allow_rechunk=True)
    np.testing.assert_allclose(srt.compute(), np.sort(a, axis=axis))


@pytest.mark.parametrize("shapes,axes", [
    (((7, 5, 4), (5, 6, 4)), [(0, 1), (0, 1), (0, 2)]),
    (((4, 7, 5), (6, 4, 5)), [(-2, -1), (2, 0), (1, 0)]),
    (((7, 4, 5), (5, 6)), [(0, 2), (0, 1), (-1, 0)]),
])
def test_axes_as_numpy(shapes, axes):
    rng = np.random.default_rng(4)
    a, b = rng.random(shapes[0]), rng.random(shapes[1])
    x = tg.from_numpy(a, chunks=3)
    y = tg.from_numpy(b, chunks=4)
    got = apply_gufunc(np.matmul, "(n,k),(k,m)->(n,m)", x, y, axes=axes, allow_rechunk=True)
    want = np.matmul(a, b, axes=axes)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.compute(), want)


def test_axes_of_inputs_only_for_scalar_outputs():
    a = _data((7, 5, 4), np.float64)
    x = tg.from_numpy(a, chunks=(3, 2, 4))
    got = apply_gufunc(np.vecdot, "(n),(n)->()", x, x, axes=[0, 0], allow_rechunk=True)
    np.testing.assert_allclose(got.compute(), np.vecdot(a, a, axes=[0, 0, ()]))


def test_allow_rechunk_joins_split_core_dimension():
    a = _data((6, 10), np.float64)
    x = tg.from_numpy(a, chunks=(4, 3))
    with pytest.raises(ValueError, match=r"core dimension 'i' of argument #0 .* split into 4 "
                                         r"blocks.*allow_rechunk=True"):
        apply_gufunc(lambda b: b.sum(-1), "(i)->()", x)
    got = apply_gufunc(lambda b: b.sum(-1), "(i)->()", x, allow_rechunk=True)
    assert got.chunks == ((4, 2),)
    np.testing.assert_allclose(got.compute(), a.sum(-1))


def test_zero_size_and_single_block():
    x = tg.from_numpy(np.zeros((0, 4)), chunks=(2, 4))
    got = apply_gufunc(lambda b: b.sum(-1), "(i)->()", x)
    assert got.shape == (0,) and got.compute().shape == (0,)
    a = _data((3, 3), np.float64) + 5 * np.eye(3)
    det = apply_gufunc(np.linalg.det, "(m,m)->()", tg.from_numpy(a, chunks=-1))
    assert det.shape == ()
    np.testing.assert_allclose(det.compute(), np.linalg.det(a))
    both = apply_gufunc(np.add, "(),()->()", tg.from_numpy(a, chunks=2), 2.5)
    np.testing.assert_allclose(both.compute(), a + 2.5)


def test_bad_input():
    x = tg.from_numpy(np.ones((4, 3)), chunks=(2, 3))
    for bad in ("(i)->", "i->()", "(i)(j)->()", "(i)->()->()", "(i-j)->()", ""):
        with pytest.raises(ValueError, match="is not a gufunc signature"):
            apply_gufunc(np.sum, bad, x)
    with pytest.raises(TypeError, match="signature must be a string"):
        apply_gufunc(np.sum, None, x)
    with pytest.raises(ValueError, match=r"takes 2 arguments, 1 given"):
        apply_gufunc(np.vecdot, "(i),(i)->()", x)
    with pytest.raises(ValueError, match=r"takes 1 argument, 2 given"):
        apply_gufunc(np.sum, "(i)->()", x, x)
    with pytest.raises(ValueError, match=r"output core dimension 'k' .*output_sizes"):
        apply_gufunc(lambda b: b, "(i)->(k)", x)
    with pytest.raises(ValueError, match=r"output_sizes gives 'i' size 5.*size 3"):
        apply_gufunc(lambda b: b, "(i)->(i)", x, output_sizes={"i": 5})
    with pytest.raises(ValueError, match=r"core dimension 'i' has size 3 .*and 2"):
        apply_gufunc(np.vecdot, "(i),(i)->()", x, np.ones(2))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        apply_gufunc(np.vecdot, "(i),(i)->()", x, np.ones((5, 3)))
    with pytest.raises(ValueError, match="fewer dimensions than its core dimensions"):
        apply_gufunc(np.linalg.det, "(m,m)->()", tg.from_numpy(np.ones(3), chunks=3))
    with pytest.raises(ValueError, match="axes= or axis=, not both"):
        apply_gufunc(np.sum, "(i)->()", x, axis=0, axes=[0])
    with pytest.raises(ValueError, match="axis= needs a signature"):
        apply_gufunc(np.linalg.det, "(m,m)->()", x, axis=0)
    with pytest.raises(ValueError, match="keepdims=True needs outputs without core"):
        apply_gufunc(np.sort, "(i)->(i)", x, keepdims=True)
    with pytest.raises(ValueError, match="axes has 3 entries"):
        apply_gufunc(np.sort, "(i)->(i)", x, axes=[0, 0, 0])
    with pytest.raises(ValueError, match=r"axes entry \(0, 1\) of input #0 gives 2"):
        apply_gufunc(np.sum, "(i)->()", x, axes=[(0, 1)])
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds"):
        apply_gufunc(np.sum, "(i)->()", x, axis=2)
    with pytest.raises(ValueError, match="2 output dtypes given for a function of 1 output"):
        apply_gufunc(np.sum, "(i)->()", x, output_dtypes=[float, float])
    with pytest.raises(ValueError, match="give output_dtypes= or meta=, not both"):
        apply_gufunc(np.sum, "(i)->()", x, output_dtypes=float, meta=np.empty(0))
    with pytest.raises(ValueError, match="cannot infer the output dtypes"):
        apply_gufunc(lambda b: b.no_such_method(), "(i)->()", x)
    with pytest.raises(TypeError, match="is not callable"):
        apply_gufunc(3, "(i)->()", x)
    # what func returns is checked against the signature when it runs
    with pytest.raises(ValueError, match=r"output #0 of sum has shape \(\) .* needs \(2,\)"):
        apply_gufunc(np.sum, "(i)->()", x, output_dtypes=float).compute()
    with pytest.raises(ValueError, match=r"returned ndarray, but the signature .* 2 outputs"):
        apply_gufunc(lambda b: b.sum(-1), "(i)->(),()", x,
                     output_dtypes=[float, float])[0].compute()
