"""Warnings raised inside tasks carry the user's line, not the executor's.

Python attributes a warning to a frame when it is raised: NumPy's ``RuntimeWarning`` of a
block kernel (``divide by zero encountered in log``) to the innermost Python frame, which is
tilegraph's (the call of a task, a fused chain's kernel), and a ``warnings.warn(...,
stacklevel=2)`` in the user's function to its caller, again tilegraph's. The user would see
``tilegraph/graph/taskgraph.py:148`` where dask users see a line of their own.

So a run remembers the user's line that started it (:func:`user_site`: the innermost frame
of the calling thread outside tilegraph, dask, xarray, NumPy, pandas and the standard
library) and its workers run under it (:func:`running_for`); a warning shown while a worker
runs a task of it, attributed to a file of tilegraph's package, is shown (or recorded by
``warnings.catch_warnings(record=True)``) with that line's file and number instead. A warning
attributed to a file of the user's (their function raised it) keeps its own line, and so does
one attributed to another library. The hook is one wrapper of ``warnings._showwarnmsg``,
installed by the first run (:func:`install`), which changes nothing outside tasks.

Known limit: Python's filters decide before the warning is shown, by the frame it was
attributed to, so under the default action (once per location) two runs from different user
lines that raise the same warning in the same tilegraph kernel show it once.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_here = threading.local()  # .site: (filename, lineno) of the run this thread's tasks are for
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARIES = ("dask", "distributed", "xarray", "numpy", "pandas", "toolz", "cloudpickle",
              "zarr", "numcodecs", "threadpoolctl", "scipy", "_pytest", "pluggy")
_stdlib_dirs: tuple[str, ...] | None = None


def _libraries() -> tuple[str, ...]:
    """Directories whose frames are not the user's: tilegraph's package, the standard
    library and the libraries a tilegraph run passes through (those imported now)."""
    global _stdlib_dirs
    if _stdlib_dirs is None:
        paths = sysconfig.get_paths()
        _stdlib_dirs = tuple(os.path.abspath(paths[key]) + os.sep
                             for key in ("stdlib", "platstdlib") if paths.get(key))
    dirs = [_PACKAGE, *_stdlib_dirs]
    for name in _LIBRARIES:
        origin = getattr(sys.modules.get(name), "__file__", None)
        if origin:
            dirs.append(os.path.dirname(os.path.abspath(origin)) + os.sep)
    return tuple(dirs)


def _is_library(filename: str, libraries: tuple[str, ...]) -> bool:
    if filename.startswith("<frozen"):
        return True  # the import system
    return os.path.abspath(filename).startswith(libraries)


def user_site() -> tuple[str, int] | None:
    """``(filename, lineno)`` of the innermost frame of the calling thread that is the
    user's (outside tilegraph, the standard library and the libraries a run passes
    through), or ``None`` if every frame is a library's."""
    libraries = _libraries()
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not _is_library(filename, libraries):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


def enter(site: tuple[str, int] | None) -> Any:
    """From now on this thread runs tasks of a run started at ``site``: warnings attributed
    to tilegraph's files are shown at ``site`` (``None``: as Python attributes them).
    Returns what :func:`leave` restores."""
    previous = getattr(_here, "site", None)
    _here.site = site
    return previous


def leave(previous: Any) -> None:
    """Undo :func:`enter` (``previous``: what it returned)."""
    _here.site = previous


@contextmanager
def running_for(site: tuple[str, int] | None) -> Iterator[None]:
    """:func:`enter` for the block, then :func:`leave`."""
    previous = enter(site)
    try:
        yield
    finally:
        leave(previous)


def _in_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE)


def _relocated(show: Any) -> Any:
    def _showwarnmsg(msg: Any) -> Any:
        if isinstance(getattr(msg, "filename", None), str) and _in_package(msg.filename):
            # a worker's run, else the user's frame on this thread's stack (a warning
            # while an operation is built, e.g. the user's function called for its dtype)
            site = getattr(_here, "site", None) or user_site()
            if site is not None:
                msg.filename, msg.lineno = site
                msg.line = None  # read again from the user's file
        return show(msg)

    _showwarnmsg.tilegraph_site = True  # type: ignore[attr-defined]
    _showwarnmsg.__wrapped__ = show  # type: ignore[attr-defined]
    return _showwarnmsg


def install() -> None:
    """Wrap ``warnings._showwarnmsg`` (once per process) so that warnings of tasks are
    shown at their run's user line (see the module's docstring)."""
    show = getattr(warnings, "_showwarnmsg", None)
    if show is None or getattr(show, "tilegraph_site", False):
        return
    warnings._showwarnmsg = _relocated(show)  # type: ignore[attr-defined]
