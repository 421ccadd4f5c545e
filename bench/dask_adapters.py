"""dask.array as a competitor of the workload suite: the programs of
:mod:`tilegraph.workloads.programs` run unchanged on dask arrays made by :class:`DaskInputs`,
with :class:`DaskSparse` for SciPy-sparse blocks and :class:`DaskLinalg` for the linear
algebra programs. dask is imported only when these run (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.workloads import DENSITY, Workload


def run_dask(wl: Workload, size: int, block: int | None = None) -> Any:
    """The program of ``wl`` with dask.array and its threaded scheduler, on inputs made by
    :class:`DaskInputs` (ImportError if dask is not installed)."""
    try:
        import dask
    except ImportError as exc:
        raise ImportError("dask is not installed: pip install -e '.[bench]'") from exc
    args, kwargs = wl.inputs(DaskInputs(), size, block)
    if "linalg" in inspect.signature(wl.program).parameters:
        kwargs = {**kwargs, "linalg": DaskLinalg}
    out = wl.program(*args, **kwargs)
    if isinstance(out, tuple):
        return tuple(dask.compute(*out, scheduler="threads"))
    return dask.compute(out, scheduler="threads")[0]


class DaskLinalg:
    """``cholesky``, ``qr`` and ``svd`` of dask arrays as the linear algebra programs call
    them: ``cholesky`` returns the lower factor (as NumPy's does)."""

    @staticmethod
    def cholesky(a: Any) -> Any:
        import dask.array as da

        return da.linalg.cholesky(a, lower=True)

    @staticmethod
    def qr(a: Any) -> Any:
        import dask.array as da

        return da.linalg.qr(a)

    @staticmethod
    def svd(a: Any, full_matrices: bool = False) -> Any:
        import dask.array as da

        if full_matrices:
            raise ValueError("dask.array.linalg.svd gives the thin SVD only: use "
                             "full_matrices=False")
        return da.linalg.svd(a)


def _seed_block(seed: int, coord: tuple[int, ...]) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=coord))


def _sparse_block(density: float, seed: int, block_info: Any = None) -> Any:
    import scipy.sparse

    info = block_info[None]
    rng = _seed_block(seed, tuple(info["chunk-location"]))
    return scipy.sparse.random_array(tuple(info["chunk-shape"]), density=density, rng=rng,
                                     format="csr")


class DaskInputs:
    """Lazy dask arrays; sparse inputs are dask arrays of SciPy sparse blocks."""

    system = "dask"

    def random(self, shape: tuple[int, ...], chunks: Any, seed: int) -> Any:
        import dask.array as da

        return da.random.default_rng(seed).random(shape, chunks=chunks)

    def full(self, shape: tuple[int, ...], value: float, chunks: Any) -> Any:
        import dask.array as da

        return da.full(shape, value, chunks=chunks)

    def eye(self, n: int, chunks: Any) -> Any:
        import dask.array as da

        return da.eye(n, chunks=chunks[0] if isinstance(chunks, tuple) else chunks)

    def sparse_random(self, shape: tuple[int, int], chunks: Any, seed: int) -> Any:
        import dask.array as da
        import scipy.sparse
        from dask.array.core import normalize_chunks

        chunks = normalize_chunks(chunks, shape, dtype=np.float64)
        arr = da.map_blocks(_sparse_block, DENSITY, seed, chunks=chunks,
                            dtype=np.float64, meta=scipy.sparse.csr_array((0, 0)))
        return DaskSparse(arr)

    def from_scipy(self, matrix: Any, chunks: Any) -> Any:
        import dask.array as da

        return DaskSparse(da.from_array(matrix.tocsr(), chunks=chunks, asarray=False))


def _block_products(a_blocks: Sequence[Any], b_blocks: Sequence[Any]) -> np.ndarray:
    out = None
    for a, b in zip(a_blocks, b_blocks, strict=True):
        p = np.asarray(a @ b)
        out = p if out is None else out + p
    return out


def _block_sums(blocks: Sequence[Any], axis: int) -> np.ndarray:
    return sum(np.asarray(b.sum(axis=axis)).ravel() for b in blocks)


class DaskSparse:
    """A dask array of SciPy sparse blocks with the operations the sparse programs use:
    ``@`` a dense dask array, ``.T``, ``sum(axis=)`` and ``*`` (elementwise, by a scalar or
    a dense dask array of the same blocks). dask.array's own matmul and reductions do not
    take SciPy sparse blocks, so these are written with ``dask.array.blockwise``."""

    def __init__(self, array: Any):
        self.array = array

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def T(self) -> DaskSparse:
        return DaskSparse(self.array.T)

    def __matmul__(self, other: Any) -> Any:
        import dask.array as da

        other = other.rechunk({0: self.array.chunks[1]})
        if other.ndim == 1:
            return (self @ other.reshape(-1, 1)).reshape(-1)
        return da.blockwise(_block_products, "ij", self.array, "ik", other, "kj",
                            concatenate=False, dtype=np.result_type(self.array.dtype, other.dtype),
                            meta=np.empty((0, 0)))

    def __mul__(self, other: Any) -> DaskSparse:
        return DaskSparse(self.array * other)

    __rmul__ = __mul__

    def sum(self, axis: int | None = None) -> Any:
        import dask.array as da

        if axis is None:
            return self.sum(axis=0).sum()
        axis = axis % 2
        return da.blockwise(_block_sums, "j" if axis == 0 else "i", self.array, "ij",
                            axis=axis, concatenate=False, dtype=self.array.dtype,
                            meta=np.empty((0,)))
