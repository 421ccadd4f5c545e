"""The names of ``dask.array`` that tilegraph answers with a pointer rather than an
implementation: each raises a ``TypeError`` naming what to use instead (the reason is in
its message and in docs/parity.md). They exist so that a program ported from dask fails at
the line that uses them, with the fix, and never computes anything behind the caller's
back. Also the namespace helpers dask has beside its functions: ``lib.stride_tricks``,
the dtype and constant names, ``atop``.

>>> import tilegraph as tg
>>> try:
...     tg.from_delayed(None, (2,), float)
... except TypeError as exc:
...     print(str(exc)[:45])
from_delayed: tilegraph has no delayed values
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np

from tilegraph.array.windows import sliding_window_view

REFUSED: dict[str, str] = {
    "from_delayed": "tilegraph has no delayed values; make the dask array and fold it "
                    "into a tilegraph plan without computing it: "
                    "tg.from_dask(dask.array.from_delayed(value, shape, dtype))",
    "from_tiledb": "TileDB is not a dependency of tilegraph; read the open TileDB array "
                   "block by block with tg.from_array(tiledb.open(uri))",
    "to_tiledb": "TileDB is not a dependency of tilegraph; write into the open TileDB "
                 "array with tg.store(x, tiledb.open(uri, 'w'))",
    "frompyfunc": "tilegraph blocks hold no Python objects (object dtype); give the "
                  "function a dtype: tg.gufunc(func, signature='()->()', vectorize=True, "
                  "output_dtypes=...), or tg.map_blocks(np.vectorize(func, otypes=[...]), x)",
    "register_chunk_type": "tilegraph's blocks are NumPy arrays (or scipy.sparse for "
                           "tg.SparseArray), not a registry of types; wrap other arrays "
                           "with tg.from_array",
}


def _refusal(name: str) -> Any:
    message = f"{name}: {REFUSED[name]}"

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(message)

    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = f"Not in tilegraph: {REFUSED[name]}."
    return refused


FUNCTIONS = {name: _refusal(name) for name in REFUSED}

# ``dask.array.lib.stride_tricks``
lib = SimpleNamespace(stride_tricks=SimpleNamespace(sliding_window_view=sliding_window_view))

# the dtype and constant names of dask.array (NumPy's)
DTYPES = {name: getattr(np, name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128")}
CONSTANTS = {"e": math.e, "euler_gamma": np.euler_gamma, "inf": math.inf, "nan": math.nan,
             "pi": math.pi, "newaxis": None}


def atop(*args: Any, **kwargs: Any) -> Any:
    """dask's old name of :func:`tilegraph.blockwise` (deprecated there too)."""
    from tilegraph.array.blockwise import blockwise

    warnings.warn("atop is the old name of blockwise; use tilegraph.blockwise",
                  FutureWarning, stacklevel=2)
    return blockwise(*args, **kwargs)


# Array methods of dask with no tilegraph meaning, and what to use instead
REFUSED_METHODS: dict[str, str] = {
    "to_delayed": "tilegraph has no delayed values; x.to_dask().to_delayed() gives dask's "
                  "delayed blocks of the same plan",
    "to_dask_dataframe": "tilegraph has no dataframes; x.to_dask().to_dask_dataframe() "
                         "makes dask's from the same plan",
    "to_tiledb": "TileDB is not a dependency of tilegraph; tg.store(x, tiledb.open(uri, "
                 "'w'))",
    "to_svg": "tilegraph draws task graphs, not block diagrams: x.visualize('plan.svg'), "
              "or x._repr_html_() in a notebook",
    "to_backend": "tilegraph's blocks are NumPy arrays (no CuPy backend); "
                  "x.map_blocks(converter) converts each block",
}


def _refused_method(name: str) -> Any:
    message = f"Array.{name}: {REFUSED_METHODS[name]}"

    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(message)

    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = f"Not in tilegraph: {REFUSED_METHODS[name]}."
    return refused


METHODS = {name: _refused_method(name) for name in REFUSED_METHODS}
