"""Memory budgets: admission control, spill to disk, errors before compute, cleanup."""

import os
import threading

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime.budget import MemoryLimitError
from tilegraph.runtime.events import Release, RunEnd, Spill, TaskEnd, Unspill
from tilegraph.runtime.memory import parse_bytes
from tilegraph.runtime.spill import SpillStore


@pytest.mark.parametrize(("text", "value"), [
    ("2GB", 2 * 10**9), ("512MiB", 512 * 2**20), ("1.5 GiB", int(1.5 * 2**30)),
    ("100", 100), (4096, 4096), ("3e6", 3 * 10**6), ("10 kb", 10_000),
])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize(("bad", "error"), [
    ("lots", ValueError), ("-1GB", ValueError), (0, ValueError), (True, TypeError),
    ([1], TypeError), ("2 parsecs", ValueError), (float("inf"), ValueError),
])
def test_parse_bytes_rejects(bad, error):
    with pytest.raises(error):
        parse_bytes(bad)


def chain_expr():
    a = tg.random.random((600, 600), chunks=150, seed=1)  # blocks of 176 KiB
    b = tg.random.random((600, 600), chunks=150, seed=2)
    return ((a @ b) @ a.T + 1).sum(axis=0)


@pytest.mark.parametrize("workers", [1, 2])
def test_results_unchanged_by_spilling(tmp_path, workers):
    expr = chain_expr()
    ref = expr.compute(memory_limit="1GB")
    events = []
    out = expr.compute(memory_limit="1.6MB", workers=workers, spill_dir=tmp_path,
                       callbacks=[events.append])
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    spills = [e for e in events if isinstance(e, Spill)]
    assert spills and any(isinstance(e, Unspill) for e in events)
    end = events[-1]
    assert isinstance(end, RunEnd) and end.spilled_bytes > 0 and end.unspilled_bytes > 0
    summary = tg.last_run()
    assert summary.spilled_bytes == end.spilled_bytes and summary.memory_limit == 1_600_000
    assert "spilled" in str(summary)
    assert os.listdir(tmp_path) == []  # spill files are removed after the run


def test_peak_stays_near_the_limit_on_one_worker(tmp_path):
    events = []
    chain_expr().compute(memory_limit="1.6MB", workers=1, spill_dir=tmp_path,
                         callbacks=[events.append])
    # one worker admits a task only when it fits: the peak stays under the limit
    assert events[-1].peak_bytes <= 1_600_000


def test_without_pressure_nothing_spills():
    events = []
    chain_expr().compute(callbacks=[events.append])
    assert not any(isinstance(e, (Spill, Unspill)) for e in events)
    assert events[-1].spilled_bytes == 0


def test_only_outputs_are_left_after_a_spilling_run(tmp_path):
    held = set()

    def track(e):
        if isinstance(e, TaskEnd):
            held.add(e.key)
        elif isinstance(e, Release):
            held.discard(e.key)

    x = tg.random.random((400, 400), chunks=100, seed=3)
    y = x @ x.T
    tg.compute(y, memory_limit="400KB", spill_dir=tmp_path, callbacks=[track])
    assert all(k[0].startswith("store-") for k in held)  # only the outputs' store tasks
    assert len(held) == 16


def test_a_task_that_can_never_fit_fails_before_compute(forbid_compute):
    x = tg.ones((1000, 1000), chunks=500)  # blocks of 2 MB
    with pytest.raises(MemoryLimitError, match=r"op .*needs about .* more than "
                                               r"memory_limit=.*use smaller blocks"):
        (x @ x).compute(memory_limit="3MB")  # MemoryLimitError, not ComputeForbidden


def boom(block):
    raise RuntimeError("task failed after spilling")


def test_spill_files_removed_after_failure(tmp_path):
    x = tg.random.random((600, 600), chunks=150, seed=1)
    y = (x @ x).map_blocks(boom)
    z = tg.concatenate([x @ x.T, y])
    with pytest.raises(RuntimeError, match="task failed after spilling"):
        z.compute(memory_limit="1.6MB", spill_dir=tmp_path)
    assert os.listdir(tmp_path) == []


def test_spill_files_removed_after_cancellation(tmp_path):
    seen_spill = threading.Event()

    def stop(block):
        if seen_spill.wait(10):
            raise KeyboardInterrupt
        return block

    x = tg.random.random((600, 600), chunks=150, seed=1)
    y = ((x @ x) @ x).map_blocks(stop)
    with pytest.raises(KeyboardInterrupt):
        y.compute(memory_limit="1.6MB", spill_dir=tmp_path, backend="sync",
                  callbacks=[lambda e: isinstance(e, Spill) and seen_spill.set()])
    assert seen_spill.is_set()
    assert os.listdir(tmp_path) == []


def test_arrays_larger_than_the_budget_stream_through_storage(tmp_path):
    ref = np.random.default_rng(0).random((800, 500))  # 3.2 MB
    np.save(tmp_path / "in.npy", ref)
    x = tg.from_npy(tmp_path / "in.npy", chunks=100)
    (x * 2 + 1).to_npy(tmp_path / "out.npy", memory_limit="1MB")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), ref * 2 + 1)
    (x.T * 3).to_zarr(tmp_path / "out.zarr", memory_limit="1MB")
    np.testing.assert_array_equal(tg.from_zarr(tmp_path / "out.zarr").compute(), ref.T * 3)


def test_memory_options_are_validated():
    x = tg.ones(10, chunks=5)
    with pytest.raises(ValueError, match="cannot read memory size"):
        x.compute(memory_limit="plenty")
    with pytest.raises(ValueError, match="spill_dir"):
        x.compute(spill_dir="/no/such/dir")
    with tg.config.set(memory_limit="2GB"):
        assert tg.config.get("memory_limit") == 2 * 10**9
        x.sum().compute()
        assert tg.last_run().memory_limit == 2 * 10**9


def test_spill_store_round_trip_and_close(tmp_path):
    store = SpillStore(str(tmp_path))
    for arr in (np.arange(12.0).reshape(3, 4), np.ones((2, 3), dtype=np.complex64),
                np.arange(10, dtype=np.int16)[::2]):
        rec = store.write(arr)
        np.testing.assert_array_equal(store.read(rec), arr)
        assert rec.nbytes == arr.nbytes
    assert len(os.listdir(store.path)) == 3
    store.close()
    assert os.listdir(tmp_path) == []


def test_loads_are_dropped_and_read_again_not_spilled(tmp_path):
    ref = np.random.default_rng(1).random((600, 600))
    np.save(tmp_path / "a.npy", ref)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    x = tg.from_npy(tmp_path / "a.npy", chunks=150)
    events = []
    out = (x @ x).compute(memory_limit="1.6MB", spill_dir=spill_dir, callbacks=[events.append])
    np.testing.assert_allclose(out, ref @ ref)
    load_spills = [e for e in events if isinstance(e, Spill) and e.key[0].startswith("from_npy")]
    assert load_spills and all(e.clean for e in load_spills)  # nothing written for loads
    reloaded = {e.key for e in events if isinstance(e, Unspill)}
    assert {e.key for e in load_spills} & reloaded
    assert os.listdir(spill_dir) == []


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_random_and_constant_blocks_are_made_again_not_spilled(tmp_path, dtype):
    """The anomaly pattern: every block is read by a climatology of all blocks and again by
    the anomaly, so it cannot stay in memory; a random block is made again (recomputed)
    instead of written to disk and read back."""
    t, x = 48, 4000
    data = tg.random.integers(0, 100, (t, x), chunks=(1, x), seed=3).astype(dtype)
    data = data + tg.ones((t, x), chunks=(1, x), dtype=dtype)
    clim = data.mean(axis=0)
    anom = (data - clim).std(axis=0)
    from tilegraph.array.lowering import plan_arrays

    plan = plan_arrays([anom]).graph
    remade = {plan.keys[i] for i, r in enumerate(plan.remakeable()) if r}
    events = []
    got = anom.compute(memory_limit="400KB", spill_dir=tmp_path, callbacks=[events.append])
    run = tg.last_run()
    ref = data.compute()
    np.testing.assert_allclose(got, (ref - ref.mean(axis=0)).std(axis=0), rtol=1e-5)
    assert run.recomputed_bytes > 0
    assert "recomputed" in str(run)
    end = next(e for e in events if isinstance(e, RunEnd))
    assert end.recomputed_bytes == run.recomputed_bytes
    spills = [e for e in events if isinstance(e, Spill)]
    assert {e.key for e in spills if e.key in remade} and all(  # dropped, never written
        e.clean for e in spills if e.key in remade)
    assert not any(e.key in remade for e in spills if not e.clean)
    assert os.listdir(tmp_path) == []


def test_remakeable_tasks_follow_the_registry_and_the_fused_chain():
    from tilegraph.array.lowering import explain, plan_arrays

    def shape(seed):
        return tg.random.random((40, 40), chunks=10, seed=seed)

    mapped = tg.map_blocks(lambda b: b * 2, shape(1)) + 1  # random+map+add, fused
    cheap = shape(2) * 2 + 1                                # random+multiply+add, fused
    shared = shape(3)                                       # read by two outputs: not fused
    plan = plan_arrays([mapped.sum(axis=0), cheap.sum(axis=0), shared.sum(), shared.max()])
    g = plan.graph
    remake, names = g.remakeable(), g.meta["name"]
    sources = [i for i in range(len(g)) if g.in_degree()[i] == 0]
    by_name = {}
    for i in sources:
        by_name.setdefault(names[i], set()).add(remake[i])
    # a chain with a user's function is spilled (its cost is unknown); the rest is remade
    assert {n: v for n, v in by_name.items() if "lambda" in n} and all(
        v == {0} for n, v in by_name.items() if "lambda" in n)
    assert by_name["random-random+multiply+add+sum-partial"] == {1}
    assert by_name["random-random"] == {1}
    # with inputs: the cheap steps over the shared source (its blocks are tiny, so two
    # steps cost less than a spill file), never a reduction's combine
    assert {names[i] for i in range(len(g)) if g.in_degree()[i] > 0 and remake[i]} == {
        "sum-partial", "max-partial"}
    assert "made again rather than spilled under memory pressure: 64 tasks" in explain(
        [mapped.sum(axis=0), cheap.sum(axis=0), shared.sum(), shared.max()])


def _random_expression(rng):
    n, bs = 240, int(rng.choice([40, 60, 80]))
    a = tg.random.random((n, n), chunks=bs, seed=int(rng.integers(1000)))
    b = tg.random.random((n, n), chunks=bs, seed=int(rng.integers(1000)))
    pick = int(rng.integers(4))
    if pick == 0:
        return ((a @ b) @ a.T + b).sum(axis=1)
    if pick == 1:
        return (a @ (b + 1) - a.T @ b).max(axis=0)
    if pick == 2:
        return tg.concatenate([a @ b, (a * b) @ a], axis=0).mean(axis=1)
    return ((a - b.T) @ (a @ b)).std(axis=0)


@pytest.mark.parametrize("seed", range(6))
def test_stress_spilling_under_tight_budgets(tmp_path, seed):
    rng = np.random.default_rng(seed)
    expr = _random_expression(rng)
    ref = expr.compute(backend="sync")
    spilled_runs = 0
    for workers in (1, 2, 4):
        for limit in ("300KB", "450KB", "700KB", "1MB"):
            try:
                out = expr.compute(memory_limit=limit, workers=workers, spill_dir=tmp_path)
            except MemoryLimitError:
                continue  # this block size cannot run under this budget: refused up front
            np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)
            assert os.listdir(tmp_path) == []
            spilled_runs += tg.last_run().spilled_bytes > 0
    assert spilled_runs >= 2  # the budgets really forced results to disk


def test_read_ahead_overlaps_reads_with_compute_on_one_worker(tmp_path):
    events = []
    out = chain_expr().compute(memory_limit="1.6MB", workers=1, spill_dir=tmp_path,
                               callbacks=[events.append])
    np.testing.assert_allclose(out, chain_expr().compute(), rtol=1e-12)
    unspills = [e for e in events if isinstance(e, Unspill)]
    assert any(e.ahead for e in unspills)  # read by the I/O thread, not by the worker
    assert events[-1].peak_bytes <= 1_600_000
    assert not [t for t in threading.enumerate() if t.name == "tilegraph-io"]


def test_gram_matrix_from_npy_under_a_budget_spills_nothing_with_two_workers(tmp_path):
    # A.T @ A streamed from storage: the second worker must not run ahead on later loads and
    # push out the blocks the earlier tasks need next (the priority order binds both threads)
    rng = np.random.default_rng(3)
    a = rng.random((24000, 50))
    path = tmp_path / "a.npy"
    np.save(path, a)
    limit = 1_600_000
    x = tg.from_npy(path, chunks=(1500, 50))
    for _ in range(3):
        got = (x.T @ x).compute(memory_limit=limit, workers=2)
        summary = tg.last_run()
        assert np.allclose(got, a.T @ a)
        assert summary.spilled_bytes == 0, summary
        assert summary.peak_bytes <= limit, summary


@pytest.mark.parametrize("workers", [1, 2])
def test_results_read_back_from_disk_never_take_the_budget_over_its_limit(workers):
    # a task's spilled inputs are counted from the moment it starts until they are held,
    # so no other task takes the same room while they are read (a user's function makes
    # the blocks: they are spilled, not made again)
    a_np = np.random.default_rng(5).random((3000, 3000))
    a = tg.from_numpy(a_np, chunks=500).map_blocks(np.copy)
    limit = 20_000_000
    for _ in range(3):
        got = ((a + a.T) @ a).compute(memory_limit=limit, workers=workers)
        run = tg.last_run()
        assert run.spilled_bytes > 0 and run.unspilled_bytes > 0, run
        assert run.peak_bytes <= limit, run
    np.testing.assert_allclose(got, (a_np + a_np.T) @ a_np, rtol=1e-10)


def test_a_fused_chain_is_refused_for_the_largest_block_it_makes_inside(forbid_compute):
    # random(...).sum() fuses into one task whose output is 8 bytes; the 128 MB block it
    # makes inside must count, before anything runs
    x = tg.random.random((4000, 4000), chunks=4000, seed=0).sum()
    with pytest.raises(MemoryLimitError, match=r"fused steps hold up to 122\.1 MiB") as err:
        x.compute(memory_limit="20MB")
    assert "smaller blocks" in str(err.value)


def test_a_block_larger_than_memory_fails_the_check_not_numpy():
    y = tg.random.random((1_000_000, 1_000_000), chunks=1_000_000, seed=0)
    for arr in (y, y.sum(), (y + 1).max()):
        with pytest.raises(MemoryLimitError, match=r"needs about (7\.3|14\.6) TiB"):
            arr.compute()


def test_explain_and_the_estimates_see_the_working_set_of_a_fused_chain():
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.graph.memory import task_estimates

    x = tg.random.random((4000, 4000), chunks=2000, seed=0)
    total = (x * 2).sum()
    assert "estimated peak memory: 61.0 MiB on one worker" in total.explain()
    plan = plan_arrays([total]).plan
    fused = [i for i, n in enumerate(plan.graph.meta["name"]) if "random" in n]
    block = 2000 * 2000 * 8
    # the random block, then the doubled block (a ufunc makes no other temporary)
    assert all(task_estimates(plan.graph)[i] >= 2 * block for i in fused)
    values = total.compute(memory_limit="100MB", workers=2)
    assert values == pytest.approx(2 * tg.random.random((4000, 4000), chunks=2000,
                                                        seed=0).compute().sum())


def _full_disk(tmp_path, monkeypatch):
    """Spill files that land on /dev/full (through a link), as on a full disk."""
    link = tmp_path / "full.bin"
    os.symlink("/dev/full", link)
    monkeypatch.setattr(SpillStore, "_new_path", lambda self: str(link))
    return str(link)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_failed_spill_write_names_errno_and_path(tmp_path, monkeypatch):
    import errno

    path = _full_disk(tmp_path, monkeypatch)
    with pytest.raises(OSError) as err:
        SpillStore(str(tmp_path)).write(np.ones(10**6))
    assert err.value.errno == errno.ENOSPC
    assert err.value.filename == path and "7.6 MiB" in str(err.value)
    x = tg.random.random((1000, 1000), chunks=250, seed=1)
    with pytest.raises(OSError, match="No space left on device") as err:
        (x @ x.T + x).sum().compute(memory_limit="3MB", workers=2)
    assert err.value.errno == errno.ENOSPC and err.value.filename == path
    assert os.path.exists("/dev/full")


# -- the plan's memory is a promise: the projection, spill=False -----------------------------


def test_projected_peak_by_hand():
    """Two loads feed a product that feeds a sum: the peak is while the product runs (both
    loads, its output); without the loads, which can be read again, it is their bytes
    brought back for the one task that reads them."""
    from tilegraph.graph import GraphBuilder
    from tilegraph.graph.taskgraph import Dep
    from tilegraph.plan import order
    from tilegraph.plan.explain import projected_peak

    b = GraphBuilder()
    b.add("a", np.ones, args=(10,), kind="load", nbytes=80)
    b.add("b", np.ones, args=(10,), kind="load", nbytes=80)
    b.add("ab", np.multiply, deps=["a", "b"], args=(Dep(0), Dep(1)), kind="map", nbytes=80)
    b.add("s", np.sum, deps=["ab"], args=(Dep(0),), kind="map", nbytes=8)
    g = b.build()
    out = g.indices(["s"])
    p = projected_peak(g, out, order(g, out))
    # the map kind makes one temporary block: 80 + 80 + (80 + 80)
    assert p.peak == 320 and g.keys[p.at] == "ab"
    assert p.largest_task == 320
    assert p.without_remake == 320  # the loads are read for "ab" itself
    assert p.without_remake <= p.peak


def test_spill_false_refuses_a_plan_whose_projection_exceeds_the_limit():
    """Refused before any task runs, naming the task at the peak, its op and what fits."""
    started = []

    def count(event):
        if type(event).__name__ == "TaskStart":
            started.append(event)

    w = tg.from_numpy(np.arange(160_000.0).reshape(400, 400), chunks=100).map_blocks(
        np.add, 0.5)  # a user's function: its blocks must stay in memory or go to disk
    y = (w @ w.T).sum()
    with pytest.raises(MemoryLimitError, match=r"spill=False.*memory_limit of at least") as e:
        y.compute(memory_limit="700KB", spill=False, callbacks=[count])
    assert "op " in str(e.value) and "at task" in str(e.value)
    assert started == []
    expected = (np.arange(160_000.0).reshape(400, 400) + 0.5)
    got = y.compute(memory_limit="700KB")  # spilling allowed: today's behaviour
    np.testing.assert_allclose(got, (expected @ expected.T).sum())
    assert tg.last_run().spilled_bytes > 0


def test_spill_false_runs_by_making_blocks_again_and_reports_the_projection():
    """Random blocks read by two passes (a mean, then deviations from it) are made again
    under pressure: nothing spilled, the values NumPy's, and the run's summary carries the
    plan's projection beside the measured peak."""
    u = tg.random.random((64, 1000), chunks=(1, 1000), seed=4)  # 8 KB blocks, 512 KB
    r = ((u - u.mean(axis=0)) ** 2).sum()
    want = float(((u.compute() - u.compute().mean(axis=0)) ** 2).sum())
    assert "what a run with spill=False needs" in r.explain()
    got = r.compute(memory_limit="160KB", spill=False, workers=1)
    assert got == pytest.approx(want)
    run = tg.last_run()
    assert run.spilled_bytes == 0 and run.recomputed_bytes > 0
    assert run.projected_bytes > run.memory_limit  # all of u held, were nothing remade
    assert f"projected {tg.util.human(run.projected_bytes)}" in str(run)


def test_spill_option_is_validated():
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="spill must be True or False"):
            tg.ones(4, chunks=2).sum().compute(spill=bad)
    with pytest.raises(ValueError, match="spill must be True or False"), \
            tg.config.set(spill="no"):
        pass
