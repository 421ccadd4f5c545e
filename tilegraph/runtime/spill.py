"""The spill store: results written to disk as raw bytes under memory pressure and read
back, in a private directory per run (:class:`SpillStore`), and the checksum of a block
dropped to be made again (:func:`block_digest`). The memory manager
(:mod:`tilegraph.runtime.memory`) decides what goes there.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import threading
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.debris import SPILL_PREFIX, disown, own, owner_tag, remove_dead_spills
from tilegraph.util import human


def spillable(value: Any) -> bool:
    """Whether a result can go to disk: a NumPy array of a plain (non-object) dtype."""
    return type(value) is np.ndarray and not value.dtype.hasobject and value.size > 0


@dataclass(frozen=True)
class SpillRecord:
    """A result on disk: raw bytes of an array of ``shape`` and ``dtype`` at ``path``; or,
    with ``path == ""``, a result dropped to be made again, ``digest`` its checksum
    (:func:`block_digest`; None when it has none) and ``working`` the bytes its remake
    holds beside it (the inputs of its step, made again for it when they are gone)."""

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    digest: int | None = None
    working: int = 0

    @property
    def room(self) -> int:
        """The bytes bringing this result back takes: its own, and its remake's inputs."""
        return self.nbytes + self.working


def block_digest(value: Any) -> int | None:
    """A checksum of a block: crc32 of a NumPy array's bytes, its shape and its dtype
    (None for any other result, which is made again unchecked).

    >>> block_digest(np.arange(4.0)) == block_digest(np.arange(4.0))
    True
    >>> block_digest(np.arange(4.0)) == block_digest(np.arange(4.0).reshape(2, 2))
    False
    """
    if type(value) is not np.ndarray or value.dtype.hasobject:
        return None
    flat = np.ascontiguousarray(value).reshape(-1)  # the values in C order, whatever the layout
    head = zlib.crc32(f"{value.shape}{value.dtype.str}".encode())
    return zlib.crc32(flat.view(np.uint8), head)


def _io_error(exc: OSError, what: str, path: str) -> OSError:
    """An ``OSError`` saying ``what`` failed, with the errno (EIO if the cause had none) and
    the path; the same subclass as ``exc`` (e.g. PermissionError) where it has an errno."""
    code = exc.errno if exc.errno is not None else errno.EIO
    reason = exc.strerror or str(exc) or os.strerror(code)
    cls = type(exc) if exc.errno is not None else OSError
    try:
        return cls(code, f"{what}: {reason}", path)
    except TypeError:  # an OSError subclass with another constructor
        return OSError(code, f"{what}: {reason}", path)


class SpillStore:
    """A private directory of raw array files, removed with everything in it by
    :meth:`close` (after success, failure or cancellation alike). Its name,
    ``tilegraph-spill-<host>-<pid>-<random>``, names the owning process, so that the
    directory of a killed process is removed by the next run (:func:`remove_dead_spills`) or
    by ``tilegraph clean``; a run stopped by a signal removes it before the process ends
    (:mod:`tilegraph.runtime.signals`)."""

    def __init__(self, parent: str | None = None):
        self._dir: str | None = None
        self._parent = parent
        self._count = 0
        self._lock = threading.Lock()
        remove_dead_spills(parent)

    @property
    def path(self) -> str | None:
        return self._dir

    def _new_path(self) -> str:
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{owner_tag()}-",
                                             dir=self._parent)
                own(self._dir)  # removed too if a signal stops the run
            self._count += 1
            return os.path.join(self._dir, f"{self._count}.bin")

    def write(self, value: np.ndarray) -> SpillRecord:
        """Write an array's raw bytes (no pickling) to a new file. A failed write (a full
        disk, a quota) removes the partial file and raises an ``OSError`` with the errno,
        the path and the bytes that were to be written."""
        path = self._new_path()
        arr = np.ascontiguousarray(value)
        try:
            with open(path, "wb") as f:
                f.write(arr.reshape(-1).view(np.uint8).data)
        except OSError as exc:
            if os.path.isfile(path):
                os.remove(path)
            raise _io_error(exc, f"spilling a result of {human(arr.nbytes)} to disk "
                                 f"(spill_dir {os.path.dirname(path)!r}) failed", path) from exc
        return SpillRecord(path, arr.shape, arr.dtype, arr.nbytes)

    @staticmethod
    def read(record: SpillRecord) -> np.ndarray:
        """The array of a record, read back into memory (an ``OSError`` with the errno and
        the path if the file cannot be read whole)."""
        out = np.empty(record.shape, dtype=record.dtype)
        buf = out.reshape(-1).view(np.uint8)
        try:
            with open(record.path, "rb") as f:
                got = f.readinto(buf.data)
        except OSError as exc:
            raise _io_error(exc, "reading a spilled result back failed", record.path) from exc
        if got != record.nbytes:
            raise OSError(errno.EIO, f"reading a spilled result back failed: {got} of "
                                     f"{record.nbytes} bytes in the file", record.path)
        return out

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
                disown(self._dir)
                self._dir = None
