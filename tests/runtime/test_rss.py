"""The memory limit bounds the resident set: the baseline reserved from the limit, the RSS
sampled during a run and what the memory manager's model does not see counted against the
budget, the peak RSS in the run's summary; and, measured from outside the process, the
peak RSS of workloads that spill nothing stays within the limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime import rss as rss_mod
from tilegraph.runtime.core import DONE, Execution
from tilegraph.runtime.rss import ResidentWatch, give_back_freed_memory, resident_bytes
from tilegraph.runtime.spill import SpillStore

HERE = os.path.dirname(os.path.abspath(__file__))
MB = 10**6


def test_the_resident_set_is_read_and_freed_memory_given_back():
    before = resident_bytes()
    assert before > 10 * MB  # an interpreter with NumPy
    block = np.ones(50 * MB // 8)
    assert resident_bytes() >= before + 40 * MB
    del block
    assert give_back_freed_memory() is True  # glibc here
    assert resident_bytes() < before + 40 * MB


def test_a_watch_samples_until_stopped_and_gives_memory_back_when_much_is_unseen(
        monkeypatch):
    trims = []
    monkeypatch.setattr(rss_mod, "give_back_freed_memory", lambda: trims.append(1))
    samples = []
    seen = threading.Event()

    def sample(value):
        samples.append(value)
        if len(samples) >= 3:
            seen.set()
        return 10 * MB

    watch = ResidentWatch(sample, lambda: False, trim_above=MB, interval=0.001)
    assert seen.wait(5)
    watch.stop()
    count = len(samples)
    assert all(s > 0 for s in samples) and trims  # unseen above trim_above: trimmed
    watch.stop()  # twice is harmless
    assert len(samples) == count
    done = ResidentWatch(samples.append, lambda: True, trim_above=MB, interval=0.001)
    done._thread.join(5)
    assert not done._thread.is_alive()  # ends by itself once the run is finished


def _graph(n=4, size=1 << 20):
    b = tg.GraphBuilder()
    for k in range(n):
        b.add(("a", k), np.ones, args=(size // 8,), kind="map", nbytes=size)
    b.add("total", lambda *xs: sum(float(x.sum()) for x in xs), deps=[("a", k) for k in range(n)],
          kind="map", nbytes=8)
    return b.build()


def test_the_baseline_is_reserved_from_a_limit_and_not_from_a_few_blocks():
    g = _graph()
    prio = np.arange(len(g))
    out = g.indices(["total"])
    ex = Execution(g, out, prio, memory_limit=4 << 30, watch_rss=True)
    try:
        mem = ex.memory
        assert 0 < mem.baseline <= resident_bytes() + 50 * MB
        assert mem.budget == (4 << 30) - mem.baseline and mem.peak_rss >= mem.baseline
    finally:
        ex.clear()
    small = Execution(g, out, prio, memory_limit=4 << 20, watch_rss=True)
    try:  # a limit below twice the baseline bounds the results alone
        assert small.memory.budget == 4 << 20 and small.memory.baseline > 0
    finally:
        small.clear()
    plain = Execution(g, out, prio, memory_limit=4 << 30)
    assert plain.memory.budget == 4 << 30 and plain.memory.baseline == 0
    assert plain.memory._watch is None


def test_memory_the_model_does_not_see_counts_against_the_budget(tmp_path):
    size = 1 << 20
    b = tg.GraphBuilder()
    for k in range(4):
        b.add(("a", k), np.ones, args=(size // 8,), kind="map", nbytes=size)
    b.add("c", np.ones, args=(size // 8,), kind="map", nbytes=size)
    for k in range(4):
        b.add(("b", k), np.negative, deps=[("a", k)], kind="map", nbytes=size)
    g = b.build()
    prio = np.zeros(len(g), dtype=np.int64)
    for p, key in enumerate([*(("a", k) for k in range(4)), "c",
                             *(("b", k) for k in range(4))]):
        prio[g.index[key]] = p  # c runs before the b's read the a's
    outs = g.indices([*(("b", k) for k in range(4)), "c"])
    ex = Execution(g, outs, prio, memory_limit=4 << 30, watch_rss=True,
                   spill=SpillStore(str(tmp_path)))
    try:
        mem = ex.memory
        c = g.index["c"]
        with ex.lock:
            for k in range(4):  # the a's are done and held, as if they had run
                i = g.index[("a", k)]
                ex.state[i] = DONE
                ex.results[i] = np.ones(size // 8)
                mem.hold(i, ex.results[i])
            assert mem.admit(c)  # plenty of room
            # the process holds all but half a block of the budget outside the model
            unseen = mem.budget - mem.live - size // 2
            assert mem._observe(mem.baseline + mem.live + unseen) == unseen
            assert mem.unseen == unseen
            assert not mem.admit(c)  # no room for c's block: the a's go to disk first
            assert mem.spilled_bytes >= size and mem.disk
            mem._observe(mem.baseline)  # the RSS fell back: nothing unseen
            assert mem.unseen == 0 and mem.admit(c)
    finally:
        ex.clear()


def test_the_run_summary_shows_the_peak_rss_beside_the_limit():
    x = tg.random.random((400, 500), chunks=(100, 500), seed=1)
    (x - x.mean(axis=0)).sum().compute(memory_limit="1GB")
    run = tg.last_run()
    assert run.peak_rss >= run.rss_baseline > 10 * MB
    assert f"limit {tg.util.human(run.memory_limit)}); peak RSS " in str(run)
    (x - x.mean(axis=0)).sum().compute()  # no limit given: not watched
    assert tg.last_run().peak_rss == 0 and "peak RSS" not in str(tg.last_run())


def _peak_from_outside(workload: str, limit: str) -> tuple[dict, int]:
    """The record of ``rss_job.py`` (with ``ok``: its values are NumPy's) and its process's
    peak RSS (VmHWM, bytes) after the run, read from /proc/<pid>/status while it waits."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(tg.__file__)), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "rss_job.py"), workload,
                             limit], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("RECORD "), proc.stderr.read()
        with open(f"/proc/{proc.pid}/status") as f:
            hwm = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmHWM"))
    finally:
        out, err = proc.communicate("\n", timeout=120)
    record = json.loads(line[len("RECORD "):])
    record["ok"] = out.strip() == "CHECK ok"
    assert proc.returncode == 0, err
    return record, hwm


@pytest.mark.parametrize("workload", ["wide", pytest.param("anomaly", marks=pytest.mark.heavy),
                                      pytest.param("quadratic", marks=pytest.mark.heavy)])
def test_the_peak_rss_measured_outside_stays_within_the_limit(workload):
    limit = "420MB"
    record, hwm = _peak_from_outside(workload, limit)
    assert record["ok"], record
    assert record["spilled"] == 0, record["text"]
    assert hwm <= 1.1 * record["limit"], (hwm, record["text"])
    assert record["baseline"] < record["peak_rss"] <= hwm + 5 * MB
