"""``bench/rechunk_budget.py`` at a tiny size: it runs its cases under limits of a few
blocks, prints the plan's largest task and the bytes held against the limit, and exits 0
only when every run met the goal."""

import os
import subprocess
import sys

from _bench_modules import BENCH


def test_bench_rechunk_budget_runs_and_meets_its_goal(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(BENCH.parent))  # this checkout's tilegraph
    proc = subprocess.run([sys.executable, str(BENCH / "rechunk_budget.py"), "--case",
                           "issue", "uneven", "--blocks", "3", "--scale", "0.02"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("issue", "uneven"))]
    assert len(rows) == 2 and all(row.endswith("/ met") for row in rows), proc.stdout
    assert "rechunk-store" in proc.stdout
    bad = subprocess.run([sys.executable, str(BENCH / "rechunk_budget.py"), "--blocks", "0"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "must be positive" in bad.stderr
