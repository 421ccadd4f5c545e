"""The memory limit under MPI (mpiexec -n 2, 4): each rank plans for the limit it enforces
(the host's default divided among the ranks on it, or the one given, per process), and
holds at most that limit and one block.

Each test launches ``tests/runtime/mpi_limits.py`` on every rank and reads the one
``RESULT`` line each rank prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from tilegraph.cli import mpiexec_command

SCRIPT = Path(__file__).with_name("mpi_limits.py")
ROOT = Path(__file__).resolve().parents[2]


def mpirun(n: int) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run([*mpiexec_command(n), sys.executable, "-m", "mpi4py", str(SCRIPT)],
                          capture_output=True, text=True, timeout=240, env=env)
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
               if line.startswith("RESULT ")]
    return proc, sorted(results, key=lambda r: r["rank"])


@pytest.mark.parametrize("n", [2, 4])
def test_each_rank_plans_for_and_holds_to_its_own_limit(n):
    proc, results = mpirun(n)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["rank"] for r in results] == list(range(n))
    for r in results:
        # planned for the host's whole budget, the pieces would wait in memory; planned
        # for a rank's share (what the run does), they go through the store on disk
        assert "rechunk-store" not in r["host_plan"] and "rechunk-split" in r["host_plan"]
        assert "rechunk-store" in r["rank_plan"], r["rank_plan"]
        default = r["rechunk_default"]
        assert default["limit"] == r["default"] // n  # the rank's share, enforced
        assert default["processes"] == n
        assert r["rechunk_given"]["limit"] == 3_000_000  # given: per process as it is
        assert r["matmul"]["limit"] == 1_000_000
        for name in ("rechunk_default", "rechunk_given", "matmul"):
            run = r[name]
            assert run["peak"] <= run["limit"] + run["block"], (r["rank"], name, run)
            assert run["equal"] in (True, None), (r["rank"], name)
    assert results[0]["rechunk_default"]["equal"] is True  # 2 MiB: on rank 0 only
    for name, nbytes in (("rechunk_default", 2 << 20), ("rechunk_given", 8 << 20)):
        # every byte staged once, by the rank that holds its old block
        assert sum(r[name]["staged"] for r in results) == nbytes, name
    assert sum(r["matmul"]["spilled"] for r in results) > 0  # it did run out of core
