"""tilegraph: scalable array and tensor programs as task graphs over blocks.

>>> import tilegraph
>>> from operator import add
>>> tilegraph.get({"a": 1, "b": (add, "a", 41)}, "b")
42
"""

from tilegraph import config
from tilegraph.graph import CycleError, GraphBuilder, GraphError, TaskGraph
from tilegraph.runtime import get, run, subscribe

__version__ = "0.1.0"

__all__ = [
    "CycleError",
    "GraphBuilder",
    "GraphError",
    "TaskGraph",
    "__version__",
    "config",
    "get",
    "run",
    "subscribe",
]
