"""The op-kind registry: every kind the array API emits is registered, unknown kinds are
rejected at build time, and the rows say what fusion, placement and memory did before."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sps

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.graph import GraphBuilder, GraphError
from tilegraph.graph.kinds import KINDS, OpKind, kind_info, register_kind
from tilegraph.graph.memory import task_estimates


def _plans_of_the_array_api() -> list:
    rng = np.random.default_rng(0)
    x = tg.from_numpy(rng.standard_normal((12, 12)), chunks=4)
    v = tg.from_numpy(rng.standard_normal(12), chunks=4)
    tall = tg.random.random((4000, 3), chunks=(500, 3), seed=1)
    spd = x @ x.T + 12 * tg.eye(12, chunks=4)
    s = tg.from_scipy(sps.random(12, 12, density=0.3, format="csr", random_state=2),
                      chunks=4)
    arrays = [
        (x + 1) * x - v, x.T, x.reshape(6, 24), (x + 0).rechunk(6), x[2:9, ::2],
        x.astype(np.float32),
        x.sum(axis=0), x.mean(), x.argmax(axis=1), tg.where(x > 0, x, 0), x.map_blocks(np.abs),
        x @ x, x @ v, tall.T @ tall, tg.einsum("ij,jk->ik", x, x), tg.dot(v, v),
        tg.ones((5, 5), chunks=2), tg.arange(10, chunks=3), tg.zeros(4, chunks=2),
        tg.random.random((6, 6), chunks=3, seed=3),
        tg.linalg.cholesky(spd), tg.linalg.solve(spd, v), tg.linalg.inv(spd),
        *tg.linalg.qr(tall), *tg.linalg.svd(tall), tg.linalg.det(spd),
        s @ v, (s + s).todense(), s.T.todense(), s.sum(axis=0),
        np.sort(v), np.sort(x, axis=0), np.cumsum(x, axis=1), x[x > 0], x[:, [3, 1]],
        np.histogram(x, bins=4, range=(0, 1))[0], np.median(x, axis=0),
    ]
    return [plan_arrays([a], fuse=False).graph for a in arrays]


def test_every_kind_the_array_api_emits_is_registered():
    seen = set()
    for g in _plans_of_the_array_api():
        seen.update(k for k in g.meta.get("kind", ()) if k is not None)
    assert seen <= set(KINDS), sorted(seen - set(KINDS))
    # the plans above reach the kinds of every part of the API
    assert {"load", "creation", "random", "elementwise", "getitem", "transpose", "reshape",
            "map", "partial", "reduce", "aggregate", "rechunk", "product", "accumulate",
            "partial_product", "store", "potrf", "trsm", "qr", "svd", "sort"} <= seen


def test_unknown_kind_is_rejected_when_the_task_is_added():
    b = GraphBuilder()
    with pytest.raises(GraphError, match=r"'frobnicate'.*register_kind"):
        b.add("x", np.negative, kind="frobnicate")
    with pytest.raises(ValueError, match=r"'frobnicate'"):
        b.add_data("y", 1, kind="frobnicate")
    assert len(b) == 0  # nothing half-added
    b.add("x", np.negative, args=(1.0,), kind=None)
    b.add_data("y", 1)
    assert b.build().task_meta("x").kind is None


def test_kind_info():
    assert kind_info(None).name == "other"
    assert kind_info(None).temp_factor == 1.0 and kind_info(None).placement == "producers"
    with pytest.raises(ValueError, match=r"unknown op kind 'nope'; known kinds: .*gemm"):
        kind_info("nope")
    assert kind_info("product").flops(10, 20, 30) == 2 * 10 * 20 * 30
    assert kind_info("potrf").flops(30) == pytest.approx(30**3 / 3)


def test_register_kind():
    row = OpKind("test-stencil", blockwise=True, fuse_producer=True, fuse_consumer=True,
                 temp_factor=2.0)
    try:
        register_kind(row)
        register_kind(OpKind("test-stencil", blockwise=True, fuse_producer=True,
                             fuse_consumer=True, temp_factor=2.0))  # the same row again
        with pytest.raises(ValueError, match="already registered"):
            register_kind(OpKind("test-stencil", temp_factor=0.0))
        with pytest.raises(ValueError, match="already registered"):
            register_kind(OpKind("gemm"))
        b = GraphBuilder()
        b.add("s", np.negative, args=(1.0,), kind="test-stencil", nbytes=100)
        assert task_estimates(b.build()) == [300]
    finally:
        KINDS.pop("test-stencil", None)
    with pytest.raises(ValueError, match="placement must be one of"):
        OpKind("bad", placement="everywhere")
    with pytest.raises(ValueError, match="overwrites must be an argument position"):
        OpKind("bad", overwrites=-1)
    with pytest.raises(TypeError, match="OpKind"):
        register_kind("gemm")


def test_rows_keep_the_rules_of_the_old_tables():
    blockwise = {"load", "creation", "random", "elementwise", "getitem", "transpose",
                 "reshape", "astype", "map", "partial", "store"}
    assert {k for k, r in KINDS.items() if r.blockwise} == blockwise
    assert {k for k, r in KINDS.items() if r.fuse_producer} == blockwise | {
        "reduce", "aggregate", "product", "accumulate", "rechunk", "sort"}
    assert {k for k, r in KINDS.items() if r.fuse_consumer} == blockwise | {
        "aggregate", "partial_product", "rechunk", "stage"}
    assert {k for k, r in KINDS.items() if r.absorbs_views} == {"product", "accumulate"}
    assert {k: r.placement for k, r in KINDS.items() if r.placement != "producers"} == {
        "product": "grid", "accumulate": "grid", "potrf": "grid", "trsm": "grid",
        "syrk": "grid", "gemm": "grid", "store": "gather", "partial_product": "vector",
        "statement": "at-start"}
    assert {k for k, r in KINDS.items() if r.chain_temporaries} == {"elementwise", "partial",
                                                                      "map"}
    assert {k for k, r in KINDS.items() if r.temp_factor == 1.0} == {
        "other", "elementwise", "partial", "map", "reduce", "qr", "lu", "svd", "assemble",
        "todense", "sort"}
    assert {k for k, r in KINDS.items() if r.releases_gil} == {
        "product", "accumulate", "partial_product", "potrf", "trsm", "syrk", "gemm", "qr",
        "lu", "svd", "sort", "statement", "stage"}


def test_task_estimates_count_temporaries_by_kind():
    b = GraphBuilder()
    b.add_data("x", 1, kind="load", nbytes=100)
    b.add("t", np.transpose, deps=["x"], kind="transpose", nbytes=100)
    b.add("e", np.negative, deps=["t"], kind="elementwise", nbytes=100,
          name="negative+add+multiply")
    b.add("o", np.negative, deps=["e"], nbytes=100)
    # views none, a fused chain of three steps three, opaque tasks one
    assert task_estimates(b.build()) == [100, 100, 400, 200]


def test_kinds_that_write_over_an_input_name_its_position():
    assert {k: r.overwrites for k, r in KINDS.items() if r.overwrites is not None} == {
        "accumulate": 0, "trsm": 1, "syrk": 0, "gemm": 0}


def test_which_kinds_are_repeatable_and_why_the_others_are_not():
    from tilegraph.graph.kinds import unrepeatable_reason

    assert {k for k, r in KINDS.items() if not r.repeatable} == {
        "other", "load", "store", "map", "stage", "statement", "accumulate", "trsm", "syrk",
        "gemm"}
    # a step that writes over its input cannot be run again on the same inputs
    assert not any(r.repeatable for r in KINDS.values() if r.overwrites is not None)
    for k, r in KINDS.items():
        assert (unrepeatable_reason(k) == "") == r.repeatable, k
    assert "from_array" in unrepeatable_reason("load")
    assert unrepeatable_reason("accumulate") == "it writes over its input in place"
    assert unrepeatable_reason(None) == unrepeatable_reason("other")
    # a kind registered without saying is not repeatable
    assert OpKind("test-new").repeatable is False
    with pytest.raises(ValueError, match="repeatable must be a bool"):
        OpKind("bad", repeatable="yes")
    with pytest.raises(ValueError, match="remake must be a bool"):
        OpKind("bad", remake=1)
