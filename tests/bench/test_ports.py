"""bench/ports/run.py: the driver's variants, comparison and report, and (heavy) every port
run on dask and on tilegraph at tiny sizes, for matching only (no timing)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.bench._bench_modules import BENCH

pytest.importorskip("dask")
pytest.importorskip("xarray")

PORTS = BENCH / "ports"


def _driver():
    """bench/ports/run.py as a module of its own name (``run`` is too common a name)."""
    import importlib.util

    mod = sys.modules.get("bench_ports_run")
    if mod is None:
        spec = importlib.util.spec_from_file_location("bench_ports_run", PORTS / "run.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_ports_run"] = mod
        spec.loader.exec_module(mod)
    return mod


def test_the_tilegraph_variant_changes_the_switch_line_only():
    run = _driver()
    src = "import numpy as np\nimport dask.array as da\nx = da.ones(3)\n"
    assert run.variant_source(src, "dask") == src
    assert run.variant_source(src, "tilegraph") == src.replace(
        "import dask.array as da", "import tilegraph as da")
    xsrc = 'import xarray as xr\n\nxr.set_options(chunk_manager="dask")\n'
    assert 'chunk_manager="tilegraph"' in run.variant_source(xsrc, "tilegraph")
    with pytest.raises(ValueError, match="no switch line"):
        run.variant_source("import numpy as np\n", "tilegraph")
    edited = run.variant_source(src, "tilegraph", [("da.ones(3)", "da.ones((3,))")])
    assert "da.ones((3,))" in edited
    with pytest.raises(ValueError, match=r"TILEGRAPH_EDITS.*not in the port"):
        run.variant_source(src, "tilegraph", [("nowhere", "x")])


def test_every_port_names_its_source_and_switches():
    run = _driver()
    names = run.ports()
    assert len(names) >= 10
    for name in names:
        source = (PORTS / f"{name}.py").read_text()
        assert run._declared(source, "SOURCE"), name
        assert "/" in run._declared(source, "SOURCE").split(":")[0], name  # owner/repo
        run.variant_source(source, "tilegraph")  # has its switch line
        edits = run._declared(source, "TILEGRAPH_EDITS")
        if edits:
            assert run._declared(source, "WHY"), f"{name} declares edits without WHY"


def test_compare_names_what_differs():
    run = _driver()
    a = np.array([1.0, np.nan, 3.0])
    assert run.compare({"a": a, "n": 3}, {"a": a.copy(), "n": 3}, 1e-9) is None
    assert "shape" in run.compare({"a": a[:2]}, {"a": a}, 1e-9)
    assert "values differ" in run.compare({"a": a + 1e-3}, {"a": a}, 1e-9)
    assert run.compare({"a": a + 1e-12}, {"a": a}, 1e-9) is None
    assert "names" in run.compare({"b": a}, {"a": a}, 1e-9)
    assert "values differ" in run.compare({"i": np.arange(3)}, {"i": np.arange(3) + 1}, 0)
    assert "values differ" in run.compare([np.ones(2)], [np.zeros(2)], 1e-9)
    nan_moved = np.array([1.0, 2.0, np.nan])
    assert run.compare({"a": nan_moved}, {"a": a}, 1e-9) is not None


def test_errors_of_missing_names_say_which_parity_is_needed():
    run = _driver()
    assert run._parity_name("AttributeError: module 'tilegraph' has no attribute "
                            "'multiply'") == "multiply"
    assert run._parity_name("TypeError: chunks: cannot read '64 MB' for axis 0") == (
        "chunks in bytes per axis")
    assert run._parity_name("ValueError: something else") is None


def test_bad_arguments_are_refused():
    run = _driver()
    with pytest.raises(SystemExit):
        run.main(["--only", "no_such_port"])
    with pytest.raises(SystemExit):
        run.main(["--scale", "0"])


@pytest.mark.heavy
def test_every_port_matches_dask_at_tiny_sizes(tmp_path):
    out = tmp_path / "ports.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parents[2]),
                      os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(PORTS / "run.py"), "--scale", "0.01",
                           "--repeat", "1", "--workers", "2", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=900)
    rows = json.loads(out.read_text())
    assert len(rows) >= 10, proc.stdout + proc.stderr
    for row in rows:
        assert row["matched"] == "y", row
        source = (PORTS / f"{row['port']}.py").read_text()
        if row["unchanged"] != "y":  # only a port that says why may need an edit
            assert "TILEGRAPH_EDITS" in source and row["note"], row
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "unchanged " in proc.stdout and "matched " in proc.stdout
