"""Data-dependent loops: ``while cond(state): state = body(state)`` over blocked arrays.

A loop whose condition reads array values (PageRank to a tolerance, gradient descent to
convergence) cannot be planned as one graph: how many iterations run is known only as they
run. :func:`while_loop` plans one iteration, with the loop variables as placeholders whose
blocks are filled in each time, computes it together with the condition on its result, and
runs the same plan again for the next iteration: the plan is reused while the shapes, blocks
and dtypes of the loop variables repeat, and made again when they change.

The part of the iteration that does not depend on the loop variables (a matrix the body
multiplies by, made from storage or random numbers) is computed in the first iteration only:
the blocks where it meets the loop variables are kept and given to later iterations as data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tilegraph import pipeline
from tilegraph.algebra.blocks import Blocks
from tilegraph.algebra.demand import lower
from tilegraph.array.chunks import numblocks
from tilegraph.array.core import Array, asarray, unique_name
from tilegraph.config import Options
from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.dask_spec import gc_paused
from tilegraph.graph.taskgraph import MODE_DATA, TaskGraph
from tilegraph.runtime.backends import Backend
from tilegraph.util import unique


def _signature(arrays: Sequence[Array]) -> tuple:
    return tuple((a.shape, a.chunks, a.dtype.str) for a in arrays)


def from_blocks(values: dict[tuple[int, ...], Any], shape: tuple[int, ...],
                chunks: tuple[tuple[int, ...], ...], dtype: np.dtype,
                name: str | None = None) -> Array:
    """An Array whose blocks are the computed ``values`` (block coordinate -> array; a
    missing block is a placeholder, filled in when the plan runs)."""
    name = name or unique_name("blocks")
    itemsize = np.dtype(dtype).itemsize
    grid = numblocks(chunks)

    def emit(builder: GraphBuilder, coords: Any = None) -> None:
        for coord in np.ndindex(*grid) if coords is None else coords:
            nb = itemsize * math.prod(chunks[a][k] for a, k in enumerate(coord))
            builder.add_data((name, *coord), values.get(coord), kind="load", nbytes=nb,
                             coords=coord)

    return Array(Blocks(name, grid, (), emit, op="source"), shape, chunks, dtype)


class _Plan:
    """One planned iteration: placeholders in, new loop variables and the condition out,
    planned for the loop's ``options`` (completed for its backend)."""

    def __init__(self, cond: Callable, body: Callable, template: Sequence[Array],
                 options: Options):
        self.placeholders = [from_blocks({}, a.shape, a.chunks, a.dtype,
                                         name=unique_name("loopvar")) for a in template]
        with gc_paused():
            # the body gets its own Array objects: an assignment into one (x[i] = v) rebinds
            # that object, never the placeholder the plan is keyed by
            out = body(*[p.copy() for p in self.placeholders])
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(out) != len(template):
                raise ValueError(f"while_loop: body returned {len(out)} arrays for "
                                 f"{len(template)} loop variables")
            out = [asarray(o) for o in out]
            c = asarray(cond(*out))
            if c.ndim != 0:
                raise ValueError(f"while_loop: cond must return a 0-d array (a scalar), got "
                                 f"shape {c.shape}")
            self.results = out
            self.cond = c
            builder = lower([a.collection for a in [*out, c]], options=options)
            self.outputs: list[Hashable] = [a.collection.key(co) for a in out
                                            for co in np.ndindex(*a.numblocks)]
            self.cond_key = c.collection.key(())
            keys = list(dict.fromkeys([*self.outputs, self.cond_key]))
            self.graph = pipeline.make_plan(builder.build(), keys,
                                            memory=options.memory_limit).graph
        self.keys = keys
        self.slots = [[self.graph.index.get((p.collection.name, *co))
                       for co in np.ndindex(*p.numblocks)] for p in self.placeholders]
        self.invariant: pipeline.Plan | None = None  # the plan of later iterations
        self.invariant_graph: TaskGraph | None = None
        self.frontier: list[int] = []

    def _variant(self) -> np.ndarray:
        """Tasks that depend on the loop variables."""
        g = self.graph
        mark = np.zeros(len(g), dtype=bool)
        ptr, idx = g.dependents_csr()
        stack = [i for slots in self.slots for i in slots if i is not None]
        for i in stack:
            mark[i] = True
        while stack:
            i = stack.pop()
            for c in idx[ptr[i]:ptr[i + 1]].tolist():
                if not mark[c]:
                    mark[c] = True
                    stack.append(c)
        return mark

    def run_first(self, state: Sequence[dict], options: Options, backend: Backend
                  ) -> tuple[list, dict]:
        """The first iteration; also keeps the invariant blocks the loop needs again."""
        g = self.graph
        variant = self._variant()
        dep_src = np.repeat(np.arange(len(g)), np.diff(g.dep_ptr))
        frontier = unique(g.dep_idx[variant[dep_src] & ~variant[g.dep_idx]])
        self.frontier = [int(i) for i in frontier if g.modes[int(i)] != MODE_DATA]
        front_keys = [g.keys[i] for i in self.frontier]
        values = pipeline.run(self._filled(g, state), self.keys + front_keys, fuse=False,
                              options=options, prepared=backend)
        if values is None:
            raise ValueError("while_loop: the MPI backend is not supported (the loop "
                             "condition is known on rank 0 only); use the threads backend")
        n = len(self.keys)
        keep = np.flatnonzero(variant | np.isin(np.arange(len(g)), self.frontier))
        detach = np.zeros(len(g), dtype=bool)
        detach[self.frontier] = True
        sub = g.subgraph(keep, detach=detach)
        modes = bytearray(sub.modes)
        args = list(sub.args)
        for i, value in zip(self.frontier, values[n:], strict=True):
            j = sub.index[g.keys[i]]
            modes[j] = MODE_DATA
            args[j] = (value,)
        # planned (culled and ordered) once, run with new placeholder blocks each iteration
        self.invariant = pipeline.make_plan(sub.replace(args=args, modes=modes), self.keys,
                                            fuse=False, memory=options.memory_limit)
        self.invariant_graph = self.invariant.graph
        self.slots = [[self.invariant_graph.index.get((p.collection.name, *co))
                       for co in np.ndindex(*p.numblocks)] for p in self.placeholders]
        return self._unpack(values[:n])

    def run_next(self, state: Sequence[dict], options: Options, backend: Backend
                 ) -> tuple[list, dict]:
        plan = replace(self.invariant, graph=self._filled(self.invariant_graph, state))
        return self._unpack(pipeline.execute(plan, options=options, prepared=backend))

    def _filled(self, g: TaskGraph, state: Sequence[dict]) -> TaskGraph:
        """The graph with the placeholders' blocks set to ``state``."""
        args = list(g.args)
        for p, slots, blocks in zip(self.placeholders, self.slots, state, strict=True):
            for co, slot in zip(np.ndindex(*p.numblocks), slots, strict=True):
                if slot is not None:
                    args[slot] = (blocks[co],)
        return g.replace(args=args)

    def _unpack(self, values: list) -> tuple[list, Any]:
        got = dict(zip(self.keys, values, strict=True))
        state = [{co: got[a.collection.key(co)] for co in np.ndindex(*a.numblocks)}
                 for a in self.results]
        return state, got[self.cond_key]


def _blocks_of(a: Array, options: Options, backend: Backend | None = None) -> dict:
    """The computed blocks of ``a`` (coordinate -> array), with the run's ``options`` (on
    ``backend``, made with them by :func:`tilegraph.pipeline.prepare`, or made here)."""
    backend, options = pipeline.prepare(options, backend)
    with gc_paused():
        keys = [a.collection.key(co) for co in np.ndindex(*a.numblocks)]
        graph = lower([a.collection], options=options).build()
    values = pipeline.run(graph, keys, options=options, prepared=backend)
    if values is None:
        raise ValueError("while_loop: the MPI backend is not supported (the loop condition "
                         "is known on rank 0 only); use the threads backend")
    return dict(zip(np.ndindex(*a.numblocks), values, strict=True))


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any],
               max_iter: int | None = None, **options: Any) -> tuple[Array, ...]:
    """Run ``while cond(*vars): vars = body(*vars)`` over blocked arrays and return the final
    loop variables (as Arrays holding their computed blocks).

    ``cond`` returns a 0-d array (its truth is read after each iteration); ``body`` returns
    as many arrays as there are loop variables. Each iteration is one run of one plan,
    reused while the loop variables keep their shapes, blocks and dtypes (see the module
    docstring), so give the loop variables the blocks the body's results get, or the
    first two iterations plan separately. ``max_iter`` caps the iterations; options are
    those of ``compute()`` (the MPI backend is not supported here: the condition would be
    known on rank 0 only).

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.array([100.0, 64.0]), chunks=1)
    >>> (y,) = tg.while_loop(lambda v: v.max() > 1, lambda v: (v / 2,), [x])
    >>> y.compute()
    array([0.78125, 0.5    ])
    """
    from tilegraph import config

    opts = config.resolve(options, "while_loop()")
    if opts.backend == "mpi":
        raise ValueError("while_loop: the MPI backend is not supported (the loop condition "
                         "is known on rank 0 only); use the threads backend")
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callables")
    if isinstance(loop_vars, Array) or not isinstance(loop_vars, (list, tuple)):
        raise TypeError("while_loop: loop_vars must be a list or tuple of arrays")
    if max_iter is not None and (isinstance(max_iter, bool) or not isinstance(max_iter, int)
                                 or max_iter < 0):
        raise ValueError(f"while_loop: max_iter must be an int >= 0 or None, got {max_iter!r}")
    backend, opts = pipeline.prepare(opts)  # the plans below are made for its limit
    current = [asarray(v) for v in loop_vars]
    first = asarray(cond(*current))
    if first.ndim != 0:
        raise ValueError(f"while_loop: cond must return a 0-d array (a scalar), got shape "
                         f"{first.shape}")
    if not bool(np.asarray(_blocks_of(first, opts, backend)[()])):
        return tuple(current)
    state = [_blocks_of(a, opts, backend) for a in current]
    plans: dict[tuple, _Plan] = {}
    done = 0
    while max_iter is None or done < max_iter:
        sig = _signature(current)
        plan = plans.get(sig)
        if plan is None:
            plan = plans[sig] = _Plan(cond, body, current, opts)
            state, flag = plan.run_first(state, opts, backend)
        else:
            state, flag = plan.run_next(state, opts, backend)
        current = plan.results
        done += 1
        if not bool(np.asarray(flag)):
            break
    global _last_iterations
    _last_iterations = done
    return tuple(from_blocks(blocks, a.shape, a.chunks, a.dtype)
                 for blocks, a in zip(state, current, strict=True))


_last_iterations = 0


def last_loop_iterations() -> int:
    """How many iterations the last :func:`while_loop` in this process ran."""
    return _last_iterations
