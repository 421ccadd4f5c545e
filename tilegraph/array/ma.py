"""Masked arrays, the common subset of ``numpy.ma`` (and ``dask.array.ma``): ``tg.ma``.

A :class:`MaskedArray` is a pair of blocked arrays of the same shape and blocks: the data
and a boolean mask (``True``: masked). Every operation is an operation on the pair, so it
stays lazy, blocked and out of core like any other; ``compute()`` returns a
``numpy.ma.MaskedArray``.

>>> import numpy as np, tilegraph as tg
>>> x = tg.ma.masked_greater(tg.from_numpy(np.arange(6.0), chunks=4), 3)
>>> x.mean().compute(), int(x.count().compute())
(np.float64(1.5), 4)
>>> (x * 2).filled(-1).compute()
array([ 0.,  2.,  4.,  6., -1., -1.])

What is here: building (:func:`masked_array`, :func:`masked_where`, :func:`masked_invalid`,
:func:`masked_equal` and the other comparisons, :func:`masked_inside`,
:func:`masked_outside`, :func:`masked_values`, :func:`fix_invalid`), reading
(:func:`getdata`, :func:`getmaskarray`, :func:`filled`, :func:`count`), arithmetic and
comparisons with arrays, masked arrays and scalars (the masks are combined; a division by
zero or a power of a negative base to a fractional exponent is masked, as in NumPy),
``abs``, ``sqrt``, ``exp``, ``log`` (invalid results masked), the reductions ``sum``,
``prod``, ``mean``, ``var``, ``std``, ``min``, ``max``, ``count``, :func:`average` (with
weights), over all axes or one, indexing with slices and integers, ``T``, ``astype``,
``reshape`` and ``rechunk``. A reduction over only masked values gives ``numpy.ma.masked``.
Not here: fill values other than NumPy's defaults on the computed result, hard masks,
structured (record) masks, sorting and the ``numpy.ma`` functions not listed.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray

__all__ = ["MaskedArray", "average", "count", "empty_like", "filled", "fix_invalid",
           "getdata", "getmaskarray", "masked_array", "masked_equal", "masked_greater",
           "masked_greater_equal", "masked_inside", "masked_invalid", "masked_less",
           "masked_less_equal", "masked_not_equal", "masked_outside", "masked_values",
           "masked_where", "nonzero", "ones_like", "set_fill_value", "where", "zeros_like"]


def _where(cond: Array, a: Any, b: Any) -> Array:
    from tilegraph.array.elementwise import where

    return where(cond, a, b)


def _zero_like(dtype: np.dtype) -> Any:
    return np.zeros((), dtype=dtype)[()]


class MaskedArray:
    """``data`` (an Array) with ``mask`` (a boolean Array of the same shape and blocks;
    ``True`` where a value is masked). See the module docstring."""

    __array_priority__ = 20

    def __init__(self, data: Any, mask: Any = False):
        data = data if isinstance(data, Array) else asarray(data)
        if isinstance(mask, (bool, np.bool_)) or mask is None:
            from tilegraph.array.creation import full

            mask = full(data.shape, bool(mask), chunks=data.chunks, dtype=bool)
        else:
            mask = mask if isinstance(mask, Array) else asarray(mask)
            if mask.shape != data.shape:
                raise ValueError(f"ma: the mask's shape {mask.shape} is not the data's "
                                 f"{data.shape}")
            if mask.dtype != bool:
                mask = mask.astype(bool)
            if mask.chunks != data.chunks:
                mask = mask.rechunk(data.chunks)
        self.data = data
        self.mask = mask
        self.fill_value = None  # set by set_fill_value; NumPy's default for the dtype

    # -- what it is ---------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def chunks(self) -> tuple:
        return self.data.chunks

    @property
    def size(self) -> int:
        return self.data.size

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return (f"tilegraph.ma.MaskedArray<shape={self.shape}, dtype={self.dtype}, "
                f"chunks={self.chunks}>")

    def compute(self, **options: Any) -> np.ma.MaskedArray:
        """The values and the mask, computed together: a ``numpy.ma.MaskedArray``."""
        from tilegraph.array.core import compute

        data, mask = compute(self.data, self.mask, **options)
        if data is None:   # an MPI rank other than 0 with a large result
            return None
        return np.ma.MaskedArray(data, mask=mask, fill_value=self.fill_value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("tilegraph.ma.MaskedArray: call .compute() for a numpy.ma array, "
                        "or .filled(value).compute() for a plain one")

    # -- views --------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> MaskedArray:
        if isinstance(key, (Array, MaskedArray, np.ndarray)):
            raise TypeError("tilegraph.ma: index with slices and integers (boolean or "
                            "integer arrays are not supported on masked arrays)")
        return MaskedArray(self.data[key], self.mask[key])

    @property
    def T(self) -> MaskedArray:
        return MaskedArray(self.data.T, self.mask.T)

    def transpose(self, *axes: Any) -> MaskedArray:
        return MaskedArray(self.data.transpose(*axes), self.mask.transpose(*axes))

    def astype(self, dtype: Any) -> MaskedArray:
        return MaskedArray(self.data.astype(dtype), self.mask)

    def reshape(self, *shape: Any) -> MaskedArray:
        data = self.data.reshape(*shape)
        return MaskedArray(data, self.mask.reshape(*shape).rechunk(data.chunks))

    def rechunk(self, chunks: Any) -> MaskedArray:
        data = self.data.rechunk(chunks)
        return MaskedArray(data, self.mask.rechunk(data.chunks))

    # -- reading -------------------------------------------------------------------------------

    def filled(self, fill_value: Any = None) -> Array:
        """The data with ``fill_value`` where masked (default: the array's fill value,
        see :func:`set_fill_value`, else NumPy's for the dtype)."""
        if fill_value is None:
            fill_value = self.fill_value
        if fill_value is None:
            fill_value = np.ma.default_fill_value(np.zeros((), self.dtype))
        return _where(self.mask, np.asarray(fill_value, dtype=self.dtype)[()], self.data)

    def count(self, axis: Any = None) -> Array:
        """How many values are not masked (over ``axis``, default all)."""
        return (~self.mask).sum(axis=axis)

    # -- arithmetic ---------------------------------------------------------------------------

    def _binary(self, other: Any, op: Any, reflected: bool = False) -> MaskedArray:
        if isinstance(other, MaskedArray):
            odata, omask = other.data, other.mask
        elif isinstance(other, np.ma.MaskedArray):
            odata, omask = asarray(other.data), asarray(np.ma.getmaskarray(other))
        else:
            odata, omask = other, None
        a, b = (odata, self.data) if reflected else (self.data, odata)
        bad = _invalid(op, a, b)
        if bad is not None:   # computed on harmless values where the result is masked
            if op is operator.pow:
                a = _where(bad, 1, a)
            else:
                b = _where(bad, 1, b)
        data = op(a, b)
        mask = self.mask if omask is None else (self.mask | omask)
        if isinstance(data, Array) and data.shape != mask.shape:
            from tilegraph.array.scans import broadcast_to

            mask = broadcast_to(mask, data.shape)
        if bad is not None:
            mask = mask | bad
        if isinstance(data, Array) and mask.chunks != data.chunks:
            mask = mask.rechunk(data.chunks)
        return MaskedArray(data, mask)

    def __add__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.add)

    def __radd__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.add, True)

    def __sub__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.sub)

    def __rsub__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.sub, True)

    def __mul__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.mul)

    def __rmul__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.mul, True)

    def __truediv__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.truediv)

    def __rtruediv__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.truediv, True)

    def __floordiv__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.floordiv)

    def __pow__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.pow)

    def __lt__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.lt)

    def __le__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.le)

    def __gt__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.gt)

    def __ge__(self, o: Any) -> MaskedArray:
        return self._binary(o, operator.ge)

    def __eq__(self, o: Any) -> MaskedArray:  # type: ignore[override]
        return self._binary(o, operator.eq)

    def __ne__(self, o: Any) -> MaskedArray:  # type: ignore[override]
        return self._binary(o, operator.ne)

    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> MaskedArray:
        return MaskedArray(-self.data, self.mask)

    def __abs__(self) -> MaskedArray:
        return MaskedArray(abs(self.data), self.mask)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            return NotImplemented
        name = ufunc.__name__
        if len(inputs) == 2 and name in _BINARY:
            if inputs[0] is self:
                return self._binary(inputs[1], _BINARY[name])
            return self._binary(inputs[0], _BINARY[name], reflected=True)
        if len(inputs) != 1 or inputs[0] is not self or name not in _UNARY:
            return NotImplemented
        mask, data = self.mask, self.data
        if name == "sqrt":   # invalid results are masked, as numpy.ma's domains do
            bad = data < 0
        elif name in ("log", "log2", "log10"):
            bad = data <= 0
        else:
            return MaskedArray(ufunc(data), mask)
        return MaskedArray(ufunc(_where(bad, 1, data)), mask | bad)

    # -- reductions ---------------------------------------------------------------------------

    def _masked_if_empty(self, value: Array, n: Array, axis: Any) -> Any:
        if axis is None:
            return _Scalar(value, n)
        return MaskedArray(value, n == 0)

    def sum(self, axis: Any = None) -> Any:
        total = self.filled(_zero_like(self.dtype)).sum(axis=axis)
        return self._masked_if_empty(total, self.count(axis), axis)

    def prod(self, axis: Any = None) -> Any:
        total = self.filled(np.ones((), self.dtype)[()]).prod(axis=axis)
        return self._masked_if_empty(total, self.count(axis), axis)

    def mean(self, axis: Any = None) -> Any:
        n = self.count(axis)
        total = self.filled(_zero_like(self.dtype)).sum(axis=axis)
        return self._masked_if_empty(total / _where(n == 0, 1, n), n, axis)

    def var(self, axis: Any = None, ddof: int = 0) -> Any:
        n = self.count(axis)
        mean = self.filled(_zero_like(self.dtype)).sum(axis=axis) / _where(n == 0, 1, n)
        centred = self.data - (mean if axis is None else _expand(mean, axis, self.ndim))
        sq = _where(self.mask, 0, abs(centred) ** 2).sum(axis=axis)
        d = n - ddof
        return self._masked_if_empty(sq / _where(d <= 0, 1, d), d > 0, axis)

    def std(self, axis: Any = None, ddof: int = 0) -> Any:
        v = self.var(axis=axis, ddof=ddof)
        if isinstance(v, _Scalar):
            return _Scalar(v.value ** 0.5, v.count)
        return MaskedArray(v.data ** 0.5, v.mask)

    def _extreme(self, axis: Any, largest: bool) -> Any:
        kind = self.dtype.kind
        if kind == "f":
            fill = -np.inf if largest else np.inf
        elif kind in "iu":
            info = np.iinfo(self.dtype)
            fill = info.min if largest else info.max
        elif kind == "b":
            fill = not largest
        else:
            raise TypeError(f"ma: min/max of {self.dtype} values is not supported")
        filled = self.filled(fill)
        value = filled.max(axis=axis) if largest else filled.min(axis=axis)
        return self._masked_if_empty(value, self.count(axis), axis)

    def max(self, axis: Any = None) -> Any:
        return self._extreme(axis, True)

    def min(self, axis: Any = None) -> Any:
        return self._extreme(axis, False)


_BINARY = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
           "true_divide": operator.truediv, "divide": operator.truediv,
           "floor_divide": operator.floordiv, "power": operator.pow, "less": operator.lt,
           "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge,
           "equal": operator.eq, "not_equal": operator.ne}
_UNARY = frozenset({"sqrt", "log", "log2", "log10", "exp", "absolute", "negative", "sin",
                    "cos", "tan", "tanh", "arctan", "floor", "ceil", "rint", "square"})


class _Scalar:
    """A reduction over every axis: ``value``, or ``numpy.ma.masked`` when ``count`` (of
    values not masked) is 0."""

    def __init__(self, value: Array, count: Array):
        self.value = value
        self.count = count

    def compute(self, **options: Any) -> Any:
        from tilegraph.array.core import compute

        value, n = compute(self.value, self.count, **options)
        if n is None:
            return None
        return np.ma.masked if int(n) == 0 else value

    def __repr__(self) -> str:
        return f"tilegraph.ma masked-array reduction<dtype={self.value.dtype}>"


def _expand(a: Array, axis: Any, ndim: int) -> Array:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(x % ndim for x in axes)
    for x in sorted(axes):
        from tilegraph.array.numpy_functions import expand_dims

        a = expand_dims(a, x)
    return a


def _invalid(op: Any, a: Any, b: Any) -> Array | None:
    """Where an operation's result is masked because it is invalid, as NumPy's masked
    operations mask it: a division by zero, a negative base to a fractional power."""
    if not isinstance(a, Array) and not isinstance(b, Array):
        return None
    if op in (operator.truediv, operator.floordiv):
        return b == 0 if isinstance(b, Array) else (
            None if np.all(np.asarray(b) != 0) else asarray(np.asarray(b) == 0))
    if op is operator.pow and isinstance(a, Array):
        if isinstance(b, Array):
            return (a < 0) & ((b % 1) != 0)
        frac = np.asarray(b) % 1 != 0
        if not frac.any():
            return None
        return (a < 0) & frac if frac.ndim else a < 0
    return None


# -- building ---------------------------------------------------------------------------------


def masked_array(data: Any, mask: Any = False) -> MaskedArray:
    """``data`` (an Array or array-like; a ``numpy.ma`` array keeps its mask) with
    ``mask``."""
    if isinstance(data, np.ma.MaskedArray) and mask is False:
        return MaskedArray(asarray(np.ma.getdata(data)), asarray(np.ma.getmaskarray(data)))
    return MaskedArray(data, mask)


def _data(x: Any) -> tuple[Array, Array | None]:
    if isinstance(x, MaskedArray):
        return x.data, x.mask
    return (x if isinstance(x, Array) else asarray(x)), None


def masked_where(condition: Any, a: Any) -> MaskedArray:
    """``a`` masked where ``condition`` holds (and where it already was)."""
    data, mask = _data(a)
    cond = condition.filled(False) if isinstance(condition, MaskedArray) else condition
    cond = cond if isinstance(cond, Array) else asarray(cond)
    if cond.shape != data.shape:
        raise ValueError(f"ma.masked_where: condition of shape {cond.shape} for an array of "
                         f"shape {data.shape}")
    cond = cond.astype(bool).rechunk(data.chunks)
    return MaskedArray(data, cond if mask is None else (mask | cond))


def _compare(op: Any) -> Any:
    def masked(a: Any, value: Any) -> MaskedArray:
        data, _ = _data(a)
        return masked_where(op(data, value), a)

    return masked


masked_equal = _compare(operator.eq)
masked_not_equal = _compare(operator.ne)
masked_greater = _compare(operator.gt)
masked_greater_equal = _compare(operator.ge)
masked_less = _compare(operator.lt)
masked_less_equal = _compare(operator.le)
for _name, _fn in (("masked_equal", masked_equal), ("masked_not_equal", masked_not_equal),
                   ("masked_greater", masked_greater),
                   ("masked_greater_equal", masked_greater_equal),
                   ("masked_less", masked_less), ("masked_less_equal", masked_less_equal)):
    _fn.__name__ = _fn.__qualname__ = _name
    _fn.__doc__ = f"``a`` masked where it is {_name[7:].replace('_', ' ')} ``value``."


def masked_inside(a: Any, v1: Any, v2: Any) -> MaskedArray:
    """``a`` masked where ``v1 <= a <= v2`` (the bounds in either order)."""
    lo, hi = min(v1, v2), max(v1, v2)
    data, _ = _data(a)
    return masked_where((data >= lo) & (data <= hi), a)


def masked_outside(a: Any, v1: Any, v2: Any) -> MaskedArray:
    """``a`` masked where it is below ``min(v1, v2)`` or above ``max(v1, v2)``."""
    lo, hi = min(v1, v2), max(v1, v2)
    data, _ = _data(a)
    return masked_where((data < lo) | (data > hi), a)


def masked_values(a: Any, value: Any, rtol: float = 1e-5, atol: float = 1e-8) -> MaskedArray:
    """``a`` masked where it is close to ``value`` (floats; exactly equal otherwise)."""
    data, _ = _data(a)
    if data.dtype.kind == "f":
        return masked_where(abs(data - value) <= atol + rtol * abs(value), a)
    return masked_where(data == value, a)


def masked_invalid(a: Any) -> MaskedArray:
    """``a`` masked where it is NaN or infinite."""
    data, _ = _data(a)
    from tilegraph.array.elementwise import elemwise

    return masked_where(elemwise(lambda b: ~np.isfinite(b), data, dtype=bool), a)


def fix_invalid(a: Any, fill_value: Any = None) -> MaskedArray:
    """``a`` masked where invalid (NaN, infinite), with those values replaced by
    ``fill_value`` in the data (default: NumPy's for the dtype)."""
    m = masked_invalid(a)
    return MaskedArray(m.filled(fill_value), m.mask)


def getdata(a: Any) -> Array:
    """The data of a masked array (an Array as it is)."""
    return _data(a)[0]


def getmaskarray(a: Any) -> Array:
    """The mask as a boolean Array of the data's shape (all False for an Array)."""
    data, mask = _data(a)
    return mask if mask is not None else MaskedArray(data).mask


def filled(a: Any, fill_value: Any = None) -> Array:
    """The data with ``fill_value`` where masked."""
    return a.filled(fill_value) if isinstance(a, MaskedArray) else _data(a)[0]


def count(a: Any, axis: Any = None) -> Array:
    """How many values are not masked."""
    return a.count(axis) if isinstance(a, MaskedArray) else MaskedArray(_data(a)[0]).count(axis)


def average(a: Any, axis: Any = None, weights: Any = None) -> Any:
    """The weighted mean of the values not masked (weights broadcast along ``axis`` when
    1-d), as ``numpy.ma.average``."""
    m = a if isinstance(a, MaskedArray) else MaskedArray(_data(a)[0])
    if weights is None:
        return m.mean(axis=axis)
    w = weights if isinstance(weights, Array) else asarray(weights)
    if w.shape != m.shape:
        if axis is None or w.ndim != 1 or w.shape[0] != m.shape[axis]:
            raise ValueError(f"ma.average: weights of shape {w.shape} for an array of shape "
                             f"{m.shape} (1-d weights need axis=)")
        shape = [1] * m.ndim
        shape[axis] = w.shape[0]
        from tilegraph.array.scans import broadcast_to

        w = broadcast_to(w.reshape(*shape), m.shape).rechunk(m.chunks)
    w = w.rechunk(m.chunks)
    wm = _where(m.mask, 0, w)
    num = _where(m.mask, 0, m.data * w).sum(axis=axis)
    den = wm.sum(axis=axis)
    n = m.count(axis)
    return m._masked_if_empty(num / _where(den == 0, 1, den), n, axis)


def set_fill_value(a: Any, fill_value: Any) -> None:
    """Set the value :meth:`MaskedArray.filled` and ``compute()`` put where ``a`` is masked
    (``numpy.ma.set_fill_value``; nothing to do for an array without a mask). The value
    belongs to ``a`` only: arrays made from it use NumPy's default again."""
    if not isinstance(a, MaskedArray):
        return
    try:
        value = np.asarray(fill_value).astype(a.dtype, casting="same_kind")[()]
    except (TypeError, ValueError):
        raise TypeError(f"ma.set_fill_value: {fill_value!r} is not a valid fill value for "
                        f"dtype {a.dtype}") from None
    a.fill_value = value


def _like(op: str, a: Any, value: Any, dtype: Any) -> MaskedArray:
    from tilegraph.array.creation import full

    data, mask = _data(a)
    out = full(data.shape, value, dtype=data.dtype if dtype is None else dtype,
               chunks=data.chunks)
    return MaskedArray(out, mask if mask is not None else False)


def zeros_like(a: Any, dtype: Any = None, **kwargs: Any) -> MaskedArray:
    """Zeros shaped like ``a``, with ``a``'s mask (``numpy.ma.zeros_like``)."""
    return _like("zeros_like", a, 0, dtype)


def ones_like(a: Any, dtype: Any = None, **kwargs: Any) -> MaskedArray:
    """Ones shaped like ``a``, with ``a``'s mask (``numpy.ma.ones_like``)."""
    return _like("ones_like", a, 1, dtype)


def empty_like(a: Any, dtype: Any = None, **kwargs: Any) -> MaskedArray:
    """An array shaped like ``a``, with ``a``'s mask (zeros, so every run gives the same
    values; ``numpy.ma.empty_like``)."""
    return _like("empty_like", a, 0, dtype)


def nonzero(a: Any) -> tuple[Array, ...]:
    """The indices of the unmasked elements that are not zero, one array per axis
    (``numpy.ma.nonzero``; two-phase, as :func:`tilegraph.nonzero`)."""
    from tilegraph.array.indexing import nonzero as _nonzero

    data, mask = _data(a)
    hit = data != 0
    return _nonzero(hit if mask is None else hit & ~mask)


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """``numpy.ma.where``: ``x`` where ``condition`` holds, ``y`` elsewhere, masked where
    the chosen value is masked or the condition is; with neither ``x`` nor ``y`` the
    indices where it holds (:func:`nonzero`)."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise TypeError("ma.where: give both x and y, or neither")
    cdata, cmask = _data(condition)
    cond = cdata.astype(bool) if cmask is None else _where(cmask, False, cdata.astype(bool))
    xd, xm = _data(x)
    yd, ym = _data(y)
    data = _where(cond, xd, yd)
    false = np.zeros((), dtype=bool)
    mask = _where(cond, false if xm is None else xm, false if ym is None else ym)
    if cmask is not None:
        mask = mask | cmask
    from tilegraph.array.scans import broadcast_to

    mask = broadcast_to(mask, data.shape) if mask.shape != data.shape else mask
    return MaskedArray(data, mask)
