"""The intermediate store of a rechunk too large for memory.

An all-to-all rechunk (time blocks to space blocks) under a memory limit smaller than the
array cannot hold the pieces where old and new blocks meet: every new block needs a piece of
every old block. The staged plan of :func:`tilegraph.array.manipulation.rechunk_plan` then
writes each old block's pieces to a file, one after another (:func:`stage_pieces`), and
assembles each new block by reading its pieces from those files (:func:`load_pieces`), as
rechunker does with an intermediate zarr store. A task's result is a :class:`StagedPieces`,
a handle of a few bytes; its file is deleted when the handle is (when the last task that
reads it has run, or when the run fails or is cancelled, once its error is dropped: the
error's traceback holds the failed task's inputs).

The files live in a directory named ``tilegraph-spill-<host>-<pid>-<random>`` under the
``spill_dir`` option (the temp directory by default), removed with the last handle; when a
signal stops the run (SIGTERM, SIGINT, SIGHUP), before the process ends
(:mod:`tilegraph.runtime.signals`); and by the next run or ``tilegraph clean`` if the
process is killed (SIGKILL).

A handle sent to another process (the processes, MPI, dask or serverless backends) carries
its pieces' bytes instead of its file, so the store is correct on every backend, and the
process that receives it writes them to its own intermediate store as it unpickles it
(under the same ``spill_dir`` when that directory exists there, else the temp directory):
what a process holds of a staged rechunk is a handle of a few bytes on every backend, as
on the threads of one process, never the pieces (an MPI rank would otherwise hold, beyond
its memory limit, the old blocks of every other rank that it reads a piece of).

>>> import numpy as np
>>> x = np.arange(24.0).reshape(4, 6)
>>> h = stage_pieces(x, ((slice(0, 2), slice(0, 6)), (slice(2, 4), slice(0, 3))), None)
>>> h.piece(1)
array([[12., 13., 14.],
       [18., 19., 20.]])
>>> out = load_pieces((2, 6), np.dtype(float), ((0, 0, (slice(0, 2), slice(0, 6))),), h)
>>> bool((out == x[:2]).all())
True
>>> import pickle
>>> moved = pickle.loads(pickle.dumps(h))  # as another process receives it
>>> moved.path != h.path and moved.nbytes == h.nbytes
True
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from tilegraph.debris import SPILL_PREFIX, disown, own, owner_tag, remove_dead_spills


class _Folder:
    """One directory of staged files, removed when no handle refers to it any more."""

    def __init__(self, parent: str | None):
        self.path = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{owner_tag()}-", dir=parent)
        own(self.path)  # removed too if a signal stops the run (tilegraph.runtime.signals)
        self._count = 0
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _remove_folder, self.path)

    def new_file(self) -> str:
        with self._lock:
            self._count += 1
            return os.path.join(self.path, f"{self._count}.pieces")


def _remove_folder(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    disown(path)


_folders: dict[str | None, weakref.ref[_Folder]] = {}
_folders_lock = threading.Lock()


def _folder(parent: str | None) -> _Folder:
    """This process's live directory under ``parent`` (made, and the directories of dead
    processes there removed, when there is none)."""
    with _folders_lock:
        ref = _folders.get(parent)
        folder = ref() if ref is not None else None
        if folder is None:
            remove_dead_spills(parent)
            folder = _Folder(parent)
            _folders[parent] = weakref.ref(folder)
        return folder


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class StagedPieces:
    """The pieces of one old block in the intermediate store: piece ``k`` has shape
    ``shapes[k]`` and starts ``offsets[k]`` bytes into the file ``path`` of ``folder``
    (removed with the handle). ``nbytes`` is the handle's own size, which is what a run
    holds in memory; ``stored_bytes`` is what the file holds. ``parent``: the directory
    the folder is in (the run's ``spill_dir``; ``None``: the temp directory), where a
    process that receives the handle stores it again."""

    __slots__ = (
        "__weakref__",
        "_finalizer",
        "_folder",
        "dtype",
        "offsets",
        "parent",
        "path",
        "shapes",
    )

    def __init__(self, dtype: np.dtype, offsets: tuple[int, ...],
                 shapes: tuple[tuple[int, ...], ...], path: str, folder: _Folder,
                 parent: str | None = None):
        self.dtype = np.dtype(dtype)
        self.offsets = offsets
        self.shapes = shapes
        self.path = path
        self.parent = parent
        self._folder = folder  # keeps the directory while the file is in it
        self._finalizer = weakref.finalize(self, _remove, path)

    @property
    def stored_bytes(self) -> int:
        return sum(math.prod(s) for s in self.shapes) * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return 64 + 24 * len(self.offsets)

    def read_into(self, k: int, out: np.ndarray) -> None:
        """Piece ``k`` into ``out`` (a C-contiguous array of its shape and dtype)."""
        buf = out.reshape(-1).view(np.uint8)
        start = self.offsets[k]
        with open(self.path, "rb", buffering=0) as f:
            got = os.preadv(f.fileno(), [buf], start)
        if got != buf.size:
            raise OSError(f"the rechunk's intermediate file {self.path!r} holds {got} of the "
                          f"{buf.size} bytes of piece {k} (was it removed or truncated?)")

    def piece(self, k: int) -> np.ndarray:
        out = np.empty(self.shapes[k], self.dtype)
        self.read_into(k, out)
        return out

    def __reduce__(self) -> tuple:
        with open(self.path, "rb") as f:
            data = f.read()
        return (_arrived, (self.dtype, self.offsets, self.shapes, data, self.parent))

    def __repr__(self) -> str:
        return (f"StagedPieces({len(self.shapes)} pieces, {self.stored_bytes} bytes of "
                f"{self.dtype} in {self.path})")


def _write_file(folder: _Folder, chunks: Iterable[Any], what: str) -> str:
    """A new file of ``folder`` holding the buffers ``chunks`` one after another; a failed
    write removes it and raises an ``OSError`` naming it and ``what`` was written."""
    path = folder.new_file()
    try:
        with open(path, "wb", buffering=0) as f:
            for chunk in chunks:
                view = memoryview(chunk).cast("B")
                while view:
                    n = f.write(view)
                    view = view[n:]
    except OSError as exc:
        _remove(path)
        raise OSError(exc.errno, f"writing {what} to its intermediate store (spill_dir "
                                 f"{os.path.dirname(folder.path)!r}) failed: "
                                 f"{exc.strerror}", path) from exc
    return path


def stage_pieces(block: np.ndarray, cuts: Sequence[tuple[slice, ...]],
                 parent: str | None) -> StagedPieces:
    """Write the pieces ``block[cut]`` of one old block to a new file, one after another,
    and return their handle. A failed write removes the file and raises an ``OSError``
    naming it."""
    block = np.asarray(block)
    offsets: list[int] = []
    shapes: list[tuple[int, ...]] = []

    def pieces() -> Iterator[np.ndarray]:
        pos = 0
        for cut in cuts:
            piece = np.ascontiguousarray(block[cut])
            offsets.append(pos)
            shapes.append(piece.shape)
            pos += piece.nbytes
            yield piece.reshape(-1).view(np.uint8)

    folder = _folder(parent)
    path = _write_file(folder, pieces(), "a rechunk's pieces")
    return StagedPieces(block.dtype, tuple(offsets), tuple(shapes), path, folder,
                        parent=parent)


def _arrived(dtype: np.dtype, offsets: tuple[int, ...], shapes: tuple[tuple[int, ...], ...],
             data: bytes, parent: str | None) -> StagedPieces:
    """A handle unpickled in the process that received it: its bytes written to this
    process's own intermediate store, under ``parent`` when this host has that directory
    (else the temp directory), so that the process holds a handle, not the pieces."""
    if parent is not None and not os.path.isdir(parent):
        parent = None
    folder = _folder(parent)
    path = _write_file(folder, [data], "the pieces of a rechunk received from another "
                                       "process")
    return StagedPieces(dtype, offsets, shapes, path, folder, parent=parent)


def load_pieces(shape: tuple[int, ...], dtype: np.dtype,
                placements: Sequence[tuple[int, int, tuple[slice, ...]]],
                *handles: StagedPieces) -> np.ndarray:
    """A new block of ``shape`` assembled from staged pieces: ``placements`` lists
    ``(handle, piece, where)``: piece ``piece`` of ``handles[handle]`` goes to
    ``out[where]``. A piece whose place is contiguous is read straight into it."""
    out = np.empty(shape, dtype)
    for h, k, where in placements:
        handle = handles[h]
        target = out[where]
        if target.flags.c_contiguous:
            handle.read_into(k, target)
        else:
            target[...] = handle.piece(k)
    return out


def staged_bytes(value: Any) -> int:
    """Bytes a task's result put in the intermediate store (0 for anything else)."""
    return value.stored_bytes if type(value) is StagedPieces else 0
