"""Data-dependent loops: results equal NumPy's loops, plans are reused while shapes repeat,
and the loop-invariant part runs once."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.loops import last_loop_iterations, while_loop


def test_halving_until_small():
    x = tg.from_numpy(np.array([100.0, 64.0, 3.0]), chunks=2)
    (y,) = while_loop(lambda v: v.max() > 1, lambda v: (v / 2,), [x])
    np.testing.assert_array_equal(y.compute(), np.array([100.0, 64.0, 3.0]) / 128)
    assert last_loop_iterations() == 7


def test_condition_false_at_the_start_runs_nothing():
    x = tg.from_numpy(np.zeros(3), chunks=2)
    (y,) = while_loop(lambda v: v.sum() > 1, lambda v: (v + 1,), [x])
    np.testing.assert_array_equal(y.compute(), np.zeros(3))


def _pagerank_numpy(m, tol):
    n = m.shape[0]
    r = np.full(n, 1.0 / n)
    iters = 0
    while True:
        new = 0.85 * (m @ r) + 0.15 / n
        iters += 1
        diff = np.abs(new - r).sum()
        r = new
        if diff <= tol:
            return r, iters


def test_pagerank_to_a_tolerance_plans_once_and_computes_the_matrix_once():
    n = 300
    rng = np.random.default_rng(0)
    adj = (rng.random((n, n)) < 0.05).astype(float)
    deg = adj.sum(axis=0)
    deg[deg == 0] = 1
    m_np = adj / deg
    made = []

    def make(block):
        made.append(block.shape)
        return block

    m = tg.from_numpy(m_np, chunks=(70, 90)).map_blocks(make)
    plans = []

    def body(r, diff):
        plans.append(1)
        new = 0.85 * (m @ r) + 0.15 / n
        return new, abs(new - r).sum()

    r0 = tg.from_numpy(np.full(n, 1.0 / n), chunks=70)  # the blocks m @ r gets
    r, diff = while_loop(lambda r, d: d > 1e-12, body, [r0, tg.asarray(np.array(1.0))])
    want, iters = _pagerank_numpy(m_np, 1e-12)
    np.testing.assert_allclose(r.compute(), want, rtol=1e-12)
    assert last_loop_iterations() == iters > 10
    assert len(plans) == 1  # one plan, reused
    # the matrix was made in the first iteration only ((1, 1): map_blocks' dtype probe)
    assert len([s for s in made if s != (1, 1)]) == m.npartitions
    assert diff.compute() <= 1e-12


def test_gradient_descent_to_convergence():
    rng = np.random.default_rng(1)
    x_np = rng.random((200, 5))
    y_np = x_np @ np.arange(1.0, 6.0)
    x = tg.from_numpy(x_np, chunks=(64, 5))
    y = tg.from_numpy(y_np, chunks=64)
    lr = 0.5

    def body(w, step):
        grad = x.T @ (x @ w - y) / 200
        return w - lr * grad, (grad * grad).sum() ** 0.5

    w, _ = while_loop(lambda w, s: s > 1e-8, body,
                      [tg.zeros(5, chunks=5), tg.asarray(np.array(1.0))], max_iter=20000)
    np.testing.assert_allclose(w.compute(), np.arange(1.0, 6.0), atol=1e-5)


def test_a_new_plan_when_the_shapes_change():
    plans = []

    def body(v):
        plans.append(v.shape)
        return (tg.concatenate([v, v[:1]]),)

    (y,) = while_loop(lambda v: v.shape[0] < 5 + 0 * v.sum(), body,
                      [tg.from_numpy(np.arange(2.0), chunks=1)])
    np.testing.assert_array_equal(y.compute(), [0.0, 1.0, 0.0, 0.0, 0.0])
    assert plans == [(2,), (3,), (4,)]


def test_max_iter_caps_the_loop():
    (y,) = while_loop(lambda v: v.sum() > -1, lambda v: (v + 1,),
                      [tg.zeros(4, chunks=3)], max_iter=3)
    np.testing.assert_array_equal(y.compute(), np.full(4, 3.0))
    assert last_loop_iterations() == 3


def test_bad_loops_are_rejected():
    x = tg.zeros(3, chunks=2)
    with pytest.raises(TypeError, match="must be callables"):
        while_loop(None, lambda v: (v,), [x])
    with pytest.raises(TypeError, match="list or tuple of arrays"):
        while_loop(lambda v: v.sum() > 0, lambda v: (v,), x)
    with pytest.raises(ValueError, match="max_iter must be"):
        while_loop(lambda v: v.sum() < 1, lambda v: (v,), [x], max_iter=-1)
    with pytest.raises(ValueError, match="body returned 2 arrays for 1 loop variables"):
        while_loop(lambda v: v.sum() < 1, lambda v: (v, v), [x])
    with pytest.raises(ValueError, match="cond must return a 0-d array"):
        while_loop(lambda v: v < 1, lambda v: (v + 1,), [x])
    with pytest.raises(ValueError, match="MPI backend is not supported"):
        while_loop(lambda v: v.sum() < 1, lambda v: (v,), [x], backend="mpi")
