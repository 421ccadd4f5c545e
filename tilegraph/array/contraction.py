"""Contractions: matmul, dot, tensordot, einsum, outer, and semiring products.

Every contraction lowers to a group-by-join: the blocks of the two operands are joined on the
block coordinates of the summed indices, each pair is multiplied, and the products are
reduced into their output block as they are made. A 2-D floating-point matmul multiplies
with BLAS gemm and accumulates in place (beta = 1). Operands with more than two arrays are
contracted pairwise from the left.

A 2-D matmul whose output has one block dimension (matrix @ vector, ``X.T @ X`` of a
tall-skinny ``X``) and whose partial results are small (all of an output block's partials
together take no more than one operand block) lowers instead to one ``"partial_product"``
task per pair of blocks and a tree of partial sums per output block: placement puts each
product where its large operand block lives (the vector rule of
:mod:`tilegraph.plan.place`), and a transposed operand block is read as a view inside the
product (fusion inlines the transpose), so the large operand never moves.

An operand whose blocks are not NumPy arrays takes the product rule of its type
(:class:`ProductRule`, registered by the module defining the type): a 2-D matmul with a
:class:`~tilegraph.array.sparse.SparseArray` operand is the same group-by-join under
:func:`~tilegraph.array.sparse.sparse_semiring` (:mod:`tilegraph.array.sparse.products`):
sparse @ dense and dense @ sparse give dense Arrays, sparse @ sparse a SparseArray. einsum
and tensordot take dense operands only.
"""

from __future__ import annotations

import math
import string
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from tilegraph.algebra.blocks import (
    BlockRule,
    Blocks,
    Demand,
    combine_all,
    group_by_join,
    register_block_rule,
)
from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.algebra.semiring import PLUS_TIMES, SEMIRINGS, Semiring, cblas
from tilegraph.array.chunks import block_shape, common_refinement, numblocks
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import Dep, GraphBuilder

_BLAS = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}


def _zeros_block(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return np.zeros(shape, dtype=dtype)


def _chains_for(nout: int, nk: int) -> int:
    """Accumulation chains per output block: enough for every core to have work when there
    are fewer output blocks than cores."""
    from tilegraph.util import cores

    if nout >= cores():
        return 1
    return max(1, min(nk, math.ceil(cores() / max(nout, 1))))


def _fill_block(shape: tuple[int, ...], value: Any, dtype: np.dtype) -> np.ndarray:
    return np.full(shape, value, dtype=dtype)


_FLOPS = kind_info("product").flops
TREE_FAN_IN = 8  # partial results combined by one node of a tree of partial sums


def _small_partials(grid: tuple[int, int], nk: int, out_bytes: int, block_bytes: int) -> bool:
    """Whether a 2-D contraction goes by the vector rule: its output has one block
    dimension, and the ``nk`` partial results of one output block together take no more
    memory than the largest operand block (so holding them costs less than one more block).
    """
    return nk >= 1 and min(grid) == 1 and nk * out_bytes <= block_bytes


def _tree_join(label: str, left: Blocks, right: Blocks, grid: tuple[int, int], nk: int,
               semiring: Semiring, cost: Any, nbytes: Any) -> Blocks:
    """The contraction ``C[i, j] = add_k product(L[i, k], R[k, j])`` as one
    ``"partial_product"`` task per ``(i, j, k)`` and, per output block, a tree of partial sums
    (``"reduce"`` tasks, fan-in :data:`TREE_FAN_IN`) whose root is the output block.
    ``cost(lc, rc)`` gives a product's flops, ``nbytes(o)`` the bytes of output block ``o``
    (and of each of its partials)."""
    product, combine = semiring.product, combine_all(semiring.add)
    part_label, tree_label = label + "-part", label + "-tree"

    def emit(builder: GraphBuilder, coords: Any = None) -> None:
        add = builder.add
        lkey, rkey = left.key, right.key
        for out in np.ndindex(*grid) if coords is None else coords:
            i, j = out
            nb = nbytes(out)
            keys = []
            for k in range(nk):
                key = (label, i, j) if nk == 1 else (part_label, i, j, k)
                lk, rk = lkey((i, k)), rkey((k, j))
                flops = cost((i, k), (k, j))
                if lk == rk:
                    add(key, product, deps=[lk], args=(Dep(0), Dep(0)), kind="partial_product",
                        cost=flops, nbytes=nb, coords=out)
                else:
                    add(key, product, deps=[lk, rk], kind="partial_product", cost=flops,
                        nbytes=nb, coords=out)
                keys.append(key)
            level = 0
            while len(keys) > 1:
                groups = [keys[g:g + TREE_FAN_IN] for g in range(0, len(keys), TREE_FAN_IN)]
                nxt = []
                for g, part in enumerate(groups):
                    if len(part) == 1:
                        nxt.append(part[0])
                        continue
                    key = (label, i, j) if len(groups) == 1 else (tree_label, i, j, level, g)
                    add(key, combine, deps=part, kind="reduce", nbytes=nb, coords=out)
                    nxt.append(key)
                keys, level = nxt, level + 1

    return Blocks(label, grid, [left] if left.name == right.name else [left, right], emit,
                  ntasks=math.prod(grid) * _tree_tasks(nk), op="tree_join",
                  spec=(left, right, nk))


def _tree_tasks(nk: int) -> int:
    """Tasks of one output block of :func:`_tree_join`: ``nk`` products and the tree."""
    n, total = nk, nk
    while n > 1:
        total += sum(1 for g in range(0, n, TREE_FAN_IN) if n - g > 1)
        n = -(-n // TREE_FAN_IN)
    return total


def _tree_join_needs(coll: Blocks, coords: Any, demand: Demand) -> bool:
    """Output block (i, j) of :func:`_tree_join` reads row i of the left operand's
    blocks and column j of the right's."""
    left, right, nk = coll.spec
    if coords is None:
        for d in coll.deps:
            demand.every(d)
        return True
    demand.some(left, {(i, k) for i, _ in coords for k in range(nk)})
    demand.some(right, {(k, j) for _, j in coords for k in range(nk)})
    return True


register_block_rule("tree_join", BlockRule(
    _tree_join_needs, lambda coll, coords: len(coords) * _tree_tasks(coll.spec[2])))


def semiring_matmul(a: Any, b: Any, semiring: Semiring | str = PLUS_TIMES) -> Array:
    """The 2-D product of ``a`` and ``b`` under ``semiring``: ``C[i, j] = add_k mul(A[i, k],
    B[k, j])``. ``"plus_times"`` is matmul, ``"min_plus"`` one step of all-pairs shortest
    paths, ``"max_times"``, ``"max_plus"`` and ``"or_and"`` the others built in.

    >>> import numpy as np, tilegraph as tg
    >>> d = np.array([[0, 3, np.inf], [np.inf, 0, 1], [2, np.inf, 0]])
    >>> tg.semiring_matmul(tg.from_numpy(d, chunks=2), tg.from_numpy(d, chunks=2),
    ...                    "min_plus").compute()
    array([[0., 3., 4.],
           [3., 0., 1.],
           [2., 5., 0.]])
    """
    if isinstance(semiring, str):
        try:
            semiring = SEMIRINGS[semiring]
        except KeyError:
            raise ValueError(f"unknown semiring {semiring!r}; known: "
                             f"{', '.join(sorted(SEMIRINGS))}") from None
    a, b = asarray(a), asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"semiring_matmul: needs 2-D operands, got shapes {a.shape} and "
                         f"{b.shape}")
    return _matmul_2d(a, b, semiring)


def _representable(value: Any, dtype: np.dtype) -> bool:
    """Whether ``value`` survives a cast to ``dtype`` (``inf`` has no integer value)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return bool(np.asarray(value).astype(dtype) == value)
        except (TypeError, ValueError, OverflowError):
            return False


class ProductRule(NamedTuple):
    """How the products treat operands of an array type whose blocks are not NumPy arrays.

    ``name`` names such operands in messages ("sparse"); ``matmul_2d(a, b, semiring)`` is
    the 2-D product when either operand is of the type. Such operands are 1-D or 2-D in
    matmul and dot, and einsum, tensordot and outer reject them. The module that defines
    the type registers its rule (:func:`register_product_rule`; the sparse arrays':
    :mod:`tilegraph.array.sparse.products`)."""

    name: str
    matmul_2d: Callable[[Array, Array, Semiring], Array]


_PRODUCT_RULES: dict[type, ProductRule] = {}


def register_product_rule(cls: type, rule: ProductRule) -> None:
    """Make the products use ``rule`` for operands of type ``cls`` (and its subclasses)."""
    _PRODUCT_RULES[cls] = rule


def _product_rule(*operands: Any) -> ProductRule | None:
    """The rule of the first operand whose type has one (None: dense operands only)."""
    for o in operands:
        for cls in type(o).__mro__:
            rule = _PRODUCT_RULES.get(cls)
            if rule is not None:
                return rule
    return None


def aligned_operands(a: Array, b: Array, dtype: np.dtype) -> tuple[Array, Array]:
    """The operands of a 2-D product cast to ``dtype``, with the blocks of ``a``'s columns
    and ``b``'s rows made the same (their common refinement)."""
    a = a.astype(dtype, copy=False)
    b = b.astype(dtype, copy=False)
    inner = common_refinement(a.chunks[1], b.chunks[0])
    if a.chunks[1] != inner:
        a = a.rechunk((a.chunks[0], inner))
    if b.chunks[0] != inner:
        b = b.rechunk((inner, b.chunks[1]))
    return a, b


def _matmul_2d(a: Array, b: Array, semiring: Semiring) -> Array:
    rule = _product_rule(a, b)
    if rule is not None:
        return rule.matmul_2d(a, b, semiring)
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned: {a.shape[1]} (axis 1 of "
            f"the first) != {b.shape[0]} (axis 0 of the second)")
    if semiring is PLUS_TIMES:
        with np.errstate(all="ignore"):
            dtype = np.matmul(np.ones((1, 1), a.dtype), np.ones((1, 1), b.dtype)).dtype
        operand_dtype = dtype
    else:
        # operands are promoted together; the result has the dtype the semiring's product
        # makes of them (``or_and`` makes booleans of any input), found on a 1 x 1 sample
        operand_dtype = np.result_type(a.dtype, b.dtype)
        sample = np.ones((1, 1), operand_dtype)
        with np.errstate(all="ignore"):
            dtype = np.asarray(semiring.product(sample, sample)).dtype
    if semiring is PLUS_TIMES and dtype in _BLAS:
        panels = _panel_matmul(a, b, dtype)
        if panels is not None:
            return panels
    a, b = aligned_operands(a, b, operand_dtype)
    inner = a.chunks[1]
    if semiring is PLUS_TIMES and dtype in _BLAS:
        cblas()  # find the gemm binding once, while planning
    chunks = (a.chunks[0], b.chunks[1])
    grid = numblocks(chunks)
    nk = len(inner) if a.shape[1] else 0
    zero = 0 if semiring is PLUS_TIMES else semiring.zero
    if nk == 0 and not _representable(zero, dtype):
        raise ValueError(
            f"{semiring.name}: the contraction of shapes {a.shape} and {b.shape} is empty, so "
            f"every result is the semiring's zero {zero!r}, which {dtype} cannot hold; use "
            "floating-point operands")
    # the semiring's operations are part of the name: two semirings that share a name must
    # not be planned as one common subexpression
    token = tokenize("matmul", semiring.name, semiring.add, semiring.product,
                     semiring.accumulate, zero, a, b)
    itemsize = dtype.itemsize

    def pairs_of(o: tuple[int, int]) -> list:
        return [((o[0], k), (k, o[1])) for k in range(nk)]

    def cost(lc: tuple[int, int], rc: tuple[int, int]) -> float:
        return _FLOPS(a.chunks[0][lc[0]], a.chunks[1][lc[1]], b.chunks[1][rc[1]])

    def nbytes(o: tuple[int, int]) -> int:
        return itemsize * math.prod(block_shape(chunks, o))

    out_bytes = itemsize * max(chunks[0], default=0) * max(chunks[1], default=0)
    block_bytes = operand_dtype.itemsize * max(inner, default=0) * max(
        max(a.chunks[0], default=0), max(b.chunks[1], default=0))
    if _small_partials(grid, nk, out_bytes, block_bytes):
        blocks = _tree_join(f"matmul-{token}", a.collection, b.collection, grid, nk, semiring, cost,
                            nbytes)
        return Array(blocks, (a.shape[0], b.shape[1]), chunks, dtype)
    nchains = _chains_for(math.prod(grid), nk)
    blocks = group_by_join(
        f"matmul-{token}", a.collection, b.collection, pairs_of, grid, semiring, chains=nchains,
        zero_task=lambda o: (_fill_block, (block_shape(chunks, o), zero, dtype)),
        cost=cost, nbytes=nbytes,
        # every output block has nk pairs: counted without listing them
        ntasks=math.prod(grid) * (max(nk, 1) + (1 if min(nchains, nk) > 1 else 0)),
    )
    return Array(blocks, (a.shape[0], b.shape[1]), chunks, dtype)


PANEL_TILE = 4096  # side of the output tile one panel task computes (in elements, at most)


def _panel_block(a: np.ndarray, rows: slice, b: np.ndarray, cols: slice) -> np.ndarray:
    """One output tile of ``a @ b``: the row panel ``a[rows]`` times the column panel
    ``b[:, cols]`` (both views), the whole inner dimension in one BLAS call."""
    return np.matmul(a[rows], b[:, cols])


def _group(chunks: tuple[int, ...], tiles_wanted: int) -> list[list[int]]:
    """Consecutive blocks grouped into tiles of at most :data:`PANEL_TILE` elements, the
    tiles as large as that allows while there are at least ``tiles_wanted`` of them."""
    size = 1
    while (size * 2 * max(chunks) <= PANEL_TILE
           and math.ceil(len(chunks) / (size * 2)) >= tiles_wanted):
        size *= 2
    return [list(range(s, min(s + size, len(chunks)))) for s in range(0, len(chunks), size)]


def _panel_matmul(a: Array, b: Array, dtype: np.dtype) -> Array | None:
    """``a @ b`` over whole panels, when both operands are in-memory NumPy arrays
    (:func:`~tilegraph.array.core.from_numpy`) of the result's dtype, laid out for BLAS, and
    there are at least as many output blocks as cores; else None.

    Their panels are views, so nothing is copied. One task computes an output tile of up to
    :data:`PANEL_TILE` squared (a group of output blocks, as long as every core still gets two
    tiles) with one gemm over the full inner dimension, and each output block is a view of
    its tile: larger gemms run closer to the BLAS peak than a chain of one gemm per inner
    block, each of which reads and writes its output block again. Operands that are
    computed, read from files or sparse take the group-by-join.
    """
    from tilegraph.array.core import ViewBlocks, _view
    from tilegraph.util import cores

    if not (isinstance(a.collection, ViewBlocks) and isinstance(b.collection, ViewBlocks)):
        return None
    x, y = a.collection.array, b.collection.array
    if x.dtype != dtype or y.dtype != dtype or not a.shape[1]:
        return None
    if not all(v.flags.c_contiguous or v.flags.f_contiguous for v in (x, y)):
        return None
    chunks = (a.chunks[0], b.chunks[1])
    grid = numblocks(chunks)
    if max(len(a.chunks[1]), len(b.chunks[0])) < 2 or math.prod(grid) < cores():
        return None
    name = f"matmul-{tokenize('matmul-panels', a, b)}"
    starts = [np.cumsum((0, *c)).tolist() for c in chunks]
    # two tiles per core, split between the two axes
    want = math.ceil(math.sqrt(2 * cores()))
    groups = [_group(chunks[0], want), _group(chunks[1], want)]
    inner, itemsize = a.shape[1], dtype.itemsize

    def emit(builder: GraphBuilder, coords: Any = None) -> None:
        wanted = None if coords is None else set(coords)
        for rg in groups[0]:
            r0, r1 = starts[0][rg[0]], starts[0][rg[-1] + 1]
            for cg in groups[1]:
                if wanted is not None and not _tile_blocks(rg, cg) & wanted:
                    continue  # a tile of which no block is wanted
                c0, c1 = starts[1][cg[0]], starts[1][cg[-1] + 1]
                nb = itemsize * (r1 - r0) * (c1 - c0)
                cost = _FLOPS(r1 - r0, inner, c1 - c0)
                args = (x, slice(r0, r1), y, slice(c0, c1))
                if len(rg) == 1 and len(cg) == 1:
                    builder.add((name, rg[0], cg[0]), _panel_block, args=args, kind="product",
                                cost=cost, nbytes=nb, coords=(rg[0], cg[0]))
                    continue
                tile = (f"{name}-tile", rg[0], cg[0])
                builder.add(tile, _panel_block, args=args, kind="product", cost=cost,
                            nbytes=nb, coords=(rg[0], cg[0]))
                for i in rg:
                    for j in cg:
                        if wanted is not None and (i, j) not in wanted:
                            continue
                        local = (slice(starts[0][i] - r0, starts[0][i + 1] - r0),
                                 slice(starts[1][j] - c0, starts[1][j + 1] - c0))
                        builder.add((name, i, j), _view, deps=[tile], args=(Dep(0), local),
                                    kind="getitem", coords=(i, j),
                                    nbytes=itemsize * math.prod(block_shape(chunks, (i, j))))

    def count() -> int:
        tiles = len(groups[0]) * len(groups[1])
        return math.prod(grid) + (0 if tiles == math.prod(grid) else tiles)

    return Array(Blocks(name, grid, (), emit, ntasks=count, op="panels", spec=groups),
                 (a.shape[0], b.shape[1]), chunks, dtype)


def _tile_blocks(rows: list[int], cols: list[int]) -> set[tuple[int, int]]:
    return {(i, j) for i in rows for j in cols}


def _panel_count(coll: Blocks, coords: Any) -> int:
    """Tasks of some blocks of :func:`_panel_matmul`: one per block, and the tile task of
    each tile of several blocks that holds one of them."""
    rows, cols = coll.spec
    row_of = {i: n for n, g in enumerate(rows) for i in g}
    col_of = {j: n for n, g in enumerate(cols) for j in g}
    tiles = {(row_of[i], col_of[j]) for i, j in coords}
    return len(coords) + sum(1 for r, c in tiles if len(rows[r]) * len(cols[c]) > 1)


# the panels read in-memory arrays, no collection
register_block_rule("panels", BlockRule(lambda coll, coords, demand: True, _panel_count))


def _dense_only(op: str, *operands: Any) -> None:
    rule = _product_rule(*operands)
    if rule is not None:
        shapes = ", ".join(str(o.shape if hasattr(o, "shape") else np.shape(o))
                           for o in operands)
        raise TypeError(f"{op}: {rule.name} operands are not supported (shapes {shapes}); use "
                        f"matmul/@ or dot for {rule.name} products, or convert with "
                        "x.todense()")


def _ruled_dot(a: Any, b: Any, rule: ProductRule) -> Array:
    """``dot`` with an operand that has a product rule: a product with a scalar, or a
    matmul."""
    if not isinstance(a, Array) and np.ndim(a) == 0:
        return b * a
    if not isinstance(b, Array) and np.ndim(b) == 0:
        return a * b
    a, b = asarray(a), asarray(b)
    if a.ndim not in (1, 2) or b.ndim not in (1, 2):
        raise ValueError(f"dot: a {rule.name} operand takes a 1-D or 2-D operand, got shapes "
                         f"{a.shape} and {b.shape}")
    return matmul(a, b)


def matmul(a: Any, b: Any) -> Array:
    """``a @ b`` with NumPy's rules (1-D operands promoted, batch axes broadcast).

    A sparse operand (:class:`~tilegraph.array.sparse.SparseArray`, 2-D) takes a 1-D or
    2-D operand; the result is sparse when both operands are.

    >>> import numpy as np, tilegraph as tg
    >>> a = tg.from_numpy(np.arange(6.0).reshape(2, 3), chunks=2)
    >>> tg.matmul(a, np.ones(3)).compute()
    array([ 3., 12.])
    """
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must not be 0-d, got shapes {a.shape} and "
                         f"{b.shape} (use * to multiply by a scalar)")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        where = "axis 0" if b.ndim == 1 else "the second-to-last axis"
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned: {ka} (the "
                         f"last axis of the first) != {kb} ({where} of the second)")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: the batch axes {a.shape[:-2]} and {b.shape[:-2]} of shapes "
                         f"{a.shape} and {b.shape} do not broadcast together") from None
    rule = _product_rule(a, b)
    if rule is not None and (a.ndim > 2 or b.ndim > 2):
        raise ValueError(f"matmul: {rule.name} operands are 2-D and take no batch axes "
                         f"(shapes {a.shape} and {b.shape}); multiply each 2-D slice "
                         "separately")
    if a.ndim <= 2 and b.ndim <= 2:
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        out = _matmul_2d(a2, b2, PLUS_TIMES)
        if a.ndim == 1 and b.ndim == 1:
            return out[0, 0]
        if a.ndim == 1:
            return out[0]
        if b.ndim == 1:
            return out[:, 0]
        return out
    # batch dimensions: einsum with broadcasting over the leading axes; a vector operand
    # carries the contracted index "b"
    la = "b" if a.ndim == 1 else "...ab"
    lb = "b" if b.ndim == 1 else "...bc"
    if a.ndim == 1:
        out = "...c"
    elif b.ndim == 1:
        out = "...a"
    else:
        out = "...ac"
    return einsum(f"{la},{lb}->{out}", a, b)


def _parse(subscripts: str, operands: Sequence[Array]) -> tuple[list[str], str]:
    subscripts = subscripts.replace(" ", "")
    if subscripts.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} have more than one '->'")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
        explicit = True
    else:
        lhs, out, explicit = subscripts, "", False
    ins = lhs.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"einsum: {len(ins)} operand subscripts in {subscripts!r} but "
                         f"{len(operands)} operands")
    used = set(subscripts) - set(".,->")
    free = [c for c in string.ascii_letters if c not in used]
    ell_nd = 0
    for term, op in zip(ins, operands, strict=True):
        if "..." in term:
            ell_nd = max(ell_nd, op.ndim - (len(term) - 3))
    ell = "".join(free[:ell_nd])
    expanded = []
    for term, op in zip(ins, operands, strict=True):
        if "..." in term:
            n = op.ndim - (len(term) - 3)
            if n < 0:
                raise ValueError(f"einsum: operand of shape {op.shape} has fewer axes than "
                                 f"subscripts {term!r}")
            term = term.replace("...", ell[ell_nd - n:] if n else "")
        if len(term) != op.ndim or (term and not term.isalpha()):
            raise ValueError(f"einsum: subscripts {term!r} do not match an operand of shape "
                             f"{op.shape}")
        expanded.append(term)
    if explicit:
        if ell_nd and "..." not in out:
            shapes = ", ".join(str(o.shape) for o in operands)
            raise ValueError(f"einsum: '...' stands for {ell_nd} axes of the operands (shapes "
                             f"{shapes}) but the output {out!r} has no '...'; add it to the "
                             "output")
        out = out.replace("...", ell)
        for c in out:
            if not any(c in t for t in expanded):
                raise ValueError(f"einsum: output index {c!r} appears in no operand")
        if len(set(out)) != len(out):
            raise ValueError(f"einsum: output subscripts {out!r} repeat an index")
    else:
        counts: dict[str, int] = {}
        for t in expanded:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return expanded, out


def _drop_broadcast(terms: list[str], ops: list[Array]) -> tuple[list[str], list[Array]]:
    """Axes of length 1 that broadcast against a longer axis are dropped from their operand."""
    size: dict[str, int] = {}
    for t, op in zip(terms, ops, strict=True):
        for c, s in zip(t, op.shape, strict=True):
            if s != 1:
                if size.setdefault(c, s) != s:
                    shapes = ", ".join(str(o.shape) for o in ops)
                    raise ValueError(f"einsum: index {c!r} has lengths {size[c]} and {s} "
                                     f"(operand shapes {shapes})")
    out_terms, out_ops = [], []
    for t, op in zip(terms, ops, strict=True):
        drop = [i for i, (c, s) in enumerate(zip(t, op.shape, strict=True))
                if s == 1 and size.get(c, 1) != 1]
        if drop:
            op = op[tuple(0 if i in drop else slice(None) for i in range(op.ndim))]
            t = "".join(c for i, c in enumerate(t) if i not in drop)
        out_terms.append(t)
        out_ops.append(op)
    return out_terms, out_ops


def _diagonal(term: str, x: Array) -> tuple[str, Array]:
    """Resolve repeated indices of one operand (``"ii"`` -> its diagonal ``"i"``)."""
    if len(set(term)) == len(term):
        return term, x
    letters = "".join(dict.fromkeys(term))
    # all axes of one letter need the same blocks
    want = list(x.chunks)
    for c in letters:
        axes = [i for i, t in enumerate(term) if t == c]
        common = common_refinement(*[x.chunks[i] for i in axes])
        for i in axes:
            want[i] = common
    if tuple(want) != x.chunks:
        x = x.rechunk(tuple(want))
    first = {c: term.index(c) for c in letters}
    chunks = tuple(x.chunks[first[c]] for c in letters)

    def index(coord: tuple[int, ...]) -> tuple[int, ...]:
        pos = dict(zip(letters, coord, strict=True))
        return tuple(pos[c] for c in term)

    func = partial(np.einsum, f"{term}->{letters}")
    blocks = _map_blocks(f"diagonal-{tokenize('diagonal', x, term)}", func, [x.collection],
                         numblocks(chunks), [index], kind="elementwise", name="diagonal")
    return letters, Array(blocks, tuple(sum(c) for c in chunks), chunks, x.dtype)


def _sum_out(term: str, x: Array, keep: set[str]) -> tuple[str, Array]:
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if not axes:
        return term, x
    return "".join(c for c in term if c in keep), x.sum(axis=axes)


def _einsum_accumulate(subscripts: str, acc: np.ndarray, a: np.ndarray, b: np.ndarray
                       ) -> np.ndarray:
    return np.add(acc, np.einsum(subscripts, a, b, optimize=True), out=acc)


def _einsum_product(subscripts: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(np.einsum(subscripts, a, b, optimize=True))


def _pairwise(ta: str, a: Array, tb: str, b: Array, keep: set[str], dtype: np.dtype
              ) -> tuple[str, Array]:
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    out = "".join(c for c in dict.fromkeys(ta + tb) if c in keep)
    shared = [c for c in dict.fromkeys(ta) if c in tb]
    summed = [c for c in shared if c not in out]
    # align the blocks of the shared indices
    for c in shared:
        common = common_refinement(a.chunks[ta.index(c)], b.chunks[tb.index(c)])
        if a.chunks[ta.index(c)] != common:
            a = a.rechunk(tuple(common if t == c else ch for t, ch in zip(ta, a.chunks,
                                                                              strict=True)))
        if b.chunks[tb.index(c)] != common:
            b = b.rechunk(tuple(common if t == c else ch for t, ch in zip(tb, b.chunks,
                                                                              strict=True)))
    chunk_of = {}
    for t, op in ((ta, a), (tb, b)):
        for c, ch in zip(t, op.chunks, strict=True):
            chunk_of[c] = ch
    if (len(summed) == 1 and len(ta) == 2 and len(tb) == 2 and len(out) == 2
            and ta == out[0] + summed[0] and tb == summed[0] + out[1]):
        return out, _matmul_2d(a, b, PLUS_TIMES).astype(dtype, copy=False)
    chunks = tuple(chunk_of[c] for c in out)
    grid = numblocks(chunks)
    sum_grid = [len(chunk_of[c]) if sum(chunk_of[c]) else 0 for c in summed]
    subs = f"{ta},{tb}->{out}"
    semiring = Semiring(f"einsum[{subs}]", np.add, partial(_einsum_product, subs),
                        partial(_einsum_accumulate, subs), 0)

    def pairs_of(o: tuple[int, ...]) -> list:
        pos = dict(zip(out, o, strict=True))
        pairs = []
        for s in np.ndindex(*sum_grid):
            pos.update(zip(summed, s, strict=True))
            pairs.append((tuple(pos[c] for c in ta), tuple(pos[c] for c in tb)))
        return pairs

    token = tokenize("einsum", subs, a, b, dtype)
    nsum = math.prod(sum_grid) if summed else 1
    blocks = group_by_join(
        f"einsum-{token}", a.collection, b.collection, pairs_of, grid, semiring,
        chains=_chains_for(math.prod(grid), nsum),
        zero_task=lambda o: (_zeros_block, (block_shape(chunks, o), dtype)),
        nbytes=lambda o: dtype.itemsize * math.prod(block_shape(chunks, o)),
    )
    return out, Array(blocks, tuple(sum(c) for c in chunks), chunks, dtype)


def einsum(subscripts: str, *operands: Any, dtype: Any = None) -> Array:
    """Einstein summation over blocked arrays, like ``numpy.einsum`` (any contraction,
    explicit or implicit output, ``...`` broadcasting, repeated indices for diagonals).

    >>> import numpy as np, tilegraph as tg
    >>> a = np.arange(6.0).reshape(2, 3)
    >>> tg.einsum("ij,kj->ik", tg.from_numpy(a, chunks=1), tg.from_numpy(a, chunks=2)
    ...           ).compute()
    array([[ 5., 14.],
           [14., 50.]])
    """
    if not isinstance(subscripts, str):
        raise TypeError("einsum: the first argument must be a subscripts string")
    _dense_only("einsum", *operands)
    ops = [asarray(o) for o in operands]
    if not ops:
        raise ValueError("einsum: needs at least one operand")
    terms, out = _parse(subscripts, ops)
    with np.errstate(all="ignore"):
        result_dtype = np.einsum(f"{','.join(terms)}->{out}",
                                 *[np.ones((1,) * o.ndim, o.dtype) for o in ops]).dtype
    if dtype is not None:
        result_dtype = np.dtype(dtype)
    terms, ops = _drop_broadcast(terms, ops)
    pairs = [_diagonal(t, o) for t, o in zip(terms, ops, strict=True)]
    terms = [t for t, _ in pairs]
    ops = [o.astype(result_dtype, copy=False) for _, o in pairs]
    # sum out indices that appear in one operand only and not in the output
    later = [set("".join(terms[i + 1:]) + out) for i in range(len(terms))]
    earlier = [set("".join(terms[:i])) for i in range(len(terms))]
    for i in range(len(terms)):
        terms[i], ops[i] = _sum_out(terms[i], ops[i], later[i] | earlier[i])
        # a sum may promote (bool and small ints sum to int64): back to the result dtype
        ops[i] = ops[i].astype(result_dtype, copy=False)
    term, acc = terms[0], ops[0]
    for i in range(1, len(terms)):
        keep = set("".join(terms[i + 1:]) + out)
        term, acc = _pairwise(term, acc, terms[i], ops[i], keep, result_dtype)
    term, acc = _sum_out(term, acc, set(out))
    if term != out:
        acc = acc.transpose([term.index(c) for c in out])
    return acc.astype(result_dtype, copy=False)


def tensordot(a: Any, b: Any, axes: Any = 2) -> Array:
    """Sum products over the given axes, like ``numpy.tensordot``."""
    _dense_only("tensordot", a, b)
    a, b = asarray(a), asarray(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={n} is invalid for shapes {a.shape} and "
                             f"{b.shape}")
        ax_a, ax_b = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, (int, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (int, np.integer)) else list(ax_b)
        if len(ax_a) != len(ax_b):
            raise ValueError(f"tensordot: axes {axes} pair up different numbers of axes of "
                             f"shapes {a.shape} and {b.shape}")
    for axs, x in ((ax_a, a), (ax_b, b)):
        for ax in axs:
            if not -x.ndim <= ax < x.ndim:
                raise ValueError(f"tensordot: axis {ax} is out of range for shape {x.shape} "
                                 f"(axes {axes}, shapes {a.shape} and {b.shape})")
    ax_a = [x % a.ndim for x in ax_a]
    ax_b = [x % b.ndim for x in ax_b]
    if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
        raise ValueError(f"tensordot: axes {axes} repeat an axis (shapes {a.shape} and "
                         f"{b.shape})")
    for i, j in zip(ax_a, ax_b, strict=True):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: shape mismatch for sum: axis {i} of {a.shape} and "
                             f"axis {j} of {b.shape}")
    letters = iter(string.ascii_letters)
    ta = [next(letters) for _ in range(a.ndim)]
    tb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(ax_a, ax_b, strict=True):
        tb[j] = ta[i]
    out = [c for i, c in enumerate(ta) if i not in ax_a] + \
        [c for j, c in enumerate(tb) if j not in ax_b]
    return einsum(f"{''.join(ta)},{''.join(tb)}->{''.join(out)}", a, b)


def dot(a: Any, b: Any) -> Array:
    """``numpy.dot``: products for scalars, inner product of vectors, matmul of matrices,
    and a sum over the last axis of ``a`` and the second-to-last of ``b`` otherwise.
    With a sparse operand: a product with a scalar, or the matmul of 1-D and 2-D operands.

    >>> import numpy as np, tilegraph as tg
    >>> tg.dot(tg.from_numpy(np.arange(3.0)), np.arange(3.0)).compute()
    np.float64(5.0)
    """
    rule = _product_rule(a, b)
    if rule is not None:
        return _ruled_dot(a, b, rule)
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if b.ndim == 1:
        return tensordot(a, b, axes=([a.ndim - 1], [0]))
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 2]))


def outer(a: Any, b: Any) -> Array:
    """The outer product of the flattened inputs."""
    _dense_only("outer", a, b)
    a, b = asarray(a).ravel(), asarray(b).ravel()
    return einsum("i,j->ij", a, b)

