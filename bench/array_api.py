"""The Array API conformance suite (data-apis/array-api-tests) against tilegraph and against
array-api-strict in the same run; prints both pass counts.

tilegraph's run skips only the tests listed in ``array_api_skips.txt`` (each with the reason
the standard allows a lazy, immutable library to refuse it); array-api-strict's run skips
nothing. Both run without hypothesis's per-example deadline (a speed limit, not a conformance
check: a lazy array computes every element the suite inspects).
Run: ``python bench/array_api.py [--suite ../shared/array-api-tests]
[--max-examples 5] [--backend sync]``. Needs the ``array-api`` extra
(``pip install -e '.[array-api]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(suite: Path, module: str, max_examples: int, skips: Path | None, backend: str,
        extra: list[str]) -> dict:
    """One run of the suite; returns the counts of its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        empty = Path(tmp) / "none.txt"
        empty.write_text("")
        env = dict(os.environ, ARRAY_API_TESTS_MODULE=module, ARRAY_API_TESTS_VERSION="2023.12",
                   TILEGRAPH_BACKEND=backend,
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        cmd = [sys.executable, "-m", "pytest", "array_api_tests/", "-q", "-p",
               "no:cacheprovider", f"--max-examples={max_examples}", "--json-report",
               f"--json-report-file={report}", "--skips-file", str(skips or empty),
               # per-example time limits measure speed, not conformance: off for both
               "--disable-deadline",
               "--xfails-file", str(empty), *extra]
        subprocess.run(cmd, cwd=suite, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        if not report.exists():
            raise SystemExit(f"{module}: the suite did not run (is pytest-json-report "
                             "installed? pip install -e '.[array-api]')")
        data = json.loads(report.read_text())
    summary = data["summary"]
    failed = sorted(t["nodeid"] for t in data["tests"] if t["outcome"] in ("failed", "error"))
    return {"passed": summary.get("passed", 0), "failed": summary.get("failed", 0)
            + summary.get("error", 0), "skipped": summary.get("skipped", 0),
            "failures": failed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default=str(ROOT.parent / "shared" / "array-api-tests"),
                        help="checkout of data-apis/array-api-tests")
    parser.add_argument("--max-examples", type=int, default=5,
                        help="hypothesis examples per test (the suite's default is 100)")
    parser.add_argument("--backend", default="sync",
                        help="tilegraph backend for the many tiny computations (sync, threads)")
    parser.add_argument("--failures", action="store_true", help="list the failing tests")
    args, extra = parser.parse_known_args()
    suite = Path(args.suite)
    if not (suite / "array_api_tests").is_dir():
        raise SystemExit(f"no array-api-tests checkout at {suite} (give --suite)")
    skips = ROOT / "array_api_skips.txt"
    results = {
        "tilegraph": run(suite, "tilegraph.array.array_api", args.max_examples, skips,
                         args.backend, extra),
        "array_api_strict": run(suite, "array_api_strict", args.max_examples, None,
                                args.backend, extra),
    }
    listed = [line for line in skips.read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    print(f"Array API 2023.12 conformance ({args.max_examples} examples per test)")
    for name, r in results.items():
        print(f"  {name:<17} passed {r['passed']:>5}   failed {r['failed']:>4}   "
              f"skipped {r['skipped']:>4}")
    t, s = results["tilegraph"], results["array_api_strict"]
    print(f"  tilegraph skip list: {len(listed)} tests (array_api_skips.txt); goal: "
          f"tilegraph passed >= array_api_strict passed - {len(listed)}: "
          f"{'met' if t['passed'] >= s['passed'] - len(listed) else 'not met'}")
    if args.failures:
        for name, r in results.items():
            for f in r["failures"]:
                print(f"  {name} FAILED {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
