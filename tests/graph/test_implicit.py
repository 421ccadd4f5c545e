"""The protocol of an implicit graph: LambdaPACK's DAG answers it consistently, the
serverless task source speaks it, and the pipeline refuses what cannot run an implicit
graph. (Runs on a pool: tests/runtime/test_serverless.py.)"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tilegraph import pipeline
from tilegraph.graph.implicit import INPUT, NODE, VALUE, ImplicitGraph
from tilegraph.lambdapack import library
from tilegraph.lambdapack.implicit import ProgramGraph, node_id, parse_node, tile_id
from tilegraph.runtime.serverless.tasks import ImplicitTasks, Literal


class Pair(ImplicitGraph):
    """``a`` reads the input ``x``; ``b`` reads ``a``, ``x`` and the literal 2."""

    def __init__(self, bad_kind: bool = False):
        self.bad_kind = bad_kind

    def starters(self):
        return ["a"]

    def parents(self, node):
        return ["a"] if node == "b" else []

    def children(self, node):
        return ["b"] if node == "a" else []

    def inputs(self, node):
        if node == "a":
            return [(INPUT, "x")]
        return [(NODE, "a"), (INPUT, "x"), ("nodes" if self.bad_kind else VALUE, 2)]

    def readers(self, name):
        return ["a", "b"]

    def call(self, node, values):
        return sum(values)

    def key(self, node):
        return ("pair", node)

    def opname(self, node):
        return "add"

    def describe(self, node):
        return f"node {node} of the pair"


def test_the_serverless_task_source_speaks_the_protocol():
    tasks = ImplicitTasks(Pair(), ["b"], "run")
    assert tasks.starters() == ["a"]
    assert tasks.children("a") == [("b", 1, 0)]  # (child, its parents, its priority)
    ins = tasks.inputs("b")
    assert ins[:2] == ["run/n/a", "run/in/x"]
    assert type(ins[2]) is Literal and ins[2].value == 2
    assert tasks.call("b", [1, 5, 2]) == 8
    assert tasks.overwritten("b") == ()  # the default
    assert tasks.frees("b") == [("n/a", 1), ("in/x", 2)]
    assert ImplicitTasks(Pair(), ["a", "b"], "run").frees("b") == [("in/x", 2)]  # a is kept
    assert tasks.is_wanted("b") and not tasks.is_wanted("a")
    assert (tasks.name("b"), tasks.key("b"), tasks.opname("b"), tasks.score("b")) == (
        "node b of the pair", ("pair", "b"), "add", 0)
    with pytest.raises(TypeError, match=r"Pair.inputs\('b'\) gave an input of kind 'nodes'"):
        ImplicitTasks(Pair(bad_kind=True), ["b"], "run").inputs("b")


def test_a_graph_missing_part_of_the_protocol_cannot_be_made():
    class NoCall(ImplicitGraph):
        starters = parents = children = inputs = readers = key = opname = describe = None

    with pytest.raises(TypeError, match=r"abstract method.*call"):
        NoCall()


def test_the_pipeline_refuses_a_bad_graph_or_a_backend_that_cannot_run_it():
    with pytest.raises(TypeError, match=r"run_implicit\(\) needs an implicit graph .*got dict"):
        pipeline.run_implicit({"a": 1}, ["a"], backend="serverless")
    with pytest.raises(TypeError, match="outputs are node ids"):
        pipeline.run_implicit(Pair(), [("b",)], backend="serverless")
    with pytest.raises(TypeError, match="backend 'threads' cannot run an implicit graph"):
        pipeline.run_implicit(Pair(), ["b"], inputs={"x": 1}, backend="threads")
    with pytest.raises(ValueError, match="unknown backend"):
        pipeline.run_implicit(Pair(), ["b"], backend="nosuch")


@pytest.mark.parametrize(("name", "params"), [("cholesky", {"N": 4}), ("tsqr", {"N": 5, "B": 2}),
                                              ("gemm", {"M": 2, "N": 2, "K": 3})])
def test_a_lambdapack_dag_answers_the_protocol_as_its_expansion(name, params):
    dag = getattr(library, name).bind(**params)
    graph = ProgramGraph(dag)
    # every node is reached from the starters through children, each once
    seen, todo = set(), list(graph.starters())
    assert all(not graph.parents(s) for s in todo)
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        kids = graph.children(node)
        assert len(kids) == len(set(kids))
        for c in kids:
            assert node in graph.parents(c)
        todo += kids
    assert seen == {node_id(n) for n in dag.nodes()}
    assert len(seen) == dag.count()
    readers: dict[str, set[str]] = {}
    for node in seen:
        ins = graph.inputs(node)
        assert {v for what, v in ins if what == NODE} == set(graph.parents(node))
        for what, v in ins:
            assert what in (VALUE, NODE, INPUT)
            if what == INPUT:
                readers.setdefault(v, set()).add(node)
        assert parse_node(node) in set(dag.nodes())
        assert graph.key(node)[0] == f"lp-{dag.program.name}"
        assert graph.describe(node).startswith(f"node {node} of {dag!r} (line ")
    for tile, nodes in readers.items():
        assert set(graph.readers(tile)) == nodes
    # pickled: the program and its parameters, whatever the DAG's size
    small = len(pickle.dumps(ProgramGraph(getattr(library, name).bind(**params))))
    big = len(pickle.dumps(ProgramGraph(getattr(library, name).bind(
        **{k: v * 10 for k, v in params.items()}))))
    assert big < small + 64
    assert pickle.loads(pickle.dumps(graph)).children(next(iter(seen))) == \
        graph.children(next(iter(seen)))


def test_a_lambdapack_node_calls_its_kernel():
    dag = library.cholesky.bind(N=2)
    graph = ProgramGraph(dag)
    a = np.array([[4.0, 2.0], [2.0, 3.0]])
    (start,) = graph.starters()
    assert graph.inputs(start) == [(INPUT, tile_id("S", (0, 0, 0)))]
    np.testing.assert_allclose(graph.call(start, [a]), np.linalg.cholesky(a))
    assert graph.priority(start) == 0
