"""Keeping threads x BLAS threads within the cores (oversubscription silently halves speed)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_controller = None
_controller_modules = -1


def blas_controller():
    """A cached threadpoolctl controller, rescanned when new modules (and so possibly new
    BLAS libraries) were imported since the last scan. A process forked from this one
    may use it as its own (it has the same libraries loaded)."""
    global _controller, _controller_modules
    if _controller is None or len(sys.modules) != _controller_modules:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
        _controller_modules = len(sys.modules)
    return _controller


_limits_lock = threading.Lock()
_active: list[int] = []  # the limits of the blocks entered and not yet left, in any thread
_saved: list[tuple[Any, int]] = []  # (library, its thread count before the first block)


def _set_threads(lib: Any, n: int) -> None:
    # threadpoolctl lets only one Python thread change OpenBLAS's process-wide pool (others'
    # calls are ignored); the blocks here coordinate the threads of tilegraph themselves
    setter = getattr(lib, "_real_set_num_threads", None) or lib.set_num_threads
    setter(n)


def _limit_all(n: int) -> None:
    for lib, _ in _saved:
        _set_threads(lib, n)


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """Limit every loaded BLAS library to ``n`` threads inside the block.

    A BLAS library's thread count is one setting for the whole process, so blocks entered
    at the same time (computes running in several threads) share it: while any block is
    open, BLAS runs with the smallest limit among the open blocks, and when the last one is
    left the thread counts from before the first are restored, whatever order the blocks
    are left in.
    """
    n = max(1, int(n))
    with _limits_lock:
        if not _active:
            _saved[:] = [(lib, lib.num_threads) for lib in blas_controller().lib_controllers
                         if lib.user_api == "blas" and lib.num_threads is not None]
            _limit_all(n)
        elif n < min(_active):
            _limit_all(n)
        _active.append(n)
    try:
        yield
    finally:
        with _limits_lock:
            _active.remove(n)
            if not _active:
                for lib, before in _saved:
                    _set_threads(lib, before)
                _saved.clear()
            elif n < min(_active):
                _limit_all(min(_active))


@contextmanager
def widened(n: int) -> Iterator[None]:
    """Inside one open :func:`blas_threads` block (one run limiting BLAS), let BLAS use
    ``n`` threads for a while: a task running alone, with no other task ready, has the
    cores the run's other workers would use. Nothing changes when no block or several
    blocks are open (other runs share the setting)."""
    with _limits_lock:
        wide = len(_active) == 1 and n > _active[0]
        if wide:
            _limit_all(n)
    try:
        yield
    finally:
        if wide:
            with _limits_lock:
                if _active:
                    _limit_all(min(_active))
