"""The NumPy and dask habits of :class:`~tilegraph.array.core.Array` with code of their own:
``persist``, ``visualize``, ``.blocks[...]``, ``.vindex``/``.oindex``, pickling,
``tolist``/``item``/``flatten``, in-place operators, DLPack and devices.

They are bound onto :class:`Array` by the table of :mod:`tilegraph.array.api_table`.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0).reshape(2, 3), chunks=2)
>>> x.blocks[0, 1].compute()
array([[2.],
       [5.]])
>>> x.cumsum(axis=1).tolist()
[[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]
>>> x[1, 2].item()
5.0
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.array.core import Array, tokenize
from tilegraph.array.loops import from_blocks


class BlockView:
    """``x.blocks``: the blocks of an array as an array of arrays, indexed like dask's
    ``x.blocks[i, j]`` (ints and slices of block coordinates); the result is an Array made
    of those blocks, with no new tasks."""

    __slots__ = ("array",)

    def __init__(self, array: Array):
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        """The block grid."""
        return self.array.numblocks

    @property
    def size(self) -> int:
        """The number of blocks."""
        return self.array.npartitions

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def ravel(self) -> list[Array]:
        """Every block as its own Array, in C order."""
        return [self[c] for c in np.ndindex(*self.shape)]

    def __getitem__(self, index: Any) -> Array:
        from tilegraph.algebra.blocks import remap
        x = self.array
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is None or i is Ellipsis for i in index) and Ellipsis in index:
            n = x.ndim - sum(1 for i in index if i is not Ellipsis)
            k = index.index(Ellipsis)
            index = (*index[:k], *([slice(None)] * n), *index[k + 1:])
        if len(index) > x.ndim:
            raise IndexError(f"blocks[{index}]: too many indices for a block grid "
                             f"{x.numblocks}")
        index = index + (slice(None),) * (x.ndim - len(index))
        picks = []
        for axis, (item, n) in enumerate(zip(index, x.numblocks, strict=True)):
            if isinstance(item, slice):
                picks.append(list(range(n))[item])
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                i = int(item) + n if item < 0 else int(item)
                if not 0 <= i < n:
                    raise IndexError(f"blocks: block index {item} is out of range for axis "
                                     f"{axis} with {n} blocks (grid {x.numblocks})")
                picks.append([i])
            else:
                raise TypeError(f"blocks: index {item!r} on axis {axis}: only ints and "
                                "slices of block coordinates are supported")
        if any(not p for p in picks):
            raise IndexError(f"blocks[{index}] selects no block of the grid {x.numblocks}")
        keys = x.collection.keys[np.ix_(*picks)]
        chunks = tuple(tuple(x.chunks[a][i] for i in p) for a, p in enumerate(picks))
        name = f"blocks-{tokenize('blocks', x, tuple(tuple(p) for p in picks))}"
        coll = remap(name, keys, [x.collection])
        return Array(coll, tuple(sum(c) for c in chunks), chunks, x.dtype)


def blocks(self: Array) -> BlockView:
    """The blocks as an array of arrays: ``x.blocks[0, 1]`` is block (0, 1) as an Array,
    ``x.blocks[:, -1]`` the last column of blocks (as in dask)."""
    return BlockView(self)


def persist(self: Array, **options: Any) -> Array:
    """Compute every block now and return an Array made of the computed blocks (held in
    memory; with ``store=PATH``, written to the checkpoint store at ``PATH`` and read back
    from it: see :func:`persist_arrays`): later expressions start from them instead of
    recomputing ``self``. Options as for :meth:`compute` (dask's ``scheduler=`` and
    ``num_workers=`` too)."""
    return persist_arrays(self, **options)[0]


def persist_arrays(*arrays: Any, **options: Any) -> tuple:
    """``tilegraph.persist(*arrays, **options)``, as ``dask.persist``: each Array
    computed now (one shared plan) and returned as an Array of its computed blocks, held
    in memory; other arguments are returned as they are. Options as for
    :func:`~tilegraph.compute` (dask's ``scheduler=`` and ``num_workers=`` too).

    ``store=PATH``: the blocks are written to the checkpoint store at ``PATH`` (a
    directory, made if missing; see :mod:`tilegraph.checkpoint`) by the tasks that make
    them, and the arrays returned read them from there, checked at every read, instead of
    holding them in memory: they survive the process, and a persist of the same arrays
    (the same plan) after a failure computes only the blocks the store does not hold yet.
    On several hosts (MPI, dask) the store must be a directory every process sees; with
    MPI every rank gets the arrays.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(6.0), chunks=4)
    >>> y, n = tg.persist(x * 2, 7, scheduler="sync")
    >>> y.chunks, n, y.sum().compute()
    (((4, 2),), 7, np.float64(30.0))
    """
    from tilegraph import config

    get = config.foreign_get(options)
    store = options.pop("store", None)
    if get is not None:  # the user's own scheduler function, as dask.persist takes it
        import dask

        if store is not None:
            raise ValueError("persist(): store= is not taken with a scheduler function of "
                             "your own (scheduler=...)")
        rest = {k: v for k, v in options.items() if k != "scheduler"}
        return dask.persist(*arrays, scheduler=get, **rest)
    if store is not None:
        from tilegraph.array.checkpointing import persist_blocks as persisted
        from tilegraph.array.checkpointing import store_path

        store = store_path(store, "persist()")
    opts = config.resolve(options, "persist()")
    targets = [a for a in arrays if isinstance(a, Array)]
    if not targets:
        return tuple(arrays)
    if store is not None:
        made = iter([_stored(t, store, pks) for t, pks in
                     zip(targets, persisted(targets, store, opts), strict=True)])
        return tuple(next(made) if isinstance(a, Array) else a for a in arrays)
    values = _computed_blocks(targets, opts)
    made = iter([from_blocks(v, t.shape, t.chunks, t.dtype)
                 for v, t in zip(values, targets, strict=True)])
    return tuple(next(made) if isinstance(a, Array) else a for a in arrays)


def _stored(a: Array, path: str, pks: list[str]) -> Array:
    """An array of ``a``'s shape, chunks and dtype whose blocks are read (and checked) from
    the checkpoint store at ``path`` (their plan keys ``pks``, in ``np.ndindex`` order)."""
    import math

    from tilegraph.algebra.blocks import source
    from tilegraph.array.chunks import block_shape, numblocks
    from tilegraph.array.core import tokenize
    from tilegraph.checkpoint import read_block

    grid = numblocks(a.chunks)
    flat = {coord: n for n, coord in enumerate(np.ndindex(*grid))}
    itemsize = a.dtype.itemsize

    def task_of(coord: tuple[int, ...]) -> tuple:
        return read_block, (path, pks[flat[coord]], block_shape(a.chunks, coord), a.dtype)

    name = f"persisted-{tokenize('persisted', path, *pks)}"
    blocks = source(name, grid, task_of, kind="load", name="persisted", repeatable=True,
                    nbytes=lambda c: itemsize * math.prod(block_shape(a.chunks, c)))
    return Array(blocks, a.shape, a.chunks, a.dtype)


def _computed_blocks(arrays: list[Array], options: Any) -> list[dict]:
    """The computed blocks of each array (coordinate -> block), in one run of one plan."""
    from tilegraph import pipeline
    from tilegraph.algebra.demand import lower
    from tilegraph.graph.dask_spec import gc_paused

    backend, options = pipeline.prepare(options, None)
    with gc_paused():
        coords = [list(np.ndindex(*a.numblocks)) for a in arrays]
        keys = [a.collection.key(co) for a, cos in zip(arrays, coords, strict=True)
                for co in cos]
        graph = lower([a.collection for a in arrays], options=options).build()
    values = pipeline.run(graph, list(dict.fromkeys(keys)), options=options,
                          prepared=backend)
    if values is None:
        raise ValueError("persist: the MPI backend is not supported (the blocks are on "
                         "rank 0 only); compute() the arrays instead")
    got = dict(zip(dict.fromkeys(keys), values, strict=True))
    return [{co: got[a.collection.key(co)] for co in cos}
            for a, cos in zip(arrays, coords, strict=True)]


def to_dot(self: Array, max_tasks: int = 2000, rankdir: str = "BT",
           others: tuple = ()) -> str:
    """The lowered task graph in Graphviz's dot language (one node per task, labelled with
    its op and block coordinates); ``others``: more arrays drawn in the same graph."""
    from tilegraph.algebra.demand import lower
    from tilegraph.array.lowering import planning_options

    graph = lower([self.collection, *(a.collection for a in others)],
                  options=planning_options("visualize()")).build()
    if len(graph) > max_tasks:
        raise ValueError(f"visualize: the plan has {len(graph)} tasks, more than "
                         f"max_tasks={max_tasks}; draw a smaller array or raise max_tasks")
    if rankdir not in ("TB", "BT", "LR", "RL"):
        raise ValueError(f"visualize: rankdir={rankdir!r} is not 'TB', 'BT', 'LR' or 'RL'")
    names = graph.meta.get("name") or [None] * len(graph)
    out = ['digraph tilegraph {', f"  rankdir={rankdir};",
           '  node [shape=box, fontname="Helvetica", fontsize=10];']
    for i, key in enumerate(graph.keys):
        label = names[i] or (key[0] if isinstance(key, tuple) else str(key))
        label = str(label).split("-")[0] if names[i] is None else str(label)
        coords = list(key[1:]) if isinstance(key, tuple) else []
        out.append(f'  t{i} [label="{label}{coords}"];')
    for i in range(len(graph)):
        for j in graph.dep_idx[graph.dep_ptr[i]:graph.dep_ptr[i + 1]].tolist():
            out.append(f"  t{j} -> t{i};")
    out.append("}")
    return "\n".join(out)


def visualize(self: Array, filename: str = "tilegraph.svg", max_tasks: int = 2000,
              **kwargs: Any) -> str:
    """Draw the task graph with Graphviz's ``dot`` into ``filename`` (``.svg``, ``.png`` or
    ``.pdf``) and return its path (``.dot``: the text only, no Graphviz needed). dask's
    keywords are taken as :func:`visualize_arrays` takes them."""
    return visualize_arrays(self, filename=filename, max_tasks=max_tasks, **kwargs)


# dask.visualize's keywords that style dask's drawing; accepted, with no effect here
_DASK_STYLE = frozenset({"traverse", "optimize_graph", "maxval", "engine", "color", "cmap",
                         "collapse_outputs", "verbose", "node_attr", "edge_attr",
                         "graph_attr"})


def visualize_arrays(*arrays: Any, filename: str | None = "mydask", format: str | None = None,
                     max_tasks: int = 2000, rankdir: str = "BT", **kwargs: Any) -> str | None:
    """``tilegraph.visualize(*arrays, filename=..., format=...)``, as ``dask.visualize``:
    the task graph of the arrays together drawn by Graphviz's ``dot`` into ``filename``,
    whose path is returned. A filename without an extension gets ``format``'s (default
    ``png``, as dask's ``"mydask"`` becomes ``mydask.png``); ``.svg``, ``.png``, ``.pdf``, or
    ``.dot`` (the text only, no Graphviz needed). ``rankdir`` as Graphviz's. dask's
    keywords that style its own drawing (``optimize_graph``, ``color``, ``engine``,
    ``traverse``, ...) are accepted and have no effect; ``filename=None`` returns the dot
    text. Non-Array arguments are skipped; ``max_tasks`` bounds the drawing."""
    import shutil
    import subprocess

    unknown = sorted(set(kwargs) - _DASK_STYLE)
    if unknown:
        raise TypeError(f"visualize: unknown keyword(s) {', '.join(map(repr, unknown))}; "
                        "it takes filename=, format=, rankdir=, max_tasks= and dask's "
                        f"{', '.join(sorted(_DASK_STYLE))}")
    targets = [a for a in arrays if isinstance(a, Array)]
    if not targets:
        raise ValueError("visualize: no tilegraph Array among the arguments")
    text = to_dot(targets[0], max_tasks, rankdir, tuple(targets[1:]))
    if filename is None:
        return text
    filename = str(filename)
    _, dot_, ext = filename.rpartition(".")
    fmt = ext.lower() if dot_ and "/" not in ext else None
    if format is not None and fmt is not None and fmt != format.lower():
        raise ValueError(f"visualize: filename {filename!r} and format={format!r} disagree")
    if fmt is None:
        fmt = (format or "png").lower()
        filename = f"{filename}.{fmt}"
    if fmt not in ("svg", "png", "pdf", "dot"):
        raise ValueError(f"visualize: {filename!r} must end in .svg, .png, .pdf or .dot "
                         "(or give format=)")
    if fmt == "dot":
        with open(filename, "w") as f:
            f.write(text)
        return filename
    dot = shutil.which("dot")
    if dot is None:
        raise RuntimeError("visualize: Graphviz's 'dot' is not installed (`make sysdeps` or "
                           "apt-get install graphviz); a .dot filename writes the text only")
    subprocess.run([dot, f"-T{fmt}", "-o", filename], input=text, text=True, check=True,
                   capture_output=True)
    return filename


def __reduce__(self: Array) -> tuple:
    """Arrays pickle with their whole plan (the task functions by value, via cloudpickle),
    so a pickled Array can be computed in another process."""
    try:
        import cloudpickle
    except ImportError:  # pragma: no cover - cloudpickle is a dependency
        raise TypeError("pickling a tilegraph Array needs cloudpickle (pip install "
                        "cloudpickle)") from None
    state = (type(self), self.collection, self.shape, self.chunks, self.dtype)
    return _rebuild_state, (cloudpickle.dumps(state),)


def _rebuild_state(payload: bytes) -> Array:
    cls, coll, shape, chunks, dtype = pickle.loads(payload)
    out = object.__new__(cls)
    Array.__init__(out, coll, shape, chunks, dtype)
    return out


def tolist(self: Array) -> Any:
    """The computed array as nested Python lists (a scalar for a 0-d array)."""
    return np.asarray(self.compute()).tolist()


def item(self: Array, *args: Any) -> Any:
    """One element as a Python scalar: ``x.item()`` for a one-element array,
    ``x.item(i)`` (flat index) or ``x.item(i, j, ...)``; computes only that element."""
    if not args:
        if self.size != 1:
            raise ValueError(f"item: can only convert an array of size 1 to a Python scalar "
                             f"(shape {self.shape}); give an index")
        return np.asarray(self.reshape(()).compute()).item()
    if len(args) == 1 and not isinstance(args[0], tuple):
        i = int(args[0])
        if not -self.size <= i < self.size:
            raise IndexError(f"item: index {i} is out of bounds for size {self.size}")
        return np.asarray(self.reshape(-1)[i].compute()).item()
    index = args[0] if len(args) == 1 else args
    return np.asarray(self[tuple(index)].compute()).item()


def flatten(self: Array, order: str = "C") -> Array:
    """The array as one axis, in row-major order (a new lazy array: a later assignment into
    ``self`` does not change it)."""
    out = self.reshape(-1, order=order)
    return out.copy() if out is self else out


def __index__(self: Array) -> int:
    """The value of a 0-d integer array as a Python int."""
    if self.ndim or self.dtype.kind not in "iu":
        raise TypeError(f"only 0-d integer arrays can be used as an index (shape "
                        f"{self.shape}, dtype {self.dtype})")
    return int(self.compute())


def __dlpack__(self: Array, /, *, stream: Any = None, max_version: Any = None,
               dl_device: Any = None, copy: Any = None) -> Any:
    """The computed array through DLPack (NumPy's)."""
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                ("dl_device", dl_device), ("copy", copy)) if v is not None}
    return np.asarray(self.compute()).__dlpack__(**kwargs)


def __dlpack_device__(self: Array) -> tuple[int, int]:
    """DLPack's CPU device."""
    return (1, 0)


def to_device(self: Array, device: Any, /, *, stream: Any = None) -> Array:
    """The array on ``device``; tilegraph has one device, ``"cpu"``."""
    if device != "cpu":
        raise ValueError(f"to_device: unknown device {device!r}; tilegraph has 'cpu' only")
    return self


def device(self: Array) -> str:
    """The device the array lives on: ``"cpu"``."""
    return "cpu"


INPLACE = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift",
            "rshift", "and", "xor", "or")


def inplace(name: str) -> Callable:
    def method(self: Array, other: Any) -> Array:
        out = getattr(self, f"__{name}__")(other)
        if out is NotImplemented or self.is_sparse or not isinstance(out, Array):
            return out
        if out.shape != self.shape:
            raise ValueError(f"non-broadcastable output operand with shape {self.shape} "
                             f"doesn't match the broadcast shape {out.shape}")
        if out.dtype != self.dtype:
            if not np.can_cast(out.dtype, self.dtype, "same_kind"):
                raise TypeError(f"Cannot cast ufunc '{name}' output from {out.dtype} to "
                                f"{self.dtype} with casting rule 'same_kind'")
            out = out.astype(self.dtype)
        self.collection = out.collection
        self.chunks = out.chunks
        return self

    method.__name__ = f"__i{name}__"
    method.__doc__ = (f"``x {name}= y`` as in NumPy: the result keeps ``x``'s shape and dtype "
                      "(cast with ``same_kind``) and ``x`` is rebound to it; arrays built "
                      "from ``x`` earlier keep the old values.")
    method.operation = f"__{name}__"  # the operator it applies (tilegraph.api_index)
    return method


class _VIndex:
    """``x.vindex[...]``: point-wise indexing as dask's ``vindex``: the integer arrays (and
    integers) of the index are broadcast together and pick one element each, their shape
    first in the result, then the axes taken whole by ``:``."""

    def __init__(self, array: Array):
        self._array = array

    def __getitem__(self, index: Any) -> Array:
        x = self._array
        index = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            index = (*index[:at], *[slice(None)] * (x.ndim - len(index) + 1), *index[at + 1:])
        if len(index) > x.ndim:
            raise IndexError(f"vindex: too many indices ({len(index)}) for an array of "
                             f"shape {x.shape}")
        index = (*index, *[slice(None)] * (x.ndim - len(index)))
        points = [a for a, i in enumerate(index) if not isinstance(i, slice)]
        if not points:
            raise IndexError("vindex: give at least one integer array (or use x[...] for "
                             "slices)")
        for a, i in enumerate(index):
            if isinstance(i, slice) and i != slice(None):
                raise IndexError(f"vindex: only ':' slices may stand beside the point "
                                 f"indices (axis {a} has {i!r}); slice first with x[...]")
        order = points + [a for a in range(x.ndim) if a not in points]
        moved = x.transpose(order) if order != list(range(x.ndim)) else x
        picks = tuple(index[a] for a in points)
        return moved[picks]


class _OIndex:
    """``x.oindex[...]``: orthogonal (outer) indexing, as zarr's ``oindex`` and xarray's
    outer indexers: each integer array (1-D) or boolean mask picks positions along its own
    axis independently of the others, so ``x.oindex[[0, 2], [1, 3]]`` has shape (2, 2)
    where NumPy's ``x[[0, 2], [1, 3]]`` picks two points. Integers and slices act as in
    ``x[...]``; ``...`` stands for the axes not named."""

    def __init__(self, array: Array):
        self._array = array

    def __getitem__(self, index: Any) -> Array:
        x = self._array
        index = index if isinstance(index, tuple) else (index,)
        if sum(i is Ellipsis for i in index) > 1:
            raise IndexError("oindex: an index can only have a single ellipsis ('...')")
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            index = (*index[:at], *[slice(None)] * (x.ndim - len(index) + 1), *index[at + 1:])
        if len(index) > x.ndim:
            raise IndexError(f"oindex: too many indices ({len(index)}) for an array of "
                             f"shape {x.shape}")
        index = (*index, *[slice(None)] * (x.ndim - len(index)))
        for a, i in enumerate(index):
            if i is None:
                raise IndexError("oindex: np.newaxis (None) is not an outer index; add the "
                                 "axis with x[..., None] afterwards")
            if isinstance(i, (slice, int, np.integer)):
                continue
            ndim = getattr(i, "ndim", None)
            if ndim is None:
                i = np.asarray(i)
                ndim = i.ndim
            if ndim != 1:
                raise IndexError(f"oindex: the index of axis {a} has {ndim} dimensions; "
                                 "outer indexing takes integers, slices and 1-D integer "
                                 "or boolean arrays (use x.vindex[...] for point-wise "
                                 "indexing)")
        out = x
        # the last axis first, so an integer that removes an axis leaves the earlier
        # axes where they were
        for a in reversed(range(x.ndim)):
            i = index[a]
            if isinstance(i, slice) and i == slice(None):
                continue
            out = out[(slice(None),) * a + (i,)]
        return out


def oindex(self: Array) -> _OIndex:
    """Orthogonal indexing, as zarr's ``z.oindex[rows, cols]``: each 1-D integer array or
    boolean mask selects along its own axis (an outer product of the selections).

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(12).reshape(3, 4), chunks=2)
    >>> x.oindex[[0, 2], [1, 3]].compute()
    array([[ 1,  3],
           [ 9, 11]])
    """
    return _OIndex(self)


def vindex(self: Array) -> _VIndex:
    """Point-wise indexing, as dask's ``x.vindex[rows, cols]``."""
    return _VIndex(self)


def _view_block(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.ascontiguousarray(block).view(dtype)


def view(self: Array, dtype: Any = None, order: str = "C") -> Array:
    """The same bytes read as ``dtype`` (``numpy.ndarray.view``, as dask's ``view``): with
    a dtype of another size the last axis (``order="C"``) or the first (``"F"``) changes
    length, and every block along it must hold a whole number of new elements."""
    from tilegraph.array.elementwise import map_blocks

    if dtype is None:
        return self.copy()
    dtype = np.dtype(dtype)
    if order not in ("C", "F"):
        raise ValueError(f"view: order must be 'C' or 'F', got {order!r}")
    old = self.itemsize
    if dtype.itemsize == old:
        return map_blocks(_view_block, self, dtype, dtype=dtype, name="view")
    if self.ndim == 0:
        raise ValueError(f"view: a 0-d array of {self.dtype} cannot be read as {dtype} "
                         "(another size)")
    axis = self.ndim - 1 if order == "C" else 0
    x = self if order == "C" else self.transpose()
    last = x.chunks[-1]
    if any(c * old % dtype.itemsize for c in last):
        raise ValueError(f"view: the blocks {last} of axis {axis} ({self.dtype}) do not "
                         f"each hold a whole number of {dtype} elements; rechunk that axis "
                         "first")
    chunks = (*x.chunks[:-1], tuple(c * old // dtype.itemsize for c in last))
    out = map_blocks(_view_block, x, dtype, dtype=dtype, chunks=chunks, name="view")
    return out if order == "C" else out.transpose()


def compute_chunk_sizes(self: Array) -> Array:
    """The array itself: a tilegraph array's block sizes are always known (sizes that
    depend on the data are computed when such an array is made), so dask's call has
    nothing to do."""
    return self


def store(self: Array, target: Any, **kwargs: Any) -> Any:
    """Write the array into ``target`` (anything that takes item assignment), as
    ``tilegraph.store(x, target, ...)``."""
    from tilegraph.array.io import store as _store

    return _store(self, target, **kwargs)


def to_hdf5(self: Array, filename: Any, datapath: str, **kwargs: Any) -> None:
    """Write the array to the dataset ``datapath`` of the HDF5 file ``filename`` (see
    :func:`tilegraph.to_hdf5`)."""
    from tilegraph.array.io_formats import to_hdf5 as _to_hdf5

    return _to_hdf5(filename, datapath, self, **kwargs)
