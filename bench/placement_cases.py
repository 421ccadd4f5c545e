"""Placement of matrix @ vector, X.T @ X and a square matmul, simulated (nothing is computed).

Each case is planned as ``explain(workers=p)`` plans it (lowered, placed on ``p`` workers,
fused) and run through the simulator with the default cost model. Printed per case: the
bytes moved between workers as a fraction of the big operand (the gather of the result to
worker 0 included), the simulated utilisation, the makespan, and the goal beside them.

- ``A @ v``: A 16000 x 16000 in blocks of 1000, p = 4. Goal: <= 5% of A moved (each
  product runs where its block of A lives; v is broadcast, partial sums are small).
- ``X.T @ X``: X 2,000,000 x 100 in row blocks of 125,000, p = 16. Goal: <= 2% of X moved,
  utilisation >= 50% (local products where X's blocks live, a tree of 100 x 100 partials).
- ``A @ B``, for comparison: 16000 x 16000 in blocks of 1000, p = 16, on the SUMMA grid:
  every block of A and B travels to the other ``sqrt(p) - 1`` workers of its grid row or
  column, so SUMMA moves ``sqrt(p) - 1`` times each operand. The fraction is of A and B
  together; the goal (within 1.1x of SUMMA) is checked on the volume without the gather of
  C, which is the same for any placement that computes C where SUMMA does.

Run: ``python bench/placement_cases.py``.
"""

from __future__ import annotations

import math
import time

import numpy as np

import tilegraph as tg
from tilegraph.algebra.demand import lower
from tilegraph.array.lowering import plan_arrays
from tilegraph.plan.place import place
from tilegraph.plan.simulate import communication_volume, simulate


def simulated(result, p: int):
    """(simulation, tasks, planning seconds) of ``result`` placed on ``p`` workers."""
    t0 = time.perf_counter()
    plan = plan_arrays([result], processes=p)
    g = plan.graph
    where = np.asarray(g.meta["worker"], dtype=np.int64)
    planned = time.perf_counter() - t0
    return simulate(g, where, p, outputs=g.indices(plan.outputs)), len(g), planned


def ungathered(result, p: int) -> int:
    """Bytes the placement of ``result`` moves, without the stores that gather it."""
    g = lower([result.collection]).build()
    return communication_volume(g, place(g, p), gather_to=None)[0]


def row(name: str, p: int, result, big_bytes: int, goal_moved: float,
        goal_util: float | None, gather_in_goal: bool = True) -> bool:
    sim, ntasks, planned = simulated(result, p)
    moved = sim.bytes_moved / big_bytes
    checked = moved if gather_in_goal else ungathered(result, p) / big_bytes
    ok = checked <= goal_moved and (goal_util is None or sim.utilisation >= goal_util)
    util_goal = f">= {goal_util:.0%}" if goal_util is not None else "-"
    moved_goal = f"<= {goal_moved:.0%}" if gather_in_goal else "(below)"
    print(f"{name:<9} {p:>3} {ntasks:>6} {moved:>9.2%} {moved_goal:>9} "
          f"{sim.utilisation:>6.0%} {util_goal:>6} {sim.makespan:>9.3f}s {planned:>7.2f}s "
          f"{'met' if ok else 'NOT met':>8}")
    if not gather_in_goal:
        print(f"{'':<9} moved without the gather of the result: {checked:.2%} "
              f"(goal <= {goal_moved:.0%})")
    return ok


def main() -> int:
    print(f"{'case':<9} {'p':>3} {'tasks':>6} {'moved':>9} {'goal':>9} {'util':>6} "
          f"{'goal':>6} {'makespan':>10} {'plan':>8} {'status':>8}")
    ok = True
    a = tg.random.random((16000, 16000), chunks=1000, seed=1)
    v = tg.random.random((16000,), chunks=1000, seed=2)
    ok &= row("A @ v", 4, a @ v, a.nbytes, 0.05, None)
    x = tg.random.random((2_000_000, 100), chunks=(125_000, 100), seed=3)
    ok &= row("X.T @ X", 16, x.T @ x, x.nbytes, 0.02, 0.5)
    b = tg.random.random((16000, 16000), chunks=1000, seed=4)
    p = 16
    summa = math.isqrt(p) - 1  # times each operand travels under SUMMA
    ok &= row("A @ B", p, a @ b, a.nbytes + b.nbytes, summa * 1.1, None,
              gather_in_goal=False)
    print(f"{'':<9} SUMMA moves {summa:.0%} of A and B (goal: at most 1.1x that)")
    print("goals:", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
