from collections import namedtuple
from operator import add, mul

import numpy as np
import pytest

import tilegraph
from tilegraph.graph import TaskGraph, from_dask, to_dask


def inc(x):
    return x + 1


def ident(x):
    return x


Point = namedtuple("Point", "a b")

# (graph, key, expected value): how a dask-style dict is read.
CASES = [
    pytest.param({"x": 1, "y": (inc, "x")}, "y", 2, id="task"),
    pytest.param({"x": 1, "y": (add, "x", "x")}, "y", 2, id="same-key-twice"),
    pytest.param({"x": 1, "y": "x"}, "y", 1, id="alias"),
    pytest.param({"x": 1, "y": (ident, "z")}, "y", "z", id="string-not-a-key-is-literal"),
    pytest.param({"x": 1, "y": (ident, ("x", 2))}, "y", (1, 2), id="tuple-of-key-and-literal"),
    pytest.param({("x", 0): 5, "y": (ident, ("x", 0))}, "y", 5, id="tuple-key"),
    pytest.param({("x", 0): 5, "y": (ident, ("x", 1))}, "y", ("x", 1), id="tuple-lookalike"),
    pytest.param({"x": 1, "y": (ident, {"a": "x"})}, "y", {"a": "x"}, id="dict-is-literal"),
    pytest.param({"x": 1, "y": (sum, ["x", (inc, "x"), 10])}, "y", 13, id="task-inside-list"),
    pytest.param({"x": 1, "y": (ident, [["x", (inc, 5)], ("x", "x")])}, "y",
                 [[1, 6], (1, 1)], id="nested-containers"),
    pytest.param({"x": 1, "y": ["x", (inc, "x")]}, "y", [1, 2], id="top-level-list"),
    pytest.param({"x": 1, "y": ("x", 3)}, "y", (1, 3), id="top-level-tuple"),
    pytest.param({"x": 1, "y": {"a": "x"}}, "y", {"a": "x"}, id="top-level-dict-literal"),
    pytest.param({"x": 1, "y": (ident, {"x", 3})}, "y", {1, 3}, id="set"),
    pytest.param({"x": 1, "y": (ident, Point("x", 2))}, "y", Point(1, 2), id="namedtuple"),
    pytest.param({"x": 1, "y": (add, (mul, "x", 3), (inc, (inc, "x")))}, "y", 6,
                 id="nested-tasks"),
    pytest.param({"x": 1, "y": (ident, [1, 2, 3])}, "y", [1, 2, 3], id="literal-list"),
    pytest.param({"x": 1, "y": (ident, ())}, "y", (), id="empty-tuple"),
    pytest.param({"f": 1, "y": (ident, (inc, 1))}, "y", 2, id="task-as-argument"),
    pytest.param({1: 10, "y": (ident, 1)}, "y", 10, id="int-key"),
    pytest.param({"x": None, "y": (ident, "x")}, "y", None, id="none-value"),
]


@pytest.mark.parametrize(("dsk", "key", "expected"), CASES)
def test_reading_matches_the_spec(dsk, key, expected):
    assert tilegraph.get(dsk, key, backend="sync") == expected


@pytest.mark.parametrize(("dsk", "key", "expected"), CASES)
def test_reading_matches_dask(dsk, key, expected):
    local = pytest.importorskip("dask.local")
    assert local.get_sync(dsk, key) == expected


@pytest.mark.parametrize(("dsk", "key", "expected"), CASES)
def test_to_dask_round_trip(dsk, key, expected):
    out = to_dask(from_dask(dsk))
    assert tilegraph.get(out, key, backend="sync") == expected
    local = pytest.importorskip("dask.local")
    assert local.get_sync(out, key) == expected


def test_to_dask_keeps_literals_that_look_like_keys():
    from tilegraph.graph import Dep, GraphBuilder

    b = GraphBuilder()
    b.add_data("x", 1)
    b.add_data("s", "x")  # a string that equals a key, as data
    b.add("y", ident, deps=["x"], args=(("x", Dep(0)),))
    b.add("z", sorted, deps=[], args=(["x", "s"],))
    out = to_dask(b.build())
    assert tilegraph.get(out, ["s", "y", "z"], backend="sync") == ("x", ("x", 1), ["s", "x"])
    local = pytest.importorskip("dask.local")
    assert local.get_sync(out, ["s", "y", "z"]) == ("x", ("x", 1), ["s", "x"])


def test_kwargs_survive_to_dask():
    from tilegraph.graph import Dep, GraphBuilder

    b = GraphBuilder()
    b.add_data("x", np.arange(4))
    b.add("y", np.sum, deps=["x"], args=(Dep(0),), kwargs={"keepdims": True})
    g = b.build()
    assert tilegraph.run(g, ["y"], backend="sync")[0].tolist() == [6]
    assert tilegraph.get(to_dask(g), "y", backend="sync").tolist() == [6]


def test_graph_structure_from_dask():
    g = TaskGraph.from_dask({"a": 1, "b": (add, "a", 2), "c": (sum, ["a", "b", (inc, "b")])})
    assert g.dependencies("b") == ["a"]
    assert g.dependencies("c") == ["a", "b"]
    assert g.dependents("a") == ["b", "c"]


def test_bad_graphs():
    with pytest.raises(TypeError, match="must be a dict mapping keys to tasks, got list"):
        from_dask([("x", 1)])
    with pytest.raises(TypeError, match="__dask_graph__\\(\\) returned int"):
        from_dask(type("Weird", (), {"__dask_graph__": lambda self: 3})())


def test_dask_task_objects():
    spec = pytest.importorskip("dask._task_spec")
    dsk = {
        "a": spec.DataNode("a", 3),
        "b": spec.Task("b", add, spec.TaskRef("a"), 4),
        "c": spec.Alias("c", "b"),
        "d": spec.Task("d", sum, spec.List(spec.TaskRef("a"), spec.TaskRef("c"))),
    }
    g = from_dask(dsk)
    assert g.opname(g.index["b"]) == "add"
    assert tilegraph.get(dsk, ["b", "c", "d"]) == (7, 7, 10)
