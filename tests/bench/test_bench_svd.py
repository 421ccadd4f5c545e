"""``bench/svd.py`` at a tiny size: it runs, prints the ratios and the errors of s, and
exits 0 only when they are within 1e-10."""

import os
import re
import subprocess
import sys

from _bench_modules import BENCH


def test_bench_svd_runs_and_reports_ratios_and_errors(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(BENCH.parent))  # this checkout's tilegraph
    proc = subprocess.run([sys.executable, str(BENCH / "svd.py"), "--size", "90", "--tile",
                           "25"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    errors = [float(e) for e in re.findall(r"max rel\. error of s ([0-9.e+-]+)", proc.stdout)]
    assert len(errors) == 2 and max(errors) <= 1e-10
    assert len(re.findall(r"\(([0-9.]+)x NumPy\)", proc.stdout)) == 2
    assert "speed goal (>= 1.0x NumPy), values only:" in proc.stdout
    only = subprocess.run([sys.executable, str(BENCH / "svd.py"), "--size", "90", "--tile",
                           "25", "--values-only", "--serverless", "2"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=env)
    assert only.returncode == 0, only.stderr[-3000:]
    assert "with vectors" not in only.stdout
    errors = [float(e) for e in re.findall(r"max rel\. error of s ([0-9.e+-]+)", only.stdout)]
    assert len(errors) == 2 and max(errors) <= 1e-10  # threads and the serverless pool
    bad = subprocess.run([sys.executable, str(BENCH / "svd.py"), "--tile", "0"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert bad.returncode == 2 and "must be positive" in bad.stderr
