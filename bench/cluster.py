"""tilegraph across emulated hosts (:mod:`tilegraph.testing.cluster`): for each workload
(matmul, matvec, ``X.T @ X``, Cholesky, quadratic means) and backend (``dask``: a scheduler
on host 0, a one-thread worker per host, the driver outside; ``mpi``: one one-thread rank
per host), the time, the bytes that crossed between hosts as the hosts' interface counters
measured them beside the simulator's prediction for the same placed plan
(:func:`tilegraph.plan.simulate.simulate` with the link's bandwidth and latency), the
simulated makespan, and the peak memory per worker (how far the resident set of each worker
process rose during the run, from its high-water mark, and for MPI the results a rank
held, beside the simulator's blocks held).

What is measured: for dask, the bytes the hosts sent during the run less what reached the
driver outside (the gathered results, in "to driver"); for MPI, the bytes each rank's host
sent during its compute() (read by the rank from its own ``/sys/class/net/eth0``), summed,
beside the block bytes the ranks sent (``last_run().bytes_sent``). Both include the
protocol's own bytes (TCP/IP headers, dask's messages, the ranks' collective steps), which
the simulator does not model; the results gathered on rank 0 are counted by both.

The hosts are emulated on this machine's cores: every host computes on the same CPUs and
the links are as fast as the shaping makes them (none by default). Each result is checked
against the threads backend. Sizes are small by default (``--scale`` multiplies them).

Run (as root, with iproute2): ``python bench/cluster.py [--hosts 3] [--bandwidth 1gbit]
[--latency 0.2ms] [--scale 1] [--workloads matmul matvec ...] [--backends dask mpi]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ["matmul", "matvec", "xtx", "cholesky", "quadratic"]
LABELS = {"matmul": "matmul", "matvec": "matvec", "xtx": "X.T @ X", "cholesky": "Cholesky",
          "quadratic": "quadratic means"}


def arrays(name: str, scale: float) -> list[Any]:
    """The arrays the workload computes (inputs drawn block by block where they are used)."""
    import tilegraph as tg

    def size(n: int, block: int) -> tuple[int, int]:
        k = max(1, round(n * scale / block))
        return k * block, block

    if name == "matmul":
        n, b = size(1200, 400)
        a = tg.random.random((n, n), chunks=b, seed=1)
        return [a @ tg.random.random((n, n), chunks=b, seed=2)]
    if name == "matvec":
        n, b = size(3000, 500)
        a = tg.random.random((n, n), chunks=b, seed=3)
        return [a @ tg.random.random((n,), chunks=b, seed=4)]
    if name == "xtx":
        m, b = size(12000, 1000)
        x = tg.random.random((m, 200), chunks=(b, 200), seed=5)
        return [x.T @ x]
    if name == "cholesky":
        n, b = size(1200, 300)
        a = tg.random.random((n, n), chunks=b, seed=6)
        spd = (a + a.T) + 2 * n * tg.eye(n, chunks=b)  # diagonally dominant
        return [tg.linalg.cholesky(spd)]
    if name == "quadratic":
        t, tb = size(48, 8)
        shape, chunks = (t, 100, 150), (tb, 100, 150)
        u = tg.random.random(shape, chunks=chunks, seed=7)
        v = tg.random.random(shape, chunks=chunks, seed=8)
        return [(u * u).mean(axis=0), (v * v).mean(axis=0), (u * v).mean(axis=0)]
    raise ValueError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")


def simulated(name: str, scale: float, workers: int, bandwidth: float | None,
              latency: float, gather: bool) -> dict:
    """The simulator's figures for the workload placed on ``workers`` processes: bytes
    moved between them (with the results gathered on worker 0 when ``gather``, as MPI
    does; else the results' bytes apart, as ``output_bytes``), makespan, peak per worker."""
    import numpy as np

    from tilegraph.array.lowering import plan_arrays
    from tilegraph.plan.cost import CostModel
    from tilegraph.plan.simulate import simulate

    model = CostModel(**({"bandwidth": bandwidth / 8} if bandwidth else {}),
                      latency=latency or CostModel().latency)
    plan = plan_arrays(arrays(name, scale), processes=workers, model=model)
    graph = plan.graph
    outputs = plan.plan.outputs
    sim = simulate(graph, graph.meta["worker"], workers, priority=plan.plan.priority,
                   outputs=outputs, model=model, gather_to=0 if gather else None)
    sizes = np.array([0 if v is None else int(v) for v in graph.meta.get("nbytes",
                                                                          [None] * len(graph))])
    return {"bytes": int(sim.bytes_moved), "makespan": float(sim.makespan),
            "peak": int(sim.peak_memory.max()), "output_bytes": int(sizes[outputs].sum())}


def _tx_bytes() -> int:
    with open("/sys/class/net/eth0/statistics/tx_bytes") as f:
        return int(f.read())


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> int:
    """The resident set's high-water mark of this process starts again from now (Linux's
    ``clear_refs``); returns the resident set now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


def _peak_growth(start: int) -> int:
    """How far the resident set rose above ``start`` since :func:`_reset_peak`."""
    return max(0, _status("VmHWM") - start)


def _check(name: str, got: list[Any], scale: float) -> bool:
    import numpy as np

    want = [a.compute(backend="threads") for a in arrays(name, scale)]
    return all(np.allclose(g, w, rtol=1e-8, atol=1e-8) for g, w in zip(got, want, strict=True))


def rank_main(names: list[str], scale: float) -> None:
    """Under mpiexec, one rank per host: every rank runs each workload; rank 0 prints a
    ``FIGURES`` line per workload."""
    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    comm = world()
    rank = comm.Get_rank()
    for name in names:
        xs = arrays(name, scale)
        comm.Barrier()
        start = _reset_peak()
        tx0 = _tx_bytes()
        t0 = time.perf_counter()
        got = tg.compute(*xs, backend="mpi", workers=1)
        seconds = time.perf_counter() - t0
        tx = _tx_bytes() - tx0
        run = tg.last_run()
        sent = comm.gather(tx)
        blocks = comm.gather(run.bytes_sent)
        held = comm.gather(run.peak_bytes)
        rss = comm.gather(_peak_growth(start))
        if rank == 0:
            print("FIGURES " + json.dumps({
                "workload": name, "seconds": seconds, "measured": sum(sent),
                "blocks_sent": sum(blocks), "peak_held": max(held), "peak_rss": max(rss),
                "right": _check(name, list(got), scale)}), flush=True)


def run_mpi(bed: Any, names: list[str], scale: float) -> dict[str, dict]:
    proc = bed.mpiexec([sys.executable, "-m", "mpi4py", os.path.abspath(__file__), "--rank",
                        "--scale", str(scale), "--workloads", *names],
                       env={"PYTHONPATH": ROOT}, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=3600)
    figures = {}
    for line in out.splitlines():
        if line.startswith("FIGURES "):
            f = json.loads(line[len("FIGURES "):])
            figures[f["workload"]] = f
    if proc.returncode != 0 or len(figures) != len(names):
        raise RuntimeError(f"the MPI run failed ({proc.returncode}):\n{err[-3000:]}")
    return figures


def run_dask(bed: Any, names: list[str], scale: float) -> dict[str, dict]:
    import distributed

    import tilegraph as tg

    figures = {}
    with bed.start_dask(nthreads=1, env={"PYTHONPATH": ROOT}) as dask, \
            distributed.Client(dask.address) as client:
        for name in names:
            xs = arrays(name, scale)
            start = client.run(_reset_peak)
            before = bed.traffic()
            t0 = time.perf_counter()
            got = tg.compute(*xs, backend="dask", client=client)
            seconds = time.perf_counter() - t0
            moved = bed.traffic() - before
            rss = client.run(lambda dask_worker, start=start: _peak_growth(
                start[dask_worker.address]))
            figures[name] = {"seconds": seconds, "measured": moved.sent - moved.outside_rx,
                             "to_driver": moved.outside_rx, "peak_rss": max(rss.values()),
                             "right": _check(name, list(got), scale)}
    return figures


def _human(n: float) -> str:
    from tilegraph.util import human

    return human(n)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--bandwidth", default=None, help="each link's, e.g. 1gbit (default: none)")
    p.add_argument("--latency", default=None,
                   help="one way between hosts, e.g. 0.2ms (needs the kernel's netem)")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies the sizes")
    p.add_argument("--workloads", nargs="+", default=WORKLOADS, choices=WORKLOADS)
    p.add_argument("--backends", nargs="+", default=["dask", "mpi"], choices=["dask", "mpi"])
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.scale <= 0:
        p.error("--scale must be positive")
    if not 1 <= args.hosts <= 200:
        p.error("--hosts must be from 1 to 200")
    if args.rank:
        rank_main(args.workloads, args.scale)
        return
    from tilegraph.testing.cluster import Cluster, parse_bandwidth, parse_latency, unavailable

    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"bench/cluster.py: {reason}")
    bandwidth, latency = parse_bandwidth(args.bandwidth), parse_latency(args.latency)
    link = ", ".join(x for x in (args.bandwidth and f"{args.bandwidth}",
                                 args.latency and f"{args.latency} one way") if x) or \
        "unshaped"
    print(f"{args.hosts} hosts emulated on this machine's {os.cpu_count()} cores (network "
          f"namespaces on a bridge; no shared /tmp); links: {link}")
    rows = []
    with Cluster(hosts=args.hosts, bandwidth=args.bandwidth, latency=args.latency) as bed:
        results = {}
        if "dask" in args.backends:
            results["dask"] = run_dask(bed, args.workloads, args.scale)
        if "mpi" in args.backends:
            results["mpi"] = run_mpi(bed, args.workloads, args.scale)
    for backend, figures in results.items():
        for name in args.workloads:
            f = figures[name]
            sim = simulated(name, args.scale, args.hosts, bandwidth, latency,
                            gather=backend == "mpi")
            measured = f["measured"]
            rows.append([
                LABELS[name], backend, str(args.hosts), link, f"{f['seconds']:.3f}",
                _human(measured), _human(sim["bytes"]),
                f"{measured / sim['bytes']:.2f}" if sim["bytes"] else "-",
                f"{_human(f['to_driver'])} ({_human(sim['output_bytes'])} results)"
                if backend == "dask" else f"{_human(f['blocks_sent'])} blocks",
                f"{sim['makespan']:.3f}",
                _human(f["peak_rss"]) + (f" ({_human(f['peak_held'])} held)"
                                         if "peak_held" in f else ""),
                _human(sim["peak"]), "yes" if f["right"] else "NO"])
    head = ["workload", "backend", "hosts", "link", "seconds", "between hosts",
            "simulated", "ratio", "to driver / MPI's count", "sim makespan",
            "peak per worker (RSS rise)", "sim peak", "right"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if not all(r[-1] == "yes" for r in rows):
        raise SystemExit("bench/cluster.py: a result differs from the threads backend's")


if __name__ == "__main__":
    main()
