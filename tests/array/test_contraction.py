"""Contractions (matmul, @, dot, tensordot, einsum, outer, semiring products) against NumPy,
over uneven per-axis block sizes that differ between the operands along the contracted axes,
plus the structure of their plans, their memory behaviour and their build-time errors."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import floyd_warshall

import tilegraph as tg
import tilegraph.util
from tilegraph.algebra import Semiring, lower, source
from tilegraph.array.core import Array
from tilegraph.array.lowering import plan_arrays
from tilegraph.runtime.events import Release, TaskEnd

SETTINGS = settings(max_examples=40, deadline=None, database=None)
FEW = settings(max_examples=15, deadline=None, database=None)

DTYPES = [np.float32, np.float64, np.int64, np.complex128, np.bool_]
# (dtype of the first operand, dtype of the second): equal ones and mixed ones
DTYPE_PAIRS = [(d, d) for d in DTYPES] + [
    (np.int64, np.float64), (np.float32, np.float64), (np.bool_, np.int64),
    (np.int64, np.complex128), (np.float32, np.int64),
]


# -- strategies and helpers ----------------------------------------------------------------


@st.composite
def block_sizes(draw, n: int, empty_blocks: bool = False) -> tuple[int, ...]:
    """Explicit block sizes of an axis of length ``n``: uneven, adding up to n; positive
    unless ``empty_blocks``, which sometimes puts in a block of length 0."""
    if n == 0:
        return (0,)
    cuts = draw(st.sets(st.integers(1, n - 1), max_size=n - 1)) if n > 1 else set()
    edges = [0, *sorted(cuts), n]
    sizes = [b - a for a, b in pairwise(edges)]
    if empty_blocks and draw(st.integers(0, 4)) == 0:
        sizes.insert(draw(st.integers(0, len(sizes))), 0)
    return tuple(sizes)


def differ(sizes: tuple[int, ...], other: tuple[int, ...]) -> tuple[int, ...]:
    """``sizes``, changed if needed so that it differs from ``other`` (when the axis allows)."""
    n = sum(sizes)
    if sizes != other or n < 2:
        return sizes
    return (n,) if other != (n,) else (1, n - 1)


@st.composite
def chunks_for(draw, shape: tuple[int, ...], empty_blocks: bool = False
               ) -> tuple[tuple[int, ...], ...]:
    return tuple(draw(block_sizes(n, empty_blocks)) for n in shape)


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(-4, 5, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def tolerance(dtype) -> dict:
    dtype = np.dtype(dtype)
    if dtype in (np.float32, np.complex64):
        return {"rtol": 1e-4, "atol": 1e-4}
    return {"rtol": 1e-10, "atol": 1e-10}


def check(result, expected, **options) -> np.ndarray:
    """``result`` (an Array) computes to ``expected``: same shape, dtype and values. The shape
    and dtype are checked before and after computing."""
    expected = np.asarray(expected)
    assert isinstance(result, Array), type(result)
    assert result.shape == expected.shape
    assert result.dtype == expected.dtype
    options.setdefault("backend", "sync")
    got = np.asarray(result.compute(**options))
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, **tolerance(expected.dtype))
    return got


def blocked(x: np.ndarray, chunks) -> Array:
    arr = tg.from_numpy(x, chunks=chunks)
    assert arr.chunks == tuple(tuple(c) for c in chunks)
    return arr


def computed(x: np.ndarray, chunks) -> Array:
    """An Array over ``x`` whose blocks are computed (copies), not views of ``x``: a matmul
    of such operands is always the group-by-join."""
    return blocked(x, chunks).map_blocks(np.copy)


# -- 2-D matmul in all spellings -------------------------------------------------------------

SPELLINGS = {
    "@": lambda a, b: a @ b,
    "matmul": tg.matmul,
    "np.matmul": np.matmul,
    "dot": tg.dot,
    "method dot": lambda a, b: a.dot(b),
    "tensordot": lambda a, b: tg.tensordot(a, b, axes=1),
    "einsum": lambda a, b: tg.einsum("ij,jk->ik", a, b),
    "einsum implicit": lambda a, b: tg.einsum("ij,jk", a, b),
}


@st.composite
def matmul_case(draw, max_side: int = 6):
    m, k, n = (draw(st.integers(0, max_side)) for _ in range(3))
    dta, dtb = draw(st.sampled_from(DTYPE_PAIRS))
    ca = draw(chunks_for((m, k), empty_blocks=True))
    cb = (differ(draw(block_sizes(k, True)), ca[1]), draw(block_sizes(n, True)))
    seed = draw(st.integers(0, 2**32 - 1))
    return (m, k, n), (dta, dtb), ca, cb, seed


@SETTINGS
@given(case=matmul_case(), spelling=st.sampled_from(sorted(SPELLINGS)))
def test_matmul_2d_against_numpy(case, spelling):
    (m, k, n), (dta, dtb), ca, cb, seed = case
    rng = np.random.default_rng(seed)
    x, y = random_array(rng, (m, k), dta), random_array(rng, (k, n), dtb)
    a, b = blocked(x, ca), blocked(y, cb)
    if k >= 2:
        assert a.chunks[1] != b.chunks[0]  # the contracted blocks must be aligned internally
    check(SPELLINGS[spelling](a, b), x @ y)


def test_numpy_left_operand_dispatches_to_tilegraph():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    out = x @ blocked(y, ((2, 3), (1, 2)))
    check(out, x @ y)


@SETTINGS
@given(
    m=st.integers(1, 5), k=st.integers(1, 5), dtype=st.sampled_from(DTYPES),
    data=st.data(),
)
def test_matmul_with_1d_operands(m, k, dtype, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = random_array(rng, (m, k), dtype)
    v, w = random_array(rng, (k,), dtype), random_array(rng, (m,), dtype)
    ck = data.draw(block_sizes(k))
    a = blocked(x, (data.draw(block_sizes(m)), ck))
    tv = blocked(v, (differ(data.draw(block_sizes(k)), ck),))
    tw = blocked(w, (data.draw(block_sizes(m)),))
    check(a @ tv, x @ v)
    check(tw @ a, w @ x)
    check(tv @ tv, v @ v)
    check(tg.dot(tv, tv), np.dot(v, v))
    check(tg.dot(a, tv), np.dot(x, v))


@st.composite
def batch_matmul_case(draw):
    nda, ndb = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    m, k, n = draw(st.integers(1, 3)), draw(st.integers(0, 4)), draw(st.integers(1, 3))
    nbatch = max(nda - 2, ndb - 2, 0)
    full = [draw(st.integers(1, 3)) for _ in range(nbatch)]

    def batch(nd):
        dims = full[len(full) - max(nd - 2, 0):]
        return tuple(1 if draw(st.booleans()) else d for d in dims)

    sa = (*batch(nda), m, k) if nda >= 2 else (k,)
    sb = (*batch(ndb), k, n) if ndb >= 2 else (k,)
    ca = draw(chunks_for(sa))
    cb = list(draw(chunks_for(sb)))
    cb[-2 if ndb >= 2 else 0] = differ(cb[-2 if ndb >= 2 else 0], ca[-1])
    dta, dtb = draw(st.sampled_from(DTYPE_PAIRS))
    return sa, sb, ca, tuple(cb), (dta, dtb), draw(st.integers(0, 2**32 - 1))


@SETTINGS
@given(case=batch_matmul_case(), spelling=st.sampled_from(["@", "matmul", "np.matmul"]))
def test_batch_matmul_broadcasts_like_numpy(case, spelling):
    sa, sb, ca, cb, (dta, dtb), seed = case
    rng = np.random.default_rng(seed)
    x, y = random_array(rng, sa, dta), random_array(rng, sb, dtb)
    check(SPELLINGS[spelling](blocked(x, ca), blocked(y, cb)), np.matmul(x, y))


def test_batch_matmul_with_broadcast_batch_axes():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 1, 3, 4)), rng.standard_normal((5, 4, 2))
    a = blocked(x, ((1, 1), (1,), (2, 1), (1, 3)))
    b = blocked(y, ((2, 3), (3, 1), (1, 1)))
    check(a @ b, x @ y)
    assert (a @ b).shape == (2, 5, 3, 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_1d_at_batch_contracts_the_shared_axis(dtype):
    rng = np.random.default_rng(3)
    v, y = random_array(rng, (4,), dtype), random_array(rng, (5, 4, 2), dtype)
    check(blocked(v, ((3, 1),)) @ blocked(y, ((2, 3), (1, 3), (2,))), v @ y)
    check(blocked(y.transpose(0, 2, 1).copy(), ((5,), (1, 1), (2, 2))) @ blocked(v, ((1, 3),)),
          y.transpose(0, 2, 1) @ v)


@SETTINGS
@given(m=st.integers(0, 4), n=st.integers(0, 4), dtypes=st.sampled_from(DTYPE_PAIRS),
       data=st.data())
def test_zero_length_contracted_axis_gives_zeros(m, n, dtypes, data):
    x, y = np.zeros((m, 0), dtypes[0]), np.zeros((0, n), dtypes[1])
    a = blocked(x, (data.draw(block_sizes(m)), (0,)))
    b = blocked(y, ((0,), data.draw(block_sizes(n))))
    expected = x @ y
    for out in (a @ b, tg.dot(a, b), tg.einsum("ij,jk->ik", a, b), tg.tensordot(a, b, 1)):
        check(out, expected)


def test_zero_length_contracted_axis_batch_and_vectors():
    x, y = np.ones((2, 3, 0)), np.ones((2, 0, 4), dtype=np.int64)
    check(blocked(x, ((1, 1), (2, 1), (0,))) @ blocked(y, ((2,), (0,), (3, 1))), x @ y)
    v = np.ones(0)
    check(tg.from_numpy(v) @ tg.from_numpy(v), v @ v)
    check(tg.einsum("i,i->", tg.from_numpy(v), tg.from_numpy(v)), np.einsum("i,i->", v, v))


def test_matmul_of_zero_size_blocks_in_the_middle():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((3, 5)), rng.standard_normal((5, 2))
    a = tg.from_numpy(x, chunks=((1, 0, 2), (2, 0, 3)))
    b = tg.from_numpy(y, chunks=((0, 1, 4), (2, 0)))
    check(a @ b, x @ y)


# -- einsum ---------------------------------------------------------------------------------

EINSUMS = [
    "ij,jk->ik", "ij,jk", "ij,kj->ik", "ij,jk->ki", "ij,kj", "ji,jk->ik",
    "ii", "ii->i", "iij->j", "iij", "iji->j", "ij->", "ij->ji", "ba", "ij", "i->",
    "i,i->", "i,i", "i,j->ij", "i,j", "ij,j->i", "ij,k->i", "ij,k->ik", "ij,k",
    "ij,jk,kl->il", "ij,jk,kl", "i,i,i->", "ij,jk,k->i", "ij,k,jl->il",
    "bij,bjk->bik", "ijk,jil->kl", "ijk,jil", "ij,ij->ij", "ij,ij->", "ii,ij->j",
]


def _letters(subscripts: str) -> list[str]:
    return sorted(set(subscripts) - set(",->"))


@st.composite
def einsum_case(draw, subscripts: str):
    letters = _letters(subscripts)
    size = {c: draw(st.integers(0, 4) if draw(st.integers(0, 9)) == 0 else st.integers(1, 4))
            for c in letters}
    terms = subscripts.split("->")[0].split(",")
    shapes = [tuple(size[c] for c in t) for t in terms]
    chunks = [draw(chunks_for(s, empty_blocks=True)) for s in shapes]
    ndt = draw(st.integers(0, len(DTYPES)))
    if ndt == len(DTYPES):  # mixed
        dtypes = [draw(st.sampled_from(DTYPES)) for _ in terms]
    else:
        dtypes = [DTYPES[ndt]] * len(terms)
    return shapes, chunks, dtypes, draw(st.integers(0, 2**32 - 1))


@pytest.mark.parametrize("subscripts", EINSUMS)
@settings(max_examples=12, deadline=None, database=None)
@given(data=st.data())
def test_einsum_against_numpy(subscripts, data):
    shapes, chunks, dtypes, seed = data.draw(einsum_case(subscripts))
    rng = np.random.default_rng(seed)
    xs = [random_array(rng, s, d) for s, d in zip(shapes, dtypes, strict=True)]
    check(tg.einsum(subscripts, *[blocked(x, c) for x, c in zip(xs, chunks, strict=True)]),
          np.einsum(subscripts, *xs))


def test_einsum_contracted_blocks_differ_between_operands():
    rng = np.random.default_rng(5)
    x, y, z = (rng.standard_normal(s) for s in ((5, 7), (7, 6), (6, 3)))
    a = blocked(x, ((2, 3), (1, 2, 4)))
    b = blocked(y, ((4, 3), (5, 1)))
    c = blocked(z, ((1, 1, 4), (3,)))
    check(tg.einsum("ij,jk,kl->il", a, b, c), x @ y @ z)
    check(tg.einsum("ij,jk,kl->li", a, b, c), (x @ y @ z).T)


def test_einsum_repeated_index_with_different_blocks_per_axis():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 5, 3))
    a = blocked(x, ((1, 4), (3, 2), (2, 1)))
    check(tg.einsum("ii", a[:, :, 0]), np.einsum("ii", x[:, :, 0]))
    check(tg.einsum("ii->i", a[:, :, 1]), np.einsum("ii->i", x[:, :, 1]))
    check(tg.einsum("iij->j", a), np.einsum("iij->j", x))
    check(tg.einsum("iij->ij", a), np.einsum("iij->ij", x))


ELLIPSIS = ["...ij,...jk->...ik", "...ij,...jk", "...i,...i->...", "...ij->...ji",
            "...ii->...i", "i...,i...->...", "...ij,jk->...ik", "ij...,jk...->ik..."]


@pytest.mark.parametrize("subscripts", ELLIPSIS)
@settings(max_examples=12, deadline=None, database=None)
@given(data=st.data())
def test_einsum_ellipsis_broadcasts_like_numpy(subscripts, data):
    terms = subscripts.split("->")[0].split(",")
    letters = _letters(subscripts.replace("...", ""))
    size = {c: data.draw(st.integers(1, 3)) for c in letters}
    nbatch = data.draw(st.integers(0, 2))
    full = [data.draw(st.integers(1, 3)) for _ in range(nbatch)]
    shapes = []
    for t in terms:
        nd = data.draw(st.integers(0, nbatch)) if "..." in t else 0
        batch = tuple(1 if data.draw(st.booleans()) else d for d in full[nbatch - nd:])
        before, _, after = t.partition("...")
        shapes.append((*[size[c] for c in before], *batch, *[size[c] for c in after]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dtype = data.draw(st.sampled_from(DTYPES))
    xs = [random_array(rng, s, dtype) for s in shapes]
    arrs = [blocked(x, data.draw(chunks_for(x.shape))) for x in xs]
    check(tg.einsum(subscripts, *arrs), np.einsum(subscripts, *xs))


def test_einsum_dtype_argument():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 5, (3, 4))
    a = blocked(x, ((1, 2), (3, 1)))
    y = x.astype(np.float32)
    check(tg.einsum("ij,jk->ik", a, a.T, dtype=np.float32), np.einsum("ij,jk->ik", y, y.T))
    check(tg.einsum("ij,jk->ik", a, a.T, dtype=np.complex128),
          np.einsum("ij,jk->ik", x, x.T).astype(np.complex128))


def test_einsum_with_numpy_and_scalar_operands():
    x = np.arange(6.0).reshape(2, 3)
    check(tg.einsum("ij,->ij", x, 2.0), np.einsum("ij,->ij", x, 2.0))
    check(tg.einsum("ij,j->i", tg.from_numpy(x, chunks=1), np.ones(3)), x @ np.ones(3))


# -- tensordot, dot, outer -------------------------------------------------------------------

TENSORDOT = [
    ((3, 4, 2), (4, 2, 5), 2),
    ((3, 4, 2), (2, 5), 1),
    ((3, 4), (2, 5), 0),
    ((3, 4, 2), (4, 3, 5), ([1, 0], [0, 1])),
    ((3, 4, 2), (5, 3), ([0], [1])),
    ((3, 4, 2), (2, 4), ([-1, -2], [0, 1])),
    ((3, 4, 2), (4, 2, 3), ([0, 1, 2], [2, 0, 1])),
    ((2, 3), (3, 2), (1, 0)),
    ((0, 3), (3, 2), 1),
    ((3, 0), (0, 2), 1),
]


@pytest.mark.parametrize(("sa", "sb", "axes"), TENSORDOT)
@settings(max_examples=10, deadline=None, database=None)
@given(data=st.data())
def test_tensordot_against_numpy(sa, sb, axes, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dta, dtb = data.draw(st.sampled_from(DTYPE_PAIRS))
    x, y = random_array(rng, sa, dta), random_array(rng, sb, dtb)
    a = blocked(x, data.draw(chunks_for(sa)))
    b = blocked(y, data.draw(chunks_for(sb)))
    check(tg.tensordot(a, b, axes=axes), np.tensordot(x, y, axes=axes))


@pytest.mark.parametrize(("sa", "sb"), [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
    ((2, 3, 4), (5, 4, 2)), ((2, 3), (4, 3, 2)), ((), (2, 3)), ((2, 3), ()),
])
def test_dot_against_numpy(sa, sb):
    rng = np.random.default_rng(8)
    for dta, dtb in DTYPE_PAIRS:
        x, y = random_array(rng, sa, dta), random_array(rng, sb, dtb)
        a = tg.from_numpy(x, chunks=tuple((1, n - 1) if n > 1 else (n,) for n in sa))
        b = tg.from_numpy(y, chunks=tuple((n - 1, 1) if n > 1 else (n,) for n in sb))
        check(tg.dot(a, b), np.dot(x, y))


@FEW
@given(sa=st.lists(st.integers(0, 3), max_size=2).map(tuple),
       sb=st.lists(st.integers(0, 3), max_size=2).map(tuple),
       dtypes=st.sampled_from(DTYPE_PAIRS), data=st.data())
def test_outer_against_numpy(sa, sb, dtypes, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, y = random_array(rng, sa, dtypes[0]), random_array(rng, sb, dtypes[1])
    a = blocked(x, data.draw(chunks_for(sa)))
    b = blocked(y, data.draw(chunks_for(sb)))
    check(tg.outer(a, b), np.outer(x, y))


# -- semirings -------------------------------------------------------------------------------


def semiring_reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if name == "plus_times":
        return x @ y
    if name == "min_plus":
        return (x[:, :, None] + y[None, :, :]).min(axis=1)
    if name == "max_plus":
        return (x[:, :, None] + y[None, :, :]).max(axis=1)
    if name == "max_times":
        return (x[:, :, None] * y[None, :, :]).max(axis=1)
    if name == "or_and":
        return (x[:, :, None] & y[None, :, :]).any(axis=1)
    raise AssertionError(name)


SEMIRING_DTYPES = {
    "plus_times": [np.float64, np.float32, np.int64],
    "min_plus": [np.float64, np.float32, np.int64],
    "max_plus": [np.float64, np.float32, np.int64],
    "max_times": [np.float64, np.int64],
    "or_and": [np.bool_],
}


@pytest.mark.parametrize("name", sorted(SEMIRING_DTYPES))
@settings(max_examples=20, deadline=None, database=None)
@given(data=st.data())
def test_semiring_matmul_against_reference(name, data):
    m, k, n = (data.draw(st.integers(lo, hi)) for lo, hi in ((0, 5), (1, 7), (0, 5)))
    ca = data.draw(chunks_for((m, k)))
    cb = (differ(data.draw(block_sizes(k)), ca[1]), data.draw(block_sizes(n)))
    dtype = data.draw(st.sampled_from(SEMIRING_DTYPES[name]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, y = random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)
    if dtype == np.float64 and name in ("min_plus", "max_plus"):
        x[rng.random(x.shape) < 0.3] = np.inf if name == "min_plus" else -np.inf
    check(tg.semiring_matmul(blocked(x, ca), blocked(y, cb), name),
          semiring_reference(name, x, y))


@pytest.mark.parametrize("seed", range(3))
def test_all_pairs_shortest_paths_with_min_plus(seed):
    rng = np.random.default_rng(seed)
    n = 11
    w = rng.uniform(1.0, 10.0, (n, n))
    w[rng.random((n, n)) < 0.6] = np.inf
    np.fill_diagonal(w, 0.0)
    d = blocked(w, ((3, 1, 5, 2), (4, 4, 3)))
    other = blocked(w, ((2, 2, 7), (1, 10)))
    one_step = tg.semiring_matmul(d, other, "min_plus")
    got = check(one_step, (w[:, :, None] + w[None, :, :]).min(axis=1))
    assert np.isinf(got).any() and np.isfinite(got).any()
    # repeated squaring converges to the shortest paths
    dist = d
    for _ in range(int(np.ceil(np.log2(n)))):
        dist = tg.semiring_matmul(dist, dist.rechunk(((4, 7), (2, 9))), "min_plus")
    np.testing.assert_allclose(dist.compute(backend="sync"), floyd_warshall(w, directed=True),
                               rtol=1e-12)


def test_semiring_result_dtype_follows_the_semiring():
    x = np.array([[2, 0, 1], [0, 3, 0]])
    y = np.array([[1, 0], [0, 0], [0, 5]])
    a, b = blocked(x, ((1, 1), (2, 1))), blocked(y, ((1, 2), (1, 1)))
    check(tg.semiring_matmul(a, b, "or_and"), (x[:, :, None].astype(bool)
                                                & y[None].astype(bool)).any(axis=1))
    single = tg.semiring_matmul(tg.from_numpy(x), tg.from_numpy(y), "or_and")
    assert single.dtype == np.bool_
    assert single.compute(backend="sync").dtype == np.bool_


def test_semiring_mixed_dtypes_promote():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 5, (3, 4))
    y = rng.random((4, 2)).astype(np.float32)
    check(tg.semiring_matmul(blocked(x, ((2, 1), (1, 3))), blocked(y, ((2, 2), (2,))),
                             "min_plus"),
          (x[:, :, None] + y[None]).min(axis=1))


@pytest.mark.parametrize(("name", "zero"), [("min_plus", np.inf), ("max_plus", -np.inf),
                                            ("max_times", 0.0), ("or_and", False),
                                            ("plus_times", 0.0)])
def test_semiring_empty_contraction_gives_the_semiring_zero(name, zero):
    dtype = np.bool_ if name == "or_and" else np.float64
    a = tg.from_numpy(np.ones((2, 0), dtype), chunks=((1, 1), (0,)))
    b = tg.from_numpy(np.ones((0, 3), dtype), chunks=((0,), (2, 1)))
    check(tg.semiring_matmul(a, b, name), np.full((2, 3), zero, dtype))


def test_semiring_empty_contraction_with_unrepresentable_zero_fails_at_build():
    a = tg.from_numpy(np.ones((2, 0), np.int64))
    b = tg.from_numpy(np.ones((0, 3), np.int64))
    with pytest.raises(ValueError, match=r"min_plus.*\(2, 0\).*\(0, 3\)"):
        tg.semiring_matmul(a, b, "min_plus")


def test_custom_semiring_from_ufuncs():
    rng = np.random.default_rng(10)
    x, y = rng.random((7, 9)), rng.random((9, 5))
    a, b = blocked(x, ((3, 4), (2, 2, 5))), blocked(y, ((5, 4), (1, 4)))
    bottleneck = Semiring.from_ufuncs("max_min", np.maximum, np.minimum, -np.inf)
    check(tg.semiring_matmul(a, b, bottleneck),
          np.minimum(x[:, :, None], y[None]).max(axis=1))
    plus_times = Semiring.from_ufuncs("plus_times_ufuncs", np.add, np.multiply, 0.0)
    check(tg.semiring_matmul(a, b, plus_times), x @ y)


def test_custom_semirings_with_one_name_are_not_confused():
    """Two different semirings that share a name, computed together, give their own
    results (the plan must not merge them as one common subexpression)."""
    rng = np.random.default_rng(11)
    x, y = rng.random((4, 5)), rng.random((5, 3))
    a, b = blocked(x, ((2, 2), (3, 2))), blocked(y, ((1, 4), (3,)))
    s1 = Semiring.from_ufuncs("custom", np.maximum, np.minimum, -np.inf)
    s2 = Semiring.from_ufuncs("custom", np.minimum, np.maximum, np.inf)
    r1, r2 = tg.compute(tg.semiring_matmul(a, b, s1), tg.semiring_matmul(a, b, s2),
                        backend="sync")
    np.testing.assert_array_equal(r1, np.minimum(x[:, :, None], y[None]).max(axis=1))
    np.testing.assert_array_equal(r2, np.maximum(x[:, :, None], y[None]).min(axis=1))


# -- results are the same on every backend ---------------------------------------------------


def test_contractions_on_every_backend(backend_options):
    rng = np.random.default_rng(12)
    x, y = rng.standard_normal((9, 10)), rng.standard_normal((10, 7))
    a = blocked(x, ((2, 3, 4), (1, 4, 5)))
    b = blocked(y, ((5, 5), (3, 1, 3)))
    check(a @ b, x @ y, **backend_options)
    check(tg.einsum("ij,jk->ki", a, b), (x @ y).T, **backend_options)
    check(tg.einsum("ii->i", a[:, :9]), np.diagonal(x[:, :9]), **backend_options)
    check(tg.tensordot(a, b, axes=1), x @ y, **backend_options)
    w = np.where(rng.random((9, 9)) < 0.4, np.inf, rng.random((9, 9)))
    check(tg.semiring_matmul(blocked(w, ((4, 5), (2, 7))), blocked(w, ((3, 6), (9,))),
                             "min_plus"),
          (w[:, :, None] + w[None]).min(axis=1), **backend_options)
    # one output block with many inner blocks: several accumulation chains
    v = rng.standard_normal((3, 40))
    check(blocked(v, ((3,), (2,) * 20)) @ blocked(v.T, ((4,) * 10, (3,))), v @ v.T,
          **backend_options)


# -- plan structure, without running ---------------------------------------------------------


def _kinds(graph) -> Counter:
    return Counter(graph.meta["kind"])


def _matmul_3x3x4():
    # contracted blocks differ: (2, 2, 4) and (4, 2, 2) refine to four blocks of 2
    a = computed(np.ones((6, 8)), ((2, 2, 2), (2, 2, 4)))
    b = computed(np.ones((8, 6)), ((4, 2, 2), (2, 2, 2)))
    return a @ b


def test_matmul_plan_is_a_group_by_join_with_one_chain(forbid_compute, monkeypatch):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 1)
    c = _matmul_3x3x4()
    assert c.numblocks == (3, 3)
    graph = lower([c.collection]).build()
    kinds = _kinds(graph)
    assert kinds["product"] == 9
    assert kinds["accumulate"] == 27
    assert kinds["reduce"] == 0
    kind = dict(zip(graph.keys, graph.meta["kind"], strict=True))
    outputs = set(c.collection.keys.ravel().tolist())
    for key in graph.keys:
        if kind[key] == "accumulate":
            deps = graph.dependencies(key)
            assert len(deps) == 3
            assert kind[deps[0]] in ("product", "accumulate")
        if kind[key] in ("product", "accumulate") and key not in outputs:
            # a partial result is consumed once, by the next step of its chain
            (consumer,) = graph.dependents(key)
            assert kind[consumer] == "accumulate"
    for coord in np.ndindex(3, 3):
        assert kind[c.collection.key(coord)] == "accumulate"
    with pytest.raises(AssertionError, match="run of"):
        c.compute()


def test_matmul_plan_with_two_chains(forbid_compute, monkeypatch):
    # 9 outputs on 18 cores: two chains per output, combined by one reduce
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 18)
    c = _matmul_3x3x4()
    graph = lower([c.collection]).build()
    kinds = _kinds(graph)
    assert kinds["product"] == 18
    assert kinds["accumulate"] == 18
    assert kinds["reduce"] == 9
    kind = dict(zip(graph.keys, graph.meta["kind"], strict=True))
    for coord in np.ndindex(3, 3):
        out = c.collection.key(coord)
        assert kind[out] == "reduce"
        ends = graph.dependencies(out)
        assert len(ends) == 2
        for end in ends:
            assert kind[end] == "accumulate"
            (start, *_) = graph.dependencies(end)
            assert kind[start] == "product"
            assert graph.dependents(start) == [end]


def test_matmul_plan_never_materialises_all_products(forbid_compute, monkeypatch):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 1)
    a = computed(np.ones((8, 8)), ((2,) * 4,) * 2)
    c = a @ a
    graph = lower([c.collection]).build()
    kinds = _kinds(graph)
    # N^3 = 64 block products, but only one of them per output starts a chain
    assert kinds["product"] == 16
    assert kinds["product"] + kinds["accumulate"] == 64


def _boom(*args):
    raise AssertionError("a block was computed while planning")


def exploding(shape, chunks) -> Array:
    """An array whose every block raises when computed."""
    blocks = source(tg.array.core.unique_name("exploding"), tuple(len(c) for c in chunks),
                    lambda coord: (_boom, ()))
    return Array(blocks, shape, chunks, np.float64)


def assert_plans_without_running(results) -> None:
    plan = plan_arrays(results)
    assert len(plan.graph) > 0
    assert len(lower([r.collection for r in results]).build()) > 0
    with pytest.raises(AssertionError, match="run of"):  # the forbidden backend is on
        tg.compute(*results)


def test_planning_reads_no_block_data(forbid_compute):
    x = exploding((5, 7), ((2, 3), (2, 2, 3)))
    y = tg.from_numpy(np.ones((7, 4)), chunks=((3, 4), (1, 3)))
    sq = exploding((5, 5), ((1, 4), (3, 2)))
    b3 = exploding((2, 5, 7), ((1, 1), (2, 3), (4, 3)))
    c3 = exploding((2, 7, 3), ((2,), (7,), (1, 2)))
    assert_plans_without_running([
        x @ y, tg.einsum("ij,jk->ki", x, y), tg.semiring_matmul(x, y, "min_plus"),
        tg.tensordot(x, y, 1), tg.einsum("ij,ij->j", x, x), tg.einsum("ii->i", sq),
        tg.einsum("ii", sq), tg.einsum("ij,jk,kl->il", x, y, y.T), b3 @ c3,
        tg.dot(b3, y), tg.einsum("ij,k->ik", x, tg.ones(3, chunks=2)), tg.outer(y, x),
    ])


def test_planning_contractions_that_slice_reads_no_block_data(forbid_compute):
    # 1-D operands are promoted with a[None, :] and the result taken with out[0]; einsum
    # drops broadcast axes of length 1 with op[0]
    v = exploding((7,), ((3, 4),))
    x = exploding((5, 7), ((2, 3), (2, 2, 3)))
    b1 = exploding((1, 5, 7), ((1,), (5,), (3, 4)))
    c3 = exploding((2, 7, 3), ((1, 1), (7,), (1, 2)))
    assert_plans_without_running([v @ x.T, x @ v, v @ v, b1 @ c3])


# -- memory: partial products are reduced as they are made ----------------------------------


@pytest.mark.parametrize("ncores", [1, 2, 4])
def test_matmul_holds_few_partial_results(ncores, monkeypatch, backend_options):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: ncores)
    rng = np.random.default_rng(13)
    x, y = rng.standard_normal((4, 60)), rng.standard_normal((60, 3))
    a = computed(x, ((4,), (3,) * 20))
    b = computed(y, ((3,) * 20, (3,)))
    c = a @ b
    assert c.numblocks == (1, 1)
    prefix = c.name  # partial results: (name + "-acc", ...) and the output (name, 0, 0)
    live, peak, made = 0, 0, 0

    def is_partial(key) -> bool:
        return isinstance(key, tuple) and isinstance(key[0], str) and key[0].startswith(prefix)

    def watch(event):
        nonlocal live, peak, made
        if isinstance(event, TaskEnd) and is_partial(event.key):
            live += 1
            made += 1
            peak = max(peak, live)
        elif isinstance(event, Release) and is_partial(event.key):
            live -= 1

    check(c, x @ y, callbacks=[watch], **backend_options)
    nchains = min(20, ncores)
    assert made >= 20  # the partial results were seen
    assert peak <= nchains + 1
    assert peak <= 5


# -- bad input fails at build time, naming the shapes ----------------------------------------


ERRORS = [
    (lambda: tg.ones((3, 4)) @ tg.ones((5, 2)), r"matmul.*\(3, 4\).*\(5, 2\)"),
    (lambda: tg.matmul(tg.ones((2, 3, 4)), tg.ones((2, 5, 2))),
     r"matmul.*\(2, 3, 4\).*\(2, 5, 2\)"),
    (lambda: tg.matmul(tg.ones((2, 3, 4)), tg.ones((3, 4, 2))),
     r"matmul.*\(2, 3, 4\).*\(3, 4, 2\)"),
    (lambda: tg.matmul(tg.ones((3, 4)), tg.ones(5)), r"matmul.*\(3, 4\).*\(5,\)"),
    (lambda: tg.matmul(tg.ones(5), tg.ones((2, 4, 3))), r"matmul.*\(5,\).*\(2, 4, 3\)"),
    (lambda: tg.matmul(tg.ones((2, 4, 3)), tg.ones(5)), r"matmul.*\(2, 4, 3\).*\(5,\)"),
    (lambda: tg.matmul(tg.ones(3), tg.ones(4)), r"matmul.*\(3,\).*\(4,\)"),
    (lambda: tg.matmul(tg.ones(()), tg.ones((2, 2))), r"matmul.*0-d.*\(\).*\(2, 2\)"),
    (lambda: tg.ones((2, 2)) @ tg.from_numpy(np.float64(2.0)), r"matmul.*0-d.*\(2, 2\).*\(\)"),
    (lambda: tg.einsum("ij,jk->ik", tg.ones((2, 3))), r"einsum.*2 operand.*1 operand"),
    (lambda: tg.einsum("ij->i", tg.ones((2, 3)), tg.ones(3)), r"einsum.*1 operand.*2 operand"),
    (lambda: tg.einsum("ijk->i", tg.ones((2, 3))), r"einsum.*'ijk'.*\(2, 3\)"),
    (lambda: tg.einsum("i,j->ij", tg.ones((2, 3)), tg.ones(3)), r"einsum.*'i'.*\(2, 3\)"),
    (lambda: tg.einsum("ij,jk->ik", tg.ones((2, 3)), tg.ones((4, 2))),
     r"einsum.*'j'.*3.*4.*\(2, 3\).*\(4, 2\)"),
    (lambda: tg.einsum("ii->i", tg.ones((2, 3))), r"einsum.*'i'.*2.*3.*\(2, 3\)"),
    (lambda: tg.einsum("...i->i", tg.ones((2, 3))), r"einsum.*\.\.\..*\(2, 3\)"),
    (lambda: tg.einsum("ij->k", tg.ones((2, 3))), r"einsum.*'k'"),
    (lambda: tg.einsum("ij->ii", tg.ones((2, 3))), r"einsum.*'ii'.*repeat"),
    (lambda: tg.einsum("ij->i->j", tg.ones((2, 3))), r"einsum.*'ij->i->j'.*more than one"),
    (lambda: tg.einsum("ij", tg.ones((2, 3)), tg.ones(2)), r"einsum.*1 operand.*2 operand"),
    (lambda: tg.semiring_matmul(tg.ones((2, 2)), tg.ones((2, 2)), "min_times"),
     r"unknown semiring 'min_times'.*min_plus"),
    (lambda: tg.semiring_matmul(tg.ones((2, 3)), tg.ones((4, 2)), "min_plus"),
     r"\(2, 3\).*\(4, 2\)"),
    (lambda: tg.semiring_matmul(tg.ones(3), tg.ones((3, 2)), "min_plus"),
     r"semiring_matmul.*\(3,\).*\(3, 2\)"),
    (lambda: tg.tensordot(tg.ones((2, 3)), tg.ones((4, 2)), axes=([1], [0])),
     r"tensordot.*\(2, 3\).*\(4, 2\)"),
    (lambda: tg.tensordot(tg.ones((2, 3)), tg.ones((3, 2)), axes=([1, 0], [0])),
     r"tensordot.*\(2, 3\).*\(3, 2\)"),
    (lambda: tg.tensordot(tg.ones((2, 3)), tg.ones((3, 2)), axes=3),
     r"tensordot.*\(2, 3\).*\(3, 2\)"),
    (lambda: tg.tensordot(tg.ones((2, 3)), tg.ones((3, 2)), axes=([2], [0])),
     r"tensordot.*\(2, 3\).*\(3, 2\)"),
    (lambda: tg.tensordot(tg.ones((2, 2)), tg.ones((2, 2)), axes=([0, 0], [0, 1])),
     r"tensordot.*repeat.*\(2, 2\).*\(2, 2\)"),
]


@pytest.mark.parametrize(("build", "message"), ERRORS)
def test_bad_input_fails_at_build_time_naming_the_shapes(build, message, forbid_compute):
    with pytest.raises(ValueError, match=message):
        build()


# -- matmul of in-memory operands: one gemm per output tile over whole panels ------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape,chunks", [
    ((10, 7, 9), (3, 2, 4)),       # uneven last blocks on every axis
    ((64, 40, 48), (16, 10, 12)),  # tiles of several blocks
    ((5, 6, 3), (5, 2, 1)),        # one block row: tiles along the columns only
])
def test_panel_matmul_of_in_memory_operands_matches_numpy(dtype, shape, chunks, monkeypatch):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 2)
    m, k, n = shape
    rng = np.random.default_rng(5)
    x = rng.standard_normal((m, k)).astype(dtype)
    y = rng.standard_normal((k, n)).astype(dtype)
    if np.iscomplexobj(x):
        x = x + 1j * rng.standard_normal((m, k)).astype(dtype)
        y = y - 1j * rng.standard_normal((k, n)).astype(dtype)
    a, b = tg.from_numpy(x, chunks=(chunks[0], chunks[1])), tg.from_numpy(y, chunks=chunks[1:])
    c = a @ b
    kinds = _kinds(lower([c.collection]).build())
    assert "accumulate" not in kinds  # no chain over the inner blocks
    assert c.chunks == (a.chunks[0], b.chunks[1])
    check(c, x @ y)


def test_panel_matmul_groups_blocks_into_tiles(monkeypatch, forbid_compute):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 2)
    monkeypatch.setattr(tilegraph.array.product_plans, "PANEL_TILE", 8)
    x = np.ones((16, 16))
    a = tg.from_numpy(x, chunks=2)
    c = a @ a
    graph = lower([c.collection]).build()
    kinds = _kinds(graph)
    # 8 x 8 output blocks of 2, grouped 4 x 4 into tiles of 8: 2 x 2 tiles, one gemm each,
    # and every output block a view of its tile
    assert kinds["product"] == 4
    assert kinds["getitem"] == 64
    assert c.collection.ntasks == 4 + 64
    # a tile is never so large that a core is left without two of them
    monkeypatch.setattr(tilegraph.array.product_plans, "PANEL_TILE", 64)
    assert _kinds(lower([(a @ a).collection]).build())["product"] == 4


@pytest.mark.parametrize("case", ["integers", "mixed dtypes", "strided source", "one output block",
                                  "one inner block", "computed operand"])
def test_panel_matmul_is_only_taken_where_it_applies(case, monkeypatch):
    monkeypatch.setattr(tilegraph.util, "cores", lambda: 2)
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((12, 12)), rng.standard_normal((12, 12))
    ca = cb = 4
    if case == "integers":
        x, y = (x * 10).astype(np.int64), (y * 10).astype(np.int64)
    elif case == "mixed dtypes":
        y = y.astype(np.float32)
    elif case == "strided source":
        x = rng.standard_normal((24, 12))[::2]
    elif case == "one output block":
        ca, cb = (12, 4), (4, 12)
    elif case == "one inner block":
        ca, cb = (4, 12), (12, 4)
    a, b = tg.from_numpy(x, chunks=ca), tg.from_numpy(y, chunks=cb)
    if case == "computed operand":
        a = a + 0
    c = a @ b
    assert "accumulate" in _kinds(lower([c.collection]).build()) or case == "one inner block"
    check(c, x @ y)
