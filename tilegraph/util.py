"""Small helpers shared by every part of tilegraph: byte sizes in words and from words, and
a fast ``unique`` for plans."""

from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
}


def die_with_parent(signum: int) -> None:
    """In a child process: receive ``signum`` when the process that started it dies, even by
    SIGKILL (Linux's ``PR_SET_PDEATHSIG``; nothing elsewhere)."""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signum))   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass   # no prctl: the parent's own clean-up still stops the child


def parse_bytes(value: Any) -> int:
    """Bytes from an int or a string such as ``"2GB"``, ``"512 MiB"`` or ``"1.5e9"``.

    >>> parse_bytes("2GB"), parse_bytes("1.5 GiB"), parse_bytes(1024)
    (2000000000, 1610612736, 1024)
    """
    if isinstance(value, bool):
        raise TypeError(f"memory size must be a number of bytes or a string, got {value!r}")
    if isinstance(value, (int, np.integer)):
        n = int(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"memory size must be finite, got {value!r}")
        n = int(value)
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", value)
        if m is None or m.group(2).lower() not in _UNITS:
            raise ValueError(
                f"cannot read memory size {value!r}; use bytes or a number with a unit such as "
                "'2GB', '512MiB'")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    else:
        raise TypeError(f"memory size must be a number of bytes or a string, got {value!r}")
    if n <= 0:
        raise ValueError(f"memory size must be positive, got {value!r}")
    return n


def positive_seconds(name: str, value: Any) -> float:
    """``value`` as a float number of seconds, or a ValueError naming ``name`` when it is not
    a finite number above 0 (a bool is not a number here).

    >>> positive_seconds("lease", 2)
    2.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def path_value(name: str, value: Any, what: str) -> str:
    """``value`` as a path string (``os.fspath``), or a TypeError saying that option
    ``name`` must be ``what``, with the type it got.

    >>> path_value("report", "run.html", "a file path or None")
    'run.html'
    """
    try:
        return os.fspath(value)
    except TypeError:
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}") from None


def human(n: float) -> str:
    """Bytes in a short readable form."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)




def unique(values: Any, return_inverse: bool = False) -> Any:
    """The sorted distinct values of a 1-D integer array (and, with ``return_inverse``, the
    index of each value among them), like ``np.unique``, by one sort.

    ``np.unique`` of NumPy 2.4 takes about a second for a million int64 values, against
    milliseconds for a sort, and plans call it on arrays of that size.

    >>> unique(np.array([3, 1, 3, 2]))
    array([1, 2, 3])
    >>> unique(np.array([3, 1, 3]), return_inverse=True)
    (array([1, 3]), array([1, 0, 1]))
    """
    x = np.asarray(values).ravel()
    if not return_inverse:
        s = np.sort(x)
        return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size else s
    order = np.argsort(x, kind="stable")
    s = x[order]
    first = np.concatenate(([True], s[1:] != s[:-1])) if s.size else np.zeros(0, bool)
    inverse = np.empty(x.size, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return s[first], inverse


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


AST_LOCK = threading.Lock()
"""Held by every parse or compile of Python source that threads of this process may do at
once (generated LambdaPACK code, ``.npy`` headers): CPython 3.11 can fail two at once with
"AST constructor recursion depth mismatch"."""


def stop_processes(procs: Sequence[subprocess.Popen], grace: float = 5.0) -> None:
    """Terminate ``procs`` (subprocesses this process started), and kill those still
    running after ``grace`` seconds."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[k], ..., starts[k] + lengths[k] - 1`` for every k, one range
    after another (int64): the entries of rows ``k`` of CSR arrays whose row pointers give
    ``starts`` and ``lengths``, gathered without a loop.

    >>> concat_ranges(np.array([0, 5, 9]), np.array([2, 3, 0])).tolist()
    [0, 1, 5, 6, 7]
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    before = np.cumsum(lengths) - lengths  # entries of the output before range k
    return np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
