"""Block readers and writers for array storage: ``.npy`` files and zarr arrays.

Readers return one block (a copy) per call and keep nothing open between calls. Writers
build their output under a hidden temporary name next to the destination and move it into
place in one rename on ``commit()``, so a reader never sees a partially written array.
"""

from tilegraph.io.npy import NpyWriter, npy_info, read_npy_block
from tilegraph.io.zarr_store import ZarrWriter, read_zarr_block, zarr_info

__all__ = [
    "NpyWriter",
    "ZarrWriter",
    "npy_info",
    "read_npy_block",
    "read_zarr_block",
    "zarr_info",
]
