"""The main job of ``make run``: an Array program, an out-of-core matrix product of two
``.npy`` files, run with a progress bar, checked against NumPy, and measured fairly: the
input files are written before any timing, NumPy is timed on the product of the arrays
already in memory (and, separately, on loading them), tilegraph on reading the files block by
block and multiplying, and on the same product of the arrays in memory. Each is timed
several times (``repeat``, 3 by default): the best time is printed with the spread, and the
ratios are those of the best times. An HTML report of the run (task stream, memory over
time, plan) is written and its path printed. A tree reduction over 100,000 leaves (200,007
tiny tasks) then measures the scheduler itself.

The demo needs the core package only (``pip install -e .``, what ``make run`` installs):
neither dask nor any other extra.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Hashable
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


def timed(fn: Callable[[int], Any], repeat: int) -> tuple[Any, list[float]]:
    """Call ``fn(i)`` for i = 0 .. repeat - 1 and time each call; returns the last call's
    result (the earlier ones are dropped before the next call starts) and the seconds of
    every call."""
    result, seconds = None, []
    for i in range(repeat):
        result = None
        t0 = time.perf_counter()
        result = fn(i)
        seconds.append(time.perf_counter() - t0)
    return result, seconds


def seconds_text(seconds: list[float]) -> str:
    """The best time and the spread of ``seconds``: ``"1.2340 s (1.2340-1.3010)"``, or
    ``"1.2340 s (one run)"``."""
    best, worst = min(seconds), max(seconds)
    spread = "one run" if len(seconds) == 1 else f"{best:.4f}-{worst:.4f}"
    return f"{best:.4f} s ({spread})"


def main(n: int = 4000, block: int = 1000, backend: str = "threads",
         workers: int | None = None, report: str | None = None,
         progress: bool | str = True, tree_width: int = 100_000, repeat: int = 3) -> int:
    """Run the demo; returns 0 when every result matches NumPy. Each system is timed
    ``repeat`` times; the best time is printed with the spread (fastest-slowest), and the
    ratios are those of the best times. The progress bar is shown on the first run only;
    the report is written by every run (the last one stays)."""
    import tilegraph as tg

    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {repeat}")
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
        got, t_tg = timed(lambda i: c.compute(backend=backend, workers=workers,
                                              progress=progress if i == 0 else False,
                                              report=report), repeat)
        (na, nb), t_load = timed(lambda i: (np.load(path_a), np.load(path_b)), repeat)
        want, t_np = timed(lambda i, x=na, y=nb: x @ y, repeat)
        ok = bool(np.allclose(got, want, rtol=1e-10, atol=1e-8))
        del got

        # the same product from arrays already in memory: tilegraph against NumPy's a @ b
        xa, xb = tg.from_numpy(na, chunks=block), tg.from_numpy(nb, chunks=block)
        got_mem, t_mem = timed(lambda i: (xa @ xb).compute(backend=backend, workers=workers,
                                                           progress=False), repeat)
        ok = ok and bool(np.allclose(got_mem, want, rtol=1e-10, atol=1e-8))
        del got_mem, want, na, nb

    print("  each system timed once" if repeat == 1 else
          f"  each system timed {repeat} times: the best time, then the spread (fastest-slowest)")
    rows = [("tilegraph, from files", t_tg, True, "reads the .npy files block by block"),
            ("numpy np.load", t_load, False, "both files into memory"),
            ("numpy a @ b", t_np, True, "of the arrays in memory"),
            ("tilegraph, in memory", t_mem, True, "of the same arrays, from_numpy")]
    for name, seconds, product, what in rows:
        rate = f"{gflop / min(seconds):6.1f} GFLOP/s" if product else " " * 14
        print(f"  {name:<22} {seconds_text(seconds):<26} {rate}  {what}")
    print("  speed from the best times (numpy's seconds / tilegraph's; above 1: tilegraph "
          "is faster)")
    print(f"    in memory, vs numpy a @ b             "
          f"{min(t_np) / min(t_mem):.2f}x")
    print(f"    from files, vs numpy np.load + a @ b  "
          f"{(min(t_load) + min(t_np)) / min(t_tg):.2f}x")
    print(f"  matches numpy    {ok}")
    print(f"  report           {report}")

    width = tree_width
    tree = fan_in_graph(width)
    totals, t_tree = timed(lambda i: tg.get(tree, "root", backend=backend, workers=workers),
                           repeat)
    tree_ok = totals == float(sum(range(width)))
    best = min(t_tree)
    print(f"  tree reduction   {len(tree)} tasks in {seconds_text(t_tree)} = "
          f"{len(tree) / best:,.0f} tasks/s ({best / len(tree) * 1e6:.1f} us/task), "
          f"correct: {tree_ok}")
    return 0 if ok and tree_ok else 1
