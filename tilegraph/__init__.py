"""tilegraph: scalable array and tensor programs as task graphs over blocks.

The names of the package are loaded when first used (the NumPy-like API of
:mod:`tilegraph.array`, LambdaPACK, the graph types, the pipeline's entry points), so that
a command that needs no arrays (``tilegraph autopar``, ``tilegraph worker``, a service job)
does not pay for importing them.

>>> import tilegraph
>>> from operator import add
>>> tilegraph.get({"a": 1, "b": (add, "a", 41)}, "b")
42
"""

import importlib as _importlib
from typing import Any as _Any

from tilegraph import config as config

__version__ = "0.1.0"

# name -> module it comes from (a module itself when the name is the module's last part)
_NAMES = {
    "lambdapack": "tilegraph.lambdapack",
    "array": "tilegraph.array",  # the package, which called is dask's da.array(...)
    "array_api": "tilegraph.array.array_api",
    "linalg": "tilegraph.array.linalg",
    "random": "tilegraph.array.random",
    "fft": "tilegraph.array.fft",
    "stats": "tilegraph.array.stats",
    "sparse": "tilegraph.array.sparse",
    "CycleError": "tilegraph.graph",
    "GraphBuilder": "tilegraph.graph",
    "GraphError": "tilegraph.graph",
    "TaskGraph": "tilegraph.graph",
    "PlanTooLargeError": "tilegraph.pipeline",
    "get": "tilegraph.pipeline",
    "last_run": "tilegraph.pipeline",
    "run": "tilegraph.pipeline",
    "MemoryLimitError": "tilegraph.runtime",
    "subscribe": "tilegraph.runtime",
    "Client": "tilegraph.service.client",
}


def _array() -> _Any:
    return _importlib.import_module("tilegraph.array")


def __getattr__(name: str) -> _Any:
    module = _NAMES.get(name)
    if module is not None:
        mod = _importlib.import_module(module)
        value = mod if module.rsplit(".", 1)[-1] == name else getattr(mod, name)
    elif name == "__all__":
        value = list(_array().__all__)
    else:
        array = _array()
        if name not in array.__all__:
            raise AttributeError(f"module 'tilegraph' has no attribute {name!r}")
        value = getattr(array, name)
    globals()[name] = value   # found once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_array().__all__})
