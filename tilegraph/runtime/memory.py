"""Memory budgets, task working-memory estimates, and the spill store.

The budget (``memory_limit=``) is the bytes of task results a worker process may hold at
once. The executor admits a ready task only when the results it holds, the estimates of the
tasks running, and the new task's own estimate fit under it; when they do not, the coldest
results (those whose next use is furthest away) go to a :class:`SpillStore` on disk and come
back just before a consumer runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.graph.kinds import kind_info
from tilegraph.util import human, parse_bytes  # noqa: F401 - re-exported

DEFAULT_FRACTION = 0.75  # of the machine's memory, when no limit is given


def default_limit() -> int:
    """A safe budget when none is given: a fraction of the machine's memory."""
    import psutil

    return int(psutil.virtual_memory().total * DEFAULT_FRACTION)


def task_estimates(graph: Any) -> list[int]:
    """Estimated bytes each task adds while it runs: its output plus temporaries.

    Temporaries are the output's bytes times the ``temp_factor`` of the task's op kind
    (:mod:`tilegraph.graph.kinds`: views and in-place accumulations need none); a fused chain
    of a kind with ``chain_temporaries`` (elementwise ops, per-block reductions, user
    functions) makes one more temporary block per step it fuses (its name joins the steps
    with ``+``)."""
    n = len(graph)
    nb = graph.meta.get("nbytes")
    if nb is None:
        return [0] * n
    kinds = graph.meta.get("kind") or [None] * n
    names = graph.meta.get("name") or [None] * n
    rows = {k: kind_info(k) for k in set(kinds)}
    out = []
    for i in range(n):
        size = nb[i] or 0
        row = rows[kinds[i]]
        steps = names[i].count("+") if names[i] and row.chain_temporaries else 0
        out.append(int(size * (1 + row.temp_factor + steps)))
    return out


_allocator_tuned = False


def return_freed_blocks_to_os() -> None:
    """Make glibc's malloc give every large freed block back to the OS at once.

    glibc raises its mmap threshold after large frees (up to 32 MiB), after which blocks of
    that size come from heap arenas that keep freed memory: the process's resident set then
    stays far above the bytes it holds. A fixed threshold of 1 MiB keeps large blocks in
    their own mappings, released on free. Process-wide, done once, only on glibc and only
    when a run has an explicit memory limit; elsewhere it does nothing.
    """
    global _allocator_tuned
    if _allocator_tuned:
        return
    _allocator_tuned = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(ctypes.c_int(-3), ctypes.c_int(1 << 20))  # M_MMAP_THRESHOLD
        libc.mallopt(ctypes.c_int(-1), ctypes.c_int(1 << 20))  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


class MemoryLimitError(MemoryError):
    """A task needs more memory than the budget allows, found before anything ran."""


def check_fits(graph: Any, estimates: Sequence[int], limit: int) -> None:
    """Raise :class:`MemoryLimitError` for the first task whose inputs, output and
    temporaries together cannot fit under ``limit``, naming its op and a block size that
    would."""
    nb = graph.meta.get("nbytes")
    if nb is None:
        return
    ptr, idx = graph.dep_ptr.tolist(), graph.dep_idx.tolist()
    for i in range(len(graph)):
        inputs = sum(nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]])
        need = inputs + estimates[i]
        if need > limit:
            largest = max([nb[i] or 0] + [nb[d] or 0 for d in idx[ptr[i]:ptr[i + 1]]])
            ratio = need / limit
            advice = max(1, int(largest / ratio * 0.8)) if largest else 0
            raise MemoryLimitError(
                f"task {graph.keys[i]!r} (op {graph.opname(i)}) needs about {human(need)} "
                f"(inputs {human(inputs)}, output and temporaries {human(estimates[i])}), more "
                f"than memory_limit={human(limit)}: use smaller blocks (blocks of at most "
                f"about {human(advice)}) or a larger memory_limit"
            )


def spillable(value: Any) -> bool:
    """Whether a result can go to disk: a NumPy array of a plain (non-object) dtype."""
    return type(value) is np.ndarray and not value.dtype.hasobject and value.size > 0


@dataclass(frozen=True)
class SpillRecord:
    """A result on disk: raw bytes of an array of ``shape`` and ``dtype`` at ``path``."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int


class SpillStore:
    """A private directory of raw array files, removed with everything in it by
    :meth:`close` (after success, failure or cancellation alike)."""

    def __init__(self, parent: str | None = None):
        self._dir: str | None = None
        self._parent = parent
        self._count = 0
        self._lock = threading.Lock()

    @property
    def path(self) -> str | None:
        return self._dir

    def _new_path(self) -> str:
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="tilegraph-spill-", dir=self._parent)
            self._count += 1
            return os.path.join(self._dir, f"{self._count}.bin")

    def write(self, value: np.ndarray) -> SpillRecord:
        """Write an array's raw bytes (no pickling) to a new file."""
        path = self._new_path()
        arr = np.ascontiguousarray(value)
        with open(path, "wb") as f:
            arr.tofile(f)
        return SpillRecord(path, arr.shape, arr.dtype, arr.nbytes)

    @staticmethod
    def read(record: SpillRecord) -> np.ndarray:
        """The array of a record, read back into memory."""
        return np.fromfile(record.path, dtype=record.dtype).reshape(record.shape)

    @staticmethod
    def delete(record: SpillRecord) -> None:
        try:
            os.remove(record.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Remove the spill directory and every file in it."""
        with self._lock:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
