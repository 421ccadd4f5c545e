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
MMAP_THRESHOLD = 32 << 20  # bytes: larger allocations get their own mappings


def return_freed_blocks_to_os() -> None:
    """Fix glibc's malloc thresholds for runs under a memory limit.

    glibc raises its mmap threshold after large frees (up to 32 MiB) on its own; fixing it
    at ``MMAP_THRESHOLD`` (that same 32 MiB) from the start keeps the blocks of a run
    (megabytes to tens of megabytes) in the heap arenas, where a freed block is reused by
    the next one rather than unmapped and a new one mapped and faulted in page by page (a
    10 MiB partial sum cost 1.6 ms in page faults against 0.5 ms of arithmetic with a
    4 MiB threshold: the array anomaly mean under 1 GB ran 13.3 s instead of 7.5 s). The
    freed memory the arenas keep is what the RSS watch sees beyond the manager's model: it
    counts against the budget, and past a share of the limit the watch gives it back
    (:func:`give_back_freed_memory`), so the peak RSS stays near the limit. Larger blocks
    get their own mappings, released on free. ``M_TRIM_THRESHOLD`` twice that returns a
    heap's free top at once. Process-wide, done once, only on glibc and only when a run
    has an explicit memory limit; elsewhere it does nothing.
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
        """Stop sampling (takes one last sample), wait for the thread, and give the freed
        memory the heaps keep back to the system: the blocks of a run reuse it while the
        run lasts, but the process should not stay that large after it."""
        if not self._stop.is_set():
            self._stop.set()
            if self._thread is not threading.current_thread():
                self._thread.join()
            self._on_sample(resident_bytes())
            give_back_freed_memory()
