"""Crash consistency of the writers: SIGKILL during overwrites, and races of no-replace writers.

1. ``to_npy`` and ``to_zarr`` overwrite a destination that holds an old array; the writing
   process is killed with SIGKILL at ``--kills`` random instants spread over the write
   (from before the first block to after the commit). Afterwards the destination must hold
   the old array or the new one, whole; anything else (missing, unreadable, mixed) counts
   as a failure. Goal: 0 of ``--kills``.
2. Two processes write the same new path with ``overwrite=False`` at the same moment,
   ``--races`` times; the check-then-commit window is widened by 5 ms to make the race
   likely. Exactly one may succeed (the other gets ``FileExistsError``); double successes
   are failures. Goal: 0.

3. ``tilegraph run -n 2`` of a script that spills, and a script driving the serverless
   engine on its own embedded pool (a Valkey server and 2 worker processes), are killed
   with SIGKILL at ``--launches`` random instants each (from the launch to past the first
   computations). Every process the command started is marked through its environment;
   counted 10 s later: processes still alive, and entries in the temp dir and ``/dev/shm``
   that were not there before (spill and store directories, Valkey's directory, Open MPI's
   session directory and shared-memory segments), before and after ``tilegraph clean``.
   Goal: 0 processes, 0 entries after ``tilegraph clean``.

Writers run in forked children (the ``sync`` backend, so no thread is forked). Arrays are
small; parts 1 and 2 take about a minute, part 3 about 15 s per launch. Run:
``python bench/crash_consistency.py [--kills 50 --races 100 --launches 20 --seed 0]`` (it
imports the installed tilegraph; from a checkout that is not installed, set
``PYTHONPATH=.``); ``--launches 0`` leaves part 3 out.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

import tilegraph as tg
from tilegraph.io import _atomic

SHAPE = (512, 256)
CHUNKS = (32, 256)


def _old() -> np.ndarray:
    return np.zeros(SHAPE)


def _new() -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE)


def _write(kind: str, path: str, value: np.ndarray, overwrite: bool) -> None:
    x = tg.from_numpy(value, chunks=CHUNKS)
    if kind == "npy":
        x.to_npy(path, overwrite=overwrite, backend="sync", progress=False)
    else:
        x.to_zarr(path, overwrite=overwrite, backend="sync", progress=False)


def _read(kind: str, path: str) -> np.ndarray | None:
    try:
        if kind == "npy":
            return np.load(path)
        return tg.from_zarr(path).compute(backend="sync", progress=False)
    except Exception:
        return None


def _fork(fn) -> int:
    pid = os.fork()
    if pid == 0:  # the child: run, then leave without any clean-up of the parent's
        code = 0
        try:
            code = fn() or 0
        except BaseException:
            code = 1
        os._exit(code)
    return pid


def _write_seconds(kind: str, folder: str) -> float:
    """How long one overwrite takes in a forked child (the median of 5)."""
    path = os.path.join(folder, f"calibrate.{kind}")
    _write(kind, path, _old(), overwrite=False)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        pid = _fork(lambda: _write(kind, path, _new(), overwrite=True))
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t0)
    return sorted(times)[2]


def kill_during_overwrites(kind: str, kills: int, rng: random.Random, folder: str) -> dict:
    seconds = _write_seconds(kind, folder)
    old, new = _old(), _new()
    counts = {"old": 0, "new": 0, "neither": 0}
    for k in range(kills):
        path = os.path.join(folder, f"dest{k}.{kind}")
        _write(kind, path, old, overwrite=False)
        pid = _fork(lambda path=path: _write(kind, path, new, overwrite=True))
        time.sleep(rng.uniform(0.0, 1.2 * seconds))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        got = _read(kind, path)
        if got is not None and got.shape == old.shape and np.array_equal(got, old):
            counts["old"] += 1
        elif got is not None and got.shape == new.shape and np.array_equal(got, new):
            counts["new"] += 1
        else:
            counts["neither"] += 1
    counts["write_seconds"] = seconds
    return counts


def races(kind: str, n: int, folder: str) -> dict:
    check = _atomic.check_not_exists

    def slow_check(path: str, overwrite: bool) -> None:
        check(path, overwrite)
        time.sleep(0.005)

    counts = {"one": 0, "both": 0, "none": 0, "torn": 0}
    for k in range(n):
        path = os.path.join(folder, f"race{k}.{kind}")
        start = time.monotonic() + 0.05

        def writer(value: float, path: str = path, start: float = start) -> int:
            _atomic.check_not_exists = slow_check
            while time.monotonic() < start:
                pass
            try:
                _write(kind, path, np.full(SHAPE, value), overwrite=False)
            except FileExistsError:
                return 3
            return 0

        pids = [_fork(lambda v=v: writer(v)) for v in (1.0, 2.0)]
        codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
        wins = sum(c == 0 for c in codes)
        counts["both" if wins == 2 else "one" if wins == 1 else "none"] += 1
        got = _read(kind, path)
        winner = 1.0 if codes[0] == 0 else 2.0
        if wins == 1 and (got is None or not np.array_equal(got, np.full(SHAPE, winner))):
            counts["torn"] += 1
    return counts


MARK = "TILEGRAPH_CRASH_MARK"
SPILLING_SCRIPT = """
import tilegraph as tg
x = tg.random.random((3000, 3000), chunks=500, seed=1)
for _ in range(40):
    ((x + x.T) @ x).sum().compute(memory_limit="20MB")
"""
SERVERLESS_SCRIPT = """
import tilegraph as tg
x = tg.random.random((2000, 2000), chunks=250, seed=1)
for _ in range(40):
    ((x + x.T) @ x).sum().compute(backend="serverless", workers=2)
"""


def _marked(mark: str) -> list[int]:
    """The live processes whose environment carries ``MARK=mark``."""
    needle = f"{MARK}={mark}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open(f"/proc/{name}/stat", "rb") as st:
                        if st.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                            out.append(int(name))
        except OSError:
            continue
    return out


def _entries() -> set[str]:
    tmp = tempfile.gettempdir()
    found = {os.path.join(tmp, n) for n in os.listdir(tmp)}
    if os.path.isdir("/dev/shm"):
        found |= {os.path.join("/dev/shm", n) for n in os.listdir("/dev/shm")}
    return found


def kill_launches(which: str, launches: int, rng: random.Random, folder: str) -> dict:
    """SIGKILL ``tilegraph run`` (``which="mpi"``) or a serverless driver at random
    instants; what was left 10 s later, before and after ``tilegraph clean``."""
    script = os.path.join(folder, f"{which}.py")
    with open(script, "w") as f:
        f.write(SPILLING_SCRIPT if which == "mpi" else SERVERLESS_SCRIPT)
    counts = {"processes": 0, "entries": 0, "entries_after_clean": 0, "kills": 0}
    for _ in range(launches):
        mark = uuid.uuid4().hex
        env = dict(os.environ, **{MARK: mark})
        cmd = ([sys.executable, "-m", "tilegraph.cli", "run", "-n", "2", script]
               if which == "mpi" else [sys.executable, script])
        before = _entries()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 8.0))
        if proc.poll() is None:
            counts["kills"] += 1
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _marked(mark)
        counts["processes"] += len(left)
        for pid in left:  # for the next launch
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        counts["entries"] += len(_entries() - before)
        subprocess.run([sys.executable, "-m", "tilegraph.cli", "clean"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        new = _entries() - before
        counts["entries_after_clean"] += len(new)
        for path in new:  # for the next launch
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                os.remove(path)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--races", type=int, default=100)
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.kills < 1 or args.races < 1 or args.launches < 0:
        parser.error("--kills and --races must be positive, --launches >= 0")
    rng = random.Random(args.seed)
    folder = tempfile.mkdtemp(prefix="tilegraph-crash-")
    t0 = time.perf_counter()
    try:
        print(f"arrays {SHAPE} float64 in blocks {CHUNKS}; writers forked, backend 'sync'")
        for kind in ("npy", "zarr"):
            c = kill_during_overwrites(kind, args.kills, rng, folder)
            print(f"to_{kind} overwrite, SIGKILL at {args.kills} random instants over "
                  f"{c['write_seconds'] * 1e3:.0f} ms: neither old nor new "
                  f"{c['neither']} of {args.kills} (goal 0); old {c['old']}, new {c['new']}")
        for kind in ("npy", "zarr"):
            c = races(kind, args.races, folder)
            print(f"to_{kind} overwrite=False, {args.races} races of two writers: double "
                  f"successes {c['both']} (goal 0); one winner {c['one']}, no winner "
                  f"{c['none']}, winner's array not whole {c['torn']} (goal 0)")
        for which, name in (("mpi", "tilegraph run -n 2"), ("serverless", "serverless driver")):
            if not args.launches:
                break
            c = kill_launches(which, args.launches, rng, folder)
            print(f"{name}, SIGKILL at {args.launches} random instants ({c['kills']} while "
                  f"running): processes left {c['processes']} (goal 0); new temp entries "
                  f"{c['entries']}, after `tilegraph clean` {c['entries_after_clean']} "
                  "(goal 0)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
