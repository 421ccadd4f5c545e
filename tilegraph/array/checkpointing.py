"""Arrays computed with a checkpoint store (:mod:`tilegraph.checkpoint`):
``compute(..., checkpoint=PATH)`` and ``persist(..., store=PATH)``.

Each block of the results is written to the store by the task that makes it; before a run,
the process that returns the results (the driver, rank 0 of an MPI run) takes from the
store the blocks that pass every check, the ranks agree on them (one collective step), and
the plan computes only the others. ``persist(..., store=PATH)`` returns arrays whose blocks
are read back from the store (checked at every read) instead of being held in memory
(made by :mod:`tilegraph.array.methods`: this module imports no Array, as lowering
imports it)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from tilegraph import config, pipeline
from tilegraph.algebra.demand import lower
from tilegraph.array.chunks import all_block_slices, block_shape
from tilegraph.checkpoint import (
    CheckpointStore,
    Resumed,
    finished_blocks,
    keep_blocks,
    plan_keys,
    remember,
)
from tilegraph.graph.dask_spec import gc_paused
from tilegraph.graph.taskgraph import TaskGraph


def store_path(value: Any, where: str) -> str:
    """The absolute path of a checkpoint store given to ``where``, checked for type."""
    import os

    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{where}: a checkpoint store is a directory path (a str), got "
                        f"{type(value).__name__}")
    path = os.fspath(value)
    if not path:
        raise ValueError(f"{where}: the checkpoint store's path is empty")
    return os.path.abspath(path)


class _Blocks:
    """The blocks of some arrays, in order: task key, planned shape and dtype."""

    def __init__(self, arrays: Sequence[Any]):
        self.keys: list[Hashable] = []
        self.shapes: list[tuple[int, ...]] = []
        self.dtypes: list[np.dtype] = []
        self.where: list[tuple[int, tuple[int, ...]]] = []  # (array, coord)
        for n, a in enumerate(arrays):
            for coord in np.ndindex(*a.numblocks):
                self.keys.append(a.collection.key(coord))
                self.shapes.append(block_shape(a.chunks, coord))
                self.dtypes.append(a.dtype)
                self.where.append((n, coord))

    def resume(self, path: str, graph: TaskGraph, backend: Any) -> tuple[list[str], dict]:
        """The plan keys of the blocks, and the blocks the store holds for them, agreed by
        every process of the run (those read on the deciding process only: by position)."""
        pks = plan_keys(graph, self.keys, self.shapes, self.dtypes)
        found: dict[int, Any] = {}
        here = []

        def decide() -> list[int]:
            here.append(True)
            store = CheckpointStore(path, create=True)
            got, refused = finished_blocks(store, pks, self.shapes, self.dtypes)
            found.update(got)
            remember(Resumed(path, len(pks), len(got),
                             {pks[n]: why for n, why in refused.items()}))
            return sorted(got)

        collective = backend.collective
        done = collective.decide(decide) if collective is not None else decide()
        if not here:  # decided on another process
            remember(Resumed(path, len(pks), len(done), {}))
        return pks, {n: found.get(n) for n in done}


def compute_arrays(arrays: Sequence[Any], graph: TaskGraph, results: Any, path: str,
                   backend: Any, options: config.Options) -> list[Any] | None:
    """The results of ``arrays`` (lowered to ``graph``, with their outputs ``results``: an
    :class:`~tilegraph.array.lowering.ArrayOutputs`), their finished blocks taken from the
    checkpoint store at ``path`` and the others computed and written there."""
    unique = list({a.name: a for a in results.arrays}.values())
    blocks = _Blocks(unique)
    pks, done = blocks.resume(path, graph, backend)
    # the output key of each block: its store task (a multi-block result) or itself
    buffers = {a.name: b for a, b in zip(results.arrays, results.buffers, strict=True)}
    out_key = [(f"store-{unique[n].name}", *coord) if buffers[unique[n].name] is not None
               else blocks.keys[i] for i, (n, coord) in enumerate(blocks.where)]
    skip = {out_key[i] for i in done}
    keys = [k for k in results.keys if k not in skip]
    todo = [i for i in range(len(pks)) if i not in done]
    graph = keep_blocks(graph, [blocks.keys[i] for i in todo], [pks[i] for i in todo], path,
                        [blocks.shapes[i] for i in todo], [blocks.dtypes[i] for i in todo])

    def finish(values: list[Any]) -> list[Any]:
        got = dict(zip(keys, values, strict=True))
        slices: dict[int, dict] = {}
        for i, value in done.items():
            n, coord = blocks.where[i]
            buf = buffers[unique[n].name]
            if buf is not None:
                if n not in slices:
                    slices[n] = all_block_slices(unique[n].chunks)
                buf.array[slices[n][coord]] = value  # (read back with its planned shape)
                got[out_key[i]] = None
            else:
                got[out_key[i]] = value
        return results.assemble([got[k] for k in results.keys])

    if keys:
        return pipeline.run(graph, keys, finish=finish, options=options, sized=True,
                            prepared=backend)
    if backend.collective is not None:  # every block was finished: nothing to run
        return backend.collective.share_results(lambda: finish([]),
                                                options.mpi_broadcast_limit)
    return finish([])


def persist_blocks(arrays: list[Any], path: str, options: config.Options) -> list[list[str]]:
    """``arrays`` computed into the checkpoint store at ``path`` (only the blocks it does
    not hold already); the plan keys of each array's blocks, in ``np.ndindex`` order (the
    front end makes arrays that read them: ``persist(..., store=)``)."""
    backend, options = pipeline.prepare(options, None)
    with gc_paused():
        graph = lower([a.collection for a in arrays], options=options).build()
    blocks = _Blocks(arrays)
    pks, done = blocks.resume(path, graph, backend)
    todo = [i for i in range(len(pks)) if i not in done]
    if todo:
        keys = list(dict.fromkeys(blocks.keys[i] for i in todo))
        graph = keep_blocks(graph, [blocks.keys[i] for i in todo], [pks[i] for i in todo],
                            path, [blocks.shapes[i] for i in todo],
                            [blocks.dtypes[i] for i in todo])
        pipeline.run(graph, keys, finish=lambda values: None, options=options,
                     prepared=backend)
    out = []
    start = 0
    for a in arrays:
        out.append(pks[start:start + a.npartitions])
        start += a.npartitions
    return out
