"""Demand-driven lowering of block collections (culling before planning): which blocks of
each collection the results of a plan read (:class:`Demand`, by the rule of the operator that
made each collection, :data:`BLOCK_RULES`), and the lowering of a plan's wanted blocks into a
task graph (:class:`LoweringPlan`, :func:`lower`, :func:`count_tasks`). The collections and
their operators are in :mod:`tilegraph.algebra.blocks`, whose docstring says how a rule
plans some blocks of a collection."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from tilegraph.algebra.blocks import Blocks, Coord, RunBlocks, count_group_by_join
from tilegraph.algebra.fold import tree_count
from tilegraph.graph.builder import GraphBuilder

# -- demand: which blocks a plan reads ----------------------------------------------------------


class Demand:
    """The blocks of each collection of a plan that its results read: ``wanted`` maps a
    collection's name to ``None`` (every block) or a set of block coordinates; a collection
    not in it is not read at all. Built from the results down (:func:`plan_order` order,
    reversed): each collection's rule adds the blocks its own wanted blocks read."""

    __slots__ = ("_by_name", "wanted")

    def __init__(self, colls: Sequence[Blocks]):
        self.wanted: dict[str, set[Coord] | None] = {}
        self._by_name = {c.name: c for c in colls}

    def every(self, coll: Blocks) -> None:
        """Every block of ``coll`` is read."""
        self.wanted[coll.name] = None

    def some(self, coll: Blocks, coords: Iterable[Coord]) -> None:
        """The blocks ``coords`` of ``coll`` are read."""
        name = coll.name
        if name in self.wanted:
            have = self.wanted[name]
            if have is not None:
                have.update(coords)
        else:
            self.wanted[name] = set(coords)

    def keys(self, keys: Iterable[Hashable]) -> bool:
        """The blocks whose task keys are ``keys`` are read. False (and nothing is known)
        when a key is not the key of a block of a collection of the plan: the caller then
        reads every block of its inputs."""
        by_name, wanted = self._by_name, self.wanted
        for k in keys:
            if type(k) is not tuple or not k:
                return False
            coll = by_name.get(k[0])
            if coll is None or len(k) != len(coll.grid) + 1:
                return False
            coord = k[1:]
            if coll._keys is not None and coll._keys[coord] != k:
                return False
            have = wanted.get(coll.name, False)
            if have is False:
                wanted[coll.name] = {coord}
            elif have is not None:
                have.add(coord)
        return True


def _all_inputs(coll: Blocks, demand: Demand) -> bool:
    for d in coll.deps:
        demand.every(d)
    return True


class BlockRule(NamedTuple):
    """How lowering plans some of the blocks of a collection made by one operator.

    ``needs(coll, coords, demand)`` adds to ``demand`` the blocks of the inputs that the
    blocks ``coords`` of ``coll`` read (``coords`` None: all of its blocks; an operator
    whose blocks together read all of their inputs says so without listing them); it returns
    False when it cannot tell, and every block of the inputs is read then.
    ``count(coll, coords)`` is the number of tasks the blocks ``coords`` take. The
    collection's emitter makes the tasks of some blocks only (see :data:`Emitter`)."""

    needs: Callable[[Blocks, set[Coord] | None, Demand], bool]
    count: Callable[[Blocks, set[Coord]], int]


def _count_blocks(coll: Blocks, coords: set[Coord]) -> int:
    return len(coords)


def _needs_nothing(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    return True


def _needs_map(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    if coords is None:
        return _all_inputs(coll, demand)
    inputs, maps = coll.spec
    for inp, m in zip(inputs, maps, strict=True):
        demand.some(inp, coords if m is None else {m(c) for c in coords})
    return True


def _needs_apply(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    task_of, covers, domain = coll.spec
    if coords is None:
        if covers is True:
            return _all_inputs(coll, demand)
        if covers is not False:
            (inp,) = coll.deps
            demand.some(inp, covers())
            return True
        coords = domain() if domain is not None else np.ndindex(*coll.grid)
    return demand.keys(k for c in coords for k in task_of(c)[1])


def _needs_remap(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    covers = coll.spec
    if coords is None:
        if covers:
            return _all_inputs(coll, demand)
        return demand.keys(coll.keys.flat)
    key = coll.key
    return demand.keys(key(c) for c in coords)


def _needs_flat_map(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    if coords is None:
        return _all_inputs(coll, demand)
    inp, owner = coll.spec
    demand.some(inp, {owner[c][0] for c in coords})
    return True


def _count_flat_map(coll: Blocks, coords: set[Coord]) -> int:
    owner = coll.spec[1]
    return len({owner[c][0] for c in coords}) + len(coords)


def _needs_join(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    if coords is None:
        return _all_inputs(coll, demand)
    left, right, pairs = coll.spec
    demand.some(left, {pairs[n][0] for (n,) in coords})
    demand.some(right, {pairs[n][1] for (n,) in coords})
    return True


def _needs_reduce(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    if coords is None:
        return _all_inputs(coll, demand)
    inp, members, _ = coll.spec
    demand.some(inp, {c for out in coords for c in members(out)})
    return True


def _count_reduce(coll: Blocks, coords: set[Coord]) -> int:
    _, members, split_every = coll.spec
    return sum(tree_count(len(members(out)), split_every) for out in coords)


def _needs_group_by_join(coll: Blocks, coords: set[Coord] | None, demand: Demand) -> bool:
    if coords is None:
        return _all_inputs(coll, demand)
    left, right, pairs_of, _ = coll.spec
    lefts: set[Coord] = set()
    rights: set[Coord] = set()
    for out in coords:
        for lc, rc in pairs_of(out):
            lefts.add(tuple(lc))
            rights.add(tuple(rc))
    demand.some(left, lefts)
    demand.some(right, rights)
    return True


BLOCK_RULES: dict[str, BlockRule] = {
    "source": BlockRule(_needs_nothing, _count_blocks),
    "map": BlockRule(_needs_map, _count_blocks),
    "apply": BlockRule(_needs_apply, _count_blocks),
    "remap": BlockRule(_needs_remap, lambda coll, coords: 0),
    "flat_map": BlockRule(_needs_flat_map, _count_flat_map),
    "join": BlockRule(_needs_join, _count_blocks),
    "reduce": BlockRule(_needs_reduce, _count_reduce),
    "group_by_join": BlockRule(_needs_group_by_join, count_group_by_join),
}
"""The rule of each operator by which lowering plans some blocks of a collection (see
:class:`BlockRule`); a module that makes collections of its own kind registers theirs
(:func:`register_block_rule`)."""


def register_block_rule(op: str, rule: BlockRule) -> None:
    """Plan the collections whose ``op`` is ``op`` by ``rule`` (idempotent)."""
    BLOCK_RULES[op] = rule


def plan_order(roots: Iterable[Blocks], options: Any = None) -> list[Blocks]:
    """The collections that lowering ``roots`` for a run of ``options`` emits, each once
    (by name), inputs before consumers, after the collections' rewrites, with every
    collection that is lowered as several (:meth:`Blocks.expand`) replaced by them."""
    roots = list(roots)
    order = _postorder(roots, set(), _rewrites(roots))
    out: list[Blocks] = []
    seen: set[str] = set()
    for coll in order:
        inner = coll.expand(options)
        for c in (coll,) if inner is None else inner:
            if c.name not in seen:
                seen.add(c.name)
                out.append(c)
    return out


def demand_of(order: Sequence[Blocks], roots: Iterable[Blocks]) -> Demand:
    """Which blocks of the collections ``order`` (:func:`plan_order`) the results
    ``roots`` read, all of whose blocks are wanted (see :class:`Demand`)."""
    demand = Demand(order)
    for r in roots:
        demand.every(r)
    wanted = demand.wanted
    for coll in reversed(order):
        name = coll.name
        if name not in wanted:
            continue
        coords = wanted[name]
        if coords is not None and len(coords) >= coll.nblocks:
            coords = wanted[name] = None
        rule = BLOCK_RULES.get(coll.op)
        if rule is None:
            wanted[name] = None
            _all_inputs(coll, demand)
        elif not rule.needs(coll, coords, demand):
            _all_inputs(coll, demand)
    return demand


class LoweringPlan:
    """The collections of a plan of ``roots`` for a run of ``options``
    (:func:`plan_order`) and the blocks of each that the results read
    (:func:`demand_of`): :meth:`count` and :meth:`lower` plan those blocks only."""

    __slots__ = ("demand", "options", "order")

    def __init__(self, roots: Iterable[Blocks], options: Any = None):
        roots = list(roots)
        self.options = options
        self.order = plan_order(roots, options)
        self.demand = demand_of(self.order, roots)

    def wanted(self) -> Iterable[tuple[Blocks, set[Coord] | None]]:
        """Each collection read, inputs first, with its blocks read (None: all)."""
        wanted = self.demand.wanted
        for coll in self.order:
            if coll.name in wanted:
                yield coll, wanted[coll.name]

    def count(self) -> int:
        """Tasks that :meth:`lower` emits (before fusion), without emitting them."""
        total = 0
        for coll, coords in self.wanted():
            if coords is None:
                total += coll.count(self.options)
            elif isinstance(coll, RunBlocks):  # its blocks' tasks depend on the run
                total += coll.count(self.options, coords)
            else:
                total += BLOCK_RULES[coll.op].count(coll, coords)
        return total

    def lower(self, builder: GraphBuilder | None = None) -> GraphBuilder:
        """Emit the tasks of the blocks read into ``builder`` (a new one by default)."""
        builder = builder if builder is not None else GraphBuilder()
        for coll, coords in self.wanted():
            if coords is None:
                coll.lower_into(builder, self.options)
                continue
            # coordinates as Python ints (a rule may give NumPy's): they make task keys
            coords = sorted(tuple(map(int, c)) for c in coords)
            if isinstance(coll, RunBlocks):
                coll.lower_into(builder, self.options, coords)
            elif coll.emit is not None:
                coll.emit(builder, coords)
        return builder


def count_tasks(roots: Iterable[Blocks], options: Any = None) -> int:
    """Tasks that lowering ``roots`` for a run of ``options`` would emit (before fusion),
    without emitting them: those of the blocks the results read."""
    return LoweringPlan(roots, options).count()


def lower(roots: Iterable[Blocks], builder: GraphBuilder | None = None,
          options: Any = None) -> GraphBuilder:
    """Emit the tasks that make ``roots`` (all of their blocks), each collection once (by
    name), inputs before consumers, after the collections' rewrites, each collection's
    tasks only for the blocks the results read (see the module docstring). ``options``:
    the completed options of the run the graph is lowered for
    (:func:`tilegraph.config.per_process`), handed to the collections whose tasks depend on
    the run (:class:`RunBlocks`); ``None``: for no run (a drawing, a test of structure)."""
    return LoweringPlan(roots, options).lower(builder)


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
