"""Attempts of a hostile local user (and of a careless one) to run code or to read or alter
another user's data through the serverless engine's state store and object store
(``bench/security_store.py``) and through the service (``bench/security_service.py``),
each carried out against real servers, worker processes, job processes and files.

Prints one line per attempt and a count per target; the goal is that none succeeds (the
exit status is 1 if one does). ``--only store`` or ``--only service`` runs one half.

    python bench/security.py
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import security_service
import security_store


def probes(only: str | None = None) -> list[dict[str, Any]]:
    """Every attempt's record (``probe``, ``target``, ``succeeded``, ``detail``)."""
    results: list[dict[str, Any]] = []
    if only in (None, "store"):
        results += security_store.probes()
    if only in (None, "service"):
        results += security_service.probes()
    return results


def table(results: list[dict[str, Any]]) -> str:
    width = max(len(r["probe"]) for r in results)
    lines = [f"{'probe':<{width}}  {'target':<12}  {'succeeded':<9}  detail"]
    for r in results:
        lines.append(f"{r['probe']:<{width}}  {r['target']:<12}  "
                     f"{'YES' if r['succeeded'] else 'no':<9}  {r['detail']}")
    by_target: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for r in results:
        by_target[r["target"]][0] += r["succeeded"]
        by_target[r["target"]][1] += 1
    lines.append("")
    for target, (bad, total) in by_target.items():
        lines.append(f"{target}: {bad} of {total} attempts succeeded")
    bad = sum(r["succeeded"] for r in results)
    lines.append(f"all: {bad} of {len(results)} attempts succeeded (goal: 0)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("store", "service"),
                        help="run the probes of one target only")
    args = parser.parse_args(argv)
    results = probes(args.only)
    print(table(results))
    return 1 if any(r["succeeded"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
