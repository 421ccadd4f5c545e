"""The digest of everything a plan's tasks read (the MPI ranks' plan check), without MPI:
what it covers, what it names, what it leaves out, and that it costs one walk per
function however many tasks share it. tests/runtime/test_mpi.py runs it on real ranks."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.taskgraph import Call, Dep, TaskGraph
from tilegraph.runtime import digest
from tilegraph.runtime.digest import PlanValues, describe_part, differing_parts

ROOT = Path(__file__).resolve().parents[2]


def graph_of(func, n=3, args=None, kwargs=None):
    """n tasks calling ``func`` on a data task each."""
    dsk = {}
    for i in range(n):
        dsk[("x", i)] = np.full(4, float(i))
        dsk[("f", i)] = (func, ("x", i), *(args or ()))
    g = TaskGraph.from_dask(dsk)
    if kwargs:
        g = g.replace(kwargs={i: dict(kwargs) for i in range(len(g)) if g.funcs[i]})
    return g


def total(func, **kw):
    return PlanValues().total(graph_of(func, **kw))


def named(func_a, func_b, **kw):
    """What the error would name when one rank holds ``func_a``, another ``func_b``."""
    ga, gb = graph_of(func_a, **kw), graph_of(func_b, **kw)
    i = next(i for i in range(len(ga)) if ga.funcs[i] is not None)
    ranks, paths = differing_parts([PlanValues().parts(ga, i), PlanValues().parts(gb, i)])
    assert ranks == [1]
    return [describe_part(p) for p in paths]


def make(k):
    return lambda b: b + k


OFF = 1.0


def reads_global(b):
    return b + OFF


class Shift:
    def __init__(self, off):
        self.off = off

    def apply(self, b):
        return b + self.off


def add_by(b, *, by):
    return b + by


def test_a_closure_variable_is_covered_and_named():
    assert total(make(1.0)) == total(make(1.0))
    assert total(make(1.0)) != total(make(2.0))
    [what] = named(make(1.0), make(2.0))
    assert what.startswith("the closure variable k of make.<locals>.<lambda> at "
                           "test_digest.py:")


def with_default(value):
    def f(b, k=value):  # (no closure: the default is evaluated here)
        return b + k
    return f


def with_kwdefault(value):
    def f(b, *, k=value):
        return b + k
    return f


def test_defaults_and_keyword_defaults_are_covered_and_named():
    assert total(with_default(1.0)) == total(with_default(1.0))
    assert named(with_default(1.0), with_default(2.0)) == [
        f"the default of argument k of {digest.function_name(with_default(1.0))}"]
    assert total(with_kwdefault(1.0)) == total(with_kwdefault(1.0))
    assert named(with_kwdefault(1.0), with_kwdefault(2.0)) == [
        f"the default of keyword argument k of {digest.function_name(with_kwdefault(1.0))}"]


def test_a_module_global_read_by_a_script_function_is_covered():
    global OFF
    before = total(reads_global)
    OFF = 2.0
    try:
        after = total(reads_global)
    finally:
        OFF = 1.0
    assert before != after
    assert total(reads_global) == before


def reads_attribute(b):
    return b + b.OFF  # an attribute, not the global OFF


def test_an_attribute_is_not_taken_for_the_global_of_its_name():
    global OFF
    before = total(reads_attribute)
    OFF = 2.0
    try:
        assert total(reads_attribute) == before
    finally:
        OFF = 1.0


def test_a_partial_keyword_and_a_bound_object_are_covered_and_named():
    assert total(functools.partial(add_by, by=1.0)) == total(functools.partial(add_by, by=1.0))
    [what] = named(functools.partial(add_by, by=1.0), functools.partial(add_by, by=2.0))
    assert what.startswith("the keyword by of functools.partial(add_by at test_digest.py:")
    [what] = named(Shift(1.0).apply, Shift(2.0).apply)
    assert what.startswith("the attribute off of a Shift object (in the object that the "
                           "method Shift.apply at test_digest.py:")


def test_literal_arrays_are_covered_by_content_and_named():
    a, b = np.arange(6.0), np.arange(6.0)
    assert total(np.add, args=(a,)) == total(np.add, args=(b,))
    b[3] = -1
    ga, gb = graph_of(np.add, args=(a,)), graph_of(np.add, args=(b,))
    i = next(i for i in range(len(ga)) if ga.funcs[i] is not None)
    _ranks, paths = differing_parts([PlanValues().parts(ga, i), PlanValues().parts(gb, i)])
    assert [describe_part(p) for p in paths] == ["a float64 array of shape (6,)"]
    # datetimes, structured and object arrays are digested too
    for x in (np.array(["2020-01-01"], dtype="M8[D]"), np.zeros(2, dtype=[("a", "i4")]),
              np.array([{"k": 1}, None], dtype=object)):
        assert total(np.add, args=(x,)) == total(np.add, args=(x.copy(),))


def test_sets_and_dicts_are_digested_whatever_their_order():
    words = ["alpha", "beta", "gamma", "delta"]
    a = {"s": set(words), "d": {w: len(w) for w in words}}
    b = {"s": set(reversed(words)), "d": {w: len(w) for w in reversed(words)}}
    assert total(make(a)) == total(make(b))
    assert total(make(frozenset(words))) != total(make(frozenset(words[:3])))


def test_the_same_script_digests_alike_in_processes_of_different_hash_seeds(tmp_path):
    """Two processes (as two ranks) with their own PYTHONHASHSEED: the same digest for
    closures over sets of strings, dicts built in set order, arrays, partials, methods."""
    script = tmp_path / "job.py"
    script.write_text(
        "import functools, json, numpy as np\n"
        "from tilegraph.graph.taskgraph import TaskGraph\n"
        "from tilegraph.runtime.digest import PlanValues\n"
        "WORDS = {'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'}\n"
        "TABLE = {w: len(w) for w in WORDS}\n"
        "class Scale:\n"
        "    def __init__(self): self.by, self.names = 2.0, set(WORDS)\n"
        "    def apply(self, b): return b * self.by\n"
        "def f(b, k=frozenset(WORDS)): return b + len(k) + sum(TABLE.values())\n"
        "funcs = [f, lambda b: b + len(WORDS), Scale().apply,\n"
        "         functools.partial(np.multiply, np.arange(3.0))]\n"
        "dsk = {('x', i): np.ones(3) for i in range(4)}\n"
        "dsk.update({('y', i): (funcs[i], ('x', i)) for i in range(4)})\n"
        "print(json.dumps(PlanValues().total(TaskGraph.from_dask(dsk))))\n")
    seen = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                             env=env, timeout=60, check=True)
        seen.add(out.stdout.strip())
    assert len(seen) == 1


def test_a_function_shared_by_many_tasks_is_walked_once(monkeypatch):
    calls = []
    walk = PlanValues._function_parts

    def counting(self, h, fn):
        calls.append(fn)
        return walk(self, h, fn)

    monkeypatch.setattr(PlanValues, "_function_parts", counting)
    fn = make(np.ones(100))
    n = 20_000
    b = GraphBuilder()
    for i in range(n):
        b.add(("t", i), np.negative, args=(Call(fn, (float(i),)),))
    g = b.build()
    values = PlanValues()
    values.total(g)
    assert calls.count(fn) == 1  # the lambda, its closure and its array: once
    assert len(values.digest(g)) == n


def test_what_is_left_out_or_cannot_be_pickled_gives_no_false_difference():
    from tilegraph.array.random import FreshSeed

    # the seeds tilegraph draws for unseeded random arrays: each rank its own
    assert total(make(FreshSeed(1))) == total(make(FreshSeed(2)))
    # a lock cannot be sent: its type alone
    assert total(make(threading.Lock())) == total(make(threading.Lock()))
    # tilegraph's objects: without their private, per-process attributes
    from tilegraph.io.npy import NpyWriter

    w1 = NpyWriter("/tmp/out.npy", (3,), float, overwrite=True)
    w2 = NpyWriter("/tmp/out.npy", (3,), float, overwrite=True)
    try:
        assert w1._tmp != w2._tmp
        assert total(make(w1)) == total(make(w2))
        w3 = NpyWriter("/tmp/other.npy", (3,), float, overwrite=True)
        assert total(make(w1)) != total(make(w3))
        w3.abort()
    finally:
        w1.abort()
        w2.abort()


def test_cycles_end():
    def recursive(b, n=2):
        return b if n == 0 else recursive(b, n - 1)

    loop: list = []
    loop.append(loop)
    table: dict = {}
    table["me"] = table
    assert total(recursive) == total(recursive)
    assert total(make(loop)) == total(make(loop))
    assert total(make(table)) == total(make(table))
    deep: list = []
    for _ in range(sys.getrecursionlimit() * 2):
        deep = [deep]
    assert total(make(deep)) == total(make(deep))  # not compared, but no crash


def test_a_numpy_generator_s_state_is_covered():
    a = np.random.default_rng(1)
    b = np.random.default_rng(1)
    c = np.random.default_rng(2)
    assert total(make(a)) == total(make(b))
    assert total(make(a)) != total(make(c))
    assert total(functools.partial(a.random)) != total(functools.partial(c.random))


def test_library_functions_go_by_name_and_user_modules_by_value():
    assert digest.is_library("numpy") and digest.is_library("tilegraph.runtime.digest")
    assert digest.is_library("tilegraph.not_imported_yet")
    assert digest.is_library("os") and digest.is_library("builtins")
    assert not digest.is_library("__main__")
    assert not digest.is_library(__name__)  # the tests: the user's own code
    g = graph_of(np.add, args=(1.0,))
    assert PlanValues().total(g) == PlanValues().total(graph_of(np.add, args=(1.0,)))


def test_the_parts_of_a_task_are_listed_innermost_first_with_their_labels():
    g = graph_of(make(3.0))
    i = next(i for i in range(len(g)) if g.funcs[i] is not None)
    parts = PlanValues().parts(g, i)
    paths = [p for p, _d in parts]
    assert paths[-1] == (f"the function {digest.function_name(g.funcs[i])}",)
    assert any(p[-1].startswith("the closure variable k of") for p in paths)
    assert all(len(d) == 20 for _p, d in parts)
    assert describe_part(()) == "a value"


def test_dependency_markers_are_part_of_the_template():
    b = GraphBuilder()
    b.add_data("a", 1)
    b.add_data("b", 2)
    b.add("c", np.subtract, deps=["a", "b"], args=(Dep(0), Dep(1)))
    g1 = b.build()
    args = list(g1.args)
    args[2] = (Dep(1), Dep(0))
    g2 = g1.replace(args=args)
    assert PlanValues().digest(g1)[2] != PlanValues().digest(g2)[2]


def test_mpi_values_option_is_checked():
    pytest.importorskip("mpi4py")
    from tilegraph import config

    assert config.resolve({"backend": "mpi", "mpi_values": "rank0"},
                          "compute()").backend_options["mpi_values"] == "rank0"
    with pytest.raises(ValueError, match="mpi_values must be one of 'same', 'rank0', "
                                         "got 'rank1'"):
        config.resolve({"backend": "mpi", "mpi_values": "rank1"}, "compute()")
    with pytest.raises(ValueError, match="mpi_values"):
        config.resolve({"backend": "mpi", "mpi_values": 0}, "compute()")


def test_json_of_parts_survives_the_exchange():
    """The parts go between ranks by pickle; labels are strings, digests bytes."""
    parts = PlanValues().parts(graph_of(make(1.0)), 3)
    assert json.loads(json.dumps([list(p) for p, _d in parts]))


def test_a_tilegraph_array_read_by_a_function_is_compared_by_shape_blocks_and_dtype():
    """Not by its pickled plan (cloudpickle's bytes are not the same in two processes)."""
    import tilegraph as tg

    a = tg.random.random((10, 6), chunks=5) * 2  # unseeded: a plan each rank draws anew
    b = tg.random.random((10, 6), chunks=5) * 2
    assert total(make(a)) == total(make(b))
    assert total(make(a)) != total(make(tg.ones((10, 6), chunks=3)))
    assert total(make(a)) != total(make(a.astype(np.float32)))
