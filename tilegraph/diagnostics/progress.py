"""A progress bar for runs longer than a second, with the memory in use.

The bar does not subscribe to events: a thread of its own reads the executor's counters
(tasks done, bytes held, bytes spilled) ten times a second, so the run pays nothing per
task for it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from tilegraph.util import human


def progress_wanted(option: bool | str, stream: IO[str] | None = None) -> bool:
    """Whether to show a bar: ``True``/``False`` as given; ``"auto"`` means "on a terminal"."""
    if option == "auto":
        stream = sys.stderr if stream is None else stream
        isatty = getattr(stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except ValueError:  # closed stream
            return False
    return bool(option)


class ProgressBar:
    """Shows the progress of ``execution`` on ``stream`` once it has run ``delay`` seconds.

    Use as a context manager around the run; leaving the block stops and joins the thread.
    """

    def __init__(self, execution: Any, delay: float = 1.0, interval: float = 0.1,
                 stream: IO[str] | None = None,
                 progress: Callable[[], tuple[int, int]] | None = None):
        """``progress()``: ``(tasks done, tasks in all)`` when the run has tasks the
        executor does not hold (a serverless pool's), else the executor's counters;
        ``execution`` is ``None`` for a run no executor here holds (an implicit graph run
        by a pool): the bar then shows no memory."""
        self.execution = execution
        self.progress = progress or (lambda: (execution.ndone, execution.ntasks))
        self.delay = delay
        self.interval = interval
        self.stream = sys.stderr if stream is None else stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._show, name="tilegraph-progress",
                                        daemon=True)
        self.shown = False

    def __enter__(self) -> ProgressBar:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _show(self) -> None:
        if self._stop.wait(self.delay):
            return
        from tqdm import tqdm

        ex = self.execution
        self.shown = True
        done, total = self.progress()
        with tqdm(total=total, desc="tilegraph", unit="task", file=self.stream,
                  dynamic_ncols=True, leave=True) as bar:
            shown = 0
            while True:
                stopped = self._stop.wait(self.interval)
                done, total = self.progress()
                if total != bar.total:
                    bar.total = total
                if ex is not None:
                    bar.set_postfix_str(memory_text(ex.memory), refresh=False)
                if done > shown:
                    bar.update(done - shown)
                    shown = done
                else:
                    bar.refresh()
                if stopped:
                    break


def memory_text(memory: Any) -> str:
    """Memory in use as the bar shows it, from a run's memory manager
    (:class:`~tilegraph.runtime.memory.MemoryManager`): bytes held (+ reserved by running
    tasks) of the limit, and bytes spilled so far."""
    live = memory.live + memory.reserved
    limit = memory.limit
    text = f"mem {human(live)}" + (f"/{human(limit)}" if limit else "")
    spilled = memory.spilled_bytes
    return text + (f" spilled {human(spilled)}" if spilled else "")
