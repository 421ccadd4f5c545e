"""Static placement: which worker runs each task (the bottom-up pattern scheduler).

Given ``p`` workers, every task gets one worker, chosen by the placement rule of its op kind
(the ``placement`` field of :mod:`tilegraph.graph.kinds`):

- ``"grid"``: the tasks of a group-by-join (the products and accumulations of output block
  ``(i, j)``) go to worker ``(i mod D, j mod C)`` of an implicit ``D x C`` grid, with
  ``D = floor(sqrt(p))`` and ``C = p // D`` (a square grid when ``p`` is square; when it is
  not, ``p - D*C`` workers get no grid tasks). Then each input block travels to at most one
  row or one column of the grid, as in SUMMA. Vectors (one coordinate) go to ``i mod p``;
  leading (batch) coordinates are added to the row.
  The block kernels of the factorisations (potrf, trsm, syrk, gemm of block ``(i, j)``)
  follow the same grid: ScaLAPACK's 2-D block-cyclic layout.
- ``"vector"``: a contraction whose output has one block dimension (matrix @ vector, a
  reduction over the rows of a tall-skinny matrix such as ``X.T @ X``) is lowered to one
  product per pair of blocks and a tree of small partial sums. Each product goes where its
  largest input lives (the big operand's block, ``c mod p`` for a vector-shaped operand
  placed cyclically), so the big operand never moves: the small operand is broadcast to
  the workers that need it and only the small partials travel, to the tree nodes, which
  follow the ``"producers"`` rule.
- ``"gather"``: stores of results go to the worker that gathers them (``gather_to``).
- inputs (tasks with no dependencies): the initial placement the user chooses:
  ``"cyclic"`` (the default) is the 2-D block-cyclic distribution on the same grid (1-D
  cyclic, ``c mod p``, for vectors and for arrays with one block dimension, such as a
  tall-skinny matrix cut into row blocks; round-robin for blocks without coordinates);
  ``"locality"`` keeps inputs that feed the same consumers together while giving every
  worker the same number, in the spirit of Mars' initial assignment: the inputs are listed
  in the order of a breadth-first walk through their shared consumers and cut into ``p``
  equal runs.
- ``"producers"`` (every other kind): among the workers of the task's producers, the one of
  least cost, where cost = the worker's load + the task's compute time + ``alpha`` x the
  transfer time of the inputs that are not on that worker yet (a join without reduce thus
  goes to the less loaded of its two producers' workers). Loads are the compute seconds of
  the tasks placed on a worker so far; the coordinate-placed tasks are counted first, then
  the others in dependency order, so every choice sees its inputs' places.
- ``"at-start"`` (a script's statements): planned as ``"producers"``, but the backend
  chooses the process when the task starts, because only then are its inputs' sizes known
  (:func:`choose_on_start`, the rule the processes backend of autopar applies).

A backend of a *driver* process and a pool of stateless workers (serverless) places by
:func:`place_driver_or_pool` instead: each task on the driver or in the pool, by its op kind.

Times come from the :class:`~tilegraph.plan.cost.CostModel`, so placement and the simulator
agree. The ``"grid"`` and ``"gather"`` rules and the initial placements are computed with
whole-array NumPy operations; the ``"vector"`` and ``"producers"`` rules visit their tasks
one by one, in dependency order.

>>> grid_shape(4), grid_shape(8), grid_shape(2)
((2, 2), (2, 4), (1, 2))
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import MODE_DATA
from tilegraph.plan.cost import CostModel, column

INITIAL_PLACEMENTS = ("cyclic", "locality")
DRIVER, POOL = 0, 1  # the places of :func:`place_driver_or_pool`


def grid_shape(workers: int) -> tuple[int, int]:
    """``(D, C)``: the process grid of ``workers`` workers used by the grid rule."""
    d = math.isqrt(workers)
    return d, workers // d


def grid_workers(coords: list[tuple], workers: int) -> np.ndarray:
    """The grid worker of each block coordinate (see the module docstring)."""
    out = np.zeros(len(coords), dtype=np.int64)
    if not coords:
        return out
    d, c = grid_shape(workers)
    by_len: dict[int, list[int]] = {}
    for pos, co in enumerate(coords):
        by_len.setdefault(len(co), []).append(pos)
    for k, positions in by_len.items():
        if k == 0:
            continue  # scalars: worker 0
        arr = np.array([coords[q] for q in positions], dtype=np.int64).reshape(len(positions), k)
        if k == 1:
            out[positions] = arr[:, 0] % workers
        else:
            row = arr[:, -2] + arr[:, :-2].sum(axis=1)
            out[positions] = (row % d) * c + arr[:, -1] % c
    return out


def place(
    graph: Any,
    workers: int,
    *,
    initial: str = "cyclic",
    alpha: float = 1.0,
    model: CostModel | None = None,
    gather_to: int = 0,
) -> np.ndarray:
    """The worker of every task of ``graph`` (an int64 array) for ``workers`` workers.

    See the module docstring for the rules. ``initial`` is the placement of the input blocks
    (``"cyclic"`` or ``"locality"``), ``alpha`` the weight of communication against compute
    time, ``model`` the cost model, ``gather_to`` the worker that gathers stored results.
    """
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ValueError(f"place(): workers must be a positive int, got {workers!r}")
    workers = int(workers)
    if initial not in INITIAL_PLACEMENTS:
        raise ValueError(f"place(): initial placement must be one of "
                         f"{', '.join(INITIAL_PLACEMENTS)}, got {initial!r}")
    if not isinstance(alpha, (int, float)) or not alpha >= 0:
        raise ValueError(f"place(): alpha must be a number >= 0, got {alpha!r}")
    if not isinstance(gather_to, (int, np.integer)) or not 0 <= gather_to < workers:
        raise ValueError(f"place(): gather_to must be a worker in [0, {workers}), "
                         f"got {gather_to!r}")
    n = len(graph)
    placement = np.full(n, -1, dtype=np.int64)
    if n == 0 or workers == 1:
        placement[:] = 0
        return placement
    model = model or CostModel()
    kinds = graph.meta.get("kind") or [None] * n
    coords = graph.meta.get("coords") or [None] * n
    in_deg = graph.in_degree()
    by_kind = {k: kind_info(k).placement for k in set(kinds)}
    rules = [by_kind[k] for k in kinds]

    grid = [i for i in range(n) if rules[i] == "grid" and coords[i] is not None]
    placement[grid] = grid_workers([coords[i] for i in grid], workers)
    placement[[i for i in range(n) if rules[i] == "gather"]] = gather_to
    sources = np.flatnonzero((in_deg == 0) & (placement < 0))
    placement[sources] = _initial(graph, sources, workers, initial, coords)

    seconds = model.task_seconds(graph)
    placed = placement >= 0
    load = np.bincount(placement[placed], weights=seconds[placed], minlength=workers)
    vector = np.array([r == "vector" for r in rules], dtype=bool)
    _place_by_producers(graph, placement, load, seconds, alpha, model, vector)
    return placement


def _initial(graph: Any, sources: np.ndarray, workers: int, initial: str,
             coords: list) -> np.ndarray:
    """Workers of the input blocks ``sources`` by the chosen initial placement."""
    if len(sources) == 0:
        return np.zeros(0, dtype=np.int64)
    if initial == "locality":
        walk = _locality_walk(graph, sources)
        out = np.empty(len(sources), dtype=np.int64)
        pos = np.empty(len(graph), dtype=np.int64)
        pos[sources] = np.arange(len(sources))
        share = -(-len(sources) // workers)
        out[pos[walk]] = np.arange(len(walk)) // share
        return out
    src = sources.tolist()
    with_coords = [j for j, i in enumerate(src) if coords[i] is not None]
    out = np.arange(len(src), dtype=np.int64) % workers
    if with_coords:
        out[with_coords] = grid_workers([coords[src[j]] for j in with_coords], workers)
        axis = _vector_axes(graph, [src[j] for j in with_coords], coords)
        for j, a in zip(with_coords, axis, strict=True):
            if a >= 0:
                out[j] = coords[src[j]][a] % workers
    return out


def _vector_axes(graph: Any, tasks: list[int], coords: list) -> list[int]:
    """For each input block (with coordinates of 2 or more axes), the one axis along which
    its array has more than one block, or -1 (a square grid, a single block, or keys that do
    not name their array). Blocks of one array share the first element of their keys."""
    keys = graph.keys
    label = [keys[i][0] if type(keys[i]) is tuple and keys[i] else None for i in tasks]
    extent: dict[Any, list[int]] = {}
    for i, name in zip(tasks, label, strict=True):
        co = coords[i]
        if name is None or len(co) < 2:
            continue
        top = extent.get(name)
        if top is None:
            extent[name] = list(co)
        elif len(top) == len(co):
            extent[name] = [max(t, c) for t, c in zip(top, co, strict=True)]
        else:
            extent[name] = []  # mixed coordinate lengths: not one array
    axis_of: dict[Any, int] = {}
    for name, top in extent.items():
        long = [a for a, t in enumerate(top) if t > 0]
        axis_of[name] = long[0] if len(long) == 1 else -1
    return [axis_of.get(name, -1) if len(coords[i]) >= 2 else -1
            for i, name in zip(tasks, label, strict=True)]


def _locality_walk(graph: Any, sources: np.ndarray) -> np.ndarray:
    """The inputs in breadth-first order through shared consumers (undirected walk)."""
    n = len(graph)
    cptr, cidx = graph.dependents_csr()
    cptr, cidx = cptr.tolist(), cidx.tolist()
    dptr, didx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    is_source = np.zeros(n, dtype=bool)
    is_source[sources] = True
    seen = bytearray(n)
    walk: list[int] = []
    for start in sources.tolist():
        if seen[start]:
            continue
        seen[start] = 1
        queue = deque([start])
        while queue:
            v = queue.popleft()
            if is_source[v]:
                walk.append(v)
            for u in cidx[cptr[v]:cptr[v + 1]] + didx[dptr[v]:dptr[v + 1]]:
                if not seen[u]:
                    seen[u] = 1
                    queue.append(u)
    return np.array(walk, dtype=np.int64)


def _place_by_producers(graph: Any, placement: np.ndarray, load: np.ndarray,
                        seconds: np.ndarray, alpha: float, model: CostModel,
                        vector: np.ndarray) -> None:
    """The "vector" rule for the tasks of ``vector`` (where their largest input lives) and
    the "producers" rule for every other task not placed yet, in dependency order."""
    todo = placement < 0
    if not todo.any():
        return
    n = len(graph)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    if (graph.dep_idx < src).all():
        visit = np.flatnonzero(todo).tolist()
    else:
        order = graph.topological_order()
        visit = order[todo[order]].tolist()
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    size = column(graph, "nbytes", n)
    move = (alpha * model.transfer_seconds(size)).tolist()
    size_l = size.tolist()
    near_big = vector.tolist()
    where = placement.tolist()
    work = load.tolist()
    sec = seconds.tolist()
    for i in visit:
        deps = idx[ptr[i]:ptr[i + 1]]
        if near_big[i]:
            big = max(deps, key=size_l.__getitem__)
            where[i] = where[big]
            work[where[i]] += sec[i]
            continue
        cands = {where[d] for d in deps}
        best, best_cost = -1, 0.0
        for w in sorted(cands):
            cost = work[w] + sum(move[d] for d in deps if where[d] != w)
            if best < 0 or cost < best_cost:
                best, best_cost = w, cost
        where[i] = best
        work[best] += sec[i]
    placement[:] = where
    load[:] = work


def place_driver_or_pool(graph: Any) -> list[int]:
    """The place of every task of ``graph`` on a backend of one driver process and a pool of
    workers that share no memory with it: :data:`DRIVER` or :data:`POOL`.

    On the driver: the literal inputs (data tasks), the tasks whose op kind gathers
    (placement rule ``"gather"``: the stores of the result's blocks), a view (an op kind
    with ``view``) of in-memory inputs only, and a ``"load"`` of an in-memory NumPy array
    (the blocks of ``from_numpy``): these are made where their data is. So is a task with
    no inputs of an op kind cheaper to make than to store (``remake``: the blocks of zeros
    of a result's other triangle) when only the driver reads it: made in the pool it would
    be written to the store and read back. Every other task goes to the pool.

    >>> from tilegraph.graph import GraphBuilder
    >>> b = GraphBuilder()
    >>> b.add_data("x", 1)
    >>> b.add("y", abs, deps=["x"], kind="elementwise")
    >>> b.add("z", abs, deps=["y"], kind="store")
    >>> b.add("w", lambda: 0.0, kind="creation")
    >>> b.add("v", abs, deps=["w"], kind="store")
    >>> place_driver_or_pool(b.build())
    [0, 1, 0, 0, 0]
    """
    n = len(graph)
    kinds = graph.meta.get("kind") or [None] * n
    modes = graph.modes
    ptr, idx = graph.dep_ptr, graph.dep_idx
    info = {k: kind_info(k) for k in set(kinds)}
    out = [POOL] * n
    for i in range(n):
        k = info[kinds[i]]
        if modes[i] == MODE_DATA or k.placement == "gather":
            out[i] = DRIVER
        elif k.view and ptr[i + 1] > ptr[i] and all(
                modes[d] == MODE_DATA for d in idx[ptr[i]:ptr[i + 1]].tolist()):
            out[i] = DRIVER  # a block of an in-memory input: made where the input is
        elif k.name == "load" and ptr[i + 1] == ptr[i] and any(
                type(a) is np.ndarray for a in graph.args[i]):
            out[i] = DRIVER  # likewise (from_numpy's blocks)
    uptr, uidx = graph.dependents_csr()
    for i in range(n):
        if out[i] == POOL and ptr[i + 1] == ptr[i] and info[kinds[i]].remake and \
                uptr[i + 1] > uptr[i] and all(out[j] == DRIVER
                                              for j in uidx[uptr[i]:uptr[i + 1]].tolist()):
            out[i] = DRIVER
    return out


# -- placement when a task starts ---------------------------------------------------------------

MOVE_WAIT_BYTES = 32 << 20  # wait for a busy process rather than move this many more bytes


def choose_on_start(idle: list[int], local_bytes: list[int], committed: list[int], *,
                    first_of_group: bool = False, own: int = -1,
                    move_wait: int = MOVE_WAIT_BYTES) -> int | None:
    """The ``"at-start"`` rule: the process a task starting now runs on, or ``None`` to wait
    for a busy one.

    ``idle``: the processes free now; ``local_bytes[w]``: the bytes of the task's inputs
    process ``w`` holds already; ``committed[w]``: the work process ``w`` is bound to (the
    steps still to run of the groups placed on it); ``own``: the process of the thread
    asking, preferred in ties. A group's first task (``first_of_group``: the steps of a
    group all run where the first one ran) goes to the idle process bound to the least
    work, unless a busy one is bound to less (then it waits for that one, so that
    independent chains run on different processes). Any other task goes to the idle process
    holding the most bytes of its inputs, unless a busy one holds more than ``move_wait``
    bytes more (then it waits rather than move them).

    >>> choose_on_start([0, 1], [0, 10], [0, 0])
    1
    >>> choose_on_start([1], [0, 0], [5, 2], first_of_group=True)
    1
    >>> choose_on_start([1], [0, 0], [0, 2], first_of_group=True) is None
    True
    """
    if not idle:
        return None
    if first_of_group:
        w = min(idle, key=lambda w: (committed[w], -local_bytes[w], w != own, w))
        return w if committed[w] <= min(committed) else None
    w = max(idle, key=lambda w: (local_bytes[w], w == own, -w))
    return w if max(local_bytes) - local_bytes[w] <= move_wait else None


def start_rule(kind: str | None) -> Any:
    """The rule choosing, when it starts, the process of a task of op kind ``kind``
    (:func:`choose_on_start` for kinds placed ``"at-start"``)."""
    rule = kind_info(kind).placement
    if rule != "at-start":
        raise ValueError(f"op kind {kind!r} is placed by the {rule!r} rule when the plan is "
                         "made, not when its tasks start")
    return choose_on_start
