"""xarray's own duck-array test suite through tilegraph, beside dask on the same selection.

xarray ships ``xarray/tests/test_duck_array_wrapping.py``: every top-level function and
DataArray/Dataset method run on a DataArray wrapping a duck array of each namespace it
knows (dask.array, cupy, jax, pint, sparse), checking that the result wraps the same type.
This runs the installed xarray's copy of it with ``tilegraph`` added as one more namespace
(its array type ``tilegraph.Array``, its constructor ``tilegraph.from_numpy``, no
expected failures of its own), and prints the outcome counts for tilegraph and for
dask.array, and tilegraph's failures.

Run: ``python bench/xarray_suite.py`` (needs the ``xarray`` and ``dask`` extras; about 20 s).
"""

from __future__ import annotations

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
    raise SystemExit(main())
