"""A module of the user's own (not a library), imported by every rank of
``tests/runtime/mpi_checks.py``: its function reads a module global a script may set per
rank."""

OFFSET = 0.0


def add_offset(block):
    return block + OFFSET
