"""A bounded load test of the service on loopback.

Starts ``tilegraph serve --local`` on a free port, submits ``--jobs`` small jobs at once
(one thread per submission), and polls job records at ``--rate`` requests per second for
``--seconds`` seconds, and on until every job has ended (``GET /api/jobs/ID`` on a random
job; every tenth poll is the whole list, ``GET /api/jobs``), over keep-alive connections.
It reports the latency of the API under that load (p50, p95, p99, max), whether every job
completed, how long the jobs took, and the service's memory (RSS of the server process,
sampled every second: first after the submissions, peak, last).

    python bench/service_load.py [--jobs 50] [--rate 200] [--seconds 60]

Targets: every job done; p99 <= 100 ms; the server's memory flat (the last sample within
a few MiB of the first).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

TOKEN = "load-test-token-0123456789"
JOB = """
import numpy as np
import tilegraph as tg

x = tg.from_numpy(np.arange(40000.0).reshape(200, 200), chunks=50)
print(float((x @ x.T + 1).sum().compute()))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    """One keep-alive connection to the service."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def start_server(data_dir: str, port: int, max_jobs: int) -> subprocess.Popen:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TILEGRAPH_TOKEN=TOKEN,
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli", "serve", "--local",
                             "--port", str(port), "--data-dir", data_dir, "--workers", "1",
                             "--max-jobs", str(max_jobs)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while True:
        try:
            status, _ = Conn(port).call("GET", "/api/info")
            if status == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the service did not start: "
                               + proc.stderr.read().decode(errors="replace"))
        time.sleep(0.1)


def poller(port: int, ids: list[str], rate: float, stop: threading.Event, out: list[float],
           errors: list[str]) -> None:
    """Poll at ``rate`` requests per second until ``stop`` is set, on a fixed schedule (a
    slow answer does not lower the offered load)."""
    conn = Conn(port)
    rng = random.Random(threading.get_ident())
    period = 1.0 / rate
    nxt = time.monotonic()
    n = 0
    while not stop.is_set():
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        path = "/api/jobs" if n % 10 == 0 else f"/api/jobs/{rng.choice(ids)}"
        t0 = time.perf_counter()
        status, _ = conn.call("GET", path)
        out.append(time.perf_counter() - t0)
        if status != 200:
            errors.append(f"{path}: HTTP {status}")
        n += 1
        nxt += period


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--rate", type=float, default=200.0, help="polls per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--pollers", type=int, default=4, help="polling threads")
    parser.add_argument("--max-jobs", type=int, default=2, help="jobs running at once")
    parser.add_argument("--wait", type=float, default=300.0,
                        help="most seconds to poll on after --seconds for the jobs to end")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        server = start_server(data, port, args.max_jobs)
        srv = psutil.Process(server.pid)
        try:
            body = json.dumps({"script": JOB, "name": "small.py"}).encode()
            submit_lat: list[float] = []
            ids: list[str] = []
            lock = threading.Lock()

            def submit() -> None:
                t0 = time.perf_counter()
                status, reply = Conn(port).call("POST", "/api/jobs", body)
                with lock:
                    submit_lat.append(time.perf_counter() - t0)
                    if status == 201:
                        ids.append(json.loads(reply)["id"])

            t_start = time.monotonic()
            threads = [threading.Thread(target=submit) for _ in range(args.jobs)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(ids) == args.jobs, f"only {len(ids)} of {args.jobs} submissions worked"

            t_poll = time.monotonic()
            until = t_poll + args.seconds
            lat: list[float] = []
            errors: list[str] = []
            stop = threading.Event()
            pollers = [threading.Thread(target=poller, args=(
                port, ids, args.rate / args.pollers, stop, lat, errors))
                for _ in range(args.pollers)]
            for t in pollers:
                t.start()
            rss: list[int] = []
            all_done_at = None
            watcher = Conn(port)
            while True:
                now = time.monotonic()
                if (now >= until and all_done_at is not None) or now >= until + args.wait:
                    break
                rss.append(srv.memory_info().rss)
                if all_done_at is None:
                    _, raw = watcher.call("GET", "/api/jobs")
                    states = [j["state"] for j in json.loads(raw)]
                    if all(s in ("done", "failed", "cancelled") for s in states):
                        all_done_at = time.monotonic() - t_start
                time.sleep(1.0)
            stop.set()
            for t in pollers:
                t.join()
            polled = time.monotonic() - t_poll
            rss.append(srv.memory_info().rss)
            _, raw = watcher.call("GET", "/api/jobs")
            jobs = json.loads(raw)
        finally:
            server.terminate()
            server.wait(timeout=30)

    done = sum(j["state"] == "done" for j in jobs)
    ms = np.array(lat) * 1000
    sub = np.array(submit_lat) * 1000
    achieved = len(lat) / polled
    print(f"service load test: {args.jobs} jobs submitted at once, {args.rate:.0f} polls/s "
          f"offered for {polled:.0f} s ({os.cpu_count()} cores; machine shared)")
    print(f"  jobs done: {done}/{len(jobs)}; all ended after "
          f"{all_done_at:.1f} s" if all_done_at is not None else
          f"  jobs done: {done}/{len(jobs)}; NOT all ended within the test")
    print(f"  load average (1, 5, 15 min) at the end: "
          f"{', '.join(f'{v:.1f}' for v in os.getloadavg())}")
    print(f"  submissions: p50 {np.percentile(sub, 50):.1f} ms, max {sub.max():.1f} ms")
    print(f"  polls: {len(lat)} ({achieved:.0f}/s), errors {len(errors)}; latency p50 "
          f"{np.percentile(ms, 50):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms, p99 "
          f"{np.percentile(ms, 99):.1f} ms, max {ms.max():.1f} ms")
    mib = [r / 2**20 for r in rss]
    print(f"  server RSS: first {mib[0]:.1f} MiB, peak {max(mib):.1f} MiB, last "
          f"{mib[-1]:.1f} MiB (growth {mib[-1] - mib[0]:+.1f} MiB over {len(mib)} samples)")
    ok = (done == args.jobs and not errors and np.percentile(ms, 99) <= 100
          and mib[-1] - mib[0] < 20)
    print("  targets (all done, p99 <= 100 ms, memory flat):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
