"""The LambdaPACK language: a tiled algorithm as a short loop program, analysed, never run.

A program is a Python function decorated with :func:`tilegraph.lambdapack.program`. Its
source is parsed with :mod:`ast` and turned into a list of :class:`Statement` rows; the
function itself is never called. Its parameters annotated ``int`` are the program's integer
parameters (bound later, ``program.bind(N=32)``); every other parameter names a tile array.
The body may contain, and nothing else:

- ``for v in range(a)``, ``range(a, b)`` or ``range(a, b, step)``: the bounds and the step
  (positive) integer expressions of the enclosing loop variables and the parameters:
  affine, or built with ``//``, ``%``, ``**``, ``min``, ``max``, ``ceil_div`` and ``log2``
  (``ceil(log2(n))``) (bounds and steps are evaluated, never solved; a solver that must
  loop over a variable whose bound is not affine walks the loop nest once per binding to
  find its range);
- ``if`` on comparisons of such expressions (``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``,
  chained or joined by ``and``); an ``else`` only after a single comparison;
- scalar assignments ``m = <integer expression>`` (substituted where ``m`` is used; an
  index may use it only if it is affine);
- kernel calls ``OUT[i, j, ...] = kernel(IN[...], ..., name=<expression or literal>)``
  whose written tile's indices are affine (a tile read may have any integer expression as
  an index, as the paper's ``R[i + 2 ** level, level]``: its affine indices are solved
  first, the others checked with the values found); the positional arguments are tile
  reads or affine integers;
- tree reductions ``OUT[...] = reduce(kernel, (IN[..., v, ...] for v in range(a, b)),
  branch=B)``: the tiles of the generator are combined ``B`` at a time, in a tree whose
  top node writes ``OUT[...]`` (numpywren's reducer; ``B`` a literal >= 2 or a parameter);
- gathered ranges ``OUT[...] = kernel((IN[..., v] for v in range(a, b)), name=...)``: one
  call on all the tiles of the range (a node of a tree with a parameter fan-in).

An index is affine in the loop variables, where a coefficient may also be a parameter
(``T[l, B * g + k]``: solved once the program is bound). A tile is written once (single
static assignment): work arrays carry a version index, as the trailing update of Cholesky
writes ``S[k + 1, i, j]``. A statement whose write leaves out one of its loop variables
writes a tile twice and is rejected (two writes of one tile that only the bounds tell apart
are found by expanding the program at small sizes); so are non-affine indices of written
tiles,
``while``, conditions on data, and anything else not listed, with the line and the reason.
A tile that no statement writes is an input of the program.

This module holds the parser (:func:`parse`); the records it makes (:class:`ProgramIR`,
:class:`Statement`, :class:`Affine`, ...) are in :mod:`tilegraph.lambdapack.ir`, and
importable from here too.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from fractions import Fraction
from typing import Any

from tilegraph.lambdapack.ir import (  # noqa: F401 - re-exported
    COMPILE_LOCK,
    FUNCTIONS,
    Access,
    Affine,
    Cond,
    Expr,
    IntExpr,
    Loop,
    Node,
    ProgramError,
    ProgramIR,
    Reduction,
    Statement,
    ceil_div,
    log2,
)

# names the generated lookups use for themselves: a program cannot name its variables so
_RESERVED = frozenset({
    "P", "box", "out", "add", "idx", "args", "tile", "row", "rows", "key", "get", "uses",
    "in_key", "func", "kind", "kname", "kw", "kwargs", "shape", "flops", "nbytes", "slow",
    "Dep", "sm", "nbm", "add_many", "t", "ceil_div", "min", "max", "range", "reduce"})
_RESERVED_PATTERN = re.compile(r"^(_.*|[tawd][0-9]+)$")


def _check_name(name: str) -> str | None:
    if name in _RESERVED or _RESERVED_PATTERN.match(name):
        return (f"the name {name!r} is reserved (names starting with '_', t0, a0, w0, d0, ... "
                f"and {', '.join(sorted(_RESERVED))}); choose another")
    return None


_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class _Parser:
    def __init__(self, fn_name: str, params: tuple[str, ...], arrays: set[str], lines: list[str],
                 first_line: int):
        self.fn_name = fn_name
        self.params = params
        self.arrays = arrays
        self.lines = lines
        self.first_line = first_line
        self.statements: list[Statement] = []
        self.dims: dict[str, int] = {}

    def error(self, node: ast.AST, reason: str) -> ProgramError:
        line = self.first_line + getattr(node, "lineno", 1) - 1
        text = self.lines[getattr(node, "lineno", 1) - 1].strip() if self.lines else ""
        return ProgramError(f"lambdapack program {self.fn_name!r}, line {line}: {reason}: "
                            f"{text!r}")

    # -- expressions ----------------------------------------------------------------------

    def affine(self, node: ast.AST, scope: dict[str, Affine]) -> Affine:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Affine.of(node.value)
        if isinstance(node, ast.Name):
            if node.id in scope:
                return scope[node.id]
            if node.id in self.params:
                return Affine.of(**{node.id: 1})
            if node.id in self.arrays:
                raise self.error(node, f"tile array {node.id!r} used as an integer (a "
                                       "condition or index on data is not allowed)")
            raise self.error(node, f"unknown name {node.id!r} (not a loop variable, "
                                   "parameter or scalar assigned above)")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.affine(node.operand, scope)
            return inner.scale(-1) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, (ast.Add, ast.Sub)):
                left, right = self.affine(node.left, scope), self.affine(node.right, scope)
                return left + right if isinstance(node.op, ast.Add) else left - right
            if isinstance(node.op, ast.Mult):
                left, right = self.affine(node.left, scope), self.affine(node.right, scope)
                if not left.terms:
                    return right.scale(left.const)
                if not right.terms:
                    return left.scale(right.const)
                for par, other in ((left, right), (right, left)):
                    # an expression of parameters times an affine expression: its
                    # coefficients are known once the program is bound
                    if (all(n in self.params for n, _ in par.terms)
                            and all("*" not in n for n, _ in other.terms)):
                        d: dict[str, int] = {}
                        for pname, pc in par.terms:
                            for n, c in other.terms:
                                key = f"{pname}*{n}"
                                d[key] = d.get(key, 0) + pc * c
                            if other.const:
                                d[pname] = d.get(pname, 0) + pc * other.const
                        return Affine.of(0, **d) + other.scale(par.const)
                raise self.error(node, "non-affine index (a product of two variables; a "
                                       "parameter may multiply loop variables)")
            raise self.error(node, f"non-affine expression (operator "
                                   f"{type(node.op).__name__}; only +, - and * by a "
                                   "constant are allowed)")
        if isinstance(node, ast.Subscript):
            raise self.error(node, "an index or bound that reads a tile (data-dependent) is "
                                   "not allowed")
        raise self.error(node, f"non-affine expression ({type(node).__name__})")

    def expr(self, node: ast.AST, scope: dict[str, Expr]) -> Expr:
        """An affine expression if it is one, else an :class:`IntExpr` (for bounds,
        conditions and keyword values)."""
        try:
            return self.affine(node, scope)
        except ProgramError as affine_error:
            if "data-dependent" in str(affine_error) or "used as an integer" in str(
                    affine_error) or "unknown name" in str(affine_error):
                raise
        src, names = self._int_src(node, scope)
        return IntExpr(src, frozenset(names))

    _BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%",
               ast.Pow: "**"}

    def _int_src(self, node: ast.AST, scope: dict[str, Expr]) -> tuple[str, set[str]]:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return str(node.value), set()
        if isinstance(node, ast.Name):
            if node.id in scope:
                e = scope[node.id]
                return e.source(), set(e.names)
            if node.id in self.params:
                return node.id, {node.id}
            if node.id in self.arrays:
                raise self.error(node, f"tile array {node.id!r} used as an integer (a "
                                       "condition or index on data is not allowed)")
            raise self.error(node, f"unknown name {node.id!r}")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            src, names = self._int_src(node.operand, scope)
            return f"(-{src})", names
        if isinstance(node, ast.BinOp) and type(node.op) in self._BINOPS:
            ls, ln = self._int_src(node.left, scope)
            rs, rn = self._int_src(node.right, scope)
            if isinstance(node.op, ast.Pow):
                return f"_pow({ls}, {rs})", ln | rn
            return f"({ls} {self._BINOPS[type(node.op)]} {rs})", ln | rn
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("ceil_div", "min", "max", "log2") and not node.keywords):
            parts = [self._int_src(a, scope) for a in node.args]
            want = 1 if node.func.id == "log2" else 2
            if len(parts) != want:
                raise self.error(node, f"{node.func.id} takes {want} arguments")
            names = set().union(*(n for _, n in parts))
            return f"{node.func.id}({', '.join(p for p, _ in parts)})", names
        if isinstance(node, ast.Subscript):
            raise self.error(node, "an index or bound that reads a tile (data-dependent) is "
                                   "not allowed")
        raise self.error(node, f"non-affine expression ({type(node).__name__}) that is not "
                               "an integer expression of loop variables and parameters")

    def index_expr(self, node: ast.AST, scope: dict[str, Expr], read: bool = False) -> Expr:
        """An index: affine, or (of a tile read) any integer expression, such as the
        paper's ``R[i + 2 ** level, level]``."""
        if read:
            return self.expr(node, scope)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(scope.get(sub.id), IntExpr):
                raise self.error(node, f"non-affine index of a tile written ({sub.id!r} is "
                                       f"{scope[sub.id]}, not affine)")
        return self.affine(node, scope)

    def conds(self, node: ast.AST, scope: dict[str, Affine]) -> list[Cond]:
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            out: list[Cond] = []
            for v in node.values:
                out += self.conds(v, scope)
            return out
        if isinstance(node, ast.Compare):
            out = []
            left = self.expr(node.left, scope)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                if type(op) not in _CMP:
                    raise self.error(node, f"unsupported comparison {type(op).__name__}")
                right = self.expr(comp, scope)
                out.append(_cond(left, _CMP[type(op)], right))
                left = right
            return out
        raise self.error(node, "a condition must be affine comparisons joined by 'and' "
                               "(no 'or', 'not' or data)")

    def access(self, node: ast.AST, scope: dict[str, Affine], read: bool = True) -> Access:
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
            raise self.error(node, "expected a tile, ARRAY[i, j, ...]")
        name = node.value.id
        if name not in self.arrays:
            raise self.error(node, f"{name!r} is not a tile array of the program (its "
                                   "parameters not annotated int)")
        sl = node.slice
        items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        if any(isinstance(i, ast.Slice) for i in items):
            raise self.error(node, "slices are not allowed in a tile index")
        index = tuple(self.index_expr(i, scope, read) for i in items)
        dims = self.dims.setdefault(name, len(index))
        if dims != len(index):
            raise self.error(node, f"tile array {name!r} is indexed with {len(index)} indices "
                                   f"here and {dims} elsewhere")
        return Access(name, index)

    # -- statements -----------------------------------------------------------------------

    def block(self, body: list[ast.stmt], loops: tuple[Loop, ...], conds: tuple[Cond, ...],
              scope: dict[str, Affine]) -> None:
        scope = dict(scope)
        for node in body:
            if isinstance(node, ast.For):
                self.loop(node, loops, conds, scope)
            elif isinstance(node, ast.If):
                new = tuple(self.conds(node.test, scope))
                self.block(node.body, loops, conds + new, scope)
                if node.orelse:
                    if len(new) != 1:
                        raise self.error(node, "'else' is allowed only after a single "
                                               "comparison")
                    self.block(node.orelse, loops, (*conds, _negate(new[0])), scope)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                name = node.targets[0].id
                if _check_name(name):
                    raise self.error(node, _check_name(name))
                if name in self.arrays or name in self.params:
                    raise self.error(node, f"{name!r} is a parameter and cannot be assigned")
                if isinstance(node.value, ast.Call):
                    raise self.error(node, "a kernel call must write a tile, ARRAY[...] = "
                                           "kernel(...)")
                scope[name] = self.expr(node.value, scope)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Subscript):
                self.call(node, loops, conds, scope)
            elif isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(
                    node.value, ast.Constant) and isinstance(node.value.value, str)):
                continue
            elif isinstance(node, ast.While):
                raise self.error(node, "'while' loops are not allowed (the loop bounds must "
                                       "be known from the parameters: use range())")
            elif isinstance(node, ast.Assign):
                raise self.error(node, "one tile per statement: a tuple or chained "
                                       "assignment is not allowed")
            else:
                raise self.error(node, f"{type(node).__name__} is not allowed in a "
                                       "LambdaPACK program")

    def loop(self, node: ast.For, loops: tuple[Loop, ...], conds: tuple[Cond, ...],
             scope: dict[str, Affine]) -> None:
        if node.orelse:
            raise self.error(node, "'for ... else' is not allowed")
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "the loop variable must be one name")
        var = node.target.id
        if _check_name(var):
            raise self.error(node, _check_name(var))
        if var in self.params or var in self.arrays or any(lp.var == var for lp in loops):
            raise self.error(node, f"loop variable {var!r} shadows a parameter or an "
                                   "enclosing loop variable")
        lo, hi, step = self.range_of(node.iter, scope)
        inner = dict(scope)
        inner[var] = Affine.of(**{var: 1})
        self.block(node.body, (*loops, Loop(var, lo, hi, step)), conds, inner)

    def range_of(self, node: ast.AST, scope: dict[str, Affine]) -> tuple[Affine, Affine, int]:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "range" and not node.keywords and 1 <= len(node.args) <= 3):
            raise self.error(node, "loops must be over range(a), range(a, b) or "
                                   "range(a, b, step)")
        args = node.args
        if len(args) == 1:
            lo, hi = Affine.of(0), self.expr(args[0], scope)
        else:
            lo, hi = self.expr(args[0], scope), self.expr(args[1], scope)
        step: int | Expr = 1
        if len(args) == 3:
            if isinstance(args[2], ast.Constant):
                if not (type(args[2].value) is int and args[2].value > 0):
                    raise self.error(node, "the step of a range must be a positive integer")
                step = args[2].value
            else:   # an expression of the enclosing loops, evaluated (it must be > 0)
                step = self.expr(args[2], scope)
                if isinstance(step, Affine) and not step.terms:
                    if step.const <= 0:
                        raise self.error(node, "the step of a range must be a positive "
                                               "integer")
                    step = step.const
        return lo, hi, step

    def call(self, node: ast.Assign, loops: tuple[Loop, ...], conds: tuple[Cond, ...],
             scope: dict[str, Affine]) -> None:
        target = self.access(node.targets[0], scope, read=False)
        value = node.value
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            raise self.error(node, "the right-hand side must be a kernel call, kernel(...)")
        reduction = gather = None
        if value.func.id == "reduce":
            kernel, args, reduction = self.reduction(value, scope)
            kwargs: tuple = ()
        elif len(value.args) == 1 and isinstance(value.args[0], ast.GeneratorExp):
            kernel = value.func.id
            args, gather = self.gathered(value.args[0], scope)
            kwargs = tuple((k.arg, self.keyword(k, scope)) for k in value.keywords)
            if any(k is None for k, _ in kwargs):
                raise self.error(node, "**kwargs is not allowed in a kernel call")
        else:
            kernel = value.func.id
            args = tuple(self.access(a, scope) if isinstance(a, ast.Subscript)
                         else self.expr(a, scope) for a in value.args)
            kwargs = tuple((k.arg, self.keyword(k, scope)) for k in value.keywords)
            if any(k is None for k, _ in kwargs):
                raise self.error(node, "**kwargs is not allowed in a kernel call")
        text = self.lines[node.lineno - 1].strip() if self.lines else ""
        self.statements.append(Statement(
            len(self.statements), self.first_line + node.lineno - 1, text, loops, conds,
            target, kernel, args, kwargs, reduction, gather))

    def gathered(self, gen: ast.GeneratorExp, scope: dict[str, Expr]
                 ) -> tuple[tuple[Access], Loop]:
        """``kernel(T[..., v] for v in range(a, b))``: the tiles of a range, one call."""
        if len(gen.generators) != 1 or gen.generators[0].ifs or gen.generators[0].is_async:
            raise self.error(gen, "a gathered range takes one 'for v in range(a, b)' and no "
                                  "'if'")
        comp = gen.generators[0]
        if not isinstance(comp.target, ast.Name):
            raise self.error(gen, "the generator variable must be one name")
        var = comp.target.id
        if _check_name(var):
            raise self.error(gen, _check_name(var))
        if var in scope or var in self.params or var in self.arrays:
            raise self.error(gen, f"generator variable {var!r} shadows another name")
        lo, hi, step = self.range_of(comp.iter, scope)
        inner = dict(scope)
        inner[var] = Affine.of(**{var: 1})
        read = self.access(gen.elt, inner)
        if all(var not in e.names for e in read.index):
            raise self.error(gen, f"the gathered tile does not use {var!r}")
        return (read,), Loop(var, lo, hi, step)

    def keyword(self, k: ast.keyword, scope: dict[str, Affine]) -> Any:
        if isinstance(k.value, ast.Constant) and not isinstance(k.value.value, (bytes,)):
            return k.value.value
        if isinstance(k.value, ast.Tuple):
            return tuple(self.expr(e, scope) for e in k.value.elts)
        return self.expr(k.value, scope)

    def reduction(self, value: ast.Call, scope: dict[str, Affine]
                  ) -> tuple[str, tuple[Access], Reduction]:
        if len(value.args) != 2 or not isinstance(value.args[0], ast.Name) or not isinstance(
                value.args[1], ast.GeneratorExp):
            raise self.error(value, "reduce takes a kernel and a generator: reduce(kernel, "
                                    "(T[..., v] for v in range(a, b)), branch=B)")
        gen = value.args[1]
        if len(gen.generators) != 1 or gen.generators[0].ifs or gen.generators[0].is_async:
            raise self.error(value, "reduce: one 'for v in range(a, b)' and no 'if'")
        comp = gen.generators[0]
        if not isinstance(comp.target, ast.Name):
            raise self.error(value, "reduce: the generator variable must be one name")
        var = comp.target.id
        lo, hi, step = self.range_of(comp.iter, scope)
        if step != 1:
            raise self.error(value, "reduce: the generator's range must have step 1")
        inner = dict(scope)
        inner[var] = Affine.of(**{var: 1})
        read = self.access(gen.elt, inner)
        branch: int | str = 2
        for k in value.keywords:
            if k.arg != "branch":
                raise self.error(value, f"reduce: unknown keyword {k.arg!r} (only branch=)")
            if isinstance(k.value, ast.Constant) and type(k.value.value) is int:
                branch = k.value.value
                if branch < 2:
                    raise self.error(value, "reduce: branch must be at least 2")
            elif isinstance(k.value, ast.Name) and k.value.id in self.params:
                branch = k.value.id
            else:
                raise self.error(value, "reduce: branch must be an integer literal or a "
                                        "parameter")
        if any(var in a.names for a in read.index) is False:
            raise self.error(value, f"reduce: the generator's tile does not use {var!r}")
        return value.args[0].id, (read,), Reduction(var, lo, hi, branch)


def _cond(left: Expr, op: str, right: Expr) -> Cond:
    if isinstance(left, IntExpr) or isinstance(right, IntExpr):
        lsrc, rsrc = left.source(), right.source()
        names = left.names | right.names
        text = {">=": f"{lsrc} - {rsrc}", ">": f"{lsrc} - {rsrc} - 1",
                "<=": f"{rsrc} - {lsrc}", "<": f"{rsrc} - {lsrc} - 1"}.get(op)
        if text is not None:
            return Cond(IntExpr(text, names), ">=")
        return Cond(IntExpr(f"{lsrc} - {rsrc}", names), op)
    d = left - right
    if op == ">=":
        return Cond(d, ">=")
    if op == ">":
        return Cond(d - Affine.of(1), ">=")
    if op == "<=":
        return Cond(d.scale(-1), ">=")
    if op == "<":
        return Cond(d.scale(-1) - Affine.of(1), ">=")
    return Cond(d, op)


def _negate(c: Cond) -> Cond:
    if isinstance(c.expr, IntExpr):
        if c.op == ">=":
            return Cond(IntExpr(f"-{c.expr.source()} - 1", c.expr.names), ">=")
        return Cond(c.expr, "!=" if c.op == "==" else "==")
    if c.op == ">=":
        return Cond(c.expr.scale(-1) - Affine.of(1), ">=")
    return Cond(c.expr, "!=" if c.op == "==" else "==")


def parse(fn: Any) -> ProgramIR:
    """The :class:`ProgramIR` of the function ``fn`` (see the module docstring), or a
    :class:`ProgramError`."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        first_line = inspect.getsourcelines(fn)[1]
    except (OSError, TypeError) as e:
        raise ProgramError(f"lambdapack: the source of {fn!r} cannot be read ({e}); "
                           "define programs in a file") from None
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise ProgramError("lambdapack.program decorates a function (def ...)")
    # the decorator lines come first in the source; line numbers count from them
    lines = source.splitlines()
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
        raise ProgramError(f"lambdapack program {fdef.name!r}: only plain parameters "
                           "(no *args, **kwargs, keyword-only or defaults)")
    params, arrays = [], []
    for arg in a.args:
        ann = arg.annotation
        if isinstance(ann, ast.Name) and ann.id == "int":
            if _check_name(arg.arg):
                raise ProgramError(f"lambdapack program {fdef.name!r}, parameter "
                                   f"{arg.arg!r}: {_check_name(arg.arg)}")
            params.append(arg.arg)
        else:
            arrays.append(arg.arg)
    parser = _Parser(fdef.name, tuple(params), set(arrays), lines, first_line)
    parser.block(fdef.body, (), (), {})
    if not parser.statements:
        raise ProgramError(f"lambdapack program {fdef.name!r} has no kernel calls")
    ir = ProgramIR(fdef.name, tuple(params),
                   tuple((n, parser.dims.get(n, 0)) for n in arrays if n in parser.dims),
                   tuple(parser.statements), source)
    _check_writes(ir, parser)
    return ir


def _check_writes(ir: ProgramIR, parser: _Parser) -> None:
    """Reject a statement whose write index leaves out one of its loop variables (it would
    write one tile once per value of that variable)."""
    for s in ir.statements:
        variables = s.vars
        if not variables:
            continue
        rows = [[Fraction(e.coef(v) + sum(c for n, c in e.terms if n.endswith(f"*{v}")))
                 for v in variables] for e in s.target.index]
        missing = [v for k, v in enumerate(variables) if all(r[k] == 0 for r in rows)]
        # a rank below the number of variables with every variable used can still be one
        # to one inside the bounds (B * g + k with k < B): the expansion check decides
        if missing:
            why = f"its index does not use loop variable(s) {', '.join(missing)}"
            raise ProgramError(
                f"lambdapack program {ir.name!r}, line {s.line}: writes one tile more than "
                f"once ({why}; a tile is written once, give work tiles a version index): "
                f"{s.text!r}")
