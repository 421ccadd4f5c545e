"""Two plans on one backend object, driven through the backend seam by its contract.

Used by ``tests/runtime/test_seam.py`` on every backend, and run on every MPI rank by it
(``python -m mpi4py seam_checks.py``: each rank prints one line ``RESULT <json>``; rank 0
compares the results with NumPy).

:func:`interleaved` partitions both plans on the one backend object and makes both
transports before either runs, then runs the later one first: a backend that kept a run on
itself (a partition's data read back by ``transport`` or ``run``) would run one plan with
the other's. :func:`at_once` has two threads compute at the same time on the one object,
each waiting after its partition until the other has partitioned too.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np

TIMEOUT = 90.0  # seconds a run of these small programs may take at most


def programs() -> list[tuple[list[Any], list[np.ndarray]]]:
    """Two programs of different shapes, op kinds and dtypes, with uneven edge blocks:
    ``(arrays, their values by NumPy)`` each. The same on every MPI rank (seeded)."""
    import tilegraph as tg

    rng = np.random.default_rng(11)
    a = rng.random((23, 17))
    b = rng.random((17, 9))
    c = rng.integers(-50, 50, size=(31, 6)).astype(np.int64)
    f = rng.random((19,)).astype(np.float32)
    x = tg.from_numpy(a, chunks=(7, 5))
    y = tg.from_numpy(b, chunks=(5, 4))
    z = tg.from_numpy(c, chunks=(8, 4))
    v = tg.from_numpy(f, chunks=6)
    return [([x @ y + 1, (x * 2).sum(axis=0)], [a @ b + 1, (a * 2).sum(axis=0)]),
            ([z * 3 - 1, z.max(axis=1), (v * v).sum()],
             [c * 3 - 1, c.max(axis=1), (f * f).sum()])]


def planned(arrays: list[Any], backend: Any) -> tuple[Any, Any]:
    """The pipeline's plan of ``arrays`` for ``backend`` (placed on its processes when it
    has several), and how the outputs' values become the arrays' values."""
    from tilegraph import pipeline
    from tilegraph.array.lowering import lower_arrays

    graph, results = lower_arrays(arrays)
    processes = backend.processes if backend.processes > 1 else None
    plan = pipeline.make_plan(graph, results.keys, processes=processes, backend=backend)
    return plan, results


def run_part(backend: Any, part: Any, transport: Any, timeout: float = TIMEOUT
             ) -> list[Any] | None:
    """Run ``part`` (made by ``backend.partition``) as the seam's contract says: an
    executor of the part, ``transport`` (made by ``backend.transport(part)``) around
    ``backend.run(part, execution)``; the outputs' values (``None`` where the part does not
    return them). A run not over after ``timeout`` seconds is cancelled (a run given
    another run's data may wait forever for results that never come)."""
    from tilegraph.runtime.core import Execution

    ex = Execution(part.graph, part.outputs, part.priority, external=part.external,
                   exported=part.exported,
                   on_export=None if transport is None else transport.export)
    watchdog = threading.Timer(timeout, ex.cancel, [TimeoutError(
        f"the run of {len(part.graph)} tasks did not end in {timeout:g} s")])
    watchdog.start()
    try:
        if transport is None:
            backend.run(part, ex)
        else:
            with transport.connect(ex):
                backend.run(part, ex)
        if ex.error is not None:
            raise ex.error
        return ex.output_values() if part.returns else None
    finally:
        watchdog.cancel()
        ex.clear()


def interleaved(backend: Any, progs: list[tuple[list[Any], list[np.ndarray]]]
                ) -> list[list[Any] | None]:
    """Both programs on ``backend``: both partitioned, both transports made, then the
    second run before the first. The arrays' values of each (``None`` where this process
    does not return them)."""
    made = [planned(arrays, backend) for arrays, _ in progs]
    parts = [backend.partition(plan.graph, plan.outputs, plan.priority) for plan, _ in made]
    transports = [backend.transport(part) for part in parts]
    got: list[list[Any] | None] = [None] * len(progs)
    for k in reversed(range(len(progs))):
        values = run_part(backend, parts[k], transports[k])
        got[k] = None if values is None else made[k][1].assemble(values)
    return got


def at_once(backend: Any, progs: list[tuple[list[Any], list[np.ndarray]]],
            compute: Any, timeout: float = TIMEOUT) -> list[Any]:
    """``compute(k)`` for every program ``k`` at the same time, one thread each, with the
    one ``backend``: each thread, once its run has partitioned its plan, waits until every
    other run has partitioned its own (so the runs overlap from partition to the end).
    The values of each; the first error raised is raised here."""
    barrier = threading.Barrier(len(progs), timeout=timeout)
    partition = type(backend).partition

    def partition_then_wait(graph: Any, outputs: Any, priority: Any) -> Any:
        part = partition(backend, graph, outputs, priority)
        barrier.wait()
        return part

    got: list[Any] = [None] * len(progs)
    errors: list[BaseException] = []

    def go(k: int) -> None:
        try:
            got[k] = compute(k)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    backend.partition = partition_then_wait  # (on this object only, for the test)
    try:
        threads = [threading.Thread(target=go, args=(k,), daemon=True)
                   for k in range(len(progs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
        assert not any(t.is_alive() for t in threads), "a run did not end"
    finally:
        del backend.partition
    if errors:
        raise errors[0]
    return got


def same(got: list[Any], want: list[np.ndarray]) -> bool:
    """Whether the arrays' values equal NumPy's (shape, dtype kind and values)."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g)
        rtol = 1e-5 if w.dtype == np.float32 else 1e-12
        if g.shape != w.shape or g.dtype.kind != w.dtype.kind or not np.allclose(
                g, w, rtol=rtol):
            return False
    return True


def _mpi_ranks() -> dict:
    """On every rank: the two programs interleaved on one MPI backend object, twice (the
    second time in the other order), and a plain Partition refused by its transport."""
    from tilegraph.runtime.backends import Partition, make_backend

    backend = make_backend("mpi")
    rank = backend.rank
    progs = programs()
    checks: dict[str, bool] = {}
    got = interleaved(backend, progs)
    if rank == 0:
        for k, (_, want) in enumerate(progs):
            checks[f"interleaved-{k}"] = same(got[k], want)
    else:
        checks["others-return-nothing"] = got == [None, None]
    got = interleaved(backend, progs[::-1])  # again, on the same object, the other way
    if rank == 0:
        for k, (_, want) in enumerate(progs[::-1]):
            checks[f"again-{k}"] = same(got[k], want)
    plan, _ = planned(progs[0][0], backend)
    try:
        backend.transport(Partition(plan.graph, list(plan.outputs), plan.priority))
        checks["plain-partition-refused"] = False
    except TypeError as exc:
        checks["plain-partition-refused"] = "RankPartition" in str(exc)
    return {"rank": rank, "size": backend.processes, "checks": checks}


if __name__ == "__main__":
    print("RESULT " + json.dumps(_mpi_ranks()), flush=True)
