"""``bench/suite.py``: the table, the CSV and PNG outputs, the checks and argument errors, at
tiny sizes (as a script in a process of its own, and through its ``main``)."""

import csv
import os
import subprocess
import sys

import pytest
from _bench_modules import BENCH, bench_module

suite = bench_module("suite")
CSV_COLUMNS = suite.CSV_COLUMNS
main = suite.main


def test_bench_table_csv_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    csv_path, png_path = tmp_path / "rows.csv", tmp_path / "ratios.png"
    env = dict(os.environ, PYTHONPATH=str(BENCH.parent))  # this checkout's tilegraph
    proc = subprocess.run(
        [sys.executable, str(BENCH / "suite.py"), "matmul", "--sizes", "200", "--against",
         "numpy", "--repeat", "2", "--csv", str(csv_path), "--png", str(png_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    header = next(line for line in out.splitlines() if line.startswith("workload"))
    for column in ("size", "system", "seconds", "GFLOP/s", "peak MiB", "speed-up"):
        assert column in header
    lines = [line.split() for line in out.splitlines() if line.startswith("matmul")]
    assert [line[3] for line in lines] == ["tilegraph", "numpy"]
    assert lines[1][-1].endswith("x")

    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [(r["workload"], r["size"], r["system"], r["status"]) for r in rows] == [
        ("matmul", "200", "tilegraph", "ok"), ("matmul", "200", "numpy", "ok")]
    tg_seconds, np_seconds = float(rows[0]["seconds"]), float(rows[1]["seconds"])
    assert rows[0]["ratio"] == ""
    # the ratio is written to 4 decimals, from the seconds before they were written to 6
    ratio = np_seconds / tg_seconds
    slack = 5e-5 + ratio * (5e-7 / np_seconds + 5e-7 / tg_seconds)
    assert abs(float(rows[1]["ratio"]) - ratio) <= slack
    assert float(rows[0]["gflops"]) == pytest.approx(2 * 200**3 / tg_seconds / 1e9, rel=1e-3)
    assert float(rows[0]["peak_mib"]) >= 0

    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_with_dask_and_several_workloads(tmp_path, capsys):
    pytest.importorskip("dask")
    csv_path = tmp_path / "rows.csv"
    assert main(["sparse_matmul", "qr", "--sizes", "150", "--csv", str(csv_path),
                 "--backend", "sync"]) == 0
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["workload"], r["system"]) for r in rows] == [
        (w, s) for w in ("sparse_matmul", "qr") for s in ("tilegraph", "numpy", "dask")]
    assert all(r["status"] == "ok" for r in rows)


def test_check(capsys):
    assert main(["--check", "matmul", "pagerank", "qr"]) == 0
    out = capsys.readouterr().out
    assert "3 passed, 0 failed" in out
    assert out.count(" ok") == 3


def test_check_reports_a_mismatch(monkeypatch, capsys):
    import dataclasses

    from tilegraph import workloads

    wl = workloads.WORKLOADS["matmul"]
    monkeypatch.setitem(workloads.WORKLOADS, "matmul", dataclasses.replace(wl, tolerance=-1.0))
    assert main(["--check", "matmul"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_list(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in ("matmul", "pagerank", "funk_svd", "svd"):
        assert name in out


@pytest.mark.parametrize("argv, message", [
    (["no_such_workload"], "unknown workload 'no_such_workload'"),
    (["matmul", "--sizes", "0"], "must be a positive integer"),
    (["matmul", "--sizes", "ten"], "invalid"),
    (["funk_svd", "--sizes", "1"], "at least 2"),
    (["sparse_matmul", "--sizes", "60000"], "GiB, more than this machine's"),
    (["matmul", "--against", "numpy,cupy"], "unknown competitor 'cupy'"),
    (["matmul", "--repeat", "0"], "must be a positive integer"),
    (["matmul", "--csv", "/no/such/folder/rows.csv"], "no such directory"),
])
def test_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_png_without_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit) as info:
        main(["matmul", "--sizes", "50", "--png", str(tmp_path / "x.png")])
    assert info.value.code == 2
    assert "matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_bench_rows():
    rows = suite.bench(["matmul"], sizes=[100], against=["numpy"], backend="sync")
    assert [r.system for r in rows] == ["tilegraph", "numpy"]
    assert all(r.status == "ok" for r in rows)
    assert rows[0].ratio is None
    assert rows[1].ratio == pytest.approx(rows[1].seconds / rows[0].seconds)
    assert rows[0].gflops == pytest.approx(2e-3 / rows[0].seconds)
    with pytest.raises(KeyError, match="nope"):
        suite.bench(["nope"])
    with pytest.raises(ValueError, match="competitor"):
        suite.bench(["matmul"], against=["cupy"])
