"""Blocks of zarr arrays in local directories: inspection, block reads, and an atomic block
writer (zarr format 3).

The writers build the whole array in a hidden temporary directory next to the destination
and rename it into place on commit, so a reader can never see a partially written array at
the destination path.

Sparse arrays stored as zarr groups (their layout, reader and writer) are in
:mod:`tilegraph.io.sparse_zarr`, and what both share in :mod:`tilegraph.io.zarr_common`;
their public names are importable from here too.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import weakref
from contextlib import ExitStack
from typing import Any

import numpy as np

from tilegraph.debris import restore_interrupted
from tilegraph.io._atomic import (
    AtomicWriter,
    check_block,
    check_destination,
    fsync_path,
    remove_path,
    temp_sibling,
)
from tilegraph.io.snapshot import (
    InputSnapshot,
    ReadLedger,
    file_identity,
    on_host,
    store_identity,
)
from tilegraph.io.sparse_zarr import (
    SPARSE_ATTRIBUTE,
    SparseZarrWriter,
    read_sparse_zarr_block,
    sparse_zarr_info,
)
from tilegraph.io.zarr_common import (
    BASELINE_CHUNKS,
    load_zarr,
    normalize_region,
    not_an_array_errors,
    rename_into_place,
)

__all__ = [
    "SPARSE_ATTRIBUTE",
    "SparseZarrWriter",
    "ZarrWriter",
    "read_sparse_zarr_block",
    "read_zarr_block",
    "sparse_zarr_info",
    "zarr_info",
]


def _open_zarr(path: str | os.PathLike[str]) -> Any:
    path = os.fspath(path)
    restore_interrupted(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no zarr array at {path!r} {on_host()}: the path does not "
                                "exist")
    try:
        return load_zarr().open_array(path, mode="r")
    except not_an_array_errors() as exc:
        raise ValueError(f"{path!r} is not a zarr array: {exc}") from exc


def zarr_info(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype, tuple[int, ...]]:
    """Shape, dtype and chunk shape of the zarr array stored at ``path``.

    For a sharded array the chunk shape returned is the shard shape: the unit that is stored
    as one object and that writers must not share.

    >>> import os, shutil, tempfile, zarr
    >>> d = tempfile.mkdtemp()
    >>> _ = zarr.create_array(os.path.join(d, "a.zarr"), shape=(5, 4), dtype="f8", chunks=(2, 4))
    >>> zarr_info(os.path.join(d, "a.zarr"))
    ((5, 4), dtype('float64'), (2, 4))
    >>> shutil.rmtree(d)
    """
    arr = _open_zarr(path)
    chunks = arr.shards if getattr(arr, "shards", None) else arr.chunks
    dtype = _native(arr.dtype)
    return (
        tuple(int(s) for s in arr.shape),
        dtype,
        tuple(int(c) for c in chunks),
    )


def read_zarr_block(path: Any, slices: Any, expect: InputSnapshot | None = None,
                    ledger: ReadLedger | None = None) -> np.ndarray:
    """``array[slices]`` as a NumPy array, from a zarr array path or an opened array.

    ``expect``: the array as the plan saw it (:mod:`tilegraph.io.snapshot`); the directory
    and its metadata are compared with it before and after reading, and a changed array is
    an :class:`~tilegraph.io.snapshot.InputChangedError`. ``ledger`` (with a path): the
    fingerprints of the chunk (shard) files the region covers are recorded there when
    first read and compared at every later read, and before and after this one, so a chunk
    rewritten under the run is an ``InputChangedError`` naming its key.

    ``path`` may be a path (the array is opened read-only for this call) or an array-like
    object already opened (anything with ``.shape`` and ``__getitem__``, such as a
    ``zarr.Array``). The result never shares memory with the source.

    >>> import os, shutil, tempfile, zarr
    >>> d = tempfile.mkdtemp()
    >>> z = zarr.create_array(os.path.join(d, "a.zarr"), shape=(3, 4), dtype="i8", chunks=(2, 2))
    >>> z[...] = np.arange(12).reshape(3, 4)
    >>> read_zarr_block(os.path.join(d, "a.zarr"), (slice(1, 3), slice(0, 2)))
    array([[4, 5],
           [8, 9]])
    >>> shutil.rmtree(d)
    """
    if hasattr(path, "shape") and hasattr(path, "__getitem__"):
        arr = path
    else:
        if expect is not None:
            identity, metadata = store_identity(os.fspath(path))
            if not identity:  # not there at all (another host's path): as for an .npy file
                _open_zarr(path)
            expect.check(identity, metadata)
        arr = _open_zarr(path)
        if expect is not None:
            expect.check(expect.identity, expect.metadata, arr.shape, _native(arr.dtype))
    files = None
    if ledger is not None and arr is not path:
        root = os.fspath(path)
        ledger.settle(lambda: _baseline(root, arr))
        files = chunk_files(root, arr, slices)
        files += [(_dir_part(root, d), d) for d in dict.fromkeys(os.path.dirname(f)
                                                                 for _, f in files)]
        before = {part: file_identity(f) for part, f in files}
        ledger.check(before)
    out = arr[slices]
    out = np.array(out) if isinstance(arr, np.ndarray) else np.asarray(out)
    if expect is not None:  # replaced while being read
        expect.check(*store_identity(os.fspath(path)))
    if files is not None:  # a chunk rewritten while being read
        ledger.same(before, {part: file_identity(f) for part, f in files})
    return out


def _baseline(root: str, arr: Any) -> dict[str, tuple]:
    """The fingerprints a ledger records at the first read of the zarr array ``arr`` at
    ``root``: every directory that holds its chunk files and, for an array of at most
    ``BASELINE_CHUNKS`` chunks, every chunk file (one ``stat`` each). A chunk written after
    that, by a new file renamed into place or in place, is then an error at its first read
    too; beyond that size only the directories are (a new file renamed into them: how zarr
    writes), and a chunk rewritten in place is caught only where it is read again; with
    more than ``BASELINE_CHUNKS`` directories, each is recorded when first read."""
    grid = [-(-int(n) // int(c)) for n, c in zip(
        arr.shape, getattr(arr, "shards", None) or arr.chunks, strict=True)]
    if math.prod(grid[:-1]) > BASELINE_CHUNKS:  # directories too: recorded as they are read
        return {}
    out = {_dir_part(root, d): file_identity(d) for d in chunk_dirs(root, arr)}
    if math.prod(grid) <= BASELINE_CHUNKS:
        whole = tuple(slice(None) for _ in grid)
        out.update((key, file_identity(f)) for key, f in chunk_files(root, arr, whole))
    return out


def _dir_part(root: str, directory: str) -> str:
    """A directory of a zarr array as a part of its ledger: its path in the array, and
    ``"/"``."""
    return os.path.relpath(directory, root).replace(os.sep, "/") + "/"


def chunk_dirs(path: str, arr: Any) -> list[str]:
    """The directories that hold (or would hold) the chunk (shard) files of the zarr array
    ``arr`` stored at ``path``: a chunk is written as a new file renamed into one of them,
    which changes that directory's modification time. Found from the chunk key encoding
    (the last coordinate names the file), without listing any directory.

    >>> import os, shutil, tempfile, zarr
    >>> d = tempfile.mkdtemp()
    >>> z = zarr.create_array(os.path.join(d, "a.zarr"), shape=(5, 4), dtype="f8",
    ...                       chunks=(2, 4))
    >>> [os.path.relpath(p, os.path.join(d, "a.zarr")) for p in chunk_dirs(
    ...     os.path.join(d, "a.zarr"), z)]
    ['c/0', 'c/1', 'c/2']
    >>> shutil.rmtree(d)
    """
    grid = tuple(-(-int(n) // int(c)) for n, c in zip(
        arr.shape, getattr(arr, "shards", None) or arr.chunks, strict=True))
    encode = arr.metadata.encode_chunk_key
    heads = itertools.product(*(range(max(g, 1)) for g in grid[:-1]))
    dirs = dict.fromkeys(os.path.dirname(os.path.join(path, *encode((*h, 0)[:len(grid)])
                                                      .split("/")))
                         for h in heads)
    return list(dirs)


def chunk_files(path: str, arr: Any, slices: Any) -> list[tuple[str, str]]:
    """``(key, file)`` of every stored chunk (a shard, for a sharded array) of the zarr
    array ``arr`` stored at ``path`` that the region ``slices`` covers; a chunk never
    written (its fill value) has no file there yet.

    >>> import os, shutil, tempfile, zarr
    >>> d = tempfile.mkdtemp()
    >>> z = zarr.create_array(os.path.join(d, "a.zarr"), shape=(5, 4), dtype="f8",
    ...                       chunks=(2, 4))
    >>> [key for key, _ in chunk_files(os.path.join(d, "a.zarr"), z, (slice(1, 3),))]
    ['c/0/0', 'c/1/0']
    >>> shutil.rmtree(d)
    """
    grid = tuple(int(c) for c in (getattr(arr, "shards", None) or arr.chunks))
    index = slices if isinstance(slices, tuple) else (slices,)
    ranges = []
    for axis, (n, size) in enumerate(zip(arr.shape, grid, strict=True)):
        s = index[axis] if axis < len(index) else slice(None)
        if isinstance(s, slice):
            steps = range(*s.indices(n))
            if not steps:
                return []
            lo, hi = min(steps[0], steps[-1]), max(steps[0], steps[-1])
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool):
            lo = hi = int(s) + (n if int(s) < 0 else 0)
        else:  # any other index: every chunk along the axis
            lo, hi = 0, max(n - 1, 0)
        ranges.append(range(lo // size, hi // size + 1))
    encode = arr.metadata.encode_chunk_key
    return [(key, os.path.join(path, *key.split("/")))
            for key in (encode(c) for c in itertools.product(*ranges))]


def _native(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    return dtype.newbyteorder("=") if dtype.isnative else dtype


def _chunk_shape(chunks: Any, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    if isinstance(chunks, (int, np.integer)) and not isinstance(chunks, bool):
        chunks = (int(chunks),) * len(shape)
    out = tuple(int(c) for c in chunks)
    if len(out) != len(shape):
        raise ValueError(
            f"{where}: chunk shape {out} has {len(out)} entries but the array has "
            f"{len(shape)} axes (shape {shape})"
        )
    if any(c < 1 for c in out):
        raise ValueError(f"{where}: chunk shape {out} must have positive entries")
    return out


def _partially_covered_chunks(
    bounds: tuple[tuple[int, int], ...], chunks: tuple[int, ...], shape: tuple[int, ...]
) -> list[tuple[int, ...]]:
    """Chunks that a region touches without covering all of their data, in sorted order."""
    touched: list[range] = []
    full: list[set[int]] = []
    any_partial = False
    for (a, b), c, n in zip(bounds, chunks, shape, strict=True):
        if a >= b:
            return []
        ks = range(a // c, (b - 1) // c + 1)
        covered = {k for k in (ks[0], ks[-1]) if a <= k * c and min((k + 1) * c, n) <= b}
        covered.update(ks[1:-1])
        touched.append(ks)
        full.append(covered)
        any_partial = any_partial or len(covered) < len(ks)
    if not any_partial:
        return []
    return [
        coord
        for coord in itertools.product(*touched)
        if any(k not in f for k, f in zip(coord, full, strict=True))
    ]


class ZarrWriter(AtomicWriter):
    """Writes a zarr (format 3) array region by region; it appears at ``path`` only on commit.

    The array is created with the given chunk shape and zarr's default compressor in a hidden
    temporary directory ``.<basename>.tmp-<uuid4 hex>`` next to ``path``. ``commit()``
    renames that directory to ``path`` in one step, so a reader can never see a partially
    written array at ``path``: before the commit there is nothing there (or the previous
    array, with ``overwrite=True``), after it the complete array. With ``overwrite=True`` the
    new array is swapped with an existing one in one ``renameat2(RENAME_EXCHANGE)`` and the
    old one deleted (where the file system cannot exchange: the old one is renamed aside
    first, and a crash between the two renames is repaired by the next open or write).
    Without ``overwrite``, of two writers racing for one path exactly one succeeds and the
    other gets ``FileExistsError``. ``abort()`` deletes the temporary directory. As a
    context manager the writer commits on a clean exit and aborts on an exception.

    ``write`` may be called from several threads at once for disjoint regions. Regions
    aligned to the chunk grid are written without locking; a region that covers only part
    of a chunk holds a lock on that chunk while zarr reads, merges and rewrites it. Every
    ``write`` must have returned before ``commit``.

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "a.zarr")
    >>> with ZarrWriter(path, (4, 3), "float64", chunks=(2, 3)) as w:
    ...     w.write((slice(0, 2), slice(0, 3)), np.ones((2, 3)))
    ...     w.write((slice(2, 4), slice(0, 3)), np.zeros((2, 3)))
    >>> read_zarr_block(path, (slice(1, 3), slice(0, 3)))
    array([[1., 1., 1.],
           [0., 0., 0.]])
    >>> shutil.rmtree(d)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shape: tuple[int, ...],
        dtype: Any,
        chunks: tuple[int, ...] | int,
        overwrite: bool = False,
        *,
        fsync: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.overwrite = overwrite
        self.fsync = fsync
        where = f"ZarrWriter({self.path!r})"
        if any(s < 0 for s in self.shape):
            raise ValueError(f"{where}: shape {self.shape} has a negative length")
        self.chunks = _chunk_shape(chunks, self.shape, where)
        check_destination(self.path, overwrite)
        self._tmp = temp_sibling(self.path)
        self._lock = threading.Lock()
        self._chunk_locks: dict[tuple[int, ...], threading.Lock] = {}
        self._chunk_locks_guard = threading.Lock()
        self._state = "open"
        self._finalizer = weakref.finalize(self, remove_path, self._tmp)
        try:
            self._array: Any = load_zarr().create_array(
                self._tmp,
                shape=self.shape,
                dtype=self.dtype,
                chunks=self.chunks,
                zarr_format=3,
            )
        except BaseException:
            self._state = "aborted"
            self._finalizer()
            raise

    @property
    def temp_path(self) -> str:
        """Where the array lives until ``commit``."""
        return self._tmp

    def _chunk_lock(self, coord: tuple[int, ...]) -> threading.Lock:
        with self._chunk_locks_guard:
            lock = self._chunk_locks.get(coord)
            if lock is None:
                lock = self._chunk_locks[coord] = threading.Lock()
            return lock

    def write(self, slices: Any, block: Any) -> None:
        """Store ``block`` at ``array[slices]``; its shape must equal the region's shape.

        A region is a tuple of slices (step 1) and ints, as in NumPy basic indexing.
        """
        array = self._array
        where = f"ZarrWriter({self.path!r}).write"
        if array is None:
            raise RuntimeError(f"ZarrWriter({self.path!r}) is {self._state}; it takes no writes")
        index, bounds, region_shape = normalize_region(slices, self.shape, where)
        arr = check_block(block, region_shape, self.dtype, where)
        if any(a >= b for a, b in bounds):
            return
        partial = _partially_covered_chunks(bounds, self.chunks, self.shape)
        # zarr encodes on its one event-loop thread, where a strided view (a block cut
        # from a larger one) would be copied: copy it here, on this worker's thread
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        with ExitStack() as stack:
            for coord in partial:
                stack.enter_context(self._chunk_lock(coord))
            array[index] = arr

    def _release(self, sync: bool) -> None:
        self._array = None
        if sync:
            fsync_path(self._tmp)

    def _move_into_place(self) -> str | None:
        return rename_into_place(self._tmp, self.path, self.overwrite)

    def __repr__(self) -> str:
        return (
            f"ZarrWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, "
            f"chunks={self.chunks}, {self._state})"
        )
