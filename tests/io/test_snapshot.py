"""Inputs are snapshotted when an array is made from them, and every block read checks the
snapshot: an input changed under a run is an error naming the file, never a mixed result."""

from __future__ import annotations

import os
import socket

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.io.snapshot import InputChangedError, ReadLedger
from tilegraph.runtime.events import TaskEnd

zarr = pytest.importorskip("zarr")


def test_npy_replaced_between_plan_and_compute_is_an_error(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(40.0))
    x = tg.from_npy(path, chunks=10)
    np.save(path, np.arange(40.0) * 2)  # same shape and dtype, other values
    with pytest.raises(InputChangedError, match=r"a\.npy") as info:
        x.sum().compute()
    assert "changed after the plan" in str(info.value)
    assert f"on host {socket.gethostname()}" in str(info.value)  # where it was read
    assert_array_equal(tg.from_npy(path, chunks=10).compute(), np.arange(40.0) * 2)


def test_npy_replaced_mid_run_is_an_error_never_a_mixed_result(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.ones((40, 4)))
    x = tg.from_npy(path, chunks=(10, 4))
    swapped = []

    def hook(block):
        if not swapped:  # after the first block: another shape and dtype at the same path
            swapped.append(True)
            np.save(path + ".new.npy", np.zeros((80, 4), dtype=np.float32))
            os.replace(path + ".new.npy", path)
        return block

    with pytest.raises(InputChangedError, match=r"a\.npy.*replaced"):
        x.map_blocks(hook).sum().compute(backend="sync")
    assert swapped


def test_npy_rewritten_in_place_is_an_error(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(40.0))
    x = tg.from_npy(path, chunks=10)
    with open(path, "r+b") as f:  # the same file, other bytes at the end
        f.seek(-8, os.SEEK_END)
        f.write(np.float64(99).tobytes())
        f.write(b"\0" * 8)
    with pytest.raises(InputChangedError, match="size changed"):
        x.compute()


def test_zarr_overwritten_after_plan_is_an_error(tmp_path):
    path = str(tmp_path / "a.zarr")
    tg.from_numpy(np.arange(12.0), chunks=4).to_zarr(path)
    x = tg.from_zarr(path)
    tg.from_numpy(np.arange(12.0) + 1, chunks=4).to_zarr(path, overwrite=True)
    with pytest.raises(InputChangedError, match=r"a\.zarr"):
        x.compute()
    assert_array_equal(tg.from_zarr(path).compute(), np.arange(12.0) + 1)


def test_unchanged_inputs_read_as_before(tmp_path):
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(40.0))
    x = tg.from_npy(path, chunks=10)
    assert float(x.sum().compute()) == float(np.arange(40.0).sum())
    assert float(x.sum().compute()) == float(np.arange(40.0).sum())  # plans are reusable


# -- the parts of a zarr array and the file of a memory map, checked at every read ---------


def _store(path: str, data: np.ndarray, chunks=(50, 40)) -> None:
    """An uncompressed zarr array: a chunk file is the chunk's raw bytes (C order)."""
    z = zarr.create_array(path, shape=data.shape, dtype=data.dtype, chunks=chunks,
                          compressors=None, overwrite=True)
    z[...] = data


def _load_args(x) -> list:
    """The arguments of the load tasks of an array's plan (unfused)."""
    g = plan_arrays([x], fuse=False).graph
    return [a for i, k in enumerate(g.meta["kind"]) if k == "load" for a in g.args[i]]


def _after_load(n: int, action, name: str | None = None):
    """An event subscriber running ``action(event)`` once, when the ``n``-th load task
    (of the array ``name``, if given) has ended."""
    seen = []

    def subscriber(event):
        if isinstance(event, TaskEnd) and event.kind == "load" and (
                name is None or event.key[0] == name):
            seen.append(event)
            if len(seen) == n:
                action(event)

    subscriber.seen = seen
    return subscriber


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
@pytest.mark.parametrize("when", [1, 7])
def test_zarr_chunks_rewritten_during_a_run_are_an_error_never_a_mix(tmp_path, dtype, when):
    """The brief's case: x @ x.T of a zarr array whose values are rewritten (every chunk,
    by zarr, which writes each chunk as a new file) after the ``when``-th block was read,
    under a budget that makes blocks be read again and with room for all: an error naming
    the array, whichever read comes next."""
    path = str(tmp_path / "a.zarr")
    base = np.random.default_rng(0).integers(0, 8, (230, 170)).astype(dtype)
    _store(path, base)

    def rewrite(event):
        zarr.open_array(path, mode="r+")[...] = base + 1

    for limit in ("150KB", "2GB"):
        x = tg.from_zarr(path)
        with pytest.raises(InputChangedError, match=r"a\.zarr.* changed while a plan read "
                                                    r"it: (directory|part) 'c/"):
            (x @ x.T).compute(memory_limit=limit, callbacks=[_after_load(when, rewrite)])
        _store(path, base)  # as it was; a new array reads it, a remade block included
        x = tg.from_zarr(path)
        assert_array_equal((x @ x.T).compute(memory_limit="150KB"), base @ base.T)
        assert tg.last_run().remade.get("load", 0) > 0


def test_a_zarr_chunk_rewritten_in_place_is_an_error_when_read_again(tmp_path):
    """A chunk file written in place (same file, same size: its directory does not change)
    after an array read it: the next read of that chunk, by that array or by another one
    made over the same store before the change, is an error, never the other values; an
    array made after the change reads them."""
    path = str(tmp_path / "a.zarr")
    base = np.arange(230 * 170, dtype=np.float64).reshape(230, 170)
    _store(path, base)
    a = tg.from_zarr(path)  # blocks are the chunks: 50 x 40
    b = tg.from_zarr(path, chunks=(100, 85))  # another array over the same chunks
    assert float(a.sum().compute()) == base.sum()  # every chunk read once
    with open(os.path.join(path, "c", "1", "2"), "r+b") as f:
        f.write((base[50:100, 80:120] + 1e6).tobytes())
    for x in (b, a):
        with pytest.raises(InputChangedError, match=r"part 'c/1/2' was modified since the "
                                                    "plan first read it"):
            x.sum().compute()
    changed = base.copy()
    changed[50:100, 80:120] += 1e6
    assert float(tg.from_zarr(path).sum().compute()) == changed.sum()


def test_two_arrays_over_one_unchanged_store_share_its_ledger(tmp_path):
    path = str(tmp_path / "a.zarr")
    base = np.arange(230 * 170, dtype=np.int32).reshape(230, 170)
    _store(path, base)
    a, b = tg.from_zarr(path), tg.from_zarr(path, chunks=(100, 85))
    got_a, got_b = tg.compute(a.sum(axis=0), b.sum(axis=1))
    assert_array_equal(got_a, base.sum(axis=0))
    assert_array_equal(got_b, base.sum(axis=1))
    ledgers = {id(arg) for x in (a, b) for arg in _load_args(x) if isinstance(arg, ReadLedger)}
    assert len(ledgers) == 1
    z = zarr.open_array(path, mode="r")
    assert tg.from_zarr(z).chunks == a.chunks  # an open array is read with the same checks
    assert_array_equal(tg.from_array(z, chunks=(60, 60)).compute(), base)


def test_a_sparse_zarr_block_rewritten_is_an_error_when_read_again(tmp_path):
    import scipy.sparse as sps

    path = str(tmp_path / "s.zarr")
    m = sps.random(40, 30, density=0.3, format="csr", random_state=1, dtype=np.float64)
    tg.from_scipy(m, chunks=(20, 15)).to_zarr(path)
    x = tg.from_zarr(path)
    assert abs(x.to_scipy() - m).max() == 0  # every block read once: recorded
    data = zarr.open_array(os.path.join(path, "blocks", "1.0", "data"), mode="r+")
    data[...] = data[...] + 1
    with pytest.raises(InputChangedError, match=r"part 'blocks/1\.0' had a file replaced"):
        x.to_scipy()


@pytest.mark.parametrize("how", ["through the map", "by another writer"])
def test_a_memory_map_written_during_a_run_is_an_error(tmp_path, how):
    path = str(tmp_path / "m.dat")
    base = np.random.default_rng(0).integers(0, 8, (230, 170)).astype(np.float32)
    m = np.memmap(path, dtype=base.dtype, mode="w+", shape=base.shape)
    m[:] = base
    m.flush()

    def write(event):
        if how == "through the map":
            m[100:120] += 1
        else:
            with open(path, "r+b") as f:
                f.write(np.full(10, 7.0, dtype=np.float32).tobytes())

    x = tg.from_array(m, chunks=(60, 50))
    with pytest.raises(InputChangedError, match=r"m\.dat.*the file was modified"):
        (x @ x.T).compute(memory_limit="100KB", callbacks=[_after_load(3, write)])


def test_a_memory_map_is_read_from_its_file_whatever_its_view(tmp_path):
    """Views of a map (an offset, a transpose, a step, a negative step) read the file as
    the view shows it; a map of mode "c" stays an array in memory; a truncated file is an
    error naming it."""
    path = str(tmp_path / "m.dat")
    base = np.arange(7 * 11 * 5, dtype=np.int64).reshape(7, 11, 5)
    m = np.memmap(path, dtype=np.int64, mode="w+", shape=base.shape, offset=24)
    m[:] = base
    m.flush()
    views = {"whole": m, "transposed": m.transpose(2, 0, 1), "stepped": m[1::2, ::3],
             "reversed": m[::-1, :, ::-2], "offset": m[3:, 4:9]}
    for name, view in views.items():
        x = tg.from_array(view, chunks=3)
        g = plan_arrays([x], fuse=False).graph
        loads = [i for i, k in enumerate(g.meta["kind"]) if k == "load"]
        assert {g.opname(i) for i in loads} == {"from_array"}
        assert all(g.repeatable()[i] for i in loads), name
        assert any(isinstance(a, ReadLedger) for a in _load_args(x)), name
        assert_array_equal(x.compute(), np.asarray(view), err_msg=name)
    c = np.memmap(path, dtype=np.int64, mode="c", shape=base.shape, offset=24)
    c[0, 0, 0] = -1  # private to this process: not in the file
    x = tg.from_array(c, chunks=3)
    assert not any(isinstance(a, ReadLedger) for a in _load_args(x))
    assert x.compute()[0, 0, 0] == -1
    x = tg.from_array(m, chunks=3)
    with open(path, "r+b") as f:
        f.truncate(100)
    with pytest.raises(InputChangedError, match=r"m\.dat.*changed size"):
        x.compute()
    y = tg.from_array(np.memmap(path, dtype=np.int64, mode="r", shape=(9,), offset=24),
                      chunks=3)
    with open(path, "r+b") as f:
        f.truncate(60)
    with pytest.raises(ValueError, match=r"m\.dat' holds 60 bytes.*truncated"):
        y.compute()


def test_a_ledger_is_pickled_by_name_and_is_one_per_process(tmp_path):
    """Tasks sent to another process carry the ledger's name, not its records; there, all
    tasks reading through it share one ledger, which starts empty."""
    import pickle
    import subprocess
    import sys

    ledger = ReadLedger(str(tmp_path / "a.zarr"))
    ledger.check({f"c/{i}": (1, i, 10, 5) for i in range(1000)})
    data = pickle.dumps([ledger, ledger])
    assert len(data) < 300
    first, second = pickle.loads(data)
    assert first is second is ledger  # in the process that made it: itself
    code = ("import pickle, sys; a, b = pickle.loads(sys.stdin.buffer.read()); "
            "print(a is b, len(a), a.path == b.path)")
    out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                         check=True, env={**os.environ}).stdout.decode().split()
    assert out == ["True", "0", "True"]


def test_a_memory_maps_file_replaced_before_its_first_read_is_an_error(tmp_path):
    """The map shows the file it mapped; another file renamed over its path is not it,
    even when nothing was read yet (an attacker's swap, a writer's atomic save)."""
    path = str(tmp_path / "m.dat")
    m = np.memmap(path, dtype=np.float64, mode="w+", shape=(20, 10))
    m[:] = 1.0
    m.flush()
    x = tg.from_array(m, chunks=5)
    other = np.memmap(path + ".new", dtype=np.float64, mode="w+", shape=(20, 10))
    other[:] = 2.0
    other.flush()
    os.replace(path + ".new", path)
    with pytest.raises(InputChangedError, match=r"m\.dat' is no longer the file the memory "
                                                "map showed"):
        x.compute()
    assert_array_equal(np.asarray(m), 1.0)  # the map still shows the old file
