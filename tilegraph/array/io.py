"""Arrays from and to storage, block by block: ``.npy`` files (memory-mapped) and zarr v3.

Reads happen in the tasks that need each block; writes happen in one task per block, as
soon as the block is made, into a temporary file or directory that is renamed into place
only when every block is written. A failed or interrupted write leaves nothing at the path.

A :class:`~tilegraph.array.sparse.SparseArray` is stored as a zarr group holding the CSR (or
CSC) arrays of every block (the layout is described in :mod:`tilegraph.io.zarr_store`);
:func:`from_zarr` recognises such a group and gives back a SparseArray with the same blocks.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks, source
from tilegraph.array.chunks import all_block_slices, block_shape, normalize_chunks, numblocks
from tilegraph.array.core import Array, tokenize
from tilegraph.array.sparse import SparseArray, sparse_block_nbytes
from tilegraph.graph.taskgraph import Dep, Lit
from tilegraph.io import (
    NpyWriter,
    SparseZarrWriter,
    ZarrWriter,
    npy_info,
    read_npy_block,
    read_sparse_zarr_block,
    read_zarr_block,
    sparse_zarr_info,
    zarr_info,
)
from tilegraph.io.snapshot import InputSnapshot, snapshot_of


def _reader_array(op: str, reader: Any, path: str, shape: tuple[int, ...], dtype: np.dtype,
                  chunks: Any, snap: InputSnapshot) -> Array:
    chunks = normalize_chunks(chunks, shape, dtype)
    slices = all_block_slices(chunks)
    name = f"{op}-{tokenize(op, snap, chunks)}"
    itemsize = dtype.itemsize
    blocks = source(name, numblocks(chunks),
                    lambda c: (reader, (path, Lit(slices[c]), Lit(snap))),
                    kind="load", name=op,
                    nbytes=lambda c: itemsize * math.prod(s.stop - s.start for s in slices[c]))
    return Array(blocks, shape, chunks, dtype)


def from_npy(path: str | os.PathLike, chunks: Any = "auto") -> Array:
    """The array stored in an ``.npy`` file; each task reads its block through a memory map,
    so the file never has to fit in memory. The file is snapshotted now (identity, size,
    modification time, shape, dtype) and every block read checks it: a file changed after
    this call is an :class:`~tilegraph.io.snapshot.InputChangedError` naming it, never a
    mix of old and new blocks."""
    path = os.fspath(path)
    snap = snapshot_of(path)
    shape, dtype = npy_info(path)
    snap = replace(snap, shape=shape, dtype=str(np.dtype(dtype)))
    return _reader_array("from_npy", read_npy_block, path, shape, np.dtype(dtype), chunks,
                         snap)


def _sparse_from_zarr(path: str, info: dict[str, Any], chunks: Any) -> SparseArray:
    shape, stored, dtype, fmt, nnz = (info[k] for k in ("shape", "chunks", "dtype", "format",
                                                        "nnz"))
    snap = snapshot_of(path)
    token = tokenize("from_zarr-sparse", snap, stored)
    name = f"from_zarr-{token}"

    def nbytes(c: tuple[int, ...]) -> int | None:
        if nnz is None:
            return None
        return sparse_block_nbytes(block_shape(stored, c), int(nnz[c]), dtype, fmt)

    blocks = source(name, numblocks(stored),
                    lambda c: (read_sparse_zarr_block, (path, Lit(c), Lit(snap))), kind="load",
                    name="from_zarr", nbytes=nbytes)
    size = math.prod(shape)
    density = None if nnz is None else (min(1.0, int(nnz.sum()) / size) if size else 0.0)
    x = SparseArray(blocks, shape, stored, dtype, fmt, density)
    return x if chunks is None else x.rechunk(chunks)


def from_zarr(path: str | os.PathLike, chunks: Any = None) -> Array:
    """The zarr array at ``path``; blocks default to the zarr chunks. The array is
    snapshotted now (its directory, metadata, shape and dtype) and every block read checks
    it, as for :func:`from_npy`. A sparse zarr group
    (written by :func:`to_zarr` from a SparseArray) gives a SparseArray with the stored
    blocks (rechunked when ``chunks`` is given).

    >>> import os, shutil, tempfile, numpy as np, scipy.sparse as sps, tilegraph as tg
    >>> d = tempfile.mkdtemp()
    >>> tg.from_scipy(sps.csr_array(np.eye(3)), chunks=2).to_zarr(os.path.join(d, "s.zarr"))
    >>> y = tg.from_zarr(os.path.join(d, "s.zarr"))
    >>> type(y).__name__, y.chunks, y.to_scipy().nnz
    ('SparseArray', ((2, 1), (2, 1)), 3)
    >>> shutil.rmtree(d)
    """
    path = os.fspath(path)
    info = sparse_zarr_info(path)
    if info is not None:
        return _sparse_from_zarr(path, info, chunks)
    snap = snapshot_of(path)
    shape, dtype, zchunks = zarr_info(path)
    snap = replace(snap, shape=shape, dtype=str(np.dtype(dtype)))
    return _reader_array("from_zarr", read_zarr_block, path, shape, np.dtype(dtype),
                         zchunks if chunks is None else chunks, snap)


def _write_block(writer: Any, slices: tuple, block: np.ndarray) -> None:
    writer.write(slices, block)


def _write_sparse_block(writer: Any, coord: tuple, block: Any) -> None:
    writer.write_block(coord, block)


def _store(x: Array, writer: Any, options: dict[str, Any]) -> None:
    from tilegraph.array.lowering import run_blocks

    slices = all_block_slices(x.chunks)
    name = f"write-{tokenize('write', x, id(writer))}"
    sparse = isinstance(writer, SparseZarrWriter)

    def emit(builder: Any) -> None:
        for coord, slc in slices.items():
            if sparse:
                func, where = _write_sparse_block, Lit(coord)
            else:
                func, where = _write_block, Lit(slc)
            builder.add((name, *coord), func, deps=[x.collection.key(coord)],
                        args=(writer, where, Dep(0)), kind="store", name="write",
                        coords=coord)

    blocks = Blocks(name, x.numblocks, (x.collection,), emit)
    try:  # (the write tasks' results are never broadcast: only rank 0 commits)
        here = run_blocks([blocks], **{**options, "mpi_broadcast_limit": 0})
    except BaseException:
        writer.abort()
        raise
    if here:
        writer.commit()
    else:  # an MPI rank other than 0: rank 0 wrote every block and commits
        writer.abort()


def to_npy(x: Array, path: str | os.PathLike, overwrite: bool = False, **options: Any) -> None:
    """Write ``x`` to an ``.npy`` file, block by block; the file appears only when complete.
    Options are those of ``compute()``."""
    from tilegraph import config

    config.resolve(options, "to_npy()")
    if isinstance(x, SparseArray):
        raise TypeError(f"to_npy: a sparse array (shape {x.shape}) is written with to_zarr, "
                        "or made dense first: x.todense().to_npy(path)")
    writer = NpyWriter(os.fspath(path), x.shape, x.dtype, overwrite=overwrite)
    _store(x, writer, options)


def to_zarr(x: Array, path: str | os.PathLike, overwrite: bool = False, **options: Any
            ) -> None:
    """Write ``x`` to a zarr v3 array whose chunks are ``x``'s block shape (blocks are first
    made regular if they are not); the array appears at ``path`` only when complete.

    A SparseArray is written as a zarr v3 group holding the CSR (CSC) arrays of each of its
    blocks, as they are (see :mod:`tilegraph.io.zarr_store`), also atomically.

    >>> import os, shutil, tempfile, numpy as np, tilegraph as tg
    >>> d = tempfile.mkdtemp()
    >>> tg.from_numpy(np.arange(6.0), chunks=4).to_zarr(os.path.join(d, "a.zarr"))
    >>> tg.from_zarr(os.path.join(d, "a.zarr")).compute()
    array([0., 1., 2., 3., 4., 5.])
    >>> shutil.rmtree(d)
    """
    from tilegraph import config

    config.resolve(options, "to_zarr()")
    if isinstance(x, SparseArray):
        writer = SparseZarrWriter(os.fspath(path), x.shape, x.dtype, x.chunks, x.format,
                                  overwrite=overwrite)
        _store(x, writer, options)
        return
    zchunks = tuple(max(1, c) for c in x.chunksize)
    regular = normalize_chunks(zchunks, x.shape, x.dtype)
    if regular != x.chunks:
        x = x.rechunk(regular)
    writer = ZarrWriter(os.fspath(path), x.shape, x.dtype, zchunks, overwrite=overwrite)
    _store(x, writer, options)


__all__ = ["from_npy", "from_zarr", "to_npy", "to_zarr"]
