"""Selecting elements by conditions or indices, block by block, as NumPy's routines:
``choose``, ``select``, ``piecewise`` and ``digitize``.

>>> import numpy as np, tilegraph as tg
>>> x = tg.from_numpy(np.arange(6.0), chunks=4)
>>> tg.select([x < 2, x > 4], [x, -x], default=0).compute()
array([ 0.,  1.,  0.,  0.,  0., -5.])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray
from tilegraph.array.elementwise import elemwise, where
from tilegraph.array.reordering import not_lazy
from tilegraph.array.scans import broadcast_to

# -- selection ----------------------------------------------------------------------------------


def _choose_block(mode: str, a: np.ndarray, *choices: np.ndarray) -> np.ndarray:
    return np.choose(a, choices, mode=mode)


def choose(a: Any, choices: Sequence[Any], out: Any = None, mode: str = "raise") -> Array:
    """``numpy.choose``: from each element's index in ``a``, the element of that choice
    (all broadcast together); an index out of range fails when its block is computed
    (``mode="raise"``) or wraps/clips as NumPy's ``mode`` says."""
    if out is not None:
        raise TypeError("choose: out= is not supported on tilegraph arrays")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    choices = list(choices)
    if not choices:
        raise ValueError("choose: give at least one choice")
    a = a if isinstance(a, Array) else asarray(a)
    if a.dtype.kind not in "iub":
        raise TypeError(f"choose: a must hold integers, got dtype {a.dtype}")
    dtype = np.result_type(*(c.dtype if isinstance(c, Array) else np.asarray(c).dtype
                             for c in choices))
    return elemwise(_choose_block, mode, a, *choices, dtype=dtype, name="choose")


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Array:
    """``numpy.select``: for each element, the choice of the first condition that holds
    (``default`` where none does)."""
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select: select with an empty condition list is not possible")
    conds = [c if isinstance(c, Array) else asarray(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != bool:
            raise TypeError(f"select: invalid entry {i} in condlist: should be boolean "
                            f"ndarray, got dtype {c.dtype}")
    choices = [c if isinstance(c, Array) else asarray(c) for c in choicelist]
    # NumPy's result dtype, from its own select on one-element stand-ins
    dtype = np.select([np.zeros(1, bool)] * len(choices),
                      [np.zeros(1, c.dtype) for c in choices], default).dtype
    out: Any = asarray(np.asarray(default, dtype=dtype))
    for cond, choice in zip(reversed(conds), reversed(choices), strict=True):
        out = where(cond, choice.astype(dtype) if choice.dtype != dtype else choice, out)
    shape_ = np.broadcast_shapes(*(c.shape for c in conds), *(c.shape for c in choices))
    return out if out.shape == shape_ else broadcast_to(out, shape_)


def _piecewise_block(x: np.ndarray, *conds: np.ndarray, funclist: list, args: tuple,
                     kw: dict) -> np.ndarray:
    return np.piecewise(x, list(conds), funclist, *args, **kw)


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any
              ) -> Array:
    """``numpy.piecewise`` block by block: ``x`` with each function of ``funclist`` (or
    value) applied where its condition holds (a last extra function where none does)."""
    x = x if isinstance(x, Array) else asarray(x)
    if (isinstance(condlist, (Array, np.ndarray)) and condlist.ndim == x.ndim) or \
            isinstance(condlist, bool):
        condlist = [condlist]
    conds = [c if isinstance(c, Array) else asarray(np.asarray(c, dtype=bool))
             for c in condlist]
    funclist = list(funclist)
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ValueError(f"piecewise: with {len(conds)} condition(s), {len(conds)} or "
                         f"{len(conds) + 1} functions are expected, got {len(funclist)}")
    return elemwise(_piecewise_block, x, *conds, dtype=x.dtype, name="piecewise",
                    kwargs={"funclist": funclist, "args": args, "kw": kw})


def digitize(x: Any, bins: Any, right: bool = False) -> Array:
    """``numpy.digitize`` block by block: the index of the bin of each element, ``bins``
    a 1-d monotonic NumPy array (sent whole to every block)."""
    not_lazy("digitize", "bins", bins)
    bins = np.asarray(bins)
    if bins.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-dimensional, got shape {bins.shape}")
    x = x if isinstance(x, Array) else asarray(x)
    return elemwise(np.digitize, x, kwargs={"bins": bins, "right": bool(right)},
                    dtype=np.intp, name="digitize")


