"""The backend seam on every backend: two plans on one backend object, interleaved (both
partitioned and both transports made before either runs) and at once (two threads
computing with the same object), each run giving its own results. A backend keeps no run
on itself: its partition carries what the run's transport and workers need
(``tests/test_layering.py`` checks the rule in the code)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from seam_checks import at_once, interleaved, planned, programs, run_part

import tilegraph as tg
from tilegraph import pipeline
from tilegraph.runtime.backends import Partition, make_backend

ROOT = Path(__file__).resolve().parents[2]


def _check(got, progs):
    """Each program's values are its own, equal to NumPy's."""
    for k, (_, want) in enumerate(progs):
        assert got[k] is not None and len(got[k]) == len(want), k
        for g, w in zip(got[k], want, strict=True):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype.kind == w.dtype.kind, (k, g.dtype, w.dtype)
            np.testing.assert_allclose(g, w, rtol=1e-5 if w.dtype == np.float32 else 1e-12)


def _both_ways(backend):
    """Both programs interleaved on ``backend``, in both orders, then at once."""
    progs = programs()
    _check(interleaved(backend, progs), progs)
    _check(interleaved(backend, progs[::-1]), progs[::-1])
    got = at_once(backend, progs, lambda k: tg.compute(*progs[k][0], backend=backend))
    _check(got, progs)


@pytest.mark.parametrize("name,workers", [("sync", None), ("threads", 1), ("threads", 3)])
def test_two_plans_on_one_local_backend(name, workers):
    _both_ways(make_backend(name, workers))


def test_the_transport_of_a_backend_of_several_processes_takes_its_own_partition(pool):
    backend = make_backend("serverless", pool=pool)
    plan, _ = planned(programs()[0][0], backend)
    with pytest.raises(TypeError, match="takes the PoolPartition its partition"):
        backend.transport(Partition(plan.graph, list(plan.outputs), plan.priority))


@pytest.fixture(scope="module")
def pool():
    from tilegraph.serverless import Pool

    with Pool(workers=2, lease=2.0) as p:
        yield p


def test_two_plans_on_one_serverless_backend(pool):
    _both_ways(make_backend("serverless", pool=pool))


def test_two_plans_on_one_dask_backend(client):
    _both_ways(make_backend("dask", client=client))


# -- autopar's processes backend: graphs of steps ---------------------------------------------


def _steps(lines, names, deps):
    """A graph of one CodeStep per line, ``names[i]``: (reads, writes) of step ``i``."""
    from tilegraph.autopar.steps import CodeStep
    from tilegraph.graph import GraphBuilder

    b = GraphBuilder()
    for i, line in enumerate(lines):
        reads, writes = names[i]
        step = CodeStep(i, compile(line, "<prog>", "exec"), frozenset(reads),
                        frozenset(writes), label=f"step {i}", lineno=i + 1)
        b.add(("s", i), step, deps=[("s", d) for d in deps.get(i, ())], kind="statement",
              serial=i, priority=i, retries=0)
    return b.build()


SLOW = "(__import__('time').sleep(0.1), {})[1]"
STEP_PROGRAMS = [
    (_steps(["a = sum(range(100))", "b = [i * i for i in range(7)]", "c = a + sum(b)",
             "print('A', c)"],
            [((), "a"), ((), "b"), ("ab", "c"), ("c", ())], {2: [0, 1], 3: [2]}),
     ["A 5041"]),
    (_steps([f"p = {SLOW.format(3)}", f"q = {SLOW.format(4)}", "r = p ** q",
             "print('B', r)", "print('B', r + 1)"],
            [((), "p"), ((), "q"), ("pq", "r"), ("r", ()), ("r", ())],
            {2: [0, 1], 3: [2], 4: [3]}),
     ["B 81", "B 82"]),
]


def _lines_of_each(out):
    lines = out.getvalue().splitlines()
    return [[ln for ln in lines if ln.startswith(p)] for p in ("A ", "B ")]


def test_two_step_graphs_on_one_processes_backend():
    from tilegraph.autopar.processes import ProcessesBackend, StepsDone

    out = io.StringIO()
    backend = ProcessesBackend(2, filename="<prog>", out=out)
    plans = [pipeline.make_plan(g, g.keys, fuse=False) for g, _ in STEP_PROGRAMS]
    parts = [backend.partition(p.graph, p.outputs, p.priority) for p in plans]
    for part in reversed(parts):  # partitioned both, run the later first
        run_part(backend, part, backend.transport(part))
    assert _lines_of_each(out) == [want for _, want in STEP_PROGRAMS]

    out.seek(0)
    out.truncate()
    ends = [[], []]

    def compute(k):
        g, _ = STEP_PROGRAMS[k]
        return pipeline.run(g, g.keys, backend=backend, fuse=False, callbacks=[
            lambda e: ends[k].append(e) if isinstance(e, StepsDone) else None])

    at_once(backend, STEP_PROGRAMS, compute)
    assert _lines_of_each(out) == [want for _, want in STEP_PROGRAMS]
    # each run counted its own steps, on its own processes
    assert [sum(e.tasks_per_worker) for (e,) in ends] == [4, 5]
    assert [len(e.tasks_per_worker) for (e,) in ends] == [2, 2]


# -- MPI: every rank interleaves the two plans on one backend object --------------------------


@pytest.mark.parametrize("n", [2, 3])
def test_two_plans_interleaved_on_one_mpi_backend(n):
    pytest.importorskip("mpi4py")
    from tilegraph.cli import mpiexec_command

    env = dict(os.environ, PYTHONPATH=str(ROOT), OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run([*mpiexec_command(n), sys.executable, "-m", "mpi4py",
                           str(Path(__file__).with_name("seam_checks.py"))],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = sorted((json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
                      if line.startswith("RESULT ")), key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == list(range(n))
    for r in results:
        failed = [name for name, ok in r["checks"].items() if not ok]
        assert not failed, f"rank {r['rank']}: {failed}"
    assert {"interleaved-0", "interleaved-1", "again-0", "again-1",
            "plain-partition-refused"} <= set(results[0]["checks"])
