"""Dependency analysis of a LambdaPACK program: who writes a tile, who reads it.

For a statement and one of its tile accesses (its write, or one of its reads), the question
"which iterations of this statement access tile ``t``?" is the integer solution set of the
affine equations ``access(I) = t`` over the statement's loop variables ``I`` inside their
bounds. It is solved symbolically once per (statement, access), by Gauss-Jordan elimination
over the rationals with the variables in loop order, and compiled to a small Python function
(generated source): the pivot variables are computed from ``t`` and the parameters, with a
divisibility test; the free variables are looped over their bounds (or, where a bound
depends on a variable not known yet, over the box of the variable's values, computed once
per binding); the result is filtered by the statement's full domain. So a lookup is
arithmetic, not algebra.

A write is one-to-one (the language checks it), so its solution has no free variables:
"who wrote ``t``" is at most one iteration. The same elimination, evaluated on NumPy arrays
of tiles, tells for many tiles at once whether a writer exists (used by ``starters()``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from tilegraph.lambdapack.ir import (
    COMPILE_LOCK,
    FUNCTIONS,
    Access,
    Affine,
    IntExpr,
    Loop,
    Statement,
)


def _lcm(values: list[int]) -> int:
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out


class Elimination:
    """The solution of ``access(I) = t`` over the variables of ``loops``: for each variable,
    either ``(numerator, denominator)`` (the numerator an :class:`Affine` over ``t0, t1,
    ...``, the parameters and free variables) or None (free); and the consistency equations
    (Affines that must be 0)."""

    def __init__(self, access: Access, loops: tuple[Loop, ...]):
        variables = [lp.var for lp in loops]
        self.variables = variables
        rows: list[tuple[list[Fraction], dict[str, Fraction]]] = []
        # an index that is not affine (a read's ``i + 2 ** level``) is not solved: it is
        # checked once the affine ones gave the other variables (its own loop over the rest)
        self.deferred: list[tuple[int, IntExpr]] = []
        for p, e in enumerate(access.index):
            if isinstance(e, IntExpr):
                self.deferred.append((p, e))
                continue
            coefs = [Fraction(e.coef(v)) for v in variables]
            rhs: dict[str, Fraction] = {f"t{p}": Fraction(1), "": Fraction(-e.const)}
            for n, c in e.terms:
                if n not in variables:
                    rhs[n] = rhs.get(n, Fraction(0)) - c
            rows.append((coefs, rhs))
        pivots: dict[int, int] = {}  # column -> row
        r = 0
        for c in range(len(variables)):
            piv = next((i for i in range(r, len(rows)) if rows[i][0][c] != 0), None)
            if piv is None:
                continue
            rows[r], rows[piv] = rows[piv], rows[r]
            pc, prhs = rows[r]
            f0 = pc[c]
            pc = [x / f0 for x in pc]
            prhs = {k: v / f0 for k, v in prhs.items()}
            rows[r] = (pc, prhs)
            for i in range(len(rows)):
                if i != r and rows[i][0][c] != 0:
                    f = rows[i][0][c]
                    ci, ri = rows[i]
                    ci = [x - f * y for x, y in zip(ci, pc, strict=True)]
                    ri = dict(ri)
                    for k, v in prhs.items():
                        ri[k] = ri.get(k, Fraction(0)) - f * v
                    rows[i] = (ci, ri)
            pivots[c] = r
            r += 1
        self.solution: list[tuple[Affine, int] | None] = []
        for c in range(len(variables)):
            if c not in pivots:
                self.solution.append(None)
                continue
            coefs, rhs = rows[pivots[c]]
            # v = rhs - sum(coef_f * f) over free columns f
            terms = {k: val for k, val in rhs.items() if k and val}
            for f, val in enumerate(coefs):
                if f != c and val != 0:
                    terms[variables[f]] = terms.get(variables[f], Fraction(0)) - val
            const = rhs.get("", Fraction(0))
            den = _lcm([x.denominator for x in [*terms.values(), const]])
            self.solution.append((Affine.of(int(const * den),
                                            **{k: int(x * den) for k, x in terms.items()}),
                                  den))
        self.consistency = []
        for i in range(r, len(rows)):
            _, rhs = rows[i]
            terms = {k: val for k, val in rhs.items() if k and val}
            const = rhs.get("", Fraction(0))
            if not terms and const == 0:
                continue
            den = _lcm([x.denominator for x in [*terms.values(), const]])
            self.consistency.append(Affine.of(int(const * den),
                                              **{k: int(x * den) for k, x in terms.items()}))

    @property
    def one_to_one(self) -> bool:
        return all(s is not None for s in self.solution)


def domain_source(loops: tuple[Loop, ...], conds: tuple, indent: str) -> list[str]:
    """The conditions (one boolean Python expression per line) that hold exactly inside
    the domain of ``loops`` and ``conds``."""
    out = []
    for lp in loops:
        out.append(f"{lp.lo.source()} <= {lp.var} < {lp.hi.source()}")
        if lp.step != 1:
            out.append(f"({lp.var} - {lp.lo.source()}) % {lp.step_source()} == 0")
    for c in conds:
        out.append(c.source())
    return [indent + x for x in out]


def solver_source(name: str, access: Access, loops: tuple[Loop, ...], conds: tuple,
                  params: tuple[str, ...]) -> str:
    """The source of ``def name(t, P, box)``: the list of tuples of the variables of
    ``loops`` inside the domain whose ``access`` is tile ``t`` (``P``: the parameter values
    in order; ``box``: per variable, the range of its values in this binding)."""
    el = Elimination(access, loops)
    nt = len(access.index)
    lines = [f"def {name}(t, P, box):"]
    if nt == 1:
        lines.append("    t0, = t")
    else:
        lines.append(f"    {', '.join(f't{p}' for p in range(nt))} = t")
    if params:
        lines.append(f"    {', '.join(params)}{',' if len(params) == 1 else ''} = P")
    for c in el.consistency:
        lines.append(f"    if {c.source()} != 0:")
        lines.append("        return ()")
    lines.append("    out = []")
    known = set(params) | {f"t{p}" for p in range(nt)}
    pending = list(range(len(loops)))
    indent = "    "
    while pending:
        chosen = None
        for c in pending:
            sol = el.solution[c]
            if sol is not None and sol[0].names <= known:
                chosen = c
                break
        if chosen is not None:
            num, den = el.solution[chosen]
            var = loops[chosen].var
            if den == 1:
                lines.append(f"{indent}{var} = {num.source()}")
            else:
                lines.append(f"{indent}_n = {num.source()}")
                lines.append(f"{indent}if _n % {den} == 0:")
                indent += "    "
                lines.append(f"{indent}{var} = _n // {den}")
            known.add(var)
            pending.remove(chosen)
            continue
        c = next(c for c in pending if el.solution[c] is None)
        lp = loops[c]
        if lp.lo.names <= known and lp.hi.names <= known:
            lines.append(f"{indent}for {lp.var} in range({lp.lo.source()}, "
                         f"{lp.hi.source()}, {lp.step_source()}):")
        else:
            lines.append(f"{indent}for {lp.var} in range(*box[{c}]):")
        indent += "    "
        known.add(lp.var)
        pending.remove(c)
    checks = domain_source(loops, conds, "")
    checks += [f"{e.source()} == t{p}" for p, e in el.deferred]
    cond = " and ".join(f"({x})" for x in checks) if checks else "True"
    lines.append(f"{indent}if {cond}:")
    variables = ", ".join(lp.var for lp in loops)
    lines.append(f"{indent}    out.append(({variables}{',' if len(loops) == 1 else ''}))")
    lines.append("    return out")
    return "\n".join(lines)


def compile_source(source: str, name: str) -> Any:
    namespace: dict[str, Any] = dict(FUNCTIONS)
    with COMPILE_LOCK:
        code = compile(source, f"<lambdapack {name}>", "exec")
    exec(code, namespace)
    return namespace[name]


def box_of(loops: tuple[Loop, ...], params: dict[str, int],
           limit: int = 5_000_000) -> list[tuple[int, int]]:
    """Per variable of ``loops``, a range ``(lo, hi)`` that holds all its values in the
    domain: by interval arithmetic through the loop nest, or, where a bound is not affine,
    by walking the loop nest (up to ``limit`` iterations)."""
    if any(isinstance(b, IntExpr) or any("*" in n for n, _ in b.terms)
           for lp in loops for b in (lp.lo, lp.hi)):
        return _box_by_walking(loops, params, limit)
    lows: dict[str, int] = dict(params)
    highs: dict[str, int] = dict(params)
    out = []
    for lp in loops:
        lo_min = _interval(lp.lo, lows, highs)[0]
        hi_max = _interval(lp.hi, lows, highs)[1]
        lows[lp.var], highs[lp.var] = lo_min, max(lo_min, hi_max - 1)
        out.append((lo_min, max(lo_min, hi_max)))
    return out


def _box_by_walking(loops: tuple[Loop, ...], params: dict[str, int],
                    limit: int) -> list[tuple[int, int]]:
    lows = [None] * len(loops)
    highs = [None] * len(loops)
    env = dict(params)
    count = 0

    def walk(depth: int) -> None:
        nonlocal count
        if depth == len(loops):
            return
        lp = loops[depth]
        for v in range(lp.lo.eval(env), lp.hi.eval(env), lp.step_of(env)):
            count += 1
            if count > limit:
                raise ValueError(f"lambdapack: the loop nest of {[x.var for x in loops]} has "
                                 f"more than {limit} iterations and non-affine bounds; its "
                                 "solver needs affine bounds at this size")
            lows[depth] = v if lows[depth] is None else min(lows[depth], v)
            highs[depth] = v if highs[depth] is None else max(highs[depth], v)
            env[lp.var] = v
            walk(depth + 1)
        env.pop(lp.var, None)

    walk(0)
    return [(0, 0) if lo is None else (lo, hi + 1) for lo, hi in zip(lows, highs, strict=True)]


def _interval(e: Affine, lows: dict[str, int], highs: dict[str, int]) -> tuple[int, int]:
    lo = hi = e.const
    for n, c in e.terms:
        a, b = c * lows[n], c * highs[n]
        lo += min(a, b)
        hi += max(a, b)
    return lo, hi


def vector_mask(loops: tuple[Loop, ...], conds: tuple, env: dict[str, Any]) -> np.ndarray:
    """Which rows of the arrays in ``env`` (a value per variable) lie in the domain."""
    mask = None
    for lp in loops:
        v = env[lp.var]
        lo = lp.lo.eval(env)
        m = (v >= lo) & (v < lp.hi.eval(env))
        if lp.step != 1:
            m &= (v - lo) % lp.step_of(env) == 0
        mask = m if mask is None else mask & m
    for c in conds:
        x = c.expr.eval(env)
        m = x >= 0 if c.op == ">=" else (x == 0 if c.op == "==" else x != 0)
        mask = m if mask is None else mask & m
    return mask


def vector_writer_exists(s: Statement, el: Elimination, tiles: list[np.ndarray],
                         params: dict[str, int]) -> np.ndarray:
    """For many tiles at once (``tiles[p]``: index p of each), whether statement ``s``
    (whose write is one-to-one: ``el``) writes it."""
    n = len(tiles[0])
    env: dict[str, Any] = dict(params)
    for p, t in enumerate(tiles):
        env[f"t{p}"] = t
    ok = np.ones(n, dtype=bool)
    for c in el.consistency:
        ok &= c.eval(env) == 0
    for lp, sol in zip(s.loops, el.solution, strict=True):
        num, den = sol
        x = num.eval(env)
        x = np.broadcast_to(np.asarray(x, dtype=np.int64), (n,))
        if den != 1:
            ok &= x % den == 0
            x = x // den
        env[lp.var] = x
    if s.loops or s.conds:
        mask = vector_mask(s.loops, s.conds, env)
        if mask is not None:
            ok &= np.broadcast_to(mask, (n,))
    if s.reduce is not None:
        ok &= np.broadcast_to(s.reduce.hi.eval(env) - s.reduce.lo.eval(env) >= 1, (n,))
    return ok


def expand_source(name: str, s: Statement, params: tuple[str, ...]) -> str:
    """The source of ``def name(P)``: for statement ``s`` (not a reduction), the list of
    ``(index, args, written tile)`` of all its iterations in loop order, ``args`` holding a
    tile tuple per tile read and an int per integer argument."""
    lines = [f"def {name}(P):"]
    if params:
        lines.append(f"    {', '.join(params)}{',' if len(params) == 1 else ''} = P")
    lines.append("    out = []")
    lines.append("    add = out.append")
    indent = "    "
    for lp in s.loops:
        lines.append(f"{indent}for {lp.var} in range({lp.lo.source()}, {lp.hi.source()}, "
                     f"{lp.step_source()}):")
        indent += "    "
    if s.conds:
        lines.append(f"{indent}if {' and '.join(f'({c.source()})' for c in s.conds)}:")
        indent += "    "

    def tup(items: list[str]) -> str:
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

    args = [tup([e.source() for e in a.index]) if isinstance(a, Access) else a.source()
            for a in s.args]
    idx = tup([lp.var for lp in s.loops])
    lines.append(f"{indent}add(({idx}, {tup(args)}, {tup([e.source() for e in s.target.index])}))")
    lines.append("    return out")
    return "\n".join(lines)


def info_source(name: str, s: Statement, params: tuple[str, ...]) -> str:
    """The source of ``def name(idx, P)``: for statement ``s`` (not a reduction), None if
    ``idx`` is not an iteration of it, else ``(args, written tile)`` as in
    :func:`expand_source`."""
    lines = [f"def {name}(idx, P):"]
    if params:
        lines.append(f"    {', '.join(params)}{',' if len(params) == 1 else ''} = P")
    if s.loops:
        lines.append(f"    if len(idx) != {len(s.loops)}:")
        lines.append("        return None")
        names = ", ".join(lp.var for lp in s.loops)
        lines.append(f"    {names}{',' if len(s.loops) == 1 else ''} = idx")
        checks = domain_source(s.loops, s.conds, "")
        lines.append(f"    if not ({' and '.join(f'({c})' for c in checks)}):")
        lines.append("        return None")
    else:
        lines.append("    if idx != ():")
        lines.append("        return None")
        if s.conds:
            lines.append(f"    if not ({' and '.join(f'({c.source()})' for c in s.conds)}):")
            lines.append("        return None")

    def tup(items: list[str]) -> str:
        return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

    args = [tup([e.source() for e in a.index]) if isinstance(a, Access) else a.source()
            for a in s.args]
    lines.append(f"    return {tup(args)}, {tup([e.source() for e in s.target.index])}")
    return "\n".join(lines)


def emit_source(name: str, s: Statement, params: tuple[str, ...], overwrites: int | None,
                coords: tuple[int, ...]) -> str:
    """The source of ``def name(rows, P, key, get, uses, in_key, add, func, kind, kname,
    kw, shape, flops, nbytes, slow, Dep, sm, add_many)`` (``key``: the tasks' name; ``sm``
    looks up the shapes already known, ``shape`` finds one; ``flops`` of the read shapes, or
    None; ``nbytes`` of a written tile): adds the task of every row of statement ``s`` (rows
    as :func:`expand_source` makes them) to a builder, unrolled over the statement's
    arguments. A row whose reads name one task twice goes to ``slow(row)``."""
    lines = [f"def {name}(rows, P, key, get, uses, in_key, add, func, kind, kname, kw, shape, "
             "flops, nbytes, slow, Dep, sm, add_many):"]
    if params:
        lines.append(f"    {', '.join(params)}{',' if len(params) == 1 else ''} = P")
    lines.append("    for row in rows:")
    lines.append("        idx, args, tile = row")
    if s.kwargs and s.loops:
        names = ", ".join(lp.var for lp in s.loops)
        lines.append(f"        {names}{',' if len(s.loops) == 1 else ''} = idx")
    n = len(s.args)
    if n:
        lines.append(f"        {', '.join(f'a{i}' for i in range(n))}{',' if n == 1 else ''}"
                     " = args")
    deps, call, shapes = [], [], []
    for i, a in enumerate(s.args):
        if isinstance(a, Access):
            lines.append(f"        t{i} = ({a.array!r}, a{i})")
            lines.append(f"        w{i} = get(t{i})")
            lines.append(f"        d{i} = in_key({a.array!r}, a{i}) if w{i} is None else "
                         f"(key, w{i}[0], *w{i}[1])")
            call.append(f"Dep({len(deps)})")
            deps.append(f"d{i}")
            shapes.append(f"(sm(t{i}) or shape(t{i}))")
        else:
            call.append(f"a{i}")
    pairs = [f"{x} == {y}" for j, x in enumerate(deps) for y in deps[j + 1:]]
    if pairs:
        lines.append(f"        if {' or '.join(pairs)}:")
        lines.append("            slow(row)")
        lines.append("            continue")
    if overwrites is not None:
        lines.append(f"        kwargs = kw[w{overwrites} is not None and uses[t{overwrites}] == 1]")
    else:
        lines.append("        kwargs = kw[0]")
    if s.kwargs:
        items = []
        for k, v in s.kwargs:
            if isinstance(v, (Affine, IntExpr)):
                src = v.source()
            elif isinstance(v, tuple) and all(isinstance(x, (Affine, IntExpr)) for x in v):
                src = "(" + ", ".join(x.source() for x in v) + ("," if len(v) == 1 else "") + ")"
            else:
                src = repr(v)
            items.append(f"{k!r}: {src}")
        lines.append(f"        kwargs = {{**(kwargs or {{}}), {', '.join(items)}}}")
    direct = all(isinstance(a, Access) for a in s.args)
    args_src = "None" if direct else (
        "(" + ", ".join(call) + ("," if len(call) == 1 else "") + ")")
    # flops is None when the shapes are not known; a shape may be None (unknown). Each read
    # shape is looked up once per row (it is both tested and passed to flops)
    if shapes:
        names = [f"s{j}" for j in range(len(shapes))]
        lines.append("        if flops is None:")
        lines.append("            cost = None")
        lines.append("        else:")
        for nm, sh in zip(names, shapes, strict=True):
            lines.append(f"            {nm} = {sh}")
        lines.append(f"            cost = None if {' or '.join(f'{nm} is None' for nm in names)}"
                     f" else float(flops({', '.join(names)}))")
        cost = "cost"
    else:
        cost = "None"
    coord_src = "(" + ", ".join(f"tile[{p}]" for p in coords if p < len(s.target.index)) + (
        "," if len([p for p in coords if p < len(s.target.index)]) == 1 else "") + ")"
    if direct:  # collected and added at once
        head = [lines[0], "    _k, _d, _w, _c, _nb, _f = [], [], [], [], [], []"]
        lines = head + lines[1:]
        lines.append(f"        _k.append((key, {s.id}, *idx))")
        lines.append(f"        _d.append([{', '.join(deps)}])")
        lines.append("        _w.append(kwargs)")
        lines.append(f"        _c.append({coord_src})")
        lines.append("        _nb.append(nbytes(tile))")
        lines.append(f"        _f.append({cost})")
        lines.append("    add_many(_k, func, _d, _w, kind=kind, name=kname, coords=_c, "
                     "nbytes=_nb, cost=_f)")
    else:
        lines.append(f"        add((key, {s.id}, *idx), func, "
                     f"deps=[{', '.join(deps)}], args={args_src}, kwargs=kwargs, kind=kind, "
                     f"name=kname, coords={coord_src}, nbytes=nbytes(tile), "
                     f"cost={cost})")
    return "\n".join(lines)
