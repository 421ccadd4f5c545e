"""tilegraph arrays and dask collections, both ways, lazily.

- A tilegraph :class:`~tilegraph.array.core.Array` is a dask collection: it has
  ``__dask_graph__`` (its plan as a dask-style dict), ``__dask_keys__`` (its blocks' keys,
  nested by block row as dask arrays nest them), ``__dask_postcompute__``,
  ``__dask_postpersist__``, ``__dask_tokenize__`` and ``__dask_scheduler__``
  (:func:`tilegraph.get`), so ``dask.compute(x)``, ``dask.persist(x)``, ``dask.delayed`` and
  xarray treat it as lazy, and compute it on tilegraph unless told otherwise.
  :func:`to_dask` (``x.to_dask()``) gives a ``dask.array.Array`` with the same blocks.
- :func:`from_dask` folds a dask array's graph into tilegraph's plan: the dask tasks are read
  into the same TaskGraph as the tilegraph operations around them when the plan is lowered,
  so nothing is computed when it is called; the blocks keep dask's chunks and keys.
  ``tg.asarray(dask_array)`` and ``x + dask_array`` go through it.

dask is imported only by the functions that need it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks
from tilegraph.algebra.demand import lower
from tilegraph.array.chunks import numblocks
from tilegraph.array.core import Array
from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.dask_spec import read_into
from tilegraph.graph.dask_spec import to_dask as graph_to_dask

_GRAPHS: OrderedDict[str, dict] = OrderedDict()  # the last few arrays' dask graphs, by name
_GRAPHS_KEPT = 8


def is_dask_collection(x: Any) -> bool:
    """Whether ``x`` is a dask collection that is not a tilegraph array (checked without
    importing dask)."""
    return hasattr(type(x), "__dask_graph__") and not isinstance(x, Array)


# -- dask arrays into tilegraph ----------------------------------------------------------------


def from_dask(x: Any, inputs: Any = ()) -> Array:
    """A tilegraph array computing the dask array ``x``: its tasks join tilegraph's plan
    when the plan is lowered (nothing is computed now), its blocks keep dask's chunks.
    ``inputs``: tilegraph arrays whose exported tasks ``x``'s graph holds (a dask graph
    built over tilegraph arrays, as xarray's ``map_blocks`` builds one); they are planned
    as tilegraph's, and ``x``'s graph reads their blocks from them.

    >>> import dask.array as da, numpy as np, tilegraph as tg
    >>> d = da.arange(10, chunks=4) * 2
    >>> y = tg.from_dask(d)
    >>> y.chunks
    ((4, 4, 2),)
    >>> (y + 1).compute()
    array([ 1,  3,  5,  7,  9, 11, 13, 15, 17, 19])
    """
    if isinstance(x, Array):
        return x
    if not is_dask_collection(x) or not all(hasattr(type(x), a) for a in ("chunks", "dtype",
                                                                            "name")):
        raise TypeError(f"from_dask: expected a dask array, got {type(x).__name__}")
    chunks = tuple(tuple(c) for c in x.chunks)
    if any(isinstance(c, float) and math.isnan(c) for axis in chunks for c in axis):
        raise ValueError(f"from_dask: the dask array {x.name!r} has unknown chunk sizes "
                         f"{chunks}; call x.compute_chunk_sizes() on it first")
    shape = tuple(int(sum(axis)) for axis in chunks)
    label = x.name
    grid = numblocks(chunks)
    holder = [x]

    def graph() -> dict:
        import dask

        (opt,) = dask.optimize(holder[0])
        return dict(opt.__dask_graph__())

    def emit(builder: GraphBuilder) -> None:
        read_into(builder, graph())

    def ntasks() -> int:
        return len(holder[0].__dask_graph__())

    deps = tuple(a.collection for a in inputs if isinstance(a, Array))
    return Array(Blocks(label, grid, deps, emit, ntasks=ntasks), shape, chunks, x.dtype)


# -- tilegraph arrays as dask collections ------------------------------------------------------


class LazyGraph(Mapping):
    """``x``'s plan as a dask-style dict, made when it is first read: asking whether an
    array is a dask collection (``dask.is_dask_collection``, which xarray asks often)
    calls ``__dask_graph__`` and must not lower the plan."""

    __slots__ = ("_array", "_dict")

    def __init__(self, x: Array):
        self._array = x
        self._dict: dict | None = None

    def _graph(self) -> dict:
        if self._dict is None:
            self._dict = dask_dict(self._array)
        return self._dict

    def __getitem__(self, key: Any) -> Any:
        return self._graph()[key]

    def __iter__(self) -> Iterator:
        return iter(self._graph())

    def __len__(self) -> int:
        return len(self._graph())


def dask_dict(x: Array) -> dict:
    """``x``'s plan as a dask-style dict (the tasks of its blocks and their inputs); the
    last few are kept, by array name."""
    got = _GRAPHS.get(x.name)
    if got is not None:
        _GRAPHS.move_to_end(x.name)
        return got
    from tilegraph.array.lowering import planning_options

    # planned as a run of one process would be: dask runs it with its own scheduler
    options = planning_options("__dask_graph__()")
    dsk = graph_to_dask(lower([x.collection], options=options).build())
    _GRAPHS[x.name] = dsk
    while len(_GRAPHS) > _GRAPHS_KEPT:
        _GRAPHS.popitem(last=False)
    return dsk


def dask_graph(x: Array) -> Mapping:
    """``x.__dask_graph__()``: its plan as a dask-style mapping, made when first read."""
    return LazyGraph(x)


def dask_keys(x: Array) -> list:
    """The keys of ``x``'s blocks, nested by axis as dask arrays nest theirs."""
    keys = x.collection.keys
    if x.ndim == 0:
        return [keys[()]]
    return keys.tolist()


def assemble(results: Any, ndim: int) -> np.ndarray:
    """The array whose blocks are ``results`` (nested as :func:`dask_keys`)."""
    if ndim == 0:
        value = results[0] if isinstance(results, (list, tuple)) else results
        return np.asarray(value)[()]
    if ndim == 1:
        parts = [np.asarray(b) for b in results]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return np.block(_as_lists(results))


def _as_lists(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_as_lists(v) for v in x]
    return np.asarray(x)


def postcompute(x: Array) -> tuple:
    return assemble, (x.ndim,)


def postpersist(x: Array) -> tuple:
    keys = {coord: x.collection.key(coord) for coord in np.ndindex(*x.numblocks)}
    return rebuild, (x.name, x.shape, x.chunks, x.dtype, keys)


def rebuild(dsk: Any, name: str, shape: tuple, chunks: tuple, dtype: Any, keys: dict,
            rename: dict | None = None) -> Array:
    """The persisted array: its blocks are the values ``dsk`` holds for its ``keys``."""
    new = (rename or {}).get(name, name)
    grid = numblocks(chunks)
    values = {coord: dsk[keys[coord]] for coord in np.ndindex(*grid)}

    def emit(builder: GraphBuilder) -> None:
        for coord, value in values.items():
            builder.add_data((new, *coord), value)

    return Array(Blocks(new, grid, (), emit), shape, chunks, dtype)


def to_dask(x: Array) -> Any:
    """``x`` as a ``dask.array.Array`` with the same blocks, keys and chunks; its graph is
    ``x``'s plan (dask's schedulers run the same tasks).

    >>> import numpy as np, tilegraph as tg
    >>> d = tg.from_numpy(np.arange(6.0), chunks=4).to_dask()
    >>> type(d).__name__, d.chunks, float(d.sum().compute())
    ('Array', ((4, 2),), 15.0)
    """
    import dask.array as da

    meta = np.empty((0,) * x.ndim, dtype=x.dtype)
    dsk = dict(dask_dict(x))
    for coord in np.ndindex(*x.numblocks):  # dask arrays' blocks are (name, *coord)
        key = x.collection.key(coord)
        if key != (x.name, *coord):
            dsk[(x.name, *coord)] = (_same, key)
    return da.Array(dsk, x.name, x.chunks, meta=meta)


def _same(value: Any) -> Any:
    return value


def dask_scheduler(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    """:func:`tilegraph.get`, the scheduler dask uses for tilegraph arrays by default."""
    from tilegraph.pipeline import get

    return get(dsk, keys, **kwargs)


def _meta(x: Array) -> np.ndarray:
    return np.empty((0,) * x.ndim, dtype=x.dtype)


def _no_optimize(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    return dsk


# The dask collection protocol of :class:`Array` (bound by :mod:`tilegraph.array.api_table`).
PROTOCOL: dict[str, Any] = {
    "__dask_graph__": lambda self: dask_graph(self),
    "__dask_keys__": lambda self: dask_keys(self),
    "__dask_layers__": lambda self: (self.name,),
    "__dask_postcompute__": lambda self: postcompute(self),
    "__dask_postpersist__": lambda self: postpersist(self),
    "__dask_tokenize__": lambda self: ("tilegraph.Array", self.name),
    "__dask_optimize__": staticmethod(_no_optimize),
    "__dask_scheduler__": staticmethod(dask_scheduler),
    "to_dask": to_dask,
    "_meta": property(lambda self: _meta(self), doc="An empty NumPy array of the array's "
                      "dtype and number of dimensions: the type of its blocks, as dask's "
                      "``_meta`` (what dask and xarray's map_blocks make stand-ins of)."),
}
