"""Checks run on every rank under mpiexec by tests/runtime/test_mpi.py.

Each rank prints one line ``RESULT <json>`` with what it saw; rank 0 also compares every
result with NumPy. Modes: ``values`` (the default), ``fail`` (a task fails on rank 2),
``mismatch`` (the ranks plan different programs), ``report PATH`` (an HTML report of an
MPI run), ``watchdog`` (only rank 0 calls compute()), ``admission`` (blocks received under a small
budget), ``closures`` (task functions that read values differing per rank).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def _values() -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.array.lowering import plan_arrays
    from tilegraph.plan.simulate import communication_volume
    from tilegraph.runtime.events import RunStart, Transfer
    from tilegraph.runtime.mpi import world

    comm = world()
    rank = comm.Get_rank()
    rng = np.random.default_rng(7)
    checks: dict[str, bool] = {}
    received: list[tuple[str, int]] = []

    runs = [0]

    def log(event: object) -> None:
        if isinstance(event, RunStart):
            runs[0] += 1
        if isinstance(event, Transfer):
            received.append((runs[0], repr(event.key), event.source))

    def check(name: str, got: object, want: object, rtol: float = 1e-10) -> None:
        # small results (under mpi_broadcast_limit) are returned on every rank
        ok = np.shape(got) == np.shape(want) and np.allclose(got, want, rtol=rtol)
        checks[name] = bool(ok)

    opts = {"backend": "mpi", "callbacks": [log]}
    for dtype in (np.float64, np.float32, np.int64, np.complex128):
        a_np = (rng.random((37, 29)) * 10).astype(dtype)
        b_np = (rng.random((29, 23)) * 10).astype(dtype)
        if dtype == np.complex128:
            a_np = a_np + 1j * a_np[::-1]
        a = tg.from_numpy(a_np, chunks=(8, 7))
        b = tg.from_numpy(b_np, chunks=(7, 5))
        rtol = 1e-4 if dtype == np.float32 else 1e-10
        name = np.dtype(dtype).name
        check(f"matmul-{name}", (a @ b).compute(**opts), a_np @ b_np, rtol)
        check(f"elementwise-{name}", ((a + 1) * a - 3).compute(**opts),
              (a_np + 1) * a_np - 3, rtol)
        check(f"sum-axis0-{name}", a.sum(axis=0).compute(**opts), a_np.sum(axis=0), rtol)
        check(f"max-{name}", a.max().compute(**opts), a_np.max(), rtol)
        check(f"einsum-{name}", tg.einsum("ij,jk->ik", a, b).compute(**opts),
              np.einsum("ij,jk->ik", a_np, b_np), rtol)
    x_np = rng.random((50, 40))
    x = tg.from_numpy(x_np, chunks=(13, 11))
    check("mean-std", tg.compute(x.mean(axis=1), x.std(), **opts)[0], x_np.mean(axis=1))
    check("einsum-trace-like", tg.einsum("ij,ij->j", x, x).compute(**opts),
          np.einsum("ij,ij->j", x_np, x_np))
    check("transpose-matmul", (x.T @ x).compute(**opts), x_np.T @ x_np)
    check("one-block", tg.from_numpy(x_np, chunks=100).sum().compute(**opts), x_np.sum())
    r = tg.random.random((60, 60), chunks=16, seed=3)
    check("random-matmul", (r @ r).compute(**opts),
          (r.compute(backend="threads") @ r.compute(backend="threads")))

    # linear algebra and sparse blocks across ranks (sparse blocks travel pickled)
    spd_np = x_np.T @ x_np + 40 * np.eye(40)
    spd = tg.from_numpy(spd_np, chunks=(11, 11))
    check("cholesky", tg.linalg.cholesky(spd).compute(**opts), np.linalg.cholesky(spd_np))
    check("solve", tg.linalg.solve(spd, np.ones(40)).compute(**opts),
          np.linalg.solve(spd_np, np.ones(40)))
    q, r_ = tg.compute(*tg.linalg.qr(x), **opts)
    check("qr", None if q is None else q @ r_, x_np)
    # the tiled SVD's values: the band reduced across ranks, the band's stages on one
    check("svd-values", tg.linalg.svd(spd, compute_uv=False).compute(**opts),
          np.linalg.svd(spd_np, compute_uv=False))
    import scipy.sparse as sps

    s_np = sps.random_array((45, 30), density=0.2, rng=4, format="csr")
    s = tg.from_scipy(s_np, chunks=(12, 9))
    check("sparse-matmul", (s @ x_np[:30, :7]).compute(**opts), s_np @ x_np[:30, :7])

    # each rank keeps its own memory budget and spills beyond it
    big_np = rng.random((96, 96))
    # a user's function is not remade (its cost is unknown): spilled, not dropped
    big = tg.from_numpy(big_np, chunks=16).map_blocks(np.add, 0.5)
    spilled = ((big @ big) + big).compute(memory_limit=16 * 16 * 8 * 6, **opts)
    big_np = big_np + 0.5
    check("matmul-under-a-tight-budget", spilled, big_np @ big_np + big_np)
    checks["spilled"] = comm.allreduce(tg.last_run().spilled_bytes) > 0

    # a dask-style graph through get(): literal data is known to every rank
    from operator import add, mul
    got = tg.get({"x": 2, "y": (add, "x", 1), "z": (mul, "y", "x"), "w": (add, "z", "y")},
                 "w", backend="mpi")
    checks["get"] = got == 9

    # writes gather on rank 0, which commits the file; the other ranks leave nothing behind
    folder = comm.bcast(tempfile.mkdtemp() if rank == 0 else None, root=0)
    path = os.path.join(folder, "out.npy")
    tg.to_npy(x * 2, path, backend="mpi")
    comm.Barrier()
    if rank == 0:
        checks["to_npy"] = bool(np.allclose(np.load(path), x_np * 2))
        checks["to_npy-no-temp"] = sorted(os.listdir(folder)) == ["out.npy"]

    # bytes sent equal the communication volume the placement implies
    a = tg.random.random((64, 64), chunks=16, seed=1)
    b = tg.random.random((64, 64), chunks=16, seed=2)
    c = a @ b
    plan = plan_arrays([c], processes=comm.Get_size())
    predicted, _ = communication_volume(plan.graph, plan.graph.meta["worker"],
                                        plan.graph.indices(plan.outputs))
    c.compute(backend="mpi")
    sent = comm.allreduce(tg.last_run().bytes_sent)
    checks["bytes-sent-equal-prediction"] = sent == predicted

    # the default budget is the host's default divided among the ranks on the host
    from tilegraph.runtime.budget import default_limit

    checks["default-budget-divided"] = (
        tg.last_run().memory_limit == default_limit(1) // comm.Get_size())

    return {"rank": rank, "size": comm.Get_size(), "checks": checks,
            "received": received, "sent": sent, "predicted": int(predicted)}


def _fail() -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()

    def fails_on_rank_2(x):
        if world().Get_rank() == 2:
            raise ZeroDivisionError("task failed on rank 2")
        return x + 1

    x = tg.from_numpy(np.ones((40, 40)), chunks=10)
    try:
        (x.map_blocks(fails_on_rank_2) @ x).compute(backend="mpi")
    except Exception as exc:
        return {"rank": rank, "error": type(exc).__name__, "message": str(exc),
                "notes": list(getattr(exc, "__notes__", []))}
    return {"rank": rank, "error": None}


def _mismatch() -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    x = tg.from_numpy(np.ones((40, 40 + 10 * rank)), chunks=10)  # rank 1 plans other shapes
    try:
        (x @ x.T).compute(backend="mpi")
    except Exception as exc:
        return {"rank": rank, "error": type(exc).__name__, "message": str(exc)}
    return {"rank": rank, "error": None}


def _report(path: str) -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    x = tg.from_numpy(np.ones((40, 40)), chunks=10) + 1  # computed blocks: a group-by-join
    (x @ x).compute(backend="mpi", report=path)
    world().Barrier()
    return {"rank": world().Get_rank(), "exists": os.path.exists(path)}


def _admission() -> dict:
    """A large result stays on rank 0; the blocks rank 0 receives are held under its
    budget (beyond it the coldest go to disk), as results made there are."""
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.events import Transfer
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    slept = []
    received = []

    def count(event: object) -> None:
        if isinstance(event, Transfer):
            received.append(event.nbytes)

    def slow_start_on_rank_0(block):
        # rank 0's one worker is busy until 20 blocks of the other rank have arrived (the
        # rank is asked when the task runs: a closure variable `rank` would differ per
        # rank, which the plan check refuses)
        if world().Get_rank() == 0 and not slept and block.shape == (50, 50):
            slept.append(True)
            deadline = time.monotonic() + 30
            while len(received) < 20 and time.monotonic() < deadline:
                time.sleep(0.01)
        return block + 1

    block_bytes = 50 * 50 * 8
    big = tg.random.random((400, 400), chunks=50, seed=5)  # 1.2 MiB: above the broadcast limit
    budget = 12 * block_bytes
    got = big.map_blocks(slow_start_on_rank_0).compute(backend="mpi", memory_limit=budget,
                                                       workers=1, callbacks=[count])
    run = tg.last_run()
    out = {"rank": rank, "is_none": got is None, "peak": run.peak_bytes, "budget": budget,
           "block": block_bytes, "spilled": run.spilled_bytes}
    if rank == 0:
        out["equal"] = bool(np.allclose(got, big.compute(backend="threads") + 1))
    return out


def _watchdog() -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    x = tg.from_numpy(np.ones((40, 40)), chunks=10)
    t0 = time.monotonic()
    if rank == 0:  # the natural mistake: only rank 0 computes
        try:
            (x @ x).sum().compute(backend="mpi", mpi_timeout=3)
        except Exception as exc:
            return {"rank": rank, "error": type(exc).__name__, "message": str(exc),
                    "seconds": time.monotonic() - t0}
    return {"rank": rank, "error": None, "seconds": time.monotonic() - t0}


def _data() -> dict:
    """Inputs that differ per rank: refused with an error naming them, unless rank 0's are
    asked for (``root=0``); unseeded random arrays are no mix."""
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    os.environ["TILEGRAPH_BACKEND"] = "mpi"
    out: dict = {"rank": rank}
    data = np.random.default_rng().random((400, 400))  # unseeded: differs per rank
    out["own"] = float(data.sum())
    x = tg.from_numpy(data, chunks=100)
    for name, arr in [("sum", x.sum()), ("gram", (x @ x.T).sum()),
                      ("scalar", (tg.ones((40, 40), chunks=10) * (rank + 1)).sum())]:
        try:
            out[name] = float(arr.compute())
        except ValueError as exc:
            out[name] = str(exc)
    for dtype in (np.float32, np.int64):
        mine = (data * 100).astype(dtype) if rank == 0 else None  # only rank 0 has it
        y = tg.from_numpy(mine, chunks=(128, 90), root=0)
        out[f"root-{np.dtype(dtype).name}"] = [float(y.sum().compute()),
                                               float(y[3:, 7:].T.sum(axis=0).max().compute())]
        if rank == 0:
            out[f"want-{np.dtype(dtype).name}"] = [float(mine.sum()),
                                                   float(mine[3:, 7:].T.sum(axis=0).max())]
    out["random"] = float(tg.random.random((300, 300), chunks=100).sum().compute())
    out["rng"] = float(tg.random.default_rng().standard_normal((300, 300), chunks=100)
                       .sum().compute())
    try:
        tg.from_numpy(np.ones(3), root=7)
    except ValueError as exc:
        out["bad_root"] = str(exc)
    return out


_OFFSET = 0.0  # set per rank by _closures()


def _add_global(block):
    return block + _OFFSET


def _add_by(block, *, by):
    return block + by


class _Shift:
    def __init__(self, off):
        self.off = off

    def apply(self, block):
        return block + self.off


def _closures() -> dict:
    """Tasks whose functions read values that differ per rank (a closure variable, a
    default, a keyword-only default, a global of the script, a functools.partial keyword,
    the state of the object a method is bound to, a global of a module of the user's
    own): each refused on every rank, naming it, unless rank 0's values are asked for
    (mpi_values='rank0'), which gives rank 0's answer. The same values on every rank (a
    set of strings included, which iterates in another order on each rank) pass."""
    import functools

    import mpi_user_module

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    global _OFFSET
    rank = world().Get_rank()
    off = 10.0 * rank + 1.0  # rank 0: 1.0, so its answer is 20000.0
    _OFFSET = off
    mpi_user_module.OFFSET = off

    def make(k):
        return lambda block: block + k

    def with_default(block, k=off):
        return block + k

    def with_kwdefault(block, *, k=off):
        return block + k

    names = {"alpha", "beta", "gamma", "delta", "epsilon"}  # same on every rank
    table = {name: len(name) for name in names}  # built in each rank's own set order

    def same(block):
        return block + (len(names) + sum(table.values()) == 31)  # + 1.0

    cases = {
        "closure": make(off),
        "default": with_default,
        "kwdefault": with_kwdefault,
        "global": _add_global,
        "partial": functools.partial(_add_by, by=off),
        "method": _Shift(off).apply,
        "module": mpi_user_module.add_offset,
        "same-closure": make(1.0),
        "same-set": same,
    }
    x = tg.ones((100, 100), chunks=50)
    out: dict = {"rank": rank}
    for name, fn in cases.items():
        for values in ("same", "rank0"):
            try:
                got = x.map_blocks(fn).sum().compute(backend="mpi", mpi_values=values,
                                                      mpi_timeout=30)
                out[f"{name}/{values}"] = {"value": float(got)}
            except Exception as exc:
                out[f"{name}/{values}"] = {"error": type(exc).__name__, "message": str(exc)}
    return out


class _Skip(Exception):
    pass


def _missing(step: int) -> dict:
    """Rank 1 leaves before the ``step``-th collective step of one compute() (0: it never
    calls compute(), so tilegraph's communicator is never made on it); the other ranks
    report what they raised and after how long."""
    import numpy as np
    from mpi4py import MPI

    import tilegraph as tg
    from tilegraph.runtime import mpi_steps

    rank = MPI.COMM_WORLD.Get_rank()
    x = tg.from_numpy(np.ones((40, 40)), chunks=10)
    if rank == 1:
        if step == 0:
            return {"rank": rank, "error": None}
        begin = mpi_steps.Steps._begin
        seen = [0]

        def leave_at(self):  # the step-th step after the set-up is never taken
            if _comm_cache_ready(mpi_steps):
                seen[0] += 1
                if seen[0] == step:
                    raise _Skip
            return begin(self)

        mpi_steps.Steps._begin = leave_at
    t0 = time.monotonic()
    try:
        got = (x @ x).sum().compute(backend="mpi", mpi_timeout=2)
    except _Skip:
        return {"rank": rank, "error": None}
    except Exception as exc:
        return {"rank": rank, "error": type(exc).__name__, "message": str(exc),
                "seconds": time.monotonic() - t0}
    return {"rank": rank, "error": None, "value": float(got), "seconds": time.monotonic() - t0}


def _comm_cache_ready(mpi_steps) -> bool:
    """Whether the communicator's set-up (its own first step) is over."""
    return "comm" in mpi_steps.comm_cache


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "values"
    if mode == "fail":
        out = _fail()
    elif mode == "mismatch":
        out = _mismatch()
    elif mode == "report":
        out = _report(sys.argv[2])
    elif mode == "admission":
        out = _admission()
    elif mode == "watchdog":
        out = _watchdog()
    elif mode == "data":
        out = _data()
    elif mode == "missing":
        out = _missing(int(sys.argv[2]))
    elif mode == "closures":
        out = _closures()

    else:
        out = _values()
    print("RESULT " + json.dumps(out), flush=True)
