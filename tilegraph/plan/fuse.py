"""Chain fusion: a task whose only consumer may absorb it is inlined into that consumer.

The rule reads the op-kind registry (:mod:`tilegraph.graph.kinds`): a producer whose kind
may be inlined (``fuse_producer``) is inlined into its consumer, whose kind may absorb it
(``fuse_consumer``), when it has exactly one consumer, is not a requested output, and either

- the consumer has no other input (fusing cannot make it wait for more blocks), or
- the producer has inputs and every one of them is an input of the consumer too (fusing
  cannot make it wait for more blocks either: a transposed view of a block that a product
  also reads directly is taken inside the product), or
- both kinds are *blockwise* (elementwise ops, views, per-block reductions, stores...):
  then the consumer's inputs are blocks of the same region, needed together anyway, or
- the producer has no inputs, the consumer is blockwise and both are the same block of
  their grids (a rechunked block made from nothing, read by the step that uses it).

A view (a transposed or sliced block) with several consumers, or read by a step whose kind
only ``absorbs_views`` (a matrix product), is inlined into each reader: it costs nothing to
take again, and held as a task result it would count as a second copy of its block.

A task fused in one pass is blockwise only if all its steps are. Fusion runs again while a
pass may have made new chains: a producer that read a block its consumer also reads leaves
that block with one consumer fewer (a block, a slice of it and the rechunk that joins both
become one task), and a consumer whose only input was inlined becomes a source. A block
read by several steps of one task is a *shared* call there: made once, held until its
last use.

When tasks are placed on workers (a ``"worker"`` metadata column), only tasks on the same
worker fuse: fusing across workers would move the producer's work to the consumer's worker.

A step that writes over one of its inputs in place (an op kind with ``overwrites``, e.g. the
accumulation of a matrix product) may end up inside a longer task; the fused task's
``overwrites`` column lists the task inputs any of its steps writes over, so that the
executor can keep them intact for a retry.

Memory. A fused task never holds its inlined steps' results as task results, but it does hold
them while it runs: ``random(...).sum()`` fused makes the whole random block inside one task
whose output is 8 bytes. Each inlined call carries its ``mem``: its result's bytes and the
bytes its own step works on (its result and temporaries: output bytes times the kind's
``temp_factor``, none for a NumPy ufunc; views count nothing; a read's own working set).
The ``working`` column of a fused task is the peak of filling its template
(:func:`template_working`): arguments are made in order and held until their call runs.
The executor's estimate (:func:`tilegraph.graph.memory.task_estimates`) takes it, so
admission, ``check_fits``, ``explain`` and the simulator all see it.

The fused task runs the producer's call inside the consumer's call (a nested template), so
``((a + 1) * b - c).sum()`` becomes one task per block that reads a, b and c and returns the
block's partial sum, and no intermediate block is ever a task result.

A step's function may carry a ``fuse_rewrite(args)`` rule: given the step's argument template
with its producers inlined, it returns a better ``(func, args, extra working bytes)`` or
``None``. The block sum of a reduction uses it to turn ``sum(multiply(a, b))`` into one
``einsum`` that never makes the product block (:mod:`tilegraph.array.reductions`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tilegraph.graph.kinds import kind_info, unrepeatable_reason
from tilegraph.graph.taskgraph import (
    MODE_DATA,
    MODE_DIRECT,
    MODE_FLAT,
    MODE_NESTED,
    Call,
    Dep,
    TaskGraph,
    is_plain_arg,
)
from tilegraph.util import concat_ranges


@dataclass
class FuseStats:
    """What fusion did: tasks before and after, and the op chains that were fused."""

    before: int = 0
    after: int = 0
    chains: dict[str, int] = field(default_factory=dict)
    kinds_before: dict[str, int] = field(default_factory=dict)


def _map_deps(template: Any, fn: Callable[[Dep], Any]) -> Any:
    """The template with every ``Dep`` replaced by ``fn(dep)`` (literals untouched); a
    shared call stays one object wherever it appears."""
    return _rebuilt(template, fn, None, {})


def _rebuilt(template: Any, on_dep: Callable[[Dep], Any] | None,
             on_call: Callable[[Any, tuple, dict | None], tuple[Any, tuple]] | None,
             memo: dict) -> Any:
    """A copy of a template with each ``Dep`` passed through ``on_dep`` and each call's
    ``(func, args)`` through ``on_call`` (after its arguments); a shared call is rebuilt
    once, so it stays one object wherever it appears."""
    tp = type(template)
    if tp is Dep:
        return on_dep(template) if on_dep is not None else template
    if tp is Call:
        if template.shared:
            done = memo.get(id(template))
            if done is not None:
                return done
        args = tuple(_rebuilt(a, on_dep, on_call, memo) for a in template.args)
        kwargs = ({k: _rebuilt(v, on_dep, on_call, memo) for k, v in template.kwargs.items()}
                  if template.kwargs else None)
        func = template.func
        if on_call is not None:
            func, args = on_call(func, args, kwargs)
        out = Call(func, args, kwargs, template.shared, template.mem)
        if template.shared:
            memo[id(template)] = out
        return out
    if tp is list:
        return [_rebuilt(a, on_dep, on_call, memo) for a in template]
    if tp is tuple:
        return tuple(_rebuilt(a, on_dep, on_call, memo) for a in template)
    if tp is dict:
        return {k: _rebuilt(v, on_dep, on_call, memo) for k, v in template.items()}
    return template


def template_working(template: Any) -> tuple[int, int]:
    """``(bytes held, peak bytes)`` of filling a fused task's template: arguments are made
    in order and held until their call runs; a call holds its arguments' results and works
    on its own ``mem`` (task inputs count nothing here: the executor counts them)."""
    tp = type(template)
    if tp is Call:
        held, peak = template_working((template.args, template.kwargs))
        out, step = template.mem or (0, 0)
        return out, max(peak, held + step)
    if tp in (list, tuple) or tp is dict:
        held = peak = 0
        for a in (template.values() if tp is dict else template):
            if type(a) in (Call, list, tuple, dict):
                o, p = template_working(a)
                peak = max(peak, held + p)
                held += o
        return held, peak
    return 0, 0


def _count_slot(template: Any, slot: int, seen: set | None = None) -> int:
    """How many times ``Dep(slot)`` is read when the template is filled (a shared call's
    reads counted once)."""
    seen = set() if seen is None else seen
    tp = type(template)
    if tp is Dep:
        return int(template.slot == slot)
    if tp is Call:
        if template.shared:
            if id(template) in seen:
                return 0
            seen.add(id(template))
        n = sum(_count_slot(a, slot, seen) for a in template.args)
        if template.kwargs:
            n += sum(_count_slot(v, slot, seen) for v in template.kwargs.values())
        return n
    if tp in (list, tuple):
        return sum(_count_slot(a, slot, seen) for a in template)
    if tp is dict:
        return sum(_count_slot(v, slot, seen) for v in template.values())
    return 0


def fuse_chains(graph: TaskGraph, outputs: np.ndarray) -> tuple[TaskGraph, FuseStats]:
    """The graph with fusible chains inlined (see the module docstring).

    A pass that inlines a producer reading the same block as its consumer leaves that block
    with one consumer fewer; another pass then fuses what became a chain (a block that a
    slice of it and a rechunk both read becomes one task making, slicing and joining it).
    """
    n = len(graph)
    stats = FuseStats(before=n, after=n)
    kinds = graph.meta.get("kind")
    if kinds is None or n == 0:
        return graph, stats
    for k in kinds:
        stats.kinds_before[k or "other"] = stats.kinds_before.get(k or "other", 0) + 1
    outputs = np.asarray(outputs, dtype=np.int64)
    for _ in range(MAX_PASSES):
        fuse, shared = _chosen(graph, outputs)
        if not fuse.any():
            break
        keys = [graph.keys[int(i)] for i in outputs]
        graph, stats = _rebuild(graph, fuse, stats)
        outputs = np.array([graph.index[k] for k in keys], dtype=np.int64)
        if not shared:
            break
    _fold_steps(graph)
    return graph, stats


class UfuncInto:
    """``ufunc(*args)`` written into argument ``k``'s buffer when that argument is a fresh
    result of an inlined step of the same task (nobody else holds it) and has the result's
    shape and dtype; otherwise a new result, as NumPy gives it."""

    __slots__ = ("k", "ufunc")

    def __init__(self, ufunc: np.ufunc, k: int):
        self.ufunc, self.k = ufunc, k

    @property
    def __name__(self) -> str:
        return self.ufunc.__name__

    def __reduce__(self) -> tuple:
        return (UfuncInto, (self.ufunc, self.k))

    def __call__(self, *args: Any) -> Any:
        buf = args[self.k]
        if type(buf) is np.ndarray and buf.flags.writeable:
            try:
                kinds = tuple(a.dtype if isinstance(a, np.ndarray) else type(a) for a in args)
                dtype = self.ufunc.resolve_dtypes((*kinds, None))[-1]
                shape = np.broadcast_shapes(*(np.shape(a) for a in args))
            except (TypeError, ValueError):
                dtype = shape = None
            if dtype == buf.dtype and shape == buf.shape:
                return self.ufunc(*args, out=buf)
        return self.ufunc(*args)


def _fresh(a: Any) -> bool:
    """Whether an inlined call returns a new array that only its reader holds."""
    return type(a) is Call and not a.shared and (
        isinstance(a.func, (np.ufunc, UfuncInto)) or getattr(a.func, "fresh_result", False))


def _fold_step(func: Any, args: tuple, kwargs: dict | None) -> tuple[Any, tuple]:
    """A ufunc step reading an inlined step that can be folded into it (its function has
    ``fold_into(ufunc, position, args, call)``: a rechunk's join) runs as the folded call;
    a ufunc reading a fresh result of an inlined step writes over it."""
    if kwargs or not isinstance(func, np.ufunc):
        return func, args
    for k, a in enumerate(args):
        fold = getattr(a.func, "fold_into", None) if type(a) is Call else None
        if fold is not None and not a.shared:
            folded = fold(func, k, args, a)
            if folded is not None:
                return folded.func, folded.args
    if func.nout == 1:
        for k, a in enumerate(args):
            if _fresh(a):
                return UfuncInto(func, k), args
    return func, args


def _fold_steps(graph: TaskGraph) -> None:
    """Fold steps into the ufuncs that read them, in every fused task (in place)."""
    steps = graph.meta.get("step_working")
    if steps is None:
        return
    for k, step in enumerate(steps):
        if step is None or graph.modes[k] == MODE_DIRECT:
            continue
        args = _rebuilt(graph.args[k], None, _fold_step, {})
        kwargs = graph.kwargs.get(k)
        func, args = _fold_step(graph.funcs[k], args, kwargs)
        graph.funcs[k] = func
        graph.args[k] = args
        graph.modes[k] = MODE_FLAT if all(is_plain_arg(a) for a in args) else MODE_NESTED


MAX_PASSES = 4


def _chosen(graph: TaskGraph, outputs: np.ndarray) -> tuple[np.ndarray, bool]:
    """The tasks to inline in one pass, and whether a further pass may find new chains (a
    producer read a block its consumer reads too, or a consumer became a source)."""
    n = len(graph)
    kinds = graph.meta["kind"]
    out_deg = graph.out_degree()
    in_deg = graph.in_degree()
    is_output = np.zeros(n, dtype=bool)
    is_output[outputs] = True
    ptr, idx = graph.dependents_csr()
    consumer = np.full(n, -1, dtype=np.int64)
    single = np.flatnonzero((out_deg == 1) & ~is_output)
    consumer[single] = idx[ptr[single]]
    fuse = np.zeros(n, dtype=bool)
    shared = False
    modes = graph.modes
    workers = graph.meta.get("worker")
    coords = graph.meta.get("coords")
    nbytes = graph.meta.get("nbytes")
    chain = graph.meta.get("chain_blockwise") or [None] * n  # tasks fused in earlier passes
    rows = {k: kind_info(k) for k in set(kinds)}
    dptr, didx = graph.dep_ptr, graph.dep_idx
    # a view (a transposed or sliced block) read by several steps is taken by each of them:
    # it costs nothing to take again, and held as a result it would be counted as a second
    # copy of its block (only a plain view: a fused chain ending in a view would be made
    # again by every reader)
    steps = graph.meta.get("step_working") or [None] * n
    dup = np.zeros(n, dtype=bool)
    views = [k for k, row in rows.items() if row.view and row.fuse_producer]
    is_view = (np.isin(np.asarray(kinds, dtype=object), views) if views
               else np.zeros(n, dtype=bool))
    for i in np.flatnonzero(is_view & (out_deg > 0) & ~is_output & (in_deg > 0)).tolist():
        if modes[i] == MODE_DATA or steps[i] is not None:
            continue
        readers = idx[ptr[i]:ptr[i + 1]].tolist()
        if len(readers) == 1 and rows[kinds[readers[0]]].fuse_consumer:
            continue  # one reader that absorbs producers: the chain rule below takes it
        # (on another worker, only a view as large as its input: a slice's reader would
        # otherwise fetch the whole block)
        whole = nbytes is not None and nbytes[i] is not None and nbytes[i] >= sum(
            nbytes[d] or 0 for d in didx[dptr[i]:dptr[i + 1]].tolist())
        if all((rows[kinds[c]].fuse_consumer or rows[kinds[c]].absorbs_views) and (
                workers is None or workers[c] == workers[i] or whole) for c in readers):
            dup[i] = True
    for i in single.tolist():
        c = int(consumer[i])
        if dup[c]:  # (inlined into a view taken by several readers, it would be made again)
            continue
        kp, kc = rows[kinds[i]], rows[kinds[c]]
        if not kp.fuse_producer or not kc.fuse_consumer:
            continue
        bp = kp.blockwise if chain[i] is None else chain[i]
        bc = kc.blockwise if chain[c] is None else chain[c]
        if workers is not None and workers[i] != workers[c]:
            continue
        if modes[i] == MODE_DATA:
            continue
        if in_deg[c] == 1 or (bp and bc):
            fuse[i] = True
        elif in_deg[i] > 0:
            own = set(didx[dptr[i]:dptr[i + 1]].tolist())
            fuse[i] = own <= set(didx[dptr[c]:dptr[c + 1]].tolist())
        elif bc and coords is not None and coords[i] is not None:
            # a block made from nothing, read by a blockwise step of the same block of the
            # grid that has other inputs too (a rechunked block and the step that reads
            # it); the leaves of a reduction keep their own tasks
            fuse[i] = coords[i] == coords[c]
        if not fuse[i] or shared:
            continue
        if in_deg[i] > 0 and in_deg[c] > 1:
            own = didx[dptr[i]:dptr[i + 1]]
            shared = bool(np.isin(own, didx[dptr[c]:dptr[c + 1]]).any())
        elif in_deg[i] == 0 and in_deg[c] == 1 and out_deg[c] == 1 and kc.fuse_producer:
            shared = True  # the consumer becomes a source with one consumer of its own
    return fuse | dup, shared


@dataclass(frozen=True, slots=True)
class _Columns:
    """The columns of the graph being fused that fusion reads per task (lists of
    ``len(graph)``; ``None`` where the graph has no such column and a missing value makes
    no difference)."""

    names: list | None
    costs: list | None
    nbytes: list | None
    kinds: list | None
    rows: dict[Any, Any]  # op kind -> its row of the registry
    own_working: list  # a task's own working set (a read's buffers)
    step_working: list  # of tasks fused in an earlier pass: their own step's
    chain_blockwise: list  # of tasks fused in an earlier pass: all steps blockwise
    remake: list  # of tasks fused in an earlier pass
    repeatable: list

    @classmethod
    def of(cls, graph: TaskGraph) -> _Columns:
        n = len(graph)
        meta = graph.meta
        kinds = meta.get("kind")
        return cls(names=meta.get("name"), costs=meta.get("cost"), nbytes=meta.get("nbytes"),
                   kinds=kinds,
                   rows={k: kind_info(k) for k in set(kinds)} if kinds is not None else {},
                   own_working=meta.get("working") or [None] * n,
                   step_working=meta.get("step_working") or [None] * n,
                   chain_blockwise=meta.get("chain_blockwise") or [None] * n,
                   remake=meta.get("remake") or [None] * n,
                   repeatable=meta.get("repeatable") or [None] * n)


@dataclass(frozen=True, slots=True)
class _Fused:
    """A task with the fused producers it reads inlined into its call: the call, the
    graph's tasks its dependency slots read (in slot order), and what fusion records of
    the chain in the task's metadata."""

    func: Callable
    args: tuple
    kwargs: dict | None
    deps: list[int]
    label: str  # the op names of its steps, joined with "+"
    cost: float  # the flops of all its steps
    written: set[int]  # the slots any of its steps writes over in place
    out: int  # bytes of its result (none for a view)
    step: int  # bytes its own (last) step works on
    remake: bool  # every step is cheap to make again
    blockwise: bool  # every step works block by block
    repeat: bool | str  # every step gives the same result again, else why not

    def call(self) -> Call:
        """The task as a step inlined into its consumer."""
        return Call(self.func, self.args, self.kwargs, mem=(self.out, self.step))

    def working(self) -> int:
        """The peak bytes of running the task: its inlined steps, then its own step."""
        held, peak = template_working((self.args, self.kwargs))
        return max(peak, held + self.step)


class _Template:
    """The argument template of a task being fused, as its producers are inlined: its own
    dependencies in their new slots (``deps``), the producers to inline as pending markers
    (``_PENDING_BASE + old slot``)."""

    def __init__(self, graph: TaskGraph, i: int, fuse: np.ndarray):
        old = graph.dep_idx[graph.dep_ptr[i] : graph.dep_ptr[i + 1]].tolist()
        self.old = old
        self.deps: list[int] = []
        self._slot_of: dict[int, int] = {}
        mapping = [-1 if fuse[d] else self.slot(d) for d in old]
        self.mapping = mapping

        def own_slot(d: Dep) -> Dep:
            j = mapping[d.slot]
            return Dep(j if j >= 0 else _PENDING_BASE + d.slot)

        args = (tuple(Dep(j) for j in range(len(old))) if graph.modes[i] == MODE_DIRECT
                else graph.args[i])
        kwargs = graph.kwargs.get(i)
        self.args = _map_deps(args, own_slot)
        self.kwargs = _map_deps(kwargs, own_slot) if kwargs else None

    def slot(self, d: int) -> int:
        """The new slot of task ``d``, given one if it has none yet."""
        s = self._slot_of.get(d)
        if s is None:
            s = self._slot_of[d] = len(self.deps)
            self.deps.append(d)
        return s

    def inline(self, j: int, producer: _Fused) -> list[int]:
        """Put ``producer`` where old slot ``j`` is read (made once if read by several
        steps); the new slots of its dependencies."""
        emap = [self.slot(e) for e in producer.deps]
        inlined = _map_deps(producer.call(), lambda e: Dep(emap[e.slot]))
        pending = _PENDING_BASE + j
        uses = _count_slot((self.args, self.kwargs), pending)
        if uses > 1:  # read by several steps of this task: made once
            inlined.shared = uses

        def put(d: Dep) -> Any:
            return inlined if d.slot == pending else d

        self.args = _map_deps(self.args, put)
        if self.kwargs:
            self.kwargs = _map_deps(self.kwargs, put)
        return emap


def _fuse_task(graph: TaskGraph, i: int, fuse: np.ndarray, cols: _Columns,
               done: dict[int, _Fused]) -> _Fused:
    """Task ``i`` with its fused producers (in ``done``) inlined into its call."""
    names, kinds = cols.names, cols.kinds
    row = cols.rows[kinds[i]] if kinds is not None else None
    label = [names[i] if names is not None and names[i] else graph.opname(i)]
    cost = float(cols.costs[i] or 0) if cols.costs is not None else 0.0
    tmpl = _Template(graph, i, fuse)
    own_written = graph.overwritten(i)
    # the new slots of the inputs this call (or a step inlined into it) writes over
    written = {tmpl.mapping[s] for s in own_written if tmpl.mapping[s] >= 0}
    remake = True  # every inlined step is cheap to make again
    repeat: bool | str = True  # every inlined step gives the same block again (else why)
    block = cols.chain_blockwise[i] if cols.chain_blockwise[i] is not None else (
        row is not None and row.blockwise)  # every step works block by block
    for j, d in enumerate(tmpl.old):
        producer = done.get(d) if fuse[d] else None
        if producer is None:
            continue
        cost += producer.cost
        remake = remake and producer.remake
        if repeat is True:
            repeat = producer.repeat
        block = block and producer.blockwise
        emap = tmpl.inline(j, producer)
        written.update(emap[s] for s in producer.written)
        if j in own_written:  # written over: the inlined value may be a view of its inputs
            written.update(emap)
        label.insert(0, producer.label)
    func = graph.funcs[i]
    rewrite = getattr(func, "fuse_rewrite", None)
    extra = 0
    if rewrite is not None and not tmpl.kwargs and len(label) > 1:
        better = rewrite(tmpl.args)
        if better is not None:
            func, tmpl.args, extra = better
    out = int(cols.nbytes[i] or 0) if cols.nbytes is not None else 0
    if row is not None and row.view:  # shares its input's memory
        out = 0
    remake = remake and (cols.remake[i] if cols.remake[i] is not None
                         else row.remake if row is not None else False)
    if repeat is True:
        repeat = _own_repeat(graph, i, cols.repeatable[i], label[-1])
    return _Fused(func, tmpl.args, tmpl.kwargs, tmpl.deps, "+".join(label), cost, written,
                  out, _own_step(graph, i, cols, out, extra), remake, block, repeat)


def _own_step(graph: TaskGraph, i: int, cols: _Columns, out: int, extra: int) -> int:
    """The bytes task ``i``'s own step works on: of a task fused in an earlier pass, its
    recorded step; else its result and temporaries (a ufunc makes none, other steps about
    ``temp_factor`` results more), or its own working set if larger, plus ``extra`` (of a
    rewrite of its call)."""
    if cols.step_working[i] is not None:
        return cols.step_working[i]
    kinds = cols.kinds
    row = cols.rows[kinds[i]] if kinds is not None else None
    factor = 0.0 if isinstance(graph.funcs[i], np.ufunc) else (
        row.temp_factor if row is not None else 1.0)
    return max(int(out * (1 + factor)), cols.own_working[i] or 0) + extra


def _uncount_chains(stats: FuseStats, names: list | None, mask: np.ndarray) -> None:
    """Chains of an earlier pass that are fused further now (the tasks of ``mask``) are
    no longer chains of their own."""
    if not stats.chains or names is None:
        return
    for i in np.flatnonzero(mask).tolist():
        left = stats.chains.get(names[i], 0) - 1
        if left > 0:
            stats.chains[names[i]] = left
        elif left == 0:
            del stats.chains[names[i]]


def _rebuild(graph: TaskGraph, fuse: np.ndarray, stats: FuseStats) -> tuple[TaskGraph,
                                                                           FuseStats]:
    """The graph without the fused tasks; only their consumers are rewritten, every other
    task's columns are copied as they are."""
    n = len(graph)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.dep_ptr))
    absorbs = np.zeros(n, dtype=bool)
    absorbs[src[fuse[graph.dep_idx]]] = True
    absorbs &= ~fuse
    cols = _Columns.of(graph)
    _uncount_chains(stats, cols.names, fuse | absorbs)
    inlined: dict[int, _Fused] = {}
    rewritten: dict[int, _Fused] = {}
    for i in _work_order(graph, fuse | absorbs):
        task = _fuse_task(graph, i, fuse, cols, inlined)
        if fuse[i]:
            inlined[i] = task
        else:
            rewritten[i] = task
            stats.chains[task.label] = stats.chains.get(task.label, 0) + 1
    fused = _assemble(graph, fuse, absorbs, rewritten)
    stats.after = len(fused)
    return fused, stats


def _kept_csr(graph: TaskGraph, keep: np.ndarray, new_of_old: np.ndarray,
              absorbs: np.ndarray, rewritten: dict[int, _Fused]) -> tuple[np.ndarray,
                                                                         np.ndarray]:
    """The dependency CSR of the kept tasks: a task that absorbed none keeps its
    dependencies (renumbered), a rewritten one gets its new ones."""
    counts = np.diff(graph.dep_ptr)
    new_counts = counts[keep].copy()
    for i, task in rewritten.items():
        new_counts[new_of_old[i]] = len(task.deps)
    ptr = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(new_counts, out=ptr[1:])
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    plain = keep[~absorbs[keep]]
    if len(plain):
        pc = counts[plain]
        starts_new = ptr[new_of_old[plain]]
        starts_old = graph.dep_ptr[plain]
        idx[concat_ranges(starts_new, pc)] = new_of_old[
            graph.dep_idx[concat_ranges(starts_old, pc)]]
    nol = new_of_old.tolist()
    for i, task in rewritten.items():
        k = nol[i]
        idx[ptr[k] : ptr[k + 1]] = [nol[d] for d in task.deps]
    return ptr, idx


def _assemble(graph: TaskGraph, fuse: np.ndarray, absorbs: np.ndarray,
              rewritten: dict[int, _Fused]) -> TaskGraph:
    """The graph of the kept tasks (those not ``fuse``d), the ``rewritten`` ones with
    their new calls, dependencies and fusion columns."""
    n = len(graph)
    keep = np.flatnonzero(~fuse)
    new_of_old = np.full(n, -1, dtype=np.int64)
    new_of_old[keep] = np.arange(len(keep), dtype=np.int64)
    ptr, idx = _kept_csr(graph, keep, new_of_old, absorbs, rewritten)
    keep_l = keep.tolist()
    m = len(keep_l)
    keys = [graph.keys[i] for i in keep_l]
    funcs = [graph.funcs[i] for i in keep_l]
    args_col = [graph.args[i] for i in keep_l]
    modes = bytearray(graph.modes[i] for i in keep_l)
    meta = {c: [col[i] for i in keep_l] for c, col in graph.meta.items()}
    meta.setdefault("name", [None] * m)
    if any(t.cost for t in rewritten.values()):
        meta.setdefault("cost", [None] * m)
    if any(t.written for t in rewritten.values()):
        meta.setdefault("overwrites", [None] * m)
    for column in ("working", "remake", "repeatable", "step_working", "chain_blockwise"):
        meta.setdefault(column, [None] * m)
    nol = new_of_old.tolist()
    kwargs_col = {nol[i]: kw for i, kw in graph.kwargs.items() if nol[i] >= 0}
    for i, task in rewritten.items():
        k = nol[i]
        funcs[k] = task.func
        args_col[k] = task.args
        modes[k] = MODE_FLAT if all(is_plain_arg(a) for a in task.args) else MODE_NESTED
        if task.kwargs:
            kwargs_col[k] = task.kwargs
        else:
            kwargs_col.pop(k, None)
        _record(meta, k, task)
    index = dict(zip(keys, range(len(keys)), strict=True))
    return TaskGraph(keys=keys, index=index, funcs=funcs, args=args_col, kwargs=kwargs_col,
                     modes=modes, dep_ptr=ptr, dep_idx=idx, meta=meta)


def _record(meta: dict[str, list], k: int, task: _Fused) -> None:
    """Write what fusion knows of the fused ``task`` into row ``k`` of its columns."""
    meta["name"][k] = task.label
    if "overwrites" in meta:
        meta["overwrites"][k] = tuple(sorted(task.written))
    meta["working"][k] = task.working()
    meta["step_working"][k] = task.step
    meta["chain_blockwise"][k] = task.blockwise
    meta["remake"][k] = task.remake
    meta["repeatable"][k] = task.repeat
    if task.cost:
        meta["cost"][k] = task.cost


def _own_repeat(graph: TaskGraph, i: int, value: Any, label: str) -> bool | str:
    """Whether task ``i``'s own step gives the same result again: ``True``, or why not
    (its ``repeatable`` column ``value``, else its op kind's row), naming the step."""
    if value is True or (isinstance(value, str) and value):
        return value
    kinds = graph.meta.get("kind")
    kind = None if kinds is None else kinds[i]
    if value is None:
        why = unrepeatable_reason(kind)
        return f"{label} ({kind or 'other'}): {why}" if why else True
    return f"{label} ({kind or 'other'}): declared not repeatable"


def _work_order(graph: TaskGraph, mask: np.ndarray) -> list[int]:
    """The tasks of ``mask`` with every task after its dependencies."""
    src = np.repeat(np.arange(len(graph), dtype=np.int64), np.diff(graph.dep_ptr))
    if (graph.dep_idx < src).all():
        return np.flatnonzero(mask).tolist()
    return [i for i in graph.topological_order().tolist() if mask[i]]


_PENDING_BASE = 1 << 40  # marks a dependency slot still to be replaced by an inlined call
