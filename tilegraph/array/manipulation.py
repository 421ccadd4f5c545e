"""Changing the shape or the blocks of an array: transpose, reshape, rechunk, concatenate,
stack. Block transposition, concatenation and stacking only rearrange existing blocks (no
tasks, nothing copied); reshape is blockwise after the fewest rechunks that make it so."""

from __future__ import annotations

import itertools
import math
import operator
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks, RunBlocks, apply_blocks, remap_by
from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.array.chunks import (
    Chunks,
    block_shape,
    blocks_bytes,
    common_refinement,
    normalize_chunks,
    numblocks,
    offsets,
)
from tilegraph.array.core import Array, ViewBlocks, asarray, dense_only, from_numpy, tokenize
from tilegraph.array.rechunking import RechunkPlan, least_holds, plan_rechunk, smallest_limit
from tilegraph.graph.taskgraph import Call, Dep, Lit
from tilegraph.util import cores, human, parse_bytes


def _block_nbytes(chunks: Chunks, itemsize: int):
    return lambda c: itemsize * math.prod(chunks[a][k] for a, k in enumerate(c))


def transpose(x: Array, axes: Sequence[int] | None = None) -> Array:
    """Permute the axes (reversed by default); each block is transposed as a view."""
    x = asarray(x)
    nd = x.ndim
    if axes is None:
        axes = tuple(range(nd))[::-1]
    axes = tuple(operator.index(a) for a in axes)
    if len(axes) != nd:
        raise ValueError(f"transpose: axes {axes} do not match the {nd} axes of an array of "
                         f"shape {x.shape}; give one entry per axis")
    for a in axes:
        if not -nd <= a < nd:
            raise np.exceptions.AxisError(
                f"transpose: axis {a} is out of bounds for an array of shape {x.shape} "
                f"({nd} axes)")
    if sorted(a % nd for a in axes) != list(range(nd)):
        raise ValueError(f"transpose: axes {axes} repeat an axis; they must be a permutation "
                         f"of the {nd} axes of an array of shape {x.shape}")
    axes = tuple(a % nd for a in axes)
    if axes == tuple(range(nd)):
        return x
    chunks = tuple(x.chunks[a] for a in axes)
    inverse = np.argsort(axes)

    def index(c: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(c[i] for i in inverse)

    blocks = _map_blocks(
        f"transpose-{tokenize('transpose', x, axes)}", np.transpose, [x.collection],
        numblocks(chunks), [index], args=(Dep(0), axes), kind="transpose", name="transpose",
        nbytes=_block_nbytes(chunks, x.itemsize),
    )
    return Array(blocks, tuple(x.shape[a] for a in axes), chunks, x.dtype)


def swapaxes(x: Array, a: int, b: int) -> Array:
    """Exchange two axes."""
    x = asarray(x)
    nd = x.ndim
    a, b = operator.index(a), operator.index(b)
    for ax in (a, b):
        if not -nd <= ax < nd:
            raise np.exceptions.AxisError(
                f"swapaxes: axis {ax} is out of bounds for an array of shape {x.shape}")
    perm = list(range(nd))
    perm[a % nd], perm[b % nd] = perm[b % nd], perm[a % nd]
    return transpose(x, perm)


def _copy_pieces(shape: tuple[int, ...], dtype: np.dtype, placements: tuple,
                 *blocks: np.ndarray) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    for (dst, src), block in zip(placements, blocks, strict=True):
        out[dst] = block[src]
    return out


def _ufunc_over_pieces(ufunc: np.ufunc, k: int, others: tuple, shape: tuple[int, ...],
                       dtype: np.dtype, placements: tuple, *blocks: np.ndarray) -> np.ndarray:
    """``ufunc(*others with the joined block at position k)`` computed piece by piece into
    one output: the joined block is never made (a ufunc over a rechunked block reads the
    old blocks' pieces where they lie)."""
    others = list(others)
    arrays = [a for a in others if isinstance(a, np.ndarray)]
    try:
        full = np.broadcast_shapes(shape, *(a.shape for a in arrays))
    except ValueError:
        full = None
    if full != tuple(shape):  # the other operands make a larger result: join first
        return ufunc(*others[:k], _copy_pieces(shape, dtype, placements, *blocks),
                     *others[k:])
    samples = [np.empty((0,), a.dtype) if isinstance(a, np.ndarray) else a for a in others]
    out_dtype = ufunc(*samples[:k], np.empty((0,), dtype), *samples[k:]).dtype
    out = np.empty(shape, dtype=out_dtype)
    views = [np.broadcast_to(a, shape) if isinstance(a, np.ndarray) else a for a in others]
    for (dst, src), block in zip(placements, blocks, strict=True):
        parts = [v[dst] if isinstance(v, np.ndarray) else v for v in views]
        ufunc(*parts[:k], block[src], *parts[k:], out=out[dst])
    return out


def _fold_into_ufunc(ufunc: np.ufunc, k: int, args: tuple, inner: Any) -> Call | None:
    """Fusion's fold of a joined block (``_copy_pieces``) into the ufunc that reads it."""
    if ufunc.nout != 1 or len(args) != ufunc.nin:
        return None
    others = tuple(a for i, a in enumerate(args) if i != k)
    return Call(_ufunc_over_pieces, (ufunc, k, others, *inner.args))


_copy_pieces.fold_into = _fold_into_ufunc
_ufunc_over_pieces.fresh_result = True


def axis_pieces(old: tuple[int, ...], new: tuple[int, ...]
                ) -> list[list[tuple[int, slice, slice]]]:
    """For each new block along an axis: its pieces as (old block, slice in the old block,
    slice in the new block)."""
    old_off, new_off = offsets(old), offsets(new)
    out = []
    for k in range(len(new)):
        lo, hi = new_off[k], new_off[k + 1]
        b = max(0, min(len(old) - 1, bisect_right(old_off, lo) - 1))
        if hi == lo:
            out.append([(b, slice(0, 0), slice(0, 0))])
            continue
        pieces = []
        while b < len(old) and old_off[b] < hi:
            s0, s1 = max(lo, old_off[b]), min(hi, old_off[b + 1])
            if s1 > s0:
                pieces.append((b, slice(s0 - old_off[b], s1 - old_off[b]),
                               slice(s0 - lo, s1 - lo)))
            b += 1
        out.append(pieces)
    return out


RECHUNK_TASK_CAP = 256 * 2**20  # the default per-task budget of a rechunk, at most


def max_mem_bytes(max_mem: Any) -> int | None:
    """A rechunk's ``max_mem`` in bytes, checked (``None``: not given)."""
    if max_mem is None:
        return None
    if isinstance(max_mem, bool):
        raise TypeError(f"rechunk: max_mem must be a size in bytes or a string such as "
                        f"'256MB', got {max_mem!r}")
    value = parse_bytes(max_mem) if isinstance(max_mem, str) else max_mem
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"rechunk: max_mem must be a size in bytes or a string such as "
                        f"'256MB', got {max_mem!r}")
    if value <= 0:
        raise ValueError(f"rechunk: max_mem must be positive, got {max_mem!r}")
    return int(value)


def _task_budget(max_mem: int | None, memory: int | None, workers: int = 1) -> int:
    """Bytes one rechunk task should hold (its inputs, output and temporaries):
    ``max_mem`` when given, else ``memory`` (the memory limit each process of the run
    enforces) shared by the ``workers`` of a process with as much again for the blocks
    they make, at most ``RECHUNK_TASK_CAP``; ``RECHUNK_TASK_CAP`` for a plan made for no
    run."""
    if max_mem is not None:
        return max_mem
    if memory is None:
        return RECHUNK_TASK_CAP
    return max(1, min(memory // (2 * max(1, workers)), RECHUNK_TASK_CAP))


def _workers(options: Any) -> int:
    """The workers each process of a run of ``options`` runs tasks on: the ones asked
    for, else one per core (the threads backend's default, and a bound for the others);
    one for a plan made for no run."""
    if options is None:
        return 1
    return options.workers or cores()


def rechunk(x: Array, chunks: Any, *, max_mem: Any = None) -> Array:
    """The same array with new block sizes. A new block inside one old block is a view;
    one spanning several is assembled from their pieces (or is a view as well, when the
    blocks are views of one NumPy array). ``chunks`` as dask's ``rechunk`` reads them: an
    axis not named in a dict, or ``None`` in a tuple, keeps its blocks, and ``"auto"``
    axes are sized from the current blocks (dask's rules, so dask's blocks).

    A rechunk whose tasks would hold more than its budget is planned in stages
    (:mod:`tilegraph.array.rechunking`): read and write groups, their pieces in memory or
    in an intermediate store on disk (in the run's ``spill_dir``), and intermediate blocks
    when the pieces would be tiny, so that an all-to-all rechunk (time blocks to space
    blocks) runs under any memory limit a few blocks large. The budget is ``max_mem``
    when given, else the run's memory limit per process shared by its workers, with room
    for what they make (at most 256 MiB a task); when no plan fits it, the plan fits the
    limit itself. These choices are made when the graph is built for a run, for the limit
    each of its processes enforces (an MPI rank's share of the host by default), so
    ``compute(memory_limit=...)`` decides them; a limit under which no plan fits is refused
    then, naming the smallest that works. An explicit ``max_mem`` that even staged tasks
    cannot meet (blocks larger than it) is refused here, with the smallest that would."""
    x = asarray(x)
    if isinstance(chunks, dict):  # axes not named keep their blocks
        chunks = tuple(chunks.get(a, chunks.get(a - x.ndim, x.chunks[a]))
                       for a in range(x.ndim))
    if isinstance(chunks, (tuple, list)) and len(chunks) == x.ndim:  # None keeps them too
        chunks = tuple(x.chunks[a] if c is None else c for a, c in enumerate(chunks))
    # "auto" axes grow or shrink from the current blocks, as dask's rechunk does
    new = normalize_chunks(chunks, x.shape, x.dtype, previous_chunks=x.chunks)
    given = max_mem_bytes(max_mem)
    if new == x.chunks:
        return x
    if type(x.collection) is ViewBlocks and type(x) is Array:
        # blocks that are views of one NumPy array: any new block is a view too
        return from_numpy(x.collection.array, chunks=new)
    if given is not None:
        need = least_holds(x.chunks, new, x.itemsize)
        if need > given:
            raise ValueError(
                f"rechunk: blocks of {human(blocks_bytes(x.chunks, x.dtype))} into blocks of "
                f"{human(blocks_bytes(new, x.dtype))} need tasks of about {human(need)}, "
                f"more than max_mem={human(given)}: give a larger max_mem (at least "
                f"{human(need)}) or rechunk from smaller blocks")
    if all(len(pieces) == 1 for o, n in zip(x.chunks, new, strict=True)
           for pieces in axis_pieces(o, n)):
        # every new block inside one old block: staging cannot make a task smaller
        return _rechunk_stage(x, new, "rechunk")
    name = f"rechunk-{tokenize('rechunk', x, new, given)}"
    return Array(RechunkBlocks(name, x.collection, x.shape, x.chunks, x.dtype, new, given),
                 x.shape, new, x.dtype)


class RechunkBlocks(RunBlocks):
    """A rechunk of the array of ``source`` blocks (``shape``, ``chunks``, ``dtype``) to
    ``new`` blocks whose stages are chosen for the run it is lowered for
    (:class:`~tilegraph.algebra.blocks.RunBlocks`) by
    :func:`~tilegraph.array.rechunking.plan_rechunk`: for the budget (``max_mem``, else the
    run's ``memory_limit`` shared by the workers of a process, at most
    ``RECHUNK_TASK_CAP``), that limit and the run's ``spill_dir``, where the intermediate
    store goes. Lowered for no run, it is planned for unbounded memory (tasks of at most
    ``RECHUNK_TASK_CAP``, pieces in memory). Its blocks are the last stage's tasks, named
    ``name``. The plans made so far are kept (not pickled)."""

    __slots__ = ("_plans", "chunks", "dtype", "max_mem", "new", "shape")

    def __init__(self, name: str, source: Blocks, shape: tuple[int, ...], chunks: Chunks,
                 dtype: np.dtype, new: Chunks, max_mem: int | None):
        super().__init__(name, numblocks(new), (source,))
        self.shape = shape
        self.chunks = chunks
        self.dtype = dtype
        self.new = new
        self.max_mem = max_mem
        self._plans: dict[tuple, Array] = {}

    def __reduce__(self) -> tuple:
        return (RechunkBlocks, (self.name, self.deps[0], self.shape, self.chunks, self.dtype,
                                self.new, self.max_mem))

    @property
    def source(self) -> Array:
        """The array rechunked."""
        return Array(self.deps[0], self.shape, self.chunks, self.dtype)

    def plan(self, options: Any) -> RechunkPlan:
        """The stages chosen for a run of ``options`` (``None``: for no run). A memory
        limit under which no plan fits is refused (:class:`MemoryLimitError` naming the
        smallest limit that works)."""
        memory = None if options is None else options.memory_limit
        workers = _workers(options)
        budget = _task_budget(self.max_mem, memory, workers)
        limit = self.max_mem if self.max_mem is not None else memory
        itemsize = np.dtype(self.dtype).itemsize
        # blocks too large for the budget of a task: one stage of larger tasks that fit
        # the run's limit (fewer at once) may cost less than the disk (not under max_mem)
        plan = plan_rechunk(self.chunks, self.new, itemsize, budget, limit=limit,
                            memory=memory, workers=workers, spare_disk=self.max_mem is None)
        if limit is not None and plan.holds > limit:
            from tilegraph.runtime.memory import MemoryLimitError

            if self.max_mem is not None:
                what = "max_mem"
                least = least_holds(self.chunks, self.new, itemsize, memory=memory)
            else:
                what, least = "memory_limit", smallest_limit(self.chunks, self.new, itemsize)
            raise MemoryLimitError(
                f"rechunk of a {self.shape} {np.dtype(self.dtype)} array from blocks of "
                f"{human(blocks_bytes(self.chunks, self.dtype))} into blocks of "
                f"{human(blocks_bytes(self.new, self.dtype))}: its tasks need about "
                f"{human(plan.holds)} (a block, a piece in flight and the intermediate "
                f"store's handles), more than {what}={human(limit)} per process: give a "
                f"{what} of at least {human(least)} ({least} bytes), or rechunk from or "
                "to smaller blocks")
        return plan

    def stages(self, options: Any) -> Array:
        """The plan for a run of ``options`` (``None``: for no run), as the Array of its
        last stage, whose collections lead back to the source's (made once per budget,
        memory limit, workers and directory)."""
        memory = None if options is None else options.memory_limit
        spill_dir = None if options is None else options.spill_dir
        key = (memory, _workers(options), spill_dir)
        built = self._plans.get(key)
        if built is None:
            built = self._plans[key] = self._build(self.plan(options).stages, spill_dir)
        return built

    def _build(self, stages: Sequence[tuple[str, Chunks]], spill_dir: str | None) -> Array:
        y = self.source
        for k, (name, chunks) in enumerate(stages):
            label = self.name if k == len(stages) - 1 else None
            y = (_rechunk_through_store(y, chunks, spill_dir, label) if name == "rechunk-store"
                 else _rechunk_stage(y, chunks, name, label))
        return y

    def coarser(self, options: Any) -> Array | None:
        """For a run of ``options``: when its last stage only cuts the blocks of the stage
        before (write groups) into the new blocks, that stage's Array (a writer may store
        those larger blocks instead), else ``None``."""
        last = self.stages(options).collection
        return last.coarser if isinstance(last, SplitBlocks) else None

    def _collections(self, options: Any) -> list[Blocks]:
        return _new_collections(self.stages(options).collection, self.deps[0])

    def expand(self, options: Any = None) -> list[Blocks]:
        """Its stages for a run of ``options``, each planned on its own (the blocks a
        slice of the result reads, and the stages' blocks those read)."""
        return self._collections(options)

    def lower_into(self, builder: Any, options: Any = None) -> None:
        for coll in self._collections(options):
            coll.lower_into(builder, options)

    def count(self, options: Any = None) -> int:
        return sum(coll.count(options) for coll in self._collections(options))


def _new_collections(top: Blocks, base: Blocks) -> list[Blocks]:
    """The collections between ``base`` (excluded) and ``top``, inputs first (a collection
    is known by its name)."""
    out: list[Blocks] = []
    node = top
    while node.name != base.name:
        out.append(node)
        (node,) = [d for d in node.deps if d.name != base.name] or [base]
    return out[::-1]


def _rechunk_through_store(x: Array, new: Chunks, parent: str | None,
                           label: str | None = None) -> Array:
    """A stage through the intermediate store on disk (:mod:`tilegraph.io.staging`), in a
    directory under ``parent`` (the run's ``spill_dir``; ``None``: the temp directory): one
    ``rechunk-store`` task per block of ``x`` writes its pieces (where the new blocks cut it)
    to a file and returns a handle of ``HANDLE_BYTES``; one ``rechunk-load`` task per new
    block (named ``label``) reads its pieces from the handles of the blocks it overlaps, at
    the offsets the plan knows (:func:`~tilegraph.io.staging.piece_offsets`). Each holds
    its block and a slab of at most ``STAGE_BUFFER`` bytes besides."""
    from tilegraph.io.staging import (
        HANDLE_BYTES,
        copy_bytes,
        load_pieces,
        piece_offsets,
        stage_pieces,
    )

    old = x.chunks
    per_axis = [axis_pieces(o, n) for o, n in zip(old, new, strict=True)]
    # per axis and old block: the slices the new blocks cut from it, in order (its pieces'
    # order in its file), and where each (old block, new block) piece stands in that list
    cuts: list[list[list[slice]]] = [[[] for _ in o] for o in old]
    where: list[dict[tuple[int, int], int]] = [{} for _ in old]
    for a, axis in enumerate(per_axis):
        for k, pieces in enumerate(axis):
            for b, src, _ in pieces:
                where[a][b, k] = len(cuts[a][b])
                cuts[a][b].append(src)
    lengths = [[tuple(s.stop - s.start for s in block) for block in axis] for axis in cuts]
    token = tokenize("rechunk-store", x, new, parent)
    xkey = x.collection.key
    itemsize = x.itemsize
    starts: dict[tuple[int, ...], np.ndarray] = {}

    def store_of(coord: tuple[int, ...]) -> tuple:
        slices = tuple(itertools.product(*(cuts[a][b] for a, b in enumerate(coord))))
        return stage_pieces, [xkey(coord)], (Dep(0), Lit(slices), parent)

    def store_working(coord: tuple[int, ...]) -> int:
        return copy_bytes(itemsize * math.prod(max(lengths[a][b])
                                               for a, b in enumerate(coord)))

    stored = apply_blocks(
        f"rechunk-store-{token}", numblocks(old), [x.collection], store_of, kind="stage",
        name="rechunk-store", working=store_working, nbytes=lambda c: HANDLE_BYTES)
    skey = stored.key

    def offsets_of(block: tuple[int, ...]) -> np.ndarray:
        got = starts.get(block)
        if got is None:
            got = starts[block] = piece_offsets([lengths[a][b] for a, b in enumerate(block)])
        return got

    def load_of(coord: tuple[int, ...]) -> tuple:
        keys, placements = [], []
        for combo in itertools.product(*(per_axis[a][k] for a, k in enumerate(coord))):
            block = tuple(p[0] for p in combo)
            index = tuple(where[a][p[0], coord[a]] for a, p in enumerate(combo))
            shape = tuple(p[2].stop - p[2].start for p in combo)
            placements.append((len(keys), int(offsets_of(block)[index]) * itemsize, shape,
                               tuple(p[2] for p in combo)))
            keys.append(skey(block))
        return (load_pieces, keys, (block_shape(new, coord), x.dtype, Lit(tuple(placements)),
                                    *[Dep(i) for i in range(len(keys))]))

    def load_working(coord: tuple[int, ...]) -> int:
        piece = max((math.prod(p[2].stop - p[2].start for p in combo)
                     for combo in itertools.product(
                         *(per_axis[a][k] for a, k in enumerate(coord)))), default=0)
        return copy_bytes(itemsize * piece) + itemsize * math.prod(
            new[a][k] for a, k in enumerate(coord))

    blocks = apply_blocks(label or f"rechunk-load-{token}", numblocks(new), [stored],
                          load_of, kind="rechunk", name="rechunk-load",
                          nbytes=_block_nbytes(new, itemsize), working=load_working)
    return Array(blocks, x.shape, new, x.dtype)


def _rechunk_stage(x: Array, new: Chunks, name: str, label: str | None = None) -> Array:
    """One stage: each new block a view of the old block holding it, or assembled from the
    pieces of the old blocks it overlaps (its tasks named ``label``, by default from the
    stage and its input). A split stage copies its views, so that the old block is
    released once cut."""
    per_axis = [axis_pieces(o, n) for o, n in zip(x.chunks, new, strict=True)]
    token = tokenize(name, x, new)
    xkey = x.collection.key
    dtype = x.dtype
    take = take_copy if name == "rechunk-split" else take_view

    def task_of(coord: tuple[int, ...]) -> tuple:
        axis_lists = [per_axis[a][k] for a, k in enumerate(coord)]
        combos = list(np.ndindex(*[len(lst) for lst in axis_lists]))
        if len(combos) == 1:
            parts = [axis_lists[a][0] for a in range(len(coord))]
            return (take, [xkey(tuple(p[0] for p in parts))],
                    (Dep(0), Lit(tuple(p[1] for p in parts))))
        keys, placements = [], []
        for combo in combos:
            parts = [axis_lists[a][i] for a, i in enumerate(combo)]
            keys.append(xkey(tuple(p[0] for p in parts)))
            placements.append((tuple(p[2] for p in parts), tuple(p[1] for p in parts)))
        unique = list(dict.fromkeys(keys))
        slot = {k: i for i, k in enumerate(unique)}
        args = (block_shape(new, coord), dtype, Lit(tuple(placements)),
                *[Dep(slot[k]) for k in keys])
        return _copy_pieces, unique, args

    blocks = apply_blocks(label or f"{name}-{token}", numblocks(new), [x.collection], task_of,
                          kind="rechunk", name=name,
                          nbytes=_block_nbytes(new, x.itemsize))
    if take is take_view and type(x) is Array and all(
            len(pieces) == 1 for axis in per_axis for pieces in axis):
        blocks = SplitBlocks(blocks, x)
    return Array(blocks, x.shape, new, x.dtype)


class SplitBlocks(Blocks):
    """The blocks of a rechunk to finer blocks: each a view of one block of ``coarser``
    (an Array with the same values). A writer may store ``coarser``'s blocks instead, one
    region each, rather than the many small blocks cut from them."""

    __slots__ = ("coarser",)

    def __init__(self, blocks: Blocks, coarser: Array):
        super().__init__(blocks.name, blocks.grid, blocks.deps, blocks.emit)
        self.with_rule_of(blocks)
        self.coarser = coarser


def take_copy(block: np.ndarray, index: tuple) -> np.ndarray:
    """A copy of ``block[index]`` (the piece owns its memory, so the block can be freed)."""
    return np.array(block[index], copy=True)


def take_view(block: np.ndarray, index: tuple) -> np.ndarray:
    """``block[index]``, a view of the block where NumPy makes one."""
    return block[index]


def reshape_block(block: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``block`` reshaped to ``shape``."""
    return block.reshape(shape)


def normalize_shape(shape: Any, size: int, old: tuple[int, ...]) -> tuple[int, ...]:
    """The new shape of a reshape of an array of ``size`` elements and shape ``old``: a
    tuple of ints with a ``-1`` worked out; a TypeError or ValueError naming the shapes
    otherwise."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"reshape: the new shape {shape!r} for an array of shape {old} must "
                        "be an integer or a sequence of integers") from None
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in shape):
        raise ValueError(f"reshape: cannot reshape array of shape {old} into shape {shape}: "
                         "a shape may hold at most one -1 and no other negative length")
    if unknown:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape array of shape {old} (size {size}) "
                             f"into shape {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size:
        raise ValueError(f"reshape: cannot reshape array of shape {old} (size {size}) into "
                         f"shape {shape}")
    return shape


def reshape(x: Array, shape: Any, order: str = "C") -> Array:
    """Row-major reshape. Leading axes that keep their length keep their blocks; an axis
    split in two whose blocks each lie within one row of the inner axis, cut the same way
    in every row (one-row blocks of ``(T, X)`` reshaped to ``(T // g, g, X)``), keeps its
    blocks, each a view; otherwise the rest is cut at boundaries that are whole rows of both
    the old and the new trailing shape, so every block reshapes on its own."""
    x = asarray(x)
    if order != "C":
        raise ValueError(f"reshape: only order='C' is supported, got {order!r}")
    new_shape = normalize_shape(shape, x.size, x.shape)
    if new_shape == x.shape:
        return x
    token = tokenize("reshape", x, new_shape)
    if x.size == 0 or x.npartitions == 1 or x.ndim == 0 or not new_shape:
        one = x if x.npartitions == 1 else x.rechunk(-1)
        chunks = tuple((s,) for s in new_shape)
        blocks = _map_blocks(f"reshape-{token}", reshape_block, [one.collection],
                             numblocks(chunks), [lambda c: (0,) * x.ndim],
                             args=(Dep(0), new_shape), kind="reshape", name="reshape")
        return Array(blocks, new_shape, chunks, x.dtype)
    p = 0
    while (p < min(x.ndim, len(new_shape)) - 1 and x.shape[p] == new_shape[p]):
        p += 1
    t_in, t_out = x.shape[p:], new_shape[p:]
    split = _split_in_place(x, p, new_shape, token)
    if split is not None:
        return split
    r_in, r_out = math.prod(t_in[1:]), math.prod(t_out[1:])
    unit = math.lcm(r_in, r_out) if r_in and r_out else 1
    flat_total = math.prod(t_in)
    cuts = sorted({min(flat_total, (o * r_in) // unit * unit) for o in offsets(x.chunks[p])}
                  | {0, flat_total})
    sizes = [b - a for a, b in itertools.pairwise(cuts)] or [0]
    in_lead = tuple(s // r_in for s in sizes)
    out_lead = tuple(s // r_out for s in sizes)
    in_chunks = (*x.chunks[:p], in_lead, *((s,) for s in t_in[1:]))
    y = x.rechunk(in_chunks)
    out_chunks = (*x.chunks[:p], out_lead, *((s,) for s in t_out[1:]))
    n_in = x.ndim

    def index(c: tuple[int, ...]) -> tuple[int, ...]:
        return (*c[: p + 1], *([0] * (n_in - p - 1)))

    def task_of(coord: tuple[int, ...]) -> tuple:
        return (reshape_block, [y.collection.key(index(coord))],
                (Dep(0), block_shape(out_chunks, coord)))

    blocks = apply_blocks(f"reshape-{token}", numblocks(out_chunks), [y.collection], task_of,
                          kind="reshape", name="reshape")
    return Array(blocks, new_shape, out_chunks, x.dtype)


def _split_in_place(x: Array, p: int, new_shape: tuple[int, ...], token: str
                    ) -> Array | None:
    """The reshape of ``x`` that splits its axis ``p`` into two, ``(n,) -> (a, b)`` with
    the axes after it kept, block by block: when every block along ``p`` lies within one
    row of ``b`` and every row is cut the same way, output block ``(.., i, j, ..)`` is input
    block ``(.., i * k + j, ..)`` (``k`` blocks per row) reshaped, a view. ``None`` when the
    reshape is not such a split or the blocks do not fall so."""
    if len(new_shape) != x.ndim + 1 or new_shape[p + 2:] != x.shape[p + 1:]:
        return None
    n, b = x.shape[p], new_shape[p + 1]
    if b < 2 or new_shape[p] < 1:
        return None
    cuts = offsets(x.chunks[p])
    row = [c for c in cuts if c < b] + [b]
    if len(cuts) < 2 or set(cuts) != {r * b + c for r in range(n // b) for c in row[:-1]} | {n}:
        return None
    inner = tuple(hi - lo for lo, hi in itertools.pairwise(row))
    k = len(inner)
    out_chunks = (*x.chunks[:p], (1,) * new_shape[p], inner, *x.chunks[p + 1:])

    def task_of(coord: tuple[int, ...]) -> tuple:
        src = (*coord[:p], coord[p] * k + coord[p + 1], *coord[p + 2:])
        return (reshape_block, [x.collection.key(src)],
                (Dep(0), block_shape(out_chunks, coord)))

    blocks = apply_blocks(f"reshape-{token}", numblocks(out_chunks), [x.collection], task_of,
                          kind="reshape", name="reshape")
    return Array(blocks, new_shape, out_chunks, x.dtype)


def concatenate(arrays: Sequence[Any], axis: int | None = 0) -> Array:
    """Join arrays along an existing axis (``axis=None``: flatten them first); the result's
    blocks are the inputs' blocks."""
    dense_only("concatenate", *arrays)
    arrays = [asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("concatenate: need at least one array")
    if axis is None:  # as NumPy: flatten every array first
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    axis = operator.index(axis)
    nd = arrays[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(
            f"concatenate: axis {axis} is out of bounds for arrays of {nd} dimensions")
    axis %= nd
    for a in arrays:
        if a.ndim != nd or any(a.shape[i] != arrays[0].shape[i] for i in range(nd) if i != axis):
            shapes = ", ".join(str(b.shape) for b in arrays)
            raise ValueError(f"concatenate: shapes {shapes} differ off axis {axis}; all axes "
                             "but the concatenation axis must match")
    dtype = np.result_type(*[a.dtype for a in arrays])
    arrays = [a.astype(dtype, copy=False) for a in arrays]
    nonempty = [a for a in arrays if a.shape[axis]] or arrays[:1]
    common = [common_refinement(*[a.chunks[i] for a in nonempty]) if i != axis else None
              for i in range(nd)]
    aligned = []
    for a in nonempty:
        want = tuple(a.chunks[i] if i == axis else common[i] for i in range(nd))
        aligned.append(a.rechunk(want) if want != a.chunks else a)
    if len(aligned) == 1:
        return aligned[0]
    chunks = tuple(sum((a.chunks[axis] for a in aligned), ()) if i == axis else common[i]
                   for i in range(nd))
    name = f"concatenate-{tokenize('concatenate', *aligned, axis)}"
    # the first block of each input along the axis, for the block of a coordinate
    starts = list(itertools.accumulate((a.numblocks[axis] for a in aligned), initial=0))
    colls = [a.collection for a in aligned]

    def key_of(c: tuple[int, ...]) -> Any:
        n = bisect_right(starts, c[axis]) - 1
        return colls[n].key((*c[:axis], c[axis] - starts[n], *c[axis + 1:]))

    blocks = remap_by(name, numblocks(chunks), key_of, colls, covers=True)
    shape = tuple(sum(c) for c in chunks)
    return Array(blocks, shape, chunks, dtype)


def stack(arrays: Sequence[Any], axis: int = 0) -> Array:
    """Join arrays of one shape along a new axis."""
    dense_only("stack", *arrays)
    arrays = [asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array")
    shape = arrays[0].shape
    for a in arrays:
        if a.shape != shape:
            shapes = ", ".join(str(b.shape) for b in arrays)
            raise ValueError(f"stack: all arrays must have the same shape, got {shapes}")
    nd = len(shape) + 1
    axis = operator.index(axis)
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(
            f"stack: axis {axis} is out of bounds for the {nd}-dimensional result")
    axis %= nd
    index = (slice(None),) * axis + (None,)
    return concatenate([a[index] for a in arrays], axis=axis)
