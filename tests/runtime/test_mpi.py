"""The MPI backend at several world sizes (mpiexec -n 1, 2, 4), checked against NumPy.

Each test launches ``tests/runtime/mpi_checks.py`` on every rank and reads the one
``RESULT`` line each rank prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py")

from tilegraph.cli import mpiexec_command

SCRIPT = Path(__file__).with_name("mpi_checks.py")
ROOT = Path(__file__).resolve().parents[2]


def mpirun(n: int, *args: str, timeout: float = 240, env: dict | None = None
           ) -> tuple[subprocess.CompletedProcess, list[dict]]:
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT),
               OMPI_MCA_rmaps_base_oversubscribe="1")
    proc = subprocess.run([*mpiexec_command(n), sys.executable, "-m", "mpi4py", str(SCRIPT),
                           *args],
                          capture_output=True, text=True, timeout=timeout, env=env)
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
               if line.startswith("RESULT ")]
    return proc, sorted(results, key=lambda r: r["rank"])


@pytest.mark.parametrize("n", [1, 2, 4])
def test_results_equal_numpy(n):
    proc, results = mpirun(n)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["rank"] for r in results] == list(range(n))
    for r in results:
        failed = [name for name, ok in r["checks"].items() if not ok]
        assert not failed, f"rank {r['rank']}: {failed}"
    assert len(results[0]["checks"]) >= 29
    # no block is sent twice to the same rank in one run
    for r in results:
        pairs = [tuple(p) for p in r["received"]]
        assert len(pairs) == len(set(pairs)), f"rank {r['rank']} received a block twice"
    if n == 1:
        assert results[0]["sent"] == 0
    else:
        assert results[0]["sent"] == results[0]["predicted"] > 0


def test_task_error_on_rank_2_surfaces_on_rank_0_and_every_rank_exits():
    proc, results = mpirun(4, "fail", timeout=120)
    assert [r["rank"] for r in results] == [0, 1, 2, 3]  # every rank came back
    assert proc.returncode == 0, proc.stderr[-3000:]  # ... and exited
    for r in results:
        assert r["error"] == "ZeroDivisionError", r
        assert r["message"] == "task failed on rank 2"
    notes = "\n".join(results[0]["notes"])
    assert "fails_on_rank_2" in notes  # the task, named
    assert "raised on MPI rank 2" in notes
    assert "traceback on MPI rank 2" in notes


def test_tilegraph_run_launches_the_script_with_the_mpi_backend(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import numpy as np, tilegraph as tg\n"
        "x = tg.from_numpy(np.arange(100.0), chunks=7)\n"
        "r = (x * 2).sum().compute()\n"
        "print('BACKEND', tg.config.get('backend'), r, flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", "run", "-n", "2", str(script)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = sorted(line for line in proc.stdout.splitlines() if line.startswith("BACKEND"))
    assert lines == ["BACKEND mpi 9900.0", "BACKEND mpi 9900.0"]  # small: on every rank


def test_compute_on_rank_0_only_fails_within_the_watchdog_time_naming_the_ranks():
    proc, results = mpirun(3, "watchdog", timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert results[0]["error"] == "CollectiveTimeoutError"
    assert "compute() is collective: ranks [1, 2] did not call it" in results[0]["message"]
    assert 2.5 < results[0]["seconds"] < 30


# the collective steps of one compute() after the set-up of tilegraph's communicator
STEPS = {0: None, 1: "the set-up", 2: "the plan check", 3: "the plan check",
         4: "the plan check", 5: "the memory check", 6: "the start of the run", 7: None}


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_rank_missing_at_any_collective_step_is_named_within_the_timeout(n, step):
    """Rank 1 leaves before the step-th collective step; every rank that waits for it fails
    within mpi_timeout (2 s) + 5 s, naming it (the placement, step 3, is sent by rank 0
    without waiting: the others name rank 1 at the plan check after it). Step 0: the
    communicator itself is never made on rank 1, which no rank can name; step 7: rank 1
    leaves before the results are shared, which rank 0 sends without waiting."""
    proc, results = mpirun(n, "missing", str(step), timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["rank"] for r in results] == list(range(n))  # every rank came back
    for r in results:
        if r["rank"] == 1:
            continue
        if step == 7:
            assert r["error"] is None and r["value"] == 64000.0, r
            continue
        assert r["error"] == "CollectiveTimeoutError", r
        if step == 0:
            assert f"not every one of the {n} MPI ranks called it" in r["message"]
        else:
            assert "compute() is collective: ranks [1] did not call it" in r["message"]
            assert f"at {STEPS[step]}" in r["message"]
        assert r["seconds"] < 2 + 5, r


def test_tilegraph_run_names_the_ranks_that_never_compute(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(
        "import time, numpy as np, tilegraph as tg\n"
        "from mpi4py import MPI\n"
        "x = tg.from_numpy(np.ones((40, 40)), chunks=10)\n"
        "if MPI.COMM_WORLD.Get_rank() == 0:\n"
        "    t0 = time.monotonic()\n"
        "    try:\n"
        "        print((x @ x).sum().compute(mpi_timeout=2))\n"
        "    except Exception as exc:\n"
        "        print('ERROR', round(time.monotonic() - t0), exc, flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", "run", "-n", "3", str(script)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ERROR"))
    assert "ranks [1, 2] did not call it" in line and "at the plan check" in line
    assert int(line.split()[1]) <= 2 + 5


def test_inputs_that_differ_per_rank_are_refused_unless_rank_0_s_are_asked_for():
    proc, results = mpirun(2, "data", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = results
    assert r0["own"] != r1["own"]  # unseeded NumPy data: each rank its own
    for r in results:
        for name in ("sum", "gram"):
            assert r[name].startswith("MPI ranks [1] hold different data from rank 0"), r
            assert "a float64 array of shape (400, 400)" in r[name]
            assert "root=0" in r[name]
        assert "a literal argument" in r["scalar"]  # x * rank
        assert "root=7, but there are only 2 MPI rank(s)" == r["bad_root"]
    for dtype in ("float32", "int64"):  # rank 0's data, sent: every rank sees it
        assert r0[f"root-{dtype}"] == r1[f"root-{dtype}"]
        assert np.allclose(r0[f"root-{dtype}"], r0[f"want-{dtype}"], rtol=1e-5)
    # unseeded random arrays: each block drawn once, on its rank; one array, no error
    assert r0["random"] == r1["random"] and abs(r0["random"] / 90000 - 0.5) < 0.01
    assert r0["rng"] == r1["rng"]


# what differs per rank in each case of mpi_checks._closures, as the error names it
CLOSURES = {
    "closure": "the closure variable k of _closures.<locals>.make.<locals>.<lambda> at "
               "mpi_checks.py:",
    "default": "the default of argument k of _closures.<locals>.with_default at "
               "mpi_checks.py:",
    "kwdefault": "the default of keyword argument k of _closures.<locals>.with_kwdefault",
    "global": "the global _OFFSET read by _add_global at mpi_checks.py:",
    "partial": "the keyword by of functools.partial(_add_by at mpi_checks.py:",
    "method": "the attribute off of a _Shift object (in the object that the method "
              "_Shift.apply at mpi_checks.py:",
    "module": "the global OFFSET read by add_offset at mpi_user_module.py:",
}


@pytest.mark.parametrize("n", [2, 4])
def test_functions_that_read_values_differing_per_rank_fail_on_every_rank(n):
    """A closure variable, a default, a global of the script, a partial's keyword, the
    state of a bound method's object, a global of the user's module: each refused on
    every rank with an error naming the task and the value (none hangs, none mixes);
    mpi_values='rank0' gives rank 0's answer on every rank (a module's global, which no
    pickle carries, is still refused); the same values on every rank pass, a set of
    strings included (whose order differs per rank under hash randomisation)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    proc, results = mpirun(n, "closures", timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["rank"] for r in results] == list(range(n))
    differing = list(range(1, n))
    for r in results:
        for case, what in CLOSURES.items():
            got = r[f"{case}/same"]
            assert got.get("error") == "ValueError", (case, r["rank"], got)
            message = got["message"]
            assert message.startswith(f"MPI ranks {differing} hold different data from "
                                      "rank 0"), message
            assert what in message, (case, message)
            assert "(op full+" in message and "task ('sum-partial-" in message
            assert "mpi_values='rank0'" in message
            sent = r[f"{case}/rank0"]
            if case == "module":  # sent by name: each rank's module global remains
                assert "even after rank 0's functions and values were sent" in \
                    sent["message"], sent
            else:
                assert sent == {"value": 20000.0}, (case, r["rank"], sent)  # rank 0's
        for case in ("same-closure", "same-set"):
            assert r[f"{case}/same"] == r[f"{case}/rank0"] == {"value": 20000.0}, r


def test_tilegraph_run_refuses_a_lambda_over_a_per_rank_global(tmp_path):
    """The script of the report: a global set from the rank, read by a lambda; the same
    script with mpi_values='rank0' gives the serial answer on both ranks."""
    script = tmp_path / "job.py"
    script.write_text(
        "import sys, tilegraph as tg\n"
        "from mpi4py import MPI\n"
        "OFF = MPI.COMM_WORLD.Get_rank() * 10.0\n"
        "x = tg.ones((100, 100), chunks=50).map_blocks(lambda b: b + OFF).sum()\n"
        "try:\n"
        "    print('VALUE', float(x.compute(mpi_values=sys.argv[1])), flush=True)\n"
        "except ValueError as exc:\n"
        "    print('ERROR', exc, flush=True)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for values in ("same", "rank0"):
        proc = subprocess.run([sys.executable, "-m", "tilegraph.cli", "run", "-n", "2",
                               str(script), values],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = [x for x in proc.stdout.splitlines() if x.startswith(("VALUE", "ERROR"))]
        assert len(lines) == 2, proc.stdout
        for line in lines:
            if values == "rank0":
                assert line == "VALUE 10000.0"  # serial: OFF = 0 (rank 0's)
            else:
                assert line.startswith("ERROR MPI ranks [1] hold different data"), line
                assert "the global OFF read by <lambda> at job.py:4" in line, line


def test_received_blocks_go_through_admission_and_a_large_result_stays_on_rank_0():
    proc, results = mpirun(2, "admission", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = results
    assert r0["equal"] and not r0["is_none"]
    assert r1["is_none"]  # 1.2 MiB: larger than mpi_broadcast_limit
    assert r0["spilled"] > 0
    assert r0["peak"] <= r0["budget"] + 2 * r0["block"], r0


def test_tilegraph_run_rejects_a_missing_script(tmp_path, capsys):
    from tilegraph.cli import main

    assert main(["run", "-n", "2", str(tmp_path / "missing.py")]) == 2
    assert "no such script" in capsys.readouterr().err


def test_report_of_an_mpi_run_is_written_by_rank_0(tmp_path):
    path = tmp_path / "run.html"
    proc, results = mpirun(2, "report", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["exists"] for r in results] == [True, True]  # rank 1 looks after rank 0 wrote
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>")
    assert "rank 0 / worker 0" in text and "rank 1 / worker 0" in text
    assert 'class="transfer"' in text
    assert "placed on 2 MPI ranks" in text


def test_ranks_that_plan_different_programs_all_get_a_clear_error():
    proc, results = mpirun(2, "mismatch", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["error"] for r in results] == ["RuntimeError", "RuntimeError"]
    assert "built a different plan from rank 0" in results[0]["message"]


@pytest.mark.parametrize("kill", ["SIGTERM", "SIGKILL"])
def test_killing_tilegraph_run_stops_mpiexec_and_every_rank(tmp_path, kill):
    """SIGTERM is forwarded; SIGKILL (a scheduler's final kill, the OOM killer) leaves no
    handler to run, and mpiexec learns of its parent's death (PR_SET_PDEATHSIG)."""
    import signal
    import time

    import psutil

    script = tmp_path / "sleeper.py"
    script.write_text(
        "import os, time\n"
        "from mpi4py import MPI\n"
        f"open(os.path.join({str(tmp_path)!r}, f'rank{{MPI.COMM_WORLD.Get_rank()}}'), 'w')"
        ".write(str(os.getpid()))\n"
        "time.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli", "run", "-n", "2",
                             str(script)], env=env)
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("rank*"))) < 2 or any(
                not p.read_text() for p in tmp_path.glob("rank*")):
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.1)
        tree = psutil.Process(proc.pid).children(recursive=True)
        ranks = [int(p.read_text()) for p in tmp_path.glob("rank*")]
        assert set(ranks) <= {p.pid for p in tree}
        sig = getattr(signal, kill)
        proc.send_signal(sig)
        code = proc.wait(timeout=15)
        assert code == (128 + sig if kill == "SIGTERM" else -sig)
        _gone, alive = psutil.wait_procs(tree, timeout=10)
        assert not alive, f"left running: {alive}"
    finally:
        for p in tree:  # never leave a stray rank behind, even when the test fails
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize(("sig", "to"), [("SIGTERM", "launcher"), ("SIGINT", "launcher"),
                                         ("SIGTERM", "rank"), ("SIGINT", "rank")])
def test_a_signal_mid_staged_rechunk_leaves_no_file_and_no_process(tmp_path, sig, to):
    """`tilegraph run -n 2` of a rechunk staged on disk, stopped by SIGTERM or SIGINT sent
    to the launcher (forwarded: mpiexec stops its ranks with SIGTERM) or to one rank:
    the spill directory (the script's spill_dir) and the temp dir are left as they were
    found, and no process of the job is left."""
    import signal

    import psutil
    from test_signals import JOB, stored, wait_for_staged

    spill, pids, tmp = tmp_path / "spill", tmp_path / "pids", tmp_path / "tmp"
    for d in (spill, pids, tmp):
        d.mkdir()
    assert stored(spill) == (0, 0) and stored(tmp) == (0, 0)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "tilegraph.cli", "run", "-n", "2",
                             str(JOB), str(spill), str(pids)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tree: list[psutil.Process] = []
    try:
        staged = wait_for_staged(spill, proc)
        tree = psutil.Process(proc.pid).children(recursive=True)
        ranks = [int(p.name) for p in pids.iterdir() if p.name.isdigit()]
        assert len(ranks) == 2 and set(ranks) <= {p.pid for p in tree}
        number = getattr(signal, sig)
        if to == "launcher":
            proc.send_signal(number)
        else:
            os.kill(ranks[0], number)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode != 0, err[-3000:]
        if to == "launcher":
            assert proc.returncode == 128 + number
        _gone, alive = psutil.wait_procs(tree, timeout=10)
        assert not alive, f"left running: {alive}"
    finally:
        for p in tree:  # never leave a stray rank behind, even when the test fails
            try:
                p.kill()
            except psutil.Error:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert staged >= 1 << 20
    assert stored(spill) == (0, 0), sorted(os.listdir(spill))
    assert stored(tmp) == (0, 0), sorted(os.listdir(tmp))
