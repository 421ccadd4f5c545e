"""The memory budget of a process: the default limit when none is given, the check that
every task of a plan fits the limit before anything runs, the record of what a run's memory
manager counted (:class:`MemoryFigures`), and the words a run summary uses for what was
made again or spilled. The memory manager that keeps the budget during a run
is :mod:`tilegraph.runtime.memory`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tilegraph.util import human

DEFAULT_FRACTION = 0.75  # of the machine's memory, when no limit is given


def default_limit(processes: int = 1) -> int:
    """A safe budget when none is given: a fraction of the machine's memory, divided among
    the ``processes`` on this host that each hold a budget (MPI ranks)."""
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"default_limit: processes must be a positive int, got {processes!r}")
    return int(_total_memory() * DEFAULT_FRACTION) // processes


@functools.cache
def _total_memory() -> int:
    """The machine's physical memory in bytes (asked once: it does not change). From the
    POSIX ``sysconf`` where there is one (importing psutil costs a first run 10-16 ms);
    psutil elsewhere."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        pages = size = -1
    if pages > 0 and size > 0:
        return int(pages) * int(size)
    import psutil

    return int(psutil.virtual_memory().total)


def remake_text(run: Any) -> str:
    """What a run made again and what it spilled instead because its source is not
    repeatable, in words (``""`` when neither happened); ``run`` (a run summary, a
    ``RunEnd`` event) has ``remade``, ``spilled_unrepeatable`` and
    ``unrepeatable_reasons``, dicts by op kind.

    >>> from types import SimpleNamespace as Run
    >>> text = remake_text(Run(remade={"random": 4}, spilled_unrepeatable={"load": 2},
    ...                        unrepeatable_reasons={"load": "from_array of a Sensor: ..."}))
    >>> for part in text.split("; ")[1:]:
    ...     print(part)
    remade 4 blocks (random 4)
    spilled, not remade (source not repeatable) 2 blocks (load 2: from_array of a Sensor: ...)
    """
    text = ""
    if run.remade:
        counts = ", ".join(f"{k} {n}" for k, n in sorted(run.remade.items()))
        text += f"; remade {sum(run.remade.values())} blocks ({counts})"
    if run.spilled_unrepeatable:
        counts = ", ".join(
            f"{k} {n}" + (f": {run.unrepeatable_reasons[k]}"
                          if run.unrepeatable_reasons.get(k) else "")
            for k, n in sorted(run.spilled_unrepeatable.items()))
        text += (f"; spilled, not remade (source not repeatable) "
                 f"{sum(run.spilled_unrepeatable.values())} blocks ({counts})")
    return text


class MemoryLimitError(MemoryError):
    """A task needs more memory than the budget allows, found before anything ran."""


def check_fits(graph: Any, estimates: Sequence[int], limit: int) -> None:
    """Raise :class:`MemoryLimitError` for the first task whose inputs, output and
    temporaries together cannot fit under ``limit``, naming its op and a block size that
    would."""
    n = len(graph)
    nb = graph.meta.get("nbytes")
    working = graph.meta.get("working") or [None] * n
    if nb is None and not any(working):
        return
    nb = nb or [None] * n
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    for i in range(n):
        inputs = sum(nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]])
        need = inputs + estimates[i]
        if need > limit:
            largest = max([nb[i] or 0] + [nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]]])
            chain = ""
            if working[i] is not None and working[i] >= estimates[i] > (nb[i] or 0):
                largest = max(largest, working[i])
                chain = (f"; its fused steps hold up to {human(working[i])} at once "
                         "inside the task")
            ratio = need / limit
            advice = max(1, int(largest / ratio * 0.8)) if largest else 0
            raise MemoryLimitError(
                f"task {graph.keys[i]!r} (op {graph.opname(i)}) needs about {human(need)} "
                f"(inputs {human(inputs)}, output and temporaries {human(estimates[i])}"
                f"{chain}), more than memory_limit={human(limit)}: use smaller blocks "
                f"(blocks of at most about {human(advice)}) or a larger memory_limit"
            )


@dataclass(frozen=True)
class MemoryFigures:
    """What a run's memory manager counted (:meth:`MemoryManager.figures`): the most bytes
    of results held at once (``peak_live``), bytes written to disk and read back
    (``spilled_bytes``, ``unspilled_bytes``), bytes of dropped results made again
    (``recomputed_bytes``), blocks made again per op kind (``remade``), blocks spilled per
    op kind because their source may not give the same block again
    (``spilled_unrepeatable``) and why (``unrepeatable_reasons``); with a ``memory_limit``
    given, the process's largest resident set during the run (``peak_rss``, sampled) and
    its resident set when the run started (``rss_baseline``); 0 when not watched."""

    peak_live: int = 0
    spilled_bytes: int = 0
    unspilled_bytes: int = 0
    recomputed_bytes: int = 0
    remade: dict[str, int] = field(default_factory=dict)
    spilled_unrepeatable: dict[str, int] = field(default_factory=dict)
    unrepeatable_reasons: dict[str, str] = field(default_factory=dict)
    peak_rss: int = 0
    rss_baseline: int = 0
