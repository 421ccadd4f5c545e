"""The edges that order a script's statements, from what each statement reads, binds and
changes and the effects it has: ``def-use`` (read after write), ``anti`` (write after
read) and ``output`` (write after write) of variables; one edge type per effect class
(a write is ordered after every earlier access of the same resource, a read after the
earlier writes), files by path (an unknown path may be any); and the fences: a barrier, or
a statement that sets process state, runs after every statement before it and before
every statement after it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass

from tilegraph.autopar.effects import EFFECT_EDGE
from tilegraph.autopar.summary import Summary


@dataclass(frozen=True)
class Edge:
    """An ordering between two tasks: ``src`` must finish before ``dst`` starts.
    ``type`` is one of :data:`~tilegraph.autopar.effects.EDGE_TYPES`; ``variable`` is the
    variable, or the resource of an effect (a path for ``file``), or the reason of a
    barrier."""

    src: int
    dst: int
    type: str
    variable: str


def ordering_edges(info: list[tuple[ast.stmt, Summary, set[str], set[str]]]) -> list[Edge]:
    """The edges between the statements of ``info`` (each ``(statement, its summary, the
    names it uses, the names it defines)``, in program order), each once, in the order
    they are found."""
    edges: list[Edge] = []
    seen: set[tuple[int, int, str, str]] = set()

    def add(a: int, b: int, kind: str, var: str) -> None:
        if a != b and (a, b, kind, var) not in seen:
            seen.add((a, b, kind, var))
            edges.append(Edge(a, b, kind, var))

    last_writer: dict[str, int] = {}
    readers: dict[str, list[int]] = defaultdict(list)
    res_writer: dict[tuple[str, str], int] = {}
    res_readers: dict[tuple[str, str], list[int]] = defaultdict(list)
    files = _FileOrder()
    # fences: barriers, and statements that set process state (``state`` edges)
    last_fence: tuple[int, str, str] | None = None
    since_fence: list[int] = []
    for i, (_, s, uses, defines) in enumerate(info):
        fence = _fence(s)
        if fence is not None:
            for j in since_fence:
                add(j, i, *fence)
            if last_fence is not None:
                add(last_fence[0], i, *fence)
        elif last_fence is not None:
            add(last_fence[0], i, last_fence[1], last_fence[2])
        for v in sorted(uses):
            if v in last_writer:
                add(last_writer[v], i, "def-use", v)
        for v in sorted(defines):
            for r in readers.get(v, ()):
                add(r, i, "anti", v)
            if v in last_writer and v not in uses:
                add(last_writer[v], i, "output", v)
        for v in uses - defines:
            readers[v].append(i)
        for v in defines:
            last_writer[v] = i
            readers[v] = []
        # effects other than files: one resource per (kind, detail)
        effects = sorted((e for e in s.effects if e.kind != "state"),
                         key=lambda e: (e.kind, e.detail, e.mode))
        for e in effects:
            if e.kind == "file":
                continue
            key = (e.kind, e.detail if e.kind != "output" else "stream")
            etype = EFFECT_EDGE[e.kind]
            if key in res_writer:
                add(res_writer[key], i, etype, e.detail)
            if e.mode == "w":
                for r in res_readers.get(key, ()):
                    add(r, i, etype, e.detail)
        for e in effects:
            if e.kind == "file":
                continue
            key = (e.kind, e.detail if e.kind != "output" else "stream")
            if e.mode == "w":
                res_writer[key] = i
                res_readers[key] = []
            else:
                res_readers[key].append(i)
        files.access(i, {(e.detail, e.mode) for e in effects if e.kind == "file"}, add)
        if fence is not None:
            last_fence = (i, *fence)
            since_fence = []
        else:
            since_fence.append(i)
    return edges


def _fence(s: Summary) -> tuple[str, str] | None:
    """``(edge type, reason)`` when a statement is ordered after every statement before it
    and before every statement after it: a barrier, or a setter of process state."""
    if s.barriers:
        return ("barrier", s.barriers[0])
    states = sorted(e.detail for e in s.effects if e.kind == "state")
    return ("state", states[0]) if states else None


class _FileOrder:
    """Ordering edges between file accesses: a write is ordered after every earlier access
    of the same path, a read after the earlier writes; an unknown path (``?``) may be any
    path. Kept in time linear in the accesses: an unknown write stands for every earlier
    access, so later accesses only look back to it."""

    def __init__(self) -> None:
        self.writer: dict[str, int] = {}                        # path -> last writer
        self.readers: dict[str, list[int]] = defaultdict(list)  # path -> readers since
        self.unknown_writer = -1
        self.unknown_readers: list[int] = []          # unknown reads since unknown_writer
        self.since: list[tuple[int, str, str]] = []   # known accesses since unknown_writer

    def access(self, i: int, ops: set[tuple[str, str]], add) -> None:
        for path, mode in sorted(ops):
            u = self.unknown_writer
            if path != "?":
                if u >= 0:
                    add(u, i, "file", path)
                if self.writer.get(path, -1) > u:
                    add(self.writer[path], i, "file", path)
                if mode == "w":
                    for r in self.readers.get(path, ()):
                        if r > u:
                            add(r, i, "file", path)
                    for r in self.unknown_readers:
                        add(r, i, "file", path)
            else:
                if u >= 0:
                    add(u, i, "file", "?")
                for j, other, omode in self.since:
                    if mode == "w" or omode == "w":
                        add(j, i, "file", other)
                if mode == "w":
                    for r in self.unknown_readers:
                        add(r, i, "file", "?")
        for path, mode in sorted(ops):
            if path == "?":
                if mode == "w":
                    self.unknown_writer = i
                    self.unknown_readers = []
                    self.since = []
                else:
                    self.unknown_readers.append(i)
            else:
                if mode == "w":
                    self.writer[path] = i
                    self.readers[path] = []
                else:
                    self.readers[path].append(i)
                self.since.append((i, path, mode))
