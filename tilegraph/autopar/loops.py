"""Helpers of the loops that autopar splits (see :func:`tilegraph.autopar.analysis.loop_parts`):
each chunk of a map over items runs ``[... for v in chunk_of(items, k, n)]`` on some worker,
and one step joins the chunks' results in order; a ``for`` loop that collects into lists
and dicts runs its body on each chunk into fresh ones (:func:`for_part`), and
:func:`join_for` extends the script's lists and dicts with them in order and leaves the
loop's names bound to their values after the last iteration.

>>> chunk_of([1, 2, 3, 4, 5], 1, 2), chunk_of(range(5), 0, 2)
([3, 4, 5], range(0, 2))
>>> guided_sizes(2), chunk_of(list(range(8)), 1, (2, 1, 1))
((8, 6, 4, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), [4, 5])
>>> join_parts("list", [[1, 2], [3]]), join_parts("dict", [{"a": 1}, {"b": 2}])
([1, 2, 3], {'a': 1, 'b': 2})
"""

from __future__ import annotations

import itertools
from typing import Any

_SLICEABLE = (list, tuple, range, str, bytes)


def check_workers(workers: Any) -> int:
    """``workers`` when it is an integer >= 1 (not a bool), else a ValueError naming it."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    return workers


def guided_sizes(workers: int) -> tuple[int, ...]:
    """The relative sizes of the chunks a loop split over ``workers`` processes runs in,
    in order: each takes ``1 / (2 * workers)`` of what the chunks before it left, and at
    least ``1 / (16 * workers)`` of the whole (guided self-scheduling). The processes take
    the chunks in order as they become free, so the large chunks go first and the small
    ones at the end even out the finishing times: a process slowed by the machine's other
    work, or given the costlier items, takes fewer chunks. (Equal parts, one per process,
    make the whole loop wait for the slowest process.)"""
    left, sizes = 16 * check_workers(workers), []
    while left > 0:
        size = max(left // (2 * workers), 1)
        sizes.append(size)
        left -= size
    return tuple(sizes)


def chunk_of(items: Any, k: int, n: int | tuple[int, ...]) -> Any:
    """Part ``k`` of ``items``, in order: ``n`` is the number of equal parts, or the parts'
    relative sizes (:func:`guided_sizes`). A part is a slice of a list, tuple, range,
    string or NumPy array, the keys of a dict; anything else (an iterator, a set, whose
    order another process may not repeat) is not split: part 0 is all of it, the other
    parts are empty."""
    if isinstance(n, int):
        lo, hi, total = k, k + 1, n
    else:
        lo = sum(n[:k])
        hi, total = lo + n[k], sum(n)
    if isinstance(items, _SLICEABLE) or _is_array(items):
        size = len(items)
        return items[size * lo // total: size * hi // total]
    if isinstance(items, dict):
        size = len(items)
        return list(itertools.islice(items, size * lo // total, size * hi // total))
    return items if k == 0 else ()


def _is_array(items: Any) -> bool:
    return type(items).__module__ == "numpy" and type(items).__name__ == "ndarray" and \
        items.ndim >= 1


def join_parts(kind: str, parts: list[Any]) -> Any:
    """The results of the chunks of a loop joined in order: a list (``"list"``, ``"map"``)
    or a dict (``"dict"``; a key of a later part wins, as in the loop)."""
    if kind == "dict":
        out: dict = {}
        for p in parts:
            out.update(p)
        return out
    return [x for p in parts for x in p]


def for_part(lists: tuple[str, ...], dicts: tuple[str, ...]) -> list[Any]:
    """The state of one chunk of a ``for`` loop: ``[collected, ran, last]``: fresh lists and
    dicts by name, whether an iteration ran, and the loop's names after the last one."""
    return [{**{n: [] for n in lists}, **{n: {} for n in dicts}}, False, None]


def snapshot(part: list[Any], ns: dict[str, Any], names: tuple[str, ...]) -> None:
    """Record the values of ``names`` in ``ns`` after a chunk whose iterations ran."""
    if part[1]:
        part[2] = {n: ns[n] for n in names if n in ns}


def join_for(ns: dict[str, Any], parts: list[list[Any]], lists: tuple[str, ...],
             dicts: tuple[str, ...]) -> None:
    """The chunks of a ``for`` loop, in order: the script's lists extended and its dicts
    updated in place (as the loop would have), and the loop's names bound as after its last
    iteration (left alone if no iteration ran)."""
    for collected, _, _ in parts:
        for n in lists:
            ns[n].extend(collected[n])
        for n in dicts:
            ns[n].update(collected[n])
    last = next((p[2] for p in reversed(parts) if p[1]), None)
    if last is not None:
        ns.update(last)
