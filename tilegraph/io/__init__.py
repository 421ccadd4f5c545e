"""Block readers and writers for array storage: ``.npy`` files, zarr arrays, and sparse arrays
as zarr groups.

Readers return one block (a copy) per call and keep nothing open between calls. Writers
build their output under a hidden temporary name next to the destination and move it into
place in one rename on ``commit()``, so a reader never sees a partially written array.
Readers given a plan's :class:`InputSnapshot` of their input check it on every call, so an
input changed under a run is an :class:`InputChangedError`, never a mixed result.
"""

from tilegraph.io.npy import NpyWriter, npy_info, read_npy_block
from tilegraph.io.snapshot import InputChangedError, InputSnapshot, snapshot_of
from tilegraph.io.zarr_store import (
    SparseZarrWriter,
    ZarrWriter,
    read_sparse_zarr_block,
    read_zarr_block,
    sparse_zarr_info,
    zarr_info,
)

__all__ = [
    "InputChangedError",
    "InputSnapshot",
    "NpyWriter",
    "SparseZarrWriter",
    "ZarrWriter",
    "npy_info",
    "read_npy_block",
    "read_sparse_zarr_block",
    "read_zarr_block",
    "snapshot_of",
    "sparse_zarr_info",
    "zarr_info",
]
