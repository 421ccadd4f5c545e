"""The example scripts: each builds the registry's workload, and run_example runs, times and
checks it."""

import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

from tilegraph.workloads import WORKLOADS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_example_builds_the_registry_workload(name):
    """examples/<name>.py makes the same inputs and program as the registry."""
    build = runpy.run_path(str(EXAMPLES / f"{name}.py"))["build"]
    n = 240
    block = WORKLOADS[name].block(n)
    out = build(n, block)
    got = tg_compute(out)
    ref = WORKLOADS[name].run_tilegraph(n, block=block, backend="sync")
    for g, r in zip(got if isinstance(got, tuple) else (got,),
                    ref if isinstance(ref, tuple) else (ref,), strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-14)


def tg_compute(out):
    import tilegraph as tg

    return tg.compute(*out, backend="sync") if isinstance(out, tuple) else out.compute()


def test_example_script_runs(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["matmul.py", "--n", "150", "--block", "40",
                                      "--backend", "sync"])
    with pytest.raises(SystemExit) as info:
        runpy.run_path(str(EXAMPLES / "matmul.py"), run_name="__main__")
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "matmul n=150 block=40" in out and "GFLOP/s" in out and ": ok" in out


def test_pagerank_to_a_tolerance_example_matches_the_numpy_loop(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["pagerank_tolerance.py", "--n", "600", "--block",
                                      "150", "--tol", "1e-9"])
    code = runpy.run_path(str(EXAMPLES / "pagerank_tolerance.py"))["main"]()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "check against NumPy/SciPy: ok" in out and "iterations to tolerance" in out
