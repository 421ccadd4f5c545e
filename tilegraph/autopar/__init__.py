"""Automatic parallelisation of serial Python scripts.

:func:`analyze` reads a script (without running it) and returns its task graph: one task per
top-level statement, def-use and ordering edges, side-effect classes and barriers
(:mod:`tilegraph.autopar.analysis`). :func:`run_script` runs the script on forked worker
processes following that graph, with the same standard output and files as the serial run
(:mod:`tilegraph.autopar.runner`). :func:`explain` and :func:`to_dot` show the graph.
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

__all__ = ["EDGE_TYPES", "AnalysisError", "Edge", "Effect", "ScriptGraph", "Task", "analyze"]
