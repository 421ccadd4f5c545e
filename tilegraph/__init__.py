"""tilegraph: scalable array and tensor programs as task graphs over blocks.

>>> import tilegraph
>>> from operator import add
>>> tilegraph.get({"a": 1, "b": (add, "a", 41)}, "b")
42
"""

from tilegraph import config, lambdapack
from tilegraph.array import *  # noqa: F403 - the NumPy-like API lives at the top level
from tilegraph.array import __all__ as _array_all
from tilegraph.array import array_api, linalg, random, sparse
from tilegraph.graph import CycleError, GraphBuilder, GraphError, TaskGraph
from tilegraph.pipeline import PlanTooLargeError, get, last_run, run
from tilegraph.runtime import MemoryLimitError, subscribe
from tilegraph.service.client import Client

__version__ = "0.1.0"

__all__ = [
    *_array_all,
    "Client",
    "CycleError",
    "GraphBuilder",
    "GraphError",
    "TaskGraph",
    "__version__",
    "array_api",
    "config",
    "MemoryLimitError",
    "PlanTooLargeError",
    "get",
    "lambdapack",
    "last_run",
    "linalg",
    "random",
    "run",
    "sparse",
    "subscribe",
]
