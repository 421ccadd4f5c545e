"""The elementwise functions of the Array API namespace (:mod:`tilegraph.array.array_api`
imports every name of :data:`__all__`): one lazy elementwise step per function, each a
NumPy ufunc on blocks, except ``expm1`` and ``tanh`` of complex numbers, whose special cases
the standard gives differently from NumPy.

>>> import numpy as np
>>> from tilegraph.array import array_api as xp
>>> xp.add(xp.asarray([1.0, 2.0]), 1.0).compute()
array([2., 3.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.array.core import Array
from tilegraph.array.elementwise import elemwise as _elemwise

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "not_equal",
    "positive",
    "pow",
    "real",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]

# -- elementwise -----------------------------------------------------------------------------------


def _unary(name: str, ufunc: Any) -> Any:
    def func(x: Array, /) -> Array:
        return _elemwise(ufunc, x, name=name)

    func.__name__ = name
    func.__doc__ = f"``{name}(x)`` elementwise."
    return func


def _binary(name: str, ufunc: Any) -> Any:
    def func(x1: Any, x2: Any, /) -> Array:
        return _elemwise(ufunc, x1, x2, name=name)

    func.__name__ = name
    func.__doc__ = f"``{name}(x1, x2)`` elementwise, with broadcasting."
    return func


def _expm1(x: np.ndarray) -> np.ndarray:
    """``exp(x) - 1``; for complex ``x = a + bj`` computed as ``expm1(a) cos b - 2 sin^2(b/2)
    + j exp(a) sin b`` (accurate near 0) with the standard's special cases at infinities and
    NaN (C99 Annex G), which NumPy's complex expm1 does not give."""
    if x.dtype.kind != "c":
        return np.expm1(x)
    a, b = x.real, x.imag
    with np.errstate(all="ignore"):
        re = np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2
        im = np.exp(a) * np.sin(b)
        zero_b = b == 0   # exact: the imaginary part keeps b (and its sign)
        im = np.where(zero_b, b, im)
        re = np.where(zero_b & ~np.isnan(a), np.expm1(a) + 0.0, re)   # +0 for a = -0
        neg_inf = np.isneginf(a) & ~np.isfinite(b)   # -1 + 0j
        re = np.where(neg_inf, -1.0, re)
        im = np.where(neg_inf, 0.0, im)
        pos_inf = np.isposinf(a) & ~np.isfinite(b)   # +inf + NaN j
        re = np.where(pos_inf, np.inf, re)
        im = np.where(pos_inf, np.nan, im)
    out = np.empty(x.shape, dtype=x.dtype)
    out.real, out.imag = re, im
    return out


def _tanh(x: np.ndarray) -> np.ndarray:
    """``tanh(x)``; for complex ``x`` with an infinite real part and a finite imaginary part
    the standard's ``±1 + 0j`` (the zero signed as ``sin(2 imag)``), where NumPy gives NaN."""
    if x.dtype.kind != "c":
        return np.tanh(x)
    with np.errstate(all="ignore"):
        out = np.tanh(x)
        edge = np.isinf(x.real) & np.isfinite(x.imag)
        if edge.any():
            re = np.where(edge, np.copysign(1.0, x.real), out.real)
            im = np.where(edge, np.copysign(0.0, np.sin(2 * x.imag)), out.imag)
            out = np.empty(x.shape, dtype=x.dtype)
            out.real, out.imag = re, im   # (1j * -0.0 would lose the zero's sign)
    return out


abs = _unary("abs", np.abs)
acos = _unary("acos", np.arccos)
acosh = _unary("acosh", np.arccosh)
asin = _unary("asin", np.arcsin)
asinh = _unary("asinh", np.arcsinh)
atan = _unary("atan", np.arctan)
atanh = _unary("atanh", np.arctanh)
bitwise_invert = _unary("bitwise_invert", np.invert)
conj = _unary("conj", np.conjugate)
cos = _unary("cos", np.cos)
cosh = _unary("cosh", np.cosh)
exp = _unary("exp", np.exp)
expm1 = _unary("expm1", _expm1)
imag = _unary("imag", np.imag)
isfinite = _unary("isfinite", np.isfinite)
isinf = _unary("isinf", np.isinf)
isnan = _unary("isnan", np.isnan)
log = _unary("log", np.log)
log1p = _unary("log1p", np.log1p)
log2 = _unary("log2", np.log2)
log10 = _unary("log10", np.log10)
logical_not = _unary("logical_not", np.logical_not)
negative = _unary("negative", np.negative)
positive = _unary("positive", np.positive)
real = _unary("real", np.real)
sign = _unary("sign", np.sign)
signbit = _unary("signbit", np.signbit)
sin = _unary("sin", np.sin)
sinh = _unary("sinh", np.sinh)
square = _unary("square", np.square)
sqrt = _unary("sqrt", np.sqrt)
tan = _unary("tan", np.tan)
tanh = _unary("tanh", _tanh)
add = _binary("add", np.add)
atan2 = _binary("atan2", np.arctan2)
bitwise_and = _binary("bitwise_and", np.bitwise_and)
bitwise_left_shift = _binary("bitwise_left_shift", np.left_shift)
bitwise_or = _binary("bitwise_or", np.bitwise_or)
bitwise_right_shift = _binary("bitwise_right_shift", np.right_shift)
bitwise_xor = _binary("bitwise_xor", np.bitwise_xor)
copysign = _binary("copysign", np.copysign)
divide = _binary("divide", np.divide)
equal = _binary("equal", np.equal)
floor_divide = _binary("floor_divide", np.floor_divide)
greater = _binary("greater", np.greater)
greater_equal = _binary("greater_equal", np.greater_equal)
hypot = _binary("hypot", np.hypot)
less = _binary("less", np.less)
less_equal = _binary("less_equal", np.less_equal)
logaddexp = _binary("logaddexp", np.logaddexp)
logical_and = _binary("logical_and", np.logical_and)
logical_or = _binary("logical_or", np.logical_or)
logical_xor = _binary("logical_xor", np.logical_xor)
maximum = _binary("maximum", np.maximum)
minimum = _binary("minimum", np.minimum)
multiply = _binary("multiply", np.multiply)
not_equal = _binary("not_equal", np.not_equal)
pow = _binary("pow", np.power)
remainder = _binary("remainder", np.remainder)
subtract = _binary("subtract", np.subtract)


def _integral_same(name: str, ufunc: Any) -> Any:
    def func(x: Array, /) -> Array:
        if x.dtype.kind in "biu":
            return x
        return _elemwise(ufunc, x, name=name)

    func.__name__ = name
    func.__doc__ = f"``{name}(x)`` elementwise (integers are returned as they are)."
    return func


ceil = _integral_same("ceil", np.ceil)
floor = _integral_same("floor", np.floor)
trunc = _integral_same("trunc", np.trunc)


def round(x: Array, /) -> Array:
    """Round to the nearest integer, halves to even."""
    return x if x.dtype.kind in "biu" else _elemwise(np.round, x, name="round")


def clip(x: Array, /, min: Any = None, max: Any = None) -> Array:
    """Values limited to ``[min, max]``; the result has ``x``'s dtype."""
    if min is None and max is None:
        return x
    out = x
    if min is not None:
        out = _elemwise(np.maximum, out, min, name="clip")
    if max is not None:
        out = _elemwise(np.minimum, out, max, name="clip")
    return out.astype(x.dtype, copy=False) if out.dtype != x.dtype else out
