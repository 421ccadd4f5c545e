"""Sparse 2-D arrays stored as zarr (format 3) groups: inspection
(:func:`sparse_zarr_info`), block reads (:func:`read_sparse_zarr_block`) and an atomic block
writer (:class:`SparseZarrWriter`), as :mod:`tilegraph.io.zarr_store` has for dense arrays.

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

The public names are also exported by :mod:`tilegraph.io.zarr_store`, where they were
defined before, and keep that module name (:func:`tilegraph.io.zarr_common.keep_module`), so
plan digests, checkpoint plan keys and pickles that name them are unchanged.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import weakref
from typing import Any

import numpy as np

from tilegraph.debris import restore_interrupted
from tilegraph.io._atomic import (
    AtomicWriter,
    check_destination,
    fsync_path,
    remove_path,
    temp_sibling,
)
from tilegraph.io.snapshot import InputSnapshot, ReadLedger, store_identity
from tilegraph.io.zarr_common import (
    BASELINE_CHUNKS,
    keep_module,
    load_zarr,
    normalize_region,
    not_an_array_errors,
    rename_into_place,
)

__all__ = [
    "SPARSE_ATTRIBUTE",
    "SparseZarrWriter",
    "read_sparse_zarr_block",
    "sparse_zarr_info",
]

SPARSE_ATTRIBUTE = "tilegraph_sparse"
_SPARSE_VERSION = 1
_SPARSE_FORMATS = ("csr", "csc")
# values per zarr chunk of a block's data/indices/indptr arrays
_COMPONENT_CHUNK = 1 << 22


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
        group = load_zarr().open_group(path, mode="r")
    except not_an_array_errors():
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
    :func:`tilegraph.io.zarr_store.read_zarr_block`; ``ledger``: the fingerprint of every
    file of the block's arrays, recorded when first read and compared at every later read
    (as for :func:`tilegraph.io.zarr_store.read_zarr_block`).

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
        parts = [np.asarray(load_zarr().open_array(os.path.join(base, part), mode="r")[...])
                 for part in ("data", "indices", "indptr")]
    except not_an_array_errors() as exc:
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
    name are those of :class:`tilegraph.io.zarr_store.ZarrWriter`.

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
            load_zarr().create_group(self._tmp, zarr_format=3, attributes={SPARSE_ATTRIBUTE: spec})
            load_zarr().create_group(os.path.join(self._tmp, "blocks"), zarr_format=3)
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
        _index, bounds, _shape = normalize_region(slices, self.shape, where)
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
        load_zarr().create_group(base, zarr_format=3)
        for name, values in parts.items():
            arr = load_zarr().create_array(
                os.path.join(base, name), shape=values.shape, dtype=values.dtype,
                chunks=(min(max(1, values.size), _COMPONENT_CHUNK),), zarr_format=3)
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
                group = load_zarr().open_group(self._tmp, mode="r+")
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
        return rename_into_place(self._tmp, self.path, self.overwrite)

    def __repr__(self) -> str:
        return (
            f"SparseZarrWriter({self.path!r}, shape={self.shape}, dtype={self.dtype}, "
            f"format={self.format}, chunks={self.chunks}, {self._state})"
        )


keep_module("tilegraph.io.zarr_store", sparse_zarr_info, read_sparse_zarr_block,
            SparseZarrWriter)
