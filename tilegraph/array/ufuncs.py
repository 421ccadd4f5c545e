"""NumPy's ufuncs under dask.array's names (``tilegraph.add``, ``tilegraph.sin``, ...) and
dask's other elementwise functions (``angle``, ``fix``, ``i0``, ``sinc``, ``iscomplex``,
``isreal``, ``isneginf``, ``isposinf``, ...).

A ufunc name is NumPy's ufunc object itself: called on a tilegraph array it builds a lazy
array through ``Array.__array_ufunc__`` (block by block, with NumPy's broadcasting and type
promotion; ``.reduce`` a tree reduction, ``.accumulate`` a blocked scan, ``.outer`` a
broadcast); called on NumPy arrays and scalars only, it is NumPy's (as dask's are). So
``tilegraph.add is numpy.add``, and a library that checks ``isinstance(f, np.ufunc)``
still sees a ufunc.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.array([1.0, -2.0, 3.0]), chunks=2)
>>> tg.absolute(tg.multiply(x, 2)).compute()
array([2., 4., 6.])
>>> tg.add.outer(x, x[:2]).compute()
array([[ 2., -1.],
       [-1., -4.],
       [ 4.,  1.]])
>>> tg.angle(tg.from_numpy(np.array([1j, -1.0]), chunks=1), deg=True).compute()
array([ 90., 180.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray
from tilegraph.array.elementwise import elemwise

# dask.array's ufuncs (dask/array/ufunc.py), each NumPy's own ufunc
UFUNC_NAMES = (
    # math operations
    "add", "subtract", "multiply", "divide", "logaddexp", "logaddexp2", "true_divide",
    "floor_divide", "negative", "positive", "power", "float_power", "remainder", "mod",
    "conjugate", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "square",
    "cbrt", "reciprocal", "divmod", "modf", "frexp", "ldexp", "fmod",
    # trigonometric
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "hypot", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "degrees", "radians",
    # comparison and logic
    "greater", "greater_equal", "less", "less_equal", "not_equal", "equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "maximum", "minimum", "fmax", "fmin",
    # bitwise
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "invert", "left_shift",
    "right_shift",
    # floating point
    "isfinite", "isinf", "isnan", "signbit", "copysign", "nextafter", "spacing", "floor",
    "ceil", "trunc", "rint", "fabs", "sign", "absolute",
)

UFUNCS: dict[str, np.ufunc] = {name: getattr(np, name) for name in UFUNC_NAMES}
UFUNCS["conj"] = np.conjugate
UFUNCS["abs"] = np.absolute


def _elementwise(x: Any, func: Any, name: str, **kwargs: Any) -> Any:
    """``func`` block by block when ``x`` is a tilegraph array (or a lazy source such as
    a dask array), NumPy's answer otherwise."""
    if isinstance(x, Array) or hasattr(type(x), "__dask_graph__"):
        return elemwise(func, asarray(x), kwargs=kwargs or None, name=name)
    return func(x, **kwargs)


def angle(x: Any, deg: bool = False) -> Any:
    """The angle of complex values (``numpy.angle``), in degrees with ``deg=True``."""
    return _elementwise(x, np.angle, "angle", deg=bool(deg))


def iscomplex(x: Any) -> Any:
    """Whether each element has a non-zero imaginary part (``numpy.iscomplex``)."""
    return _elementwise(x, np.iscomplex, "iscomplex")


def isreal(x: Any) -> Any:
    """Whether each element has a zero imaginary part (``numpy.isreal``)."""
    return _elementwise(x, np.isreal, "isreal")


def isneginf(x: Any) -> Any:
    """Whether each element is negative infinity (``numpy.isneginf``)."""
    return _elementwise(x, np.isneginf, "isneginf")


def isposinf(x: Any) -> Any:
    """Whether each element is positive infinity (``numpy.isposinf``)."""
    return _elementwise(x, np.isposinf, "isposinf")


def fix(x: Any) -> Any:
    """Round towards zero (``numpy.fix``)."""
    return _elementwise(x, np.fix, "fix")


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0 (``numpy.i0``)."""
    return _elementwise(x, np.i0, "i0")


def sinc(x: Any) -> Any:
    """The normalised sinc function, sin(pi x) / (pi x) (``numpy.sinc``)."""
    return _elementwise(x, np.sinc, "sinc")


def real(x: Any) -> Any:
    """The real part of each element (``numpy.real``)."""
    return _elementwise(x, np.real, "real")


def imag(x: Any) -> Any:
    """The imaginary part of each element (``numpy.imag``)."""
    return _elementwise(x, np.imag, "imag")


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None,
               neginf: Any = None) -> Any:
    """NaN and infinities replaced by numbers (``numpy.nan_to_num``)."""
    return _elementwise(x, np.nan_to_num, "nan_to_num", nan=nan, posinf=posinf,
                        neginf=neginf)


FUNCTIONS = {f.__name__: f for f in (angle, iscomplex, isreal, isneginf, isposinf, fix, i0,
                                     sinc, real, imag, nan_to_num)}

# the NumPy functions (not ufuncs) these answer through ``__array_function__``
NUMPY_FUNCTIONS = {getattr(np, name): f for name, f in FUNCTIONS.items()}

__all__ = sorted({*UFUNCS, *FUNCTIONS})
