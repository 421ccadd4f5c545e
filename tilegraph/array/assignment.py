"""Item assignment: ``x[index] = value`` on a lazy Array.

An Array is a plan, so assignment does not write into a buffer: it builds a new plan for
the whole array and rebinds ``x`` to it (``x.collection``). Arrays built from ``x`` before the
assignment keep the plan they were built from, so they keep the old values, as if NumPy had
copied ``x`` before writing into it. Only the blocks that the selected region touches get a
new task (a copy of the old block with the region written into it); every other block of
the new plan is the old block itself, reused without a copy.

The index may be basic (ints, slices with any step, ``None``, ``...``), carry one integer
array (a list, a NumPy array or an Array) or one 1-d boolean array along one axis, carry
several integer arrays (and ints) on the leading axes with the other axes whole (points,
broadcast together as NumPy does: ``x[i, i] = 1``), be one 0-d integer Array with whole
axes around it (read when the plan runs), or be a boolean mask (NumPy or Array) over the
leading axes. The value is a scalar, a NumPy array
or an Array that broadcasts to the selected region, cast to ``x``'s dtype as NumPy casts
it (NumPy converts scalars and NumPy arrays at assignment time, so what NumPy refuses is
refused then).

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.zeros(6, dtype=int), chunks=4)
>>> y = x + 1
>>> x[1::2] = 7
>>> x[x > 5] = np.array([8, 9, 10])
>>> x.compute(), y.compute()
(array([ 0,  8,  0,  9,  0, 10]), array([1, 1, 1, 1, 1, 1]))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks
from tilegraph.algebra.demand import BlockRule, Demand, register_block_rule
from tilegraph.array.chunks import offsets
from tilegraph.array.core import Array, tokenize
from tilegraph.graph.taskgraph import Dep, Lit


def _assign_block(block: np.ndarray, local: tuple, value: Any) -> np.ndarray:
    """A copy of ``block`` with ``value`` written at ``local`` (the old block is shared by
    other plans, so it is never written into)."""
    out = np.array(block, copy=True)
    out[local] = value
    return out


def _mask_block(block: np.ndarray, mask: np.ndarray, value: Any) -> np.ndarray:
    """``block`` with ``value`` where ``mask`` is true (the block itself when it is not)."""
    if not mask.any():
        return block
    out = np.array(block, copy=True)
    out[mask] = value
    return out


def _token_value(v: Any) -> Any:
    from tilegraph.array.indexing import digest

    if isinstance(v, np.ndarray):
        return digest(v)
    if isinstance(v, (tuple, list)):
        return tuple(_token_value(p) for p in v)
    return v


def _convert(x: Array, value: Any) -> Any:
    """The value in ``x``'s dtype: an Array lazily (NumPy's unsafe cast, as NumPy's
    assignment of an array does), anything else now, by NumPy itself, so the rules (and the
    errors) are NumPy's; the result is a private copy (later changes to ``value`` do not
    reach ``x``)."""
    if not isinstance(value, (Array, np.ndarray)) and hasattr(type(value), "__dask_graph__"):
        from tilegraph.array.core import asarray

        value = asarray(value)  # a dask array joins the plan lazily
    if isinstance(value, Array):
        if value.is_sparse:
            raise TypeError(f"x[...] = value: a sparse value (shape {value.shape}) cannot be "
                            "assigned into a dense array; use value.todense()")
        return value if value.dtype == x.dtype else value.astype(x.dtype)
    shape = np.shape(value)
    out = np.empty(shape, dtype=x.dtype)
    out[...] = value
    return out


def _fit(vshape: tuple[int, ...], region: tuple[int, ...]) -> tuple[int, ...]:
    """``vshape`` without the leading length-1 axes beyond the region's rank (NumPy drops
    them); a ValueError naming both shapes when it does not broadcast to the region."""
    shape = tuple(vshape)
    while len(shape) > len(region) and shape[0] == 1:
        shape = shape[1:]
    ok = len(shape) <= len(region) and all(
        v in (1, r) for v, r in zip(shape[::-1], region[::-1], strict=False))
    if not ok:
        raise ValueError(f"could not broadcast input array from shape {tuple(vshape)} into "
                         f"shape {region} (the selected region of the array)")
    return shape


def _reshape(v: Any, shape: tuple[int, ...]) -> Any:
    return v.reshape(shape) if v.shape != shape else v


def _broadcast(v: Any, shape: tuple[int, ...]) -> Any:
    if v.shape == shape:
        return v
    if isinstance(v, Array):
        from tilegraph.array.scans import broadcast_to

        return broadcast_to(v, shape)
    return np.broadcast_to(v, shape)


def assign(x: Array, index: Any, value: Any) -> Array:
    """A new Array equal to ``x`` with ``value`` written at ``index`` (``x`` itself is left
    as it is); :meth:`Array.__setitem__` rebinds ``x`` to it. See the module docstring."""
    from tilegraph.array.indexing import is_advanced, lazy_scalars

    if x.is_sparse:
        raise TypeError(f"x[...] = value: item assignment into a sparse array (shape "
                        f"{x.shape}) is not supported; use x.todense() first")
    items = index if isinstance(index, tuple) else (index,)
    dynamic = _dynamic_axis(x, items)
    if dynamic is not None:
        return _assign_dynamic(x, items[dynamic[0]], dynamic[1], value)
    items = lazy_scalars(items)
    # a 0-d boolean array (a lazy one is computed now) acts as a boolean scalar
    items = tuple(bool(np.asarray(i.compute() if isinstance(i, Array) else i))
                  if isinstance(i, (Array, np.ndarray)) and i.ndim == 0 and i.dtype.kind == "b"
                  else i for i in items)
    if any(isinstance(i, (bool, np.bool_)) for i in items):
        # a boolean scalar: True adds a length-one axis to the region, False selects nothing
        if any(isinstance(i, (bool, np.bool_)) and not i for i in items):
            return _alias(x)
        items = tuple(None if isinstance(i, (bool, np.bool_)) else i for i in items)
    adv = [k for k, i in enumerate(items) if is_advanced(i)]
    mask = _mask_of(items, adv)
    if mask is not None:
        return _assign_mask(x, mask, value)
    return _assign_region(x, items, adv, value)


def _dynamic_axis(x: Array, items: tuple) -> tuple[int, int] | None:
    """``(position in the index, axis of x)`` when the index is one 0-d integer Array with
    only whole axes (``:`` or ``...``) around it, else None."""
    from tilegraph.array.indexing import is_lazy_int

    lazy = [k for k, i in enumerate(items) if is_lazy_int(i)]
    if len(lazy) != 1:
        return None
    k = lazy[0]
    others = [i for j, i in enumerate(items) if j != k]
    if not all(i is Ellipsis or (isinstance(i, slice) and i == slice(None)) for i in others):
        return None
    if sum(1 for i in others if i is Ellipsis) > 1:
        return None
    # (``is``: ``Ellipsis in items`` would compare the Array with ``==``, a computation)
    has_ellipsis = any(i is Ellipsis for i in items)
    axis = x.ndim - (len(items) - k) if any(i is Ellipsis for i in items[:k]) else k
    if not 0 <= axis < x.ndim or len(items) - has_ellipsis > x.ndim:
        return None
    return k, axis


def _put_dynamic(block: np.ndarray, offset: int, total: int, axis: int, i: Any,
                 value: Any) -> np.ndarray:
    """``block`` (starting at ``offset`` along ``axis``) with ``value`` written at index
    ``i`` of the whole axis when the block holds it (a copy); the block itself otherwise."""
    k = int(i)
    if not -total <= k < total:
        raise IndexError(f"index {k} is out of bounds for axis {axis} with size {total}")
    if k < 0:
        k += total
    if not offset <= k < offset + block.shape[axis]:
        return block
    out = np.array(block, copy=True)
    out[(slice(None),) * axis + (k - offset,)] = value
    return out


def _assign_dynamic(x: Array, i: Array, axis: int, value: Any) -> Array:
    """``x[..., i, ...] = value`` with ``i`` a 0-d integer Array read when the plan runs
    (so the plan does not depend on it: a loop-carried index works in a ``while_loop``
    body): every block along ``axis`` writes the value if it holds index ``i``, and is
    passed on unchanged otherwise."""
    region = (*x.shape[:axis], *x.shape[axis + 1:])
    v = _convert(x, value)
    vshape = _fit(tuple(v.shape), region)
    if x.size == 0:
        raise IndexError(f"index into an empty axis {axis} (shape {x.shape})")
    scalar = math.prod(vshape) == 1
    if scalar:
        v = _reshape(v, ())
    else:
        v = _broadcast(_reshape(v, vshape), region)
        if isinstance(v, Array):
            v = v.rechunk((*x.chunks[:axis], *x.chunks[axis + 1:]))
    offs = offsets(x.chunks[axis])
    rest = [offsets(c) for c in (*x.chunks[:axis], *x.chunks[axis + 1:])]
    token = tokenize("setitem-dynamic", x, i, axis,
                     v if isinstance(v, Array) else _token_value(v))
    ikey = i.collection.key(())
    tasks = {}
    for coord in np.ndindex(*x.numblocks):
        other = coord[:axis] + coord[axis + 1:]
        if isinstance(v, Array):
            val: Any = v.collection.key(other)
        elif scalar:
            val = Lit(v)
        else:
            sel = tuple(slice(o[c], o[c + 1]) for o, c in zip(rest, other, strict=True))
            val = Lit(np.array(v[sel]))
        tasks[coord] = (Lit(offs[coord[axis]]), Lit(x.shape[axis]), Lit(axis), ikey, val)
    values = [i] + ([v] if isinstance(v, Array) else [])
    return _rebuilt(x, f"setitem-{token}", tasks, values, _put_dynamic)


def _mask_of(items: tuple, adv: list[int]) -> Any:
    """The boolean mask when the index is one (``x[mask]``, ``x[mask, ...]``), else None."""
    if len(adv) != 1 or adv[0] != 0:
        return None
    m = items[0]
    if isinstance(m, (bool, np.bool_)):
        return None
    if isinstance(m, Array):
        if m.dtype.kind != "b":
            return None
    else:
        m = np.asarray(m)
        if m.dtype.kind != "b":
            return None
    if m.ndim == 0:
        return None
    rest = items[1:]
    if rest and rest != (Ellipsis,):
        return None  # with other indices: a 1-d mask is an integer array (its nonzero)
    return m


# -- basic indices and one integer array ---------------------------------------------------------


def _assign_region(x: Array, items: tuple, adv: list[int], value: Any) -> Array:
    from tilegraph.array.indexing import expand_index

    if adv:
        entries = expand_index(items, x.ndim, x.shape)
        n_arrays = sum(1 for e in entries if e[0] == "array")
        if len(adv) > 1 or n_arrays > 1:
            return _assign_leading_points(x, entries, value)
    else:
        entries = _basic_entries(x, items)
    adv_axis, flat_idx, out_dims = _region_dims(x, items, entries)
    region = tuple(d[-1] for d in out_dims)
    v = _convert(x, value)
    vshape = _fit(tuple(v.shape), region)
    if math.prod(region) == 0:
        return _alias(x)
    # the value laid out along x's axes: ints as length 1, the integer array flattened
    aligned = tuple(1 if e[0] == "int" else
                    flat_idx.size if e[0] == "array" else
                    len(range(*e[2].indices(x.shape[e[1]]))) for e in entries if e[0] != "none")
    scalar = math.prod(vshape) == 1
    if scalar:
        v = _reshape(v, ())
    else:
        v = _broadcast(_reshape(v, vshape), region)
        keep = [k for k, d in enumerate(out_dims) if d[0] != "none"]
        v = _reshape(v, tuple(region[k] for k in keep))
        dims = [out_dims[k] for k in keep]
        order = sorted(range(len(dims)), key=lambda k: (
            dims[k][1] if dims[k][0] == "slice" else adv_axis, k))
        if order != list(range(len(order))):
            v = v.transpose(order)
        v = _reshape(v, aligned)
    plans = _region_pieces(x, entries, flat_idx)
    lazy = isinstance(v, Array) and not scalar
    if lazy:
        if adv_axis >= 0:  # the value's elements grouped by the block they go to
            from tilegraph.array.indexing import take

            v = take(v, np.concatenate([pc[2] for pc in plans[adv_axis]]), axis=adv_axis)
        v = v.rechunk(tuple(tuple(pc[3] for pc in plan) for plan in plans))
    token = tokenize("setitem", x, tuple(_token_value(e) for e in entries),
                     v if isinstance(v, Array) else _token_value(v))
    label = f"setitem-{token}"
    tasks = {}
    for pick in np.ndindex(*(len(plan) for plan in plans)):
        parts = [plan[k] for plan, k in zip(plans, pick, strict=True)]
        coord = tuple(pc[0] for pc in parts)
        local = tuple(pc[1] for pc in parts)
        if isinstance(v, Array):
            tasks[coord] = (Lit(local), v.collection.key(pick if lazy else ()))
        else:
            vpiece = v if scalar else v[tuple(pc[2] for pc in parts)]
            tasks[coord] = (Lit(local), Lit(np.array(vpiece)))
    return _rebuilt(x, label, tasks, [v] if isinstance(v, Array) else [])


def _basic_entries(x: Array, items: tuple) -> list[tuple]:
    """A basic index (ints, slices, None) as entries ``("none",)``, ``("slice", axis,
    slice)`` or ``("int", axis, i)`` (an int out of bounds is an IndexError)."""
    from tilegraph.array.slicing import normalize_index

    entries: list[tuple] = []
    norm = normalize_index(items, x.shape)
    axis = 0
    for item in norm:
        if item is None:
            entries.append(("none",))
            continue
        if isinstance(item, slice):
            entries.append(("slice", axis, item))
        else:
            length = x.shape[axis]
            if not -length <= item < length:
                raise IndexError(f"index {item} is out of bounds for axis {axis} with "
                                 f"size {length} (shape {x.shape})")
            entries.append(("int", axis, item))
        axis += 1
    return entries


def _region_dims(x: Array, items: tuple, entries: list[tuple]
                 ) -> tuple[int, np.ndarray, list[tuple]]:
    """The region ``x[index]`` would be: the axis of x the integer array indexes (-1:
    none) and its indices made non-negative and flat, and per region axis ``("none", 1)``,
    ``("slice", axis, n)`` or ``("adv", k, n)`` (the length last), in NumPy's order."""
    from tilegraph.array.indexing import advanced_adjacent

    idx_shape: tuple[int, ...] = ()
    adv_axis = -1
    flat_idx = np.arange(0)
    for e in entries:
        if e[0] == "array":
            adv_axis = e[1]
            length = x.shape[adv_axis]
            vals = np.asarray(e[2], dtype=np.int64)
            idx_shape = vals.shape
            flat_idx = np.where(vals < 0, vals + length, vals).reshape(-1)
    out_dims: list[tuple] = []  # per region axis: ("none",) | ("slice", axis, n) | ("adv", k)
    for e in entries:
        if e[0] == "none":
            out_dims.append(("none", 1))
        elif e[0] == "slice":
            out_dims.append(("slice", e[1], len(range(*e[2].indices(x.shape[e[1]])))))
    if adv_axis >= 0:
        p = 0
        if advanced_adjacent(items):
            first = next(k for k, e in enumerate(entries) if e[0] in ("int", "array"))
            p = sum(1 for e in entries[:first] if e[0] in ("none", "slice"))
        out_dims[p:p] = [("adv", k, n) for k, n in enumerate(idx_shape)]
    return adv_axis, flat_idx, out_dims


def _region_pieces(x: Array, entries: list[tuple], flat_idx: np.ndarray) -> list[list[tuple]]:
    """Per axis of x the region touches: its pieces ``(block, local index, value index,
    length)``."""
    from tilegraph.array.slicing import slice_pieces

    plans: list[list[tuple]] = []
    for e in entries:
        if e[0] == "none":
            continue
        ax = e[1]
        offs = offsets(x.chunks[ax])
        if e[0] == "int":
            i = e[2] + x.shape[ax] if e[2] < 0 else e[2]
            b = int(np.searchsorted(offs, i, side="right") - 1)
            plans.append([(b, slice(i - offs[b], i - offs[b] + 1), slice(0, 1), 1)])
        elif e[0] == "slice":
            pieces, start = [], 0
            for b, sl, n in slice_pieces(x.chunks[ax], e[2], x.shape[ax]):
                pieces.append((b, sl, slice(start, start + n), n))
                start += n
            plans.append(pieces)
        else:
            owner = np.searchsorted(np.asarray(offs), flat_idx, side="right") - 1
            pieces = []
            for b in np.unique(owner):
                pos = np.flatnonzero(owner == b)
                pieces.append((int(b), flat_idx[pos] - offs[b], pos, pos.size))
            plans.append(pieces)
    return plans


def _rebuilt(x: Array, label: str, tasks: dict, values: list[Array],
             func: Any = _assign_block) -> Array:
    """``x``'s blocks with the blocks in ``tasks`` replaced by ``func(old block, *args)``
    (``tasks``: coord -> args, each a :class:`Lit` or the key of a block of one of
    ``values``); every other block is ``x``'s own, reused as it is."""
    keys = x.collection.keys.copy()
    for coord in tasks:
        keys[coord] = (label, *coord)
    xkey = x.collection.key
    itemsize = x.itemsize
    chunks = x.chunks

    def emit(builder: Any, coords: Any = None) -> None:
        todo = tasks.items() if coords is None else [(c, tasks[c]) for c in coords
                                                     if c in tasks]
        for coord, parts in todo:
            nb = itemsize * math.prod(chunks[a][i] for a, i in enumerate(coord))
            deps: list[Any] = [xkey(coord)]
            args: list[Any] = [Dep(0)]
            for val in parts:
                if isinstance(val, Lit):
                    args.append(val)
                elif val in deps:
                    args.append(Dep(deps.index(val)))
                else:
                    deps.append(val)
                    args.append(Dep(len(deps) - 1))
            builder.add((label, *coord), func, deps=deps, args=tuple(args),
                        kind="elementwise", name="setitem", nbytes=nb, coords=coord)

    deps = {x.collection.name: x.collection}
    for a in values:
        deps.setdefault(a.collection.name, a.collection)
    blocks = Blocks(label, x.collection.grid, list(deps.values()), emit, keys=keys,
                    ntasks=len(tasks), op="rebuilt", spec=(x.collection, tasks))
    return Array(blocks, x.shape, x.chunks, x.dtype)


def _rebuilt_needs(coll: Blocks, coords: Any, demand: Demand) -> bool:
    """The blocks some blocks of a :func:`_rebuilt` array read: a replaced block reads
    the old block and its value's blocks, any other block is the old one."""
    if coords is None:
        for d in coll.deps:
            demand.every(d)
        return True
    old, tasks = coll.spec
    keys = []
    for c in coords:
        keys.append(old.key(c))
        keys.extend(v for v in tasks.get(c, ()) if not isinstance(v, Lit))
    return demand.keys(keys)


register_block_rule("rebuilt", BlockRule(
    _rebuilt_needs, lambda coll, coords: sum(1 for c in coords if c in coll.spec[1])))


def _alias(x: Array) -> Array:
    return Array(x.collection, x.shape, x.chunks, x.dtype)


# -- boolean masks -------------------------------------------------------------------------------


def _assign_mask(x: Array, mask: Any, value: Any) -> Array:
    k = mask.ndim
    if mask.shape != x.shape[:k]:
        raise IndexError(f"boolean index of shape {mask.shape} does not match the indexed "
                         f"array of shape {x.shape} (its leading axes {x.shape[:k]})")
    rest = x.shape[k:]
    v = _convert(x, value)
    try:  # one value for every selected row (a scalar, or broadcast along the rest axes)
        vshape = _fit(tuple(v.shape), (1, *rest))
    except ValueError:
        return _assign_points(x, mask, v)
    if x.size == 0:
        return _alias(x)
    v = _reshape(v, vshape)
    if math.prod(vshape) == 1:
        v = _reshape(v, ())
    else:
        v = _reshape(_broadcast(v, (1, *rest)), rest)
        if isinstance(v, Array):
            v = v.rechunk(x.chunks[k:])
    m = mask
    if isinstance(m, Array) and m.chunks != x.chunks[:k]:
        m = m.rechunk(x.chunks[:k])
    lead_offs = [offsets(c) for c in x.chunks[:k]]
    rest_offs = [offsets(c) for c in x.chunks[k:]]
    token = tokenize("setitem-mask", x, m if isinstance(m, Array) else _token_value(m),
                     v if isinstance(v, Array) else _token_value(v))
    tasks = {}
    for coord in np.ndindex(*x.numblocks):
        if isinstance(m, Array):
            mval: Any = m.collection.key(coord[:k])
        else:
            lead = tuple(slice(o[i], o[i + 1]) for o, i in zip(lead_offs, coord[:k],
                                                                strict=True))
            mblock = m[lead]
            if not mblock.any():
                continue  # the block is untouched: x's own block is reused
            mval = Lit(np.ascontiguousarray(mblock))
        if isinstance(v, Array):
            vval: Any = v.collection.key(coord[k:])
        elif v.ndim == 0:
            vval = Lit(v)
        else:
            vsel = tuple(slice(o[i], o[i + 1]) for o, i in zip(rest_offs, coord[k:],
                                                             strict=True))
            vval = Lit(np.array(v[vsel]))
        tasks[coord] = (mval, vval)
    values = [a for a in (m, v) if isinstance(a, Array)]
    return _rebuilt(x, f"setitem-{token}", tasks, values, _mask_block)


def _assign_points(x: Array, mask: Any, v: Any) -> Array:
    """``x[mask] = values`` with one value per true element of the mask (in row-major
    order): the mask is known first (phase one: computed now if it is lazy), then each block
    holding true elements gets its values, gathered from the value by position."""
    m = np.asarray(mask.compute()) if isinstance(mask, Array) else np.asarray(mask)
    k = m.ndim
    n = int(np.count_nonzero(m))
    rest = x.shape[k:]
    try:
        vshape = _fit(tuple(v.shape), (n, *rest))
    except ValueError:
        raise ValueError(f"boolean mask assignment cannot assign a value of shape "
                         f"{tuple(v.shape)} to the {n} elements where the mask (shape "
                         f"{m.shape}) is true (region shape {(n, *rest)})") from None
    if n == 0 or x.size == 0:
        return _alias(x)
    v = _broadcast(_reshape(v, vshape), (n, *rest))
    return _scatter(x, np.nonzero(m), v, ("mask", _token_value(m)))


def _assign_leading_points(x: Array, entries: list[tuple], value: Any) -> Array:
    """``x[i, j, ...] = value`` with several integer arrays (and ints) on the leading axes,
    the other axes whole: the index arrays broadcast together name points (NumPy's rule; a
    point named twice keeps the last value), the region is ``(*broadcast shape, *rest)``,
    and each block holding points gets its values."""
    lead = 0
    while lead < len(entries) and entries[lead][0] in ("int", "array"):
        lead += 1
    rest_entries = entries[lead:]
    if any(e[0] != "slice" or e[2] != slice(None) for e in rest_entries) or \
            [e[1] for e in entries[:lead]] != list(range(lead)):
        raise IndexError(
            "x[...] = value with several integer arrays is supported when they (and any "
            "ints among them) index the leading axes and every other axis is whole, e.g. "
            "x[i, j] = v or x[i, j, :] = v; assign in two steps otherwise")
    arrays = []
    for e in entries[:lead]:
        vals = np.asarray(e[2], dtype=np.int64)
        arrays.append(np.where(vals < 0, vals + x.shape[e[1]], vals))
    try:
        bcast = np.broadcast_arrays(*arrays)
    except ValueError:
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {' '.join(str(a.shape) for a in arrays)}") from None
    idx_shape = bcast[0].shape
    rest = x.shape[lead:]
    region = (*idx_shape, *rest)
    v = _convert(x, value)
    vshape = _fit(tuple(v.shape), region)
    n = math.prod(idx_shape)
    if n == 0 or x.size == 0:
        return _alias(x)
    if math.prod(vshape) == 1 and not isinstance(v, Array):
        v = _reshape(v, ())   # one value for every point: nothing is broadcast
    else:
        v = _reshape(_broadcast(_reshape(v, vshape), region), (n, *rest))
    points = tuple(a.reshape(-1) for a in bcast)
    return _scatter(x, points, v, ("points", tuple(_token_value(p) for p in points)))


def _scatter(x: Array, points: tuple[np.ndarray, ...], v: Any, what: tuple) -> Array:
    """``x`` with ``v[p]`` (shape ``(n, *rest)``, or one 0-d value for all) written at
    point ``p`` of the leading ``len(points)`` axes (``points``: one non-negative coordinate
    array per axis, ``n`` long), block by block; blocks without points are reused."""
    k = len(points)
    owners = []
    for ax, pt in enumerate(points):
        offs = np.asarray(offsets(x.chunks[ax]))
        owners.append(np.searchsorted(offs, pt, side="right") - 1)
    block_id = np.ravel_multi_index(tuple(owners), x.numblocks[:k])
    order = np.argsort(block_id, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(block_id[order])) + 1)
    lead_offs = [offsets(c) for c in x.chunks[:k]]
    rest_offs = [offsets(c) for c in x.chunks[k:]]
    if isinstance(v, Array):
        from tilegraph.array.indexing import take

        v = take(v, order, axis=0).rechunk((tuple(g.size for g in groups), *x.chunks[k:]))
    token = tokenize("setitem-points", x, what,
                     v if isinstance(v, Array) else _token_value(v))
    tasks = {}
    for gi, g in enumerate(groups):
        lead = tuple(int(o[g[0]]) for o in owners)
        local = tuple(pt[g] - lo[b] for pt, lo, b in zip(points, lead_offs, lead, strict=True))
        for rc in np.ndindex(*x.numblocks[k:]):
            sel = tuple(slice(o[i], o[i + 1]) for o, i in zip(rest_offs, rc, strict=True))
            if isinstance(v, Array):
                val: Any = v.collection.key((gi, *rc))
            elif v.ndim == 0:
                val = Lit(v)
            else:
                val = Lit(np.array(v[(g, *sel)]))
            tasks[(*lead, *rc)] = (Lit(local), val)
    return _rebuilt(x, f"setitem-{token}", tasks, [v] if isinstance(v, Array) else [])
