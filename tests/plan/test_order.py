"""The default task order: depth-first, with the consumers of a shared block co-scheduled."""

from __future__ import annotations

from operator import add, mul

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays, plan_summary
from tilegraph.graph import CycleError, GraphBuilder, from_dask
from tilegraph.graph.taskgraph import Dep
from tilegraph.plan import order
from tilegraph.plan.explain import sequential_peak


def ranked(g, outputs):
    return [g.keys[i] for i in np.argsort(order(g, g.indices(outputs)))]


def test_a_chain_and_a_tree_keep_the_depth_first_order():
    g = from_dask({"a": 1, "b": (add, "a", 1), "c": 2, "d": (add, "b", "c"), "e": (mul, "d", 2)})
    assert ranked(g, ["e"]) == ["a", "b", "c", "d", "e"]


def test_tasks_no_output_needs_come_last_and_cycles_are_named():
    g = from_dask({"a": 1, "b": (add, "a", 1), "x": 5, "y": (add, "x", "a")})
    assert ranked(g, ["b"])[:2] == ["a", "b"]
    assert set(ranked(g, ["b"])[2:]) == {"x", "y"}
    cyclic = from_dask({"p": (add, "q", 1), "q": (add, "p", 1)})
    with pytest.raises(CycleError):
        order(cyclic, cyclic.indices(["p"]))


def quadratic_means(t, y=6, x=5, seed=0, dtype=np.float64, step=10):
    u = tg.random.random((t, 1, y, x), chunks=(step, 1, y, x), seed=seed, dtype=dtype)
    v = tg.random.random((t, 1, y, x), chunks=(step, 1, y, x), seed=seed + 1, dtype=dtype)
    return u, v, [(u * u).mean(axis=0), (v * v).mean(axis=0), (u * v).mean(axis=0)]


def test_three_means_over_shared_inputs_stream_one_time_block_at_a_time():
    _, _, outs = quadratic_means(400)
    plan = plan_arrays(outs)
    g, pr = plan.graph, plan.plan.priority
    kinds = g.meta["kind"]
    seq = [i for i in np.argsort(pr) if kinds[i] in ("random", "partial")]
    # each time block: u_t and v_t, then the three partial means that read them
    for start in range(0, len(seq), 5):
        group = seq[start:start + 5]
        assert [kinds[i] for i in group] == ["random", "random", "partial", "partial",
                                             "partial"]
        assert {g.keys[i][1] for i in group[:2]} == {start // 5}
    block = 10 * 6 * 5 * 8
    peak, _ = sequential_peak(g, plan.plan.outputs, pr)
    # u_t, v_t, a product's temporary and the partials and combined partials waiting for
    # their trees' next steps (tenths of a block): not the 80 blocks of u and v that
    # finishing one mean before the next would hold
    assert peak <= 8 * block
    # the three means alone, one after the other, hold as little: the sharing costs nothing
    alone = max(sequential_peak(p.graph, p.plan.outputs, p.plan.priority)[0]
                for p in (plan_arrays([o]) for o in outs))
    assert peak <= 3 * alone


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_three_means_values_under_a_small_budget_spill_nothing(dtype):
    u, v, outs = quadratic_means(201, y=40, x=30, dtype=dtype)  # an uneven last block
    summary = plan_summary(outs)
    projected = summary["peak_bytes"] + summary["largest_task_bytes"]  # two workers
    assert projected < u.nbytes  # a fraction of one input: the time blocks stream
    got = tg.compute(*outs, memory_limit=projected, workers=2)
    run = tg.last_run()
    un, vn = u.compute(), v.compute()
    for g, want in zip(got, [(un * un).mean(0), (vn * vn).mean(0), (un * vn).mean(0)],
                       strict=True):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, want, rtol=1e-5)
    # under the plan's own projection each time block is made once: neither written to
    # disk nor made again
    assert run.spilled_bytes == 0 and run.recomputed_bytes == 0


def test_a_blocked_matmul_keeps_its_row_by_row_order():
    a = tg.random.random((8, 8), chunks=2, seed=1)
    plan = plan_arrays([a @ a.T])
    g, pr = plan.graph, plan.plan.priority
    stores = [g.keys[i][1:] for i in np.argsort(pr) if g.meta["kind"][i] == "store"]
    assert [s[0] for s in stores] == sorted(s[0] for s in stores)  # one output row at a time


def test_a_dask_graph_without_sizes_streams_its_shared_blocks_too():
    dsk = {("u", i): i for i in range(3)} | {("v", i): i for i in range(3)}
    dsk |= {("uu", i): (mul, ("u", i), ("u", i)) for i in range(3)}
    dsk |= {("uv", i): (mul, ("u", i), ("v", i)) for i in range(3)}
    dsk |= {"suu": (sum, [("uu", i) for i in range(3)]),
            "suv": (sum, [("uv", i) for i in range(3)])}
    g = from_dask(dsk)
    keys = ranked(g, ["suu", "suv"])  # unknown sizes count one each: u_t and v_t stream
    assert keys[:4] == [("u", 0), ("v", 0), ("uv", 0), ("uu", 0)]
    assert tg.get(dsk, ["suu", "suv"]) == (5, 5)


def test_a_block_cut_into_pieces_is_cut_at_once():
    """The split rule: the pieces of a block (its consumers, needing nothing else, no
    larger together) are numbered right after it, so it is read once, not held (or made
    again) until the walk reaches its last piece."""
    dsk = {("src", t): t for t in range(3)}
    dsk |= {("piece", t, g): (mul, ("src", t), 1) for t in range(3) for g in range(4)}
    dsk |= {("group", g): (sum, [("piece", t, g) for t in range(3)]) for g in range(4)}
    g = from_dask(dsk)
    sizes = [4 if k[0] == "src" else 1 for k in g.keys]
    g = g.with_meta(nbytes=sizes)
    keys = ranked(g, [("group", j) for j in range(4)])
    for t in range(3):  # every piece of a block before the next block is read
        at = keys.index(("src", t))
        end = keys.index(("src", t + 1)) if t < 2 else len(keys)
        assert {("piece", t, j) for j in range(4)} <= set(keys[at + 1:end])


@st.composite
def dags(draw):
    """Random DAGs of 1-12 tasks (small and dense: the shapes where a pull meets the walk's
    path), each reading up to 3 earlier ones (repeats allowed), with random sizes, and one
    to three outputs."""
    n = draw(st.integers(1, 12))
    deps = [draw(st.lists(st.integers(0, i - 1), max_size=3)) if i else [] for i in range(n)]
    sizes = draw(st.lists(st.sampled_from([None, 1, 8, 100]), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3, unique=True))
    return deps, sizes, outputs


@given(dags())
@example(([[], [], [0, 1], [0, 1]], [None] * 4, [3, 2]))  # a pull beside the walk's path
@settings(max_examples=500, deadline=None)
def test_order_is_a_permutation_with_every_dependency_first(case):
    deps, sizes, outputs = case
    b = GraphBuilder()
    for i, ds in enumerate(deps):
        b.add(i, sum, deps=ds, args=([Dep(k) for k in range(len(ds))],), nbytes=sizes[i])
    g = b.build()
    prio = order(g, g.indices(outputs))
    assert sorted(prio.tolist()) == list(range(len(g)))
    for i, ds in enumerate(deps):
        for d in ds:
            assert prio[g.index[d]] < prio[g.index[i]]
    needed = set(g.cull(outputs).keys)
    assert max(prio[g.index[k]] for k in needed) == len(needed) - 1  # needed tasks first


def test_a_pull_never_numbers_a_task_on_the_walks_path():
    # e reads t then p; t's other consumer c needs p: p is pulled in while e is on the path
    g = from_dask({"t": 1, "p": 2, "c": (add, "t", "p"), "e": (mul, "t", "p")})
    prio = order(g, g.indices(["e", "c"]))
    assert sorted(prio.tolist()) == [0, 1, 2, 3]
    assert ranked(g, ["e", "c"]) == ["t", "p", "c", "e"]


def circulation(t, sources, levels=2, nlat=6, nlon=256, step=1, steps_per_day=24):
    """A zonal-mean diagnostic of four variables in time blocks (bench/pangeo.py's
    ``circulation``): each variable's zonal mean, the anomalies against it, the zonal means
    of products of the anomalies of different variables, each made daily."""
    shape, chunks = (t, levels, nlat, nlon), (step, levels, nlat, nlon)
    u, v, temp, w = (sources(shape, chunks, seed) for seed in range(4))
    zonal = [tg.mean(x, axis=-1, keepdims=True) for x in (u, v, temp, w)]
    ua, va, ta, wa = (x - m for x, m in zip((u, v, temp, w), zonal, strict=True))
    fluxes = [tg.mean(ua * va, axis=-1), tg.mean(va * ta, axis=-1), tg.mean(ua * wa, axis=-1)]
    diagnostics = [tg.squeeze(m, axis=-1) for m in zonal] + fluxes
    days = t // steps_per_day
    return (u, v, temp, w), [
        tg.mean(tg.reshape(d, (days, steps_per_day, levels, nlat)), axis=1)
        for d in diagnostics]


def random_sources(dtype=np.float32):
    def make(shape, chunks, seed):
        return tg.random.random(shape, chunks=chunks, seed=seed, dtype=dtype)
    return make


def test_a_time_steps_blocks_their_zonal_means_and_anomaly_products_run_together():
    """The group rule: a time step's four blocks are each read by their zonal mean and
    by their anomaly, whose products need the other variables' blocks of that step: they
    run together, so each block is made once and released (not held, or made again, until
    the walk reaches the other outputs)."""
    _, outs = circulation(48, random_sources())
    plan = plan_arrays(outs)
    g, pr = plan.graph, plan.plan.priority
    kinds = g.meta["kind"]
    steps = [g.keys[i][1] for i in np.argsort(pr) if kinds[i] == "random"]
    for k in range(48):  # the blocks of a step among those of at most two steps
        at = [n for n, s in enumerate(steps) if s == k]
        assert len(at) == 4 and at[-1] - at[0] < 8, (k, steps[max(0, at[0] - 4):at[-1] + 4])
    block = 2 * 6 * 256 * 4
    peak, _ = sequential_peak(g, plan.plan.outputs, pr)
    assert peak <= 6 * block  # a step's four blocks and two anomalies; not a variable's 48


@pytest.mark.parametrize("step", [1, 5])  # 5: an uneven last time block
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_zonal_diagnostic_makes_each_block_once_under_a_few_steps_of_memory(step, dtype):
    inputs, outs = circulation(48, random_sources(dtype), step=step)
    block = 2 * 6 * 256 * np.dtype(dtype).itemsize * step
    got = tg.compute(*outs, memory_limit=3 * 4 * block, workers=2)  # three steps' blocks
    run = tg.last_run()
    assert run.spilled_bytes == 0 and run.recomputed_bytes == 0
    u, v, temp, w = (x.compute() for x in inputs)
    zonal = [x.mean(axis=-1, keepdims=True) for x in (u, v, temp, w)]
    ua, va, ta, wa = (x - m for x, m in zip((u, v, temp, w), zonal, strict=True))
    want = [m[..., 0] for m in zonal] + [(ua * va).mean(-1), (va * ta).mean(-1),
                                         (ua * wa).mean(-1)]
    for g, d in zip(got, want, strict=True):
        assert g.dtype == dtype and g.shape == (2, 2, 6)
        np.testing.assert_allclose(g, d.reshape(2, 24, 2, 6).mean(axis=1),
                                   rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


# -- contractions larger than memory run in tiles -----------------------------------------


def _matmul_plan(n: int, block: int, tmp_path):
    a_np = np.random.default_rng(1).random((n, n))
    b_np = np.random.default_rng(2).random((n, n))
    np.save(tmp_path / "a.npy", a_np)
    np.save(tmp_path / "b.npy", b_np)
    a = tg.from_npy(str(tmp_path / "a.npy"), chunks=block)
    b = tg.from_npy(str(tmp_path / "b.npy"), chunks=block)
    return a_np, b_np, a @ b


def test_a_matmul_larger_than_memory_takes_its_steps_tile_by_tile(tmp_path):
    """Under a budget of about 30 blocks, 3 x 3 tiles of output blocks: each tile's chains
    take their k-th step before any takes its (k+1)-th, and the order is unchanged when
    the operands fit."""
    from tilegraph.plan.order import _chains, tile_accumulations

    _, _, c = _matmul_plan(64, 8, tmp_path)  # 8 x 8 blocks of 512 B
    plan = plan_arrays([c])
    g, prio = plan.graph, plan.plan.priority
    assert (tile_accumulations(g, prio, None) == prio).all()
    assert (tile_accumulations(g, prio, 10**9) == prio).all()
    tiled = tile_accumulations(g, prio, 32 * 512)
    assert sorted(tiled.tolist()) == list(range(len(g)))
    assert all(tiled[d] < tiled[i] for i in range(len(g))
               for d in g.dep_idx[g.dep_ptr[i]:g.dep_ptr[i + 1]])
    (chains,) = _chains(g).values()
    coords = g.meta["coords"]
    step = {t: k for chain in chains for k, t in enumerate(chain)}
    first_tile = sorted((t for t in step if tuple(coords[t])[:2] < (3, 3)
                         and all(x < 3 for x in tuple(coords[t])[:2])), key=lambda t: tiled[t])
    assert len(first_tile) == 9 * 8
    assert [step[t] for t in first_tile] == sorted(step[t] for t in first_tile)
    assert [step[t] for t in sorted(step, key=lambda t: prio[t])][:3] == [0, 1, 2]  # before


@pytest.mark.parametrize("n, block, limit", [(240, 30, "300KB"), (250, 40, "600KB")])
def test_a_matmul_from_files_under_a_small_budget_reads_far_less(tmp_path, n, block, limit):
    """NumPy's product, nothing spilled, and the operands read about ``inputs +
    n^3 / sqrt(M)`` elements in all (the bound of an order that keeps tiles resident),
    uneven edge blocks included."""
    import math

    a_np, b_np, c = _matmul_plan(n, block, tmp_path)
    got = c.compute(memory_limit=limit, workers=2)
    np.testing.assert_allclose(got, a_np @ b_np, rtol=1e-12)
    run = tg.last_run()
    assert run.spilled_bytes == 0
    memory = tg.util.parse_bytes(limit) / 8
    bound = 8 * (2 * n * n + n**3 / math.sqrt(memory))
    reads = 8 * 2 * n * n + run.recomputed_bytes
    assert reads <= 1.3 * bound, (reads, bound)


def test_tiling_a_graph_without_sizes_changes_nothing():
    """A contraction whose tasks carry no sizes (a dask graph, a hand-built one) fits any
    memory: its order stays."""
    from tilegraph.plan.order import tile_accumulations

    a = tg.random.random((40, 40), chunks=10, seed=1)
    plan = plan_arrays([a @ a])
    g = plan.graph.with_meta(nbytes=[None] * len(plan.graph))
    prio = plan.plan.priority
    assert (tile_accumulations(g, prio, 1) == prio).all()


def most_waiting(g, priority, made):
    """The most tasks of ``made`` finished and not yet read by a consumer at once, the
    tasks run one by one in ``priority`` order."""
    waiting = most = 0
    for i in np.argsort(priority).tolist():
        if i in made:
            waiting += 1
            most = max(most, waiting)
        waiting -= sum(1 for d in g.dep_idx[g.dep_ptr[i]:g.dep_ptr[i + 1]].tolist()
                       if d in made)
    return most


def test_consumers_completed_by_one_block_are_combined_group_by_group():
    # the anomalies against one climatology all become complete when it is numbered: each
    # group of them is combined before the next group is made, so at most two groups of
    # partials wait (the first group's combine also waits for the one partial the walk is
    # on), not all 40
    x = tg.random.random((480, 64), chunks=(12, 64), seed=3)  # a group per block
    r = x.reshape((40, 12, 64))
    out = (r - r.mean(axis=0)).mean(axis=(0, 1))
    plan = plan_arrays([out])
    g, pr = plan.graph, plan.plan.priority
    names = g.meta["name"]
    anomalies = {i for i in range(len(g)) if names[i] == "reshape+subtract+mean-partial"}
    assert len(anomalies) == 40
    most = most_waiting(g, pr, anomalies)
    assert most <= 2 * 8 - 1  # split_every: 8


@pytest.mark.parametrize("groups", [100, 160])
def test_consumers_completed_by_one_block_feed_their_accumulation_chains_as_they_come(groups):
    # under a limit the anomalies' partials fold into one accumulation chain per worker;
    # the walk has the first chain on its path (down to the anomaly that waits for the
    # climatology) and used to number that chain's steps only when it unwound, after every
    # anomaly: half of them waited. Every chain now takes each partial as it is made.
    x = tg.random.random((groups * 6, 4096), chunks=(1, 4096), seed=3)
    r = x.rechunk((6, 4096)).reshape((groups, 6, 4096))  # random rows gathered by six
    out = (r - r.mean(axis=0)).mean(axis=(0, 1))
    with tg.config.set(memory_limit=8 * 6 * 4096 * 8, workers=2):
        plan = plan_arrays([out])
    g, pr = plan.graph, plan.plan.priority
    names, kinds = g.meta["name"], g.meta["kind"]
    anomalies = {i for i in range(len(g)) if names[i] == "reshape+subtract+mean-partial"}
    assert len(anomalies) == groups
    assert sum(1 for k in kinds if k == "accumulate") >= groups - 2  # (chains, not a tree)
    most = most_waiting(g, pr, anomalies)
    assert most <= 3
