"""Automatic parallelisation of serial Python scripts.

:func:`analyze` reads a script (without running it) and returns its task graph: one task per
top-level statement, def-use and ordering edges, side-effect classes and barriers
(:mod:`tilegraph.autopar.analysis`). :func:`run_script` runs the script on forked worker
processes following that graph, with the same standard output and files as the serial run:
a pipeline run (:mod:`tilegraph.autopar.runner`) on a backend of processes holding
namespaces (:mod:`tilegraph.autopar.processes`). :func:`explain` and :func:`to_dot` show the graph;
:func:`profile_script` times a serial run for :func:`simulate_workers`
(:mod:`tilegraph.autopar.explain`).

>>> g = analyze("a = 1\\nb = a * 2\\nc = 3\\n")
>>> [(e.src, e.dst, e.type, e.variable) for e in g.edges]
[(0, 1, 'def-use', 'a')]
"""

from tilegraph.autopar.analysis import (
    EDGE_TYPES,
    AnalysisError,
    Edge,
    Effect,
    ScriptGraph,
    Task,
    analyze,
)
from tilegraph.autopar.explain import explain, simulate_workers, to_dot
from tilegraph.autopar.runner import (
    Profile,
    RunStats,
    ScriptError,
    ScriptExit,
    profile_script,
    run_script,
)

__all__ = [
    "EDGE_TYPES",
    "AnalysisError",
    "Edge",
    "Effect",
    "Profile",
    "RunStats",
    "ScriptError",
    "ScriptExit",
    "ScriptGraph",
    "Task",
    "analyze",
    "explain",
    "profile_script",
    "run_script",
    "simulate_workers",
    "to_dot",
]
