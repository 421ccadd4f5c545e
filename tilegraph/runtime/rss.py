"""The process's resident set (RSS), as the memory manager watches it during a run.

The bytes of results and the estimates of running tasks are what the memory manager counts
itself; the operating system sees more: the interpreter and its libraries (the *baseline*,
there before the run), and whatever grows with the work beyond the manager's model (a fused
chain's temporaries beyond its estimate, a remake's steps, a rechunk's staging buffers,
blocks in flight to other processes, BLAS workspaces, freed memory the allocator has not
given back). A :class:`ResidentWatch` samples the RSS every ``INTERVAL`` seconds on its own
thread while a run with a given ``memory_limit`` goes on, and hands each sample to the
manager (which counts what its model does not see against the budget, and keeps the peak);
when the unseen part grows, it asks the C allocator to give freed memory back.

>>> resident_bytes() > 0
True
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

INTERVAL = 0.01  # seconds between two samples of the RSS during a run
TRIM_EVERY = 0.5  # seconds: the allocator is asked to give memory back at most this often

_allocator_tuned = False
MMAP_THRESHOLD = 4 << 20  # bytes: larger allocations get their own mappings


def return_freed_blocks_to_os() -> None:
    """Make glibc's malloc give every large freed block back to the OS at once.

    glibc raises its mmap threshold after large frees (up to 32 MiB), after which blocks of
    that size come from heap arenas that keep freed memory: the process's resident set then
    stays far above the bytes it holds. A fixed threshold of ``MMAP_THRESHOLD`` (4 MiB)
    keeps blocks larger than that in their own mappings, released on free, while the many
    small buffers of a run (pieces of a rechunk, zarr's chunk buffers) are reused from the
    arenas rather than mapped, faulted in and unmapped each time. Process-wide, done once,
    only on glibc and only when a run has an explicit memory limit; elsewhere it does
    nothing.
    """
    global _allocator_tuned
    if _allocator_tuned:
        return
    _allocator_tuned = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(ctypes.c_int(-3), ctypes.c_int(MMAP_THRESHOLD))  # M_MMAP_THRESHOLD
        libc.mallopt(ctypes.c_int(-1), ctypes.c_int(2 * MMAP_THRESHOLD))  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_trim: Callable[[int], int] | bool | None = False  # False: not looked up yet


def resident_bytes() -> int:
    """This process's resident set now, in bytes (0 where ``/proc`` does not say)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def give_back_freed_memory() -> bool:
    """Ask glibc's allocator to return the free memory of its heaps to the system
    (``malloc_trim(0)``); False where there is no glibc."""
    global _trim
    if _trim is False:
        try:
            import ctypes

            _trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _trim = None
    if _trim is None:
        return False
    _trim(0)
    return True


class ResidentWatch:
    """A thread that samples the RSS every ``interval`` seconds and calls
    ``on_sample(rss)`` with each sample, until :meth:`stop` or until ``finished()`` is
    true (after one last sample). ``on_sample`` returns the bytes of the RSS that the
    caller's model does not account for; when those exceed ``trim_above`` bytes, freed
    memory is given back to the system (at most every ``TRIM_EVERY`` seconds)."""

    def __init__(self, on_sample: Callable[[int], int], finished: Callable[[], bool],
                 trim_above: int, interval: float = INTERVAL):
        self._on_sample = on_sample
        self._finished = finished
        self._trim_above = trim_above
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tilegraph-rss", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        trimmed = 0.0
        while not self._stop.wait(self._interval):
            unseen = self._on_sample(resident_bytes())
            if self._finished():
                return
            now = time.monotonic()
            if unseen > self._trim_above and now - trimmed >= TRIM_EVERY:
                trimmed = now
                give_back_freed_memory()

    def stop(self) -> None:
        """Stop sampling (takes one last sample) and wait for the thread."""
        if not self._stop.is_set():
            self._stop.set()
            if self._thread is not threading.current_thread():
                self._thread.join()
            self._on_sample(resident_bytes())
