"""The main job of ``make run``: an Array program, an out-of-core matrix product of two
``.npy`` files, run with a progress bar, checked against NumPy, and measured fairly: the
input files are written before any timing, NumPy is timed on the product of the arrays
already in memory (and, separately, on loading them), tilegraph on reading the files block by
block and multiplying. An HTML report of the run (task stream, memory over time, plan) is
written and its path printed. A tree reduction of 100,000 tiny tasks then measures the
scheduler itself.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Hashable
from typing import Any

import numpy as np


def fan_in_graph(width: int) -> dict:
    """A binary tree reduction over ``width`` leaves: a graph of small tasks that measures the
    scheduler itself."""
    dsk: dict[Hashable, Any] = {("leaf", i): (float, i) for i in range(width)}
    level, names = 0, [("leaf", i) for i in range(width)]
    while len(names) > 1:
        level += 1
        nxt = []
        for p in range(0, len(names), 2):
            key = ("sum", level, p // 2)
            dsk[key] = (sum, names[p : p + 2])
            nxt.append(key)
        names = nxt
    dsk["root"] = names[0]
    return dsk


def write_inputs(directory: str, n: int, seed: int = 0) -> tuple[str, str]:
    """Two n x n random float64 matrices saved as ``a.npy`` and ``b.npy`` in ``directory``."""
    rng = np.random.default_rng(seed)
    paths = []
    for name in ("a", "b"):
        path = os.path.join(directory, f"{name}.npy")
        np.save(path, rng.random((n, n)))
        paths.append(path)
    return paths[0], paths[1]


def main(n: int = 4000, block: int = 1000, backend: str = "threads",
         workers: int | None = None, report: str | None = None,
         progress: bool | str = True, tree_width: int = 100_000) -> int:
    """Run the demo; returns 0 when every result matches NumPy."""
    import tilegraph as tg

    gflop = 2.0 * n**3 / 1e9
    print(f"tilegraph {tg.__version__}: C = A @ B for n={n} from .npy files, blocks of "
          f"{block}, backend {backend}")
    with tempfile.TemporaryDirectory(prefix="tilegraph-demo-") as tmp:
        path_a, path_b = write_inputs(tmp, n)  # not timed, for either system
        report = report or os.path.join(os.getcwd(), "tilegraph-demo-report.html")

        a = tg.from_npy(path_a, chunks=block)
        b = tg.from_npy(path_b, chunks=block)
        c = a @ b
        print(f"  plan             {c.ntasks} tasks before fusion; the program:\n"
              "                   a = tg.from_npy('a.npy', chunks=block)\n"
              "                   b = tg.from_npy('b.npy', chunks=block)\n"
              "                   c = (a @ b).compute(progress=True, report=...)")
        t0 = time.perf_counter()
        got = c.compute(backend=backend, workers=workers, progress=progress, report=report)
        t_tg = time.perf_counter() - t0

        t0 = time.perf_counter()
        na, nb = np.load(path_a), np.load(path_b)
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        want = na @ nb
        t_np = time.perf_counter() - t0
        ok = bool(np.allclose(got, want, rtol=1e-10, atol=1e-8))
        del got

        # the same product from arrays already in memory: tilegraph against NumPy's a @ b
        xa, xb = tg.from_numpy(na, chunks=block), tg.from_numpy(nb, chunks=block)
        t0 = time.perf_counter()
        got_mem = (xa @ xb).compute(backend=backend, workers=workers, progress=False)
        t_mem = time.perf_counter() - t0
        ok = ok and bool(np.allclose(got_mem, want, rtol=1e-10, atol=1e-8))
        del got_mem, want, na, nb

    print(f"  tilegraph        {t_tg:8.3f} s  {gflop / t_tg:7.1f} GFLOP/s  (reads the .npy "
          "files block by block)")
    print(f"  numpy            {t_np:8.3f} s  {gflop / t_np:7.1f} GFLOP/s  (a @ b of arrays "
          f"in memory; np.load took {t_load:.3f} s more)")
    print(f"  tilegraph, in memory {t_mem:4.3f} s  {gflop / t_mem:7.1f} GFLOP/s  "
          f"({t_np / t_mem:.2f}x numpy's a @ b)")
    print(f"  from files vs numpy load + a @ b  {(t_load + t_np) / t_tg:.2f}x")
    print(f"  matches numpy    {ok}")
    print(f"  report           {report}")

    width = tree_width
    tree = fan_in_graph(width)
    t0 = time.perf_counter()
    total = tg.get(tree, "root", backend=backend, workers=workers)
    t_tree = time.perf_counter() - t0
    tree_ok = total == float(sum(range(width)))
    print(f"  tree reduction   {len(tree)} tasks in {t_tree:.3f} s = "
          f"{len(tree) / t_tree:,.0f} tasks/s ({t_tree / len(tree) * 1e6:.1f} us/task), "
          f"correct: {tree_ok}")
    return 0 if ok and tree_ok else 1
