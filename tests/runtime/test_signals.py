"""SIGTERM, SIGHUP and SIGINT stop a run cleanly: the staged rechunk's files and the spill
files are removed before the process ends, by the signal, as the signal would have ended
it; a handler of the script's own is left alone. Real processes and real signals, each
with its own spill directory, measured before and after (MPI: tests/runtime/test_mpi.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime.signals import Terminated, stop_cleanly

JOB = Path(__file__).with_name("staged_job.py")
ROOT = Path(__file__).resolve().parents[2]


def stored(directory: Path) -> tuple[int, int]:
    """(bytes, entries) below ``directory``."""
    size = count = 0
    for root, dirs, files in os.walk(directory):
        count += len(dirs) + len(files)
        size += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return size, count


def wait_for_staged(directory: Path, proc: subprocess.Popen, least: int = 1 << 20,
                    timeout: float = 60) -> int:
    """Wait until at least ``least`` bytes are stored below ``directory``."""
    deadline = time.monotonic() + timeout
    while True:
        size, _ = stored(directory)
        if size >= least:
            return size
        assert proc.poll() is None, f"the job ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, "nothing was staged"
        time.sleep(0.01)


def start_job(tmp_path: Path, handler: str = "none", backend: str = "threads"
              ) -> tuple[subprocess.Popen, Path, Path]:
    spill, pids = tmp_path / "spill", tmp_path / "pids"
    spill.mkdir()
    pids.mkdir()
    assert stored(spill) == (0, 0)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TILEGRAPH_BACKEND=backend,
               TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, str(JOB), str(spill), str(pids), handler],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    return proc, spill, pids


@pytest.fixture(scope="module")
def expected() -> float:
    x = tg.random.random((1000, 1000), chunks=(1000, 20), seed=0).compute()
    return float(x.sum())


@pytest.mark.parametrize(("sig", "backend"), [("SIGTERM", "threads"), ("SIGHUP", "threads"),
                                             ("SIGTERM", "sync")])
def test_a_signal_that_ends_the_process_removes_the_staged_files_first(tmp_path, sig,
                                                                      backend):
    proc, spill, _pids = start_job(tmp_path, backend=backend)
    try:
        staged = wait_for_staged(spill, proc)
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert staged >= 1 << 20
    assert proc.returncode == -getattr(signal, sig), err[-2000:]  # ended by the signal
    assert "DONE" not in out
    assert stored(spill) == (0, 0)  # nothing left: not a file, not a directory


@pytest.mark.parametrize("handler", ["none", "dfl-int"])
def test_sigint_removes_the_staged_files_with_python_s_handler_or_the_default(tmp_path,
                                                                          handler):
    """Python's own SIGINT handler raises KeyboardInterrupt, which cancels the run; a
    script that restored the default action gets the clean stop of SIGTERM."""
    proc, spill, _pids = start_job(tmp_path, handler)
    try:
        wait_for_staged(spill, proc)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGINT, err[-2000:]
    if handler == "none":
        assert "KeyboardInterrupt" in err
    assert "DONE" not in out
    assert stored(spill) == (0, 0)


def test_a_handler_of_the_script_s_own_runs_and_an_exit_it_raises_cleans_up(tmp_path):
    proc, spill, pids = start_job(tmp_path, "exit")
    try:
        wait_for_staged(spill, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 7, err[-2000:]  # the script's own exit status
    assert "DONE" not in out
    assert (pids / "handled").read_text() == f"{int(signal.SIGTERM)}\n"
    assert stored(spill) == (0, 0)


def test_a_handler_of_the_script_s_own_that_returns_lets_the_run_finish(tmp_path, expected):
    proc, spill, pids = start_job(tmp_path, "record")
    try:
        wait_for_staged(spill, proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert (pids / "handled").read_text() == f"{int(signal.SIGTERM)}\n"
    assert np.isclose(float(out.split()[-1]), expected)
    assert stored(spill) == (0, 0)


def _handler_seen_by_a_task(**options) -> list:
    seen = []

    def look(block):
        seen.append(signal.getsignal(signal.SIGTERM))
        return block

    tg.ones(4, chunks=2).map_blocks(look, dtype=float).compute(**options)
    return seen


def test_the_handler_is_installed_for_a_run_of_the_main_thread_only_and_restored():
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    seen = _handler_seen_by_a_task(backend="sync")
    assert seen and all(callable(h) and h is not signal.SIG_DFL for h in seen)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored
    # a run in another thread: nothing installed (only the main thread gets handlers)
    out: list = []
    t = threading.Thread(target=lambda: out.extend(_handler_seen_by_a_task(backend="sync")))
    t.start()
    t.join()
    assert out and all(h is signal.SIG_DFL for h in out)


def test_a_handler_of_the_user_s_own_stays_during_a_run():
    def mine(signum, frame):
        pass

    old = signal.signal(signal.SIGTERM, mine)
    try:
        seen = _handler_seen_by_a_task(backend="threads", workers=2)
        assert seen and all(h is mine for h in seen)
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_stop_cleanly_nested_installs_once_and_raises_once():
    with stop_cleanly():
        outer = signal.getsignal(signal.SIGTERM)
        with stop_cleanly():
            assert signal.getsignal(signal.SIGTERM) is outer
        assert signal.getsignal(signal.SIGTERM) is outer
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    # the exception pickles (it is sent to the other ranks of an MPI run)
    import pickle

    exc = pickle.loads(pickle.dumps(Terminated(signal.SIGTERM)))
    assert exc.signum == signal.SIGTERM and "SIGTERM" in str(exc)
