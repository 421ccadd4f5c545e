"""Arrays from and to storage, block by block: ``.npy`` files (memory-mapped) and zarr v3.

Reads happen in the tasks that need each block; writes happen in one task per block, as
soon as the block is made, into a temporary file or directory that is renamed into place
only when every block is written. A failed or interrupted write leaves nothing at the path.

A :class:`~tilegraph.array.sparse.SparseArray` is stored as a zarr group holding the CSR (or
CSC) arrays of every block (the layout is described in :mod:`tilegraph.io.sparse_zarr`);
:func:`from_zarr` recognises such a group and gives back a SparseArray with the same blocks.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

import numpy as np

from tilegraph import pipeline
from tilegraph.algebra.blocks import Blocks, source
from tilegraph.array.chunks import (
    BlockSlices,
    all_block_slices,
    block_shape,
    normalize_chunks,
    numblocks,
)
from tilegraph.array.core import Array, tokenize, unique_name
from tilegraph.array.manipulation import RechunkBlocks, SplitBlocks
from tilegraph.array.sparse import SparseArray, sparse_block_nbytes
from tilegraph.config import Options
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
from tilegraph.io.npy import memmap_layout, read_mapped_block
from tilegraph.io.snapshot import (
    InputSnapshot,
    ReadLedger,
    file_identity,
    shared_ledger,
    snapshot_of,
)

ZARR_READ_WORKING = 3  # a zarr read holds the compressed chunk, its decoding and the block


def _reader_array(op: str, reader: Any, path: str, shape: tuple[int, ...], dtype: np.dtype,
                  chunks: Any, snap: InputSnapshot, working: int = 1,
                  ledger: ReadLedger | None = None) -> Array:
    """Load tasks, one per block; a task's working set is ``working`` times its block (a
    compressed chunk, its decoded copy and the block assembled from it). Every read checks
    the snapshot (and the ledger of the input's parts, if given), so a block read again
    (made again under memory pressure) is the block read first, or an error: the tasks are
    repeatable (:meth:`~tilegraph.graph.TaskGraph.repeatable`)."""
    chunks = normalize_chunks(chunks, shape, dtype)
    slices = BlockSlices(chunks)
    name = f"{op}-{tokenize(op, snap, chunks)}"
    itemsize = dtype.itemsize
    extra = () if ledger is None else (ledger,)

    def nbytes(c: tuple[int, ...]) -> int:
        return itemsize * math.prod(s.stop - s.start for s in slices[c])

    blocks = source(name, numblocks(chunks),
                    lambda c: (reader, (path, Lit(slices[c]), Lit(snap), *extra)),
                    kind="load", name=op, nbytes=nbytes, repeatable=True,
                    working=(lambda c: working * nbytes(c)) if working > 1 else None)
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
    ledger = shared_ledger(path, trees=True)

    def nbytes(c: tuple[int, ...]) -> int | None:
        if nnz is None:
            return None
        return sparse_block_nbytes(block_shape(stored, c), int(nnz[c]), dtype, fmt)

    blocks = source(name, numblocks(stored),
                    lambda c: (read_sparse_zarr_block, (path, Lit(c), Lit(snap), ledger)),
                    kind="load", name="from_zarr", nbytes=nbytes, repeatable=True)
    size = math.prod(shape)
    density = None if nnz is None else (min(1.0, int(nnz.sum()) / size) if size else 0.0)
    x = SparseArray(blocks, shape, stored, dtype, fmt, density)
    return x if chunks is None else x.rechunk(chunks)


def _read_region(source: Any, slices: tuple, shape: tuple, lock: Any) -> np.ndarray:
    """Block ``slices`` of ``source`` (anything indexable by a tuple of slices) as a NumPy
    array of the planned ``shape``."""
    if lock is not None:
        with lock:
            block = source[slices]
    else:
        block = source[slices]
    block = np.asarray(block)
    if block.shape != shape:
        raise ValueError(f"from_array: reading {slices} of {type(source).__name__} gave "
                         f"shape {block.shape}, expected {shape}")
    return block


def is_lazy_source(x: Any) -> bool:
    """Whether ``x`` is an array-like that reads its data when indexed (an h5py or zarr
    array, a netCDF variable): it has ``shape``, ``dtype`` and ``__getitem__`` and is
    neither a NumPy array nor an array type that computes (no ``__array_ufunc__``)."""
    return (not isinstance(x, (np.ndarray, np.generic, Array))
            and all(hasattr(x, a) for a in ("shape", "dtype", "__getitem__"))
            and not hasattr(type(x), "__array_ufunc__")
            and isinstance(getattr(x, "shape", None), tuple))


def from_array(x: Any, chunks: Any = "auto", *, lock: Any = False,
               repeatable: bool | None = None) -> Array:
    """A blocked array over any array-like ``x`` with ``shape``, ``dtype`` and
    ``__getitem__`` (an h5py dataset, a zarr array, a netCDF variable, a memory map): each
    task reads its own block, ``x[slices]``, so ``x`` is never read whole. ``chunks``
    (default ``"auto"``, blocks of about 128 MiB) as for :func:`~tilegraph.from_numpy`;
    ``lock=True`` (or a lock object) serialises the reads, for sources that are not
    thread-safe. A NumPy array (or a list, tuple or scalar, made one as dask's
    ``from_array`` does) gives :func:`~tilegraph.from_numpy`, a dask array
    :func:`~tilegraph.from_dask`, a tilegraph array itself (rechunked if asked).

    Under memory pressure a block that is cheap to read again may be dropped and read again
    when a consumer needs it, instead of being written to disk and read back; only a source
    that gives the same block again may be read twice. ``repeatable`` says whether ``x``
    does:

    - ``None`` (default): only where it is proven. A memory map (``numpy.memmap`` of a
      file) is read from its file, whose fingerprint (inode, size, modification time) is
      recorded at the first read and checked at every later one, and a zarr array in a
      local directory is read as by :func:`from_zarr`, its chunk files checked likewise: a
      source changed under a run is an :class:`~tilegraph.io.snapshot.InputChangedError`,
      never a mix of old and new blocks. Any other object's blocks are never read twice
      in a run: spilled to disk (or kept) instead.
    - ``True``: the user declares that reading a region again gives the same values (a
      file that nothing writes, a deterministic generator), so its blocks may be read
      again. Each block read again is checked against the one dropped (a checksum), and
      a difference is an ``InputChangedError``.
    - ``False``: never read a block twice, even of a memory map or a zarr array.

    ``tg.last_run()`` counts the blocks read again (``remade``) and those spilled because
    their source is not repeatable, with the reason; ``explain()`` says which ops are
    which.

    >>> import numpy as np, tilegraph as tg
    >>> class Source:  # reads one region at a time
    ...     shape, dtype = (5, 4), np.dtype("f8")
    ...     def __getitem__(self, idx):
    ...         return np.arange(20.0).reshape(5, 4)[idx]
    >>> x = tg.from_array(Source(), chunks=(2, 3))
    >>> x.chunks, float(x.sum().compute())
    (((2, 2, 1), (3, 1)), 190.0)

    A source that gives the same values every time may be read again instead of spilled:

    >>> class Ramp:  # 400 x 50, computed on each read
    ...     shape, dtype = (400, 50), np.dtype("f8")
    ...     def __getitem__(self, idx):
    ...         return np.arange(20000.0).reshape(400, 50)[idx]
    >>> y = tg.from_array(Ramp(), chunks=(10, 50), repeatable=True)  # blocks of 4 KB
    >>> float(((y - y.mean(axis=0)) ** 2).sum().compute(memory_limit="40KB"))
    666662500000.0
    >>> tg.last_run().remade["load"] > 0, tg.last_run().spilled_bytes
    (True, 0)
    """
    from tilegraph.array.core import from_numpy

    if repeatable is not None and not isinstance(repeatable, bool):
        raise TypeError(f"from_array: repeatable must be True, False or None, got "
                        f"{repeatable!r}")
    if isinstance(x, np.memmap):
        mapped = memmap_layout(x)
        if mapped is not None:
            return _from_mapped_file(*mapped, chunks, lock, repeatable)
    if isinstance(x, Array) or hasattr(type(x), "__dask_graph__"):
        if repeatable is not None:
            raise TypeError(f"from_array: repeatable= is for an object read block by block; "
                            f"a {type(x).__name__}'s blocks are repeatable as far as its own "
                            "steps are")
        if isinstance(x, Array):
            return x if chunks == "auto" else x.rechunk(chunks)
        from tilegraph.array.dask_interop import from_dask

        out = from_dask(x)
        return out if chunks == "auto" else out.rechunk(chunks)
    if isinstance(x, (np.ndarray, list, tuple, int, float, complex, bool, np.generic)):
        if repeatable is False:
            raise TypeError("from_array: repeatable=False cannot hold for data in memory "
                            "(its blocks are views of an array the plan holds)")
        return from_numpy(np.asarray(x), chunks=chunks)
    return _from_readable(x, chunks, lock, repeatable)


def _from_readable(x: Any, chunks: Any, lock: Any, repeatable: bool | None) -> Array:
    """:func:`from_array` of an object read by region (``x[slices]``): a local zarr array
    as :func:`from_zarr` (unless ``repeatable=False``), anything else one read task per
    block, repeatable only as ``repeatable`` declares."""
    missing = [a for a in ("shape", "dtype", "__getitem__") if not hasattr(x, a)]
    if missing:
        raise TypeError(f"from_array: {type(x).__name__} has no {', '.join(missing)}; it "
                        "needs shape, dtype and __getitem__ (or use tg.asarray for data "
                        "in memory)")
    local = _local_zarr_path(x)
    if local is not None and repeatable is not False:
        return from_zarr(local, chunks=chunks)
    shape = tuple(int(n) for n in x.shape)
    dtype = np.dtype(x.dtype)
    if dtype.kind == "O":
        raise TypeError("from_array: arrays of Python objects are not supported")
    lock = _lock("from_array", lock)
    chunks = normalize_chunks(chunks, shape, dtype)
    slices = BlockSlices(chunks)
    name = unique_name("from_array")
    itemsize = dtype.itemsize
    declared = True if repeatable else (
        f"from_array of a {type(x).__name__}: reading a block again may not give the same "
        "values" + (" (repeatable=False)" if repeatable is False
                    else "; pass repeatable=True if it does"))

    def task(c: tuple[int, ...]) -> tuple:
        slc = slices[c]
        return _read_region, (x, Lit(slc), Lit(tuple(s.stop - s.start for s in slc)), lock)

    blocks = source(name, numblocks(chunks), task, kind="load", name="from_array",
                    repeatable=declared,
                    nbytes=lambda c: itemsize * math.prod(s.stop - s.start
                                                          for s in slices[c]))
    return Array(blocks, shape, chunks, dtype)


def _lock(op: str, lock: Any) -> Any:
    """A ``lock=`` argument as a lock object or None."""
    if lock is True:
        import threading

        return threading.Lock()
    if lock is False or lock is None:
        return None
    if not (hasattr(lock, "__enter__") and hasattr(lock, "__exit__")):
        raise TypeError(f"{op}: lock must be True, False or a lock, got {lock!r}")
    return lock


def _from_mapped_file(path: str, layout: tuple, chunks: Any, lock: Any,
                      repeatable: bool | None) -> Array:
    """:func:`from_array` of a memory map: blocks read from the file it maps, checked
    against the file's fingerprint as first read (:func:`~tilegraph.io.npy.read_mapped_block`).
    ``lock`` is checked but not needed (each read maps the file anew)."""
    _lock("from_array", lock)
    shape, dtype = layout[1], np.dtype(layout[2])
    chunks = normalize_chunks(chunks, shape, dtype)
    slices = BlockSlices(chunks)
    ledger = shared_ledger(path)
    inode = Lit(file_identity(path)[:2])  # the file mapped now, whatever its path shows later
    itemsize = dtype.itemsize
    declared = (True if repeatable is not False else
                f"from_array of the memory map of {path!r}: declared repeatable=False")
    blocks = source(unique_name("from_array"), numblocks(chunks),
                    lambda c: (read_mapped_block, (path, Lit(layout), Lit(slices[c]), ledger,
                                                   inode)),
                    kind="load", name="from_array", repeatable=declared,
                    nbytes=lambda c: itemsize * math.prod(s.stop - s.start
                                                          for s in slices[c]))
    return Array(blocks, shape, chunks, dtype)


def _local_zarr_path(x: Any) -> str | None:
    """The directory of a zarr array stored in a local directory (a ``LocalStore``), which
    :func:`from_zarr` reads with its checks; None for any other object."""
    if not type(x).__module__.startswith("zarr"):
        return None
    import zarr
    from zarr.storage import LocalStore

    if not isinstance(x, zarr.Array):
        return None
    store_path = getattr(x, "store_path", None)
    store = getattr(store_path, "store", None)
    if not isinstance(store, LocalStore):
        return None
    return os.path.join(str(store.root), *filter(None, str(store_path.path).split("/")))


def from_zarr(path: Any, chunks: Any = None, component: str | None = None) -> Array:
    """The zarr array at ``path``; blocks default to the zarr chunks. The array is
    snapshotted now (its directory, metadata, shape and dtype) and every block read checks
    it, as for :func:`from_npy`; the chunk files a read covers are fingerprinted (inode,
    size, modification time) when first read and checked at every later read, so a chunk
    rewritten under a run is an :class:`~tilegraph.io.snapshot.InputChangedError` naming
    it, never a mixed result. A sparse zarr group
    (written by :func:`to_zarr` from a SparseArray) gives a SparseArray with the stored
    blocks (rechunked when ``chunks`` is given).

    >>> import os, shutil, tempfile, numpy as np, scipy.sparse as sps, tilegraph as tg
    >>> d = tempfile.mkdtemp()
    >>> tg.from_scipy(sps.csr_array(np.eye(3)), chunks=2).to_zarr(os.path.join(d, "s.zarr"))
    >>> y = tg.from_zarr(os.path.join(d, "s.zarr"))
    >>> type(y).__name__, y.chunks, y.to_scipy().nnz
    ('SparseArray', ((2, 1), (2, 1)), 3)
    >>> shutil.rmtree(d)

    ``path`` may also be an open ``zarr.Array`` (read block by block, as by
    :func:`from_array`: with these checks when it is stored in a local directory), or a
    ``zarr.Group`` or the path of a group, with ``component=`` naming the array inside it.
    """
    if not isinstance(path, (str, bytes, os.PathLike)):
        return _from_zarr_object(path, chunks, component)
    path = os.fspath(path)
    if component is not None:
        if not isinstance(component, str) or not component.strip("/"):
            raise TypeError(f"from_zarr: component must be the name of an array in the "
                            f"group, got {component!r}")
        path = os.path.join(path, *component.strip("/").split("/"))
    info = sparse_zarr_info(path)
    if info is not None:
        return _sparse_from_zarr(path, info, chunks)
    snap = snapshot_of(path)
    shape, dtype, zchunks = zarr_info(path)
    snap = replace(snap, shape=shape, dtype=str(np.dtype(dtype)))
    return _reader_array("from_zarr", read_zarr_block, path, shape, np.dtype(dtype),
                         zchunks if chunks is None else chunks, snap, working=ZARR_READ_WORKING,
                         ledger=shared_ledger(path))


def _from_zarr_object(obj: Any, chunks: Any, component: str | None) -> Array:
    """:func:`from_zarr` of an open zarr array or group."""
    import zarr

    if isinstance(obj, zarr.Group):
        if component is None:
            raise TypeError("from_zarr: a zarr group needs component= naming the array in "
                            f"it (it holds: {', '.join(sorted(obj.array_keys())) or 'none'})")
        try:
            obj = obj[component]
        except KeyError:
            raise KeyError(f"from_zarr: the group has no array {component!r} (it holds: "
                           f"{', '.join(sorted(obj.array_keys())) or 'none'})") from None
        if not isinstance(obj, zarr.Array):
            raise TypeError(f"from_zarr: {component!r} is a group, not an array")
    elif component is not None:
        raise TypeError("from_zarr: component= is for a group; got a zarr array")
    if not isinstance(obj, zarr.Array):
        raise TypeError(f"from_zarr: expected a path, a zarr.Array or a zarr.Group, got "
                        f"{type(obj).__name__}")
    stored = tuple(int(c) for c in (obj.shards or obj.chunks))
    return from_array(obj, chunks=stored if chunks is None else chunks)


def _write_block(writer: Any, slices: tuple, block: np.ndarray) -> None:
    writer.write(slices, block)


def _write_sparse_block(writer: Any, coord: tuple, block: Any) -> None:
    writer.write_block(coord, block)


def _write_blocks(x: Array, writer: Any) -> Blocks:
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

    return Blocks(name, x.numblocks, (x.collection,), emit)


def _store(x: Array, writer: Any, options: Options, backend: Any = None) -> None:
    _store_many([x], [writer], options, backend)


def _store_many(arrays: list[Array], writers: list[Any], options: Options,
                backend: Any = None) -> None:
    """Write ``arrays`` with ``writers`` in one run of ``options`` (on ``backend``, made
    with them by :func:`tilegraph.pipeline.prepare`, or made by the run)."""
    from tilegraph.array.lowering import run_blocks

    blocks = [_write_blocks(x, w) for x, w in zip(arrays, writers, strict=True)]
    try:  # (the write tasks' results are never broadcast: only rank 0 commits)
        here = run_blocks(blocks, options._replace(mpi_broadcast_limit=0), backend)
    except BaseException:
        for w in writers:
            w.abort()
        raise
    for w in writers:
        if here:
            w.commit()
        else:  # an MPI rank other than 0: rank 0 wrote every block and commits
            w.abort()


def to_npy(x: Array, path: str | os.PathLike, overwrite: bool = False, **options: Any) -> None:
    """Write ``x`` to an ``.npy`` file, block by block; the file appears only when complete.
    Options are those of ``compute()``."""
    from tilegraph import config

    opts = config.resolve(options, "to_npy()")
    if isinstance(x, SparseArray):
        raise TypeError(f"to_npy: a sparse array (shape {x.shape}) is written with to_zarr, "
                        "or made dense first: x.todense().to_npy(path)")
    writer = NpyWriter(os.fspath(path), x.shape, x.dtype, overwrite=overwrite)
    _store(x, writer, opts)


def to_zarr(x: Array, path: str | os.PathLike, overwrite: bool = False, **options: Any
            ) -> None:
    """Write ``x`` to a zarr v3 array whose chunks are ``x``'s block shape (blocks are first
    made regular if they are not); the array appears at ``path`` only when complete.

    A SparseArray is written as a zarr v3 group holding the CSR (CSC) arrays of each of its
    blocks, as they are (see :mod:`tilegraph.io.sparse_zarr`), also atomically.

    >>> import os, shutil, tempfile, numpy as np, tilegraph as tg
    >>> d = tempfile.mkdtemp()
    >>> tg.from_numpy(np.arange(6.0), chunks=4).to_zarr(os.path.join(d, "a.zarr"))
    >>> tg.from_zarr(os.path.join(d, "a.zarr")).compute()
    array([0., 1., 2., 3., 4., 5.])
    >>> shutil.rmtree(d)
    """
    from tilegraph import config

    opts = config.resolve(options, "to_zarr()")
    if isinstance(x, SparseArray):
        writer = SparseZarrWriter(os.fspath(path), x.shape, x.dtype, x.chunks, x.format,
                                  overwrite=overwrite)
        _store(x, writer, opts)
        return
    zchunks = tuple(max(1, c) for c in x.chunksize)
    regular = normalize_chunks(zchunks, x.shape, x.dtype)
    if regular != x.chunks:
        x = x.rechunk(regular)
    backend, opts = pipeline.prepare(opts)  # a rechunk's stages depend on the run's limit
    coarser = (x.collection.coarser if isinstance(x.collection, SplitBlocks)
               else x.collection.coarser(opts) if isinstance(x.collection, RechunkBlocks)
               else None)
    if coarser is not None:
        # blocks cut from larger ones (the last stage of a rechunk): write the larger
        # blocks, each a region of whole chunks, in one zarr call apiece
        x = coarser
    writer = ZarrWriter(os.fspath(path), x.shape, x.dtype, zchunks, overwrite=overwrite)
    _store(x, writer, opts, backend)


class _TargetWriter:
    """Writes blocks into any object with NumPy-style ``__setitem__`` (a zarr or h5py array,
    a memory map, a NumPy array), at an offset, under an optional lock."""

    _digest_skip = ("target", "lock")  # written, never read: no part of the MPI plan check

    def __init__(self, target: Any, offset: tuple[int, ...], lock: Any) -> None:
        self.target, self.offset, self.lock = target, offset, lock

    def write(self, slices: tuple, block: np.ndarray) -> None:
        where = tuple(slice(s.start + o, s.stop + o) for s, o in zip(slices, self.offset,
                                                                     strict=True))
        if self.lock is None:
            self.target[where] = block
        else:
            with self.lock:
                self.target[where] = block

    def commit(self) -> None:
        pass

    def abort(self) -> None:
        pass


def _region(op: str, region: Any, x: Array, target: Any) -> tuple[int, ...]:
    """The offset of ``region`` (a tuple of slices of step 1 the size of ``x``) in
    ``target``; zeros without one."""
    tshape = tuple(getattr(target, "shape", ()))
    if region is None:
        if tshape and tshape != x.shape:
            raise ValueError(f"{op}: a source of shape {x.shape} does not fit a target of "
                             f"shape {tshape}; give regions= to write part of it")
        return (0,) * x.ndim
    region = region if isinstance(region, tuple) else (region,)
    if len(region) > x.ndim or not all(isinstance(r, slice) for r in region):
        raise ValueError(f"{op}: a region must be a tuple of at most {x.ndim} slices, got "
                         f"{region!r}")
    region = region + (slice(None),) * (x.ndim - len(region))
    offset = []
    for axis, r in enumerate(region):
        length = tshape[axis] if axis < len(tshape) else None
        if r.step not in (None, 1):
            raise ValueError(f"{op}: region slices must have step 1, got {r!r}")
        if length is not None:
            start, stop, _ = r.indices(length)
        elif (r.start or 0) >= 0 and r.stop is not None and r.stop >= 0:
            start, stop = r.start or 0, r.stop
        else:
            raise ValueError(f"{op}: the region {r!r} needs the target's shape")
        if stop - start != x.shape[axis]:
            raise ValueError(f"store: region {region!r} is {stop - start} long on axis "
                             f"{axis}, but the source has shape {x.shape}")
        offset.append(start)
    return tuple(offset)


def store(sources: Any, targets: Any, regions: Any = None, lock: Any = False,
          compute: bool = True, **options: Any) -> None:
    """Write arrays into objects that take NumPy-style item assignment, block by block, as
    ``dask.array.store`` does: ``target[region][block_slices] = block``. All sources are
    computed in one run (options are those of ``compute()``).

    ``lock=True`` (or a lock object) serialises the writes; ``regions`` gives, per source,
    the tuple of slices of its target that it fills. The targets must be reachable from the
    workers that write: any object with the threads and sync backends, files (a zarr or
    h5py array, a memory map) with the others. There is no ``compute=False`` (tilegraph
    has no delayed values): call ``store`` when the values are wanted.
    """
    from tilegraph import config
    from tilegraph.array.core import asarray

    opts = config.resolve(options, "store()")
    if compute is not True:
        raise TypeError("store: compute=False is not supported (tilegraph has no delayed "
                        "values); call store when the values are to be written")
    single = not isinstance(sources, (list, tuple))
    srcs = [sources] if single else list(sources)
    tgts = [targets] if single else list(targets) if isinstance(targets, (list, tuple)) \
        else None
    if tgts is None or len(tgts) != len(srcs):
        raise ValueError(f"store: give one target per source ({len(srcs)} sources)")
    if regions is None or (isinstance(regions, (slice, tuple)) and single):
        regs = [regions] * len(srcs)
    else:
        regs = list(regions)
        if len(regs) != len(srcs):
            raise ValueError(f"store: give one region per source ({len(srcs)} sources)")
    if lock is True:
        import threading

        lock = threading.Lock()
    elif lock is False:
        lock = None
    elif not (hasattr(lock, "__enter__") and hasattr(lock, "__exit__")):
        raise TypeError(f"store: lock must be a bool or a lock object, got {lock!r}")
    arrays, writers = [], []
    for src, tgt, reg in zip(srcs, tgts, regs, strict=True):
        if not hasattr(tgt, "__setitem__"):
            raise TypeError(f"store: target {tgt!r} does not support item assignment")
        x = asarray(src)
        if isinstance(x, SparseArray):
            x = x.todense()
        arrays.append(x)
        writers.append(_TargetWriter(tgt, _region("store", reg, x, tgt), lock))
    _store_many(arrays, writers, opts)


__all__ = ["from_array", "from_npy", "from_zarr", "store", "to_npy", "to_zarr"]
