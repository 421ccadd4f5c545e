"""Run on every rank by tests/array/test_mpi_data_dependent.py: data-dependent shapes (masks,
nonzero, unique, sample sort, item assignment) under the MPI backend; prints one
``RESULT <json>`` line."""

from __future__ import annotations

import json


def main() -> None:
    import numpy as np

    import tilegraph as tg
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    a = np.random.default_rng(5).random((23, 9))
    checks = {}
    with tg.config.set(backend="mpi", progress=False):
        x = tg.from_numpy(a, chunks=(5, 4))
        got = tg.compute(x[x > 0.5], x[:, [7, 0, 2]], np.sort(x.ravel()),
                         tg.unique((x * 4).astype(int)), np.nonzero(x > 0.9)[1],
                         np.cumsum(x, axis=0))
        want = (a[a > 0.5], a[:, [7, 0, 2]], np.sort(a.ravel()),
                np.unique((a * 4).astype(int)), np.nonzero(a > 0.9)[1], np.cumsum(a, axis=0))
        names = ["mask", "take", "sort", "unique", "nonzero", "cumsum"]
        for name, g, w in zip(names, got, want, strict=True):
            checks[name] = bool(g is not None and np.shape(g) == w.shape
                                and np.allclose(g, w))
        checks["mask-shape"] = x[x > 0.5].shape == (int((a > 0.5).sum()),)
        # item assignment: a lazy mask (scalar, then one value per true element: its
        # mask is computed first), an integer array given lazily, several advanced indices
        y = x.copy()
        y[y > 0.8] = 0.0
        y[y > 0.6] = np.arange(int(((a > 0.6) & (a <= 0.8)).sum()), dtype=float)
        y[:, tg.asarray(np.array([8, 1]))] = -1.0
        b = a.copy()
        b[b > 0.8] = 0.0
        b[b > 0.6] = np.arange(int((b > 0.6).sum()), dtype=float)
        b[:, [8, 1]] = -1.0
        checks["setitem"] = bool(np.allclose(y.compute(), b))
        checks["several-advanced"] = bool(np.allclose(
            x[[3, 0, 22], [8, 1, 0]].compute(), a[[3, 0, 22], [8, 1, 0]]))
    print("RESULT " + json.dumps({"rank": rank, "checks": checks}), flush=True)


if __name__ == "__main__":
    main()
