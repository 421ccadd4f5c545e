"""Blocks of ``.npy`` files: header inspection, block reads through a memory map, and an
atomic block writer.

Reads map the file read-only, copy the requested block out and unmap again, so no file stays
mapped between calls. Writes go to a hidden temporary file next to the destination and appear
at the destination in one ``os.replace`` on commit: a reader never sees a partially written
file at ``path``.
"""

from __future__ import annotations

import os
import threading
import weakref
from types import TracebackType
from typing import Any, BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from tilegraph.io._atomic import (
    check_block,
    check_destination,
    check_not_exists,
    fsync_parent,
    fsync_path,
    remove_path,
    temp_sibling,
)

__all__ = ["NpyWriter", "npy_info", "read_npy_block"]


def _open_npy(path: str) -> BinaryIO:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise FileNotFoundError(f"no .npy file at {path!r}") from None
    except IsADirectoryError:
        raise ValueError(f"{path!r} is a directory, not an .npy file") from None


def _read_header(fp: BinaryIO, path: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset of an open ``.npy`` file, after checking it is usable."""
    try:
        version = npy_format.read_magic(fp)
        if version == (1, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran_order, dtype = npy_format.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except (ValueError, EOFError, SyntaxError) as exc:
        raise ValueError(f"{path!r} is not a readable .npy file: {exc}") from exc
    if fortran_order and len(shape) > 1:
        raise ValueError(
            f"{path!r} holds a Fortran-ordered array, which is not supported: blocks are read "
            "and written in C order; save it again with np.save(path, np.ascontiguousarray(a))"
        )
    if dtype.hasobject:
        raise ValueError(
            f"{path!r} holds an array of Python objects (dtype {dtype}), which is not "
            "supported: such files are pickles and cannot be read block by block"
        )
    offset = fp.tell()
    needed = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = os.fstat(fp.fileno()).st_size
    if size < needed:
        raise ValueError(
            f"{path!r} is truncated: its header describes {needed} bytes but the file has "
            f"{size}"
        )
    return tuple(int(s) for s in shape), dtype, offset


def npy_info(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of an ``.npy`` file, read from its header only.

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "a.npy"), np.zeros((3, 4), dtype=np.float32))
    >>> npy_info(os.path.join(d, "a.npy"))
    ((3, 4), dtype('float32'))
    >>> shutil.rmtree(d)
    """
    path = os.fspath(path)
    with _open_npy(path) as fp:
        shape, dtype, _ = _read_header(fp, path)
    return shape, dtype


def read_npy_block(path: str | os.PathLike[str], slices: Any) -> np.ndarray:
    """A copy of ``array[slices]`` from an ``.npy`` file, read through a read-only memory map.

    The map is released before returning; the result owns its memory.

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> np.save(os.path.join(d, "a.npy"), np.arange(12).reshape(3, 4))
    >>> read_npy_block(os.path.join(d, "a.npy"), (slice(1, 3), slice(0, 2)))
    array([[4, 5],
           [8, 9]])
    >>> shutil.rmtree(d)
    """
    path = os.fspath(path)
    with _open_npy(path) as fp:
        shape, dtype, offset = _read_header(fp, path)
        mm = np.memmap(fp, mode="r", dtype=dtype, shape=shape, offset=offset, order="C")
    try:
        return np.array(mm[slices])
    finally:
        del mm


class NpyWriter:
    """Writes an ``.npy`` file block by block; the file appears at ``path`` only on commit.

    The data goes to a hidden temporary file ``.<basename>.tmp-<uuid4 hex>.npy`` in the same
    directory, mapped into memory. ``commit()`` flushes it (and fsyncs it when ``fsync`` is
    true) and renames it to ``path`` with ``os.replace``, so a reader can never see a
    partially written array at ``path``, and an interrupted write leaves nothing there.
    ``abort()`` deletes the temporary file. As a context manager the writer commits on a
    clean exit and aborts on an exception.

    ``write`` may be called from several threads at once for disjoint regions; every
    ``write`` must have returned before ``commit``.

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "a.npy")
    >>> with NpyWriter(path, (2, 3), "int64") as w:
    ...     w.write((slice(0, 1), slice(0, 3)), [[1, 2, 3]])
    ...     w.write((slice(1, 2), slice(0, 3)), [[4, 5, 6]])
    >>> np.load(path)
    array([[1, 2, 3],
           [4, 5, 6]])
    >>> shutil.rmtree(d)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shape: tuple[int, ...],
        dtype: Any,
        *,
        overwrite: bool = False,
        fsync: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.overwrite = overwrite
        self.fsync = fsync
        if any(s < 0 for s in self.shape):
            raise ValueError(f"NpyWriter({self.path!r}): shape {self.shape} has a negative length")
        if self.dtype.hasobject:
            raise ValueError(
                f"NpyWriter({self.path!r}): dtype {self.dtype} holds Python objects, which "
                "cannot be written block by block"
            )
        check_destination(self.path, overwrite)
        self._tmp = temp_sibling(self.path, ".npy")
        self._lock = threading.Lock()
        self._state = "open"
        self._finalizer = weakref.finalize(self, remove_path, self._tmp)
        try:
            self._mm: np.memmap | None = npy_format.open_memmap(
                self._tmp, mode="w+", dtype=self.dtype, shape=self.shape
            )
        except BaseException:
            self._state = "aborted"
            self._finalizer()
            raise

    @property
    def temp_path(self) -> str:
        """Where the data lives until ``commit``."""
        return self._tmp

    def write(self, slices: Any, block: Any) -> None:
        """Store ``block`` at ``array[slices]``; its shape must equal the region's shape."""
        mm = self._mm
        if mm is None:
            raise RuntimeError(f"NpyWriter({self.path!r}) is {self._state}; it takes no writes")
        region_shape = np.broadcast_to(np.empty((), dtype=np.uint8), self.shape)[slices].shape
        arr = check_block(block, region_shape, self.dtype, f"NpyWriter({self.path!r}).write")
        mm[slices] = arr

    def commit(self) -> None:
        """Flush the data and move the finished file to ``path`` in one rename.

        Calling it again after a successful commit does nothing. If ``path`` appeared in the
        meantime and ``overwrite`` is false, the temporary file is deleted and
        ``FileExistsError`` is raised.
        """
        with self._lock:
            if self._state == "committed":
                return
            if self._state != "open":
                raise RuntimeError(f"NpyWriter({self.path!r}) was aborted; cannot commit")
            mm, self._mm = self._mm, None
            try:
                if mm is not None:
                    mm.flush()
                del mm
                if self.fsync:
                    fsync_path(self._tmp)
                check_not_exists(self.path, self.overwrite)
                os.replace(self._tmp, self.path)
            except BaseException:
                self._state = "aborted"
                self._finalizer()
                raise
            self._finalizer.detach()
            self._state = "committed"
        if self.fsync:
            fsync_parent(self.path)

    def abort(self) -> None:
        """Drop the temporary file. Safe to call twice; does nothing after ``commit``."""
        with self._lock:
            if self._state != "open":
                return
            self._state = "aborted"
            self._mm = None
            self._finalizer()

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def __repr__(self) -> str:
        return f"NpyWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, {self._state})"
