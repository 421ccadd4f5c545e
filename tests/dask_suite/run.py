"""Run dask's own test modules twice, on dask's schedulers and with every compute routed
through :func:`tilegraph.get`, and compare the outcomes test by test.

    python tests/dask_suite/run.py [module ...]      (``make dask-suite``)

Each module runs in its own pytest process (they are big), one after the other. Printed per
module: tests, passed on dask, passed on tilegraph, and every test that passes on dask but
not on tilegraph (the residue), with the JSON outcomes kept in ``--out`` (a directory).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys
import time

MODULES = [
    "dask.array.tests.test_array_core",
    "dask.array.tests.test_reductions",
    "dask.array.tests.test_linalg",
    "dask.array.tests.test_creation",
    "dask.bag.tests.test_bag",
    "dask.tests.test_delayed",
]
HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def run_module(module: str, scheduler: str, out: pathlib.Path, extra: list[str]
               ) -> tuple[dict, float]:
    """Outcomes of ``module``'s tests with ``scheduler`` ("dask" or "tilegraph")."""
    path = out / f"{module}.{scheduler}.json"
    env = {**os.environ, "TILEGRAPH_DASK_SUITE": scheduler,
           "TILEGRAPH_DASK_SUITE_OUT": str(path),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE),
                                          os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "pytest", "-p", "dask_suite_plugin", "-p",
           "no:cacheprovider", "-q", "-o", "addopts=", "--pyargs", module, *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=out, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    seconds = time.perf_counter() - t0
    if not path.exists():
        raise RuntimeError(f"{module} on {scheduler}: pytest wrote no outcomes ({cmd})")
    return json.loads(path.read_text()), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=MODULES)
    parser.add_argument("--out", default="dask-suite-results")
    parser.add_argument("--pytest-args", default="", help="extra pytest arguments")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    extra = shlex.split(args.pytest_args)
    residue_total = 0
    print(f"{'module':38} {'tests':>6} {'dask':>6} {'tilegraph':>9}  residue  seconds")
    for module in args.modules:
        theirs, t_dask = run_module(module, "dask", out, extra)
        ours, t_tg = run_module(module, "tilegraph", out, extra)
        a, b = theirs["outcomes"], ours["outcomes"]
        passed_a = {k for k, v in a.items() if v in ("passed", "xfailed")}
        passed_b = {k for k, v in b.items() if v in ("passed", "xfailed")}
        residue = sorted(passed_a - passed_b)
        residue_total += len(residue)
        print(f"{module:38} {len(a):6} {len(passed_a):6} {len(passed_b & passed_a):9}  "
              f"{len(residue):7}  {t_dask:.0f}/{t_tg:.0f}   "
              f"({ours['tilegraph_calls']} computes on tilegraph)", flush=True)
        for k in residue:
            print(f"    {b.get(k, 'missing')}: {k}")
    return 1 if residue_total else 0


if __name__ == "__main__":
    sys.exit(main())
