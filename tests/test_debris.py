"""What a killed process leaves (spill directories, temporary outputs) is removed by the next
run or by ``tilegraph clean``, and what a live process owns never is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import tilegraph as tg
from tilegraph.cli import main
from tilegraph.debris import find_debris, owner_tag
from tilegraph.io import NpyWriter

ROOT = Path(__file__).resolve().parents[1]


def _killed_child_leaves_debris(folder: Path) -> None:
    """A child that spills, starts writing an output, and is SIGKILLed."""
    code = textwrap.dedent(f"""
        import os, signal, numpy as np
        from tilegraph.io import NpyWriter
        from tilegraph.runtime.spill import SpillStore
        store = SpillStore({str(folder)!r})
        store.write(np.ones(1000))
        w = NpyWriter({str(folder / "out.npy")!r}, (1000,), "float64")
        w.write(slice(0, 1000), np.ones(1000))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL


def test_debris_of_a_killed_process_is_removed_by_the_next_run(tmp_path):
    _killed_child_leaves_debris(tmp_path)
    names = os.listdir(tmp_path)
    assert any(n.startswith("tilegraph-spill-") for n in names), names
    assert any(n.startswith(".out.npy.tmp-") for n in names), names
    # a live process's spill directory (the parent of this test) is never removed
    live = tmp_path / f"tilegraph-spill-{owner_tag().rsplit('-', 1)[0]}-{os.getppid()}-abc"
    live.mkdir()
    x = tg.from_numpy(np.arange(100.0), chunks=10)
    assert float((x + 1).sum().compute(spill_dir=str(tmp_path))) == 5050.0
    names = sorted(os.listdir(tmp_path))
    assert names == sorted([live.name] + [n for n in names if n.startswith(".out.npy")])
    # the next write into the folder removes the dead writer's temporary output
    x.to_npy(tmp_path / "other.npy")
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, "other.npy"])


def test_tilegraph_clean_removes_only_dead_processes_debris(tmp_path, capsys):
    with NpyWriter(tmp_path / "mine.npy", (2,), "float64") as w:  # a live writer
        w.write(slice(0, 2), np.zeros(2))
        _killed_child_leaves_debris(tmp_path)
        assert len(find_debris(str(tmp_path))) == 2
        assert main(["clean", "--dry-run", str(tmp_path)]) == 0
        assert "would remove" in capsys.readouterr().out
        assert len(find_debris(str(tmp_path))) == 2
        assert main(["clean", str(tmp_path)]) == 0
        assert os.path.exists(w.temp_path)
    out = capsys.readouterr().out
    assert "removed" in out and "left by dead process" in out and "2 item(s)" in out
    assert sorted(os.listdir(tmp_path)) == ["mine.npy"]


def test_tilegraph_clean_rejects_a_missing_directory(tmp_path, capsys):
    assert main(["clean", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_a_killed_serverless_driver_leaves_nothing_the_next_run_keeps(tmp_path):
    """A driver SIGKILLed with a pool open (an embedded Valkey server and a temporary object
    store holding a block) leaves directories named for it; ``tilegraph clean`` and the next
    pool remove them, and a live process's are kept."""
    code = textwrap.dedent("""
        import os, signal
        from tilegraph.runtime.serverless.pool import Pool
        pool = Pool(0)
        pool.store.put("a-block", b"x" * 1000)
        print(os.path.basename(pool.server.dir), os.path.basename(pool._tmp_store), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=120,
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    valkey, store = proc.stdout.split()
    assert valkey.startswith("tilegraph-valkey-") and store.startswith("tilegraph-store-")
    assert {valkey, store} <= set(os.listdir(tmp_path))
    assert {d.kind for d in find_debris(str(tmp_path))} == {"valkey", "store"}
    live = tmp_path / f"tilegraph-store-{owner_tag()}-live"  # this process's: kept
    live.mkdir()
    assert main(["clean", str(tmp_path)]) == 0
    assert sorted(os.listdir(tmp_path)) == [live.name]


def test_a_zombie_owner_is_dead_and_its_spill_directory_is_debris(tmp_path):
    # a rank killed with its parent is a zombie until it is collected: it will never
    # come back for its files
    import time

    from tilegraph.debris import pid_alive

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pid_alive(pid)  # exited, not collected yet
        os.kill(pid, 0)  # ... but its process id is still taken
        spill = tmp_path / f"tilegraph-spill-{owner_tag().rsplit('-', 1)[0]}-{pid}-x"
        spill.mkdir()
        assert [d.path for d in find_debris(str(tmp_path))] == [str(spill)]
    finally:
        os.waitpid(pid, 0)
    assert pid_alive(os.getpid())


def test_a_live_process_s_own_directories_are_recorded_and_removed_on_demand(tmp_path):
    """What remove_own() removes (a run stopped by a signal calls it): the spill and
    staging directories this process made and still holds, nothing else."""
    from tilegraph.debris import remove_own
    from tilegraph.io import staging
    from tilegraph.runtime.spill import SpillStore

    other = tmp_path / "tilegraph-spill-otherhost-1-abc"  # not this process's
    other.mkdir()
    store = SpillStore(str(tmp_path))
    store.write(np.ones(100))
    handle = staging.stage_pieces(np.ones((4, 4)), [(slice(0, 2), slice(0, 4))],
                                  str(tmp_path))
    made = {Path(store.path), Path(handle.path).parent}
    assert all(p.is_dir() for p in made)
    removed = {Path(p) for p in remove_own()}
    assert made <= removed
    assert not any(p.exists() for p in made) and other.is_dir()
    assert remove_own() == []  # each once
    store.close()  # (closing after is harmless)
    del handle


def test_ranks_report_their_spill_directories_to_the_launcher(tmp_path, monkeypatch):
    from tilegraph import debris

    record = tmp_path / "parents"
    record.write_text("")
    monkeypatch.setenv(debris.SPILL_PARENTS_ENV, str(record))
    monkeypatch.setattr(debris, "_cleaned", set())
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for d in (a, b, a):
        debris.remove_dead_spills(str(d))
    assert record.read_text().splitlines() == [str(a), str(b)]  # once per directory
    with open(record, "a") as f:  # what a stranger might add is only listed if valid
        f.write("relative/dir\n/no/such/dir\n" + str(a) + "\n")
    assert debris.noted_spill_parents(str(record)) == [str(a), str(b)]
    assert debris.noted_spill_parents(str(tmp_path / "missing")) == []
    monkeypatch.setenv(debris.SPILL_PARENTS_ENV, str(tmp_path / "not-made"))
    debris.note_spill_parent(str(a))  # the launcher's file only, never made here
    assert not (tmp_path / "not-made").exists()
