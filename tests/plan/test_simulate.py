"""The discrete-event simulator: hand-checked timings, traffic and memory, and a real plan."""

import time

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.graph import GraphBuilder
from tilegraph.graph.kinds import KINDS, OpKind, register_kind
from tilegraph.plan.cost import CostModel
from tilegraph.plan.explain import sequential_peak
from tilegraph.plan.order import order
from tilegraph.plan.simulate import SimResult, communication_volume, simulate, transfers

# one flop per second, 10 bytes per second on the network, 1 s latency
MODEL = CostModel(flop_rate=1.0, bandwidth=10.0, latency=1.0, mem_bandwidth=1.0,
                  task_overhead=0.0)


# the hand-checked graphs: tasks without temporaries, so memory is their outputs alone
@pytest.fixture(autouse=True, scope="module")
def test_kinds():
    """The op kinds of this module's graphs, registered while its tests run (other modules
    check the registry's own rows)."""
    register_kind(OpKind("test-op", temp_factor=0.0))
    register_kind(OpKind("test-temp", temp_factor=1.0))
    yield
    for name in ("test-op", "test-temp"):
        KINDS.pop(name, None)


def noop(*args):
    return None


def build(tasks):
    """A graph from ``(key, deps, cost, nbytes)`` rows; a cost of None leaves it unset."""
    b = GraphBuilder()
    for key, deps, cost, nbytes in tasks:
        b.add(key, noop, deps=deps, cost=cost, nbytes=nbytes, kind="test-op")
    return b.build()


def place(g, where):
    return np.array([where[k] for k in g.keys], dtype=np.int64)


def test_chain_on_one_worker():
    g = build([("x", [], 1, 10), ("y", ["x"], 2, 20), ("z", ["y"], 3, 5)])
    r = simulate(g, np.zeros(3, dtype=np.int64), 1, model=MODEL)
    assert r.makespan == 6.0
    assert r.bytes_moved == 0 and r.messages == 0
    assert r.bytes_sent.tolist() == [0] and r.bytes_received.tolist() == [0]
    # x alone, then x and y (30), then y and z (25), then z kept
    assert r.peak_memory.tolist() == [30]
    assert r.busy.tolist() == [6.0]
    out = np.array([2])
    assert sequential_peak(g, out, order(g, out))[0] == 30
    assert r.utilisation == 1.0


def test_two_worker_diamond():
    g = build([("a", [], 2, 10), ("b", ["a"], 3, 20), ("c", ["a", "b"], 1, 5)])
    r = simulate(g, place(g, {"a": 0, "b": 1, "c": 0}), 2, model=MODEL)
    # a: 0-2 on 0; a's link 2-3, arrives on 1 at 4; b: 4-7 on 1; b's link 7-9, arrives on 0
    # at 10; c: 10-11 on 0
    assert r.makespan == 11.0
    assert r.bytes_moved == 30 and r.messages == 2
    assert r.bytes_sent.tolist() == [10, 20]
    assert r.bytes_received.tolist() == [20, 10]
    # worker 0 holds a (10), then b arrives (30), then c starts (35)
    # worker 1 receives a (10), then b starts (30)
    assert r.peak_memory.tolist() == [35, 30]
    assert r.busy.tolist() == [3.0, 3.0]
    assert r.utilisation == pytest.approx(6.0 / 22.0)
    assert communication_volume(g, place(g, {"a": 0, "b": 1, "c": 0})) == (30, 2)


def test_sends_of_one_link_go_one_after_another():
    # q and r cost nothing (no flops, no bytes), so the makespan is the last arrival
    fan = build([("p", [], 1, 10), ("q", ["p"], None, 0), ("r", ["p"], None, 0)])
    r2 = simulate(fan, place(fan, {"p": 0, "q": 1, "r": 2}), 3, model=MODEL, gather_to=None)
    one = build([("p", [], 1, 10), ("q", ["p"], None, 0)])
    r1 = simulate(one, place(one, {"p": 0, "q": 1}), 2, model=MODEL, gather_to=None)
    assert r1.makespan == 3.0  # p finishes at 1, link 1-2, latency 1
    assert r2.makespan == 4.0  # the second send waits for the first to leave the link
    assert r2.makespan - r1.makespan == 10 / MODEL.bandwidth
    assert r2.messages == 2 and r2.bytes_sent.tolist() == [20, 0, 0]
    assert r2.bytes_received.tolist() == [0, 10, 10]


def test_block_for_two_consumers_on_one_worker_is_sent_once():
    g = build([("p", [], 1, 10), ("q", ["p"], 1, 3), ("r", ["p"], 1, 4)])
    pl = place(g, {"p": 0, "q": 1, "r": 1})
    r = simulate(g, pl, 2, model=MODEL, gather_to=None)
    assert r.messages == 1 and r.bytes_moved == 10
    assert r.bytes_received.tolist() == [0, 10]
    # p arrives on 1 at 3; q runs 3-4, r runs 4-5; p stays until r is done
    assert r.makespan == 5.0
    assert r.peak_memory.tolist() == [10, 10 + 3 + 4]
    tasks, dests = transfers(g, pl, gather_to=None)
    assert tasks.tolist() == [0] and dests.tolist() == [1]


def test_a_block_is_held_until_its_sends_leave_the_link():
    # p (100 bytes) has no consumer on worker 0, only q on worker 1; s runs 1-2, u runs 2-22
    g = build([("p", [], 1, 100), ("q", ["p"], 1, 0), ("s", [], 1, 1), ("u", ["s"], 20, 2)])
    pl = place(g, {"p": 0, "q": 1, "s": 0, "u": 0})
    prio = [0, 1, 2, 3]
    # 10 bytes/s: p is on the link from 1 to 11, so worker 0 holds p, s and u at 2
    slow = simulate(g, pl, 2, model=MODEL, priority=prio, gather_to=None)
    assert slow.peak_memory.tolist() == [100 + 1 + 2, 100]
    assert slow.makespan == 22.0
    # 1000 bytes/s: p leaves the link at 1.1, before u starts; it was still held when s started
    fast = CostModel(flop_rate=1.0, bandwidth=1000.0, latency=1.0, mem_bandwidth=1.0,
                     task_overhead=0.0)
    r = simulate(g, pl, 2, model=fast, priority=prio, gather_to=None)
    assert r.peak_memory.tolist() == [100 + 1, 100]


def test_outputs_are_gathered():
    g = build([("x", [], 2, 10)])
    pl = np.array([1])
    r = simulate(g, pl, 2, model=MODEL)
    assert r.messages == 1 and r.bytes_moved == 10
    assert r.bytes_sent.tolist() == [0, 10] and r.bytes_received.tolist() == [10, 0]
    assert r.makespan == 2.0 + 1.0 + 1.0
    assert r.peak_memory.tolist() == [10, 10]  # kept on both
    none = simulate(g, pl, 2, model=MODEL, gather_to=None)
    assert none.messages == 0 and none.bytes_moved == 0 and none.makespan == 2.0
    assert none.peak_memory.tolist() == [0, 10]
    assert communication_volume(g, pl) == (10, 1)
    assert communication_volume(g, pl, gather_to=None) == (0, 0)
    assert communication_volume(g, pl, gather_to=1) == (0, 0)


def test_small_outputs_are_shared_and_the_transport_s_own_bytes_counted():
    # x (10 bytes) on worker 1, gathered to 0 (link 2-3, arrives at 4), then shared from 0
    # with workers 1 and 2 (as MPI returns small results on every rank): 4-5, 5-6, +1
    g = build([("x", [], 2, 10)])
    pl = np.array([1])
    r = simulate(g, pl, 3, model=MODEL, share_limit=10)
    assert r.shared_bytes == 20 and r.bytes_moved == 30 and r.messages == 3
    assert r.makespan == 4.0 + 1.0 + 1.0 + 1.0
    assert simulate(g, pl, 3, model=MODEL, share_limit=9).shared_bytes == 0  # too large
    # 5 bytes of the transport's own per message: the link takes (10 + 5) / 10 s
    framed = CostModel(flop_rate=1.0, bandwidth=10.0, latency=1.0, mem_bandwidth=1.0,
                       task_overhead=0.0, message_bytes=5, task_bytes=7, run_bytes=100)
    r = simulate(g, pl, 2, model=framed)
    assert r.makespan == 2.0 + 1.5 + 1.0
    assert r.bytes_moved == 10 and r.wire_bytes == 10 + 5 + 7 + 100
    with pytest.raises(ValueError, match="message_bytes must be a number >= 0"):
        CostModel(message_bytes=-1)


def test_ready_tasks_run_in_priority_order():
    # p1 and p2 are both ready on worker 0; d on worker 1 needs p1
    g = build([("p1", [], 1, 0), ("p2", [], 5, 0), ("d", ["p1"], 10, 0)])
    pl = place(g, {"p1": 0, "p2": 0, "d": 1})
    first = simulate(g, pl, 2, model=MODEL, priority=[0, 1, 2], gather_to=None)
    # p1 0-1, arrives on 1 at 2, d 2-12
    assert first.makespan == 12.0
    second = simulate(g, pl, 2, model=MODEL, priority=[1, 0, 2], gather_to=None)
    # p2 0-5, p1 5-6, arrives on 1 at 7, d 7-17
    assert second.makespan == 17.0


def test_transfers_agree_with_simulate():
    g = build([
        ("a", [], 1, 8), ("b", [], 1, 16), ("c", ["a", "b"], 2, 4), ("d", ["a"], 1, 2),
        ("e", ["c", "d"], 1, 1), ("f", ["b", "d"], 3, 32),
    ])
    pl = place(g, {"a": 0, "b": 1, "c": 2, "d": 1, "e": 0, "f": 2})
    for gather_to in (0, 1, None):
        r = simulate(g, pl, 3, model=MODEL, gather_to=gather_to)
        assert communication_volume(g, pl, gather_to=gather_to) == (r.bytes_moved, r.messages)
        assert r.bytes_sent.sum() == r.bytes_received.sum() == r.bytes_moved
    tasks, dests = transfers(g, pl)
    got = sorted(zip((g.keys[t] for t in tasks.tolist()), dests.tolist(), strict=True))
    # a -> 2 (c) and 1 (d); b -> 2 (c, f); c -> 0 (e); d -> 0 (e), 2 (f); f gathered to 0
    assert got == [("a", 1), ("a", 2), ("b", 2), ("c", 0), ("d", 0), ("d", 2), ("f", 0)]


def test_bad_input_is_rejected():
    g = build([("x", [], 1, 1), ("y", ["x"], 1, 1)])
    with pytest.raises(ValueError, match=r"placement has shape .* graph has 2 tasks"):
        simulate(g, np.array([0]), 2)
    with pytest.raises(ValueError, match=r"worker 2, outside \[0, 2\)"):
        simulate(g, np.array([0, 2]), 2)
    with pytest.raises(ValueError, match="worker -1"):
        simulate(g, np.array([-1, 0]), 2)
    with pytest.raises(ValueError, match="workers must be an integer >= 1"):
        simulate(g, np.array([0, 0]), 0)
    with pytest.raises(ValueError, match="integer worker numbers"):
        simulate(g, np.array([0.5, 0.0]), 2)
    with pytest.raises(ValueError, match="gather_to"):
        simulate(g, np.array([0, 0]), 1, gather_to=3)
    with pytest.raises(ValueError, match="priority has 1 entries"):
        simulate(g, np.array([0, 0]), 1, priority=[0])
    with pytest.raises(ValueError, match="placement has shape"):
        transfers(g, np.array([0, 0, 0]))


def test_empty_graph():
    r = simulate(GraphBuilder().build(), np.zeros(0, dtype=np.int64), 3)
    assert r.makespan == 0.0 and r.messages == 0 and r.peak_memory.tolist() == [0, 0, 0]
    assert "3 workers" in str(r)


def matmul_plan(n, chunks):
    a = tg.random.random((n, n), chunks=chunks, seed=0)
    b = tg.random.random((n, n), chunks=chunks, seed=1)
    return plan_arrays([a @ b])


def test_random_placement_of_a_real_plan():
    a = tg.random.random((64, 64), chunks=16, seed=0)
    plan = plan_arrays([a @ a])
    g = plan.graph
    out = g.indices(plan.outputs)
    model = CostModel()
    seconds = model.task_seconds(g)
    workers = 5
    pl = np.random.default_rng(0).integers(0, workers, len(g))
    r = simulate(g, pl, workers, outputs=out, model=model)
    assert isinstance(r, SimResult)
    assert r.busy.sum() == pytest.approx(seconds.sum())
    assert r.makespan >= r.busy.max()
    assert r.makespan >= seconds.sum() / workers
    assert 0 < r.utilisation <= 1
    assert (r.bytes_moved, r.messages) == communication_volume(g, pl, out)
    assert (r.peak_memory > 0).all()
    text = str(r)
    assert "makespan" in text and "messages" in text and "utilisation" in text

    # on one worker the run order is the priority order, so memory matches sequential_peak
    single = simulate(g, np.zeros(len(g), dtype=np.int64), 1, outputs=out, model=model)
    assert single.bytes_moved == 0
    assert single.makespan == pytest.approx(seconds.sum())
    assert single.peak_memory[0] == sequential_peak(g, out, order(g, out))[0]


def test_many_tasks_are_simulated_quickly():
    plan = matmul_plan(1600, 100)  # 16 x 16 x 16 blocks
    g = plan.graph
    pl = np.arange(len(g)) % 16
    t0 = time.perf_counter()
    r = simulate(g, pl, 16, outputs=g.indices(plan.outputs))
    assert time.perf_counter() - t0 < 5.0
    assert r.messages > 0 and r.makespan > 0


def test_a_cycle_is_reported():
    g = build([("x", ["y"], 1, 1), ("y", ["x"], 1, 1)])
    with pytest.raises(ValueError, match="never became ready"):
        simulate(g, np.array([0, 1]), 2, priority=[0, 1], outputs=[0])


def test_memory_counts_temporaries_as_the_executor_does():
    # y is an elementwise task: one temporary as large as its output while it runs
    b = GraphBuilder()
    b.add("x", noop, cost=1, nbytes=10, kind="load")
    b.add("y", noop, deps=["x"], cost=2, nbytes=20, kind="elementwise")
    b.add("z", noop, deps=["y"], cost=3, nbytes=5, kind="load")
    g = b.build()
    r = simulate(g, np.zeros(3, dtype=np.int64), 1, model=MODEL)
    # x (10), then x, y and its temporary (50); y's temporary goes when y ends
    assert r.peak_memory.tolist() == [50]
    out = np.array([2])
    assert sequential_peak(g, out, order(g, out)) == (50, 50)


def random_graph(n, seed):
    """A reproducible graph of ``n`` tasks with up to three earlier dependencies each, mixed
    flop counts (or none: memory-bound), sizes and kinds, and the generator for what follows."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    for i in range(n):
        k = int(rng.integers(0, min(i, 3) + 1))
        deps = sorted({f"t{int(d)}" for d in rng.integers(0, i, k)}) if i else []
        cost = int(rng.integers(0, 6)) or None
        b.add(f"t{i}", noop, deps=deps, cost=cost, nbytes=int(rng.integers(0, 100)),
              kind="test-temp" if rng.random() < 0.3 else "test-op")
    return b.build(), rng


# (tasks, seed, workers, gather_to, outputs, model) -> (makespan, bytes moved, messages, bytes
# sent, bytes received, peak memory, busy), recorded from the simulator as first written
RECORDED = [
    ((40, 1, 4, 0, None,
      CostModel(flop_rate=1.0, bandwidth=10.0, latency=1.0, mem_bandwidth=50.0,
                task_overhead=0.0)),
     (111.68000000000002, 2354, 41, [94, 553, 853, 854], [1157, 387, 405, 405],
      [1054, 500, 767, 890], [20.04, 19.56, 36.2, 33.12])),
    ((60, 2, 3, None, None,
      CostModel(flop_rate=2.0, bandwidth=7.0, latency=0.5, mem_bandwidth=30.0,
                task_overhead=0.25)),
     (152.71666666666667, 2072, 48, [695, 646, 731], [721, 797, 554], [668, 684, 604],
      [44.28333333333333, 39.300000000000004, 52.74999999999999])),
    ((80, 3, 6, 2, None, CostModel()),
     (0.00041056459999999997, 5397, 108, [785, 1329, 570, 910, 650, 1153],
      [775, 567, 2187, 940, 436, 492], [704, 546, 1883, 610, 568, 678],
      [0.00014000086000000002, 0.0001300323, 0.00012002468000000002, 0.00016002168000000004,
       0.00011003320000000001, 0.00014003286])),
    # no latency: blocks arrive the instant they leave the link
    ((50, 4, 5, 1, [10, 20, 30, 49],
      CostModel(flop_rate=1.0, bandwidth=20.0, latency=0.0, mem_bandwidth=10.0,
                task_overhead=0.0)),
     (113.64999999999999, 2513, 47, [324, 283, 400, 1081, 425], [655, 681, 414, 267, 496],
      [709, 403, 451, 436, 467], [52.6, 55.0, 38.0, 34.8, 24.0])),
]


@pytest.mark.parametrize(("case", "expected"), RECORDED)
def test_recorded_runs_give_the_same_numbers(case, expected):
    n, seed, workers, gather_to, outputs, model = case
    g, rng = random_graph(n, seed)
    pl = rng.integers(0, workers, n)
    prio = rng.permutation(n)
    r = simulate(g, pl, workers, priority=prio, model=model, gather_to=gather_to,
                 outputs=outputs)
    makespan, moved, messages, sent, received, peak, busy = expected
    assert r.makespan == makespan
    assert (r.bytes_moved, r.messages) == (moved, messages)
    assert r.bytes_sent.tolist() == sent and r.bytes_received.tolist() == received
    assert r.peak_memory.tolist() == peak
    assert r.busy.tolist() == busy
