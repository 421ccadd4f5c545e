"""tilegraph across emulated hosts (:mod:`tilegraph.testing.cluster`): for each workload
(matmul, matvec, ``X.T @ X``, Cholesky, quadratic means) and backend (``dask``: a scheduler
on host 0, a one-thread worker per host, the driver outside; ``mpi``: one one-thread rank
per host), the time, the bytes that crossed between hosts as the hosts' interface counters
measured them beside the simulator's prediction for the same placed plan
(:func:`tilegraph.plan.simulate.simulate` with the link's bandwidth and latency), the
simulated makespan, and the peak memory per worker (how far the resident set of each worker
process rose during the run, from its high-water mark, and for MPI the results a rank
held, beside the simulator's blocks held). Two times: "seconds", the whole ``compute()``
(planning, placing, the ranks' check that they hold one plan, the run), and "run", the
executor's part (``last_run().elapsed``, the slowest rank's for MPI), which is what the
simulated makespan models; the ratio is run over makespan.

What is measured: for dask, the bytes the hosts sent during the run less what reached the
driver outside (the gathered results, in "to driver"); for MPI, the bytes each rank's host
sent during its compute() (read by the rank from its own ``/sys/class/net/eth0``), summed,
beside the block bytes the ranks sent (``last_run().bytes_sent``) and the TCP segments the
hosts sent again (a resent segment is counted twice by the interface; on a loaded machine
this alone can put the counters several times above the blocks). Both include the
protocol's own bytes (TCP/IP headers, dask's messages, the ranks' collective steps), which
the simulator does not model; the results gathered on rank 0 are counted by both.

The hosts are emulated on this machine's cores: every host computes on the same CPUs and
the links are as fast as the shaping makes them (none by default). Each result is checked
against the threads backend. Sizes are small by default (``--scale`` multiplies them).

The simulator's bytes are given twice: the blocks alone ("sim blocks": what the placed plan
moves, with MPI's sharing of results of at most 1 MiB with every rank), and on the wire
("sim wire"): the blocks plus what the transport adds per message, per task and per run
(:meth:`tilegraph.plan.cost.CostModel.wire_bytes`), with the constants ``--calibrate``
fitted to this machine's interface counters (bench/cluster-model.json). The simulated
makespan uses the compute rates ``--calibrate`` measured on one core, shared among the
hosts as they share this machine's cores.

Other modes:

- ``--calibrate``: every workload on both backends at two sizes; fits the transports'
  ``message_bytes``, ``task_bytes`` and ``run_bytes`` (least squares on the relative
  error) and measures one core's gemm rate, copy bandwidth and cost per task; writes
  bench/cluster-model.json.
- ``--extrapolate [--n 32768 --block 2048 --bandwidth 1gbit --png FILE]``: the simulator's
  makespan and speed-up of a matmul and a Cholesky on 1 to 256 nodes, one worker each
  (TensorPlanner's Figure 7), SIMULATED from the model calibrated here (no bed needed).
- ``--beside-dask [quadratic rechunk matmul anomaly]``: tilegraph's ``backend="dask"``
  beside dask's own run of the same workloads on one dask cluster across the hosts: time,
  bytes between hosts, bytes to the driver, peak per worker; each result checked against
  the same system's run on this machine's threads.
- ``--loss``: a dask worker killed at half of a run of tilegraph's ``backend="dask"``:
  the time to the right answer against the undisturbed run's.

Run (as root, with iproute2): ``python bench/cluster.py [--hosts 3] [--bandwidth 1gbit]
[--latency 0.2ms] [--scale 1] [--workloads matmul matvec ...] [--backends dask mpi]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
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


MODEL_FILE = os.path.join(ROOT, "bench", "cluster-model.json")
SHARE_LIMIT = 1 << 20  # the MPI backend's mpi_broadcast_limit: smaller results go to every rank


def wire_model(backend: str) -> dict:
    """What the transport of ``backend`` adds on the network (``message_bytes``,
    ``task_bytes``, ``run_bytes``), as ``--calibrate`` measured it on this machine's emulated
    hosts and wrote to bench/cluster-model.json (zeros before any calibration)."""
    try:
        with open(MODEL_FILE) as f:
            return json.load(f)["wire"][backend]
    except (OSError, KeyError, ValueError):
        return {"message_bytes": 0.0, "task_bytes": 0.0, "run_bytes": 0.0}


def compute_model(hosts: int) -> dict:
    """The compute rates of the model (per worker) measured by ``--calibrate``, shared
    among the emulated hosts as they share this machine's cores (each host's worker gets
    ``cores / hosts`` of a core when all are busy, at most one)."""
    try:
        with open(MODEL_FILE) as f:
            rates = dict(json.load(f)["compute"])
    except (OSError, KeyError, ValueError):
        rates = {}
    share = min(1.0, (os.cpu_count() or 1) / hosts)
    out = {}
    for name in ("flop_rate", "mem_bandwidth"):
        if name in rates:
            out[name] = rates[name] * share
    if "task_overhead" in rates:
        out["task_overhead"] = rates["task_overhead"] / share
    return out


def simulated(name: str, scale: float, workers: int, bandwidth: float | None,
              latency: float, backend: str) -> dict:
    """The simulator's figures for the workload placed on ``workers`` processes: block
    bytes moved between them (for MPI with the results gathered on worker 0 and the small
    ones shared with every rank, as the backend does; for dask the results' bytes apart, as
    ``output_bytes``, since the driver outside gathers them), messages, tasks, the bytes on
    the wire under the calibrated model of the backend's transport, the makespan under the
    calibrated compute rates, and the peak per worker."""
    import numpy as np

    from tilegraph.array.lowering import plan_arrays
    from tilegraph.plan.cost import CostModel
    from tilegraph.plan.simulate import simulate

    mpi = backend == "mpi"
    model = CostModel(**({"bandwidth": bandwidth / 8} if bandwidth else {}),
                      latency=latency or CostModel().latency, **wire_model(backend),
                      **compute_model(workers))
    plan = plan_arrays(arrays(name, scale), processes=workers, model=model)
    graph = plan.graph
    outputs = plan.plan.outputs
    sim = simulate(graph, graph.meta["worker"], workers, priority=plan.plan.priority,
                   outputs=outputs, model=model, gather_to=0 if mpi else None,
                   share_limit=SHARE_LIMIT if mpi else None)
    sizes = np.array([0 if v is None else int(v) for v in graph.meta.get("nbytes",
                                                                          [None] * len(graph))])
    return {"bytes": int(sim.bytes_moved), "messages": int(sim.messages),
            "tasks": len(graph), "wire": int(sim.wire_bytes), "shared": int(sim.shared_bytes),
            "makespan": float(sim.makespan), "peak": int(sim.peak_memory.max()),
            "output_bytes": int(sizes[outputs].sum())}


def _tx_bytes() -> int:
    with open("/sys/class/net/eth0/statistics/tx_bytes") as f:
        return int(f.read())


def _retransmitted() -> int:
    """TCP segments this network namespace has sent again (``RetransSegs`` of
    ``/proc/net/snmp``): a segment lost to the shaping's queue or to a slow receiver is
    counted by the interface twice, which the simulator cannot predict."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("RetransSegs")])


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
        tx0, re0 = _tx_bytes(), _retransmitted()
        t0 = time.perf_counter()
        got = tg.compute(*xs, backend="mpi", workers=1)
        seconds = time.perf_counter() - t0
        tx, again = _tx_bytes() - tx0, _retransmitted() - re0
        run = tg.last_run()
        sent = comm.gather(tx)
        resent = comm.gather(again)
        blocks = comm.gather(run.bytes_sent)
        ran = comm.gather(run.elapsed)
        held = comm.gather(run.peak_bytes)
        rss = comm.gather(_peak_growth(start))
        if rank == 0:
            print("FIGURES " + json.dumps({
                "workload": name, "seconds": seconds, "run": max(ran), "measured": sum(sent),
                "retransmitted": sum(resent),
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
            figures[name] = {"seconds": seconds, "run": tg.last_run().elapsed,
                             "measured": moved.sent - moved.outside_rx,
                             "to_driver": moved.outside_rx, "peak_rss": max(rss.values()),
                             "right": _check(name, list(got), scale)}
    return figures


def _human(n: float) -> str:
    from tilegraph.util import human

    return human(n)


def _table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _link(args: argparse.Namespace) -> str:
    return ", ".join(x for x in (args.bandwidth and f"{args.bandwidth}",
                                 args.latency and f"{args.latency} one way") if x) or \
        "unshaped"


def compare(args: argparse.Namespace) -> None:
    """Per workload and backend: the bytes between hosts measured beside the simulator's
    (blocks alone, and on the wire under the calibrated model), the time beside the
    simulated makespan."""
    from tilegraph.testing.cluster import Cluster, parse_bandwidth, parse_latency

    bandwidth, latency = parse_bandwidth(args.bandwidth), parse_latency(args.latency)
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
            sim = simulated(name, args.scale, args.hosts, bandwidth, latency, backend)
            measured = f["measured"]
            rows.append([
                LABELS[name], backend, str(args.hosts), _link(args), f"{f['seconds']:.3f}",
                f"{f['run']:.3f}", f"{sim['makespan']:.3f}", f"{f['run'] / sim['makespan']:.2f}",
                _human(measured), _human(sim["bytes"]), _human(sim["wire"]),
                f"{measured / sim['wire']:.2f}" if sim["wire"] else "-",
                str(sim["messages"]),
                f"{_human(f['to_driver'])} ({_human(sim['output_bytes'])} results)"
                if backend == "dask" else
                f"{_human(f['blocks_sent'])} blocks, {f['retransmitted']} segments resent",
                _human(f["peak_rss"]) + (f" ({_human(f['peak_held'])} held)"
                                         if "peak_held" in f else ""),
                _human(sim["peak"]), "yes" if f["right"] else "NO"])
    _table(["workload", "backend", "hosts", "link", "seconds", "run", "sim makespan", "ratio",
            "between hosts", "sim blocks", "sim wire", "ratio", "messages",
            "to driver / MPI's count", "peak per worker (RSS rise)", "sim peak", "right"],
           rows)
    if not all(r[-1] == "yes" for r in rows):
        raise SystemExit("bench/cluster.py: a result differs from the threads backend's")


# -- calibration -----------------------------------------------------------------------------


def _compute_rates() -> dict:
    """One core's rates here: ``flop_rate`` (a 400 x 400 x 400 gemm, the matmul's block),
    ``mem_bandwidth`` (a 64 MiB copy, read and written) and ``task_overhead`` (seconds per
    task of a plan of tiny tasks on one thread)."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    import tilegraph as tg

    with threadpool_limits(1):
        a = np.random.default_rng(0).random((400, 400))
        a @ a
        t = time.perf_counter()
        for _ in range(20):
            a @ a
        flop_rate = 20 * 2 * 400**3 / (time.perf_counter() - t)
        x = np.ones(8 << 20)
        y = np.empty_like(x)
        t = time.perf_counter()
        for _ in range(10):
            np.copyto(y, x)
        mem = 10 * 2 * x.nbytes / (time.perf_counter() - t)
    z = tg.ones((2000,), chunks=1) + 1
    z.sum().compute(backend="sync")
    t = time.perf_counter()
    z.sum().compute(backend="sync")
    overhead = (time.perf_counter() - t) / tg.last_run().ntasks
    return {"flop_rate": flop_rate, "mem_bandwidth": mem, "task_overhead": overhead}


def _fit(points: list[tuple[float, float, float, float]]) -> dict:
    """``message_bytes``, ``task_bytes``, ``run_bytes`` (none below 0) that best explain
    the bytes measured beyond the blocks' by messages, tasks and runs (least squares on the
    relative error, so that small runs count as much as large ones)."""
    import numpy as np

    extra = np.array([m - b for m, b, _, _ in points])
    cols = np.array([[msg, tasks, 1.0] for _, _, msg, tasks in points])
    weight = 1.0 / np.array([max(m, 1.0) for m, _, _, _ in points])
    use = [0, 1, 2]
    while True:
        coef = np.zeros(3)
        sol, *_ = np.linalg.lstsq(cols[:, use] * weight[:, None], extra * weight, rcond=None)
        coef[use] = sol
        if (coef[use] >= 0).all() or len(use) == 1:
            break
        use.remove(use[int(np.argmin(coef[use]))])
    coef = np.maximum(coef, 0.0)
    return {"message_bytes": float(coef[0]), "task_bytes": float(coef[1]),
            "run_bytes": float(coef[2])}


def calibrate(args: argparse.Namespace) -> None:
    """Fit the transports' own bytes to the interface counters (every workload at scales
    0.5 and 1, both backends), measure one core's compute rates, and write them to
    bench/cluster-model.json."""
    from tilegraph.testing.cluster import Cluster

    points: dict[str, list] = {"dask": [], "mpi": []}
    with Cluster(hosts=args.hosts) as bed:
        for scale in (0.5 * args.scale, args.scale):
            for backend, figures in (("dask", run_dask(bed, args.workloads, scale)),
                                     ("mpi", run_mpi(bed, args.workloads, scale))):
                for name in args.workloads:
                    sim = simulated(name, scale, args.hosts, None, 0.0, backend)
                    points[backend].append((figures[name]["measured"], sim["bytes"],
                                            sim["messages"], sim["tasks"]))
    model = {"wire": {b: _fit(p) for b, p in points.items()}, "compute": _compute_rates(),
             "measured_on": f"{args.hosts} emulated hosts, {os.cpu_count()} cores, "
                            f"{time.strftime('%Y-%m-%d')}",
             "points": points}
    with open(MODEL_FILE, "w") as f:
        json.dump(model, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in model.items() if k != "points"}, indent=1))


# -- extrapolation ---------------------------------------------------------------------------

NODES = [1, 16, 32, 64, 128, 256]


def extrapolate(args: argparse.Namespace) -> None:
    """The simulator's makespan and speed-up from 1 to 256 nodes (one worker each) for a
    matmul and a Cholesky of fixed size (TensorPlanner's Figure 7, strong scaling), under
    the model calibrated here: SIMULATED, not run."""
    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.plan.cost import CostModel
    from tilegraph.plan.simulate import simulate
    from tilegraph.testing.cluster import parse_bandwidth, parse_latency

    bandwidth = parse_bandwidth(args.bandwidth or "1gbit")
    latency = parse_latency(args.latency) or 50e-6
    n, b = args.n, args.block
    rates = compute_model(1)
    model = CostModel(bandwidth=bandwidth / 8, latency=latency, **wire_model("mpi"), **rates)

    def work(name: str) -> list:
        a = tg.random.random((n, n), chunks=b, seed=1)
        if name == "matmul":
            return [a @ tg.random.random((n, n), chunks=b, seed=2)]
        return [tg.linalg.cholesky((a + a.T) + 2 * n * tg.eye(n, chunks=b))]

    rows, curves = [], {}
    for name in ("matmul", "cholesky"):
        base = None
        for p in NODES:
            plan = plan_arrays(work(name), processes=p if p > 1 else None, model=model)
            g = plan.graph
            placement = g.meta.get("worker") or [0] * len(g)
            sim = simulate(g, placement, p, priority=plan.plan.priority,
                           outputs=plan.plan.outputs, model=model, gather_to=None)
            base = base or sim.makespan
            curves.setdefault(name, []).append((p, sim.makespan, base / sim.makespan))
            rows.append([name, str(p), f"{sim.makespan:.3f}", f"{base / sim.makespan:.1f}",
                         f"{sim.utilisation:.0%}", _human(sim.bytes_moved),
                         _human(int(sim.peak_memory.max()))])
    print(f"SIMULATED, not run: n = {n}, blocks of {b}, one worker per node; model calibrated "
          f"on this machine (bench/cluster-model.json: flop rate "
          f"{rates.get('flop_rate', CostModel().flop_rate) / 1e9:.1f} GFlop/s per worker, "
          f"links {bandwidth / 1e9:g} Gbit/s, {latency * 1e6:g} us per message, the MPI "
          "transport's own bytes)")
    _table(["workload", "nodes", "sim seconds", "speed-up", "utilisation", "moved",
            "peak per node"], rows)
    if args.png:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("(matplotlib is not installed: no figure)")
            return
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for name, pts in curves.items():
            ax.plot([q[0] for q in pts], [q[2] for q in pts], marker="o", label=name)
        ax.plot(NODES, NODES, ls=":", color="grey", label="linear")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("nodes")
        ax.set_ylabel("speed-up over one node")
        ax.set_title(f"SIMULATED (model calibrated here), n={n}", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"figure: {args.png}")


# -- beside dask -----------------------------------------------------------------------------

BESIDE = ["quadratic", "rechunk", "matmul", "anomaly"]


def beside_arrays(name: str, xp: Any, rng: Any, scale: float) -> list[Any]:
    """The workloads of ``--beside-dask``, written once for tilegraph and dask.array
    (``xp``: the module; ``rng(shape, chunks, seed)``: its random arrays)."""
    import numpy as np

    def k(n: int) -> int:
        return max(1, round(n * scale))

    if name == "quadratic":
        shape, chunks = (8 * k(6), 100, 150), (8, 100, 150)
        u, v = rng(shape, chunks, 7), rng(shape, chunks, 8)
        return [xp.mean(u * u, axis=0), xp.mean(v * v, axis=0), xp.mean(u * v, axis=0)]
    if name == "rechunk":
        t = 8 * k(6)
        x = rng((t, 120, 120), (1, 120, 120), 9)
        return [(x.rechunk((t, 20, 20)) * 2).sum(axis=0)]
    if name == "matmul":
        n = 400 * k(3)
        return [rng((n, n), (400, 400), 1) @ rng((n, n), (400, 400), 2)]
    if name == "anomaly":
        t, x = 40 * k(3), 20000
        data = rng((t, x), (1, x), 3)
        ngroups = 4
        day = np.arange(t) % ngroups
        clim = xp.stack([xp.mean(xp.take(data, xp.asarray(np.flatnonzero(day == g)), axis=0),
                                 axis=0) for g in range(ngroups)])
        return [xp.mean(data - xp.take(clim, xp.asarray(day), axis=0), axis=0)]
    raise ValueError(f"unknown workload {name!r}; choose from {', '.join(BESIDE)}")


def _tg_rng(shape: Any, chunks: Any, seed: int) -> Any:
    import tilegraph as tg

    return tg.random.random(shape, chunks=chunks, seed=seed)


def _dask_rng(shape: Any, chunks: Any, seed: int) -> Any:
    import dask.array as da

    return da.random.default_rng(seed).random(shape, chunks=chunks)


def beside_dask(args: argparse.Namespace) -> None:
    """tilegraph's backend="dask" and dask's own run of the same workloads on one dask
    cluster across the emulated hosts: time, bytes between hosts, peak per worker; each
    result checked against the same system's run on this machine's threads."""
    import dask
    import dask.array as da
    import distributed
    import numpy as np

    import tilegraph as tg
    from tilegraph.testing.cluster import Cluster

    rows = []
    with Cluster(hosts=args.hosts, bandwidth=args.bandwidth, latency=args.latency) as bed, \
            bed.start_dask(nthreads=1, env={"PYTHONPATH": ROOT}) as d, \
            distributed.Client(d.address) as client:
        for name in args.beside:
            for system in ("tilegraph", "dask"):
                if system == "tilegraph":
                    xs = beside_arrays(name, tg, _tg_rng, args.scale)

                    def run(xs: list = xs) -> Any:
                        return tg.compute(*xs, backend="dask", client=client)

                    want = tg.compute(*beside_arrays(name, tg, _tg_rng, args.scale),
                                      backend="threads")
                else:
                    xs = beside_arrays(name, da, _dask_rng, args.scale)

                    def run(xs: list = xs) -> Any:
                        return dask.compute(*xs)  # on the client's cluster

                    with dask.config.set({"array.rechunk.method": "tasks"}):  # (no p2p
                        local = beside_arrays(name, da, _dask_rng, args.scale)  # off a cluster)
                    want = dask.compute(*local, scheduler="threads")
                start = client.run(_reset_peak)
                before = bed.traffic()
                t0 = time.perf_counter()
                got = run()
                seconds = time.perf_counter() - t0
                moved = bed.traffic() - before
                rss = client.run(lambda dask_worker, start=start: _peak_growth(
                    start[dask_worker.address]))
                right = all(np.allclose(g, w, rtol=1e-8) for g, w in
                            zip(got, want, strict=True))
                rows.append([name, system, str(args.hosts), _link(args), f"{seconds:.3f}",
                             _human(moved.sent - moved.outside_rx),
                             _human(moved.outside_rx), _human(max(rss.values())),
                             "yes" if right else "NO"])
    print(f"{args.hosts} hosts emulated on this machine's {os.cpu_count()} cores, one dask "
          "worker thread per host, the driver outside (timing figures are for a quiet "
          "machine; the load here was "
          f"{os.getloadavg()[0]:.1f})")
    _table(["workload", "system", "hosts", "link", "seconds", "between hosts", "to driver",
            "peak per worker (RSS rise)", "right"], rows)
    if not all(r[-1] == "yes" for r in rows):
        raise SystemExit("bench/cluster.py: a result differs from the same system's local run")


# -- losing a worker -------------------------------------------------------------------------


def loss(args: argparse.Namespace) -> None:
    """A dask worker killed mid-run (its process, on host ``hosts - 1``): the time to a
    right answer against the undisturbed run's, for tilegraph's backend="dask"."""
    import distributed
    import numpy as np

    import tilegraph as tg
    from tilegraph.testing.cluster import Cluster

    def work() -> list:
        n = int(2400 * args.scale) // 400 * 400 or 400
        a = tg.random.random((n, n), chunks=400, seed=1)
        return [(a @ tg.random.random((n, n), chunks=400, seed=2)).sum(axis=0)]

    want = tg.compute(*work(), backend="threads")[0]
    with Cluster(hosts=args.hosts, bandwidth=args.bandwidth) as bed, \
            bed.start_dask(nthreads=1, env={"PYTHONPATH": ROOT}) as d, \
            distributed.Client(d.address) as client:
        tg.compute(*work(), backend="dask", client=client)  # (the workers' imports)
        t = time.perf_counter()
        tg.compute(*work(), backend="dask", client=client)
        undisturbed = time.perf_counter() - t
        victim = d.workers[-1]
        timer = threading.Timer(0.5 * undisturbed, victim.kill)
        t = time.perf_counter()
        timer.start()
        got = tg.compute(*work(), backend="dask", client=client)[0]
        disturbed = time.perf_counter() - t
        timer.join()
    right = bool(np.allclose(got, want, rtol=1e-10))
    print(f"{args.hosts} emulated hosts on {os.cpu_count()} cores (load {os.getloadavg()[0]:.1f}"
          f"), link {_link(args)}: tilegraph on dask, a worker killed at half the run: "
          f"{disturbed:.2f} s against {undisturbed:.2f} s undisturbed "
          f"({disturbed / undisturbed:.2f}x), right: {'yes' if right else 'NO'}")
    if not right:
        raise SystemExit("bench/cluster.py: the run that lost a worker gave a wrong answer")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=3)
    p.add_argument("--bandwidth", default=None, help="each link's, e.g. 1gbit (default: none)")
    p.add_argument("--latency", default=None,
                   help="one way between hosts, e.g. 0.2ms (needs the kernel's netem)")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies the sizes")
    p.add_argument("--workloads", nargs="+", default=WORKLOADS, choices=WORKLOADS)
    p.add_argument("--backends", nargs="+", default=["dask", "mpi"], choices=["dask", "mpi"])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--calibrate", action="store_true",
                      help="fit the model's transport bytes and compute rates here")
    mode.add_argument("--extrapolate", action="store_true",
                      help="the simulator's speed-up on 1-256 nodes (matmul, Cholesky)")
    mode.add_argument("--beside-dask", dest="beside", nargs="*", choices=BESIDE,
                      default=None, help="tilegraph's backend='dask' beside dask's own run")
    mode.add_argument("--loss", action="store_true",
                      help="a dask worker killed mid-run: time against the undisturbed run")
    p.add_argument("--n", type=int, default=32768, help="--extrapolate: matrix size")
    p.add_argument("--block", type=int, default=2048, help="--extrapolate: block size")
    p.add_argument("--png", default=None, help="--extrapolate: write the figure here")
    p.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.scale <= 0:
        p.error("--scale must be positive")
    if not 1 <= args.hosts <= 200:
        p.error("--hosts must be from 1 to 200")
    if args.rank:
        rank_main(args.workloads, args.scale)
        return
    if args.extrapolate:
        if args.n < args.block or args.block < 1:
            p.error("--n must be at least --block, and --block positive")
        extrapolate(args)
        return
    from tilegraph.testing.cluster import unavailable

    reason = unavailable()
    if reason is not None:
        raise SystemExit(f"bench/cluster.py: {reason}")
    print(f"{args.hosts} hosts emulated on this machine's {os.cpu_count()} cores (network "
          f"namespaces on a bridge; no shared /tmp); links: {_link(args)}")
    if args.calibrate:
        calibrate(args)
    elif args.beside is not None:
        args.beside = args.beside or BESIDE
        beside_dask(args)
    elif args.loss:
        loss(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
