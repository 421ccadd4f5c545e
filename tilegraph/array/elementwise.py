"""Elementwise operations with NumPy broadcasting and type promotion, block by block.

Inputs are aligned first: their shapes broadcast as NumPy's do, and along every output axis
the blocks of all inputs are cut at the union of their block boundaries (a rechunk happens
only where they differ). The result dtype is what NumPy gives for the same operation on
one-element arrays of the input dtypes (and the same Python scalars), so promotion rules,
including NEP 50's for Python scalars, are NumPy's own.
"""

from __future__ import annotations

import inspect
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.array.chunks import common_refinement, numblocks
from tilegraph.array.core import Array, asarray, dense_only, from_numpy, tokenize
from tilegraph.graph.taskgraph import Dep, funcname


def _describe(x: Any) -> str:
    return f"shape {x.shape}" if hasattr(x, "shape") else repr(x)


def align(op: str, args: Sequence[Any]) -> tuple[tuple[int, ...], tuple, list[Any]]:
    """Broadcast shape, common chunks, and the arguments with NumPy arrays turned into
    Arrays and every Array rechunked to the common block boundaries."""
    # array-likes (lists, tuples) take part in broadcasting as NumPy arrays, as in NumPy
    args = [np.asarray(a) if isinstance(a, (list, tuple)) else a for a in args]
    args = [asarray(a) if hasattr(type(a), "__dask_graph__") else a for a in args]  # lazily
    args = [from_numpy(a) if isinstance(a, np.ndarray) and a.ndim > 0 else a for a in args]
    arrays = [a for a in args if isinstance(a, Array)]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(
            f"{op}: shapes {shapes} cannot be broadcast together (NumPy broadcasting: axes "
            "aligned from the right must be equal or 1)"
        ) from None
    nd = len(shape)
    out_chunks = []
    for axis in range(nd):
        length = shape[axis]
        sizes = []
        for a in arrays:
            ax = axis - (nd - a.ndim)
            if ax >= 0 and a.shape[ax] == length:
                sizes.append(a.chunks[ax])
        out_chunks.append(common_refinement(*sizes) if sizes else (length,))
    out_chunks = tuple(out_chunks)
    aligned = []
    for a in args:
        if isinstance(a, Array):
            want = tuple(
                out_chunks[ax + nd - a.ndim] if a.shape[ax] == shape[ax + nd - a.ndim]
                else a.chunks[ax] for ax in range(a.ndim)
            )
            if want != a.chunks:
                a = a.rechunk(want)
        aligned.append(a)
    return shape, out_chunks, aligned


def broadcast_index_map(a: Array, shape: tuple[int, ...]) -> Callable | None:
    """The block coordinate of ``a`` that an output block of ``shape`` (``a`` broadcast to
    it, aligned from the last axis) reads, as a function of the output block's
    coordinate; None when it is the same coordinate."""
    nd = len(shape)
    off = nd - a.ndim
    broadcast = [a.shape[ax] != shape[ax + off] for ax in range(a.ndim)]
    if off == 0 and not any(broadcast):
        return None

    def index(coord: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(0 if broadcast[ax] else coord[ax + off] for ax in range(a.ndim))

    return index


def result_dtype(func: Callable, args: Sequence[Any], kwargs: dict | None = None) -> np.dtype:
    """The dtype NumPy gives for ``func`` on one-element stand-ins of the arguments."""
    from tilegraph.runtime.warning_site import install

    dummies = [np.ones((1,) * a.ndim, dtype=a.dtype) if isinstance(a, Array) else a
               for a in args]
    install()  # a warning of func's is shown at the user's line
    with np.errstate(all="ignore"):
        out = func(*dummies, **(kwargs or {}))
    return np.asarray(out).dtype


def elemwise(
    func: Callable,
    *args: Any,
    dtype: Any = None,
    kwargs: dict | None = None,
    name: str | None = None,
    kind: str = "elementwise",
) -> Array:
    """``func`` applied block by block to aligned, broadcast arguments (Arrays, NumPy
    arrays, scalars)."""
    op = name or funcname(func)
    shape, chunks, args = align(op, args)
    if dtype is None:
        try:
            dtype = result_dtype(func, args, kwargs)
        except Exception as exc:
            shapes = ", ".join(_describe(a) for a in args)
            # keep the kind of NumPy's error (OverflowError for a Python int that does not
            # fit the array dtype, ValueError, TypeError for a missing loop)
            kind = next((k for k in (OverflowError, ValueError) if isinstance(exc, k)),
                        TypeError)
            raise kind(f"{op}: cannot be applied to arguments ({shapes}): {exc}") from exc
    dtype = np.dtype(dtype)
    arrays = [a for a in args if isinstance(a, Array)]
    slot = {}
    template = []
    for a in args:
        if isinstance(a, Array):
            template.append(Dep(slot.setdefault(a.name, len(slot))))
        else:
            template.append(a)
    unique = {a.name: a for a in arrays}
    inputs = list(unique.values())
    maps = [broadcast_index_map(a, shape) for a in inputs]
    token = tokenize(op, func, *args, kwargs, dtype)
    itemsize = dtype.itemsize
    direct = all(type(t) is Dep for t in template) and len(inputs) == len(template)
    blocks = _map_blocks(
        f"{op}-{token}", func, [a.collection for a in inputs], numblocks(chunks), maps,
        args=None if direct else tuple(template), kwargs=kwargs or None, kind=kind, name=op,
        nbytes=lambda c: itemsize * math.prod(chunks[i][k] for i, k in enumerate(c)),
    )
    return Array(blocks, shape, chunks, dtype)


_UNSUPPORTED_UFUNC_KWARGS = ("where", "axes", "axis", "signature")


def apply_ufunc(ufunc: np.ufunc, *inputs: Any, **kwargs: Any) -> Any:
    """A NumPy ufunc on blocked arrays (the ``__array_ufunc__`` ``__call__`` path; a
    generalized ufunc goes to :func:`~tilegraph.array.gufunc.ufunc_call`)."""
    if ufunc.signature is not None:
        from tilegraph.array.gufunc import ufunc_call

        return ufunc_call(ufunc, *inputs, **kwargs)
    for k in _UNSUPPORTED_UFUNC_KWARGS:
        if k in kwargs:
            raise TypeError(f"{ufunc.__name__}: the {k}= argument is not supported on "
                            "tilegraph arrays")
    if ufunc.nout == 1:
        # the result dtype comes from NumPy itself, with dtype=/casting= taken into account
        return elemwise(ufunc, *inputs, kwargs=kwargs or None, name=ufunc.__name__)
    return tuple(
        elemwise(_ufunc_output(ufunc, k), *inputs, kwargs=kwargs or None,
                 name=f"{ufunc.__name__}_{k}")
        for k in range(ufunc.nout)
    )


def _ufunc_output(ufunc: np.ufunc, k: int) -> Callable:
    def one_output(*args: Any, **kwargs: Any) -> Any:
        return ufunc(*args, **kwargs)[k]

    one_output.__name__ = f"{ufunc.__name__}_{k}"
    return one_output


def where(condition: Any, x: Any = None, y: Any = None) -> Array | tuple[Array, ...]:
    """``numpy.where(condition, x, y)`` elementwise; ``where(condition)`` alone is, as in
    NumPy, ``nonzero(condition)``: the indices where it holds, one array per axis."""
    if x is None and y is None:
        from tilegraph.array.indexing import nonzero

        return nonzero(condition)
    if x is None or y is None:
        raise TypeError("where: give both x and y (where(condition, x, y)), or neither "
                        "(where(condition): the indices where condition holds)")
    dense_only("where", condition, x, y)
    return elemwise(np.where, condition, x, y, name="where")


def _astype(block: np.ndarray, dtype: np.dtype, casting: str) -> np.ndarray:
    return np.asarray(block).astype(dtype, casting=casting)


def astype(x: Array, dtype: Any, copy: bool = True, casting: str = "unsafe") -> Array:
    """``x`` converted to ``dtype``, block by block."""
    dtype = np.dtype(dtype)
    if dtype == x.dtype and not copy:
        return x
    if not np.can_cast(x.dtype, dtype, casting=casting):
        raise TypeError(f"astype: cannot cast {x.dtype} to {dtype} under casting={casting!r}")
    if dtype == x.dtype:
        return x
    return elemwise(_astype, x, dtype, casting, dtype=dtype, name="astype")


def takes_keyword(func: Callable, name: str) -> bool:
    """Whether ``func``'s signature names a parameter ``name`` that can be passed by
    keyword (dask's rule for ``block_id``/``block_info``: a ``**kwargs`` function does not
    get them); ``False`` for a callable without a signature (a NumPy ufunc)."""
    try:
        param = inspect.signature(func).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return param is not None and param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                inspect.Parameter.KEYWORD_ONLY)


class BlockKeywords:
    """``func`` called with dask's ``block_id=`` (the output block's coordinates) and/or
    ``block_info=`` (a dict: for each array argument, by its position among the arguments,
    its ``shape``, ``num-chunks``, ``chunk-location`` and ``array-location``; under ``None``
    the same of the output plus its ``chunk-shape`` and ``dtype``). The task passes the
    coordinates as ``block_id``; the info is made from them when the block runs, from
    offsets computed once per array, so a plan holds no dict per block."""

    def __init__(self, func: Callable, wants_id: bool, wants_info: bool,
                 inputs: list[tuple[int, tuple, tuple, tuple]], out_chunks: tuple,
                 dtype: np.dtype):
        from tilegraph.array.chunks import offsets

        self.func, self.wants_id, self.wants_info = func, wants_id, wants_info
        # per array argument: (position, shape, block offsets per axis, output axis of each
        # axis or None where its block is always 0: a broadcast or dropped axis)
        self.inputs = [(pos, shape, tuple(tuple(offsets(c)) for c in chunks), axes)
                       for pos, shape, chunks, axes in inputs]
        self.out_offsets = tuple(tuple(offsets(c)) for c in out_chunks)
        self.out_shape = tuple(sum(c) for c in out_chunks)
        self.dtype = dtype
        self.__name__ = funcname(func)

    def info(self, block_id: tuple[int, ...]) -> dict:
        out: dict[Any, dict] = {}
        for pos, shape, offs, axes in self.inputs:
            loc = tuple(0 if ax is None else block_id[ax] for ax in axes)
            out[pos] = {"shape": shape, "num-chunks": tuple(len(o) - 1 for o in offs),
                        "chunk-location": loc,
                        "array-location": [(o[k], o[k + 1]) for o, k in zip(offs, loc,
                                                                             strict=True)]}
        offs = self.out_offsets
        out[None] = {"shape": self.out_shape, "num-chunks": tuple(len(o) - 1 for o in offs),
                     "chunk-location": block_id,
                     "array-location": [(o[k], o[k + 1]) for o, k in zip(offs, block_id,
                                                                          strict=True)],
                     "chunk-shape": tuple(o[k + 1] - o[k] for o, k in zip(offs, block_id,
                                                                          strict=True)),
                     "dtype": self.dtype}
        return out

    def __call__(self, *args: Any, block_id: tuple[int, ...], **kwargs: Any) -> Any:
        if self.wants_info:
            kwargs["block_info"] = self.info(block_id)
        if self.wants_id:
            kwargs["block_id"] = block_id
        return self.func(*args, **kwargs)


def _axis_list(op: str, name: str, value: Any, ndim: int) -> tuple[int, ...]:
    """``drop_axis``/``new_axis`` as sorted non-negative axes of an ``ndim``-d array."""
    if value is None:
        return ()
    items = [value] if isinstance(value, (int, np.integer)) else list(value)
    out = []
    for a in items:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"{op}: {name} must be an int or a list of ints, got {value!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: {name}={value!r} is out of range for {ndim} axes")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: {name}={value!r} repeats an axis")
    return tuple(sorted(out))


def _output_chunks(chunks: Any, grid: list[int | None], given: list[tuple | None],
                   ndim_in: int) -> tuple[tuple[int, ...], ...]:
    """The output's block sizes from map_blocks' ``chunks=`` (per axis: the block sizes, or
    one int for every block), ``grid`` the blocks per axis (``None`` for a new axis, whose
    blocks ``chunks`` says), ``given`` the inputs' block sizes of the kept axes. An int
    for a kept axis whose input blocks are that size but the last, shorter one (what
    ``chunks=c`` makes of an axis) keeps those blocks."""
    if chunks is None:
        return tuple(g if g is not None else (1,) for g in given)
    if not isinstance(chunks, (tuple, list)):
        raise TypeError(f"map_blocks: chunks must be a tuple of per-axis block sizes or one "
                        f"block's shape, got {chunks!r}")
    known = [n for n in grid if n is not None]
    if len(chunks) != len(grid):
        raise ValueError(
            f"map_blocks: chunks {chunks!r} is neither one block's shape (one non-negative "
            f"int per axis of the {len(grid)}-d output) nor a tuple of per-axis block sizes "
            f"giving the block grid {tuple(known)} of the {ndim_in}-d input")
    out = []
    for n, c, have in zip(grid, chunks, given, strict=True):
        if isinstance(c, (int, np.integer)) and not isinstance(c, bool):
            if c < 0:
                raise ValueError(f"map_blocks: chunks {chunks!r} has a negative block size")
            if have is not None and len(have) > 1 and set(have[:-1]) == {c} \
                    and have[-1] <= c:
                out.append(have)  # blocks of c with a shorter last one: the inputs' own
            else:
                out.append((int(c),) * (1 if n is None else n))
            continue
        try:
            sizes = tuple(operator.index(v) for v in c)
        except TypeError:
            raise TypeError(f"map_blocks: chunks {chunks!r}: each axis is an int (every "
                            "block's size) or a tuple of block sizes") from None
        if any(v < 0 for v in sizes):
            raise ValueError(f"map_blocks: chunks {chunks!r} has a negative block size")
        out.append(sizes)
    got = tuple(len(c) for c in out)
    want = tuple(g if g is not None else len(c) for g, c in zip(grid, out, strict=True))
    if got != want:
        raise ValueError(f"map_blocks: chunks {tuple(out)} give a block grid {got}, but the "
                         f"inputs have {want}")
    return tuple(out)


def map_blocks(func: Callable, *args: Any, dtype: Any = None, chunks: Any = None,
               drop_axis: Any = None, new_axis: Any = None, meta: Any = None,
               name: str | None = None, token: str | None = None, enforce_ndim: bool = False,
               **kwargs: Any) -> Array:
    """Apply ``func`` to each block of the array arguments, with the other arguments
    passed as they are, as ``dask.array.map_blocks``.

    Blocks are paired by position: the arrays are aligned from their last axis, an axis of
    one block is passed whole with every block of the others (broadcast), and an array
    with as many elements as the others along an axis but other blocks is rechunked to
    theirs. ``dtype`` (or ``meta``'s dtype) defaults to what ``func`` returns on
    one-element arrays (or the first array's dtype if that fails). ``chunks`` gives the
    output's block sizes when ``func`` changes them: per axis a tuple of block sizes or
    one int for every block (dask's forms). ``drop_axis`` names axes ``func`` removes (the
    inputs are made one block along them first); ``new_axis`` names axes of the output
    that ``func`` adds (one block of the size ``chunks`` gives, 1 by default; ``chunks``
    with more axes than the inputs adds them on the left). Every block ``func`` returns is
    checked against the planned shape when it is stored, so dask's ``enforce_ndim`` is
    always in force. ``name`` (or dask's ``token``) names the tasks. Without array
    arguments, ``chunks`` and ``dtype`` make the array from nothing.

    A function that names a ``block_id`` parameter gets the output block's coordinates;
    one that names ``block_info`` gets dask's dict: for each array argument (by its
    position among the arguments) its ``shape``, ``num-chunks``, ``chunk-location`` and
    ``array-location`` (start and stop per axis), and under ``None`` the same of the output
    with its ``chunk-shape`` and ``dtype``. The signature is read once, when the array is
    built; as in dask, ``**kwargs`` does not ask for them.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.zeros(5), chunks=((3, 2),))
    >>> def where(block, block_id=None, block_info=None):
    ...     (start, stop), = block_info[0]["array-location"]
    ...     return block + 10 * block_id[0] + np.arange(start, stop)
    >>> x.map_blocks(where).compute()
    array([ 0.,  1.,  2., 13., 14.])
    >>> def ramp(block_info=None):
    ...     (start, stop), = block_info[None]["array-location"]
    ...     return np.arange(start, stop, dtype=block_info[None]["dtype"])
    >>> tg.map_blocks(ramp, chunks=((2, 3),), dtype=np.int32).compute()
    array([0, 1, 2, 3, 4], dtype=int32)
    """
    op = name or token or funcname(func)
    if not callable(func):
        raise TypeError(f"map_blocks: {func!r} is not callable")
    wants_id, wants_info = takes_keyword(func, "block_id"), takes_keyword(func, "block_info")
    for k, wanted in (("block_id", wants_id), ("block_info", wants_info)):
        if wanted and k in kwargs:
            raise TypeError(f"map_blocks: {op} gets {k}= from map_blocks (one per block); "
                            f"do not pass {k}= yourself")
    positions = [i for i, a in enumerate(args) if isinstance(a, Array)]
    if not positions and chunks is None:
        raise TypeError("map_blocks: give at least one tilegraph Array argument, or chunks= "
                        "(and dtype=) to make an array from nothing")
    ndim_in = max((args[i].ndim for i in positions), default=0)
    drop = _axis_list("map_blocks", "drop_axis", drop_axis, ndim_in)
    new, source = _output_axes(chunks, drop, new_axis, ndim_in)
    aligned, ref = _aligned_arguments(args, positions, ndim_in, drop)
    given = [None if ax is None else ref[ax] for ax in source]
    grid = [None if ax is None else len(ref[ax]) for ax in source]
    out_chunks = _output_chunks(chunks, grid, given, ndim_in)
    out_grid = numblocks(out_chunks)
    shape = tuple(sum(c) for c in out_chunks)

    if dtype is None:
        dtype = getattr(meta, "dtype", None)
    if dtype is None:
        try:
            dtype = result_dtype(func, aligned, kwargs)
        except Exception:
            if not positions:
                raise TypeError(f"map_blocks: give dtype= (the dtype of what {op} "
                                "returns) when there is no array argument") from None
            dtype = aligned[positions[0]].dtype
    dtype = np.dtype(dtype)

    template, unique, layouts, maps = _block_arguments(aligned, source, drop, ndim_in)
    call = func
    if wants_id or wants_info:
        call = BlockKeywords(func, wants_id, wants_info, layouts, out_chunks, dtype)
    token_ = tokenize("map_blocks", func, *aligned, kwargs, dtype, out_chunks, drop, new)
    itemsize = dtype.itemsize
    direct = all(type(t) is Dep for t in template) and len(unique) == len(template)
    blocks = _map_blocks(
        f"{op}-{token_}", call, [a.collection for a in unique.values()], out_grid, maps,
        args=None if direct else tuple(template), kwargs=kwargs or None,
        coord_kwarg="block_id" if call is not func else None, kind="map", name=op,
        nbytes=lambda c: itemsize * math.prod(out_chunks[i][k] for i, k in enumerate(c)),
    )
    return Array(blocks, shape, out_chunks, dtype)


def _output_axes(chunks: Any, drop: tuple[int, ...], new_axis: Any, ndim_in: int
                 ) -> tuple[tuple[int, ...], list[int | None]]:
    """map_blocks' new axes of the output (``new_axis``, or dask's: on the left when
    ``chunks`` has more axes than the inputs keep), and the input axis of each output axis
    (None: a new one)."""
    kept = [ax for ax in range(ndim_in) if ax not in drop]
    if new_axis is None and isinstance(chunks, (tuple, list)) and len(chunks) > len(kept):
        new_axis = list(range(len(chunks) - len(kept)))  # dask's: new axes on the left
    n_new = 1 if isinstance(new_axis, (int, np.integer)) else len(new_axis or ())
    new = _axis_list("map_blocks", "new_axis", new_axis, len(kept) + n_new)
    out_ndim = len(kept) + len(new)
    source: list[int | None] = []  # the input axis of each output axis (None: new)
    rest = iter(kept)
    for o in range(out_ndim):
        source.append(None if o in new else next(rest))
    return new, source


def _aligned_arguments(args: tuple, positions: list[int], ndim_in: int,
                       drop: tuple[int, ...]) -> tuple[list, dict[int, tuple[int, ...]]]:
    """map_blocks' arguments with their arrays aligned axis by axis (right-aligned): drop
    axes become one block; an array as long as the reference along an axis takes its
    blocks; others pair by position. With the reference blocks of each kept axis."""
    aligned = list(args)
    ref: dict[int, tuple[int, ...]] = {}
    for ax in range(ndim_in):
        having = [(i, ax - (ndim_in - args[i].ndim)) for i in positions
                  if args[i].ndim > ndim_in - ax - 1]
        if ax in drop:
            for i, la in having:
                a = aligned[i]
                if a.numblocks[la] != 1:
                    aligned[i] = a.rechunk(tuple(-1 if k == la else c
                                                 for k, c in enumerate(a.chunks)))
            continue
        first = next(((i, la) for i, la in having if aligned[i].numblocks[la] > 1),
                     having[0])
        want = aligned[first[0]].chunks[first[1]]
        ref[ax] = want
        for i, la in having:
            a = aligned[i]
            c = a.chunks[la]
            if c == want or (len(c) == 1 and a.shape[la] != sum(want)):
                continue  # the same blocks, or one block passed with each (broadcast)
            if a.shape[la] == sum(want):
                aligned[i] = a.rechunk(tuple(want if k == la else cc
                                             for k, cc in enumerate(a.chunks)))
            elif len(c) != len(want):
                shapes = ", ".join(str(args[j].shape) for j in positions)
                grids = ", ".join(str(args[j].numblocks) for j in positions)
                raise ValueError(
                    f"map_blocks: arrays of shapes {shapes} have block grids {grids} that "
                    f"do not pair along axis {ax} (counted from the last axis, as in "
                    "broadcasting): blocks are paired by position, so an axis must have "
                    "the same number of blocks in every array, or one block (broadcast)")
    return aligned, ref


def _block_arguments(aligned: list, source: list[int | None], drop: tuple[int, ...],
                     ndim_in: int) -> tuple[list, dict[str, Array], list, list]:
    """What each call of map_blocks' function gets: the argument template (a ``Dep`` per
    array, by distinct array), the distinct arrays, each array argument's layout (for
    ``block_info``) and the block coordinate map of each distinct array (None: the output
    block's own coordinate)."""
    out_ndim = len(source)
    out_of = {ax: o for o, ax in enumerate(source) if ax is not None}

    def index_map(a: Array) -> Callable | None:
        lead = ndim_in - a.ndim
        axes = tuple(None if (ax in drop or a.numblocks[la] == 1) else out_of[ax]
                     for la, ax in enumerate(range(lead, ndim_in)))
        if axes == tuple(range(out_ndim)):
            return None

        def index(coord: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(0 if o is None else coord[o] for o in axes)

        return index, axes

    slot: dict[str, int] = {}
    template = []
    unique: dict[str, Array] = {}
    layouts = []
    maps = []
    for pos, a in enumerate(aligned):
        if not isinstance(a, Array):
            template.append(a)
            continue
        found = index_map(a)
        axes = tuple(range(out_ndim)) if found is None else found[1]
        layouts.append((pos, a.shape, a.chunks, axes))
        if a.name not in unique:
            unique[a.name] = a
            maps.append(None if found is None else found[0])
        template.append(Dep(slot.setdefault(a.name, len(slot))))
    return template, unique, layouts, maps


def isin(element: Any, test_elements: Any, assume_unique: bool = False,
         invert: bool = False) -> Array:
    """``numpy.isin``: whether each element of ``element`` is one of ``test_elements``,
    block by block. ``test_elements`` is made a NumPy array first (a tilegraph Array is
    computed): it is sent whole to every block's task, so it should be small.

    >>> import numpy as np, tilegraph as tg
    >>> tg.isin(tg.from_numpy(np.arange(6), chunks=4), [1, 4]).compute()
    array([False,  True, False, False,  True, False])
    """
    values = test_elements.compute() if isinstance(test_elements, Array) else test_elements
    values = np.unique(np.asarray(values).reshape(-1))
    x = element if isinstance(element, Array) else asarray(element)
    return elemwise(_isin_block, x, kwargs={"values": values, "invert": bool(invert)},
                    dtype=bool, name="isin")


def _isin_block(block: np.ndarray, values: np.ndarray, invert: bool) -> np.ndarray:
    return np.isin(block, values, assume_unique=False, invert=invert)


def isnull(x: Any) -> Array:
    """``pandas.isnull`` block by block: True where an element is missing (NaN for
    floating and complex dtypes, NaT for datetimes and timedeltas, None or NaN for
    objects); integers, booleans and strings are never missing. xarray calls it (through
    its chunk manager's namespace) for the NaT handling of datetime reductions.

    >>> import numpy as np, tilegraph as tg
    >>> tg.isnull(tg.from_numpy(np.array([1.0, np.nan, 3.0]), chunks=2)).compute()
    array([False,  True, False])
    """
    x = x if isinstance(x, Array) else asarray(x)
    return elemwise(_isnull_block, x, dtype=bool, name="isnull")


def notnull(x: Any) -> Array:
    """``pandas.notnull`` block by block: the negation of :func:`isnull`.

    >>> import numpy as np, tilegraph as tg
    >>> d = np.array(["2001-01-01", "NaT"], dtype="datetime64[D]")
    >>> tg.notnull(tg.from_numpy(d, chunks=1)).compute()
    array([ True, False])
    """
    x = x if isinstance(x, Array) else asarray(x)
    return elemwise(_notnull_block, x, dtype=bool, name="notnull")


def _isnull_block(block: np.ndarray) -> np.ndarray:
    kind = block.dtype.kind
    if kind in "fc":
        return np.isnan(block)
    if kind in "mM":
        return np.isnat(block)
    if kind == "O":
        import pandas as pd

        return np.asarray(pd.isnull(block), dtype=bool)
    return np.zeros(block.shape, dtype=bool)


def _notnull_block(block: np.ndarray) -> np.ndarray:
    return ~_isnull_block(block)


def ravel_multi_index(multi_index: Any, dims: Any, mode: Any = "raise",
                      order: str = "C") -> Array:
    """``numpy.ravel_multi_index`` block by block: the flat indices, into an array of
    shape ``dims``, of the coordinates ``multi_index`` (a sequence of ``len(dims)``
    integer arrays, broadcast together). ``mode`` and ``order`` are NumPy's; with
    ``mode="raise"`` an out-of-range coordinate fails when its block is computed.

    >>> import numpy as np, tilegraph as tg
    >>> rows = tg.from_numpy(np.array([0, 1, 2, 1]), chunks=3)
    >>> tg.ravel_multi_index((rows, np.array([3, 0, 1, 2])), (3, 4)).compute()
    array([3, 4, 9, 6])
    """
    if isinstance(multi_index, (Array, np.ndarray)):
        if multi_index.ndim == 0:
            raise TypeError("ravel_multi_index: multi_index must be a sequence of integer "
                            "arrays, one per dimension of dims, not a 0-d array")
        multi_index = [multi_index[i] for i in range(multi_index.shape[0])]
    elif not isinstance(multi_index, (tuple, list)):
        raise TypeError("ravel_multi_index: multi_index must be a sequence of integer "
                        f"arrays, one per dimension of dims, not {type(multi_index).__name__}")
    parts = [a if isinstance(a, Array) else np.asarray(a) for a in multi_index]
    dims = (int(dims),) if np.ndim(dims) == 0 else tuple(int(d) for d in dims)
    if len(parts) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(parts)} coordinate arrays for "
                         f"{len(dims)} dimensions {dims}; give one per dimension")
    for n, p in enumerate(parts):
        if p.dtype.kind not in "iu":
            raise TypeError(f"ravel_multi_index: coordinate array #{n} has dtype {p.dtype}; "
                            "it must be an integer array")
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    if any(m not in ("raise", "wrap", "clip") for m in modes) or len(modes) not in (
            1, len(dims)):
        raise ValueError(f"ravel_multi_index: mode {mode!r} must be 'raise', 'wrap' or "
                         f"'clip', or one of those per dimension ({len(dims)})")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    return elemwise(_ravel_block, *parts, dtype=np.intp,
                    kwargs={"dims": dims, "mode": mode, "order": order},
                    name="ravel_multi_index")


def _ravel_block(*coords: np.ndarray, dims: tuple[int, ...], mode: Any,
                 order: str) -> np.ndarray:
    coords = np.broadcast_arrays(*coords)
    return np.ravel_multi_index(tuple(coords), dims, mode=mode, order=order)


def unravel_index(indices: Any, shape: Any, order: str = "C") -> tuple[Array, ...]:
    """``numpy.unravel_index`` block by block: one integer array per dimension of
    ``shape``, the coordinates of the flat ``indices``; an index out of range fails when
    its block is computed.

    >>> import numpy as np, tilegraph as tg
    >>> rows, cols = tg.unravel_index(tg.from_numpy(np.array([3, 4, 9]), chunks=2), (3, 4))
    >>> rows.compute(), cols.compute()
    (array([0, 1, 2]), array([3, 0, 1]))
    """
    x = indices if isinstance(indices, Array) else asarray(indices)
    if x.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices have dtype {x.dtype}; they must be "
                        "integers")
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: order must be 'C' or 'F', got {order!r}")
    return tuple(elemwise(_unravel_block, x, dtype=np.intp,
                          kwargs={"shape": shape, "order": order, "axis": i},
                          name="unravel_index") for i in range(len(shape)))


def _unravel_block(block: np.ndarray, shape: tuple[int, ...], order: str,
                   axis: int) -> np.ndarray:
    return np.unravel_index(block, shape, order=order)[axis]


def ufunc_outer(ufunc: np.ufunc, a: Any, b: Any, **kwargs: Any) -> Array:
    """``ufunc.outer(a, b)`` (the ``__array_ufunc__`` ``outer`` path): ``ufunc`` on every
    pair of an element of ``a`` and one of ``b``, shaped ``a.shape + b.shape``; lazily, as
    ``a`` with ``b.ndim`` new trailing axes broadcast against ``b``, block by block."""
    if ufunc.nin != 2:
        raise ValueError(f"{ufunc.__name__}.outer: outer product only of a ufunc of two "
                         f"inputs ({ufunc.__name__} takes {ufunc.nin})")
    if ufunc.signature is not None:
        raise TypeError(f"{ufunc.__name__}.outer: a generalized ufunc has no outer method "
                        "(in NumPy too)")
    a = a if isinstance(a, Array) else asarray(a, chunks=-1)
    b = b if isinstance(b, Array) else asarray(b, chunks=-1)
    expanded = a[(Ellipsis, *(None,) * b.ndim)] if b.ndim else a
    return apply_ufunc(ufunc, expanded, b, **kwargs)
