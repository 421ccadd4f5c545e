"""``blockwise``: a function applied to blocks named by index letters, as ``dask.array.blockwise``.

Each array argument is followed by its index (a string such as ``"ij"``, or a tuple);
``None`` instead of an index passes the argument as it is. The output has one block per
combination of the blocks of the indices in ``out_ind``; an index of the inputs that is not
in ``out_ind`` is *contracted*: the function receives, for that argument, the list of all
its blocks along it (nested lists for several), or their concatenation with
``concatenate=True``.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(12.0).reshape(3, 4), chunks=2)
>>> y = tg.from_numpy(np.arange(4.0), chunks=2)
>>> tg.blockwise(np.add, "ij", x, "ij", y, "j", dtype=float).compute()[1]
array([ 4.,  6.,  8., 10.])
>>> tg.blockwise(np.dot, "ik", x, "ij", x.T, "jk", concatenate=True, dtype=float).shape
(3, 3)

Arrays sharing an index are aligned: blocks that differ are rechunked to their common
refinement (``align_arrays=False``: an error instead); an axis of length 1 in one block
is broadcast against the others. ``new_axes={"k": 3}`` adds an output index of that
length (or block sizes) that no input has; ``adjust_chunks={"i": f}`` gives the output's
block sizes along an index when ``func`` changes them (a function of each input block
size, a number for every block, or the block sizes). ``dtype`` is found by calling ``func``
on one-element blocks when not given.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import apply_blocks
from tilegraph.array.chunks import common_refinement
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.graph.taskgraph import Call, Dep, funcname

__all__ = ["blockwise", "reshape_blockwise"]


def _index(ind: Any, where: str) -> tuple[Hashable, ...]:
    if isinstance(ind, str):
        return tuple(ind)
    if isinstance(ind, (tuple, list)):
        return tuple(ind)
    raise TypeError(f"blockwise: {where} must be a string or tuple of index names (or None "
                    f"for an argument passed as it is), got {ind!r}")


def _concat_nested(parts: Any, axes: tuple[int, ...]) -> np.ndarray:
    """Nested lists of blocks joined into one block: level ``k`` along ``axes[k]``."""
    if not axes:
        return parts
    inner = [_concat_nested(p, axes[1:]) for p in parts]
    return np.concatenate(inner, axis=axes[0])


def _tiny(arr: Array, ind: tuple, contracted: list, concatenate: bool) -> Any:
    block = np.ones((1,) * arr.ndim, dtype=arr.dtype)
    if concatenate:
        return block
    out: Any = block
    for _ in contracted:
        out = [out]
    return out


def blockwise(func: Callable, out_ind: Any, *args: Any, name: str | None = None,
              token: str | None = None, dtype: Any = None, adjust_chunks: dict | None = None,
              new_axes: dict | None = None, align_arrays: bool = True,
              concatenate: bool | None = None, meta: Any = None, **kwargs: Any) -> Array:
    """See the module docstring. ``kwargs`` are passed to ``func``; ``token`` names the
    output's tasks like ``name``; ``meta`` (dask's prototype of the output's type) gives
    the dtype when ``dtype`` is not given."""
    if not callable(func):
        raise TypeError(f"blockwise: {func!r} is not callable")
    if len(args) % 2:
        raise TypeError("blockwise: give the arguments in pairs (array, index), with None "
                        f"as the index of an argument passed as it is; got {len(args)} values")
    out_ind = _index(out_ind, "out_ind")
    if len(set(out_ind)) != len(out_ind):
        raise ValueError(f"blockwise: out_ind {out_ind!r} repeats an index")
    pairs = _argument_pairs(args)
    chunks_of = _index_blocks(pairs, out_ind, dict(new_axes or {}), align_arrays)
    aligned: list[tuple[Any, tuple | None]] = []
    for arr, ind in pairs:
        if ind is not None:
            want = tuple(chunks_of[i] if not (arr.shape[ax] == 1 and arr.numblocks[ax] == 1)
                         else arr.chunks[ax] for ax, i in enumerate(ind))
            if want != arr.chunks:
                arr = arr.rechunk(want)
        aligned.append((arr, ind))
    out_chunks = _adjusted_blocks([chunks_of[i] for i in out_ind], out_ind, adjust_chunks)
    nblocks = {i: len(c) for i, c in chunks_of.items()}
    call = functools.partial(func, **kwargs) if kwargs else func
    if dtype is None:
        dtype = getattr(meta, "dtype", None)
    if dtype is None:
        try:
            tiny = [value if ind is None else _tiny(
                value, ind, [i for i in ind if i not in out_ind], bool(concatenate))
                for value, ind in aligned]
            dtype = np.asarray(call(*tiny)).dtype
        except Exception as exc:
            raise TypeError(f"blockwise: the output dtype of {funcname(func)} could not be "
                            f"found by calling it on one-element blocks ({exc}); give "
                            "dtype=") from exc
    dtype = np.dtype(dtype)
    grid = tuple(len(c) for c in out_chunks)
    label = name or f"{token or funcname(func)}-" + tokenize(
        "blockwise", func, out_ind, *[a for a, _ in aligned], [i for _, i in aligned],
        kwargs, dtype, tuple(out_chunks), concatenate)
    task_of = _block_tasks(call, aligned, {i: k for k, i in enumerate(out_ind)}, nblocks,
                           concatenate)
    itemsize = dtype.itemsize
    colls = [a.collection for a, ind in aligned if ind is not None]
    blocks = apply_blocks(label, grid, colls, task_of, kind="map", name=funcname(func),
                          nbytes=lambda c: itemsize * math.prod(
                              out_chunks[k][b] for k, b in enumerate(c)))
    shape = tuple(sum(c) for c in out_chunks)
    return Array(blocks, shape, tuple(out_chunks), dtype)


def _argument_pairs(args: tuple) -> list[tuple[Any, tuple | None]]:
    """blockwise's arguments as (value, index) pairs: arrays with their checked index,
    other values with ``None``."""
    pairs: list[tuple[Any, tuple | None]] = []
    for k in range(0, len(args), 2):
        value, ind = args[k], args[k + 1]
        if ind is None:
            pairs.append((value, None))
            continue
        ind = _index(ind, f"the index of argument {k // 2}")
        arr = value if isinstance(value, Array) else asarray(value)
        if len(ind) != arr.ndim:
            raise ValueError(f"blockwise: argument {k // 2} has {arr.ndim} dimension(s) "
                             f"(shape {arr.shape}) but index {''.join(map(str, ind))!r} "
                             f"names {len(ind)}")
        if len(set(ind)) != len(ind):
            raise ValueError(f"blockwise: the index {ind!r} of argument {k // 2} repeats a "
                             "name (a diagonal is not supported)")
        pairs.append((arr, ind))
    return pairs


def _index_blocks(pairs: list[tuple[Any, tuple | None]], out_ind: tuple, new_axes: dict,
                  align_arrays: bool) -> dict[Hashable, tuple[int, ...]]:
    """The block sizes of every index: those of the arrays that carry it (their common
    refinement where they differ, with ``align_arrays``), of ``new_axes``, and one block of
    length 1 for an output index along which every input broadcasts."""
    sizes: dict[Hashable, list[tuple[int, ...]]] = {}
    for arr, ind in pairs:
        if ind is None:
            continue
        for ax, i in enumerate(ind):
            if arr.shape[ax] == 1 and arr.numblocks[ax] == 1:
                continue   # broadcast along this index
            sizes.setdefault(i, []).append(arr.chunks[ax])
    chunks_of: dict[Hashable, tuple[int, ...]] = {}
    for i, options in sizes.items():
        if len(set(options)) == 1:
            chunks_of[i] = options[0]
        elif not align_arrays:
            raise ValueError(f"blockwise: index {i!r} has different blocks {sorted(set(options))}"
                             " in different arguments (align_arrays=False)")
        else:
            if len({sum(c) for c in options}) > 1:
                raise ValueError(f"blockwise: index {i!r} has lengths "
                                 f"{sorted({sum(c) for c in options})} in different arguments")
            chunks_of[i] = common_refinement(*options)
    for i, size in new_axes.items():
        if i in chunks_of:
            raise ValueError(f"blockwise: new axis {i!r} is an index of an input")
        chunks_of[i] = (int(size),) if isinstance(size, (int, np.integer)) else \
            tuple(int(s) for s in size)
    for i in out_ind:
        if i not in chunks_of:
            # every input broadcasts along it: one block of length 1
            if not any(ind is not None and i in ind for _, ind in pairs):
                raise ValueError(f"blockwise: output index {i!r} is in no input; give its "
                                 "length with new_axes=")
            chunks_of[i] = (1,)
    return chunks_of


def _adjusted_blocks(out_chunks: list[tuple[int, ...]], out_ind: tuple,
                     adjust_chunks: dict | None) -> list[tuple[int, ...]]:
    """The output's block sizes with ``adjust_chunks`` applied (per output index: a
    function of each block size, one size for every block, or the block sizes)."""
    for i, how in (adjust_chunks or {}).items():
        if i not in out_ind:
            raise ValueError(f"blockwise: adjust_chunks names {i!r}, not an output index")
        k = out_ind.index(i)
        if callable(how):
            out_chunks[k] = tuple(int(how(c)) for c in out_chunks[k])
        elif isinstance(how, (int, np.integer)):
            out_chunks[k] = (int(how),) * len(out_chunks[k])
        else:
            how = tuple(int(c) for c in how)
            if len(how) != len(out_chunks[k]):
                raise ValueError(f"blockwise: adjust_chunks gives {len(how)} block sizes for "
                                 f"index {i!r}, which has {len(out_chunks[k])} blocks")
            out_chunks[k] = how
    return out_chunks


def _block_key(arr: Array, ind: tuple, fixed: dict) -> Any:
    """The key of ``arr``'s block at these index positions (an axis of one block, as one
    that is broadcast, is always at block 0)."""
    return arr.collection.key(tuple(0 if arr.numblocks[ax] == 1 else fixed[i]
                                    for ax, i in enumerate(ind)))


def _block_tasks(call: Callable, aligned: list[tuple[Any, tuple | None]],
                 where: dict[Hashable, int], nblocks: dict[Hashable, int],
                 concatenate: bool | None) -> Callable[[tuple], tuple[Callable, list, tuple]]:
    """The task of each output block of blockwise: ``call`` on, per argument, its block
    (or the nested lists of its blocks along the indices that are not in the output, joined
    with ``concatenate``), ``where`` the position of each output index."""

    def task_of(coord: tuple) -> tuple[Callable, list, tuple]:
        deps: list[Hashable] = []
        slot: dict[Hashable, int] = {}

        def dep(key: Hashable) -> Dep:
            if key not in slot:
                slot[key] = len(deps)
                deps.append(key)
            return Dep(slot[key])

        template = []
        for value, ind in aligned:
            if ind is None:
                template.append(value)
                continue
            fixed = {i: coord[where[i]] for i in ind if i in where}
            free = [i for i in ind if i not in where]

            def nest(level: int, fixed: dict, value: Array = value, ind: tuple = ind,
                     free: list = free) -> Any:
                if level == len(free):
                    return dep(_block_key(value, ind, fixed))
                i = free[level]
                n = 1 if value.numblocks[ind.index(i)] == 1 else nblocks[i]
                return [nest(level + 1, {**fixed, i: b}) for b in range(n)]

            part = nest(0, fixed)
            if concatenate and free:
                part = Call(_concat_nested, (part, tuple(ind.index(i) for i in free)))
            template.append(part)
        return call, deps, tuple(template)

    return task_of


def _axis_groups(long: tuple[int, ...], short: tuple[int, ...], what: str
                 ) -> list[list[int]]:
    """For each axis of ``short``, the consecutive axes of ``long`` whose lengths multiply
    to its length (axes of length 1 left over join the last group)."""
    groups: list[list[int]] = []
    i = 0
    for n in short:
        group = [i] if i < len(long) else []
        i += 1
        while group and math.prod(long[a] for a in group) != n and i < len(long):
            group.append(i)
            i += 1
        if not group or math.prod(long[a] for a in group) != n:
            raise ValueError(f"reshape_blockwise: {what}: the lengths {long} cannot be "
                             f"grouped into {short} (only consecutive axes are merged or "
                             "split)")
        groups.append(group)
    if any(long[a] != 1 for a in range(i, len(long))):
        raise ValueError(f"reshape_blockwise: {what}: the lengths {long} cannot be grouped "
                         f"into {short}")
    groups[-1].extend(range(i, len(long)))
    return groups


def reshape_blockwise(x: Any, shape: Any, chunks: Any = None) -> Array:
    """Every block reshaped on its own, as ``dask.array.reshape_blockwise``: no data moves
    between blocks, so the order of the elements differs from :func:`reshape` (xarray's
    ``polyfit`` folds the other dimensions together this way and unfolds them after).

    When the number of dimensions shrinks, consecutive axes are merged: the merged axis
    has one block per combination of the merged axes' blocks (the last axis fastest).
    When it grows, ``chunks`` (the block sizes of every output axis) says how each block
    is split: the input's blocks along an axis are the combinations of the output blocks
    of the axes it becomes (the last fastest), and an input cut otherwise is rechunked to
    them first.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(12).reshape(2, 6), chunks=(2, 3))
    >>> flat = tg.reshape_blockwise(x, (12,))
    >>> flat.chunks, flat.compute()
    (((6, 6),), array([ 0,  1,  2,  6,  7,  8,  3,  4,  5,  9, 10, 11]))
    >>> tg.reshape_blockwise(flat, (2, 6), chunks=((2,), (3, 3))).compute()
    array([[ 0,  1,  2,  3,  4,  5],
           [ 6,  7,  8,  9, 10, 11]])
    """
    from tilegraph.array.chunks import normalize_chunks, numblocks
    from tilegraph.array.manipulation import normalize_shape, reshape_block

    x = asarray(x)
    shape = normalize_shape(shape, x.size, x.shape)
    if len(shape) == x.ndim:
        if shape != x.shape:
            raise ValueError(f"reshape_blockwise: cannot reshape {x.shape} into {shape} "
                             "with as many dimensions; use reshape")
        return x if chunks is None or normalize_chunks(chunks, shape, x.dtype) == x.chunks \
            else x.rechunk(chunks)
    if len(shape) < x.ndim:
        if chunks is not None:
            raise ValueError("reshape_blockwise: chunks= is for adding dimensions; when "
                             "they merge, the blocks follow from the input's")
        groups = _axis_groups(x.shape, shape, "merging")
        out_chunks = tuple(tuple(math.prod(sizes) for sizes in itertools.product(
            *(x.chunks[a] for a in g))) for g in groups)

        def source(c: tuple[int, ...]) -> tuple[int, ...]:
            coord = [0] * x.ndim
            for g, j in zip(groups, c, strict=True):
                for a, k in zip(g, np.unravel_index(j, [x.numblocks[a] for a in g]),
                                strict=True):
                    coord[a] = int(k)
            return tuple(coord)
    else:
        if chunks is None:
            raise ValueError(f"reshape_blockwise: adding dimensions ({x.shape} into "
                             f"{shape}) needs chunks=, the block sizes of every output axis")
        out_chunks = normalize_chunks(chunks, shape, x.dtype)
        groups = _axis_groups(shape, x.shape, "splitting")
        # the input blocks that ``chunks`` splits: one per combination of the output
        # blocks of the axes an input axis becomes (a differently cut input is rechunked)
        need = tuple(tuple(math.prod(sizes) for sizes in itertools.product(
            *(out_chunks[a] for a in g))) for g in groups)
        if need != x.chunks:
            x = x.rechunk(need)

        def source(c: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(int(np.ravel_multi_index(tuple(c[a] for a in g),
                                                  [len(out_chunks[a]) for a in g]))
                         for g in groups)

    key = x.collection.key
    token = tokenize("reshape_blockwise", x, shape, out_chunks)
    itemsize = x.dtype.itemsize

    def task_of(c: tuple[int, ...]) -> tuple:
        block = tuple(out_chunks[a][k] for a, k in enumerate(c))
        return reshape_block, [key(source(c))], (Dep(0), block)

    blocks = apply_blocks(f"reshape-blockwise-{token}", numblocks(out_chunks),
                          [x.collection], task_of, kind="reshape", name="reshape_blockwise",
                          nbytes=lambda c: itemsize * math.prod(
                              out_chunks[a][k] for a, k in enumerate(c)))
    return Array(blocks, shape, out_chunks, x.dtype)
