"""Random arrays, seeded per block: block ``(i, j)`` draws from a generator seeded with
``(seed, i, j)``, so the values never depend on the number of workers or the order in which
blocks are made. The same ``seed`` and ``chunks`` give the same array every time.

The names and signatures are dask's (``dask.array.random``), which are NumPy's with
``chunks=``: every distribution of ``numpy.random.Generator`` as a method of
:class:`Generator` (``default_rng(seed)``) and of :class:`RandomState` (with the legacy
``randint``, ``random_sample``, ``random_integers``, ``tomaxint``), and as a module
function drawing from one module-wide :class:`RandomState` (:func:`seed` reseeds it).
Module functions also take ``seed=`` (tilegraph's own: that array's seed). Parameters may be
numbers, NumPy arrays or tilegraph arrays; they broadcast with ``size`` as in NumPy, and an
array parameter is cut into the output's blocks. All draws use NumPy's ``Generator``
(PCG64), so values differ from dask's and NumPy's for the same seed, as dask's differ from
NumPy's.

>>> import tilegraph as tg
>>> a = tg.random.random((4, 4), chunks=2, seed=7).compute()
>>> b = tg.random.random((4, 4), chunks=2, seed=7).compute(backend="sync")
>>> bool((a == b).all())
True
>>> tg.random.default_rng(1).poisson(3.0, size=(5,), chunks=2).dtype
dtype('int64')
>>> tg.random.randint(0, 10, size=(3, 4), chunks=2).shape
(3, 4)
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np

from tilegraph.array.core import Array, asarray
from tilegraph.array.random_blocks import (
    FreshSeed,
    block_generator,
    choice_from,
    distribution,
    draw_blocks,
    has_arrays,
    seed_value,
    size_tuple,
)

# -- the distributions ----------------------------------------------------------------------------

_REQUIRED = inspect.Parameter.empty

# name -> (parameters with defaults (_REQUIRED: none), Generator method it draws with)
DISTRIBUTIONS: dict[str, tuple[tuple[tuple[str, Any], ...], str]] = {
    "beta": ((("a", _REQUIRED), ("b", _REQUIRED)), "beta"),
    "binomial": ((("n", _REQUIRED), ("p", _REQUIRED)), "binomial"),
    "chisquare": ((("df", _REQUIRED),), "chisquare"),
    "exponential": ((("scale", 1.0),), "exponential"),
    "f": ((("dfnum", _REQUIRED), ("dfden", _REQUIRED)), "f"),
    "gamma": ((("shape", _REQUIRED), ("scale", 1.0)), "gamma"),
    "geometric": ((("p", _REQUIRED),), "geometric"),
    "gumbel": ((("loc", 0.0), ("scale", 1.0)), "gumbel"),
    "hypergeometric": ((("ngood", _REQUIRED), ("nbad", _REQUIRED), ("nsample", _REQUIRED)),
                       "hypergeometric"),
    "laplace": ((("loc", 0.0), ("scale", 1.0)), "laplace"),
    "logistic": ((("loc", 0.0), ("scale", 1.0)), "logistic"),
    "lognormal": ((("mean", 0.0), ("sigma", 1.0)), "lognormal"),
    "logseries": ((("p", _REQUIRED),), "logseries"),
    "negative_binomial": ((("n", _REQUIRED), ("p", _REQUIRED)), "negative_binomial"),
    "noncentral_chisquare": ((("df", _REQUIRED), ("nonc", _REQUIRED)),
                             "noncentral_chisquare"),
    "noncentral_f": ((("dfnum", _REQUIRED), ("dfden", _REQUIRED), ("nonc", _REQUIRED)),
                     "noncentral_f"),
    "pareto": ((("a", _REQUIRED),), "pareto"),
    "poisson": ((("lam", 1.0),), "poisson"),
    "power": ((("a", _REQUIRED),), "power"),
    "rayleigh": ((("scale", 1.0),), "rayleigh"),
    "standard_cauchy": ((), "standard_cauchy"),
    "standard_exponential": ((), "standard_exponential"),
    "standard_gamma": ((("shape", _REQUIRED),), "standard_gamma"),
    "standard_t": ((("df", _REQUIRED),), "standard_t"),
    "triangular": ((("left", _REQUIRED), ("mode", _REQUIRED), ("right", _REQUIRED)),
                   "triangular"),
    "vonmises": ((("mu", _REQUIRED), ("kappa", _REQUIRED)), "vonmises"),
    "wald": ((("mean", _REQUIRED), ("scale", _REQUIRED)), "wald"),
    "weibull": ((("a", _REQUIRED),), "weibull"),
    "zipf": ((("a", _REQUIRED),), "zipf"),
}


def _no_out(op: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"random.{op}: out= is not supported (tilegraph arrays are lazy)")


def _float_dtype(op: str, dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"random.{op}: dtype must be float32 or float64, got {dtype}")
    return dt


class _Draws:
    """What :class:`Generator` and :class:`RandomState` share: a ``SeedSequence`` whose
    next child seeds each new array (so the same seed gives the same arrays in the same
    order), and the distributions (bound as methods from :data:`DISTRIBUTIONS`)."""

    def __init__(self, seed: Any = None):
        self._reset(seed)

    def _reset(self, seed: Any) -> None:
        if isinstance(seed, np.random.SeedSequence):
            self._seq = seed
            self._fresh = False
        elif isinstance(seed, _Draws):
            self._seq = seed._seq.spawn(1)[0]
            self._fresh = seed._fresh
        elif isinstance(seed, np.random.BitGenerator):
            self._seq = seed.seed_seq if isinstance(seed.seed_seq, np.random.SeedSequence) \
                else np.random.SeedSequence(int(seed.random_raw()))
            self._fresh = False
        elif seed is None:
            self._seq = np.random.SeedSequence(seed_value(None))
            self._fresh = True
        elif isinstance(seed, (list, tuple, np.ndarray)):
            self._seq = np.random.SeedSequence([seed_value(int(v)) for v in np.ravel(seed)])
            self._fresh = False
        else:
            self._seq = np.random.SeedSequence(seed_value(seed))
            self._fresh = False

    def _next(self) -> int:
        child = self._seq.spawn(1)[0]
        value = int(child.generate_state(1, np.uint64)[0] >> np.uint64(1))
        return FreshSeed(value) if self._fresh else value

    def _distribution(self, method: str, args: tuple, kwargs: dict, size: Any,
                      chunks: Any, extra: tuple[int, ...] = ()) -> Array:
        return distribution(method, self._next(), args, kwargs, size, chunks, extra)

    # -- the draws every generator has (beside DISTRIBUTIONS) ---------------------------

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None,
               chunks: Any = "auto", **kwargs: Any) -> Array:
        """Normal floats with mean ``loc`` and standard deviation ``scale``."""
        dtype = kwargs.pop("dtype", np.float64)
        _no_kwargs("normal", kwargs)
        if has_arrays(loc, scale):
            return self._distribution("normal", (loc, scale), {}, size, chunks)
        return normal(loc, scale, size=size, chunks=chunks, seed=self._next(), dtype=dtype)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None,
                chunks: Any = "auto", **kwargs: Any) -> Array:
        """Uniform floats in [low, high)."""
        _no_kwargs("uniform", kwargs)
        if has_arrays(low, high):
            return self._distribution("uniform", (low, high), {}, size, chunks)
        return uniform(low, high, size=size, chunks=chunks, seed=self._next())

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: Any = None,
                        chunks: Any = "auto") -> Array:
        """Standard normal floats (mean 0, standard deviation 1)."""
        _no_out("standard_normal", out)
        return standard_normal(size, chunks=chunks, seed=self._next(), dtype=dtype)

    def multinomial(self, n: Any, pvals: Any, size: Any = None, chunks: Any = "auto"
                    ) -> Array:
        """Counts of ``n`` draws over ``len(pvals)`` outcomes, one trailing axis of one
        block holding the counts."""
        _not_lazy_param("multinomial", "pvals", pvals)
        pvals = np.asarray(pvals, dtype=float)
        if pvals.ndim != 1:
            raise ValueError("random.multinomial: pvals must be one-dimensional here (dask's "
                             "form)")
        return self._distribution("multinomial", (n,), {"pvals": pvals}, size, chunks,
                                  extra=(len(pvals),))

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None,
               axis: int = 0, shuffle: bool = True, chunks: Any = "auto") -> Array:
        """Values drawn from ``a`` (an int: ``arange(a)``; or a 1-d array, NumPy or
        tilegraph), with replacement by default, with probabilities ``p``. Without
        replacement the positions are drawn once, here (a NumPy array of ``size``
        indices), and the values gathered from ``a`` block by block."""
        if axis != 0:
            raise ValueError("random.choice: axis must be 0 since a is one dimensional")
        _not_lazy_param("choice", "p", p)
        seed = self._next()
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            n = int(a)
            if n < 0:
                raise ValueError("random.choice: a must be non-negative")
            source = None
        else:
            source = a if isinstance(a, Array) else asarray(np.asarray(a))
            if source.ndim != 1:
                raise ValueError("random.choice: a must be one dimensional")
            n = source.shape[0]
        if p is not None:
            p = np.asarray(p, dtype=float)
            if p.ndim != 1 or p.shape[0] != n:
                raise ValueError("random.choice: a and p must have the same size")
            if not np.isclose(p.sum(), 1.0, rtol=1e-7, atol=0):
                raise ValueError("random.choice: probabilities do not sum to 1")
        size_t = size_tuple(size) or ()
        if n == 0 and math.prod(size_t):
            raise ValueError("random.choice: a cannot be empty unless no samples are taken")
        if not replace:
            from tilegraph.array.indexing import take

            index = np.asarray(block_generator(int(seed), ()).choice(
                n, size=size_t, replace=False, p=p, shuffle=shuffle))
            if source is None:
                return asarray(index, chunks=chunks)
            return take(source, index.reshape(-1), axis=0).reshape(size_t)
        if source is None:
            return distribution("choice", seed, (n,), {"p": p}, size_t, chunks) \
                if p is not None else distribution("integers", seed, (0, n), {}, size_t,
                                                    chunks)
        return choice_from(seed, source, p, size_t, chunks)

    def permutation(self, x: Any) -> Array:
        """A permutation of ``arange(x)`` (an int), or ``x`` with its first axis shuffled.
        The permutation is drawn here (a NumPy array of the axis' length) and the rows
        gathered block by block."""
        from tilegraph.array.indexing import take

        seed = self._next()
        if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            return asarray(block_generator(int(seed), ()).permutation(int(x)))
        x = x if isinstance(x, Array) else asarray(x)
        if x.ndim == 0:
            raise ValueError("random.permutation: x must be an integer or at least "
                             "1-dimensional")
        return take(x, block_generator(int(seed), ()).permutation(x.shape[0]), axis=0)


def _not_lazy_param(op: str, name: str, value: Any) -> None:
    if isinstance(value, Array):
        raise TypeError(f"random.{op}: {name} must be known when the array is planned (a "
                        "NumPy array or a list), not a lazy tilegraph array")


def _no_kwargs(op: str, kwargs: dict) -> None:
    if kwargs:
        raise TypeError(f"random.{op}: unexpected keyword(s) {sorted(kwargs)}")


def _method(name: str, params: tuple[tuple[str, Any], ...], method: str,
            dtype_of: bool = False) -> Any:
    """A distribution as a method of :class:`_Draws`, with NumPy's parameter names and
    defaults, then ``size=`` and ``chunks=`` (and ``dtype=``/``method=`` where NumPy's
    Generator takes them)."""

    def draw(self: _Draws, *args: Any, **kwargs: Any) -> Array:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values.pop("self")
        size, chunks = values.pop("size"), values.pop("chunks")
        extra = {k: values.pop(k) for k in ("dtype", "method") if k in values}
        if "dtype" in extra:
            extra["dtype"] = _float_dtype(name, extra["dtype"])
        ordered = tuple(values[p] for p, _ in params)
        return self._distribution(method, ordered, extra, size, chunks)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
                   for p, d in params]
    parameters += [inspect.Parameter("size", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                     default=None),
                   inspect.Parameter("chunks", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                     default="auto")]
    if dtype_of:
        parameters.append(inspect.Parameter("dtype", inspect.Parameter.KEYWORD_ONLY,
                                            default=np.float64))
    if name == "standard_exponential":
        parameters.append(inspect.Parameter("method", inspect.Parameter.KEYWORD_ONLY,
                                            default="zig"))
    signature = inspect.Signature(parameters)
    draw.__signature__ = signature
    draw.__name__ = draw.__qualname__ = name
    draw.__doc__ = (f"``numpy.random.Generator.{method}`` as a blocked array of shape "
                    "``size`` (broadcast with array parameters), in blocks of ``chunks``.")
    return draw


for _name, (_params, _meth) in DISTRIBUTIONS.items():
    setattr(_Draws, _name, _method(_name, _params, _meth,
                                   dtype_of=_name in ("standard_exponential",
                                                      "standard_gamma")))


class Generator(_Draws):
    """Random arrays from one seed, as ``numpy.random.default_rng(seed)`` (and dask's
    ``da.random.default_rng``) hands them out: each call draws a new array from the next
    child of the seed's ``SeedSequence``, so the same seed gives the same arrays in the
    same order, and every array's blocks are seeded by block coordinate as in
    :func:`random`. ``seed`` may be a non-negative int, a ``SeedSequence``, a NumPy
    ``BitGenerator`` (its seed sequence), another Generator, or ``None`` (fresh entropy).

    >>> import tilegraph as tg
    >>> a = tg.random.default_rng(3).random((4,), chunks=2).compute()
    >>> b = tg.random.default_rng(3).random((4,), chunks=2).compute()
    >>> bool((a == b).all())
    True
    """

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None,
               chunks: Any = "auto") -> Array:
        """Uniform floats in [0, 1)."""
        _no_out("random", out)
        return random(size, chunks=chunks, seed=self._next(), dtype=dtype)

    def integers(self, low: Any, high: Any = None, size: Any = None, dtype: Any = np.int64,
                 endpoint: bool = False, chunks: Any = "auto") -> Array:
        """Random integers in [low, high) (or [0, low) with one bound; ``endpoint=True``
        includes ``high``)."""
        if has_arrays(low, high):
            if high is None:
                low, high = 0, low
            return self._distribution("integers", (low, high),
                                      {"dtype": np.dtype(dtype), "endpoint": endpoint},
                                      size, chunks)
        return integers(low, high, size=size, chunks=chunks, seed=self._next(),
                        dtype=dtype, endpoint=endpoint)

    def multivariate_hypergeometric(self, colors: Any, nsample: int, size: Any = None,
                                    method: str = "marginals", chunks: Any = "auto"
                                    ) -> Array:
        """How many of each colour ``nsample`` draws without replacement take from an urn
        of ``colors`` items, one trailing axis of one block holding the counts."""
        _not_lazy_param("multivariate_hypergeometric", "colors", colors)
        colors = np.asarray(colors, dtype=np.int64)
        if colors.ndim != 1:
            raise ValueError("random.multivariate_hypergeometric: colors must be "
                             "one-dimensional")
        return self._distribution("multivariate_hypergeometric", (),
                                  {"colors": colors, "nsample": nsample, "method": method},
                                  size, chunks,
                                  extra=(len(colors),))

    def __repr__(self) -> str:
        return f"tilegraph.random.Generator(entropy={self._seq.entropy})"


class RandomState(_Draws):
    """``numpy.random.RandomState``'s methods with ``chunks=``, as dask's
    ``da.random.RandomState``: each call draws a new array seeded from the next child of
    ``seed`` (so equal seeds give equal arrays in the same order); :meth:`seed` starts
    over. The values are drawn with NumPy's ``Generator``, not the legacy Mersenne
    Twister, so they differ from NumPy's ``RandomState`` for the same seed (dask's differ
    too).

    >>> import tilegraph as tg
    >>> state = tg.random.RandomState(1234)
    >>> state.normal(10, 0.1, size=3, chunks=2).shape
    (3,)
    """

    def seed(self, seed: Any = None) -> None:
        """Start the sequence of arrays over from ``seed`` (fresh entropy for ``None``)."""
        self._reset(seed)

    def random_sample(self, size: Any = None, chunks: Any = "auto", **kwargs: Any) -> Array:
        """Uniform floats in [0, 1)."""
        dtype = kwargs.pop("dtype", np.float64)
        _no_kwargs("random_sample", kwargs)
        return random(size, chunks=chunks, seed=self._next(), dtype=dtype)

    def random(self, size: Any = None, chunks: Any = "auto", **kwargs: Any) -> Array:
        """Uniform floats in [0, 1) (``random_sample``)."""
        return self.random_sample(size, chunks, **kwargs)

    def randint(self, low: Any, high: Any = None, size: Any = None, chunks: Any = "auto",
                dtype: Any = "l", **kwargs: Any) -> Array:
        """Random integers in [low, high) (or [0, low) with one bound)."""
        _no_kwargs("randint", kwargs)
        return Generator.integers(self, low, high, size=size, dtype=dtype, chunks=chunks)

    def random_integers(self, low: Any, high: Any = None, size: Any = None,
                        chunks: Any = "auto", **kwargs: Any) -> Array:
        """Random integers in [low, high], both included (or [1, low] with one bound)."""
        _no_kwargs("random_integers", kwargs)
        if high is None:
            low, high = 1, low
        return Generator.integers(self, low, high, size=size, dtype=np.int64,
                                  endpoint=True, chunks=chunks)

    def tomaxint(self, size: Any = None, chunks: Any = "auto", **kwargs: Any) -> Array:
        """Random non-negative integers up to the largest C long."""
        _no_kwargs("tomaxint", kwargs)
        top = np.iinfo(np.int_).max
        return Generator.integers(self, 0, top, size=size, dtype=np.int_, chunks=chunks)

    def __repr__(self) -> str:
        return f"tilegraph.random.RandomState(entropy={self._seq.entropy})"


def default_rng(seed: Any = None) -> Generator:
    """A :class:`Generator` from ``seed`` (a non-negative int, a ``SeedSequence``, a NumPy
    ``BitGenerator``, another Generator, or ``None`` for fresh entropy), as
    ``numpy.random.default_rng``."""
    return Generator(seed)


# -- module functions: tilegraph's seeded ones, and dask's on one module-wide RandomState ---------

_STATE = RandomState()


def seed(seed: Any = None) -> None:
    """Reseed the module-wide :class:`RandomState` the module functions draw from (as
    ``da.random.seed``): after ``seed(s)`` the same calls give the same arrays."""
    _STATE.seed(seed)


def _seed_or_next(seed_: Any) -> Any:
    return _STATE._next() if seed_ is None else seed_


def random(size: Any = None, chunks: Any = "auto", seed: Any = None,
           dtype: Any = np.float64) -> Array:
    """Uniform floats in [0, 1) of shape ``size``."""
    dtype = _float_dtype("random", dtype)
    return draw_blocks("random", size, chunks, _seed_or_next(seed), (),
                 dtype)


def random_sample(size: Any = None, chunks: Any = "auto", seed: Any = None) -> Array:
    """Uniform floats in [0, 1) of shape ``size`` (as :func:`random`)."""
    return random(size, chunks=chunks, seed=seed)


def normal(loc: Any = 0.0, scale: Any = 1.0, size: Any = None, chunks: Any = "auto",
           seed: Any = None, dtype: Any = np.float64) -> Array:
    """Normally distributed floats with mean ``loc`` and standard deviation ``scale``."""
    if has_arrays(loc, scale):
        return distribution("normal", _seed_or_next(seed), (loc, scale), {}, size, chunks)
    if scale < 0:
        raise ValueError(f"random.normal: scale must be non-negative, got {scale}")
    dtype = _float_dtype("normal", dtype)
    return draw_blocks("normal", size, chunks, _seed_or_next(seed),
                 (loc, scale), dtype)


def uniform(low: Any = 0.0, high: Any = 1.0, size: Any = None, chunks: Any = "auto",
            seed: Any = None) -> Array:
    """Uniform floats in [low, high)."""
    if has_arrays(low, high):
        return distribution("uniform", _seed_or_next(seed), (low, high), {}, size, chunks)
    return draw_blocks("uniform", size, chunks, _seed_or_next(seed),
                 (low, high), np.float64)


def integers(low: Any, high: Any = None, size: Any = None, chunks: Any = "auto",
             seed: Any = None, dtype: Any = np.int64, endpoint: bool = False) -> Array:
    """Random integers in [low, high) (or [0, low) with one bound), like
    ``Generator.integers``."""
    if high is None:
        low, high = 0, low
    if np.dtype(dtype).kind not in "iu":
        raise TypeError(f"random.integers: dtype must be an integer type, got {dtype}")
    if has_arrays(low, high):
        return distribution("integers", _seed_or_next(seed), (low, high),
                             {"dtype": np.dtype(dtype), "endpoint": endpoint}, size, chunks)
    if high < low or (high == low and not endpoint):
        raise ValueError(f"random.integers: empty range [{low}, {high})")
    info = np.iinfo(dtype)
    top = high if endpoint else high - 1
    if low < info.min or top > info.max:
        raise ValueError(
            f"random.integers: range [{low}, {high}{']' if endpoint else ')'} is out of "
            f"bounds for {np.dtype(dtype)} (values {info.min} to {info.max})")
    return draw_blocks("integers", size, chunks, _seed_or_next(seed),
                 (low, high, endpoint), dtype)


def randint(low: Any, high: Any = None, size: Any = None, chunks: Any = "auto",
            dtype: Any = "l", seed: Any = None) -> Array:
    """Random integers in [low, high) (or [0, low) with one bound), as
    ``numpy.random.randint`` (``dtype`` ``"l"``: a C long)."""
    return integers(low, high, size=size, chunks=chunks, seed=seed, dtype=dtype)


def standard_normal(size: Any = None, chunks: Any = "auto", seed: Any = None,
                    dtype: Any = np.float64) -> Array:
    """Standard normal floats (mean 0, standard deviation 1)."""
    return normal(0.0, 1.0, size=size, chunks=chunks, seed=seed, dtype=dtype)


def _module_function(name: str) -> Any:
    """``name`` drawn from the module-wide :class:`RandomState` (or with ``seed=``)."""
    bound = getattr(RandomState, name)

    def function(*args: Any, seed: Any = None, **kwargs: Any) -> Array:
        state = _STATE if seed is None else RandomState(seed)
        return bound(state, *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (bound.__doc__ or "").rstrip() + (
        " Drawn from the module's RandomState (:func:`seed`), or from ``seed=``.")
    sig = inspect.signature(bound)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.kind ==
              inspect.Parameter.VAR_KEYWORD else p for p in params if p.kind !=
              inspect.Parameter.VAR_KEYWORD]
    params.append(inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY, default=None))
    function.__signature__ = sig.replace(parameters=params)
    return function


_MODULE_NAMES = (*DISTRIBUTIONS, "multinomial", "choice", "permutation", "random_integers")
for _name in _MODULE_NAMES:
    if _name not in globals():
        globals()[_name] = _module_function(_name)

__all__ = sorted({"Generator", "RandomState", "default_rng", "seed", "random",
                  "random_sample", "normal", "uniform", "integers", "randint",
                  "standard_normal", *_MODULE_NAMES})
