"""The plans of blocked 2-D products (under :mod:`tilegraph.array.contraction`, which
gives ``matmul``, ``dot``, ``tensordot``, ``einsum``, ``outer`` and ``semiring_matmul``):
:func:`matmul_2d` lowers ``C = A @ B`` under a semiring to a group-by-join whose products
accumulate into their output block as they are made (:func:`chains_for` accumulation
chains per block), to one product per pair of blocks and a tree of partial sums when the
partials are small (:func:`small_partials`, :func:`tree_join`), or to whole panels
multiplied by one gemm per output tile when both operands are in-memory NumPy arrays
(:data:`PANEL_TILE`). An operand whose blocks are not NumPy arrays takes the product rule
of its type (:class:`ProductRule`, :func:`register_product_rule`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tilegraph.algebra.blocks import Blocks, combine_all, group_by_join
from tilegraph.algebra.demand import BlockRule, Demand, register_block_rule
from tilegraph.algebra.semiring import PLUS_TIMES, Semiring, cblas
from tilegraph.array.chunks import block_shape, common_refinement, numblocks
from tilegraph.array.core import Array, tokenize
from tilegraph.graph.builder import GraphBuilder
from tilegraph.graph.kinds import kind_info
from tilegraph.graph.taskgraph import Dep

BLAS_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)}


def zeros_block(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The block of zeros an accumulation chain starts from."""
    return np.zeros(shape, dtype=dtype)


def chains_for(nout: int, nk: int) -> int:
    """Accumulation chains per output block: enough for every core to have work when there
    are fewer output blocks than cores."""
    from tilegraph.util import cores

    if nout >= cores():
        return 1
    return max(1, min(nk, math.ceil(cores() / max(nout, 1))))


def _fill_block(shape: tuple[int, ...], value: Any, dtype: np.dtype) -> np.ndarray:
    return np.full(shape, value, dtype=dtype)


PRODUCT_FLOPS = kind_info("product").flops  # flops of an (m, k) x (k, n) block product
TREE_FAN_IN = 8  # partial results combined by one node of a tree of partial sums


def small_partials(grid: tuple[int, int], nk: int, out_bytes: int, block_bytes: int) -> bool:
    """Whether a 2-D contraction goes by the vector rule: its output has one block
    dimension, and the ``nk`` partial results of one output block together take no more
    memory than the largest operand block (so holding them costs less than one more block).
    """
    return nk >= 1 and min(grid) == 1 and nk * out_bytes <= block_bytes


def tree_join(label: str, left: Blocks, right: Blocks, grid: tuple[int, int], nk: int,
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
    """Tasks of one output block of :func:`tree_join`: ``nk`` products and the tree."""
    n, total = nk, nk
    while n > 1:
        total += sum(1 for g in range(0, n, TREE_FAN_IN) if n - g > 1)
        n = -(-n // TREE_FAN_IN)
    return total


def _tree_join_needs(coll: Blocks, coords: Any, demand: Demand) -> bool:
    """Output block (i, j) of :func:`tree_join` reads row i of the left operand's
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


def product_rule(*operands: Any) -> ProductRule | None:
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


def matmul_2d(a: Array, b: Array, semiring: Semiring) -> Array:
    """The 2-D product ``a @ b`` under ``semiring``: the product rule of a non-dense
    operand's type, else whole panels (in-memory operands), a tree of partial sums (small
    partials) or a group-by-join that accumulates into each output block."""
    rule = product_rule(a, b)
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
    if semiring is PLUS_TIMES and dtype in BLAS_DTYPES:
        panels = _panel_matmul(a, b, dtype)
        if panels is not None:
            return panels
    a, b = aligned_operands(a, b, operand_dtype)
    inner = a.chunks[1]
    if semiring is PLUS_TIMES and dtype in BLAS_DTYPES:
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
        return PRODUCT_FLOPS(a.chunks[0][lc[0]], a.chunks[1][lc[1]], b.chunks[1][rc[1]])

    def nbytes(o: tuple[int, int]) -> int:
        return itemsize * math.prod(block_shape(chunks, o))

    out_bytes = itemsize * max(chunks[0], default=0) * max(chunks[1], default=0)
    block_bytes = operand_dtype.itemsize * max(inner, default=0) * max(
        max(a.chunks[0], default=0), max(b.chunks[1], default=0))
    if small_partials(grid, nk, out_bytes, block_bytes):
        blocks = tree_join(f"matmul-{token}", a.collection, b.collection, grid, nk, semiring, cost,
                            nbytes)
        return Array(blocks, (a.shape[0], b.shape[1]), chunks, dtype)
    nchains = chains_for(math.prod(grid), nk)
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
    from tilegraph.array.core import ViewBlocks, region_view
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
                cost = PRODUCT_FLOPS(r1 - r0, inner, c1 - c0)
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
                        builder.add((name, i, j), region_view, deps=[tile], args=(Dep(0), local),
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
