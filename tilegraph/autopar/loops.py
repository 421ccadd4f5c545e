"""Helpers of the loops that autopar splits (see :func:`tilegraph.autopar.analysis.loop_parts`):
each chunk of a map over items runs ``[... for v in chunk_of(items, k, n)]`` on some worker,
and one step joins the chunks' results in order.

>>> chunk_of([1, 2, 3, 4, 5], 1, 2), chunk_of(range(5), 0, 2)
([3, 4, 5], range(0, 2))
>>> join_parts("list", [[1, 2], [3]]), join_parts("dict", [{"a": 1}, {"b": 2}])
([1, 2, 3], {'a': 1, 'b': 2})
"""

from __future__ import annotations

import itertools
from typing import Any

_SLICEABLE = (list, tuple, range, str, bytes)


def chunk_of(items: Any, k: int, n: int) -> Any:
    """Part ``k`` of ``n`` of ``items``, in order: a slice of a list, tuple, range, string
    or NumPy array, the keys ``k`` of a dict; anything else (an iterator, a set, whose
    order another process may not repeat) is not split: part 0 is all of it, the other
    parts are empty."""
    if isinstance(items, _SLICEABLE) or _is_array(items):
        size = len(items)
        return items[size * k // n: size * (k + 1) // n]
    if isinstance(items, dict):
        size = len(items)
        return list(itertools.islice(items, size * k // n, size * (k + 1) // n))
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
