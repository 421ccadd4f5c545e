"""numpywren's Table 3 on this machine: Cholesky's explicit task graph against its LambdaPACK
program, at N = 16 ... 512 blocks per side.

Explicit graph (``dag.to_taskgraph()``, up to ``--explicit-max`` blocks): tasks, pickled
bytes, build time. LambdaPACK program: pickled bytes of the bound DAG, bind time, time to
first task (bind + ``starters()``), mean ``children()`` and ``parents()`` time over random
nodes (drawn uniformly), and the time to enumerate every node (N <= 128). Goals: program
bytes constant in N and <= 32 KB; mean children()/parents() <= 20 us; starters() of N = 512
in <= 0.1 s.
Run: ``python bench/lambdapack.py [--sizes 16 32 64 128 256 512] [--explicit-max 64]``.
"""

from __future__ import annotations

import argparse
import pickle
import random
import time

from tilegraph import lambdapack


def random_nodes(dag, count: int, seed: int = 0) -> list:
    """``count`` nodes of a Cholesky DAG drawn uniformly (each statement in proportion to
    its node count), without expanding it."""
    rng = random.Random(seed)
    n = dag.params["N"]
    weights = [dag.count_statement(s.id) for s in dag.statements]
    out = []
    while len(out) < count:
        (sid,) = rng.choices(range(len(weights)), weights=weights)
        k, i, j = (rng.randrange(n) for _ in range(3))
        node = (sid, (k, i, j)[:len(dag.statements[sid].loops)])
        if dag.contains(node):
            out.append(node)
    return out


def mean_time(fn, items) -> float:
    t0 = time.perf_counter()
    for x in items:
        fn(x)
    return (time.perf_counter() - t0) / len(items)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512])
    parser.add_argument("--explicit-max", type=int, default=64,
                        help="largest N whose explicit graph is built")
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    chol = lambdapack.library.cholesky
    print(f"{'N':>5} | {'tasks':>12} {'explicit B':>12} {'build s':>8} | {'program B':>9} "
          f"{'bind ms':>8} {'1st task ms':>11} {'children us':>11} {'parents us':>10} "
          f"{'enumerate s':>11}")
    sizes_bytes = []
    worst_lookup = 0.0
    starters_512 = None
    for n in args.sizes:
        t0 = time.perf_counter()
        dag = chol.bind(N=n)
        t_bind = time.perf_counter() - t0
        t0 = time.perf_counter()
        first = dag.starters()
        t_first = time.perf_counter() - t0 + t_bind
        if n == 512:
            starters_512 = t_first
        nbytes = len(pickle.dumps(dag))
        sizes_bytes.append(nbytes)
        sample = random_nodes(dag, args.samples)
        t_children = mean_time(dag.children, sample)
        t_parents = mean_time(dag.parents, sample)
        worst_lookup = max(worst_lookup, t_children, t_parents)
        tasks = dag.count()
        if n <= 128:
            t0 = time.perf_counter()
            sum(1 for _ in dag.nodes())
            t_enum = f"{time.perf_counter() - t0:11.3f}"
        else:
            t_enum = f"{'-':>11}"
        if n <= args.explicit_max:
            t0 = time.perf_counter()
            graph = dag.to_taskgraph(name="c")
            t_build = time.perf_counter() - t0
            explicit = len(pickle.dumps(graph))
            exp = f"{explicit:12,d} {t_build:8.2f}"
        else:
            exp = f"{'-':>12} {'-':>8}"
        assert first == [(0, (0,))]
        print(f"{n:5d} | {tasks:12,d} {exp} | {nbytes:9,d} {t_bind * 1e3:8.2f} "
              f"{t_first * 1e3:11.2f} {t_children * 1e6:11.1f} {t_parents * 1e6:10.1f} {t_enum}")
    constant = max(sizes_bytes) - min(sizes_bytes) <= 8 and max(sizes_bytes) <= 32 * 1024
    print(f"program bytes constant and <= 32 KB: {max(sizes_bytes):,d} B "
          f"({'meets' if constant else 'MISSES'})")
    print(f"mean children()/parents() <= 20 us: worst {worst_lookup * 1e6:.1f} us "
          f"({'meets' if worst_lookup <= 20e-6 else 'MISSES'})")
    if starters_512 is not None:
        print(f"starters() of N = 512 <= 0.1 s: {starters_512:.3f} s "
              f"({'meets' if starters_512 <= 0.1 else 'MISSES'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
