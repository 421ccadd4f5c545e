"""NumPy functions that dispatch to tilegraph through ``__array_function__``: calling
``np.sum(x)``, ``np.concatenate([x, y])`` or ``np.einsum(...)`` on tilegraph arrays builds a
lazy tilegraph array. Functions not listed here raise NumPy's TypeError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tilegraph.array import contraction, elementwise, manipulation, reductions


def _method(name: str) -> Callable:
    def call(x: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(x, name)(*args, **kwargs)

    return call


IMPLEMENTATIONS: dict[Callable, Callable] = {
    np.sum: reductions.sum, np.prod: reductions.prod, np.mean: reductions.mean,
    np.var: reductions.var, np.std: reductions.std, np.min: reductions.min,
    np.max: reductions.max, np.amin: reductions.min, np.amax: reductions.max,
    np.argmin: reductions.argmin, np.argmax: reductions.argmax, np.any: reductions.any,
    np.all: reductions.all,
    np.transpose: lambda x, axes=None: manipulation.transpose(x, axes),
    np.swapaxes: manipulation.swapaxes, np.reshape: _method("reshape"),
    np.ravel: _method("ravel"), np.concatenate: manipulation.concatenate,
    np.stack: manipulation.stack, np.where: elementwise.where,
    np.matmul: contraction.matmul, np.dot: contraction.dot,
    np.tensordot: contraction.tensordot, np.einsum: contraction.einsum,
    np.outer: contraction.outer,
    np.real: lambda x: elementwise.elemwise(np.real, x, name="real"),
    np.imag: lambda x: elementwise.elemwise(np.imag, x, name="imag"),
    np.round: lambda x, decimals=0: elementwise.elemwise(np.round, x, decimals, name="round"),
    np.clip: lambda x, a_min=None, a_max=None: elementwise.elemwise(
        np.clip, x, a_min, a_max, name="clip"),
}
