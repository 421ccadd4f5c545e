"""tilegraph.io.npy: header reads, block reads, and the atomic block writer."""

from __future__ import annotations

import gc
import os
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from tilegraph.array.chunks import all_block_slices, normalize_chunks
from tilegraph.io import NpyWriter, npy_info, read_npy_block

DTYPES = ["float32", "float64", "int64", "complex128", "bool"]
SHAPES = [(7,), (7, 5), (5, 4, 3)]
EMPTY_SHAPES = [(0,), (0, 3), (4, 0), (2, 0, 3), ()]


def sample(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape), dt)
    if dt.kind == "i":
        return np.asarray(rng.integers(-1000, 1000, size=shape), dt)
    return np.asarray(rng.standard_normal(shape), dt)


def write_blocks(path, data: np.ndarray, block: int = 3, **kwargs) -> None:
    chunks = normalize_chunks(block, data.shape)
    with NpyWriter(path, data.shape, data.dtype, **kwargs) as w:
        for slices in all_block_slices(chunks).values():
            w.write(slices, data[slices])


@pytest.mark.parametrize("shape", SHAPES + EMPTY_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip(tmp_path, shape, dtype):
    data = sample(shape, dtype)
    path = tmp_path / "a.npy"
    write_blocks(path, data)

    loaded = np.load(path)
    assert loaded.dtype == data.dtype
    assert loaded.shape == data.shape
    assert_array_equal(loaded, data)
    assert npy_info(path) == (shape, np.dtype(dtype))
    for slices in all_block_slices(normalize_chunks(2, shape)).values():
        block = read_npy_block(path, slices)
        assert block.dtype == data.dtype
        assert_array_equal(block, data[slices])
    assert os.listdir(tmp_path) == ["a.npy"]


def test_write_uneven_regions_and_int_index(tmp_path):
    data = sample((11, 6), "float64")
    path = tmp_path / "a.npy"
    with NpyWriter(path, data.shape, data.dtype) as w:
        w.write((slice(0, 4), slice(0, 6)), data[0:4])
        w.write((slice(4, 10), slice(0, 5)), data[4:10, 0:5])
        w.write((slice(4, 10), slice(5, 6)), data[4:10, 5:6])
        w.write(10, data[10])
    assert_array_equal(np.load(path), data)


def test_unwritten_regions_are_zero(tmp_path):
    path = tmp_path / "a.npy"
    with NpyWriter(path, (3, 4), "int64") as w:
        w.write((slice(0, 1), slice(0, 4)), [[1, 2, 3, 4]])
    expected = np.zeros((3, 4), np.int64)
    expected[0] = [1, 2, 3, 4]
    assert_array_equal(np.load(path), expected)


def test_read_block_is_an_independent_copy(tmp_path):
    data = np.arange(20.0).reshape(4, 5)
    path = tmp_path / "a.npy"
    np.save(path, data)
    block = read_npy_block(path, (slice(1, 3), slice(2, 5)))
    assert type(block) is np.ndarray
    assert block.flags.owndata and block.flags.writeable
    block[...] = -1
    assert_array_equal(np.load(path), data)
    # Nothing keeps the file: it can be replaced and re-read at once.
    np.save(path, data + 100)
    assert_array_equal(read_npy_block(path, (slice(0, 1),)), data[0:1] + 100)


def test_read_scalar_and_steps(tmp_path):
    data = np.arange(30).reshape(5, 6)
    path = tmp_path / "a.npy"
    np.save(path, data)
    assert_array_equal(read_npy_block(path, (2, 3)), np.asarray(15))
    assert_array_equal(read_npy_block(path, (slice(None, None, 2), slice(1, 5, 3))),
                       data[::2, 1:5:3])


def test_concurrent_writes_from_threads(tmp_path):
    data = sample((64, 48), "float64", seed=3)
    path = tmp_path / "a.npy"
    blocks = list(all_block_slices(normalize_chunks((10, 7), data.shape)).values())
    start = threading.Barrier(4)

    def write_share(w: NpyWriter, share: list) -> None:
        start.wait()
        for slices in share:
            w.write(slices, data[slices])

    with NpyWriter(path, data.shape, data.dtype) as w, ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(write_share, w, blocks[i::4]) for i in range(4)]
        for f in futures:
            f.result()
    assert_array_equal(np.load(path), data)


def test_result_appears_only_on_commit(tmp_path):
    path = tmp_path / "a.npy"
    w = NpyWriter(path, (4,), "float64")
    w.write(slice(0, 4), np.arange(4.0))
    assert not path.exists()
    names = os.listdir(tmp_path)
    assert len(names) == 1
    assert re.fullmatch(rf"\.a\.npy\.tmp-\w+-{os.getpid()}-[0-9a-f]{{32}}\.npy", names[0])
    assert os.path.join(tmp_path, names[0]) == w.temp_path
    w.commit()
    assert os.listdir(tmp_path) == ["a.npy"]
    assert_array_equal(np.load(path), np.arange(4.0))


def test_exception_in_with_block_leaves_nothing(tmp_path):
    path = tmp_path / "a.npy"
    with pytest.raises(RuntimeError, match="boom"), NpyWriter(path, (4, 4), "float64") as w:
        w.write((slice(0, 2),), np.ones((2, 4)))
        raise RuntimeError("boom")
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_keyboard_interrupt_in_with_block_leaves_nothing(tmp_path):
    path = tmp_path / "a.npy"
    with pytest.raises(KeyboardInterrupt), NpyWriter(path, (4,), "float64"):
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_abandoned_writer_removes_its_temp_file(tmp_path):
    w = NpyWriter(tmp_path / "a.npy", (4,), "float64")
    assert len(os.listdir(tmp_path)) == 1
    del w
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_abort_is_idempotent_and_noop_after_commit(tmp_path):
    path = tmp_path / "a.npy"
    w = NpyWriter(path, (3,), "int64")
    w.abort()
    w.abort()
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError, match="aborted"):
        w.commit()
    with pytest.raises(RuntimeError, match="takes no writes"):
        w.write(slice(0, 3), [1, 2, 3])

    w = NpyWriter(path, (3,), "int64")
    w.write(slice(0, 3), [1, 2, 3])
    w.commit()
    w.commit()
    w.abort()
    assert_array_equal(np.load(path), [1, 2, 3])
    assert os.listdir(tmp_path) == ["a.npy"]
    with pytest.raises(RuntimeError, match="committed"):
        w.write(slice(0, 3), [4, 5, 6])


def test_overwrite_false_refuses_existing_path(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(3))
    with pytest.raises(FileExistsError, match=re.escape(str(path))):
        NpyWriter(path, (3,), "int64")
    assert os.listdir(tmp_path) == ["a.npy"]
    assert_array_equal(np.load(path), np.arange(3))


def test_overwrite_false_checks_again_at_commit(tmp_path):
    path = tmp_path / "a.npy"
    w = NpyWriter(path, (3,), "int64")
    w.write(slice(0, 3), [7, 8, 9])
    np.save(path, np.arange(3))
    with pytest.raises(FileExistsError, match=re.escape(str(path))):
        w.commit()
    assert os.listdir(tmp_path) == ["a.npy"]
    assert_array_equal(np.load(path), np.arange(3))


def test_overwrite_true_replaces(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(3))
    with NpyWriter(path, (2, 2), "float32", overwrite=True) as w:
        w.write((slice(0, 2), slice(0, 2)), np.full((2, 2), 5, np.float32))
    assert_array_equal(np.load(path), np.full((2, 2), 5, np.float32))
    assert os.listdir(tmp_path) == ["a.npy"]


def test_write_with_wrong_block_shape_names_both_shapes(tmp_path):
    with NpyWriter(tmp_path / "a.npy", (5, 4), "float64") as w:
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 4\)"):
            w.write((slice(0, 3), slice(0, 4)), np.ones((2, 3)))
        # A region running past the end is clipped, so the block no longer fits.
        with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 4\)"):
            w.write((slice(3, 6), slice(0, 4)), np.ones((3, 4)))
        w.write((slice(0, 5),), np.ones((5, 4)))
    assert_array_equal(np.load(tmp_path / "a.npy"), np.ones((5, 4)))


def test_write_refuses_lossy_cast(tmp_path):
    with NpyWriter(tmp_path / "a.npy", (2,), "float64") as w:
        with pytest.raises(TypeError, match="complex128"):
            w.write(slice(0, 2), np.array([1 + 2j, 3j]))
        w.write(slice(0, 2), np.array([1, 2], dtype=np.int32))
    assert_array_equal(np.load(tmp_path / "a.npy"), [1.0, 2.0])


def test_writer_refuses_missing_parent(tmp_path):
    parent = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match=re.escape(str(parent))):
        NpyWriter(parent / "a.npy", (3,), "float64")
    assert os.listdir(tmp_path) == []


def test_writer_refuses_object_dtype(tmp_path):
    with pytest.raises(ValueError, match="Python objects"):
        NpyWriter(tmp_path / "a.npy", (3,), object)
    assert os.listdir(tmp_path) == []


def test_missing_file_names_the_path_and_the_host(tmp_path):
    """A run on several hosts reads inputs where its tasks run: the error says where it
    looked."""
    path = tmp_path / "nothing.npy"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))) as info:
        npy_info(path)
    assert f"on host {socket.gethostname()}" in str(info.value)
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        read_npy_block(path, (slice(0, 1),))


@pytest.mark.parametrize("content", [b"", b"hello", b"PK\x03\x04" + bytes(200)])
def test_non_npy_file_raises_value_error(tmp_path, content):
    path = tmp_path / "a.npy"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        npy_info(path)
    with pytest.raises(ValueError, match=re.escape(str(path))):
        read_npy_block(path, (slice(0, 1),))


def test_directory_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        npy_info(tmp_path)


def test_truncated_file_raises_value_error(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(10.0))
    path.write_bytes(path.read_bytes()[:-16])
    with pytest.raises(ValueError, match="truncated"):
        npy_info(path)
    with pytest.raises(ValueError, match="truncated"):
        read_npy_block(path, (slice(0, 2),))


def test_fortran_ordered_file_is_refused(tmp_path):
    path = tmp_path / "f.npy"
    np.save(path, np.asfortranarray(np.ones((3, 4))))
    with pytest.raises(ValueError, match="Fortran"):
        npy_info(path)
    with pytest.raises(ValueError, match="Fortran"):
        read_npy_block(path, (slice(0, 1),))


def test_object_file_is_refused(tmp_path):
    path = tmp_path / "o.npy"
    np.save(path, np.array([1, "a", None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="objects"):
        npy_info(path)
    with pytest.raises(ValueError, match="objects"):
        read_npy_block(path, (slice(0, 1),))


def test_reads_files_written_by_numpy(tmp_path):
    path = tmp_path / "a.npy"
    data = sample((6, 5), "complex128", seed=7)
    np.save(path, data)
    assert npy_info(path) == ((6, 5), np.dtype("complex128"))
    assert_array_equal(read_npy_block(str(path), (slice(2, 6), slice(1, 4))), data[2:6, 1:4])
