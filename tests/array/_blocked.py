"""Helpers shared by the array tests: values that show misplaced elements, per-block
checks against NumPy, and hypothesis strategies for uneven block sizes."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import tilegraph as tg
from tilegraph.algebra.demand import lower
from tilegraph.array.chunks import block_slices
from tilegraph.pipeline import run


def make(shape: tuple[int, ...], dtype: str = "float64") -> np.ndarray:
    """Distinct-ish values of ``dtype`` so that a misplaced element shows."""
    base = np.arange(1, math.prod(shape) + 1).reshape(shape)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return (base % 3 == 0).astype(dtype)
    if kind == "c":
        return (base - 0.5j * base).astype(dtype)
    if np.dtype(dtype).itemsize == 1:
        base = base % 100
    return base.astype(dtype)


def block_values(arr: tg.Array, **options) -> dict[tuple[int, ...], object]:
    """Every block of ``arr`` on its own (run without assembling the result), its graph
    lowered for a run of one process with ``options`` (the plan a run under a
    ``memory_limit`` would make), or for no run."""
    keys = {coord: arr.collection.key(coord) for coord in np.ndindex(*arr.numblocks)}
    unique = list(dict.fromkeys(keys.values()))  # concatenating x with x repeats keys
    opts = tg.config.per_process(tg.config.resolve(options, "test"), 1) if options else None
    graph = lower([arr.collection], options=opts).build()
    got = dict(zip(unique, run(graph, unique, backend="sync"), strict=True))
    return {coord: got[key] for coord, key in keys.items()}


def check(arr: tg.Array, expected) -> None:
    """``arr`` equals NumPy's ``expected``: shape, dtype, chunks that add up to the shape,
    every block on its own (shape, dtype, values), and the assembled result."""
    expected = np.asarray(expected)
    assert isinstance(arr, tg.Array)
    assert arr.shape == expected.shape
    assert arr.dtype == expected.dtype
    assert len(arr.chunks) == arr.ndim
    assert tuple(sum(c) for c in arr.chunks) == arr.shape, (arr.chunks, arr.shape)
    assert all(len(c) >= 1 and min(c) >= 0 for c in arr.chunks), arr.chunks
    for coord, value in block_values(arr).items():
        want = expected[block_slices(arr.chunks, coord)]
        got = np.asarray(value)
        assert got.shape == want.shape, f"block {coord}: {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"block {coord}: {got.dtype} != {want.dtype}"
        assert_array_equal(got, want, err_msg=f"block {coord}")
    result = arr.compute(backend="sync")
    assert np.shape(result) == expected.shape
    assert np.asarray(result).dtype == expected.dtype
    assert_array_equal(result, expected, strict=True)


@st.composite
def axis_chunks(draw, n: int) -> tuple[int, ...]:
    """Explicit, uneven block sizes adding up to ``n`` (zero-size blocks now and then)."""
    if n == 0:
        return draw(st.sampled_from([(0,), (0, 0)]))
    cuts = draw(st.lists(st.integers(0, n), max_size=3))
    bounds = [0, *sorted(cuts), n]
    sizes = tuple(b - a for a, b in itertools.pairwise(bounds))
    if draw(st.booleans()):  # mostly without empty blocks
        sizes = tuple(s for s in sizes if s) or (n,)
    return sizes


@st.composite
def shapes_and_chunks(draw, min_dims: int = 1, max_dims: int = 4, max_side: int = 5):
    shape = tuple(draw(st.lists(st.integers(0, max_side), min_size=min_dims,
                                max_size=max_dims)))
    chunks = tuple(draw(axis_chunks(n)) for n in shape)
    return shape, chunks


@st.composite
def uneven_chunks(draw, length: int) -> tuple[int, ...]:
    """Explicit, usually uneven, block sizes adding up to ``length`` (no empty blocks)."""
    if length <= 1:
        return (length,)
    cuts = sorted(draw(st.sets(st.integers(1, length - 1), max_size=length - 1)))
    bounds = [0, *cuts, length]
    return tuple(b - a for a, b in itertools.pairwise(bounds))


def check_values(result, expected, tol32=(1e-5, 1e-5), tol64=(1e-12, 1e-12)):
    """``result`` (an Array) computes to ``expected``: same shape, dtype and values, with
    (rtol, atol) ``tol32`` for 32-bit floats and ``tol64`` for the others."""
    expected = np.asarray(expected)
    assert isinstance(result, tg.Array)
    assert result.shape == expected.shape, (result.shape, expected.shape)
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    got = result.compute()
    assert np.asarray(got).dtype == expected.dtype
    assert np.shape(got) == expected.shape
    if expected.dtype.kind in "fc":
        rtol, atol = tol32 if expected.dtype in (np.float32, np.complex64) else tol64
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected, strict=True)
    return got
