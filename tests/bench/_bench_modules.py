"""Imports the helper modules of ``bench/`` in a test. The scripts there import each other
by name, as ``python bench/<script>.py`` puts ``bench/`` first on ``sys.path``; here it is
put there only while a module is imported."""

import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name):
    """The module ``bench/<name>.py``."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))
