"""Helpers shared by the writers: temporary names, parent checks, fsync, casting and shape checks.

A writer builds its result under a hidden temporary name in the destination's own directory
(so the final rename never crosses a file system) and renames it into place in one step. The
name carries the writer's host and process id (:mod:`tilegraph.debris`), so that what a
killed writer leaves is removed by the next writer in that directory (or ``tilegraph
clean``).

Commits are atomic in every case:

- without ``overwrite``, the result is moved in with :func:`rename_noreplace`
  (``renameat2(RENAME_NOREPLACE)``, else ``link`` + ``unlink`` for a file), so of two
  writers racing for one path exactly one wins and the other gets ``FileExistsError``;
- with ``overwrite``, a file replaces the old one in one ``rename``; a directory (zarr) is
  swapped with the old one in one ``renameat2(RENAME_EXCHANGE)``. Where the file system
  cannot exchange, the old directory is renamed aside first; a crash between the two
  renames is repaired by the next open or write of the path
  (:func:`tilegraph.debris.restore_interrupted`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import uuid
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from tilegraph.debris import owner_tag, remove_debris


def temp_sibling(path: str, suffix: str = "", kind: str = "tmp") -> str:
    """A fresh hidden name next to ``path``:
    ``<dir>/.<basename>.<kind>-<host>-<pid>-<uuid4 hex><suffix>``."""
    parent, base = os.path.split(os.path.abspath(path))
    return os.path.join(parent, f".{base}.{kind}-{owner_tag()}-{uuid.uuid4().hex}{suffix}")


def check_destination(path: str, overwrite: bool) -> None:
    """Refuse a destination whose parent is missing, or that exists when ``overwrite`` is off.
    What dead writers left in the parent is removed first (an interrupted replacement of
    ``path`` is put back)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise FileNotFoundError(
            f"cannot write {path!r}: its parent directory {parent!r} does not exist"
        )
    remove_debris(parent)
    check_not_exists(path, overwrite)


def check_not_exists(path: str, overwrite: bool) -> None:
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(
            f"{path!r} already exists; pass overwrite=True to replace it"
        )


# renameat2 flags (linux/fs.h)
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100
_renameat2: list = []


def _libc_renameat2() -> object | None:
    if not _renameat2:
        fn = None
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _renameat2.append(fn)
    return _renameat2[0]


def _rename2(src: str, dst: str, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False when this system or file system has no such
    call (or not this flag); raises OSError for any other failure."""
    fn = _libc_renameat2()
    if fn is None:
        return False
    if fn(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags) == 0:  # type: ignore
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), dst)


def rename_noreplace(src: str, dst: str) -> None:
    """Move ``src`` to ``dst`` in one step that fails with ``FileExistsError`` if ``dst``
    exists, whatever another process does meanwhile."""
    try:
        done = _rename2(src, dst, RENAME_NOREPLACE)
    except FileExistsError:
        raise FileExistsError(
            f"{dst!r} already exists; pass overwrite=True to replace it") from None
    if done:
        return
    if os.path.isdir(src):
        # no renameat2: reserve the name with an (atomic) mkdir, then rename over the empty
        # directory, which rename allows
        try:
            os.mkdir(dst)
        except FileExistsError:
            raise FileExistsError(
                f"{dst!r} already exists; pass overwrite=True to replace it") from None
        os.rename(src, dst)
        return
    try:
        os.link(src, dst)
    except FileExistsError:
        raise FileExistsError(
            f"{dst!r} already exists; pass overwrite=True to replace it") from None
    os.remove(src)


def exchange(src: str, dst: str) -> bool:
    """Swap ``src`` and ``dst`` (both existing) in one atomic step; False where the file
    system cannot."""
    return _rename2(src, dst, RENAME_EXCHANGE)


def replace_directory(tmp: str, path: str) -> str | None:
    """Put the directory ``tmp`` at ``path``, replacing what is there; returns the name the
    old result now has (to delete), or None. At every instant ``path`` holds the old or the
    new result, or (without RENAME_EXCHANGE, between two renames) the old one is at a hidden
    ``.old-`` name that the next open or write restores."""
    if not os.path.lexists(path):
        try:
            rename_noreplace(tmp, path)
            return None
        except FileExistsError:
            pass  # appeared meanwhile: replace it
    if exchange(tmp, path):
        return tmp
    old = temp_sibling(path, kind="old")
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    return old


def remove_path(path: str) -> None:
    """Delete a file or a directory tree; a missing path is not an error."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except FileNotFoundError:
        pass


FSYNC_THREADS = 16  # flushes of the files of a directory tree in flight at once


def fsync_path(path: str) -> None:
    """Flush a file, or every file and directory below a directory, to stable storage.

    The files of a tree (a zarr store's chunks: thousands) are flushed by several threads
    at once, so that the disk sees a queue of flushes rather than one at a time; the
    directories after them."""
    if not os.path.isdir(path):
        _fsync_one(path)
        return
    files, dirs = [], []
    for root, _dirs, names in os.walk(path):
        files.extend(os.path.join(root, name) for name in names)
        dirs.append(root)
    if len(files) > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(FSYNC_THREADS, len(files)),
                                thread_name_prefix="tilegraph-fsync") as pool:
            list(pool.map(_fsync_one, files))
    else:
        for f in files:
            _fsync_one(f)
    for d in reversed(dirs):  # the deepest first
        _fsync_one(d)


def fsync_parent(path: str) -> None:
    """Make a rename inside the parent directory of ``path`` durable."""
    _fsync_one(os.path.dirname(os.path.abspath(path)))


def _fsync_one(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return
    try:
        os.fsync(fd)
    except OSError:
        # Some file systems (and directories on some platforms) do not support fsync.
        pass
    finally:
        os.close(fd)


def check_block(
    block: Any, region_shape: tuple[int, ...], dtype: np.dtype, where: str
) -> np.ndarray:
    """``block`` as an array, after checking its shape and that it casts to ``dtype`` safely."""
    arr = np.asarray(block)
    if arr.shape != region_shape:
        raise ValueError(
            f"{where}: block of shape {arr.shape} does not match the region of shape "
            f"{region_shape} it is written to (a map_blocks function that returns blocks of "
            "another shape than its input's must say so: pass chunks=, the result's block "
            "sizes)"
        )
    if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
        raise TypeError(
            f"{where}: cannot store a block of dtype {arr.dtype} in an array of dtype {dtype} "
            "without losing information; convert the block first (block.astype(...))"
        )
    return arr


class AtomicWriter(ABC):
    """What the atomic writers share: the open -> committed / aborted states, the lock, and
    the context-manager protocol (``commit()`` on a clean exit, ``abort()`` when the block
    raised, KeyboardInterrupt included).

    A writer sets ``path``, ``overwrite``, ``fsync``, ``_tmp``, ``_lock``, ``_state = "open"``
    and ``_finalizer`` (removes ``_tmp``), and provides ``_release(sync)`` (close what it
    holds open, syncing its data first when ``sync``) and ``_move_into_place()`` (rename
    ``_tmp`` to ``path`` atomically: without ``overwrite`` with :func:`rename_noreplace`;
    returns a displaced old result to delete, or None).
    """

    path: str
    overwrite: bool
    fsync: bool
    _state: str

    @abstractmethod
    def _release(self, sync: bool) -> None:
        """Close what the writer holds open (syncing its data first when ``sync``)."""

    @abstractmethod
    def _move_into_place(self) -> str | None:
        """Rename ``_tmp`` to ``path``; return a displaced old result to delete, or None."""

    def commit(self) -> None:
        """Move the finished result to ``path`` in one rename.

        Calling it again after a successful commit does nothing. If ``path`` appeared in the
        meantime and ``overwrite`` is false, the temporary result is deleted and
        ``FileExistsError`` is raised; the check and the move are one atomic step, so of two
        writers racing for one path exactly one succeeds.
        """
        with self._lock:  # type: ignore[attr-defined]
            if self._state == "committed":
                return
            if self._state != "open":
                raise RuntimeError(
                    f"{type(self).__name__}({self.path!r}) was aborted; cannot commit")
            try:
                self._release(sync=self.fsync)
                check_not_exists(self.path, self.overwrite)
                old = self._move_into_place()
            except BaseException:
                self._state = "aborted"
                self._finalizer()  # type: ignore[attr-defined]
                raise
            self._finalizer.detach()  # type: ignore[attr-defined]
            self._state = "committed"
        if old is not None:
            remove_path(old)
        if self.fsync:
            fsync_parent(self.path)

    def abort(self) -> None:
        """Drop the temporary result. Safe to call twice; does nothing after ``commit``."""
        with self._lock:  # type: ignore[attr-defined]
            if self._state != "open":
                return
            self._state = "aborted"
            self._release(sync=False)
            self._finalizer()  # type: ignore[attr-defined]

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
