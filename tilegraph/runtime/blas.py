"""Keeping threads x BLAS threads within the cores (oversubscription silently halves speed)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_controller = None
_controller_modules = -1


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _get_controller():
    """A cached threadpoolctl controller, rescanned when new modules (and so possibly new
    BLAS libraries) were imported since the last scan."""
    global _controller, _controller_modules
    if _controller is None or len(sys.modules) != _controller_modules:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _controller_modules = len(sys.modules)
    return _controller


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """Limit every loaded BLAS library to ``n`` threads inside the block."""
    with _get_controller().limit(limits=max(1, int(n)), user_api="blas"):
        yield
