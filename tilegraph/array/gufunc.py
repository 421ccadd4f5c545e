"""Generalized ufuncs on blocked arrays: :func:`apply_gufunc`, as ``dask.array.apply_gufunc``.

A signature such as ``"(m,n),(n)->(m)"`` names the *core dimensions* of each argument (the
last axes, unless ``axes``/``axis`` say otherwise); every other axis is a *loop dimension*.
The loop dimensions of all arguments broadcast as NumPy's do and their blocks are cut at the
union of their block boundaries; each core dimension must be one block (``allow_rechunk=True``
makes it one). ``func`` then runs once per block of the broadcast loop grid, on whole core
dimensions, through the same block-map operator as elementwise operations: one task per
output block, several outputs taken from one call.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(12.0).reshape(4, 3), chunks=(3, 3))
>>> apply_gufunc(np.vecdot, "(i),(i)->()", x, x).compute()
array([  5.,  50., 149., 302.])
>>> apply_gufunc(np.vecdot, "(i),(i)->()", x, x, axis=0, allow_rechunk=True).compute()
array([126., 166., 214.])
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.algebra.blocks import pick_part
from tilegraph.array.chunks import common_refinement, numblocks
from tilegraph.array.core import Array, asarray, from_numpy, tokenize
from tilegraph.graph.taskgraph import Dep, funcname

_DIM = r"\w+"
_CORE = rf"\((?:{_DIM}(?:,{_DIM})*,?)?\)"
_SIGNATURE = re.compile(rf"^(?:{_CORE}(?:,{_CORE})*)?->{_CORE}(?:,{_CORE})*,?$")

CoreDims = tuple[str, ...]


def parse_signature(signature: str) -> tuple[list[CoreDims], list[CoreDims], bool]:
    """Input and output core dimensions of a gufunc signature, and whether the function
    returns a tuple (several outputs, or one output written ``"...->(i),"``).

    >>> parse_signature("(m,n),(n)->(m)")
    ([('m', 'n'), ('n',)], [('m',)], False)
    >>> parse_signature("(i)->(),()")
    ([('i',)], [(), ()], True)
    """
    if not isinstance(signature, str):
        raise TypeError(f"apply_gufunc: the signature must be a string such as "
                        f"'(i),(i)->()', got {type(signature).__name__}")
    text = re.sub(r"\s+", "", signature)
    if not _SIGNATURE.match(text):
        raise ValueError(f"apply_gufunc: {signature!r} is not a gufunc signature (expected "
                         "e.g. '(i),(i)->()', '(m,n)->(n)' or '()->(k)': comma-separated "
                         "parenthesised dimension names, '->', the outputs' dimensions)")
    ins_text, outs_text = text.split("->")
    ins = [tuple(re.findall(_DIM, a)) for a in re.findall(_CORE, ins_text)]
    outs = [tuple(re.findall(_DIM, a)) for a in re.findall(_CORE, outs_text)]
    return ins, outs, len(outs) > 1 or outs_text.endswith(",")


def _entry(entry: Any, what: str) -> tuple[int, ...]:
    if isinstance(entry, (int, np.integer)) and not isinstance(entry, bool):
        return (int(entry),)
    if isinstance(entry, (tuple, list)) and all(
            isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in entry):
        return tuple(int(a) for a in entry)
    raise TypeError(f"apply_gufunc: {what} must be an int or a tuple of ints, got {entry!r}")


def normalize_axes(axes: Any, axis: Any, keepdims: bool, ins: list[CoreDims],
                   outs: list[CoreDims]) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Where each argument's core dimensions are (``axes``/``axis`` as in NumPy's gufunc
    keywords, possibly negative) and where each output's go; with ``keepdims`` every output
    keeps the (size 1) core axes of the inputs. Positions are not yet checked against the
    arguments' numbers of dimensions."""
    nin, nout = len(ins), len(outs)
    if axes is not None and axis is not None:
        raise ValueError("apply_gufunc: give axes= or axis=, not both")
    scalar_outputs = all(len(o) == 0 for o in outs)
    present = [cd for cd in ins if cd]
    if keepdims:
        if not scalar_outputs:
            raise ValueError("apply_gufunc: keepdims=True needs outputs without core "
                             f"dimensions, but the signature gives outputs {outs}")
        if not present or any(cd != present[0] for cd in ins):
            raise ValueError("apply_gufunc: keepdims=True needs every input to have the "
                             f"same core dimensions, but the signature gives {ins}")
        outs = [present[0]] * nout
    if axis is not None:
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
            raise TypeError(f"apply_gufunc: axis must be an int, got {axis!r}")
        if any(len(cd) != 1 for cd in present) or any(cd != present[0] for cd in present):
            raise ValueError("apply_gufunc: axis= needs a signature whose inputs have one "
                             f"(the same) core dimension or none, but it gives {ins}; use "
                             "axes= instead")
        if any(len(o) > 1 or (o and present and o != present[0]) for o in outs):
            raise ValueError("apply_gufunc: axis= needs outputs with the inputs' one core "
                             f"dimension or none, but the signature gives outputs {outs}")
        in_axes = [(int(axis),) if cd else () for cd in ins]
        out_axes = [(int(axis),) if o else () for o in outs]
        return in_axes, out_axes
    if axes is None:
        return ([tuple(range(-len(cd), 0)) for cd in ins],
                [tuple(range(-len(o), 0)) for o in outs])
    if not isinstance(axes, (list, tuple)):
        raise TypeError(f"apply_gufunc: axes must be a list with one entry per argument "
                        f"(and output), got {axes!r}")
    if len(axes) == nin + nout or (len(axes) == nin and (scalar_outputs or keepdims)):
        pass
    else:
        raise ValueError(f"apply_gufunc: axes has {len(axes)} entries, but the signature has "
                         f"{nin} inputs and {nout} outputs (give {nin + nout} entries, or "
                         f"{nin} when no output has core dimensions)")
    entries = [_entry(a, f"axes entry #{i}") for i, a in enumerate(axes)]
    in_axes = entries[:nin]
    for i, (ax, cd) in enumerate(zip(in_axes, ins, strict=True)):
        if len(ax) != len(cd):
            raise ValueError(f"apply_gufunc: axes entry {ax} of input #{i} gives {len(ax)} "
                             f"axes, but its core dimensions {cd} are {len(cd)}")
    if keepdims:
        if len(entries) > nin and any(e != in_axes[0] for e in entries[nin:]):
            raise ValueError("apply_gufunc: with keepdims=True the outputs' axes must be the "
                             f"inputs' ({in_axes[0]}), got {entries[nin:]}")
        return in_axes, [in_axes[0]] * nout
    out_axes = entries[nin:] or [() for _ in outs]
    for i, (ax, cd) in enumerate(zip(out_axes, outs, strict=True)):
        if len(ax) != len(cd):
            raise ValueError(f"apply_gufunc: axes entry {ax} of output #{i} gives {len(ax)} "
                             f"axes, but its core dimensions {cd} are {len(cd)}")
    return in_axes, out_axes


def _positions(ax: tuple[int, ...], ndim: int, what: str) -> tuple[int, ...]:
    out = []
    for a in ax:
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"apply_gufunc: axis {a} is out of bounds for "
                                          f"{what} ({ndim} dimensions)")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"apply_gufunc: axes {ax} of {what} repeat an axis")
    return tuple(out)


def _dtypes(output_dtypes: Any, meta: Any, nout: int, tuple_out: bool) -> list | None:
    if meta is not None and output_dtypes is not None:
        raise ValueError("apply_gufunc: give output_dtypes= or meta=, not both")
    if meta is not None:
        metas = list(meta) if isinstance(meta, (tuple, list)) else [meta]
        given = [getattr(m, "dtype", None) for m in metas]
        if any(g is None for g in given):
            raise TypeError(f"apply_gufunc: meta must be an array (or a tuple of arrays, "
                            f"one per output) with a dtype, got {meta!r}")
    elif output_dtypes is None:
        return None
    elif isinstance(output_dtypes, (tuple, list)):
        given = list(output_dtypes)
    else:
        given = [output_dtypes]
        if tuple_out:
            raise ValueError(f"apply_gufunc: the function has {nout} outputs; give "
                             f"output_dtypes as a list of {nout} dtypes")
    if len(given) != nout:
        raise ValueError(f"apply_gufunc: {len(given)} output dtypes given for a function of "
                         f"{nout} output{'s' if nout != 1 else ''}")
    try:
        return [np.dtype(d) for d in given]
    except TypeError as exc:
        raise TypeError(f"apply_gufunc: output dtypes {given!r}: {exc}") from None


def _infer_dtypes(func: Callable, args: Sequence[Array], kwargs: dict, nout: int,
                  tuple_out: bool) -> list[np.dtype]:
    dummies = [np.ones((1,) * a.ndim, dtype=a.dtype) for a in args]
    try:
        with np.errstate(all="ignore"):
            out = func(*dummies, **kwargs)
    except Exception as exc:
        raise ValueError(f"apply_gufunc: cannot infer the output dtypes of "
                         f"{funcname(func)} by calling it on one-element arrays ({exc!r}); "
                         "give output_dtypes=") from exc
    outs = tuple(out) if tuple_out and isinstance(out, (tuple, list)) else (out,)
    if len(outs) != nout:
        raise ValueError(f"apply_gufunc: {funcname(func)} returned {len(outs)} values for a "
                         f"signature of {nout} outputs")
    return [np.asarray(o).dtype for o in outs]


class _GufuncBlock:
    """The per-block call: ``func`` on the arguments' blocks, each result checked against
    the signature (loop shape of the broadcast blocks, core sizes) and cast to its dtype."""

    def __init__(self, func: Callable, signature: str, in_cores: list[int],
                 out_cores: list[tuple[int, ...]], dtypes: list[np.dtype], nloop: int,
                 tuple_out: bool, keep: int):
        self.func, self.signature = func, signature
        self.in_cores, self.out_cores, self.dtypes = in_cores, out_cores, dtypes
        self.nloop, self.tuple_out, self.keep = nloop, tuple_out, keep
        self.__name__ = funcname(func)

    def __call__(self, *blocks: np.ndarray, **kwargs: Any) -> Any:
        out = self.func(*blocks, **kwargs)
        nout = len(self.out_cores)
        if self.tuple_out:
            if not isinstance(out, (tuple, list)) or len(out) != nout:
                got = f"{len(out)} values" if isinstance(out, (tuple, list)) else \
                    type(out).__name__
                raise ValueError(f"apply_gufunc: {self.__name__} returned {got}, but the "
                                 f"signature {self.signature!r} has {nout} outputs")
            outs = list(out)
        else:
            outs = [out]
        loop = np.broadcast_shapes(*(b.shape[:b.ndim - n] for b, n in
                                     zip(blocks, self.in_cores, strict=True)))
        loop = (1,) * (self.nloop - len(loop)) + tuple(loop)
        results = []
        for k, (o, core, dt) in enumerate(zip(outs, self.out_cores, self.dtypes,
                                              strict=True)):
            o = np.asarray(o)
            if o.shape != loop + core:
                raise ValueError(
                    f"apply_gufunc: output #{k} of {self.__name__} has shape {o.shape} on a "
                    f"block whose loop shape is {loop}; the signature "
                    f"{self.signature!r} needs {loop + core} (loop shape + core sizes)")
            if o.dtype != dt:
                o = o.astype(dt)
            if self.keep:
                o = o.reshape(o.shape + (1,) * self.keep)
            results.append(o)
        return tuple(results) if self.tuple_out else results[0]


def apply_gufunc(func: Callable, signature: str, *args: Any, axes: Any = None,
                 axis: Any = None, keepdims: bool = False, output_dtypes: Any = None,
                 output_sizes: dict[str, int] | None = None, vectorize: bool | None = None,
                 allow_rechunk: bool = False, meta: Any = None, **kwargs: Any) -> Any:
    """``func``, a generalized ufunc of ``signature``, on blocked arrays, as
    ``dask.array.apply_gufunc``.

    ``func`` is called once per block of the broadcast loop dimensions, on blocks holding
    whole core dimensions, with ``kwargs``; it returns one array (or a tuple, one per
    output) of the blocks' broadcast loop shape followed by the output core sizes.

    - ``args``: arrays (tilegraph Arrays; NumPy arrays and scalars are wrapped), one per
      input of the signature. Their loop dimensions broadcast; blocks are cut at the union
      of their boundaries.
    - ``allow_rechunk``: a core dimension split into several blocks is made one block;
      without it, that is a ``ValueError`` naming the dimension.
    - ``output_sizes``: sizes of output core dimensions no input has (required for them).
    - ``output_dtypes`` (or ``meta``, arrays whose dtypes are taken): one dtype per output;
      inferred by calling ``func`` on one-element arrays when not given.
    - ``vectorize``: ``func`` is wrapped in ``np.vectorize(func, signature=...)`` (it then
      works on one loop element at a time).
    - ``axes``/``axis``/``keepdims``: NumPy's gufunc keywords: ``axes`` lists, per input
      (and output), the axes of its core dimensions; ``axis`` is the one axis of a signature
      whose inputs have one (the same) core dimension; ``keepdims`` keeps the reduced core
      axes of scalar outputs as size 1 axes.

    Returns one Array, or a tuple of Arrays for several outputs.

    >>> import numpy as np, tilegraph as tg
    >>> a = np.arange(8.0).reshape(2, 4)
    >>> x = tg.from_numpy(a, chunks=(1, 4))
    >>> mean, std = apply_gufunc(lambda b: (b.mean(-1), b.std(-1)), "(i)->(),()", x)
    >>> mean.compute()
    array([1.5, 5.5])
    >>> apply_gufunc(np.outer, "(i),(j)->(i,j)", x, x, vectorize=True).shape
    (2, 4, 4)
    """
    if not callable(func):
        raise TypeError(f"apply_gufunc: {func!r} is not callable")
    ins, outs, tuple_out = parse_signature(signature)
    nin, nout = len(ins), len(outs)
    if len(args) != nin:
        raise ValueError(f"apply_gufunc: signature {signature!r} takes {nin} argument"
                         f"{'s' if nin != 1 else ''}, {len(args)} given")
    if nin == 0:
        raise ValueError(f"apply_gufunc: signature {signature!r} has no inputs; a blocked "
                         "gufunc needs at least one array argument")
    output_sizes = dict(output_sizes or {})
    for d, n in output_sizes.items():
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"apply_gufunc: output_sizes[{d!r}] must be a non-negative "
                             f"int, got {n!r}")
    keepdims = bool(keepdims)
    in_axes, out_axes = normalize_axes(axes, axis, keepdims, ins, outs)
    arrays = _core_last(_as_arrays(args, ins, signature), in_axes)
    sizes = _core_sizes(arrays, ins, outs, output_sizes, signature)
    arrays, loops, loop_shape, loop_chunks = _loop_blocks(arrays, ins, in_axes, signature,
                                                          allow_rechunk)
    nloop = len(loop_shape)

    # dtypes and the per-block call
    func, dtypes = _block_function(func, signature, vectorize, output_dtypes, meta, arrays,
                                   kwargs, nout, tuple_out)
    out_cores = [tuple(sizes[d] for d in o) for o in outs]
    keep = len(next(cd for cd in ins if cd)) if keepdims else 0
    call = _GufuncBlock(func, signature, [len(cd) for cd in ins], out_cores, dtypes, nloop,
                        tuple_out, keep)

    unique, maps, template = _argument_maps(arrays, ins, loops, loop_shape)
    grid = numblocks(loop_chunks)
    op = funcname(call)
    token = tokenize("apply_gufunc", func, signature, *arrays, kwargs, dtypes, out_cores,
                     keep, out_axes)
    core_out = [c + (1,) * keep for c in out_cores]

    def nbytes(coord: tuple[int, ...]) -> int:
        loop = math.prod(loop_chunks[i][k] for i, k in enumerate(coord))
        return sum(loop * math.prod(c) * dt.itemsize for c, dt in
                   zip(core_out, dtypes, strict=True))

    direct = template == tuple(Dep(j) for j in range(len(unique)))
    parts = _map_blocks(f"{op}-{token}", call, [a.collection for a in unique.values()],
                        grid, maps, args=None if direct else template,
                        kwargs=kwargs or None, kind="map", name=op, nbytes=nbytes)
    results = [_output(parts, k, op, token, tuple_out, loop_shape, loop_chunks, core, dt,
                       out_axes[k])
               for k, (core, dt) in enumerate(zip(core_out, dtypes, strict=True))]
    return tuple(results) if tuple_out else results[0]


def _as_arrays(args: Sequence[Any], ins: list[CoreDims], signature: str) -> list[Array]:
    """The arguments as Arrays (NumPy arrays and scalars in one block, dask collections
    converted), each with at least as many dimensions as its core dimensions."""
    arrays = [a if isinstance(a, Array) else
              (asarray(a) if hasattr(type(a), "__dask_graph__") else
               from_numpy(np.asarray(a), chunks=-1)) for a in args]
    for i, (a, cd) in enumerate(zip(arrays, ins, strict=True)):
        if a.ndim < len(cd):
            raise ValueError(f"apply_gufunc: argument #{i} of shape {a.shape} has fewer "
                             f"dimensions than its core dimensions {cd} in {signature!r}")
    return arrays


def _core_last(arrays: list[Array], in_axes: list) -> list[Array]:
    """Each argument with its core dimensions (at ``in_axes``) moved last."""
    moved = []
    for i, (a, ax) in enumerate(zip(arrays, in_axes, strict=True)):
        pos = _positions(ax, a.ndim, f"argument #{i} of shape {a.shape}")
        order = tuple(d for d in range(a.ndim) if d not in pos) + pos
        moved.append(a.transpose(order) if order != tuple(range(a.ndim)) else a)
    return moved


def _core_sizes(arrays: list[Array], ins: list[CoreDims], outs: list[CoreDims],
                output_sizes: dict[str, int], signature: str) -> dict[str, int]:
    """The size of every core dimension: from the arguments (the same in each), and from
    ``output_sizes`` for those only outputs have."""
    sizes: dict[str, int] = {}
    for i, (a, cd) in enumerate(zip(arrays, ins, strict=True)):
        for d, n in zip(cd, a.shape[a.ndim - len(cd):], strict=True):
            if sizes.setdefault(d, n) != n:
                raise ValueError(f"apply_gufunc: core dimension {d!r} has size {sizes[d]} in "
                                 f"one argument and {n} in argument #{i} (shape {a.shape})")
    for d, n in output_sizes.items():
        if d in sizes and sizes[d] != n:
            raise ValueError(f"apply_gufunc: output_sizes gives {d!r} size {n}, but the "
                             f"inputs have it of size {sizes[d]}")
    for o in outs:
        for d in o:
            if d not in sizes and d not in output_sizes:
                raise ValueError(f"apply_gufunc: output core dimension {d!r} of "
                                 f"{signature!r} is in no input; give its size in "
                                 f"output_sizes={{{d!r}: n}}")
    sizes.update({d: int(n) for d, n in output_sizes.items()})
    return sizes


def _loop_blocks(arrays: list[Array], ins: list[CoreDims], in_axes: list, signature: str,
                 allow_rechunk: bool) -> tuple[list[Array], list, tuple, tuple]:
    """The arguments with their loop dimensions broadcast and cut at the union of their
    block boundaries, and their core dimensions one block each; with each argument's loop
    shape, the broadcast loop shape and its blocks."""
    loops = [a.shape[:a.ndim - len(cd)] for a, cd in zip(arrays, ins, strict=True)]
    try:
        loop_shape = tuple(np.broadcast_shapes(*loops))
    except ValueError:
        raise ValueError(f"apply_gufunc: the loop dimensions {', '.join(map(str, loops))} of "
                         f"the arguments (their shapes without the core dimensions of "
                         f"{signature!r}) cannot be broadcast together") from None
    nloop = len(loop_shape)
    loop_chunks = []
    for d in range(nloop):
        cs = [a.chunks[d - (nloop - len(lp))] for a, lp in zip(arrays, loops, strict=True)
              if d >= nloop - len(lp) and lp[d - (nloop - len(lp))] == loop_shape[d]]
        loop_chunks.append(common_refinement(*cs) if cs else (loop_shape[d],))
    aligned = []
    for i, (a, cd, lp) in enumerate(zip(arrays, ins, loops, strict=True)):
        off = nloop - len(lp)
        want = [loop_chunks[d + off] if lp[d] == loop_shape[d + off] else a.chunks[d]
                for d in range(len(lp))]
        for d, name in zip(range(len(lp), a.ndim), cd, strict=True):
            if len(a.chunks[d]) > 1 and not allow_rechunk:
                raise ValueError(
                    f"apply_gufunc: core dimension {name!r} of argument #{i} (axis "
                    f"{in_axes[i][cd.index(name)]}, blocks {a.chunks[d]}) is split into "
                    f"{len(a.chunks[d])} blocks; a core dimension must be one block: "
                    "rechunk it into one block or pass allow_rechunk=True")
            want.append((a.shape[d],))
        want_t = tuple(tuple(c) for c in want)
        aligned.append(a.rechunk(want_t) if want_t != a.chunks else a)
    return aligned, loops, loop_shape, tuple(loop_chunks)


def _block_function(func: Callable, signature: str, vectorize: bool | None,
                    output_dtypes: Any, meta: Any, arrays: list[Array], kwargs: dict,
                    nout: int, tuple_out: bool) -> tuple[Callable, list[np.dtype]]:
    """The function each block is given to (``np.vectorize``-d with ``vectorize``) and the
    dtypes of its outputs (given, or inferred from a call on one-element arrays)."""
    if vectorize:
        plain = func
        dtypes = _dtypes(output_dtypes, meta, nout, tuple_out)
        if dtypes is None:
            dtypes = _infer_dtypes(np.vectorize(plain, signature=signature), arrays, kwargs,
                                   nout, tuple_out)
        return np.vectorize(plain, signature=signature, otypes=dtypes), dtypes
    dtypes = _dtypes(output_dtypes, meta, nout, tuple_out)
    if dtypes is None:
        dtypes = _infer_dtypes(func, arrays, kwargs, nout, tuple_out)
    return func, dtypes


def _argument_maps(arrays: list[Array], ins: list[CoreDims], loops: list,
                   loop_shape: tuple) -> tuple[dict[str, Array], list, tuple]:
    """The distinct arguments (by name), the block coordinate map of each (None: the loop
    grid's own coordinate), and the ``Dep`` of each argument among the distinct ones."""
    nloop = len(loop_shape)
    maps = []
    unique: dict[str, Array] = {}
    order = []
    for a, cd, lp in zip(arrays, ins, loops, strict=True):
        off = nloop - len(lp)
        bcast = tuple(lp[d] != loop_shape[d + off] for d in range(len(lp)))
        ncore = len(cd)
        if a.name in unique:
            order.append(list(unique).index(a.name))
            continue
        unique[a.name] = a
        order.append(len(unique) - 1)
        if off == 0 and not any(bcast) and ncore == 0:
            maps.append(None)
        else:
            maps.append(_LoopIndex(off, bcast, ncore))
    return unique, maps, tuple(Dep(j) for j in order)


def _output(parts: Any, k: int, op: str, token: str, tuple_out: bool, loop_shape: tuple,
            loop_chunks: tuple, core: tuple[int, ...], dt: np.dtype, axes: Any) -> Array:
    """Output ``k`` of the blocks' calls as an Array, its core axes where ``axes`` (of
    ``axes``/``axis``) puts them."""
    nloop = len(loop_shape)
    grid = numblocks(loop_chunks)
    chunks = loop_chunks + tuple((c,) for c in core)
    shape = loop_shape + core
    if tuple_out:
        blocks = _map_blocks(f"{op}-{k}-{token}", pick_part(k), [parts], grid,
                             kind="getitem", name=f"{op}[{k}]")
        blocks = _with_core_grid(blocks, len(core))
    else:
        blocks = _with_core_grid(parts, len(core))
    out = Array(blocks, shape, chunks, dt)
    # output core axes where ``axes``/``axis`` put them
    ndim = out.ndim
    pos = _positions(axes, ndim, f"output #{k} ({ndim} dimensions)")
    if pos != tuple(range(nloop, ndim)):
        perm: list[int | None] = [None] * ndim
        for j, p in enumerate(pos):
            perm[p] = nloop + j
        rest = iter(range(nloop))
        out = out.transpose(tuple(p if p is not None else next(rest) for p in perm))
    return out


class _LoopIndex:
    """Block coordinate of an argument for a block of the loop grid: its loop axes follow
    the grid (block 0 where it broadcasts), its core axes are block 0."""

    def __init__(self, off: int, bcast: tuple[bool, ...], ncore: int):
        self.off, self.bcast, self.ncore = off, bcast, ncore

    def __call__(self, coord: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(0 if b else coord[d + self.off] for d, b in enumerate(self.bcast)) + \
            (0,) * self.ncore


def _with_core_grid(blocks: Any, ncore: int) -> Any:
    """The same blocks on a grid with ``ncore`` trailing axes of one block each."""
    if ncore == 0:
        return blocks
    from tilegraph.algebra.blocks import remap

    keys = blocks.keys.reshape(blocks.grid + (1,) * ncore)
    return remap(f"{blocks.name}-core", keys, [blocks], covers=True)


def _resolved_dtypes(ufunc: np.ufunc, inputs: Sequence[Any], dtype: Any) -> list | None:
    """The output dtypes NumPy's type resolution gives ``ufunc`` for these inputs (Python
    scalars as weak scalars, as NumPy treats them), or ``None`` where it cannot say."""
    given = []
    for v in inputs:
        if isinstance(v, (bool, int, float, complex)):
            given.append(type(v))
        else:
            dt = getattr(v, "dtype", None)
            given.append(np.dtype(dt) if dt is not None else np.asarray(v).dtype)
    outs = [None if dtype is None else np.dtype(dtype)] * ufunc.nout
    try:
        resolved = ufunc.resolve_dtypes((*given, *outs))
    except (TypeError, ValueError, AttributeError):
        return None
    return list(resolved[ufunc.nin:])


def ufunc_call(ufunc: np.ufunc, *inputs: Any, axes: Any = None, axis: Any = None,
               keepdims: bool = False, dtype: Any = None, **kwargs: Any) -> Any:
    """A generalized ufunc (one with a ``signature``: NumPy's ``vecdot``/``matvec``, the
    ``numpy.linalg`` kernels, a numba ``@guvectorize`` function) called on tilegraph arrays
    (the ``__array_ufunc__`` path): :func:`apply_gufunc` with the ufunc's signature, its
    ``axes``/``axis``/``keepdims``, output dtypes from NumPy's type resolution, and core
    dimensions made one block when they are split (as NumPy's call needs whole core
    dimensions). Other keywords (``casting``, ``order``, ...) go to the ufunc per block.

    >>> import numpy as np, tilegraph as tg
    >>> x = tg.from_numpy(np.arange(6.0).reshape(3, 2), chunks=1)
    >>> np.vecdot(x, x).compute()
    array([ 1., 13., 41.])
    """
    signature = ufunc.signature
    name = ufunc.__name__
    if "?" in signature:
        raise TypeError(f"{name}: a signature with optional core dimensions ({signature}) "
                        "takes no axes=/axis=/keepdims= on tilegraph arrays; move the axes "
                        "with tilegraph.moveaxis first")
    if "where" in kwargs:
        raise TypeError(f"{name}: the where= argument is not supported on tilegraph arrays")
    if kwargs.get("signature") is not None:
        raise TypeError(f"{name}: the signature= argument (a loop's dtypes) is not supported "
                        "on tilegraph arrays; cast the inputs with astype instead")
    kwargs.pop("signature", None)
    dtypes = _resolved_dtypes(ufunc, inputs, dtype)
    if dtype is not None:
        kwargs["dtype"] = dtype
    return apply_gufunc(ufunc, signature, *inputs, axes=axes, axis=axis, keepdims=keepdims,
                        output_dtypes=dtypes, allow_rechunk=True, **kwargs)


class gufunc:
    """``pyfunc`` bound to a gufunc ``signature`` and the keywords of :func:`apply_gufunc`,
    as dask's ``da.gufunc``: calling it on arrays is ``apply_gufunc(pyfunc, signature,
    *args, **keywords)`` (keywords of the call override the bound ones). With
    ``vectorize=True`` ``pyfunc`` works on one loop element at a time (this is the
    blocked form of ``np.vectorize(pyfunc, signature=...)``, which itself has no NumPy
    protocol a lazy array could answer, and computes its arguments whole).

    >>> import numpy as np, tilegraph as tg
    >>> norm = tg.gufunc(lambda v: np.sqrt((v * v).sum()), signature="(i)->()",
    ...                  vectorize=True, output_dtypes=float)
    >>> norm(tg.from_numpy(np.array([[3.0, 4.0], [6.0, 8.0]]), chunks=(1, 2))).compute()
    array([ 5., 10.])
    """

    _KEYWORDS = ("vectorize", "axes", "axis", "keepdims", "output_sizes", "output_dtypes",
                 "allow_rechunk", "meta")

    def __init__(self, pyfunc: Callable, *, signature: str | None = None,
                 vectorize: bool = False, axes: Any = None, axis: Any = None,
                 keepdims: bool = False, output_sizes: dict | None = None,
                 output_dtypes: Any = None, allow_rechunk: bool = False, meta: Any = None):
        if not callable(pyfunc):
            raise TypeError(f"gufunc: {pyfunc!r} is not callable")
        self.pyfunc = pyfunc
        self.signature = signature if signature is not None else getattr(
            pyfunc, "signature", None)
        if self.signature is None:
            raise TypeError("gufunc: give signature= (e.g. '(i)->()')")
        parse_signature(self.signature)  # a bad signature fails here, not at the call
        self.vectorize, self.axes, self.axis = vectorize, axes, axis
        self.keepdims, self.output_sizes = keepdims, output_sizes
        self.output_dtypes, self.allow_rechunk, self.meta = output_dtypes, allow_rechunk, meta
        self.__name__ = funcname(pyfunc)
        self.__doc__ = getattr(pyfunc, "__doc__", None)

    def __repr__(self) -> str:
        return f"tilegraph.gufunc<{self.__name__}, {self.signature!r}>"

    def __call__(self, *args: Any, allow_rechunk: Any = None, **kwargs: Any) -> Any:
        bound = {k: getattr(self, k) for k in self._KEYWORDS}
        if allow_rechunk is not None:
            bound["allow_rechunk"] = allow_rechunk
        for k in self._KEYWORDS:
            if k in kwargs:
                bound[k] = kwargs.pop(k)
        return apply_gufunc(self.pyfunc, self.signature, *args, **bound, **kwargs)


def as_gufunc(signature: str | None = None, **kwargs: Any) -> Callable[[Callable], gufunc]:
    """A decorator making a function a :class:`gufunc` of ``signature`` (dask's
    ``da.as_gufunc``).

    >>> import numpy as np, tilegraph as tg
    >>> @tg.as_gufunc(signature="(i)->()", output_dtypes=float)
    ... def mean_of(block):
    ...     return block.mean(axis=-1)
    >>> mean_of(tg.from_numpy(np.arange(6.0).reshape(3, 2), chunks=(1, 2))).compute()
    array([0.5, 2.5, 4.5])
    """
    unknown = set(kwargs) - set(gufunc._KEYWORDS)
    if unknown:
        raise TypeError(f"as_gufunc: unknown keyword(s) {sorted(unknown)}; it takes "
                        f"signature= and {', '.join(gufunc._KEYWORDS)}")

    def decorate(pyfunc: Callable) -> gufunc:
        return gufunc(pyfunc, signature=signature, **kwargs)

    return decorate
