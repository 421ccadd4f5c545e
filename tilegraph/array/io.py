"""Arrays from and to storage, block by block: ``.npy`` files (memory-mapped) and zarr v3.

Reads happen in the tasks that need each block; writes happen in one task per block, as
soon as the block is made, into a temporary file or directory that is renamed into place
only when every block is written. A failed or interrupted write leaves nothing at the path.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks, source
from tilegraph.array.chunks import all_block_slices, normalize_chunks, numblocks
from tilegraph.array.core import Array, tokenize
from tilegraph.graph.taskgraph import Dep, Lit
from tilegraph.io import NpyWriter, ZarrWriter, npy_info, read_npy_block, read_zarr_block, zarr_info


def _reader_array(op: str, reader: Any, path: str, shape: tuple[int, ...], dtype: np.dtype,
                  chunks: Any) -> Array:
    chunks = normalize_chunks(chunks, shape, dtype)
    slices = all_block_slices(chunks)
    name = f"{op}-{tokenize(op, os.path.abspath(path), os.stat(path).st_mtime_ns, chunks)}"
    itemsize = dtype.itemsize
    blocks = source(name, numblocks(chunks), lambda c: (reader, (path, Lit(slices[c]))),
                    kind="load", name=op,
                    nbytes=lambda c: itemsize * math.prod(s.stop - s.start for s in slices[c]))
    return Array(blocks, shape, chunks, dtype)


def from_npy(path: str | os.PathLike, chunks: Any = "auto") -> Array:
    """The array stored in an ``.npy`` file; each task reads its block through a memory map,
    so the file never has to fit in memory."""
    path = os.fspath(path)
    shape, dtype = npy_info(path)
    return _reader_array("from_npy", read_npy_block, path, shape, np.dtype(dtype), chunks)


def from_zarr(path: str | os.PathLike, chunks: Any = None) -> Array:
    """The zarr array at ``path``; blocks default to the zarr chunks."""
    path = os.fspath(path)
    shape, dtype, zchunks = zarr_info(path)
    return _reader_array("from_zarr", read_zarr_block, path, shape, np.dtype(dtype),
                         zchunks if chunks is None else chunks)


def _write_block(writer: Any, slices: tuple, block: np.ndarray) -> None:
    writer.write(slices, block)


def _store(x: Array, writer: Any, options: dict[str, Any]) -> None:
    from tilegraph.plan.lower import run_blocks

    slices = all_block_slices(x.chunks)
    name = f"write-{tokenize('write', x, id(writer))}"

    def emit(builder: Any) -> None:
        for coord, slc in slices.items():
            builder.add((name, *coord), _write_block, deps=[x.blocks.key(coord)],
                        args=(writer, Lit(slc), Dep(0)), kind="store", name="write",
                        coords=coord)

    blocks = Blocks(name, x.numblocks, (x.blocks,), emit)
    try:
        here = run_blocks([blocks], **options)
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
    writer = NpyWriter(os.fspath(path), x.shape, x.dtype, overwrite=overwrite)
    _store(x, writer, options)


def to_zarr(x: Array, path: str | os.PathLike, overwrite: bool = False, **options: Any
            ) -> None:
    """Write ``x`` to a zarr v3 array whose chunks are ``x``'s block shape (blocks are first
    made regular if they are not); the array appears at ``path`` only when complete."""
    from tilegraph import config

    config.resolve(options, "to_zarr()")
    zchunks = tuple(max(1, c) for c in x.chunksize)
    regular = normalize_chunks(zchunks, x.shape, x.dtype)
    if regular != x.chunks:
        x = x.rechunk(regular)
    writer = ZarrWriter(os.fspath(path), x.shape, x.dtype, zchunks, overwrite=overwrite)
    _store(x, writer, options)


__all__ = ["from_npy", "from_zarr", "to_npy", "to_zarr"]
