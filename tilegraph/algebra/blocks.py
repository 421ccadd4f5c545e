"""Block-keyed collections and the operators of the tensor algebra.

A :class:`Blocks` is a lazily defined collection of blocks over a grid of block coordinates.
It never holds block data: it knows, for each coordinate, the key of the task that makes that
block, and how to *emit* those tasks into a :class:`~tilegraph.graph.GraphBuilder`. Emitting
looks at coordinates only (partial evaluation), so a plan over terabytes is built from shapes.

Operators (each returns a new :class:`Blocks`):

- :func:`map_blocks`: one task per output coordinate over input blocks found by index maps
  (elementwise ops, broadcasting, per-block kernels);
- :func:`apply_blocks`: the general form, where a function of the coordinate gives the task;
- :func:`flat_map`: one input block makes several output blocks;
- :func:`join`: equi-join of two collections on a function of their coordinates;
- :func:`reduce_by_key`: combine the blocks that share an output key with an associative op;
- :func:`group_by_join`: join, a per-pair function, and a reduce by output key, fused, under
  a :class:`~tilegraph.algebra.semiring.Semiring`. The reduce accumulates each product into
  its output block as it is made, so a blocked matmul never holds its N^3 products;
- :func:`remap`: a new grid whose blocks are existing blocks (block transpose, a pick of
  blocks), or :func:`remap_by` with the keys given by a function (concatenation).

Collections are shared by name: two collections with the same name are the same tasks, which
is how common subexpressions are shared when a plan is lowered.

A collection may carry a ``rewrite``: when a plan is lowered, it is asked (inputs first) for
a replacement of itself, given which collections consume which in this plan, e.g. a chain
of stencil steps whose intermediates nothing else reads becomes one step. A replacement has
the same name and keys, so its consumers do not change.

Lowering is demand-driven (culling before planning): starting from the blocks of the
results, each collection says which blocks of its inputs its wanted blocks read, by the
rule of the operator that made it (:data:`BLOCK_RULES`, keyed by the collection's ``op``),
and emits the tasks of its wanted blocks only. A slice of a large array plans the blocks it
reads, not the whole array; a result that reads all of its inputs (a full reduction) asks
for them whole without listing them. A collection whose operator has no rule is planned
whole, with every block of its inputs.

A plan is lowered for one run: :func:`lower` and :func:`count_tasks` take the run's
completed options (a :class:`tilegraph.config.Options` whose ``memory_limit`` is what each
process of the run enforces), and a :class:`RunBlocks` collection, whose tasks depend on
them (a rechunk's stages), gets them as an argument. No collection reads an option itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.fold import (
    accumulate_into,
    accumulation_chains,
    chain_tasks,
    combine_all,
    fold_chains,
    tree_count,
)
from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.taskgraph import Dep

Coord = tuple[int, ...]
# ``emit(builder)`` emits every task of a collection; the emitter of a collection whose
# operator has a rule in BLOCK_RULES also takes ``coords``: the sorted coordinates of the
# blocks to emit (None: all)
Emitter = Callable[..., None]


class Blocks:
    """A collection of blocks over ``grid`` (blocks per axis); see the module docstring.

    ``keys`` is an object array of shape ``grid`` holding each block's task key; by default
    ``(name, *coord)``. ``deps`` are the collections whose tasks this one's tasks consume.
    ``op`` names the operator that made it, whose rule in :data:`BLOCK_RULES` plans some of
    its blocks only (``"custom"``: no rule, it is always planned whole), and ``spec`` holds
    what that rule reads (the index maps, the task function, ...).
    """

    __slots__ = ("_keys", "_ntasks", "deps", "emit", "grid", "name", "op", "rewrite", "spec")

    def __init__(
        self,
        name: str,
        grid: Sequence[int],
        deps: Iterable[Blocks] = (),
        emit: Emitter | None = None,
        keys: np.ndarray | None = None,
        ntasks: int | Callable[[], int] | None = None,
        op: str = "custom",
        spec: Any = None,
    ):
        self.name = name
        self.grid = tuple(int(g) for g in grid)
        self.deps = tuple(deps)
        self.emit = emit
        self._ntasks = ntasks
        if keys is not None and keys.shape != self.grid:
            raise ValueError(f"keys of shape {keys.shape} do not match grid {self.grid}")
        self._keys = keys
        self.op = op
        self.spec = spec
        # ``rewrite(consumers, replaced)``: a replacement of this collection in a plan, or
        # None; ``consumers`` maps each collection's name to the names of the collections
        # that read it (None for a result of the plan), ``replaced`` the replacements made
        # so far, by name
        self.rewrite: Any = None

    def __repr__(self) -> str:
        return f"Blocks({self.name!r}, grid={self.grid})"

    @property
    def nblocks(self) -> int:
        return math.prod(self.grid)

    @property
    def ntasks(self) -> int:
        """Tasks this collection emits (not counting its inputs' tasks)."""
        if self._ntasks is None:
            return self.nblocks if self.emit is not None else 0
        if callable(self._ntasks):
            self._ntasks = self._ntasks()
        return self._ntasks

    @property
    def keys(self) -> np.ndarray:
        """Object array of task keys, one per block coordinate."""
        if self._keys is None:
            keys = np.empty(self.grid, dtype=object)
            name = self.name
            for coord in np.ndindex(*self.grid):
                keys[coord] = (name, *coord)
            self._keys = keys
        return self._keys

    def key(self, coord: Coord) -> Hashable:
        """The task key of block ``coord``."""
        if self._keys is None:
            return (self.name, *coord)
        coord = tuple(coord)
        if len(coord) != len(self.grid) or not all(
                0 <= c < g for c, g in zip(coord, self.grid, strict=True)):
            # NumPy indexing would wrap a negative coordinate around to another block
            raise IndexError(f"block {coord} is outside the grid {self.grid} of {self.name!r}")
        return self._keys[coord]

    def coords(self) -> Iterable[Coord]:
        return np.ndindex(*self.grid)

    def count(self, options: Any = None) -> int:
        """Tasks this collection emits when lowered for a run of ``options`` (see
        :func:`lower`); the same for every run unless it is a :class:`RunBlocks`."""
        return self.ntasks

    def lower_into(self, builder: GraphBuilder, options: Any = None) -> None:
        """Emit this collection's tasks into ``builder``, for a run of ``options``."""
        if self.emit is not None:
            self.emit(builder)

    def expand(self, options: Any = None) -> list[Blocks] | None:
        """The collections this one is lowered as for a run of ``options``, inputs first,
        the last one named as this one (a rechunk's stages), each then planned on its own
        (so only the blocks wanted of each); ``None``: it is lowered as it is."""
        return None

    def with_rule_of(self, other: Blocks) -> Blocks:
        """This collection, planned by ``other``'s rule (``op`` and ``spec``): for a
        collection made as a copy of another (returns itself)."""
        self.op, self.spec = other.op, other.spec
        return self


class RunBlocks(Blocks):
    """A collection whose tasks depend on the run it is lowered for: :meth:`lower_into`
    and :meth:`count` get the run's completed options (a :class:`tilegraph.config.Options`:
    ``memory_limit``, the bytes each process of the run may hold, and ``spill_dir``), or
    ``None`` for a graph lowered for no run (each such collection says what it plans then).
    A rechunk's stages, chosen for the run's memory limit, are one. Made of two functions,
    ``emit_for(builder, options)`` and ``count_for(options)``, or a subclass overrides the
    two methods (and :meth:`Blocks.expand`, to be planned stage by stage).

    One with a rule in :data:`BLOCK_RULES` (its ``op``; ``"custom"``, the default: planned
    whole) is planned block by block too: the rule says which blocks of its inputs its
    wanted blocks read, and lowering asks it for the tasks of those blocks for the run,
    ``emit_for(builder, options, coords)`` and ``count_for(options, coords)`` (``coords``
    the sorted coordinates of the blocks wanted), since how many tasks a block takes may
    depend on the run (a reduction's accumulation chains)."""

    __slots__ = ("count_for", "emit_for")

    def __init__(self, name: str, grid: Sequence[int], deps: Iterable[Blocks] = (),
                 emit_for: Callable[..., None] | None = None,
                 count_for: Callable[..., int] | None = None,
                 keys: np.ndarray | None = None, op: str = "custom", spec: Any = None):
        super().__init__(name, grid, deps, None, keys, op=op, spec=spec)
        self.emit_for = emit_for
        self.count_for = count_for

    @property
    def ntasks(self) -> int:
        """Tasks it emits when lowered for no run."""
        return self.count(None)

    def count(self, options: Any = None, coords: Iterable[Coord] | None = None) -> int:
        """Tasks of its blocks ``coords`` (None: all) in a run of ``options``."""
        if coords is None:
            return self.count_for(options)
        return self.count_for(options, coords)

    def lower_into(self, builder: GraphBuilder, options: Any = None,
                   coords: Iterable[Coord] | None = None) -> None:
        """Emit the tasks of its blocks ``coords`` (None: all) for a run of ``options``."""
        if coords is None:
            self.emit_for(builder, options)
        else:
            self.emit_for(builder, options, coords)


def source(label: str, grid: Sequence[int], task_of: Callable[[Coord], tuple], **meta: Any
           ) -> Blocks:
    """Blocks made from nothing: ``task_of(coord)`` gives ``(func, args)`` (loads, creation).
    Per-block metadata may be given as callables of the coordinate."""
    grid = tuple(grid)

    def emit(builder: GraphBuilder, coords: Iterable[Coord] | None = None) -> None:
        for coord in np.ndindex(*grid) if coords is None else coords:
            func, args = task_of(coord)
            builder.add((label, *coord), func, deps=(), args=args,
                        **_meta_at(meta, coord))

    return Blocks(label, grid, (), emit, op="source")


def _meta_at(meta: dict[str, Any], coord: Coord) -> dict[str, Any]:
    out = {}
    for k, v in meta.items():
        out[k] = v(coord) if callable(v) else v
    out.setdefault("coords", coord)
    return out


def map_blocks(
    label: str,
    func: Callable,
    inputs: Sequence[Blocks],
    grid: Sequence[int],
    index_maps: Sequence[Callable[[Coord], Coord] | None] | None = None,
    args: tuple | None = None,
    kwargs: dict | None = None,
    coord_kwarg: str | None = None,
    **meta: Any,
) -> Blocks:
    """One task per output coordinate: ``func(*input_blocks)``.

    ``index_maps[n](coord)`` gives the coordinate of input ``n``'s block for output ``coord``
    (``None``: the same coordinate). With ``args``, the call is ``func(*args)`` where
    ``Dep(n)`` in ``args`` stands for input ``n``'s block (other entries are literals).
    With ``coord_kwarg``, each call also gets the output coordinate as that keyword.
    Metadata values may be callables of the coordinate (``nbytes``, ``cost``, ...).
    """
    grid = tuple(grid)
    maps = list(index_maps) if index_maps is not None else [None] * len(inputs)
    if len(maps) != len(inputs):
        raise ValueError(f"{len(inputs)} inputs but {len(maps)} index maps")
    inputs = list(inputs)
    static_meta = {k: v for k, v in meta.items() if not callable(v)}
    dynamic_meta = {k: v for k, v in meta.items() if callable(v)}

    def emit(builder: GraphBuilder, coords: Iterable[Coord] | None = None) -> None:
        add = builder.add
        for coord in np.ndindex(*grid) if coords is None else coords:
            deps = [inp.key(coord if m is None else m(coord))
                    for inp, m in zip(inputs, maps, strict=True)]
            m = dict(static_meta)
            for k, v in dynamic_meta.items():
                m[k] = v(coord)
            m["coords"] = coord
            kw = kwargs if coord_kwarg is None else {**(kwargs or {}), coord_kwarg: coord}
            if args is None and len(set(deps)) == len(deps):
                add((label, *coord), func, deps=deps, kwargs=kw, **m)
            else:
                unique = list(dict.fromkeys(deps))
                slot = {k: j for j, k in enumerate(unique)}
                template = args if args is not None else tuple(Dep(n) for n in range(len(deps)))
                template = tuple(Dep(slot[deps[a.slot]]) if type(a) is Dep else a
                                 for a in template)
                add((label, *coord), func, deps=unique, args=template, kwargs=kw, **m)

    return Blocks(label, grid, unique_collections(inputs), emit, op="map", spec=(inputs, maps))


def unique_collections(colls: Iterable[Blocks]) -> list[Blocks]:
    """``colls`` without repeats (by name), in the order of their first appearance."""
    seen: dict[str, Blocks] = {}
    for c in colls:
        seen.setdefault(c.name, c)
    return list(seen.values())


def apply_blocks(
    label: str,
    grid: Sequence[int],
    inputs: Sequence[Blocks],
    task_of: Callable[[Coord], tuple[Callable, list, tuple | None]],
    *,
    covers: bool | Callable[[], Iterable[Coord]] = True,
    domain: Callable[[], Iterable[Coord]] | None = None,
    **meta: Any,
) -> Blocks:
    """The general per-coordinate task: ``task_of(coord)`` returns ``(func, deps, args)``
    where ``deps`` are task keys and ``args`` a template with ``Dep`` markers (or ``None``
    for ``func(*deps)``).

    The blocks some of its blocks read are found from their tasks' ``deps``. ``covers``
    says which blocks of its inputs all of its blocks together read: ``True``, every block
    (most operations), so that a plan of all of them reads its inputs whole without listing
    the blocks; ``False``, those their tasks name (each task is made twice then); or a
    function listing the blocks of its one input that they read (a slice). ``domain()``,
    if given, lists the coordinates that have a block (in order), when not every
    coordinate of ``grid`` has one (found when the whole collection is planned, not
    before)."""
    grid = tuple(grid)

    def emit(builder: GraphBuilder, coords: Iterable[Coord] | None = None) -> None:
        if coords is None:
            coords = np.ndindex(*grid) if domain is None else domain()
        for coord in coords:
            func, deps, args = task_of(coord)
            builder.add((label, *coord), func, deps=deps, args=args, **_meta_at(meta, coord))

    ntasks = None if domain is None else (lambda: sum(1 for _ in domain()))
    return Blocks(label, grid, unique_collections(inputs), emit, ntasks=ntasks, op="apply",
                  spec=(task_of, covers, domain))


def remap(label: str, keys: np.ndarray, inputs: Sequence[Blocks], *, covers: bool = False
          ) -> Blocks:
    """A collection whose blocks are existing blocks, arranged by ``keys`` (no tasks).
    ``covers``: every block of the inputs is one of its blocks (a concatenation), so that a
    plan of all of them reads the inputs whole without looking at the keys."""
    return Blocks(label, keys.shape, unique_collections(inputs), None, keys=keys, op="remap",
                  spec=covers)


class KeyedBlocks(Blocks):
    """A collection whose blocks are existing blocks named by a function of the coordinate,
    ``key_of`` (no tasks, no array of keys until one is asked for): see :func:`remap_by`."""

    __slots__ = ("key_of",)

    def __init__(self, name: str, grid: Sequence[int], key_of: Callable[[Coord], Hashable],
                 deps: Iterable[Blocks], covers: bool):
        super().__init__(name, grid, deps, None, op="remap", spec=covers)
        self.key_of = key_of

    @property
    def keys(self) -> np.ndarray:
        """Object array of the blocks' keys (made when first asked for)."""
        if self._keys is None:
            keys = np.empty(self.grid, dtype=object)
            for coord in np.ndindex(*self.grid):
                keys[coord] = self.key_of(coord)
            self._keys = keys
        return self._keys

    def key(self, coord: Coord) -> Hashable:
        coord = tuple(coord)
        if len(coord) != len(self.grid) or not all(
                0 <= c < g for c, g in zip(coord, self.grid, strict=True)):
            raise IndexError(f"block {coord} is outside the grid {self.grid} of {self.name!r}")
        return self.key_of(coord)


def remap_by(label: str, grid: Sequence[int], key_of: Callable[[Coord], Hashable],
             inputs: Sequence[Blocks], *, covers: bool = False) -> Blocks:
    """As :func:`remap`, with the key of block ``coord`` given by ``key_of(coord)``, so
    that no block is listed until a plan asks for it (a concatenation of large arrays)."""
    return KeyedBlocks(label, grid, key_of, unique_collections(inputs), covers)


def pick_part(i: int) -> Callable[[tuple], Any]:
    """The block function that takes part ``i`` of a tuple of parts (named ``pick_i``)."""

    def pick(parts: tuple) -> Any:
        return parts[i]

    pick.__name__ = f"pick_{i}"
    return pick


def flat_map(
    label: str,
    func: Callable,
    coll: Blocks,
    outputs_of: Callable[[Coord], Sequence[Coord]],
    grid: Sequence[int],
    **meta: Any,
) -> Blocks:
    """Each input block makes several output blocks: ``func(block)`` returns a tuple whose
    n-th element is output block ``outputs_of(coord)[n]``. Every output coordinate of
    ``grid`` must be made by exactly one input block."""
    grid = tuple(grid)
    owner: dict[Coord, tuple[Coord, int]] = {}
    for coord in coll.coords():
        for n, out in enumerate(outputs_of(coord)):
            out = tuple(out)
            if len(out) != len(grid) or not all(
                    0 <= o < g for o, g in zip(out, grid, strict=True)):
                raise ValueError(f"flat_map: output block {out} of input block {coord} is "
                                 f"outside the grid {grid}")
            if out in owner:
                raise ValueError(f"flat_map: output block {out} is made by two input blocks")
            owner[out] = (coord, n)
    missing = [c for c in np.ndindex(*grid) if c not in owner]
    if missing:
        raise ValueError(f"flat_map: output block {missing[0]} is made by no input block")

    def emit(builder: GraphBuilder, coords: Iterable[Coord] | None = None) -> None:
        if coords is None:
            sources: Iterable[Coord] = coll.coords()
            outs: Iterable[tuple[Coord, tuple[Coord, int]]] = owner.items()
        else:
            outs = [(out, owner[out]) for out in coords]
            sources = sorted({src for _, (src, _) in outs})
        for coord in sources:
            builder.add((label + "-parts", *coord), func, deps=[coll.key(coord)],
                        **_meta_at(meta, coord))
        for out, (coord, n) in outs:
            builder.add((label, *out), pick_part(n), deps=[(label + "-parts", *coord)],
                        kind="getitem", coords=out)

    return Blocks(label, grid, (coll,), emit, ntasks=coll.nblocks + math.prod(grid),
                  op="flat_map", spec=(coll, owner))


def join(
    label: str,
    left: Blocks,
    right: Blocks,
    on_left: Callable[[Coord], Hashable],
    on_right: Callable[[Coord], Hashable],
    func: Callable,
    **meta: Any,
) -> tuple[Blocks, list[tuple[Coord, Coord]]]:
    """Equi-join: one task ``func(l, r)`` per pair of blocks whose join keys are equal.

    Returns the collection (a 1-D grid over the pairs, in order) and the list of pairs
    ``(left coord, right coord)``.
    """
    by_key: dict[Hashable, list[Coord]] = {}
    for rc in right.coords():
        by_key.setdefault(on_right(rc), []).append(rc)
    pairs = [(lc, rc) for lc in left.coords() for rc in by_key.get(on_left(lc), ())]

    def emit(builder: GraphBuilder, coords: Iterable[Coord] | None = None) -> None:
        for (n,) in ((n,) for n in range(len(pairs))) if coords is None else coords:
            lc, rc = pairs[n]
            deps = [left.key(lc), right.key(rc)]
            if deps[0] == deps[1]:
                builder.add((label, n), func, deps=deps[:1], args=(Dep(0), Dep(0)),
                            **_meta_at(meta, (n,)))
            else:
                builder.add((label, n), func, deps=deps, **_meta_at(meta, (n,)))

    return Blocks(label, (len(pairs),), unique_collections([left, right]), emit,
                  ntasks=len(pairs), op="join", spec=(left, right, pairs)), pairs


def reduce_by_key(
    label: str,
    coll: Blocks,
    key_of: Callable[[Coord], Coord],
    grid: Sequence[int],
    op: Callable[[Any, Any], Any],
    split_every: int = 8,
    members: Callable[[Coord], Sequence[Coord]] | None = None,
    accumulate: bool = False,
    **meta: Any,
) -> Blocks:
    """Combine the blocks of ``coll`` that share an output coordinate ``key_of(coord)``
    with the associative ``op``, as a tree with fan-in ``split_every``. ``nbytes=`` (a
    value or a callable of the output coordinate) sizes the tree's inner steps too.
    ``members(out)``, when given, lists the blocks of ``coll`` whose key is ``out`` (in the
    order of ``coll.coords()``: the order ``op`` combines them), so that the blocks of a
    few outputs are found without listing every block of ``coll`` (and the keys are not
    checked); otherwise they are grouped, and checked, now.

    With ``accumulate``, the partials of an output block too large for a tree under the
    run's memory limit (:func:`fold_chains`) are combined as they arrive instead, into one
    accumulator per worker (:func:`accumulate_into`: in place where ``op`` is a ufunc), by
    the accumulation chains of :func:`group_by_join`; the collection is then planned for
    the run (a :class:`RunBlocks`, planned block by block by the rule of ``"reduce"``: a
    wanted output block reads all of its partials, ``members(out)``)."""
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    grid = tuple(grid)
    if members is None:
        groups: dict[Coord, list[Coord]] = {c: [] for c in np.ndindex(*grid)}
        for coord in coll.coords():
            out = tuple(key_of(coord))
            if out not in groups:
                raise ValueError(
                    f"reduce_by_key: key {out} of block {coord} is outside grid {grid}")
            groups[out].append(coord)
        empty = [c for c, g in groups.items() if not g]
        if empty:
            raise ValueError(f"reduce_by_key: no block reduces into output {empty[0]}")
        members = groups.__getitem__
    combine = combine_all(op)
    key = coll.key
    step_func = accumulate_into(op)
    nbytes = meta.get("nbytes")
    extra = {k: v for k, v in meta.items() if k not in ("kind", "coords", "nbytes")}

    def chains_of(out: Coord, nparts: int, options: Any) -> int:
        if not accumulate:
            return 0
        part = nbytes(out) if callable(nbytes) else nbytes
        return fold_chains(part, nparts, split_every, options)

    def emit_for(builder: GraphBuilder, options: Any,
                 coords: Iterable[Coord] | None = None) -> None:
        for out in np.ndindex(*grid) if coords is None else coords:
            keys = [key(c) for c in members(out)]
            at = _meta_at(meta, out)
            chains = chains_of(out, len(keys), options)
            if chains:
                nb = at.get("nbytes")
                fixed = {k: (v(out) if callable(v) else v) for k, v in extra.items()}

                def fold(k: Hashable, acc: Hashable, part: Hashable, out: Coord = out,
                         nb: Any = nb, fixed: dict = fixed) -> None:
                    builder.add(k, step_func, deps=[acc, part], kind="accumulate",
                                nbytes=nb, coords=out, **fixed)

                accumulation_chains(builder.add, label, out, keys, chains,
                                    lambda _, k: k, fold, op, nb, fixed)
                continue
            level = 0
            while len(keys) > split_every:
                nxt = []
                for g in range(0, len(keys), split_every):
                    part = keys[g : g + split_every]
                    if len(part) == 1:
                        nxt.append(part[0])
                        continue
                    k = (label + "-tree", *out, level, g // split_every)
                    builder.add(k, combine, deps=part, kind="reduce", coords=out,
                                nbytes=at.get("nbytes"))
                    nxt.append(k)
                keys, level = nxt, level + 1
            builder.add((label, *out), combine, deps=keys, **at)

    def count_for(options: Any, coords: Iterable[Coord] | None = None) -> int:
        total = 0
        for out in np.ndindex(*grid) if coords is None else coords:
            n = len(members(out))
            chains = chains_of(out, n, options)
            total += (chain_tasks(n, chains, starts_are_tasks=False) if chains
                      else tree_count(n, split_every))
        return total

    spec = (coll, members, split_every)
    if accumulate:
        return RunBlocks(label, grid, (coll,), emit_for, count_for, op="reduce", spec=spec)
    return Blocks(label, grid, (coll,),
                  lambda builder, coords=None: emit_for(builder, None, coords),
                  ntasks=lambda: count_for(None), op="reduce", spec=spec)


def group_by_join(
    label: str,
    left: Blocks,
    right: Blocks,
    pairs_of: Callable[[Coord], Sequence[tuple[Coord, Coord]]],
    grid: Sequence[int],
    semiring: Any,
    chains: int = 1,
    zero_task: Callable[[Coord], tuple[Callable, tuple]] | None = None,
    ntasks: int | None = None,
    **meta: Any,
) -> Blocks:
    """Join, per-pair product, and reduce by output key, fused.

    For each output coordinate ``o`` of ``grid``, ``pairs_of(o)`` lists the (left, right)
    block coordinates whose products reduce into ``o``. The tasks of ``o`` form ``chains``
    accumulation chains: the first task of a chain computes ``semiring.product(l, r)``, each
    next one ``semiring.accumulate(acc, l, r)`` (in place where the semiring can), so at most
    one partial result per chain is alive; with more than one chain, the chains' results are
    combined with ``semiring.add``. ``zero_task(o)`` gives ``(func, args)`` making an output
    block that no pair reduces into (an empty contraction). Metadata: ``kind`` of products is
    ``"product"``, of accumulations ``"accumulate"``; ``cost=`` and ``nbytes=`` may be given
    as callables of ``(left coord, right coord)`` and of the output coordinate. Other
    metadata (``name=``, ...) goes on every task of an output, as a value or as a callable of
    the output coordinate; ``kind`` and ``coords`` are set here and cannot be given.
    ``ntasks``: the number of tasks, when the caller knows it without listing every output's
    pairs (counting lists them).

    Accumulation tasks may update their partial result in place: the partial results are
    private to the chain, each consumed once, by the next step.
    """
    grid = tuple(grid)
    chains = max(1, int(chains))
    cost_of = meta.pop("cost", None)
    nbytes_of = meta.pop("nbytes", None)
    for fixed in ("kind", "coords"):
        if fixed in meta:
            raise TypeError(f"group_by_join: the {fixed!r} of its tasks is set by "
                            "group_by_join itself")
    product, accumulate, add = semiring.product, semiring.accumulate, semiring.add

    def emit(builder: GraphBuilder, coords: Iterable[Coord] | None = None) -> None:
        badd = builder.add
        lkey, rkey = left.key, right.key
        for out in np.ndindex(*grid) if coords is None else coords:
            pairs = list(pairs_of(out))
            extra = {k: (v(out) if callable(v) else v) for k, v in meta.items()}
            if not pairs:
                if zero_task is None:
                    raise ValueError(f"group_by_join: no pairs for output block {out}")
                func, args = zero_task(out)
                badd((label, *out), func, deps=(), args=args, kind="creation", coords=out,
                     **extra)
                continue
            nb = nbytes_of(out) if nbytes_of is not None else None

            def start(key: Hashable, pair: tuple, out: Coord = out, nb: Any = nb,
                      extra: dict = extra) -> Hashable:
                lc, rc = pair
                cost = cost_of(lc, rc) if cost_of is not None else None
                lk, rk = lkey(lc), rkey(rc)
                if lk == rk:
                    badd(key, product, deps=[lk], args=(Dep(0), Dep(0)), kind="product",
                         cost=cost, nbytes=nb, coords=out, **extra)
                else:
                    badd(key, product, deps=[lk, rk], kind="product", cost=cost, nbytes=nb,
                         coords=out, **extra)
                return key

            def step(key: Hashable, acc: Hashable, pair: tuple, out: Coord = out,
                     nb: Any = nb, extra: dict = extra) -> None:
                lc, rc = pair
                cost = cost_of(lc, rc) if cost_of is not None else None
                lk, rk = lkey(lc), rkey(rc)
                if lk == rk:
                    badd(key, accumulate, deps=[acc, lk], args=(Dep(0), Dep(1), Dep(1)),
                         kind="accumulate", cost=cost, nbytes=nb, coords=out, **extra)
                else:
                    badd(key, accumulate, deps=[acc, lk, rk], kind="accumulate", cost=cost,
                         nbytes=nb, coords=out, **extra)

            accumulation_chains(badd, label, out, pairs, chains, start, step, add, nb, extra)

    blocks = Blocks(label, grid, unique_collections([left, right]), emit, op="group_by_join",
                    spec=(left, right, pairs_of, chains))
    blocks._ntasks = (lambda: count_group_by_join(blocks, np.ndindex(*grid))) \
        if ntasks is None else int(ntasks)
    return blocks


def count_group_by_join(coll: Blocks, coords: Iterable[Coord]) -> int:
    """Tasks a :func:`group_by_join` collection emits for the output blocks ``coords``."""
    _, _, pairs_of, chains = coll.spec
    return sum(chain_tasks(max(len(pairs_of(out)), 1), chains, starts_are_tasks=True)
               for out in coords)
