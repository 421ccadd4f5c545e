"""Semirings: the block kernels of a contraction (product, in-place accumulate, add)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegraph.algebra import (
    MAX_PLUS,
    MAX_TIMES,
    MIN_PLUS,
    OR_AND,
    PLUS_TIMES,
    SEMIRINGS,
    Semiring,
)
from tilegraph.algebra.semiring import _SLAB, gemm_accumulate, matmul_block

SETTINGS = settings(max_examples=30, deadline=None, database=None)

REFERENCE = {
    "plus_times": lambda x, y: x @ y,
    "min_plus": lambda x, y: (x[:, :, None] + y[None, :, :]).min(axis=1),
    "max_plus": lambda x, y: (x[:, :, None] + y[None, :, :]).max(axis=1),
    "max_times": lambda x, y: (x[:, :, None] * y[None, :, :]).max(axis=1),
    "or_and": lambda x, y: (x[:, :, None] & y[None, :, :]).any(axis=1),
}
ADD = {"plus_times": np.add, "min_plus": np.minimum, "max_plus": np.maximum,
       "max_times": np.maximum, "or_and": np.logical_or}


def operands(rng, name, shape_a, shape_b, dtype=np.float64):
    if name == "or_and":
        return rng.random(shape_a) < 0.3, rng.random(shape_b) < 0.3
    x = rng.standard_normal(shape_a).astype(dtype)
    y = rng.standard_normal(shape_b).astype(dtype)
    if name == "max_times":
        x, y = np.abs(x), np.abs(y)
    if name == "min_plus" and dtype == np.float64:
        x[rng.random(shape_a) < 0.3] = np.inf
    return x, y


def test_the_built_in_semirings():
    assert set(SEMIRINGS) == {"plus_times", "min_plus", "max_plus", "max_times", "or_and"}
    assert SEMIRINGS["min_plus"] is MIN_PLUS and SEMIRINGS["plus_times"] is PLUS_TIMES
    assert (MIN_PLUS.zero, MAX_PLUS.zero, MAX_TIMES.zero, OR_AND.zero) == (
        np.inf, -np.inf, 0, False)
    for name, s in SEMIRINGS.items():
        assert s.name == name
        assert s.add is ADD[name]
    with pytest.raises(dataclasses.FrozenInstanceError):
        MIN_PLUS.zero = 0


@pytest.mark.parametrize("name", sorted(SEMIRINGS))
def test_zero_is_the_identity_of_add(name):
    s = SEMIRINGS[name]
    x = np.array([True, False]) if name == "or_and" else np.array([-3.5, 0.0, 2.0, np.inf])
    if name == "max_times":
        x = np.array([0.0, 1.5, 7.0])
    np.testing.assert_array_equal(s.add(np.full_like(x, s.zero), x), x)


@pytest.mark.parametrize("name", sorted(SEMIRINGS))
@SETTINGS
@given(m=st.integers(0, 5), k=st.integers(1, 2 * _SLAB + 5), n=st.integers(0, 5),
       seed=st.integers(0, 2**32 - 1))
def test_product_and_accumulate_against_reference(name, m, k, n, seed):
    rng = np.random.default_rng(seed)
    s = SEMIRINGS[name]
    x, y = operands(rng, name, (m, k), (k, n))
    x2, y2 = operands(rng, name, (m, k), (k, n))
    expected = REFERENCE[name](x, y)
    prod = s.product(x, y)
    assert prod.shape == expected.shape and prod.dtype == expected.dtype
    np.testing.assert_allclose(prod, expected, rtol=1e-12)
    acc = prod.copy()
    out = s.accumulate(acc, x2, y2)
    np.testing.assert_allclose(out, ADD[name](expected, REFERENCE[name](x2, y2)), rtol=1e-12)
    assert out.dtype == expected.dtype
    if acc.size:
        assert out is acc  # in place: a chain holds one partial result


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_gemm_accumulate_is_in_place_with_blas(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6)).astype(dtype)
    b = rng.standard_normal((6, 3)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((4, 6)).astype(dtype)
        b = b - 2j * rng.standard_normal((6, 3)).astype(dtype)
    acc = rng.standard_normal((4, 3)).astype(dtype)
    expected = acc + a @ b
    out = gemm_accumulate(acc, a, b)
    assert out is acc
    assert out.dtype == np.dtype(dtype)
    tol = 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(acc, expected, rtol=tol, atol=tol)


def test_gemm_accumulate_with_strided_operands():
    rng = np.random.default_rng(2)
    big = rng.standard_normal((10, 10))
    a, b = big[::2, 1:8], big[2:9, ::3].copy(order="F")  # not contiguous / Fortran order
    acc = rng.standard_normal((5, 4))
    expected = acc + a @ b
    assert gemm_accumulate(acc, a, b) is acc
    np.testing.assert_allclose(acc, expected, rtol=1e-12)
    # a transposed view as the operand
    acc2 = np.zeros((7, 7))
    gemm_accumulate(acc2, big[:7, :7].T, big[:7, :7])
    np.testing.assert_allclose(acc2, big[:7, :7].T @ big[:7, :7], rtol=1e-12)


def test_gemm_accumulate_falls_back_without_blas():
    rng = np.random.default_rng(3)
    # integers: NumPy, still in place
    ai, bi = rng.integers(-5, 5, (3, 4)), rng.integers(-5, 5, (4, 2))
    acc = np.ones((3, 2), dtype=np.int64)
    assert gemm_accumulate(acc, ai, bi) is acc
    np.testing.assert_array_equal(acc, 1 + ai @ bi)
    # booleans: logical or of products
    ab, bb = rng.random((3, 4)) < 0.3, rng.random((4, 2)) < 0.3
    accb = np.zeros((3, 2), dtype=bool)
    np.testing.assert_array_equal(gemm_accumulate(accb, ab, bb), ab @ bb)
    # a Fortran-ordered accumulator: correct, in place
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    accf = np.asfortranarray(np.ones((3, 2)))
    assert gemm_accumulate(accf, a, b) is accf
    np.testing.assert_allclose(accf, 1 + a @ b, rtol=1e-12)
    # a read-only accumulator is not written to
    ro = np.ones((3, 2))
    ro.flags.writeable = False
    out = gemm_accumulate(ro, a, b)
    np.testing.assert_array_equal(ro, np.ones((3, 2)))
    np.testing.assert_allclose(out, 1 + a @ b, rtol=1e-12)
    # mixed operand dtypes
    acc64 = np.ones((3, 2))
    a32 = a.astype(np.float32)
    np.testing.assert_allclose(gemm_accumulate(acc64, a32, b), 1 + a32 @ b, rtol=1e-12)


@pytest.mark.parametrize(("m", "k", "n"), [(0, 3, 2), (2, 0, 3), (3, 2, 0), (1, 1, 1)])
def test_gemm_accumulate_empty_and_tiny(m, k, n):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    acc = np.full((m, n), 2.0)
    out = gemm_accumulate(acc, a, b)
    np.testing.assert_allclose(out, 2.0 + a @ b)
    np.testing.assert_allclose(matmul_block(a, b), a @ b)


def test_from_ufuncs_custom_semiring():
    rng = np.random.default_rng(5)
    x, y = rng.random((4, 2 * _SLAB + 3)), rng.random((2 * _SLAB + 3, 5))
    bottleneck = Semiring.from_ufuncs("max_min", np.maximum, np.minimum, -np.inf)
    assert bottleneck.name == "max_min" and bottleneck.add is np.maximum
    assert bottleneck.zero == -np.inf
    expected = np.minimum(x[:, :, None], y[None]).max(axis=1)
    np.testing.assert_array_equal(bottleneck.product(x, y), expected)
    acc = np.full((4, 5), 0.5)
    assert bottleneck.accumulate(acc, x, y) is acc
    np.testing.assert_array_equal(acc, np.maximum(0.5, expected))
    plus_times = Semiring.from_ufuncs("plus_times_slab", np.add, np.multiply, 0)
    np.testing.assert_allclose(plus_times.product(x, y), x @ y, rtol=1e-12)
    with pytest.raises(ValueError, match="empty inner index"):
        bottleneck.product(np.ones((2, 0)), np.ones((0, 3)))


def test_or_and_of_integers_is_boolean():
    x = np.array([[2, 0], [0, 0]])
    y = np.array([[0, 3], [1, 0]])
    prod = OR_AND.product(x, y)
    assert prod.dtype == np.bool_
    np.testing.assert_array_equal(prod, [[False, True], [False, False]])
