"""Fault injection: a transient failure at every position of every fused chain, with retries.

Each program below is computed once cleanly (and checked against NumPy), then once per
*site*: a site is one step of one fused task (every distinct chain of op kinds the plan
fuses, at each of its positions, the task's own call included), and its step raises a
``ConnectionError`` once, either just before or just after doing its work (after: an
in-place step has already written over its input, the worst case for a retry). The run has
``retries=1``, so the failed task runs again; a result that differs from the clean one is a
*wrong result*. The goal is 0 wrong results of N sites, for every fusable kind.

Run: ``python bench/fault_injection.py [--backend threads --workers 2]``. The figures are
counts, not timings; the whole run takes a few seconds.

Then *remake probes*: sources that do not give the same block twice, read under a memory
budget that makes blocks be dropped and made again (and, for comparison, under one with room
for everything). Each probe is ``x @ x.T`` over a source that reads fresh values on every
read (undeclared, and falsely declared ``repeatable=True``), or over a zarr array, a memory
map or an ``.npy`` file rewritten during the run after its k-th block was read (zarr by
zarr, one new file per chunk, and in place; the map through itself and by another writer).
A run must end as an error (``InputChangedError``), or with the result of one version of
the data (the blocks spilled, never read twice); a result that mixes two versions is a
*silent mix*. The goal is 0 silent mixes; the counts of remade blocks and of blocks spilled
because their source is not repeatable (``tg.last_run()``) are printed beside.

``--mpi`` adds two MPI faults (real ``mpiexec`` runs of this file, about 2 minutes):

- *a missing rank*: at 2 and 4 ranks, rank 1 leaves before each collective step of a
  ``compute()`` in turn (0: it never calls ``compute()``); the seconds until every other
  rank raised an error naming it, with ``mpi_timeout=2`` (goal: at most 2 + 5 s; a rank
  leaving before the results are shared is no error, since rank 0 sends them without
  waiting);
- *inputs that differ per rank*: programs whose ranks hold different data (whole arrays, one
  element of one rank's array, a scalar operand, rank 3's data only) must fail on every
  rank; a value returned instead is a *silent mix* (goal: 0), and ``from_numpy(...,
  root=0)`` must give rank 0's result on every rank;
- *functions that read values differing per rank* (a closure variable, a default, a
  keyword-only default, a global of the script, a ``functools.partial`` keyword, the state
  of a bound method's object, an unseeded NumPy generator in a closure), at 2 and 4 ranks:
  each must fail on every rank (a value returned is a silent mix, goal 0),
  ``mpi_values='rank0'`` must give rank 0's answer on every rank, and functions reading
  the same values (a set of strings included) must not be refused (goal 0).

``--signals`` stops a rechunk staged through its intermediate store on disk (32 MB) with
SIGTERM and SIGINT once its files are written: ``python job.py`` on the threads backend,
and with ``--mpi`` also ``tilegraph run -n 2`` signalled at the launcher and at one rank;
the goal is 0 bytes left in the spill directory and the temp dir, and no process left.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

import tilegraph as tg
from tilegraph import pipeline
from tilegraph.graph.kinds import KINDS
from tilegraph.graph.taskgraph import Call

WHEN = ("before", "after")


class InjectedFault(ConnectionError):
    """The transient failure the harness injects."""


class FailOnce:
    """``func``, except that its first call raises :class:`InjectedFault`, ``when`` =
    ``"before"`` or ``"after"`` doing the work."""

    def __init__(self, func: Callable, when: str):
        self.func = func
        self.when = when
        self.fired = False
        self._lock = threading.Lock()
        self.__name__ = getattr(func, "__name__", "step")

    def _fire(self) -> bool:
        with self._lock:
            fire, self.fired = not self.fired, True
        return fire

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.when == "before" and self._fire():
            raise InjectedFault(f"injected fault before {self.__name__}")
        out = self.func(*args, **kwargs)
        if self.when == "after" and self._fire():
            raise InjectedFault(f"injected fault after {self.__name__}")
        return out


def _calls(template: Any) -> Iterator[Call]:
    """The nested calls of an argument template, in a fixed (pre-)order."""
    tp = type(template)
    if tp is Call:
        yield template
        for a in template.args:
            yield from _calls(a)
        for v in (template.kwargs or {}).values():
            yield from _calls(v)
    elif tp in (list, tuple):
        for a in template:
            yield from _calls(a)
    elif tp is dict:
        for v in template.values():
            yield from _calls(v)


def _replace_call(template: Any, target: Call, new: Call) -> Any:
    tp = type(template)
    if template is target:
        return new
    if tp is Call:
        kwargs = ({k: _replace_call(v, target, new) for k, v in template.kwargs.items()}
                  if template.kwargs else None)
        return Call(template.func, tuple(_replace_call(a, target, new) for a in template.args),
                    kwargs)
    if tp is list:
        return [_replace_call(a, target, new) for a in template]
    if tp is tuple:
        return tuple(_replace_call(a, target, new) for a in template)
    if tp is dict:
        return {k: _replace_call(v, target, new) for k, v in template.items()}
    return template


def positions(graph: Any, i: int) -> int:
    """Steps of task i: its own call and every call inlined into it."""
    calls = list(_calls(graph.args[i]))
    for v in (graph.kwargs.get(i) or {}).values():
        calls += list(_calls(v))
    return 1 + len(calls)


def inject(graph: Any, i: int, position: int, when: str) -> Any:
    """The graph with step ``position`` of task i (0: its own call) failing once."""
    if position == 0:
        funcs = list(graph.funcs)
        funcs[i] = FailOnce(funcs[i], when)
        return graph.replace(funcs=funcs)
    calls = list(_calls(graph.args[i]))
    if position <= len(calls):
        target = calls[position - 1]
        new = Call(FailOnce(target.func, when), target.args, target.kwargs)
        args = list(graph.args)
        args[i] = _replace_call(args[i], target, new)
        return graph.replace(args=args)
    kwargs = dict(graph.kwargs)
    kw = kwargs[i]
    target = list(_calls(kw))[position - 1 - len(calls)]
    new = Call(FailOnce(target.func, when), target.args, target.kwargs)
    kwargs[i] = _replace_call(kw, target, new)
    return graph.replace(kwargs=kwargs)


@dataclass
class Site:
    chain: str  # the op kinds of the fused task, producers first, joined by "+"
    task: int  # which task of that chain: 0 the first, -1 the last (in the graph's order)
    position: int
    when: str


@contextmanager
def planned(site: Site | None, seen: list) -> Iterator[None]:
    """Plans made inside are named by op kind (so a fused task's name is its chain of
    kinds); each plan is appended to ``seen``; with ``site``, the first task of its chain
    fails once at its position."""
    make_plan = pipeline.make_plan

    def wrapped(graph: Any, keys: Any, **kw: Any) -> pipeline.Plan:
        kinds = graph.meta.get("kind") or [None] * len(graph)
        graph = graph.with_meta(name=[k or "other" for k in kinds])
        plan = make_plan(graph, keys, **kw)
        seen.append(plan)
        if site is None:
            return plan
        names = plan.graph.meta["name"]
        i = [t for t, name in enumerate(names) if name == site.chain][site.task]
        g = inject(plan.graph, i, site.position, site.when)
        return pipeline.Plan(g, plan.keys, plan.outputs, plan.priority, plan.fuse_stats)

    pipeline.make_plan = wrapped
    try:
        yield
    finally:
        pipeline.make_plan = make_plan


@dataclass
class Program:
    name: str
    run: Callable[[dict], np.ndarray]  # options -> the result as a NumPy array
    expected: Callable[[], np.ndarray]


def programs(workdir: str) -> list[Program]:
    """Small programs that between them fuse every fusable op kind."""
    rng = np.random.default_rng(7)
    a = rng.random((24, 24))
    b = rng.random((24, 24))
    tall = rng.random((48, 6))
    c = rng.random((32, 32))
    spd = c @ c.T + 32 * np.eye(32)
    npy = os.path.join(workdir, "a.npy")
    np.save(npy, a)

    def x() -> tg.Array:
        return tg.from_numpy(a, chunks=8) + 0.0  # computed operands: the group-by-join

    def y() -> tg.Array:
        return tg.from_numpy(b, chunks=8) * 1.0

    def double(blk: np.ndarray) -> np.ndarray:
        return blk * 2.0

    def out_npy(options: dict) -> np.ndarray:
        path = os.path.join(workdir, "out.npy")
        (x() @ y()).map_blocks(double, dtype=float).to_npy(path, overwrite=True, **options)
        return np.load(path)

    def rnd(options: dict) -> np.ndarray:
        r = tg.random.random((16, 16), chunks=8, seed=3)
        return ((r + 1.0) * r).compute(**options)

    return [
        Program("(x @ y).map_blocks(f)",
                lambda o: (x() @ y()).map_blocks(double, dtype=float).compute(**o),
                lambda: (a @ b) * 2.0),
        Program("(x @ y).map_blocks(f).to_npy", out_npy, lambda: (a @ b) * 2.0),
        Program("((x + 1) * y - x).sum(axis=0)",
                lambda o: ((x() + 1) * y() - x()).sum(axis=0).compute(**o),
                lambda: ((a + 1) * b - a).sum(axis=0)),
        Program("x.T[::2].astype(float32) * 2",
                lambda o: (x().T[::2].astype(np.float32) * 2).compute(**o),
                lambda: a.T[::2].astype(np.float32) * 2),
        Program("x.rechunk(12).reshape(...) + ones",
                lambda o: (x().rechunk(12).reshape(48, 12) + tg.ones((48, 12), chunks=12)
                           ).compute(**o),
                lambda: a.reshape(48, 12) + 1),
        Program("t.T @ t (partial products)",
                lambda o: (lambda t: t.T @ t)(tg.from_numpy(tall, chunks=(8, 6)) + 0.0
                                               ).compute(**o),
                lambda: tall.T @ tall),
        Program("from_npy(x) @ x.T", lambda o: (lambda r: r @ r.T)(
            tg.from_npy(npy, chunks=8)).compute(**o), lambda: a @ a.T),
        Program("random: (r + 1) * r", rnd, lambda: rnd({"backend": "sync"})),
        Program("cholesky(x)", lambda o: tg.linalg.cholesky(
            tg.from_numpy(spd, chunks=8) + 0.0).compute(**o), lambda: np.linalg.cholesky(spd)),
    ]


@dataclass
class Outcome:
    program: str
    chain: str
    sites: int
    wrong: int
    errors: int


def run(options: dict, selected: Callable[[str], bool] = lambda name: True
        ) -> list[Outcome]:
    """Every site of every program; one :class:`Outcome` per program and fused chain."""
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="tilegraph-faults-") as workdir:
        for prog in programs(workdir):
            if not selected(prog.name):
                continue
            want = prog.expected()
            seen: list = []
            with planned(None, seen):
                clean = prog.run(dict(options))
            if not np.allclose(clean, want):
                raise AssertionError(f"{prog.name}: the clean run differs from NumPy")
            # the first and the last task of each chain (e.g. a factorisation's first
            # update reads a block it may not write over, its last one writes in place)
            chains: dict[str, list[tuple[int, int]]] = {}
            for plan in seen:
                graph = plan.graph
                for name in dict.fromkeys(graph.meta["name"]):
                    tasks = [t for t, m in enumerate(graph.meta["name"]) if m == name
                             and graph.funcs[t] is not None]
                    if tasks and name not in chains:
                        ends = [0] if len(tasks) == 1 else [0, -1]
                        chains[name] = [(e, positions(graph, tasks[e])) for e in ends]
            for chain, ends in chains.items():
                wrong = errors = sites = 0
                for task, npos in ends:
                    for position in range(npos):
                        for when in WHEN:
                            sites += 1
                            try:
                                with planned(Site(chain, task, position, when), []):
                                    got = prog.run({**options, "retries": 1})
                            except InjectedFault:
                                errors += 1
                                continue
                            if got.shape != clean.shape or not np.array_equal(got, clean):
                                wrong += 1
                outcomes.append(Outcome(prog.name, chain, sites, wrong, errors))
    return outcomes


def by_kind(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """(sites, wrong results) per op kind, over the chains that contain it."""
    out: dict[str, list[int]] = {}
    for o in outcomes:
        for kind in set(o.chain.split("+")):
            if kind not in KINDS:
                continue
            entry = out.setdefault(kind, [0, 0])
            entry[0] += o.sites
            entry[1] += o.wrong + o.errors
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


# -- remakes of sources that changed or do not repeat -------------------------------------

REMAKE_LIMITS = {"tight": "100KB", "ample": "2GB"}  # x: 150 x 110 in blocks of 40 x 30


class FreshReads:
    """A source whose n-th read of a region gives the data plus 3 (n - 1) (a sensor, a
    generator); ``first`` keeps what each region gave the first time."""

    def __init__(self, data: np.ndarray):
        self.data, self.shape, self.dtype = data, data.shape, data.dtype
        self.reads: dict[str, int] = {}
        self.first = np.zeros_like(data)
        self._lock = threading.Lock()

    def __getitem__(self, idx: Any) -> np.ndarray:
        with self._lock:
            n = self.reads[repr(idx)] = self.reads.get(repr(idx), 0) + 1
        out = self.data[idx] + (n - 1) * 3
        if n == 1:
            self.first[idx] = out
        return out


@dataclass
class Probe:
    name: str
    make: Callable[[str], tuple[tg.Array, Callable[[], list[np.ndarray]]]]
    # (workdir) -> (the source array, the versions of the data a clean run may see)
    change: Callable[[str], None] | None = None  # rewrites the source during the run


@dataclass
class ProbeOutcome:
    probe: str
    limit: str
    runs: int
    errors: int
    clean: int
    silent: int
    remade: int
    spilled: int


def _data() -> np.ndarray:
    return np.random.default_rng(3).integers(0, 8, (150, 110)).astype(np.float64)


def remake_probes(workdir: str) -> list[Probe]:
    """The sources probed (see the module docstring)."""
    import zarr

    base = _data()
    z_path, m_path, n_path = (os.path.join(workdir, n) for n in ("a.zarr", "m.dat", "a.npy"))

    def fresh(declared: bool | None) -> Callable[[str], tuple]:
        def make(_: str) -> tuple:
            src = FreshReads(base)
            return tg.from_array(src, chunks=(40, 30), repeatable=declared), lambda: [
                src.first]
        return make

    def zarr_store(_: str) -> tuple:
        z = zarr.create_array(z_path, shape=base.shape, dtype=base.dtype, chunks=(40, 30),
                              compressors=None, overwrite=True)
        z[...] = base
        return tg.from_zarr(z_path), lambda: [base, base + 1]

    def zarr_rewrite(_: str) -> None:
        zarr.open_array(z_path, mode="r+")[...] = base + 1

    def zarr_in_place(_: str) -> None:
        for i in range(4):
            for j in range(4):
                block = np.zeros((40, 30))
                part = base[40 * i:40 * i + 40, 30 * j:30 * j + 30]
                block[:part.shape[0], :part.shape[1]] = part + 1
                with open(os.path.join(z_path, "c", str(i), str(j)), "r+b") as f:
                    f.write(block.tobytes())

    mapped: list[np.memmap] = []

    def memmap(_: str) -> tuple:
        m = np.memmap(m_path, dtype=base.dtype, mode="w+", shape=base.shape)
        m[:] = base
        m.flush()
        mapped[:] = [m]
        return tg.from_array(m, chunks=(40, 30)), lambda: [base, base + 1]

    def through_map(_: str) -> None:
        mapped[0][:] += 1

    def another_writer(_: str) -> None:
        with open(m_path, "r+b") as f:
            f.write((base + 1).tobytes())

    def npy(_: str) -> tuple:
        np.save(n_path, base)
        return tg.from_npy(n_path, chunks=(40, 30)), lambda: [base, base + 1]

    def npy_rewrite(_: str) -> None:
        np.save(n_path + ".new.npy", base + 1)
        os.replace(n_path + ".new.npy", n_path)

    def seeded(_: str) -> tuple:
        r = tg.random.integers(0, 8, base.shape, chunks=(40, 30), seed=11).astype(float)
        want = r.compute(backend="sync")
        return r, lambda: [want]

    return [
        Probe("random, seeded (repeatable)", seeded),
        Probe("zarr, unchanged (repeatable)", zarr_store),
        Probe("from_array of fresh reads", fresh(None)),
        Probe("... declared repeatable=True", fresh(True)),
        Probe("zarr, chunks rewritten by zarr", zarr_store, zarr_rewrite),
        Probe("zarr, chunks rewritten in place", zarr_store, zarr_in_place),
        Probe("memmap, written through the map", memmap, through_map),
        Probe("memmap, written by another writer", memmap, another_writer),
        Probe("npy, replaced", npy, npy_rewrite),
    ]


def run_remake_probes(options: dict, moments: tuple[int, ...] = (1, 4, 9)
                      ) -> list[ProbeOutcome]:
    """Every probe under each budget, the source changed after the k-th block read for
    each k of ``moments`` (once, unchanged, for a source that is not rewritten)."""
    from tilegraph.io.snapshot import InputChangedError
    from tilegraph.runtime.events import TaskEnd

    outcomes = []
    with tempfile.TemporaryDirectory(prefix="tilegraph-remakes-") as workdir:
        for probe in remake_probes(workdir):
            for label, limit in REMAKE_LIMITS.items():
                out = ProbeOutcome(probe.name, label, 0, 0, 0, 0, 0, 0)
                for k in (moments if probe.change is not None else (0,)):
                    x, versions = probe.make(workdir)
                    reads = [0]

                    def changing(event: Any, k: int = k, probe: Probe = probe,
                                 reads: list[int] = reads) -> None:
                        if isinstance(event, TaskEnd) and event.kind == "load":
                            reads[0] += 1
                            if reads[0] == k:
                                probe.change(workdir)

                    out.runs += 1
                    try:
                        got = (x @ x.T).compute(**options, memory_limit=limit,
                                                callbacks=[changing] if k else [])
                    except InputChangedError:
                        out.errors += 1
                        continue
                    run = tg.last_run()
                    out.remade += sum(run.remade.values())
                    out.spilled += sum(run.spilled_unrepeatable.values())
                    if any(np.array_equal(got, v @ v.T) for v in versions()):
                        out.clean += 1
                    else:
                        out.silent += 1
                outcomes.append(out)
    return outcomes


def print_remake_probes(outcomes: list[ProbeOutcome]) -> int:
    """The probes' table; returns the number of silent mixes."""
    print(f"{'runs':>4} {'errors':>6} {'clean':>5} {'silent':>6} {'remade':>6} "
          f"{'spilled':>7}  source (budget): goal 0 silent")
    for o in outcomes:
        print(f"{o.runs:4} {o.errors:6} {o.clean:5} {o.silent:6} {o.remade:6} {o.spilled:7}  "
              f"{o.probe} ({o.limit}){'  SILENT' if o.silent else ''}")
    silent = sum(o.silent for o in outcomes)
    print(f"silent mixes: {silent} of {sum(o.runs for o in outcomes)} runs (goal 0)")
    return silent


# -- MPI: a missing rank at each collective step, inputs that differ per rank ---------------

STEPS = ("never computes", "the set-up", "the plan check", "the placement", "the plan check",
         "the memory check", "the start of the run", "the results")


def _rank_missing(step: int) -> dict:
    """On every rank under mpiexec: rank 1 leaves before the ``step``-th collective step."""
    from mpi4py import MPI

    from tilegraph.runtime import mpi_steps

    rank = MPI.COMM_WORLD.Get_rank()
    x = tg.from_numpy(np.ones((40, 40)), chunks=10)
    if rank == 1:
        if step == 0:
            return {"rank": rank}
        begin, seen = mpi_steps.Steps._begin, [0]

        def leave_at(self: Any) -> int:
            if "comm" in mpi_steps.comm_cache:
                seen[0] += 1
                if seen[0] == step:
                    raise InjectedFault("rank 1 leaves")
            return begin(self)

        mpi_steps.Steps._begin = leave_at
    t0 = time.monotonic()
    try:
        (x @ x).sum().compute(backend="mpi", mpi_timeout=2)
    except InjectedFault:
        return {"rank": rank}
    except Exception as exc:
        text = str(exc)
        return {"rank": rank, "named": "ranks [1] did not call it" in text,
                "reported": "compute() is collective" in text,
                "seconds": time.monotonic() - t0}
    return {"rank": rank, "named": None, "seconds": time.monotonic() - t0}


def _rank_data() -> dict:
    """On every rank under mpiexec: programs over data that differ per rank."""
    from tilegraph.runtime.mpi import world

    rank = world().Get_rank()
    size = world().Get_size()
    own = np.random.default_rng().random((300, 200))
    one = np.ones((300, 200))
    one[rank * 7 % 300, 5] = 2.0 if rank else 1.0  # one element differs, on rank 1 up
    last = np.full((300, 200), 1.0 if rank < size - 1 else 3.0)
    cases = {
        "whole arrays": lambda: tg.from_numpy(own, chunks=100).sum(),
        "a matmul": lambda: tg.from_numpy(own, chunks=100) @ tg.from_numpy(own.T, chunks=100),
        "one element": lambda: tg.from_numpy(one, chunks=(64, 50)).mean(axis=0),
        "a scalar operand": lambda: (tg.ones((300, 200), chunks=100) * (1 + rank)).sum(),
        "the last rank only": lambda: tg.from_numpy(last, chunks=100).max(),
    }
    out: dict = {"rank": rank, "mixed": [], "refused": []}
    for name, make in cases.items():
        try:
            make().compute(backend="mpi")
            out["mixed"].append(name)
        except ValueError as exc:
            if "hold different data" in str(exc):
                out["refused"].append(name)
    mine = own if rank == 0 else None
    got = tg.from_numpy(mine, chunks=100, root=0).sum().compute(backend="mpi")
    out["root"] = float(got)
    out["root_want"] = float(own.sum()) if rank == 0 else None
    return out


def _mpirun(n: int, *args: str) -> list[dict]:
    from tilegraph.cli import mpiexec_command

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([*mpiexec_command(n), sys.executable, "-m", "mpi4py",
                           os.path.abspath(__file__), "--rank", *args],
                          capture_output=True, text=True, timeout=300, env=env)
    return [json.loads(line[7:]) for line in proc.stdout.splitlines()
            if line.startswith("RESULT ")]


def mpi_faults() -> int:
    """Run the MPI faults and print their figures; returns the number of goals missed."""
    bad = 0
    print(f"{'ranks':>5} {'rank 1 leaves before':24} {'named on':>9} {'slowest':>8}   goal "
          "(mpi_timeout=2)")
    for n in (2, 4):
        for step, name in enumerate(STEPS):
            results = [r for r in _mpirun(n, "missing", str(step)) if r["rank"] != 1]
            # step 0: the communicator's set-up, where the missing rank cannot be named
            named = sum(r.get("named" if step else "reported") is True for r in results)
            slowest = max((r["seconds"] for r in results), default=float("nan"))
            ok = len(results) == n - 1 and (
                named == n - 1 and slowest <= 7 if step != 7 else
                all(r.get("named") is None for r in results))
            bad += not ok
            goal = ("no error (rank 0 does not wait)" if step == 7 else
                    "reported unnamed, <= 7 s" if step == 0 else "named, <= 7 s")
            print(f"{n:5} {name:24} {f'{named}/{n - 1}':>9} {slowest:7.1f}s   {goal}"
                  f"{'' if ok else '  MISSED'}")
    for n in (2, 4):
        results = _mpirun(n, "data")
        mixed = sorted({m for r in results for m in r["mixed"]})
        refused = min((len(r["refused"]) for r in results), default=0)
        root_ok = len(results) == n and len({r["root"] for r in results}) == 1 and \
            bool(np.isclose(results[0]["root"],
                            next(r["root_want"] for r in results if r["rank"] == 0)))
        bad += bool(mixed) or not root_ok or len(results) != n
        print(f"{n} ranks, 5 programs over data that differ per rank: silent mixes "
              f"{len(mixed)} (goal 0){': ' + ', '.join(mixed) if mixed else ''}; refused "
              f"on every rank {refused} of 5; from_numpy(root=0) gives rank 0's sum on "
              f"every rank: {'yes' if root_ok else 'NO'}")
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="threads")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mpi", action="store_true", help="add the MPI faults")
    parser.add_argument("--signals", action="store_true",
                        help="add runs stopped by SIGTERM and SIGINT (with --mpi: under "
                             "tilegraph run too)")
    parser.add_argument("--rank", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:  # one rank of an mpiexec run of this file
        out = (_rank_missing(int(args.rank[1])) if args.rank[0] == "missing" else
               _rank_closures() if args.rank[0] == "closures" else _rank_data())
        print("RESULT " + json.dumps(out), flush=True)
        return 0
    options = {"backend": args.backend, "workers": args.workers, "progress": False}
    outcomes = run(options)
    print(f"{'sites':>5} {'wrong':>5} {'failed':>6}  program: fused chain (op kinds)")
    for o in outcomes:
        print(f"{o.sites:5} {o.wrong:5} {o.errors:6}  {o.program}: {o.chain}")
    print()
    print(f"{'op kind':20} {'wrong results':>14}   goal")
    for kind, (sites, wrong) in by_kind(outcomes).items():
        print(f"{kind:20} {f'{wrong} of {sites}':>14}   0 of {sites}")
    total = sum(o.sites for o in outcomes)
    bad = sum(o.wrong + o.errors for o in outcomes)
    print(f"{'all sites':20} {f'{bad} of {total}':>14}   0 of {total}")
    print()
    bad += print_remake_probes(run_remake_probes(options))
    if args.mpi:
        print()
        bad += mpi_faults()
        bad += closure_faults()
    if args.signals:
        print()
        bad += signal_faults(args.mpi)
    return 1 if bad else 0


# -- MPI: task functions that read values differing per rank ---------------------------------

_CLOSURE_OFFSET = 0.0  # set per rank by _rank_closures


def _closure_global(block: np.ndarray) -> np.ndarray:
    return block + _CLOSURE_OFFSET


def _closure_keyword(block: np.ndarray, *, by: float) -> np.ndarray:
    return block + by


class _ClosureShift:
    def __init__(self, off: float):
        self.off = off

    def apply(self, block: np.ndarray) -> np.ndarray:
        return block + self.off


def _rank_closures() -> dict:
    """On every rank under mpiexec: map_blocks over functions that read a value differing
    per rank (rank 0's is 1.0, so rank 0's answer is 20000), with the default check and
    with mpi_values='rank0'; and over functions that read the same values on every rank
    (a set of strings, iterated in each rank's own order, included)."""
    import functools

    from tilegraph.runtime.mpi import world

    global _CLOSURE_OFFSET
    rank = world().Get_rank()
    off = 10.0 * rank + 1.0
    _CLOSURE_OFFSET = off

    def adds(k: float) -> Callable:
        return lambda block: block + k

    def with_default(block: np.ndarray, k: float = off) -> np.ndarray:
        return block + k

    def with_kwdefault(block: np.ndarray, *, k: float = off) -> np.ndarray:
        return block + k

    words = {"alpha", "beta", "gamma", "delta"}
    lengths = {w: len(w) for w in words}  # built in this rank's set order

    def same_words(block: np.ndarray) -> np.ndarray:
        return block + (sum(lengths.values()) == 19)

    differing = {
        "closure": adds(off), "default": with_default, "keyword default": with_kwdefault,
        "script global": _closure_global,
        "partial keyword": functools.partial(_closure_keyword, by=off),
        "bound object": _ClosureShift(off).apply,
        "generator state": (lambda rng: lambda b: b + rng.random())(
            np.random.default_rng()),  # unseeded: each rank its own stream
    }
    same = {"same closure": adds(1.0), "same set of strings": same_words}
    x = tg.ones((100, 100), chunks=50)
    out: dict = {"rank": rank, "mixed": [], "refused": [], "rank0": {}, "false": []}
    for name, fn in differing.items():
        try:
            x.map_blocks(fn).sum().compute(backend="mpi")
            out["mixed"].append(name)
        except ValueError as exc:
            if "hold different data" in str(exc):
                out["refused"].append(name)
        if name != "generator state":
            try:
                out["rank0"][name] = float(x.map_blocks(fn).sum().compute(
                    backend="mpi", mpi_values="rank0"))
            except ValueError as exc:
                out["rank0"][name] = str(exc)
    for name, fn in same.items():
        try:
            x.map_blocks(fn).sum().compute(backend="mpi")
        except ValueError:
            out["false"].append(name)
    return out


def closure_faults() -> int:
    """Run the per-rank closure probes at 2 and 4 ranks and print their figures; returns
    the number of goals missed."""
    bad = 0
    for n in (2, 4):
        results = _mpirun(n, "closures")
        mixed = sorted({m for r in results for m in r["mixed"]})
        refused = min((len(r["refused"]) for r in results), default=0)
        cases = len(results[0]["mixed"]) + len(results[0]["refused"]) if results else 0
        rank0 = all(v == 20000.0 for r in results for v in r["rank0"].values())
        false = sorted({m for r in results for m in r["false"]})
        bad += bool(mixed) or bool(false) or not rank0 or len(results) != n or \
            refused != cases
        print(f"{n} ranks, {cases} functions reading values that differ per rank: silent "
              f"mixes {len(mixed)} (goal 0){': ' + ', '.join(mixed) if mixed else ''}; "
              f"refused on every rank {refused} of {cases}; mpi_values='rank0' gives rank "
              f"0's answer on every rank: {'yes' if rank0 else 'NO'}; the same values "
              f"refused {len(false)} (goal 0){': ' + ', '.join(false) if false else ''}")
    return bad


# -- signals: what a stopped run leaves on disk -----------------------------------------------

_STAGED_JOB = '''
import os, sys, time
import tilegraph as tg

def slow(block):
    time.sleep(0.05)
    return block

open(os.path.join(sys.argv[2], str(os.getpid())), "w").close()
with tg.config.set(memory_limit="16MiB", spill_dir=sys.argv[1]):
    x = tg.random.random((2000, 2000), chunks=(2000, 25), seed=0)
    print(x.rechunk((25, 2000)).map_blocks(slow).sum().compute())
'''


def _stored(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _dirs, files in os.walk(directory) for f in files)


def _stop_staged_run(ranks: int, sig: int, to: str) -> tuple[int, int, int]:
    """A staged rechunk (32 MB through its intermediate store) stopped by ``sig`` sent
    to the process (``ranks`` = 0: ``python job.py`` on the threads backend), or under
    ``tilegraph run -n ranks`` to the launcher or to one rank (``to``): bytes staged when
    the signal was sent, bytes left in the spill directory and the temp dir after, and
    processes of the job left running."""
    import psutil

    with tempfile.TemporaryDirectory(prefix="tilegraph-signals-") as work:
        spill, pids, tmp = (os.path.join(work, d) for d in ("spill", "pids", "tmp"))
        for d in (spill, pids, tmp):
            os.mkdir(d)
        job = os.path.join(work, "job.py")
        with open(job, "w") as f:
            f.write(_STAGED_JOB)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, TMPDIR=tmp, PYTHONPATH=os.pathsep.join(
            filter(None, [root, os.environ.get("PYTHONPATH")])))
        cmd = ([sys.executable, job] if ranks == 0 else
               [sys.executable, "-m", "tilegraph.cli", "run", "-n", str(ranks), job])
        proc = subprocess.Popen([*cmd, spill, pids], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        tree: list = []
        try:
            deadline = time.monotonic() + 120
            while (staged := _stored(spill)) < 4 << 20:
                if proc.poll() is not None or time.monotonic() > deadline:
                    return 0, _stored(spill) + _stored(tmp), 0
                time.sleep(0.01)
            tree = psutil.Process(proc.pid).children(recursive=True)
            if to == "rank":
                os.kill(int(min(os.listdir(pids))), sig)
            else:
                proc.send_signal(sig)
            proc.wait(timeout=60)
            _gone, alive = psutil.wait_procs(tree, timeout=10)
            return staged, _stored(spill) + _stored(tmp), len(alive)
        finally:
            for p in tree:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def signal_faults(mpi: bool) -> int:
    """Stop staged rechunks with SIGTERM and SIGINT (threads; with ``mpi``, also under
    ``tilegraph run -n 2``, to the launcher and to one rank) and print the bytes and
    processes left; returns the number of goals missed (goal: 0 bytes, 0 processes)."""
    import signal

    bad = 0
    print(f"{'run':34} {'signal':8} {'staged at signal':>16} {'left after':>11} "
          f"{'processes left':>15}   goal 0 B, 0")
    runs = [("python job.py (threads)", 0, "process")]
    if mpi:
        runs += [("tilegraph run -n 2, the launcher", 2, "launcher"),
                 ("tilegraph run -n 2, one rank", 2, "rank")]
    for name, ranks, to in runs:
        for sig in (signal.SIGTERM, signal.SIGINT):
            staged, left, alive = _stop_staged_run(ranks, sig, to)
            ok = staged > 0 and left == 0 and alive == 0
            bad += not ok
            print(f"{name:34} {signal.Signals(sig).name:8} {staged / 2**20:13.1f} MB "
                  f"{left / 2**20:8.1f} MB {alive:15}{'' if ok else '   MISSED'}")
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
