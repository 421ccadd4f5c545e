"""NumPy and dask habits: persist, visualize, .blocks, pickling (computed in another
process), chunks given as sizes, tolist/item/squeeze/flatten, methods, docstrings."""

from __future__ import annotations

import inspect
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime.events import TaskEnd

ROOT = Path(__file__).resolve().parents[2]
A = np.arange(35.0).reshape(7, 5)


def test_persist_computes_once_and_later_expressions_reuse_it():
    ran = []
    x = tg.from_numpy(A, chunks=(3, 2)).map_blocks(lambda b: b * 2)
    p = x.persist(callbacks=[lambda e: ran.append(e) if isinstance(e, TaskEnd) else None])
    assert len(ran) >= x.npartitions
    ran.clear()
    got = (p + 1).compute(callbacks=[lambda e: ran.append(e.kind)
                                      if isinstance(e, TaskEnd) else None])
    np.testing.assert_array_equal(got, A * 2 + 1)
    assert "map" not in ran  # the map_blocks tasks did not run again
    assert p.chunks == x.chunks


def test_blocks_indexing_as_in_dask():
    x = tg.from_numpy(A, chunks=(3, 2))
    np.testing.assert_array_equal(x.blocks[0, 1].compute(), A[:3, 2:4])
    np.testing.assert_array_equal(x.blocks[-1].compute(), A[6:])
    np.testing.assert_array_equal(x.blocks[:, ::2].compute(), A[:, [0, 1, 4]])
    assert x.blocks.shape == (3, 3) and x.blocks.size == 9
    assert len(x.blocks.ravel()) == 9
    with pytest.raises(IndexError, match="out of range"):
        x.blocks[3]
    with pytest.raises(TypeError, match="ints and slices"):
        x.blocks[[0, 1]]


def test_pickled_array_computes_in_another_process(tmp_path):
    x = tg.from_numpy(A, chunks=(3, 2))
    y = np.sort(x[x > 4] * 2)[::-1].cumsum() + x.sum()
    path = tmp_path / "array.pkl"
    path.write_bytes(pickle.dumps(y))
    code = ("import pickle, sys, numpy as np; y = pickle.load(open(sys.argv[1], 'rb')); "
            "np.save(sys.argv[2], y.compute())")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "out.npy")],
                   check=True, env=env, timeout=120)
    want = np.cumsum(np.sort(A[A > 4] * 2)[::-1]) + A.sum()
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), want)
    z = pickle.loads(pickle.dumps(y))
    np.testing.assert_array_equal(z.compute(), want)


def test_chunks_as_sizes():
    a = np.zeros((1000, 1000))
    assert tg.from_numpy(a, chunks="800kB").chunksize == (316, 316)
    assert tg.from_numpy(a, chunks="auto").chunks == ((1000,), (1000,))
    assert tg.ones((4000, 4000), chunks="10MB").chunksize == (1118, 1118)
    with pytest.raises(ValueError, match="'lots'"):
        tg.ones((10, 10), chunks="lots")
    with pytest.raises(ValueError, match="smaller than one element"):
        tg.ones((10, 10), chunks="4B")


def test_scalar_and_list_conversions_and_methods():
    x = tg.from_numpy(A, chunks=(3, 2))
    assert x.tolist() == A.tolist()
    assert x[2, 3].item() == 13.0 and x.item(7) == 7.0 and x.item(1, 2) == 7.0
    assert x[:1, :1].item() == 0.0
    with pytest.raises(ValueError, match="size 1"):
        x.item()
    np.testing.assert_array_equal(x[:1].squeeze().compute(), A[0])
    np.testing.assert_array_equal(x.flatten().compute(), A.ravel())
    np.testing.assert_array_equal(x.ravel().compute(), A.ravel())
    np.testing.assert_array_equal(x.cumsum(axis=0).compute(), A.cumsum(axis=0))
    np.testing.assert_array_equal(x.cumprod().compute(), A.cumprod())
    np.testing.assert_array_equal(x.clip(3, 9).compute(), A.clip(3, 9))
    np.testing.assert_array_equal((x / 7).round(2).compute(), (A / 7).round(2))
    np.testing.assert_array_equal(x.argsort(axis=0).compute(), A.argsort(axis=0))
    np.testing.assert_array_equal(x.nonzero()[1].compute(), A.nonzero()[1])
    with pytest.raises(ValueError, match="axes of length one"):
        x.squeeze(axis=0)


def test_map_blocks_says_pass_chunks_when_blocks_change_shape():
    x = tg.from_numpy(A, chunks=(3, 2))
    y = x.map_blocks(lambda b: b[:1])
    with pytest.raises(ValueError, match="pass chunks="):
        y.compute()


def test_map_blocks_takes_one_blocks_shape_as_chunks():
    """dask's form: ``chunks=(1, 1)`` is the shape of every output block."""
    x = tg.from_numpy(A, chunks=(3, 2))
    y = x.map_blocks(lambda b: b[:1, :1], chunks=(1, 1))
    assert y.chunks == ((1,) * x.numblocks[0], (1,) * x.numblocks[1])
    np.testing.assert_array_equal(y.compute(), A[::3, ::2])
    same = x.map_blocks(lambda b: b[:1, :1], chunks=((1,) * x.numblocks[0],
                                                     (1,) * x.numblocks[1]))
    assert same.chunks == y.chunks
    with pytest.raises(TypeError, match="chunks must be a tuple"):
        x.map_blocks(lambda b: b, chunks=3)
    with pytest.raises(ValueError, match="neither one block's shape"):
        x.map_blocks(lambda b: b, chunks=(1,))
    with pytest.raises(ValueError, match="block grid"):
        x.map_blocks(lambda b: b, chunks=((7,), (5,)))


def test_visualize_draws_the_task_graph(tmp_path):
    x = tg.from_numpy(A, chunks=(4, 3))
    y = (x + 1).sum(axis=0)
    dot = y.visualize(str(tmp_path / "g.dot"))
    text = Path(dot).read_text()
    assert text.startswith("digraph") and "->" in text and "sum" in text
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="graphviz"):
            y.visualize(str(tmp_path / "g.svg"))
    else:
        out = y.visualize(str(tmp_path / "g.svg"))
        assert "<svg" in Path(out).read_text()
    with pytest.raises(ValueError, match=r"\.svg, \.png"):
        y.visualize(str(tmp_path / "g.txt"))


def test_every_public_array_method_has_a_docstring():
    missing = [name for name, member in inspect.getmembers(tg.Array)
               if not name.startswith("_") and (callable(member) or isinstance(member, property))
               and not (getattr(member, "__doc__", None) or "").strip()]
    assert not missing, missing


def test_where_of_a_condition_alone_is_nonzero_and_scheduler_is_taken():
    """NumPy's one-argument where (the indices where a condition holds, uneven blocks), and
    dask's compute(scheduler=...) taken as tilegraph's backend, a meaningless one refused
    by name."""
    a = np.array([[0, 3, 0], [5, 6, 0], [0, 0, 7], [1, 0, 0]])
    x = tg.from_numpy(a, chunks=(3, 2))
    for got in (np.where(x > 2), tg.where(x > 2)):
        assert len(got) == 2
        for g, w in zip(got, np.where(a > 2), strict=True):
            np.testing.assert_array_equal(g.compute(), w)
    with pytest.raises(TypeError, match="give both x and y"):
        tg.where(x > 2, x)
    assert x.sum().compute(scheduler="threads") == a.sum()
    with pytest.raises(ValueError, match="scheduler='gpu' has no meaning in tilegraph"):
        x.sum().compute(scheduler="gpu")


def test_per_axis_auto_chunks_as_dask_takes_them():
    """``(-1, "auto")``: whole columns, as many per block as fit about 128 MiB; an "auto" axis
    beside fixed ones in a dict too; the swap of coiled's rechunk benchmark, small."""
    from tilegraph.array.chunks import AUTO_BLOCK_BYTES, normalize_chunks

    chunks = normalize_chunks((-1, "auto"), (4096, 10000), "float64")
    assert chunks[0] == (4096,)
    assert 4096 * max(chunks[1]) * 8 <= AUTO_BLOCK_BYTES < 4096 * (max(chunks[1]) + 1) * 8
    assert sum(chunks[1]) == 10000
    assert normalize_chunks({0: "auto"}, (100, 50), "float64") == ((100,), (50,))
    with pytest.raises(TypeError, match="'auto'"):
        normalize_chunks(("auto", "bogus"), (10, 10))
    a = np.random.default_rng(0).random((300, 200))
    x = tg.from_numpy(a, chunks=(-1, "auto")) + 0
    y = x.rechunk(("auto", -1), max_mem=40_000)  # staged: each old block a column strip
    np.testing.assert_array_equal(y.compute(), a)
    assert float(y.sum().compute()) == pytest.approx(a.sum())


def test_default_rng_hands_out_new_arrays_reproducibly_as_dask_does():
    g = tg.random.default_rng(3)
    a, b = g.random((5, 4), chunks=2), g.random((5, 4), chunks=2)
    again = tg.random.default_rng(3)
    np.testing.assert_array_equal(again.random((5, 4), chunks=2).compute(), a.compute())
    assert not np.array_equal(a.compute(), b.compute())
    assert a.chunks == ((2, 2, 1), (2, 2))
    ints = g.integers(10, size=(600,), chunks=100).compute()
    assert ints.min() >= 0 and ints.max() < 10 and ints.dtype == np.int64
    normal = g.normal(5.0, 2.0, size=(20000,)).compute()
    assert abs(normal.mean() - 5.0) < 0.1 and abs(normal.std() - 2.0) < 0.1
    assert g.standard_normal((2, 2), dtype=np.float32).dtype == np.float32
    u = g.uniform(1.0, 2.0, size=(100,)).compute()
    assert u.min() >= 1.0 and u.max() < 2.0
    # a SeedSequence or another Generator seeds one too
    tg.random.default_rng(np.random.SeedSequence(5)).random((3,)).compute()
    tg.random.default_rng(g).random((3,)).compute()


def test_default_rng_rejects_bad_input(forbid_compute):
    g = tg.random.default_rng(1)
    assert g.random().shape == ()  # size=None: one value, a 0-d array (as dask's)
    with pytest.raises(TypeError, match="out= is not supported"):
        g.random((2,), out=np.zeros(2))
    with pytest.raises(TypeError, match="non-negative int"):
        tg.random.default_rng(-1)
    with pytest.raises(TypeError, match="float32 or float64"):
        g.random((2,), dtype=np.int32)


@pytest.mark.parametrize("k", [3, -2, 1, 13])
@pytest.mark.parametrize("axis", [1, 0, -1])
@pytest.mark.parametrize("dtype", [np.float64, np.uint8, np.int32])
def test_topk_and_argtopk_as_dask(k, axis, dtype):
    a = np.random.default_rng(0).permutation(7 * 13).reshape(7, 13).astype(dtype)
    if abs(k) > a.shape[axis]:
        return
    x = tg.from_numpy(a, chunks=(3, 4))  # uneven edge blocks
    s = np.sort(a, axis=axis)
    want = np.flip(s, axis=axis).take(range(k), axis=axis) if k > 0 else s.take(
        range(-k), axis=axis)
    got = x.topk(k, axis=axis)
    assert got.dtype == a.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.compute(), want)
    index = tg.argtopk(x, k, axis=axis).compute()
    np.testing.assert_array_equal(np.take_along_axis(a, index, axis=axis), want)


def test_topk_rejects_bad_input(forbid_compute):
    x = tg.from_numpy(np.arange(10.0), chunks=3)
    with pytest.raises(ValueError, match="k must not be 0"):
        tg.topk(x, 0)
    with pytest.raises(ValueError, match="larger than axis 0"):
        tg.topk(x, 11)
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        tg.argtopk(x, 2, axis=1)


def test_vindex_picks_points_as_dask():
    a = np.arange(5 * 6 * 4).reshape(5, 6, 4)
    x = tg.from_numpy(a, chunks=(2, 4, 3))
    np.testing.assert_array_equal(x.vindex[[0, 2, 4], [1, 1, 5]].compute(),
                                  a[[0, 2, 4], [1, 1, 5]])
    # the broadcast point axes come first, then the axes taken whole
    got = x.vindex[:, [0, 2], [1, 3]]
    assert got.shape == (2, 5)
    np.testing.assert_array_equal(got.compute(), np.moveaxis(a, 0, -1)[[0, 2], [1, 3]])
    i = np.array([[0, 1], [2, 3]])
    np.testing.assert_array_equal(x.vindex[i, 0].compute(), a[i, 0])
    with pytest.raises(IndexError, match="only ':' slices"):
        x.vindex[1:3, [0, 1]]
    with pytest.raises(IndexError, match="at least one integer array"):
        x.vindex[:, :]
    with pytest.raises(IndexError, match="too many indices"):
        x.vindex[[0], [0], [0], [0]]


@pytest.mark.parametrize(("func", "axis"), [
    (np.sum, 1), (np.cumsum, 0), (lambda v: np.outer(v[:2], v[:3]), 2), (lambda v: v[::2], -1),
    (np.argmax, 2),
])
def test_apply_along_axis_matches_numpy(func, axis):
    a = np.random.default_rng(0).random((6, 7, 5))
    x = tg.from_numpy(a, chunks=(4, 3, 2))
    got, want = np.apply_along_axis(func, axis, x), np.apply_along_axis(func, axis, a)
    assert isinstance(got, tg.Array) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.compute(), want)
    # dask's shape= and dtype= skip the probe call
    given = tg.apply_along_axis(np.sum, 0, x, shape=(), dtype=np.float32)
    assert given.dtype == np.float32 and given.shape == (7, 5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_apply_along_axis_passes_array_arguments_whole(dtype):
    # xarray's polyfit: each column solved against one design matrix given as an argument
    rng = np.random.default_rng(14)
    a = rng.random((9, 7)).astype(dtype)
    design = np.vander(np.linspace(0, 1, 9), 3).astype(dtype)
    x = tg.from_numpy(a, chunks=(4, 3))
    m = tg.from_numpy(design, chunks=(4, 2))

    def fit(v, X, rcond=None):
        if not isinstance(X, np.ndarray):  # whole, as NumPy, never a lazy array
            raise TypeError(f"func1d got a {type(X).__name__}")
        return np.linalg.lstsq(X, v, rcond=rcond)[0]

    want = np.apply_along_axis(fit, 0, a, design)
    for given in ({}, {"shape": (3,), "dtype": dtype}):
        got = np.apply_along_axis(fit, 0, x, m, **given)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got.compute(), want, rtol=1e-4)
    # NumPy values and tilegraph arrays may be mixed among the arguments
    got = tg.apply_along_axis(lambda v, w, s: (v * w).sum() + s, 0, x, m[:, 0], 2.0)
    np.testing.assert_allclose(got.compute(), (a * design[:, :1]).sum(0) + 2.0, rtol=1e-5)


def test_apply_along_axis_rejects_bad_input(forbid_compute):
    x = tg.from_numpy(np.ones((3, 4)), chunks=2)
    with pytest.raises(TypeError, match="not callable"):
        tg.apply_along_axis(3, 0, x)
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        tg.apply_along_axis(np.sum, 2, x)


def test_a_plan_of_many_tiny_blocks_warns_and_suggests_a_chunk_size(monkeypatch):
    from tilegraph.array import lowering

    monkeypatch.setattr(lowering, "TINY_TASKS", 500)
    x = tg.ones((2000,), chunks=2)  # 1000 blocks of 16 bytes
    with pytest.warns(lowering.PerformanceWarning, match=r"chunks='auto'"):
        assert x.sum().compute() == 2000
    big = tg.ones((2000, 50), chunks=(2, 50))  # 1000 blocks of 800 bytes: still tiny
    with pytest.warns(lowering.PerformanceWarning, match="tasks whose blocks average"):
        big.sum().compute()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", lowering.PerformanceWarning)
        tg.ones((2000,), chunks=1000).sum().compute()  # few tasks: no warning
