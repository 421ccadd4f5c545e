from operator import add, mul

import numpy as np
import pytest

from tilegraph.graph import (
    MODE_DATA,
    MODE_DIRECT,
    MODE_FLAT,
    MODE_NESTED,
    Call,
    CycleError,
    Dep,
    GraphBuilder,
    GraphError,
    Lit,
    fill,
    funcname,
)


def diamond():
    b = GraphBuilder()
    b.add_data("a", 1)
    b.add("b", add, deps=["a"], args=(Dep(0), 1), kind="elementwise", coords=(0,))
    b.add("c", mul, deps=["a"], args=(Dep(0), 3))
    b.add("d", add, deps=["b", "c"], nbytes=8, line="prog.py:3")
    return b.build()


def test_structure_of_a_diamond():
    g = diamond()
    assert len(g) == 4 and g.nedges == 4
    assert g.dependencies("d") == ["b", "c"]
    assert g.dependents("a") == ["b", "c"]
    assert g.dependents("d") == []
    assert g.in_degree().tolist() == [0, 1, 1, 2]
    assert g.out_degree().tolist() == [2, 1, 1, 0]
    assert [g.modes[g.index[k]] for k in "abcd"] == [MODE_DATA, MODE_FLAT, MODE_FLAT, MODE_DIRECT]
    meta = g.task_meta("d")
    assert meta.nbytes == 8 and meta.line == "prog.py:3" and meta.kind is None
    assert g.task_meta("b").coords == (0,)
    assert g.opname(g.index["d"]) == "add"
    assert g.opname(g.index["a"]) == "data"
    assert "a" in g and "q" not in g
    assert repr(g) == "<TaskGraph: 4 tasks, 4 edges>"


def test_duplicate_dependency_becomes_flat_template():
    b = GraphBuilder()
    b.add_data("x", 2)
    b.add("y", mul, deps=["x", "x"])
    g = b.build()
    i = g.index["y"]
    assert g.modes[i] == MODE_FLAT
    assert g.args[i] == (Dep(0), Dep(0))
    assert g.dependencies("y") == ["x"]


def test_nested_template_mode_and_fill():
    b = GraphBuilder()
    b.add_data("x", 2)
    b.add("y", sum, deps=["x"], args=([Dep(0), Call(add, (Dep(0), 5)), Lit([7])],))
    g = b.build()
    assert g.modes[g.index["y"]] == MODE_NESTED
    assert fill(g.args[g.index["y"]], [2]) == ([2, 7, [7]],)
    assert fill({"k": (Dep(0), [Dep(0)])}, ["v"]) == {"k": ("v", ["v"])}
    assert fill(Call(dict, (), {"b": Dep(0)}), [2]) == {"b": 2}


def test_bad_tasks_are_rejected_with_the_key_named():
    b = GraphBuilder()
    b.add_data("x", 1)
    with pytest.raises(GraphError, match="duplicate task key 'x'"):
        b.add_data("x", 2)
    with pytest.raises(GraphError, match="task 'y': operation 3 is not callable"):
        b.add("y", 3)
    with pytest.raises(TypeError, match="unknown task metadata 'colour'"):
        b.add("z", add, deps=["x", "x"], colour="red")
    b2 = GraphBuilder()
    b2.add("y", add, deps=["nope"])
    with pytest.raises(GraphError, match="task 'y' depends on key 'nope', which is not in"):
        b2.build()


def test_only_declared_metadata_columns_are_set():
    from tilegraph.graph.taskgraph import META_COLUMNS, META_SCHEMA

    b = GraphBuilder()
    b.add_data("x", 1, nbytes=8)
    b.add("y", add, deps=["x", "x"], kind="elementwise")
    g = b.build()
    placed = g.with_meta(worker=[0, 1])
    assert placed.meta["worker"] == [0, 1] and g.meta.get("worker") is None
    with pytest.raises(TypeError, match="unknown metadata column 'colour'; declared: name"):
        g.with_meta(colour=["red", "blue"])
    with pytest.raises(GraphError, match="'worker' has 1 values for 2 tasks"):
        g.with_meta(worker=[0])
    # the planner's own columns are declared but not a front end's to set
    planner = [c.name for c in META_SCHEMA if not c.builder]
    assert planner == ["overwrites", "remake", "step_working", "chain_blockwise"]
    assert not set(planner) & set(META_COLUMNS)
    with pytest.raises(TypeError, match="unknown task metadata 'step_working'"):
        GraphBuilder().add_data("z", 1, step_working=3)


def test_missing_key_queries():
    g = diamond()
    with pytest.raises(KeyError, match="key 'zz' is not in the task graph"):
        g.dependencies("zz")
    with pytest.raises(KeyError, match=r"key \[1\] is not in the task graph"):
        g.indices([[1]])


def chain_graph(n):
    b = GraphBuilder()
    b.add_data(0, 0)
    for i in range(1, n):
        b.add(i, add, deps=[i - 1], args=(Dep(0), 1))
    return b.build()


def test_cull_keeps_exactly_the_ancestors():
    b = GraphBuilder()
    b.add_data("a", 1)
    b.add_data("unused", 5)
    b.add("b", add, deps=["a", "unused"])
    b.add("c", add, deps=["a"], args=(Dep(0), 1))
    b.add("d", add, deps=["c"], args=(Dep(0), 1))
    g = b.build()
    c = g.cull(["d"])
    assert c.keys == ["a", "c", "d"]
    assert c.dependencies("d") == ["c"] and c.dependencies("c") == ["a"]
    assert c.dependents("a") == ["c"]
    # culling to everything returns the graph itself
    assert g.cull(["b", "d"]) is g
    assert g.cull(["d", "b"]).keys == g.keys
    with pytest.raises(KeyError, match="'nope'"):
        g.cull(["nope"])


def test_cull_and_order_of_long_chain():
    g = chain_graph(20000)
    assert len(g.cull([100])) == 101
    order = g.topological_order()
    assert order.tolist() == list(range(20000))


def test_topological_order_respects_every_edge():
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    n = 300
    perm = rng.permutation(n)  # keys added in random order
    for i in perm:
        deps = [int(d) for d in rng.choice(i, size=min(i, 3), replace=False)] if i else []
        b.add(int(i), lambda *a: 0, deps=deps)
    g = b.build()
    pos = np.empty(n, dtype=int)
    pos[g.topological_order()] = np.arange(n)
    for i in range(n):
        for d in g.dependencies(g.keys[i]):
            assert pos[g.index[d]] < pos[i]


def test_cycle_detection_names_keys_on_the_cycle():
    b = GraphBuilder()
    b.add_data("root", 0)
    b.add("a", add, deps=["root", "c"])
    b.add("b", add, deps=["a"], args=(Dep(0), 1))
    b.add("c", add, deps=["b"], args=(Dep(0), 1))
    b.add("tail", add, deps=["c"], args=(Dep(0), 1))
    g = b.build()
    with pytest.raises(CycleError) as info:
        g.topological_order()
    assert set(info.value.cycle) == {"a", "b", "c"}
    assert "has a cycle through key" in str(info.value)
    # the cycle is listed in dependency order: each depends on the next
    cyc = info.value.cycle
    for k, nxt in zip(cyc, cyc[1:] + cyc[:1], strict=True):
        assert nxt in g.dependencies(k)
    assert g.find_cycle() and set(g.find_cycle()) == {"a", "b", "c"}


def test_self_dependency_is_a_cycle():
    b = GraphBuilder()
    b.add("x", add, deps=["x"], args=(Dep(0), 1))
    with pytest.raises(CycleError, match="'x' -> 'x'"):
        b.build().topological_order()


def test_subgraph_must_be_closed():
    g = diamond()
    with pytest.raises(GraphError, match="not closed"):
        g.subgraph(np.array([g.index["d"]]))


def test_funcname_unwraps_partials():
    from functools import partial

    assert funcname(partial(partial(add, 1), 2)) == "add"
    assert funcname(np.add) == "add"

    class C:
        def __call__(self):
            return 1

    assert funcname(C()) == "C"


def test_graph_is_compact_for_many_tasks():
    g = chain_graph(100_000)
    assert g.dep_ptr.dtype == np.int64 and g.dep_ptr.shape == (100_001,)
    assert g.dep_idx.shape == (99_999,)
    ptr, idx = g.dependents_csr()
    assert idx[ptr[5] : ptr[6]].tolist() == [6]


def test_add_many_adds_direct_tasks_at_once_and_rejects_bad_rows():
    from operator import add

    from tilegraph.graph import GraphBuilder, GraphError

    b = GraphBuilder()
    b.add_data("x", 2)
    b.add_data("y", 3)
    b.add_many(["s", "d"], add, [["x", "y"], ["s", "x"]], kwargs=[None, None],
               kind="elementwise", name="add", cost=[1.0, None])
    g = b.build()
    assert g.dependencies("d") == ["s", "x"]
    assert g.meta["kind"][g.index["s"]] == "elementwise"
    assert g.meta["cost"][g.index["d"]] is None
    import tilegraph as tg

    assert tg.run(g, ["d"]) == [7]
    with pytest.raises(GraphError, match="duplicate task key 's'"):
        b.add_many(["t", "s"], add, [["x", "y"], ["x", "y"]])
    assert "t" not in b  # nothing of the refused call is left
    with pytest.raises(GraphError, match="repeat a key"):
        b.add_many(["u"], add, [["x", "x"]])
    with pytest.raises(ValueError, match="2 keys but 1 dependency lists"):
        b.add_many(["v", "w"], add, [["x", "y"]])
    with pytest.raises(GraphError, match="unknown op kind"):
        b.add_many(["v"], add, [["x", "y"]], kind="nope")
    b.add_many(["u2"], add, [["x", "y"]])  # the builder is whole after each refusal
    assert tg.run(b.build(), ["u2"]) == [5]


def _sources_and_chains():
    """Sources of each sort and chains over them (see the assertions)."""
    b = GraphBuilder()
    b.add("file", np.ones, args=(2,), kind="load", repeatable=True, name="from_npy")
    b.add("object", np.ones, args=(2,), kind="load", name="from_array",
          repeatable="from_array of a Sensor: not declared repeatable")
    b.add("plain", np.ones, args=(2,), kind="load", name="from_thing")
    b.add("rand", np.ones, args=(2,), kind="random")
    b.add("said-no", np.ones, args=(2,), kind="random", repeatable=False, name="rnd")
    b.add_data("lit", np.ones(2), kind="load")
    b.add("sum", add, deps=["file", "rand"], kind="elementwise")
    b.add("bad", add, deps=["object", "file"], kind="elementwise")
    b.add("user", np.negative, deps=["rand"], kind="map", name="f")
    b.add("after-user", np.negative, deps=["user"], kind="elementwise")
    b.add("in-place", add, deps=["lit", "sum"], kind="gemm")
    b.add("opaque", np.ones, args=(2,))
    return b.build()


def test_repeatable_follows_the_whole_chain_to_the_sources():
    g = _sources_and_chains()
    rep = dict(zip(g.keys, g.repeatable(), strict=True))
    assert rep == {"file": 1, "object": 0, "plain": 0, "rand": 1, "said-no": 0, "lit": 1,
                   "sum": 1, "bad": 0, "user": 0, "after-user": 0, "in-place": 0,
                   "opaque": 0}
    why = {k: g.unrepeatable_reason(g.index[k]) for k in g.keys}
    assert why["file"] == why["sum"] == why["lit"] == ""
    assert why["object"] == why["bad"] == "from_array of a Sensor: not declared repeatable"
    assert why["plain"].startswith("from_thing (load): a read from a source that does not "
                                   "prove it")
    assert why["said-no"] == "rnd (random): declared not repeatable"
    assert why["after-user"] == why["user"] == ("f (map): it runs a user's function, which "
                                                "may not give the same block again")
    assert why["in-place"].endswith("(gemm): it writes over its input in place")
    assert "opaque task" in why["opaque"]
    # remade: cheap to make again and repeatable, through the chain back to the sources
    # (sum, of file and rand); refused: cheap, not repeatable (bad reads object); never:
    # a step after a user's function, an in-place update, an opaque task, a literal
    remade = {k for k, r in zip(g.keys, g.remakeable(), strict=True) if r}
    refused = {k for k, r in zip(g.keys, g.remake_refused(), strict=True) if r}
    assert remade == {"file", "rand", "sum"}
    assert refused == {"object", "plain", "said-no", "bad"}
    assert g.task_meta("object").repeatable.startswith("from_array")
    a = g.repeatable()
    a[0] = 0
    assert g.repeatable()[0] == 1  # each caller gets a copy


def test_repeatable_of_a_large_graph_follows_long_chains():
    """Beyond the size walked in Python: two chains of 300 steps, one over a source that
    is not repeatable."""
    b = GraphBuilder()
    b.add("good", np.ones, args=(1,), kind="random")
    b.add("bad", np.ones, args=(1,), kind="load")
    for src in ("good", "bad"):
        prev = src
        for k in range(300):
            b.add((src, k), np.negative, deps=[prev], kind="elementwise")
            prev = (src, k)
    g = b.build()
    rep = g.repeatable()
    assert all(rep[g.index[("good", k)]] for k in range(300))
    assert not any(rep[g.index[("bad", k)]] for k in range(300))
    assert g.unrepeatable_reason(g.index[("bad", 299)]).startswith("ones (load)")
