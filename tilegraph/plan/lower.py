"""From arrays to a runnable plan: lower the block collections to one TaskGraph, add the
tasks that write the results, and fuse chains."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import lower
from tilegraph.array.chunks import all_block_slices
from tilegraph.graph.dask_spec import gc_paused
from tilegraph.graph.taskgraph import TaskGraph
from tilegraph.plan.fuse import FuseStats, fuse_chains


class OutputBuffer:
    """The NumPy array a multi-block result is written into, allocated by the first block
    that arrives (so planning alone allocates nothing)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = shape
        self.dtype = dtype
        self._array: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            with self._lock:
                if self._array is None:
                    self._array = np.empty(self.shape, dtype=self.dtype)
        return self._array

    def __repr__(self) -> str:
        return f"OutputBuffer(shape={self.shape}, dtype={self.dtype})"


def store_block(buffer: OutputBuffer, slices: tuple, block: np.ndarray) -> None:
    """Copy one result block into its place in the output."""
    buffer.array[slices] = block


@dataclass
class Plan:
    """A lowered, fused plan: the graph, the keys to run, and how to turn their values into
    the results."""

    graph: TaskGraph
    outputs: list[Hashable]
    arrays: list[Any]
    fuse_stats: FuseStats
    _buffers: list[OutputBuffer | None]
    _single: list[Hashable | None]

    def assemble(self, values: Sequence[Any]) -> list[Any]:
        got = dict(zip(self.outputs, values, strict=True))
        out = []
        for arr, buf, key in zip(self.arrays, self._buffers, self._single, strict=True):
            if buf is not None:
                out.append(buf.array if arr.size else np.empty(arr.shape, arr.dtype))
            else:
                value = got[key]
                if arr.ndim == 0:
                    value = np.asarray(value, dtype=arr.dtype)[()]
                out.append(value)
        return out


def plan_arrays(arrays: Sequence[Any], fuse: bool = True,
                place: Callable[[TaskGraph], np.ndarray] | None = None) -> Plan:
    """Lower ``arrays`` (sharing their common subexpressions) to one fused TaskGraph.

    ``place(graph)`` gives every task a worker (for backends of several processes); the
    placement is made before fusion, which then fuses only tasks on the same worker."""
    from tilegraph.graph.taskgraph import Dep, Lit

    with gc_paused():
        builder = lower([a.blocks for a in arrays])
        outputs: list[Hashable] = []
        buffers: list[OutputBuffer | None] = []
        single: list[Hashable | None] = []
        stored: dict[str, OutputBuffer] = {}
        for a in arrays:
            if a.npartitions == 1:
                key = a.blocks.key((0,) * a.ndim)
                outputs.append(key)
                buffers.append(None)
                single.append(key)
                continue
            buf = stored.get(a.name)
            if buf is None:
                buf = stored[a.name] = OutputBuffer(a.shape, a.dtype)
                itemsize = a.dtype.itemsize
                for coord, slc in all_block_slices(a.chunks).items():
                    key = (f"store-{a.name}", *coord)
                    nb = itemsize * math.prod(s.stop - s.start for s in slc)
                    builder.add(key, store_block, deps=[a.blocks.key(coord)],
                                args=(buf, Lit(slc), Dep(0)), kind="store", name="store",
                                coords=coord, nbytes=nb)
                    outputs.append(key)
            buffers.append(buf)
            single.append(None)
        outputs = list(dict.fromkeys(outputs))
        graph = _placed(builder.build(), place)
        stats = FuseStats(before=len(graph), after=len(graph))
        if fuse:
            graph, stats = fuse_chains(graph, graph.indices(outputs))
    return Plan(graph, outputs, list(arrays), stats, buffers, single)


def _placed(graph: TaskGraph, place: Callable[[TaskGraph], np.ndarray] | None) -> TaskGraph:
    if place is None:
        return graph
    return graph.with_meta(worker=np.asarray(place(graph), dtype=np.int64).tolist())


def placement_for(options: dict[str, Any]) -> Callable[[TaskGraph], np.ndarray] | None:
    """The placement function of the backend the resolved ``options`` select, or ``None``
    when its workers share one memory."""
    from tilegraph.runtime.backends import make_backend

    if options["backend"] in ("threads", "sync"):
        return None
    backend = make_backend(options["backend"], options["workers"])
    if not backend.distributed:
        return None
    initial = options["placement"]
    return lambda graph: backend.place(graph, initial)


def run_blocks(colls: Sequence[Any], **options: Any) -> bool:
    """Run every task of the collections ``colls`` for their side effects (writes).
    Returns whether the results were gathered in this process (False on MPI ranks but 0)."""
    from tilegraph import config
    from tilegraph.runtime.api import run

    place = placement_for(config.resolve(options, "run_blocks()"))
    with gc_paused():
        builder = lower(colls)
        outputs = list(dict.fromkeys(c.key(coord) for c in colls for coord in c.coords()))
        graph = _placed(builder.build(), place)
        graph, _ = fuse_chains(graph, graph.indices(outputs))
    return run(graph, outputs, **options) is not None
