"""The executor core: its start state, transitions, errors, retries, cancellation, events."""

import sys
import threading
import time
import traceback
from operator import add

import numpy as np
import pytest

import tilegraph
from tilegraph.graph import GraphBuilder, from_dask
from tilegraph.plan import order
from tilegraph.runtime import SchedulerStalled
from tilegraph.runtime.backends import SyncBackend, make_backend
from tilegraph.runtime.core import Execution
from tilegraph.runtime.events import Release, RunEnd, RunStart, TaskEnd, TaskFailed, TaskStart
from tilegraph.util import cores


def inc(x):
    return x + 1


def execution_of(dsk, outputs):
    g = from_dask(dsk).cull(outputs)
    out = g.indices(outputs)
    return Execution(g, out, order(g, out))


def run_on(backend, ex):
    """Drive ``ex`` on ``backend`` as the pipeline does: the run of its partition."""
    backend.run(backend.partition(ex.graph, ex.outputs, np.asarray(ex.priority)), ex)


def test_start_state_literally():
    dsk = {"a": 1, "b": (inc, "a"), "c": (inc, "a"), "d": (add, "b", "c"), "e": (inc, "d")}
    ex = execution_of(dsk, ["e", "b"])
    assert ex.snapshot() == {
        "state": {"a": "done", "b": "ready", "c": "ready", "d": "waiting", "e": "waiting"},
        "waiting": {"a": 0, "b": 0, "c": 0, "d": 2, "e": 1},
        "refs": {"a": 2, "b": 2, "c": 1, "d": 1, "e": 1},
        "results": {"a": 1},
        "ready": ["b", "c"],
        "nrunning": 0,
        "ndone": 1,
        "finished": False,
        "error": None,
        "sizes": {"a": sys.getsizeof(1)},
        "live": sys.getsizeof(1),
        "reserved": 0,
        "disk": [],
        "running": [],
    }


def test_end_state_keeps_only_outputs():
    dsk = {"a": 1, "b": (inc, "a"), "c": (inc, "a"), "d": (add, "b", "c"), "e": (inc, "d")}
    ex = execution_of(dsk, ["e", "b"])
    run_on(SyncBackend(), ex)
    snap = ex.snapshot()
    assert snap["results"] == {"b": 2, "e": 5}
    assert snap["state"] == {"a": "released", "b": "done", "c": "released",
                             "d": "released", "e": "done"}
    assert snap["refs"] == {"a": 0, "b": 1, "c": 0, "d": 0, "e": 1}
    assert snap["finished"] and snap["ndone"] == 5 and ex.status == "done"


def test_depth_first_execution_order():
    # two independent subtrees: the first output's subtree finishes before the second starts
    dsk = {}
    for t in "pq":
        for i in range(3):
            dsk[(t, i)] = (inc, i)
        dsk[t] = (sum, [(t, i) for i in range(3)])
    seen = []
    tilegraph.get(dsk, ["p", "q"], backend="sync",
                  callbacks=[lambda e: isinstance(e, TaskStart) and seen.append(e.key)])
    assert seen == [("p", 0), ("p", 1), ("p", 2), "p", ("q", 0), ("q", 1), ("q", 2), "q"]


def test_release_of_intermediates_through_events(backend_options):
    n = 6
    dsk = {("x", i): (np.full, 1000, float(i)) for i in range(n)}
    dsk.update({("y", i): (np.multiply, ("x", i), 2.0) for i in range(n)})
    dsk["total"] = (sum, [(np.sum, ("y", i)) for i in range(n)])
    events = []
    result = tilegraph.get(dsk, "total", callbacks=[events.append], **backend_options)
    assert result == 2 * 1000 * sum(range(n))
    released = {e.key: e.nbytes for e in events if isinstance(e, Release)}
    intermediates = {k for k in dsk if k != "total"}
    assert set(released) == intermediates
    assert all(nb == 8000 for nb in released.values())
    # each block is released after its last consumer ended, and nothing else is released
    end_pos = {e.key: p for p, e in enumerate(events) if isinstance(e, TaskEnd)}
    rel_pos = {e.key: p for p, e in enumerate(events) if isinstance(e, Release)}
    for i in range(n):
        assert end_pos[("y", i)] < rel_pos[("x", i)]
        assert end_pos["total"] < rel_pos[("y", i)]
    assert isinstance(events[0], RunStart) and events[0].ntasks == 2 * n + 1
    assert isinstance(events[-1], RunEnd) and events[-1].status == "done"
    workers = {e.worker for e in events if isinstance(e, TaskStart)}
    assert workers <= set(range(backend_options["workers"] or 1))


def test_live_blocks_of_a_chain_stay_constant(backend_options):
    # a long chain of large intermediates: at most two are alive at any time
    n = 40
    dsk = {("c", 0): (np.zeros, 10_000)}
    dsk.update({("c", i): (np.add, ("c", i - 1), 1.0) for i in range(1, n)})
    live = {"now": 0, "peak": 0}

    def track(e):
        if isinstance(e, TaskEnd):
            live["now"] += 1
            live["peak"] = max(live["peak"], live["now"])
        elif isinstance(e, Release):
            live["now"] -= 1

    out = tilegraph.get(dsk, ("c", n - 1), callbacks=[track], **backend_options)
    assert out[0] == n - 1
    assert live["peak"] == 2 and live["now"] == 1


def boom(x):
    raise ValueError(f"bad value {x}")


def test_failing_task_raises_original_error_with_key_and_op(backend_options):
    ran = []
    dsk = {"a": 1, "b": (boom, "a"), "c": (inc, "b"),
           "late": (lambda: ran.append(1)), "z": (add, "c", "late")}
    with pytest.raises(ValueError, match="bad value 1") as info:
        tilegraph.get(dsk, "z", **backend_options)
    exc = info.value
    assert any("task 'b' (op boom) failed" in note for note in exc.__notes__)
    frames = [f.name for f in traceback.extract_tb(exc.__traceback__)]
    assert "boom" in frames  # the original traceback is kept
    assert not ran  # what comes after the failure in priority order was cancelled


def test_failure_cancels_the_rest(backend_options):
    started = []
    dsk = {("t", i): (lambda i=i: started.append(i) or i) for i in range(50)}
    dsk[("t", 0)] = (boom, 0)
    dsk["all"] = (sum, [("t", i) for i in range(50)])
    with pytest.raises(ValueError):
        tilegraph.get(dsk, "all", **backend_options)
    # ("t", 0) runs first in priority order; at most the tasks already running finish
    assert len(started) <= (backend_options["workers"] or 1)


def test_failure_in_an_unrelated_branch_frees_everything():
    dsk = {"big": (np.ones, 10_000), "f": (boom, 1), "z": (add, "big", "f")}
    g = from_dask(dsk)
    out = g.indices(["z"])
    ex = Execution(g, out, order(g, out))
    run_on(SyncBackend(), ex)
    assert isinstance(ex.error, ValueError)
    snap = ex.snapshot()
    assert snap["results"] == {}
    assert snap["state"] == {"big": "done", "f": "failed", "z": "cancelled"}
    assert ex.status == "failed"


class Flaky:
    def __init__(self, failures):
        self.failures = failures
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError(f"transient failure {self.calls}")
        return x * 10


def test_retries(backend_options):
    f = Flaky(2)
    events = []
    assert tilegraph.get({"a": 1, "b": (f, "a")}, "b", retries=2, callbacks=[events.append],
                         **backend_options) == 10
    failed = [e for e in events if isinstance(e, TaskFailed)]
    assert [e.retry for e in failed] == [True, True]
    f = Flaky(2)
    with pytest.raises(OSError, match="transient failure 2"):
        tilegraph.get({"a": 1, "b": (f, "a")}, "b", retries=1, **backend_options)
    assert f.calls == 2


def test_per_task_retries_from_metadata():
    f = Flaky(3)
    b = GraphBuilder()
    b.add_data("a", 1)
    b.add("b", f, deps=["a"], retries=3)
    assert tilegraph.run(b.build(), ["b"], backend="sync") == [10]


class FailsOnce:
    """A block function whose ``n``-th call raises a transient ConnectionError."""

    def __init__(self, n):
        self.n = n
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, block):
        with self.lock:
            self.calls += 1
            fail = self.calls == self.n
        if fail:
            raise ConnectionError("transient failure")
        return block * 2.0


def _operands():
    rng = np.random.default_rng(1)
    a, b = rng.random((40, 40)), rng.random((40, 40))
    # computed operands: the product accumulates in place, one gemm per inner block
    x = tilegraph.from_numpy(a, chunks=10) + 0.0
    y = tilegraph.from_numpy(b, chunks=10) * 1.0
    return a, b, x, y


@pytest.mark.parametrize("n", [1, 7, 16])
def test_retry_after_an_in_place_accumulation_gives_numpys_result(backend_options, n):
    # the failing function is fused into the task that ends the accumulation of a @ b;
    # its retry must start again from the partial sum the first attempt saw
    a, b, x, y = _operands()
    f = FailsOnce(n)
    got = (x @ y).map_blocks(f, dtype=float).compute(retries=1, **backend_options)
    assert f.calls == 17
    np.testing.assert_allclose(got, (a @ b) * 2.0, rtol=1e-12)


def test_retry_after_an_in_place_accumulation_writes_the_right_file(tmp_path):
    a, b, x, y = _operands()
    path = tmp_path / "out.npy"
    (x @ y).map_blocks(FailsOnce(5), dtype=float).to_npy(path, retries=1, workers=2)
    np.testing.assert_allclose(np.load(path), (a @ b) * 2.0, rtol=1e-12)


def test_only_runs_with_retries_copy_the_inputs_written_in_place():
    _, _, x, y = _operands()
    from tilegraph.array.lowering import plan_arrays

    plan = plan_arrays([(x @ y).map_blocks(np.negative)]).plan
    kinds = plan.graph.meta["kind"]
    guarded = {kinds[i] for i in range(len(plan.graph)) if plan.graph.overwritten(i)}
    assert guarded == {"accumulate", "store"}  # the accumulation, alone or fused into a store
    no_retries = Execution(plan.graph, plan.outputs, plan.priority)
    assert no_retries.guard == {}
    with_retries = Execution(plan.graph, plan.outputs, plan.priority, retries=1)
    assert with_retries.guard and all(v == (0,) for v in with_retries.guard.values())


def test_retried_cholesky_update_gives_numpys_result():
    # a tile update that failed after writing over its tile in place is retried on the tile
    # as it was
    import dataclasses

    from tilegraph.lambdapack import library

    rng = np.random.default_rng(2)
    c = rng.random((32, 32))
    spd = c @ c.T + 32 * np.eye(32)
    table = library.cholesky.program.kernels
    kernel = table["syrk_update"]
    fired = []

    def herk_then_fail(c, a, copy=True):
        out = kernel.func(c, a, copy=copy)
        if not copy and not fired:
            fired.append(1)
            raise ConnectionError("lost after the update")
        return out

    table["syrk_update"] = dataclasses.replace(kernel, func=herk_then_fail)
    try:
        got = tilegraph.linalg.cholesky(tilegraph.from_numpy(spd, chunks=8) + 0.0).compute(
            retries=1, workers=2)
    finally:
        table["syrk_update"] = kernel
    assert fired
    np.testing.assert_allclose(got, np.linalg.cholesky(spd), rtol=1e-10)


def test_keyboard_interrupt_is_not_retried_and_cancels(backend_options):
    ran = []

    def interrupt():
        raise KeyboardInterrupt

    dsk = {"a": (interrupt,), "b": (lambda: ran.append(1),), "z": (add, "a", "b")}
    with pytest.raises(KeyboardInterrupt):
        tilegraph.get(dsk, "z", retries=5, **backend_options)
    assert not ran


_CTRL_C = """
import os, signal, threading, time
import tilegraph

started = []
release = threading.Event()

def first():
    started.append("first")
    # the task goes on for 0.2 s after Ctrl-C (timed from here: the first run of a fresh
    # process spends longer than that importing and planning)
    threading.Timer(0.2, release.set).start()
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: KeyboardInterrupt in the main thread
    release.wait(5)
    return 1

def later(x):
    started.append("later")
    return x

dsk = {"a": (first,), **{("b", i): (later, "a") for i in range(20)}}
dsk["z"] = (sum, [("b", i) for i in range(20)])
t0 = time.perf_counter()
try:
    tilegraph.get(dsk, "z", backend="threads", workers=2)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted", round(time.perf_counter() - t0, 2), started)
"""


def test_ctrl_c_in_the_waiting_caller_cancels_promptly():
    """Ctrl-C in a process whose main thread waits for a run: KeyboardInterrupt there at
    once, and no task started after it (a process of its own: the signal is the
    process's)."""
    import ast
    import subprocess

    out = subprocess.run([sys.executable, "-c", _CTRL_C], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    word, elapsed, started = out.stdout.strip().split(" ", 2)
    assert word == "interrupted"
    assert float(elapsed) < 4
    assert ast.literal_eval(started) == ["first"]


def test_threads_run_tasks_concurrently():
    barrier = threading.Barrier(2, timeout=10)

    def meet(i):
        barrier.wait()  # returns only when both tasks are running at once
        return i

    dsk = {"a": (meet, 1), "b": (meet, 2), "z": (add, "a", "b")}
    assert tilegraph.get(dsk, "z", backend="threads", workers=2) == 3


def test_results_are_passed_by_reference():
    box = np.zeros(3)
    dsk = {"a": (lambda: box,), "same": (lambda x: x is box, "a")}
    assert tilegraph.get(dsk, "same", backend="threads", workers=2) is True


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_blas_threads_times_workers_fit_the_cores(workers):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # make sure BLAS is loaded
    before = blas_threads()
    seen = tilegraph.get({"t": (blas_threads,)}, "t", backend="threads", workers=workers)
    assert seen == {max(1, cores() // workers)}
    assert blas_threads() == before  # restored after the run


@pytest.mark.skipif(cores() < 2, reason="needs two cores")
def test_a_blas_task_running_alone_gets_the_idle_cores():
    """A kernel that releases the GIL, with no other task running or ready, runs with every
    core's BLAS threads; two such kernels side by side keep one each; the limits come back
    after the run."""
    from threadpoolctl import threadpool_info

    def blas_threads(*_):
        return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")

    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # make sure BLAS is loaded
    before = blas_threads()
    b = GraphBuilder()
    b.add("alone", blas_threads, kind="svd")
    b.add("opaque", blas_threads, deps=["alone"])  # no kind: keeps the run's limit
    assert tilegraph.pipeline.run(b.build(), ["alone", "opaque"], workers=2) == [cores(), 1]
    barrier = threading.Barrier(2, timeout=10)

    def side_by_side():
        barrier.wait()  # both run at once
        return blas_threads()

    b = GraphBuilder()
    b.add("p", side_by_side, kind="svd")
    b.add("q", side_by_side, kind="svd")
    assert tilegraph.pipeline.run(b.build(), ["p", "q"], workers=2) == [1, 1]
    assert blas_threads() == before


def test_stall_is_reported_not_hung():
    b = GraphBuilder()
    b.add("x", inc, deps=["y"])
    b.add("y", inc, deps=["x"])
    g = b.build()
    ex = Execution(g, [0], np.array([0, 1]))  # priorities forced: skips cycle detection
    run_on(make_backend("threads", 2), ex)
    assert isinstance(ex.error, SchedulerStalled)
    run_on(SyncBackend(), ex2 := Execution(g, [0], np.array([0, 1])))
    assert isinstance(ex2.error, SchedulerStalled)


def test_empty_and_data_only_runs(backend_options):
    assert tilegraph.get({"a": 1}, "a", **backend_options) == 1
    assert tilegraph.get({"a": 1, "b": [1, 2]}, ["a", "b"], **backend_options) == (1, [1, 2])
    assert tilegraph.run(GraphBuilder().build(), [], **backend_options) == []


def test_subscribe_globally():
    got = []
    with tilegraph.subscribe(got.append):
        tilegraph.get({"a": (inc, 1)}, "a")
    tilegraph.get({"a": (inc, 1)}, "a")
    assert [type(e).__name__ for e in got] == ["RunStart", "TaskStart", "TaskEnd", "RunEnd"]
    with pytest.raises(TypeError, match="must be callable"), tilegraph.subscribe(3):
        pass


def test_idle_worker_helps_when_a_task_is_stuck_among_tiny_ones():
    # After many tiny tasks the workers run one at a time; a task that blocks for long must
    # still let the other worker run what is ready (here: the task that unblocks it).
    gate = threading.Event()
    dsk = {("t", 0): 0}
    dsk.update({("t", i): (inc, ("t", i - 1)) for i in range(1, 300)})
    dsk["wait"] = (lambda _: gate.wait(10), ("t", 299))
    dsk["open"] = (lambda _: gate.set() or True, ("t", 299))
    t0 = time.perf_counter()
    assert tilegraph.get(dsk, ["wait", "open"], backend="threads", workers=2) == (True, True)
    assert time.perf_counter() - t0 < 5


def test_tiny_tasks_run_on_one_worker_big_ones_on_all():
    from collections import Counter

    per_worker = Counter()
    count = lambda e: isinstance(e, TaskStart) and per_worker.update([e.worker])
    dsk = {("t", i): (inc, i) for i in range(3000)}
    dsk["all"] = (sum, [("t", i) for i in range(3000)])
    tilegraph.get(dsk, "all", backend="threads", workers=2, callbacks=[count])
    assert per_worker.most_common(1)[0][1] >= 2900  # tiny: (nearly) all on one worker
    barrier = threading.Barrier(4, timeout=10)
    dsk = {("b", i): (lambda i: barrier.wait() or i, i) for i in range(4)}
    dsk["all"] = (sum, [("b", i) for i in range(4)])
    assert tilegraph.get(dsk, "all", backend="threads", workers=4) == 6


def test_a_tiny_task_runs_beside_a_long_gil_free_one(monkeypatch):
    # a product (its kernel releases the GIL) is running; the next ready task is tiny. The
    # idle worker takes it at once rather than waiting for the product to look stuck: the
    # two threads do not hand the GIL back and forth (a sliced difference of random blocks
    # spent a quarter of its run with one thread asleep beside the other's draws).
    from tilegraph.runtime import tiny

    monkeypatch.setattr(tiny, "STUCK_TIME", 60.0)
    started, gate = threading.Event(), threading.Event()

    def product(_):
        started.set()
        return gate.wait(10)

    builder = GraphBuilder()
    builder.add_data("x", 1, kind="load", nbytes=8)
    builder.add("p", product, deps=["x"], kind="product", cost=1e9, nbytes=8)
    builder.add("pre", lambda _: started.wait(10), deps=["x"], kind="elementwise", nbytes=8)
    builder.add("open", lambda _: gate.set() or True, deps=["pre"], kind="elementwise",
                nbytes=8)
    t0 = time.perf_counter()
    assert tilegraph.run(builder.build(), ["p", "open"], workers=2) == [True, True]
    assert time.perf_counter() - t0 < 8


def test_external_tasks_wait_for_delivery_and_exports_are_handed_over():
    # "r" is made elsewhere (another rank); "b" is also needed elsewhere
    g = from_dask({"r": (inc, 0), "a": (inc, 1), "b": (add, "a", "r"), "c": (inc, "b")})
    ext = g.indices(["r"]).tolist()
    out = g.indices(["c"])
    exported = []
    ex = Execution(g.subgraph(np.arange(len(g)), detach=np.isin(np.arange(len(g)), ext)),
                   out, order(g, out), external=ext, exported=g.indices(["b"]).tolist(),
                   on_export=lambda i, v: exported.append((g.keys[i], v)))
    assert ex.snapshot()["state"]["r"] == "waiting"
    assert ex.awaiting == 1
    worker = threading.Thread(target=ex.worker_loop, args=(0,))
    worker.start()
    time.sleep(0.05)  # "a" runs; "b" waits for "r": no stall is reported meanwhile
    assert ex.snapshot()["state"]["b"] == "waiting" and not ex.finished
    ex.deliver(ext[0], 41)
    worker.join(5)
    assert ex.error is None and ex.output_values() == [44]
    assert exported == [("b", 43)]
    ex.deliver(ext[0], 0)  # a second delivery is ignored
    assert ex.output_values() == [44]


def test_tiny_task_policy_lets_blas_tasks_run_on_both_threads():
    # short BLAS products (tens of microseconds each): a moving average of task times would
    # keep the second thread asleep; their kind releases the GIL, so both threads take them
    from operator import matmul

    from tilegraph.graph import GraphBuilder

    rng = np.random.default_rng(0)
    blocks = [rng.random((96, 96)) for _ in range(8)]
    builder = GraphBuilder()
    for j, b in enumerate(blocks):
        builder.add_data(("b", j), b, kind="load", nbytes=b.nbytes)
    keys = []
    for i in range(400):
        key = ("p", i)
        builder.add(key, matmul, deps=[("b", i % 8), ("b", (i + 1) % 8)], kind="product",
                    cost=2 * 96**3, nbytes=96 * 96 * 8)
        keys.append(key)
    graph = builder.build()
    workers = []
    values = tilegraph.run(graph, keys, workers=2,
                    callbacks=[lambda e: workers.append(e.worker)
                               if type(e).__name__ == "TaskStart" else None])
    assert np.allclose(values[5], blocks[5] @ blocks[6])
    counts = np.bincount(workers, minlength=2)
    assert counts.sum() == 400
    assert counts.min() >= 40, counts  # both threads took a share (old rule: none)


def test_overlapping_blas_limits_in_two_threads_restore_the_original_limits():
    # compute A limits BLAS, compute B limits it too, A ends first, then B: BLAS must be
    # back where it was, not left at B's saved "original" of 1 thread for the process
    from threadpoolctl import threadpool_info, threadpool_limits

    from tilegraph.runtime.blas import blas_threads

    def now():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # make sure BLAS is loaded
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    inside_b = []

    def run_a():
        with blas_threads(1):
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def run_b():
        a_in.wait(5)
        with blas_threads(1):
            b_in.set()
            a_out.wait(5)
            inside_b.append(now())

    with threadpool_limits(limits=2, user_api="blas"):
        assert now() == {2}
        threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert inside_b == [{1}]  # B's limit still holds after A left
        assert now() == {2}


def test_overlapping_computes_in_threads_leave_blas_as_it_was():
    from threadpoolctl import threadpool_info

    def now():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    np.dot(np.ones((2, 2)), np.ones((2, 2)))
    before = now()
    barrier = threading.Barrier(3)

    def meet(x):
        barrier.wait(10)  # both computes are inside their runs at once
        return x

    results = []

    def compute(k):
        results.append(tilegraph.get({"a": k, "b": (meet, "a")}, "b", workers=2))

    threads = [threading.Thread(target=compute, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    barrier.wait(10)
    for t in threads:
        t.join(10)
    assert sorted(results) == [0, 1]
    assert now() == before


# -- serial failure: graphs whose tasks are a program's steps, with side effects -------------


def _serial_graph(log, fail_at, sleeps=None):
    """Six steps in program order: 0 -> {1, 2}; 3 independent; 4 after 1; 5 after 3.
    Step ``i`` in ``fail_at`` raises; every step that runs appends ``i`` to ``log``."""
    sleeps = sleeps or {}

    def step(i):
        def run(*_):
            time.sleep(sleeps.get(i, 0))
            log.append(i)
            if i in fail_at:
                raise ValueError(f"step {i} failed")
            return i
        return run

    deps = {0: [], 1: [0], 2: [0], 3: [], 4: [1], 5: [3]}
    b = GraphBuilder()
    for i in range(6):
        b.add(("s", i), step(i), deps=[("s", d) for d in deps[i]], serial=i, priority=i)
    return b.build()


@pytest.mark.parametrize("backend", ["sync", "threads"])
def test_serial_failure_finishes_the_steps_before_and_starts_none_after(backend):
    log: list[int] = []
    # 3 (no dependencies) fails while 0 runs; 1 and 2 wait for 0 but come before 3
    g = _serial_graph(log, fail_at={3}, sleeps={2: 0.2})
    with pytest.raises(ValueError, match="step 3 failed") as info:
        tilegraph.pipeline.run(g, g.keys, backend=backend, workers=2, fuse=False)
    # every step before 3 ran, even the slow 2 that was still running when 3 failed
    assert sorted(x for x in log if x < 3) == [0, 1, 2]
    assert 5 not in log   # 5 depends on the failed step; 4 may have started before it
    assert "('s', 3)" in "".join(info.value.__notes__)


def test_serial_failure_reports_the_earliest_step_in_program_order():
    log: list[int] = []
    # 3 fails first (1 is slow); then 1 fails: the run ends with 1's error, as serially
    g = _serial_graph(log, fail_at={1, 3}, sleeps={1: 0.3})
    with pytest.raises(ValueError, match="step 1 failed"):
        tilegraph.pipeline.run(g, g.keys, backend="threads", workers=2, fuse=False)
    assert 4 not in log and 5 not in log


def test_serial_failure_events_and_no_stall():
    log: list[int] = []
    events = []
    g = _serial_graph(log, fail_at={0})
    with pytest.raises(ValueError, match="step 0 failed"):
        tilegraph.pipeline.run(g, g.keys, backend="threads", workers=2, fuse=False,
                               callbacks=[events.append])
    ends = [e for e in events if isinstance(e, RunEnd)]
    assert [e.status for e in ends] == ["failed"]
    started = {e.key for e in events if isinstance(e, TaskStart)}
    assert ("s", 1) not in started and ("s", 2) not in started


def test_a_serial_column_out_of_dependency_order_is_refused():
    b = GraphBuilder()
    b.add("a", inc, args=(1,), serial=1)
    b.add("b", inc, deps=["a"], serial=0)
    g = b.build()
    with pytest.raises(ValueError, match=r"puts task 'b' \(position 0\) before its dependency "
                                         r"'a' \(position 1\)"):
        tilegraph.pipeline.run(g, ["b"], fuse=False)
    b = GraphBuilder()
    b.add("a", inc, args=(1,), serial="first")
    with pytest.raises(ValueError, match="int position for every task, got 'first'"):
        tilegraph.pipeline.run(b.build(), ["a"], fuse=False)


def test_a_backend_object_is_accepted_and_a_wrong_object_refused():
    g = from_dask({"a": 1, "b": (inc, "a")})
    backend = SyncBackend()
    assert tilegraph.pipeline.run(g, ["b"], backend=backend) == [2]
    assert tilegraph.pipeline.last_run().backend == "sync"
    with pytest.raises(ValueError, match="unknown backend <object"):
        tilegraph.pipeline.run(g, ["b"], backend=object())
    assert make_backend(backend) is backend


def test_an_idle_worker_thread_keeps_nothing_of_a_failed_run():
    """The pool's threads hold nothing of the run they served once it is over: a failed
    run's results (here the input of the task that failed, kept by its error's traceback)
    go as soon as the error does."""
    import gc
    import weakref

    from tilegraph.graph import Dep

    class Payload:
        pass

    refs = []

    def make():
        obj = Payload()
        refs.append(weakref.ref(obj))
        return obj

    def fail(obj):
        raise RuntimeError("fails on purpose")

    b = GraphBuilder()
    b.add("a", make)
    b.add("b", fail, deps=["a"], args=(Dep(0),))
    with pytest.raises(RuntimeError, match="fails on purpose"):
        tilegraph.pipeline.run(b.build(), ["b"], backend="threads", workers=2, fuse=False)
    gc.collect()
    assert refs and refs[0]() is None
