"""tilegraph.get on dask-style dict graphs: the seed examples, keys, and errors."""

from operator import add, mul

import numpy as np
import pytest

import tilegraph
from tilegraph.graph import CycleError


def inc(x):
    return x + 1


def dask_get(dsk, keys):
    local = pytest.importorskip("dask.local")
    return local.get_sync(dsk, keys)


SEED = {
    "x": 1,
    "y": 2,
    "z": (add, "x", "y"),
    "w": (sum, ["x", "y", "z"]),
    "v": (inc, (mul, "w", 2)),
}


@pytest.mark.parametrize("keys", ["z", "w", "v", ["x", "v"], [["x", "y"], ["z", ["w"]]], []])
def test_seed_graph(keys, backend_options):
    got = tilegraph.get(SEED, keys, **backend_options)
    assert got == dask_get(SEED, keys)


def test_seed_values():
    assert tilegraph.get(SEED, ["z", "w", "v"]) == (3, 6, 13)


def test_repeated_keys_in_request():
    assert tilegraph.get(SEED, ["z", "z", ["z"]]) == (3, 3, (3,))


def test_literals_that_look_like_keys(backend_options):
    dsk = {"a": 1, "b": (lambda x, y: (x, y), "a", "c"), "c2": (str.upper, "c")}
    assert tilegraph.get(dsk, ["b", "c2"], **backend_options) == ((1, "c"), "C")


def test_tasks_inside_lists(backend_options):
    dsk = {"a": 1, "b": (sum, [(inc, "a"), (inc, (inc, "a")), [(inc, 0)][0]])}
    assert tilegraph.get(dsk, "b", **backend_options) == dask_get(dsk, "b") == 2 + 3 + 1


def blocks(x, bs):
    nb0, nb1 = x.shape[0] // bs, x.shape[1] // bs
    return {("x", i, j): x[i * bs:(i + 1) * bs, j * bs:(j + 1) * bs]
            for i in range(nb0) for j in range(nb1)}, nb0, nb1


def test_blocked_transpose(backend_options):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 9))
    dsk, nb0, nb1 = blocks(x, 3)
    dsk.update({("t", j, i): (np.transpose, ("x", i, j)) for i in range(nb0) for j in range(nb1)})
    dsk["T"] = (np.block, [[("t", j, i) for i in range(nb0)] for j in range(nb1)])
    out = tilegraph.get(dsk, "T", **backend_options)
    np.testing.assert_array_equal(out, x.T)
    np.testing.assert_array_equal(dask_get(dsk, "T"), out)


def test_blocked_dot_product(backend_options):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 12))
    b = rng.standard_normal((12, 4))
    bs = 4
    da, na0, na1 = blocks(a, bs)
    db_ = {("y", i, j): b[i * bs:(i + 1) * bs, j * bs:(j + 1) * bs]
           for i in range(3) for j in range(1)}
    dsk = {**da, **db_}
    for i in range(na0):
        for k in range(na1):
            dsk[("p", i, k)] = (np.dot, ("x", i, k), ("y", k, 0))
        dsk[("c", i, 0)] = (sum, [("p", i, k) for k in range(na1)])
    keys = [[("c", i, 0)] for i in range(na0)]
    out = tilegraph.get(dsk, keys, **backend_options)
    np.testing.assert_allclose(np.block([list(r) for r in out]), a @ b)
    ref = dask_get(dsk, keys)
    for r1, r2 in zip(out, ref, strict=True):
        np.testing.assert_array_equal(r1[0], r2[0])


def test_missing_key():
    with pytest.raises(KeyError, match="key 'nope' is not in the task graph"):
        tilegraph.get(SEED, "nope")
    with pytest.raises(KeyError, match="key 'nope' is not in the task graph"):
        tilegraph.get(SEED, ["x", ["nope"]])


def test_unhashable_key():
    with pytest.raises(TypeError, match="keys must be hashable"):
        tilegraph.get(SEED, [{"x": 1}])


def test_cycle():
    dsk = {"a": (inc, "c"), "b": (inc, "a"), "c": (inc, "b"), "d": (inc, "c"), "e": 1}
    with pytest.raises(CycleError, match="has a cycle through key") as info:
        tilegraph.get(dsk, "d")
    assert set(info.value.cycle) == {"a", "b", "c"}
    # a cycle the requested keys do not need does not matter
    assert tilegraph.get(dsk, "e") == 1


def test_failing_task():
    def bad(x):
        return 1 / (x - 1)

    with pytest.raises(ZeroDivisionError) as info:
        tilegraph.get({"a": 1, "b": (bad, "a")}, "b")
    assert "tilegraph: task 'b' (op bad) failed" in info.value.__notes__


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"backend": "gpu"}, ValueError,
         "unknown backend 'gpu'; choose one of: mpi, serverless, sync, threads"),
        ({"workers": 0}, ValueError, "workers must be a positive integer"),
        ({"workers": 1.5}, ValueError, "workers must be a positive integer"),
        ({"retries": -1}, ValueError, "retries must be a non-negative integer"),
        ({"progress": "yes"}, ValueError, "progress must be True, False or 'auto'"),
        ({"callbacks": 3}, TypeError, "callbacks must be a callable or a list"),
        ({"callbacks": [3]}, TypeError, "callbacks must be callables"),
        ({"wrokers": 2}, TypeError, r"get\(\) got unknown option\(s\) 'wrokers'"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        tilegraph.get(SEED, "z", **kwargs)


def test_bad_graph_argument():
    with pytest.raises(TypeError, match="must be a dict mapping keys to tasks, got list"):
        tilegraph.get([1, 2], 0)
    with pytest.raises(TypeError, match="run\\(\\) needs a TaskGraph, got dict"):
        tilegraph.run(SEED, ["z"])


def test_many_tasks_both_backends(backend_options):
    n = 5000
    dsk = {("x", i): (inc, i) for i in range(n)}
    dsk["total"] = (sum, [("x", i) for i in range(n)])
    assert tilegraph.get(dsk, "total", **backend_options) == sum(range(1, n + 1))
