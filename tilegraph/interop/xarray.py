"""xarray's chunk manager for tilegraph: ``chunked_array_type="tilegraph"``.

Registered as the entry point ``tilegraph`` of the group ``xarray.chunkmanagers`` (see
``pyproject.toml``), so that::

    ds = xr.open_dataset(path, chunks={"x": 100}, chunked_array_type="tilegraph")
    ds2 = ds.chunk({"x": 100}, chunked_array_type="tilegraph")

hold tilegraph arrays; arithmetic, reductions and ``.compute()``/``.values`` run on
tilegraph (``from_array_kwargs={"backend": ...}`` is not needed: options are the usual
``tilegraph.config.set(...)``).
``xr.apply_ufunc(..., dask="parallelized")`` with or without core dimensions runs
:func:`tilegraph.array.gufunc.apply_gufunc`, and ``to_zarr``/``to_netcdf`` write block by
block through :meth:`TilegraphManager.store`, also with ``compute=False`` (the writes happen
when the returned object is computed); ``groupby(...).shuffle_to_chunks()`` runs
:meth:`TilegraphManager.shuffle`.

Nothing falls back to dask quietly. Once this manager is loaded (xarray loads it the first
time it looks for a chunk manager), ``.chunk(...)`` without ``chunked_array_type`` of a
Dataset, DataArray or Variable holding tilegraph arrays (and no dask array) chunks with
tilegraph, its NumPy variables included; ``xr.map_blocks`` (and the ``map_blocks`` methods)
of such objects give tilegraph arrays (xarray builds its per-block graph, and tilegraph folds
it into its plan); ``dask.compute``/``dask.persist`` of them run on tilegraph; and xarray's
dask manager, asked to chunk a tilegraph array (the very first ``.chunk()`` of a process,
before this manager was loaded, or ``chunked_array_type="dask"``), keeps it a tilegraph
array and warns once that NumPy variables of the same call became dask arrays, naming the
fix:
``xr.set_options(chunk_manager="tilegraph")``, which makes tilegraph xarray's default for
``.chunk()`` and ``open_dataset(chunks=...)`` everywhere.

tilegraph arrays are also dask collections (:mod:`tilegraph.array.dask_interop`), which
xarray's dask manager would claim too; loading this manager makes the dask manager leave
tilegraph arrays to it (xarray refuses an array two managers claim), and xarray's indexing
adapter for dask collections index them orthogonally where xarray asks for outer indexing
(``Array.oindex``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from xarray.namedarray.parallelcompat import ChunkManagerEntrypoint

from tilegraph.array.chunks import normalize_chunks
from tilegraph.array.core import Array, compute
from tilegraph.config import Options


def _dask_manager_leaves_tilegraph_arrays() -> None:
    try:
        from xarray.namedarray.daskmanager import DaskManager
    except ImportError:  # pragma: no cover - xarray without its dask manager
        return
    claims = DaskManager.is_chunked_array
    if getattr(claims, "leaves_tilegraph", False):
        return

    def is_chunked_array(self: Any, data: Any) -> bool:
        return not isinstance(data, Array) and claims(self, data)

    is_chunked_array.leaves_tilegraph = True  # type: ignore[attr-defined]
    DaskManager.is_chunked_array = is_chunked_array  # type: ignore[method-assign]


def _dask_indexing_adapter_outer_indexes_tilegraph_arrays() -> None:
    """xarray wraps every dask collection, tilegraph arrays included, in its
    ``DaskIndexingAdapter``, whose outer indexing (``isel`` with several lists, ``interp``)
    calls ``array[key]`` expecting dask's refusal of several integer arrays; tilegraph
    indexes as NumPy does (point-wise), which would pick points instead of the outer
    product. Outer indexing of a tilegraph array goes to its ``oindex`` instead."""
    try:
        from xarray.core.indexing import DaskIndexingAdapter
    except ImportError:  # pragma: no cover - an xarray without this adapter
        return
    get = DaskIndexingAdapter._oindex_get
    if getattr(get, "outer_indexes_tilegraph", False):
        return

    def _oindex_get(self: Any, indexer: Any) -> Any:
        if isinstance(self.array, Array):
            return self.array.oindex[indexer.tuple]
        return get(self, indexer)

    _oindex_get.outer_indexes_tilegraph = True  # type: ignore[attr-defined]
    DaskIndexingAdapter._oindex_get = _oindex_get  # type: ignore[method-assign]


def _holds_tilegraph_only(obj: Any) -> bool:
    """Whether the xarray object ``obj`` (a Dataset, DataArray or Variable) holds a
    tilegraph array and no other chunked array (a dask array)."""
    from xarray.namedarray.pycompat import is_chunked_array

    variables = _variables_of(obj)
    # ``_data``, not ``.data``: that would read a lazily indexed file variable
    datas = [getattr(v, "_data", None) for v in variables]
    chunked = [d for d in datas if is_chunked_array(d)]
    return bool(chunked) and all(isinstance(d, Array) for d in chunked)


def _chunk_keeps_tilegraph() -> None:
    """``.chunk(...)`` without ``chunked_array_type`` (and with xarray's default chunk
    manager option) on a Dataset, DataArray or Variable holding tilegraph arrays (and no
    dask array) chunks with tilegraph, its numpy variables included, instead of xarray's
    default, dask, which would wrap each tilegraph array in a dask array."""
    from xarray.core.dataset import Dataset
    from xarray.core.options import OPTIONS
    from xarray.core.variable import Variable

    for cls in (Dataset, Variable):
        chunk = cls.chunk
        if getattr(chunk, "keeps_tilegraph", False):
            continue

        def keeping(self: Any, *args: Any, _chunk: Callable = chunk, **kwargs: Any) -> Any:
            if (kwargs.get("chunked_array_type") is None
                    and OPTIONS["chunk_manager"] == "dask" and _holds_tilegraph_only(self)):
                kwargs["chunked_array_type"] = "tilegraph"
            return _chunk(self, *args, **kwargs)

        keeping.keeps_tilegraph = True  # type: ignore[attr-defined]
        keeping.__doc__ = chunk.__doc__
        keeping.__name__ = chunk.__name__
        keeping.__qualname__ = chunk.__qualname__
        cls.chunk = keeping  # type: ignore[method-assign]


_WARNED_DASK_CHUNK = []  # one warning per process (a list: set once, read without a lock)


def _dask_manager_keeps_tilegraph_arrays() -> None:
    """xarray's dask chunk manager, asked to make a dask array of a tilegraph array (a
    ``.chunk()`` that ran before tilegraph's chunk manager was loaded, or with
    ``chunked_array_type="dask"``), rechunks it as a tilegraph array instead of wrapping
    it, and warns once that other variables of the same call may have become dask arrays,
    with the fix."""
    try:
        from xarray.namedarray.daskmanager import DaskManager
    except ImportError:  # pragma: no cover - xarray without its dask manager
        return
    from_array = DaskManager.from_array
    if getattr(from_array, "keeps_tilegraph", False):
        return

    def keeping(self: Any, data: Any, chunks: Any, **kwargs: Any) -> Any:
        if not isinstance(data, Array):
            return from_array(self, data, chunks, **kwargs)
        if not _WARNED_DASK_CHUNK:
            _WARNED_DASK_CHUNK.append(True)
            import warnings

            from tilegraph.runtime.warning_site import install

            install()  # shown at the user's line, past xarray's frames
            warnings.warn(
                "xarray's dask chunk manager was asked to chunk a tilegraph array (a "
                ".chunk() without chunked_array_type before tilegraph's chunk manager was "
                "loaded, or with chunked_array_type='dask'); it stays a tilegraph array, "
                "but NumPy variables chunked in the same call became dask arrays. Pass "
                "chunked_array_type='tilegraph' to .chunk()/open_dataset(), or set "
                "xr.set_options(chunk_manager='tilegraph') once", UserWarning, stacklevel=1)
        return TilegraphManager().rechunk(data, chunks)

    keeping.keeps_tilegraph = True  # type: ignore[attr-defined]
    DaskManager.from_array = keeping  # type: ignore[method-assign]


def _map_blocks_keeps_tilegraph() -> None:
    """``xr.map_blocks`` (and ``Dataset.map_blocks``/``DataArray.map_blocks``) of objects
    holding tilegraph arrays give tilegraph arrays: xarray builds its per-block graph (it
    is written for dask graphs), and the dask arrays it makes of it are folded back into
    tilegraph's plan by :func:`tilegraph.array.dask_interop.from_dask`, so nothing runs
    on dask and the result computes on tilegraph."""
    import xarray
    import xarray.core.parallel as parallel

    map_blocks = parallel.map_blocks
    if getattr(map_blocks, "keeps_tilegraph", False):
        return

    def keeping(func: Callable, obj: Any, args: Any = (), kwargs: Any = None,
                template: Any = None) -> Any:
        given = list(args) if isinstance(args, (list, tuple)) else []  # xarray checks it
        inputs = [obj, *given, *([] if template is None else [template])]
        tilegraph_in = any(_holds_tilegraph_only(a) for a in inputs if hasattr(a, "dims"))
        out = map_blocks(func, obj, args, kwargs, template)
        if not tilegraph_in:
            return out
        sources = [v._data for a in inputs if hasattr(a, "dims")
                   for v in _variables_of(a) if isinstance(v._data, Array)]
        return _dask_to_tilegraph(out, sources)

    keeping.keeps_tilegraph = True  # type: ignore[attr-defined]
    keeping.__doc__ = map_blocks.__doc__
    keeping.__name__ = "map_blocks"
    parallel.map_blocks = keeping
    if xarray.map_blocks is map_blocks:
        xarray.map_blocks = keeping


def _dask_compute_runs_on_tilegraph() -> None:
    """``dask.compute``/``dask.persist`` of a Dataset or DataArray holding tilegraph arrays
    (and no dask array) run on tilegraph (its ``get`` as dask's scheduler, the graph not
    rewritten by dask's array optimizations), as they do for tilegraph arrays themselves,
    instead of dask's threaded scheduler, xarray's choice for every dask collection."""
    from xarray.core.dataset import Dataset

    for attr, ours in (("__dask_scheduler__", _tilegraph_scheduler),
                       ("__dask_optimize__", _tilegraph_optimize)):
        prop = Dataset.__dict__.get(attr)
        if not isinstance(prop, property) or getattr(prop.fget, "keeps_tilegraph", False):
            continue

        def choose(self: Any, _theirs: Callable = prop.fget, _ours: Any = ours) -> Any:
            return _ours if _holds_tilegraph_only(self) else _theirs(self)

        choose.keeps_tilegraph = True  # type: ignore[attr-defined]
        setattr(Dataset, attr, property(choose, doc=prop.__doc__))


def _tilegraph_scheduler(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    from tilegraph.array.dask_interop import dask_scheduler

    return dask_scheduler(dsk, keys, **kwargs)


def _tilegraph_optimize(dsk: Any, keys: Any, **kwargs: Any) -> Any:
    return dsk


def _variables_of(obj: Any) -> list:
    """The variables of a Dataset, a DataArray (its own and its coordinates') or a
    Variable."""
    if hasattr(obj, "variables"):
        return list(obj.variables.values())
    if hasattr(obj, "variable"):
        return [obj.variable, *obj.coords.variables.values()]
    return [obj]


def _dask_to_tilegraph(obj: Any, sources: list) -> Any:
    """``obj`` (a Dataset or DataArray) with each dask array among its variables made a
    tilegraph array computing the same blocks; ``sources``: the tilegraph arrays whose
    exported tasks their graphs hold (planned once, as tilegraph's)."""
    from tilegraph.array.dask_interop import from_dask, is_dask_collection

    if hasattr(obj, "variables"):  # a Dataset
        changed = {k: v.copy(deep=False, data=from_dask(v.data, sources))
                   for k, v in obj.variables.items() if is_dask_collection(v.data)}
        return obj._replace(variables={**obj.variables, **changed}) if changed else obj
    ds = obj._to_temp_dataset()
    return obj._from_temp_dataset(_dask_to_tilegraph(ds, sources))


class TilegraphManager(ChunkManagerEntrypoint):
    """The chunk manager xarray uses for ``chunked_array_type="tilegraph"``. Loading it
    (xarray does when it first looks for chunk managers) also makes xarray keep tilegraph
    arrays tilegraph: ``.chunk()`` of an object holding them, ``xr.map_blocks`` of one, and
    dask's manager asked to chunk one (see the module's docstring)."""

    available = True

    def __init__(self) -> None:
        self.array_cls = Array
        _dask_manager_leaves_tilegraph_arrays()
        _dask_indexing_adapter_outer_indexes_tilegraph_arrays()
        _chunk_keeps_tilegraph()
        _dask_manager_keeps_tilegraph_arrays()
        _map_blocks_keeps_tilegraph()
        _dask_compute_runs_on_tilegraph()

    def is_chunked_array(self, data: Any) -> bool:
        return isinstance(data, Array)

    def chunks(self, data: Array) -> tuple[tuple[int, ...], ...]:
        return data.chunks

    def normalize_chunks(self, chunks: Any, shape: tuple[int, ...] | None = None,
                         limit: int | None = None, dtype: Any = None,
                         previous_chunks: Any = None) -> tuple[tuple[int, ...], ...]:
        """Block sizes per axis (``limit`` and ``previous_chunks`` are not used: "auto"
        blocks are tilegraph's)."""
        if shape is None:
            raise ValueError("normalize_chunks needs the array's shape")
        if isinstance(chunks, dict):
            chunks = tuple(chunks.get(i, -1) for i in range(len(shape)))
        return normalize_chunks(chunks, shape, dtype if dtype is not None else float)

    def get_auto_chunk_size(self) -> int:
        """Bytes per block that ``chunks="auto"`` aims at."""
        from tilegraph.array.chunks import AUTO_BLOCK_BYTES

        return AUTO_BLOCK_BYTES

    def from_array(self, data: Any, chunks: Any, **kwargs: Any) -> Array:
        """A tilegraph array reading ``data`` (an xarray lazily indexed backend array, a
        NumPy array, ...) block by block. dask's keywords xarray passes (``name``,
        ``lock``, ``inline_array``, ``meta``) are accepted; ``lock`` serialises the reads."""
        from tilegraph.array.io import from_array

        if isinstance(data, Array):
            return data.rechunk(chunks)
        lock = kwargs.get("lock", False)
        if lock is not False and lock is not None and lock is not True and not (
                hasattr(lock, "__enter__") and hasattr(lock, "__exit__")):
            lock = True
        if isinstance(data, np.ndarray):
            from tilegraph.array.core import from_numpy

            return from_numpy(data, chunks=chunks)
        return from_array(data, chunks=chunks, lock=lock or False)

    def rechunk(self, data: Array, chunks: Any, **kwargs: Any) -> Array:
        """``data`` with new blocks; ``chunks`` as dask's (a dict by axis number, or a
        tuple, where ``None`` keeps an axis's blocks)."""
        if isinstance(chunks, dict):
            chunks = tuple(chunks.get(i, c) for i, c in enumerate(data.chunks))
        if isinstance(chunks, (tuple, list)) and len(chunks) == data.ndim:
            chunks = tuple(c if c is not None else old
                           for c, old in zip(chunks, data.chunks, strict=True))
        return data.rechunk(chunks)

    def compute(self, *data: Any, **kwargs: Any) -> tuple[Any, ...]:
        """NumPy values of the tilegraph arrays among ``data`` (one shared plan); other
        objects are returned as they are. ``kwargs`` are tilegraph's run options."""
        return compute(*data, **kwargs)

    def persist(self, *data: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Each tilegraph array computed and held in memory as a blocked array with the
        same blocks (later operations start from the values)."""
        from tilegraph.array.core import from_numpy

        values = compute(*data, **kwargs)
        return tuple(from_numpy(np.asarray(v), chunks=d.chunks) if isinstance(d, Array)
                     else v for d, v in zip(data, values, strict=True))

    @property
    def array_api(self) -> Any:
        import tilegraph

        return tilegraph

    def reduction(self, arr: Array, func: Callable, combine_func: Callable | None = None,
                  aggregate_func: Callable | None = None, axis: Any = None,
                  dtype: Any = None, keepdims: bool = False) -> Array:
        """``aggregate_func(func(blocks))`` over ``axis``: each block is reduced by
        ``func``, the partial results along ``axis`` are put together and reduced by
        ``aggregate_func`` (or ``combine_func``, or ``func``)."""
        axes = tuple(range(arr.ndim)) if axis is None else (
            (axis,) if isinstance(axis, int) else tuple(axis))
        axes = tuple(a % arr.ndim for a in axes)
        dtype = np.dtype(dtype) if dtype is not None else arr.dtype
        chunks = tuple((1,) * len(c) if i in axes else c for i, c in enumerate(arr.chunks))
        partial = arr.map_blocks(_reduce_block, func, axes, dtype=dtype, chunks=chunks)
        whole = {i: -1 for i in axes}
        partial = partial.rechunk(tuple(whole.get(i, c) for i, c in
                                        enumerate(partial.chunks)))
        final = aggregate_func or combine_func or func
        out_chunks = tuple((1,) if i in axes else c for i, c in enumerate(partial.chunks))
        out = partial.map_blocks(_reduce_block, final, axes, dtype=dtype, chunks=out_chunks)
        if keepdims:
            return out
        shape = tuple(n for i, n in enumerate(out.shape) if i not in axes)
        return out.reshape(shape)

    def map_blocks(self, func: Callable, *args: Any, dtype: Any = None, chunks: Any = None,
                   drop_axis: Any = None, new_axis: Any = None, **kwargs: Any) -> Array:
        """``func`` on each block: :func:`tilegraph.map_blocks`, which takes
        ``dask.array.map_blocks``'s arguments (``drop_axis``, ``new_axis``, ``meta``,
        ``name``, ``token``, ``block_id``/``block_info``)."""
        from tilegraph.array.elementwise import map_blocks

        return map_blocks(func, *args, dtype=dtype, chunks=chunks, drop_axis=drop_axis,
                          new_axis=new_axis, **kwargs)

    def apply_gufunc(self, func: Callable, signature: str, *args: Any, axes: Any = None,
                     axis: Any = None, keepdims: bool = False, output_dtypes: Any = None,
                     output_sizes: Any = None, vectorize: bool | None = None,
                     allow_rechunk: bool = False, meta: Any = None, **kwargs: Any) -> Any:
        """``func``, a generalized ufunc of ``signature`` (core dimensions and all), on the
        blocks of the arguments: :func:`tilegraph.array.gufunc.apply_gufunc`, with
        ``dask.array.apply_gufunc``'s semantics. This is what
        ``xr.apply_ufunc(..., input_core_dims=..., dask="parallelized")`` calls (xarray
        passes ``allow_rechunk=True`` once it has checked the core dimensions itself, and
        ``output_sizes`` from ``dask_gufunc_kwargs``). Several outputs give a tuple."""
        from tilegraph.array.gufunc import apply_gufunc

        return apply_gufunc(func, signature, *args, axes=axes, axis=axis, keepdims=keepdims,
                            output_dtypes=output_dtypes, output_sizes=output_sizes,
                            vectorize=vectorize, allow_rechunk=allow_rechunk, meta=meta,
                            **kwargs)

    def scan(self, func: Callable, binop: Callable, ident: Any, arr: Array,
             axis: int | None = None, dtype: Any = None, **kwargs: Any) -> Array:
        """A cumulative reduction along ``axis``, as ``dask.array.cumreduction``: each
        block scanned by ``func``, then ``binop(carry, block)`` with the carry of the
        blocks before it (:func:`tilegraph.cumreduction`). xarray's ``ffill``/``bfill``
        call it. ``method`` ("sequential" or "blelloch") gives the same values either
        way, and ``preop`` is not needed: a block's carry is its last scanned slice."""
        from tilegraph.array.scans import cumreduction

        method = kwargs.pop("method", "sequential")
        if method not in ("sequential", "blelloch"):
            raise ValueError(f"scan: method={method!r} is not 'sequential' or 'blelloch'")
        kwargs.pop("preop", None)
        if kwargs:
            raise TypeError(f"scan: unexpected keywords {sorted(kwargs)}")
        return cumreduction(func, binop, ident, arr, axis=axis, dtype=dtype)

    def shuffle(self, x: Array, indexer: list[list[int]], axis: int,
                chunks: Any = None) -> Array:
        """The positions of ``indexer`` (a list of groups of positions along ``axis``)
        taken in order, each group within one block: what xarray's
        ``groupby(...).shuffle_to_chunks()`` calls to put every group in one block, as
        ``dask.array.shuffle``. Consecutive groups share a block while it stays within
        1.25 times the input's mean block size along ``axis``; a bigger group is a block
        of its own. ``chunks`` may be ``None`` or ``"auto"`` (the blocks of the other axes
        are kept)."""
        from tilegraph.array.indexing import take

        if chunks not in (None, "auto"):
            raise ValueError(f"shuffle: chunks={chunks!r} is not supported by the tilegraph "
                             "chunk manager; give chunks=None or 'auto' (each group is one "
                             "block along the shuffled axis)")
        if not isinstance(indexer, (list, tuple)) or not all(
                isinstance(g, (list, tuple, np.ndarray)) for g in indexer):
            raise ValueError("shuffle: indexer must be a list of lists of positions, got "
                             f"{type(indexer).__name__}")
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"shuffle: axis {axis} is out of bounds for an array of shape "
                             f"{x.shape}")
        axis %= x.ndim
        groups = [np.asarray(g, dtype=np.int64).reshape(-1) for g in indexer]
        positions = np.concatenate(groups) if groups else np.zeros(0, np.int64)
        n = x.shape[axis]
        if positions.size and (positions.min() < 0 or positions.max() >= n):
            raise IndexError(f"shuffle: the indexer holds positions outside 0..{n - 1} of "
                             f"axis {axis} (shape {x.shape})")
        sizes = _group_blocks([g.size for g in groups],
                              1.25 * n / max(1, len(x.chunks[axis])))
        return take(x, positions, axis=axis, block_sizes=sizes or (0,))

    def unify_chunks(self, *args: Any, **kwargs: Any) -> tuple[dict, list]:
        """dask's ``unify_chunks(array, index, array, index, ...)``: every array rechunked
        to the common block boundaries of each named index."""
        from tilegraph.array.chunks import common_refinement

        pairs = list(zip(args[::2], args[1::2], strict=True))
        sizes: dict[Any, list] = {}
        for arr, ind in pairs:
            if isinstance(arr, Array):
                for c, i in zip(arr.chunks, ind, strict=True):
                    sizes.setdefault(i, []).append(c)
        common = {i: common_refinement(*[c for c in cs if sum(c) == max(map(sum, cs))])
                  for i, cs in sizes.items()}
        out = []
        for arr, ind in pairs:
            if isinstance(arr, Array):
                want = tuple(common[i] if sum(common[i]) == n else c
                             for i, n, c in zip(ind, arr.shape, arr.chunks, strict=True))
                arr = arr.rechunk(want) if want != arr.chunks else arr
            out.append(arr)
        return common, out

    def store(self, sources: Any, targets: Any, **kwargs: Any) -> StoreWrites | None:
        """Write each source array into its target (``target[region] = block``, block by
        block, in one tilegraph run), as ``dask.array.store``: ``regions`` (one tuple of
        slices per target, or one for all), ``lock`` (serialises the writes). Other
        keywords are tilegraph's run options (``backend=...``); ``flush`` is accepted and
        has no effect.

        ``compute=False`` (xarray's ``to_zarr(..., compute=False)`` and
        ``to_netcdf(..., compute=False)``) writes nothing and returns a
        :class:`StoreWrites`: its ``.compute()`` does the writes. xarray wraps it in a
        ``dask.delayed`` that closes the store afterwards, so calling ``.compute()`` on
        what ``to_zarr`` returns writes the data (that wrapping is xarray's and needs dask
        installed). ``return_stored=True`` is refused (no arrays come back)."""
        kwargs = dict(kwargs)
        compute_now = kwargs.pop("compute", True)
        lock = kwargs.pop("lock", None)
        regions = kwargs.pop("regions", None)
        kwargs.pop("flush", None)
        if kwargs.pop("return_stored", False):
            raise TypeError("store(return_stored=True) is not supported by the tilegraph "
                            "chunk manager: the writes return nothing; open the target "
                            "again to read what was stored")
        writes = StoreWrites(sources, targets, regions, lock, kwargs)
        if compute_now is False:
            return writes
        writes.compute()
        return None


class StoreWrites:
    """Block writes of tilegraph arrays into array-like targets, planned but not done:
    what :meth:`TilegraphManager.store` returns with ``compute=False``.

    ``.compute(**options)`` writes every block of every source in one tilegraph run
    (``options`` over the run options given to ``store``) and returns None; computing
    again writes again. It is also a dask collection of one task that does the same, so
    ``dask.delayed`` functions of it (xarray's ``to_zarr(compute=False)`` result, which
    closes the store after the writes) and ``dask.compute`` run the writes; nothing is
    written before."""

    def __init__(self, sources: Any, targets: Any, regions: Any = None, lock: Any = None,
                 options: dict[str, Any] | None = None):
        from tilegraph import config
        from tilegraph.array.core import tokenize, unique_name

        if isinstance(sources, Array) or not isinstance(sources, (list, tuple)):
            sources, targets = [sources], [targets]
        elif not isinstance(targets, (list, tuple)):
            raise TypeError(f"store: {len(sources)} sources need a list of as many targets, "
                            f"got {type(targets).__name__}")
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(f"store: {len(sources)} sources but {len(targets)} targets; "
                             "give one target per source")
        if regions is None or isinstance(regions, tuple):
            regions = [regions] * len(sources)
        regions = list(regions)
        if len(regions) != len(sources):
            raise ValueError(f"store: {len(regions)} regions for {len(sources)} sources; "
                             "give one region (a tuple of slices, or None) per source")
        for n, (x, t, r) in enumerate(zip(sources, targets, regions, strict=True)):
            _check_target(n, x, t, r)
        self.options = dict(options or {})
        config.resolve(self.options, "store()")  # bad options fail here, not when written
        self.sources, self.targets, self.regions, self.lock = sources, targets, regions, lock
        self.name = unique_name(f"tilegraph-store-{tokenize('store', *sources)}")

    def __repr__(self) -> str:
        return f"StoreWrites({len(self.sources)} arrays, not yet written)"

    def compute(self, **options: Any) -> None:
        """Do the writes (one tilegraph run); ``options`` are run options."""
        from tilegraph import config

        store_arrays(self.sources, self.targets, self.regions, lock=self.lock,
                     options=config.resolve({**self.options, **options}, "store()"))

    def _write(self) -> None:
        self.compute()

    # the dask collection protocol: one task that does the writes
    def __dask_graph__(self) -> dict:
        return {self.name: (self._write,)}

    def __dask_keys__(self) -> list:
        return [self.name]

    def __dask_layers__(self) -> tuple[str, ...]:
        return (self.name,)

    def __dask_tokenize__(self) -> tuple[str, str]:
        return ("tilegraph.StoreWrites", self.name)

    def __dask_postcompute__(self) -> tuple[Callable, tuple]:
        return _nothing, ()

    @staticmethod
    def __dask_optimize__(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        return dsk

    @staticmethod
    def __dask_scheduler__(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        from dask.local import get_sync

        return get_sync(dsk, keys, **kwargs)


def _nothing(results: Any) -> None:
    return None


def _check_target(n: int, x: Any, target: Any, region: Any) -> None:
    """Build-time checks of one source/target/region triple of ``store``."""
    if not hasattr(target, "__setitem__"):
        raise TypeError(f"store: target #{n} ({type(target).__name__}) does not support "
                        "target[region] = block")
    shape = x.shape if hasattr(x, "shape") else np.shape(x)
    if region is not None:
        if not isinstance(region, tuple) or len(region) != len(shape) or not all(
                isinstance(r, slice) for r in region):
            raise ValueError(f"store: region #{n} {region!r} must be a tuple of "
                             f"{len(shape)} slices (one per axis of the source of shape "
                             f"{shape})")
        tshape = getattr(target, "shape", None)
        if tshape is not None and len(tshape) == len(shape):
            got = tuple(len(range(*r.indices(t))) for r, t in zip(region, tshape,
                                                                   strict=True))
            if got != tuple(shape):
                raise ValueError(f"store: region #{n} {region} of a target of shape "
                                 f"{tuple(tshape)} has shape {got}, but the source has "
                                 f"shape {tuple(shape)}")
    else:
        tshape = getattr(target, "shape", None)
        if tshape is not None and tuple(tshape) != tuple(shape):
            raise ValueError(f"store: target #{n} has shape {tuple(tshape)} but its source "
                             f"has shape {tuple(shape)}; give a region")


def _group_blocks(group_sizes: list[int], limit: float) -> tuple[int, ...]:
    """Block sizes holding whole groups in order: a block takes the next group while it
    stays within ``limit`` elements (a group bigger than ``limit`` is one block)."""
    blocks: list[int] = []
    current = 0
    for size in group_sizes:
        if current and current + size > limit:
            blocks.append(current)
            current = 0
        current += size
    if current:
        blocks.append(current)
    return tuple(blocks)


def _reduce_block(block: np.ndarray, func: Callable, axes: tuple[int, ...]) -> np.ndarray:
    out = func(block, axis=axes, keepdims=True)
    return np.asarray(out)


def _write_block(target: Any, region: tuple, block: np.ndarray, lock: Any) -> None:
    if lock is not None and lock is not False and hasattr(lock, "__enter__"):
        with lock:
            target[region] = block
    else:
        target[region] = block


def store_arrays(sources: list, targets: list, regions: list, lock: Any = None, *,
                 options: Options) -> None:
    """Write every block of each source into its target at ``region`` (offsets), in one
    tilegraph run (``options``: its options record)."""
    from tilegraph.algebra.blocks import Blocks
    from tilegraph.array.chunks import all_block_slices
    from tilegraph.array.core import tokenize
    from tilegraph.array.lowering import run_blocks
    from tilegraph.graph.taskgraph import Dep, Lit

    colls = []
    for n, (x, target, region) in enumerate(zip(sources, targets, regions, strict=True)):
        if not isinstance(x, Array):
            target[region if region is not None else ...] = np.asarray(x)
            continue
        offsets = [0] * x.ndim if region is None else [r.start or 0 for r in region]
        name = f"xarray-store-{tokenize('store', x, id(target), n)}"
        slices = all_block_slices(x.chunks)

        def emit(builder: Any, x: Any = x, target: Any = target, offsets: Any = offsets,
                 slices: Any = slices, name: str = name) -> None:
            for coord, slc in slices.items():
                where = tuple(slice(s.start + o, s.stop + o)
                              for s, o in zip(slc, offsets, strict=True))
                builder.add((name, *coord), _write_block, deps=[x.collection.key(coord)],
                            args=(target, Lit(where), Dep(0), lock), kind="store",
                            name="write", coords=coord)

        colls.append(Blocks(name, x.numblocks, (x.collection,), emit))
    if colls:
        run_blocks(colls, options)
