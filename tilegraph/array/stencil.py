"""Halos and stencils, as dask.array's ``overlap`` module has them: :func:`overlap` gives
each block the ``depth`` elements of its neighbours (faces and corners, cut from the
neighbours and assembled with the block in one copy; beyond the array's edges, the
``boundary``: periodic, reflect, nearest, a constant, or none), :func:`trim_internal` cuts
them off again, and :func:`map_overlap` runs a function on each block with its halo.
Iterated periodic stencils are chained: a ``map_overlap`` whose only input is another one
that nothing else reads runs both functions in one task per block (see
:func:`map_overlap`).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(8.0), chunks=4)
>>> tg.overlap(x, depth=1, boundary="periodic").compute()
array([7., 0., 1., 2., 3., 4., 3., 4., 5., 6., 7., 0.])
>>> tg.map_overlap(lambda b: b + np.roll(b, 1), x, depth=1, boundary="periodic").compute()
array([ 7.,  1.,  3.,  5.,  7.,  9., 11., 13.])
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray
from tilegraph.array.padding import replace_at

__all__ = ["map_overlap", "overlap", "trim_internal"]


_BOUNDARY_MODES = {"periodic": "wrap", "reflect": "symmetric", "nearest": "edge"}


def _per_axis(name: str, value: Any, ndim: int, default: Any) -> list[Any]:
    """dask's per-axis argument: one value for every axis, a tuple (one per axis) or a dict
    {axis: value} (the others ``default``)."""
    if isinstance(value, dict):
        out = [default] * ndim
        for a, v in value.items():
            a = operator.index(a)
            if not -ndim <= a < ndim:
                raise np.exceptions.AxisError(f"{name}: axis {a} is out of bounds for a "
                                              f"{ndim}-d array")
            out[a % ndim] = v
        return out
    if isinstance(value, (tuple, list)):
        if len(value) != ndim:
            raise ValueError(f"{name}: give one value per axis ({ndim}), got {value!r}")
        return list(value)
    return [value] * ndim


def _depth_pairs(name: str, depth: Any, ndim: int) -> list[tuple[int, int]]:
    """dask's ``depth``: per axis one number of elements (the same on both sides) or a
    ``(before, after)`` pair (in a dict {axis: depth}), as (before, after) pairs."""
    if isinstance(depth, (tuple, list)) and len(depth) == ndim:
        values = list(depth)
    else:
        values = _per_axis(name, 0 if depth is None else depth, ndim, 0)
    out = []
    for d in values:
        pair = tuple(d) if isinstance(d, (tuple, list)) else (d, d)
        if len(pair) != 2:
            raise ValueError(f"{name}: a depth is a number or a (before, after) pair, got "
                             f"{d!r} in {depth!r}")
        try:
            pair = (operator.index(pair[0]), operator.index(pair[1]))
        except TypeError:
            raise TypeError(f"{name}: depth must be integers, got {depth!r}") from None
        if pair[0] < 0 or pair[1] < 0:
            raise ValueError(f"{name}: depth must be non-negative, got {depth!r}")
        out.append(pair)
    return out


def _depths(depth: Any, x: Array) -> list[tuple[int, int]]:
    out = _depth_pairs("overlap", depth, x.ndim)
    for a, (before, after) in enumerate(out):
        d = max(before, after)
        if d and d > min(x.chunks[a], default=0):
            raise ValueError(
                f"overlap: depth {d} on axis {a} is larger than the smallest block there "
                f"({min(x.chunks[a])}): rechunk to larger blocks first")
    return out


def _boundaries(boundary: Any, x: Array) -> list[Any]:
    out = _per_axis("overlap", "reflect" if boundary is None else boundary, x.ndim, "none")
    for b in out:
        if isinstance(b, str) and b not in (*_BOUNDARY_MODES, "none"):
            raise ValueError(f"overlap: boundary {b!r} is not one of 'periodic', 'reflect', "
                             "'nearest', 'none' or a constant")
    return out


def _halo_sides(x: Array, depths: list[tuple[int, int]], bounds: list[Any]
                ) -> list[list[tuple[Any, Any]]]:
    """Per axis, per block: what fills its halo before and after: ``"slab"`` (a
    neighbour's edge: inside the array, or across it when periodic), ``None`` (no halo: a
    width of 0, or boundary "none" at the array's edge), or a boundary mode or constant
    made from the block's own edge."""
    out = []
    for a, (widths, b) in enumerate(zip(depths, bounds, strict=True)):
        k = len(x.chunks[a])
        periodic = isinstance(b, str) and b == "periodic"
        none = isinstance(b, str) and b == "none"
        axis = []
        for j in range(k):
            sides = []
            for side, neighbour in ((0, j - 1), (1, j + 1)):
                if widths[side] == 0:
                    sides.append(None)
                elif 0 <= neighbour < k or periodic:
                    sides.append("slab")
                elif none:
                    sides.append(None)
                else:
                    sides.append(b)
            axis.append(tuple(sides))
        out.append(axis)
    return out


def _assemble(shape: tuple[int, ...], centre: tuple, places: tuple, fills: tuple,
              own: np.ndarray, *slabs: np.ndarray) -> np.ndarray:
    """A block with its halos on every axis, made in one array: the block at ``centre``,
    each neighbour's slab at its place (corners from the diagonal neighbours), then the
    halos at the array's edges from the block's own edge, axis after axis (``fills``:
    (axis, side, width, mode) each), as :func:`overlap` extends one axis after the
    other."""
    out = np.empty(shape, dtype=own.dtype)
    out[centre] = own
    for place, slab in zip(places, slabs, strict=True):
        out[place] = slab
    full = [slice(None)] * out.ndim
    for axis, side, d, how in fills:
        n = out.shape[axis]
        # the d elements next to the halo, on the side of the block's own data
        src = replace_at(full, axis, slice(d, 2 * d) if side == 0 else slice(n - 2 * d, n - d))
        dst = replace_at(full, axis, slice(0, d) if side == 0 else slice(n - d, n))
        edge = out[tuple(src)]
        if isinstance(how, str):
            if how == "reflect":  # mirrored, the edge element included
                index = [slice(None)] * out.ndim
                index[axis] = slice(None, None, -1)
                out[tuple(dst)] = edge[tuple(index)]
            else:  # nearest: the edge element repeated
                index = [slice(None)] * out.ndim
                index[axis] = slice(0, 1) if side == 0 else slice(d - 1, d)
                out[tuple(dst)] = edge[tuple(index)]
        else:
            out[tuple(dst)] = how
    return out


class _HaloPlan:
    """The pieces of the one-step overlap of ``x``: ``depths`` per axis (before, after),
    ``sides[a][j]`` what fills each side of block ``j`` along axis ``a`` (``"slab"``: a
    neighbour's; a boundary fill; None: nothing), the offsets (per axis -1, 0, 1) of the
    neighbours whose slabs fill a block's halo, and the blocks of the result."""

    def __init__(self, x: Array, depths: list[tuple[int, int]], sides: list):
        import itertools

        self.x, self.depths, self.sides = x, depths, sides
        self.grid = x.numblocks
        n = x.ndim
        halo_axes = [a for a in range(n) if any(depths[a])]
        self.offsets = [o for o in itertools.product(*[(-1, 0, 1) if a in halo_axes else (0,)
                                                       for a in range(n)]) if any(o)]
        self.chunks = tuple(tuple(c + sum(self.widths_of(a, j))
                                  for j, c in enumerate(x.chunks[a])) for a in range(n))

    def widths_of(self, a: int, j: int) -> tuple[int, int]:
        """The halo widths (before, after) of block ``j`` along axis ``a``."""
        return tuple(self.depths[a][side] if self.sides[a][j][side] is not None else 0
                     for side in (0, 1))

    def neighbour(self, c: tuple[int, ...], o: tuple[int, ...]) -> tuple[int, ...] | None:
        """The block at offset ``o`` (per axis -1, 0, 1) from ``c`` whose slab fills part
        of c's halo, or None when that part comes from no neighbour."""
        out = []
        for a, (j, step) in enumerate(zip(c, o, strict=True)):
            if step and self.sides[a][j][0 if step < 0 else 1] != "slab":
                return None
            out.append((j + step) % self.grid[a])
        return tuple(out)

    def region(self, s: tuple[int, ...], o: tuple[int, ...]) -> tuple:
        """The part of block ``s`` that the block at offset ``-o`` from it needs: along an
        axis of step -1 (s comes before that block), s's last elements (the other's halo
        before it); along +1, s's first elements (its halo after)."""
        index = []
        for a, (j, step) in enumerate(zip(s, o, strict=True)):
            size = self.x.chunks[a][j]
            if step < 0:
                index.append(slice(size - self.depths[a][0], size))
            elif step > 0:
                index.append(slice(0, self.depths[a][1]))
            else:
                index.append(slice(None))
        return tuple(index)

    def sources_of(self, o: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The blocks whose slab at offset ``o`` some block's halo takes, in order: per
        axis the blocks a step of ``o[a]`` reaches from some block (none when no block
        reaches one: a single block along a non-periodic axis)."""
        import itertools

        axes = []
        for a, step in enumerate(o):
            reach = {(j + step) % self.grid[a] for j in range(self.grid[a])
                     if not step or self.sides[a][j][0 if step < 0 else 1] == "slab"}
            axes.append(sorted(reach))
        return list(itertools.product(*axes))

    def has_slabs(self, o: tuple[int, ...]) -> bool:
        """Whether offset ``o`` has slabs: some block along each of its axes has that
        neighbour."""
        return all(any(self.sides[a][j][0 if step < 0 else 1] == "slab"
                       for j in range(self.grid[a]))
                   for a, step in enumerate(o) if step)

    def slab_collection(self, o: tuple[int, ...], token: str) -> Any:
        """The slabs of offset ``o``: the regions of the :meth:`sources_of` blocks copied
        out. Only the blocks some halo takes have a slab (listed when the whole collection
        is planned; a plan of a few blocks asks for their neighbours' slabs only): planned
        as apply_blocks' are, by the blocks their tasks read."""
        from tilegraph.algebra.blocks import Blocks
        from tilegraph.array.manipulation import take_copy
        from tilegraph.graph.taskgraph import Dep, Lit

        x, key, itemsize = self.x, self.x.collection.key, self.x.itemsize
        label = f"overlap-slab{''.join('-0+'[d + 1] for d in o)}-{token}"

        def task_of(s: tuple[int, ...]) -> tuple:
            return take_copy, [key(s)], (Dep(0), Lit(self.region(s, o)))

        def emit(builder: Any, coords: Any = None) -> None:
            for s in self.sources_of(o) if coords is None else coords:
                cut = self.region(s, o)
                nbytes = itemsize * math.prod(
                    (sl.stop - sl.start) if sl.stop is not None else x.chunks[a][s[a]]
                    for a, sl in enumerate(cut))
                builder.add((label, *s), take_copy, deps=[key(s)], args=(Dep(0), Lit(cut)),
                            kind="rechunk", name="halo", nbytes=nbytes, coords=s)

        return Blocks(label, self.grid, [x.collection], emit,
                      ntasks=lambda: len(self.sources_of(o)), op="apply",
                      spec=(task_of, True, lambda: self.sources_of(o)))

    def task_of(self, c: tuple[int, ...], slabs: dict) -> tuple:
        """The task that joins block ``c`` with its slabs and boundary fills."""
        from tilegraph.graph.taskgraph import Dep, Lit

        x, depths = self.x, self.depths
        shape = tuple(self.chunks[a][j] for a, j in enumerate(c))
        before = [self.widths_of(a, j)[0] for a, j in enumerate(c)]
        centre = tuple(slice(before[a], before[a] + x.chunks[a][j]) for a, j in enumerate(c))
        deps = [x.collection.key(c)]
        places = []
        for o in self.offsets:
            s = self.neighbour(c, o)
            if s is None:
                continue
            deps.append(slabs[o].key(s))
            place = []
            for a, step in enumerate(o):
                if step < 0:
                    place.append(slice(0, before[a]))
                elif step > 0:
                    place.append(slice(shape[a] - depths[a][1], shape[a]))
                else:
                    place.append(centre[a])
            places.append(tuple(place))
        fills = tuple((a, side, depths[a][side], how)
                      for a in range(x.ndim) for side, how in enumerate(self.sides[a][c[a]])
                      if how is not None and not (isinstance(how, str) and how == "slab"))
        args = (Lit(shape), Lit(centre), Lit(tuple(places)), Lit(fills),
                *[Dep(i) for i in range(len(deps))])
        return _assemble, deps, args


def _overlap_all(x: Array, depths: list[tuple[int, int]], bounds: list[Any]) -> Array:
    """:func:`overlap` in one step for every axis: each block's halo regions (faces, and
    corners from the diagonal neighbours) are copied out of the neighbours as slabs, and a
    block is joined with its slabs into one new array in one task, so each element is
    copied once whatever the number of axes, and a block need not stay in memory for its
    neighbours' halos."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.chunks import numblocks
    from tilegraph.array.core import tokenize

    token = tokenize("overlap", x, tuple(depths), tuple(map(str, bounds)))
    plan = _HaloPlan(x, depths, _halo_sides(x, depths, bounds))
    slabs = {o: plan.slab_collection(o, token) for o in plan.offsets if plan.has_slabs(o)}
    chunks, itemsize = plan.chunks, x.itemsize
    blocks = apply_blocks(
        f"overlap-{token}", numblocks(chunks), [x.collection, *slabs.values()],
        lambda c: plan.task_of(c, slabs), kind="rechunk", name="overlap",
        nbytes=lambda c: itemsize * math.prod(chunks[a][j] for a, j in enumerate(c)))
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, x.dtype)


def overlap(x: Any, depth: Any, boundary: Any = None) -> Array:
    """Each block extended by ``depth`` elements of its neighbours on every side (dask's
    ``overlap``); at the array's edges by ``boundary``: ``"periodic"`` (the other end),
    ``"reflect"`` (mirrored, the edge element included), ``"nearest"`` (the edge element
    repeated), a constant, or ``"none"`` (no extension there). ``depth`` and ``boundary``
    may be one value, a tuple per axis or a dict {axis: value}; a depth in a dict may be a
    ``(before, after)`` pair (``{0: (2, 0)}``: two elements before each block along axis 0,
    none after). The result is what extending one axis after the other gives (corners
    come from the diagonal neighbours, and at the array's edges from the halos already
    made along earlier axes). Every block's edge slabs are copied out of it, and a block
    is joined with all its neighbours' slabs in one task, one copy of each element, so a
    block need not stay in memory for its neighbours' halos."""
    x = asarray(x)
    depths = _depths(depth, x)
    bounds = _boundaries(boundary, x)
    if not any(any(w) for w in depths):
        return x
    return _overlap_all(x, depths, bounds)


def trim_internal(x: Any, depth: Any, boundary: Any = None, *, original: Any = None
                  ) -> Array:
    """The inverse of :func:`overlap`: ``depth`` elements cut from every side of every block
    (none at the array's edges where ``boundary`` was ``"none"``)."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.array.chunks import numblocks
    from tilegraph.array.core import tokenize
    from tilegraph.array.manipulation import take_view
    from tilegraph.graph.taskgraph import Dep, Lit

    x = asarray(x)
    depths = _depth_pairs("trim_internal", depth, x.ndim)
    bounds = _boundaries(boundary, x)
    cuts = []  # per axis, per block: (cut before, cut after)
    for axis, ((d0, d1), b) in enumerate(zip(depths, bounds, strict=True)):
        none = isinstance(b, str) and b == "none"
        k = len(x.chunks[axis])
        axis_cuts = []
        for j, c in enumerate(x.chunks[axis]):
            before = 0 if (none and j == 0) else d0
            after = 0 if (none and j == k - 1) else d1
            if before + after > c:
                raise ValueError(f"trim_internal: a block of {c} on axis {axis} is smaller "
                                 f"than the {before + after} elements to cut")
            axis_cuts.append((before, after))
        cuts.append(axis_cuts)
    chunks = tuple(tuple(c - bf - af for c, (bf, af) in zip(x.chunks[a], cuts[a],
                                                             strict=True))
                   for a in range(x.ndim))
    key = x.collection.key

    def task_of(coord: tuple[int, ...]) -> tuple:
        index = tuple(slice(cuts[a][j][0], x.chunks[a][j] - cuts[a][j][1])
                      for a, j in enumerate(coord))
        return take_view, [key(coord)], (Dep(0), Lit(index))

    token = tokenize("trim_internal", x, tuple(depths), tuple(map(str, bounds)))
    blocks = apply_blocks(f"trim-{token}", numblocks(chunks), [x.collection], task_of,
                          kind="getitem", name="trim",
                          nbytes=lambda c: x.itemsize * math.prod(
                              chunks[a][j] for a, j in enumerate(c)))
    return Array(blocks, tuple(sum(c) for c in chunks), chunks, x.dtype)


# a chain of stencil steps is made one step while the halo of all of them is at
# most this fraction of the largest block along each axis
_CHAIN_HALO = 0.25


class _Chain:
    """Stencil steps applied one after the other to a block that has the halo of all of
    them: each step's function, then its own depth cut off every side that has a halo (a
    view), so the next step sees its own halo. The result is the block without halo."""

    __slots__ = ("__name__", "steps")

    def __init__(self, steps: tuple) -> None:
        self.steps = steps  # (func, kwargs, depth pairs) per step, first first
        names = [getattr(f, "__name__", "map_overlap") for f, _, _ in steps]
        self.__name__ = (names[0] if len(set(names)) == 1 else "+".join(names)) + (
            f"*{len(names)}" if len(names) > 1 and len(set(names)) == 1 else "")

    def __call__(self, block: np.ndarray, edges: tuple) -> np.ndarray:
        """``edges``: per axis, whether the block has no halo before and after it (it is at
        the array's edge, with boundary "none")."""
        for func, kwargs, depths in self.steps:
            block = func(block, **kwargs)
            shape = np.shape(block)
            block = block[tuple(
                slice(0 if e0 else b, n - (0 if e1 else e))
                for n, (b, e), (e0, e1) in zip(shape, depths, edges, strict=True))]
        return block

    def __reduce__(self) -> tuple:
        return _Chain, (self.steps,)


class _StencilStep:
    """The rewrite of a map_overlap's result whose halos are periodic or none (see
    :class:`~tilegraph.algebra.blocks.Blocks`): when its input is itself such a result
    that nothing else in the plan reads, with the same boundaries, the two become one
    step, applied to the first input extended by the depth of both (so no intermediate
    array is made, and no halo is exchanged between the steps)."""

    __slots__ = ("bounds", "dtype", "label", "readers", "source", "steps")

    def __init__(self, source: Array, steps: tuple, bounds: tuple, label: str,
                 dtype: np.dtype, readers: frozenset[str]) -> None:
        self.source = source
        self.steps = steps
        self.bounds = bounds  # per axis "periodic" or "none" (None: no step has a halo)
        self.label = label
        self.dtype = dtype
        self.readers = readers  # the step's collections that read ``source``

    def __call__(self, consumers: dict, replaced: dict) -> Any:
        src = self.source.collection
        prev = replaced.get(src.name, src).rewrite
        if not isinstance(prev, _StencilStep) or consumers.get(src.name) != self.readers:
            return None  # not a stencil step, or its result is read elsewhere
        bounds = []
        for mine, theirs in zip(self.bounds, prev.bounds, strict=True):
            if mine is not None and theirs is not None and mine != theirs:
                return None
            bounds.append(mine if mine is not None else theirs)
        steps = prev.steps + self.steps
        first = prev.source
        total = _total_depths(steps, first.ndim)
        for a, (before, after) in enumerate(total):
            sizes = first.chunks[a] or (0,)
            # a halo comes from the next block only; the work it adds is that of the
            # halo's share of a (full) block
            if max(before, after) > min(sizes) or before + after > _CHAIN_HALO * max(sizes):
                return None
        return _stencil_chain(first, steps, tuple(bounds), self.label, self.dtype).collection


def _chain_bounds(depths: list[tuple[int, int]], bounds: list[Any]) -> tuple | None:
    """Per axis the boundary of a stencil step that can be chained ("periodic"; None on an
    axis without halo), or None when it cannot (no halo at all, or another boundary on an
    axis with one). With "none" the function's results next to the array's edges are kept,
    and a function may make them from the far side of what it is given (``np.roll``), so
    a chain, which gives it more, could change them: such steps are not chained."""
    out = []
    for d, b in zip(depths, bounds, strict=True):
        if not any(d):
            out.append(None)
        elif isinstance(b, str) and b == "periodic":
            out.append(b)
        else:
            return None
    return tuple(out) if any(b is not None for b in out) else None


def _total_depths(steps: tuple, ndim: int) -> list[tuple[int, int]]:
    return [(sum(d[a][0] for _, _, d in steps), sum(d[a][1] for _, _, d in steps))
            for a in range(ndim)]


def _stencil_chain(x: Array, steps: tuple, bounds: tuple, label: str, dtype: np.dtype
                   ) -> Array:
    """Stencil ``steps`` applied to ``x`` as one map over its blocks extended by the depth
    of all of them (:class:`_Chain`), with ``bounds`` ("periodic" or "none" per axis) at
    the array's edges, named ``label``."""
    from tilegraph.algebra.blocks import apply_blocks
    from tilegraph.graph.taskgraph import Dep, Lit

    ov = _overlap_all(x, _total_depths(steps, x.ndim),
                      ["periodic" if b is None else b for b in bounds])
    chain = _Chain(steps)
    itemsize = dtype.itemsize
    chunks = x.chunks
    grid = x.numblocks
    key = ov.collection.key
    # while a step runs, the previous step's result is held beside its own result and
    # temporaries (about one block, as for any user function), each the size of the block
    # with its halo
    held = 2 if len(steps) == 1 else 3

    def task_of(c: tuple[int, ...]) -> tuple:
        edges = tuple((b == "none" and j == 0, b == "none" and j == g - 1)
                      for b, j, g in zip(bounds, c, grid, strict=True))
        return chain, [key(c)], (Dep(0), Lit(edges))

    blocks = apply_blocks(
        label, grid, [ov.collection], task_of, kind="map", name=chain.__name__,
        nbytes=lambda c: itemsize * math.prod(chunks[a][j] for a, j in enumerate(c)),
        working=lambda c: held * itemsize * math.prod(ov.chunks[a][j]
                                                      for a, j in enumerate(c)))
    readers = frozenset(c.name for c in (ov.collection, *ov.collection.deps)
                        if any(d.name == x.collection.name for d in c.deps))
    blocks.rewrite = _StencilStep(x, steps, bounds, label, dtype, readers)
    return Array(blocks, x.shape, chunks, dtype)


def map_overlap(func: Callable, *args: Any, depth: Any = None, boundary: Any = None,
                trim: bool = True, dtype: Any = None, name: str | None = None,
                **kwargs: Any) -> Array:
    """dask's ``map_overlap``: ``func`` applied to every block extended by ``depth``
    neighbouring elements (see :func:`overlap` for ``depth`` and ``boundary``; as in dask,
    the array's own edges are not extended unless ``boundary`` says how), the extension
    cut off again afterwards when ``trim`` (so ``func`` must keep its block's shape).
    Several arrays are aligned to the first one's blocks first. The halo of a block is
    read from the neighbours' edge slabs only, and is made inside the task that applies
    ``func`` where fusion allows it.

    Periodic stencils are chained: when the input of a ``map_overlap`` (one array,
    ``trim=True``, boundaries "periodic") is itself the result of one that nothing else in
    the plan reads, both functions run in one task on the first
    input extended by the depth of both (``x.map_overlap(f, depth=1, boundary=
    "periodic")`` ten times reads each block and a halo of 10 once, and makes no
    intermediate array). This relies on what ``trim`` already assumes: ``func``'s result
    at a distance of at least ``depth`` from the edge of what it is given depends only on
    the elements within ``depth``, not on the block's size or place. A chain stops where
    its halo would exceed a quarter of the largest block along an axis (or the smallest
    block). To keep two steps apart, ask for the first one in the same ``compute`` as a
    result too, or give ``trim=False`` and call
    :func:`trim_internal` yourself. A ``func`` that names ``block_id`` or ``block_info``
    gets them as from :func:`tilegraph.map_blocks`, describing the extended blocks (such
    a step is not chained).

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.array([1.0, np.nan, np.nan, 4.0, np.nan]), chunks=2)
    >>> def ffill(b):
    ...     keep = np.where(np.isnan(b), 0, np.arange(b.size))
    ...     return b[np.maximum.accumulate(keep)]
    >>> # one element before each block: a forward fill of at most one step
    >>> x.map_overlap(ffill, depth={0: (1, 0)}).compute()
    array([ 1.,  1., nan,  4.,  4.])
    """
    from tilegraph.array.elementwise import map_blocks

    if not callable(func):
        raise TypeError(f"map_overlap: {func!r} is not callable")
    for dask_only in ("align_arrays", "allow_rechunk", "meta"):  # (arrays are always aligned)
        kwargs.pop(dask_only, None)
    arrays = [a for a in args if isinstance(a, Array) or isinstance(a, np.ndarray)]
    if not arrays:
        raise TypeError("map_overlap: give at least one array argument")
    first = asarray(arrays[0])
    if boundary is None:  # dask's map_overlap leaves the array's edges alone by default
        boundary = "none"
    depths = _depths(depth, first)
    bounds = _boundaries(boundary, first)
    chain_bounds = _chain_bounds(depths, bounds)
    from tilegraph.array.elementwise import takes_keyword

    per_block = takes_keyword(func, "block_id") or takes_keyword(func, "block_info")
    if trim and len(args) == 1 and not {"chunks", "drop_axis", "new_axis"} & kwargs.keys() \
            and chain_bounds is not None and not per_block:
        from tilegraph.array.core import tokenize
        from tilegraph.array.elementwise import result_dtype

        if dtype is None:
            try:
                dtype = result_dtype(func, [first], kwargs)
            except Exception:
                dtype = first.dtype
        dtype = np.dtype(dtype)
        op = name or getattr(func, "__name__", "map_overlap")
        label = f"{op}-{tokenize('map_overlap', func, first, kwargs, depths, dtype)}"
        return _stencil_chain(first, ((func, kwargs, tuple(depths)),), chain_bounds, label,
                              dtype)
    extended = []
    for a in args:
        if isinstance(a, (Array, np.ndarray)):
            a = asarray(a)
            if a.shape != first.shape:
                raise ValueError(f"map_overlap: arrays of shapes {first.shape} and {a.shape} "
                                 "must have the same shape")
            if a.chunks != first.chunks:
                a = a.rechunk(first.chunks)
            a = overlap(a, depth, boundary)
        extended.append(a)
    out = map_blocks(func, *extended, dtype=dtype, name=name or getattr(
        func, "__name__", "map_overlap"), **kwargs)
    if not trim:
        return out
    return trim_internal(out, depth, boundary)
