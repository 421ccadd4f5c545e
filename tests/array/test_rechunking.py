"""A rechunk's plan under a memory limit (tilegraph/array/rechunking.py): every task of it,
as the executor's admission estimates it, fits any limit a few blocks large, for any
blocks (all-to-all, its reverse, climate-like time to space blocks, tiny to huge blocks and
back, uneven edges, several dtypes); a run holds at most the limit and one block, on the
sync and threads backends, on a dask.distributed cluster and on MPI ranks; a limit under
which no plan fits is refused, naming the smallest that works, and that one works."""

from __future__ import annotations

import gc
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _blocked import make
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.array.chunks import normalize_chunks
from tilegraph.array.lowering import plan_arrays
from tilegraph.array.rechunking import (
    least_holds,
    plan_rechunk,
    smallest_limit,
)
from tilegraph.graph.memory import task_estimates
from tilegraph.io.staging import HANDLE_BYTES

ROOT = Path(__file__).resolve().parents[2]
MPI_SCRIPT = Path(__file__).with_name("mpi_rechunking.py")


def _needs(graph) -> list[int]:
    """Bytes each task of ``graph`` holds while it runs, as admission and ``check_fits``
    count them: its inputs and its estimate (output, temporaries, fused steps)."""
    est = task_estimates(graph)
    nb = graph.meta["nbytes"]
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    return [est[i] + sum(nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]])
            for i in range(len(graph))]


def _block(chunks, itemsize: int) -> int:
    return itemsize * int(np.prod([max(c) for c in chunks]))


def _plan(arr: tg.Array, limit: int, workers: int = 2, fuse: bool = True):
    with tg.config.set(memory_limit=limit, workers=workers):
        return plan_arrays([arr], fuse=fuse)


# (shape, old blocks, new blocks, dtype): each rechunk the planner must fit under a few
# blocks; the sizes are those of the plan only (nothing is computed)
PLANS = [
    ((6000, 6000), (6000, 100), (100, 6000), "float64"),  # the all-to-all of issue 41
    ((6000, 6000), (100, 6000), (6000, 100), "float64"),  # its reverse
    ((62, 721, 1440), (31, -1, -1), (-1, 20, 20), "float32"),  # ERA5 time to space
    ((2000, 3000), (40, 40), (-1, -1), "int32"),  # tiny to huge
    ((2000, 3000), (1000, 3000), (70, 130), "complex128"),  # huge to small, crossing
    ((3001, 2999), (37, 511), (490, 29), "float64"),  # uneven, skewed
    ((4000, 4000), (4000, 25), (25, 4000), "float32"),  # thin blocks both ways
]


def _random(shape, chunks, dtype) -> tg.Array:
    """Random blocks of ``dtype``, each made in one step (complex: from float64 parts)."""
    kind = np.dtype(dtype).kind
    if kind == "f":
        return tg.random.random(shape, chunks=chunks, seed=1, dtype=dtype)
    if kind in "iu":
        return tg.random.integers(0, 100, shape, chunks=chunks, seed=1, dtype=dtype)
    return tg.random.random(shape, chunks=chunks, seed=1).astype(dtype)


@pytest.mark.parametrize("blocks", [3, 10])
@pytest.mark.parametrize("shape, old, new, dtype", PLANS)
def test_every_task_of_the_plan_fits_a_limit_of_a_few_blocks(shape, old, new, dtype, blocks,
                                                             forbid_compute):
    """For a limit of ``blocks`` times the larger block, fused as a run plans it: no task
    needs more than the limit; unfused, no task of the rechunk needs more than the plan
    says (its model bounds the executor's estimate); the plan's own projection says so."""
    x = _random(shape, old, dtype)
    y = x.rechunk(new)
    itemsize = np.dtype(dtype).itemsize
    limit = blocks * max(_block(x.chunks, itemsize), _block(y.chunks, itemsize))
    assert smallest_limit(x.chunks, y.chunks, itemsize) <= limit
    plan = y.collection.plan(tg.config.per_process(
        tg.config.resolve({"memory_limit": limit, "workers": 2}, "test"), 1))
    assert plan.need <= plan.holds <= limit
    fused = _plan(y.sum(), limit)
    assert max(_needs(fused.graph)) <= limit
    alone = _plan(y, limit, fuse=False).graph
    ours = [n for i, n in enumerate(_needs(alone)) if alone.opname(i).startswith("rechunk")]
    assert ours and max(ours) <= plan.need
    if np.dtype(dtype).kind != "c":  # each source block made in one step (else two)
        chains = _plan(y, limit).graph  # fused, as a run does: the store writes the result
        ours = [n for i, n in enumerate(_needs(chains)) if "rechunk" in chains.opname(i)]
        assert ours and max(ours) <= plan.need
    with tg.config.set(memory_limit=limit, workers=2):
        text = y.sum().explain()
    largest = re.search(r"largest task works on ([\d.]+ \w+)", text).group(1)
    assert tg.util.parse_bytes(largest.replace(" ", "")) <= limit


def test_the_issue_s_rechunk_at_128mb_plans_within_a_quarter_of_it(forbid_compute):
    """``random((6000, 6000), chunks=(6000, 100)).rechunk((100, 6000))`` under 128 MB
    (288 MB, blocks of 4.8 MB) was refused: a write group gathered more than the limit.
    Its tasks now fit the limit shared by two workers, through the store on disk."""
    x = tg.random.random((6000, 6000), chunks=(6000, 100))
    y = x.rechunk((100, 6000))
    graph = _plan(y.sum(), 128_000_000).graph
    names = {graph.opname(i) for i in range(len(graph))}
    assert any("rechunk-store" in n for n in names)
    assert max(_needs(graph)) <= 128_000_000 // 4


def test_the_issue_s_rechunk_runs_under_128mb():
    x = tg.random.random((6000, 6000), chunks=(6000, 100), seed=3)
    got = x.rechunk((100, 6000)).sum().compute(memory_limit="128MB", workers=2)
    run = tg.last_run()
    assert run.peak_bytes <= run.memory_limit + 4_800_000
    assert run.staged_bytes == 6000 * 6000 * 8 and run.spilled_bytes == 0
    assert np.isclose(got, x.sum().compute())


# small arrays that run: (shape, old, new, dtype)
RUNS = [
    ((400, 600), (400, 10), (10, 600), "float64"),
    ((400, 600), (10, 600), (400, 10), "float32"),
    ((62, 73, 144), (31, -1, -1), (-1, 10, 10), "float32"),
    ((300, 400), (20, 25), (-1, -1), "int32"),
    ((300, 400), (300, 200), (7, 13), "complex128"),
    ((301, 399), (37, 51), (49, 29), "float64"),
    ((200, 300), (1, 300), (200, 3), "int16"),
]


def _source(shape, old, dtype):
    """Blocks of distinct values that are task results (not views of one array): each
    made from its NumPy view in one fused task holding two blocks."""
    x = make(shape, dtype)
    return x, tg.from_numpy(x, chunks=old) + np.zeros((), dtype)


def _random_source(shape, old, dtype):
    """Blocks made in one step each (a task holding one block), and their values."""
    a = _random(shape, old, dtype)
    return a.compute(backend="sync"), a


@pytest.mark.parametrize("backend", ["threads", "sync"])
@pytest.mark.parametrize("blocks", [3, 5, 10])
@pytest.mark.parametrize("shape, old, new, dtype", RUNS)
def test_a_run_holds_at_most_the_limit_and_one_block(shape, old, new, dtype, blocks, backend):
    x, a = _source(shape, old, dtype)
    y = a.rechunk(new)
    block = max(_block(a.chunks, x.itemsize), _block(y.chunks, x.itemsize))
    limit = max(blocks * block, smallest_limit(a.chunks, y.chunks, x.itemsize))
    got = y.sum(axis=0).compute(memory_limit=limit, backend=backend, workers=2)
    np.testing.assert_allclose(got, x.sum(axis=0), rtol=1e-5)
    run = tg.last_run()
    assert run.memory_limit == limit
    assert run.peak_bytes <= limit + block, (run.peak_bytes, limit, block)
    if blocks == 3:  # each block as it is, against NumPy's
        np.testing.assert_array_equal(
            y.compute(memory_limit=max(limit, 3 * x.nbytes), backend=backend), x)


def test_tiny_blocks_need_the_handles_of_every_block_in_the_limit():
    """An all-to-all of 300 row blocks of 1.6 KB into 400 column blocks: a new block reads
    a piece of every old block, so every old block's handle (``HANDLE_BYTES``) waits in
    memory: the smallest limit that works is larger than a few blocks, and it is named."""
    x, a = _source((300, 400), (1, 400), "int32")
    y = a.rechunk((300, 1))
    least = smallest_limit(a.chunks, y.chunks, x.itemsize)
    assert 4 * 1600 < least < 300 * HANDLE_BYTES + 16 * 1600
    with pytest.raises(tg.MemoryLimitError, match=rf"at least .* \({least} bytes\)"):
        y.sum().compute(memory_limit=least - 1)
    np.testing.assert_array_equal(y.sum(axis=0).compute(memory_limit=least), x.sum(axis=0))
    assert tg.last_run().peak_bytes <= least + 1600


@pytest.mark.parametrize("shape, old, new, dtype", [*RUNS[:2], RUNS[3], *RUNS[5:]])
def test_a_limit_below_the_smallest_is_refused_naming_the_smallest(shape, old, new, dtype):
    x, a = _random_source(shape, old, dtype)
    y = a.rechunk(new)
    least = smallest_limit(a.chunks, y.chunks, x.itemsize)
    with pytest.raises(tg.MemoryLimitError) as info:
        y.compute(memory_limit=least - 1)
    message = str(info.value)
    assert "rechunk of a" in message and "memory_limit" in message
    assert int(re.search(r"\((\d+) bytes\)", message).group(1)) == least
    np.testing.assert_array_equal(y.compute(memory_limit=least), x)  # written as made
    block = max(_block(a.chunks, x.itemsize), _block(y.chunks, x.itemsize))
    assert tg.last_run().peak_bytes <= least + block


def test_an_explicit_max_mem_below_every_plan_is_refused_where_the_rechunk_is_built():
    _, a = _source((100, 100), (100, 1), "float64")
    least = least_holds(a.chunks, normalize_chunks((1, 100), (100, 100)), 8)
    with pytest.raises(ValueError, match=r"max_mem=.*at least"):
        a.rechunk((1, 100), max_mem=least - 1)
    a.rechunk((1, 100), max_mem=least)


def test_a_rechunk_of_nothing_plans_one_stage():
    assert plan_rechunk(((0,), (3, 3)), ((0,), (2, 2, 2)), 8, 1).stages == (
        ("rechunk", ((0,), (2, 2, 2))),)
    x = tg.zeros((0, 6), chunks=(1, 3)) + 1
    assert x.rechunk((1, 2)).compute(memory_limit=100).shape == (0, 6)


def test_the_plan_prefers_one_stage_then_memory_then_disk():
    """One stage while its tasks fit the budget; pieces in memory when the array is at
    most half the run's memory; the store on disk only when it is not; the store never
    for a plan made for no run."""
    old, new = ((2000,), (10,) * 200), ((10,) * 200, (2000,))  # 32 MB of float64

    def names(budget, memory):
        plan = plan_rechunk(old, new, 8, budget, limit=memory, memory=memory, workers=2)
        assert plan.holds <= budget
        return [name for name, _ in plan.stages]

    assert names(64 << 20, 100 << 20) == ["rechunk"]
    assert names(1 << 20, 100 << 20) == [
        "rechunk-gather", "rechunk-split", "rechunk-merge", "rechunk"]
    assert "rechunk-store" in names(1 << 20, 20 << 20)
    assert "rechunk-store" not in names(1 << 20, None)


def test_tiny_pieces_go_through_intermediate_blocks():
    """Column blocks of one element into row blocks of one element: one stage through the
    store would move 10^8 pieces of 8 bytes; the plan goes through square blocks twice."""
    n = 10_000
    old, new = ((n,), (1,) * n), ((1,) * n, (n,))
    plan = plan_rechunk(old, new, 8, 4 << 20, limit=16 << 20, memory=16 << 20, workers=2)
    stores = [c for s, c in plan.stages if s == "rechunk-store"]
    assert len(stores) >= 2 and plan.holds <= 16 << 20
    assert all(1 < max(c[0]) < n and 1 < max(c[1]) < n for c in stores[:-1])


def test_more_workers_make_smaller_tasks():
    old, new = ((6000,), (100,) * 60), ((100,) * 60, (6000,))
    one = plan_rechunk(old, new, 8, (2 << 30) // 2, limit=2 << 30, memory=2 << 30, workers=1)
    many = plan_rechunk(old, new, 8, (2 << 30) // 16, limit=2 << 30, memory=2 << 30,
                        workers=8)
    assert many.holds <= (2 << 30) // 16 and many.holds <= one.holds


@st.composite
def _cases(draw):
    nd = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 24 if nd > 1 else 300)) for _ in range(nd))

    def chunking(length):
        cuts = sorted(draw(st.sets(st.integers(1, max(1, length - 1)), max_size=6)))
        cuts = [c for c in cuts if 0 < c < length]
        return tuple(b - a for a, b in zip([0, *cuts], [*cuts, length], strict=True))

    old = tuple(chunking(n) for n in shape)
    new = tuple(chunking(n) for n in shape)
    dtype = draw(st.sampled_from(["float64", "int32", "int16", "float32"]))
    blocks = draw(st.integers(2, 12))
    backend = draw(st.sampled_from(["sync", "threads"]))
    return shape, old, new, dtype, blocks, backend


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=_cases())
def test_any_blocks_under_any_limit(case):
    """Whatever the blocks and the limit: refused exactly when the limit is below the
    smallest that works; otherwise NumPy's values, no task above the limit, and at most the
    limit and one block held (the result written as it is made)."""
    shape, old, new, dtype, blocks, backend = case
    x, a = _random_source(shape, old, dtype)
    y = a.rechunk(new)
    block = max(_block(a.chunks, x.itemsize), _block(y.chunks, x.itemsize))
    limit = max(blocks * block, 4096)  # results' own few bytes stay noise
    if y.chunks == a.chunks or _views(a.chunks, y.chunks):  # nothing to plan
        np.testing.assert_array_equal(y.compute(backend=backend), x)
        return
    least = smallest_limit(a.chunks, y.chunks, x.itemsize)
    if limit < least:  # refused exactly below the smallest limit
        with pytest.raises(tg.MemoryLimitError, match=rf"\({least} bytes\)"):
            y.compute(memory_limit=limit, backend=backend)
        limit = least
    graph = _plan(y, limit).graph
    assert max(_needs(graph)) <= limit
    plan = y.collection.plan(tg.config.per_process(
        tg.config.resolve({"memory_limit": limit, "workers": 2}, "test"), 1))
    assert max(n for i, n in enumerate(_needs(graph)) if "rechunk" in graph.opname(i)) <= (
        plan.need)
    got = y.compute(memory_limit=limit, backend=backend, workers=2)  # written as made
    np.testing.assert_array_equal(got, x)
    assert tg.last_run().peak_bytes <= limit + block


def _views(old, new) -> bool:
    """Every new block inside one old block (the rechunk is views, never staged)."""
    for o, n in zip(old, new, strict=True):
        cuts = set(np.cumsum((0, *o)).tolist())
        ends = np.cumsum((0, *n)).tolist()
        for lo, hi in itertools.pairwise(ends):
            if any(lo < c < hi for c in cuts):
                return False
    return True


# -- other backends --------------------------------------------------------------------------


@pytest.mark.parametrize("shape, old, new, dtype, blocks", [
    (*RUNS[0], 3), (*RUNS[2], 4), (*RUNS[4], 3), (*RUNS[5], 10)])
def test_on_a_dask_cluster(client, shape, old, new, dtype, blocks, tmp_path):
    x, a = _source(shape, old, dtype)
    y = a.rechunk(new)
    block = max(_block(a.chunks, x.itemsize), _block(y.chunks, x.itemsize))
    limit = max(blocks * block, smallest_limit(a.chunks, y.chunks, x.itemsize))
    got = y.sum(axis=0).compute(backend="dask", client=client, memory_limit=limit,
                                spill_dir=str(tmp_path))
    np.testing.assert_allclose(got, x.sum(axis=0), rtol=1e-5)
    run = tg.last_run()
    assert run.backend == "dask" and run.peak_bytes <= limit + block
    deadline = time.monotonic() + 10  # the cluster drops its results as the run ends
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert list(tmp_path.iterdir()) == []


def test_on_two_mpi_ranks():
    pytest.importorskip("mpi4py")
    from tilegraph.cli import mpiexec_command

    env = dict(os.environ, PYTHONPATH=str(ROOT), OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run([*mpiexec_command(2), sys.executable, "-m", "mpi4py",
                           str(MPI_SCRIPT)], capture_output=True, text=True, timeout=240,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = sorted((json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
                      if line.startswith("RESULT ")), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["runs"], r
        for run in r["runs"]:
            assert run["equal"], run
            assert run["processes"] == 2
            assert run["peak"] <= run["limit"] + run["block"], run
    staged = [sum(r["runs"][k]["staged"] for r in results)
              for k in range(len(results[0]["runs"]))]
    assert any(staged)  # through the store, each rank its own old blocks


@pytest.mark.parametrize("limit, staged", [("4GB", False), ("2GB", False), ("1GB", False),
                                           ("500MB", False), ("300MB", True)])
def test_blocks_larger_than_the_task_cap_stay_off_the_disk_when_the_limit_holds_them(
        limit, staged):
    """A padded block joined to its one-row piece (the vorticity's ``pad`` then
    ``rechunk``): blocks of 190 MiB make tasks of 380 MiB, past the 256 MiB cap on a
    rechunk task. Under a limit that holds such a task the plan is one stage in memory
    (fewer tasks at once, nothing written); only a limit that cannot hold one goes through
    the store on disk, in tasks of one block."""
    x = tg.zeros((5000, 5000, 3), chunks=(5000, 5000, 1))
    y = tg.pad(x, ((0, 1), (0, 0), (0, 0)), mode="wrap").rechunk((5001, 5000, 1))
    plan = y.collection.plan(tg.config.per_process(
        tg.config.resolve({"memory_limit": limit, "workers": 2}, "test"), 1))
    assert ("rechunk-store" in dict(plan.stages)) is staged
    assert plan.holds <= tg.config.resolve({"memory_limit": limit}, "test").memory_limit


def test_spare_disk_weighs_the_budgets_plan_through_the_store_with_those_of_the_limit():
    """Without ``spare_disk`` a plan within the budget is taken even through the disk;
    with it, one stage that fits the limit and costs less is taken instead; under
    ``max_mem`` (the user's bound on a task) the array keeps the budget's plan."""
    old, new = ((1,) * 240, (1 << 17,)), ((24,) * 10, (1 << 17,))  # rows of 1 MiB
    kw = {"limit": 200 << 20, "memory": 200 << 20, "workers": 2}
    within = plan_rechunk(old, new, 8, 32 << 20, **kw)
    spared = plan_rechunk(old, new, 8, 32 << 20, spare_disk=True, **kw)
    assert "rechunk-store" in dict(within.stages) and within.holds <= 32 << 20
    assert [name for name, _ in spared.stages] == ["rechunk"]
    assert 32 << 20 < spared.holds <= 200 << 20 and spared.cost < within.cost
    x = tg.random.random((240, 1 << 17), chunks=(1, 1 << 17), seed=2)
    capped = x.rechunk((24, 1 << 17), max_mem="32MiB").collection.plan(
        tg.config.per_process(tg.config.resolve({"memory_limit": "200MiB", "workers": 2},
                                                "test"), 1))
    assert "rechunk-store" in dict(capped.stages) and capped.holds <= 32 << 20
