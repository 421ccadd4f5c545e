"""Measuring a run in this process: its best time over repeats and the peak growth of the
resident memory while it runs (:func:`measure`), and touching memory before timing
(:func:`touch_memory`), and the best times of several functions taking turns
(:func:`best_alternating`). Used by the benchmarks of this directory."""

from __future__ import annotations

import gc
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np


class PeakRSS:
    """Peak growth of this process's resident memory while the block runs, sampled by a
    thread every ``interval`` seconds with psutil (BLAS and NumPy allocations included,
    which ``tracemalloc`` would miss)."""

    def __init__(self, interval: float = 0.002):
        self.interval = interval
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        import psutil

        proc = psutil.Process()
        while True:
            self.peak = max(self.peak, proc.memory_info().rss)
            if self._stop.wait(self.interval):
                self.peak = max(self.peak, proc.memory_info().rss)
                return

    def __enter__(self) -> PeakRSS:
        import psutil

        self.baseline = self.peak = psutil.Process().memory_info().rss
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def growth(self) -> int:
        """Peak resident bytes above the level at entry."""
        return max(0, self.peak - self.baseline)


def measure(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, int, Any]:
    """Best of ``repeat`` runs of ``fn``: (seconds, peak RSS growth in bytes, the last
    result). Each run starts after a garbage collection, with the heaps' free memory given
    back to the system (else a block reused from memory freed earlier, which a run under a
    memory limit keeps in the heaps, would not show as growth); the result of the previous
    run is dropped first."""
    from tilegraph.runtime.rss import give_back_freed_memory

    best_t, best_mem, result = math.inf, 0, None
    for i in range(repeat):
        result = None
        gc.collect()
        give_back_freed_memory()
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - t0
        if i == 0 or elapsed < best_t:
            best_t = elapsed
        best_mem = mem.growth if i == 0 else min(best_mem, mem.growth)
    return best_t, best_mem, result



def best_alternating(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The best time of ``repeat`` runs of each function, the functions taking turns."""
    t = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            t[name] = min(t[name], time.perf_counter() - t0)
    return t


def touch_memory(nbytes: float) -> None:
    """Write ``nbytes`` (at most half the available memory) once and free it again.

    On virtual machines the first write to memory the process has never used can be many
    times slower than any later one (the host backs the guest's pages on first touch), and
    it would be charged to whichever system runs first; touching it beforehand makes the
    timed runs equal. Freed pages return to the OS and are reused at full speed."""
    import psutil

    limit = 0.5 * psutil.virtual_memory().available
    count = int(min(max(nbytes, 0.0), limit) // 8)
    if count:
        block = np.ones(count)
        del block

