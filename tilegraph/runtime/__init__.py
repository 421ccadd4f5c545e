"""The executor core, its backends, and the event stream."""

from tilegraph.runtime.api import get, run
from tilegraph.runtime.backends import BACKENDS, Backend, SyncBackend, ThreadsBackend, make_backend
from tilegraph.runtime.core import Execution, SchedulerStalled
from tilegraph.runtime.events import subscribe

__all__ = [
    "BACKENDS",
    "Backend",
    "Execution",
    "SchedulerStalled",
    "SyncBackend",
    "ThreadsBackend",
    "get",
    "make_backend",
    "run",
    "subscribe",
]
