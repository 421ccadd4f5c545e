"""Sparse arrays (blocks are scipy.sparse CSR/CSC arrays) against dense NumPy and SciPy:
creation, elementwise operations, sums, transposes, products, conversion, the structure and
memory estimates of their plans, and their build-time errors."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sps
from _blocked import axis_chunks, block_values, uneven_chunks
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
import tilegraph.util
from tilegraph.algebra import lower, source
from tilegraph.array.chunks import block_shape, block_slices
from tilegraph.array.core import Array, unique_name
from tilegraph.array.sparse import SparseArray, sparse_semiring
from tilegraph.array.sparse_blocks import sparse_block_nbytes

SETTINGS = settings(max_examples=40, deadline=None, database=None)

DTYPES = [np.float64, np.float32, np.complex128, np.int64]
FORMATS = ["csr", "csc"]
DENSITIES = [0.0, 0.35, 1.0]


# -- helpers -------------------------------------------------------------------------------


def values(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Nonzero values of ``dtype`` that show a misplaced element."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.ones(shape, dtype=bool)
    if dtype.kind in "iu":
        return (rng.integers(1, 6, shape) * rng.choice([-1, 1], shape)).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) + 3).astype(dtype)


def sample(shape, density, dtype=np.float64, fmt="csr", seed=0) -> sps.sparray:
    """A SciPy sparse array of ``fmt`` with about ``density`` of its entries stored."""
    rng = np.random.default_rng(seed)
    dense = values(rng, shape, dtype)
    dense[rng.random(shape) >= density] = 0
    return sps.csr_array(dense) if fmt == "csr" else sps.csc_array(dense)


def tolerance(dtype) -> dict:
    if np.dtype(dtype) in (np.float32, np.complex64):
        return {"rtol": 2e-5, "atol": 2e-5}
    return {"rtol": 1e-12, "atol": 1e-12}


def assert_values(got: np.ndarray, want: np.ndarray, exact: bool = False) -> None:
    """Equal values; ``exact``: bit for bit, but for complex products, which SciPy rounds
    differently from NumPy (within an ulp)."""
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if exact and want.dtype.kind == "c":
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps, atol=0)
    elif exact or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, **tolerance(want.dtype))


def check_sparse(result, expected, fmt: str | None = None, exact: bool = False,
                 **options) -> None:
    """``result`` is a SparseArray equal to the dense ``expected``: shape, dtype, every block
    on its own (a SciPy sparse array of the array's format, dtype and block shape), and the
    assembled ``csr_array``."""
    expected = np.asarray(expected)
    assert isinstance(result, SparseArray), type(result)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    if fmt is not None:
        assert result.format == fmt
    assert tuple(sum(c) for c in result.chunks) == result.shape
    for coord, block in block_values(result).items():
        assert isinstance(block, sps.sparray), (coord, type(block))
        assert block.format == result.format, (coord, block.format)
        assert block.shape == block_shape(result.chunks, coord)
        assert block.dtype == result.dtype
        assert_values(block.toarray(), expected[block_slices(result.chunks, coord)], exact)
    options.setdefault("backend", "sync")
    whole = result.compute(**options)
    assert isinstance(whole, sps.csr_array)
    assert_values(whole.toarray(), expected, exact)


def check_dense(result, expected, exact: bool = False, **options) -> None:
    """``result`` is a dense Array (not sparse) computing to ``expected``."""
    expected = np.asarray(expected)
    assert isinstance(result, Array) and not isinstance(result, SparseArray), type(result)
    assert result.shape == expected.shape and result.dtype == expected.dtype
    options.setdefault("backend", "sync")
    assert_values(np.asarray(result.compute(**options)), expected, exact)


def kinds(arr) -> Counter:
    graph = lower([arr.collection]).build()
    return Counter(graph.meta["kind"])


CHUNKS = ((3, 3, 1), (2, 2, 1))  # uneven edge blocks of a 7 x 5 array


# -- creation ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["csr_array", "csc_array", "coo_array", "csr_matrix",
                                  "lil_array", "dok_matrix", "bsr_array"])
@pytest.mark.parametrize("fmt", [None, "csr", "csc"])
def test_from_scipy_of_every_input_format(kind, fmt):
    m = sample((7, 5), 0.4, seed=1)
    x = tg.from_scipy(getattr(sps, kind)(m), chunks=(3, 2), format=fmt)
    want = fmt or ("csc" if kind == "csc_array" else "csr")
    assert x.chunks == CHUNKS
    check_sparse(x, m.toarray(), fmt=want, exact=True)
    assert kinds(x) == Counter({"load": 9})


@pytest.mark.parametrize("dtype", [*DTYPES, np.bool_, np.int32, np.complex64])
@pytest.mark.parametrize("density", DENSITIES)
def test_from_scipy_dtypes_and_densities(dtype, density):
    m = sample((7, 5), density, dtype, seed=2)
    x = tg.from_scipy(m, chunks=((1, 4, 2), (5,)))
    check_sparse(x, m.toarray(), exact=True)
    assert x.density == pytest.approx(m.nnz / 35)


def test_from_scipy_with_auto_and_zero_size_blocks():
    m = sample((6, 4), 0.5, seed=3)
    check_sparse(tg.from_scipy(m), m.toarray(), exact=True)
    assert tg.from_scipy(m).numblocks == (1, 1)
    check_sparse(tg.from_scipy(m, chunks=((2, 0, 4), (0, 4))), m.toarray(), exact=True)
    empty = sps.csr_array((0, 3))
    check_sparse(tg.from_scipy(empty, chunks=2), np.zeros((0, 3)), exact=True)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [*DTYPES, np.bool_, np.float32, np.int8])
@pytest.mark.parametrize("density", DENSITIES)
def test_random_blocks_have_the_density_and_format(fmt, dtype, density):
    x = tg.sparse.random((7, 5), density=density, chunks=(3, 2), seed=5, format=fmt,
                         dtype=dtype)
    assert x.format == fmt and x.dtype == np.dtype(dtype) and x.chunks == CHUNKS
    blocks = block_values(x)
    for coord, block in blocks.items():
        m, n = block_shape(x.chunks, coord)
        assert block.format == fmt and block.dtype == np.dtype(dtype)
        assert block.nnz == round(density * m * n)
        assert np.count_nonzero(block.toarray()) == block.nnz  # stored values are nonzero
    whole = x.compute()
    check_sparse(x, whole.toarray(), exact=True)
    assert kinds(x) == Counter({"random": 9})


def test_random_blocks_are_seeded_by_block_coordinate():
    x = tg.sparse.random((7, 5), density=0.4, chunks=(3, 2), seed=11)
    a = x.compute(backend="sync").toarray()
    for workers in (1, 2, 4):
        again = tg.sparse.random((7, 5), density=0.4, chunks=(3, 2), seed=11)
        np.testing.assert_array_equal(again.compute(backend="threads", workers=workers)
                                      .toarray(), a)
    # block (i, j) depends on (seed, i, j) only: the same block of a larger grid is equal
    big = tg.sparse.random((9, 6), density=0.4, chunks=(3, 2), seed=11).compute().toarray()
    np.testing.assert_array_equal(big[3:6, 2:4], a[3:6, 2:4])
    other = tg.sparse.random((7, 5), density=0.4, chunks=(3, 2), seed=12).compute()
    assert (other != x.compute()).nnz > 0
    unseeded = [tg.sparse.random((20, 20), 0.5, chunks=10).compute() for _ in range(2)]
    assert (unseeded[0] != unseeded[1]).nnz > 0


def test_random_values():
    x = tg.sparse.random((40, 30), density=0.5, chunks=16, seed=1).compute()
    assert 0 <= x.data.min() and x.data.max() < 1
    i = tg.sparse.random((40, 30), density=0.5, chunks=16, seed=1, dtype=np.int64).compute()
    assert set(np.unique(i.data)) <= set(range(1, 10))
    c = tg.sparse.random((10, 10), density=0.5, seed=1, dtype=np.complex128).compute()
    assert (c.data.imag > 0).any() and (c.data.real > 0).any()


def test_planning_is_lazy(forbid_compute):
    m = sample((7, 5), 0.4)
    x = tg.from_scipy(m, chunks=(3, 2))
    r = tg.sparse.random((5, 7), density=0.3, chunks=(2, 3), seed=0)
    d = tg.from_numpy(np.ones((7, 5)), chunks=4)
    outs = [x + x, x - x, x * 2, x * x, x * d, x / 3, -x, abs(x), x.astype(np.float32),
            x.sum(), x.sum(axis=0), x.sum(axis=1), x.T, x.transpose(), x.todense(),
            x @ r, x @ np.ones((5, 2)), np.ones((3, 7)) @ x, r @ d, x + d, d - x,
            x.rechunk(2), x.conj(), x.real, x.mean(), x.max(axis=0), tg.dot(x, r)]
    for out in outs:
        assert out.ntasks > 0
    with pytest.raises(AssertionError, match="run of"):
        x.compute()


# -- elementwise ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("density", DENSITIES)
def test_elementwise_with_sparse_operands(fmt, dtype, density):
    m1 = sample((7, 5), density, dtype, fmt, seed=1)
    m2 = sample((7, 5), 0.5, dtype, "csr", seed=2)
    a, b = m1.toarray(), m2.toarray()
    x = tg.from_scipy(m1, chunks=(3, 2))
    y = tg.from_scipy(m2, chunks=((4, 3), (1, 4)))  # other blocks: aligned internally
    check_sparse(x + y, a + b, fmt=fmt, exact=True)
    check_sparse(x - y, a - b, fmt=fmt, exact=True)
    check_sparse(y - x, b - a, fmt="csr", exact=True)
    check_sparse(x * y, a * b, fmt=fmt, exact=True)
    check_sparse(x + x, a + a, fmt=fmt, exact=True)
    check_sparse(np.add(x, y), a + b, exact=True)
    check_sparse(np.multiply(y, x), b * a, exact=True)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_with_dense_operands(fmt, dtype):
    m = sample((7, 5), 0.4, dtype, fmt, seed=3)
    a = m.toarray()
    d = values(np.random.default_rng(4), (7, 5), dtype)
    x = tg.from_scipy(m, chunks=(3, 2))
    td = tg.from_numpy(d, chunks=((2, 5), (3, 2)))
    for dense in (d, td):
        check_dense(x + dense, a + d, exact=True)
        check_dense(dense + x, d + a, exact=True)
        check_dense(x - dense, a - d, exact=True)
        check_dense(dense - x, d - a, exact=True)
        check_sparse(x * dense, a * d, fmt=fmt, exact=True)
        check_sparse(dense * x, d * a, fmt=fmt, exact=True)
    # dense operands broadcast in + and - as NumPy's do
    row = d[0]
    check_dense(x + row, a + row, exact=True)
    check_dense(row - x, row - a, exact=True)
    check_dense(np.add(x, [list(row)]), a + row, exact=True)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [*DTYPES, np.int8, np.bool_])
def test_scalar_and_unary_operations(fmt, dtype):
    m = sample((7, 5), 0.4, dtype, fmt, seed=5)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(3, 2))
    for s in (2, 0.5, np.float32(3), 1 + 2j, -1, np.int16(3), True):
        check_sparse(x * s, a * s, fmt=fmt, exact=True)
        check_sparse(s * x, s * a, fmt=fmt, exact=True)
        check_sparse(x / s, a / s, fmt=fmt, exact=True)
    check_sparse(x * 0, a * 0, exact=True)
    check_sparse(abs(x), abs(a), fmt=fmt, exact=True)
    check_sparse(np.absolute(x), np.absolute(a), exact=True)
    check_sparse(x.conj(), a.conj(), exact=True)
    if np.dtype(dtype).kind != "c":
        assert x.conj() is x
    check_sparse(np.conjugate(x), np.conjugate(a), exact=True)
    check_sparse(x.real, a.real, exact=True)
    check_sparse(x.imag, a.imag, exact=True)
    check_sparse(np.real(x), np.real(a), exact=True)
    if dtype != np.bool_:
        check_sparse(-x, -a, fmt=fmt, exact=True)
        check_sparse(+x, +a, fmt=fmt, exact=True)
    else:
        with pytest.raises(TypeError, match="negative"):
            -x  # noqa: B018 - as NumPy: no negative of booleans


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("to", [np.float64, np.float32, np.complex128, np.int64, np.int8,
                                np.bool_])
def test_astype(dtype, to):
    m = sample((7, 5), 0.5, dtype, seed=6)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex to real drops the imaginary part
        want = a.astype(to)
        check_sparse(x.astype(to), want, exact=True)
    assert x.astype(dtype) is x
    with pytest.raises(TypeError, match="cannot cast"):
        x.astype(np.int8, casting="safe")


def test_elementwise_promotion_follows_numpy():
    m32 = sample((4, 4), 0.5, np.float32, seed=1)
    mi = sample((4, 4), 0.5, np.int64, seed=2)
    x32, xi = tg.from_scipy(m32, chunks=3), tg.from_scipy(mi, chunks=3)
    assert (x32 + xi).dtype == np.float64
    assert (x32 * 2.0).dtype == np.float32  # NEP 50: a Python float does not promote
    assert (x32 * np.float64(2)).dtype == np.float64
    assert (xi / 2).dtype == np.float64
    assert abs(tg.from_scipy(sample((2, 2), 1, np.complex128))).dtype == np.float64
    check_sparse(x32 + xi, m32.toarray() + mi.toarray(), exact=True)
    check_sparse(xi / 2, mi.toarray() / 2, exact=True)


# -- sums and transposes -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [*DTYPES, np.bool_, np.int8])
@pytest.mark.parametrize("density", DENSITIES)
def test_sum(fmt, dtype, density):
    m = sample((7, 5), density, dtype, fmt, seed=7)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(3, 2))
    for axis in (None, 0, 1, -1, (0, 1), ()):
        check_dense(x.sum(axis=axis), np.sum(a, axis=axis))
        check_dense(x.sum(axis=axis, keepdims=True), np.sum(a, axis=axis, keepdims=True))
    to = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    check_dense(x.sum(axis=0, dtype=to), a.sum(axis=0, dtype=to))
    check_dense(np.sum(x, axis=1), np.sum(a, axis=1))
    check_dense(np.add.reduce(x), np.add.reduce(a))
    check_dense(x.sum(split_every=2), a.sum())
    assert x.sum().compute() == pytest.approx(a.sum(), rel=1e-5)


def test_sum_of_many_blocks_is_a_tree():
    m = sample((20, 3), 0.5, np.int64, seed=8)
    x = tg.from_scipy(m, chunks=(1, 3))
    s = x.sum(axis=0, split_every=4)
    assert kinds(s)["reduce"] > 1
    check_dense(s, m.toarray().sum(axis=0))


def test_other_reductions_on_the_dense_form():
    m = sample((7, 5), 0.4, np.float64, seed=9)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(3, 2))
    check_dense(x.mean(axis=0), a.mean(axis=0))
    check_dense(x.max(), a.max())
    check_dense(np.min(x, axis=1), a.min(axis=1))
    check_dense(x.argmax(axis=0), a.argmax(axis=0))
    check_dense(x.var(), a.var())
    check_dense(x.any(axis=1), a.any(axis=1))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(fmt, dtype):
    m = sample((7, 5), 0.4, dtype, fmt, seed=10)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(3, 2))
    other = "csc" if fmt == "csr" else "csr"
    for t in (x.T, x.transpose(), x.transpose(1, 0), x.transpose((1, 0)), np.transpose(x),
              x.swapaxes(0, 1), x.mT, x.transpose(-1, 0)):
        check_sparse(t, a.T, fmt=other, exact=True)
        assert t.chunks == (x.chunks[1], x.chunks[0])
    assert kinds(x.T)["transpose"] == 9
    check_sparse(x.T.T, a, fmt=fmt, exact=True)
    assert x.transpose(0, 1) is x and x.swapaxes(1, 1) is x
    check_sparse(x.T + tg.from_scipy(m.T.tocsr(), chunks=2), a.T + a.T, fmt=other, exact=True)


# -- conversion ----------------------------------------------------------------------------


def test_todense_to_scipy_compute_and_protocols():
    m = sample((7, 5), 0.4, np.complex128, "csc", seed=11)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(3, 2))
    check_dense(x.todense(), a, exact=True)
    assert kinds(x.todense())["todense"] == 9
    for got in (x.to_scipy(), x.compute(), tg.compute(x)[0]):
        assert isinstance(got, sps.csr_array)
        np.testing.assert_array_equal(got.toarray(), a)
    s, total, dense = tg.compute(x, x.sum(), x.todense() + 1)
    np.testing.assert_array_equal(s.toarray(), a)
    np.testing.assert_allclose(total, a.sum())
    np.testing.assert_array_equal(dense, a + 1)
    assert tg.compute(3, x.T)[0] == 3
    np.testing.assert_array_equal(np.asarray(x), a)
    np.testing.assert_array_equal(np.asarray(x, dtype=np.complex64), a.astype(np.complex64))
    one = tg.from_scipy(sps.csr_array(np.array([[2.5]])))
    assert float(one) == 2.5 and bool(one)
    assert "assemble" in x.explain() or "to_scipy" in x.explain()
    assert repr(x).startswith("tilegraph.SparseArray<shape=(7, 5), dtype=complex128, format=csc")


@pytest.mark.parametrize("backend,workers", [("sync", None), ("threads", 1), ("threads", 4)])
def test_results_on_every_backend(backend, workers):
    m = sample((9, 8), 0.3, seed=12)
    a = m.toarray()
    x = tg.from_scipy(m, chunks=(4, 3))
    d = np.arange(8 * 3.0).reshape(8, 3)
    check_sparse(x @ x.T * 2, (a @ a.T) * 2, backend=backend, workers=workers)
    check_dense(x @ d, a @ d, backend=backend, workers=workers)
    check_dense(x.sum(axis=1), a.sum(axis=1), backend=backend, workers=workers)


def test_rechunk():
    m = sample((7, 5), 0.5, np.int64, "csc", seed=13)
    x = tg.from_scipy(m, chunks=(3, 2))
    for chunks in (2, (7, 5), ((1, 6), (5,)), ((3, 0, 4), (1, 1, 3)), {0: 4}):
        y = x.rechunk(chunks)
        check_sparse(y, m.toarray(), fmt="csc", exact=True)
    assert x.rechunk(x.chunks) is x
    assert x.rechunk({1: 5}).chunks == ((3, 3, 1), (5,))


# -- products ------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("density", DENSITIES)
def test_matmul_all_combinations(fmt, dtype, density):
    ms = sample((7, 5), density, dtype, fmt, seed=14)
    mt = sample((5, 6), 0.4, dtype, "csr", seed=15)
    s, t = ms.toarray(), mt.toarray()
    d = values(np.random.default_rng(16), (5, 4), dtype)
    e = values(np.random.default_rng(17), (3, 7), dtype)
    x = tg.from_scipy(ms, chunks=(3, 2))
    y = tg.from_scipy(mt, chunks=((3, 2), (4, 2)))  # inner blocks differ from x's
    check_dense(x @ d, s @ d)
    check_dense(x @ tg.from_numpy(d, chunks=((1, 4), (3, 1))), s @ d)
    check_dense(e @ x, e @ s)
    check_dense(tg.from_numpy(e, chunks=(2, (4, 3))) @ x, e @ s)
    check_sparse(x @ y, s @ t, fmt=fmt)
    check_sparse(tg.matmul(x, y), s @ t)
    check_sparse(np.matmul(x, y), s @ t)
    check_sparse(tg.dot(x, y), s @ t)
    check_sparse(x.dot(y), s @ t)
    check_dense(np.dot(x, d), s @ d)
    check_dense(tg.semiring_matmul(x, d, "plus_times"), s @ d)
    check_sparse(x @ x.T, s @ s.T, fmt=fmt)
    check_sparse(x.T @ x, s.T @ s, fmt="csc" if fmt == "csr" else "csr")


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_with_vectors_and_scalars(dtype):
    m = sample((7, 5), 0.4, dtype, seed=18)
    s = m.toarray()
    v, w = values(np.random.default_rng(1), (5,), dtype), values(np.random.default_rng(2),
                                                                 (7,), dtype)
    x = tg.from_scipy(m, chunks=(3, 2))
    check_dense(x @ v, s @ v)
    check_dense(w @ x, w @ s)
    check_dense(x @ tg.from_numpy(v, chunks=3), s @ v)
    check_dense(tg.dot(x, v), np.dot(s, v))
    check_dense(tg.dot(w, x), np.dot(w, s))
    check_sparse(tg.dot(x, 2), s * 2, exact=True)
    check_sparse(tg.dot(3, x), 3 * s, exact=True)


def test_matmul_mixed_dtypes_promote_like_numpy():
    mi = sample((4, 5), 0.5, np.int64, seed=1)
    m32 = sample((5, 3), 0.5, np.float32, seed=2)
    xi, x32 = tg.from_scipy(mi, chunks=2), tg.from_scipy(m32, chunks=2)
    check_sparse(xi @ x32, mi.toarray() @ m32.toarray())
    d = np.ones((5, 2), dtype=np.complex64)
    check_dense(xi @ d, mi.toarray() @ d)
    b = tg.from_scipy(sample((4, 4), 0.5, np.bool_, seed=3), chunks=3)
    check_sparse(b @ b, b.compute().toarray() @ b.compute().toarray(), exact=True)


def test_matmul_with_an_empty_inner_axis():
    x = tg.from_scipy(sps.csr_array((3, 0)), chunks=2)
    y = tg.from_scipy(sps.csr_array((0, 4)), chunks=2)
    check_sparse(x @ y, np.zeros((3, 4)), exact=True)
    check_dense(x @ np.ones((0, 2)), np.zeros((3, 2)), exact=True)
    check_dense(np.ones((2, 3)) @ x, np.zeros((2, 0)), exact=True)


def test_matmul_plan_is_a_group_by_join(forbid_compute, monkeypatch):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 1)
    x = tg.sparse.random((6, 8), density=0.3, chunks=(2, 2), seed=1)
    d = tg.from_numpy(np.ones((8, 6)), chunks=2)
    e = tg.from_numpy(np.ones((4, 6)), chunks=2)
    for out, inner in ((x @ d, 4), (e @ x, 3), (x @ x.T, 4), (x.T @ x, 3)):
        k = kinds(out)
        nout = out.npartitions
        assert k["product"] == nout  # one chain per output block
        assert k["product"] + k["accumulate"] == nout * inner
        assert k["reduce"] == 0
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 64)
    k = kinds(x @ d)
    assert k["reduce"] == 9 and k["product"] + k["accumulate"] == 36


def test_semiring_accumulates_dense_results_in_place():
    s = sparse_semiring(np.float64, None)
    a = sps.csr_array(np.array([[1.0, 0], [0, 2]]))
    acc = np.ones((2, 2))
    out = s.accumulate(acc, a, np.full((2, 2), 3.0))
    assert out is acc
    np.testing.assert_array_equal(acc, [[4, 4], [7, 7]])
    sp = sparse_semiring(np.float64, "csc")
    prod = sp.accumulate(sp.product(a, a), a, a)
    assert prod.format == "csc"
    np.testing.assert_array_equal(prod.toarray(), 2 * (a @ a).toarray())
    np.testing.assert_array_equal(sp.add(prod, prod).toarray(), 4 * (a @ a).toarray())


# -- memory estimates ----------------------------------------------------------------------


def _nbytes(arr) -> dict:
    graph = lower([arr.collection]).build()
    keys = set(arr.collection.keys.ravel().tolist())
    return {k: nb for k, nb in zip(graph.keys, graph.meta["nbytes"], strict=True) if k in keys}


def test_block_nbytes_are_the_expected_sparse_sizes():
    x = tg.sparse.random((7, 5), density=0.4, chunks=(3, 2), seed=1)
    nb = _nbytes(x)
    for coord in np.ndindex(*x.numblocks):
        m, n = block_shape(x.chunks, coord)
        want = sparse_block_nbytes((m, n), round(0.4 * m * n), np.float64, "csr")
        assert nb[x.collection.key(coord)] == want
    blocks = block_values(x)
    for coord, block in blocks.items():  # the estimate is the real size at this density
        real = block.data.nbytes + block.indices.nbytes + block.indptr.nbytes
        assert nb[x.collection.key(coord)] == real
    csc = tg.sparse.random((7, 5), density=0.4, chunks=(3, 2), seed=1, format="csc")
    assert _nbytes(csc)[csc.collection.key((0, 0))] == sparse_block_nbytes((3, 2), 2, "f8", "csc")
    for derived in (x * 2, -x, x.T, x.astype(np.float32), x + x, x @ x.T):
        assert all(v is not None for v in _nbytes(derived).values()), derived
    dense = x @ np.ones((5, 2))
    assert set(_nbytes(dense).values()) <= {8 * 3 * 2, 8 * 1 * 2}


def test_block_nbytes_unknown_without_a_density():
    x = tg.sparse.random((4, 4), density=0.5, chunks=2, seed=1)
    y = SparseArray(x.collection, x.shape, x.chunks, x.dtype, x.format, density=None)
    assert y.density is None
    for derived in (y * 2, y + y, y.T):
        assert set(_nbytes(derived).values()) == {None}
    check_sparse(y + y, 2 * x.compute().toarray(), exact=True)


def test_from_scipy_block_nbytes_use_the_matrix_density():
    m = sample((10, 10), 0.3, seed=2)
    x = tg.from_scipy(m, chunks=5)
    d = m.nnz / 100
    assert x.density == d
    assert set(_nbytes(x).values()) == {sparse_block_nbytes((5, 5), round(d * 25), "f8",
                                                            "csr")}


# -- errors --------------------------------------------------------------------------------


def test_bad_inputs_to_from_scipy(forbid_compute):
    with pytest.raises(TypeError, match=r"from_scipy: expected a scipy.sparse.*from_numpy"):
        tg.from_scipy(np.eye(3))
    with pytest.raises(TypeError, match=r"from_scipy: expected a scipy.sparse"):
        tg.from_scipy([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match=r"2-D only.*3-D"):
        tg.from_scipy(sps.coo_array(np.ones((2, 2, 2))))
    with pytest.raises(ValueError, match=r"2-D only.*1-D"):
        tg.from_scipy(sps.coo_array(np.ones(3)))
    with pytest.raises(ValueError, match="format must be 'csr' or 'csc'"):
        tg.from_scipy(sps.eye_array(3), format="coo")
    with pytest.raises(ValueError, match="chunks"):
        tg.from_scipy(sps.eye_array(3), chunks=(1, 2, 3))


def test_bad_inputs_to_random(forbid_compute):
    for density in (-0.1, 1.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"density must be in \[0, 1\]"):
            tg.sparse.random((3, 3), density=density)
    with pytest.raises(TypeError, match="density must be a number"):
        tg.sparse.random((3, 3), density="0.5")
    with pytest.raises(ValueError, match=r"2-D only.*\(2, 3, 4\)"):
        tg.sparse.random((2, 3, 4))
    with pytest.raises(ValueError, match="2-D only"):
        tg.sparse.random(5)
    with pytest.raises(ValueError, match="format must be"):
        tg.sparse.random((3, 3), format="dense")
    with pytest.raises(TypeError, match="float16 is not supported"):
        tg.sparse.random((3, 3), dtype=np.float16)
    with pytest.raises(TypeError, match="not supported for sparse"):
        tg.sparse.random((3, 3), dtype=object)
    with pytest.raises(TypeError, match="seed"):
        tg.sparse.random((3, 3), seed=-1)
    with pytest.raises(ValueError, match="negative"):
        tg.sparse.random((3, -3))


def test_bad_operations_fail_while_planning(forbid_compute):
    x = tg.sparse.random((4, 5), density=0.5, chunks=2, seed=0)
    y = tg.sparse.random((5, 4), density=0.5, chunks=2, seed=0)
    with pytest.raises(ValueError, match=r"add: shapes \(4, 5\) and \(5, 4\) differ"):
        x + y
    with pytest.raises(ValueError, match=r"multiply: shapes \(4, 5\) and \(5, 4\) differ"):
        x * y
    with pytest.raises(ValueError, match=r"multiply: shapes \(4, 5\) and \(5,\) differ"):
        x * np.ones(5)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x + np.ones((5, 4))
    with pytest.raises(ValueError, match=r"matmul: shapes \(4, 5\) and \(4, 5\) are not"):
        x @ x
    with pytest.raises(ValueError, match="not aligned"):
        x @ np.ones((4, 2))
    with pytest.raises(ValueError, match="not aligned"):
        np.ones((2, 5)) @ x
    with pytest.raises(ValueError, match="no batch axes"):
        x @ np.ones((3, 5, 2))
    with pytest.raises(TypeError, match=r"adding a scalar.*x.todense\(\) \+ s"):
        x + 1
    with pytest.raises(TypeError, match="subtracting a scalar"):
        1 - x
    with pytest.raises(ValueError, match=r"divid.*by 0.*NaN"):
        x / 0
    with pytest.raises(ValueError, match="NaN"):
        x / float("nan")
    with pytest.raises(ValueError, match="multiplying a sparse array by inf"):
        x * float("inf")
    with pytest.raises(TypeError, match="divides by a nonzero scalar only"):
        x / x
    with pytest.raises(TypeError, match="divides by a nonzero scalar only"):
        x / np.ones((4, 5))
    with pytest.raises(TypeError, match="dividing by a sparse array"):
        2 / x
    with pytest.raises(TypeError, match="power is not supported on sparse arrays"):
        x**2
    with pytest.raises(TypeError, match=r"sin is not supported on sparse.*todense"):
        np.sin(x)
    with pytest.raises(TypeError, match=r"numpy.concatenate is not supported on sparse"):
        np.concatenate([x, x])
    with pytest.raises(TypeError, match="indexing a sparse array"):
        x[0]
    with pytest.raises(TypeError, match="reshape"):
        x.reshape(20)
    with pytest.raises(TypeError, match="einsum: sparse operands are not supported"):
        tg.einsum("ij,jk->ik", x, y)
    with pytest.raises(TypeError, match="tensordot: sparse operands"):
        tg.tensordot(x, y, 1)
    with pytest.raises(TypeError, match="outer: sparse operands"):
        tg.outer(x, y)
    with pytest.raises(ValueError, match=r"min_plus: sparse operands.*plus_times"):
        tg.semiring_matmul(x, y, "min_plus")
    with pytest.raises(TypeError, match="float16"):
        x.astype(np.float16)
    with pytest.raises(TypeError, match="subtract: cannot be applied"):
        tg.sparse.random((2, 2), dtype=bool) - tg.sparse.random((2, 2), dtype=bool)
    with pytest.raises(OverflowError, match="multiply: cannot be applied"):
        tg.sparse.random((2, 2), dtype=np.int8) * 300
    with pytest.raises(TypeError, match="to_npy"):
        x.to_npy("never-written.npy")
    with pytest.raises(TypeError, match="out= is not supported"):
        np.add(x, x, out=np.empty((4, 5)))
    with pytest.raises(np.exceptions.AxisError):
        x.sum(axis=2)
    with pytest.raises(np.exceptions.AxisError):
        x.transpose(0, 2)
    with pytest.raises(ValueError, match="repeat an axis"):
        x.transpose(0, 0)
    with pytest.raises(ValueError, match="2-D only"):
        SparseArray(x.collection, (4, 5, 1), x.chunks, x.dtype)


# -- properties over random shapes and blocks ----------------------------------------------


@st.composite
def sparse_case(draw, shape=None, dtype=None, max_side: int = 7):
    if shape is None:
        shape = (draw(st.integers(0, max_side)), draw(st.integers(0, max_side)))
    chunks = tuple(draw(axis_chunks(n)) for n in shape)
    dtype = dtype if dtype is not None else draw(st.sampled_from(DTYPES))
    fmt = draw(st.sampled_from(FORMATS))
    density = draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return sample(shape, density, dtype, fmt, seed), chunks


@SETTINGS
@given(data=st.data())
def test_matmul_properties(data):
    m, k, n = (data.draw(st.integers(0, 7)) for _ in range(3))
    ma, ca = data.draw(sparse_case((m, k)))
    mb, cb = data.draw(sparse_case((k, n)))
    a, b = ma.toarray(), mb.toarray()
    dtype = np.result_type(a, b)
    x, y = tg.from_scipy(ma, chunks=ca), tg.from_scipy(mb, chunks=cb)
    da = tg.from_numpy(a, chunks=tuple(data.draw(uneven_chunks(s)) for s in (m, k)))
    db = tg.from_numpy(b, chunks=tuple(data.draw(uneven_chunks(s)) for s in (k, n)))
    want = (a @ b).astype(dtype)
    check_dense(x @ db, want)
    check_dense(da @ y, want)
    check_dense(x @ b, want)
    check_sparse(x @ y, want, fmt=x.format)


@SETTINGS
@given(case=sparse_case(), other=st.data())
def test_sum_transpose_elementwise_properties(case, other):
    m, chunks = case
    a = m.toarray()
    x = tg.from_scipy(m, chunks=chunks)
    m2, chunks2 = other.draw(sparse_case(m.shape, a.dtype))
    b = m2.toarray()
    y = tg.from_scipy(m2, chunks=chunks2)
    for axis in (None, 0, 1):
        check_dense(x.sum(axis=axis), a.sum(axis=axis))
    check_sparse(x.T, a.T, exact=True)
    check_sparse(x + y, a + b, exact=True)
    check_sparse(x - y.T.T, a - b, exact=True)
    check_sparse(x * y, a * b, exact=True)
    check_sparse(x * 3 / 2, a * 3 / 2, exact=True)
    check_dense(x + b, a + b, exact=True)
    check_sparse(x * b, a * b, exact=True)


def _boom_block(coord, shape):
    if coord == (1, 1):
        raise RuntimeError("block failed")
    return sps.csr_array(shape)


def test_failing_block_task_names_the_error():
    chunks = ((2, 2), (2, 2))
    blocks = source(unique_name("boom"), (2, 2),
                    lambda c: (_boom_block, (c, block_shape(chunks, c))), kind="load")
    x = SparseArray(blocks, (4, 4), chunks, np.float64)
    with pytest.raises(RuntimeError, match="block failed"):
        (x + x).compute()


def test_top_level_functions_use_the_sparse_methods_or_reject_sparse_input():
    m = sps.random_array((30, 20), density=0.2, rng=0, format="csr")
    x = tg.from_scipy(m, chunks=7)
    dense = m.toarray()
    np.testing.assert_allclose(tg.sum(x, axis=0).compute(), dense.sum(axis=0))
    np.testing.assert_allclose(tg.mean(x).compute(), dense.mean())
    np.testing.assert_allclose(tg.max(x, axis=1).compute(), dense.max(axis=1))
    np.testing.assert_allclose(tg.transpose(x).compute().toarray(), dense.T)
    np.testing.assert_allclose(tg.transpose(x, (1, 0)).compute().toarray(), dense.T)
    np.testing.assert_allclose(tg.swapaxes(x, 0, 1).compute().toarray(), dense.T)
    for call in (lambda: tg.concatenate([x, x]), lambda: tg.stack([x, x]),
                 lambda: tg.where(x, 1.0, 0.0)):
        with pytest.raises(TypeError, match="sparse arrays are not supported here"):
            call()
    with pytest.raises(TypeError, match="reshape"):
        tg.reshape(x, (600,))
