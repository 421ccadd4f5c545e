"""The data types of the Array API namespace (:mod:`tilegraph.array.array_api`): the dtype
and constant names, the data type functions (``astype``, ``can_cast``, ``finfo``,
``iinfo``, ``isdtype``, ``result_type``), the inspection namespace
(``__array_namespace_info__``), and the two checks every function of the namespace makes of
its ``device=`` and ``dtype=`` (:func:`check_device`, :func:`dtype_or_none`).

>>> from tilegraph.array import array_api as xp
>>> xp.can_cast(xp.int8, xp.int64), xp.can_cast(xp.int64, xp.float64)
(True, False)
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

import numpy as np

from tilegraph.array.core import Array

__all__ = [
    "__array_namespace_info__", "astype", "bool", "can_cast", "complex64", "complex128", "e",
    "finfo", "float32", "float64", "iinfo", "inf", "int8", "int16", "int32", "int64",
    "isdtype", "nan", "newaxis", "pi", "result_type", "uint8", "uint16", "uint32", "uint64",
]

# -- data types and constants -------------------------------------------------------------------

bool = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32,
                                                       np.uint64))
float32, float64 = np.dtype(np.float32), np.dtype(np.float64)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

e, inf, nan, pi = math.e, math.inf, math.nan, math.pi
newaxis = None

_DEFAULTS = {"real floating": float64, "complex floating": complex128, "integral": int64,
             "indexing": int64}


def check_device(device: Any) -> None:
    """Refuse a ``device=`` other than the one tilegraph arrays live on (``"cpu"``)."""
    if device not in (None, "cpu"):
        raise ValueError(f"unknown device {device!r}: tilegraph arrays live on 'cpu'")


def dtype_or_none(dtype: Any) -> Any:
    """``dtype`` as a NumPy dtype, ``None`` (the function's default) as it is."""
    return None if dtype is None else np.dtype(dtype)


# -- data type functions -----------------------------------------------------------------------


def astype(x: Array, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None
           ) -> Array:
    """``x`` converted to ``dtype``."""
    check_device(device)
    return x.astype(dtype, copy=copy)


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    """Whether ``from_`` (a dtype or an array) promotes to ``to`` (no casts between bools,
    integers and floating types, as in the standard's promotion lattice)."""
    if isinstance(from_, Array):
        from_ = from_.dtype
    f, t = np.dtype(from_), np.dtype(to)
    # the standard's promotion lattice: bools, integers and floating types apart
    group = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 2}
    if group[f.kind] != group[t.kind]:
        return False
    return builtins.bool(np.result_type(f, t) == t)


def finfo(type: Any, /) -> Any:
    """Machine limits of a floating dtype."""
    info = np.finfo(type.dtype if isinstance(type, Array) else type)
    return namedtuple("finfo", "bits eps max min smallest_normal dtype")(
        info.bits, float(info.eps), float(info.max), float(info.min),
        float(info.smallest_normal), info.dtype)


def iinfo(type: Any, /) -> Any:
    """Machine limits of an integer dtype."""
    info = np.iinfo(type.dtype if isinstance(type, Array) else type)
    return namedtuple("iinfo", "bits max min dtype")(info.bits, int(info.max), int(info.min),
                                                    info.dtype)


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is of ``kind`` (a dtype, a kind name or a tuple of them)."""
    return builtins.bool(np.isdtype(dtype, kind))


def result_type(*arrays_and_dtypes: Any) -> Any:
    """The dtype the promotion rules give for the arguments."""
    parts = [a.dtype if isinstance(a, Array) else a for a in arrays_and_dtypes]
    return np.result_type(*parts)


# -- inspection ----------------------------------------------------------------------------------


class _Info:
    """What :func:`__array_namespace_info__` reports."""

    def capabilities(self) -> dict:
        """Boolean indexing and data-dependent shapes are supported (sizes computed
        first)."""
        return {"boolean indexing": True, "data-dependent shapes": True}

    def default_device(self) -> str:
        """The one device, ``"cpu"``."""
        return "cpu"

    def devices(self) -> list[str]:
        """The devices: ``["cpu"]``."""
        return ["cpu"]

    def default_dtypes(self, *, device: Any = None) -> dict:
        """The default dtypes."""
        check_device(device)
        return dict(_DEFAULTS)

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict:
        """The supported dtypes (of ``kind``)."""
        check_device(device)
        names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128"]
        table = {n: np.dtype(n) for n in names}
        if kind is None:
            return table
        return {n: d for n, d in table.items() if np.isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    """The inspection namespace of the standard."""
    return _Info()
