"""Run on every rank by tests/array/test_rechunking.py (mpiexec -n 2): rechunks under a
memory limit of a few blocks per rank with the MPI backend; prints one ``RESULT <json>``
line with each run's record (``tg.last_run()``: this rank's peak and staged bytes) and
whether its values are NumPy's (checked on rank 0, which gets them)."""

from __future__ import annotations

import json

# (shape, old blocks, new blocks, dtype, limit in blocks)
CASES = [
    ((400, 600), (400, 10), (10, 600), "float64", 3),
    ((62, 73, 144), (31, -1, -1), (-1, 10, 10), "float32", 4),
    ((301, 399), (37, 51), (49, 29), "complex128", 5),
]


def main() -> dict:
    import numpy as np

    import tilegraph as tg
    from tilegraph.array.rechunking import smallest_limit
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    runs = []
    for shape, old, new, dtype, blocks in CASES:
        x = (np.arange(np.prod(shape)).reshape(shape) % 97).astype(dtype)
        a = tg.from_numpy(x, chunks=old) + np.zeros((), dtype)
        y = a.rechunk(new)
        block = x.itemsize * max(int(np.prod([max(c) for c in a.chunks])),
                                 int(np.prod([max(c) for c in y.chunks])))
        limit = max(blocks * block, smallest_limit(a.chunks, y.chunks, x.itemsize))
        got = y.sum(axis=0).compute(backend="mpi", memory_limit=limit, progress=False)
        run = tg.last_run()
        runs.append({"limit": run.memory_limit, "peak": run.peak_bytes, "block": block,
                     "staged": run.staged_bytes, "processes": run.processes,
                     "equal": bool(got is not None
                                   and np.allclose(got, x.sum(axis=0), rtol=1e-5))})
    return {"rank": rank, "runs": runs}


if __name__ == "__main__":
    print("RESULT " + json.dumps(main()), flush=True)
