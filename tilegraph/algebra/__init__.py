"""The tensor algebra: block-keyed collections and their operators (see ``blocks``), and
task grids, tiled algorithms as loop programs over block coordinates (see ``grid``); the
block kernels of linear algebra (``linalg_kernels``) and the singular values of a band
matrix by band reduction (``band``)."""

from tilegraph.algebra.blocks import (
    Blocks,
    apply_blocks,
    flat_map,
    group_by_join,
    join,
    map_blocks,
    reduce_by_key,
    remap,
    remap_by,
    source,
)
from tilegraph.algebra.demand import lower
from tilegraph.algebra.grid import Kernel, TaskGrid, TaskRecord, task_grid
from tilegraph.algebra.semiring import (
    MAX_PLUS,
    MAX_TIMES,
    MIN_PLUS,
    OR_AND,
    PLUS_TIMES,
    SEMIRINGS,
    Semiring,
)

__all__ = [
    "MAX_PLUS",
    "MAX_TIMES",
    "MIN_PLUS",
    "OR_AND",
    "PLUS_TIMES",
    "SEMIRINGS",
    "Blocks",
    "Kernel",
    "Semiring",
    "TaskGrid",
    "TaskRecord",
    "apply_blocks",
    "flat_map",
    "group_by_join",
    "join",
    "lower",
    "map_blocks",
    "reduce_by_key",
    "remap",
    "remap_by",
    "source",
    "task_grid",
]
