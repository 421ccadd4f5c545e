"""Diagnostics sit on the event stream only: from tilegraph they import nothing but
``tilegraph.runtime.events`` and ``tilegraph.util`` (function-level imports included), so
the pipeline can attach them without an import cycle."""

import ast
from pathlib import Path

import tilegraph.diagnostics

ALLOWED = {"tilegraph.runtime.events", "tilegraph.util"}


def imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


def test_diagnostics_import_only_events_and_util():
    folder = Path(tilegraph.diagnostics.__file__).parent
    outside = {
        (path.name, module)
        for path in sorted(folder.glob("*.py"))
        for module in imported_modules(path)
        if (module == "tilegraph" or module.startswith("tilegraph."))
        and not module.startswith("tilegraph.diagnostics") and module not in ALLOWED
    }
    assert outside == set()
