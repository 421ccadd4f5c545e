"""From arrays to the pipeline: lower the block collections to one TaskGraph, add the tasks
that write the results into their output arrays, and hand the graph to
:mod:`tilegraph.pipeline`, which plans and runs it."""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph import config, pipeline
from tilegraph.algebra.demand import LoweringPlan
from tilegraph.array.chunks import all_block_slices
from tilegraph.graph.dask_spec import gc_paused
from tilegraph.graph.taskgraph import Dep, Lit, TaskGraph
from tilegraph.plan.cost import CostModel
from tilegraph.plan.fuse import FuseStats


class OutputBuffer:
    """The NumPy array a multi-block result is written into, allocated by the first block
    that arrives (so planning alone allocates nothing).

    A numeric result starts as zeros: a large ``np.zeros`` is memory the system maps on
    first touch, zero until then, so a block of zeros (the upper tiles of a Cholesky
    factor, a band's outside) need not be copied at all (:func:`store_block`): its pages
    are never touched unless the caller writes them. On a virtual machine, touching fresh
    memory is what assembling a large result costs most."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype):
        self.shape = shape
        self.dtype = dtype
        self._array: np.ndarray | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:  # a plan is pickled to run elsewhere
        return {"shape": self.shape, "dtype": self.dtype, "_array": self._array}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            with self._lock:
                if self._array is None:
                    make = np.zeros if self.zeroed else np.empty
                    self._array = make(self.shape, dtype=self.dtype)
        return self._array

    @property
    def zeroed(self) -> bool:
        """Whether the array starts as zeros (numbers and booleans)."""
        return np.dtype(self.dtype).kind in "biufc"

    def __repr__(self) -> str:
        return f"OutputBuffer(shape={self.shape}, dtype={self.dtype})"


def store_block(buffer: OutputBuffer, slices: tuple, block: np.ndarray) -> None:
    """Copy one result block into its place in the output, after checking that it has the
    planned shape (NumPy would broadcast a smaller one silently)."""
    shape = tuple(s.stop - s.start for s in slices)
    got = np.shape(block)
    if got != shape:
        raise ValueError(block_shape_error(got, shape, slices))
    if buffer.zeroed and _all_zero(block):
        buffer.array  # noqa: B018 - allocated even when every block is zeros
        return
    buffer.array[slices] = block


def _all_zero(block: Any) -> bool:
    """Whether ``block`` holds only zeros that read back the same from a zeroed array
    (a negative zero does not). A block whose first element is not zero is not scanned."""
    if not isinstance(block, np.ndarray) or block.size == 0:
        return False
    if block.flat[0] != 0 or block.any():
        return False
    if block.dtype.kind == "f":
        return not np.signbit(block).any()
    if block.dtype.kind == "c":
        return not (np.signbit(block.real).any() or np.signbit(block.imag).any())
    return True


def block_shape_error(got: tuple, shape: tuple, slices: tuple) -> str:
    """The message for a block that has another shape than the plan says."""
    where = ", ".join(f"{s.start}:{s.stop}" for s in slices)
    return (f"a block of the result has shape {got}, but the plan expects {shape} (region "
            f"[{where}]); a map_blocks function that returns blocks of another shape than "
            "its input's must say so: pass chunks=, the result's block sizes")


@dataclass(frozen=True)
class ArrayOutputs:
    """The output tasks of a computation of ``arrays`` (``keys``) and how their values
    become the results: a multi-block result is written into its :class:`OutputBuffer` by
    store tasks; a one-block result is that block's value."""

    arrays: list[Any]
    keys: list[Hashable]
    buffers: list[OutputBuffer | None]
    single: list[Hashable | None]

    def assemble(self, values: Sequence[Any]) -> list[Any]:
        """The results of the arrays from the values of ``keys``."""
        got = dict(zip(self.keys, values, strict=True))
        out = []
        for arr, buf, key in zip(self.arrays, self.buffers, self.single, strict=True):
            if buf is not None:
                out.append(buf.array if arr.size else np.empty(arr.shape, arr.dtype))
            else:
                value = got[key]
                if np.shape(value) != arr.shape and isinstance(value, np.ndarray):
                    raise ValueError(block_shape_error(
                        value.shape, arr.shape, tuple(slice(0, n) for n in arr.shape)))
                if arr.ndim == 0:
                    value = np.asarray(value, dtype=arr.dtype)[()]
                out.append(value)
        return out


def planning_options(where: str, processes: int | None = None) -> config.Options:
    """The options of a plan made outside any run (``explain``, a drawing, a dask graph,
    a plan sent to the service): the options in force (``config.set``) resolved as a run's
    are, and completed for ``processes`` processes on this host (default: one)."""
    return config.per_process(config.resolve({}, where), processes or 1)


def lower_arrays(arrays: Sequence[Any], options: config.Options | None = None
                 ) -> tuple[TaskGraph, ArrayOutputs]:
    """Lower ``arrays`` (sharing their common subexpressions) to one TaskGraph for a run of
    ``options`` (completed for its backend: :func:`tilegraph.config.per_process`; by
    default those in force, for one process: :func:`planning_options`), with a store task
    per block of every multi-block result. A plan of more than ``options.max_tasks`` tasks
    is refused before anything is built (the run's one check of its size). Only the
    blocks the results read are planned (a slice of a large array plans what it reads:
    :class:`~tilegraph.algebra.demand.LoweringPlan`)."""
    if options is None:
        options = planning_options("lower_arrays()")
    stores = sum(a.npartitions for a in {a.name: a for a in arrays}.values()
                 if a.npartitions > 1)
    plan = LoweringPlan([a.collection for a in arrays], options)
    pipeline.check_plan_size(plan.count() + stores, options.max_tasks)
    with gc_paused():
        builder = plan.lower()
        keys: list[Hashable] = []
        buffers: list[OutputBuffer | None] = []
        single: list[Hashable | None] = []
        stored: dict[str, OutputBuffer] = {}
        for a in arrays:
            if a.npartitions == 1:
                key = a.collection.key((0,) * a.ndim)
                keys.append(key)
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
                    builder.add(key, store_block, deps=[a.collection.key(coord)],
                                args=(buf, Lit(slc), Dep(0)), kind="store", name="store",
                                coords=coord, nbytes=nb)
                    keys.append(key)
            buffers.append(buf)
            single.append(None)
        graph = builder.build()
    return graph, ArrayOutputs(list(arrays), list(dict.fromkeys(keys)), buffers, single)


@dataclass(frozen=True)
class ArrayPlan:
    """The pipeline's plan of computing some arrays together, and their outputs."""

    plan: pipeline.Plan
    results: ArrayOutputs

    @property
    def graph(self) -> TaskGraph:
        return self.plan.graph

    @property
    def outputs(self) -> list[Hashable]:
        return self.plan.keys

    @property
    def fuse_stats(self) -> FuseStats:
        return self.plan.fuse_stats


def plan_arrays(arrays: Sequence[Any], fuse: bool = True, *, processes: int | None = None,
                initial: str = "cyclic", model: CostModel | None = None,
                options: config.Options | None = None) -> ArrayPlan:
    """The pipeline's plan (cull, place, fuse, order) of computing ``arrays`` together,
    without running it. ``processes=p`` places the tasks on ``p`` worker processes
    (see :func:`tilegraph.pipeline.make_plan`). ``options``: the completed options of the
    run it is made for; by default those in force, for ``processes`` processes on this host
    (:func:`planning_options`)."""
    if options is None:
        options = planning_options("plan_arrays()", processes)
    graph, results = lower_arrays(arrays, options)
    plan = pipeline.make_plan(graph, results.keys, processes=processes, initial=initial,
                              model=model, fuse=fuse, memory=options.memory_limit)
    return ArrayPlan(plan, results)


def compute_arrays(arrays: Sequence[Any], options: config.Options,
                   checkpoint: Any = None) -> list[Any] | None:
    """The values of ``arrays`` computed with one shared plan by the pipeline, with the
    run's ``options`` (``None`` on the MPI ranks other than 0 when the results are larger
    than ``mpi_broadcast_limit``). The run's backend is made first, so that the graph is
    built for the memory limit its processes enforce. ``checkpoint``: the path of a
    checkpoint store (:mod:`tilegraph.array.checkpointing`)."""
    if checkpoint is not None:
        from tilegraph.array.checkpointing import compute_arrays as resumed
        from tilegraph.array.checkpointing import store_path

        checkpoint = store_path(checkpoint, "compute()")
    backend, options = pipeline.prepare(options)
    graph, results = lower_arrays(arrays, options)
    if not results.keys:
        return []
    warn_tiny_blocks(graph)
    if checkpoint is not None:
        return resumed(arrays, graph, results, checkpoint, backend, options)
    return pipeline.run(graph, results.keys, finish=results.assemble, options=options,
                        sized=True, prepared=backend)


TINY_TASKS = 100_000  # plans at least this large are checked for tiny blocks
TINY_BYTES = 64 * 1024  # ... whose tasks make fewer bytes than this on average


class PerformanceWarning(UserWarning):
    """A plan that will run far slower than its work needs (blocks too small)."""


def warn_tiny_blocks(graph: TaskGraph) -> None:
    """Warn when a plan of many tasks makes tiny blocks: each task costs tens of
    microseconds however small its block, so such a plan spends its time scheduling."""
    n = len(graph)
    nbytes = graph.meta.get("nbytes")
    if n < TINY_TASKS or nbytes is None:
        return
    sizes = [b for b in nbytes if b]
    if not sizes:
        return
    mean = sum(sizes) / len(sizes)
    if mean < TINY_BYTES:
        import warnings

        from tilegraph.util import human

        warnings.warn(
            f"this plan has {n:,} tasks whose blocks average {human(int(mean))}: the "
            "scheduling of each task will cost more than its work; use larger blocks "
            "(chunks='auto' gives about 128 MiB, or x.rechunk('auto'))",
            PerformanceWarning, stacklevel=4)


def run_blocks(colls: Sequence[Any], options: config.Options,
               backend: pipeline.Backend | None = None) -> bool:
    """Run every task of the collections ``colls`` for their side effects (writes), with
    the run's ``options`` (on ``backend``, made with them by
    :func:`tilegraph.pipeline.prepare`; by default made here). Returns whether the results
    were gathered in this process (False on MPI ranks but 0)."""
    backend, options = pipeline.prepare(options, backend)
    plan = LoweringPlan(colls, options)
    pipeline.check_plan_size(plan.count(), options.max_tasks)
    with gc_paused():
        builder = plan.lower()
    outputs = list(dict.fromkeys(c.key(coord) for c in colls for coord in c.coords()))
    graph = builder.build()
    return pipeline.run(graph, outputs, options=options, sized=True,
                        prepared=backend) is not None


def plan_summary(arrays: Sequence[Any]) -> dict[str, Any]:
    """The numbers behind :func:`explain`, as a dict."""
    from tilegraph.plan.explain import graph_summary

    plan = plan_arrays(arrays, options=planning_options("explain()"))
    return graph_summary(plan.graph, plan.plan.outputs, plan.fuse_stats)


def explain(arrays: Sequence[Any], workers: int | None = None, *, initial: str = "cyclic",
            model: CostModel | None = None) -> str:
    """The plan of computing ``arrays`` in words (see
    :func:`tilegraph.plan.explain.explain_plan`); ``workers=p`` places it on ``p`` worker
    processes, as the MPI backend does, and simulates it. The plan is made for the options
    in force (``config.set``), each process holding ``memory_limit`` if it is set, else its
    share of this host's default budget (the ``p`` processes on this host)."""
    from tilegraph.plan.explain import explain_plan
    from tilegraph.plan.place import INITIAL_PLACEMENTS

    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise ValueError(f"explain(): workers must be a positive int, got {workers!r}")
    if initial not in INITIAL_PLACEMENTS:
        raise ValueError(f"explain(): initial placement must be one of "
                         f"{', '.join(INITIAL_PLACEMENTS)}, got {initial!r}")
    plan = plan_arrays(arrays, processes=workers, initial=initial, model=model,
                       options=planning_options("explain()", workers))
    return explain_plan(plan.graph, plan.plan.outputs, plan.fuse_stats, workers, initial=initial,
                        model=model)
