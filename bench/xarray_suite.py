"""xarray's own duck-array test suite through tilegraph, beside dask on the same selection.

xarray ships ``xarray/tests/test_duck_array_wrapping.py``: every top-level function and
DataArray/Dataset method run on a DataArray wrapping a duck array of each namespace it
knows (dask.array, cupy, jax, pint, sparse), checking that the result wraps the same type.
This runs the installed xarray's copy of it with ``tilegraph`` added as one more namespace
(its array type ``tilegraph.Array``, its constructor ``tilegraph.from_numpy``, no
expected failures of its own), and prints the outcome counts for tilegraph and for
dask.array, and tilegraph's failures.

Run: ``python bench/xarray_suite.py`` (needs the ``xarray`` and ``dask`` extras; about 20 s).

``python bench/xarray_suite.py --modules`` runs instead xarray's tests of rolling windows,
weighted reductions, groupby and resample, interpolation and polyfit/polyval (the
installed xarray's ``test_rolling.py``, ``test_weighted.py``, ``test_groupby.py``,
``test_interp.py``, ``test_computation.py -k "polyfit or polyval"`` and
``test_dataarray.py -k polyfit``; ``test_dataset.py``'s polyfit tests make no blocked
arrays; and ``test_dask.py``, xarray's tests of its dask integration) twice: with dask as
xarray's default chunk manager and with tilegraph (the plugin
``bench/xarray_suite_plugin.py``: the tests' own ``.chunk(...)`` calls and their
``dask_array_api`` make tilegraph arrays, ``raise_if_dask_computes`` counts tilegraph runs
too, the NumPy-only variants are left out). It counts, per module, the tests that made
blocked arrays (dask arrays on the dask run, tilegraph arrays on the tilegraph run) and how
many of those pass; ``--modules rolling,interp`` picks modules by name (about 15 minutes
for all on two cores).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_module_source() -> str:
    """The installed xarray's duck-array tests with tilegraph among the namespaces."""
    import inspect

    import xarray.tests.test_duck_array_wrapping as mod

    src = inspect.getsource(mod)
    entry = ('    "tilegraph": {"attrs": {"array": "Array", "constructor": "from_numpy"}, '
             '"xfails": {}},\n')
    if "NAMESPACE_ARRAYS = {\n" not in src:
        raise SystemExit("this xarray's duck-array tests have another layout")
    src = src.replace("NAMESPACE_ARRAYS = {\n", "NAMESPACE_ARRAYS = {\n" + entry, 1)
    if "NAMESPACE_REQUIREMENTS = {\n" in src:
        src = src.replace("NAMESPACE_REQUIREMENTS = {\n",
                          'NAMESPACE_REQUIREMENTS = {\n    "tilegraph": [],\n', 1)
    return src


def run(namespace: str, path: str) -> tuple[Counter, list[str]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        ROOT, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-m", "pytest", path, "-q", "-rA",
                          "-p", "no:cacheprovider", "-k", namespace], capture_output=True,
                         text=True, env=env, cwd=os.path.dirname(path)).stdout
    counts: Counter = Counter()
    failed = []
    for line in out.splitlines():
        m = re.match(r"^(PASSED|FAILED|XFAIL|XPASS|ERROR|SKIPPED) (\S+)", line)
        if m:
            counts[m.group(1)] += 1
            if m.group(1) in ("FAILED", "ERROR"):
                failed.append(m.group(2).split("::", 1)[1])
    return counts, failed


# name: (xarray test module, -k selection or None)
MODULES = {
    "rolling": ("test_rolling.py", None),
    "weighted": ("test_weighted.py", None),
    "groupby": ("test_groupby.py", None),
    "interp": ("test_interp.py", None),
    "computation": ("test_computation.py", "polyfit or polyval"),
    "dataarray": ("test_dataarray.py", "polyfit"),
    "dask": ("test_dask.py", None),
}
PASS = ("passed", "xfailed")


def run_module(module: str, select: str | None, mode: str) -> dict[str, dict]:
    """Each test's outcome and the blocked arrays it made, on one chunk manager."""
    import xarray.tests

    path = os.path.join(os.path.dirname(xarray.tests.__file__), module)
    env = dict(os.environ, TILEGRAPH_XARRAY_SUITE=mode, PYTHONPATH=os.pathsep.join(
        filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        env["TILEGRAPH_XARRAY_SUITE_OUT"] = out = os.path.join(tmp, "outcomes.json")
        cmd = [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider",
               "-p", "bench.xarray_suite_plugin", "-W", "ignore"]
        if select:
            cmd += ["-k", select]
        subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp)
        if not os.path.exists(out):
            raise SystemExit(f"{module} on {mode}: pytest wrote no outcomes")
        with open(out) as f:
            return {k.split("::", 1)[1]: v for k, v in json.load(f).items()}


def compare_modules(names: list[str]) -> int:
    import xarray

    print(f"xarray {xarray.__version__}: tests that make blocked arrays, on dask and on "
          "tilegraph as the chunk manager")
    print("(skipped: tests of the selection that did not run, on dask / on tilegraph: they "
          "need an optional package: cftime, flox, bottleneck, numbagg)")
    print(f"{'module':44s} {'tests':>5s} {'pass dask':>9s} {'pass tilegraph':>14s} "
          f"{'skipped':>9s}")
    failures = []
    for name in names:
        module, select = MODULES[name]
        dask = run_module(module, select, "dask")
        tg = run_module(module, select, "tilegraph")
        chunked = sorted(t for t in set(dask) | set(tg)
                         if "dask" in dask.get(t, {}).get("made", ())
                         or "tilegraph" in tg.get(t, {}).get("made", ()))
        on_dask = sum(dask.get(t, {}).get("outcome") in PASS for t in chunked)
        on_tg = [t for t in chunked if tg.get(t, {}).get("outcome") in PASS
                 and "tilegraph" in tg[t]["made"]]
        label = module + (f" -k {select!r}" if select else "")
        skipped = "/".join(str(sum(r["outcome"] == "skipped" for r in run.values()))
                           for run in (dask, tg))
        print(f"{label:44s} {len(chunked):5d} {on_dask:9d} {len(on_tg):14d} {skipped:>9s}")
        for t in chunked:
            if t in on_tg:
                continue
            r = tg.get(t, {"outcome": "not run", "made": []})
            why = r.get("error") or ("made no tilegraph array" if r["outcome"] in PASS
                                     else r["outcome"])
            failures.append(f"{module}::{t} [dask: {dask.get(t, {}).get('outcome')}] {why}")
    for line in failures:
        print(f"  not on tilegraph: {line}")
    return 0


def main() -> int:
    import xarray

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "test_duck_arrays_all.py")
        with open(path, "w") as f:
            f.write(test_module_source())
        print(f"xarray {xarray.__version__}: xarray/tests/test_duck_array_wrapping.py")
        results = {ns: run(ns, path) for ns in ("tilegraph", "dask")}
    for ns, (counts, _) in results.items():
        total = sum(counts.values())
        print(f"  {ns:10s} {total:4d} tests: " + ", ".join(
            f"{counts[k]} {k.lower()}" for k in ("PASSED", "FAILED", "XFAIL", "XPASS",
                                                 "ERROR", "SKIPPED") if counts[k]))
    for name in results["tilegraph"][1]:
        print(f"  tilegraph fails: {name}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", nargs="?", const=",".join(MODULES), default=None,
                        help="run xarray's rolling/weighted/groupby/interp/polyfit tests "
                             f"(all, or a comma-separated subset of {', '.join(MODULES)})")
    args = parser.parse_args()
    if args.modules is None:
        raise SystemExit(main())
    chosen = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        parser.error(f"unknown modules {unknown}; choose from {', '.join(MODULES)}")
    raise SystemExit(compare_modules(chosen))
