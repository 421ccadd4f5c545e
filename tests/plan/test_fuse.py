"""Fusion passes: chains that appear once a shared read is inlined, blocks read twice inside
one task made once, a rechunk's join folded into the ufunc that reads it, ufuncs writing
over fresh temporaries, and the memory model of the fused templates."""

from collections import Counter

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.graph.taskgraph import Call
from tilegraph.plan.fuse import UfuncInto, template_working


def _calls(template, out=None):
    out = [] if out is None else out
    if type(template) is Call:
        out.append(template)
        for a in template.args:
            _calls(a, out)
    elif type(template) in (list, tuple):
        for a in template:
            _calls(a, out)
    return out


def _pad_rechunk(x):
    padded = tg.pad(x, ((0, 1), (0, 0), (0, 0)), mode="wrap")
    return padded.rechunk((x.shape[0] + 1, *padded.chunksize[1:]))


def test_a_padded_rechunked_block_is_made_inside_the_step_that_reads_it():
    # the vorticity pattern: u, v random in one block along axis 0, padded by one row
    # (wrap) and joined back into one block, then combined with dx, dy
    u = tg.random.random((30, 20, 4), chunks=(30, 20, 1), seed=1)
    v = tg.random.random((30, 20, 4), chunks=(30, 20, 1), seed=2)
    dx = tg.random.random((31, 20), chunks=(31, 20), seed=3)
    dy = tg.random.random((31, 20), chunks=(31, 20), seed=4)
    out = dx[..., None] * _pad_rechunk(u) - dy[..., None] * _pad_rechunk(v)
    plan = plan_arrays([out])
    g = plan.graph
    # one task per output block and one each for dx and dy (their views dx[..., None]
    # taken in every reader), no rechunk or random task left
    assert Counter(g.meta["kind"]) == {"store": 4, "random": 2}
    block = 31 * 20 * 1 * 8
    for i, kind in enumerate(g.meta["kind"]):
        if kind != "store":
            continue
        calls = _calls(g.args[i])
        names = Counter(getattr(c.func, "__name__", "") for c in calls)
        # the joined block is never made: each multiply reads the pieces where they lie
        assert names["_ufunc_over_pieces"] == 2 and "_copy_pieces" not in names
        # u's block is read by the join and by the wrapped row: made once
        assert all(c.shared == 2 for c in calls if c.func.__name__ == "_draw")
        # the subtraction writes over one of the products
        assert sum(isinstance(c.func, UfuncInto) for c in calls) == 1
        # working set: two products and one block of u or v at a time
        assert g.meta["working"][i] <= 3 * block
    un, vn = u.compute(), v.compute()
    dxn, dyn = dx.compute(), dy.compute()
    upn = np.pad(un, ((0, 1), (0, 0), (0, 0)), mode="wrap")
    vpn = np.pad(vn, ((0, 1), (0, 0), (0, 0)), mode="wrap")
    np.testing.assert_allclose(out.compute(), dxn[..., None] * upn - dyn[..., None] * vpn)


def test_the_leaves_of_a_reduction_keep_their_own_tasks():
    x = tg.random.random((40, 40), chunks=10, seed=1)
    g = plan_arrays([(x * 2 + 1).sum(axis=0)]).graph
    names = Counter(g.meta["name"])
    assert names["random-random+multiply+add+sum-partial"] == 16
    assert len(g) == 16 + 4


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int64])
def test_ufuncs_writing_over_fresh_temporaries_give_numpy_values(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((7, 5)) * 10).astype(dtype)
    b = (rng.standard_normal((7, 5)) * 10).astype(np.float32)
    x = tg.from_numpy(a, chunks=(3, 2))
    y = tg.from_numpy(b, chunks=(3, 2))
    cases = [
        ((x * 2) - (x + 1), (a * 2) - (a + 1)),
        ((y * 2) + (x * 1), (b * 2) + (a * 1)),     # promoted: a new result
        ((x * 2) / 3, (a * 2) / 3),                 # true division of ints: a new result
        ((x + 1)[None] * np.ones((2, 7, 5)), (a + 1)[None] * np.ones((2, 7, 5))),
        (np.abs(x - 1) + 1, np.abs(a - 1) + 1),
        ((x * 2) // (x + 1 + (a == -1)), (a * 2) // (a + 1 + (a == -1))),
    ]
    with np.errstate(all="ignore"):
        for got, want in cases:
            value = got.compute()
            assert value.dtype == want.dtype
            np.testing.assert_allclose(value, want, rtol=1e-6)


def test_template_working_holds_arguments_until_their_call():
    # f(g(), h()) with g's result (10) held while h runs (peak 30), then f works on 5
    g = Call(np.negative, (), mem=(10, 10))
    h = Call(np.negative, (), mem=(20, 30))
    f = Call(np.add, (g, h), mem=(5, 5))
    assert template_working(f) == (5, max(10, 10 + 30, 10 + 20 + 5))
    assert template_working((f, 7, [g])) == (15, 40)


@pytest.mark.parametrize("source", ["random", "object"])
def test_a_chain_fused_over_two_passes_keeps_what_its_first_pass_knew(source):
    """``s -> f(s) -> s + f(s)``: the first pass inlines ``f`` into the sum, the second the
    source ``s``. The fused task is cheap to make again only if every step is (``f`` is a
    user's function: not), and repeatable only if every step is: its ``remake`` and
    ``repeatable`` columns carry the first pass's verdict into the second."""
    from tilegraph.graph import GraphBuilder
    from tilegraph.plan.fuse import fuse_chains

    b = GraphBuilder()
    if source == "random":
        b.add("s", np.ones, args=(3,), kind="random", nbytes=24)
    else:
        b.add("s", np.ones, args=(3,), kind="load", nbytes=24, name="from_array",
              repeatable="from_array of a Sensor: not declared repeatable")
    b.add("f", np.negative, deps=["s"], kind="map", nbytes=24, name="f")
    b.add("sum", np.add, deps=["s", "f"], kind="elementwise", nbytes=24)
    g, _ = fuse_chains(b.build(), np.array([2]))
    assert len(g) == 1 and g.in_degree()[0] == 0  # both passes ran
    np.testing.assert_array_equal(_run(g), np.zeros(3))
    assert g.meta["remake"][0] is False
    assert not g.remakeable()[0] and not g.remake_refused()[0]
    why = g.unrepeatable_reason(0)
    if source == "random":
        assert why == "f (map): it runs a user's function, which may not give the same " \
                      "block again"
    else:
        assert why == "from_array of a Sensor: not declared repeatable"


def test_a_cheap_chain_over_a_source_that_is_not_repeatable_is_refused_not_remade():
    from tilegraph.graph import GraphBuilder
    from tilegraph.plan.fuse import fuse_chains

    b = GraphBuilder()
    b.add("s", np.ones, args=(3,), kind="load", nbytes=24, name="from_array",
          repeatable="from_array of a Sensor: not declared repeatable")
    b.add("v", np.negative, deps=["s"], kind="getitem", nbytes=24)
    b.add("sum", np.add, deps=["s", "v"], kind="elementwise", nbytes=24)
    g, _ = fuse_chains(b.build(), np.array([2]))
    assert len(g) == 1 and g.meta["remake"][0] is True
    assert g.remake_refused()[0] and not g.remakeable()[0]
    assert g.meta["repeatable"][0] == "from_array of a Sensor: not declared repeatable"
    np.testing.assert_array_equal(_run(g), np.zeros(3))


def _run(g):
    from tilegraph.graph.taskgraph import call_of

    func, args, kwargs = call_of(g, 0, [])
    return func(*args, **kwargs)
