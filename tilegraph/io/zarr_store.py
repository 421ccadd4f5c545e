"""Blocks of zarr arrays in local directories: inspection, block reads, and an atomic block
writer (zarr format 3).

The writer builds the whole array in a hidden temporary directory next to the destination
and renames it into place on commit, so a reader can never see a partially written array at
the destination path.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from contextlib import ExitStack
from typing import Any

import numpy as np
import zarr
import zarr.errors

from tilegraph.io._atomic import (
    AtomicWriter,
    check_block,
    check_destination,
    fsync_path,
    remove_path,
    temp_sibling,
)

__all__ = ["ZarrWriter", "read_zarr_block", "zarr_info"]

# What zarr raises for a path that exists but holds no readable array (a plain directory, a
# file, a group, broken metadata).
_NOT_AN_ARRAY = (
    zarr.errors.BaseZarrError,
    ValueError,
    KeyError,
    TypeError,
    NotADirectoryError,
    FileNotFoundError,
)


def _open_zarr(path: str | os.PathLike[str]) -> Any:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no zarr array at {path!r}: the path does not exist")
    try:
        return zarr.open_array(path, mode="r")
    except _NOT_AN_ARRAY as exc:
        raise ValueError(f"{path!r} is not a zarr array: {exc}") from exc


def zarr_info(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype, tuple[int, ...]]:
    """Shape, dtype and chunk shape of the zarr array stored at ``path``.

    For a sharded array the chunk shape returned is the shard shape: the unit that is stored
    as one object and that writers must not share.

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = zarr.create_array(os.path.join(d, "a.zarr"), shape=(5, 4), dtype="f8", chunks=(2, 4))
    >>> zarr_info(os.path.join(d, "a.zarr"))
    ((5, 4), dtype('float64'), (2, 4))
    >>> shutil.rmtree(d)
    """
    arr = _open_zarr(path)
    chunks = arr.shards if getattr(arr, "shards", None) else arr.chunks
    dtype = np.dtype(arr.dtype)
    if dtype.isnative:
        dtype = dtype.newbyteorder("=")
    return (
        tuple(int(s) for s in arr.shape),
        dtype,
        tuple(int(c) for c in chunks),
    )


def read_zarr_block(path: Any, slices: Any) -> np.ndarray:
    """``array[slices]`` as a NumPy array, from a zarr array path or an opened array.

    ``path`` may be a path (the array is opened read-only for this call) or an array-like
    object already opened (anything with ``.shape`` and ``__getitem__``, such as a
    ``zarr.Array``). The result never shares memory with the source.

    >>> import os, shutil, tempfile
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
        arr = _open_zarr(path)
    out = arr[slices]
    if isinstance(arr, np.ndarray):
        return np.array(out)
    return np.asarray(out)


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


def _normalize_region(
    slices: Any, shape: tuple[int, ...], where: str
) -> tuple[tuple[int | slice, ...], tuple[tuple[int, int], ...], tuple[int, ...]]:
    """The index, the per-axis ``[start, stop)`` bounds and the block shape of a region."""
    if not isinstance(slices, tuple):
        slices = (slices,)
    if len(slices) > len(shape):
        raise IndexError(f"{where}: region {slices} has more entries than axes (shape {shape})")
    index: list[int | slice] = []
    bounds: list[tuple[int, int]] = []
    block_shape: list[int] = []
    for axis, n in enumerate(shape):
        s = slices[axis] if axis < len(slices) else slice(None)
        if isinstance(s, slice):
            start, stop, step = s.indices(n)
            if step != 1:
                raise ValueError(
                    f"{where}: regions must be contiguous; got step {step} on axis {axis}"
                )
            stop = max(start, stop)
            index.append(slice(start, stop))
            bounds.append((start, stop))
            block_shape.append(stop - start)
        elif isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
            i = int(s) + n if s < 0 else int(s)
            if not 0 <= i < n:
                raise IndexError(f"{where}: index {s} is out of bounds for axis {axis} of {n}")
            index.append(i)
            bounds.append((i, i + 1))
        else:
            raise TypeError(f"{where}: a region is made of slices and ints, not {s!r}")
    return tuple(index), tuple(bounds), tuple(block_shape)


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
    array, with ``overwrite=True``), after it the complete array. With ``overwrite=True`` an
    existing ``path`` is first renamed aside, the new array renamed in, then the old one
    deleted. ``abort()`` deletes the temporary directory. As a context manager the writer
    commits on a clean exit and aborts on an exception.

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
            self._array: Any = zarr.create_array(
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
        index, bounds, region_shape = _normalize_region(slices, self.shape, where)
        arr = check_block(block, region_shape, self.dtype, where)
        if any(a >= b for a, b in bounds):
            return
        partial = _partially_covered_chunks(bounds, self.chunks, self.shape)
        with ExitStack() as stack:
            for coord in partial:
                stack.enter_context(self._chunk_lock(coord))
            array[index] = arr

    def _release(self, sync: bool) -> None:
        self._array = None
        if sync:
            fsync_path(self._tmp)

    def _move_into_place(self) -> str | None:
        old = None
        if os.path.lexists(self.path):  # overwrite: move the old array aside first
            old = temp_sibling(self.path, kind="old")
            os.rename(self.path, old)
        try:
            os.rename(self._tmp, self.path)
        except BaseException:
            if old is not None:
                os.rename(old, self.path)
            raise
        return old

    def __repr__(self) -> str:
        return (
            f"ZarrWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, "
            f"chunks={self.chunks}, {self._state})"
        )
