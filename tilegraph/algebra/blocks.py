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
- :func:`remap`: a new grid whose blocks are existing blocks (concatenation, block transpose).

Collections are shared by name: two collections with the same name are the same tasks, which
is how common subexpressions are shared when a plan is lowered.

A collection may carry a ``rewrite``: when a plan is lowered, it is asked (inputs first) for
a replacement of itself, given which collections consume which in this plan, e.g. a chain
of stencil steps whose intermediates nothing else reads becomes one step. A replacement has
the same name and keys, so its consumers do not change.

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

from tilegraph.graph.taskgraph import Dep, GraphBuilder

Coord = tuple[int, ...]
Emitter = Callable[[GraphBuilder], None]


class Blocks:
    """A collection of blocks over ``grid`` (blocks per axis); see the module docstring.

    ``keys`` is an object array of shape ``grid`` holding each block's task key; by default
    ``(name, *coord)``. ``deps`` are the collections whose tasks this one's tasks consume.
    """

    __slots__ = ("_keys", "_ntasks", "deps", "emit", "grid", "name", "rewrite")

    def __init__(
        self,
        name: str,
        grid: Sequence[int],
        deps: Iterable[Blocks] = (),
        emit: Emitter | None = None,
        keys: np.ndarray | None = None,
        ntasks: int | Callable[[], int] | None = None,
    ):
        self.name = name
        self.grid = tuple(int(g) for g in grid)
        self.deps = tuple(deps)
        self.emit = emit
        self._ntasks = ntasks
        if keys is not None and keys.shape != self.grid:
            raise ValueError(f"keys of shape {keys.shape} do not match grid {self.grid}")
        self._keys = keys
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


class RunBlocks(Blocks):
    """A collection whose tasks depend on the run it is lowered for: :meth:`lower_into`
    and :meth:`count` get the run's completed options (a :class:`tilegraph.config.Options`:
    ``memory_limit``, the bytes each process of the run may hold, and ``spill_dir``), or
    ``None`` for a graph lowered for no run (each such collection says what it plans then).
    A rechunk's stages, chosen for the run's memory limit, are one. Made of two functions,
    ``emit_for(builder, options)`` and ``count_for(options)``, or a subclass overrides the
    two methods."""

    __slots__ = ("count_for", "emit_for")

    def __init__(self, name: str, grid: Sequence[int], deps: Iterable[Blocks] = (),
                 emit_for: Callable[[GraphBuilder, Any], None] | None = None,
                 count_for: Callable[[Any], int] | None = None,
                 keys: np.ndarray | None = None):
        super().__init__(name, grid, deps, None, keys)
        self.emit_for = emit_for
        self.count_for = count_for

    @property
    def ntasks(self) -> int:
        """Tasks it emits when lowered for no run."""
        return self.count(None)

    def count(self, options: Any = None) -> int:
        return self.count_for(options)

    def lower_into(self, builder: GraphBuilder, options: Any = None) -> None:
        self.emit_for(builder, options)


def count_tasks(roots: Iterable[Blocks], options: Any = None) -> int:
    """Tasks that lowering ``roots`` for a run of ``options`` would emit (before fusion),
    without emitting them."""
    roots = list(roots)
    return sum(c.count(options) for c in _postorder(roots, set(), _rewrites(roots)))


def lower(roots: Iterable[Blocks], builder: GraphBuilder | None = None,
          options: Any = None) -> GraphBuilder:
    """Emit the tasks of ``roots`` and everything they depend on, each collection once (by
    name), inputs before consumers, after the collections' rewrites. ``options``: the
    completed options of the run the graph is lowered for
    (:func:`tilegraph.config.per_process`), handed to the collections whose tasks depend on
    the run (:class:`RunBlocks`); ``None``: for no run (a drawing, a test of structure)."""
    builder = builder if builder is not None else GraphBuilder()
    roots = list(roots)
    seen: set[str] = set()
    for coll in _postorder(roots, seen, _rewrites(roots)):
        coll.lower_into(builder, options)
    return builder


def _rewrites(roots: list[Blocks]) -> dict[str, Blocks]:
    """The replacements the collections reachable from ``roots`` make of themselves, by
    name (see :class:`Blocks`' ``rewrite``), asked inputs first."""
    order = _postorder(roots, set(), {})
    if all(c.rewrite is None for c in order):
        return {}
    consumers: dict[str, set[str | None]] = {c.name: set() for c in order}
    for c in order:
        for d in c.deps:
            consumers[d.name].add(c.name)
    for r in roots:
        consumers[r.name].add(None)
    replaced: dict[str, Blocks] = {}
    for c in order:
        if c.rewrite is not None:
            new = c.rewrite(consumers, replaced)
            if new is not None:
                replaced[c.name] = new
    return replaced


def _postorder(roots: Iterable[Blocks], seen: set[str], replaced: dict[str, Blocks]
               ) -> list[Blocks]:
    out: list[Blocks] = []
    for root in roots:
        if root.name in seen:
            continue
        seen.add(root.name)
        root = replaced.get(root.name, root)
        stack = [(root, iter(root.deps))]
        while stack:
            node, it = stack[-1]
            for d in it:
                if d.name not in seen:
                    seen.add(d.name)
                    d = replaced.get(d.name, d)
                    stack.append((d, iter(d.deps)))
                    break
            else:
                stack.pop()
                out.append(node)
    return out


def source(label: str, grid: Sequence[int], task_of: Callable[[Coord], tuple], **meta: Any
           ) -> Blocks:
    """Blocks made from nothing: ``task_of(coord)`` gives ``(func, args)`` (loads, creation).
    Per-block metadata may be given as callables of the coordinate."""

    def emit(builder: GraphBuilder) -> None:
        for coord in np.ndindex(*grid):
            func, args = task_of(coord)
            builder.add((label, *coord), func, deps=(), args=args,
                        **_meta_at(meta, coord))

    return Blocks(label, grid, (), emit)


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

    def emit(builder: GraphBuilder) -> None:
        add = builder.add
        for coord in np.ndindex(*grid):
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

    return Blocks(label, grid, _unique_colls(inputs), emit)


def _unique_colls(colls: Iterable[Blocks]) -> list[Blocks]:
    seen: dict[str, Blocks] = {}
    for c in colls:
        seen.setdefault(c.name, c)
    return list(seen.values())


def apply_blocks(
    label: str,
    grid: Sequence[int],
    inputs: Sequence[Blocks],
    task_of: Callable[[Coord], tuple[Callable, list, tuple | None]],
    **meta: Any,
) -> Blocks:
    """The general per-coordinate task: ``task_of(coord)`` returns ``(func, deps, args)``
    where ``deps`` are task keys and ``args`` a template with ``Dep`` markers (or ``None``
    for ``func(*deps)``)."""
    grid = tuple(grid)

    def emit(builder: GraphBuilder) -> None:
        for coord in np.ndindex(*grid):
            func, deps, args = task_of(coord)
            builder.add((label, *coord), func, deps=deps, args=args, **_meta_at(meta, coord))

    return Blocks(label, grid, _unique_colls(inputs), emit)


def remap(label: str, keys: np.ndarray, inputs: Sequence[Blocks]) -> Blocks:
    """A collection whose blocks are existing blocks, arranged by ``keys`` (no tasks)."""
    return Blocks(label, keys.shape, _unique_colls(inputs), None, keys=keys)


def _pick(i: int) -> Callable[[tuple], Any]:
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

    def emit(builder: GraphBuilder) -> None:
        for coord in coll.coords():
            builder.add((label + "-parts", *coord), func, deps=[coll.key(coord)],
                        **_meta_at(meta, coord))
        for out, (coord, n) in owner.items():
            builder.add((label, *out), _pick(n), deps=[(label + "-parts", *coord)],
                        kind="getitem", coords=out)

    return Blocks(label, grid, (coll,), emit, ntasks=coll.nblocks + math.prod(grid))


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

    def emit(builder: GraphBuilder) -> None:
        for n, (lc, rc) in enumerate(pairs):
            deps = [left.key(lc), right.key(rc)]
            if deps[0] == deps[1]:
                builder.add((label, n), func, deps=deps[:1], args=(Dep(0), Dep(0)),
                            **_meta_at(meta, (n,)))
            else:
                builder.add((label, n), func, deps=deps, **_meta_at(meta, (n,)))

    return Blocks(label, (len(pairs),), _unique_colls([left, right]), emit,
                  ntasks=len(pairs)), pairs


def combine_all(op: Callable) -> Callable:
    """A task body folding its inputs with the binary ``op`` (a reduction step)."""
    def combine(*parts: Any) -> Any:
        acc = parts[0]
        for p in parts[1:]:
            acc = op(acc, p)
        return acc

    combine.__name__ = f"combine_{getattr(op, '__name__', 'op')}"
    return combine


def reduce_by_key(
    label: str,
    coll: Blocks,
    key_of: Callable[[Coord], Coord],
    grid: Sequence[int],
    op: Callable[[Any, Any], Any],
    split_every: int = 8,
    **meta: Any,
) -> Blocks:
    """Combine the blocks of ``coll`` that share an output coordinate ``key_of(coord)``
    with the associative ``op``, as a tree with fan-in ``split_every``. ``nbytes=`` (a
    value or a callable of the output coordinate) sizes the tree's inner steps too."""
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    grid = tuple(grid)
    groups: dict[Coord, list[Hashable]] = {c: [] for c in np.ndindex(*grid)}
    for coord in coll.coords():
        out = tuple(key_of(coord))
        if out not in groups:
            raise ValueError(f"reduce_by_key: key {out} of block {coord} is outside grid {grid}")
        groups[out].append(coll.key(coord))
    empty = [c for c, g in groups.items() if not g]
    if empty:
        raise ValueError(f"reduce_by_key: no block reduces into output {empty[0]}")
    combine = combine_all(op)

    def emit(builder: GraphBuilder) -> None:
        for out, keys in groups.items():
            at = _meta_at(meta, out)
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

    def count() -> int:
        total = 0
        for keys in groups.values():
            n = len(keys)
            while n > split_every:
                total += sum(1 for g in range(0, n, split_every) if n - g > 1)
                n = -(-n // split_every)
            total += 1
        return total

    return Blocks(label, grid, (coll,), emit, ntasks=count)


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
    prod_name = label + "-acc"
    product, accumulate, add = semiring.product, semiring.accumulate, semiring.add

    def emit(builder: GraphBuilder) -> None:
        badd = builder.add
        lkey, rkey = left.key, right.key
        for out in np.ndindex(*grid):
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
            nchains = min(chains, len(pairs))
            ends = []
            for c in range(nchains):
                part = pairs[c::nchains]
                prev = None
                for t, (lc, rc) in enumerate(part):
                    last = t == len(part) - 1
                    key = (label, *out) if (last and nchains == 1) else (prod_name, *out, c, t)
                    cost = cost_of(lc, rc) if cost_of is not None else None
                    lk, rk = lkey(lc), rkey(rc)
                    if prev is None:
                        if lk == rk:
                            badd(key, product, deps=[lk], args=(Dep(0), Dep(0)),
                                 kind="product", cost=cost, nbytes=nb, coords=out, **extra)
                        else:
                            badd(key, product, deps=[lk, rk], kind="product", cost=cost,
                                 nbytes=nb, coords=out, **extra)
                    elif lk == rk:
                        badd(key, accumulate, deps=[prev, lk], args=(Dep(0), Dep(1), Dep(1)),
                             kind="accumulate", cost=cost, nbytes=nb, coords=out, **extra)
                    else:
                        badd(key, accumulate, deps=[prev, lk, rk], kind="accumulate",
                             cost=cost, nbytes=nb, coords=out, **extra)
                    prev = key
                ends.append(prev)
            if nchains > 1:
                badd((label, *out), combine_all(add), deps=ends, kind="reduce", nbytes=nb,
                     coords=out, **extra)

    def count() -> int:
        total = 0
        for out in np.ndindex(*grid):
            npairs = len(pairs_of(out))
            total += max(npairs, 1) + (1 if min(chains, npairs) > 1 else 0)
        return total

    return Blocks(label, grid, _unique_colls([left, right]), emit,
                  ntasks=count if ntasks is None else int(ntasks))
