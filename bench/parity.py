"""Namespace parity with dask.array, measured: every public name of ``dask.array`` (its
functions and creation routines, the methods of its ``Array``, and the submodules
``random``, ``fft``, ``linalg``, ``ma`` and ``stats``), the NumPy functions dask answers
through ``__array_function__``, every NumPy ufunc, ``numpy.linalg`` and ``numpy.fft``, and
the NumPy protocols a foreign library uses, each with its status in tilegraph:

- ``tested``: present, and a case here runs it on arrays in uneven blocks and checks the
  result against dask's (or NumPy's/SciPy's, where the "against" column says so: where
  dask has no such name, or is known to differ from NumPy). Random draws are checked for
  dask's shapes, blocks and dtypes, for the same values from the same seed, and for
  their median against NumPy's generator. Every case first builds the tilegraph result
  with computing forbidden, so nothing is computed behind the caller's back (a 0-d value
  handed to NumPy as a number is the one place tilegraph computes, when asked).
- ``refused``: present, and raises an error whose message names the alternative (the
  case checks the message).
- ``n/a``: a dask internal with no meaning for tilegraph; the reason is given.
- ``missing``, ``untested`` or ``differs``: what is left to do (``--check`` fails on any).

    python bench/parity.py               # the table as text, and the counts
    python bench/parity.py --markdown    # docs/parity.md (tests check it is up to date)
    python bench/parity.py --check       # exit 1 if any name is missing/untested/differs
    python bench/parity.py --quick       # the table without running the cases (as if
                                         # each passed): what the docs page must say
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import tilegraph as tg

# -- the names ---------------------------------------------------------------------------------

SUBMODULES = ("random", "fft", "linalg", "ma", "stats")


def _defined_in(module: Any) -> list[str]:
    """The public callables a dask module defines itself (not the names it imports)."""
    return sorted(n for n in dir(module) if not n.startswith("_")
                  and callable(getattr(module, n))
                  and getattr(getattr(module, n), "__module__", None) == module.__name__)


def _dispatched() -> list[str]:
    """The NumPy functions dask answers through ``__array_function__``: those of numpy,
    numpy.fft and numpy.linalg with a dask.array function of the same name."""
    import dask.array as da

    out = set()
    for modname in ("numpy", "numpy.fft", "numpy.linalg"):
        mod = __import__(modname, fromlist=["x"])
        for name in dir(mod):
            f = getattr(mod, name)
            if name.startswith("_") or type(f).__name__ != "_ArrayFunctionDispatcher":
                continue
            sub: Any = da
            for part in f.__module__.split(".")[1:]:
                sub = getattr(sub, part, None)
            if sub is not None and getattr(sub, f.__name__, f) is not f:
                out.add(f"{f.__module__}.{f.__name__}")
    return sorted(out)


def sections() -> dict[str, list[str]]:
    """Section title -> the names it lists."""
    import dask.array as da

    found = {
        "dask.array": sorted(da.__all__),
        "dask.array.Array": sorted(n for n in dir(da.Array) if not n.startswith("_")),
    }
    for sub in SUBMODULES:
        mod = __import__(f"dask.array.{sub}", fromlist=["x"])
        names = _defined_in(mod)
        if sub == "random":
            names += [f"Generator.{n}" for n in dir(da.random.Generator)
                      if not n.startswith("_")]
            names += [f"RandomState.{n}" for n in dir(da.random.RandomState)
                      if not n.startswith("_")]
        found[f"dask.array.{sub}"] = sorted(names)
    found["NumPy functions dask dispatches"] = _dispatched()
    found["numpy.linalg and numpy.fft"] = sorted(
        f"numpy.{m}.{n}" for m in ("linalg", "fft")
        for n in dir(getattr(np, m)) if not n.startswith("_") and n not in (
            "test", "LinAlgError") and callable(getattr(getattr(np, m), n)))
    found["NumPy ufuncs"] = sorted(n for n in dir(np) if isinstance(getattr(np, n), np.ufunc))
    found["NumPy protocols"] = sorted(PROTOCOLS)
    return found


# -- the arrays the cases use ------------------------------------------------------------------

rng = np.random.default_rng(7)
F = rng.random((7, 5)) + 0.1                         # floats in (0.1, 1.1)
G = rng.standard_normal((7, 5))
F32 = F.astype(np.float32)
I = rng.integers(1, 9, (7, 5))                       # noqa: E741  ints 1..8
BOOL = rng.random((7, 5)) > 0.5
C = G + 1j * rng.standard_normal((7, 5))
V = rng.standard_normal(11)
SPD = G[:5] @ G[:5].T + 5 * np.eye(5)
STACK = rng.standard_normal((3, 5, 5)) + 5 * np.eye(5)
TALL = rng.standard_normal((12, 4))
B12 = rng.standard_normal(12)
NANS = np.where(rng.random((7, 5)) > 0.8, np.nan, G)
LOWRANK = TALL @ rng.standard_normal((4, 9))
SPD6 = rng.standard_normal((6, 6))
SPD6 = SPD6 @ SPD6.T + 6 * np.eye(6)
TWO_PHASE = "the sizes of the result are computed first (two phases, as documented)"
WRITES = "writes the values (a compute, as asked)"


def uneven(shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Blocks of about a third of each axis, the last one shorter."""
    out = []
    for n in shape:
        b = n // 3 + 1
        while b < n and n % b == 0:
            b += 1
        full, rest = divmod(n, b) if n else (0, 0)
        out.append((b,) * full + ((rest,) if rest else ()) or (n,))
    return tuple(out)


class Lib:
    """One side of a case: ``m`` the namespace (tilegraph, dask.array or NumPy), ``a(x)``
    the array ``x`` on that side, cut into uneven blocks (or ``chunks``)."""

    def __init__(self, name: str, m: Any):
        self.name, self.m = name, m

    def a(self, x: Any, chunks: Any = None) -> Any:
        x = np.asarray(x)
        if self.name == "numpy":
            return x
        chunks = uneven(x.shape) if chunks is None else chunks
        if self.name == "tilegraph":
            return tg.from_numpy(x, chunks=chunks)
        import dask.array as da

        return da.from_array(x, chunks=chunks)


@dataclasses.dataclass
class Case:
    """How a name is checked: ``run(lib)`` builds the result on one side; ``against``
    names the reference side; ``kind`` is "values" (compared), "refused" (``run`` must
    raise with ``match`` in the message), "random", "exists" (``run`` returns True),
    "na" (``reason``)."""

    run: Callable[[Lib], Any] | None = None
    against: str = "dask"
    kind: str = "values"
    match: str = ""
    notes: str = ""
    rtol: float = 1e-6
    dtype: bool = True
    reason: str = ""
    computes: str = ""  # why building the tilegraph result may compute (else forbidden)


CASES: dict[tuple[str, str], Case] = {}


def case(section: str, *names: str, **kw: Any) -> Callable:
    def register(fn: Callable) -> Callable:
        for n in names:
            CASES[(section, n)] = Case(run=fn, **kw)
        return fn
    return register


def na(section: str, name: str, reason: str) -> None:
    CASES[(section, name)] = Case(kind="na", reason=reason)


def refused(section: str, name: str, match: str, run: Callable[[Lib], Any],
            notes: str = "") -> None:
    CASES[(section, name)] = Case(run=run, kind="refused", match=match, against="-",
                                  notes=notes)


DA = "dask.array"
ARR = "dask.array.Array"


# -- dask.array: ufuncs and elementwise functions ----------------------------------------------

def _ufunc_inputs(ufunc: np.ufunc) -> list[list[np.ndarray]]:
    """Input sets (one per dtype NumPy has a loop for) for ``ufunc``: floats, float32,
    ints, bools, complex, datetimes."""
    pools = {"f8": [F, G[::-1] * 0.9 + 0.05, F[::-1]], "f4": [F32, F32[::-1], F32 * 2],
             "i8": [I, I[::-1] % 5 + 1, I % 3 + 1], "b": [BOOL, ~BOOL, BOOL[::-1]],
             "c16": [C * 0.3, C[::-1] * 0.2, C * 0.1]}
    out = []
    for pool in pools.values():
        args = pool[:ufunc.nin]
        try:
            with np.errstate(all="ignore"):
                ufunc(*args)
        except (TypeError, ValueError):
            continue
        out.append(args)
    if ufunc.__name__ == "isnat":
        out.append([np.arange(35).reshape(7, 5).astype("datetime64[D]")])
    if ufunc.__name__ in ("ldexp",):
        out = [[F, I]]
    return out


def _ufunc_case(name: str) -> Callable[[Lib], Any]:
    def run(lib: Lib) -> Any:
        f = getattr(lib.m, name) if lib.name != "numpy" else getattr(np, name)
        ufunc = getattr(np, name) if isinstance(getattr(np, name, None), np.ufunc) else None
        sets = _ufunc_inputs(ufunc) if ufunc is not None else [[F]]
        with np.errstate(all="ignore"):
            return [f(*[lib.a(x) for x in args]) for args in sets]
    return run


_DASK_UFUNCS = ("abs", "absolute", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
                "arctan2", "arctanh", "bitwise_and", "bitwise_not", "bitwise_or",
                "bitwise_xor", "cbrt", "ceil", "conj", "copysign", "cos", "cosh",
                "deg2rad", "degrees", "divide", "divmod", "equal", "exp", "exp2", "expm1",
                "fabs", "float_power", "floor", "floor_divide", "fmax", "fmin", "fmod",
                "frexp", "greater", "greater_equal", "hypot", "invert", "isfinite",
                "isinf", "isnan", "ldexp", "left_shift", "less", "less_equal", "log",
                "log10", "log1p", "log2", "logaddexp", "logaddexp2", "logical_and",
                "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "mod",
                "modf", "multiply", "negative", "nextafter", "not_equal", "positive",
                "power", "rad2deg", "radians", "reciprocal", "remainder", "right_shift",
                "rint", "sign", "signbit", "sin", "sinh", "spacing", "sqrt", "square",
                "subtract", "tan", "tanh", "true_divide", "trunc")
for _n in _DASK_UFUNCS:
    CASES[(DA, _n)] = Case(run=_ufunc_case(_n), notes="each dtype NumPy has a loop for")


@case(DA, "angle")
def _(lib):
    return lib.m.angle(lib.a(C)), lib.m.angle(lib.a(C), deg=True)


for _n in ("fix", "i0", "sinc", "iscomplex", "isreal", "real", "imag", "nan_to_num"):
    def _elementwise(lib, _n=_n):
        x = G * 3
        if _n == "nan_to_num":
            x = np.where(G > 1, np.nan, np.where(G < -1, np.inf, G))
        if _n in ("iscomplex", "isreal", "real", "imag"):
            x = C
        return getattr(lib.m, _n)(lib.a(x))
    CASES[(DA, _n)] = Case(run=_elementwise)


@case(DA, "isneginf", "isposinf")
def _(lib):
    x = lib.a(np.where(G > 1, np.inf, np.where(G < -1, -np.inf, G)))
    return lib.m.isneginf(x), lib.m.isposinf(x)


@case(DA, "around", "round")
def _(lib):
    return lib.m.around(lib.a(G * 10), 1), lib.m.round(lib.a(G * 10))


@case(DA, "clip")
def _(lib):
    return lib.m.clip(lib.a(G), -0.5, 0.7)


# -- dask.array: creation ----------------------------------------------------------------------


@case(DA, "arange")
def _(lib):
    return lib.m.arange(3, 40, 2.5, chunks=4), lib.m.arange(17, chunks=5)


@case(DA, "linspace")
def _(lib):
    return lib.m.linspace(-1, 4, 23, chunks=5), lib.m.linspace(0, 1, 10, endpoint=False,
                                                               chunks=3)


@case(DA, "ones", "zeros", "full", "empty")
def _(lib):
    m = lib.m
    return (m.ones((7, 5), chunks=3), m.zeros((4, 9), dtype=np.int32, chunks=(3, 4)),
            m.full((5, 3), 2.5, chunks=2), m.empty((3, 4), chunks=2).shape)


@case(DA, "eye", notes="NumPy's order (N, M, k); dask's second positional is chunks: "
      "give chunks= by name")
def _(lib):
    return lib.m.eye(6, M=8, k=1, chunks=4), lib.m.eye(5, chunks=2, dtype=int)


@case(DA, "ones_like", "zeros_like", "full_like", "empty_like")
def _(lib):
    x = lib.a(I)
    return (lib.m.ones_like(x), lib.m.zeros_like(x, dtype=float),
            lib.m.full_like(x, 7), lib.m.empty_like(x).shape)


@case(DA, "array", "asarray", "asanyarray")
def _(lib):
    return (lib.m.array(F), lib.m.array(V, ndmin=2), lib.m.asarray(I, chunks=4),
            lib.m.asanyarray([[1, 2], [3, 4]]))


@case(DA, "indices")
def _(lib):
    return lib.m.indices((5, 4), chunks=(2, 3))


@case(DA, "fromfunction")
def _(lib):
    return lib.m.fromfunction(lambda i, j: i * 10 + j, shape=(7, 5), chunks=(3, 2),
                              dtype=float)


@case(DA, "tri")
def _(lib):
    return lib.m.tri(7, 5, k=1, chunks=3), lib.m.tri(4, dtype=int, chunks=2)


@case(DA, "meshgrid")
def _(lib):
    x, y = lib.a(V[:5]), lib.a(V[:4])
    return (*lib.m.meshgrid(x, y), *lib.m.meshgrid(x, y, indexing="ij"))


@case(DA, "diag")
def _(lib):
    return lib.m.diag(lib.a(V[:6])), lib.m.diag(lib.a(V[:4]), k=2), lib.m.diag(lib.a(F), 1)


@case(DA, "tril", "triu")
def _(lib):
    return lib.m.tril(lib.a(F), -1), lib.m.triu(lib.a(F), 1)


@case(DA, "tril_indices", "triu_indices")
def _(lib):
    return (*lib.m.tril_indices(5, 1, 4), *lib.m.triu_indices(4))


@case(DA, "tril_indices_from", "triu_indices_from")
def _(lib):
    return (*lib.m.tril_indices_from(lib.a(F[:5])), *lib.m.triu_indices_from(lib.a(F), 1))


@case(DA, "from_array")
def _(lib):
    return lib.m.from_array(F, chunks=(3, 2))


@case(DA, "from_zarr", "to_zarr", notes="a zarr store written and read back",
      computes=WRITES)
def _(lib):
    path = os.path.join(tempfile.mkdtemp(), f"{lib.name}.zarr")
    lib.m.to_zarr(lib.a(F), path)
    return lib.m.from_zarr(path)


@case(DA, "from_npy_stack", "to_npy_stack", notes="a stack written and read back",
      computes=WRITES)
def _(lib):
    path = os.path.join(tempfile.mkdtemp(), lib.name)
    lib.m.to_npy_stack(path, lib.a(F), axis=0)
    return lib.m.from_npy_stack(path)


@case(DA, "to_hdf5", notes="datasets written, read back with h5py", computes=WRITES)
def _(lib):
    import h5py

    path = os.path.join(tempfile.mkdtemp(), "out.h5")
    lib.m.to_hdf5(path, {"/x": lib.a(F), "/g/y": lib.a(I)})
    with h5py.File(path, "r") as f:
        return f["/x"][()], f["/g/y"][()]


@case(DA, "store", notes="into NumPy arrays", computes=WRITES)
def _(lib):
    out = [np.zeros((7, 5)), np.zeros((7, 5), dtype=int)]
    lib.m.store([lib.a(F), lib.a(I)], out)
    return out[0], out[1]


# -- dask.array: shapes and joins --------------------------------------------------------------


@case(DA, "append")
def _(lib):
    return (lib.m.append(lib.a(F), lib.a(G[:2]), axis=0), lib.m.append(lib.a(V), lib.a(F)))


@case(DA, "atleast_1d", "atleast_2d", "atleast_3d")
def _(lib):
    x = lib.a(V)
    return (lib.m.atleast_1d(x), lib.m.atleast_2d(x), lib.m.atleast_3d(x),
            lib.m.atleast_3d(lib.a(F)))


@case(DA, "block")
def _(lib):
    a, b = lib.a(F[:3, :2]), lib.a(G[:3, :3])
    return lib.m.block([[a, b], [lib.a(F[3:, :2]), lib.a(G[3:, :3])]])


@case(DA, "broadcast_arrays", "broadcast_to")
def _(lib):
    return (*lib.m.broadcast_arrays(lib.a(F), lib.a(V[:5])),
            lib.m.broadcast_to(lib.a(V[:5]), (4, 5)))


@case(DA, "concatenate", "stack", "hstack", "vstack", "dstack")
def _(lib):
    x, y = lib.a(F), lib.a(G)
    return (lib.m.concatenate([x, y], axis=1), lib.m.stack([x, y], axis=1),
            lib.m.hstack([x, y]), lib.m.vstack([x, y]), lib.m.dstack([x, y]))


@case(DA, "delete")
def _(lib):
    return (lib.m.delete(lib.a(F), [0, 3, 4], axis=0), lib.m.delete(lib.a(F), 2, axis=1),
            lib.m.delete(lib.a(F), slice(1, 4), axis=0))


@case(DA, "insert")
def _(lib):
    return (lib.m.insert(lib.a(F), 2, -1.0, axis=0),
            lib.m.insert(lib.a(F), [1, 4], lib.a(G[:2]), axis=0),
            lib.m.insert(lib.a(F), [0, 5], 9.0, axis=1))


@case(DA, "expand_dims", "squeeze")
def _(lib):
    x = lib.a(F)
    return (lib.m.expand_dims(x, (0, 2)), lib.m.squeeze(lib.m.expand_dims(x, 1), axis=1))


@case(DA, "flip", "fliplr", "flipud")
def _(lib):
    x = lib.a(F)
    return lib.m.flip(x, 0), lib.m.fliplr(x), lib.m.flipud(x), lib.m.flip(x)


@case(DA, "moveaxis", "rollaxis", "swapaxes", "transpose")
def _(lib):
    x = lib.a(STACK)
    return (lib.m.moveaxis(x, 0, -1), lib.m.rollaxis(x, 2), lib.m.swapaxes(x, 0, 2),
            lib.m.transpose(x, (1, 2, 0)))


@case(DA, "ravel", "reshape", notes="rows in uneven blocks (dask's reshape needs whole "
      "trailing axes)")
def _(lib):
    x = lib.a(F, chunks=((3, 3, 1), (5,)))
    return lib.m.ravel(x), lib.m.reshape(x, (35,)), lib.m.reshape(x, (7, 5, 1))


@case(DA, "reshape_blockwise")
def _(lib):
    x = lib.a(np.arange(24.0).reshape(4, 6), chunks=(2, 3))
    return lib.m.reshape_blockwise(x, (24,))


@case(DA, "rechunk")
def _(lib):
    return lib.m.rechunk(lib.a(F), (2, 5)).chunks, lib.m.rechunk(lib.a(F), "auto").chunks


@case(DA, "repeat", "tile")
def _(lib):
    return lib.m.repeat(lib.a(F), 3, axis=1), lib.m.tile(lib.a(V), (2, 3))


@case(DA, "roll", "rot90")
def _(lib):
    x = lib.a(F)
    return lib.m.roll(x, 3, axis=0), lib.m.roll(x, -2), lib.m.rot90(x), lib.m.rot90(x, 3)


@case(DA, "pad")
def _(lib):
    return (lib.m.pad(lib.a(F), ((1, 2), (3, 0)), mode="reflect"),
            lib.m.pad(lib.a(F), 2, mode="constant", constant_values=-1))


@case(DA, "shuffle")
def _(lib):
    return lib.m.shuffle(lib.a(F), [[4, 0], [6, 1, 2], [3, 5]], axis=0)


@case(DA, "unify_chunks")
def _(lib):
    x = lib.a(F, chunks=((5, 2), (2, 3)))
    y = lib.a(G, chunks=((2, 5), (5,)))
    chunkss, arrays = lib.m.unify_chunks(x, "ij", y, "ij")
    return tuple(sorted(chunkss.items())), arrays[0] + arrays[1]


# -- dask.array: indexing, selection, sorting --------------------------------------------------


@case(DA, "argwhere", "nonzero", "flatnonzero", computes=TWO_PHASE)
def _(lib):
    x = lib.a(BOOL)
    return lib.m.argwhere(x), *lib.m.nonzero(x), lib.m.flatnonzero(x)


@case(DA, "where")
def _(lib):
    return lib.m.where(lib.a(BOOL), lib.a(F), lib.a(G)), lib.m.where(lib.a(BOOL), 1.0, 0.0)


@case(DA, "choose")
def _(lib):
    return lib.m.choose(lib.a(I % 3), [lib.a(F), lib.a(G), lib.a(-F)])


@case(DA, "select")
def _(lib):
    return lib.m.select([lib.a(G < -0.5), lib.a(G > 0.5)], [lib.a(F), lib.a(-F)], -9.0)


@case(DA, "piecewise")
def _(lib):
    x = lib.a(G)
    return lib.m.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * 2])


@case(DA, "digitize")
def _(lib):
    return lib.m.digitize(lib.a(G), np.array([-1.0, 0.0, 0.5])), lib.m.digitize(
        lib.a(G), np.array([-1.0, 0.0]), right=True)


@case(DA, "compress", "extract", computes=TWO_PHASE)
def _(lib):
    return (lib.m.compress([True, False, True, True, False], lib.a(F), axis=1),
            lib.m.extract(lib.a(BOOL), lib.a(F)))


@case(DA, "take")
def _(lib):
    return lib.m.take(lib.a(F), [6, 0, 3], axis=0), lib.m.take(lib.a(F), [4, 1], axis=1)


@case(DA, "searchsorted")
def _(lib):
    return lib.m.searchsorted(lib.a(np.sort(V)), lib.a(G[0]))


@case(DA, "topk", "argtopk")
def _(lib):
    return lib.m.topk(lib.a(V), 3), lib.m.argtopk(lib.a(V), -2), lib.m.topk(lib.a(F), 2,
                                                                              axis=0)


@case(DA, "unique", "union1d", computes=TWO_PHASE)
def _(lib):
    return (*lib.m.unique(lib.a(I), return_counts=True, return_inverse=True),
            lib.m.union1d(lib.a(I[0]), lib.a(I[3])))


@case(DA, "isin")
def _(lib):
    return lib.m.isin(lib.a(I), [2, 5, 7])


@case(DA, "ravel_multi_index", "unravel_index")
def _(lib):
    idx = lib.a(np.array([3, 7, 21, 34]))
    rows, cols = lib.m.unravel_index(idx, (7, 5))
    return rows, cols, lib.m.ravel_multi_index((rows, cols), (7, 5))


# -- dask.array: reductions and statistics -----------------------------------------------------

_REDUCTIONS = ("sum", "prod", "mean", "var", "std", "min", "max", "argmin", "argmax", "any",
               "all", "nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmin", "nanmax",
               "nanargmin", "nanargmax", "cumsum", "cumprod", "nancumsum", "nancumprod",
               "count_nonzero", "ptp", "median", "nanmedian")
for _n in _REDUCTIONS:
    def _reduction(lib, _n=_n):
        f = getattr(lib.m, _n)
        x = lib.a(NANS if _n.startswith("nan") else G)
        out = [f(x, axis=0), f(x, axis=1), f(lib.a(I), axis=0)]
        if _n not in ("median", "nanmedian", "nancumsum", "nancumprod"):
            out.append(f(x))
        return out
    CASES[(DA, _n)] = Case(run=_reduction)


@case(DA, "average")
def _(lib):
    return (lib.m.average(lib.a(F), axis=0, weights=lib.a(V[:7])),
            lib.m.average(lib.a(F), axis=1))


@case(DA, "percentile", "quantile", "nanpercentile", "nanquantile", against="numpy",
      notes="dask's are approximate across blocks; tilegraph's are exact")
def _(lib):
    x = lib.a(G)
    return (lib.m.percentile(x, [10, 50, 90], axis=0), lib.m.quantile(x, 0.3, axis=1),
            lib.m.nanpercentile(x, 25, axis=0), lib.m.nanquantile(x, [0.5], axis=1))


@case(DA, "bincount", computes="the length of the result (the largest value) is computed "
      "first (two phases, as documented)")
def _(lib):
    return lib.m.bincount(lib.a(I.ravel())), lib.m.bincount(lib.a(I.ravel()),
                                                            weights=lib.a(F.ravel()))


@case(DA, "histogram")
def _(lib):
    h, e = lib.m.histogram(lib.a(G), bins=5, range=(-2, 2))
    h2, _ = lib.m.histogram(lib.a(G), bins=[-1, 0, 0.5, 3], weights=lib.a(F))
    return h, e, h2


@case(DA, "histogram2d", "histogramdd")
def _(lib):
    h, ex, ey = lib.m.histogram2d(lib.a(V), lib.a(V[::-1]), bins=4, range=[[-2, 2], [-2, 2]])
    hd, edges = lib.m.histogramdd(lib.a(G[:, :3], chunks=((3, 3, 1), (3,))), bins=3,
                                  range=[(-2, 2)] * 3)
    return h, ex, ey, hd, *edges


@case(DA, "corrcoef", "cov")
def _(lib):
    return lib.m.cov(lib.a(F)), lib.m.corrcoef(lib.a(G)), lib.m.cov(lib.a(F), ddof=0)


@case(DA, "diagonal", "trace")
def _(lib):
    return (lib.m.diagonal(lib.a(F), 1), lib.m.trace(lib.a(F)),
            lib.m.diagonal(lib.a(STACK), 0, 1, 2))


@case(DA, "diff", "ediff1d")
def _(lib):
    return (lib.m.diff(lib.a(F), axis=0), lib.m.diff(lib.a(V), n=2),
            lib.m.ediff1d(lib.a(V), to_begin=[0.0], to_end=lib.a(np.array([9.0]))))


@case(DA, "gradient", notes="blocks of two or more (dask needs edge_order + 1)")
def _(lib):
    one = lib.m.gradient(lib.a(V, chunks=((6, 5),)), 0.5)
    one = one[0] if isinstance(one, list) else one  # dask's is a list of one array
    return (*lib.m.gradient(lib.a(F, chunks=((4, 3), (3, 2)))), one)


@case(DA, "isclose", "allclose")
def _(lib):
    return lib.m.isclose(lib.a(F), lib.a(F + 1e-9)), lib.m.allclose(lib.a(F), lib.a(F))


@case(DA, "isnull", "notnull")
def _(lib):
    x = lib.a(np.where(BOOL, np.nan, F))
    return lib.m.isnull(x), lib.m.notnull(x)


@case(DA, "moment")
def _(lib):
    return lib.m.moment(lib.a(G), 3, axis=0), lib.m.moment(lib.a(G), 2, ddof=1)


@case(DA, "coarsen")
def _(lib):
    x = lib.a(np.arange(48.0).reshape(6, 8), chunks=(2, 4))
    return lib.m.coarsen(np.sum, x, {0: 2, 1: 4}), lib.m.coarsen(np.max, x, {1: 2})


@case(DA, "push", against="numpy", notes="bottleneck.push's forward fill (dask's needs "
      "bottleneck, absent here): against pandas' ffill")
def _(lib):
    data = np.where(BOOL, np.nan, G)
    if lib.name == "numpy":
        import pandas as pd

        return (pd.DataFrame(data).ffill().to_numpy(),
                pd.DataFrame(data).ffill(limit=1).to_numpy())
    x = lib.a(data)
    return lib.m.push(x, None, axis=0), lib.m.push(x, 1, axis=0)


@case(DA, "reduction")
def _(lib):
    return lib.m.reduction(lib.a(G), np.sum, np.sum, axis=0, dtype=float)


@case(DA, "apply_along_axis")
def _(lib):
    return lib.m.apply_along_axis(np.cumsum, 0, lib.a(F))


@case(DA, "apply_over_axes")
def _(lib):
    return lib.m.apply_over_axes(lib.m.sum, lib.a(STACK), [0, 2])


@case(DA, "apply_gufunc", "gufunc", "as_gufunc")
def _(lib):
    x = lib.a(STACK, chunks=(2, 5, 5))
    g = lib.m.gufunc(np.linalg.det, signature="(m,m)->()", output_dtypes=float)
    h = lib.m.as_gufunc(signature="(i)->()", output_dtypes=float)(lambda b: b.sum(-1))
    return (lib.m.apply_gufunc(np.linalg.inv, "(m,n)->(n,m)", x, output_dtypes=float),
            g(x), h(lib.a(F, chunks=(3, 5))))


# -- dask.array: products and blocks -----------------------------------------------------------


@case(DA, "dot", "matmul", "tensordot", "outer", "vdot", "einsum")
def _(lib):
    x, y = lib.a(F), lib.a(G.T)
    return (lib.m.dot(x, y), lib.m.matmul(x, y), lib.m.tensordot(x, lib.a(G), axes=2),
            lib.m.outer(lib.a(V[:4]), lib.a(V[4:9])), lib.m.vdot(lib.a(C), lib.a(C)),
            lib.m.einsum("ij,kj->ik", x, lib.a(G)))


@case(DA, "map_blocks")
def _(lib):
    def where(block, block_id=None):
        return block + block_id[0]
    return (lib.m.map_blocks(np.sin, lib.a(F)), lib.m.map_blocks(where, lib.a(F), dtype=float),
            lib.m.map_blocks(lambda b: b.sum(axis=0, keepdims=True), lib.a(F),
                             chunks=((1, 1, 1), (2, 2, 1))))


@case(DA, "map_overlap", "overlap")
def _(lib):
    x = lib.a(V)
    return (lib.m.map_overlap(lambda b: np.convolve(b, [1, 1, 1], "same"), x, depth=1,
                              boundary=0),)


@case(DA, "blockwise")
def _(lib):
    return lib.m.blockwise(np.add, "ij", lib.a(F), "ij", lib.a(G), "ij", dtype=float)


@case(DA, "compute", computes="computes, as asked")
def _(lib):
    if lib.name == "tilegraph":
        return tg.compute(tg.from_numpy(F).sum(), tg.from_numpy(I).max())
    import dask

    return dask.compute(lib.a(F).sum(), lib.a(I).max(), scheduler="sync")


@case(DA, "assert_eq", computes="computes, as asked")
def _(lib):
    return lib.m.assert_eq(lib.a(F) + 1, F + 1)


@case(DA, "result_type", "shape", "ndim")
def _(lib):
    x = lib.a(F32)
    return (np.dtype(lib.m.result_type(x, np.int64)), lib.m.shape(x), lib.m.ndim(x),
            np.dtype(lib.m.result_type(x, 2.0)))


@case(DA, "lib", notes="lib.stride_tricks.sliding_window_view")
def _(lib):
    return lib.m.lib.stride_tricks.sliding_window_view(lib.a(V), 3)


@case(DA, "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
      "float32", "float64", "complex64", "complex128", "e", "pi", "inf", "nan",
      "euler_gamma", "newaxis", kind="exists", notes="NumPy's")
def _(lib):
    import dask.array as da

    names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64", "float32", "float64", "complex64", "complex128", "e", "pi", "inf",
             "euler_gamma", "newaxis")
    same = all(getattr(tg, n) == getattr(da, n) for n in names)
    return same and np.isnan(tg.nan)


@case(DA, "Array", kind="exists", notes="tilegraph.Array")
def _(lib):
    return isinstance(tg.ones(3) + 1, tg.Array)


@case(DA, "PerformanceWarning", kind="exists",
      notes="warned for plans of many tiny blocks")
def _(lib):
    return issubclass(tg.PerformanceWarning, Warning)


for _m in ("fft", "linalg", "ma", "random"):
    CASES[(DA, _m)] = Case(kind="exists", run=lambda lib, _m=_m: hasattr(tg, _m),
                           notes=f"see dask.array.{_m} below")

refused(DA, "from_delayed", "tg.from_dask(dask.array.from_delayed",
        lambda lib: tg.from_delayed(None, (3,), float))
refused(DA, "from_tiledb", "tg.from_array(tiledb.open", lambda lib: tg.from_tiledb("x"))
refused(DA, "to_tiledb", "tg.store(x, tiledb.open", lambda lib: tg.to_tiledb(tg.ones(3), "x"))
refused(DA, "frompyfunc", "tg.gufunc(func", lambda lib: tg.frompyfunc(abs, 1, 1))
refused(DA, "register_chunk_type", "NumPy arrays", lambda lib: tg.register_chunk_type(list))


@case(DA, "atop", notes="dask's old name of blockwise (warns, as dask's)")
def _(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.m.atop(np.add, "ij", lib.a(F), "ij", lib.a(G), "ij", dtype=float)


na(DA, "array_expr_enabled", "dask's switch between its two graph front ends")
na(DA, "backends", "dask's registry of array backends (CuPy, ...); tilegraph's blocks are "
   "NumPy arrays (and scipy.sparse for tg.SparseArray)")
na(DA, "optimize", "dask's optimisation of its own graphs; tilegraph plans (culls, places, "
   "fuses, orders) every graph it runs, tg.get included")


# -- dask.array.Array --------------------------------------------------------------------------


@case(ARR, "T", "transpose", "swapaxes", "reshape", "ravel", "flatten", "squeeze", "astype",
      "copy", "rechunk")
def _(lib):
    x = lib.a(STACK)
    return (x.T, x.transpose(1, 0, 2), x.swapaxes(0, 1), x.reshape(15, 5), x.ravel(),
            x.flatten(), x[:, :1].squeeze(1), x.astype(np.float32), x.copy(),
            x.rechunk((1, 5, 2)))


@case(ARR, "all", "any", "argmax", "argmin", "max", "min", "mean", "prod", "std", "sum",
      "var", "cumsum", "cumprod", "trace", "moment")
def _(lib):
    x = lib.a(G)
    return (x.all(), (x > -3).all(axis=0), x.any(axis=1), x.argmax(axis=0), x.argmin(),
            x.max(axis=1), x.min(), x.mean(axis=0), x.prod(axis=1), x.std(ddof=1),
            x.sum(axis=0), x.var(axis=1), x.cumsum(axis=0), x.cumprod(axis=1), x.trace(),
            x.moment(3, axis=0))


@case(ARR, "topk", "argtopk", "clip", "round", "conj", "real", "imag", "dot", "choose",
      "repeat")
def _(lib):
    x = lib.a(G)
    z = lib.a(C)
    return (x.topk(2, axis=0), x.argtopk(-2, axis=1), x.clip(-0.5, 0.5), x.round(2),
            z.conj(), z.real, z.imag, x.dot(lib.a(F.T)), lib.a(I % 2).choose([x, -x]),
            x.repeat(2, axis=0))


@case(ARR, "nonzero", computes=TWO_PHASE)
def _(lib):
    return lib.a(BOOL).nonzero()


@case(ARR, "map_blocks", "map_overlap")
def _(lib):
    x = lib.a(V)
    return x.map_blocks(np.cos), x.map_overlap(lambda b: b * 2, depth=1, boundary="none")


@case(ARR, "blocks", "partitions", "vindex")
def _(lib):
    x = lib.a(F)
    return x.blocks[1, 0], x.partitions[-1, 1], x.vindex[[0, 6, 2], [4, 1, 1]]


@case(ARR, "shape", "chunks", "chunksize", "dtype", "itemsize", "nbytes", "ndim",
      "npartitions", "numblocks", "size")
def _(lib):
    x = lib.a(F32)
    return (x.shape, x.chunks, x.chunksize, np.dtype(x.dtype), x.itemsize, x.nbytes, x.ndim,
            x.npartitions, x.numblocks, x.size)


@case(ARR, "compute", "persist", "compute_chunk_sizes", "A", computes="computes, as asked")
def _(lib):
    x = lib.a(F) * 2
    return x.compute(), x.persist() + 1, x.compute_chunk_sizes() - 1, x.A


@case(ARR, "view")
def _(lib):
    return lib.a(F).view(np.int64), lib.a(F32, chunks=(3, 2)).view(np.uint16)


@case(ARR, "shuffle")
def _(lib):
    return lib.a(F).shuffle([[2, 3], [0, 1], [4]], axis=1)


@case(ARR, "store", "to_zarr", "to_hdf5", notes="written and read back", computes=WRITES)
def _(lib):
    import h5py

    d = tempfile.mkdtemp()
    target = np.zeros((7, 5))
    lib.a(F).store(target)
    lib.a(F).to_zarr(os.path.join(d, "z.zarr"))
    lib.a(I).to_hdf5(os.path.join(d, "h.h5"), "/x")
    with h5py.File(os.path.join(d, "h.h5"), "r") as f:
        back = f["/x"][()]
    return target, lib.m.from_zarr(os.path.join(d, "z.zarr")), back


@case(ARR, "name", kind="exists", notes="a deterministic name of the plan")
def _(lib):
    return isinstance(tg.ones(3).name, str) and (tg.ones(3) + 1).name == (tg.ones(3) + 1).name


@case(ARR, "visualize", kind="exists", notes="writes the task graph (Graphviz)")
def _(lib):
    path = os.path.join(tempfile.mkdtemp(), "g.dot")
    return tg.ones((4, 4), chunks=2).sum().visualize(path) == path and os.path.getsize(path)


na(ARR, "dask", "dask's HighLevelGraph of the array; tilegraph's plan is x.explain() "
   "and dask's view of it x.__dask_graph__() (or x.to_dask().dask)")
for _n, _match in (("to_delayed", "x.to_dask().to_delayed()"),
                   ("to_dask_dataframe", "x.to_dask().to_dask_dataframe()"),
                   ("to_tiledb", "tg.store(x, tiledb.open"),
                   ("to_svg", "x.visualize("), ("to_backend", "x.map_blocks(converter)")):
    refused(ARR, _n, _match, lambda lib, _n=_n: getattr(tg.ones(3), _n)("x"))


# -- dask.array.random -------------------------------------------------------------------------

RND = "dask.array.random"

# method -> (args, NumPy Generator method, its args) ; drawn with size=(40, 50)
_DRAWS = {
    "beta": ((2.0, 3.0),), "binomial": ((10, 0.3),), "chisquare": ((3.0,),),
    "exponential": ((2.0,),), "f": ((5.0, 7.0),), "gamma": ((2.0, 1.5),),
    "geometric": ((0.3,),), "gumbel": ((1.0, 2.0),), "hypergeometric": ((7, 5, 4),),
    "laplace": ((0.5, 2.0),), "logistic": ((0.0, 1.0),), "lognormal": ((0.0, 0.5),),
    "logseries": ((0.6,),), "negative_binomial": ((5, 0.5),),
    "noncentral_chisquare": ((3.0, 2.0),), "noncentral_f": ((5.0, 7.0, 1.0),),
    "normal": ((1.0, 2.0),), "pareto": ((3.0,),), "poisson": ((4.0,),), "power": ((2.0,),),
    "rayleigh": ((1.5,),), "standard_cauchy": ((),), "standard_exponential": ((),),
    "standard_gamma": ((2.0,),), "standard_normal": ((),), "standard_t": ((5.0,),),
    "triangular": ((0.0, 1.0, 3.0),), "uniform": ((-1.0, 2.0),), "vonmises": ((0.0, 2.0),),
    "wald": ((1.0, 2.0),), "weibull": ((1.5,),), "zipf": ((2.5,),),
    "random": ((),), "random_sample": ((),), "integers": ((3, 17),), "randint": ((3, 17),),
    "random_integers": ((3, 17),), "tomaxint": ((),),
}
_NUMPY_NAME = {"random_sample": ("random", None), "randint": ("integers", None),
               "random_integers": ("integers", "endpoint")}


def _random_case(owner: str, method: str) -> Case:
    (args,) = _DRAWS[method]

    def run(lib: Lib) -> Any:
        if lib.name == "numpy":
            if method == "tomaxint":
                return np.random.RandomState(0).tomaxint(size=(40, 50))
            name, extra = _NUMPY_NAME.get(method, (method, None))
            g = np.random.default_rng(0)
            kwargs = {"endpoint": True} if extra == "endpoint" else {}
            return getattr(g, name)(*args, size=(40, 50), **kwargs)
        if owner == "module":
            f = getattr(lib.m.random, method)
            if lib.name == "tilegraph":
                tg.random.seed(5)
                return f(*args, size=(40, 50), chunks=(13, 17))
            lib.m.random.seed(5)
            return f(*args, size=(40, 50), chunks=(13, 17))
        gen = (lib.m.random.default_rng(5) if owner == "Generator"
               else lib.m.random.RandomState(5))
        return getattr(gen, method)(*args, size=(40, 50), chunks=(13, 17))

    return Case(run=run, kind="random", against="dask and numpy",
                notes="shape, blocks, dtype as dask's; median as NumPy's")


def _random_cases() -> None:
    import dask.array as da

    for name in _defined_in(da.random):
        if name in _DRAWS:
            CASES[(RND, name)] = _random_case("module", name)
    for cls in ("Generator", "RandomState"):
        for name in dir(getattr(da.random, cls)):
            if name in _DRAWS:
                CASES[(RND, f"{cls}.{name}")] = _random_case(cls, name)


@case(RND, "default_rng", "Generator", kind="random", against="dask")
def _(lib):
    return lib.m.random.default_rng(3).standard_normal((9, 4), chunks=(4, 3))


@case(RND, "RandomState", "seed", "RandomState.seed", kind="random", against="dask")
def _(lib):
    state = lib.m.random.RandomState(3)
    state.seed(4)
    return state.normal(0, 1, size=(9, 4), chunks=(4, 3))


@case(RND, "choice", "Generator.choice", "RandomState.choice", kind="random",
      against="dask", notes="from an int and from an array, with p")
def _(lib):
    g = lib.m.random.default_rng(2)
    return (g.choice(6, size=(9,), chunks=4),
            g.choice(lib.a(V[:4], chunks=2), size=(5, 3), p=[0.1, 0.2, 0.3, 0.4], chunks=2))


@case(RND, "permutation", "Generator.permutation", "RandomState.permutation",
      kind="permutation", against="dask", notes="a permutation of the values, as dask's")
def _(lib):
    g = lib.m.random.default_rng(2)
    return g.permutation(lib.a(V)), g.permutation(9)


@case(RND, "multinomial", "Generator.multinomial", "RandomState.multinomial",
      kind="random", against="dask")
def _(lib):
    return lib.m.random.default_rng(2).multinomial(20, [0.2, 0.3, 0.5], size=(7, 4),
                                                   chunks=3)


@case(RND, "Generator.multivariate_hypergeometric", kind="random", against="numpy",
      notes="NumPy's shape (size + the colours); dask's lacks the colours' axis")
def _(lib):
    if lib.name == "numpy":
        return np.random.default_rng(0).multivariate_hypergeometric([4, 5, 6], 7, size=(6,))
    return lib.m.random.default_rng(2).multivariate_hypergeometric([4, 5, 6], 7, size=(6,),
                                                                   chunks=4)


# -- dask.array.fft ----------------------------------------------------------------------------

FFT = "dask.array.fft"
for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    def _fft1(lib, _n=_n):
        f = getattr(lib.m.fft, _n)
        x = lib.a(C if _n in ("ifft", "irfft", "hfft") else G, chunks=(3, 5))
        return f(x), f(x, n=8, axis=-1), f(x, norm="ortho")
    CASES[(FFT, _n)] = Case(run=_fft1, notes="axis in one block (dask requires it)")
for _n in ("fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"):
    def _fftn(lib, _n=_n):
        f = getattr(lib.m.fft, _n)
        x = lib.a(C if _n.startswith("i") else G, chunks=(7, 5))
        return f(x), f(x, s=(6, 4), axes=(0, 1))
    CASES[(FFT, _n)] = Case(run=_fftn)


@case(FFT, "fftfreq", "rfftfreq")
def _(lib):
    return lib.m.fft.fftfreq(9, 0.5, chunks=4), lib.m.fft.rfftfreq(10, chunks=3)


@case(FFT, "fftshift", "ifftshift")
def _(lib):
    x = lib.a(G)
    return lib.m.fft.fftshift(x), lib.m.fft.ifftshift(x, axes=1)


@case(FFT, "fft_wrap")
def _(lib):
    return lib.m.fft.fft_wrap(np.fft.rfft)(lib.a(G, chunks=(3, 5)))


# -- dask.array.linalg -------------------------------------------------------------------------

LIN = "dask.array.linalg"


_SQUARE = "dask needs equal square blocks; tilegraph also takes uneven ones"


@case(LIN, "cholesky", notes="tilegraph's default is NumPy's lower factor, dask's the "
      "upper one: pass lower=. " + _SQUARE)
def _(lib):
    return lib.m.linalg.cholesky(lib.a(SPD6, chunks=2), lower=True), lib.m.linalg.cholesky(
        lib.a(SPD6, chunks=2), lower=False)


@case(LIN, "inv", "solve", "solve_triangular", notes=_SQUARE)
def _(lib):
    a = lib.a(SPD6, chunks=2)
    return (lib.m.linalg.inv(a), lib.m.linalg.solve(a, lib.a(F[:6], chunks=(2, 5))),
            lib.m.linalg.solve_triangular(lib.m.tril(a), lib.a(V[:6], chunks=2), lower=True))


@case(LIN, "lu", notes=_SQUARE)
def _(lib):
    return lib.m.linalg.lu(lib.a(SPD6, chunks=2))


@case(LIN, "lstsq")
def _(lib):
    return lib.m.linalg.lstsq(lib.a(TALL, chunks=(5, 4)), lib.a(B12, chunks=5))


@case(LIN, "norm")
def _(lib):
    x = lib.a(F)
    return (lib.m.linalg.norm(x), lib.m.linalg.norm(x, 1), lib.m.linalg.norm(x, axis=1),
            lib.m.linalg.norm(x, np.inf))


@case(LIN, "qr", "tsqr", "sfqr", notes="signs: R's diagonal made non-negative on both sides")
def _(lib):
    q, r = lib.m.linalg.qr(lib.a(TALL, chunks=(5, 4)))
    q2, r2 = lib.m.linalg.tsqr(lib.a(TALL, chunks=(5, 4)))
    q3, r3 = lib.m.linalg.sfqr(lib.a(TALL.T, chunks=(4, 5)))
    out = []
    for qq, rr in ((q, r), (q2, r2), (q3, r3)):
        s = lib.m.sign(lib.m.diagonal(rr))
        out += [qq * s, rr * s[:, None]]
    return out


@case(LIN, "svd", notes="coerce_signs=True on both sides (dask's default; tilegraph's "
      "default keeps LAPACK's signs)")
def _(lib):
    return lib.m.linalg.svd(lib.a(TALL, chunks=(5, 4)), coerce_signs=True)


@case(LIN, "svd_compressed", "compression_matrix", rtol=1e-5,
      notes="the singular values of a rank-4 matrix (the sketches differ)")
def _(lib):
    x = lib.a(LOWRANK, chunks=(5, 9))
    _, s, _ = lib.m.linalg.svd_compressed(x, 4, n_power_iter=1, seed=1)
    q = lib.m.linalg.compression_matrix(x, 4, seed=1)
    return s, q.shape


@case(LIN, "compression_level", kind="exists")
def _(lib):
    import dask.array as da

    return all(tg.linalg.compression_level(n, q) == da.linalg.compression_level(n, q)
               for n in (5, 100, 1000) for q in (1, 10, 50))


# -- dask.array.ma -----------------------------------------------------------------------------

MA = "dask.array.ma"
_MASKED = np.where(G > 1.2, np.nan, G)


@case(MA, "masked_array", "getdata", "getmaskarray", "filled", "count", "average")
def _(lib):
    ma = lib.m.ma
    m = ma.masked_array(lib.a(G), mask=lib.a(BOOL))
    return (m, ma.getdata(m), ma.getmaskarray(m), ma.filled(m, -1.0), ma.count(m, axis=0),
            ma.average(m, axis=0), m.sum(axis=1))


@case(MA, "masked_equal", "masked_greater", "masked_greater_equal", "masked_less",
      "masked_less_equal", "masked_not_equal", "masked_inside", "masked_outside",
      "masked_values", "masked_where", "masked_invalid", "fix_invalid")
def _(lib):
    ma = lib.m.ma
    x = lib.a(I.astype(float))
    return (ma.masked_equal(x, 3.0), ma.masked_not_equal(x, 3.0),
            ma.masked_inside(x, 2, 4), ma.masked_outside(x, 2, 4),
            ma.masked_values(x, 5.0), ma.masked_where(lib.a(BOOL), x),
            ma.masked_invalid(lib.a(_MASKED)), ma.fix_invalid(lib.a(_MASKED), fill_value=0))


@case(MA, "empty_like", "ones_like", "zeros_like", "where", "set_fill_value")
def _(lib):
    ma = lib.m.ma
    m = ma.masked_where(lib.a(BOOL), lib.a(G))
    ma.set_fill_value(m, -7.0)
    return (ma.ones_like(m), ma.zeros_like(m), ma.empty_like(m).shape,
            ma.where(lib.a(G > 0), m, 0.0), ma.filled(m))


@case(MA, "nonzero", computes=TWO_PHASE)
def _(lib):
    return lib.m.ma.nonzero(lib.m.ma.masked_where(lib.a(BOOL), lib.a(G)))


na(MA, "normalize_masked_array", "dask's tokenizer of NumPy masked arrays (the names of "
   "its graph keys)")


# -- dask.array.stats --------------------------------------------------------------------------

ST = "dask.array.stats"
_SAMPLE = rng.normal(0.3, 1.0, (40, 3))


@case(ST, "ttest_1samp", "ttest_ind", "ttest_rel", against="dask and scipy")
def _(lib):
    s = lib.m.stats
    a, b = lib.a(_SAMPLE, chunks=(15, 2)), lib.a(_SAMPLE[::-1] * 1.1, chunks=(15, 2))
    return (*s.ttest_1samp(a, 0.1), *s.ttest_ind(a, b), *s.ttest_ind(a, b, equal_var=False),
            *s.ttest_rel(a, b))


@case(ST, "chisquare", "power_divergence")
def _(lib):
    s = lib.m.stats
    obs = lib.a(np.array([16.0, 18, 16, 14, 12, 12]), chunks=4)
    return (*s.chisquare(obs), *s.power_divergence(obs, lambda_="log-likelihood"),
            *s.chisquare(obs, f_exp=lib.a(np.full(6, 88 / 6), chunks=4), ddof=1))


@case(ST, "skew", "kurtosis", "moment")
def _(lib):
    s = lib.m.stats
    a = lib.a(_SAMPLE, chunks=(15, 2))
    return s.skew(a), s.kurtosis(a), s.kurtosis(a, fisher=False), s.moment(a, 3)


@case(ST, "skewtest", "kurtosistest", "normaltest", rtol=1e-5)
def _(lib):
    s = lib.m.stats
    a = lib.a(_SAMPLE, chunks=(15, 2))
    return (*s.skewtest(a), *s.kurtosistest(a), *s.normaltest(a))


@case(ST, "f_oneway")
def _(lib):
    return tuple(lib.m.stats.f_oneway(lib.a(V), lib.a(F[:, 0]), lib.a(G[:, 1])))


@case(ST, "F_onewayResult", "KurtosistestResult", "NormaltestResult",
      "Power_divergenceResult", "SkewtestResult", "Ttest_1sampResult", "Ttest_indResult",
      "Ttest_relResult", kind="exists", notes="the same named tuples")
def _(lib):
    import dask.array.stats as ds

    names = ("F_onewayResult", "KurtosistestResult", "NormaltestResult",
             "Power_divergenceResult", "SkewtestResult", "Ttest_1sampResult",
             "Ttest_indResult", "Ttest_relResult")
    return all(getattr(tg.stats, n)._fields == getattr(ds, n)._fields for n in names)


# -- NumPy functions dask dispatches, numpy.linalg, numpy.fft ----------------------------------

NPF = "NumPy functions dask dispatches"


def _numpy_case(qualname: str) -> Case | None:
    """The NumPy function ``qualname`` called on arrays of each side: the dask.array
    section's case for the same name, run with the NumPy function in place of the
    namespace's (so it goes through ``__array_function__``)."""
    module, short = qualname.rsplit(".", 1)
    section = {"numpy.fft": FFT, "numpy.linalg": LIN}.get(module, DA)
    base = CASES.get((section, short))
    if base is None or base.kind != "values" or module == "numpy.linalg" or short in (
            "fftfreq", "rfftfreq"):
        return None

    class ViaNumPy:
        def __init__(self, lib: Lib):
            self.lib = lib

        def __getattr__(self, name: str) -> Any:
            if module == "numpy.fft" and name == "fft":
                return np.fft
            if name == short:
                return _resolve(qualname)
            return getattr(self.lib.m, name)

    def run(lib: Lib) -> Any:
        proxy = Lib(lib.name, ViaNumPy(lib))
        proxy.a = lib.a  # type: ignore[method-assign]
        return base.run(proxy)

    return Case(run=run, against=base.against, rtol=base.rtol, notes=base.notes,
                computes=base.computes)


def _resolve(qualname: str) -> Any:
    mod, name = qualname.rsplit(".", 1)
    return getattr(__import__(mod, fromlist=["x"]), name)


ASKED = "the 0-d values are computed when NumPy asks for numbers"


@case(NPF, "numpy.linspace", against="numpy", computes=ASKED,
      notes="0-d tilegraph start/stop: NumPy's linspace on their values (as SciPy's "
            "ndimage.histogram asks)")
def _(lib):
    x = lib.a(G)
    return np.linspace(np.min(x), np.max(x), 11)


LNF = "numpy.linalg and numpy.fft"


@case(NPF, "numpy.linalg.cholesky", "numpy.linalg.inv", "numpy.linalg.solve",
      "numpy.linalg.qr", "numpy.linalg.svd", "numpy.linalg.lstsq", "numpy.linalg.norm",
      against="numpy", notes="one matrix in uneven blocks (dask answers np.linalg.cholesky "
      "with its upper factor; NumPy's is the lower)")
def _(lib):
    a = lib.a(SPD6, chunks=((2, 3, 1), (2, 3, 1)))
    q, r = np.linalg.qr(lib.a(TALL, chunks=(5, 4)))
    s = np.linalg.svd(lib.a(TALL, chunks=(5, 4)), compute_uv=False)
    x, *_ = np.linalg.lstsq(lib.a(TALL, chunks=(5, 4)), lib.a(B12, chunks=5))
    return (np.linalg.cholesky(a), np.linalg.inv(a), np.linalg.solve(a, lib.a(V[:6])),
            np.abs(q), np.abs(r), s, x, np.linalg.norm(a), np.linalg.norm(lib.a(F), 1))


@case(LNF, "numpy.fft.fftfreq", "numpy.fft.rfftfreq", kind="exists", computes="to check",
      notes="no array argument: NumPy's own answer; tg.fft.fftfreq gives it in blocks")
def _(lib):
    return bool(np.allclose(tg.fft.fftfreq(9, 0.5, chunks=4).compute(),
                            np.fft.fftfreq(9, 0.5)) and np.allclose(
        tg.fft.rfftfreq(10, chunks=3).compute(), np.fft.rfftfreq(10)))


@case(LNF, "numpy.linalg.svd", "numpy.linalg.svdvals", against="numpy",
      notes="a stack of matrices, each one block; signs made LAPACK's")
def _(lib):
    u, s, vh = np.linalg.svd(lib.a(STACK, chunks=(2, 5, 5)))
    sign = np.sign(u[..., :1, :]) if lib.name == "numpy" else lib.m.sign(u[..., :1, :])
    return u * sign, s, vh * np.swapaxes(sign, -1, -2), np.linalg.svdvals(
        lib.a(STACK, chunks=(2, 5, 5)))


@case(LNF, "numpy.linalg.eigh", "numpy.linalg.eigvalsh", against="numpy",
      notes="stacks, UPLO='L' and 'U'")
def _(lib):
    x = lib.a(STACK + np.swapaxes(STACK, -1, -2), chunks=(2, 5, 5))
    w, v = np.linalg.eigh(x)
    return w, np.abs(v), np.linalg.eigvalsh(x, UPLO="U")


@case(LNF, "numpy.linalg.det", "numpy.linalg.slogdet", "numpy.linalg.inv",
      "numpy.linalg.solve", "numpy.linalg.matrix_power", "numpy.linalg.cholesky",
      "numpy.linalg.qr", against="numpy", notes="stacks of matrices and one matrix")
def _(lib):
    spd = STACK @ np.swapaxes(STACK, -1, -2)
    x = lib.a(spd, chunks=(2, 5, 5))
    q, r = np.linalg.qr(x)
    one = lib.a(SPD, chunks=2)
    _, r1 = np.linalg.qr(one)
    return (np.linalg.det(x), *np.linalg.slogdet(x), np.linalg.inv(x),
            np.linalg.solve(x, lib.a(STACK[..., :2], chunks=(2, 5, 2))),
            np.linalg.matrix_power(x, 3), np.linalg.cholesky(x), np.abs(q), np.abs(r),
            np.linalg.det(one), np.linalg.inv(one), np.linalg.cholesky(one), np.abs(r1))


@case(LNF, "numpy.linalg.pinv", "numpy.linalg.matrix_rank", "numpy.linalg.cond",
      "numpy.linalg.norm", "numpy.linalg.matrix_norm", "numpy.linalg.vector_norm",
      "numpy.linalg.lstsq", against="numpy")
def _(lib):
    x = lib.a(STACK, chunks=(2, 5, 5))
    return (np.linalg.pinv(x), np.linalg.matrix_rank(x), np.linalg.cond(x),
            np.linalg.norm(x, axis=(1, 2)), np.linalg.matrix_norm(x, ord=1),
            np.linalg.vector_norm(x, axis=-1), *np.linalg.lstsq(lib.a(TALL, chunks=(5, 4)),
                                                                lib.a(B12, chunks=5)))


@case(LNF, "numpy.linalg.multi_dot", "numpy.linalg.matmul", "numpy.linalg.tensordot",
      "numpy.linalg.outer", "numpy.linalg.cross", "numpy.linalg.vecdot",
      "numpy.linalg.matrix_transpose", "numpy.linalg.diagonal", "numpy.linalg.trace",
      "numpy.linalg.tensorinv", "numpy.linalg.tensorsolve", against="numpy")
def _(lib):
    x, s = lib.a(F), lib.a(STACK, chunks=(2, 5, 5))
    v3 = lib.a(G[:, :3])
    return (np.linalg.multi_dot([x, lib.a(G.T), lib.a(F)]), np.linalg.matmul(s, s),
            np.linalg.tensordot(x, lib.a(G), axes=2), np.linalg.outer(lib.a(V[:3]),
                                                                    lib.a(V[3:7])),
            np.linalg.cross(v3, v3[::-1]), np.linalg.vecdot(x, x),
            np.linalg.matrix_transpose(s), np.linalg.diagonal(s), np.linalg.trace(s),
            np.linalg.tensorinv(lib.a(SPD.reshape(5, 5, 1), chunks=(2, 5, 1)), ind=1),
            np.linalg.tensorsolve(lib.a(SPD, chunks=2), lib.a(V[:5], chunks=2)))


refused(LNF, "numpy.linalg.eig", "eigh", lambda lib: np.linalg.eig(tg.from_numpy(SPD)))
refused(LNF, "numpy.linalg.eigvals", "eigvalsh",
        lambda lib: np.linalg.eigvals(tg.from_numpy(SPD)))


# -- NumPy ufuncs ------------------------------------------------------------------------------

UF = "NumPy ufuncs"


def _numpy_ufunc_case(name: str) -> Case:
    ufunc = getattr(np, name)

    def run(lib: Lib) -> Any:
        out = []
        if ufunc.signature is not None:
            if name == "matmul":
                return [ufunc(lib.a(F), lib.a(G.T)), ufunc(lib.a(STACK, chunks=(2, 5, 5)),
                                                           lib.a(STACK[0], chunks=3))]
            x = lib.a(STACK, chunks=(2, 3, 4))
            v = lib.a(STACK[:, 0], chunks=(2, 3))
            return [ufunc(x, v) if name == "matvec" else ufunc(v, x) if name == "vecmat"
                    else ufunc(x, x)]
        with np.errstate(all="ignore"):
            for args in _ufunc_inputs(ufunc):
                out.append(ufunc(*[lib.a(a) for a in args]))
            if ufunc.nin == 2 and ufunc.nout == 1 and name not in ("ldexp",):
                args = _ufunc_inputs(ufunc)[0]
                out.append(ufunc.outer(lib.a(args[0][0]), lib.a(args[1][:, 0])))
            if name in ("add", "multiply", "maximum", "minimum", "logical_and",
                        "logical_or"):
                out.append(ufunc.reduce(lib.a(_ufunc_inputs(ufunc)[0][0]), axis=0))
                out.append(ufunc.accumulate(lib.a(_ufunc_inputs(ufunc)[0][0]), axis=1))
        return out

    gu = ufunc.signature is not None
    return Case(run=run, against="numpy",
                notes=(f"a generalized ufunc {ufunc.signature}: apply_gufunc, core "
                       "dimensions made one block" if gu and name != "matmul" else
                       "a blocked contraction" if name == "matmul" else
                       "each dtype NumPy has a loop for; .outer, and .reduce/.accumulate "
                       "where associative"))


# -- NumPy protocols ---------------------------------------------------------------------------

PROTOCOLS = {
    "__array_ufunc__": "ufuncs (above)", "__array_function__": "NumPy functions (above)",
    "__array__": "np.asarray(x) computes", "__array_namespace__": "the Array API namespace",
    "__float__ / __int__ / __complex__ / __bool__ / __index__ of a 0-d array":
        "the value, computed when asked",
    "0-d arrays passed to NumPy as numbers": "scipy.ndimage.histogram(x, np.min(x), ...)",
    "operators": "+ - * / // % ** @ & | ^ << >> < <= == != > >= - + ~ abs",
    "in-place operators": "x += y rebinds x",
    "__getitem__ / __setitem__": "basic, integer-array and mask indexing; assignment",
    "__format__": "format(x0d, '.3f')", "__len__ / __iter__": "as NumPy's",
    "generalized ufuncs (numba @guvectorize, np.vectorize(signature=))":
        "np.ufunc gufuncs through __array_ufunc__; np.vectorize through tg.gufunc",
    "__dlpack__": "the computed array through DLPack",
}
PR = "NumPy protocols"


@case(PR, "__array_ufunc__", "__array_function__", against="numpy")
def _(lib):
    x = lib.a(F)
    return np.sin(x), np.add(x, 1, dtype=np.float32), np.sum(x, axis=0), np.concatenate(
        [x, x])


@case(PR, "__array__", against="numpy", computes="np.asarray(x) computes, as asked")
def _(lib):
    return np.asarray(lib.a(F)), np.array(lib.a(I), dtype=float)


@case(PR, "__array_namespace__", kind="exists", computes="computes, to check")
def _(lib):
    x = tg.from_numpy(F, chunks=3)
    xp = x.__array_namespace__()
    return bool(np.allclose(xp.sum(xp.abs(x), axis=0).compute(), np.abs(F).sum(axis=0)))


@case(PR, "__float__ / __int__ / __complex__ / __bool__ / __index__ of a 0-d array",
      against="numpy", computes=ASKED)
def _(lib):
    x = lib.a(I)
    m = x.max() if lib.name != "numpy" else I.max()
    return float(m), int(m), complex(m), bool(m), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9][m]


@case(PR, "0-d arrays passed to NumPy as numbers", against="numpy", computes=ASKED,
      notes="scipy.ndimage.histogram(x, np.min(x), np.max(x), 10): the scalars are "
            "computed, SciPy then asks for x with np.asarray")
def _(lib):
    import scipy.ndimage

    x = lib.a(F)
    if lib.name == "numpy":
        return scipy.ndimage.histogram(F, F.min(), F.max(), 10)
    return scipy.ndimage.histogram(x, np.min(x), np.max(x), 10)


@case(PR, "operators", against="numpy")
def _(lib):
    x, y, i, j = lib.a(F), lib.a(G), lib.a(I), lib.a(I[::-1])
    return (x + y, x - y, x * y, x / y, x // y, x % y, x ** 2, x @ y.T, i & j, i | j,
            i ^ j, i << 1, i >> 1, x < y, x <= y, x == y, x != y, x > y, x >= y, -x, +x,
            ~i, abs(y), 2 - x, 1 / x)


@case(PR, "in-place operators", against="numpy")
def _(lib):
    x = lib.a(F)
    x += 1
    x *= 2
    i = lib.a(I)
    i //= 2
    return x, i


@case(PR, "__getitem__ / __setitem__", against="numpy", computes="a mask's selection "
      "counts its elements first (two phases, as documented)")
def _(lib):
    x = lib.a(F).copy() if lib.name == "numpy" else lib.a(F)
    x[2:4, 1] = -1.0
    x[lib.a(BOOL) if lib.name != "numpy" else BOOL] = 0.0
    return x, x[::2, [0, 3]], x[lib.a(G) > 0] if lib.name != "numpy" else x[G > 0]


@case(PR, "__format__", kind="exists", computes=ASKED)
def _(lib):
    return format(tg.from_numpy(F).sum(), ".3f") == format(F.sum(), ".3f")


@case(PR, "__len__ / __iter__", against="numpy")
def _(lib):
    x = lib.a(F)
    return len(x), list(x)[3]


@case(PR, "generalized ufuncs (numba @guvectorize, np.vectorize(signature=))",
      against="numpy", notes="numba is not installed here; its gufuncs are np.ufunc "
      "objects with a signature, as NumPy's own tested above")
def _(lib):
    from numpy._core import _umath_tests as ut

    x = lib.a(STACK, chunks=(2, 3, 5))
    if lib.name == "numpy":
        return ut.inner1d(STACK, STACK), np.vectorize(np.trace, signature="(m,m)->()")(STACK)
    return ut.inner1d(x, x), tg.gufunc(np.trace, signature="(m,m)->()", vectorize=True,
                                       output_dtypes=float, allow_rechunk=True)(x)


@case(PR, "__dlpack__", against="numpy", computes="DLPack hands over computed memory")
def _(lib):
    return np.from_dlpack(lib.a(F))


# -- running the cases -------------------------------------------------------------------------


class _Forbidden:
    """The backend in force while tilegraph results are built: running anything fails."""

    name = "parity-forbidden"

    def __init__(self, workers: Any = None):
        pass

    def run(self, part: Any, execution: Any) -> None:
        raise AssertionError(f"computed {execution.ntasks} tasks while building the result")


@contextlib.contextmanager
def forbid_compute():
    from tilegraph.runtime.backends import BACKENDS, Backend

    cls = type("ParityForbidden", (Backend,), {"name": _Forbidden.name,
                                               "run": _Forbidden.run})
    BACKENDS[_Forbidden.name] = lambda workers=None: cls()
    try:
        with tg.config.set(backend=_Forbidden.name):
            yield
    finally:
        del BACKENDS[_Forbidden.name]


def _lazy(value: Any) -> bool:
    return isinstance(value, (tg.Array, tg.ma.MaskedArray)) or hasattr(
        type(value), "__dask_graph__")


def _leaves(value: Any, out: list) -> Any:
    """The structure of ``value`` with its lazy arrays replaced by their index in
    ``out``."""
    if _lazy(value):
        out.append(value)
        return ("__leaf__", len(out) - 1)
    if isinstance(value, (list, tuple)):
        return type(value)(_leaves(v, out) for v in value) if not hasattr(
            value, "_fields") else tuple(_leaves(v, out) for v in value)
    return value


def _fill(value: Any, computed: list) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__leaf__":
        return computed[value[1]]
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, computed) for v in value)
    return value


def evaluate(result: Any, side: str) -> Any:
    leaves: list = []
    shape = _leaves(result, leaves)
    if not leaves:
        return shape
    if side == "tilegraph":
        computed = list(tg.compute(*[v for v in leaves if isinstance(v, tg.Array)],
                                   backend="sync")) if any(
            isinstance(v, tg.Array) for v in leaves) else []
        it = iter(computed)
        values = [next(it) if isinstance(v, tg.Array) else v.compute(backend="sync")
                  for v in leaves]
    else:
        import dask

        values = list(dask.compute(*leaves, scheduler="sync"))
    return _fill(shape, values)


def _chunks_of(result: Any) -> list:
    leaves: list = []
    _leaves(result, leaves)
    return [getattr(v, "chunks", None) for v in leaves]


def same(got: Any, want: Any, rtol: float, check_dtype: bool, where: str = "") -> None:
    if isinstance(want, (list, tuple)) and not isinstance(want, np.ndarray):
        assert isinstance(got, (list, tuple)), f"{where}: got {type(got).__name__}"
        assert len(got) == len(want), f"{where}: {len(got)} results, want {len(want)}"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, rtol, check_dtype, f"{where}[{k}]")
        return
    if isinstance(want, np.dtype) or isinstance(want, (str, type(None))):
        assert got == want, f"{where}: {got!r} != {want!r}"
        return
    g, w = np.ma.asarray(got), np.ma.asarray(want)
    assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
    if check_dtype:
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
    gm, wm = np.ma.getmaskarray(g), np.ma.getmaskarray(w)
    np.testing.assert_array_equal(gm, wm, err_msg=f"{where}: masks differ")
    gd, wd = np.asarray(np.ma.getdata(g))[~gm], np.asarray(np.ma.getdata(w))[~wm]
    if gd.dtype.kind in "fc" or wd.dtype.kind in "fc":
        np.testing.assert_allclose(gd, wd, rtol=rtol, atol=rtol * 1e-3, equal_nan=True,
                                   err_msg=where)
    else:
        np.testing.assert_array_equal(gd, wd, err_msg=where)


def _median_check(tg_values: np.ndarray, ref: np.ndarray) -> None:
    a, b = np.asarray(tg_values, dtype=float).ravel(), np.asarray(ref, dtype=float).ravel()
    q1, q3 = np.percentile(b, [25, 75])
    tol = 8 * max(q3 - q1, 1e-9) / np.sqrt(len(b)) + 1e-9
    assert abs(np.median(a) - np.median(b)) <= max(tol, 1.0 if b.dtype.kind in "iu" else 0), \
        f"median {np.median(a)} vs NumPy's {np.median(b)}"


LIBS: dict[str, Lib] = {}


def libs() -> dict[str, Lib]:
    if not LIBS:
        import dask.array as da

        LIBS.update(tilegraph=Lib("tilegraph", tg), dask=Lib("dask", da),
                    numpy=Lib("numpy", np))
    return LIBS


def run_case(c: Case) -> tuple[str, str]:
    """(status, detail) of one case."""
    L = libs()
    if c.kind == "na":
        return "n/a", c.reason
    if c.kind == "refused":
        try:
            with forbid_compute():
                c.run(L["tilegraph"])
        except (TypeError, NotImplementedError, ValueError, np.linalg.LinAlgError) as exc:
            if c.match in str(exc):
                return "refused", str(exc).split(": ", 1)[-1] if ": " in str(exc) else str(exc)
            return "differs", f"the error does not name {c.match!r}: {exc}"
        return "differs", "did not raise"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                with contextlib.nullcontext() if c.computes else forbid_compute():
                    built = c.run(L["tilegraph"])
                if c.kind == "exists":
                    return ("tested", "") if built else ("differs", "check failed")
                got = evaluate(built, "tilegraph")
                ref_side = "numpy" if c.against == "numpy" else "dask"
                if c.kind == "permutation":
                    want = evaluate(c.run(L["dask"]), "dask")
                    same([np.sort(v, axis=0) for v in got], [np.sort(v, axis=0) for v in want],
                         0.0, True)
                    return "tested", ""
                if c.kind == "random" and c.against == "numpy":
                    want = c.run(L["numpy"])
                    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == \
                        np.asarray(want).dtype, "shape or dtype differ from NumPy's"
                    return "tested", ""
                if c.kind == "random":
                    want_built = c.run(L["dask"])
                    assert [getattr(v, "shape", None) for v in _leaves_list(built)] == \
                        [getattr(v, "shape", None) for v in _leaves_list(want_built)], \
                        "shapes differ from dask's"
                    assert [np.dtype(v.dtype) for v in _leaves_list(built)] == \
                        [np.dtype(v.dtype) for v in _leaves_list(want_built)], \
                        "dtypes differ from dask's"
                    assert _chunks_of(built) == _chunks_of(want_built), \
                        "blocks differ from dask's"
                    again = evaluate(c.run(L["tilegraph"]), "tilegraph")
                    same(again, got, 0.0, True, "the same seed again")
                    if "numpy" in c.against:
                        _median_check(got, c.run(L["numpy"]))
                    return "tested", ""
                if ref_side == "dask":
                    want = evaluate(c.run(L["dask"]), "dask")
                    if "scipy" in c.against:
                        _check_scipy(c, got)
                else:
                    want = c.run(L["numpy"])
                same(got, want, c.rtol, c.dtype)
                return "tested", ""
            except Exception as exc:  # a case that fails is reported, not raised
                text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
                return "differs", text[:300]


def _leaves_list(result: Any) -> list:
    out: list = []
    _leaves(result, out)
    return out


def _check_scipy(c: Case, got: Any) -> None:
    """The t-tests' statistics and p-values against SciPy's on the same sample."""
    import scipy.stats as ss

    a, b = _SAMPLE, _SAMPLE[::-1] * 1.1
    want = (*ss.ttest_1samp(a, 0.1), *ss.ttest_ind(a, b), *ss.ttest_ind(a, b,
                                                                         equal_var=False),
            *ss.ttest_rel(a, b))
    same(list(got), [np.asarray(w) for w in want], 1e-6, False, "scipy")


def all_cases() -> dict[tuple[str, str], Case]:
    _random_cases()
    found = sections()
    for qual in found["NumPy functions dask dispatches"]:
        if (NPF, qual) not in CASES:
            derived = _numpy_case(qual)
            if derived is not None:
                CASES[(NPF, qual)] = derived
    for qual in found["numpy.linalg and numpy.fft"]:
        if (LNF, qual) not in CASES and qual.startswith("numpy.fft."):
            derived = _numpy_case(qual)
            if derived is not None:
                CASES[(LNF, qual)] = derived
    for name in found["NumPy ufuncs"]:
        CASES.setdefault((UF, name), _numpy_ufunc_case(name))
    return CASES


def _present(section: str, name: str) -> bool:
    if section == DA:
        return hasattr(tg, name)
    if section == ARR:
        return hasattr(tg.Array, name)
    if section.startswith("dask.array."):
        mod = getattr(tg, section.rsplit(".", 1)[1])
        obj: Any = mod
        for part in name.split("."):
            obj = getattr(obj, part, None)
        return obj is not None
    return True


@dataclasses.dataclass
class Row:
    section: str
    name: str
    status: str
    against: str
    notes: str


def measure(run: bool = True) -> list[Row]:
    """Every name with its status. ``run=False`` runs only the refusals (quick) and gives
    each other case the status it has when it passes: the table as it should be, which
    ``run=True`` confirms."""
    cases = all_cases()
    done: dict[int, tuple[str, str]] = {}  # a case listed under several names runs once
    rows = []
    for section, names in sections().items():
        for name in names:
            c = cases.get((section, name))
            if c is None:
                status = "untested" if _present(section, name) else "missing"
                rows.append(Row(section, name, status, "", ""))
                continue
            if c.kind != "na" and not _present(section, name):
                rows.append(Row(section, name, "missing", "", ""))
                continue
            if id(c) not in done:
                done[id(c)] = run_case(c) if run or c.kind in ("refused", "na") else (
                    "tested", "")
            status, detail = done[id(c)]
            notes = c.notes if status == "tested" else detail
            if status == "tested" and c.computes:
                notes = f"{notes}; {c.computes}" if notes else c.computes
            if status == "tested" and c.kind == "exists" and not notes:
                notes = "checked"
            against = {"na": "", "refused": ""}.get(c.kind, c.against)
            rows.append(Row(section, name, status, against, notes))
    return rows


STATUSES = ("tested", "refused", "n/a", "untested", "missing", "differs")


def markdown(rows: list[Row]) -> str:
    import dask

    out = ["# Parity with dask.array", "",
           "Generated by `python bench/parity.py --markdown` "
           "(`tests/bench/test_bench_parity.py` checks that this page is what the script "
           f"makes). dask {dask.__version__}, NumPy {np.__version__}.", "",
           "Every public name of `dask.array`, of its `Array`, and of "
           "`dask.array.random`, `.fft`, `.linalg`, `.ma` and `.stats`; the NumPy "
           "functions dask answers through `__array_function__`, all of `numpy.linalg` "
           "and `numpy.fft`, every NumPy ufunc, and the NumPy protocols. **tested**: a case "
           "in `bench/parity.py` builds the result on arrays in uneven blocks with "
           "computing forbidden (nothing is computed behind the caller's back), then "
           "checks it against dask's (or NumPy's/SciPy's, as the third column says); "
           "random draws have dask's shapes, blocks and dtypes, the same values from the "
           "same seed, and NumPy's median. **refused**: raises an error naming the "
           "alternative (quoted). **n/a**: a dask internal, with the reason.", "",
           "| section | names | " + " | ".join(STATUSES) + " |",
           "|---|---|" + "---|" * len(STATUSES)]
    by_section: dict[str, list[Row]] = {}
    for r in rows:
        by_section.setdefault(r.section, []).append(r)
    for section, rs in by_section.items():
        counts = [sum(r.status == s for r in rs) for s in STATUSES]
        out.append(f"| {section} | {len(rs)} | " + " | ".join(map(str, counts)) + " |")
    for section, rs in by_section.items():
        out += ["", f"## {section}", "", "| name | status | checked against | notes |",
                "|---|---|---|---|"]
        for r in rs:
            notes = r.notes.replace("|", "\\|")
            out.append(f"| `{r.name}` | {r.status} | {r.against} | {notes} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true",
                        help="print docs/parity.md (the table in Markdown)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if any name is missing, untested or differs")
    parser.add_argument("--quick", action="store_true",
                        help="run only the refusals; the other cases as if they pass")
    args = parser.parse_args(argv)
    rows = measure(run=not args.quick)
    if args.markdown:
        sys.stdout.write(markdown(rows))
    else:
        for r in rows:
            print(f"{r.section:32} {r.name:44} {r.status:9} {r.against:15} {r.notes[:90]}")
        counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
        print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    bad = [r for r in rows if r.status in ("missing", "untested", "differs")]
    if args.check and bad:
        for r in bad:
            print(f"{r.status}: {r.section} {r.name} {r.notes}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
