"""The op-kind registry: everything the planner and the executor know about a kind of task.

Every task of a :class:`~tilegraph.graph.TaskGraph` may carry a ``kind`` (metadata column).
One :class:`OpKind` row per kind says how fusion, placement, memory admission, ``explain`` and
the simulator treat its tasks, so that all of them reason with the same facts:

==================  ===========================================================================
field               meaning
==================  ===========================================================================
``blockwise``       works on one region of an array, block by block (elementwise ops, views,
                    per-block reductions, loads and stores)
``fuse_producer``   may be inlined into its single consumer (:mod:`tilegraph.plan.fuse`)
``fuse_consumer``   may absorb its producers
``absorbs_views``   may take a view of its input inside itself (a transposed block read by a
                    matrix product), even when it absorbs nothing else
``placement``       the placement rule (:mod:`tilegraph.plan.place`): ``"grid"`` (2-D block
                    cyclic grid of output coordinates), ``"vector"`` (where the largest
                    input lives), ``"gather"`` (the worker gathering results) or
                    ``"producers"`` (the cheapest of the producers' workers); ``"at-start"``:
                    the process is chosen when the task starts, once its inputs' sizes are
                    known (:func:`tilegraph.plan.place.choose_on_start`; planned as
                    ``"producers"``)
``temp_factor``     temporary memory besides inputs and output, as a multiple of the output's
                    bytes (:func:`tilegraph.graph.memory.task_estimates`)
``view``            the step makes no new block in memory (a view of its input, or a write of
                    it to the output): a fused chain's working set does not count its output
                    (:mod:`tilegraph.plan.fuse`)
``chain_temporaries``  a fused chain of this kind makes one more temporary per fused step
``overwrites``      the position of the argument the kernel may write over in place (an
                    accumulator, a tile updated step after step), or None; a call with
                    ``copy=True`` writes nothing. The executor keeps such an input intact
                    for a retry (:meth:`tilegraph.graph.TaskGraph.overwritten`)
``releases_gil``    the task body is a BLAS/LAPACK or NumPy-heavy call that releases the GIL:
                    worth a second thread even when short
``flops``           the flop count of one task from its block sizes, or None (see each row)
``remake``          making a result of this kind again costs less than writing it to disk and
                    reading it back (a read from its file, a random or constant block, a view,
                    a cast, a rechunk's pieces, a cheap elementwise step): under memory
                    pressure the memory manager drops such a result and the executor makes it
                    again when it is needed, through its chain back to its sources, provided
                    the whole chain is of such steps, ``repeatable``, and cheaper to make
                    again than to spill (:mod:`tilegraph.graph.remake`)
``repeatable``      run again on the same inputs, a step of this kind gives the same result: a
                    function of its inputs alone, writing over none of them and with no side
                    effect; a source of this kind (no inputs) gives the same block again. A
                    task may say otherwise in its ``repeatable`` column: a read proves it (a
                    file or store whose fingerprint every read checks) or the user declares it
                    (``from_array(..., repeatable=True)``). A result is remade only when its
                    whole chain to its sources is repeatable
                    (:meth:`tilegraph.graph.TaskGraph.repeatable`); otherwise it is spilled
                    (or kept), never read again from a source that may have changed
==================  ===========================================================================

A kind that is not ``repeatable`` says why in :func:`unrepeatable_reason` (shown by
``explain()`` and the run summary beside the blocks spilled rather than remade).

Tasks without a kind (opaque tasks, e.g. of dask dict graphs) get the row ``"other"``. A
front end that emits a new kind registers it first with :func:`register_kind`;
:class:`~tilegraph.graph.GraphBuilder` rejects kinds that are not registered.

>>> kind_info("product").placement, kind_info("product").flops(2, 3, 4)
('grid', 48.0)
>>> kind_info(None).name
'other'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class OpKind:
    """One row of the registry; see the module docstring for the fields."""

    name: str
    blockwise: bool = False
    fuse_producer: bool = False
    fuse_consumer: bool = False
    placement: str = "producers"
    temp_factor: float = 1.0
    chain_temporaries: bool = False
    view: bool = False
    overwrites: int | None = None
    releases_gil: bool = False
    flops: Callable[..., float] | None = None
    remake: bool = False
    absorbs_views: bool = False
    repeatable: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"OpKind: name must be a non-empty str, got {self.name!r}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"OpKind {self.name!r}: placement must be one of "
                             f"{', '.join(PLACEMENTS)}, got {self.placement!r}")
        if not isinstance(self.temp_factor, (int, float)) or not self.temp_factor >= 0:
            raise ValueError(f"OpKind {self.name!r}: temp_factor must be a number >= 0, "
                             f"got {self.temp_factor!r}")
        if self.overwrites is not None and (isinstance(self.overwrites, bool) or not isinstance(
                self.overwrites, int) or self.overwrites < 0):
            raise ValueError(f"OpKind {self.name!r}: overwrites must be an argument position "
                             f"(an int >= 0) or None, got {self.overwrites!r}")
        if self.flops is not None and not callable(self.flops):
            raise ValueError(f"OpKind {self.name!r}: flops must be callable or None")
        for flag in ("remake", "repeatable"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"OpKind {self.name!r}: {flag} must be a bool, got "
                                 f"{getattr(self, flag)!r}")


PLACEMENTS = ("grid", "vector", "gather", "producers", "at-start")
OTHER = "other"


def matmul_flops(m: float, k: float, n: float) -> float:
    """Flops of ``(m x k) @ (k x n)``: one multiply and one add per term."""
    return 2.0 * m * k * n


def potrf_flops(n: float) -> float:
    """Flops of the Cholesky factorisation of an ``n x n`` block."""
    return n**3 / 3.0


def trsm_flops(m: float, n: float) -> float:
    """Flops of solving ``m`` rows against an ``n x n`` triangle."""
    return float(m) * n * n


def syrk_flops(n: float, k: float) -> float:
    """Flops of the symmetric ``n x n`` update by an ``n x k`` block (one triangle)."""
    return float(n) * n * k


def qr_flops(m: float, n: float) -> float:
    """Flops of the QR factorisation of an ``m x n`` block with its explicit Q."""
    return 4.0 * m * n * n


def lu_flops(m: float, n: float) -> float:
    """Flops of the LU factorisation of an ``m x n`` panel (``m >= n``)."""
    return float(m) * n * n - n**3 / 3.0


def _blockwise(name: str, temp_factor: float, chain: bool = False,
               placement: str = "producers", view: bool = False, remake: bool = True,
               repeatable: bool = True) -> OpKind:
    return OpKind(name, blockwise=True, fuse_producer=True, fuse_consumer=True,
                  placement=placement, temp_factor=temp_factor, chain_temporaries=chain,
                  view=view, remake=remake, repeatable=repeatable)


_ROWS = (
    # opaque tasks (no kind): never fused, placed with their producers
    OpKind(OTHER),
    # sources and views: no temporaries. A load is repeatable only where its task proves it
    # (its ``repeatable`` column: from_npy, from_zarr, a memory map, in-memory data) or the
    # user declares it; a random block is always seeded (tilegraph.array.random)
    _blockwise("load", 0.0, repeatable=False),
    _blockwise("creation", 0.0),
    _blockwise("random", 0.0),
    _blockwise("getitem", 0.0, view=True),
    _blockwise("transpose", 0.0, view=True),
    _blockwise("reshape", 0.0, view=True),
    _blockwise("astype", 0.0),
    _blockwise("store", 0.0, placement="gather", view=True, remake=False, repeatable=False),
    # blockwise computations: about one temporary block per step of a fused chain
    _blockwise("elementwise", 1.0, chain=True),
    # a user's function: its cost is unknown, and it may not give the same block again
    _blockwise("map", 1.0, chain=True, remake=False, repeatable=False),
    _blockwise("partial", 1.0, chain=True),
    # reductions and block rearrangements
    OpKind("reduce", fuse_producer=True, temp_factor=1.0, repeatable=True),
    OpKind("aggregate", fuse_producer=True, fuse_consumer=True, temp_factor=0.0,
           repeatable=True),
    OpKind("rechunk", fuse_producer=True, fuse_consumer=True, temp_factor=0.0, remake=True,
           repeatable=True),
    # a block's pieces written to a rechunk's intermediate store on disk (file writes run
    # without the GIL): its result is a handle of a few bytes read by many loads, never
    # inlined into them
    OpKind("stage", fuse_consumer=True, temp_factor=0.0, releases_gil=True),
    # sorting a block, cutting it at splitters, merging sorted pieces (NumPy's sorts run
    # without the GIL)
    OpKind("sort", fuse_producer=True, temp_factor=1.0, releases_gil=True, repeatable=True),
    # the group-by-join of a contraction: the tasks of output block (i, j) on the grid
    # (both take views of their operands inside: a transposed block in the product); the
    # accumulation steps also fold a reduction's large partials into one accumulator per
    # worker (tilegraph.algebra.blocks.reduce_by_key), in place
    OpKind("product", fuse_producer=True, placement="grid", temp_factor=0.0,
           releases_gil=True, flops=matmul_flops, absorbs_views=True, repeatable=True),
    OpKind("accumulate", fuse_producer=True, placement="grid", temp_factor=0.0,
           overwrites=0, releases_gil=True, flops=matmul_flops, absorbs_views=True),
    # a contraction with a one-block-dimension output: each product where its larger
    # operand's block lives, a tree of small partial sums; views of its operands (a
    # transposed block) fuse into it
    OpKind("partial_product", fuse_consumer=True, placement="vector", temp_factor=0.0,
           releases_gil=True, flops=matmul_flops, repeatable=True),
    # the block kernels of the factorisations: ScaLAPACK's 2-D block-cyclic layout
    OpKind("potrf", placement="grid", temp_factor=0.0, releases_gil=True, flops=potrf_flops,
           repeatable=True),
    # (trsm, syrk and gemm update a tile in place unless called with copy=True)
    OpKind("trsm", placement="grid", temp_factor=0.0, overwrites=1, releases_gil=True,
           flops=trsm_flops),
    OpKind("syrk", placement="grid", temp_factor=0.0, overwrites=0, releases_gil=True,
           flops=syrk_flops),
    OpKind("gemm", placement="grid", temp_factor=0.0, overwrites=0, releases_gil=True,
           flops=matmul_flops),
    OpKind("qr", temp_factor=1.0, releases_gil=True, flops=qr_flops, repeatable=True),
    OpKind("lu", temp_factor=1.0, releases_gil=True, flops=lu_flops, repeatable=True),
    OpKind("svd", temp_factor=1.0, releases_gil=True, repeatable=True),
    # sparse arrays: blocks gathered into one, and sparse blocks made dense
    OpKind("assemble", temp_factor=1.0, repeatable=True),
    OpKind("todense", temp_factor=1.0, repeatable=True),
    # a step of a program run in a worker process's namespace (a script's statement, see
    # tilegraph.autopar.processes): the thread driving it only waits, its result here is a
    # few bytes
    OpKind("statement", placement="at-start", temp_factor=0.0, releases_gil=True),
)

KINDS: dict[str, OpKind] = {row.name: row for row in _ROWS}

# why the kinds that are not repeatable are not (see unrepeatable_reason)
_UNREPEATABLE = {
    OTHER: "an opaque task (no op kind): nothing says it gives the same result again",
    "load": "a read from a source that does not prove it gives the same block again "
            "(from_npy and from_zarr check their files at every read; from_array of any "
            "other object needs repeatable=True)",
    "store": "it writes its block out (a side effect)",
    "map": "it runs a user's function, which may not give the same block again",
    "stage": "it writes to a rechunk's intermediate store (a side effect)",
    "statement": "it runs a statement of a script (side effects)",
}


def unrepeatable_reason(kind: str | None) -> str:
    """Why a task of ``kind`` may not give the same result when run again (``""`` for a
    repeatable kind).

    >>> unrepeatable_reason("map")
    "it runs a user's function, which may not give the same block again"
    >>> unrepeatable_reason("gemm")
    'it writes over its input in place'
    >>> unrepeatable_reason("random")
    ''
    """
    row = kind_info(kind)
    if row.repeatable:
        return ""
    if row.name in _UNREPEATABLE:
        return _UNREPEATABLE[row.name]
    if row.overwrites is not None:
        return "it writes over its input in place"
    return f"op kind {row.name!r} is not declared repeatable"


def kind_info(kind: str | None) -> OpKind:
    """The registry row of ``kind`` (``None``: the row ``"other"``).

    >>> kind_info("nonesuch")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown op kind 'nonesuch'; known kinds: accumulate, aggregate, ...
    """
    if kind is None:
        return KINDS[OTHER]
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown op kind {kind!r}; known kinds: "
                         f"{', '.join(sorted(KINDS))}") from None


def register_kind(kind: OpKind) -> None:
    """Add a row for a new kind (front ends with kernels of their own). Registering the same
    row again is allowed; a different row under a registered name is rejected."""
    if not isinstance(kind, OpKind):
        raise TypeError(f"register_kind: needs an OpKind, got {type(kind).__name__}")
    known = KINDS.get(kind.name)
    if known is not None and known != kind:
        raise ValueError(f"register_kind: op kind {kind.name!r} is already registered as "
                         f"{known}; choose another name")
    KINDS[kind.name] = kind
