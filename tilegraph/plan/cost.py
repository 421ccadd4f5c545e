"""The cost model: how long a task computes and how long a block takes to move.

One model serves the placement (cost = cpu + alpha * communication) and the simulator
(makespan, bytes moved, peak memory per worker), so that both reason with the same numbers.

A task's compute time is its flop count (the ``cost`` column, e.g. ``2mnk`` for a block
product, from the ``flops`` formula of its op kind in :mod:`tilegraph.graph.kinds`) divided by
``flop_rate``; a task without a flop count is memory-bound: it streams its result and its
temporaries (the executor's estimate, :func:`tilegraph.graph.memory.task_estimates`, from
the ``temp_factor`` of its kind) once in and once out, ``2 * estimate / mem_bandwidth``.
Every task also pays ``task_overhead`` (the scheduler's own time). A message of ``b`` bytes
takes ``latency + (b + message_bytes) / bandwidth`` to arrive.

What crosses the network is more than the blocks: each message carries ``message_bytes``
beyond its block (the transport's header, the framing of the pickled or raw payload, TCP/IP
headers and acknowledgements), each task costs ``task_bytes`` (a scheduler that ships tasks
to its workers, as dask's does, sends each task's definition and hears back its end; zero
when every process plans for itself, as MPI's ranks do) and each run ``run_bytes`` (the
steps the processes take together: the plan check, the placement, the start and end).
:meth:`CostModel.wire_bytes` adds them up; their values for a transport are measured
(``bench/cluster.py --calibrate`` fits them to the bytes the network interfaces counted).

>>> m = CostModel(flop_rate=1e9, bandwidth=1e8, latency=1e-3, mem_bandwidth=1e9,
...               task_overhead=0.0)
>>> m.transfer_seconds(1e8)
1.001
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.graph.memory import (
    DISK_BANDWIDTH,
    FLOP_RATE,
    MEM_BANDWIDTH,
    TASK_OVERHEAD,
    spill_seconds,
    step_seconds,
)


@dataclass(frozen=True)
class CostModel:
    """Machine parameters, per worker: ``flop_rate`` (flop/s), ``mem_bandwidth`` (bytes/s
    for memory-bound tasks), ``bandwidth`` (bytes/s of one worker's network link),
    ``latency`` (seconds per message), ``task_overhead`` (seconds of scheduling per task)
    and ``disk_bandwidth`` (bytes/s of writing a spilled block, and of reading it back);
    and what the transport adds on the network: ``message_bytes`` per message,
    ``task_bytes`` per task, ``run_bytes`` per run (see the module docstring). The defaults
    are one core of a current server, a 10 Gbit/s network and a local SSD (the figures of
    the memory model, :mod:`tilegraph.graph.memory`, which decides what is made again
    rather than spilled with them), and blocks alone on the network."""

    flop_rate: float = FLOP_RATE
    mem_bandwidth: float = MEM_BANDWIDTH
    bandwidth: float = 1.25e9
    latency: float = 20e-6
    task_overhead: float = TASK_OVERHEAD
    disk_bandwidth: float = DISK_BANDWIDTH
    message_bytes: float = 0.0
    task_bytes: float = 0.0
    run_bytes: float = 0.0

    def __post_init__(self) -> None:
        for name in ("flop_rate", "mem_bandwidth", "bandwidth", "disk_bandwidth"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"CostModel: {name} must be a positive number, got {value!r}")
        for name in ("latency", "task_overhead", "message_bytes", "task_bytes", "run_bytes"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"CostModel: {name} must be a number >= 0, got {value!r}")

    def task_seconds(self, graph: Any, estimates: Any = None) -> np.ndarray:
        """Estimated compute seconds of every task of ``graph`` (float64 array);
        ``estimates``: its :func:`~tilegraph.graph.memory.task_estimates` if already known."""
        return step_seconds(graph, estimates, flop_rate=self.flop_rate,
                            mem_bandwidth=self.mem_bandwidth,
                            task_overhead=self.task_overhead)

    def spill_seconds(self, nbytes: float) -> float:
        """Seconds to write a block of ``nbytes`` to disk and read it back."""
        return spill_seconds(nbytes, self.disk_bandwidth)

    def transfer_seconds(self, nbytes: Any) -> Any:
        """Seconds for a message of ``nbytes`` bytes (a number or an array) to arrive."""
        if isinstance(nbytes, np.ndarray):
            return self.latency + (np.asarray(nbytes, dtype=np.float64)
                                   + self.message_bytes) / self.bandwidth
        return self.latency + (float(nbytes) + self.message_bytes) / self.bandwidth

    def wire_bytes(self, block_bytes: float, messages: int, tasks: int) -> float:
        """Bytes on the network for ``messages`` messages carrying ``block_bytes`` bytes of
        blocks in a run of ``tasks`` tasks (see the module docstring).

        >>> CostModel(message_bytes=100, task_bytes=10, run_bytes=1000).wire_bytes(
        ...     1e6, messages=20, tasks=50)
        1003500.0
        """
        return (float(block_bytes) + messages * self.message_bytes + tasks * self.task_bytes
                + self.run_bytes)


def column(graph: Any, name: str, n: int | None = None) -> np.ndarray:
    """The numeric metadata column ``name`` of ``graph`` as float64, missing values 0."""
    n = len(graph) if n is None else n
    col = graph.meta.get(name)
    if col is None:
        return np.zeros(n, dtype=np.float64)
    return np.fromiter((0.0 if v is None else float(v) for v in col), dtype=np.float64,
                       count=n)
