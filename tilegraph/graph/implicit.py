"""Implicit graphs: a task graph given by rules rather than by a list of its tasks.

A LambdaPACK program's DAG (numpywren) is never expanded to run on a pool of stateless
workers: a worker that finishes a node asks the graph for the node's children, and the
graph finds them by solving its index equations. A backend that runs such a graph (the
serverless one, through :func:`tilegraph.pipeline.run_implicit`) knows it only through
:class:`ImplicitGraph`, so it knows no front end.

A node is named by a string (its *id*; the serverless state keys a node's counters and
its result by it). The graph answers, for any node id:

- ``starters()``: the nodes with no parents (they read literals and external inputs only);
- ``parents(node)`` and ``children(node)``: the distinct nodes whose results ``node``
  reads, and those that read the result of ``node``; a node is ready once every one of
  its parents has finished;
- ``inputs(node)``: what the node's call reads, in argument order, each a pair
  ``(VALUE, literal value)``, ``(NODE, node id)`` (a parent's result) or
  ``(INPUT, name)`` (an external input, given by value with the run, e.g. an input tile);
- ``readers(name)``: the distinct nodes that read the external input ``name`` (its object
  is freed once they have all finished);
- ``call(node, values)``: the node's result from the values of its inputs, in the order
  of ``inputs(node)``; the values at the positions ``overwritten(node)`` (default none)
  are the call's own copies, which it may write over;
- ``key(node)`` (a hashable key for events), ``opname(node)`` (the name of its operation,
  by which the serverless backend groups task times, e.g. to spot stragglers),
  ``describe(node)`` (the node in words, for error messages) and ``priority(node)``
  (lower runs first among ready nodes; default 0).

An implicit graph is pickled once per run and sent to every worker, so its size should not
depend on the number of its nodes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import Any

VALUE, NODE, INPUT = "value", "node", "input"  # the kinds of input of a node


class ImplicitGraph(ABC):
    """The protocol of an implicit graph (see the module docstring)."""

    @abstractmethod
    def starters(self) -> list[str]:
        """The nodes with no parents."""

    @abstractmethod
    def parents(self, node: str) -> list[str]:
        """The distinct nodes whose results ``node`` reads."""

    @abstractmethod
    def children(self, node: str) -> list[str]:
        """The distinct nodes that read the result of ``node``."""

    @abstractmethod
    def inputs(self, node: str) -> list[tuple[str, Any]]:
        """What ``node`` reads, in argument order: ``(VALUE, value)``, ``(NODE, node)`` or
        ``(INPUT, name)``."""

    @abstractmethod
    def readers(self, name: str) -> list[str]:
        """The distinct nodes that read the external input ``name``."""

    @abstractmethod
    def call(self, node: str, values: list[Any]) -> Any:
        """The result of ``node`` from the values of its inputs."""

    def overwritten(self, node: str) -> tuple[int, ...]:
        """Positions in :meth:`inputs` of the values ``call`` may write over in place."""
        return ()

    @abstractmethod
    def key(self, node: str) -> Hashable:
        """The key of ``node`` in events."""

    @abstractmethod
    def opname(self, node: str) -> str:
        """The name of the operation of ``node``."""

    @abstractmethod
    def describe(self, node: str) -> str:
        """``node`` in words, for error messages."""

    def priority(self, node: str) -> int:
        """Lower runs first among the ready nodes."""
        return 0

    def size(self) -> int | None:
        """The number of nodes, when the graph knows it without expanding (the progress
        bar's total and the run's events); ``None`` otherwise."""
        return None
