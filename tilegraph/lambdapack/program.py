"""LambdaPACK programs and their implicit DAGs.

:func:`program` analyses a loop program (:mod:`tilegraph.lambdapack.lang`) once; ``bind``
gives its DAG for integer parameters, a :class:`DAG` that never holds its tasks: a node is
``(statement id, index tuple)`` (the loop variables; for a reduction, the outer loop
variables then ``level, group``), and ``parents``/``children`` are computed on demand from
the solved index equations (:mod:`tilegraph.lambdapack.solve`). A DAG pickles to the
program and its parameters, whatever their values, and can enumerate, count and lower
itself to one :class:`~tilegraph.graph.TaskGraph` (``to_taskgraph``) for the threads and
MPI backends.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

import numpy as np

from tilegraph.lambdapack.drawing import DAGDrawing
from tilegraph.lambdapack.ir import Access, Loop, Node, ProgramError, ProgramIR, Statement
from tilegraph.lambdapack.kernels import KERNELS, LPKernel
from tilegraph.lambdapack.lang import parse
from tilegraph.lambdapack.lowering import DAGLowering
from tilegraph.lambdapack.solve import (
    Elimination,
    box_of,
    compile_source,
    emit_source,
    expand_source,
    info_source,
    solver_source,
    vector_mask,
    vector_writer_exists,
)
from tilegraph.util import concat_ranges


class Program:
    """A LambdaPACK program (see :func:`program`): ``ir`` is what the analysis kept,
    ``kernels`` the kernels it calls by name."""

    def __init__(self, ir: ProgramIR, kernels: Mapping[str, LPKernel],
                 tile_coords: Mapping[str, tuple[int, ...]] | None = None):
        self.ir = ir
        self.name = ir.name
        self.kernels = dict(kernels)
        self.tile_coords = dict(tile_coords or {})
        self._compiled: dict[tuple, _Compiled] = {}
        self._products = sorted(set(ir.params) & set().union(*(
            e.product_names for st in ir.statements
            for a in (st.target, *st.reads) for e in a.index)))

    def __repr__(self) -> str:
        return (f"lambdapack.Program<{self.name}({', '.join(self.ir.params)}): "
                f"{len(self.ir.statements)} statements>")

    def __getstate__(self) -> dict:
        return {"ir": self.ir, "kernels": {k: v.name for k, v in self.kernels.items()},
                "custom": {k: v for k, v in self.kernels.items() if KERNELS.get(k) is not v},
                "tile_coords": self.tile_coords}

    def __setstate__(self, state: dict) -> None:
        kernels = {k: state["custom"].get(k) or KERNELS[name]
                   for k, name in state["kernels"].items()}
        self.__init__(state["ir"], kernels, state["tile_coords"])

    def compiled_for(self, params: dict[str, int]) -> _Compiled:
        """The generated lookups for these parameters (one set for every binding, unless
        a parameter multiplies a loop variable in an index: then one per value of those
        parameters)."""
        key = tuple(params[p] for p in self._products)
        comp = self._compiled.get(key)
        if comp is None:
            comp = self._compiled[key] = _Compiled(self.ir, dict(zip(self._products, key,
                                                                     strict=True)))
        return comp

    def bind(self, **params: int) -> DAG:
        """The DAG of the program for these values of its integer parameters."""
        missing = [p for p in self.ir.params if p not in params]
        extra = [p for p in params if p not in self.ir.params]
        if missing or extra:
            raise TypeError(f"{self.name}.bind: expected the parameters "
                            f"{', '.join(self.ir.params) or '(none)'}"
                            + (f"; missing {', '.join(missing)}" if missing else "")
                            + (f"; unknown {', '.join(extra)}" if extra else ""))
        for p, v in params.items():
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"{self.name}.bind: parameter {p} must be a non-negative "
                                 f"integer, got {v!r}")
        for s in self.ir.statements:
            if s.reduce is not None and isinstance(s.reduce.branch, str) and int(
                    params[s.reduce.branch]) < 2:
                raise ValueError(f"{self.name}.bind: {s.reduce.branch} is a reduction's "
                                 f"branching factor (line {s.line}) and must be at least 2")
        return DAG(self, {p: int(params[p]) for p in self.ir.params})


def program(fn: Callable | None = None, *, kernels: Mapping[str, Any] | None = None,
            tile_coords: Mapping[str, tuple[int, ...]] | None = None) -> Any:
    """Decorator: the :class:`Program` of a loop program (the language is described in
    :mod:`tilegraph.lambdapack.lang`). ``kernels`` maps names used in the program to
    :class:`~tilegraph.lambdapack.kernels.LPKernel` (or plain functions, of kind
    ``"map"``); other names are looked up among the registered kernels. ``tile_coords``
    maps a tile array to the positions of its index that are the block's coordinates
    (default: the first two), which placement reads.

    Every construct the analysis cannot handle is a :class:`ProgramError` here, with the
    line and the reason. Writing one tile from two statements is checked by expanding the
    program with every parameter at 2, 3 and 5 (a program that writes a tile twice only
    for larger parameters gets past this check and fails when it is lowered).
    """
    def wrap(f: Callable) -> Program:
        ir = parse(f)
        table: dict[str, LPKernel] = {}
        given = dict(kernels or {})
        for s in ir.statements:
            if s.kernel in table:
                continue
            k = given.get(s.kernel)
            if k is None:
                k = KERNELS.get(s.kernel)
            elif not isinstance(k, LPKernel):
                k = LPKernel(s.kernel, k, "map")
            if k is None:
                raise ProgramError(f"lambdapack program {ir.name!r}, line {s.line}: unknown "
                                   f"kernel {s.kernel!r} (pass kernels={{...}} or register "
                                   f"it): {s.text!r}")
            table[s.kernel] = k
        prog = Program(ir, table, tile_coords)
        for value in (2, 3, 5):
            prog.bind(**dict.fromkeys(ir.params, value)).check_writes()
        return prog

    return wrap(fn) if fn is not None else wrap


class _Compiled:
    """The generated lookups of a program, shared by all its bindings."""

    def __init__(self, ir: ProgramIR, products: dict[str, int] | None = None):
        products = products or {}

        def bound(a: Access) -> Access:
            if not products:
                return a
            return Access(a.array, tuple(e.bind_products(products) for e in a.index))

        self.ir = ir
        params = ir.params
        self.writers: dict[str, list[int]] = {}
        self.readers: dict[str, list[tuple[int, int]]] = {}
        self.loops: dict[int, tuple[Loop, ...]] = {}
        self.emitters: dict[tuple, Callable] = {}
        statements = ir.statements
        for s in statements:
            self.writers.setdefault(s.target.array, []).append(s.id)
            loops = s.loops
            if s.reduce is not None:
                r = s.reduce
                loops = (*s.loops, Loop(r.var, r.lo, r.hi, 1))
            elif s.gather is not None:
                loops = (*s.loops, s.gather)
            self.loops[s.id] = loops
            for pos, a in enumerate(s.args):
                if isinstance(a, Access):
                    self.readers.setdefault(a.array, []).append((s.id, pos))

        # the functions are generated and compiled when first used
        def expand(sid: int) -> Callable:
            return compile_source(expand_source(f"e{sid}", statements[sid], params), f"e{sid}")

        def info(sid: int) -> Callable:
            return compile_source(info_source(f"i{sid}", statements[sid], params), f"i{sid}")

        def write_solver(sid: int) -> Callable:
            s = statements[sid]
            return compile_source(solver_source(f"w{sid}", bound(s.target), s.loops, s.conds,
                                                params), f"w{sid}")

        def write_elim(sid: int) -> Elimination:
            s = statements[sid]
            return Elimination(bound(s.target), s.loops)

        def read_solver(key: tuple[int, int]) -> Callable:
            sid, pos = key
            s = statements[sid]
            name = f"r{sid}_{pos}"
            return compile_source(solver_source(name, bound(s.args[pos]), self.loops[sid],
                                                s.conds, params), name)

        self.expand = _Lazy(expand)
        self.info = _Lazy(info)
        self.write_solver = _Lazy(write_solver)
        self.write_elim = _Lazy(write_elim)
        self.read_solver = _Lazy(read_solver)


class _Lazy(dict):
    """A table whose entries are made by ``factory(key)`` when first looked up."""

    def __init__(self, factory: Callable[[Any], Any]):
        super().__init__()
        self.factory = factory

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.factory(key)
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


def _emitter(self: _Compiled, s: Statement, overwrites: int | None,
             coords: tuple[int, ...]) -> Callable:
    key = (s.id, overwrites, tuple(coords))
    fn = self.emitters.get(key)
    if fn is None:
        fname = f"g{s.id}"
        fn = self.emitters[key] = compile_source(
            emit_source(fname, s, self.ir.params, overwrites, tuple(coords)), fname)
    return fn


_Compiled.emitter = _emitter


def _levels(n: int, branch: int) -> list[int]:
    """Node counts of a reduction tree over ``n`` items, level 1 up to the top (one)."""
    counts = []
    while True:
        n = -(-n // branch)
        counts.append(n)
        if n <= 1:
            return counts


class DAG(DAGLowering, DAGDrawing):
    """The implicit DAG of a bound program (see the module docstring)."""

    def __init__(self, program: Program, params: dict[str, int]):
        self.program = program
        self.params = params
        self._p = tuple(params[p] for p in program.ir.params)
        self._comp = program.compiled_for(params)
        self._boxes: dict[int, list[tuple[int, int]]] = {}

    def __getstate__(self) -> dict:
        return {"program": self.program, "params": self.params}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["program"], state["params"])

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"lambdapack.DAG<{self.program.name}({args})>"

    @property
    def statements(self) -> tuple[Statement, ...]:
        return self.program.ir.statements

    def _box(self, sid: int) -> list[tuple[int, int]]:
        box = self._boxes.get(sid)
        if box is None:
            box = self._boxes[sid] = box_of(self._comp.loops[sid], self.params)
        return box

    def _env(self, s: Statement, idx: tuple[int, ...]) -> dict[str, int]:
        env = dict(self.params)
        for lp, v in zip(s.loops, idx, strict=False):
            env[lp.var] = v
        return env

    def _branch(self, s: Statement) -> int:
        b = s.reduce.branch
        return self.params[b] if isinstance(b, str) else b

    def _tree(self, s: Statement, env: dict[str, int]) -> tuple[int, int, list[int]]:
        """(lo, n, counts per level) of the reduction of ``s`` at ``env``."""
        r = s.reduce
        lo = r.lo.eval(env)
        n = r.hi.eval(env) - lo
        return lo, n, (_levels(n, self._branch(s)) if n > 0 else [])

    # -- nodes ---------------------------------------------------------------------------

    def _iter_loops(self, loops: tuple[Loop, ...], conds: tuple, env: dict[str, int],
                    depth: int = 0) -> Iterator[tuple[int, ...]]:
        if depth == len(loops):
            if all(_holds(c, env) for c in conds):
                yield tuple(env[lp.var] for lp in loops)
            return
        lp = loops[depth]
        for v in range(lp.lo.eval(env), lp.hi.eval(env), lp.step_of(env)):
            env[lp.var] = v
            yield from self._iter_loops(loops, conds, env, depth + 1)
        env.pop(lp.var, None)

    def statement_nodes(self, sid: int) -> Iterator[Node]:
        """The nodes of statement ``sid``, in loop order."""
        s = self.statements[sid]
        for idx in self._iter_loops(s.loops, s.conds, dict(self.params)):
            if s.reduce is None:
                yield (sid, idx)
                continue
            _, _, counts = self._tree(s, self._env(s, idx))
            for level, count in enumerate(counts, start=1):
                for g in range(count):
                    yield (sid, (*idx, level, g))

    def nodes(self) -> Iterator[Node]:
        """Every node, statement by statement."""
        for s in self.statements:
            yield from self.statement_nodes(s.id)

    def count(self) -> int:
        """How many nodes (tasks) the DAG has."""
        return sum(self.count_statement(s.id) for s in self.statements)

    def count_statement(self, sid: int) -> int:
        s = self.statements[sid]
        if s.reduce is not None:
            return sum(sum(self._tree(s, self._env(s, idx))[2])
                       for idx in self._iter_loops(s.loops, s.conds, dict(self.params)))
        rows = self._frontier(s, count_only=True)
        return int(rows)

    def contains(self, node: Node) -> bool:
        """Whether ``node`` is a node of this DAG."""
        try:
            sid, idx = node
            s = self.statements[sid]
        except (TypeError, ValueError, IndexError):
            return False
        nloop = len(s.loops)
        if len(idx) != nloop + (2 if s.reduce is not None else 0):
            return False
        env = self._env(s, idx)
        for lp in s.loops:
            v, lo = env[lp.var], lp.lo.eval(env)
            if not (lo <= v < lp.hi.eval(env)) or (v - lo) % lp.step_of(env):
                return False
        if not all(_holds(c, env) for c in s.conds):
            return False
        if s.reduce is None:
            return True
        level, g = idx[nloop:]
        _, _, counts = self._tree(s, env)
        return 1 <= level <= len(counts) and 0 <= g < counts[level - 1]

    def _check(self, node: Node) -> Statement:
        if not self.contains(node):
            raise ValueError(f"{self!r}: {node!r} is not a node of this DAG (a node is "
                             "(statement id, index tuple) inside the statement's loops)")
        return self.statements[node[0]]

    # -- edges ---------------------------------------------------------------------------

    def writer(self, array: str, tile: tuple[int, ...]) -> Node | None:
        """The node that writes ``array[tile]``, or None (an input tile)."""
        comp = self._comp
        for sid in comp.writers.get(array, ()):
            sols = comp.write_solver[sid](tile, self._p, self._box(sid))
            if sols:
                s = self.statements[sid]
                if s.reduce is None:
                    return (sid, sols[0])
                _, _, counts = self._tree(s, self._env(s, sols[0]))
                if counts:
                    return (sid, (*sols[0], len(counts), 0))
        return None

    def writes(self, node: Node) -> tuple[str, tuple[int, ...]] | None:
        """The tile ``node`` writes (None for the inner nodes of a reduction tree)."""
        s = self.statements[node[0]]
        idx = node[1]
        env = self._env(s, idx)
        if s.reduce is not None:
            _, _, counts = self._tree(s, env)
            if idx[-2] != len(counts):
                return None
        return s.target.array, tuple(e.eval(env) for e in s.target.index)

    def inputs(self, node: Node) -> list[tuple[str, Any]]:
        """What ``node`` reads, in argument order: ``("tile", (array, tile, writer))``
        (writer None for an input tile), ``("node", parent)`` (a reduction's inner node)
        or ``("int", value)``."""
        s = self.statements[node[0]]
        idx = node[1]
        env = self._env(s, idx)
        out: list[tuple[str, Any]] = []
        if s.reduce is not None:
            nloop = len(s.loops)
            level, g = idx[nloop:]
            b = self._branch(s)
            lo, n, counts = self._tree(s, env)
            if level == 1:
                (read,) = s.args
                for v in range(lo + g * b, lo + min(g * b + b, n)):
                    env[s.reduce.var] = v
                    tile = tuple(e.eval(env) for e in read.index)
                    out.append(("tile", (read.array, tile, self.writer(read.array, tile))))
            else:
                for c in range(g * b, min(g * b + b, counts[level - 2])):
                    out.append(("node", (node[0], (*idx[:nloop], level - 1, c))))
            return out
        if s.gather is not None:
            (read,) = s.args
            g = s.gather
            for v in range(g.lo.eval(env), g.hi.eval(env), g.step_of(env)):
                env[g.var] = v
                tile = tuple(e.eval(env) for e in read.index)
                out.append(("tile", (read.array, tile, self.writer(read.array, tile))))
            return out
        for a in s.args:
            if isinstance(a, Access):
                tile = tuple(e.eval(env) for e in a.index)
                out.append(("tile", (a.array, tile, self.writer(a.array, tile))))
            else:
                out.append(("int", a.eval(env)))
        return out

    def _info(self, node: Node) -> tuple[Statement, Any]:
        """The statement of ``node`` and, for a plain statement, ``(args, written tile)``
        from its compiled lookup (None for a reduction); an error if ``node`` is not in the
        DAG."""
        try:
            sid, idx = node
            s = self.statements[sid]
        except (TypeError, ValueError, IndexError):
            s = None
        if s is not None and s.plain and sid >= 0 and type(idx) is tuple:
            info = self._comp.info[sid](idx, self._p)
            if info is not None:
                return s, info
        return self._check(node), None

    def parents(self, node: Node) -> list[Node]:
        """The nodes whose outputs ``node`` reads (no repeats)."""
        s, info = self._info(node)
        out: list[Node] = []
        if info is not None:
            writer = self.writer
            for a, v in zip(s.args, info[0], strict=True):
                if type(v) is tuple:
                    p = writer(a.array, v)
                    if p is not None and p not in out:
                        out.append(p)
            return out
        for what, value in self.inputs(node):
            parent = value[2] if what == "tile" else (value if what == "node" else None)
            if parent is not None and parent not in out:
                out.append(parent)
        return out

    def children(self, node: Node) -> list[Node]:
        """The nodes that read what ``node`` writes (no repeats)."""
        s, info = self._info(node)
        if info is not None:
            return self._readers(s.target.array, info[1])
        if s.reduce is not None:
            nloop = len(s.loops)
            level, g = node[1][nloop:]
            _, _, counts = self._tree(s, self._env(s, node[1]))
            if level < len(counts):
                return [(node[0], (*node[1][:nloop], level + 1, g // self._branch(s)))]
        array, tile = self.writes(node)
        return self._readers(array, tile)

    def _readers(self, array: str, tile: tuple[int, ...]) -> list[Node]:
        comp = self._comp
        out: list[Node] = []
        seen: set[Node] = set()
        for sid, pos in comp.readers.get(array, ()):
            s = self.statements[sid]
            sols = comp.read_solver[(sid, pos)](tile, self._p, self._box(sid))
            for sol in sols:
                if s.gather is not None:
                    child = (sid, sol[:-1])
                elif s.reduce is None:
                    child = (sid, sol)
                else:
                    nloop = len(s.loops)
                    outer = sol[:nloop]
                    lo = s.reduce.lo.eval(self._env(s, outer))
                    child = (sid, (*outer, 1, (sol[nloop] - lo) // self._branch(s)))
                if child not in seen:
                    seen.add(child)
                    out.append(child)
        return out

    # -- starters ------------------------------------------------------------------------

    def _has_writer(self, array: str, tiles: list[np.ndarray]) -> np.ndarray:
        comp = self._comp
        n = len(tiles[0]) if tiles else 0
        found = np.zeros(n, dtype=bool)
        for sid in comp.writers.get(array, ()):
            if comp.write_elim[sid].one_to_one:
                found |= vector_writer_exists(self.statements[sid], comp.write_elim[sid],
                                              tiles, self.params)
                continue
            solve = comp.write_solver[sid]
            for r, tile in enumerate(zip(*(t.tolist() for t in tiles), strict=True)):
                if not found[r] and solve(tile, self._p, self._box(sid)):
                    found[r] = True
        return found

    def _frontier(self, s: Statement, count_only: bool = False, prune: bool = False) -> Any:
        """The index tuples of ``s``'s nodes as arrays, level by level; with ``prune``,
        rows whose reads (determined so far) have a writer are dropped (starters)."""
        env: dict[str, Any] = dict(self.params)
        size = 1
        assigned: set[str] = set(self.params)
        conds_left = list(s.conds)
        reads_left = [a for a in s.reads] if prune else []
        columns: dict[str, np.ndarray] = {}
        last = len(s.loops) - 1
        for depth, lp in enumerate(s.loops):
            lo = np.broadcast_to(np.asarray(lp.lo.eval(env), dtype=np.int64), (size,))
            hi = np.broadcast_to(np.asarray(lp.hi.eval(env), dtype=np.int64), (size,))
            step = np.broadcast_to(np.asarray(lp.step_of(env), dtype=np.int64), (size,))
            counts = np.maximum(0, -(-(hi - lo) // step))
            assigned.add(lp.var)
            ready = [c for c in conds_left if c.expr.names <= assigned]
            if count_only and depth == last and not ready:
                return int(counts.sum())
            total = int(counts.sum())
            rep = np.repeat(np.arange(size), counts)
            offsets = concat_ranges(np.zeros(size, dtype=np.int64), counts)
            for k in columns:
                columns[k] = columns[k][rep]
            columns[lp.var] = lo[rep] + step[rep] * offsets
            size = total
            env = {**self.params, **columns}
            keep = np.ones(size, dtype=bool)
            for c in ready:
                x = c.expr.eval(env)
                keep &= x >= 0 if c.op == ">=" else (x == 0 if c.op == "==" else x != 0)
                conds_left.remove(c)
            for a in [a for a in reads_left if all(e.names <= assigned for e in a.index)]:
                tiles = [np.broadcast_to(np.asarray(e.eval(env), dtype=np.int64), (size,))
                         for e in a.index]
                keep &= ~self._has_writer(a.array, tiles)
                reads_left.remove(a)
            if not keep.all():
                for k in columns:
                    columns[k] = columns[k][keep]
                size = int(keep.sum())
                env = {**self.params, **columns}
        if count_only:
            if conds_left:
                env1 = {**self.params, **columns}
                return int(vector_mask((), tuple(conds_left), env1).sum()) if size else 0
            return size
        for a in reads_left:  # reads with constant tiles (no loop variable)
            tiles = [np.full(size, e.eval(self.params), dtype=np.int64) for e in a.index]
            keep = ~self._has_writer(a.array, tiles)
            for k in columns:
                columns[k] = columns[k][keep]
            size = int(keep.sum())
        return [tuple(row) for row in zip(*(columns[lp.var].tolist() for lp in s.loops),
                                          strict=True)] if s.loops else [()] * size

    def starters(self) -> list[Node]:
        """The nodes with no parents (they read input tiles only), statement by
        statement."""
        out: list[Node] = []
        for s in self.statements:
            if s.plain:
                out += [(s.id, idx) for idx in self._frontier(s, prune=True)]
                continue
            if s.gather is not None:
                out += [node for node in self.statement_nodes(s.id)
                        if all(v[2] is None for _, v in self.inputs(node))]
                continue
            for idx in self._iter_loops(s.loops, s.conds, dict(self.params)):
                _, _, counts = self._tree(s, self._env(s, idx))
                for g in range(counts[0] if counts else 0):
                    node = (s.id, (*idx, 1, g))
                    if all(v[2] is None for _, v in self.inputs(node)):
                        out.append(node)
        return out

    # -- checks and lowering -------------------------------------------------------------

    def check_writes(self) -> None:
        """Raise :class:`ProgramError` if two nodes write one tile (expands the DAG)."""
        self._rows()

    def node_key(self, name: str, node: Node) -> Hashable:
        return (name, node[0], *node[1])

    def _rows(self) -> tuple[list[tuple[int, list]], dict[tuple, Node]]:
        """Per statement, its iterations as generated rows ``(index, args, written tile)``
        (a reduction: its nodes), and the table ``(array, tile) -> writer`` of all writes;
        a double write is an error here."""
        comp = self._comp
        written: dict[tuple, Node] = {}
        out: list[tuple[int, list]] = []
        for s in self.statements:
            arr = s.target.array
            if s.plain:
                rows = comp.expand[s.id](self._p)
                sid = s.id
                new = {(arr, tile): (sid, idx) for idx, _, tile in rows}
                if len(new) != len(rows):
                    self._find_double(rows, sid, arr)
                if written:
                    both = new.keys() & written.keys()
                    if both:
                        tile = next(iter(both))
                        self._double(written[tile], new[tile], tile)
                written.update(new)
                out.append((sid, rows))
            else:
                nodes = list(self.statement_nodes(s.id))
                for node in nodes:
                    w = self.writes(node)
                    if w is not None:
                        other = written.setdefault(w, node)
                        if other is not node:
                            self._double(other, node, w)
                out.append((s.id, nodes))
        return out, written

    def _find_double(self, rows: list, sid: int, arr: str) -> None:
        seen: dict[tuple, Node] = {}
        for idx, _, tile in rows:
            node = (sid, idx)
            other = seen.setdefault((arr, tile), node)
            if other is not node:
                self._double(other, node, (arr, tile))

    def expand(self) -> Iterator[tuple[Node, list[tuple[str, Any]], tuple | None]]:
        """Every node with its inputs (as :meth:`inputs`) and the tile it writes (as
        :meth:`writes`), statement by statement, computed in bulk: the writer of each tile
        comes from one table of all writes, so a double write is found here too."""
        per_statement, written = self._rows()
        get = written.get
        for sid, rows in per_statement:
            s = self.statements[sid]
            if not s.plain:
                for node in rows:
                    yield node, self.inputs(node), self.writes(node)
                continue
            kinds = [isinstance(a, Access) for a in s.args]
            arrays = [a.array if k else None for a, k in zip(s.args, kinds, strict=True)]
            arr = s.target.array
            for idx, args, tile in rows:
                ins = [("tile", (arrays[n], v, get((arrays[n], v)))) if kinds[n]
                       else ("int", v) for n, v in enumerate(args)]
                yield (sid, idx), ins, (arr, tile)

    def _double(self, a: Node, b: Node, tile: tuple) -> None:
        sa, sb = self.statements[a[0]], self.statements[b[0]]
        raise ProgramError(
            f"lambdapack program {self.program.name!r}: tile {tile[0]}{list(tile[1])} is "
            f"written twice, by line {sa.line} ({sa.text!r}) and line {sb.line} "
            f"({sb.text!r}) with {self.params}; a tile is written once")



def _holds(c: Any, env: dict[str, int]) -> bool:
    x = c.expr.eval(env)
    return x >= 0 if c.op == ">=" else (x == 0 if c.op == "==" else x != 0)
