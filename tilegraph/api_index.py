"""Where every method of :class:`~tilegraph.array.core.Array` and every name of the
``tilegraph`` namespace (and of ``tilegraph.linalg``, ``.fft``, ``.random``) is defined.

Most of Array's methods are bound onto the class by :func:`tilegraph.array.api_table.install`
and most names of the namespace are served lazily by ``tilegraph.__getattr__``, so a search
for ``def sum`` in ``core.py`` or an editor's "go to definition" finds nothing. This module
follows each name to the function, class or value behind it (through properties,
static and class methods, ``functools.wraps`` and partials) and writes the listing that
``docs/api-index.md`` holds; ``tests/test_api_index.py`` checks that the file is the
listing of the code as it is.

    python -m tilegraph.api_index            # print the listing
    python -m tilegraph.api_index --write    # rewrite docs/api-index.md
    python -m tilegraph.api_index --check    # exit 1 when docs/api-index.md is stale

>>> where(tilegraph_array().Array, "rechunk")[0]
'tilegraph/array/api_table.py'
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import os
import sys
from types import ModuleType
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "api-index.md")
NAMESPACES = ("tilegraph", "tilegraph.linalg", "tilegraph.fft", "tilegraph.random")


def tilegraph_array() -> ModuleType:
    return importlib.import_module("tilegraph.array")


def _behind(obj: Any) -> Any:
    """The function or class a descriptor, wrapper or partial stands for."""
    for _ in range(20):
        if isinstance(obj, property):
            obj = obj.fget
        elif isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, functools.partial):
            obj = obj.func
        elif inspect.ismethod(obj):
            obj = obj.__func__
        elif getattr(obj, "__wrapped__", None) is not None and \
                getattr(obj, "__module__", "") and \
                not getattr(obj, "__module__", "").startswith("tilegraph"):
            obj = obj.__wrapped__
        else:
            return obj
    return obj


def _file_of(obj: Any) -> str | None:
    try:
        path = inspect.getsourcefile(obj)
    except (TypeError, OSError):
        path = None
    if path is None:
        module = sys.modules.get(getattr(obj, "__module__", None) or "")
        path = getattr(module, "__file__", None)
    if path is None:
        return None
    path = os.path.abspath(path)
    if path.startswith(os.path.join(ROOT, "tilegraph") + os.sep):
        return os.path.relpath(path, ROOT).replace(os.sep, "/")
    return None


def where(owner: Any, name: str) -> tuple[str, str]:
    """``(file, qualified name)`` of what ``owner.name`` is: the file relative to the
    project's root for tilegraph's own code, else the defining package (``numpy``, ...);
    the qualified name of the function or class, or ``value of type T`` for data."""
    home = None
    if inspect.isclass(owner):
        home = next((k for k in owner.__mro__ if name in k.__dict__), None)
        raw = getattr(owner, name) if home is None else home.__dict__[name]
        if inspect.ismemberdescriptor(raw) or inspect.isgetsetdescriptor(raw):
            return (_file_of(home) or home.__module__.split(".")[0],
                    f"{home.__qualname__}.__slots__")
    else:
        raw = getattr(owner, name)
    obj = _behind(raw)
    if inspect.isroutine(obj) or inspect.isclass(obj):
        qual = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
        path = _file_of(obj)
        module = getattr(obj, "__module__", None) or type(obj).__module__ or "?"
        if path is None and isinstance(obj, np.ufunc):
            module = "numpy"
        if module == "numpy.lib.mixins":
            qual = ("NDArrayOperatorsMixin's operator, which calls __array_ufunc__ "
                    "(api_table.array_ufunc)")
        operation = getattr(obj, "operation", None)
        if isinstance(operation, str):
            qual += f", applying {operation}"
        elif operation is not None:
            inner = _file_of(operation) or getattr(operation, "__module__", "?")
            qual += f", calling {inner}: {operation.__qualname__}"
        return (path or module.split(".")[0], qual)
    if inspect.isclass(owner) and home is not None:
        return (_file_of(home) or home.__module__.split(".")[0],
                f"{home.__qualname__}.{name}: {type(obj).__qualname__}")
    if inspect.ismodule(obj):
        return (_file_of(obj) or obj.__name__.split(".")[0], f"module {obj.__name__}")
    kind = type(obj)
    return (kind.__module__.split(".")[0], f"value of type {kind.__qualname__}")


def _array_names(cls: type) -> list[str]:
    names = []
    for name in dir(cls):
        if name.startswith("__") and name.endswith("__"):
            raw = next((k.__dict__[name] for k in cls.__mro__ if name in k.__dict__), None)
            module = getattr(_behind(raw), "__module__", "") or ""
            if not (module.startswith("tilegraph") or module == "numpy.lib.mixins"):
                continue
        elif name.startswith("_"):
            continue
        names.append(name)
    return names


def _namespace_names(module: ModuleType) -> list[str]:
    names = getattr(module, "__all__", None) or dir(module)
    return sorted({n for n in names if not n.startswith("_")})


def listing() -> str:
    """The text of ``docs/api-index.md``."""
    array = tilegraph_array()
    lines = ["# Where each name is defined", "",
             "Generated by `python -m tilegraph.api_index --write` and checked by "
             "`tests/test_api_index.py`: for every method, property and operator of "
             "`tilegraph.Array` and every name of the `tilegraph` namespace (and of "
             "`tilegraph.linalg`, `tilegraph.fft`, `tilegraph.random`), the file and the "
             "qualified name of the function, class or value behind it. Methods are bound "
             "onto `Array` by `tilegraph/array/api_table.py` and most names are served "
             "lazily by `tilegraph/__init__.py`, so a search for `def name` in the class "
             "finds none of them: search for the qualified name in the file given here.",
             "", "## `tilegraph.Array`", "", "| name | file | defined as |", "|---|---|---|"]
    for name in _array_names(array.Array):
        path, qual = where(array.Array, name)
        lines.append(f"| `{name}` | `{path}` | `{qual}` |")
    for ns in NAMESPACES:
        module = importlib.import_module("tilegraph")
        for part in ns.split(".")[1:]:
            module = getattr(module, part)
        lines += ["", f"## `{ns}`", "", "| name | file | defined as |", "|---|---|---|"]
        for name in _namespace_names(module):
            path, qual = where(module, name)
            lines.append(f"| `{name}` | `{path}` | `{qual}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tilegraph.api_index",
                                description="Where every Array method and namespace name "
                                            "is defined (docs/api-index.md).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite docs/api-index.md")
    g.add_argument("--check", action="store_true",
                   help="exit 1 when docs/api-index.md is not the listing of the code")
    args = p.parse_args(argv)
    text = listing()
    if args.write:
        with open(DOC, "w") as f:
            f.write(text)
        return 0
    if args.check:
        try:
            with open(DOC) as f:
                ok = f.read() == text
        except FileNotFoundError:
            ok = False
        if not ok:
            print(f"{DOC} is stale: run python -m tilegraph.api_index --write",
                  file=sys.stderr)
        return 0 if ok else 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
