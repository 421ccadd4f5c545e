"""The task-graph IR every front end lowers to, and dask-style dict graphs in and out."""

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.dask_spec import from_dask, to_dask
from tilegraph.graph.taskgraph import (
    MODE_DATA,
    MODE_DIRECT,
    MODE_FLAT,
    MODE_NESTED,
    Call,
    CycleError,
    Dep,
    GraphError,
    Lit,
    TaskGraph,
    TaskMeta,
    fill,
    funcname,
)

__all__ = [
    "MODE_DATA",
    "MODE_DIRECT",
    "MODE_FLAT",
    "MODE_NESTED",
    "Call",
    "CycleError",
    "Dep",
    "GraphBuilder",
    "GraphError",
    "Lit",
    "TaskGraph",
    "TaskMeta",
    "fill",
    "from_dask",
    "funcname",
    "to_dask",
]
