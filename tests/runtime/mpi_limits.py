"""Checks run on every rank under mpiexec by tests/runtime/test_mpi_limits.py: the memory
limit each rank enforces, what a run plans for it and what each rank holds under it.

Each rank prints one line ``RESULT <json>`` with its own run records (``tg.last_run()``)
and the values it checked against NumPy. This host's memory is taken to be 8 MiB (the
ranks' default limits then follow from it), so that small arrays show the choices that
large ones make on a real host.
"""

from __future__ import annotations

import json

HOST = 8 << 20  # bytes of memory this host is taken to have


def _record(run) -> dict:
    return {"limit": run.memory_limit, "peak": run.peak_bytes, "staged": run.staged_bytes,
            "spilled": run.spilled_bytes, "processes": run.processes}


def _ops(arr, options) -> set:
    import tilegraph as tg

    graph = tg.algebra.lower([arr.collection], options=options).build()
    return {graph.opname(i) for i in range(len(graph))}


def main() -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph import config
    from tilegraph.runtime import budget as memory
    from tilegraph.runtime.mpi import world

    memory._total_memory = lambda: HOST
    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    out: dict = {"rank": rank, "size": size,
                 "default": int(HOST * memory.DEFAULT_FRACTION)}

    # a rechunk whose pieces fit half the host's default budget, not half a rank's
    x_np = np.arange(256 * 1024, dtype=np.float64).reshape(256, 1024)  # 2 MiB
    x = tg.from_numpy(x_np, chunks=(256, 64)) + 0  # blocks of 128 KiB
    y = x.rechunk((16, 1024))
    settings = config.resolve({"backend": "mpi"}, "test")
    out["host_plan"] = sorted(_ops(y, config.per_process(settings, 1)))
    out["rank_plan"] = sorted(_ops(y, config.per_process(settings, size)))
    got = y.compute(backend="mpi")
    out["rechunk_default"] = _record(tg.last_run())
    out["rechunk_default"]["equal"] = None if got is None else bool(np.array_equal(got, x_np))
    out["rechunk_default"]["block"] = 128 * 1024

    # a staged rechunk under a given limit (per process, whatever the ranks)
    z_np = np.arange(512 * 2048, dtype=np.float64).reshape(512, 2048) % 977  # 8 MiB
    z = tg.from_numpy(z_np, chunks=(512, 64)) + 0  # blocks of 256 KiB
    sums = z.rechunk((16, 2048)).sum(axis=1).compute(backend="mpi", memory_limit="3MB")
    out["rechunk_given"] = _record(tg.last_run())
    out["rechunk_given"]["equal"] = bool(np.allclose(sums, z_np.sum(axis=1)))
    out["rechunk_given"]["block"] = 256 * 1024

    # an out-of-core matmul: operands a user's function made (spilled, never remade)
    a = tg.random.random((800, 800), chunks=100, seed=1).map_blocks(np.add, 0.5)
    b = tg.random.random((800, 800), chunks=100, seed=2).map_blocks(np.add, 0.5)
    cols = (a @ b).sum(axis=0).compute(backend="mpi", memory_limit="1MB")
    out["matmul"] = _record(tg.last_run())
    a_np, b_np = a.compute(backend="sync"), b.compute(backend="sync")
    out["matmul"]["equal"] = bool(np.allclose(cols, (a_np @ b_np).sum(axis=0)))
    out["matmul"]["block"] = 100 * 100 * 8
    return out


if __name__ == "__main__":
    print("RESULT " + json.dumps(main()), flush=True)
