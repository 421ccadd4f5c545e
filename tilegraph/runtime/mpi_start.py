"""The start of every rank under ``tilegraph run``: tilegraph's communicator is made while
all ranks are starting together, then the user's script runs as ``__main__`` (as
``python -m mpi4py script.py args`` runs it: an exception that escapes it on one rank
aborts every rank).

Making the communicator is a collective step that cannot name a rank that never takes it;
made here, every later step of a ``compute()`` can: a script that computes on some ranks
only fails with an error naming the others (:mod:`tilegraph.runtime.mpi`).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit("usage: python -m mpi4py -m tilegraph.runtime.mpi_start SCRIPT [ARG ...]")
    from mpi4py.run import run_command_line

    from tilegraph.runtime.mpi import world

    world()
    run_command_line(args)


if __name__ == "__main__":
    main()
