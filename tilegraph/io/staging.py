"""The intermediate store of a rechunk too large for memory.

An all-to-all rechunk (time blocks to space blocks) under a memory limit smaller than the
array cannot hold the pieces where old and new blocks meet: every new block needs a piece of
every old block. The staged plan of :func:`tilegraph.array.rechunking.plan_rechunk` then
writes each old block's pieces to a file, one after another (:func:`stage_pieces`), and
assembles each new block by reading its pieces from those files (:func:`load_pieces`), as
rechunker does with an intermediate zarr store. A task's result is a :class:`StagedPieces`,
a handle of ``HANDLE_BYTES`` whatever its pieces (where each piece starts is the plan's to
know: :func:`piece_offsets`); its file is deleted when the handle is (when the last task
that reads it has run, or when the run fails or is cancelled, once its error is dropped:
the error's traceback holds the failed task's inputs).

What a task holds besides its block is bounded: a piece that is not contiguous, in the
block it is cut from or in the block it goes to, moves in slabs of at most
``STAGE_BUFFER`` bytes (:func:`slabs`), so writing a block's pieces holds the block and
one slab, and assembling a block holds the block, one slab and its handles.

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
>>> piece_offsets([(2, 2), (6,)]).ravel().tolist()  # in elements
[0, 12]
>>> h.piece(12 * 8, (2, 3))
array([[12., 13., 14.],
       [18., 19., 20.]])
>>> out = load_pieces((2, 6), np.dtype(float), ((0, 0, (2, 6), (slice(0, 2), slice(0, 6))),),
...                   h)
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
    """One directory of staged files, removed when no handle refers to it any more;
    ``parent``: the directory it is in (``None``: the temp directory)."""

    def __init__(self, parent: str | None):
        self.parent = parent
        self.path = tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{owner_tag()}-", dir=parent)
        own(self.path)  # removed too if a signal stops the run (tilegraph.runtime.signals)
        self._count = 0
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _remove_folder, self.path)

    def new_file(self) -> int:
        """The number of a new file (its path: :meth:`file`)."""
        with self._lock:
            self._count += 1
            return self._count

    def file(self, number: int) -> str:
        return os.path.join(self.path, f"{number}.pieces")


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


STAGE_BUFFER = 1 << 20  # bytes: a piece that is not contiguous goes through buffers this large
HANDLE_BYTES = 128  # bytes a handle holds in memory (its object and two ints)


def slabs(shape: tuple[int, ...], itemsize: int, limit: int
          ) -> Iterator[tuple[tuple, int, tuple[int, ...]]]:
    """The runs of a C-ordered array of ``shape`` that are contiguous in memory and hold at
    most ``limit`` bytes each (or one element), in order: ``(index, start, shape)``, the
    index of the run in the array, its first element's flat position and its shape.

    >>> [(start, shape) for _, start, shape in slabs((2, 3), 8, 16)]
    [(0, (2,)), (2, (1,)), (3, (2,)), (5, (1,))]
    >>> list(slabs((2, 3), 8, 24))
    [((slice(0, 1, None),), 0, (1, 3)), ((slice(1, 2, None),), 3, (1, 3))]
    >>> list(slabs((2, 3), 8, 100))
    [((), 0, (2, 3))]
    """
    total = math.prod(shape)
    if total * itemsize <= limit or not shape:
        yield (), 0, tuple(shape)
        return
    k = len(shape)  # the first axis from which the trailing axes fit the limit
    inner = 1
    while k > 0 and inner * shape[k - 1] * itemsize <= limit:
        k -= 1
        inner *= shape[k]
    axis = k - 1
    step = max(1, limit // max(1, inner * itemsize))
    rest = tuple(shape[k:])
    for lead in np.ndindex(*shape[:axis]):
        base = (np.ravel_multi_index(lead, shape[:axis]) * shape[axis] if axis else 0)
        for start in range(0, shape[axis], step):
            stop = min(start + step, shape[axis])
            yield (*lead, slice(start, stop)), int(base + start) * inner, (stop - start, *rest)


def copy_bytes(piece_nbytes: int) -> int:
    """Bytes a task copies a piece of ``piece_nbytes`` through, at most: a piece that is
    not contiguous where it is cut from, or where it goes, moves in slabs of at most
    ``STAGE_BUFFER`` bytes."""
    return min(piece_nbytes, STAGE_BUFFER)


class StagedPieces:
    """The pieces of one old block in the intermediate store: file ``number`` of
    ``folder`` (removed with the handle) holds them one after another, ``stored_bytes`` in
    all, in the order of the cuts :func:`stage_pieces` was given; where each piece starts
    is the plan's to know (:func:`piece_offsets`), so the handle's size does not grow with
    its pieces. ``nbytes`` is what a run holds in memory for it (``HANDLE_BYTES``: a few
    machine words; the file is removed when it is collected, by ``__del__`` rather than a
    finalizer object of its own)."""

    __slots__ = ("_folder", "dtype", "number", "stored_bytes")

    def __init__(self, dtype: np.dtype, stored_bytes: int, number: int, folder: _Folder):
        self.dtype = np.dtype(dtype)
        self.stored_bytes = int(stored_bytes)
        self.number = number
        self._folder = folder  # keeps the directory while the file is in it

    def __del__(self) -> None:
        try:
            os.remove(self._folder.file(self.number))
        except Exception:  # gone already, or the interpreter is ending (the folder goes)
            pass

    @property
    def path(self) -> str:
        """The file that holds the pieces."""
        return self._folder.file(self.number)

    @property
    def parent(self) -> str | None:
        """The directory the store's folder is in (the run's ``spill_dir``; ``None``: the
        temp directory), where a process that receives the handle stores it again."""
        return self._folder.parent

    @property
    def nbytes(self) -> int:
        return HANDLE_BYTES

    def read_into(self, offset: int, out: np.ndarray) -> None:
        """The bytes at ``offset`` of the file into ``out`` (a C-contiguous array)."""
        buf = out.reshape(-1).view(np.uint8)
        path = self.path
        if offset < 0 or offset + buf.size > self.stored_bytes:
            raise ValueError(f"the rechunk's intermediate file {path!r} holds "
                             f"{self.stored_bytes} bytes: no {buf.size} bytes at {offset}")
        with open(path, "rb", buffering=0) as f:
            got = os.preadv(f.fileno(), [buf], offset)
        if got != buf.size:
            raise OSError(f"the rechunk's intermediate file {path!r} holds {got} of the "
                          f"{buf.size} bytes at {offset} (was it removed or truncated?)")

    def piece(self, offset: int, shape: tuple[int, ...]) -> np.ndarray:
        """The piece of ``shape`` stored at byte ``offset``."""
        out = np.empty(shape, self.dtype)
        self.read_into(offset, out)
        return out

    def __reduce__(self) -> tuple:
        with open(self.path, "rb") as f:
            data = f.read()
        return (_arrived, (self.dtype, self.stored_bytes, data, self.parent))

    def __repr__(self) -> str:
        return f"StagedPieces({self.stored_bytes} bytes of {self.dtype} in {self.path})"


def piece_offsets(lengths: Sequence[Sequence[int]]) -> np.ndarray:
    """Where each piece of a block starts in its file, in elements: the block is cut
    into the pieces ``lengths[0][i] x lengths[1][j] x ...``, stored one after another in
    C order of ``(i, j, ...)`` (as :func:`stage_pieces` writes them); an array of shape
    ``(len(lengths[0]), len(lengths[1]), ...)``.

    >>> piece_offsets([(2, 1), (3, 1)]).tolist()
    [[0, 6], [8, 11]]
    """
    nd = len(lengths)
    if not nd:
        return np.zeros((), dtype=np.int64)
    sizes = np.ones((), dtype=np.int64)
    for a, ls in enumerate(lengths):
        shape = [1] * nd
        shape[a] = len(ls)
        sizes = sizes * np.asarray(ls, dtype=np.int64).reshape(shape)
    flat = sizes.reshape(-1)
    starts = np.concatenate(([0], np.cumsum(flat)[:-1])) if flat.size else flat
    return starts.reshape(sizes.shape)


def _write_file(folder: _Folder, chunks: Iterable[Any], what: str) -> tuple[int, int]:
    """A new file of ``folder`` holding the buffers ``chunks`` one after another: its
    number and size; a failed write removes it and raises an ``OSError`` naming it and
    ``what`` was written."""
    number = folder.new_file()
    path = folder.file(number)
    size = 0
    try:
        with open(path, "wb", buffering=0) as f:
            for chunk in chunks:
                view = memoryview(chunk).cast("B")
                size += len(view)
                while view:
                    n = f.write(view)
                    view = view[n:]
                view = chunk = None  # a slab is released before the next is made
    except OSError as exc:
        _remove(path)
        raise OSError(exc.errno, f"writing {what} to its intermediate store (spill_dir "
                                 f"{os.path.dirname(folder.path)!r}) failed: "
                                 f"{exc.strerror}", path) from exc
    return number, size


def _contiguous_runs(piece: np.ndarray) -> Iterator[np.ndarray]:
    """``piece``'s bytes in C order: the piece itself when contiguous, else copies of its
    slabs of at most ``STAGE_BUFFER`` bytes."""
    if piece.flags.c_contiguous:
        yield piece.reshape(-1).view(np.uint8)
        return
    for index, _, _ in slabs(piece.shape, piece.itemsize, STAGE_BUFFER):
        yield np.ascontiguousarray(piece[index]).reshape(-1).view(np.uint8)


def stage_pieces(block: np.ndarray, cuts: Sequence[tuple[slice, ...]],
                 parent: str | None) -> StagedPieces:
    """Write the pieces ``block[cut]`` of one old block to a new file, one after another
    (a piece that is not contiguous in the block in slabs of at most ``STAGE_BUFFER``
    bytes), and return their handle. A failed write removes the file and raises an
    ``OSError`` naming it."""
    block = np.asarray(block)

    def pieces() -> Iterator[np.ndarray]:
        for cut in cuts:
            piece = block[cut]
            if piece.size:
                yield from _contiguous_runs(piece)

    folder = _folder(parent)
    number, size = _write_file(folder, pieces(), "a rechunk's pieces")
    return StagedPieces(block.dtype, size, number, folder)


def _arrived(dtype: np.dtype, stored_bytes: int, data: bytes, parent: str | None
             ) -> StagedPieces:
    """A handle unpickled in the process that received it: its bytes written to this
    process's own intermediate store, under ``parent`` when this host has that directory
    (else the temp directory), so that the process holds a handle, not the pieces."""
    if len(data) != stored_bytes:
        raise ValueError(f"a rechunk's staged pieces arrived with {len(data)} bytes, not the "
                         f"{stored_bytes} their handle names")
    if parent is not None and not os.path.isdir(parent):
        parent = None
    folder = _folder(parent)
    number, _ = _write_file(folder, [data], "the pieces of a rechunk received from another "
                                            "process")
    return StagedPieces(dtype, stored_bytes, number, folder)


def load_pieces(shape: tuple[int, ...], dtype: np.dtype,
                placements: Sequence[tuple[int, int, tuple[int, ...], tuple[slice, ...]]],
                *handles: StagedPieces) -> np.ndarray:
    """A new block of ``shape`` assembled from staged pieces: ``placements`` lists
    ``(handle, offset, piece shape, where)``: the piece stored at byte ``offset`` of
    ``handles[handle]`` goes to ``out[where]``. A piece whose place is contiguous is read
    straight into it, any other through a buffer of at most ``STAGE_BUFFER`` bytes."""
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype)
    buffer: np.ndarray | None = None
    for h, offset, pshape, where in placements:
        handle = handles[h]
        target = out[where]
        if target.shape != tuple(pshape):
            raise ValueError(f"a staged piece of shape {tuple(pshape)} does not fit its "
                             f"place {where} of shape {target.shape} in a block of {shape}")
        if not target.size:
            continue
        if target.flags.c_contiguous:
            handle.read_into(offset, target)
            continue
        for index, start, sshape in slabs(target.shape, dtype.itemsize, STAGE_BUFFER):
            n = math.prod(sshape)
            if buffer is None or buffer.size < n:
                buffer = np.empty(n, dtype)
            run = buffer[:n].reshape(sshape)
            handle.read_into(offset + start * dtype.itemsize, run)
            target[index] = run
    return out


def staged_bytes(value: Any) -> int:
    """Bytes a task's result put in the intermediate store (0 for anything else)."""
    return value.stored_bytes if type(value) is StagedPieces else 0
