"""The main job of ``make run``: a blocked matrix product written as a dask-style dict graph,
run by tilegraph, checked against NumPy, with time, tasks/second and GFLOP/s."""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

import numpy as np


def random_block(shape: tuple[int, int], seed: tuple[int, ...]) -> np.ndarray:
    """A block of uniform random numbers; its seed is its position, so it never depends on
    which worker makes it or when."""
    return np.random.default_rng(seed).random(shape)


def block_product_sum(*pairs: np.ndarray) -> np.ndarray:
    """sum_k a_k @ b_k for pairs (a_0, b_0, a_1, b_1, ...), accumulated in one output block."""
    out = pairs[0] @ pairs[1]
    for a, b in zip(pairs[2::2], pairs[3::2], strict=True):
        out += a @ b
    return out


def blocked_matmul_graph(n: int, block: int, seed: int = 0) -> tuple[dict, list[list[Hashable]]]:
    """A dict graph for C = A @ B with random n x n inputs cut into block x block tiles, and
    the keys of C's blocks (a list of rows). Edge blocks are smaller when block does not
    divide n."""
    sizes = [min(block, n - start) for start in range(0, n, block)]
    nb = len(sizes)
    dsk: dict[Hashable, Any] = {}
    for i in range(nb):
        for j in range(nb):
            dsk[("A", i, j)] = (random_block, (sizes[i], sizes[j]), (seed, 0, i, j))
            dsk[("B", i, j)] = (random_block, (sizes[i], sizes[j]), (seed, 1, i, j))
    for i in range(nb):
        for j in range(nb):
            args = []
            for k in range(nb):
                args += [("A", i, k), ("B", k, j)]
            dsk[("C", i, j)] = (block_product_sum, *args)
    return dsk, [[("C", i, j) for j in range(nb)] for i in range(nb)]


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


def main(n: int = 4000, block: int = 1000, backend: str = "threads",
         workers: int | None = None) -> int:
    import tilegraph

    print(f"tilegraph {tilegraph.__version__}: blocked matmul n={n}, blocks {block}, "
          f"backend {backend}")
    dsk, keys = blocked_matmul_graph(n, block)
    t0 = time.perf_counter()
    rows = tilegraph.get(dsk, keys, backend=backend, workers=workers)
    elapsed = time.perf_counter() - t0
    c = np.block([list(r) for r in rows])
    gflop = 2.0 * n**3 / 1e9
    nb = len(keys)
    t0 = time.perf_counter()
    a = np.block([[random_block(*dsk[("A", i, j)][1:]) for j in range(nb)] for i in range(nb)])
    b = np.block([[random_block(*dsk[("B", i, j)][1:]) for j in range(nb)] for i in range(nb)])
    ref = a @ b
    t_numpy = time.perf_counter() - t0
    ok = np.allclose(c, ref, rtol=1e-10, atol=1e-8)
    print(f"  tasks            {len(dsk)}")
    print(f"  tilegraph        {elapsed:8.3f} s  {gflop / elapsed:7.1f} GFLOP/s")
    print(f"  numpy            {t_numpy:8.3f} s  {gflop / t_numpy:7.1f} GFLOP/s "
          f"(same inputs made serially, then a @ b)")
    print(f"  speed vs numpy   {t_numpy / elapsed:8.2f}x")
    print(f"  matches numpy    {ok}")

    width = 100_000
    tree = fan_in_graph(width)
    t0 = time.perf_counter()
    total = tilegraph.get(tree, "root", backend=backend, workers=workers)
    t_tree = time.perf_counter() - t0
    tree_ok = total == float(sum(range(width)))
    print(f"  tree reduction   {len(tree)} tasks in {t_tree:.3f} s = "
          f"{len(tree) / t_tree:,.0f} tasks/s ({t_tree / len(tree) * 1e6:.1f} us/task), "
          f"correct: {tree_ok}")
    return 0 if ok and tree_ok else 1
