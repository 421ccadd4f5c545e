"""Sparse arrays in zarr: the group layout, round trips through to_zarr/from_zarr, the atomic
block writer, and that a failed write leaves nothing behind."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sps
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.algebra import lower, source
from tilegraph.array.chunks import block_shape
from tilegraph.array.core import unique_name
from tilegraph.array.sparse import SparseArray, sparse_block_nbytes
from tilegraph.io import SparseZarrWriter, read_sparse_zarr_block, sparse_zarr_info

DTYPES = [np.float64, np.float32, np.complex128, np.int64, np.bool_]


def sample(shape, density, dtype=np.float64, fmt="csr", seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        dense = np.ones(shape, dtype=bool)
    elif dt.kind == "c":
        dense = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    elif dt.kind in "iu":
        dense = rng.integers(1, 100, shape).astype(dt)
    else:
        dense = (rng.standard_normal(shape) + 3).astype(dt)
    dense[rng.random(shape) >= density] = 0
    return sps.csr_array(dense) if fmt == "csr" else sps.csc_array(dense)


def blocks_of(x) -> dict:
    from tilegraph.pipeline import run

    keys = {c: x.collection.key(c) for c in np.ndindex(*x.numblocks)}
    graph = lower([x.collection]).build()
    got = dict(zip(keys.values(), run(graph, list(keys.values()), backend="sync"),
                   strict=True))
    return {c: got[k] for c, k in keys.items()}


def same_blocks(x, y) -> None:
    """``x`` and ``y`` are SparseArrays with the same blocks: format, dtype, values."""
    assert isinstance(y, SparseArray)
    assert (x.shape, x.chunks, x.dtype, x.format) == (y.shape, y.chunks, y.dtype, y.format)
    bx, by = blocks_of(x), blocks_of(y)
    for coord in bx:
        a, b = bx[coord], by[coord]
        assert isinstance(b, sps.sparray) and b.format == x.format and b.dtype == x.dtype
        assert b.shape == a.shape == block_shape(x.chunks, coord)
        np.testing.assert_array_equal(b.toarray(), a.toarray())


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_round_trip(tmp_path, fmt, dtype, density):
    m = sample((7, 5), density, dtype, fmt, seed=1)
    x = tg.from_scipy(m, chunks=((3, 3, 1), (2, 2, 1)))
    path = tmp_path / "s.zarr"
    x.to_zarr(path)
    y = tg.from_zarr(path)
    same_blocks(x, y)
    np.testing.assert_array_equal(y.to_scipy().toarray(), m.toarray())
    assert os.listdir(tmp_path) == ["s.zarr"]


def test_round_trip_of_computed_arrays_on_every_backend(tmp_path, backend_options):
    x = tg.sparse.random((9, 7), density=0.3, chunks=(4, 3), seed=2)
    y = (x @ x.T) * 2 - x @ x.T
    path = tmp_path / "p.zarr"
    y.to_zarr(path, **backend_options)
    z = tg.from_zarr(path)
    same_blocks(y, z)
    np.testing.assert_allclose(z.compute().toarray(), (x @ x.T).compute().toarray())


def test_zero_size_blocks_and_empty_arrays(tmp_path):
    m = sample((6, 4), 0.5, seed=3)
    x = tg.from_scipy(m, chunks=((2, 0, 4), (0, 4)))
    x.to_zarr(tmp_path / "a.zarr")
    same_blocks(x, tg.from_zarr(tmp_path / "a.zarr"))
    e = tg.from_scipy(sps.csr_array((0, 3)), chunks=2)
    e.to_zarr(tmp_path / "e.zarr")
    got = tg.from_zarr(tmp_path / "e.zarr")
    assert got.shape == (0, 3) and got.to_scipy().shape == (0, 3)


@st.composite
def block_sizes(draw, n: int) -> tuple[int, ...]:
    """Uneven block sizes adding up to ``n``, empty blocks included now and then."""
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
    return tuple(b - a for a, b in pairwise([0, *cuts, n]))


@settings(max_examples=25, deadline=None, database=None)
@given(m=st.integers(0, 6), n=st.integers(0, 6), data=st.data())
def test_round_trip_property(tmp_path_factory, m, n, data):
    chunks = (data.draw(block_sizes(m)), data.draw(block_sizes(n)))
    dtype = data.draw(st.sampled_from(DTYPES))
    fmt = data.draw(st.sampled_from(["csr", "csc"]))
    mat = sample((m, n), data.draw(st.sampled_from([0.0, 0.4, 1.0])), dtype, fmt,
                 data.draw(st.integers(0, 1000)))
    x = tg.from_scipy(mat, chunks=chunks)
    path = tmp_path_factory.mktemp("z") / "x.zarr"
    x.to_zarr(path)
    same_blocks(x, tg.from_zarr(path))


def test_group_layout(tmp_path):
    m = sample((5, 4), 0.5, np.float32, "csc", seed=4)
    x = tg.from_scipy(m, chunks=(3, 4))
    path = tmp_path / "g.zarr"
    x.to_zarr(path)
    root = zarr.open_group(path, mode="r")
    spec = dict(root.attrs)["tilegraph_sparse"]
    assert spec["version"] == 1 and spec["format"] == "csc"
    assert spec["shape"] == [5, 4] and spec["chunks"] == [[3, 2], [4]]
    assert np.dtype(spec["dtype"]) == np.float32
    blocks = blocks_of(x)
    assert spec["nnz"] == [[blocks[(0, 0)].nnz], [blocks[(1, 0)].nnz]]
    assert sorted(os.listdir(path / "blocks")) == ["0.0", "1.0", "zarr.json"]
    for coord, block in blocks.items():
        base = path / "blocks" / f"{coord[0]}.{coord[1]}"
        with open(base / "zarr.json") as f:
            assert json.load(f)["node_type"] == "group"
        for part in ("data", "indices", "indptr"):
            stored = zarr.open_array(base / part, mode="r")[...]
            np.testing.assert_array_equal(stored, getattr(block, part))
        np.testing.assert_array_equal(read_sparse_zarr_block(path, coord).toarray(),
                                      block.toarray())
    info = sparse_zarr_info(path)
    assert info["shape"] == (5, 4) and info["chunks"] == ((3, 2), (4,))
    assert info["dtype"] == np.float32 and info["format"] == "csc"


def test_from_zarr_rechunks_and_plans_lazily(tmp_path, forbid_compute):
    m = sample((8, 6), 0.4, seed=5)
    with tg.config.set(backend="sync"):
        tg.from_scipy(m, chunks=(3, 4)).to_zarr(tmp_path / "a.zarr")
    x = tg.from_zarr(tmp_path / "a.zarr")
    y = tg.from_zarr(tmp_path / "a.zarr", chunks=2)
    assert x.chunks == ((3, 3, 2), (4, 2)) and y.chunks == ((2,) * 4, (2,) * 3)
    assert (x.T @ y).ntasks > 0  # planning reads nothing but the group's attributes
    graph = lower([x.collection]).build()
    assert set(graph.meta["kind"]) == {"load"}
    nnz = sparse_zarr_info(tmp_path / "a.zarr")["nnz"]
    want = {x.collection.key(c): sparse_block_nbytes(block_shape(x.chunks, c), nnz[c], "f8", "csr")
            for c in np.ndindex(*x.numblocks)}
    assert dict(zip(graph.keys, graph.meta["nbytes"], strict=True)) == want
    assert x.density == pytest.approx(m.nnz / 48)
    with tg.config.set(backend="sync"):
        np.testing.assert_array_equal(y.compute().toarray(), m.toarray())


def test_dense_zarr_is_unchanged(tmp_path):
    a = np.arange(12.0).reshape(3, 4)
    tg.from_numpy(a, chunks=2).to_zarr(tmp_path / "d.zarr")
    d = tg.from_zarr(tmp_path / "d.zarr")
    assert type(d) is tg.Array
    np.testing.assert_array_equal(d.compute(), a)
    assert sparse_zarr_info(tmp_path / "d.zarr") is None
    zarr.create_group(tmp_path / "plain.zarr")
    assert sparse_zarr_info(tmp_path / "plain.zarr") is None
    with pytest.raises(ValueError, match="is not a zarr array"):
        tg.from_zarr(tmp_path / "plain.zarr")
    with pytest.raises(FileNotFoundError):
        tg.from_zarr(tmp_path / "missing.zarr")


def _block_or_boom(coord, shape):
    if coord == (1, 1):
        raise RuntimeError("disk on fire")
    return sps.csr_array(np.ones(shape))


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    chunks = ((2, 2), (2, 2))
    blocks = source(unique_name("boom"), (2, 2),
                    lambda c: (_block_or_boom, (c, block_shape(chunks, c))), kind="load")
    x = SparseArray(blocks, (4, 4), chunks, np.float64)
    for backend in ("sync", "threads"):
        with pytest.raises(RuntimeError, match="disk on fire"):
            x.to_zarr(tmp_path / "out.zarr", backend=backend)
        assert os.listdir(tmp_path) == []
    # a failure of the writer itself (here: a full disk) also leaves nothing
    good = tg.sparse.random((4, 4), density=0.5, chunks=2, seed=1)
    calls = []
    original = SparseZarrWriter.write_block

    def failing(self, coord, block):
        calls.append(coord)
        if len(calls) == 3:
            raise OSError("no space left on device")
        return original(self, coord, block)

    monkeypatch.setattr(SparseZarrWriter, "write_block", failing)
    with pytest.raises(OSError, match="no space left"):
        good.to_zarr(tmp_path / "out.zarr", backend="sync")
    assert len(calls) == 3
    assert os.listdir(tmp_path) == []


def test_existing_output_is_refused_unless_overwrite(tmp_path):
    path = tmp_path / "s.zarr"
    x = tg.sparse.random((4, 4), density=0.5, chunks=2, seed=1)
    y = tg.sparse.random((4, 4), density=0.5, chunks=2, seed=2, format="csc")
    x.to_zarr(path)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        y.to_zarr(path)
    same_blocks(x, tg.from_zarr(path))
    y.to_zarr(path, overwrite=True)
    same_blocks(y, tg.from_zarr(path))
    assert os.listdir(tmp_path) == ["s.zarr"]


def test_writer_checks_its_blocks(tmp_path):
    path = tmp_path / "w.zarr"
    w = SparseZarrWriter(path, (4, 3), np.float64, ((2, 2), (3,)))
    assert os.path.isdir(w.temp_path) and not os.path.exists(path)
    with pytest.raises(TypeError, match=r"must be a scipy\.sparse array"):
        w.write_block((0, 0), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(3, 3\) does not match the block shape"):
        w.write_block((0, 0), sps.csr_array((3, 3)))
    with pytest.raises(IndexError, match="outside the block grid"):
        w.write_block((2, 0), sps.csr_array((2, 3)))
    with pytest.raises(TypeError, match="without losing information"):
        w.write_block((0, 0), sps.csr_array(np.ones((2, 3), complex)))
    with pytest.raises(ValueError, match="not one block"):
        w.write((slice(1, 3), slice(0, 3)), sps.csr_array((2, 3)))
    w.write((slice(0, 2), slice(0, 3)), sps.csr_array(np.eye(2, 3)))
    with pytest.raises(ValueError, match="already written"):
        w.write_block((0, 0), sps.csr_array((2, 3)))
    with pytest.raises(ValueError, match=r"1 of 2 blocks were never written \(first: \(1, 0\)"):
        w.commit()
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError, match="aborted"):
        w.write_block((1, 0), sps.csr_array((2, 3)))


def test_writer_accepts_blocks_from_many_threads(tmp_path):
    path = tmp_path / "t.zarr"
    chunks = ((1,) * 12, (3, 2))
    m = sample((12, 5), 0.5, np.int64, seed=6)
    with SparseZarrWriter(path, (12, 5), np.int64, chunks, format="csc") as w:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda c: w.write_block(c, m[c[0]:c[0] + 1,
                                                       3 * c[1]:3 * c[1] + chunks[1][c[1]]]),
                          list(np.ndindex(12, 2))))
    got = tg.from_zarr(path)
    assert got.format == "csc" and got.chunks == chunks
    np.testing.assert_array_equal(got.to_scipy().toarray(), m.toarray())


def test_writer_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="2-D"):
        SparseZarrWriter(tmp_path / "a", (2, 2, 2), "f8", ((2,), (2,), (2,)))
    with pytest.raises(ValueError, match="adding up"):
        SparseZarrWriter(tmp_path / "a", (4, 2), "f8", ((2, 1), (2,)))
    with pytest.raises(ValueError, match="format"):
        SparseZarrWriter(tmp_path / "a", (2, 2), "f8", ((2,), (2,)), format="coo")
    with pytest.raises(TypeError, match="not supported"):
        SparseZarrWriter(tmp_path / "a", (2, 2), "f2", ((2,), (2,)))
    with pytest.raises(FileNotFoundError, match="parent directory"):
        SparseZarrWriter(tmp_path / "no" / "a", (2, 2), "f8", ((2,), (2,)))
    assert os.listdir(tmp_path) == []


def test_malformed_group_is_a_clear_error(tmp_path):
    zarr.create_group(tmp_path / "bad.zarr", attributes={"tilegraph_sparse": {"version": 9}})
    with pytest.raises(ValueError, match=r"malformed.*version"):
        tg.from_zarr(tmp_path / "bad.zarr")
    with pytest.raises(ValueError, match="not a sparse zarr group"):
        read_sparse_zarr_block(tmp_path, (0, 0))


def test_names_keep_their_module_for_pickles_and_plan_digests():
    """The reader and writer live in tilegraph.io.sparse_zarr but are named by
    tilegraph.io.zarr_store, the module name pickles, plan digests and checkpoint plan keys
    record for them (a digest names a function by its __module__ and __qualname__)."""
    import pickle

    from tilegraph.io import sparse_zarr, zarr_store

    for name in sparse_zarr.__all__:
        obj = getattr(sparse_zarr, name)
        assert getattr(zarr_store, name) is obj
        if callable(obj):
            assert obj.__module__ == "tilegraph.io.zarr_store"
            assert pickle.loads(pickle.dumps(obj)) is obj
            assert b"tilegraph.io.zarr_store" in pickle.dumps(obj)
    assert SparseZarrWriter.write_block.__module__ == "tilegraph.io.zarr_store"
    assert SparseZarrWriter.temp_path.fget.__module__ == "tilegraph.io.zarr_store"
