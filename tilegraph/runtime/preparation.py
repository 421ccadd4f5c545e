"""What an :class:`~tilegraph.runtime.core.Execution` reads off its graph before it starts:
the serial positions checked, the dependency slots a retried task's call writes over, the
priorities as lists, the staging tasks; and the private copies of guarded inputs a retry
runs from."""

from __future__ import annotations

import numpy as np

from tilegraph.graph.taskgraph import TaskGraph


def private_inputs(inputs: list, slots: tuple[int, ...]) -> list:
    """``inputs`` with the values at ``slots`` replaced by copies (see "Retries" in
    :mod:`tilegraph.runtime.core`)."""
    inputs = list(inputs)
    for s in slots:
        value = inputs[s]
        copy = getattr(value, "copy", None)
        if callable(copy):
            inputs[s] = copy()
    return inputs


def check_serial(graph: TaskGraph, serial: list) -> list[int]:
    """The ``serial`` column as ints, checked to order every dependency before its task."""
    if any(type(p) is not int for p in serial):
        bad = next(p for p in serial if type(p) is not int)
        raise ValueError(f"the serial column needs an int position for every task, got "
                         f"{bad!r}")
    dep_ptr, dep_idx = graph.dep_ptr, graph.dep_idx
    for i in range(len(graph)):
        for d in dep_idx[dep_ptr[i] : dep_ptr[i + 1]].tolist():
            if serial[d] >= serial[i]:
                raise ValueError(
                    f"the serial column puts task {graph.keys[i]!r} (position {serial[i]}) "
                    f"before its dependency {graph.keys[d]!r} (position {serial[d]})")
    return list(serial)


def guarded_slots(graph: TaskGraph, retries: int, retry_col: list | None
                  ) -> dict[int, tuple[int, ...]]:
    """``guard`` (see "Retries" in :mod:`tilegraph.runtime.core`): task -> the dependency
    slots its call writes over in place, for the tasks that may be retried; empty when none
    may be."""
    if not retries and (retry_col is None or not any(retry_col)):
        return {}
    overwritten = graph.overwritten
    guard = {}
    for i in range(len(graph)):
        slots = overwritten(i)
        if slots:
            guard[i] = slots
    return guard


def priority_lists(priority: np.ndarray) -> tuple[list[int], list[int]]:
    """``priority`` as a list, and ``task_of``: the task of each priority."""
    prio = priority.tolist()
    task_of = [0] * len(prio)
    for i, p in enumerate(prio):
        task_of[p] = i
    return prio, task_of


def staging_tasks(graph: TaskGraph) -> set[int]:
    """The tasks that write a rechunk's pieces to its intermediate store (kind ``stage``)."""
    kinds = graph.meta.get("kind")
    if kinds is None or "stage" not in kinds:
        return set()
    return {i for i, k in enumerate(kinds) if k == "stage"}
