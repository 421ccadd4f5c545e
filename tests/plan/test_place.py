"""Placement: the grid rule on exact worker ids, the initial placements, the producers rule,
the communication volume of a blocked matmul against SUMMA's, and the vector rule of
matrix @ vector and X.T @ X on exact worker ids."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.algebra.demand import lower
from tilegraph.array.lowering import plan_arrays
from tilegraph.graph import GraphBuilder
from tilegraph.graph.kinds import kind_info
from tilegraph.plan.cost import CostModel
from tilegraph.plan.place import (
    DRIVER,
    POOL,
    choose_on_start,
    grid_shape,
    grid_workers,
    place,
    place_driver_or_pool,
    start_rule,
)
from tilegraph.plan.simulate import communication_volume, simulate, transfers


def _matmul_graph(n: int, block: int = 4, seed: int = 0):
    a = tg.random.random((n * block, n * block), chunks=block, seed=seed)
    b = tg.random.random((n * block, n * block), chunks=block, seed=seed + 1)
    return lower([(a @ b).collection]).build()


@pytest.mark.parametrize(("p", "shape"), [(1, (1, 1)), (2, (1, 2)), (3, (1, 3)), (4, (2, 2)),
                                          (5, (2, 2)), (6, (2, 3)), (8, (2, 4)), (9, (3, 3)),
                                          (16, (4, 4)), (256, (16, 16))])
def test_grid_shape(p, shape):
    assert grid_shape(p) == shape


def test_grid_workers_exact_ids():
    # 4 workers: 2 x 2 grid, (i mod 2) * 2 + (j mod 2)
    coords = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 3), (3, 2), (5, 5)]
    assert grid_workers(coords, 4).tolist() == [0, 1, 2, 3, 1, 2, 3]
    # 6 workers: 2 x 3 grid, (i mod 2) * 3 + (j mod 3)
    assert grid_workers([(0, 0), (0, 4), (1, 2), (3, 5)], 6).tolist() == [0, 1, 5, 5]
    # vectors: i mod p; scalars: worker 0; a batch coordinate shifts the row
    assert grid_workers([(0,), (5,), (7,), ()], 4).tolist() == [0, 1, 3, 0]
    assert grid_workers([(1, 0, 0), (1, 1, 1)], 4).tolist() == [2, 1]


def test_group_by_join_tasks_follow_the_grid():
    g = _matmul_graph(4)
    for p in (2, 4, 6, 9):
        where = place(g, p)
        kinds, coords = g.meta["kind"], g.meta["coords"]
        d, c = grid_shape(p)
        for i, kind in enumerate(kinds):
            if kind in ("product", "accumulate"):
                i_, j_ = coords[i]
                assert where[i] == (i_ % d) * c + j_ % c, (p, g.keys[i])
            if kind == "random":  # inputs: 2-D block-cyclic on the same grid
                i_, j_ = coords[i]
                assert where[i] == (i_ % d) * c + j_ % c


def test_stores_gather_on_worker_0_and_fusion_keeps_workers_apart():
    a = tg.random.random((16, 16), chunks=4, seed=1)
    plan = plan_arrays([a @ a], processes=4)
    g = plan.graph
    kinds, where = g.meta["kind"], g.meta["worker"]
    assert {where[i] for i, k in enumerate(kinds) if k == "store"} == {0}
    # only the output blocks computed on worker 0 fused their last step into the store
    assert plan.fuse_stats.chains.get("gemm_accumulate+store") == 4
    ptr, idx = g.dep_ptr, g.dep_idx
    for i in range(len(g)):
        if kinds[i] == "store" and g.opname(i) == "store":
            producer = int(idx[ptr[i]])
            assert where[producer] != 0


def test_driver_or_pool_by_op_kind():
    """The serverless backend's rule: data, gathers, views of data only and loads of
    in-memory arrays on the driver; everything else in the pool."""
    b = GraphBuilder()
    b.add_data("x", np.ones(4))
    b.add("view", lambda v: v[:2], deps=["x"], kind="getitem")
    b.add("from_numpy", lambda v: v, args=(np.ones(3),), kind="load")
    b.add("from_file", lambda f: f, args=("a.npy",), kind="load")
    b.add("e", np.negative, deps=["view"], kind="elementwise")
    b.add("view of e", np.transpose, deps=["e"], kind="transpose")
    b.add("view of both", np.add, deps=["x", "e"], kind="getitem")
    b.add("opaque", abs, deps=["x"])
    b.add("store", lambda v: v, deps=["view of e"], kind="store")
    g = b.build()
    assert place_driver_or_pool(g) == [DRIVER, DRIVER, DRIVER, POOL, POOL, POOL, POOL, POOL,
                                       DRIVER]
    assert place_driver_or_pool(GraphBuilder().build()) == []
    # an array expression: its from_numpy blocks and its stores on the driver
    x = tg.from_numpy(np.arange(16.0).reshape(4, 4), chunks=2)
    g = plan_arrays([(x + 1).sum(axis=0)], fuse=False).graph
    where, kinds = place_driver_or_pool(g), g.meta["kind"]
    assert {kinds[i] for i in range(len(g)) if where[i] == DRIVER} == {"load", "store"}
    assert "load" not in {kinds[i] for i in range(len(g)) if where[i] == POOL}


def test_producers_rule_picks_the_less_loaded_or_cheaper_worker():
    b = GraphBuilder()
    b.add("x", lambda: 1, kind="load", coords=(0,), nbytes=8)
    b.add("y", lambda: 1, kind="load", coords=(1,), nbytes=8)
    b.add("big", lambda: 1, kind="load", coords=(1,), nbytes=10**9)
    b.add("j", lambda u, v: u + v, deps=["x", "y"], kind="elementwise", nbytes=8)
    b.add("k", lambda u, v: u + v, deps=["x", "big"], kind="elementwise", nbytes=8)
    g = b.build()
    model = CostModel(task_overhead=0.0)
    where = place(g, 2, model=model)
    assert where[:3].tolist() == [0, 1, 1]  # cyclic inputs
    # j: both inputs are 8 bytes; worker 0 has the less load (x only, vs y and big)
    assert where[3] == 0
    # k: moving the 1 GB block costs far more than any load difference
    assert where[4] == 1
    # with alpha = 0 communication is free: k goes to the least loaded worker
    assert place(g, 2, alpha=0.0, model=model)[4] == 0


def test_locality_initial_placement_is_balanced_and_keeps_shared_consumers_together():
    b = GraphBuilder()
    for i in range(8):
        b.add(("in", i), lambda: 1, kind="load", nbytes=8)
    for i in range(0, 8, 2):
        b.add(("sum", i), lambda u, v: u + v, deps=[("in", i), ("in", i + 1)],
              kind="elementwise", nbytes=8)
    g = b.build()
    where = place(g, 4, initial="locality")
    ins = where[:8]
    assert np.bincount(ins, minlength=4).tolist() == [2, 2, 2, 2]
    for i in range(0, 8, 2):
        assert ins[i] == ins[i + 1]  # the two inputs of a sum live together
    cyclic = place(g, 4)
    assert communication_volume(g, where, gather_to=None)[0] == 0
    assert communication_volume(g, cyclic, gather_to=None)[0] > 0


@pytest.mark.parametrize("p", [4, 16])
def test_matmul_volume_equals_summa_and_beats_round_robin(p):
    n = 8
    g = _matmul_graph(n)
    d = int(np.sqrt(p))
    block_bytes = 4 * 4 * 8
    moved, _ = communication_volume(g, place(g, p), gather_to=None)
    # SUMMA on a d x d grid with 2-D block-cyclic inputs: each block of A goes to the d - 1
    # other workers of its grid row, each block of B to the d - 1 others of its column
    summa = 2 * n * n * (d - 1) * block_bytes
    assert moved == summa
    robin = np.arange(len(g)) % p
    assert communication_volume(g, robin, gather_to=None)[0] > 1.4 * summa


def test_place_rejects_bad_input():
    g = _matmul_graph(2)
    with pytest.raises(ValueError, match="workers must be a positive int"):
        place(g, 0)
    with pytest.raises(ValueError, match="initial placement must be one of"):
        place(g, 2, initial="random")
    with pytest.raises(ValueError, match="alpha must be a number"):
        place(g, 2, alpha=-1)
    with pytest.raises(ValueError, match="gather_to must be a worker"):
        place(g, 2, gather_to=2)


def test_one_worker_and_empty_graph():
    g = _matmul_graph(2)
    assert place(g, 1).tolist() == [0] * len(g)
    assert place(GraphBuilder().build(), 3).tolist() == []


def test_explain_with_workers_simulates_the_placed_plan():
    a = tg.random.random((64, 64), chunks=16, seed=1)
    text = (a @ a).explain(workers=4)
    assert "placed on 4 workers (grid 2 x 2, inputs cyclic)" in text
    assert "makespan" in text and "moved between workers" in text
    assert "peak memory per worker" in text
    with pytest.raises(ValueError, match="workers must be a positive int"):
        (a @ a).explain(workers=0)


def test_reductions_send_only_partials():
    x = tg.random.random((400, 400), chunks=100, seed=3)
    plan = plan_arrays([x.sum(axis=0)], processes=4)
    g = plan.graph
    moved, _ = communication_volume(g, g.meta["worker"], g.indices(plan.outputs))
    # each block is reduced where it is made; only partial sums (one row each) travel
    assert 0 < moved <= 16 * 100 * 8


# -- the vector rule: matrix @ vector and X.T @ X --------------------------------------------


def _parts(g, kind="partial_product"):
    """Task index -> the ``(i, j, k)`` of each product of ``kind``, from its key."""
    return {t: g.keys[t][1:] for t, k in enumerate(g.meta["kind"]) if k == kind}


def _sources_of(g, array):
    return [g.index[array.collection.key(c)] for c in np.ndindex(*array.numblocks)]


@pytest.mark.parametrize("p", [2, 4, 16])
def test_matrix_vector_products_run_where_the_matrix_blocks_live(p):
    # 8 x 8 blocks of 100 x 100; the vector in 8 blocks of 100
    a = tg.random.random((800, 800), chunks=100, seed=1)
    v = tg.random.random((800,), chunks=100, seed=2)
    plan = plan_arrays([a @ v], processes=p, fuse=False)
    g = plan.graph
    where = np.asarray(g.meta["worker"])
    d, c = grid_shape(p)
    # A: 2-D block-cyclic; v: 1-D cyclic
    for (i, k), t in zip(np.ndindex(8, 8), _sources_of(g, a), strict=True):
        assert where[t] == (i % d) * c + k % c
    assert [where[t] for t in _sources_of(g, v)] == [k % p for k in range(8)]
    parts = _parts(g)
    assert len(parts) == 64
    for t, (i, j, k) in parts.items():
        assert j == 0 and where[t] == (i % d) * c + k % c, (p, g.keys[t])
    # no block of A moves; only blocks of v, small partial sums and the result do
    tasks, _ = transfers(g, where, g.indices(plan.outputs))
    assert not set(tasks.tolist()) & set(_sources_of(g, a))
    sim, _ = _simulated(a @ v, p)  # fused, as it runs
    assert sim.bytes_moved <= 0.05 * a.nbytes
    np.testing.assert_allclose((a @ v).compute(), a.compute() @ v.compute())


@pytest.mark.parametrize("p", [2, 4, 16])
def test_gram_matrix_of_row_blocks_is_computed_where_the_rows_live(p):
    # X.T @ X for X in 16 row blocks of 1000 x 4
    x = tg.random.random((16000, 4), chunks=(1000, 4), seed=3)
    plan = plan_arrays([x.T @ x], processes=p)
    g = plan.graph
    where = np.asarray(g.meta["worker"])
    kinds = g.meta["kind"]
    # each row block is made inside the one product that reads it (its transposed view
    # too), and that product runs on worker k mod p
    assert "transpose" not in kinds and "random" not in kinds
    parts = _parts(g)
    assert sorted(k for _, _, k in parts.values()) == list(range(16))
    for t, (_, _, k) in parts.items():
        assert where[t] == k % p
        assert g.dependencies(g.keys[t]) == []
    # the partial sums meet in a tree on the workers of their inputs
    for t, kind in enumerate(kinds):
        if kind == "reduce":
            deps = g.dep_idx[g.dep_ptr[t]:g.dep_ptr[t + 1]]
            assert 1 < len(deps) <= 8 and where[t] in set(where[deps].tolist())
    moved, _ = communication_volume(g, where, g.indices(plan.outputs))
    assert moved <= 0.02 * x.nbytes
    xs = x.compute()
    np.testing.assert_allclose((x.T @ x).compute(), xs.T @ xs)


def test_placement_goals_of_matrix_vector_and_gram_matrix():
    # planning only, at full size: the figures bench/placement_cases.py prints
    a = tg.random.random((16000, 16000), chunks=1000, seed=1)
    v = tg.random.random((16000,), chunks=1000, seed=2)
    sim, _ = _simulated(a @ v, 4)
    assert sim.bytes_moved <= 0.05 * a.nbytes
    x = tg.random.random((2_000_000, 100), chunks=(125_000, 100), seed=3)
    sim, _ = _simulated(x.T @ x, 16)
    assert sim.bytes_moved <= 0.02 * x.nbytes
    assert sim.utilisation >= 0.5


def _simulated(result, p):
    plan = plan_arrays([result], processes=p)
    g = plan.graph
    outputs = g.indices(plan.outputs)
    return simulate(g, np.asarray(g.meta["worker"]), p, outputs=outputs), g


def test_square_matmul_keeps_the_grid_rule():
    a = tg.random.random((64, 64), chunks=16, seed=1)
    g = plan_arrays([a @ a], processes=4, fuse=False).graph
    kinds = set(g.meta["kind"])
    assert "partial_product" not in kinds and {"product", "accumulate"} <= kinds


def test_vector_rule_follows_the_largest_input():
    b = GraphBuilder()
    b.add("small", lambda: 1, kind="load", coords=(0,), nbytes=8)
    b.add("big", lambda: 1, kind="load", coords=(1,), nbytes=1000)
    b.add("p", lambda u, v: u, deps=["small", "big"], kind="partial_product", nbytes=8)
    b.add("q", lambda u, v: u, deps=["big", "small"], kind="partial_product", nbytes=8)
    assert place(b.build(), 3).tolist() == [0, 1, 1, 1]


# -- placement when a task starts (the "at-start" rule of a script's statements) -----------


def test_a_statement_is_placed_when_it_starts():
    assert kind_info("statement").placement == "at-start"
    assert start_rule("statement") is choose_on_start
    with pytest.raises(ValueError, match="'product' is placed by the 'grid' rule"):
        start_rule("product")


def test_a_step_goes_where_its_inputs_are_unless_much_more_waits_elsewhere():
    mb = 1 << 20
    assert choose_on_start([0, 1], [0, 5 * mb], [0, 0]) == 1
    assert choose_on_start([0, 1], [0, 0], [0, 0], own=1) == 1   # ties: the asking thread's
    assert choose_on_start([0, 1], [0, 0], [0, 0]) == 0
    # the busy process 2 holds 40 MB more than any idle one: wait for it
    assert choose_on_start([0, 1], [0, mb, 41 * mb], [0, 0, 0]) is None
    assert choose_on_start([0, 1], [0, mb, 41 * mb], [0, 0, 0], move_wait=64 * mb) == 1
    assert choose_on_start([], [0, 0], [0, 0]) is None


def test_a_chain_starts_on_the_process_bound_to_the_least_work():
    # process 0 is bound to 3 steps of a chain placed already: the new chain avoids it
    assert choose_on_start([0, 1], [9, 0], [3, 0], first_of_group=True) == 1
    # the only idle process is bound to more work than a busy one: wait for the busy one
    assert choose_on_start([0], [0, 0], [3, 0], first_of_group=True) is None
    # equal work: the inputs decide, then the asking thread
    assert choose_on_start([0, 1], [0, 7], [1, 1], first_of_group=True) == 1
    assert choose_on_start([0, 1], [0, 0], [1, 1], first_of_group=True, own=1) == 1
