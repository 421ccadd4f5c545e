"""The executor core, its backends, and the event stream."""

from tilegraph.runtime.api import RunSummary, get, last_run, run
from tilegraph.runtime.backends import BACKENDS, Backend, SyncBackend, ThreadsBackend, make_backend
from tilegraph.runtime.core import Execution, SchedulerStalled
from tilegraph.runtime.events import subscribe
from tilegraph.runtime.memory import MemoryLimitError

__all__ = [
    "BACKENDS",
    "Backend",
    "Execution",
    "MemoryLimitError",
    "RunSummary",
    "SchedulerStalled",
    "SyncBackend",
    "ThreadsBackend",
    "get",
    "last_run",
    "make_backend",
    "run",
    "subscribe",
]
