"""Task priorities: which ready task runs first.

The default order is a depth-first post-order from the requested outputs: a task's
dependencies are visited in argument order, and a task gets its number once all of them
have theirs. Among ready tasks the executor runs the smallest number first, so one output's
subtree is finished (and its intermediates freed) before the next one is started; that keeps
the live set small, where breadth-first order would hold a whole level of the graph at once.

Shared blocks stream. Depth-first alone finishes one output before the next, so a block that
several outputs read (``u`` in ``(u * u).mean(0)`` and ``(u * v).mean(0)`` computed together)
would be held from the first output's pass until the last one's: the whole of ``u``. Two
rules co-schedule the consumers of a block instead, across every output:

- **completion**: a task whose dependencies all have their numbers gets its number at once
  (it is next to run), even when it belongs to a later output's subtree, if it releases more
  bytes than it makes (a combine step of a reduction tree; a block the memory manager can
  drop and make again counts as nothing released); a task that only trades one block
  for another is left where the walk puts it, since its result could wait long for a
  consumer on another output's path;
- **pull**: when a block that has several consumers gets its number, and its consumers that
  the depth-first walk has not reached need only a small set of further tasks (at most
  ``PULL_LIMIT``: ``v``'s block for ``u * v``, or a short chain making it) whose results are
  all released once those consumers run, that set gets its numbers right away, and so do the
  consumers. A block whose other consumers need much more (the whole climatology before an
  anomaly) is left to the depth-first walk; the memory manager remakes or spills it;
- **split**: when a block gets its number and its consumers the walk has not reached need
  nothing else and together make no more bytes than it holds (the pieces a rechunk cuts it
  into), they all get their numbers at once, so the block is read once and released, not
  held (or remade, if it can be) until the walk reaches its last piece.

- **group**: when a pull finds nothing to do and a waiting consumer reads a block the
  memory manager would otherwise drop and make again (a random or constant block: it
  counts as nothing released above, so its other consumers were left to the walk, and
  each later pass would make it again), the consumers run now together with whatever
  they need and the consumers of all that, as far as each can join (at most
  ``GROUP_LIMIT`` tasks, none on the walk's path): a time step's blocks of u, v, t and w,
  their zonal means, the anomalies against them and the zonal means of the anomalies'
  products. A task whose consumer cannot join is held; the largest held task leaves the
  group (with what needs it) until what is released is ``GROUP_GAIN`` times what is
  held. Each block is then made once, where the walk alone would make every variable's
  blocks for its own zonal means and then again for the products.

The walk stays linear in the edges: each task keeps the count of its dependencies still
unnumbered, a pull looks at no more than ``PULL_LIMIT`` tasks and a group at no more than
``GROUP_LIMIT``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tilegraph.graph.remake import remake_plan
from tilegraph.graph.taskgraph import MODE_DATA, CycleError, TaskGraph
from tilegraph.util import concat_ranges

PULL_LIMIT = 8  # tasks a shared block's other consumers may pull in (and consumers looked at)
GROUP_LIMIT = 32  # tasks that may join a shared block's consumers to run with them
GROUP_GAIN = 4  # a group runs early only if it releases this many times what it holds


class _Walk:
    """The state of one :func:`order` walk (plain lists, as the executor's state is):
    ``missing[i]``, dependencies of i not yet numbered; ``remaining[i]``, consumers of i
    not yet numbered; ``size[i]``, bytes of i's result (1 where the graph does not say)."""

    def __init__(self, graph: TaskGraph, outputs: list[int] | None):
        n = len(graph)
        self.ptr = graph.dep_ptr.tolist()
        self.idx = graph.dep_idx.tolist()
        cptr, cidx = graph.dependents_csr()
        self.cptr = cptr.tolist()
        self.cidx = cidx.tolist()
        self.missing = graph.in_degree().tolist()
        self.remaining = np.diff(cptr).tolist()
        self.prio = [-1] * n
        self.seen = bytearray(n)  # 0: unseen, 1: on the current path, 2: numbered
        self.count = 0
        self.needed = (bytearray(b"\x01") * n if outputs is None else bytearray(
            graph.ancestors_mask(np.asarray(outputs, dtype=np.int64)).tobytes()))
        self.is_output = bytearray(n)
        for o in outputs or ():
            self.is_output[o] = 1
        nb = graph.meta.get("nbytes")
        self.size = [1] * n if nb is None else [1 if b is None else int(b) for b in nb]
        # sources dropped and made again under pressure cost nothing to keep; a block made
        # again through a chain of steps costs them, so releasing it does free memory
        self.remake = _remade_sources(graph)

    def number(self, i: int) -> None:
        self.prio[i] = self.count
        self.count += 1
        self.seen[i] = 2
        missing, remaining = self.missing, self.remaining
        for c in self.cidx[self.cptr[i] : self.cptr[i + 1]]:
            missing[c] -= 1
        for d in self.idx[self.ptr[i] : self.ptr[i + 1]]:
            remaining[d] -= 1

    def _frees(self, c: int) -> int:
        """Bytes released once the complete task c runs: its dependencies it is the last
        unnumbered consumer of, except those the memory manager can drop and make again
        (keeping them costs nothing under pressure)."""
        remaining, is_output, size, remake = self.remaining, self.is_output, self.size, self.remake
        freed = 0
        for d in self.idx[self.ptr[c] : self.ptr[c + 1]]:
            if remaining[d] == 1 and not is_output[d] and not remake[d]:
                freed += size[d]
        return freed

    def settle(self, first: int) -> None:
        """``first`` was just numbered: number what it completes and what releases more
        than it makes, and pull in what lets its other consumers run (see the module
        docstring)."""
        seen, missing, needed, size = self.seen, self.missing, self.needed, self.size
        cptr, cidx = self.cptr, self.cidx
        lo, hi = cptr[first], cptr[first + 1]
        if hi - lo < 2:  # most tasks: one consumer, or none; nothing to split or pull
            if lo == hi:
                return
            c = cidx[lo]
            if seen[c] == 2 or not needed[c] or missing[c]:
                return
        # depth first: what a consumer completes is numbered before the consumer's
        # siblings (the 200 anomalies of one climatology: each group of them is combined
        # before the next group is made); each entry is (task, its consumers, next one)
        work = [(first, cidx[cptr[first] : cptr[first + 1]], 0, [])]
        while work:
            t, cons, k, waiting = work[-1]
            while k < len(cons):
                c = cons[k]
                k += 1
                if seen[c] == 2 or not needed[c]:
                    continue
                if missing[c] == 0 and size[c] < self._frees(c):
                    self.number(c)
                    work[-1] = (t, cons, k, waiting)
                    work.append((c, cidx[cptr[c] : cptr[c + 1]], 0, []))
                    break
                if not seen[c]:  # (one on the walk's path is numbered by the walk)
                    waiting.append(c)
            else:
                work.pop()
                more: list[int] = []
                if len(waiting) > 1:
                    pieces = list(dict.fromkeys(waiting))  # a consumer may read t twice
                    if self._splits(t, cons, pieces):
                        more = pieces
                if not more and waiting and len(cons) > 1 and len(waiting) <= PULL_LIMIT:
                    more = self._pull(t, waiting)
                    if not more and self._remade_later(waiting):
                        more = self._group(waiting)
                for p in more:
                    self.number(p)
                work.extend((p, cidx[cptr[p] : cptr[p + 1]], 0, []) for p in reversed(more))

    def _splits(self, t: int, cons: list[int], waiting: list[int]) -> bool:
        """Whether the waiting consumers of ``t`` are its pieces: each needs nothing more,
        together they are its last consumers and hold no more bytes than ``t`` (a block
        cut into the pieces of a rechunk)."""
        missing, seen, size = self.missing, self.seen, self.size
        if self.is_output[t] or any(missing[c] for c in waiting):
            return False
        if sum(1 for c in set(cons) if not seen[c]) != len(waiting):
            return False  # a consumer no output needs would keep t anyway
        return sum(size[c] for c in waiting) <= size[t]

    def _pull(self, t: int, consumers: list[int]) -> list[int]:
        """What to number so that the waiting ``consumers`` of the shared block ``t`` run
        now: the unnumbered tasks they need (few, each released once its consumers have
        run), then ``consumers`` and the other tasks this completes, in dependency order.
        ``[]`` when that is more, or would hold more bytes than it releases."""
        seen, ptr, idx = self.seen, self.ptr, self.idx
        pulled: list[int] = []
        inside: set[int] = set()
        for c in consumers:
            # c's unnumbered needs not pulled yet, c itself last
            need = self._needs(c, inside, PULL_LIMIT - len(pulled) + 1)
            if need is None:
                return []  # one is on the walk's path, or the pull grew too large
            for i in need[:-1]:
                inside.add(i)
                pulled.append(i)
        if not pulled:
            return []
        cptr, cidx, missing, needed, size = (self.cptr, self.cidx, self.missing, self.needed,
                                             self.size)
        ends = dict.fromkeys(c for c in consumers if c not in inside)
        for p in pulled:
            for e in cidx[cptr[p] : cptr[p + 1]]:
                if e in inside or e in ends or not needed[e] or seen[e]:
                    continue  # (a task on the walk's path is numbered by the walk)
                # every consumer of a pulled task runs with it: it is released at once
                if missing[e] != sum(1 for d in idx[ptr[e] : ptr[e + 1]] if d in inside):
                    return []
                ends[e] = None
        # held: the results the pull makes early; released: t, and the pulled blocks that
        # several consumers read (each would otherwise be held from its first consumer on)
        held = sum(size[e] for e in ends)
        released = sum(size[p] for p in pulled if cptr[p + 1] - cptr[p] > 1)
        if not self.is_output[t] and all(seen[c] or c in ends or c in inside
                                         for c in cidx[cptr[t] : cptr[t + 1]]):
            released += size[t]  # its last consumers run now, or next on the walk's path
        if held > released:
            return []
        return [*pulled, *ends]

    def _remade_later(self, consumers: list[int]) -> bool:
        """Whether one of ``consumers`` reads a numbered block that the memory manager
        would drop and make again were the consumer left to the walk (a second pass over
        that input)."""
        seen, remake, ptr, idx = self.seen, self.remake, self.ptr, self.idx
        return any(remake[d] and seen[d] == 2
                   for c in consumers for d in idx[ptr[c] : ptr[c + 1]])

    def _group(self, consumers: list[int]) -> list[int]:
        """What to number so that the waiting ``consumers`` of a shared block run now,
        together with every consumer of what they make or need that can join them: a
        consumer joins with the unnumbered tasks it needs (none on the walk's path, at most
        ``GROUP_LIMIT`` tasks in all); each task that joins brings in its own consumers
        the same way. A task one of whose consumers does not join is held; while what is
        held is not ``GROUP_GAIN`` times less than what is released (:meth:`_weigh`), the
        largest held task leaves, with what needs it. A time step's blocks, its zonal
        means, the anomalies against them and the products of the anomalies of different
        variables run together so, and each block is made once. In dependency order;
        ``[]`` when nothing is left."""
        seen, needed, cptr, cidx = self.seen, self.needed, self.cptr, self.cidx
        inside: dict[int, None] = {}  # in dependency order
        queue = list(consumers)
        for c in queue:  # (grows as tasks join)
            if c in inside or seen[c] or not needed[c]:
                continue
            joined = self._needs(c, inside, GROUP_LIMIT - len(inside))
            if joined is None:
                continue
            for a in joined:
                inside[a] = None
                queue.extend(cidx[cptr[a] : cptr[a + 1]])
        while inside:
            held, released = self._weigh(inside)
            if sum(size for size, _ in held) * GROUP_GAIN < released:
                return list(inside)
            if not held:
                return []
            out = {max(held)[1]}
            for a in inside:  # (dependency order: a task after what it needs)
                if any(d in out for d in self.idx[self.ptr[a] : self.ptr[a + 1]]):
                    out.add(a)
            inside = {a: None for a in inside if a not in out}
        return []

    def _needs(self, c: int, inside: dict[int, None] | set[int], budget: int
               ) -> list[int] | None:
        """``c`` after the unnumbered tasks it needs that are not ``inside``, in dependency
        order; ``None`` when one is on the walk's path or they are more than ``budget``."""
        seen, ptr, idx = self.seen, self.ptr, self.idx
        out: list[int] = []
        added: set[int] = set()
        stack = [(c, ptr[c])]
        while stack:
            i, p = stack[-1]
            end = ptr[i + 1]
            while p < end:
                d = idx[p]
                p += 1
                s = seen[d]
                if s == 1:
                    return None  # on the walk's path: the walk makes it
                if s == 0 and d not in inside and d not in added:
                    stack[-1] = (i, p)
                    stack.append((d, ptr[d]))
                    break
            else:
                stack.pop()
                added.add(i)
                out.append(i)
                if len(out) > budget:
                    return None
        return out

    def _weigh(self, inside: dict[int, None]) -> tuple[list[tuple[int, int]], int]:
        """What numbering ``inside`` now holds and releases: held, ``(bytes, task)`` of
        what joins and has a consumer that does not (or is an output); released, the bytes
        of what joins and is read by several that all join, and of the numbered blocks
        whose consumers not yet numbered all join or are on the walk's path."""
        seen, needed, size, remaining = self.seen, self.needed, self.size, self.remaining
        cptr, cidx, ptr, idx, is_output = self.cptr, self.cidx, self.ptr, self.idx, self.is_output
        held: list[tuple[int, int]] = []
        released = 0
        before: dict[int, int] = {}  # numbered block -> its consumers that join
        for a in inside:
            cons = cidx[cptr[a] : cptr[a + 1]]
            if is_output[a] or any(needed[e] and not seen[e] and e not in inside for e in cons):
                held.append((size[a], a))
            elif len(cons) > 1:
                released += size[a]
            for d in idx[ptr[a] : ptr[a + 1]]:
                if seen[d] == 2:
                    before[d] = before.get(d, 0) + 1
        for d, joining in before.items():
            if is_output[d]:
                continue
            rest = remaining[d] - joining
            if rest == 0 or (rest > 0 and all(
                    seen[e] == 1 for e in cidx[cptr[d] : cptr[d + 1]]
                    if e not in inside and seen[e] != 2)):
                released += size[d]
        return held, released

def _remade_sources(graph: TaskGraph) -> bytearray:
    """The remake rule's verdict (:class:`~tilegraph.graph.remake.RemakePlan`'s ``remake``)
    at the tasks without inputs, 0 at the others, judged for those tasks alone (a source's
    verdict depends on no other task)."""
    sources = np.flatnonzero(graph.in_degree() == 0).tolist()
    modes = graph.modes
    data = bytearray(len(graph))
    for i in sources:
        data[i] = modes[i] == MODE_DATA
    return bytearray(remake_plan(graph, bytes(data), sources).remake)


def order(graph: TaskGraph, outputs: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Priority of every task (a permutation of ``0..n-1``; lower runs first).

    ``outputs`` are task indices, visited in the order given; tasks no output needs come last.
    Raises :class:`~tilegraph.graph.CycleError` if the graph has a cycle.

    >>> from operator import add
    >>> from tilegraph.graph import from_dask
    >>> g = from_dask({"a": 1, "b": (add, "a", 1), "c": 2, "d": (add, "b", "c")})
    >>> [g.keys[i] for i in np.argsort(order(g))]
    ['a', 'b', 'c', 'd']

    A block read by two outputs is freed once both have read it (``u1`` is made right after
    ``u0`` is read, so that ``uv0`` and ``uu0`` can free ``u0`` and ``v0``):

    >>> from operator import mul
    >>> g = from_dask({"u0": 1, "v0": 2, "u1": 3, "v1": 4,
    ...                "uu0": (mul, "u0", "u0"), "uu1": (mul, "u1", "u1"),
    ...                "uv0": (mul, "u0", "v0"), "uv1": (mul, "u1", "v1"),
    ...                "uu": (add, "uu0", "uu1"), "uv": (add, "uv0", "uv1")})
    >>> [g.keys[i] for i in np.argsort(order(g, g.indices(["uu", "uv"])))]
    ['u0', 'v0', 'uv0', 'uu0', 'u1', 'v1', 'uv1', 'uv', 'uu1', 'uu']
    """
    n = len(graph)
    roots = None if outputs is None else [int(o) for o in outputs]
    walk = _Walk(graph, roots)
    ptr, idx, seen = walk.ptr, walk.idx, walk.seen
    number, settle = walk.number, walk.settle
    for root in (*(roots or ()), *range(n)):
        if seen[root]:
            continue
        if not walk.needed[root]:  # the tasks no output needs: ordered among themselves
            walk.needed = bytearray(b"\x01") * n
        seen[root] = 1
        stack = [root]
        cursor = [ptr[root]]
        while stack:
            i = stack[-1]
            p = cursor[-1]
            end = ptr[i + 1]
            child = -1
            while p < end:
                d = idx[p]
                p += 1
                s = seen[d]
                if s == 0:
                    child = d
                    break
                if s == 1:
                    raise CycleError([graph.keys[j] for j in stack[stack.index(d) :]])
            if child < 0:
                stack.pop()
                cursor.pop()
                if seen[i] != 2:  # (completed early by a settle: numbered already)
                    number(i)
                    settle(i)
            else:
                cursor[-1] = p
                seen[child] = 1
                stack.append(child)
                cursor.append(ptr[child])
    return np.array(walk.prio, dtype=np.int64)


TILE_SHARE = 0.5  # of the memory limit: a tile's accumulators and one step's operands


def _chains(graph: TaskGraph) -> dict[str, list[list[int]]]:
    """The accumulation chains of the graph's contractions, by contraction: each chain is
    its steps in order, from a ``product`` task through ``accumulate`` steps, each step's
    first dependency the step before, every step but the last read only by the next."""
    kinds = graph.meta.get("kind")
    if kinds is None or "accumulate" not in kinds:
        return {}
    # the next step of each task: its one consumer, if the task is its first dependency
    ptr, idx = graph.dep_ptr, graph.dep_idx
    cptr, cidx = graph.dependents_csr()
    nxt = np.full(len(graph), -1, dtype=np.int64)
    single = np.flatnonzero(np.diff(cptr) == 1)
    cons = cidx[cptr[single]]
    first = ptr[cons] < ptr[cons + 1]
    first[first] = idx[ptr[cons[first]]] == single[first]
    nxt[single[first]] = cons[first]
    step = nxt.tolist()
    out: dict[str, list[list[int]]] = {}
    for head in (i for i, k in enumerate(kinds) if k == "product"):
        chain = [head]
        c = step[head]
        while c >= 0:
            chain.append(c)
            if kinds[c] != "accumulate":
                break  # the last step, fused with what reads the sum
            c = step[c]
        if len(chain) > 2:
            key = graph.keys[head]
            out.setdefault(str(key[0]) if isinstance(key, tuple) else str(key), []).append(chain)
    return out


def tile_accumulations(graph: TaskGraph, priority: np.ndarray, memory: int | None
                       ) -> np.ndarray:
    """Priorities that run a contraction's accumulation chains in square tiles of its output
    blocks, step by step, when its operands do not fit ``memory``: all the chains of a tile
    take their k-th step before any takes its (k+1)-th, so each operand block loaded for a
    step serves a whole row or column of the tile. Under a budget of M elements an n x n
    product then reads about n^3 / sqrt(M) elements of its operands beyond reading them
    once, where one chain after another (the default walk) keeps a row panel of one operand
    resident and streams the other for every output block: about n^3 / b for blocks of b
    columns.

    The tile's side s is the largest for which s^2 accumulators and 2s operand blocks fit
    ``TILE_SHARE`` of ``memory``. Only the chains, and the operand tasks read by nothing
    else, change places, and only among the priorities they had; a contraction whose tile
    would cover its whole output keeps its order. Without ``memory`` nothing changes."""
    if memory is None:
        return priority
    chains_of = _chains(graph)
    if not chains_of:
        return priority
    n = len(graph)
    nb = graph.meta.get("nbytes") or [None] * n
    sizes = np.fromiter((b or 0 for b in nb), dtype=np.int64, count=n)
    coords = graph.meta.get("coords") or [None] * n
    ptr, idx = graph.dep_ptr, graph.dep_idx
    cptr, cidx = graph.dependents_csr()
    ptr_l = idx_l = cptr_l = cidx_l = None  # as lists, once a contraction is tiled
    priority = priority.copy()
    for chains in chains_of.values():
        places = [tuple(coords[c[-1]] or ())[:2] for c in chains]
        if any(len(p) != 2 for p in places) or len(set(places)) != len(places):
            continue
        # the sizes first, in arrays (a large product has hundreds of thousands of steps):
        # most contractions fit whole and keep their order
        step_ids = np.fromiter((t for c in chains for t in c), dtype=np.int64)
        in_chain = np.zeros(n, dtype=bool)
        in_chain[step_ids] = True
        reads = idx[concat_ranges(ptr[step_ids], ptr[step_ids + 1] - ptr[step_ids])]
        operand_ids = np.unique(reads[~in_chain[reads]])
        acc = int(sizes[step_ids].max())  # (a last step writing has none)
        op = int(sizes[operand_ids].max()) if len(operand_ids) else 0
        rows = len({p[0] for p in places})
        cols = len({p[1] for p in places})
        budget = TILE_SHARE * memory
        side = max(rows, cols)
        s = 1
        while s < side and (s + 1) ** 2 * acc + 2 * (s + 1) * op <= budget:
            s += 1
        if s >= side or acc + 2 * op > budget:
            continue
        steps = set(step_ids.tolist())
        if ptr_l is None:
            ptr_l, idx_l = ptr.tolist(), idx.tolist()
            cptr_l, cidx_l = cptr.tolist(), cidx.tolist()
        movable = {d for d in operand_ids.tolist()
                   if all(u in steps for u in cidx_l[cptr_l[d]:cptr_l[d + 1]])}
        by_place = dict(zip(places, chains, strict=True))
        seq: list[int] = []
        placed: set[int] = set()
        for ti in range(0, max(p[0] for p in places) + 1, s):
            for tj in range(0, max(p[1] for p in places) + 1, s):
                tile = [by_place[(i, j)] for i in range(ti, ti + s) for j in range(tj, tj + s)
                        if (i, j) in by_place]
                for k in range(max((len(c) for c in tile), default=0)):
                    for c in tile:
                        if k >= len(c):
                            continue
                        t = c[k]
                        for d in idx_l[ptr_l[t]:ptr_l[t + 1]]:
                            if d in movable and d not in placed:
                                placed.add(d)
                                seq.append(d)
                        seq.append(t)
        slots = np.sort(priority[seq])
        priority[seq] = slots
    return priority
