"""Lowering an implicit LambdaPACK DAG to one :class:`~tilegraph.graph.TaskGraph`: the
methods of :class:`~tilegraph.lambdapack.program.DAG` that expand it into tasks (``emit``,
``to_taskgraph``), with in-place kernels given private copies where another task still
reads the tile they write over.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.taskgraph import Dep
from tilegraph.lambdapack.ir import Access, Affine, IntExpr, Node
from tilegraph.lambdapack.kernels import LPKernel


class DAGLowering:
    """Mixed into :class:`~tilegraph.lambdapack.program.DAG`: its tasks put in a task graph."""

    def emit(self, builder: Any, name: str,
             input_key: Callable[[str, tuple[int, ...]], Hashable],
             shape_of: Callable[[str, tuple[int, ...]], tuple[int, ...] | None] | None = None,
             itemsize: int = 8) -> None:
        """Add every node to ``builder`` as a task keyed ``(name, statement id, *index)``;
        an input tile is read from the task ``input_key(array, tile)``. ``shape_of`` gives
        tile shapes for the tasks' ``nbytes`` and flops (``cost``). A kernel that may write
        over a tile it reads does so only when that tile was made by the program and is read
        by this one task (once)."""
        per_statement, written = self._rows()
        uses: Counter = Counter()  # reads of each (array, tile)
        for sid, rows in per_statement:
            s = self.statements[sid]
            if not s.plain:
                uses.update(value[:2] for node in rows for what, value in self.inputs(node)
                            if what == "tile")
                continue
            for n, a in enumerate(s.args):
                if isinstance(a, Access):
                    arr = a.array
                    uses.update((arr, row[1][n]) for row in rows)
        shape_memo: dict[tuple, Any] = {}

        def shape(array: str, tile: tuple) -> Any:
            key = (array, tile)
            v = shape_memo.get(key)
            if v is None and key not in shape_memo:
                v = shape_memo[key] = shape_of(array, tile) if shape_of else None
            return v

        def shape_t(t: tuple) -> Any:
            return shape(*t)

        input_keys: dict[tuple, Hashable] = {}

        def in_key(array: str, tile: tuple) -> Hashable:
            key = input_keys.get((array, tile))
            if key is None:
                key = input_keys[(array, tile)] = input_key(array, tile)
            return key

        add = builder.add
        prog = self.program
        for sid, rows in per_statement:
            s = self.statements[sid]
            kernel = prog.kernels[s.kernel]
            func, kind, kname, flops = kernel.func, kernel.kind, kernel.name, kernel.flops
            slot_w = kernel.overwrites
            pos = prog.tile_coords.get(s.target.array, (0, 1))
            static_kw = dict(kernel.kwargs)
            if not s.plain:
                self._emit_generic(add, name, rows, kernel, pos, shape, in_key, itemsize,
                                   uses, static_kw)
                continue
            kw = ({**static_kw, "copy": True}, {**static_kw, "copy": False}) \
                if slot_w is not None else (static_kw or None,)
            handler = self._comp.emitter(s, slot_w, pos)

            def nbytes(tile: tuple, arr: str = s.target.array) -> int | None:
                sh = shape_of(arr, tile) if shape_of is not None else None
                return None if sh is None else itemsize * math.prod(sh)

            def slow(row: tuple, sid: int = sid, kernel: LPKernel = kernel,
                     pos: tuple = pos, static_kw: dict = static_kw) -> None:
                self._emit_generic(add, name, [(sid, row[0])], kernel, pos, shape, in_key,
                                   itemsize, uses, static_kw)

            handler(rows, self._p, name, written.get, uses, in_key, add, func, kind, kname,
                    kw, shape_t, flops if shape_of is not None else None, nbytes, slow, Dep,
                    shape_memo.get, builder.add_many)

    def _emit_generic(self, add: Callable, name: str, nodes: list[Node], kernel: LPKernel,
                      pos: tuple[int, ...], shape: Callable, in_key: Callable, itemsize: int,
                      uses: dict, static_kw: dict) -> None:
        """The tasks of a reduction's nodes (see :meth:`emit`)."""
        for node in nodes:
            deps: list[Hashable] = []
            call: list[Any] = []
            shapes: list[Any] = []
            for what, value in self.inputs(node):
                if what == "node":
                    key = (name, value[0], *value[1])
                    shapes.append(None)
                else:
                    array, tile, writer = value
                    key = in_key(array, tile) if writer is None else (name, writer[0],
                                                                      *writer[1])
                    shapes.append(shape(array, tile))
                if key not in deps:
                    deps.append(key)
                call.append(Dep(deps.index(key)))
            written = self.writes(node)
            meta: dict[str, Any] = {}
            if written is not None:
                meta["coords"] = tuple(written[1][p] for p in pos if p < len(written[1]))
                out_shape = shape(*written)
                if out_shape is not None:
                    meta["nbytes"] = itemsize * math.prod(out_shape)
            if kernel.flops is not None and shapes and None not in shapes:
                meta["cost"] = float(kernel.flops(*shapes))
            kwargs = self.call_kwargs(node, static_kw)
            add((name, node[0], *node[1]), kernel.func, deps=deps, args=tuple(call),
                kwargs=kwargs or None, kind=kernel.kind, name=kernel.name, **meta)

    def call_kwargs(self, node: Node, static_kw: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
        """The keyword arguments of ``node``'s kernel call: ``static_kw`` (default: the
        kernel's own), then the statement's keyword arguments evaluated at the node's loop
        indices."""
        s = self.statements[node[0]]
        kwargs = dict(self.program.kernels[s.kernel].kwargs if static_kw is None
                      else static_kw)
        if s.kwargs:
            env = self._env(s, node[1])
            kwargs.update((k, _eval_kw(v, env)) for k, v in s.kwargs)
        return kwargs

    def _private(self, node: Node, slot: int) -> bool:
        """Whether the tile ``node`` reads at argument ``slot`` may be written over: made
        by this program, and read by no other task (and once by this one)."""
        s = self.statements[node[0]]
        a = s.args[slot]
        if not isinstance(a, Access):
            return False
        env = self._env(s, node[1])
        tile = tuple(e.eval(env) for e in a.index)
        if self.writer(a.array, tile) is None:
            return False
        readers = self._readers(a.array, tile)
        if readers != [node]:
            return False
        reads = [x for x in s.reads if tuple(e.eval(env) for e in x.index) == tile
                 and x.array == a.array]
        return len(reads) == 1

    def to_taskgraph(self, inputs: Mapping[str, Callable[[tuple[int, ...]], Any]] | None = None,
                     name: str | None = None) -> Any:
        """The expanded DAG as a :class:`~tilegraph.graph.TaskGraph`. ``inputs`` maps each
        input array to a function giving the block of a tile (added as data tasks keyed
        ``(name, array, *tile)``); without it, input tiles are data tasks holding None
        (a graph to inspect, not to run)."""
        name = name or f"lp-{self.program.name}"
        builder = GraphBuilder()
        added: set = set()
        inputs = dict(inputs or {})

        def input_key(array: str, tile: tuple[int, ...]) -> Hashable:
            key = (name, array, *tile)
            if key not in added:
                added.add(key)
                fn = inputs.get(array)
                builder.add_data(key, fn(tile) if fn is not None else None)
            return key

        self.emit(builder, name, input_key)
        return builder.build()

    # -- description ---------------------------------------------------------------------


def _eval_kw(value: Any, env: dict[str, int]) -> Any:
    if isinstance(value, (Affine, IntExpr)):
        return value.eval(env)
    if isinstance(value, tuple):
        return tuple(_eval_kw(v, env) for v in value)
    return value
