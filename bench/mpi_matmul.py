"""A real MPI run on this machine: C = A @ B at n = 8000 (random inputs made block by block)
on 2 ranks x 1 thread, against the threads backend with 2 threads. Target: MPI >= 0.85x the
threads backend's GFLOP/s, and the bytes the ranks actually sent equal the simulator's
prediction for the same placed plan.

The threads run happens in this process; the MPI run is ``mpiexec -n 2`` of this same file
with ``--rank``, which prints its figures as one line for this process to read. Both take the
best of ``--repeat`` runs and include making the random inputs.
Run: ``python bench/mpi_matmul.py [--n 8000] [--block 1000 2000] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _inputs(n: int, block: int):
    import tilegraph as tg

    a = tg.random.random((n, n), chunks=block, seed=1)
    b = tg.random.random((n, n), chunks=block, seed=2)
    return a, b


def rank_main(n: int, block: int, repeat: int) -> None:
    """Run under mpiexec: every rank plans and runs; rank 0 prints the figures."""
    import numpy as np

    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.plan.simulate import communication_volume
    from tilegraph.runtime.mpi import world

    comm = world()
    a, b = _inputs(n, block)
    best = None
    sent = 0
    for _ in range(repeat):
        comm.Barrier()
        t0 = time.perf_counter()
        c = (a @ b).compute(backend="mpi", workers=1)
        dt = time.perf_counter() - t0
        sent = comm.allreduce(tg.last_run().bytes_sent)
        best = dt if best is None else min(best, dt)
        if comm.Get_rank() == 0:
            checksum = float(np.asarray(c[:3, :3]).sum())
        del c
    plan = plan_arrays([a @ b], processes=comm.Get_size())
    predicted, messages = communication_volume(
        plan.graph, plan.graph.meta["worker"], plan.graph.indices(plan.outputs))
    if comm.Get_rank() == 0:
        print("FIGURES " + json.dumps({"seconds": best, "sent": int(sent),
                                       "predicted": int(predicted), "messages": int(messages),
                                       "checksum": checksum}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8000)
    parser.add_argument("--block", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        rank_main(args.n, args.block[0], args.repeat)
        return 0

    import numpy as np

    from tilegraph.cli import mpiexec_command

    n = args.n
    flops = 2.0 * n**3
    print(f"matmul n={n}: MPI 2 ranks x 1 thread vs threads backend 2 threads "
          f"(best of {args.repeat}, inputs made in the run)")
    print(f"{'block':>6} {'threads GF/s':>13} {'MPI GF/s':>9} {'MPI/threads':>12} "
          f"{'sent':>10} {'predicted':>10} {'equal':>6}")
    ok = True
    for block in args.block:
        a, b = _inputs(n, block)
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            c = (a @ b).compute(backend="threads", workers=2)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
            checksum = float(c[:3, :3].sum())
            del c
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))
        proc = subprocess.run(
            [*mpiexec_command(2), sys.executable, "-m", "mpi4py", os.path.abspath(__file__),
             "--rank", "--n", str(n), "--block", str(block), "--repeat", str(args.repeat)],
            capture_output=True, text=True, env=env)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("FIGURES ")]
        if proc.returncode != 0 or not lines:
            print(proc.stdout[-2000:], proc.stderr[-3000:])
            return 1
        fig = json.loads(lines[0][len("FIGURES "):])
        gf_threads = flops / best / 1e9
        gf_mpi = flops / fig["seconds"] / 1e9
        equal = fig["sent"] == fig["predicted"]
        same = bool(np.isclose(fig["checksum"], checksum))
        ok &= gf_mpi / gf_threads >= 0.85 and equal and same
        print(f"{block:>6} {gf_threads:>13.1f} {gf_mpi:>9.1f} {gf_mpi / gf_threads:>11.2f}x "
              f"{fig['sent'] / 2**20:>7.0f}MiB {fig['predicted'] / 2**20:>7.0f}MiB "
              f"{'yes' if equal else 'NO':>6}" + ("" if same else "  (results differ!)"))
    print("target (MPI >= 0.85x threads, bytes sent = prediction):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
