"""Sparse blocks: format and dtype checks, block sizes, expected densities and the empty
block, as the sparse arrays and the matmul lowering use them."""

import numpy as np
import pytest
import scipy.sparse as sps

from tilegraph.array.sparse_blocks import (
    BLOCK_CLASSES,
    FORMATS,
    check_dtype,
    check_format,
    dense_nbytes,
    empty_block,
    expected_nbytes,
    product_density,
    sparse_block_nbytes,
    union_density,
)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex128, np.bool_])
def test_block_nbytes_are_scipys_sizes(fmt, dtype):
    m = sps.random_array((9, 5), density=0.3, rng=0, format=fmt).astype(dtype)
    m = BLOCK_CLASSES[fmt](m)
    real = m.data.nbytes + m.indices.nbytes + m.indptr.nbytes
    assert sparse_block_nbytes(m.shape, m.nnz, dtype, fmt) == real


def test_checks_name_the_op():
    assert check_format("op", "csc") == "csc"
    with pytest.raises(ValueError, match=r"^random: format must be 'csr' or 'csc', got 'coo'"):
        check_format("random", "coo")
    assert check_dtype("op", "f4") == np.float32
    with pytest.raises(TypeError, match=r"^astype: dtype float16 is not supported"):
        check_dtype("astype", np.float16)
    with pytest.raises(TypeError, match=r"^astype: dtype <U1 is not supported"):
        check_dtype("astype", "U1")
    with pytest.raises(TypeError, match="is not a dtype"):
        check_dtype("astype", "no such dtype")


def test_nbytes_metadata_per_block():
    chunks = ((3, 3, 1), (2, 2))
    dense = dense_nbytes(chunks, np.dtype("f8"))
    assert [dense((i, 1)) for i in range(3)] == [48, 48, 16]
    sparse = expected_nbytes(chunks, 0.5, np.dtype("f8"), "csr")
    assert sparse((2, 0)) == sparse_block_nbytes((1, 2), 1, "f8", "csr")
    assert expected_nbytes(chunks, None, np.dtype("f8"), "csr")((0, 0)) is None


def test_expected_densities():
    assert union_density(0.5, 0.5) == 0.75
    assert union_density(None, 0.5) is None
    # each of the inner terms meets with probability a * b
    assert product_density(0.1, 0.2, 3) == pytest.approx(1 - (1 - 0.02) ** 3)
    assert product_density(0.1, 0.2, 0) == 0.0
    assert product_density(1.0, 1.0, 4) == 1.0
    assert product_density(0.1, None, 4) is None


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_block(fmt):
    block = empty_block((3, 4), np.dtype("c16"), fmt)
    assert isinstance(block, BLOCK_CLASSES[fmt]) and block.format == fmt
    assert block.shape == (3, 4) and block.nnz == 0 and block.dtype == np.complex128
