"""Accumulation chains: the one way a reduction folds many blocks into one as they arrive.

A matrix product's accumulations (:func:`tilegraph.algebra.blocks.group_by_join`: a product,
then ``acc += a @ b`` step after step) and a reduction's large partials
(:func:`tilegraph.algebra.blocks.reduce_by_key`: ``acc = combine(acc, partial)``, in place
where the combine is a ufunc) are both emitted by :func:`accumulation_chains` as tasks of
kind ``"accumulate"``, one chain per worker and output block, so that at most one partial
result per chain is alive; :func:`fold_chains` says when a reduction's partials are large
enough under a run's memory limit to fold this way rather than as a tree.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

Coord = tuple[int, ...]


def combine_all(op: Callable) -> Callable:
    """A task body folding its inputs with the binary ``op`` (a reduction step). Where
    ``op`` is a NumPy ufunc, the first combination makes a new array and the rest are
    written into it (:func:`accumulate_into`), rather than one new block per input.

    >>> a, b, c = np.ones(2), np.ones(2), np.ones(2)
    >>> combine_all(np.add)(a, b, c).tolist(), a.tolist()  # the inputs are left alone
    ([3.0, 3.0], [1.0, 1.0])
    """
    into = accumulate_into(op) if isinstance(op, np.ufunc) else None

    def combine(*parts: Any) -> Any:
        acc = parts[0]
        for k, p in enumerate(parts[1:]):
            acc = op(acc, p) if into is None or k == 0 else into(acc, p)
        return acc

    combine.__name__ = f"combine_{getattr(op, '__name__', 'op')}"
    return combine


def accumulate_into(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """An accumulation step of a reduction: ``acc`` combined with the next partial ``part``
    by the associative ``op``, written into ``acc`` when ``op`` is a NumPy ufunc (or wraps
    one: its ``__wrapped__``) and ``acc`` is a writeable array that holds the result's
    dtype and shape; else a new value. A partial of ``None`` (a block of no elements) is
    skipped.

    >>> acc = np.zeros(3)
    >>> step = accumulate_into(np.add)
    >>> step(acc, np.arange(3.0)) is acc, acc.tolist()
    (True, [0.0, 1.0, 2.0])
    >>> step(np.zeros(3, dtype=np.int8), np.full(3, 0.5)).dtype  # float: a new array
    dtype('float64')
    """
    ufunc = getattr(op, "__wrapped__", op)
    ufunc = ufunc if isinstance(ufunc, np.ufunc) else None

    def accumulate(acc: Any, part: Any) -> Any:
        if part is None:
            return acc
        if acc is None:
            return part
        if (ufunc is not None and type(acc) is np.ndarray and type(part) is np.ndarray
                and acc.flags.writeable and np.result_type(acc, part) == acc.dtype
                and np.broadcast_shapes(acc.shape, part.shape) == acc.shape):
            return ufunc(acc, part, out=acc)
        return op(acc, part)

    accumulate.__name__ = f"{getattr(op, '__name__', 'op')}_accumulate"
    return accumulate


def accumulation_chains(badd: Callable, label: str, out: Coord, items: list, chains: int,
                         start: Callable[[Hashable, Any], Hashable],
                         step: Callable[[Hashable, Hashable, Any], None],
                         add: Callable, nbytes: Any, extra: dict[str, Any]) -> None:
    """The tasks of output block ``out`` as accumulation chains (the one mechanism of
    :func:`group_by_join` and :func:`reduce_by_key`): ``items`` go round-robin to
    ``chains`` chains (fewer when there are fewer items); a chain starts from its first
    item (``start(key, item)`` returns the key of the chain's first accumulator: a task
    it adds under ``key``, or an existing block), and each next item is folded in by an
    ``"accumulate"`` task that ``step(key, acc, item)`` adds under ``key``: its first
    dependency the accumulator ``acc`` (the key of the step before), which it may write
    over: the accumulator is private to its chain, each consumed once, by the next step.
    The last step of a single chain is the output block ``(label, *out)``; the ends of
    several chains (or one chain that folded nothing) are combined by an ``add`` task
    (kind ``"reduce"``)."""
    nchains = max(1, min(chains, len(items)))
    final = (label, *out)
    ends = []
    for c in range(nchains):
        part = items[c::nchains]
        prev = None
        for t, item in enumerate(part):
            key = final if (t == len(part) - 1 and nchains == 1) else (
                label + "-acc", *out, c, t)
            if prev is None:
                prev = start(key, item)
                continue
            step(key, prev, item)
            prev = key
        ends.append(prev)
    if ends != [final]:
        badd(final, combine_all(add), deps=ends, kind="reduce", nbytes=nbytes, coords=out,
             **extra)


def chain_tasks(nitems: int, chains: int, starts_are_tasks: bool) -> int:
    """Tasks :func:`accumulation_chains` adds for ``nitems`` items in ``chains`` chains."""
    nchains = max(1, min(chains, nitems))
    tasks = nitems - nchains + (nchains if starts_are_tasks else 0)
    ends_final = nchains == 1 and (nitems > 1 or starts_are_tasks)
    return tasks + (0 if ends_final else 1)


REDUCE_SHARE = 0.25  # of the memory limit: the partials a reduction may hold at once


def fold_chains(part_bytes: int | None, nparts: int, split_every: int, options: Any) -> int:
    """How the ``nparts`` partials of one output block of an associative reduction are
    combined in a run of ``options``: ``0``, as a tree of fan-in ``split_every``, when the
    partials such a tree holds at once (:func:`tree_held`) fit ``REDUCE_SHARE`` of the run's
    memory limit (or the sizes or the limit are unknown); else as they arrive, into one
    accumulator per worker (fewer when fewer fit that share), so that the partials held
    follow the limit, not the tree.

    >>> from types import SimpleNamespace as Run
    >>> fold_chains(100 << 20, 439, 8, Run(memory_limit=2 << 30, workers=2))
    2
    >>> fold_chains(8, 439, 8, Run(memory_limit=2 << 30, workers=2))
    0
    """
    limit = None if options is None else options.memory_limit
    if not part_bytes or limit is None or nparts <= 2:
        return 0
    share = REDUCE_SHARE * limit
    if tree_held(nparts, split_every) * part_bytes <= share:
        return 0
    from tilegraph.util import cores

    workers = getattr(options, "workers", None) or cores()
    return max(1, min(workers, nparts, int(share // part_bytes)))


def tree_held(n: int, split_every: int) -> int:
    """The partials a tree of fan-in ``split_every`` over ``n`` blocks holds at once, run
    depth first: up to ``split_every - 1`` finished ones waiting at each of its levels, and
    the one being made.

    >>> tree_held(8, 8), tree_held(100, 8), tree_held(439, 8)
    (8, 16, 21)
    """
    held, level = 1, n
    while level > 1:
        held += min(split_every, level) - 1
        level = -(-level // split_every)
    return held


def tree_count(n: int, split_every: int) -> int:
    """Tasks of a reduction tree of fan-in ``split_every`` over ``n`` blocks."""
    total = 0
    while n > split_every:
        total += sum(1 for g in range(0, n, split_every) if n - g > 1)
        n = -(-n // split_every)
    return total + 1
