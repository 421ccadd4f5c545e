"""The ``tilegraph`` command."""

from __future__ import annotations

import argparse
import sys


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    from tilegraph import __version__

    parser = argparse.ArgumentParser(prog="tilegraph", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tilegraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job: a blocked matmul checked against NumPy")
    demo.add_argument("--n", type=_positive, default=4000, help="matrix size (default 4000)")
    demo.add_argument("--block", type=_positive, default=1000, help="block size (default 1000)")
    demo.add_argument("--backend", default="threads", choices=["threads", "sync"])
    demo.add_argument("--workers", type=_positive, default=None,
                      help="worker threads (default: one per core)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from tilegraph.demo import main as demo_main

        return demo_main(args.n, args.block, args.backend, args.workers)
    return 2


if __name__ == "__main__":
    sys.exit(main())
