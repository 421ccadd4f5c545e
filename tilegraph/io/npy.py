"""Blocks of ``.npy`` files: header inspection, block reads through a memory map, and an
atomic block writer.

Reads map the file read-only, copy the requested block out and unmap again, so no file stays
mapped between calls. Writes go to a hidden temporary file next to the destination and appear
at the destination in one ``os.replace`` on commit: a reader never sees a partially written
file at ``path``; without ``overwrite``, of two writers racing for one path exactly one
succeeds and the other gets ``FileExistsError``.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from typing import Any, BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from tilegraph.io._atomic import (
    AtomicWriter,
    check_block,
    check_destination,
    remove_path,
    rename_noreplace,
    temp_sibling,
)
from tilegraph.io.snapshot import (
    InputChangedError,
    InputSnapshot,
    ReadLedger,
    file_identity,
    on_host,
)
from tilegraph.util import AST_LOCK

__all__ = ["NpyWriter", "memmap_layout", "npy_info", "read_mapped_block", "read_npy_block"]


def _open_npy(path: str) -> BinaryIO:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise FileNotFoundError(f"no .npy file at {path!r} {on_host()}") from None
    except IsADirectoryError:
        raise ValueError(f"{path!r} is a directory, not an .npy file") from None


def _read_header(fp: BinaryIO, path: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset of an open ``.npy`` file, after checking it is usable."""
    try:
        with AST_LOCK:   # NumPy parses the header as a Python literal; threads read at once
            version = npy_format.read_magic(fp)
            if version == (1, 0):
                shape, fortran_order, dtype = npy_format.read_array_header_1_0(fp)
            elif version == (2, 0):
                shape, fortran_order, dtype = npy_format.read_array_header_2_0(fp)
            else:
                raise ValueError(f"unsupported .npy format version {version[0]}."
                                 f"{version[1]}")
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


def read_npy_block(path: str | os.PathLike[str], slices: Any,
                   expect: InputSnapshot | None = None) -> np.ndarray:
    """A copy of ``array[slices]`` from an ``.npy`` file.

    ``expect``: the file as the plan saw it (:mod:`tilegraph.io.snapshot`); the open file
    is compared with it before and after reading, and a changed file is an
    :class:`~tilegraph.io.snapshot.InputChangedError`.

    Regions of ints and unit-step slices are read with positional reads straight into the
    result, one read per contiguous run, so no page of the file is ever mapped into the
    process; other regions go through a read-only memory map released before returning.
    The result owns its memory.

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
        fd = fp.fileno()
        if expect is not None:
            identity = file_identity(fd)
            if identity != expect.identity:  # before parsing: the header may be anything
                expect.check(identity)
        shape, dtype, offset = _read_header(fp, path)
        if expect is not None:
            expect.check(identity, "", shape, dtype)
        region_shape = np.broadcast_to(np.empty((), dtype=np.uint8), shape)[slices].shape
        bounds = _unit_region(slices, shape)
        if bounds is not None:
            out = np.empty(region_shape, dtype=dtype)
            runs = out.reshape(tuple(b - a for a, b in bounds))  # a view: reads land in out
            _read_runs(fd, runs, bounds, shape, offset, path)
        else:
            mm = np.memmap(fp, mode="r", dtype=dtype, shape=shape, offset=offset, order="C")
            try:
                out = np.array(mm[slices])
            finally:
                del mm
        if expect is not None:  # rewritten in place while being read
            expect.check(file_identity(fd))
        return out


Layout = tuple[int, tuple[int, ...], np.dtype, tuple[int, ...]]


def memmap_layout(x: np.ndarray) -> tuple[str, Layout] | None:
    """The file a memory map (``numpy.memmap``, or a view of one) shows and its layout
    there: ``(path, (byte offset of its first element, shape, dtype, strides))``; None when
    it shows no file's current bytes (a map of mode ``"c"``, whose writes stay in memory,
    or an array that only came from a memory map).

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> m = np.memmap(os.path.join(d, "m.dat"), dtype="f4", mode="w+", shape=(4, 6))
    >>> path, (offset, shape, dtype, strides) = memmap_layout(m[1:, ::2])
    >>> os.path.basename(path), offset, shape, dtype, strides
    ('m.dat', 24, (3, 3), dtype('float32'), (24, 8))
    >>> del m; shutil.rmtree(d)
    """
    mapping = getattr(x, "_mmap", None)
    filename = getattr(x, "filename", None)
    if mapping is None or not filename or getattr(x, "mode", None) == "c":
        return None
    try:
        start = np.frombuffer(mapping, dtype=np.uint8).__array_interface__["data"][0]
    except (ValueError, TypeError, BufferError):  # a closed map
        return None
    origin = int(x.offset) - int(x.offset) % mmap.ALLOCATIONGRANULARITY
    first = origin + x.__array_interface__["data"][0] - start
    return os.path.abspath(filename), (first, tuple(x.shape), x.dtype, tuple(x.strides))


def read_mapped_block(path: str, layout: Layout, slices: Any,
                      ledger: ReadLedger | None = None,
                      inode: tuple[int, int] | None = None) -> np.ndarray:
    """A copy of ``array[slices]``, where ``array`` is laid out in the file at ``path`` as
    ``layout`` says (:func:`memmap_layout`), read through a read-only map of the part of
    the file it spans, unmapped before returning.

    ``ledger``: the file's fingerprint (inode, size, modification time) is recorded there
    at the first read and compared at every later read and before and after this one: a
    file written under the run (through the map itself, or by another process) is an
    :class:`~tilegraph.io.snapshot.InputChangedError`. ``inode``: the device and inode of
    the file the map showed (when the array was made); another file at ``path`` (the
    mapped one replaced) is an ``InputChangedError`` even at the first read.

    >>> import os, shutil, tempfile
    >>> d = tempfile.mkdtemp()
    >>> m = np.memmap(os.path.join(d, "m.dat"), dtype="i8", mode="w+", shape=(3, 4))
    >>> m[:] = np.arange(12).reshape(3, 4)
    >>> read_mapped_block(*memmap_layout(m.T), (slice(1, 3), slice(0, 2)))
    array([[1, 5],
           [2, 6]])
    >>> del m; shutil.rmtree(d)
    """
    first, shape, dtype, strides = layout
    dtype = np.dtype(dtype)
    region = np.broadcast_to(np.empty((), dtype=np.uint8), shape)[slices].shape
    with open(path, "rb") as fp:
        fd = fp.fileno()
        before = file_identity(fd)
        if inode is not None and tuple(before[:2]) != tuple(inode):
            raise InputChangedError(
                f"{path!r} is no longer the file the memory map showed: it was replaced "
                "after the array was made over the map, and reading it would give another "
                "file's data. Map the file again and make the array again")
        if ledger is not None:
            ledger.check({"": before})
        if 0 in shape:
            out = np.empty(region, dtype=dtype)
        else:
            lo = first + sum(s * (n - 1) for s, n in zip(strides, shape, strict=True) if s < 0)
            hi = first + dtype.itemsize + sum(s * (n - 1) for s, n in
                                              zip(strides, shape, strict=True) if s > 0)
            if lo < 0 or hi > before[2]:
                raise ValueError(f"{path!r} holds {before[2]} bytes, fewer than the memory "
                                 f"map it is read through spans ({hi} bytes): it was "
                                 "truncated")
            origin = lo - lo % mmap.ALLOCATIONGRANULARITY
            window = mmap.mmap(fd, hi - origin, access=mmap.ACCESS_READ, offset=origin)
            try:
                whole = np.ndarray(shape, dtype=dtype, buffer=window, offset=first - origin,
                                   strides=strides)
                out = np.array(whole[slices])
                del whole
            finally:
                window.close()
        if ledger is not None:  # written while being read
            ledger.same({"": before}, {"": file_identity(fd)})
    return out


def _runs(bounds: list[tuple[int, int]], shape: tuple[int, ...], itemsize: int
          ) -> tuple[int, list[tuple[int, ...]], list[int]]:
    """The contiguous runs of a C-ordered region: the innermost axis ``j`` that is not whole
    (-1 if all are), the index combinations of the axes before it, and byte strides."""
    nd = len(shape)
    k = nd
    while k > 0 and bounds[k - 1] == (0, shape[k - 1]):
        k -= 1
    strides = [itemsize * int(np.prod(shape[d + 1:])) for d in range(nd)]
    j = k - 1
    combos = list(np.ndindex(*[b - a for a, b in bounds[:j]])) if j >= 0 else [()]
    return j, combos, strides


def _read_runs(fd: int, out: np.ndarray, bounds: list[tuple[int, int]],
               shape: tuple[int, ...], offset: int, path: str) -> None:
    if out.size == 0:
        return
    j, combos, strides = _runs(bounds, shape, out.itemsize)
    base = offset + (bounds[j][0] * strides[j] if j >= 0 else 0)
    for combo in combos:
        start = base + sum((bounds[d][0] + c) * strides[d] for d, c in enumerate(combo))
        view = memoryview(out[combo] if combo else out).cast("B")
        while len(view):
            got = os.preadv(fd, [view], start)
            if got <= 0:
                raise ValueError(f"{path}: file ends before the data its header describes")
            view = view[got:]
            start += got


def _unit_region(slices: Any, shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """``(start, stop)`` per axis of a region given by ints and unit-step slices, or None
    when a slice has another step."""
    if not isinstance(slices, tuple):
        slices = (slices,)
    if any(s is Ellipsis or s is None for s in slices):
        return None
    out = []
    for axis, length in enumerate(shape):
        s = slices[axis] if axis < len(slices) else slice(None)
        if isinstance(s, slice):
            start, stop, step = s.indices(length)
            if step != 1:
                return None
            out.append((start, max(start, stop)))
        else:
            i = int(s) + (length if int(s) < 0 else 0)
            out.append((i, i + 1))
    return out


def _pwrite_all(fd: int, arr: np.ndarray, offset: int) -> None:
    """Write a contiguous array's bytes at ``offset``, however many calls it takes."""
    view = memoryview(np.ascontiguousarray(arr)).cast("B")
    while len(view):
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


class NpyWriter(AtomicWriter):
    """Writes an ``.npy`` file block by block; the file appears at ``path`` only on commit.

    The data goes to a hidden temporary file ``.<basename>.tmp-<uuid4 hex>.npy`` in the same
    directory, written with positional writes (``os.pwrite``) of each contiguous run of a
    block, so the file is never mapped into memory and writing an array larger than memory
    does not grow the process's resident set. ``commit()`` fsyncs it (when ``fsync`` is true)
    and renames it to ``path`` in one step (``os.replace``, or without ``overwrite`` a rename
    that fails if ``path`` exists), so a reader can never see a
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
            self._fd: int | None = self._create()
        except BaseException:
            self._state = "aborted"
            self._finalizer()
            raise

    def _create(self) -> int:
        """Write the header, size the (sparse) file, and return a descriptor open on it."""
        header = {"descr": npy_format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": self.shape}
        with open(self._tmp, "wb") as f:
            npy_format.write_array_header_2_0(f, header)
            self._offset = f.tell()
            f.truncate(self._offset + self.dtype.itemsize * int(np.prod(self.shape)))
        return os.open(self._tmp, os.O_RDWR)

    @property
    def temp_path(self) -> str:
        """Where the data lives until ``commit``."""
        return self._tmp

    def write(self, slices: Any, block: Any) -> None:
        """Store ``block`` at ``array[slices]``; its shape must equal the region's shape."""
        fd = self._fd
        if fd is None:
            raise RuntimeError(f"NpyWriter({self.path!r}) is {self._state}; it takes no writes")
        region_shape = np.broadcast_to(np.empty((), dtype=np.uint8), self.shape)[slices].shape
        arr = check_block(block, region_shape, self.dtype, f"NpyWriter({self.path!r}).write")
        bounds = _unit_region(slices, self.shape)
        if bounds is None:  # strided region: write through a short-lived map of the file
            mm = np.memmap(self._tmp, dtype=self.dtype, mode="r+", offset=self._offset,
                           shape=self.shape)
            mm[slices] = arr
            mm.flush()
            del mm
            return
        arr = np.ascontiguousarray(arr, dtype=self.dtype).reshape(
            tuple(b - a for a, b in bounds))
        if arr.size == 0:
            return
        j, combos, strides = _runs(bounds, self.shape, self.dtype.itemsize)
        base = self._offset + (bounds[j][0] * strides[j] if j >= 0 else 0)
        for combo in combos:
            start = base + sum((bounds[d][0] + c) * strides[d] for d, c in enumerate(combo))
            _pwrite_all(fd, arr[combo] if combo else arr, start)

    def _release(self, sync: bool) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            if sync:
                os.fsync(fd)
            os.close(fd)

    def _move_into_place(self) -> None:
        if self.overwrite:
            os.replace(self._tmp, self.path)
        else:
            rename_noreplace(self._tmp, self.path)

    def __repr__(self) -> str:
        return f"NpyWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, {self._state})"
