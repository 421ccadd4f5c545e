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

The plans of the 2-D products (the group-by-join, the tree of partial sums, the panels, the
product rules) are in :mod:`tilegraph.array.product_plans`.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import group_by_join
from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.algebra.semiring import PLUS_TIMES, SEMIRINGS, Semiring
from tilegraph.array.chunks import block_shape, common_refinement, numblocks
from tilegraph.array.core import Array, asarray, tokenize
from tilegraph.array.product_plans import PANEL_TILE as PANEL_TILE  # (set it there)
from tilegraph.array.product_plans import TREE_FAN_IN as TREE_FAN_IN
from tilegraph.array.product_plans import (
    ProductRule,
    chains_for,
    matmul_2d,
    product_rule,
    zeros_block,
)
from tilegraph.array.product_plans import aligned_operands as aligned_operands
from tilegraph.array.product_plans import register_product_rule as register_product_rule


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
    return matmul_2d(a, b, semiring)


def _dense_only(op: str, *operands: Any) -> None:
    rule = product_rule(*operands)
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
    rule = product_rule(a, b)
    if rule is not None and (a.ndim > 2 or b.ndim > 2):
        raise ValueError(f"matmul: {rule.name} operands are 2-D and take no batch axes "
                         f"(shapes {a.shape} and {b.shape}); multiply each 2-D slice "
                         "separately")
    if a.ndim <= 2 and b.ndim <= 2:
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        out = matmul_2d(a2, b2, PLUS_TIMES)
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
        return out, matmul_2d(a, b, PLUS_TIMES).astype(dtype, copy=False)
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
        chains=chains_for(math.prod(grid), nsum),
        zero_task=lambda o: (zeros_block, (block_shape(chunks, o), dtype)),
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
    rule = product_rule(a, b)
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

