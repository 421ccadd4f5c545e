"""dask's file formats beside zarr and ``.npy``: ``to_hdf5`` (datasets of an HDF5 file,
through h5py) and the ``.npy`` stacks of ``to_npy_stack``/``from_npy_stack`` (a directory
of one ``.npy`` file per block along an axis, and an ``info`` file).

Writes never leave a result that looks whole but is not: HDF5 datasets are written under
a temporary name in their group and renamed when every block is in; a stack's blocks are
each written to a temporary file and renamed, and its ``info`` file comes last. The
``info`` file of a stack is a pickle (dask's format); it is read with an unpickler that
builds nothing but dicts, tuples, lists, numbers, strings and NumPy dtypes, so a stack
directory written by someone else cannot run code.

>>> import os, tempfile, numpy as np, tilegraph as tg
>>> d = os.path.join(tempfile.mkdtemp(), "stack")
>>> tg.to_npy_stack(d, tg.from_numpy(np.arange(10.0).reshape(5, 2), chunks=(2, 1)))
>>> y = tg.from_npy_stack(d)
>>> y.chunks, float(y.sum().compute())
(((2, 2, 1), (2,)), 45.0)
"""

from __future__ import annotations

import io
import os
import pickle
import secrets
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray

__all__ = ["from_npy_stack", "to_hdf5", "to_npy_stack"]


# -- HDF5 ---------------------------------------------------------------------------------------


def to_hdf5(filename: Any, *args: Any, chunks: Any = True, **kwargs: Any) -> None:
    """Write arrays to datasets of the HDF5 file ``filename`` (created if missing, else
    added to), as ``dask.array.to_hdf5``: ``to_hdf5(f, "/x", x)`` or
    ``to_hdf5(f, {"/x": x, "/y": y})``. ``chunks=True`` makes the HDF5 chunks the
    arrays' blocks (``None``: contiguous; or a tuple); other keywords go to h5py's
    ``create_dataset`` (``compression=``, ...). All arrays are computed in one run; each
    dataset appears under its name only once it is whole (an existing dataset of that
    name is replaced then)."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - h5py is in the interop extra
        raise ImportError("to_hdf5 needs h5py (pip install h5py)") from None
    from tilegraph.array.io import store

    if len(args) == 1 and isinstance(args[0], dict):
        data = dict(args[0])
    elif len(args) == 2 and isinstance(args[0], str):
        data = {args[0]: args[1]}
    else:
        raise TypeError("to_hdf5: give (filename, '/path', array) or (filename, "
                        "{'/path': array, ...})")
    arrays = {}
    for path, x in data.items():
        if not isinstance(path, str) or not path.strip("/"):
            raise ValueError(f"to_hdf5: dataset name {path!r} must be a non-empty string")
        arrays[path] = x if isinstance(x, Array) else asarray(x)
    with h5py.File(filename, mode="a") as f:
        staged = []
        try:
            for path, x in arrays.items():
                tmp = f"{path.rstrip('/')}.partial-{secrets.token_hex(6)}"
                hchunks = chunks
                if chunks is True:
                    hchunks = tuple(max(c) for c in x.chunks) if x.ndim and all(
                        x.shape) else None
                staged.append((tmp, path, f.create_dataset(tmp, shape=x.shape,
                                                           dtype=x.dtype, chunks=hchunks,
                                                           **kwargs)))
            store(list(arrays.values()), [d for _, _, d in staged], lock=True)
        except BaseException:
            for tmp, _, _ in staged:
                if tmp in f:
                    del f[tmp]
            raise
        for tmp, path, _ in staged:
            if path in f:
                del f[path]
            f.move(tmp, path)


# -- .npy stacks --------------------------------------------------------------------------------


class _InfoUnpickler(pickle.Unpickler):
    """Builds only plain data and NumPy dtypes: ``find_class`` allows ``numpy.dtype``
    (and NumPy's dtype classes), nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "numpy" and name == "dtype":
            return np.dtype
        if module in ("numpy.dtypes",) and name.endswith("DType"):
            return getattr(np.dtypes, name)
        raise pickle.UnpicklingError(f"from_npy_stack: the info file refers to "
                                     f"{module}.{name}; only plain data and NumPy dtypes "
                                     "are read")


def _read_info(dirname: str) -> dict:
    path = os.path.join(dirname, "info")
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
    except FileNotFoundError:
        raise FileNotFoundError(f"from_npy_stack: {path} is missing (not a stack written "
                                "by to_npy_stack, or one whose writing did not finish)") \
            from None
    try:
        info = _InfoUnpickler(io.BytesIO(raw)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise ValueError(f"from_npy_stack: cannot read {path}: {exc}") from None
    if not isinstance(info, dict) or not {"chunks", "dtype", "axis"} <= set(info):
        raise ValueError(f"from_npy_stack: {path} is not a stack's info (a dict of chunks, "
                         "dtype and axis)")
    return info


def from_npy_stack(dirname: Any, mmap_mode: str | None = "r") -> Array:
    """The array of a ``.npy`` stack written by :func:`to_npy_stack` (or dask's): one
    ``.npy`` file per block along the stack's axis, each read block by block through a
    memory map and checked against the ``info`` file's shape and dtype."""
    from tilegraph.array.io import from_npy
    from tilegraph.array.manipulation import concatenate
    from tilegraph.io.npy import npy_info

    if mmap_mode not in ("r", "r+", "c", None):
        raise ValueError(f"from_npy_stack: mmap_mode {mmap_mode!r} must be 'r', 'r+', 'c' "
                         "or None (blocks are read, never written, here)")
    dirname = os.fspath(dirname)
    info = _read_info(dirname)
    try:
        chunks = tuple(tuple(int(v) for v in c) for c in info["chunks"])
        dtype = np.dtype(info["dtype"])
        axis = int(info["axis"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"from_npy_stack: the info of {dirname} is malformed: {exc}") \
            from None
    if not 0 <= axis < max(len(chunks), 1):
        raise ValueError(f"from_npy_stack: axis {axis} is out of range for chunks {chunks}")
    parts = []
    for i, n in enumerate(chunks[axis]):
        path = os.path.join(dirname, f"{i}.npy")
        shape, held = npy_info(path)
        want = tuple(n if a == axis else sum(c) for a, c in enumerate(chunks))
        if tuple(shape) != want or np.dtype(held) != dtype:
            raise ValueError(f"from_npy_stack: {i}.npy of {dirname} holds {tuple(shape)} "
                             f"{np.dtype(held)}, the info says {want} {dtype}")
        parts.append(from_npy(path, chunks=tuple((n,) if a == axis else c
                                                 for a, c in enumerate(chunks))))
    return parts[0] if len(parts) == 1 else concatenate(parts, axis=axis)


def _save_block(block: np.ndarray, dirname: str, axis: int,
                block_id: tuple[int, ...] = ()) -> np.ndarray:
    final = os.path.join(dirname, f"{block_id[axis]}.npy")
    tmp = f"{final}.partial-{secrets.token_hex(6)}"
    try:
        with open(tmp, "xb") as f:
            np.save(f, np.ascontiguousarray(block))
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return np.zeros((1,) * block.ndim, dtype=bool)


def to_npy_stack(dirname: Any, x: Any, axis: int = 0, **options: Any) -> None:
    """Write ``x`` as a ``.npy`` stack in the directory ``dirname`` (made if missing), as
    ``dask.array.to_npy_stack``: the array is cut along ``axis`` only (its blocks there),
    each piece one ``{i}.npy`` file, and an ``info`` file (dask's pickle of the chunks,
    dtype and axis) written last. Options are those of ``compute()``."""
    from tilegraph.array.elementwise import map_blocks

    x = x if isinstance(x, Array) else asarray(x)
    if x.ndim == 0:
        raise ValueError("to_npy_stack: a 0-d array has no axis to stack along")
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"to_npy_stack: axis {axis} is out of range for shape {x.shape}")
    axis %= x.ndim
    y = x.rechunk({a: -1 for a in range(x.ndim) if a != axis})
    dirname = os.fspath(dirname)
    os.makedirs(dirname, exist_ok=True)
    info = os.path.join(dirname, "info")
    if os.path.exists(info):
        os.unlink(info)  # the stack is not whole until the new info is written
    done = map_blocks(_save_block, y, dirname, axis, dtype=bool,
                      chunks=tuple((1,) * len(c) for c in y.chunks), name="to_npy_stack")
    done.compute(**options)
    tmp = f"{info}.partial-{secrets.token_hex(6)}"
    with open(tmp, "xb") as f:
        pickle.dump({"chunks": y.chunks, "dtype": y.dtype, "axis": axis}, f)
    os.replace(tmp, info)
