"""The :class:`SparseArray` class: its operations built block by block on the kernels of
:mod:`tilegraph.array.sparse.kernels`, its answers to NumPy's protocols, and
:func:`from_scipy`, the array over one SciPy matrix (which the class's operations also use
for SciPy operands). What each operation gives is in :mod:`tilegraph.array.sparse`."""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse as sps

from tilegraph.algebra.blocks import Blocks, apply_blocks, source
from tilegraph.algebra.blocks import map_blocks as _map_blocks
from tilegraph.array.chunks import (
    Chunks,
    block_shape,
    common_refinement,
    normalize_chunks,
    numblocks,
    offsets,
)
from tilegraph.array.core import Array, asarray, compute, tokenize, unique_name
from tilegraph.array.sparse.kernels import (
    assemble,
    assemble_all,
    binary_block,
    identity,
    load_block,
    scalar_block,
    sum_block,
    take_block,
    toarray_block,
    transpose_block,
    unary_block,
)
from tilegraph.array.sparse_blocks import (
    BLOCK_CLASSES,
    check_dtype,
    check_format,
    dense_nbytes,
    expected_nbytes,
    sparse_block_nbytes,
    union_density,
)
from tilegraph.graph.taskgraph import Dep, Lit


def _scalar_like(x: Any) -> bool:
    if isinstance(x, (Array, str, bytes)) or sps.issparse(x):
        return False
    if isinstance(x, (numbers.Number, np.generic)):
        return True
    return isinstance(x, np.ndarray) and x.ndim == 0


def _probe(op: str, func: Callable, *args: Any) -> np.dtype:
    """The dtype NumPy gives for ``func`` on one-element stand-ins (errors name ``op``)."""
    dummies = [np.ones((1, 1), a.dtype) if isinstance(a, Array) else a for a in args]
    try:
        with np.errstate(all="ignore"):
            return np.asarray(func(*dummies)).dtype
    except Exception as exc:
        shapes = ", ".join(f"shape {a.shape} {a.dtype}" if isinstance(a, Array) else repr(a)
                           for a in args)
        kind = next((k for k in (OverflowError, ValueError) if isinstance(exc, k)),
                    TypeError)
        raise kind(f"{op}: cannot be applied to ({shapes}): {exc}") from exc


class SparseArray(Array):
    """A lazy 2-D array whose blocks are ``scipy.sparse`` CSR or CSC arrays.

    ``format`` is ``"csr"`` or ``"csc"``: the type of every block. ``density`` is the
    expected fraction of stored entries per block (used for the memory estimates of the
    plan), or None when unknown. See the module docstring for the operations.

    >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
    >>> m = sps.csr_array(np.array([[1.0, 0, 0], [0, 0, 2], [0, 3, 0]]))
    >>> x = tg.from_scipy(m, chunks=2)
    >>> x  # doctest: +NORMALIZE_WHITESPACE
    tilegraph.SparseArray<shape=(3, 3), dtype=float64, format=csr,
                          chunks=((2, 1), (2, 1)), blocks=4, tasks=4>
    >>> (2 * x + x).sum(axis=0).compute()
    array([3., 9., 6.])
    >>> (x @ np.ones(3)).compute()
    array([1., 2., 3.])
    >>> (x @ x.T).to_scipy().toarray()
    array([[1., 0., 0.],
           [0., 4., 0.],
           [0., 0., 9.]])
    """

    __slots__ = ("_density", "format")
    is_sparse = True

    def __init__(self, blocks: Blocks, shape: Sequence[int], chunks: Chunks, dtype: Any,
                 format: str = "csr", density: float | None = None):
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2:
            raise ValueError(f"SparseArray: sparse arrays are 2-D only, got shape {shape}")
        super().__init__(blocks, shape, chunks, check_dtype("SparseArray", dtype))
        self.format = check_format("SparseArray", format)
        self._density = None if density is None else float(density)

    @property
    def density(self) -> float | None:
        """The expected fraction of stored entries per block (None when unknown).

        >>> import tilegraph as tg
        >>> tg.sparse.random((10, 10), density=0.2, seed=0).density
        0.2
        """
        return self._density

    def __repr__(self) -> str:
        return (f"tilegraph.SparseArray<shape={self.shape}, dtype={self.dtype}, "
                f"format={self.format}, "
                f"chunks={self.chunks if self.npartitions <= 16 else self.chunksize}, "
                f"blocks={self.npartitions}, tasks={self.ntasks}>")

    def _repr_html_(self) -> str:
        density = "unknown" if self._density is None else f"{self._density:.3g}"
        rows = (f"<tr><th style='text-align:left'>format</th><td>{self.format}</td></tr>"
                f"<tr><th style='text-align:left'>density</th><td>{density}</td></tr>")
        return super()._repr_html_().replace(
            "<caption>tilegraph.Array</caption>",
            f"<caption>tilegraph.SparseArray</caption>{rows}")

    # -- computing -------------------------------------------------------------------------

    def _compute_target(self) -> Array:
        """What :func:`tilegraph.compute` plans for this array: the assembled matrix."""
        return self._assembled()

    def _assembled(self) -> Array:
        """A one-block Array whose block is the whole array as one ``csr_array``."""
        grid = self.numblocks
        keys = [self.collection.key(c) for c in np.ndindex(*grid)]
        unique = list(dict.fromkeys(keys))
        slot = {k: j for j, k in enumerate(unique)}
        args = (Lit(offsets(self.chunks[0])), Lit(offsets(self.chunks[1])), Lit(grid),
                self.dtype, *(Dep(slot[k]) for k in keys))
        name = f"to_scipy-{self.name}"
        m, n = self.shape
        nbytes = (None if self._density is None else
                  sparse_block_nbytes((m, n), round(self._density * m * n), self.dtype,
                                      "csr"))
        blocks = apply_blocks(name, (1, 1), [self.collection],
                              lambda c: (assemble_all, unique, args), kind="assemble",
                              name="to_scipy", nbytes=nbytes)
        return Array(blocks, self.shape, ((m,), (n,)), self.dtype)

    def compute(self, **options: Any) -> sps.csr_array:
        """Run the plan and return the whole array as one ``scipy.sparse.csr_array`` (also
        for CSC arrays). The blocks are put together by one task of the plan, which runs
        where the backend places it; the result is returned to the caller.

        Options are those of :func:`tilegraph.compute`.

        >>> import numpy as np, tilegraph as tg
        >>> x = tg.sparse.random((3, 4), density=0.5, chunks=2, seed=0)
        >>> type(x.compute()).__name__, x.compute().shape
        ('csr_array', (3, 4))
        """
        return compute(self, **options)[0]

    def to_scipy(self, **options: Any) -> sps.csr_array:
        """The same as :meth:`compute`: the array as one ``scipy.sparse.csr_array``.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> m = sps.random_array((5, 4), density=0.3, rng=1)
        >>> bool((tg.from_scipy(m, chunks=2).to_scipy() != m.tocsr()).nnz == 0)
        True
        """
        return self.compute(**options)

    def explain(self, **options: Any) -> str:
        """The plan of :meth:`compute` in words (see :meth:`Array.explain`).

        >>> import tilegraph as tg
        >>> print(tg.sparse.random((4, 4), chunks=2, seed=0).explain().splitlines()[1])
        tasks per kind: 4 random, 1 assemble
        """
        from tilegraph.array.lowering import explain

        return explain([self._assembled()], **options)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.to_scipy().toarray()
        return out.astype(dtype, copy=False) if dtype is not None else out

    def _scalar(self) -> Any:
        return self.todense()._scalar()

    def todense(self) -> Array:
        """The dense Array: each block is made dense (``block.toarray()``) in its task.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> x = tg.from_scipy(sps.csr_array(np.eye(3)), chunks=2)
        >>> x.todense().compute()
        array([[1., 0., 0.],
               [0., 1., 0.],
               [0., 0., 1.]])
        """
        blocks = _map_blocks(f"todense-{tokenize('todense', self)}", toarray_block,
                             [self.collection], self.numblocks, kind="todense", name="todense",
                             nbytes=dense_nbytes(self.chunks, self.dtype))
        return Array(blocks, self.shape, self.chunks, self.dtype)

    # -- blockwise building ----------------------------------------------------------------

    def _map(self, op: str, func: Callable, others: Sequence[Array], params: tuple,
             dtype: np.dtype, fmt: str, density: float | None) -> SparseArray:
        """A SparseArray whose block is ``func(*params[:1], self_block, *other_blocks,
        *params[1:])``: ``params[0]`` is the kernel's name, the rest follow the blocks."""
        arrays = [self, *others]
        unique = list({a.name: a for a in arrays}.values())
        slot = {a.name: j for j, a in enumerate(unique)}
        template = (params[0], *(Dep(slot[a.name]) for a in arrays), *params[1:], dtype, fmt)
        token = tokenize("sparse", op, func, *arrays, *params, dtype, fmt)
        blocks = _map_blocks(
            f"{op}-{token}", func, [a.collection for a in unique], self.numblocks,
            args=template, kind="elementwise", name=op,
            nbytes=expected_nbytes(self.chunks, density, dtype, fmt))
        return SparseArray(blocks, self.shape, self.chunks, dtype, fmt, density)

    def rechunk(self, chunks: Any, *, max_mem: Any = None) -> SparseArray:
        """The same array with new block sizes (as :meth:`Array.rechunk`); a new block
        inside one old block is a slice of it, one spanning several is assembled from the
        parts. Sparse rechunks always run in one stage: ``max_mem`` is checked (a size)
        but does not stage them, as a sparse block's bytes depend on its data.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> x = tg.from_scipy(sps.csr_array(np.eye(5)), chunks=2).rechunk(3)
        >>> x.chunks, bool((x.to_scipy().toarray() == np.eye(5)).all())
        (((3, 2), (3, 2)), True)
        """
        from tilegraph.array.manipulation import axis_pieces, max_mem_bytes

        max_mem_bytes(max_mem)

        if isinstance(chunks, dict):  # axes not named keep their blocks
            chunks = tuple(chunks.get(a, chunks.get(a - 2, self.chunks[a])) for a in range(2))
        new = normalize_chunks(chunks, self.shape, self.dtype)
        if new == self.chunks:
            return self
        rows, cols = (axis_pieces(o, n) for o, n in zip(self.chunks, new, strict=True))
        key = self.collection.key
        dtype, fmt = self.dtype, self.format

        def task_of(coord: tuple[int, ...]) -> tuple:
            rparts, cparts = rows[coord[0]], cols[coord[1]]
            if len(rparts) == 1 and len(cparts) == 1:
                (bi, rs, _), (bj, cs, _) = rparts[0], cparts[0]
                return take_block, [key((bi, bj))], (Dep(0), Lit(rs), Lit(cs))
            keys, pieces = [], []
            for bi, rs, rd in rparts:
                for bj, cs, cd in cparts:
                    keys.append(key((bi, bj)))
                    pieces.append((rs, cs, rd.start, cd.start))
            unique = list(dict.fromkeys(keys))
            slot = {k: j for j, k in enumerate(unique)}
            shape = block_shape(new, coord)
            return assemble, unique, (Lit(shape), Lit(tuple(pieces)), dtype, fmt,
                                      *(Dep(slot[k]) for k in keys))

        blocks = apply_blocks(f"rechunk-{tokenize('sparse-rechunk', self, new)}",
                              numblocks(new), [self.collection], task_of, kind="rechunk",
                              name="rechunk",
                              nbytes=expected_nbytes(new, self._density, dtype, fmt))
        return SparseArray(blocks, self.shape, new, dtype, fmt, self._density)

    def _aligned(self, op: str, other: Array) -> tuple[SparseArray, Array]:
        """``self`` and ``other`` (of the same shape) cut at the same block boundaries."""
        if other.shape != self.shape:
            raise ValueError(
                f"{op}: shapes {self.shape} and {other.shape} differ; a sparse array combines "
                "elementwise with an operand of its own shape only (no broadcasting): "
                "broadcast the operand first, or use x.todense()")
        chunks = tuple(common_refinement(a, b)
                       for a, b in zip(self.chunks, other.chunks, strict=True))
        return self.rechunk(chunks), other.rechunk(chunks)

    # -- elementwise operations ------------------------------------------------------------

    def _unary(self, op: str, func: Callable) -> SparseArray:
        dtype = check_dtype(op, _probe(op, func, self))
        if op == "positive":
            return self
        return self._map(op, unary_block, [], (op,), dtype, self.format, self._density)

    def astype(self, dtype: Any, copy: bool = True, casting: str = "unsafe") -> SparseArray:
        """``x`` converted to ``dtype`` block by block (``casting`` as in NumPy).

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> x = tg.from_scipy(sps.csr_array(np.eye(2) * 1.5)).astype(np.int64)
        >>> x.dtype, x.to_scipy().toarray()
        (dtype('int64'), array([[1, 0],
               [0, 1]]))
        """
        dtype = check_dtype("astype", dtype)
        if not np.can_cast(self.dtype, dtype, casting=casting):
            raise TypeError(f"astype: cannot cast {self.dtype} to {dtype} under "
                            f"casting={casting!r}")
        if dtype == self.dtype:
            return self
        return self._map("astype", unary_block, [], ("astype",), dtype, self.format, self._density)

    def conj(self) -> SparseArray:
        """The complex conjugate, block by block (sparse); a real array itself (as
        ``numpy.ndarray.conj``).

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> tg.from_scipy(sps.csr_array(np.array([[1j, 0]]))).conj().to_scipy().toarray()
        array([[0.-1.j, 0.+0.j]])
        """
        if self.dtype.kind != "c":
            return self
        return self._unary("conjugate", np.conjugate)

    @property
    def real(self) -> SparseArray:
        """The real part (sparse).

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> tg.from_scipy(sps.csr_array(np.array([[1 + 2j, 0]]))).real.to_scipy().toarray()
        array([[1., 0.]])
        """
        return self._unary("real", np.real)

    @property
    def imag(self) -> SparseArray:
        """The imaginary part (sparse).

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> tg.from_scipy(sps.csr_array(np.array([[1 + 2j, 0]]))).imag.to_scipy().toarray()
        array([[2., 0.]])
        """
        return self._unary("imag", np.imag)

    def _wrap(self, other: Any) -> Any:
        """A SciPy sparse operand as a SparseArray (blocked as ``self`` when it can be)."""
        if not sps.issparse(other):
            return other
        same = getattr(other, "shape", None) == self.shape
        return from_scipy(other, chunks=self.chunks if same else "auto")

    def _add_sub(self, op: str, other: Any, reflected: bool) -> Array:
        func = np.add if op == "add" else np.subtract
        other = self._wrap(other)
        if isinstance(other, SparseArray):
            a, b = (other, self) if reflected else (self, other)
            dtype = check_dtype(op, _probe(op, func, a, b))
            a, b = a._aligned(op, b)
            return a._map(op, binary_block, [b], (op,), dtype, a.format,
                          union_density(a._density, b._density))
        if _scalar_like(other):
            raise TypeError(
                f"{op}: {'adding' if op == 'add' else 'subtracting'} a scalar to a sparse array "
                f"would make every implicit zero nonzero (shape {self.shape}, scalar "
                f"{other!r}); convert first: "
                f"x.todense() {'+' if op == 'add' else '-'} s")
        dense = asarray(other)
        return func(dense, self.todense()) if reflected else func(self.todense(), dense)

    def _multiply(self, other: Any) -> SparseArray:
        other = self._wrap(other)
        if _scalar_like(other):
            value = other.item() if isinstance(other, np.ndarray) else other
            if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Integral) \
                    and not np.isfinite(value):
                raise ValueError(
                    f"multiply: multiplying a sparse array by {value!r} would make its "
                    "implicit zeros NaN; convert first: x.todense() * s")
            dtype = check_dtype("multiply", _probe("multiply", np.multiply, self, value))
            return self._map("multiply", scalar_block, [], ("multiply", value), dtype,
                             self.format, self._density)
        if isinstance(other, SparseArray):
            dtype = check_dtype("multiply", _probe("multiply", np.multiply, self, other))
            a, b = self._aligned("multiply", other)
            density = None if a._density is None or b._density is None else \
                a._density * b._density
            return a._map("multiply", binary_block, [b], ("multiply",), dtype, a.format, density)
        dense = asarray(other)
        dtype = check_dtype("multiply", _probe("multiply", np.multiply, self, dense))
        a, b = self._aligned("multiply", dense)
        return a._map("multiply", binary_block, [b], ("multiply",), dtype, a.format, a._density)

    def _divide(self, other: Any) -> SparseArray:
        if not _scalar_like(other):
            kind = "a sparse array" if isinstance(other, SparseArray) or sps.issparse(other) \
                else f"an array of shape {getattr(other, 'shape', None) or np.shape(other)}"
            raise TypeError(
                f"true_divide: a sparse array divides by a nonzero scalar only, not by {kind} "
                "(its implicit zeros would give 0/0 = NaN); use x.todense() / y")
        value = other.item() if isinstance(other, np.ndarray) else other
        if value == 0 or value != value:
            raise ValueError(
                f"true_divide: dividing a sparse array by {value!r} would make its implicit "
                "zeros NaN; convert first: x.todense() / s")
        dtype = check_dtype("true_divide", _probe("true_divide", np.true_divide, self, value))
        return self._map("true_divide", scalar_block, [], ("divide", value), dtype, self.format,
                         self._density)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any
                        ) -> Any:
        from tilegraph.array.contraction import matmul

        if kwargs.get("out") is not None:
            raise TypeError(f"{ufunc.__name__}: out= is not supported on tilegraph arrays "
                            "(arrays are lazy; use the returned array)")
        kwargs.pop("out", None)
        if method == "reduce" and ufunc is np.add and len(inputs) == 1:
            extra = set(kwargs) - {"axis", "dtype", "keepdims"}
            if not extra:
                return self.sum(axis=kwargs.get("axis", 0), dtype=kwargs.get("dtype"),
                                keepdims=kwargs.get("keepdims", False))
        if method == "__call__" and not kwargs:
            if len(inputs) == 1 and ufunc in _UNARY:
                return self._unary(ufunc.__name__, ufunc)
            if len(inputs) == 2:
                a, b = inputs
                if ufunc is np.matmul:
                    a = from_scipy(a) if sps.issparse(a) else a
                    b = from_scipy(b) if sps.issparse(b) else b
                    return matmul(a, b)
                if ufunc in (np.add, np.subtract):
                    if isinstance(a, SparseArray):
                        return a._add_sub(ufunc.__name__, b, reflected=False)
                    return b._add_sub(ufunc.__name__, a, reflected=True)
                if ufunc is np.multiply:
                    return a._multiply(b) if isinstance(a, SparseArray) else b._multiply(a)
                if ufunc is np.true_divide:
                    if isinstance(a, SparseArray):
                        return a._divide(b)
                    raise TypeError(
                        "true_divide: dividing by a sparse array would divide by its implicit "
                        "zeros; use y / x.todense()")
        call = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        what = f" with {', '.join(sorted(kwargs))}=" if kwargs else ""
        raise TypeError(
            f"{call}{what} is not supported on sparse arrays (shape {self.shape}); supported: "
            "+, - and * with sparse or dense operands, * and / by scalars, unary -, abs, "
            "conj, @, sum; for anything else use x.todense()")

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        impl = _FUNCTIONS.get(func)
        if impl is None:
            raise TypeError(
                f"numpy.{func.__name__} is not supported on sparse arrays; use it on "
                "x.todense() (or call the method of the same name, where there is one)")
        return impl(*args, **kwargs)

    # -- shape -----------------------------------------------------------------------------

    def transpose(self, *axes: Any) -> SparseArray:
        """The transpose, block by block: block ``(i, j)`` of the result is block
        ``(j, i)`` transposed. The transpose of a CSR block is a CSC block without a copy
        (as in SciPy), so the result has the other format.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> x = tg.from_scipy(sps.csr_array(np.arange(6.0).reshape(2, 3)), chunks=2)
        >>> x.T.format, x.T.shape, x.T.to_scipy().toarray()[2]
        ('csc', (3, 2), array([2., 5.]))
        """
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list,
                                                                      np.ndarray))):
            axes = () if axes[0] is None else tuple(axes[0])
        perm = [1, 0]
        if axes:
            if len(axes) != 2:
                raise ValueError(f"transpose: axes {axes} do not match the 2 axes of a sparse "
                                 f"array of shape {self.shape}; give one entry per axis")
            perm = []
            for a in axes:
                a = operator.index(a)
                if not -2 <= a < 2:
                    raise np.exceptions.AxisError(
                        f"transpose: axis {a} is out of bounds for a sparse array of shape "
                        f"{self.shape} (2 axes)")
                perm.append(a % 2)
            if sorted(perm) != [0, 1]:
                raise ValueError(f"transpose: axes {axes} repeat an axis; they must be a "
                                 f"permutation of the 2 axes of shape {self.shape}")
        perm = tuple(perm)
        if perm == (0, 1):
            return self
        fmt = "csc" if self.format == "csr" else "csr"
        chunks = (self.chunks[1], self.chunks[0])
        blocks = _map_blocks(
            f"transpose-{tokenize('sparse-transpose', self)}", transpose_block,
            [self.collection], numblocks(chunks), [lambda c: (c[1], c[0])], kind="transpose",
            name="transpose", nbytes=expected_nbytes(chunks, self._density, self.dtype, fmt))
        return SparseArray(blocks, (self.shape[1], self.shape[0]), chunks, self.dtype, fmt,
                           self._density)

    def swapaxes(self, a: int, b: int) -> SparseArray:
        """Exchange the two axes (the transpose), or nothing when ``a`` and ``b`` are the
        same axis.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> tg.from_scipy(sps.csr_array(np.ones((2, 3)))).swapaxes(0, 1).shape
        (3, 2)
        """
        for ax in (a, b):
            if not -2 <= ax < 2:
                raise np.exceptions.AxisError(
                    f"swapaxes: axis {ax} is out of bounds for a sparse array of shape "
                    f"{self.shape}")
        return self if a % 2 == b % 2 else self.transpose()

    def __getitem__(self, index: Any) -> Array:
        raise TypeError(f"indexing a sparse array (shape {self.shape}) is not supported; "
                        "index its dense form: x.todense()[...]")

    def reshape(self, *shape: Any, **kwargs: Any) -> Array:
        raise TypeError(f"reshape: sparse arrays are 2-D and keep their shape {self.shape}; "
                        "reshape the dense form: x.todense().reshape(...)")

    def ravel(self) -> Array:
        raise TypeError(f"ravel: sparse arrays are 2-D and keep their shape {self.shape}; "
                        "ravel the dense form: x.todense().ravel()")

    def to_npy(self, path: str, **options: Any) -> None:
        raise TypeError(f"to_npy: a sparse array (shape {self.shape}) is written with "
                        "to_zarr, or made dense first: x.todense().to_npy(path)")

    # -- reductions and products -----------------------------------------------------------

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False,
            split_every: int = 8) -> Array:
        """Sum over ``axis`` (None, 0, 1 or a tuple), like ``numpy.sum`` on the dense
        array: a dense Array, made as a tree reduction of the blocks' sums.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> x = tg.from_scipy(sps.csr_array(np.arange(6).reshape(2, 3)), chunks=2)
        >>> x.sum().compute(), x.sum(axis=1).compute()
        (np.int64(15), array([ 3, 12]))
        """
        import tilegraph.array.reductions as reductions

        if dtype is not None:
            check_dtype("sum", dtype)
        out_dtype = reductions.reduce_dtype(lambda b: np.sum(b, dtype=dtype), self, dtype)
        chunk = partial(sum_block, out_dtype)
        return reductions.reduction(self, "sum", chunk, np.add, identity, axis, keepdims,
                                    out_dtype, split_every, params=("sparse",))

    def dot(self, other: Any) -> Array:
        """``numpy.dot``: the matrix product with a 1-D or 2-D operand, a product with a
        scalar.

        >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
        >>> tg.from_scipy(sps.csr_array(np.eye(2))).dot(np.array([3.0, 4.0])).compute()
        array([3., 4.])
        """
        from tilegraph.array.contraction import dot

        return dot(self, other)


def _dense_method(name: str) -> Callable:
    def method(self: SparseArray, *args: Any, **kwargs: Any) -> Array:
        return getattr(self.todense(), name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = (f"Like ``numpy.ndarray.{name}``, computed on the dense form "
                      "(``x.todense()``), block by block.")
    return method


for _name in ("prod", "mean", "var", "std", "min", "max", "argmin", "argmax", "any", "all"):
    setattr(SparseArray, _name, _dense_method(_name))

_UNARY = {np.negative, np.positive, np.absolute, np.conjugate}


def _np_dot(a: Any, b: Any, out: Any = None) -> Array:
    from tilegraph.array.contraction import dot

    if out is not None:
        raise TypeError("dot: out= is not supported on tilegraph arrays")
    return dot(a, b)


_FUNCTIONS: dict[Callable, Callable] = {
    np.sum: lambda x, axis=None, dtype=None, keepdims=False: x.sum(axis, dtype, keepdims),
    np.transpose: lambda x, axes=None: x.transpose(axes),
    np.swapaxes: lambda x, a, b: x.swapaxes(a, b),
    np.dot: _np_dot,
    np.shape: lambda x: x.shape,
    np.ndim: lambda x: x.ndim,
    np.size: lambda x, axis=None: x.size if axis is None else x.shape[axis],
    np.real: lambda x: x.real,
    np.imag: lambda x: x.imag,
    **{getattr(np, n): _dense_method(n) for n in ("prod", "mean", "var", "std", "min", "max",
                                                  "argmin", "argmax", "any", "all")},
}


# -- making sparse arrays -----------------------------------------------------------------


def from_scipy(matrix: Any, chunks: Any = "auto", format: str | None = None) -> SparseArray:
    """A SparseArray over the ``scipy.sparse`` matrix or array ``matrix`` (any format).

    The matrix is converted once to CSR (or CSC with ``format="csc"``; the default keeps a
    CSC matrix CSC and makes anything else CSR); each block is a slice of it, made by its
    own load task. ``chunks`` is as for :func:`tilegraph.from_numpy`.

    >>> import numpy as np, scipy.sparse as sps, tilegraph as tg
    >>> m = sps.coo_array(np.diag([1.0, 2.0, 3.0]))
    >>> x = tg.from_scipy(m, chunks=2)
    >>> x.format, x.chunks
    ('csr', ((2, 1), (2, 1)))
    >>> x.sum(axis=0).compute()
    array([1., 2., 3.])
    """
    if not sps.issparse(matrix):
        raise TypeError(
            f"from_scipy: expected a scipy.sparse matrix or array, got "
            f"{type(matrix).__module__}.{type(matrix).__name__}; use tilegraph.from_numpy "
            "for dense arrays (or wrap it: scipy.sparse.csr_array(x))")
    if matrix.ndim != 2:
        raise ValueError(f"from_scipy: sparse arrays are 2-D only, got a {matrix.ndim}-D "
                         f"{type(matrix).__name__} of shape {matrix.shape}")
    if format is None:
        format = "csc" if matrix.format == "csc" else "csr"
    fmt = check_format("from_scipy", format)
    dtype = check_dtype("from_scipy", matrix.dtype)
    mat = BLOCK_CLASSES[fmt](matrix)
    shape = tuple(int(s) for s in mat.shape)
    chunks = normalize_chunks(chunks, shape, dtype)
    size = shape[0] * shape[1]
    density = min(1.0, mat.nnz / size) if size else 0.0
    name = unique_name("from-scipy")
    roff, coff = offsets(chunks[0]), offsets(chunks[1])
    blocks = source(
        name, numblocks(chunks),
        lambda c: (load_block, (mat, roff[c[0]], roff[c[0] + 1], coff[c[1]], coff[c[1] + 1])),
        kind="load", name="from_scipy", nbytes=expected_nbytes(chunks, density, dtype, fmt),
        repeatable=True)  # a slice of the matrix the plan holds
    return SparseArray(blocks, shape, chunks, dtype, fmt, density)
