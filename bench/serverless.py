"""The serverless engine: overhead against the threads backend, fault recovery, and what a
task costs the Redis server and the object store.

    python bench/serverless.py                 # all parts, n = 8000, blocks of 1000
    python bench/serverless.py --n 4000        # smaller
    python bench/serverless.py --part overhead|faults|slowed|scaling|queue|protocol

overhead: Cholesky (tg.linalg.cholesky, and the LambdaPACK program run unexpanded with
  run_program) and a blocked matmul on 2 workers against the threads backend with 2
  threads, same process run; the ratio is threads time / serverless time (goal >= 0.8).
  Round trips to the Redis server and the commands it runs per task are counted in a
  separate untimed run under MONITOR; object-store bytes written per task from the events.
faults: Cholesky with 5 workers; 4 of them SIGKILLed a third of the way through; then one
  worker SIGSTOPped (a straggler) until its lease expires. Completion time against an
  undisturbed run, the timeline of workers alive and tasks per second.
slowed: 60 tasks of 0.2 s of CPU each on 5 workers; one worker slowed 10x (stopped 90% of
  every 0.1 s: alive, renewing its leases) from the start; completion time against the
  undisturbed run, with backup copies of stragglers (straggler_factor=3) and without
  (straggler_factor=0). Goal: within 1.3x the undisturbed time with backups.
scaling: Cholesky (n = 4000, blocks of 500) on a pool of 1 to 4 workers, for the scaling
  factors 0.25, 0.5, 1, 2 (numpywren's Figure 10c: completion time and core-seconds, the
  workers' time in tasks), and for pipeline widths 1, 2, 3 at the default factor.
queue: no-op tasks (2000 independent) at 1, 2, 4, 8 workers: tasks per second a single
  Valkey sustains with this protocol (each task: take + complete + its object).
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import numpy as np

import tilegraph as tg
from tilegraph.lambdapack import library
from tilegraph.runtime.events import LeaseExpired, TaskEnd
from tilegraph.serverless import Pool, run_program


def spd(n: int) -> np.ndarray:
    a = np.random.default_rng(0).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def wait_workers(pool: Pool, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(pool.workers()) < n and time.monotonic() < deadline:
        time.sleep(0.05)


def commands(pool: Pool) -> int:
    """Commands the server ran (the commands inside Lua transitions count one each)."""
    stats = pool.r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if not k.endswith(("info", "ping")))


def scripts(pool: Pool) -> int:
    """Lua transitions run (one round trip each)."""
    stats = pool.r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.endswith(("evalsha", "eval")))


def traffic(pool: Pool, fn) -> tuple[int, int]:
    """Run ``fn`` once under MONITOR (slower: not timed): ``(round trips, server commands)``,
    every client's (workers, driver, provisioner). A round trip is a command a client sends
    (a MULTI ... EXEC block counts once; a pipeline without a transaction counts each of its
    commands, so this is an upper bound; the clients of the embedded server's Unix socket
    share one address, so a MULTI of one and the commands of another at the same time
    count as one); server commands also count those a Lua transition runs. Blocking
    waits, heartbeats and idle polls are included."""
    import threading

    from tilegraph.runtime.serverless.state import connect

    counts = {"trips": 0, "commands": 0}
    in_multi: set[str] = set()
    started = threading.Event()

    def listen(mon) -> None:
        started.set()
        for c in mon.listen():
            if c["command"] == "ECHO tg-bench-end":
                return
            if c["command"].startswith(("INFO", "MONITOR")):
                continue
            counts["commands"] += 1
            if c["client_type"] == "lua":
                continue
            port = c["client_port"]
            word = c["command"].split(" ", 1)[0].upper()
            if word == "MULTI":
                in_multi.add(port)
            elif word == "EXEC":
                in_multi.discard(port)
                counts["trips"] += 1
            elif port not in in_multi:
                counts["trips"] += 1

    r = connect(pool.redis_url, pool.credentials)
    with r.monitor() as mon:
        th = threading.Thread(target=listen, args=(mon,), daemon=True)
        th.start()
        started.wait()
        time.sleep(0.1)
        try:
            fn()
        finally:
            r2 = connect(pool.redis_url, pool.credentials)
            r2.echo("tg-bench-end")
            th.join(60)
    return counts["trips"], counts["commands"]


def timed(fn, repeat: int = 2) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def overhead(n: int, b: int) -> None:
    a = spd(n)
    x = tg.from_numpy(a, chunks=b)
    y = tg.from_numpy(np.random.default_rng(1).random((n, n)), chunks=b)
    nb = -(-n // b)
    print(f"== overhead: n = {n}, blocks of {b}, 2 workers vs 2 threads")
    with Pool(workers=2) as pool:
        wait_workers(pool, 2)
        (x[:b, :b] + 1).compute(backend="serverless", pool=pool)  # warm the workers
        rows = []
        for name, fn_threads, fn_sl in [
            ("cholesky (Array)",
             lambda: tg.linalg.cholesky(x).compute(workers=2, progress=False),
             lambda: tg.linalg.cholesky(x).compute(backend="serverless", pool=pool,
                                                   progress=False)),
            ("matmul (Array)",
             lambda: (x @ y).compute(workers=2, progress=False),
             lambda: (x @ y).compute(backend="serverless", pool=pool, progress=False)),
        ]:
            t_threads = timed(fn_threads)
            events: list = []
            t0 = time.perf_counter()
            with tg.subscribe(events.append):
                fn_sl()
            first = time.perf_counter() - t0
            t_sl = min(first, timed(fn_sl, 1))
            ntasks = sum(1 for e in events if isinstance(e, TaskEnd) and e.kind == "pool")
            written = sum(e.nbytes for e in events if isinstance(e, TaskEnd)
                          and e.kind == "pool")
            trips, ncmd = traffic(pool, fn_sl)
            rows.append((name, t_threads, t_sl, ntasks, trips, ncmd, written))

        dag = library.cholesky.bind(N=nb)
        edges = [min(i * b, n) for i in range(nb + 1)]

        def tile(t):
            return a[edges[t[1]]:edges[t[1] + 1], edges[t[2]]:edges[t[2] + 1]]

        outs = [("L", (i, j)) for i in range(nb) for j in range(i + 1)]

        def lp():
            run_program(dag, {"S": tile}, outs, pool=pool)

        t_lp = timed(lp, 2)
        trips, ncmd = traffic(pool, lp)
        t_threads = rows[0][1]
        rows.append(("cholesky (LambdaPACK, unexpanded)", t_threads, t_lp, dag.count(), trips,
                     ncmd, dag.count() * b * b * 8))
    print(f"{'computation':36s} {'threads s':>9s} {'serverless s':>12s} {'ratio':>6s} "
          f"{'tasks':>6s} {'trips/task':>10s} {'commands/task':>13s} {'store MB/task':>13s}")
    for name, tt, ts, nt, trips, nc, wb in rows:
        print(f"{name:36s} {tt:9.2f} {ts:12.2f} {tt / ts:6.2f} {nt:6d} "
              f"{trips / max(nt, 1):10.2f} {nc / max(nt, 1):13.1f} {wb / max(nt, 1) / 1e6:13.1f}")
    print("ratio = threads time / serverless time (goal >= 0.8); trips/task: round trips to "
          "the server of every client (workers, driver, provisioner), commands/task: the "
          "commands the server ran, those inside Lua transitions included (both from a "
          "separate run under MONITOR, with heartbeats, blocking waits and idle polls); "
          "store MB/task counts what a task writes; it also reads the inputs it does not "
          "hold in memory.")


def faults(n: int, b: int) -> None:
    a = spd(n)
    x = tg.from_numpy(a, chunks=b)
    want = np.linalg.cholesky(a)
    print(f"== faults: Cholesky n = {n}, blocks of {b}, 5 workers, lease 2 s")
    with Pool(workers=5, lease=2.0) as pool:
        wait_workers(pool, 5)
        (x[:b, :b] + 1).compute(backend="serverless", pool=pool)
        t = time.perf_counter()
        got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool, progress=False)
        base = time.perf_counter() - t
        assert np.allclose(got, want)
        ntasks = library.cholesky.bind(N=-(-n // b)).count()
        done = [0]
        killed: list[int] = []
        events: list = []

        def kill_a_third(e):
            if isinstance(e, TaskEnd) and e.kind == "pool":
                done[0] += 1
                if done[0] >= ntasks // 3 and not killed:
                    for proc in list(pool.provisioner.alive().values())[:4]:
                        os.kill(proc.pid, signal.SIGKILL)
                        killed.append(proc.pid)

        report = os.path.abspath("bench/results/serverless-recovery.html")
        os.makedirs(os.path.dirname(report), exist_ok=True)
        t = time.perf_counter()
        got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool, progress=False,
                                            report=report,
                                            callbacks=[kill_a_third, events.append])
        hurt = time.perf_counter() - t
        ok = np.allclose(got, want)
        expired = sum(isinstance(e, LeaseExpired) for e in events)
        print(f"undisturbed: {base:.2f} s; 4 of 5 workers SIGKILLed after {ntasks // 3} of "
              f"{ntasks} tasks: {hurt:.2f} s ({hurt / base:.2f}x), right answer: {ok}, "
              f"{expired} leases expired and redone; report: {report}")
        _timeline(events)

        # a straggler: one worker stopped mid-task; its lease expires and another redoes it
        wait_workers(pool, 5)
        stopped: list[int] = []
        events = []

        def stop_one(e):
            if type(e).__name__ == "TaskStart" and e.kind == "pool" and not stopped:
                owners = [v.split(b"|")[0].decode() for v in pool.r.hvals("tg:lease")]
                pid = next((w["pid"] for w in pool.workers() if owners and
                            w["id"] == owners[0]), None)
                if pid is not None:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)

        t = time.perf_counter()
        try:
            got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool,
                                                progress=False,
                                                callbacks=[stop_one, events.append])
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        slow = time.perf_counter() - t
        expired = sum(isinstance(e, LeaseExpired) for e in events)
        print(f"straggler (one worker SIGSTOPped mid-task): {slow:.2f} s ({slow / base:.2f}x),"
              f" right answer: {np.allclose(got, want)}, {expired} lease(s) expired and the "
              "task redone by another worker")


def _burn(block, seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return block + 1


def _throttle(pid: int, done) -> None:
    """Keep process ``pid`` stopped 90% of every 0.1 s until ``done`` is set."""
    while not done.is_set():
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.09)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)


def slowed(ntasks: int = 60, seconds: float = 0.2) -> None:
    import threading

    from tilegraph.runtime.events import BackupStarted

    a = np.arange(ntasks * 4.0).reshape(ntasks, 4)
    x = tg.from_numpy(a, chunks=(1, 4))
    print(f"== slowed: {ntasks} tasks of {seconds} s of CPU, 5 workers, one slowed 10x")
    for factor in (3.0, 0.0):
        with Pool(workers=5, lease=5.0, straggler_factor=factor) as pool:
            wait_workers(pool, 5)
            x.map_blocks(_burn, 0.0).compute(backend="serverless", pool=pool)  # warm
            t = time.perf_counter()
            got = x.map_blocks(_burn, seconds).compute(backend="serverless", pool=pool,
                                                       progress=False)
            base = time.perf_counter() - t
            assert np.array_equal(got, a + 1)
            slow = pool.workers()[0]["pid"]
            done = threading.Event()

            events: list = []
            th = threading.Thread(target=_throttle, args=(slow, done), daemon=True)
            th.start()
            t = time.perf_counter()
            try:
                got = x.map_blocks(_burn, seconds).compute(
                    backend="serverless", pool=pool, progress=False,
                    callbacks=[events.append])
            finally:
                done.set()
                th.join()
                os.kill(slow, signal.SIGCONT)
            hurt = time.perf_counter() - t
            backups = sum(isinstance(e, BackupStarted) for e in events)
            goal = " (goal <= 1.3x)" if factor else ""
            print(f"straggler_factor={factor:g}: undisturbed {base:.2f} s; one worker slowed "
                  f"10x: {hurt:.2f} s ({hurt / base:.2f}x){goal}, {backups} backup copies, "
                  f"right answer: {np.array_equal(got, a + 1)}")


def scaling(n: int = 4000, b: int = 500) -> None:
    from tilegraph.runtime.events import WorkersScaled

    a = spd(n)
    x = tg.from_numpy(a, chunks=b)
    want = np.linalg.cholesky(a)
    print(f"== scaling: Cholesky n = {n}, blocks of {b}, a pool of 1 to 4 workers")
    for sf, width in [(0.25, 2), (0.5, 2), (1.0, 2), (2.0, 2), (1.0, 1), (1.0, 3)]:
        with Pool(workers=1, max_workers=4, scaling_factor=sf, pipeline_width=width,
                  idle_timeout=1.0) as pool:
            wait_workers(pool, 1)
            (x[:b, :b] + 1).compute(backend="serverless", pool=pool)
            events: list = []
            t = time.perf_counter()
            got = tg.linalg.cholesky(x).compute(backend="serverless", pool=pool,
                                                progress=False, callbacks=[events.append])
            wall = time.perf_counter() - t
            run = tg.last_run()
            most = max((e.alive for e in events if isinstance(e, WorkersScaled)), default=1)
            print(f"scaling_factor {sf:<5g} pipeline width {width}: {wall:6.2f} s, "
                  f"{run.core_seconds:6.2f} core-seconds in tasks, at most {most} workers, "
                  f"right answer: {np.allclose(got, want)}")


def _timeline(events: list) -> None:
    ends = [e.stop for e in events if isinstance(e, TaskEnd) and e.kind == "pool"]
    alive = [(e.time, e.alive) for e in events if type(e).__name__ == "WorkersScaled"]
    if not ends:
        return
    t0 = min(min(ends), min((t for t, _ in alive), default=min(ends)))
    span = max(ends) - t0
    step = max(span / 12, 0.25)
    print("  time s   tasks/s   workers alive")
    k = 0
    n_alive = alive[0][1] if alive else 0
    while t0 + k * step <= max(ends):
        lo, hi = t0 + k * step, t0 + (k + 1) * step
        for t, n in alive:
            if t < hi:
                n_alive = n
        rate = sum(lo <= t < hi for t in ends) / step
        print(f"  {lo - t0:6.2f} {rate:9.1f} {n_alive:9d}")
        k += 1


def _noop(*args):
    return 0


def queue(ntasks: int = 2000) -> None:
    print(f"== queue: {ntasks} independent no-op tasks")
    dsk = {("t", i): (_noop,) for i in range(ntasks)}
    dsk["all"] = (sum, [("t", i) for i in range(ntasks)])
    print(f"{'workers':>7s} {'tasks/s':>9s} {'commands/task':>14s} {'transitions/task':>16s}")
    for w in (1, 2, 4, 8):
        with Pool(workers=w) as pool:
            wait_workers(pool, w)
            tg.get({"x": (_noop,)}, "x", backend="serverless", pool=pool)
            c0, s0 = commands(pool), scripts(pool)
            t = time.perf_counter()
            tg.get(dsk, "all", backend="serverless", pool=pool, progress=False)
            dt = time.perf_counter() - t
            ops = (commands(pool) - c0) / ntasks
            trans = (scripts(pool) - s0) / ntasks
        print(f"{w:7d} {ntasks / dt:9.0f} {ops:14.1f} {trans:16.2f}")
    print("(on this machine's 2 cores the workers and the server share the CPUs; the counts "
          "include heartbeats, lease renewals and the idle workers' blocking waits)")


def protocol(ntasks: int = 5000) -> None:
    """The queue alone, one client: a sorted set of ready tasks with leases in a second
    sorted set (this engine's TAKE and COMPLETE transitions, priorities kept) against a
    Redis Streams consumer group (XREADGROUP + XACK, leases as pending entries reclaimed
    with XAUTOCLAIM; first in, first out, no priorities)."""
    from tilegraph.runtime.serverless.pool import EmbeddedServer
    from tilegraph.runtime.serverless.state import EVENTS_MAXLEN, Scripts, connect

    server = EmbeddedServer()
    try:
        r = connect(server.url, server.credentials)
        sc = Scripts(r)
        ns, rid = "bq", "r"
        r.hset(f"{ns}:run:{rid}", "state", "running")
        r.zadd(f"{ns}:ready", {f"{rid}|{i}": i for i in range(ntasks)})
        t = time.perf_counter()
        for _ in range(ntasks):
            got = sc.take(args=[ns, "w", 30, 1, EVENTS_MAXLEN])
            task = got[0].decode().split("|")[1]
            sc.complete(args=[ns, rid, task, "w", 8, 0, 0, "0", EVENTS_MAXLEN, 0])
        zset = ntasks / (time.perf_counter() - t)
        r.xgroup_create("bq:stream", "g", id="0", mkstream=True)
        pipe = r.pipeline(transaction=False)
        for i in range(ntasks):
            pipe.xadd("bq:stream", {"t": i})
        pipe.execute()
        t = time.perf_counter()
        for _ in range(ntasks):
            got = r.xreadgroup("g", "w", {"bq:stream": ">"}, count=1)
            eid = got[0][1][0][0]
            r.xack("bq:stream", "g", eid)
            r.sadd("bq:done", eid)
        streams = ntasks / (time.perf_counter() - t)
        print(f"== protocol, one client, {ntasks} tasks: sorted sets with Lua transitions "
              f"{zset:.0f} tasks/s (2 round trips, priorities, leases, events, children); "
              f"streams consumer group {streams:.0f} tasks/s (3 round trips: read, ack, "
              "done; FIFO only)")
    finally:
        server.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=8000)
    p.add_argument("--block", type=int, default=1000)
    p.add_argument("--part", default="all",
                   choices=["overhead", "faults", "slowed", "scaling", "queue", "protocol",
                            "all"])
    args = p.parse_args()
    if args.part in ("overhead", "all"):
        overhead(args.n, args.block)
    if args.part in ("faults", "all"):
        faults(args.n, args.block)
    if args.part in ("slowed", "all"):
        slowed()
    if args.part in ("scaling", "all"):
        scaling()
    if args.part in ("queue", "all"):
        queue()
    if args.part in ("protocol", "all"):
        protocol()


if __name__ == "__main__":
    main()
