"""Snapshots of stored inputs, taken when a plan is made and checked by every block read.

A plan reads its inputs block by block, by path, while it runs. If an input is replaced or
rewritten meanwhile (another process saves over the ``.npy`` file, an overwrite swaps the zarr
directory), some blocks would come from the old data and some from the new. Every reader
task therefore carries an :class:`InputSnapshot` of what was planned (the file's or
directory's identity, size and modification time, the metadata document of a zarr array, the
shape and dtype) and compares it with what it opens, before and after reading: a changed
input is an :class:`InputChangedError` naming the file, never a mixed result.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

__all__ = ["InputChangedError", "InputSnapshot", "snapshot_of"]

# the metadata documents of a zarr array or group (format 3, then format 2)
_ZARR_METADATA = ("zarr.json", ".zarray", ".zgroup")


class InputChangedError(RuntimeError):
    """A stored input changed after the plan reading it was made."""


@dataclass(frozen=True)
class InputSnapshot:
    """What a plan saw of one stored input: ``path``; ``identity``, the device, inode, size
    and modification time (ns) of the file (``.npy``) or of the directory and its metadata
    document (zarr); ``metadata``, a digest of the zarr metadata document (``""`` for a
    file); ``shape`` and ``dtype`` (``None`` when not known, e.g. a sparse group)."""

    path: str
    identity: tuple[int, ...]
    metadata: str
    shape: tuple[int, ...] | None
    dtype: str | None

    def check(self, identity: tuple[int, ...], metadata: str = "",
              shape: tuple[int, ...] | None = None, dtype: object = None) -> None:
        """Raise :class:`InputChangedError` if what was opened is not what was planned."""
        what = []
        if identity != self.identity:
            what.append(_identity_change(self.identity, identity))
        if metadata != self.metadata:
            what.append("its metadata changed")
        if shape is not None and self.shape is not None and tuple(shape) != self.shape:
            what.append(f"shape {self.shape} is now {tuple(shape)}")
        if dtype is not None and self.dtype is not None and str(dtype) != self.dtype:
            what.append(f"dtype {self.dtype} is now {dtype}")
        if what:
            raise InputChangedError(
                f"input {self.path!r} changed after the plan reading it was made "
                f"({'; '.join(what)}): blocks read now would mix old and new data. Build "
                "the array again (from_npy/from_zarr) to read the new contents, and do not "
                "modify inputs while a computation reads them")


def _identity_change(old: tuple[int, ...], new: tuple[int, ...]) -> str:
    if not new:
        return "it was removed"
    if old[:2] != new[:2]:
        return "it was replaced by another file"
    if old[2] != new[2]:
        return f"its size changed from {old[2]} to {new[2]} bytes"
    return "it was modified"


def _stat_identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def file_identity(fd_or_path: int | str) -> tuple[int, ...]:
    """Device, inode, size and modification time of an open file or a path (``()``: gone)."""
    try:
        st = os.fstat(fd_or_path) if isinstance(fd_or_path, int) else os.stat(fd_or_path)
    except FileNotFoundError:
        return ()
    return _stat_identity(st)


def store_identity(path: str) -> tuple[tuple[int, ...], str]:
    """The identity of a zarr directory (the directory's and its metadata document's) and a
    digest of that document (``((), "")``: gone)."""
    try:
        top = os.stat(path)
    except FileNotFoundError:
        return (), ""
    for name in _ZARR_METADATA:
        meta = os.path.join(path, name)
        try:
            with open(meta, "rb") as f:
                st = os.fstat(f.fileno())
                digest = hashlib.sha1(f.read(), usedforsecurity=False).hexdigest()
        except (FileNotFoundError, NotADirectoryError):
            continue
        return (top.st_dev, top.st_ino, *_stat_identity(st)), digest
    return (top.st_dev, top.st_ino), ""


def snapshot_of(path: str, shape: tuple[int, ...] | None = None, dtype: object = None
                ) -> InputSnapshot:
    """The snapshot of the input at ``path`` now: a file (``.npy``) or a zarr directory."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        identity, metadata = store_identity(path)
    else:
        identity, metadata = file_identity(path), ""
    return InputSnapshot(path, identity, metadata,
                         None if shape is None else tuple(int(s) for s in shape),
                         None if dtype is None else str(dtype))
