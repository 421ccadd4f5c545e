"""transpose/.T/swapaxes, reshape, rechunk, concatenate and stack against NumPy, over uneven
blocks, 0-size and 0-d arrays; bad input fails at build time."""

from __future__ import annotations

import gc
import itertools
import math
import re
import time

import numpy as np
import pytest
from _blocked import axis_chunks, block_values, check, make
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays

SETTINGS = settings(max_examples=120, deadline=None)
DTYPES = ["int8", "int64", "uint16", "float32", "float64", "complex128", "bool"]
AxisError = np.exceptions.AxisError


# -- helpers ------------------------------------------------------------------------------




def chunks_for(shape: tuple[int, ...]):
    return st.tuples(*[axis_chunks(n) for n in shape])


@st.composite
def arrays(draw, min_dims: int = 1, max_dims: int = 4, max_side: int = 5, dtype=None):
    shape = tuple(draw(st.lists(st.integers(0, max_side), min_size=min_dims,
                                max_size=max_dims)))
    chunks = draw(chunks_for(shape))
    x = make(shape, dtype or draw(st.sampled_from(DTYPES)))
    return x, tg.from_numpy(x, chunks=chunks)


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def new_shapes(draw, size: int):
    """A shape of ``size`` elements (the size's prime factors dealt out to 0-5 axes, so
    axes merge, split, and gain or lose length 1), with one length replaced by -1 at
    times."""
    if size == 0:
        shape = draw(st.lists(st.integers(0, 4), min_size=1, max_size=4))
        shape[draw(st.integers(0, len(shape) - 1))] = 0
    else:
        factors = _prime_factors(size)
        nd = draw(st.integers(1 if factors else 0, 5))
        shape = [1] * nd
        for f in factors:
            shape[draw(st.integers(0, nd - 1))] *= f
    if shape and draw(st.booleans()):
        shape[draw(st.integers(0, len(shape) - 1))] = -1
    return tuple(shape)


# -- transpose, .T, swapaxes --------------------------------------------------------------


@SETTINGS
@given(data=st.data(), xa=arrays(min_dims=0))
def test_transpose_matches_numpy(data, xa):
    x, a = xa
    nd = x.ndim
    perm = data.draw(st.permutations(range(nd)), label="perm")
    signs = data.draw(st.lists(st.booleans(), min_size=nd, max_size=nd), label="negative")
    axes = tuple(p - nd if neg else p for p, neg in zip(perm, signs, strict=True))
    expected = x.transpose(axes)
    out = a.transpose(axes)
    assert out.chunks == tuple(a.chunks[p] for p in perm)
    check(out, expected)
    check(tg.transpose(a, axes), expected)
    if nd:
        check(a.transpose(*axes), expected)
    check(a.T, x.T)
    check(tg.transpose(a), np.transpose(x))
    check(a.T.T, x)


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_swapaxes_matches_numpy(data, xa):
    x, a = xa
    nd = x.ndim
    i = data.draw(st.integers(-nd, nd - 1), label="i")
    j = data.draw(st.integers(-nd, nd - 1), label="j")
    check(a.swapaxes(i, j), x.swapaxes(i, j))
    check(tg.swapaxes(a, i, j), np.swapaxes(x, i, j))


@pytest.mark.parametrize(
    ("axes", "error", "pattern"),
    [
        ((0, 1, 3), AxisError, r"axis 3 .*\(2, 3, 4\)"),
        ((0, 1, 5), AxisError, r"axis 5 .*\(2, 3, 4\)"),
        ((0, -4, 1), AxisError, r"axis -4 .*\(2, 3, 4\)"),
        ((0, 0, 1), ValueError, r"\(0, 0, 1\).*\(2, 3, 4\)"),
        ((0, 2, -1), ValueError, r"\(0, 2, -1\).*\(2, 3, 4\)"),
        ((0, 1), ValueError, r"\(0, 1\).*\(2, 3, 4\)"),
        ((0, 1, 2, 3), ValueError, r"\(0, 1, 2, 3\).*\(2, 3, 4\)"),
    ],
    ids=str,
)
def test_bad_transpose_axes_raise(forbid_compute, axes, error, pattern):
    x = make((2, 3, 4))
    a = tg.from_numpy(x, chunks=2)
    with pytest.raises(error):
        x.transpose(axes)
    with pytest.raises(error, match=pattern):
        a.transpose(axes)
    with pytest.raises(error, match=pattern):
        tg.transpose(a, axes)


def test_transpose_method_accepts_an_array_of_axes():
    x = make((2, 3, 4))
    a = tg.from_numpy(x, chunks=2)
    check(a.transpose(np.array([2, 0, 1])), x.transpose(np.array([2, 0, 1])))


@pytest.mark.parametrize(("i", "j"), [(0, 3), (-4, 1), (2, -5)], ids=str)
def test_bad_swapaxes_raise_axis_error(forbid_compute, i, j):
    x = make((2, 3, 4))
    with pytest.raises(AxisError):
        x.swapaxes(i, j)
    with pytest.raises(AxisError, match=r"\(2, 3, 4\)"):
        tg.from_numpy(x, chunks=2).swapaxes(i, j)


# -- rechunk -------------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_rechunk_between_uneven_chunkings(data, xa):
    x, a = xa
    new = data.draw(chunks_for(x.shape), label="new")
    out = a.rechunk(new)
    assert out.chunks == new
    check(out, x)
    back = out.rechunk(a.chunks)  # and the other way
    assert back.chunks == a.chunks
    check(back, x)
    check(tg.rechunk(a, new), x)


def _split(sizes: tuple[int, ...], draw) -> tuple[int, ...]:
    out: list[int] = []
    for s in sizes:
        cut = draw(st.integers(0, s))
        out.extend(p for p in (cut, s - cut) if p) if s else out.append(0)
    return tuple(out) or (0,)


def _merge(sizes: tuple[int, ...], draw) -> tuple[int, ...]:
    out = [sizes[0]]
    for s in sizes[1:]:
        if draw(st.booleans()):
            out[-1] += s
        else:
            out.append(s)
    return tuple(out)


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_rechunk_splitting_and_merging(data, xa):
    """Finer blocks (each new block a view of one old block) and coarser ones (each new
    block assembled from several), and back."""
    x, a = xa
    finer = tuple(_split(c, data.draw) for c in a.chunks)
    coarser = tuple(_merge(c, data.draw) for c in a.chunks)
    for new in (finer, coarser):
        out = a.rechunk(new)
        assert out.chunks == new
        check(out, x)
        back = out.rechunk(a.chunks)
        assert back.chunks == a.chunks
        check(back, x)


@SETTINGS
@given(xa=arrays(min_dims=0))
def test_rechunk_to_one_block_and_auto(xa):
    x, a = xa
    one = a.rechunk(-1)
    assert one.chunks == tuple((n,) for n in x.shape)
    assert one.npartitions == 1
    check(one, x)
    auto = a.rechunk("auto")
    # small arrays fit in one ~128 MiB block
    assert auto.chunks == tuple((n,) for n in x.shape)
    check(auto, x)
    per_axis = a.rechunk(tuple(-1 for _ in x.shape))
    assert per_axis.chunks == one.chunks
    check(per_axis, x)


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_rechunk_to_a_block_size(data, xa):
    x, a = xa
    step = data.draw(st.integers(1, 6), label="step")
    out = a.rechunk(step)
    for n, c in zip(x.shape, out.chunks, strict=True):
        assert c == ((step,) * (n // step) + ((n % step,) if n % step else ()) or (0,))
    check(out, x)


def test_rechunk_auto_cuts_a_big_array_lazily(forbid_compute):
    a = tg.zeros((8192, 8192), chunks=(1000, 8192))  # 512 MiB: more than one auto block
    auto = a.rechunk("auto")
    assert auto.shape == a.shape
    assert auto.npartitions > 1
    assert all(sum(c) == n for c, n in zip(auto.chunks, a.shape, strict=True))
    assert math.prod(auto.chunksize) * 8 <= 128 * 2**20  # dask's array.chunk-size


def test_rechunk_with_a_dict_of_axes():
    x = make((5, 4, 3))
    a = tg.from_numpy(x, chunks=2)
    out = a.rechunk({0: (1, 4), -1: 2, 1: -1})
    assert out.chunks == ((1, 4), (4,), (2, 1))
    check(out, x)


def test_rechunk_to_the_same_chunks_is_the_same_array():
    a = tg.from_numpy(make((5, 4)), chunks=((2, 3), (1, 3)))
    assert a.rechunk(((2, 3), (1, 3))) is a


@pytest.mark.parametrize(
    "chunks",
    [((2, 2), (4,)), ((5,), (4,), (1,)), ((5,),), ((6, -1), (4,)), 0],
    ids=str,
)
def test_bad_rechunk_raises_value_error(forbid_compute, chunks):
    a = tg.from_numpy(make((5, 4)), chunks=2)
    with pytest.raises(ValueError, match=r"\(5, 4\)"):
        a.rechunk(chunks)


def _graph(arr: tg.Array, **options):
    """``arr``'s graph lowered for a run of one process with ``options``."""
    opts = tg.config.per_process(tg.config.resolve(options, "test"), 1)
    return tg.algebra.lower([arr.collection], options=opts).build()


def _task_needs(arr: tg.Array) -> list[int]:
    """Bytes each task of ``arr``'s graph holds: its inputs and its output."""
    graph = _graph(arr)
    nb = graph.meta["nbytes"]
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    return [(nb[i] or 0) + sum(nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]])
            for i in range(len(graph))]


@pytest.mark.parametrize("dtype", ["float32", "int16", "complex128", "bool"])
def test_staged_rechunk_time_blocks_to_space_blocks(dtype):
    """The all-to-all of climate data (time blocks to space blocks, uneven edges): under a
    small ``max_mem`` every stage appears, each task holds at most ``max_mem``, no task
    reads every source block, and the values are NumPy's."""
    from tilegraph.array.rechunking import plan_rechunk

    x = make((41, 13, 17), dtype)
    a = tg.from_numpy(x, chunks=(1, 13, 17)) + np.zeros((), dtype)  # one-step time blocks
    budget = 64 * 13 * 17 // 2 * x.itemsize  # holds about half the array
    out = a.rechunk((41, 3, 4), max_mem=budget)
    stages = [name for name, _ in plan_rechunk(a.chunks, out.chunks, x.itemsize,
                                               budget).stages]
    assert stages == ["rechunk-gather", "rechunk-split", "rechunk-merge", "rechunk"]
    assert out.chunks == ((41,), (3, 3, 3, 3, 1), (4, 4, 4, 4, 1))
    check(out, x)
    needs = _task_needs(out)
    assert max(needs) <= budget
    one_stage = a.rechunk((41, 3, 4), max_mem=10**9)
    assert max(_task_needs(one_stage)) > budget  # each new block reads all 41 blocks


def _staging_dirs(parent) -> list[str]:
    return [p.name for p in parent.iterdir() if p.name.startswith("tilegraph-spill-")]


@pytest.mark.parametrize("limit", ["40KB", "64KB"])
@pytest.mark.parametrize("dtype", ["float32", "int16", "complex128", "bool"])
def test_staged_rechunk_runs_through_its_store_under_a_small_memory_limit(limit, dtype,
                                                                          tmp_path):
    """An array larger than half the limit: each time block writes its pieces to the
    intermediate store once and each space block reads its own; nothing is spilled or
    refused, the result is NumPy's, and the store's files are gone after the run."""
    steps = 240 * 1024 // (21 * 22 * np.dtype(dtype).itemsize)  # 240 KiB
    x = make((steps, 21, 22), dtype)
    with tg.config.set(memory_limit=limit, spill_dir=str(tmp_path)):
        rows = max(1, 8192 // (21 * 22 * x.itemsize))  # time blocks of at most 8 KiB
        a = tg.from_numpy(x, chunks=(rows, 21, 22)) + np.zeros((), dtype)  # not views
        out = a.rechunk((steps, 5, 5))
        got = out.compute()
    np.testing.assert_array_equal(got, x)
    run = tg.last_run()
    assert run.memory_limit == tg.util.parse_bytes(limit)
    assert run.peak_bytes <= run.memory_limit
    assert run.spilled_bytes == 0 and run.recomputed_bytes == 0
    assert run.staged_bytes == x.nbytes  # every byte written once
    assert "staged on disk" in str(run)
    assert _staging_dirs(tmp_path) == []


def test_compute_memory_limit_chooses_where_a_staged_rechunk_waits(tmp_path):
    """The same rechunk, built once: in memory for a run with room, through the store on
    disk for a run whose limit is smaller than twice the array (``compute(memory_limit=)``
    decides, as the ``memory_limit`` option does)."""
    x = make((48, 10, 12), "float64")  # 45 KiB
    a = tg.from_numpy(x, chunks=(3, 10, 12)) + 0
    out = a.rechunk((48, 2, 3), max_mem="16KB")
    names = {"1MB": "rechunk-split", "60KB": "rechunk-store"}
    for limit, stage in names.items():
        got = out.compute(memory_limit=limit, spill_dir=str(tmp_path))
        np.testing.assert_array_equal(got, x)
        assert (tg.last_run().staged_bytes > 0) == (stage == "rechunk-store")
        assert stage in _names(out, memory_limit=limit)
        with tg.config.set(memory_limit=limit):  # the option in force when it runs
            np.testing.assert_array_equal(out.compute(spill_dir=str(tmp_path)), x)
        assert (tg.last_run().staged_bytes > 0) == (stage == "rechunk-store")
    assert _staging_dirs(tmp_path) == []


def test_compute_spill_dir_is_where_a_staged_rechunk_stores(tmp_path, monkeypatch):
    """``compute(spill_dir=...)`` puts the rechunk's intermediate store there, as the
    ``spill_dir`` option does."""
    from tilegraph.io import staging

    parents = []
    original = staging.stage_pieces

    def spied(block, cuts, parent):
        parents.append(parent)
        return original(block, cuts, parent)

    monkeypatch.setattr(staging, "stage_pieces", spied)
    x = make((48, 10, 12), "float64")
    out = (tg.from_numpy(x, chunks=(3, 10, 12)) + 0).rechunk((48, 2, 3), max_mem="16KB")
    np.testing.assert_array_equal(out.compute(memory_limit="60KB", spill_dir=tmp_path), x)
    assert parents and set(parents) == {str(tmp_path)}
    assert _staging_dirs(tmp_path) == []


def test_rechunk_store_is_cleaned_when_the_run_fails(tmp_path):
    """A task failing after the pieces were stored: the error is the task's, and no file or
    directory of the store is left."""
    x = make((40, 8, 8), "float64")
    a = tg.from_numpy(x, chunks=(2, 8, 8)) + 0

    def boom(block):
        if block.shape[1] == 2:
            raise RuntimeError("boom in a space block")
        return block

    out = a.rechunk((40, 2, 8), max_mem="16KB").map_blocks(boom)
    with pytest.raises(RuntimeError, match="boom in a space block"):
        out.compute(memory_limit="30KB", spill_dir=str(tmp_path))
    assert "rechunk-store" in _names(out, memory_limit="30KB")
    # the error's traceback holds the failed task's frame (its inputs are staged handles)
    # in a reference cycle: the files go with it; a task the failure caught running
    # finishes on its own (it holds its inputs until then)
    deadline = time.monotonic() + 10
    gc.collect()
    while _staging_dirs(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
        gc.collect()
    assert _staging_dirs(tmp_path) == []


def test_staged_pieces_travel_with_their_bytes(tmp_path):
    """A handle sent to another process carries its pieces, and the process that receives
    it writes them to its own store (under the same spill_dir): it holds a handle of a few
    bytes, not the pieces; each file goes with its handle; a piece of a non-contiguous cut
    reads back equal."""
    import gc
    import os
    import pickle

    from tilegraph.io.staging import HANDLE_BYTES, StagedPieces, load_pieces, stage_pieces

    x = make((6, 9), "int64")
    cuts = ((slice(0, 6), slice(0, 4)), (slice(0, 6), slice(4, 9)))
    starts = (0, 6 * 4 * 8)  # bytes: the first piece is 6 x 4
    h = stage_pieces(x, cuts, str(tmp_path))
    assert h.stored_bytes == x.nbytes and h.nbytes == HANDLE_BYTES
    payload = pickle.dumps(h)
    assert len(payload) > x.nbytes  # the bytes travel, not the path
    moved = pickle.loads(payload)
    assert isinstance(moved, StagedPieces) and moved.nbytes == h.nbytes
    assert moved.path != h.path and os.path.dirname(os.path.dirname(moved.path)) == str(
        tmp_path)
    assert os.path.getsize(moved.path) == x.nbytes
    os.remove(h.path)  # the copy reads its own file
    np.testing.assert_array_equal(moved.piece(starts[1], (6, 5)), x[cuts[1]])
    h = stage_pieces(x, cuts, str(tmp_path))
    for start, cut in zip(starts, cuts, strict=True):
        np.testing.assert_array_equal(h.piece(start, x[cut].shape), x[cut])
        np.testing.assert_array_equal(moved.piece(start, x[cut].shape), x[cut])
    back = load_pieces((6, 9), x.dtype, ((0, starts[1], (6, 5), (slice(None), slice(4, 9))),
                                         (1, 0, (6, 4), (slice(None), slice(0, 4)))), moved, h)
    np.testing.assert_array_equal(back, x)
    path = h.path
    assert path is not None and os.path.exists(path)
    del h, moved, back
    gc.collect()
    assert _staging_dirs(tmp_path) == []


def test_a_received_handle_is_stored_in_the_temp_dir_when_its_spill_dir_is_not_here(
        tmp_path, monkeypatch):
    """The spill_dir of the process that sent a handle does not exist where it arrives:
    its pieces go to the temp directory there, readable, and removed with the handle."""
    import gc
    import os
    import pickle
    import shutil
    import tempfile

    from tilegraph.io.staging import stage_pieces

    x = make((5, 7), "float32")
    sender = tmp_path / "sender"
    sender.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(here))
    payload = pickle.dumps(stage_pieces(x, ((slice(0, 5), slice(0, 7)),), str(sender)))
    shutil.rmtree(sender)
    gc.collect()
    moved = pickle.loads(payload)
    assert moved.path.startswith(str(here)) and moved.parent is None
    np.testing.assert_array_equal(moved.piece(0, (5, 7)), x)
    del moved
    gc.collect()
    assert _staging_dirs(here) == [] and os.listdir(here) == []


def test_a_missing_store_file_is_an_error_naming_it(tmp_path):
    import os

    from tilegraph.io.staging import stage_pieces

    h = stage_pieces(make((4, 4), "float64"), ((slice(0, 4), slice(0, 4)),), str(tmp_path))
    with open(h.path, "r+b") as f:
        f.truncate(8)
    with pytest.raises(OSError, match=re.escape(os.path.basename(h.path))):
        h.piece(0, (4, 4))


def test_rechunk_budget_follows_the_run_s_memory_limit():
    """One rechunk, made once outside any run: one stage under the default budget, staged
    for a run under a small memory_limit (given to compute() or set when it runs, not when
    the rechunk was made), whose one-stage tasks would not fit it."""
    x = make((40, 12, 12), "float64")  # 45 KiB
    a = tg.from_numpy(x, chunks=(2, 12, 12)) + 0
    with tg.config.set(memory_limit="1KB"):  # in force when it is made: no effect
        out = a.rechunk((40, 2, 2))
    assert _names(out) == {"_view", "add", "rechunk"}
    assert "rechunk-split" in _names(out, memory_limit="100KB")
    assert "rechunk-store" in _names(out, memory_limit="30KB")
    with pytest.raises(tg.MemoryLimitError):  # the one-stage task: 45 KiB of inputs
        (a.rechunk((40, 2, 2), max_mem="1MB") + 0).compute(memory_limit="30KB")
    np.testing.assert_array_equal(out.compute(memory_limit="30KB"), x)
    assert 0 < tg.last_run().peak_bytes <= tg.util.parse_bytes("30KB")
    with tg.config.set(memory_limit="100KB"):
        np.testing.assert_array_equal(out.compute(), x)
    assert tg.last_run().memory_limit == 100_000 and tg.last_run().staged_bytes == 0
    check(out, x)


def _names(arr: tg.Array, **options) -> set[str]:
    graph = _graph(arr, **options)
    return {graph.opname(i) for i in range(len(graph))}


@pytest.mark.parametrize("max_mem, error, match", [
    (0, ValueError, "max_mem must be positive"),
    (-5, ValueError, "max_mem must be positive"),
    ("lots", ValueError, "lots"),
    (True, TypeError, "max_mem must be a size"),
    (2.5, TypeError, "max_mem must be a size"),
    (50, ValueError, r"more than max_mem=50 B.*larger max_mem"),
])
def test_bad_max_mem_is_refused(forbid_compute, max_mem, error, match):
    a = tg.from_numpy(make((8, 8)), chunks=(1, 8)) + 0
    with pytest.raises(error, match=match):
        a.rechunk((8, 1), max_mem=max_mem)
    with pytest.raises(error, match=match):
        tg.rechunk(a, (8, 1), max_mem=max_mem)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), xa=arrays(min_dims=1))
def test_staged_rechunk_of_any_chunks_under_any_budget(data, xa):
    """Whatever the blocks and the budget: NumPy's values, and when staged, no task holds
    more than the one-stage plan's largest."""
    from tilegraph.array.rechunking import direct_need, plan_rechunk, smallest_limit

    x, a = xa
    a = a + np.zeros((), a.dtype)  # blocks that are results, not views of one array
    new = data.draw(chunks_for(x.shape), label="new")
    budget = data.draw(st.integers(1, max(2, 3 * x.nbytes)), label="budget")
    plan = plan_rechunk(a.chunks, new, x.itemsize, budget)  # for no run: in memory
    assert plan.stages[-1] == ("rechunk", new)
    assert all(name != "rechunk-store" for name, _ in plan.stages)
    sizes = [a.chunks, *(c for _, c in plan.stages)]
    staged = max(direct_need(p, q, x.itemsize) for p, q in itertools.pairwise(sizes))
    # (the plan's need counts the chains fusion makes of a stage and the next, too)
    assert staged <= plan.need <= direct_need(a.chunks, new, x.itemsize)
    out = a.rechunk(new)
    assert out.chunks == new
    check(out, x)
    limit = max(4 * budget, smallest_limit(a.chunks, new, x.itemsize))  # else refused
    for coord, value in block_values(out, memory_limit=limit).items():  # as staged
        assert_array_equal(value, x[tg.array.chunks.block_slices(new, coord)])


# -- reshape -------------------------------------------------------------------------------


@settings(max_examples=250, deadline=None)
@given(data=st.data(), xa=arrays(min_dims=0))
def test_reshape_matches_numpy(data, xa):
    x, a = xa
    shape = data.draw(new_shapes(x.size), label="shape")
    try:
        expected = np.reshape(x, shape)
    except ValueError:
        with pytest.raises(ValueError):
            a.reshape(shape)
        return
    check(a.reshape(shape), expected)
    check(tg.reshape(a, shape), expected)
    if shape:
        check(a.reshape(*shape), expected)


@SETTINGS
@given(data=st.data(), xa=arrays())
def test_reshape_then_back(data, xa):
    x, a = xa
    shape = data.draw(new_shapes(x.size), label="shape")
    assume(-1 not in shape or x.size)
    y = a.reshape(shape)
    check(y.reshape(x.shape), x)
    check(y.ravel(), x.ravel())


@pytest.mark.parametrize(
    ("shape", "chunks", "new"),
    [
        ((4, 6), ((1, 3), (2, 4)), (24,)),  # merge all
        ((4, 6), ((1, 3), (2, 4)), (4, 2, 3)),  # split the last axis
        ((2, 3, 4), ((1, 1), (2, 1), (1, 3)), (6, 4)),  # merge leading axes
        ((2, 3, 4), ((1, 1), (2, 1), (1, 3)), (2, 12)),  # merge trailing axes
        ((2, 3, 4), ((1, 1), (2, 1), (1, 3)), (4, 3, 2)),  # neither
        ((12,), ((5, 7),), (3, 4)),
        ((12,), ((1,) * 12,), (2, 2, 3)),
        ((12,), ((5, 0, 7),), (-1, 6)),
        ((3, 4), ((2, 1), (2, 2)), (1, 3, 1, 4, 1)),  # add length-1 axes
        ((1, 3, 1, 4, 1), ((1,), (2, 1), (1,), (3, 1), (1,)), (3, 4)),  # remove them
        ((5, 1), ((2, 3), (1,)), (1, 5)),
        ((), (), (1, 1)),  # from 0-d
        ((), (), (-1,)),
        ((1, 1), ((1,), (1,)), ()),  # to 0-d
        ((1,), ((0, 1),), ()),
        ((1,), ((1,),), (1, 1, 1)),
        ((0, 3), ((0,), (2, 1)), (3, 0)),  # 0-size
        ((0, 3), ((0, 0), (2, 1)), (-1,)),
        ((2, 0, 3), ((1, 1), (0,), (1, 2)), (0, 6)),
        ((4, 0), ((2, 2), (0,)), (2, 0, 2)),
        ((6, 4), ((4, 2), (3, 1)), (6, 4)),  # unchanged
        ((6, 4), ((4, 2), (3, 1)), (6, 2, 2)),  # leading axis keeps its blocks
        ((6, 4), ((4, 2), (3, 1)), (3, 8)),
        ((6, 4), ((4, 2), (3, 1)), (8, 3)),
    ],
    ids=str,
)
def test_reshape_cases(shape, chunks, new):
    x = make(shape, "int64")
    a = tg.from_numpy(x, chunks=chunks)
    expected = x.reshape(new)
    check(a.reshape(new), expected)
    check(tg.reshape(a, new), expected)


def test_reshape_keeps_leading_blocks():
    a = tg.from_numpy(make((6, 4)), chunks=((4, 2), (3, 1)))
    assert a.reshape(6, 2, 2).chunks[0] == (4, 2)
    assert a.reshape(6, 4) is a


@pytest.mark.parametrize("dtype", ["float32", "int16", "complex128"])
@pytest.mark.parametrize("shape, chunks, new, kept", [
    ((12, 5), ((1,) * 12, (5,)), (4, 3, 5), ((1,) * 4, (1, 1, 1), (5,))),
    ((12, 5), ((1,) * 12, (2, 2, 1)), (4, 3, 5), ((1,) * 4, (1, 1, 1), (2, 2, 1))),
    ((12, 5), ((1, 2) * 4, (5,)), (4, 3, 5), ((1,) * 4, (1, 2), (5,))),
    ((2, 12, 5), ((1, 1), (1,) * 12, (3, 2)), (2, 4, 3, 5),
     ((1, 1), (1,) * 4, (1, 1, 1), (3, 2))),
    ((12,), ((1,) * 12,), (3, 4), ((1, 1, 1), (1,) * 4)),
    ((12, 5), ((1,) * 12, (5,)), (1, 12, 5), ((1,), (1,) * 12, (5,))),
    ((12, 5), ((2,) * 6, (5,)), (4, 3, 5), None),  # blocks cross the rows of 3: gathered
    ((12, 5), ((1, 2) * 4, (5,)), (3, 4, 5), None),  # rows cut differently: gathered
], ids=str)
def test_splitting_an_axis_keeps_the_blocks_that_fall_in_its_rows(shape, chunks, new, kept,
                                                                    dtype):
    # one-row blocks of (T, X) reshaped to (T // g, g, X) (coiled's array anomaly): each
    # block a view of one input block, nothing gathered; otherwise the rows are gathered
    x = make(shape, dtype)
    a = tg.from_numpy(x, chunks=chunks)
    y = a.reshape(new)
    check(y, x.reshape(new))
    if kept is None:
        assert y.chunks[-2] == (new[-2],)  # whole rows of the inner axis
    else:
        assert y.chunks == kept and y.npartitions == a.npartitions
        r = tg.random.random(shape, chunks=chunks, seed=1).reshape(new)
        assert "rechunk" not in plan_arrays([r], fuse=False).graph.meta["name"]


def test_reshape_method_accepts_an_array_as_the_shape():
    x = make((2, 3))
    a = tg.from_numpy(x, chunks=1)
    check(a.reshape(np.array([3, 2])), x.reshape(np.array([3, 2])))


def test_reshape_accepts_an_int_and_numpy_ints():
    x = make((2, 3))
    a = tg.from_numpy(x, chunks=1)
    check(tg.reshape(a, 6), np.reshape(x, 6))
    check(a.reshape(6), x.reshape(6))
    check(tg.reshape(a, np.int64(-1)), np.reshape(x, -1))
    check(a.reshape((np.int64(3), np.int32(2))), x.reshape(3, 2))


@pytest.mark.parametrize(
    "new",
    [(5,), (4, 2), (7, -1), (-1, -1), (-2, -3), (0, -1), (2, 3, 2), (), (-1, 0)],
    ids=str,
)
def test_invalid_reshape_raises_value_error_naming_both_shapes(forbid_compute, new):
    x = make((2, 3))
    a = tg.from_numpy(x, chunks=1)
    with pytest.raises(ValueError):
        x.reshape(new)
    with pytest.raises(ValueError) as info:
        a.reshape(new)
    message = str(info.value)
    assert "(2, 3)" in message
    assert str(tuple(new)) in message


def test_invalid_reshape_of_empty_array(forbid_compute):
    a = tg.from_numpy(np.zeros((0, 3)), chunks=2)
    for new in [(-1, 0), (0, -1), (1,)]:
        with pytest.raises(ValueError, match=r"\(0, 3\)"):
            a.reshape(new)


@pytest.mark.parametrize("new", [(2.5, 2), ("a",), 2.0, (2, None)], ids=str)
def test_reshape_to_a_non_integer_shape_raises_type_error(forbid_compute, new):
    x = make((5, 1))
    with pytest.raises(TypeError):
        np.reshape(x, new)
    with pytest.raises(TypeError, match=r"reshape.*\(5, 1\)"):
        tg.reshape(tg.from_numpy(x, chunks=2), new)


def test_reshape_only_in_c_order(forbid_compute):
    with pytest.raises(ValueError, match="order"):
        tg.from_numpy(make((2, 3)), chunks=1).reshape((3, 2), order="F")


# -- concatenate ---------------------------------------------------------------------------


@st.composite
def concat_inputs(draw):
    nd = draw(st.integers(1, 3))
    base = draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd))
    axis = draw(st.integers(-nd, nd - 1))
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        shape = list(base)
        shape[axis] = draw(st.integers(0, 4))
        x = make(tuple(shape), draw(st.sampled_from(DTYPES)))
        if draw(st.integers(0, 5)) == 0:
            pieces.append((x, x))  # a NumPy array among the inputs
        else:
            pieces.append((x, tg.from_numpy(x, chunks=draw(chunks_for(x.shape)))))
    return pieces, axis


@SETTINGS
@given(inputs=concat_inputs())
def test_concatenate_matches_numpy(inputs):
    pieces, axis = inputs
    xs = [p[0] for p in pieces]
    arrs = [p[1] for p in pieces]
    expected = np.concatenate(xs, axis=axis)
    assert expected.dtype == np.result_type(*xs)
    out = tg.concatenate(arrs, axis=axis)
    check(out, expected)
    # without casts, the result's blocks along the axis are the (non-empty) inputs' blocks
    if all(isinstance(a, tg.Array) and a.dtype == out.dtype for a in arrs):
        along = tuple(c for a in arrs if a.shape[axis] for c in a.chunks[axis])
        assert out.chunks[axis] == (along or arrs[0].chunks[axis])


@settings(max_examples=40, deadline=None)
@given(inputs=concat_inputs())
def test_concatenate_axis_none_flattens(inputs):
    pieces, _ = inputs
    xs = [p[0] for p in pieces]
    check(tg.concatenate([p[1] for p in pieces], axis=None), np.concatenate(xs, axis=None))


def test_concatenate_zero_length_pieces():
    x = make((3, 4), "float32")
    empty = np.zeros((3, 0), dtype="int64")
    a = tg.from_numpy(x, chunks=((1, 2), (3, 1)))
    e = tg.from_numpy(empty, chunks=((2, 1), (0,)))
    for arrs, xs in [([e, a, e], [empty, x, empty]), ([e, e], [empty, empty]),
                     ([a, e], [x, empty]), ([e], [empty])]:
        check(tg.concatenate(arrs, axis=1), np.concatenate(xs, axis=1))
        check(tg.concatenate(arrs, axis=-1), np.concatenate(xs, axis=-1))


@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 2])
def test_concatenate_along_every_axis(axis):
    xs, arrs = [], []
    for length, dtype, chunks in [(3, "int16", (1, 2)), (0, "float32", (0,)),
                                  (4, "uint16", (3, 1)), (1, "complex64", (1,))]:
        shape = [2, 3, 4]
        shape[axis] = length
        cs = [(1, 1), (2, 1), (1, 1, 2)]
        cs[axis] = chunks
        x = make(tuple(shape), dtype)
        xs.append(x)
        arrs.append(tg.from_numpy(x, chunks=tuple(cs)))
    expected = np.concatenate(xs, axis=axis)
    assert expected.dtype == np.result_type(*xs) == np.complex64
    check(tg.concatenate(arrs, axis=axis), expected)


@pytest.mark.parametrize("axis", [-4, -3, -2, -1, 0, 1, 2, 3])
def test_stack_at_every_position(axis):
    x, y = make((2, 0, 3), "int8"), make((2, 0, 3), "bool")
    a = tg.from_numpy(x, chunks=((1, 1), (0,), (2, 1)))
    b = tg.from_numpy(y, chunks=((2,), (0, 0), (3,)))
    check(tg.stack([a, b, a], axis=axis), np.stack([x, y, x], axis=axis))
    x, y = make((2, 1, 3), "int8"), make((2, 1, 3), "float64")
    a = tg.from_numpy(x, chunks=((1, 1), (1,), (2, 1)))
    b = tg.from_numpy(y, chunks=((2,), (1,), (1, 2)))
    check(tg.stack([a, b], axis=axis), np.stack([x, y], axis=axis))


def test_concatenate_drops_empty_pieces_blocks():
    x = make((3, 4))
    a = tg.from_numpy(x, chunks=((1, 2), (3, 1)))
    e = tg.from_numpy(np.zeros((3, 0)), chunks=((3,), (0, 0)))
    out = tg.concatenate([e, a, e, a], axis=1)
    assert out.chunks == ((1, 2), (3, 1, 3, 1))
    check(out, np.concatenate([x[:, :0], x, x[:, :0], x], axis=1))


def test_concatenate_a_single_array():
    x = make((3, 4))
    a = tg.from_numpy(x, chunks=2)
    check(tg.concatenate([a], axis=1), x)


def test_concatenate_mixed_block_sizes_off_axis():
    x, y = make((5, 4)), make((2, 4), "int8")
    a = tg.from_numpy(x, chunks=((5,), (1, 3)))
    b = tg.from_numpy(y, chunks=((1, 1), (2, 1, 1)))
    out = tg.concatenate([a, b, a], axis=0)
    assert out.chunks == ((5, 1, 1, 5), (1, 1, 1, 1))
    check(out, np.concatenate([x, y, x], axis=0))


@pytest.mark.parametrize(
    ("shapes", "axis"),
    [([(2, 3), (2, 4)], 0), ([(2, 3), (3, 3), (2, 4)], 1), ([(2, 3), (2,)], 0),
     ([(2, 3), (2, 3, 1)], 1), ([(0, 3), (1, 2)], 0)],
    ids=str,
)
def test_concatenate_mismatched_shapes_raise_value_error(forbid_compute, shapes, axis):
    xs = [make(s) for s in shapes]
    with pytest.raises(ValueError):
        np.concatenate(xs, axis=axis)
    with pytest.raises(ValueError) as info:
        tg.concatenate([tg.from_numpy(x, chunks=2) for x in xs], axis=axis)
    for s in shapes:
        assert str(s) in str(info.value)


@pytest.mark.parametrize("axis", [2, -3, 7], ids=str)
def test_concatenate_bad_axis_raises_axis_error(forbid_compute, axis):
    xs = [make((2, 3)), make((2, 3))]
    with pytest.raises(AxisError):
        np.concatenate(xs, axis=axis)
    with pytest.raises(AxisError, match=re.escape(str(axis))):
        tg.concatenate([tg.from_numpy(x, chunks=2) for x in xs], axis=axis)


def test_concatenate_needs_arrays_with_axes(forbid_compute):
    with pytest.raises(ValueError, match="at least one"):
        tg.concatenate([])
    with pytest.raises(ValueError, match="zero-dimensional"):
        tg.concatenate([tg.from_numpy(np.array(1.0)), tg.from_numpy(np.array(2.0))])


# -- stack ---------------------------------------------------------------------------------


@st.composite
def stack_inputs(draw):
    nd = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd)))
    axis = draw(st.integers(-nd - 1, nd))
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        x = make(shape, draw(st.sampled_from(DTYPES)))
        pieces.append((x, tg.from_numpy(x, chunks=draw(chunks_for(shape)))))
    return pieces, axis


@SETTINGS
@given(inputs=stack_inputs())
def test_stack_matches_numpy(inputs):
    pieces, axis = inputs
    xs = [p[0] for p in pieces]
    expected = np.stack(xs, axis=axis)
    out = tg.stack([p[1] for p in pieces], axis=axis)
    assert out.chunks[axis] == (1,) * len(pieces)
    check(out, expected)


def test_stack_with_numpy_inputs_and_dtypes():
    x, y = make((3, 2), "int16"), make((3, 2), "float32")
    a = tg.from_numpy(x, chunks=((2, 1), (1, 1)))
    for axis in (-3, -2, -1, 0, 1, 2):
        check(tg.stack([a, y, a], axis=axis), np.stack([x, y, x], axis=axis))


def test_stack_mismatched_shapes_raise_value_error(forbid_compute):
    a = tg.from_numpy(make((2, 3)), chunks=2)
    b = tg.from_numpy(make((3, 2)), chunks=2)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        tg.stack([a, b])
    with pytest.raises(ValueError, match="at least one"):
        tg.stack([])


@pytest.mark.parametrize("axis", [3, -4, 10], ids=str)
def test_stack_bad_axis_raises_axis_error(forbid_compute, axis):
    xs = [make((2, 3)), make((2, 3))]
    with pytest.raises(AxisError):
        np.stack(xs, axis=axis)
    with pytest.raises(AxisError, match=re.escape(str(axis))):
        tg.stack([tg.from_numpy(x, chunks=2) for x in xs], axis=axis)


# -- laziness and backends ----------------------------------------------------------------


def test_forbid_compute_fixture_catches_a_compute(forbid_compute):
    """The laziness tests rely on this: under ``forbid_compute`` a compute fails."""
    a = tg.from_numpy(make((4, 4)), chunks=3).rechunk(2)
    with pytest.raises(AssertionError, match="a run of"):
        a.compute()


def _pipeline(mod, x, y):
    """The same program over NumPy (``mod=np``) or tilegraph arrays."""
    t = mod.transpose(x, (1, 0, 2))  # (4, 5, 3)
    s = mod.swapaxes(t, 0, -1)[::-1, 1:, None]  # (3, 4, 1, 4)
    r = mod.reshape(s, (6, 2, 4))
    c = mod.concatenate([r, mod.reshape(y, (6, 2, 4))[:, ::-1]], axis=1)  # (6, 4, 4)
    st_ = mod.stack([c, c[::-1] * 2], axis=-2)  # (6, 4, 2, 4)
    return mod.reshape(st_, (-1, 8)).T  # (8, 48)


def _tg_pipeline(x, y, chunks_x, chunks_y):
    class Mod:
        transpose = staticmethod(tg.transpose)
        swapaxes = staticmethod(tg.swapaxes)
        reshape = staticmethod(tg.reshape)
        concatenate = staticmethod(tg.concatenate)
        stack = staticmethod(tg.stack)

    a = tg.from_numpy(x, chunks=chunks_x).rechunk(((3, 2), (1, 1, 2), (2, 1)))
    b = tg.from_numpy(y, chunks=chunks_y)
    return _pipeline(Mod, a, b)


X = make((5, 4, 3), "float32")
Y = make((48,), "int16")
CHUNKS_X = ((2, 3), (1, 3), (3,))
CHUNKS_Y = ((7, 20, 21),)


def test_building_everything_is_lazy(forbid_compute):
    out = _tg_pipeline(X, Y, CHUNKS_X, CHUNKS_Y)
    expected = _pipeline(np, X, Y)
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype
    assert tuple(sum(c) for c in out.chunks) == expected.shape


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), xa=arrays())
def test_random_manipulations_are_lazy(forbid_compute, data, xa):
    x, a = xa
    perm = data.draw(st.permutations(range(x.ndim)))
    shape = data.draw(new_shapes(x.size))
    assume(-1 not in shape or x.size)
    out = a.transpose(perm).rechunk(data.draw(chunks_for(x.transpose(perm).shape)))
    out = out.reshape(shape)
    out = tg.stack([out, out], axis=-1)
    out = tg.concatenate([out, out[..., :1]], axis=-1)
    y = np.stack([x.transpose(perm).reshape(shape)] * 2, axis=-1)
    expected = np.concatenate([y, y[..., :1]], axis=-1)
    assert out.shape == expected.shape
    assert out.dtype == expected.dtype
    assert tuple(sum(c) for c in out.chunks) == expected.shape


def test_pipeline_matches_numpy():
    check(_tg_pipeline(X, Y, CHUNKS_X, CHUNKS_Y), _pipeline(np, X, Y))


def test_same_result_on_every_backend(backend_options):
    expected = _pipeline(np, X, Y)
    got = _tg_pipeline(X, Y, CHUNKS_X, CHUNKS_Y).compute(**backend_options)
    assert_array_equal(got, expected, strict=True)
    x = tg.from_numpy(X, chunks=((2, 3), (1, 3), (2, 1)))
    parts = [x.T, x.swapaxes(0, 2).rechunk(2), x.reshape(3, 4, 5).rechunk(((1, 2), 3, 4))]
    for part, want in zip(parts, [X.T, X.swapaxes(0, 2), X.reshape(3, 4, 5)], strict=True):
        assert_array_equal(part.compute(**backend_options), want, strict=True)
    cat = tg.concatenate([x, x[:0], x[::-1].astype("float64")], axis=0)
    assert_array_equal(cat.compute(**backend_options),
                       np.concatenate([X, X[:0], X[::-1].astype("float64")]), strict=True)
    twice = tg.stack([tg.concatenate([x, x], axis=1)] * 2, axis=1)  # repeated blocks
    assert_array_equal(twice.compute(**backend_options),
                       np.stack([np.concatenate([X, X], axis=1)] * 2, axis=1), strict=True)


def test_rechunk_dict_keeps_axes_not_named():
    x = tg.from_numpy(np.arange(24.0).reshape(4, 6), chunks=(2, 3))
    y = x.rechunk({0: 1})
    assert y.chunks == ((1, 1, 1, 1), (3, 3))
    assert x.rechunk({-1: 2}).chunks == ((2, 2), (2, 2, 2))
    np.testing.assert_array_equal(y.compute(), np.arange(24.0).reshape(4, 6))


def test_a_pickled_rechunk_is_planned_again_for_the_run_that_computes_it(tmp_path):
    """An Array pickles its plan by value, each Array apart: a rechunk pickles what it
    rechunks and its options, not the plans it made, and in the copy each run chooses
    its stages again (through the store under a small limit)."""
    import pickle

    x = make((48, 10, 12), "float64")
    out = (tg.from_numpy(x, chunks=(3, 10, 12)) + 0).rechunk((48, 2, 3), max_mem="16KB")
    np.testing.assert_array_equal(out.compute(memory_limit="1MB"), x)  # a plan made
    copy = pickle.loads(pickle.dumps(out))
    assert copy.collection._plans == {}
    np.testing.assert_array_equal(copy.compute(memory_limit="60KB", spill_dir=tmp_path), x)
    assert tg.last_run().staged_bytes == x.nbytes
    np.testing.assert_array_equal(copy.compute(memory_limit="1MB"), x)
    assert tg.last_run().staged_bytes == 0
