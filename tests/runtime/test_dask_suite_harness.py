"""The dask-suite harness (tests/dask_suite): a module's tests run on dask's scheduler and
with every compute routed through tilegraph.get, and the outcomes are compared."""

import importlib.util
import os
import pathlib

import pytest

pytest.importorskip("dask")
HERE = pathlib.Path(__file__).resolve().parents[1] / "dask_suite"

MODULE = '''
import dask
import dask.array as da
import dask.base


def test_array():
    assert int(da.arange(10, chunks=3).sum().compute()) == 45


def test_scheduler_is_patched_only_for_tilegraph():
    import os
    x = dask.delayed(lambda: 1)()
    name = dask.base.get_scheduler(collections=[x]).__name__
    assert (name == "counted_get") == (os.environ["TILEGRAPH_DASK_SUITE"] == "tilegraph")


def test_fails_everywhere():
    assert dask.compute(dask.delayed(sum)([1, 2]))[0] == 4
'''


@pytest.mark.heavy  # two pytest processes
def test_run_module_compares_outcomes(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("dask_suite_run", HERE / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    (tmp_path / "suite_probe_mod.py").write_text(MODULE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = tmp_path / "out"
    out.mkdir()
    theirs, _ = run.run_module("suite_probe_mod", "dask", out, [])
    ours, _ = run.run_module("suite_probe_mod", "tilegraph", out, [])
    a, b = theirs["outcomes"], ours["outcomes"]
    assert sorted(a.values()) == sorted(b.values()) == ["failed", "passed", "passed"]
    assert theirs["tilegraph_calls"] == 0 and ours["tilegraph_calls"] >= 2
