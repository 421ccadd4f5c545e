"""Data-dependent shapes under the MPI backend: every rank runs the size pass and plans the
same result (mpiexec -n 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py")

from tilegraph.cli import mpiexec_command

SCRIPT = Path(__file__).with_name("mpi_data_dependent.py")
ROOT = Path(__file__).resolve().parents[2]


def test_masks_sort_unique_nonzero_under_mpi():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run([*mpiexec_command(2), sys.executable, "-m", "mpi4py", str(SCRIPT)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = sorted((json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
                      if line.startswith("RESULT ")), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["checks"] and all(r["checks"].values()), r
