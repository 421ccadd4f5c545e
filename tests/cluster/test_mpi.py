"""The MPI backend across emulated hosts, one rank per host: Open MPI's ``mpiexec`` runs
outside and starts its daemons on the hosts through the bed's launch agent; ranks talk over
TCP on the hosts' links, and no host sees another's ``/tmp``. A host lost mid-run is named
on every other rank within ``mpi_timeout``, and the rerun resumes from the checkpoint."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from .conftest import needs_cluster

pytest.importorskip("mpi4py")
pytestmark = [pytest.mark.cluster, needs_cluster]
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_ranks.py")


def _mpirun(bed, *args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess,
                                                              list[dict]]:
    proc = bed.mpiexec([sys.executable, "-m", "mpi4py", SCRIPT, *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"mpiexec did not end within {timeout} s: {err[-3000:]}"
                             ) from None
    results = [json.loads(line[len("RESULT "):]) for line in out.splitlines()
               if line.startswith("RESULT ")]
    return (subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
            sorted(results, key=lambda r: r.get("rank", 0)))


def test_results_spill_staging_and_files_on_ranks_that_share_nothing(bed):
    given = np.random.default_rng(9).random((90, 75))
    np.save(os.path.join(bed.shared, "given.npy"), given)
    before = bed.traffic()
    proc, results = _mpirun(bed, "values", bed.shared)
    moved = bed.traffic() - before
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["host"] for r in results] == ["host0", "host1", "host2"]  # a rank per host
    for r in results:
        failed = [name for name, ok in r["checks"].items() if not ok]
        assert not failed, f"rank {r['rank']} on {r['host']}: {failed}"
        assert r["staged-plan"]
    assert len(results[0]["checks"]) == 13
    assert all(r["sent"] > 0 for r in results)  # blocks crossed hosts ...
    assert all(tx > 100_000 for tx in moved.tx)  # ... over the hosts' links
    assert any(r["spilled"] > 0 for r in results)
    # rank 0 wrote the result on its own host; the others' /tmp never saw it
    assert [r["private-exists"] for r in results] == [True, False, False]
    assert all(r["tmp-left"] == [] for r in results)  # no temporary file left anywhere
    assert bed.python(0, "import numpy; print(numpy.load('/tmp/mpi-out.npy').shape)"
                      ).stdout.strip() == "(95, 70)"


def test_an_input_only_rank_0_has_fails_at_once_naming_it_and_the_host(bed):
    bed.python(0, "import numpy; numpy.save('/tmp/mpi-in.npy', numpy.ones((100, 100)))")
    t = time.monotonic()
    proc, results = _mpirun(bed, "read", "/tmp/mpi-in.npy", timeout=120)
    assert time.monotonic() - t < 60  # the job ends, with no rank waiting for mpi_timeout
    assert proc.returncode != 0 and results == []
    assert "no .npy file at '/tmp/mpi-in.npy' on host host" in proc.stderr, proc.stderr[-3000:]
    # the same file where every host sees it
    bed.python(0, "import numpy, sys; numpy.save(sys.argv[1], numpy.ones((100, 100)))",
               args=[os.path.join(bed.shared, "in.npy")])
    proc, results = _mpirun(bed, "read", os.path.join(bed.shared, "in.npy"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["sum"] for r in results] == [10000.0] * 3


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line)
    into.put(None)


@pytest.mark.heavy
def test_a_lost_host_is_named_on_every_rank_and_the_rerun_resumes(bed):
    store = os.path.join(bed.shared, "ckpt")
    timeout = 5.0
    proc = bed.mpiexec([sys.executable, "-m", "mpi4py", SCRIPT, "lose", store, str(timeout)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env={"TG_TEST_SLOW": "0.1"})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    results = []
    said: list[str] = []
    try:
        ready = 0
        while ready < 3:
            line = lines.get(timeout=120)
            assert line is not None, "mpiexec ended before every rank was ready"
            ready += line.strip() == "READY"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not os.path.isdir(store) or len(
                [n for n in os.listdir(store) if n.endswith(".blk")]) < 10):
            time.sleep(0.02)
        finished = len([n for n in os.listdir(store) if n.endswith(".blk")])
        assert 10 <= finished < 96, finished  # midway
        lost_at = time.time()
        bed.lose(2)  # host2's cable pulled, then its processes killed
        while len(results) < 2:
            line = lines.get(timeout=timeout + 60)
            assert line is not None, f"mpiexec ended before the ranks reported: {said}"
            said.append(line)
            if line.startswith("RESULT "):
                results.append(json.loads(line[len("RESULT "):]))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        bed.reconnect(2)
        for h in range(3):  # Open MPI's daemons of the job, where they are left
            bed.kill(h)
    assert sorted(r["host"] for r in results) == ["host0", "host1"]
    for r in results:
        assert r["error"] == "RankLostError", r
        assert "MPI rank 2 (on host host2) stopped answering" in r["message"], r
        assert r["lost"] == 2
        # named within mpi_timeout (and a heartbeat's period, and the load of this machine)
        assert r["when"] - lost_at < timeout + 10, (r["when"] - lost_at, r)
    # the rerun, on the three hosts again, takes what the lost run finished
    proc, results = _mpirun(bed, "resume", store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert results[0]["right"] is True
    assert all(r["blocks"] == 96 and r["loaded"] >= finished for r in results), results
    assert sum(r["resumed"] for r in results) < sum(r["full"] for r in results), results
