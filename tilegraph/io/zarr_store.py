"""Blocks of zarr arrays in local directories: inspection, block reads, and an atomic block
writer (zarr format 3); and the same for sparse arrays stored as zarr groups.

The writers build the whole array in a hidden temporary directory next to the destination
and rename it into place on commit, so a reader can never see a partially written array at
the destination path.

Sparse arrays (2-D, blocks in CSR or CSC form) are stored as one zarr v3 *group*::

    <path>/                       group; attribute "tilegraph_sparse" (below)
    <path>/blocks/                group
    <path>/blocks/<i>.<j>/        group of block (i, j) of the block grid
    <path>/blocks/<i>.<j>/data    1-D array: the block's stored values (the array's dtype)
    <path>/blocks/<i>.<j>/indices 1-D integer array: their column (CSR) or row (CSC) indices
    <path>/blocks/<i>.<j>/indptr  1-D integer array: where each row (CSR) or column (CSC)
                                  starts in ``data``/``indices``; rows (columns) + 1 entries

The attribute ``tilegraph_sparse`` is ``{"version": 1, "format": "csr" | "csc", "shape":
[m, n], "chunks": [[row block sizes], [column block sizes]], "dtype": <NumPy dtype string>,
"nnz": [[stored entries of block (i, j)]]}`` (``nnz`` is added when the writer commits).
Each block has its own arrays, so blocks are written independently, in any order and in
parallel, without knowing the other blocks' sizes; each block's ``(data, indices,
indptr)`` is exactly SciPy's CSR (CSC) representation of that block.
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
    rename_noreplace,
    replace_directory,
    temp_sibling,
)
from tilegraph.io.snapshot import (
    InputSnapshot,
    ReadLedger,
    file_identity,
    on_host,
    store_identity,
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

SPARSE_ATTRIBUTE = "tilegraph_sparse"
_SPARSE_VERSION = 1
_SPARSE_FORMATS = ("csr", "csc")
# values per zarr chunk of a block's data/indices/indptr arrays
_COMPONENT_CHUNK = 1 << 22



def _zarr() -> Any:
    """The zarr module, imported when a zarr array is first read or written (importing it
    takes longer than the rest of tilegraph)."""
    import zarr
    import zarr.errors

    return zarr


def _not_an_array() -> tuple[type[BaseException], ...]:
    """What zarr raises for a path that exists but holds no readable array (a plain
    directory, a file, a group, broken metadata)."""
    return (_zarr().errors.BaseZarrError, ValueError, KeyError, TypeError,
            NotADirectoryError, FileNotFoundError)


def _open_zarr(path: str | os.PathLike[str]) -> Any:
    path = os.fspath(path)
    restore_interrupted(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no zarr array at {path!r} {on_host()}: the path does not "
                                "exist")
    try:
        return _zarr().open_array(path, mode="r")
    except _not_an_array() as exc:
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
    ``_zarr().Array``). The result never shares memory with the source.

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


BASELINE_CHUNKS = 1 << 16  # arrays of at most this many chunks are fingerprinted whole


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


def _rename_into_place(tmp: str, path: str, overwrite: bool) -> str | None:
    """Move the directory ``tmp`` to ``path`` atomically (see :mod:`tilegraph.io._atomic`);
    returns the name of a displaced old result (to delete), or None."""
    if overwrite:
        return replace_directory(tmp, path)
    rename_noreplace(tmp, path)
    return None


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
            self._array: Any = _zarr().create_array(
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
        return _rename_into_place(self._tmp, self.path, self.overwrite)

    def __repr__(self) -> str:
        return (
            f"ZarrWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, "
            f"chunks={self.chunks}, {self._state})"
        )


# -- sparse arrays as zarr groups --------------------------------------------------------------


def _block_path(root: str, coord: tuple[int, ...]) -> str:
    return os.path.join(root, "blocks", f"{coord[0]}.{coord[1]}")


def sparse_zarr_info(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """What the sparse zarr group at ``path`` holds: ``shape``, ``chunks`` (block sizes per
    axis), ``dtype``, ``format`` and ``nnz`` (stored entries per block, a NumPy array over
    the block grid, or None); None when ``path`` is not such a group (a zarr array, another
    group, nothing).

    >>> import os, shutil, tempfile
    >>> import scipy.sparse as sps
    >>> d = tempfile.mkdtemp()
    >>> with SparseZarrWriter(os.path.join(d, "s.zarr"), (2, 3), "f8", ((2,), (3,))) as w:
    ...     w.write_block((0, 0), sps.csr_array(np.eye(2, 3)))
    >>> info = sparse_zarr_info(os.path.join(d, "s.zarr"))
    >>> info["shape"], info["chunks"], info["format"], info["nnz"].tolist()
    ((2, 3), ((2,), (3,)), 'csr', [[2]])
    >>> sparse_zarr_info(d) is None
    True
    >>> shutil.rmtree(d)
    """
    path = os.fspath(path)
    restore_interrupted(path)
    if not os.path.isdir(path):
        return None
    try:
        group = _zarr().open_group(path, mode="r")
    except _not_an_array():
        return None
    spec = dict(group.attrs).get(SPARSE_ATTRIBUTE)
    if spec is None:
        return None
    try:
        version = spec["version"]
        if version != _SPARSE_VERSION:
            raise ValueError(f"layout version {version!r} is not {_SPARSE_VERSION}")
        shape = tuple(int(s) for s in spec["shape"])
        chunks = tuple(tuple(int(c) for c in axis) for axis in spec["chunks"])
        fmt = spec["format"]
        if fmt not in _SPARSE_FORMATS:
            raise ValueError(f"format {fmt!r} is not 'csr' or 'csc'")
        if len(shape) != 2 or len(chunks) != 2 or any(
                sum(c) != s for c, s in zip(chunks, shape, strict=True)):
            raise ValueError(f"chunks {chunks} do not add up to the 2-D shape {shape}")
        dtype = np.dtype(spec["dtype"])
        nnz = spec.get("nnz")
        if nnz is not None:
            nnz = np.asarray(nnz, dtype=np.int64).reshape(len(chunks[0]), len(chunks[1]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path!r} is not a readable sparse zarr group: its "
                         f"{SPARSE_ATTRIBUTE!r} attribute is malformed ({exc})") from exc
    return {"shape": shape, "chunks": chunks, "dtype": dtype, "format": fmt, "nnz": nnz}


def read_sparse_zarr_block(path: str | os.PathLike[str], coord: tuple[int, int],
                           expect: InputSnapshot | None = None,
                           ledger: ReadLedger | None = None) -> Any:
    """Block ``coord`` of the sparse zarr group at ``path``, as a ``scipy.sparse``
    ``csr_array`` (``csc_array`` for a CSC group). ``expect``: as for
    :func:`read_zarr_block`; ``ledger``: the fingerprint of every file of the block's
    arrays, recorded when first read and compared at every later read (as for
    :func:`read_zarr_block`).

    >>> import os, shutil, tempfile
    >>> import scipy.sparse as sps
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "s.zarr")
    >>> with SparseZarrWriter(path, (3, 2), "i8", ((2, 1), (2,))) as w:
    ...     w.write_block((0, 0), sps.csr_array(np.array([[1, 0], [0, 2]])))
    ...     w.write_block((1, 0), sps.csr_array(np.array([[0, 3]])))
    >>> read_sparse_zarr_block(path, (1, 0)).toarray()
    array([[0, 3]])
    >>> shutil.rmtree(d)
    """
    import scipy.sparse as sps

    path = os.fspath(path)
    if expect is not None:
        expect.check(*store_identity(path))
    info = sparse_zarr_info(path)
    if info is None:
        raise ValueError(f"{path!r} is not a sparse zarr group (no {SPARSE_ATTRIBUTE!r} "
                         "attribute)")
    chunks = info["chunks"]
    grid = tuple(len(c) for c in chunks)
    coord = tuple(int(c) for c in coord)
    if len(coord) != 2 or not all(0 <= c < g for c, g in zip(coord, grid, strict=True)):
        raise IndexError(f"read_sparse_zarr_block: block {coord} is outside the block grid "
                         f"{grid} of {path!r}")
    base = _block_path(path, coord)
    if ledger is not None:
        ledger.settle(lambda: {} if grid[0] * grid[1] > BASELINE_CHUNKS else {
            p: ledger.fingerprint(p) for p in (
                os.path.relpath(_block_path(path, c), path) for c in np.ndindex(*grid))})
        part = os.path.relpath(base, path)
        before = {part: ledger.fingerprint(part)}
        ledger.check(before)
    try:
        parts = [np.asarray(_zarr().open_array(os.path.join(base, part), mode="r")[...])
                 for part in ("data", "indices", "indptr")]
    except _not_an_array() as exc:
        raise ValueError(f"{path!r}: block {coord} is missing or unreadable: {exc}") from exc
    shape = (chunks[0][coord[0]], chunks[1][coord[1]])
    if expect is not None:  # replaced while being read
        expect.check(*store_identity(path))
    if ledger is not None:
        ledger.same(before, {part: ledger.fingerprint(part)})
    cls = sps.csr_array if info["format"] == "csr" else sps.csc_array
    return cls((parts[0].astype(info["dtype"], copy=False), parts[1], parts[2]), shape=shape)


class SparseZarrWriter(AtomicWriter):
    """Writes a sparse 2-D array block by block as a zarr (format 3) group (the layout of
    the module docstring); the group appears at ``path`` only on commit.

    ``chunks`` are the block sizes per axis (any sizes, not necessarily regular), ``format``
    ``"csr"`` or ``"csc"``: how every block is stored. Blocks are written with
    :meth:`write_block` (block coordinate) or :meth:`write` (the block's region), from any
    number of threads at once, each block once. ``commit()`` checks that every block was
    written, records the blocks' sizes, and renames the temporary directory to ``path``;
    ``abort()`` deletes it. Overwriting, the context-manager protocol and the temporary
    name are those of :class:`ZarrWriter`.

    >>> import os, shutil, tempfile
    >>> import scipy.sparse as sps
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "s.zarr")
    >>> with SparseZarrWriter(path, (2, 4), "float64", ((2,), (3, 1))) as w:
    ...     w.write((slice(0, 2), slice(0, 3)), sps.csr_array(np.eye(2, 3)))
    ...     w.write_block((0, 1), sps.csr_array((2, 1)))
    >>> read_sparse_zarr_block(path, (0, 0)).toarray()
    array([[1., 0., 0.],
           [0., 1., 0.]])
    >>> shutil.rmtree(d)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shape: tuple[int, ...],
        dtype: Any,
        chunks: Any,
        format: str = "csr",
        overwrite: bool = False,
        *,
        fsync: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.overwrite = overwrite
        self.fsync = fsync
        where = f"SparseZarrWriter({self.path!r})"
        self.shape = tuple(int(s) for s in shape)
        if len(self.shape) != 2 or any(s < 0 for s in self.shape):
            raise ValueError(f"{where}: sparse arrays are 2-D with non-negative lengths, got "
                             f"shape {self.shape}")
        try:
            self.chunks = tuple(tuple(int(c) for c in axis) for axis in chunks)
        except TypeError:
            raise TypeError(f"{where}: chunks must be block sizes per axis, such as "
                            f"((2, 2, 1), (3,)), got {chunks!r}") from None
        if len(self.chunks) != 2 or any(
                not c or min(c) < 0 or sum(c) != s
                for c, s in zip(self.chunks, self.shape, strict=True)):
            raise ValueError(f"{where}: chunks {self.chunks} must be non-negative block sizes "
                             f"adding up to each axis of shape {self.shape}")
        if format not in _SPARSE_FORMATS:
            raise ValueError(f"{where}: format must be 'csr' or 'csc', got {format!r}")
        self.format = format
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biufc" or self.dtype == np.float16:
            raise TypeError(f"{where}: dtype {self.dtype} is not supported for sparse arrays")
        self.grid = tuple(len(c) for c in self.chunks)
        self._starts = [
            {(o, o + s): k
             for k, (o, s) in enumerate(zip(itertools.accumulate((0, *c)), c, strict=False))}
            for c in self.chunks
        ]
        check_destination(self.path, overwrite)
        self._tmp = temp_sibling(self.path)
        self._lock = threading.Lock()
        self._blocks_lock = threading.Lock()
        self._nnz: dict[tuple[int, int], int] = {}
        self._started: set[tuple[int, int]] = set()
        self._state = "open"
        self._finalizer = weakref.finalize(self, remove_path, self._tmp)
        spec = {"version": _SPARSE_VERSION, "format": self.format, "shape": list(self.shape),
                "chunks": [list(c) for c in self.chunks], "dtype": self.dtype.str}
        try:
            _zarr().create_group(self._tmp, zarr_format=3, attributes={SPARSE_ATTRIBUTE: spec})
            _zarr().create_group(os.path.join(self._tmp, "blocks"), zarr_format=3)
        except BaseException:
            self._state = "aborted"
            self._finalizer()
            raise

    @property
    def temp_path(self) -> str:
        """Where the group lives until ``commit``."""
        return self._tmp

    def write(self, slices: Any, block: Any) -> None:
        """Store ``block`` as the block whose region of the whole array is ``slices``
        (exactly one block of the chunk grid; blocks of length 0 share their region with
        their neighbours, so write those with :meth:`write_block`)."""
        where = f"SparseZarrWriter({self.path!r}).write"
        _index, bounds, _shape = _normalize_region(slices, self.shape, where)
        coord = tuple(self._starts[a].get(b) for a, b in enumerate(bounds))
        if None in coord:
            raise ValueError(f"{where}: region {bounds} is not one block of the block grid "
                             f"{self.chunks}; write whole blocks")
        self.write_block(coord, block)

    def write_block(self, coord: tuple[int, int], block: Any) -> None:
        """Store the ``scipy.sparse`` ``block`` as block ``coord`` of the block grid."""
        import scipy.sparse as sps

        where = f"SparseZarrWriter({self.path!r}).write_block"
        if self._state != "open":
            raise RuntimeError(f"SparseZarrWriter({self.path!r}) is {self._state}; it takes "
                               "no writes")
        coord = tuple(int(c) for c in coord)
        if len(coord) != 2 or not all(0 <= c < g for c, g in zip(coord, self.grid,
                                                                   strict=True)):
            raise IndexError(f"{where}: block {coord} is outside the block grid {self.grid}")
        if not sps.issparse(block):
            raise TypeError(f"{where}: block {coord} must be a scipy.sparse array, got "
                            f"{type(block).__name__}")
        want = (self.chunks[0][coord[0]], self.chunks[1][coord[1]])
        if tuple(block.shape) != want:
            raise ValueError(f"{where}: block {coord} of shape {tuple(block.shape)} does not "
                             f"match the block shape {want}")
        if not np.can_cast(block.dtype, self.dtype, casting="same_kind"):
            raise TypeError(f"{where}: cannot store a block of dtype {block.dtype} in a "
                            f"sparse array of dtype {self.dtype} without losing information")
        with self._blocks_lock:
            if coord in self._started:
                raise ValueError(f"{where}: block {coord} was already written")
            self._started.add(coord)
        cls = sps.csr_array if self.format == "csr" else sps.csc_array
        blk = cls(block)
        parts = {"data": np.asarray(blk.data, dtype=self.dtype),
                 "indices": np.asarray(blk.indices), "indptr": np.asarray(blk.indptr)}
        base = _block_path(self._tmp, coord)
        _zarr().create_group(base, zarr_format=3)
        for name, values in parts.items():
            arr = _zarr().create_array(os.path.join(base, name), shape=values.shape,
                                    dtype=values.dtype,
                                    chunks=(min(max(1, values.size), _COMPONENT_CHUNK),),
                                    zarr_format=3)
            if values.size:
                arr[...] = values
        with self._blocks_lock:
            self._nnz[coord] = int(blk.nnz)

    def commit(self) -> None:
        """Check that every block was written, record the blocks' sizes, and move the group
        to ``path`` in one rename (see :meth:`AtomicWriter.commit`)."""
        if self._state == "open":
            missing = [c for c in np.ndindex(*self.grid) if c not in self._nnz]
            if missing:
                self.abort()
                raise ValueError(
                    f"SparseZarrWriter({self.path!r}): {len(missing)} of "
                    f"{math.prod(self.grid)} blocks were never written (first: {missing[0]}); "
                    "nothing was stored")
            nnz = [[self._nnz[(i, j)] for j in range(self.grid[1])]
                   for i in range(self.grid[0])]
            try:
                group = _zarr().open_group(self._tmp, mode="r+")
                spec = dict(group.attrs)[SPARSE_ATTRIBUTE]
                group.attrs.update({SPARSE_ATTRIBUTE: {**spec, "nnz": nnz}})
            except BaseException:
                self.abort()
                raise
        super().commit()

    def _release(self, sync: bool) -> None:
        if sync:
            fsync_path(self._tmp)

    def _move_into_place(self) -> str | None:
        return _rename_into_place(self._tmp, self.path, self.overwrite)

    def __repr__(self) -> str:
        return (
            f"SparseZarrWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, "
            f"format={self.format}, chunks={self.chunks}, {self._state})"
        )
