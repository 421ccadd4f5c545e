"""Run on every MPI rank, one rank per emulated host, by tests/cluster/test_mpi.py.

``values SHARED``: matmul, Cholesky, a run under a small memory limit, a staged rechunk,
writes to this host's ``/tmp`` and to the shared directory ``SHARED``, a read of an input
in ``SHARED``; each rank prints one line ``RESULT <json>`` (its host, its checks against
NumPy, what it saw of the files). ``read PATH``: ``from_npy(PATH)`` and a sum, uncaught (a
path some host lacks aborts the job). ``lose STORE TIMEOUT``: a slow computation with the
checkpoint store ``STORE`` and ``mpi_timeout=TIMEOUT``, during which the test loses a host:
each rank prints ``READY`` before it starts and then ``RESULT`` with the error it got, and
leaves at once (a rank is gone: the job cannot finalize). ``resume STORE``: the same
computation again (each rank prints its tasks, and the blocks taken from the store), then
without the store, and rank 0 compares the results.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def _values(shared: str) -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    comm = world()
    rank = comm.Get_rank()
    out: dict = {"rank": rank, "host": socket.gethostname(), "checks": {}}
    checks = out["checks"]
    rng = np.random.default_rng(3)
    opts = {"backend": "mpi"}

    def check(name: str, got: object, want: object, rtol: float = 1e-10) -> None:
        if rank == 0 or got is not None:  # large results come back on rank 0 only
            checks[name] = bool(np.shape(got) == np.shape(want) and
                                np.allclose(got, want, rtol=rtol))

    for dtype in (np.float64, np.float32, np.complex128):
        a = (rng.random((150, 110)) * 10).astype(dtype)
        b = (rng.random((110, 80)) * 10).astype(dtype)
        if dtype == np.complex128:
            a = a + 1j * a[::-1]
        rtol = 1e-4 if dtype == np.float32 else 1e-10
        got = (tg.from_numpy(a, chunks=(40, 35)) @ tg.from_numpy(b, chunks=(35, 30))).compute(
            **opts)
        check(f"matmul-{np.dtype(dtype).name}", got, a @ b, rtol)
        check(f"sum-{np.dtype(dtype).name}",
              tg.from_numpy(a, chunks=(40, 35)).sum(axis=1).compute(**opts), a.sum(axis=1),
              rtol)
    s = rng.random((130, 130))
    s = s @ s.T + 130 * np.eye(130)
    check("cholesky", tg.linalg.cholesky(tg.from_numpy(s, chunks=40)).compute(**opts),
          np.linalg.cholesky(s))
    out["sent"] = tg.last_run().bytes_sent

    # under a small memory limit each rank keeps its results in its own host's /tmp
    x = rng.random((900, 600))
    got = (tg.from_numpy(x, chunks=150).T @ tg.from_numpy(x, chunks=150) + 1).compute(
        memory_limit="3MB", **opts)
    check("small-limit", got, x.T @ x + 1)
    run = tg.last_run()
    out["spilled"] = run.spilled_bytes + run.recomputed_bytes

    with tg.config.set(memory_limit="1MB"):  # a rechunk staged through its store
        y = (tg.random.random((400, 400), chunks=(400, 10), seed=3) + 1).rechunk((10, 400))
        out["staged-plan"] = "stage" in y.explain()
        got = y.compute(**opts)
    if got is not None:
        want = (tg.random.random((400, 400), chunks=(400, 10), seed=3) + 1).compute(
            backend="threads")
        checks["staged-rechunk"] = bool(np.array_equal(got, want))

    a = rng.random((95, 70))
    private = "/tmp/mpi-out.npy"   # on every host its own /tmp: rank 0 writes it
    tg.to_npy(tg.from_numpy(a, chunks=30) * 2, private, **opts)
    comm.Barrier()  # (to_npy returns on the other ranks before rank 0 has committed)
    out["private-exists"] = os.path.exists(private)
    if rank == 0:
        checks["to_npy-private"] = bool(np.array_equal(np.load(private), a * 2))
    out["tmp-left"] = sorted(n for n in os.listdir("/tmp") if n.startswith(".mpi-out"))
    npy, zarr_path = os.path.join(shared, "out.npy"), os.path.join(shared, "out.zarr")
    tg.to_npy(tg.from_numpy(a, chunks=30) - 1, npy, **opts)
    tg.to_zarr(tg.from_numpy(a, chunks=30) + 1, zarr_path, **opts)
    comm.Barrier()
    checks["to_npy-shared"] = bool(np.array_equal(np.load(npy), a - 1))  # on every host
    checks["to_zarr-shared"] = bool(np.array_equal(
        tg.from_zarr(zarr_path).compute(backend="threads"), a + 1))
    given = np.load(os.path.join(shared, "given.npy"), mmap_mode="r")
    check("from_npy-shared", (tg.from_npy(os.path.join(shared, "given.npy"), chunks=(30, 25))
                              + 1).sum(axis=0).compute(**opts), (given + 1).sum(axis=0))
    return out


def _read(path: str) -> dict:
    import tilegraph as tg

    x = tg.from_npy(path, chunks=40)  # raises on a host without the file
    return {"sum": float(x.sum().compute(backend="mpi"))}


def _slow(b):
    import time

    # slow while the test loses a host (the environment is not part of the plan: the
    # rerun is the same plan, without the wait)
    time.sleep(float(os.environ.get("TG_TEST_SLOW", "0")))
    return b * 3


def _slow_array():
    import tilegraph as tg

    return tg.random.random((600, 400), chunks=50, seed=7).map_blocks(_slow) + 1


def _lose(store: str, timeout: str) -> None:
    import time

    from tilegraph.runtime.mpi import world

    comm = world()
    out = {"rank": comm.Get_rank(), "host": socket.gethostname()}
    x = _slow_array()
    print("READY", flush=True)
    try:
        x.compute(backend="mpi", workers=1, checkpoint=store, mpi_timeout=float(timeout))
        out["error"] = None
    except Exception as exc:
        out.update(error=type(exc).__name__, message=str(exc), notes=getattr(
            exc, "__notes__", []), lost=getattr(exc, "rank", None), when=time.time())
    print("RESULT " + json.dumps(out), flush=True)
    time.sleep(3)  # (the other rank reports too before this one's exit breaks its links)
    os._exit(0)  # (MPI cannot finalize with a rank gone)


def _resume(store: str) -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.checkpoint import last_resumed
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    got = _slow_array().compute(backend="mpi", workers=1, checkpoint=store)
    out = {"rank": rank, "resumed": tg.last_run().ntasks, "loaded": last_resumed().loaded,
           "blocks": last_resumed().blocks}
    full = _slow_array().compute(backend="mpi", workers=1)
    out["full"] = tg.last_run().ntasks
    if rank == 0:
        out["right"] = bool(np.array_equal(got, full))
    return out


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "lose":
        _lose(sys.argv[2], sys.argv[3])
    result = (_values(sys.argv[2]) if mode == "values" else
              _resume(sys.argv[2]) if mode == "resume" else _read(sys.argv[2]))
    print("RESULT " + json.dumps(result), flush=True)
