"""Task grids: tiled algorithms written as small loop programs over block coordinates.

A tiled factorisation is a loop in which each statement writes one tile with a kernel call on
other tiles. Right-looking Cholesky, for example, is::

    for k in range(nb):
        L[k, k] = potrf(A[k, k])
        for i in range(k + 1, nb):
            L[i, k] = trsm(L[k, k], A[i, k])
        for j in range(k + 1, nb):
            A[j, j] = syrk(A[j, j], L[j, k])
            for i in range(j + 1, nb):
                A[i, j] = gemm(A[i, j], L[i, k], L[j, k])

Work tiles (``A`` here) are overwritten as the loop goes, so a tile has versions: tile
``(i, j)`` after step ``k``. A :class:`TaskGrid` runs such a program on block coordinates
only, and each statement executed becomes one task of a
:class:`~tilegraph.graph.GraphBuilder`, the same builder ``lower()`` fills with every other
collection's tasks. A task is the record

    (kernel, output tile + version, input tiles + versions, kind, flops, nbytes)

stored in the graph's columns: a tile is a tuple ``(label, *coord)``, and a version of it is
a task key, ``(f"{grid}-{label}", *coord, version)`` (version 1, 2, ...: the number of
writes so far); the input versions are the task's dependencies; the kernel's ``kind`` and
``name``, the ``flops`` (the ``cost`` column), the output's ``nbytes`` and ``coords`` (the
output tile's coordinates unless given, which the placement's grid rule reads for the block
kernels potrf, trsm, syrk, gemm) are its metadata. The grid itself keeps no state per task
(only the current version of each tile); with ``keep_records`` it also lists the records
as :class:`TaskRecord` rows, for inspection.

Reading a tile reads its current version. The tiles of a *source* label start as the blocks
of an existing collection (version 0), as ``A`` above starts as the matrix; reading a tile
that was never written and is not a source is an error. The tiles of an *output* label are
written once, and that one version is block ``coord`` of the output collection, with key
``(f"{grid}-{label}", *coord)``; so outputs get their keys before anything is planned.

In place. A kernel may write over one of the tiles it reads (``Kernel.overwrites``, its
position among the reads) and then takes a ``copy`` keyword. The task *consumes* that tile:
afterwards the tile holds the task's output if the task writes it, and nothing otherwise
(reading it again is an error). The task gets ``copy=False`` only when the version it
consumes was made by this grid, is not an output, and no other task has read it; otherwise
``copy=True``. (Reads are tracked from the grid's first call of a kernel that overwrites,
so programs without one pay nothing for it; a version made before that call is copied.)
So a tile updated step after step keeps one version alive, and blocks the grid does not own
are never written.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tilegraph.algebra.blocks import Blocks, unique_collections
from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.taskgraph import Dep

Tile = tuple  # (label, *coord)


@dataclass(frozen=True, slots=True)
class Kernel:
    """What a statement calls: ``func`` with the static keyword arguments ``kwargs``; the op
    ``kind`` (the placement, fusion and memory rules key on it) and ``name`` (shown in errors
    and plans). ``overwrites``: the position, among the tiles a call reads, of the one
    ``func`` may write over in place; ``func`` then takes ``copy=`` (see the module
    docstring)."""

    func: Callable
    kind: str
    name: str
    kwargs: Mapping[str, Any] | None = None
    overwrites: int | None = None
    # the keyword arguments of a call, indexed by whether it may write in place
    by_privacy: tuple[Mapping[str, Any], Mapping[str, Any]] | None = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.overwrites is not None:
            base = dict(self.kwargs or {})
            object.__setattr__(self, "by_privacy",
                               ({**base, "copy": True}, {**base, "copy": False}))


class TaskRecord(NamedTuple):
    """One task of a grid, for inspection: tiles are ``(label, *coord)``, versions count the
    writes of the tile (0: the source block)."""

    kernel: Kernel
    out: tuple[Tile, int]
    reads: tuple[tuple[Tile, int], ...]
    kind: str
    flops: float | None
    nbytes: int | None


class TaskGrid:
    """One run of a loop program over tiles, adding its tasks to ``builder`` as the program
    calls :meth:`call` (see the module docstring); :meth:`finish` checks that every output
    tile was written.

    State: ``current`` maps each tile read or written so far to the key of its current
    version (a consumed tile moves to ``gone``, with the key it had); the key of a work
    tile's version made here starts with the label's prefix (the very string in
    ``labels``) and ends with the version number; ``unread`` holds the keys of work-tile
    versions no task has read yet, the ones a task may overwrite in place (``None`` until
    the first call of a kernel that overwrites: versions made before it are never
    overwritten in place, so programs without such kernels track nothing); ``labels`` maps
    a label to its key prefix and whether it is an output. With ``keep_records``,
    ``records`` lists every task as a :class:`TaskRecord` and ``tile_of`` maps keys back
    to ``(tile, version)``.
    """

    __slots__ = ("add", "current", "gone", "labels", "name", "outputs", "records", "sources",
                 "tile_of", "unread")

    def __init__(self, name: str, builder: Any,
                 outputs: Sequence[tuple[str, Sequence[int]]],
                 sources: Mapping[str, Blocks] | None = None, keep_records: bool = False):
        self.name = name
        self.add = builder.add
        self.sources = dict(sources or {})
        self.outputs = [(label, tuple(int(s) for s in shape)) for label, shape in outputs]
        self.labels: dict[str, tuple[str, bool]] = {
            label: (f"{name}-{label}", True) for label, _ in self.outputs}
        self.current: dict[Tile, Hashable] = {}
        self.gone: dict[Tile, Hashable] = {}
        self.unread: set[Hashable] | None = None
        self.records: list[TaskRecord] | None = [] if keep_records else None
        self.tile_of: dict[Hashable, tuple[Tile, int]] = {}

    def _first_read(self, tile: Tile) -> Hashable:
        """The key of ``tile``'s current version when ``current`` has none: its source
        block, or an error."""
        key = self.current.get(tile)
        if key is not None:
            return key
        if tile in self.gone:
            raise ValueError(f"task grid {self.name!r}: tile {tile} is read after a task "
                             "consumed it (wrote over it in place)")
        src = self.sources.get(tile[0])
        if src is None or self.labels.get(tile[0], ("", False))[1]:
            raise ValueError(f"task grid {self.name!r}: tile {tile} is read before it is "
                             f"written, and {tile[0]!r} is not a source label")
        key = self.current[tile] = src.key(tile[1:])
        self.tile_of[key] = (tile, 0)
        return key

    def call(self, kernel: Kernel, out: Tile, reads: Sequence[Tile] = (), *,
             args: tuple | None = None, kwargs: Mapping[str, Any] | None = None,
             flops: float | None = None, nbytes: int | None = None,
             coords: tuple | None = None) -> None:
        """Add the task ``out = kernel(*reads)``: the next version of tile ``out`` from the
        current versions of the tiles ``reads``. With ``args``, the call is
        ``kernel.func(*args)`` where ``Dep(n)`` (at the top level of ``args``) stands for
        the n-th tile read; ``kwargs`` are added to the kernel's own."""
        current, unread = self.current, self.unread
        deps = list(map(current.get, reads))
        if None in deps:
            deps = list(map(self._first_read, reads))
        kw = kernel.kwargs
        slot = kernel.overwrites
        if slot is not None:
            if unread is None:  # the first kernel that overwrites: track reads from now on
                unread = self.unread = set()
            w = deps[slot]
            kw = kernel.by_privacy[w in unread and deps.count(w) == 1]
            consumed = reads[slot]
            if consumed != out:
                self.gone[consumed] = current.pop(consumed)
        if kwargs:
            kw = {**kw, **kwargs} if kw else kwargs
        if unread is not None:
            unread.difference_update(deps)
        coord = out[1:]
        prefix, output = self.labels.get(out[0]) or self._label(out[0])
        if output:  # written once, under the output collection's key
            if out in current or out in self.gone:
                raise ValueError(f"task grid {self.name!r}: output tile {out} is written "
                                 "twice (the tiles of an output label are written once)")
            version = 1
            key = (prefix, *coord)
        else:  # the key of a work tile's version ends with its version number
            prev = current.get(out) or self.gone.get(out)
            version = prev[-1] + 1 if type(prev) is tuple and prev[0] is prefix else 1
            key = (prefix, *coord, version)
            if unread is not None:
                unread.add(key)
        current[out] = key
        if args is not None and len(deps) > 1 and len(set(deps)) != len(deps):
            unique = list(dict.fromkeys(deps))
            pos = {d: n for n, d in enumerate(unique)}
            args = tuple(Dep(pos[deps[a.slot]]) if type(a) is Dep else a for a in args)
            deps = unique
        self.add(key, kernel.func, deps=deps, args=args, kwargs=kw, kind=kernel.kind,
                 name=kernel.name, coords=coord if coords is None else coords,
                 nbytes=nbytes, cost=flops)
        if self.records is not None:
            self._record(kernel, out, version, key, deps, flops, nbytes)

    def _record(self, kernel: Kernel, out: Tile, version: int, key: Hashable,
                deps: list[Hashable], flops: float | None, nbytes: int | None) -> None:
        tile_of = self.tile_of
        tile_of[key] = (out, version)
        self.records.append(TaskRecord(kernel, (out, version), tuple(tile_of[d] for d in deps),
                                       kernel.kind, flops, nbytes))

    def _label(self, label: str) -> tuple[str, bool]:
        entry = self.labels[label] = (f"{self.name}-{label}", False)
        return entry

    def version(self, tile: Tile) -> int:
        """How many times ``tile`` has been written so far."""
        if self.labels.get(tile[0], ("", False))[1]:
            return int(tile in self.current or tile in self.gone)
        key = self.current.get(tile) or self.gone.get(tile)
        prefix = self.labels.get(tile[0], ("",))[0]
        return key[-1] if type(key) is tuple and key[0] is prefix else 0

    def finish(self) -> None:
        """Check that every tile of every output was written."""
        current, gone = self.current, self.gone
        for label, grid in self.outputs:
            for coord in itertools.product(*map(range, grid)):
                tile = (label, *coord)
                if tile not in current and tile not in gone:
                    raise ValueError(f"task grid {self.name!r}: output tile {tile} is never "
                                     "written")


class TaskCounter:
    """A stand-in for a builder that only counts the tasks added to it."""

    def __init__(self) -> None:
        self.ntasks = 0

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.ntasks += 1


def run_program(name: str, program: Callable[[TaskGrid], None],
                outputs: Sequence[tuple[str, Sequence[int]]],
                sources: Mapping[str, Blocks] | None = None, builder: Any = None,
                keep_records: bool = False) -> TaskGrid:
    """Run ``program`` on a new :class:`TaskGrid` adding to ``builder`` (by default a
    :class:`TaskCounter`), and check its outputs."""
    grid = TaskGrid(name, builder if builder is not None else TaskCounter(), outputs,
                    sources, keep_records)
    program(grid)
    grid.finish()
    return grid


def task_grid(name: str, program: Callable[[TaskGrid], None],
              outputs: Sequence[tuple[str, Sequence[int]]],
              sources: Mapping[str, Blocks] | None = None,
              ntasks: int | None = None) -> list[Blocks]:
    """The collections made by the loop program ``program`` (see the module docstring).

    ``outputs`` lists ``(label, grid)``: output collection ``f"{name}-{label}"`` has block
    ``coord`` = tile ``(label, *coord)``, which the program writes once. ``sources`` maps
    labels to the collections whose blocks those tiles start as. Returns one collection per
    output; the first one adds all the grid's tasks when it is lowered (its ``ntasks``
    counts them: ``ntasks`` if given, else by running the program with a builder that only
    counts), the others are views of it. ``name`` must be unique to the inputs (a token),
    as collections are shared by name.

    >>> import numpy as np
    >>> def program(g):
    ...     for i in range(3):
    ...         g.call(Kernel(np.full, "creation", "full"), ("w", i), args=((2,), i))
    ...         g.call(Kernel(np.negative, "elementwise", "negative"), ("x", i), [("w", i)])
    >>> (x,) = task_grid("demo", program, [("x", (3,))])
    >>> x.ntasks, x.key((1,))
    (6, ('demo-x', 1))
    """
    sources = dict(sources or {})
    outputs = [(label, tuple(int(s) for s in shape)) for label, shape in outputs]
    if not outputs:
        raise ValueError(f"task grid {name!r}: no outputs")

    def emit(builder: GraphBuilder) -> None:
        run_program(name, program, outputs, sources, builder)

    def count() -> int:
        counter = TaskCounter()
        run_program(name, program, outputs, sources, counter)
        return counter.ntasks

    (label, shape), *rest = outputs
    first = Blocks(f"{name}-{label}", shape, unique_collections(sources.values()), emit,
                   ntasks=ntasks if ntasks is not None else count)
    return [first, *(Blocks(f"{name}-{lab}", shp, [first], None, ntasks=0)
                     for lab, shp in rest)]
