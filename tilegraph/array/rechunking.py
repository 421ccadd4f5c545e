"""The plan of a rechunk: its stages and their blocks, chosen so that every task fits the
memory of the process that runs it.

A rechunk from ``old`` to ``new`` blocks is a chain of stages, each one of:

``rechunk``
    each block of the stage assembled in memory from the blocks of the stage before that it
    overlaps (a view when it lies inside one). A task holds those blocks and its own.
``rechunk-gather``
    the same, making read groups: runs of old blocks merged, so that the pieces cut from
    them are larger.
``rechunk-split``, ``rechunk-merge``
    the pieces where read groups and write groups meet, each a task of its own, then each
    write group assembled from its pieces; every piece may wait in memory at once, so this
    way is taken only when the array is at most half the memory limit.
``rechunk-store``
    through the intermediate store on disk (:mod:`tilegraph.io.staging`): one task per block
    of the stage before writes its pieces to a file (holding that block and a slab of
    ``STAGE_BUFFER`` bytes) and returns a handle of ``HANDLE_BYTES``; one task per block of
    this stage reads its pieces (holding its block, a slab and the handles of the blocks it
    overlaps). Its tasks hold one block each, whatever the rechunk, so it fits any limit a
    few blocks large.

As rechunker and Cubed plan it, the old blocks are gathered into *read groups* and the
new blocks into *write groups* (:func:`consolidate`: runs merged on the axes where the
other side's blocks are larger) so that the pieces where they meet are large; the write
groups are then cut into the new blocks as views. When the pieces would still be tiny and
many (a block of one column into a block of one row: every new block reads one element of
every old block), the plan goes through intermediate blocks whose sizes are spaced
geometrically between the read and the write groups (rechunker's multi-stage plan), each
stage through the store: more bytes written, far fewer pieces and handles.

The memory of a task is the executor's estimate of it (:func:`tilegraph.graph.memory.task_estimates`
over the op-kind registry, inputs included, as admission and ``check_fits`` count it), for
the chains fusion makes of it: a gather fused into the store that reads it, a load fused
into the store of the next stage. A stage through the store also holds the handles of all
its stored blocks until its last load has run (an all-to-all's first load needs them all):
the plan counts them beside its largest task (``holds``). They are what limits a rechunk
of very many tiny blocks: a limit must hold ``HANDLE_BYTES`` per block of the largest
stage besides a few blocks.

Choosing (:func:`plan_rechunk`): with ``budget`` the bytes a task should hold (the limit
divided among the workers of a process, with room for the blocks they make), the plan is
one stage when its tasks fit, else the cheapest of the staged plans that fit (pieces in
memory when the limit allows it); when none fits the budget (blocks a large share of the
limit), the cheapest that fits the limit, its cost divided by the tasks that can run at
once under it. Costs are seconds by the constants below: per task, per dependency, per
piece stored, per byte copied in memory and per byte written to disk and read back.
When nothing fits the limit, the plan with the smallest tasks is returned: its ``holds``
is the smallest limit that works, which the caller names when it refuses the rechunk.

>>> plan = plan_rechunk(((6000,), (100,) * 60), ((100,) * 60, (6000,)), 8, 32 << 20,
...                     limit=128 << 20, memory=128 << 20, workers=2)
>>> [name for name, _ in plan.stages]  # each column block's pieces to disk, then each row
['rechunk-store']
>>> plan.holds <= 32 << 20
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tilegraph.array.chunks import Chunks, common_refinement
from tilegraph.io.staging import HANDLE_BYTES, copy_bytes

# the cost model (seconds): what a stage costs beyond the bytes it moves
TASK_SECONDS = 4e-5  # the scheduler's cost of one task
EDGE_SECONDS = 1e-6  # of one dependency
PIECE_SECONDS = 5e-6  # of one piece written to the store and read back (two system calls)
COPY_SECONDS = 3e-10  # of one byte copied in memory
DISK_SECONDS = 2e-9  # of one byte written to the store and read back
MAX_STAGES = 6  # stages through the store, at most


class _Axis(NamedTuple):
    """One axis of a stage from blocks ``a`` to blocks ``b``."""

    count: int  # the most ``a`` blocks that one ``b`` block overlaps
    extent: int  # the longest run of ``a`` blocks that one ``b`` block overlaps
    pairs: int  # the (a, b) block pairs that overlap: the pieces along this axis
    piece: int  # the longest piece
    a: int  # the longest ``a`` block
    b: int  # the longest ``b`` block
    na: int  # ``a`` blocks
    nb: int  # ``b`` blocks
    shared: bool  # some ``a`` block and some ``b`` block are the same range


def _axis(a: tuple[int, ...], b: tuple[int, ...]) -> _Axis:
    """The sizes of one axis of a stage from blocks ``a`` to blocks ``b`` (a block of
    ``b`` that is empty reads the ``a`` block where it stands, as the stage's task does)."""
    oa = np.concatenate(([0], np.cumsum(a, dtype=np.int64)))
    ob = np.concatenate(([0], np.cumsum(b, dtype=np.int64)))
    at = np.minimum(np.searchsorted(ob, oa[:-1]), len(b) - 1)
    shared = bool(np.any((ob[at] == oa[:-1]) & (ob[at + 1] == oa[1:])))
    lo, hi = ob[:-1], ob[1:]
    na = len(a)
    first = np.clip(np.searchsorted(oa, lo, "right") - 1, 0, max(na - 1, 0))
    stop = np.where(hi > lo, np.maximum(np.searchsorted(oa, hi, "left"), first + 1), first + 1)
    stop = np.minimum(stop, na)
    count = stop - first
    extent = oa[stop] - oa[first]
    cuts = np.union1d(oa, ob)
    return _Axis(int(count.max(initial=1)), int(extent.max(initial=0)),
                 int(count.sum()), int(np.diff(cuts).max(initial=0)),
                 max(a, default=0), max(b, default=0), na, len(b), shared)


class _Stage:
    """The sizes of a stage from blocks ``a`` to blocks ``b`` that its tasks' memory and
    cost follow from (the largest along each axis multiply: a bound, exact when the largest
    blocks of the axes meet)."""

    def __init__(self, a: Chunks, b: Chunks, itemsize: int):
        axes = [_axis(p, q) for p, q in zip(a, b, strict=True)]
        self.itemsize = itemsize
        self.count = math.prod(x.count for x in axes)
        self.extent = itemsize * math.prod(x.extent for x in axes)  # bytes one task reads
        self.pairs = math.prod(x.pairs for x in axes)
        self.piece = itemsize * math.prod(x.piece for x in axes)
        self.a = itemsize * math.prod(x.a for x in axes)
        self.b = itemsize * math.prod(x.b for x in axes)
        self.na = math.prod(x.na for x in axes)
        self.nb = math.prod(x.nb for x in axes)
        self.views = all(x.count == 1 for x in axes)
        # a block of ``a`` read by one task alone, which reads nothing else: fusion makes
        # the two one task, holding both blocks
        self.one_to_one = all(x.shared for x in axes)
        self.nbytes = itemsize * math.prod(sum(p) for p in a)

    @property
    def direct(self) -> int:
        """Bytes a task assembling a ``b`` block in memory holds: the ``a`` blocks it
        overlaps and its own."""
        return self.extent + self.b

    @property
    def copy(self) -> int:
        """Bytes a task of the store copies a piece through."""
        return copy_bytes(self.piece)

    @property
    def store(self) -> int:
        """Bytes a task writing an ``a`` block's pieces to the store holds: the block, and
        a slab or the handle it returns."""
        return self.a + max(self.copy, HANDLE_BYTES)

    @property
    def load(self) -> int:
        """Bytes a task reading a ``b`` block from the store holds."""
        return HANDLE_BYTES * self.count + self.b + self.copy

    def direct_cost(self) -> float:
        copied = 0 if self.views else self.nbytes
        return self.nb * TASK_SECONDS + self.pairs * EDGE_SECONDS + copied * COPY_SECONDS

    def store_cost(self) -> float:
        return ((self.na + self.nb) * TASK_SECONDS
                + self.pairs * (PIECE_SECONDS + EDGE_SECONDS) + self.nbytes * DISK_SECONDS)


@dataclass(frozen=True)
class RechunkPlan:
    """A rechunk's stages (``(name, blocks after the stage)``, the last one the new
    blocks), the bytes its largest task holds as the executor estimates it (``need``),
    the bytes the plan needs the limit to be (``holds``: ``need``, or more where a stage's
    handles wait beside its tasks), its cost in seconds by this module's model, and the
    bytes of pieces it keeps in memory at once (``resident``: the array when its pieces
    wait in memory, which the run's memory limit must hold twice over)."""

    stages: tuple[tuple[str, Chunks], ...]
    need: int
    holds: int
    cost: float
    resident: int = 0  # bytes of pieces waiting in memory at once (the array, or none)


def consolidate(chunks: Chunks, want: Sequence[int], itemsize: int, budget: int) -> Chunks:
    """``chunks`` with runs of consecutive blocks merged on the axes where a block is
    smaller than ``want``, the most lacking axis first, while the largest merged block
    stays within ``budget`` bytes. Each step at most doubles a run, and the last one is
    found by bisection: O(blocks x log blocks) per axis.

    >>> consolidate(((2, 2, 2, 2), (8,)), (8, 8), 1, 32)
    ((4, 4), (8,))
    """
    nd = len(chunks)
    prefix = [np.concatenate(([0], np.cumsum(c, dtype=np.int64))) for c in chunks]
    k = [1] * nd
    done = [len(c) <= 1 for c in chunks]

    def size(a: int, ka: int) -> int:
        p = prefix[a]
        starts = np.arange(0, len(p) - 1, ka)
        return int((p[np.minimum(starts + ka, len(p) - 1)] - p[starts]).max(initial=0))

    def fits(a: int, ka: int) -> bool:
        return itemsize * size(a, ka) * math.prod(
            size(b, k[b]) for b in range(nd) if b != a) <= budget

    while True:
        lacking = [(want[a] / max(size(a, k[a]), 1), a) for a in range(nd)
                   if not done[a] and size(a, k[a]) < want[a]]
        if not lacking:
            break
        _, a = max(lacking)
        trial = min(2 * k[a], len(chunks[a]))
        if fits(a, trial):
            k[a] = trial
            done[a] = k[a] >= len(chunks[a])
            continue
        lo, hi = k[a], trial  # lo fits, hi does not: the largest run that fits
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(a, mid) else (lo, mid)
        k[a] = lo
        done[a] = True
    return tuple(_grouped(c, ka) for c, ka in zip(chunks, k, strict=True))


def _grouped(sizes: tuple[int, ...], k: int) -> tuple[int, ...]:
    """Runs of ``k`` consecutive blocks merged into one."""
    return tuple(sum(sizes[i:i + k]) for i in range(0, len(sizes), k)) or sizes


def _largest(sizes: tuple[int, ...]) -> int:
    return max(sizes) if sizes else 0


def direct_need(old: Chunks, new: Chunks, itemsize: int) -> int:
    """Bytes the largest task of a one-stage rechunk holds: the old blocks it reads and
    the new block it makes (the axes are independent, so the largest is their product).

    >>> direct_need(((2, 2),), ((4,),), 8)
    64
    """
    return _Stage(old, new, itemsize).direct


def _regular(length: int, size: int) -> tuple[int, ...]:
    size = max(1, min(size, length))
    if length == 0:
        return (0,)
    return (size,) * (length // size) + ((length % size,) if length % size else ())


def _between(read: Chunks, write: Chunks, stages: int) -> list[Chunks]:
    """The blocks of ``stages - 1`` intermediate stages from ``read`` to ``write``: on each
    axis where the two differ, regular blocks whose sizes are spaced geometrically between
    theirs (rechunker's ``calculate_stage_chunks``)."""
    out = []
    for j in range(1, stages):
        t = j / stages
        chunks = []
        for r, w in zip(read, write, strict=True):
            if r == w:
                chunks.append(r)
                continue
            lr, lw = max(_largest(r), 1), max(_largest(w), 1)
            size = round(math.exp(math.log(lr) * (1 - t) + math.log(lw) * t))
            chunks.append(_regular(sum(r), size))
        out.append(tuple(chunks))
    return out


def _through_store(old: Chunks, read: Chunks, write: Chunks, new: Chunks, stages: int,
                   itemsize: int) -> RechunkPlan:
    """The plan that gathers ``old`` into ``read`` groups, goes through the store
    ``stages`` times to the ``write`` groups and cuts them into the ``new`` blocks."""
    chain = [read]
    for chunks in [*_between(read, write, stages), write]:
        if chunks != chain[-1]:
            chain.append(chunks)
    steps = [_Stage(p, q, itemsize) for p, q in itertools.pairwise(chain)]
    needs, handles, cost = [], 0, 0.0
    names: list[tuple[str, Chunks]] = []
    if read != old:
        gather = _Stage(old, read, itemsize)
        # fused into the store that reads it: the old blocks, the group, and a slab or
        # the handle
        needs.append(gather.direct + (max(steps[0].copy, HANDLE_BYTES) if steps else 0))
        cost += gather.direct_cost()
        names.append(("rechunk-gather", read))
    elif steps:
        needs.append(steps[0].store)
    for j, step in enumerate(steps):
        last = j + 1 == len(steps)
        # a load fused into the store of the next stage: its handles, its block, and the
        # larger of its slab and the next stage's slab or handle
        needs.append(step.load if last else HANDLE_BYTES * step.count + step.b + max(
            step.copy, steps[j + 1].copy, HANDLE_BYTES))
        # every handle of the stage (and those the next stage's stores made) may wait
        # beside any task that runs
        handles = max(handles, step.na + (0 if last else step.nb))
        cost += step.store_cost()
        names.append(("rechunk-store", chain[j + 1]))
    if write != new:
        cut = _Stage(write, new, itemsize)
        if cut.one_to_one and needs:  # a load fused into the one view of its block
            needs[-1] += cut.b
        needs.append(cut.direct)
        cost += cut.direct_cost()
        names.append(("rechunk", new))
    need = max(needs, default=0)
    return RechunkPlan(tuple(names), need, need + HANDLE_BYTES * handles, cost)


def _in_memory(old: Chunks, read: Chunks, write: Chunks, new: Chunks,
               itemsize: int) -> RechunkPlan:
    """The plan whose pieces wait in memory: gather the read groups, cut them into the
    pieces where they meet the write groups (copies, so that a read group is released),
    assemble the write groups, cut them into the new blocks."""
    pieces = tuple(common_refinement(r, w) for r, w in zip(read, write, strict=True))
    names: list[tuple[str, Chunks]] = []
    for name, chunks in (("rechunk-gather", read), ("rechunk-split", pieces),
                         ("rechunk-merge", write)):
        if chunks != (names[-1][1] if names else old):
            names.append((name, chunks))
    if write != new:
        names.append(("rechunk", new))
    elif names and names[-1][0] == "rechunk-merge":
        names[-1] = ("rechunk", new)  # the assembly makes the new blocks themselves
    cost, before = 0.0, old
    needs: list[int] = []
    for name, chunks in names:
        stage = _Stage(before, chunks, itemsize)
        # a block read by one task alone, which reads nothing else, is fused into it: the
        # chain holds what the first task of it does and each block it makes
        fused = needs[-1] + stage.b if needs and stage.one_to_one else 0
        needs.append(max(stage.direct, fused))
        cost += stage.direct_cost() + (stage.nbytes * COPY_SECONDS if name == "rechunk-split"
                                       else 0.0)
        before = chunks
    need = max(needs, default=0)
    return RechunkPlan(tuple(names), need, need, cost, itemsize * math.prod(map(sum, old)))


def _groups(old: Chunks, new: Chunks, itemsize: int, cap: int) -> list[tuple[Chunks, Chunks]]:
    """Read and write groups for group sizes of a power of two bytes, from the largest at
    most ``cap / 2`` down to the blocks themselves: ``(read, write)``, each pair once (the
    same sizes whatever ``cap``, so that a plan made for one limit is among those weighed
    for a larger one)."""
    out: list[tuple[Chunks, Chunks]] = []
    size = 1 << (max(cap // 2, 1).bit_length() - 1)
    while True:
        write = consolidate(new, [_largest(o) for o in old], itemsize, size)
        read = consolidate(old, [_largest(w) for w in write], itemsize, size)
        if (read, write) not in out:
            out.append((read, write))
        if (read, write) == (old, new) or size <= 1:
            break
        size //= 2
    if (old, new) not in out:
        out.append((old, new))
    return out


def candidates(old: Chunks, new: Chunks, itemsize: int, cap: int, *,
               in_memory: bool = True, store: bool = True) -> list[RechunkPlan]:
    """Every plan :func:`plan_rechunk` weighs for group sizes up to ``cap`` bytes: one
    stage, pieces in memory (``in_memory``), through the store once or several times
    (``store``)."""
    plans = [RechunkPlan((("rechunk", new),), direct_need(old, new, itemsize),
                         direct_need(old, new, itemsize),
                         _Stage(old, new, itemsize).direct_cost())]
    for read, write in _groups(old, new, itemsize, cap):
        if in_memory:
            plans.append(_in_memory(old, read, write, new, itemsize))
        if not store:
            continue
        best = math.inf
        for stages in range(1, MAX_STAGES + 1):
            plan = _through_store(old, read, write, new, stages, itemsize)
            plans.append(plan)
            if plan.cost > 2 * best:  # more stages only add bytes from here
                break
            best = min(best, plan.cost)
    return plans


def plan_rechunk(old: Chunks, new: Chunks, itemsize: int, budget: int, *,
                 limit: int | None = None, memory: int | None = None,
                 workers: int = 1, spare_disk: bool = False) -> RechunkPlan:
    """The plan of a rechunk from ``old`` to ``new`` blocks of ``itemsize`` bytes per
    element (see the module's text): one stage when its tasks hold at most ``budget``
    bytes; else the cheapest staged plan whose tasks do; else the cheapest whose tasks fit
    ``limit`` (the memory limit of a process), its cost divided by the tasks of it that
    ``workers`` workers can run at once under the limit. Pieces may wait in memory when
    ``memory`` (the run's memory limit) is ``None`` or at least twice the array; the store
    on disk is used only when ``memory`` is given. When no plan fits ``limit``, the one
    whose tasks are smallest (the caller refuses it, naming :func:`smallest_limit`). With
    no ``limit``, a staged plan is taken only when its tasks are smaller than the one
    stage's. ``spare_disk``: a plan within ``budget`` that goes through the store on disk
    is weighed, as above, with every plan whose tasks hold at most half of ``limit`` (one
    stage of tasks larger than the budget, say, which runs fewer tasks at once but writes
    nothing)."""
    nbytes = itemsize * math.prod(map(sum, old))
    in_memory = memory is None or nbytes <= memory // 2
    store = memory is not None
    direct = direct_need(old, new, itemsize)
    one = RechunkPlan((("rechunk", new),), direct, direct,
                      _Stage(old, new, itemsize).direct_cost())
    if direct <= budget or old == new or nbytes == 0:
        return one
    plans = candidates(old, new, itemsize, budget, in_memory=in_memory, store=store)
    fit = [p for p in plans if p.holds <= budget]
    sparing = False
    if fit:
        if in_memory:  # no disk when the pieces fit in memory
            fit = [p for p in fit if "rechunk-store" not in dict(p.stages)] or fit
        best = min(fit, key=lambda p: (p.cost, p.holds))
        if not (spare_disk and limit is not None and "rechunk-store" in dict(best.stages)):
            return best
        sparing = True  # weighed below with larger tasks that leave half the limit free
    if limit is None:
        room = 2 * workers * budget
        fit = [p for p in plans if p.holds <= room and p.holds < direct]
    else:
        room = limit
        # groups of any size that fits: larger read groups mean fewer handles waiting
        plans += candidates(old, new, itemsize, max(2 * nbytes, 2), in_memory=in_memory,
                            store=store)
        fit = [p for p in plans if (2 * p.holds if sparing else p.holds) <= limit]
        if not fit:
            return min(plans, key=lambda p: (p.holds, p.cost))
    if not fit:
        return one

    def slowness(p: RechunkPlan) -> float:
        # the tasks that run at once when each has as much again for what it makes
        at_once = max(1.0, min(float(workers), room / max(2 * p.holds, 1)))
        return p.cost / at_once

    return min(fit, key=lambda p: (slowness(p), p.holds))


def least_holds(old: Chunks, new: Chunks, itemsize: int, *,
                memory: int | bool | None = True) -> int:
    """The fewest bytes the largest task of any plan of the rechunk holds (the smallest
    ``max_mem`` that works): for a run whose memory limit is ``memory`` (``None``: a plan
    for no run, pieces in memory), or whatever it is (``True``: pieces in memory or
    through the store on disk).

    >>> least_holds(((1,) * 8, (8,)), ((8,), (1,) * 8), 8)  # pieces of one element
    128
    """
    nbytes = itemsize * math.prod(map(sum, old))
    if memory is True:
        in_memory = store = True
    else:
        in_memory, store = memory is None or nbytes <= memory // 2, memory is not None
    return min(p.holds for p in candidates(old, new, itemsize, max(2 * nbytes, 2),
                                           in_memory=in_memory, store=store))


def smallest_limit(old: Chunks, new: Chunks, itemsize: int) -> int:
    """The smallest memory limit per process under which :func:`plan_rechunk` finds a
    plan that fits: the tasks of a plan through the store fit it, or those of a plan whose
    pieces wait in memory and the array twice over.

    >>> smallest_limit(((1,) * 8, (8,)), ((8,), (1,) * 8), 8)  # one stage: 8 rows, a column
    576
    """
    nbytes = itemsize * math.prod(map(sum, old))
    return min(max(p.holds, 2 * p.resident)
               for p in candidates(old, new, itemsize, max(2 * nbytes, 2)))
