"""The executor core, its backends, and the event stream. Runs are started by
:mod:`tilegraph.pipeline`, the only caller of the executor."""

from tilegraph.runtime.backends import (
    BACKENDS,
    Backend,
    Partition,
    SyncBackend,
    ThreadsBackend,
    Transport,
    make_backend,
)
from tilegraph.runtime.budget import MemoryLimitError
from tilegraph.runtime.core import Execution, SchedulerStalled
from tilegraph.runtime.events import subscribe

__all__ = [
    "BACKENDS",
    "Backend",
    "Execution",
    "MemoryLimitError",
    "Partition",
    "SchedulerStalled",
    "SyncBackend",
    "ThreadsBackend",
    "Transport",
    "make_backend",
    "subscribe",
]
