"""The Array front ends of the LambdaPACK library (:mod:`tilegraph.lambdapack.library`).

Each front end binds its program to the block counts of its Array operands and returns lazy
Arrays whose blocks are the tiles the program writes: the first output collection lowers
the whole DAG into the one task graph (:meth:`~tilegraph.lambdapack.DAG.emit`), the others
are views of it, like every other block collection. ``tg.linalg.cholesky`` is
``library.cholesky``'s front end.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from tilegraph.algebra.blocks import Blocks, RunBlocks, unique_collections
from tilegraph.algebra.linalg_kernels import zeros
from tilegraph.array.core import Array, asarray, dense_only, tokenize
from tilegraph.graph.builder import GraphBuilder
from tilegraph.lambdapack import library
from tilegraph.lambdapack.program import DAG

TileOf = Callable[[tuple[int, ...]], tuple[str, tuple[int, ...]] | None]


def program_blocks(dag: DAG, name: str, inputs: Mapping[str, tuple[Blocks, Callable]],
                   outputs: Sequence[tuple[tuple[int, ...], TileOf]],
                   shape_of: Callable[[str, tuple[int, ...]], tuple[int, ...] | None],
                   dtype: np.dtype, fits: Callable[[Any], None] | None = None
                   ) -> list[Blocks]:
    """Collections of the tiles ``dag`` writes.

    ``inputs`` maps an input tile array to ``(collection, coord_of)``: tile ``t`` of it is
    block ``coord_of(t)`` of the collection. Each output is ``(grid, tile_of)``: block
    ``coord`` is tile ``tile_of(coord)`` (an ``(array, tile)`` the program writes), or, where
    ``tile_of`` gives None, a block of zeros (``shape_of`` its shape under the array ``""``).
    ``fits(options)``: called with the options of the run the program is lowered for
    (``None``: for no run) before its tasks are emitted; it raises when the run cannot
    hold them.
    """
    keys_per_output = []
    zero_tiles: list[tuple[Hashable, tuple[int, ...]]] = []
    for n, (grid, tile_of) in enumerate(outputs):
        keys = np.empty(grid, dtype=object)
        for coord in np.ndindex(*grid):
            tile = tile_of(coord)
            if tile is None:
                keys[coord] = (f"{name}-zero{n}", *coord)
                zero_tiles.append((keys[coord], coord))
                continue
            writer = dag.writer(*tile)
            if writer is None:
                raise ValueError(f"{dag!r}: output tile {tile} is never written")
            keys[coord] = dag.node_key(name, writer)
        keys_per_output.append(keys)

    def input_key(array: str, tile: tuple[int, ...]) -> Hashable:
        entry = inputs.get(array)
        if entry is None:
            raise ValueError(f"{dag!r}: it reads tile {array}{list(tile)}, which no statement "
                             "writes and no input provides")
        coll, coord_of = entry
        return coll.key(coord_of(tile))

    def emit(builder: GraphBuilder) -> None:
        dag.emit(builder, name, input_key, shape_of, dtype.itemsize)
        for key, coord in zero_tiles:
            shape = shape_of("", coord)
            builder.add(key, zeros, args=(shape, dtype), kind="creation", coords=coord,
                        nbytes=dtype.itemsize * math.prod(shape))

    sources = unique_collections(c for c, _ in inputs.values())
    ntasks = dag.count() + len(zero_tiles)
    (grid0, _), *rest = outputs
    if fits is None:
        first = Blocks(f"{name}-out0", grid0, sources, emit, keys=keys_per_output[0],
                       ntasks=ntasks)
    else:
        def emit_for(builder: GraphBuilder, options: Any) -> None:
            fits(options)
            emit(builder)

        first = RunBlocks(f"{name}-out0", grid0, sources, emit_for, lambda options: ntasks,
                          keys=keys_per_output[0])
    return [first, *(Blocks(f"{name}-out{n}", grid, [first], None, keys=keys, ntasks=0)
                     for n, ((grid, _), keys) in enumerate(zip(rest, keys_per_output[1:],
                                                               strict=True), start=1))]


def _square_blocks(a: Array, op: str) -> Array:
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{op}: expected a square matrix, got shape {a.shape}")
    if a.chunks[1] != a.chunks[0]:
        a = a.rechunk((a.chunks[0], a.chunks[0]))
    return a


def _float(a: Array, op: str) -> Array:
    if a.dtype.kind in "biu":
        return a.astype(np.float64)
    if a.dtype.kind not in "fc":
        raise TypeError(f"{op}: expected a numeric matrix, got dtype {a.dtype}")
    if a.dtype == np.float16:
        return a.astype(np.float32)
    return a


@library.cholesky.implement
def cholesky(a: Any) -> Array:
    """The lower Cholesky factor of a Hermitian positive definite matrix (only its lower
    triangle is read), by the program ``library.cholesky``; zeros above the diagonal."""
    a = asarray(a)
    dense_only("cholesky", a)
    a = _square_blocks(_float(a, "cholesky"), "cholesky")
    chunks = a.chunks[0]
    nb = len(chunks)
    dag = library.cholesky.bind(N=nb)
    name = f"cholesky-{tokenize('lp-cholesky', a)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int]:
        i, j = tile[-2:]
        return chunks[i], chunks[j]

    (low,) = program_blocks(
        dag, name, {"S": (a.collection, lambda t: t[1:])},
        [((nb, nb), lambda c: ("L", c) if c[0] >= c[1] else None)], shape_of, a.dtype)
    return Array(low, a.shape, (chunks, chunks), a.dtype)


@library.gemm.implement
def gemm(a: Any, b: Any) -> Array:
    """``a @ b`` for 2-D Arrays by the program ``library.gemm`` (a chain of block products
    per output block; ``tg.matmul`` plans the same product with more choices)."""
    a, b = asarray(a), asarray(b)
    dense_only("gemm", a, b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"gemm: shapes {a.shape} and {b.shape} are not aligned 2-D matrices")
    dtype = np.result_type(a.dtype, b.dtype)
    if dtype.kind not in "fc":
        dtype = np.dtype(np.float64)
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    if b.chunks[0] != a.chunks[1]:
        b = b.rechunk((a.chunks[1], b.chunks[1]))
    if not a.shape[1]:
        raise ValueError("gemm: the inner dimension is empty")
    rows, inner, cols = a.chunks[0], a.chunks[1], b.chunks[1]
    m, n, k = len(rows), len(cols), len(inner)
    dag = library.gemm.bind(M=m, N=n, K=k)
    name = f"gemm-{tokenize('lp-gemm', a, b)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int]:
        i, j = tile[:2]
        if array == "A":
            return rows[i], inner[j]
        if array == "B":
            return inner[i], cols[j]
        return rows[i], cols[j]

    (c,) = program_blocks(dag, name, {"A": (a.collection, tuple), "B": (b.collection, tuple)},
                          [((m, n), lambda x: ("C", (*x, k)))], shape_of, dtype)
    return Array(c, (a.shape[0], b.shape[1]), (rows, cols), dtype)


@library.syrk.implement
def syrk(a: Any) -> Array:
    """The lower triangle of ``a @ a^H`` (zeros above the diagonal) by the program
    ``library.syrk``."""
    a = _float(asarray(a), "syrk")
    dense_only("syrk", a)
    if a.ndim != 2 or not a.shape[1]:
        raise ValueError(f"syrk: expected a 2-D matrix with columns, got shape {a.shape}")
    rows, inner = a.chunks
    n, k = len(rows), len(inner)
    dag = library.syrk.bind(N=n, K=k)
    name = f"syrk-{tokenize('lp-syrk', a)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int]:
        i, j = tile[:2]
        return (rows[i], inner[j]) if array == "A" else (rows[i], rows[j])

    (c,) = program_blocks(dag, name, {"A": (a.collection, tuple)},
                          [((n, n), lambda x: ("C", (*x, k)) if x[0] >= x[1] else None)],
                          shape_of, a.dtype)
    return Array(c, (a.shape[0], a.shape[0]), (rows, rows), a.dtype)


def triangular_solve(a: Array, b: Array, lower: bool, trans: str, unit: bool) -> Array:
    """``x`` with ``op(a) @ x = b`` for 2-D ``a`` (square blocks, triangular: only its
    ``lower`` or upper triangle is read) and 2-D ``b`` with ``a``'s row blocks, both of one
    floating dtype, by the programs ``library.trsm`` (``trans="N"``) and ``library.trsm_t``
    (``"T"``, ``"C"``): forward substitution when ``op(a)`` is lower triangular, else
    backward."""
    rows, cols = b.chunks
    n, m = len(rows), len(cols)
    code = "NTC".index(trans)
    entry = library.trsm if trans == "N" else library.trsm_t
    dag = entry.bind(N=n, M=m, F=int(lower == (trans == "N")), LOW=int(lower), TR=code,
                     UNIT=int(unit))
    name = f"trsm-{tokenize('lp-trsm', a, b, lower, trans, unit)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int]:
        i, j = tile[:2]
        return (rows[i], rows[j]) if array == "A" else (rows[i], cols[j])

    (x,) = program_blocks(dag, name, {"A": (a.collection, tuple),
                                      "B": (b.collection, lambda t: t[:2])},
                          [((n, m), lambda c: ("X", c))], shape_of, b.dtype)
    return Array(x, b.shape, b.chunks, b.dtype)


@library.trsm.implement
def trsm(a: Any, b: Any, lower: bool = True, trans: Any = "N", unit: bool = False,
         op: str = "trsm") -> Array:
    """``x`` with ``op(a) @ x = b`` for a triangular ``a`` (only its ``lower`` or upper
    triangle is read; ``trans`` "N", "T" or "C"; ``unit``: unit diagonal) by the programs
    ``library.trsm``/``trsm_t``; ``b`` a vector or a matrix. ``tg.linalg.solve_triangular``
    is this function (errors name ``op``)."""
    a, b = asarray(a), asarray(b)
    dense_only(op, a, b)
    if trans not in ("N", "T", "C"):
        raise ValueError(f"{op}: trans must be 'N', 'T' or 'C', got {trans!r}")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{op}: expected a square matrix, got shape {a.shape}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"{op}: b of shape {b.shape} does not match the matrix of shape "
                         f"{a.shape} (b needs {a.shape[0]} rows)")
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    dtype = np.result_type(_float(a, op).dtype, _float(b, op).dtype)
    a = _square_blocks(a.astype(dtype, copy=False), op)
    b = b.astype(dtype, copy=False)
    if b.chunks[0] != a.chunks[0]:
        b = b.rechunk((a.chunks[0], b.chunks[1]))
    out = triangular_solve(a, b, bool(lower), trans, bool(unit))
    return out[:, 0] if vector else out


library.trsm_t.implement(trsm)


def _tall(a: Any, branch: Any, op: str, what: str) -> Array:
    """``a`` as a floating-point matrix with one column of blocks, ``branch`` checked."""
    a = _float(asarray(a), op)
    dense_only(op, a)
    if a.ndim != 2:
        raise ValueError(f"{op}: expected a 2-D matrix, got shape {a.shape}")
    if isinstance(branch, bool) or not isinstance(branch, int) or branch < 2:
        raise ValueError(f"tsqr: {what} must be an integer >= 2, got {branch!r}")
    if a.numblocks[1] != 1:
        a = a.rechunk((a.chunks[0], (a.shape[1],)))
    return a


@library.tsqr.implement
def tsqr_r(a: Any, branch: int = 2) -> Array:
    """The ``n x n`` R factor (one block) of a tall-skinny ``m x n`` matrix, every row block
    having at least ``n`` rows, by the program ``library.tsqr``: the row blocks are factored
    and the R factors combined ``branch`` at a time. Row signs are LAPACK's (not
    normalised): ``R^H R = A^H A``."""
    a = _tall(a, branch, "tsqr", "branch")
    rows, n = a.chunks[0], a.shape[1]
    if any(r < n for r in rows):
        raise ValueError(f"tsqr: every row block needs at least {n} rows (the columns); "
                         f"got row blocks {rows}")
    nb = len(rows)
    dag = library.tsqr.bind(N=nb, B=branch)
    name = f"tsqr-{tokenize('lp-tsqr', a, branch)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int]:
        return (rows[tile[0]], n) if array == "A" else (n, n)

    (r,) = program_blocks(dag, name, {"A": (a.collection, tuple)},
                          [((1, 1), lambda c: ("R", (0, 0)))], shape_of, a.dtype)
    return Array(r, (n, n), ((n,), (n,)), a.dtype)


def tree_levels(n: int, branch: int) -> int:
    """Levels of a tree that combines ``n`` leaves ``branch`` at a time into one."""
    levels = 0
    while n > 1:
        n = -(-n // branch)
        levels += 1
    return levels


@library.tsqr_q.implement
def tsqr(a: Any, split_every: int = 16) -> tuple[Array, Array]:
    """Q and R of a matrix with one column of blocks (the columns are put in one block if
    they are not) by the program ``library.tsqr_q``: ``q`` has ``a``'s row blocks, ``r``
    (one block) a non-negative real diagonal; the row blocks' R factors are combined
    ``split_every`` at a time."""
    a = _tall(a, split_every, "qr", "split_every")
    m, n = a.shape
    rows = a.chunks[0]
    k = min(m, n)
    nb = len(rows)
    dag = library.tsqr_q.bind(N=nb, B=split_every, L=tree_levels(nb, split_every))
    name = f"tsqr-{tokenize('lp-tsqr-q', a, split_every)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int] | None:
        if array == "A":
            return rows[tile[0]], n
        if array == "Q":
            return rows[tile[0]], k
        if array == "R":
            return k, n
        return None

    q, r = program_blocks(dag, name, {"A": (a.collection, tuple)},
                          [((nb, 1), lambda c: ("Q", c)), ((1, 1), lambda c: ("R", c))],
                          shape_of, a.dtype)
    return (Array(q, (m, k), (rows, (k,)), a.dtype), Array(r, (k, n), ((k,), (n,)), a.dtype))


@library.qr.implement
def householder_qr(a: Any, block: int | None = None) -> tuple[Array, Array]:
    """Q and R of a matrix of any shape (``q``: m x k with orthonormal columns, ``r``: k x n
    upper triangular with a non-negative real diagonal, k = min(m, n)) by the program
    ``library.qr`` (tiled Householder QR). The matrix is cut into square tiles of ``block``
    (default: its first row block's height) on both axes."""
    a = asarray(a)
    dense_only("qr", a)
    if a.ndim != 2:
        raise ValueError(f"qr: expected a 2-D matrix, got shape {a.shape}")
    a = _float(a, "qr")
    m, n = a.shape
    if m == 0 or n == 0:
        raise ValueError(f"qr: the matrix is empty (shape {a.shape})")
    b = block if block is not None else a.chunks[0][0]
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
        raise ValueError(f"qr: block must be a positive integer, got {block!r}")
    b = int(b)
    a = a.rechunk((b, b))
    rows, cols = a.chunks
    k = min(m, n)
    qcols = tuple(min(b, k - s) for s in range(0, k, b))
    M, N, K = len(rows), len(cols), len(qcols)
    from tilegraph.array.creation import eye

    ident = eye(m, k, dtype=a.dtype, chunks=(rows, qcols))
    dag = library.qr.bind(M=M, N=N, K=K)
    name = f"hqr-{tokenize('lp-householder-qr', a)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int] | None:
        if array in ("A", "T"):
            i, j = tile[-2:]
            return rows[i], cols[j]
        if array in ("Q", "QS", "I"):
            return rows[tile[0]], qcols[tile[1]]
        if array in ("R", "RS", ""):
            return qcols[tile[0]], cols[tile[1]]
        return None

    q, r = program_blocks(
        dag, name, {"A": (a.collection, tuple), "I": (ident.collection, tuple)},
        [((M, K), lambda c: ("QS", c)),
         ((K, N), lambda c: ("RS", c) if c[1] >= c[0] else None)], shape_of, a.dtype)
    return (Array(q, (m, k), (rows, qcols), a.dtype), Array(r, (k, n), (qcols, cols), a.dtype))


@library.svd.implement
def band_svd(a: Any, compute_uv: bool = True, block: int | None = None,
             fits: Callable[[Any], None] | None = None) -> Any:
    """The SVD ``a = u @ diag(s) @ vh`` of a matrix of any shape (``u``: m x k, ``vh``:
    k x n, k = min(m, n), as ``numpy.linalg.svd(a, full_matrices=False)``) by the program
    ``library.svd`` (numpywren's BDFAC): tiled QR and LQ of the panels reduce the matrix to
    upper band form of one tile's bandwidth, in parallel; the band is gathered into one
    dense k x k block in one task, which finds its values by narrowing the band and LAPACK's
    gbbrd (:mod:`tilegraph.algebra.band`) or, with vectors, its SVD by LAPACK's gesdd (the
    known limit: that task holds three k x k matrices and costs what a dense SVD does); the
    panels' reflectors then turn the band's vectors into ``u`` and ``vh``, again tile by
    tile. A wide matrix is factored as its conjugate
    transpose. Square tiles of ``block`` (default: the first row block's height). Returns
    ``s`` alone with ``compute_uv=False``. ``fits``: see :func:`program_blocks`."""
    a = asarray(a)
    dense_only("svd", a)
    if a.ndim != 2:
        raise ValueError(f"svd: expected a 2-D matrix, got shape {a.shape}")
    a = _float(a, "svd")
    m, n = a.shape
    if m == 0 or n == 0:
        raise ValueError(f"svd: the matrix is empty (shape {a.shape})")
    b = block if block is not None else a.chunks[0][0]
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
        raise ValueError(f"svd: block must be a positive integer, got {block!r}")
    b = int(b)
    if m < n:  # wide: the SVD of the conjugate transpose
        res = band_svd(a.conj().T, compute_uv, b, fits)
        if not compute_uv:
            return res
        u, s, vh = res
        return vh.conj().T, s, u.conj().T
    a = a.rechunk((b, b))
    rows, cols = a.chunks
    M, N = len(rows), len(cols)
    dag = library.svd.bind(M=M, N=N, UV=int(bool(compute_uv)), RL=rows[N - 1])
    name = f"bdsvd-{tokenize('lp-band-svd', a, bool(compute_uv))}"
    real = np.dtype(a.dtype.char.lower()) if a.dtype.kind == "c" else a.dtype

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, ...] | None:
        if array in ("A", "T", "P", "U"):
            i, j = tile[-2:]
            return rows[i], cols[j]
        if array == "X":
            return rows[tile[0]], cols[tile[1]]
        if array in ("XV", "VH"):
            return cols[tile[0]], cols[tile[1]]
        if array in ("S", ""):
            return (n,)
        return None

    outputs = [((1,), lambda c: ("S", (0,)))]
    if compute_uv:
        outputs += [((M, N), lambda c: ("U", c)), ((N, N), lambda c: ("VH", c))]
    blocks = program_blocks(dag, name, {"A": (a.collection, tuple)}, outputs, shape_of,
                            a.dtype, fits)
    s = Array(blocks[0], (n,), ((n,),), real)
    if not compute_uv:
        return s
    return (Array(blocks[1], (m, n), (rows, cols), a.dtype), s,
            Array(blocks[2], (n, n), (cols, cols), a.dtype))


@library.tslu.implement
def tslu(a: Any, branch: int = 2) -> tuple[Array, Array, Array]:
    """LU of a tall-skinny ``m x n`` matrix (``m >= n``, full column rank) with tournament
    pivoting, by the program ``library.tslu``: each row block picks its pivot rows by
    partial pivoting, the candidates play ``branch`` at a time up a tree, and the winners
    are the pivot rows. Returns ``(perm, l, u)``: ``perm`` the ``n`` pivot rows of ``a``
    in order, ``l`` (m x n, ``a``'s row blocks) and ``u`` (n x n, upper triangular) with
    ``a = l @ u`` and ``l[perm]`` unit lower triangular. The columns are put in one block,
    the rows in blocks of the first row block's height."""
    if isinstance(branch, bool) or not isinstance(branch, int) or branch < 2:
        raise ValueError(f"tslu: branch must be an integer >= 2, got {branch!r}")
    a = _tall(a, branch, "tslu", "branch")
    m, n = a.shape
    if m < n or n == 0:
        raise ValueError(f"tslu: expected a tall-skinny matrix (rows >= columns > 0), got "
                         f"shape {a.shape}")
    rb = a.chunks[0][0]
    if any(r != rb for r in a.chunks[0][:-1]) or a.chunks[0][-1] > rb:
        a = a.rechunk((rb, n))
    rows = a.chunks[0]
    nb = len(rows)
    dag = library.tslu.bind(N=nb, B=branch, RB=rb)
    name = f"tslu-{tokenize('lp-tslu', a, branch)}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, ...] | None:
        if array in ("A", "L"):
            return rows[tile[0]], n
        if array == "U":
            return n, n
        return None

    perm, low, up = program_blocks(
        dag, name, {"A": (a.collection, tuple)},
        [((1,), lambda c: ("PR", (0,))), ((nb, 1), lambda c: ("L", c)),
         ((1, 1), lambda c: ("U", (0, 0)))], shape_of, a.dtype)
    return (Array(perm, (n,), ((n,),), np.dtype(np.intp)),
            Array(low, (m, n), (rows, (n,)), a.dtype),
            Array(up, (n, n), ((n,), (n,)), a.dtype))


@library.caqr.implement
def caqr(a: Any, group: int = 2, block: int | None = None) -> tuple[Array, Array]:
    """Q and R of a matrix of any shape (``q``: m x k with orthonormal columns, ``r``: k x n
    upper triangular with a non-negative real diagonal, k = min(m, n)) by the program
    ``library.caqr`` (communication-avoiding QR): each column panel by TSQR in a
    two-level tree, ``group`` tile rows factored together and then the groups' R factors
    combined, the tree's reflectors applied to the tiles right of the panel; Q by applying
    them to the identity's tiles, last step first. Square tiles of ``block`` (default: the
    first row block's height)."""
    a = asarray(a)
    dense_only("caqr", a)
    if a.ndim != 2:
        raise ValueError(f"caqr: expected a 2-D matrix, got shape {a.shape}")
    a = _float(a, "caqr")
    m, n = a.shape
    if m == 0 or n == 0:
        raise ValueError(f"caqr: the matrix is empty (shape {a.shape})")
    if isinstance(group, bool) or not isinstance(group, (int, np.integer)) or group < 1:
        raise ValueError(f"caqr: group must be a positive integer, got {group!r}")
    b = block if block is not None else a.chunks[0][0]
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
        raise ValueError(f"caqr: block must be a positive integer, got {block!r}")
    b = int(b)
    a = a.rechunk((b, b))
    rows, cols = a.chunks
    k = min(m, n)
    qcols = tuple(min(b, k - s) for s in range(0, k, b))
    M, N, K = len(rows), len(cols), len(qcols)
    from tilegraph.array.creation import eye

    ident = eye(m, k, dtype=a.dtype, chunks=(rows, qcols))
    dag = library.caqr.bind(M=M, N=N, K=K, G=int(group))
    name = f"caqr-{tokenize('lp-caqr', a, int(group))}"

    def shape_of(array: str, tile: tuple[int, ...]) -> tuple[int, int] | None:
        if array in ("A", "T"):
            i, j = tile[-2:]
            return rows[i], cols[j]
        if array in ("I", "QS", "CU", "W"):
            i, j = tile[-2:]
            return rows[i], qcols[j]
        if array in ("R", "RS", ""):
            return qcols[tile[0]], cols[tile[1]]
        return None

    q, r = program_blocks(
        dag, name, {"A": (a.collection, tuple), "I": (ident.collection, tuple)},
        [((M, K), lambda c: ("QS", c)),
         ((K, N), lambda c: ("RS", c) if c[1] >= c[0] else None)], shape_of, a.dtype)
    return (Array(q, (m, k), (rows, qcols), a.dtype), Array(r, (k, n), (qcols, cols), a.dtype))
