"""The records a LambdaPACK program is analysed into (:func:`tilegraph.lambdapack.lang.parse`
makes them): :class:`ProgramIR` and its :class:`Statement` rows, each under its
:class:`Loop` s and :class:`Cond` itions, writing one tile (:class:`Access`) by a kernel call
or a tree reduction (:class:`Reduction`); the integer expressions of indices, bounds and
conditions (:class:`Affine`, :class:`IntExpr`) and the functions they may call
(:data:`FUNCTIONS`); a node of a program's DAG (:data:`Node`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.util import AST_LOCK


class ProgramError(SyntaxError):
    """A LambdaPACK program uses a construct the analysis cannot handle (the message names
    the line and the reason)."""


@dataclass(frozen=True, slots=True)
class Affine:
    """``const + sum(coef * name)`` over loop variables and parameters (integer coefs)."""

    terms: tuple[tuple[str, int], ...]
    const: int = 0

    @staticmethod
    def of(const: int = 0, **terms: int) -> Affine:
        return Affine(tuple(sorted((k, v) for k, v in terms.items() if v)), int(const))

    def coef(self, name: str) -> int:
        for n, c in self.terms:
            if n == name:
                return c
        return 0

    @property
    def names(self) -> frozenset[str]:
        return frozenset(x for n, _ in self.terms for x in n.split("*"))

    @property
    def product_names(self) -> frozenset[str]:
        """The names in product terms (``"P*v"``: a parameter times a loop variable or
        another parameter)."""
        return frozenset(x for n, _ in self.terms if "*" in n for x in n.split("*"))

    def bind_products(self, values: dict[str, int]) -> Affine:
        """The expression with each product term ``P*x`` replaced by ``x`` times the value
        of ``P`` (a constant when ``x`` is a parameter too): affine in the loop variables
        once the parameters are known."""
        if not any("*" in n for n, _ in self.terms):
            return self
        d: dict[str, int] = {}
        const = self.const
        for n, c in self.terms:
            if "*" in n:
                p, x = n.split("*")
                if x in values:
                    const += c * values[p] * values[x]
                else:
                    d[x] = d.get(x, 0) + c * values[p]
            else:
                d[n] = d.get(n, 0) + c
        return Affine.of(const, **d)

    def __add__(self, other: Affine) -> Affine:
        d = dict(self.terms)
        for n, c in other.terms:
            d[n] = d.get(n, 0) + c
        return Affine.of(self.const + other.const, **d)

    def scale(self, k: int) -> Affine:
        return Affine.of(self.const * k, **{n: c * k for n, c in self.terms})

    def __sub__(self, other: Affine) -> Affine:
        return self + other.scale(-1)

    def eval(self, env: dict[str, int]) -> int:
        total = self.const
        for n, c in self.terms:
            if "*" in n:
                p, v = n.split("*")
                total = total + c * env[p] * env[v]
            else:
                total = total + c * env[n]
        return total

    def source(self) -> str:
        """The expression as Python source."""
        parts = []
        for n, c in self.terms:
            parts.append(n if c == 1 else f"{c}*{n}")
        if self.const or not parts:
            parts.append(str(self.const))
        return "(" + " + ".join(parts) + ")"

    def __str__(self) -> str:
        text = " + ".join((n if c == 1 else f"{c}*{n}") for n, c in self.terms)
        if self.const or not text:
            text = f"{text} + {self.const}" if text else str(self.const)
        return text.replace("+ -", "- ")


def ceil_div(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for integers (or NumPy integer arrays)."""
    return -(-a // b)


def _min(a: Any, b: Any) -> Any:
    return np.minimum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) \
        else min(a, b)


def _max(a: Any, b: Any) -> Any:
    return np.maximum(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) \
        else max(a, b)


def _pow(a: Any, b: Any) -> Any:
    """``a ** b``; on arrays (many candidate iterations at once) a negative exponent gives
    ``a ** 0``: such rows lie outside the loop bounds and are masked out anyway."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.power(a, np.maximum(b, 0))
    return a ** b


def log2(n: Any) -> Any:
    """``ceil(log2(n))`` for integers ``n >= 1`` (0 for ``n <= 1``), or NumPy integer
    arrays: the levels of a binary tree over ``n`` leaves."""
    if isinstance(n, np.ndarray):
        return np.ceil(np.log2(np.maximum(n, 1))).astype(np.int64)
    return max(int(n) - 1, 0).bit_length()


FUNCTIONS = {"ceil_div": ceil_div, "min": _min, "max": _max, "_pow": _pow, "log2": log2}
# CPython 3.11 can fail compiling in two threads at once ("AST constructor recursion depth
# mismatch"): every compile of generated code holds the process's one lock for that
COMPILE_LOCK = AST_LOCK
_CODE: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class IntExpr:
    """An integer expression of loop variables and parameters that is not affine (``2 **
    l``, ``ceil_div(N, 2 ** l)``, ``min(a, b)``, ``//``, ``%``): allowed in loop bounds,
    conditions, keyword arguments and the indices of tiles read (a read's index is solved
    for the variables its affine indices leave free, then checked); the index of a tile
    written must be affine. ``src`` is Python source over ``names`` and
    :data:`FUNCTIONS`."""

    src: str
    names: frozenset[str]

    def source(self) -> str:
        return f"({self.src})"

    def eval(self, env: dict[str, Any]) -> Any:
        code = _CODE.get(self.src)
        if code is None:
            with COMPILE_LOCK:
                code = _CODE[self.src] = compile(self.src, "<lambdapack expression>", "eval")
        return eval(code, FUNCTIONS, env)

    @property
    def product_names(self) -> frozenset[str]:
        return frozenset()

    def bind_products(self, values: dict[str, int]) -> IntExpr:
        return self

    def __str__(self) -> str:
        return self.src


Expr = Affine | IntExpr

Node = tuple[int, tuple[int, ...]]
"""A node of a program's DAG: ``(statement id, index tuple)``."""


def _as_int_expr(e: Expr) -> IntExpr:
    return e if isinstance(e, IntExpr) else IntExpr(e.source(), e.names)


@dataclass(frozen=True, slots=True)
class Loop:
    """``for var in range(lo, hi, step)``."""

    var: str
    lo: Expr
    hi: Expr
    step: int | Expr = 1

    def step_of(self, env: dict[str, Any]) -> Any:
        """The step, evaluated (an expression of the enclosing loops' variables)."""
        return self.step if isinstance(self.step, int) else self.step.eval(env)

    def step_source(self) -> str:
        return str(self.step) if isinstance(self.step, int) else self.step.source()


@dataclass(frozen=True, slots=True)
class Cond:
    """``expr <op> 0`` with op one of ``>=``, ``==``, ``!=``."""

    expr: Expr
    op: str

    def source(self) -> str:
        return f"{self.expr.source()} {self.op} 0"


@dataclass(frozen=True, slots=True)
class Access:
    """A tile: ``array[index...]``."""

    array: str
    index: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"{self.array}[{', '.join(map(str, self.index))}]"


@dataclass(frozen=True, slots=True)
class Reduction:
    """The tree of a ``reduce``: generator variable ``var`` over ``range(lo, hi)``, combined
    ``branch`` at a time (an int, or the name of a parameter)."""

    var: str
    lo: Affine
    hi: Affine
    branch: int | str


@dataclass(frozen=True, slots=True)
class Statement:
    """One kernel call of the program, under its enclosing loops and conditions. ``args``
    are tile reads (:class:`Access`) or affine integers; with ``reduce``, ``args`` is the
    one generator read (its index may use the reduction variable)."""

    id: int
    line: int
    text: str
    loops: tuple[Loop, ...]
    conds: tuple[Cond, ...]
    target: Access
    kernel: str
    args: tuple[Access | Affine, ...]
    kwargs: tuple[tuple[str, Any], ...]
    reduce: Reduction | None = None
    gather: Loop | None = None

    @property
    def plain(self) -> bool:
        """A fixed list of arguments (no reduction tree, no gathered range of tiles)."""
        return self.reduce is None and self.gather is None

    @property
    def vars(self) -> tuple[str, ...]:
        return tuple(lp.var for lp in self.loops)

    @property
    def reads(self) -> tuple[Access, ...]:
        return tuple(a for a in self.args if isinstance(a, Access))


@dataclass(frozen=True)
class ProgramIR:
    """What the analysis keeps of a program: its name, parameters, tile arrays (with their
    number of indices), statements and kernel names."""

    name: str
    params: tuple[str, ...]
    arrays: tuple[tuple[str, int], ...]
    statements: tuple[Statement, ...]
    source: str
