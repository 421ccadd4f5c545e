"""What the zarr stores of :mod:`tilegraph.io.zarr_store` (dense arrays) and
:mod:`tilegraph.io.sparse_zarr` (sparse arrays as zarr groups) share: zarr imported when
first used, the errors zarr raises for a path with no readable array, the regions of an
array that writers take, the move of a finished temporary directory into place, how many
chunks a read ledger fingerprints whole, and the module a moved name keeps."""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from tilegraph.io._atomic import rename_noreplace, replace_directory

BASELINE_CHUNKS = 1 << 16  # arrays of at most this many chunks are fingerprinted whole


def load_zarr() -> Any:
    """The zarr module, imported when a zarr array is first read or written (importing it
    takes longer than the rest of tilegraph)."""
    import zarr
    import zarr.errors

    return zarr


def not_an_array_errors() -> tuple[type[BaseException], ...]:
    """What zarr raises for a path that exists but holds no readable array (a plain
    directory, a file, a group, broken metadata)."""
    return (load_zarr().errors.BaseZarrError, ValueError, KeyError, TypeError,
            NotADirectoryError, FileNotFoundError)


def rename_into_place(tmp: str, path: str, overwrite: bool) -> str | None:
    """Move the directory ``tmp`` to ``path`` atomically (see :mod:`tilegraph.io._atomic`);
    returns the name of a displaced old result (to delete), or None."""
    if overwrite:
        return replace_directory(tmp, path)
    rename_noreplace(tmp, path)
    return None


def normalize_region(
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


def keep_module(module: str, *objects: Any) -> None:
    """Name ``module`` as where ``objects`` (functions, and classes with the functions they
    define) live, for names moved out of ``module`` that it still exports: plan digests and
    checkpoint plan keys (:mod:`tilegraph.runtime.digest`) and pickles record a function or
    class by module and name, so these stay those of the releases before the move."""
    for obj in objects:
        obj.__module__ = module
        if isinstance(obj, type):
            for value in vars(obj).values():
                if isinstance(value, property):
                    fns = (value.fget, value.fset, value.fdel)
                else:
                    fns = (getattr(value, "__func__", value),)
                for fn in fns:
                    if isinstance(fn, types.FunctionType):
                        fn.__module__ = module
