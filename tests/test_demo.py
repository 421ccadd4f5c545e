"""``make run``'s main job and the command-line help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tilegraph.demo import main

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_the_array_program_and_writes_its_report(tmp_path, capsys):
    report = tmp_path / "report.html"
    assert main(n=300, block=128, report=str(report), progress=False, tree_width=1000) == 0
    out = capsys.readouterr().out
    assert "from .npy files" in out and "matches numpy    True" in out
    assert f"report           {report}" in out
    assert "np.load took" in out  # loading is reported apart from NumPy's a @ b
    assert report.exists() and "<html" in report.read_text().lower()


def test_cli_help_says_what_demo_and_run_do():
    for command, words in (("demo", ["block by block", ".npy", "HTML report", "NumPy"]),
                           ("run", ["MPI ranks", "mpiexec", "collective"])):
        proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", command, "--help"],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        text = " ".join(proc.stdout.split())
        for w in words:
            assert w in text, (command, w)
