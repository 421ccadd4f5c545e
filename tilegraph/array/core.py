"""The lazy blocked :class:`Array`.

An Array is a shape, a dtype, block sizes per axis (``chunks``) and a
:class:`~tilegraph.algebra.Blocks` collection giving the task that makes each block.
Operations build new collections from coordinates alone; nothing runs until
:meth:`Array.compute` (or :func:`compute` for several arrays sharing one plan).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks
from tilegraph.array.chunks import Chunks, normalize_chunks, numblocks, offsets
from tilegraph.util import human

_session = os.urandom(4).hex()
_counter = itertools.count()


def _token_part(x: Any) -> str:
    if isinstance(x, Array):
        return x.name
    if isinstance(x, np.ndarray):
        return f"nd{id(x)}-{x.shape}-{x.dtype.str}-{x.strides}"
    if isinstance(x, np.dtype):
        return x.str
    if isinstance(x, (list, tuple)):
        return "(" + ",".join(_token_part(p) for p in x) + ")"
    if isinstance(x, dict):
        items = sorted(x.items(), key=str)
        return "{" + ",".join(f"{k!r}:{_token_part(v)}" for k, v in items) + "}"
    if callable(x):
        return f"fn{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', '')}-{id(x)}"
    if isinstance(x, slice):
        return f"s{x.start},{x.stop},{x.step}"
    return f"{type(x).__name__}:{x!r}"


def tokenize(*parts: Any) -> str:
    """A deterministic name for an operation on its inputs: the same op on the same inputs
    gets the same name, so it is planned once (common subexpression sharing)."""
    text = "|".join(_token_part(p) for p in parts)
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()[:16]


def unique_name(prefix: str) -> str:
    """A name no other collection has (for data sources)."""
    return f"{prefix}-{_session}{next(_counter):x}"


class Array:
    """A lazy n-dimensional array cut into blocks.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(12.0).reshape(3, 4), chunks=2)
    >>> x
    tilegraph.Array<shape=(3, 4), dtype=float64, chunks=((2, 1), (2, 2)), blocks=4>
    >>> (x + 1).sum(axis=0).compute()
    array([15., 18., 21., 24.])
    """

    __slots__ = ("chunks", "collection", "dtype", "shape")
    __array_priority__ = 20
    is_sparse = False  # blocks are NumPy arrays (SparseArray: scipy.sparse blocks)

    def _digest_state(self) -> tuple:
        """What the MPI ranks compare of an Array that a task's function reads
        (:mod:`tilegraph.runtime.digest`): its shape, blocks and dtype; its values are
        those of its plan, which the ranks check when it is computed."""
        return (self.shape, self.chunks, self.dtype)

    def __init__(self, blocks: Blocks, shape: Sequence[int], chunks: Chunks, dtype: Any):
        self.collection = blocks
        self.shape = tuple(int(s) for s in shape)
        self.chunks = tuple(tuple(int(c) for c in axis) for axis in chunks)
        self.dtype = np.dtype(dtype)
        if numblocks(self.chunks) != blocks.grid:
            raise ValueError(f"chunks {self.chunks} do not match the block grid {blocks.grid}")

    # -- description ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The name of the task collection (shared by equal expressions)."""
        return self.collection.name

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the whole array."""
        return self.size * self.itemsize

    @property
    def numblocks(self) -> tuple[int, ...]:
        """Blocks per axis (the block grid)."""
        return numblocks(self.chunks)

    @property
    def npartitions(self) -> int:
        """The number of blocks."""
        return math.prod(self.numblocks)

    @property
    def chunksize(self) -> tuple[int, ...]:
        """The largest block size along each axis."""
        return tuple(max(c) if c else 0 for c in self.chunks)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    @property
    def ntasks(self) -> int:
        """Tasks in this array's plan before fusion (counted without building the plan),
        planned for the options in force, as a run on one process would plan it."""
        from tilegraph.algebra.demand import count_tasks
        from tilegraph.array.lowering import planning_options

        return count_tasks([self.collection], planning_options("ntasks"))

    def __repr__(self) -> str:
        # O(1) in the size of the plan: shapes only (``ntasks`` and ``explain()`` say more)
        return (f"tilegraph.Array<shape={self.shape}, dtype={self.dtype}, "
                f"chunks={self.chunks if self.npartitions <= 16 else self.chunksize}, "
                f"blocks={self.npartitions}>")

    def _repr_html_(self) -> str:
        from tilegraph.array.lowering import plan_summary

        summary = plan_summary([self])
        block_bytes = math.prod(self.chunksize) * self.itemsize
        rows = [
            ("shape", self.shape), ("dtype", self.dtype), ("block shape", self.chunksize),
            ("blocks", f"{self.npartitions} ({' x '.join(map(str, self.numblocks)) or '1'})"),
            ("bytes", f"{human(self.nbytes)} (block: {human(block_bytes)})"),
            ("tasks", f"{summary['tasks']} ({summary['kinds_text']})"),
        ]
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>"
                       for k, v in rows)
        return f"<table><caption>tilegraph.Array</caption>{body}</table>"

    # -- computing -----------------------------------------------------------------------

    def _compute_target(self) -> Array:
        """What :func:`compute` plans for this array (subclasses assemble differently)."""
        return self

    def compute(self, **options: Any) -> Any:
        """Run the plan and return a NumPy array (a NumPy scalar for 0-d arrays).

        Options: ``backend=``, ``workers=``, ``retries=``, ``progress=``, ``callbacks=``,
        and dask's ``scheduler=``/``num_workers=`` (see :func:`compute`).
        """
        return compute(self, **options)[0]

    def explain(self, **options: Any) -> str:
        """The plan in words: tasks per kind, blocks read and written, flops, estimated
        peak memory, fused chains."""
        from tilegraph.array.lowering import explain

        return explain([self], **options)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.asarray(self.compute())
        return out.astype(dtype, copy=False) if dtype is not None else out

    def _scalar(self) -> Any:
        if self.size != 1:
            raise TypeError(
                f"only arrays of one element convert to a Python scalar (shape {self.shape})")
        return self.compute().reshape(())[()] if self.ndim else self.compute()

    def __bool__(self) -> bool:
        return bool(self._scalar())

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __complex__(self) -> complex:
        return complex(self._scalar())

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    def copy(self) -> Array:
        """A copy: a new Array object over the same plan (nothing is copied; a later
        assignment into either one rebinds only that one)."""
        out = object.__new__(type(self))
        for cls in type(self).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(self, slot):
                    object.__setattr__(out, slot, getattr(self, slot))
        return out

    # (the methods, operators and NumPy protocols are bound by tilegraph.array.api_table)


# -- creation from NumPy ------------------------------------------------------------------------


def _view(x: np.ndarray, slices: tuple) -> np.ndarray:
    return x[slices]


# The task function that reads a region of an in-memory array as a view, for the operations
# that read a :class:`ViewBlocks` array by other regions than its blocks (its tasks keep the
# op name "_view" in plans and reports).
region_view = _view


class ViewBlocks(Blocks):
    """The blocks of :func:`from_numpy`: views of one in-memory NumPy array, ``array``.

    Any region of ``array``, not only a block, can be read as a view without a copy, so an
    operation may choose a coarser granularity than the blocks (a matmul reads whole row
    and column panels and multiplies over the full inner dimension in one BLAS call).
    """

    __slots__ = ("array",)

    def __init__(self, name: str, grid: Sequence[int], emit: Callable, array: np.ndarray):
        super().__init__(name, grid, (), emit, op="source")  # emit(builder, coords=None)
        self.array = array


def from_numpy(x: Any, chunks: Any = "auto", name: str | None = None,
               root: int | None = None) -> Array:
    """A blocked array over the NumPy array ``x``. Blocks are views: nothing is copied until
    a task needs it.

    Under MPI every rank holds its own ``x``, and they must be equal (``compute()`` checks
    it and names the ranks that differ). ``root=0`` takes rank 0's ``x`` on every rank
    instead (sent once, as this is called; ``x`` may be ``None`` on the other ranks): a
    collective step, which every rank must take. Outside MPI ``root`` changes nothing.

    >>> import numpy as np, tilegraph as tg
    >>> tg.from_numpy(np.ones((5, 4)), chunks=(2, -1)).chunks
    ((2, 2, 1), (4,))
    """
    if root is not None:
        from tilegraph import config
        from tilegraph.runtime.mpi import share_array

        # a collective step of its own: the MPI backend's options in force (mpi_timeout)
        opts = config.resolve({"backend": "mpi"}, "from_numpy()")
        x = share_array(x.compute() if isinstance(x, Array) else x, root,
                        float(opts.backend_options["mpi_timeout"]))
    if isinstance(x, Array):
        return x if chunks == "auto" else x.rechunk(chunks)
    x = np.asarray(x)
    if x.dtype == object:
        raise TypeError("from_numpy: arrays of Python objects are not supported")
    chunks = normalize_chunks(chunks, x.shape, x.dtype)
    name = name or unique_name("array")
    grid = numblocks(chunks)
    starts = [offsets(c) for c in chunks]

    from tilegraph.graph.builder import GraphBuilder

    def emit(builder: GraphBuilder, coords: Any = None) -> None:
        itemsize = x.itemsize
        for coord in np.ndindex(*grid) if coords is None else coords:
            slc = tuple(slice(o[c], o[c + 1]) for o, c in zip(starts, coord, strict=True))
            nb = itemsize * math.prod(s.stop - s.start for s in slc)
            builder.add((name, *coord), _view, args=(x, slc), kind="load", nbytes=nb,
                        coords=coord, repeatable=True)  # a view of the array the plan holds

    return Array(ViewBlocks(name, grid, emit, x), x.shape, chunks, x.dtype)


def dense_only(op: str, *arrays: Any) -> None:
    """Reject sparse arrays in an operation that works on dense blocks only, before anything
    is planned."""
    for a in arrays:
        if getattr(a, "is_sparse", False):
            raise TypeError(f"{op}: sparse arrays are not supported here (shape {a.shape}); "
                            "make it dense first with x.todense()")


# Array-likes that asarray must not read (a dask array, an h5py or zarr array): (test,
# conversion) pairs, registered by tilegraph.array.api_table (io.from_array).
_LAZY_SOURCES: list[tuple[Callable[[Any], bool], Callable[..., Array]]] = []


def register_lazy_source(is_lazy: Callable[[Any], bool], convert: Callable[..., Array]
                         ) -> None:
    """Make :func:`asarray` give ``convert(x, chunks=chunks)`` for every ``x`` (neither an
    Array nor a NumPy array) where ``is_lazy(x)`` (idempotent)."""
    if (is_lazy, convert) not in _LAZY_SOURCES:
        _LAZY_SOURCES.append((is_lazy, convert))


def asarray(x: Any, chunks: Any = "auto", dtype: Any = None) -> Array:
    """``x`` as a blocked array (an Array is returned as it is, or rechunked/cast; a dask
    array joins the plan lazily, by :func:`~tilegraph.array.dask_interop.from_dask`; an
    h5py or zarr array is read block by block, by :func:`~tilegraph.array.io.from_array`)."""
    if not isinstance(x, (Array, np.ndarray)):
        for is_lazy, convert in _LAZY_SOURCES:
            if is_lazy(x):  # not read here
                x = convert(x, chunks=chunks)
                return x if dtype is None else x.astype(dtype)
    if isinstance(x, Array):
        out = x if chunks == "auto" else x.rechunk(chunks)
        return out if dtype is None else out.astype(dtype)
    arr = np.asarray(x, dtype=dtype)
    return from_numpy(arr, chunks=chunks)


# -- compute -----------------------------------------------------------------------------------


def compute(*arrays: Any, **options: Any) -> tuple:
    """Compute several arrays with one shared plan; returns a tuple of NumPy results.

    Common subexpressions of the arrays are computed once. Non-Array arguments are returned
    as they are. Sparse arrays (:class:`~tilegraph.array.sparse.SparseArray`) give one
    ``scipy.sparse.csr_array`` each, put together by one task of the plan. With
    ``backend="mpi"`` every rank must call it; results of at most ``mpi_broadcast_limit``
    bytes together (1 MiB by default: scalars, small arrays) are returned on every rank,
    larger ones on rank 0 (the other ranks get ``None`` for each array).
    ``checkpoint=PATH``: every block of the results is also written to the checkpoint store
    at ``PATH`` (a directory, made if missing), and a run of the same plan finds there the
    blocks an earlier run finished and computes only the others, e.g. after a failure
    (see :mod:`tilegraph.checkpoint`: each block is checked before it is used). dask's
    ``scheduler=`` and ``num_workers=`` are taken
    (:func:`tilegraph.config.from_dask_keywords`);
    ``scheduler=f``, a scheduler function of the user's own, gets the plan as a dask graph
    (``f(graph, keys, **options)``), as ``dask.compute`` gives it.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(6.0), chunks=4)
    >>> tg.compute(x.sum(), x.max())
    (np.float64(15.0), np.float64(5.0))
    """
    from tilegraph import config
    from tilegraph.array.lowering import compute_arrays

    get = config.foreign_get(options)
    checkpoint = options.pop("checkpoint", None)
    if get is not None:  # the user's own scheduler function, as dask.compute takes it
        import dask

        if checkpoint is not None:
            raise ValueError("compute(): checkpoint= is not taken with a scheduler function "
                             "of your own (scheduler=...)")
        rest = {k: v for k, v in options.items() if k != "scheduler"}
        return dask.compute(*arrays, scheduler=get, **rest)
    opts = config.resolve(options, "compute()")
    targets = [a._compute_target() for a in arrays if isinstance(a, Array)]
    results = compute_arrays(targets, opts, checkpoint=checkpoint)
    if results is None:  # an MPI rank other than 0: large results stay on rank 0
        return tuple(None if isinstance(a, Array) else a for a in arrays)
    it = iter(results)
    return tuple(next(it) if isinstance(a, Array) else a for a in arrays)
