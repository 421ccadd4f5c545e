"""A bound LambdaPACK DAG as an implicit graph, and :func:`run_program`, which runs one on a
serverless pool without expanding it.

:class:`ProgramGraph` answers the questions of :class:`~tilegraph.graph.implicit.
ImplicitGraph` from the program's solved index equations. Node ids are ``"sid:i,j,k"``
(statement id, then the loop indices); an input tile (read by the program, written by no
statement) is the external input ``"<array>/<i,j,...>"``. A node's priority is its
outermost loop index, then its statement: every step of a factorisation is offered before
the next step's. The graph pickles to the bound program, whatever its parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from tilegraph.graph.implicit import INPUT, NODE, VALUE, ImplicitGraph
from tilegraph.lambdapack.program import DAG


def node_id(node: tuple[int, tuple[int, ...]]) -> str:
    """``"sid:i,j,k"`` of a LambdaPACK node."""
    sid, idx = node
    return f"{sid}:{','.join(map(str, idx))}"


def parse_node(task: str) -> tuple[int, tuple[int, ...]]:
    """The node ``(sid, index tuple)`` of :func:`node_id`."""
    sid, _, rest = task.partition(":")
    return int(sid), tuple(int(v) for v in rest.split(",")) if rest else ()


def tile_id(array: str, tile: tuple[int, ...]) -> str:
    """``"<array>/<i,j,...>"``: the name of an input tile."""
    return f"{array}/{','.join(map(str, tile))}"


def _parse_tile(name: str) -> tuple[str, tuple[int, ...]]:
    array, _, rest = name.rpartition("/")
    return array, tuple(int(v) for v in rest.split(",")) if rest else ()


class ProgramGraph(ImplicitGraph):
    """The nodes of a bound LambdaPACK DAG (see the module docstring)."""

    def __init__(self, dag: DAG):
        self.dag = dag
        self.nstatements = len(dag.statements)
        self._kernels = dag.program.kernels

    def __getstate__(self) -> dict:
        return {"dag": self.dag}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["dag"])

    def starters(self) -> list[str]:
        return [node_id(n) for n in self.dag.starters()]

    def size(self) -> int | None:
        return self.dag.count()

    def parents(self, node: str) -> list[str]:
        return [node_id(p) for p in self.dag.parents(parse_node(node))]

    def children(self, node: str) -> list[str]:
        return [node_id(c) for c in self.dag.children(parse_node(node))]

    def inputs(self, node: str) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for what, value in self.dag.inputs(parse_node(node)):
            if what == "int":
                out.append((VALUE, value))
            elif what == "node":
                out.append((NODE, node_id(value)))
            else:
                array, tile, writer = value
                out.append((INPUT, tile_id(array, tile)) if writer is None
                           else (NODE, node_id(writer)))
        return out

    def readers(self, name: str) -> list[str]:
        return [node_id(r) for r in self.dag._readers(*_parse_tile(name))]

    def call(self, node: str, values: list[Any]) -> Any:
        """The node's kernel on ``values``; a kernel that writes over a tile it reads is
        called with ``copy=False`` (the values at :meth:`overwritten` are its own)."""
        n = parse_node(node)
        kernel = self._kernels[self.dag.statements[n[0]].kernel]
        kwargs = self.dag.call_kwargs(n)
        if kernel.overwrites is not None:
            kwargs["copy"] = False  # the inputs are the caller's own copies
        return kernel.func(*values, **kwargs)

    def overwritten(self, node: str) -> tuple[int, ...]:
        """The position of the tile the node's kernel writes over in place, if any."""
        pos = self._kernels[self.dag.statements[parse_node(node)[0]].kernel].overwrites
        return () if pos is None else (pos,)

    def key(self, node: str) -> Hashable:
        sid, idx = parse_node(node)
        return (f"lp-{self.dag.program.name}", sid, *idx)

    def opname(self, node: str) -> str:
        return self.dag.statements[parse_node(node)[0]].kernel

    def describe(self, node: str) -> str:
        s = self.dag.statements[parse_node(node)[0]]
        return f"node {node} of {self.dag!r} (line {s.line}: {s.text})"

    def priority(self, node: str) -> int:
        sid, idx = parse_node(node)
        return (idx[0] if idx else 0) * self.nstatements + sid


def run_program(dag: Any, inputs: Mapping[str, Callable[[tuple[int, ...]], Any]],
                outputs: Sequence[tuple[str, tuple[int, ...]]], *, pool: Any = None,
                redis: str | None = None, store: str | None = None,
                workers: int | None = None, retries: int = 0, wait: float = 60.0,
                progress: bool | None = None, callbacks: Sequence[Any] = (),
                report: str | None = None) -> dict[tuple[str, tuple[int, ...]], Any]:
    """Run a bound LambdaPACK DAG on a serverless pool without expanding it.

    ``inputs`` maps each input array (tiles the program reads and never writes) to a
    mapping ``tile -> block``, or to a function giving the block of a tile; ``outputs``
    lists the tiles ``(array, tile)`` wanted. Returns their values. Only the program
    (constant size), the input tiles and the pool's queue entries are stored: the workers
    find each node's children from the program. With a function, the driver enumerates
    the program's nodes once to find the tiles they read (pass mappings for DAGs too
    large to enumerate); a tile missing from a mapping fails the task that reads it.
    ``pool``, ``redis``, ``store``, ``workers``: where it runs, as for
    ``backend="serverless"``; ``retries``: attempts of a failing task after its first;
    ``wait``: seconds without any live worker after which the run fails; ``progress``,
    ``callbacks``, ``report``: the progress bar, event subscribers and HTML report, as for
    any run. The run goes through :func:`tilegraph.pipeline.run_implicit` (the graph:
    :class:`ProgramGraph`).
    """
    if not isinstance(dag, DAG):
        raise TypeError(f"run_program needs a bound LambdaPACK DAG (program.bind(...)), got "
                        f"{type(dag).__name__}")
    if not isinstance(inputs, Mapping):
        raise TypeError("inputs must map input array names to functions of a tile")
    wanted: dict[str, tuple[str, tuple[int, ...]]] = {}
    for out in outputs:
        try:
            array, tile = out
            tile = tuple(int(v) for v in tile)
        except (TypeError, ValueError):
            raise ValueError(f"outputs must be (array, tile) pairs, got {out!r}") from None
        try:
            writer = dag.writer(array, tile)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise ValueError(f"{dag!r}: {array}{list(tile)} is not a tile the program "
                             f"writes ({exc})") from None
        if writer is None:
            raise ValueError(f"{dag!r}: output tile {array}{list(tile)} is never written")
        wanted[node_id(writer)] = (array, tile)
    tiles: dict[str, Any] = {}
    given = {name: fn for name, fn in inputs.items() if isinstance(fn, Mapping)}
    for name, tile_values in given.items():  # tiles given by value: nothing to expand
        for tile, value in tile_values.items():
            tiles[tile_id(name, tuple(int(v) for v in tile))] = value
    written = {st.target.array for st in dag.statements}
    for st in dag.statements:
        for read in st.reads:
            if read.array not in written and read.array not in inputs:
                raise ValueError(f"{dag!r} reads {read.array}, which no statement writes and "
                                 "no input provides")
    if not inputs or len(given) < len(inputs):  # tiles made by functions: find those read
        for node in dag.nodes():
            for what, value in dag.inputs(node):
                if what == "tile" and value[2] is None:
                    array, tile, _ = value
                    if array not in inputs:
                        raise ValueError(f"{dag!r} reads tile {array}{list(tile)}, which no "
                                         "statement writes and no input provides")
                    tid = tile_id(array, tile)
                    if tid not in tiles and array not in given:
                        if not callable(inputs[array]):
                            raise TypeError(f"inputs[{array!r}] must be a function of a tile "
                                            "or a mapping of tiles to blocks")
                        tiles[tid] = inputs[array](tile)
    from tilegraph.pipeline import run_implicit

    extra: dict[str, Any] = {"callbacks": tuple(callbacks)}
    if progress is not None:
        extra["progress"] = progress
    if report is not None:
        extra["report"] = report
    values = run_implicit(ProgramGraph(dag), list(wanted), inputs=tiles,
                          backend="serverless", pool=pool, redis=redis, store=store,
                          workers=workers, retries=retries, wait=wait, **extra)
    return dict(zip(wanted.values(), values, strict=True))
