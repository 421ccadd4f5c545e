"""Lowering arrays to one TaskGraph: structure, sharing, fusion, laziness, explain."""

from collections import Counter

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.graph import GraphBuilder
from tilegraph.plan.fuse import fuse_chains


def kinds(plan):
    return Counter(plan.graph.meta["kind"])


def test_elementwise_chain_fuses_into_one_task_per_block():
    a = tg.random.random((60, 40), chunks=(20, 20), seed=1)
    b = tg.random.random((60, 40), chunks=(20, 20), seed=2)
    c = tg.random.random((60, 40), chunks=(20, 20), seed=3)
    expr = ((a + 1) * b - c).sum()
    plan = plan_arrays([expr])
    k = kinds(plan)
    assert k["partial"] == 6  # one fused task per block: make a, b, c, compute, partial sum
    assert "elementwise" not in k and "random" not in k
    assert plan.fuse_stats.before > len(plan.graph)
    name = next(n for n in plan.graph.meta["name"] if "partial" in n)
    assert "add" in name and "multiply" in name and "subtract" in name
    an, bn, cn = (x.compute() for x in (a, b, c))
    np.testing.assert_allclose(expr.compute(), ((an + 1) * bn - cn).sum())


def test_shared_input_is_fused_once(monkeypatch):
    import tilegraph.array.random_blocks as trandom

    draws = []
    draw = trandom._draw

    def counted(*args):
        draws.append(args[1])
        return draw(*args)

    monkeypatch.setattr(trandom, "_draw", counted)
    x = tg.random.random((40, 40), chunks=20, seed=5)
    y = (x + 1) * x  # x has two consumers per block, both inside one fused task
    plan = plan_arrays([y])
    assert "random" not in kinds(plan) and len(plan.graph) == 4
    got = y.compute()
    assert len(draws) == 4  # each block drawn once, though read twice
    xn = x.compute()
    np.testing.assert_allclose(got, (xn + 1) * xn)


def test_common_subexpressions_are_planned_once():
    x = tg.from_numpy(np.arange(100.0), chunks=10)
    s1 = (x * 2 + 1).sum()
    s2 = (x * 2 + 1).sum()  # built separately: same names
    assert s1.name == s2.name
    plan = plan_arrays([s1, s2])
    single = plan_arrays([s1])
    assert len(plan.graph) == len(single.graph)
    assert tg.compute(s1, s2) == (10000.0, 10000.0)


def test_compute_shares_one_plan_for_several_outputs():
    x = tg.from_numpy(np.arange(24.0).reshape(4, 6), chunks=2)
    y = x + 1
    a, b, c = tg.compute(y.sum(axis=0), y.max(), y)
    ref = np.arange(24.0).reshape(4, 6) + 1
    np.testing.assert_array_equal(a, ref.sum(axis=0))
    assert b == ref.max()
    np.testing.assert_array_equal(c, ref)
    assert tg.compute(1, y.sum(), "text") == (1, ref.sum(), "text")


def test_planning_is_lazy_and_reads_no_data(forbid_compute):
    def explode(*args):
        raise AssertionError("a block was read while planning")

    x = tg.from_numpy(np.ones((30, 30)), chunks=7)
    y = x.map_blocks(explode, dtype=float)
    z = (y @ y.T + 1)[3:20:2].sum(axis=1)
    plan = plan_arrays([z])
    assert len(plan.graph) > 0
    assert "tasks per kind" in z.explain()
    with pytest.raises(AssertionError, match="a run of"):
        z.compute()


def test_matmul_plan_structure():
    a = tg.ones((30, 40), chunks=10)
    b = tg.ones((40, 20), chunks=10)
    plan = plan_arrays([a @ b], fuse=False)
    k = kinds(plan)
    assert k["product"] == 3 * 2  # one product per output block
    assert k["accumulate"] == 3 * 2 * 3  # then one accumulation per further inner block
    assert k["store"] == 6
    acc = [i for i, kk in enumerate(plan.graph.meta["kind"]) if kk == "accumulate"]
    assert all(len(plan.graph.dependencies(plan.graph.keys[i])) == 3 for i in acc)


def test_output_buffer_is_only_allocated_when_run():
    x = tg.ones((2000, 2000), chunks=500)
    plan = plan_arrays([x + 1])
    assert all(buf is None or buf._array is None for buf in plan.results.buffers)


def test_explain_reports_the_plan():
    x = tg.random.random((100, 100), chunks=50, seed=0)
    text = (x @ x).explain()
    assert "plan:" in text and "tasks per kind" in text and "product" in text
    assert "flops: 2e+06" in text
    assert "estimated peak memory" in text
    html = (x @ x)._repr_html_()
    assert "<table>" in html and "(100, 100)" in html


def test_fusion_leaves_unfusable_graphs_alone():
    b = GraphBuilder()
    b.add_data("a", 1)
    b.add("b", abs, deps=["a"], kind="elementwise")
    b.add("c", abs, deps=["a"], kind="elementwise")
    g = b.build()
    fused, stats = fuse_chains(g, g.indices(["b", "c"]))
    assert fused is g and stats.before == stats.after == 3


def test_fusion_rewrites_templates_and_keeps_results():
    b = GraphBuilder()
    b.add_data("x", np.arange(4.0))
    b.add_data("y", np.ones(4))
    b.add("p", np.add, deps=["x", "y"], kind="elementwise")
    b.add("q", np.multiply, deps=["p", "x"], kind="elementwise")
    b.add("r", np.sum, deps=["q"], kind="partial")
    g = b.build()
    fused, stats = fuse_chains(g, g.indices(["r"]))
    assert len(fused) == 3 and stats.chains == {"add+multiply+sum": 1}
    assert sorted(fused.dependencies("r")) == ["x", "y"]
    assert tg.run(fused, ["r"], backend="sync") == [(np.arange(4.0) + 1) @ np.arange(4.0)]


def test_repr_is_instant_and_large_plans_are_refused_naming_their_size(forbid_compute):
    import time

    a = tg.ones((10**6, 10**6), chunks=1000)
    c = a @ a  # 1000 x 1000 x 1000 block products
    t0 = time.perf_counter()
    text = repr(c)
    assert time.perf_counter() - t0 < 0.05
    assert text.startswith("tilegraph.Array<shape=(1000000, 1000000)")
    with pytest.raises(tg.PlanTooLargeError, match=r"the plan has 1,002,000,000 tasks, more "
                                                   r"than max_tasks=50,000,000"):
        c.explain()
    with pytest.raises(tg.PlanTooLargeError, match="1,002,000,000 tasks"):
        c.compute()
    small = tg.ones((40, 40), chunks=10) + 1
    with tg.config.set(max_tasks=20):
        with pytest.raises(tg.PlanTooLargeError, match=r"has 48 tasks, more than max_tasks=20"):
            small.explain()
    with pytest.raises(tg.PlanTooLargeError, match="more than max_tasks=20"):
        tg.get({"a": 1, **{f"b{i}": (abs, "a") for i in range(20)}}, "b0", max_tasks=20)
    assert "plan: " in small.explain()


def test_blocks_of_zeros_are_not_copied_into_the_result_and_signed_zeros_survive():
    from tilegraph.array import lowering

    rng = np.random.default_rng(4)
    for dtype in (np.float64, np.float32, np.complex128, np.int32, np.bool_):
        a = np.tril(rng.standard_normal((47, 47)) * 3).astype(dtype)
        if np.dtype(dtype).kind in "fc":
            a[20:30, 30:40] = -0.0  # inside blocks of zeros: the sign must come back
        if np.dtype(dtype).kind == "c":
            a[0:10, 40:47] = complex(0.0, -0.0)
        got = tg.from_numpy(a, chunks=(10, 10)).compute()
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, a)
        if np.dtype(dtype).kind in "fc":
            np.testing.assert_array_equal(np.signbit(got.real), np.signbit(a.real))
            np.testing.assert_array_equal(np.signbit(got.imag), np.signbit(a.imag))
    z = np.zeros((6, 6))
    assert lowering._all_zero(z) and lowering._all_zero(z[::2, ::3])
    assert not lowering._all_zero(-z) and not lowering._all_zero(np.zeros(0))
    assert not lowering._all_zero(np.array([0.0, np.nan]))
    assert not lowering._all_zero(np.array([0.0, 1e-300]))
    assert not lowering._all_zero(np.array([0j, complex(0.0, -0.0)]))
    assert lowering._all_zero(np.zeros(3, dtype=int)) and not lowering._all_zero([0, 0])
    # every block zeros: the result is still allocated, zeros of the right type
    out = tg.zeros((25, 25), chunks=10, dtype=np.float32).compute()
    assert out.dtype == np.float32 and out.shape == (25, 25) and not out.any()
    strs = tg.from_numpy(np.array([["a", "b"], ["c", ""]]), chunks=1).compute()
    assert strs.tolist() == [["a", "b"], ["c", ""]]  # not a number: written as before
