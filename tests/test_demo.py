"""``make run``'s main job and the command-line help."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilegraph.demo import main, seconds_text, timed

ROOT = Path(__file__).resolve().parents[1]

# "  numpy a @ b            0.0019 s (0.0017-0.0023)     28.1 GFLOP/s  of the arrays ..."
ROW = re.compile(r"^  (?P<name>tilegraph, from files|numpy np\.load|numpy a @ b|"
                 r"tilegraph, in memory) +(?P<best>\d+\.\d{4}) s "
                 r"\((?:(?P<lo>\d+\.\d{4})-(?P<hi>\d+\.\d{4})|one run)\)", re.M)


def _rows(out: str) -> dict[str, tuple[float, float | None, float | None]]:
    rows = {}
    for m in ROW.finditer(out):
        lo, hi = m["lo"], m["hi"]
        rows[m["name"]] = (float(m["best"]), lo and float(lo), hi and float(hi))
    return rows


def _ratio_bounds(num: list[float], den: float) -> tuple[float, float]:
    """The ratio sum(num) / den for printed values, each within half a unit of its last
    (fourth) decimal."""
    h = 0.00005
    return ((sum(num) - h * len(num)) / (den + h),
            (sum(num) + h * len(num)) / max(den - h, 1e-12))


def test_demo_times_each_system_repeatedly_and_writes_its_report(tmp_path, capsys):
    report = tmp_path / "report.html"
    assert main(n=300, block=128, report=str(report), progress=False, tree_width=1000,
                repeat=2) == 0
    out = capsys.readouterr().out
    assert "from .npy files" in out and "matches numpy    True" in out
    assert f"report           {report}" in out
    assert report.exists() and "<html" in report.read_text().lower()
    assert "each system timed 2 times: the best time, then the spread" in out

    rows = _rows(out)
    assert set(rows) == {"tilegraph, from files", "numpy np.load", "numpy a @ b",
                         "tilegraph, in memory"}  # loading is reported apart from a @ b
    for name, (best, lo, hi) in rows.items():
        assert best == lo and lo <= hi, name  # the best is the fastest of the spread
    assert out.count("GFLOP/s") == 3  # every product, not the load

    # the ratios are those of the best times
    mem = float(re.search(r"in memory, vs numpy a @ b +(\d+\.\d\d)x", out)[1])
    files = float(re.search(r"from files, vs numpy np\.load \+ a @ b +(\d+\.\d\d)x", out)[1])
    low, high = _ratio_bounds([rows["numpy a @ b"][0]], rows["tilegraph, in memory"][0])
    assert low - 0.005 <= mem <= high + 0.005
    low, high = _ratio_bounds([rows["numpy np.load"][0], rows["numpy a @ b"][0]],
                              rows["tilegraph, from files"][0])
    assert low - 0.005 <= files <= high + 0.005

    tree = re.search(r"tree reduction +(\d+) tasks in (\d+\.\d{4}) s "
                     r"\((\d+\.\d{4})-(\d+\.\d{4})\) = [\d,]+ tasks/s .*correct: True", out)
    assert tree and int(tree[1]) == 2002
    assert tree[2] == tree[3] and float(tree[3]) <= float(tree[4])


def test_demo_run_once_says_so(tmp_path, capsys):
    assert main(n=200, block=100, report=str(tmp_path / "r.html"), progress=False,
                tree_width=100, repeat=1) == 0
    out = capsys.readouterr().out
    assert "each system timed once" in out
    rows = _rows(out)
    assert len(rows) == 4 and all(lo is None and hi is None for _, lo, hi in rows.values())
    assert "(one run) = " in out  # the tree reduction too
    with pytest.raises(ValueError, match="repeat"):
        main(n=200, block=100, repeat=0)


def test_timed_calls_repeat_times_and_keeps_the_last_result():
    calls = []
    result, seconds = timed(lambda i: calls.append(i) or i * 10, 3)
    assert calls == [0, 1, 2] and result == 20
    assert len(seconds) == 3 and all(s >= 0 for s in seconds)
    assert seconds_text([0.5, 0.25, 2.0]) == "0.2500 s (0.2500-2.0000)"
    assert seconds_text([1.5]) == "1.5000 s (one run)"


def test_cli_help_says_what_demo_and_run_do():
    for command, words in (("demo", ["block by block", ".npy", "HTML report", "NumPy",
                                     "--repeat", "best time", "spread"]),
                           ("run", ["MPI ranks", "mpiexec", "collective"])):
        proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", command, "--help"],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        text = " ".join(proc.stdout.split())
        for w in words:
            assert w in text, (command, w)


def test_cli_help_points_at_the_python_api_xarray_and_the_docs():
    proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", "--help"],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    for words in ("import tilegraph as tg", "import tilegraph as da", ".compute(",
                  "scheduler=", 'chunked_array_type="tilegraph"',
                  'xr.set_options(chunk_manager="tilegraph")', "docs/guide.md",
                  "docs/porting.md", "docs/interop.md", "help(tilegraph.compute)"):
        assert words in proc.stdout, words
    for doc in ("guide.md", "porting.md", "interop.md", "backends.md"):
        assert (ROOT / "docs" / doc).is_file(), doc  # the pages it names exist


def test_cli_demo_refuses_a_repeat_below_one():
    proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", "demo", "--repeat", "0"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "must be a positive integer" in proc.stderr
