"""The tensor algebra on its own: block collections built with ``source``, lowered with
``lower``, built into a TaskGraph and run with ``tilegraph.run``; values against NumPy,
plan structure without running, and laziness of planning."""

from __future__ import annotations

import operator
from collections import Counter
from functools import partial
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph
from tilegraph.algebra import (
    MIN_PLUS,
    PLUS_TIMES,
    Blocks,
    apply_blocks,
    flat_map,
    group_by_join,
    join,
    lower,
    map_blocks,
    reduce_by_key,
    remap,
    remap_by,
    source,
)
from tilegraph.algebra.demand import BLOCK_RULES, BlockRule, LoweringPlan, register_block_rule
from tilegraph.graph import Dep, GraphError
from tilegraph.runtime.events import Release, TaskEnd

SETTINGS = settings(max_examples=25, deadline=None, database=None)


# -- helpers ---------------------------------------------------------------------------------


def offsets(sizes):
    return np.concatenate([[0], np.cumsum(sizes)]).astype(int)


def _block(x, slices):
    return x[slices]


def blocked_source(label: str, x: np.ndarray, chunks) -> Blocks:
    """A collection over the blocks of ``x`` cut by ``chunks`` (per-axis block sizes)."""
    offs = [offsets(c) for c in chunks]

    def task_of(coord):
        slices = tuple(slice(o[c], o[c + 1]) for o, c in zip(offs, coord, strict=True))
        return _block, (x, slices)

    return source(label, tuple(len(c) for c in chunks), task_of, kind="load")


def run_all(coll: Blocks, **options) -> dict:
    """Lower, build and run ``coll``; its block values by coordinate."""
    options.setdefault("backend", "sync")
    graph = lower([coll]).build()
    coords = list(coll.coords())
    values = tilegraph.run(graph, [coll.key(c) for c in coords], **options)
    return dict(zip(coords, values, strict=True))


def assemble(values: dict, grid) -> np.ndarray:
    """The blocks of ``values`` (coordinate -> block) put together into one array."""
    nested = np.empty(grid, dtype=object)
    for coord, v in values.items():
        nested[coord] = v
    return np.block(nested.tolist()) if len(grid) else nested[()]


def kinds(graph) -> Counter:
    return Counter(graph.meta["kind"])


@st.composite
def block_sizes(draw, n: int):
    cuts = draw(st.sets(st.integers(1, n - 1), max_size=n - 1)) if n > 1 else set()
    return tuple(b - a for a, b in pairwise([0, *sorted(cuts), n]))


def matmul_pairs(nk: int):
    def pairs_of(o):
        return [((o[0], k), (k, o[1])) for k in range(nk)]

    return pairs_of


def _zeros(shape):
    return np.zeros(shape)


# -- Blocks, source, lower -------------------------------------------------------------------


def test_blocks_keys_and_grid():
    b = Blocks("x", (2, 3))
    assert b.nblocks == 6
    assert b.key((1, 2)) == ("x", 1, 2)
    assert b.keys.shape == (2, 3)
    assert b.keys[1, 2] == ("x", 1, 2)
    assert list(b.coords()) == [(i, j) for i in range(2) for j in range(3)]
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 3\)"):
        Blocks("y", (2, 3), keys=np.empty(3, dtype=object))


def test_source_runs_one_task_per_block_with_metadata():
    x = np.arange(12.0).reshape(3, 4)
    coll = blocked_source("x", x, ((1, 2), (3, 1)))
    graph = lower([coll]).build()
    assert len(graph) == 4
    assert graph.task_meta(("x", 1, 0)).coords == (1, 0)
    assert graph.task_meta(("x", 1, 0)).kind == "load"
    values = run_all(coll)
    np.testing.assert_array_equal(values[(1, 0)], x[1:3, 0:3])
    np.testing.assert_array_equal(assemble(values, coll.grid), x)


def test_source_metadata_may_be_callables_of_the_coordinate():
    coll = source("s", (3,), lambda c: (int, (c[0],)), nbytes=lambda c: 8 * (c[0] + 1))
    graph = lower([coll]).build()
    assert [graph.task_meta(("s", i)).nbytes for i in range(3)] == [8, 16, 24]


def test_lower_emits_each_collection_once_by_name_inputs_first():
    x = blocked_source("x", np.arange(6.0), ((2, 4),))
    y = map_blocks("y", np.negative, [x], x.grid)
    z1 = map_blocks("z", operator.add, [x, y], x.grid)
    z2 = map_blocks("z", operator.add, [x, y], x.grid)  # the same tasks, by name
    graph = lower([z1, z2, y]).build()
    assert len(graph) == 6
    pos = {k: i for i, k in enumerate(graph.keys)}
    for key in graph.keys:
        for dep in graph.dependencies(key):
            assert pos[dep] < pos[key]


def test_lower_a_deep_chain_without_recursion():
    coll = source("c0", (1,), lambda c: (int, (0,)))
    for n in range(1, 3000):
        coll = map_blocks(f"c{n}", partial(operator.add, 1), [coll], (1,))
    assert run_all(coll) == {(0,): 2999}


# -- map_blocks ------------------------------------------------------------------------------


@SETTINGS
@given(m=st.integers(1, 7), n=st.integers(1, 7), data=st.data())
def test_map_blocks_elementwise_and_broadcast(m, n, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    cm, cn = data.draw(block_sizes(m)), data.draw(block_sizes(n))
    x, y, r = rng.standard_normal((m, n)), rng.standard_normal((m, n)), rng.standard_normal(n)
    bx, by = blocked_source("x", x, (cm, cn)), blocked_source("y", y, (cm, cn))
    br = blocked_source("r", r, (cn,))
    grid = bx.grid
    out = map_blocks("f", lambda a, b, c: a * b + c, [bx, by, br], grid,
                     index_maps=[None, None, lambda c: (c[1],)], kind="elementwise")
    np.testing.assert_allclose(assemble(run_all(out), grid), x * y + r)


def test_map_blocks_with_args_template_kwargs_and_repeated_input():
    x = np.arange(10.0)
    bx = blocked_source("x", x, ((3, 3, 4),))
    # the same block twice, a literal between, and a keyword argument
    out = map_blocks("f", np.clip, [bx, bx], bx.grid, args=(Dep(0), 2.0, Dep(1)))
    np.testing.assert_array_equal(assemble(run_all(out), out.grid), np.clip(x, 2.0, x))
    twice = map_blocks("g", operator.sub, [bx, bx], bx.grid)
    graph = lower([twice]).build()
    assert graph.dependencies(("g", 0)) == [("x", 0)]
    np.testing.assert_array_equal(assemble(run_all(twice), twice.grid), np.zeros(10))
    kw = map_blocks("h", np.round, [bx], bx.grid, kwargs={"decimals": -1})
    np.testing.assert_array_equal(assemble(run_all(kw), kw.grid), np.round(x, -1))


def test_map_blocks_metadata_and_bad_index_maps():
    bx = blocked_source("x", np.arange(4.0), ((2, 2),))
    out = map_blocks("f", np.negative, [bx], bx.grid, kind="elementwise",
                     nbytes=lambda c: 100 + c[0])
    graph = lower([out]).build()
    assert graph.task_meta(("f", 1)) .nbytes == 101
    assert graph.task_meta(("f", 1)).kind == "elementwise"
    assert graph.task_meta(("f", 1)).coords == (1,)
    with pytest.raises(ValueError, match="1 inputs but 2 index maps"):
        map_blocks("g", np.negative, [bx], bx.grid, index_maps=[None, None])
    # an index map pointing outside the input grid is caught when the graph is built
    bad = map_blocks("h", np.negative, [bx], (3,))
    with pytest.raises(GraphError, match="not in the graph"):
        lower([bad]).build()


# -- apply_blocks ----------------------------------------------------------------------------


def test_apply_blocks_general_tasks():
    x = np.arange(9.0)
    bx = blocked_source("x", x, ((2, 3, 4),))

    def task_of(coord):
        # block i is the sum of blocks 0..i
        deps = [bx.key((j,)) for j in range(coord[0] + 1)]
        return (lambda *blocks: sum(float(b.sum()) for b in blocks)), deps, None

    out = apply_blocks("cum", (3,), [bx], task_of, kind="aggregate")
    values = run_all(out)
    assert [values[(i,)] for i in range(3)] == [x[:2].sum(), x[:5].sum(), x.sum()]
    graph = lower([out]).build()
    assert graph.task_meta(("cum", 2)).kind == "aggregate"
    assert len(graph.dependencies(("cum", 2))) == 3

    def with_template(coord):
        return np.multiply, [bx.key(coord)], (Dep(0), 10.0)

    scaled = apply_blocks("scaled", (3,), [bx], with_template)
    np.testing.assert_array_equal(assemble(run_all(scaled), (3,)), 10 * x)


# -- flat_map --------------------------------------------------------------------------------


def _halves(block):
    h = len(block) // 2
    return block[:h], block[h:]


def test_flat_map_splits_blocks():
    x = np.arange(12.0)
    bx = blocked_source("x", x, ((4, 2, 6),))
    out = flat_map("split", _halves, bx, lambda c: [(2 * c[0],), (2 * c[0] + 1,)], (6,),
                   kind="map")
    values = run_all(out)
    assert [len(values[(i,)]) for i in range(6)] == [2, 2, 1, 1, 3, 3]
    np.testing.assert_array_equal(assemble(values, (6,)), x)
    graph = lower([out]).build()
    assert kinds(graph)["map"] == 3
    assert kinds(graph)["getitem"] == 6


def test_flat_map_checks_its_outputs():
    bx = blocked_source("x", np.arange(4.0), ((2, 2),))
    with pytest.raises(ValueError, match="made by two input blocks"):
        flat_map("f", _halves, bx, lambda c: [(0,), (1,)], (2,))
    with pytest.raises(ValueError, match=r"output block \(4,\) is made by no input block"):
        flat_map("f", _halves, bx, lambda c: [(2 * c[0],), (2 * c[0] + 1,)], (5,))
    with pytest.raises(ValueError, match=r"output block \(3,\).*outside the grid \(3,\)"):
        flat_map("f", _halves, bx, lambda c: [(2 * c[0],), (2 * c[0] + 1,)], (3,))


# -- join ------------------------------------------------------------------------------------


def test_join_pairs_blocks_with_equal_keys():
    x, y = np.arange(6.0), 10 * np.arange(4.0)
    bx = blocked_source("x", x, ((1,) * 6,))
    by = blocked_source("y", y, ((1,) * 4,))
    out, pairs = join("j", bx, by, lambda c: c[0] % 2, lambda c: c[0] % 2, operator.add)
    expected = [(lc, rc) for lc in np.ndindex(6) for rc in np.ndindex(4) if lc[0] % 2 == rc[0] % 2]
    assert pairs == expected
    assert out.grid == (len(expected),)
    values = run_all(out)
    for n, (lc, rc) in enumerate(pairs):
        np.testing.assert_array_equal(values[(n,)], x[lc[0]] + y[rc[0]])


def test_self_join_uses_one_dependency_for_equal_blocks():
    x = np.arange(3.0)
    bx = blocked_source("x", x, ((1, 1, 1),))
    out, pairs = join("sq", bx, bx, lambda c: c, lambda c: c, operator.mul)
    assert pairs == [((0,), (0,)), ((1,), (1,)), ((2,), (2,))]
    graph = lower([out]).build()
    assert graph.dependencies(("sq", 1)) == [("x", 1)]
    np.testing.assert_array_equal(assemble(run_all(out), out.grid), x * x)


def test_join_with_no_matches_is_empty():
    bx = blocked_source("x", np.arange(2.0), ((1, 1),))
    out, pairs = join("none", bx, bx, lambda c: "l", lambda c: "r", operator.add)
    assert pairs == [] and out.grid == (0,)
    assert len(lower([out]).build()) == 2


# -- reduce_by_key ---------------------------------------------------------------------------


@pytest.mark.parametrize("split_every", [2, 3, 8])
@pytest.mark.parametrize("nblocks", [1, 2, 5, 13, 40])
def test_reduce_by_key_sums_like_numpy(split_every, nblocks):
    rng = np.random.default_rng(nblocks)
    x = rng.standard_normal((3 * nblocks, 2))
    coll = blocked_source("x", x, ((1,) * (3 * nblocks), (2,)))
    # row block r reduces into output r % 3
    out = reduce_by_key("sum", coll, lambda c: (c[0] % 3,), (3,), operator.add,
                        split_every=split_every, kind="aggregate")
    values = run_all(out, backend="threads", workers=2)
    for o in range(3):
        np.testing.assert_allclose(values[(o,)], x[o::3].sum(axis=0, keepdims=True))
    graph = lower([out]).build()
    for key in graph.keys:
        if key[0].startswith("sum"):
            assert len(graph.dependencies(key)) <= split_every
    # a tree of fan-in split_every: a combine replaces between 2 and split_every partial
    # results by one, and the last one makes the output
    ncombine = sum(1 for k in graph.keys if k[0].startswith("sum"))
    least = max(1, -(-(nblocks - 1) // (split_every - 1)))
    assert 3 * least <= ncombine <= 3 * max(nblocks - 1, 1)
    if split_every == 2:
        assert ncombine == 3 * max(nblocks - 1, 1)
    assert kinds(graph)["aggregate"] == 3


def test_reduce_by_key_keeps_the_order_of_a_non_commutative_op():
    # op(a, b) = a * 10 + b turns the blocks 1..9 into the number 123456789 if in order
    coll = source("d", (9,), lambda c: (int, (c[0] + 1,)))
    out = reduce_by_key("digits", coll, lambda c: (0,), (1,), lambda a, b: a * 10 ** len(
        str(b)) + b, split_every=2)
    assert run_all(out) == {(0,): 123456789}


def test_reduce_by_key_errors():
    coll = source("d", (4,), lambda c: (int, (c[0],)))
    with pytest.raises(ValueError, match="split_every must be at least 2, got 1"):
        reduce_by_key("r", coll, lambda c: (0,), (1,), operator.add, split_every=1)
    with pytest.raises(ValueError, match=r"key \(5,\) of block \(0,\) is outside grid \(2,\)"):
        reduce_by_key("r", coll, lambda c: (5,), (2,), operator.add)
    with pytest.raises(ValueError, match=r"no block reduces into output \(1,\)"):
        reduce_by_key("r", coll, lambda c: (0,), (2,), operator.add)


# -- group_by_join ---------------------------------------------------------------------------


@st.composite
def gbj_case(draw):
    m, k, n = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    ck = draw(block_sizes(k))
    chunks_a = (draw(block_sizes(m)), ck)
    chunks_b = (ck, draw(block_sizes(n)))
    return chunks_a, chunks_b, draw(st.integers(1, 4)), draw(st.integers(0, 2**32 - 1))


@SETTINGS
@given(case=gbj_case(), semiring=st.sampled_from(["plus_times", "min_plus"]))
def test_group_by_join_is_a_blocked_matmul(case, semiring):
    chunks_a, chunks_b, chains, seed = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(tuple(sum(c) for c in chunks_a))
    y = rng.standard_normal(tuple(sum(c) for c in chunks_b))
    a, b = blocked_source("a", x, chunks_a), blocked_source("b", y, chunks_b)
    sr = PLUS_TIMES if semiring == "plus_times" else MIN_PLUS
    grid = (a.grid[0], b.grid[1])
    out = group_by_join("mm", a, b, matmul_pairs(a.grid[1]), grid, sr, chains=chains)
    got = assemble(run_all(out), grid)
    if semiring == "plus_times":
        np.testing.assert_allclose(got, x @ y, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, (x[:, :, None] + y[None]).min(axis=1))


def test_group_by_join_of_a_collection_with_itself():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 5))
    a = blocked_source("a", x, ((2, 3), (2, 3)))
    for chains in (1, 2):
        out = group_by_join(f"sq{chains}", a, a, matmul_pairs(2), (2, 2), PLUS_TIMES,
                            chains=chains)
        graph = lower([out]).build()
        # the diagonal pair (A[0, 0], A[0, 0]) reads its one block once
        assert graph.dependencies((f"sq{chains}-acc", 0, 0, 0, 0)) == [a.key((0, 0))]
        np.testing.assert_allclose(assemble(run_all(out), (2, 2)), x @ x)


def test_group_by_join_zero_task_and_missing_pairs():
    a = source("a", (2, 1), lambda c: (np.ones, ((2, 2),)))
    b = source("b", (1, 2), lambda c: (np.ones, ((2, 2),)))

    def pairs_of(o):  # output (1, 1) has no pairs
        return [] if o == (1, 1) else [((o[0], 0), (0, o[1]))]

    out = group_by_join("g", a, b, pairs_of, (2, 2), PLUS_TIMES,
                        zero_task=lambda o: (_zeros, ((2, 2),)))
    values = run_all(out)
    np.testing.assert_array_equal(values[(1, 1)], np.zeros((2, 2)))
    np.testing.assert_array_equal(values[(0, 1)], np.full((2, 2), 2.0))
    assert lower([out]).build().task_meta(("g", 1, 1)).kind == "creation"
    no_zero = group_by_join("h", a, b, pairs_of, (2, 2), PLUS_TIMES)
    with pytest.raises(ValueError, match=r"no pairs for output block \(1, 1\)"):
        lower([no_zero])


def test_group_by_join_metadata():
    a = source("a", (1, 2), lambda c: (np.ones, ((2, 3),)))
    b = source("b", (2, 1), lambda c: (np.ones, ((3, 2),)))
    out = group_by_join("g", a, b, matmul_pairs(2), (1, 1), PLUS_TIMES,
                        cost=lambda lc, rc: 100 + lc[1], nbytes=lambda o: 32, name="matmul",
                        line=lambda o: f"here:{o}")
    graph = lower([out]).build()
    first, last = ("g-acc", 0, 0, 0, 0), ("g", 0, 0)
    assert graph.task_meta(first).cost == 100 and graph.task_meta(last).cost == 101
    assert graph.task_meta(last).nbytes == 32
    assert graph.task_meta(first).name == "matmul" and graph.opname(graph.index[last]) == "matmul"
    assert graph.task_meta(last).line == "here:(0, 0)"
    with pytest.raises(TypeError, match="kind"):
        group_by_join("k", a, b, matmul_pairs(2), (1, 1), PLUS_TIMES, kind="gemm")


# -- structure of a group-by-join, without running -------------------------------------------


def _explode(*args):
    raise AssertionError("a block was computed while planning")


def exploding(label, grid):
    return source(label, grid, lambda c: (_explode, ()))


def test_group_by_join_structure_one_chain(forbid_compute):
    a, b = exploding("a", (3, 4)), exploding("b", (4, 3))
    out = group_by_join("mm", a, b, matmul_pairs(4), (3, 3), PLUS_TIMES, chains=1)
    graph = lower([out]).build()
    count = kinds(graph)
    assert count["product"] == 9
    assert count["accumulate"] == 27
    assert count["reduce"] == 0
    assert len(graph) == 12 + 12 + 9 + 27
    kind = dict(zip(graph.keys, graph.meta["kind"], strict=True))
    for key in graph.keys:
        if kind[key] == "accumulate":
            deps = graph.dependencies(key)
            assert len(deps) == 3
            assert kind[deps[0]] in ("product", "accumulate")
            assert deps[0][1:3] == key[1:3]  # the partial result of the same output
        if kind[key] in ("product", "accumulate") and key[0] != "mm":
            assert len(graph.dependents(key)) == 1  # consumed once, by the chain's next step
    # every input block is read by the three outputs of its row / column, nothing more
    for coord in np.ndindex(3, 4):
        assert len(graph.dependents(a.key(coord))) == 3
    for coord in np.ndindex(3, 3):
        assert kind[out.key(coord)] == "accumulate"


def test_group_by_join_structure_two_chains(forbid_compute):
    a, b = exploding("a", (3, 4)), exploding("b", (4, 3))
    out = group_by_join("mm", a, b, matmul_pairs(4), (3, 3), PLUS_TIMES, chains=2)
    graph = lower([out]).build()
    count = kinds(graph)
    assert count["product"] == 18
    assert count["accumulate"] == 18
    assert count["reduce"] == 9
    kind = dict(zip(graph.keys, graph.meta["kind"], strict=True))
    for coord in np.ndindex(3, 3):
        key = out.key(coord)
        assert kind[key] == "reduce"
        ends = graph.dependencies(key)
        assert len(ends) == 2
        for end in ends:
            assert kind[end] == "accumulate"
            assert kind[graph.dependencies(end)[0]] == "product"
    # more chains than pairs: one chain per pair
    many = group_by_join("mm8", a, b, matmul_pairs(4), (3, 3), PLUS_TIMES, chains=8)
    count = kinds(lower([many]).build())
    assert count["product"] == 36 and count["accumulate"] == 0 and count["reduce"] == 9


def test_planning_never_runs_a_task(forbid_compute):
    a, b = exploding("a", (2, 3)), exploding("b", (3, 2))
    mm = group_by_join("mm", a, b, matmul_pairs(3), (2, 2), MIN_PLUS, chains=2)
    mapped = map_blocks("neg", np.negative, [mm], mm.grid)
    flat = flat_map("split", _halves, mapped, lambda c: [(c[0], 2 * c[1]), (c[0], 2 * c[1] + 1)],
                    (2, 4))
    joined, _ = join("j", flat, a, lambda c: c[0], lambda c: c[0], operator.add)
    reduced = reduce_by_key("r", joined, lambda c: (0,), (1,), operator.add, split_every=2)
    transposed = remap("t", mm.keys.T.copy(), [mm])
    graph = lower([reduced, transposed]).build()
    assert len(graph) > 20
    with pytest.raises(AssertionError, match="run of"):
        tilegraph.get({"x": (_explode,)}, "x")
    # running it does call the exploding tasks
    with pytest.raises(AssertionError, match="computed while planning"):
        tilegraph.run(graph, [reduced.key((0,))], backend="sync")


# -- memory: one partial result per chain ----------------------------------------------------


@pytest.mark.parametrize("chains", [1, 2, 4])
def test_group_by_join_holds_one_partial_per_chain(chains, backend_options):
    rng = np.random.default_rng(chains)
    x, y = rng.standard_normal((3, 40)), rng.standard_normal((40, 3))
    a = blocked_source("a", x, ((3,), (2,) * 20))
    b = blocked_source("b", y, ((2,) * 20, (3,)))
    out = group_by_join("mm", a, b, matmul_pairs(20), (1, 1), PLUS_TIMES, chains=chains)
    live, peak, made = 0, 0, 0

    def watch(event):
        nonlocal live, peak, made
        if not isinstance(event, (TaskEnd, Release)):
            return
        if not (isinstance(event.key, tuple) and event.key[0] in ("mm", "mm-acc")):
            return
        if isinstance(event, TaskEnd):
            live, made = live + 1, made + 1
            peak = max(peak, live)
        else:
            live -= 1

    graph = lower([out]).build()
    (value,) = tilegraph.run(graph, [out.key((0, 0))], callbacks=[watch], **backend_options)
    np.testing.assert_allclose(value, x @ y)
    assert made == 20 + (chains > 1)
    assert peak <= chains + 1


# -- remap -----------------------------------------------------------------------------------


def test_remap_arranges_existing_blocks_without_tasks():
    x = np.arange(20.0).reshape(4, 5)
    bx = blocked_source("x", x, ((1, 3), (2, 2, 1)))
    t = remap("xt", bx.keys.T.copy(), [bx])
    assert t.grid == (3, 2)
    assert t.key((2, 1)) == bx.key((1, 2))
    assert len(lower([t]).build()) == 6  # the source's tasks only
    tt = map_blocks("xtt", np.transpose, [t], t.grid)
    np.testing.assert_array_equal(assemble(run_all(tt), tt.grid), x.T)
    # concatenation: the blocks of two collections side by side
    y = -x
    by = blocked_source("y", y, ((1, 3), (2, 2, 1)))
    both = remap("xy", np.concatenate([bx.keys, by.keys], axis=1), [bx, by])
    assert both.grid == (2, 6)
    np.testing.assert_array_equal(assemble(run_all(both), both.grid),
                                  np.concatenate([x, y], axis=1))


def test_remap_rejects_coordinates_outside_its_grid():
    bx = blocked_source("x", np.arange(4.0), ((2, 2),))
    t = remap("r", bx.keys[::-1].copy(), [bx])
    assert t.key((0,)) == ("x", 1)
    with pytest.raises(IndexError, match=r"\(-1,\).*outside the grid \(2,\)"):
        t.key((-1,))
    with pytest.raises(IndexError, match="outside the grid"):
        t.key((2,))
    shifted = map_blocks("s", np.negative, [t], (2,), index_maps=[lambda c: (c[0] - 1,)])
    with pytest.raises(IndexError, match="outside the grid"):
        lower([shifted])


# -- demand: only the blocks the results read are planned --------------------------------------


def planned(*roots) -> set:
    """The task keys of lowering ``roots``, checked against the count made without
    emitting them."""
    graph = lower(list(roots)).build()
    assert LoweringPlan(list(roots)).count() == len(graph)
    return set(graph.keys)


def pick(coll: Blocks, *coords) -> Blocks:
    """A result made of some blocks of ``coll`` (a remap: no tasks of its own)."""
    keys = np.empty(len(coords), dtype=object)
    for n, c in enumerate(coords):
        keys[n] = coll.key(c)
    return remap(f"pick-{coll.name}", keys, [coll])


def test_a_map_plans_the_blocks_its_index_maps_name():
    x = blocked_source("x", np.arange(12.0).reshape(3, 4), ((1, 1, 1), (1, 1, 2)))
    r = blocked_source("r", np.arange(4.0), ((1, 1, 2),))
    out = map_blocks("f", operator.add, [x, r], x.grid, index_maps=[None, lambda c: (c[1],)])
    assert planned(pick(out, (1, 2))) == {("f", 1, 2), ("x", 1, 2), ("r", 2)}
    assert planned(out) == {*x.keys.flat, *r.keys.flat, *out.keys.flat}
    values = run_all(pick(out, (1, 2), (2, 0)))
    np.testing.assert_array_equal(values[(0,)], np.array([[6.0 + 2.0, 7.0 + 3.0]]))


def test_apply_blocks_plans_the_blocks_its_tasks_read():
    x = np.arange(9.0)
    bx = blocked_source("x", x, ((2, 3, 4),))

    def task_of(coord):
        deps = [bx.key((j,)) for j in range(coord[0] + 1)]
        return (lambda *blocks: sum(float(b.sum()) for b in blocks)), deps, None

    for covers in (True, False):
        out = apply_blocks(f"cum{covers}", (3,), [bx], task_of, covers=covers)
        assert planned(pick(out, (1,))) == {(f"cum{covers}", 1), ("x", 0), ("x", 1)}
        assert run_all(pick(out, (1,))) == {(0,): x[:5].sum()}
    # a slice-like collection: all of its blocks read two blocks of its input
    two = apply_blocks("two", (2,), [bx], lambda c: (np.negative, [bx.key((2 * c[0],))],
                                                     None), covers=lambda: [(0,), (2,)])
    assert planned(two) == {("two", 0), ("two", 1), ("x", 0), ("x", 2)}
    same = apply_blocks("same", (2,), [bx], lambda c: (np.negative, [bx.key((2 * c[0],))],
                                                       None), covers=False)
    assert planned(same) == {("same", 0), ("same", 1), ("x", 0), ("x", 2)}


def test_apply_blocks_with_a_domain_plans_the_blocks_that_exist():
    bx = blocked_source("x", np.arange(6.0), ((2, 2, 2),))
    odd = apply_blocks("odd", (3,), [bx], lambda c: (np.negative, [bx.key(c)], None),
                       domain=lambda: [(0,), (2,)])
    assert odd.ntasks == 2
    assert planned(odd) == {("odd", 0), ("odd", 2), *bx.keys.flat}
    assert planned(pick(odd, (2,))) == {("odd", 2), ("x", 2)}


def test_remap_plans_the_blocks_it_picks():
    bx = blocked_source("x", np.arange(6.0), ((2, 2, 2),))
    by = blocked_source("y", np.arange(6.0), ((2, 2, 2),))
    both = remap("xy", np.concatenate([bx.keys, by.keys]), [bx, by], covers=True)
    assert planned(both) == {*bx.keys.flat, *by.keys.flat}
    assert planned(pick(both, (4,))) == {("y", 1)}
    assert planned(remap("r", bx.keys[::2].copy(), [bx])) == {("x", 0), ("x", 2)}


def test_flat_map_join_and_reduce_plan_what_some_outputs_read():
    x = np.arange(12.0)
    bx = blocked_source("x", x, ((3, 3, 3, 3),))
    halves = flat_map("split", _halves, bx, lambda c: [(2 * c[0],), (2 * c[0] + 1,)], (8,))
    assert planned(pick(halves, (5,))) == {("split", 5), ("split-parts", 2), ("x", 2)}
    assert run_all(pick(halves, (5,)))[(0,)].tolist() == [7.0, 8.0]
    pairs_coll, pairs = join("j", bx, bx, lambda c: c[0] % 2, lambda c: c[0] % 2, operator.add)
    n = pairs.index(((1,), (3,)))
    assert planned(pick(pairs_coll, (n,))) == {("j", n), ("x", 1), ("x", 3)}
    for members in (None, lambda o: [(o[0],), (o[0] + 2,)]):
        sums = reduce_by_key("s", bx, lambda c: (c[0] % 2,), (2,), operator.add,
                             members=members)
        assert planned(pick(sums, (1,))) == {("s", 1), ("x", 1), ("x", 3)}
        np.testing.assert_array_equal(run_all(pick(sums, (1,)))[(0,)], x[3:6] + x[9:12])


def test_group_by_join_plans_a_row_and_a_column_for_an_output_block():
    a = blocked_source("a", np.ones((4, 6)), ((2, 2), (2, 2, 2)))
    b = blocked_source("b", np.ones((6, 4)), ((2, 2, 2), (2, 2)))
    out = group_by_join("mm", a, b, matmul_pairs(3), (2, 2), PLUS_TIMES)
    keys = planned(pick(out, (0, 1)))
    assert {k for k in keys if k[0] in ("a", "b")} == {
        ("a", 0, 0), ("a", 0, 1), ("a", 0, 2), ("b", 0, 1), ("b", 1, 1), ("b", 2, 1)}
    assert sum(1 for k in keys if k[0].startswith("mm")) == 3  # a product, 2 accumulations
    np.testing.assert_array_equal(run_all(pick(out, (0, 1)))[(0,)], np.full((2, 2), 6.0))


def test_a_collection_without_a_rule_is_planned_whole():
    bx = blocked_source("x", np.arange(6.0), ((2, 2, 2),))

    def emit(builder):
        for c in bx.coords():
            builder.add(("own", *c), np.negative, deps=[bx.key(c)])

    own = Blocks("own", bx.grid, [bx], emit)
    assert own.op == "custom" and own.op not in BLOCK_RULES
    assert planned(pick(own, (1,))) == {*own.keys.flat, *bx.keys.flat}


def test_a_task_reading_a_key_that_is_no_block_plans_its_inputs_whole():
    x = np.arange(12.0)
    bx = blocked_source("x", x, ((3, 3, 3, 3),))
    halves = flat_map("split", _halves, bx, lambda c: [(2 * c[0],), (2 * c[0] + 1,)], (8,))
    # reads a flat_map's inner task (its "-parts" key), which no block rule knows
    whole = apply_blocks("whole", (1,), [halves],
                         lambda c: (operator.itemgetter(1), [("split-parts", 1)], None))
    keys = planned(whole)
    assert keys >= {*bx.keys.flat, *halves.keys.flat} and ("whole", 0) in keys
    np.testing.assert_array_equal(run_all(whole)[(0,)], x[4:6])


def test_a_registered_rule_plans_some_blocks_of_its_collections():
    bx = blocked_source("x", np.arange(6.0), ((2, 2, 2),))

    def emit(builder, coords=None):
        for c in bx.coords() if coords is None else coords:
            builder.add(("neg", *c), np.negative, deps=[bx.key(c)])

    def needs(coll, coords, demand):
        demand.some(bx, bx.coords() if coords is None else coords)
        return True

    register_block_rule("test-negative", BlockRule(needs, lambda coll, coords: len(coords)))
    try:
        neg = Blocks("neg", bx.grid, [bx], emit, op="test-negative")
        assert planned(pick(neg, (2,))) == {("neg", 2), ("x", 2)}
        assert planned(neg) == {*neg.keys.flat, *bx.keys.flat}
    finally:
        del BLOCK_RULES["test-negative"]


def test_demand_lists_the_blocks_each_collection_reads():
    bx = blocked_source("x", np.arange(8.0), ((2, 2, 2, 2),))
    y = map_blocks("y", np.negative, [bx], bx.grid)
    z = map_blocks("z", np.negative, [bx], bx.grid)
    plan = LoweringPlan([pick(y, (3,), (1,)), z])
    assert plan.demand.wanted == {"pick-y": None, "y": {(1,), (3,)}, "z": None, "x": None}
    plan = LoweringPlan([pick(y, (3,), (1,))])
    assert plan.demand.wanted["x"] == {(1,), (3,)}
    assert [c.name for c, _ in plan.wanted()] == ["x", "y", "pick-y"]


def test_remap_by_names_blocks_by_a_function_of_the_coordinate():
    bx = blocked_source("x", np.arange(6.0), ((2, 2, 2),))
    by = blocked_source("y", -np.arange(4.0), ((1, 3),))
    both = remap_by("xy", (5,), lambda c: bx.key(c) if c[0] < 3 else by.key((c[0] - 3,)),
                    [bx, by], covers=True)
    assert both.key((4,)) == ("y", 1) and both.keys[2] == ("x", 2)
    with pytest.raises(IndexError, match="outside the grid"):
        both.key((5,))
    assert planned(pick(both, (3,))) == {("y", 0)}
    assert planned(both) == {*bx.keys.flat, *by.keys.flat}
    np.testing.assert_array_equal(assemble(run_all(both), both.grid),
                                  np.concatenate([np.arange(6.0), -np.arange(4.0)]))


def test_blocks_planned_for_a_part_have_keys_of_python_ints():
    bx = blocked_source("x", np.arange(8.0), ((2, 2, 2, 2),))
    out = map_blocks("f", np.negative, [bx], bx.grid,
                     index_maps=[lambda c: (np.int64(c[0]),)])
    keys = planned(pick(out, (2,)))
    assert keys == {("f", 2), ("x", 2)}
    assert all(type(v) is int for k in keys for v in k[1:])
    np.testing.assert_array_equal(run_all(pick(out, (2,)))[(0,)], [-4.0, -5.0])
