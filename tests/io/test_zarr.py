"""tilegraph.io.zarr_store: array inspection, block reads, and the atomic region writer."""

from __future__ import annotations

import gc
import os
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal

from tilegraph.array.chunks import all_block_slices, normalize_chunks
from tilegraph.io import ZarrWriter, read_zarr_block, zarr_info
from tilegraph.io.zarr_store import _partially_covered_chunks

DTYPES = ["float32", "float64", "int64", "complex128", "bool"]
SHAPES = [(7,), (7, 5), (5, 4, 3)]
EMPTY_SHAPES = [(0,), (0, 3), (4, 0), ()]


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


def blocks_of(shape: tuple[int, ...], block) -> list[tuple[slice, ...]]:
    return list(all_block_slices(normalize_chunks(block, shape)).values())


def run_in_threads(fn, shares: list, nthreads: int = 4) -> None:
    start = threading.Barrier(nthreads)

    def run(share):
        start.wait()
        for item in share:
            fn(item)

    with ThreadPoolExecutor(nthreads) as pool:
        for f in [pool.submit(run, shares[i::nthreads]) for i in range(nthreads)]:
            f.result()


@pytest.mark.parametrize("shape", SHAPES + EMPTY_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip(tmp_path, shape, dtype):
    data = sample(shape, dtype)
    path = tmp_path / "a.zarr"
    chunks = (3,) * len(shape)
    with ZarrWriter(path, shape, dtype, chunks) as w:
        for slices in blocks_of(shape, 3):
            w.write(slices, data[slices])

    assert zarr_info(path) == (shape, np.dtype(dtype), chunks)
    whole = read_zarr_block(path, tuple(slice(None) for _ in shape))
    assert whole.dtype == data.dtype
    assert_array_equal(whole, data)
    opened = zarr.open_array(str(path), mode="r")
    assert opened.metadata.zarr_format == 3
    for slices in blocks_of(shape, 2):
        assert_array_equal(read_zarr_block(path, slices), data[slices])
        assert_array_equal(read_zarr_block(opened, slices), data[slices])
    assert os.listdir(tmp_path) == ["a.zarr"]


def test_unaligned_regions_int_index_and_unwritten_fill(tmp_path):
    data = sample((10, 9), "float64", seed=1)
    path = tmp_path / "a.zarr"
    with ZarrWriter(path, data.shape, data.dtype, (4, 4)) as w:
        w.write((slice(1, 6), slice(2, 9)), data[1:6, 2:9])
        w.write((slice(6, 10),), data[6:10])
        w.write((0, slice(0, 5)), data[0, 0:5])
    expected = np.zeros_like(data)
    expected[1:6, 2:9] = data[1:6, 2:9]
    expected[6:10] = data[6:10]
    expected[0, 0:5] = data[0, 0:5]
    assert_array_equal(read_zarr_block(path, (slice(None), slice(None))), expected)


def test_write_refuses_steps_and_wrong_shapes(tmp_path):
    with ZarrWriter(tmp_path / "a.zarr", (6, 4), "int64", (2, 2)) as w:
        with pytest.raises(ValueError, match="contiguous"):
            w.write((slice(0, 6, 2),), np.zeros((3, 4), np.int64))
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 4\)"):
            w.write((slice(0, 3), slice(0, 4)), np.ones((2, 3), np.int64))
        with pytest.raises(ValueError, match=r"\(4, 4\).*\(2, 4\)"):
            w.write((slice(4, 8),), np.ones((4, 4), np.int64))
        with pytest.raises(TypeError, match="float64"):
            w.write((slice(0, 2),), np.ones((2, 4)))
        w.write((slice(0, 6),), np.ones((6, 4), np.int64))
    assert_array_equal(read_zarr_block(tmp_path / "a.zarr", ()), np.ones((6, 4), np.int64))


@pytest.mark.parametrize("block", [(8, 8), (7, 5)], ids=["aligned", "unaligned"])
def test_concurrent_writes_from_threads(tmp_path, block):
    data = sample((40, 30), "float64", seed=3)
    path = tmp_path / "a.zarr"
    with ZarrWriter(path, data.shape, data.dtype, (8, 8)) as w:
        run_in_threads(lambda s: w.write(s, data[s]), blocks_of(data.shape, block))
    assert_array_equal(read_zarr_block(path, ()), data)


def test_concurrent_reads_of_an_opened_array(tmp_path):
    data = sample((30, 20), "int64", seed=4)
    path = tmp_path / "a.zarr"
    with ZarrWriter(path, data.shape, data.dtype, (8, 8)) as w:
        w.write((), data)
    opened = zarr.open_array(str(path), mode="r")
    out = np.zeros_like(data)

    def read(s):
        out[s] = read_zarr_block(opened, s)

    run_in_threads(read, blocks_of(data.shape, (6, 7)))
    assert_array_equal(out, data)


def test_partially_covered_chunks():
    # Chunk-aligned regions, including a short edge chunk, need no lock.
    assert _partially_covered_chunks(((0, 4), (0, 3)), (4, 4), (8, 3)) == []
    assert _partially_covered_chunks(((4, 8), (0, 3)), (4, 4), (8, 3)) == []
    assert _partially_covered_chunks(((1, 4), (0, 3)), (4, 4), (8, 3)) == [(0, 0)]
    assert _partially_covered_chunks(((2, 10), (0, 4)), (4, 4), (12, 4)) == [(0, 0), (2, 0)]
    assert _partially_covered_chunks(((3, 9), (1, 3)), (4, 4), (12, 4)) == [
        (0, 0), (1, 0), (2, 0)
    ]
    assert _partially_covered_chunks(((3, 3), (0, 4)), (4, 4), (12, 4)) == []


def test_result_appears_only_on_commit(tmp_path):
    path = tmp_path / "a.zarr"
    w = ZarrWriter(path, (4,), "float64", (2,))
    w.write(slice(0, 4), np.arange(4.0))
    assert not path.exists()
    names = os.listdir(tmp_path)
    assert len(names) == 1
    assert re.fullmatch(rf"\.a\.zarr\.tmp-\w+-{os.getpid()}-[0-9a-f]{{32}}", names[0])
    assert os.path.join(tmp_path, names[0]) == w.temp_path
    w.commit()
    assert os.listdir(tmp_path) == ["a.zarr"]
    assert_array_equal(read_zarr_block(path, ()), np.arange(4.0))


def test_exception_in_with_block_leaves_nothing(tmp_path):
    path = tmp_path / "a.zarr"
    with pytest.raises(RuntimeError, match="boom"), ZarrWriter(path, (4, 4), "f8", (2, 2)) as w:
        w.write((slice(0, 2),), np.ones((2, 4)))
        raise RuntimeError("boom")
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_abandoned_writer_removes_its_temp_dir(tmp_path):
    w = ZarrWriter(tmp_path / "a.zarr", (4,), "float64", (2,))
    w.write(slice(0, 4), np.ones(4))
    assert len(os.listdir(tmp_path)) == 1
    del w
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_abort_is_idempotent_and_noop_after_commit(tmp_path):
    path = tmp_path / "a.zarr"
    w = ZarrWriter(path, (3,), "int64", (2,))
    w.write(slice(0, 3), [1, 2, 3])
    w.abort()
    w.abort()
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError, match="aborted"):
        w.commit()
    with pytest.raises(RuntimeError, match="takes no writes"):
        w.write(slice(0, 3), [1, 2, 3])

    w = ZarrWriter(path, (3,), "int64", (2,))
    w.write(slice(0, 3), [1, 2, 3])
    w.commit()
    w.commit()
    w.abort()
    assert_array_equal(read_zarr_block(path, ()), [1, 2, 3])
    assert os.listdir(tmp_path) == ["a.zarr"]


def test_overwrite_false_refuses_existing_path(tmp_path):
    path = tmp_path / "a.zarr"
    zarr.create_array(str(path), shape=(3,), dtype="i8", chunks=(3,))[...] = [4, 5, 6]
    with pytest.raises(FileExistsError, match=re.escape(str(path))):
        ZarrWriter(path, (3,), "int64", (3,))
    assert os.listdir(tmp_path) == ["a.zarr"]
    assert_array_equal(read_zarr_block(path, ()), [4, 5, 6])


def test_overwrite_false_checks_again_at_commit(tmp_path):
    path = tmp_path / "a.zarr"
    w = ZarrWriter(path, (3,), "int64", (3,))
    w.write(slice(0, 3), [7, 8, 9])
    zarr.create_array(str(path), shape=(3,), dtype="i8", chunks=(3,))[...] = [4, 5, 6]
    with pytest.raises(FileExistsError, match=re.escape(str(path))):
        w.commit()
    assert os.listdir(tmp_path) == ["a.zarr"]
    assert_array_equal(read_zarr_block(path, ()), [4, 5, 6])


def test_overwrite_true_replaces_and_cleans_up(tmp_path):
    path = tmp_path / "a.zarr"
    zarr.create_array(str(path), shape=(3,), dtype="i8", chunks=(1,))[...] = [4, 5, 6]
    with ZarrWriter(path, (2, 2), "float32", (2, 1), overwrite=True) as w:
        w.write((), np.full((2, 2), 5, np.float32))
    assert zarr_info(path) == ((2, 2), np.dtype("float32"), (2, 1))
    assert_array_equal(read_zarr_block(path, ()), np.full((2, 2), 5, np.float32))
    assert os.listdir(tmp_path) == ["a.zarr"]


def test_writer_refuses_missing_parent_and_bad_chunks(tmp_path):
    parent = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match=re.escape(str(parent))):
        ZarrWriter(parent / "a.zarr", (3,), "float64", (2,))
    with pytest.raises(ValueError, match="2 entries"):
        ZarrWriter(tmp_path / "a.zarr", (3,), "float64", (2, 2))
    with pytest.raises(ValueError, match="positive"):
        ZarrWriter(tmp_path / "a.zarr", (3,), "float64", (0,))
    assert os.listdir(tmp_path) == []


def test_missing_path_names_the_path_and_the_host(tmp_path):
    """A run on several hosts reads inputs where its tasks run: the error says where it
    looked."""
    path = tmp_path / "nothing.zarr"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))) as info:
        zarr_info(path)
    assert f"on host {socket.gethostname()}" in str(info.value)
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        read_zarr_block(path, (slice(0, 1),))


def test_an_array_missing_where_a_planned_read_runs_is_not_found_there(tmp_path):
    """A read planned on one host and run where the path does not exist (another host's
    directory) says so, as for an .npy file, rather than that the array was removed."""
    from tilegraph.io.snapshot import snapshot_of

    path = str(tmp_path / "a.zarr")
    z = zarr.create_array(path, shape=(4,), dtype="f8", chunks=(2,))
    z[...] = np.arange(4.0)
    snap = snapshot_of(path, (4,), "float64")
    assert_array_equal(read_zarr_block(path, (slice(0, 2),), snap), [0.0, 1.0])
    os.rename(path, path + ".elsewhere")
    with pytest.raises(FileNotFoundError, match=f"no zarr array at .* on host "
                                                f"{re.escape(socket.gethostname())}"):
        read_zarr_block(path, (slice(0, 2),), snap)


@pytest.mark.parametrize("kind", ["empty dir", "file", "group", "broken metadata"])
def test_not_an_array_raises_value_error(tmp_path, kind):
    path = tmp_path / "x.zarr"
    if kind == "empty dir":
        path.mkdir()
    elif kind == "file":
        path.write_bytes(b"not zarr")
    elif kind == "group":
        zarr.open_group(str(path), mode="w")
    else:
        path.mkdir()
        (path / "zarr.json").write_text("{not json")
    for call in (lambda: zarr_info(path), lambda: read_zarr_block(path, ())):
        with pytest.raises(ValueError, match=re.escape(str(path))) as info:
            call()
        assert not isinstance(info.value, FileNotFoundError)


def test_reads_arrays_written_by_zarr(tmp_path):
    path = tmp_path / "z2.zarr"
    data = sample((9, 4), "float32", seed=5)
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(4, 4),
                          zarr_format=2)
    z[...] = data
    assert zarr_info(path) == ((9, 4), np.dtype("float32"), (4, 4))
    assert_array_equal(read_zarr_block(path, (slice(3, 9), slice(1, 3))), data[3:9, 1:3])


def test_read_from_numpy_array_returns_a_copy():
    data = np.arange(12).reshape(3, 4)
    block = read_zarr_block(data, (slice(0, 2), slice(1, 3)))
    assert_array_equal(block, [[1, 2], [5, 6]])
    block[...] = -1
    assert_array_equal(data, np.arange(12).reshape(3, 4))


def test_a_zarr_read_counts_its_decoding_buffers(tmp_path):
    """A read holds the compressed chunk and its decoded copy beside the block: the memory
    model (admission, check_fits, explain) counts three blocks, also once the read is fused
    into the step that consumes it."""
    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.graph.memory import task_estimates

    path = str(tmp_path / "a.zarr")
    tg.from_numpy(np.arange(48.0).reshape(8, 6), chunks=(4, 6)).to_zarr(path)
    block = 4 * 6 * 8
    x = tg.from_zarr(path)
    plan = plan_arrays([x + 1])
    assert max(task_estimates(plan.graph)) >= 3 * block
    assert "largest task works on 576 B" in x.explain()
    np.testing.assert_array_equal((x + 1).compute(), np.arange(48.0).reshape(8, 6) + 1)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_blocks_cut_from_larger_ones_are_written_as_the_larger_regions(tmp_path, dtype):
    """``x.rechunk(finer).to_zarr()``: zarr chunks of the finer shape (uneven edges too),
    written one larger block per zarr call; the values are NumPy's."""
    import tilegraph as tg
    from tilegraph.runtime.events import TaskEnd

    a = (np.arange(23 * 17).reshape(23, 17) * 3).astype(dtype)
    x = tg.from_numpy(a, chunks=(10, 17)) + 0  # blocks that are results
    fine = x.rechunk((5, 4))
    path = str(tmp_path / "f.zarr")
    ends = []
    fine.to_zarr(path, callbacks=[lambda e: ends.append(e) if isinstance(e, TaskEnd)
                                  else None])
    z = zarr.open_array(path, mode="r")
    assert z.chunks == (5, 4)
    assert_array_equal(z[...], a)
    writes = [e for e in ends if "write" in e.name]
    assert len(writes) == x.npartitions  # 3 regions, not 5 x 5 blocks
    other = tg.from_numpy(a, chunks=(10, 17)).rechunk((5, 4))  # views of one array
    other.to_zarr(str(tmp_path / "g.zarr"))
    assert_array_equal(zarr.open_array(str(tmp_path / "g.zarr"), mode="r")[...], a)


def test_a_staged_rechunk_is_written_as_its_write_groups_chosen_for_the_run(tmp_path):
    """A staged rechunk (its stages chosen when the run builds the graph, for its limit)
    whose last stage cuts write groups into the new blocks: ``to_zarr`` writes the write
    groups planned for that run, one region each, through the store on disk under a small
    limit; the values are NumPy's."""
    import tilegraph as tg
    from tilegraph.runtime.events import TaskEnd

    a = np.arange(32 * 40 * 40, dtype=np.float64).reshape(32, 40, 40)  # 400 KiB
    out = (tg.from_numpy(a, chunks=(1, 40, 40)) + 0).rechunk((32, 2, 2), max_mem="32KB")
    for limit in ("2MB", "300KB"):  # pieces in memory, then through the store
        opts = tg.config.per_process(tg.config.resolve({"memory_limit": limit}, "test"), 1)
        groups = out.collection.coarser(opts)
        assert groups is not None and groups.npartitions < out.npartitions
        ends: list = []
        path = str(tmp_path / f"{limit}.zarr")
        out.to_zarr(path, memory_limit=limit, callbacks=[ends.append])
        z = zarr.open_array(path, mode="r")
        assert z.chunks == (32, 2, 2)
        assert_array_equal(z[...], a)
        writes = [e for e in ends if isinstance(e, TaskEnd) and "write" in e.name]
        assert len(writes) == groups.npartitions
        assert (tg.last_run().staged_bytes > 0) == (limit == "300KB")
