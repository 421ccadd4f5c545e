"""Commits are atomic: two no-replace writers never both succeed, and a zarr overwrite
interrupted between its renames is repaired by the next open."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import tilegraph as tg
from tilegraph.io import NpyWriter, ZarrWriter, _atomic, read_zarr_block

ROOT = Path(__file__).resolve().parents[2]


def _slow_check(monkeypatch):
    """Widen the window between the existence check of a commit and its rename."""
    check = _atomic.check_not_exists

    def slow(path, overwrite):
        check(path, overwrite)
        time.sleep(0.3)

    monkeypatch.setattr(_atomic, "check_not_exists", slow)


def _race(make, path):
    writers = [make(k) for k in (1, 2)]
    outcome: dict[int, str] = {}

    def commit(k):
        try:
            writers[k - 1].commit()
            outcome[k] = "ok"
        except FileExistsError as exc:
            outcome[k] = str(exc)

    threads = [threading.Thread(target=commit, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [k for k, v in outcome.items() if v == "ok"]
    assert len(winners) == 1, outcome
    loser = 3 - winners[0]
    assert "already exists" in outcome[loser] and "overwrite=True" in outcome[loser]
    return winners[0]


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "link-or-mkdir"])
@pytest.mark.parametrize("kind", ["npy", "zarr"])
def test_two_no_replace_writers_exactly_one_wins(tmp_path, monkeypatch, kind, renameat2):
    _slow_check(monkeypatch)
    if not renameat2:  # a system without renameat2: the fallbacks are atomic too
        monkeypatch.setattr(_atomic, "_libc_renameat2", lambda: None)
    path = str(tmp_path / f"out.{kind}")

    def make(k):
        if kind == "npy":
            w = NpyWriter(path, (3,), "int64")
        else:
            w = ZarrWriter(path, (3,), "int64", chunks=3)
        w.write(slice(0, 3), np.full(3, k))
        return w

    winner = _race(make, path)
    got = np.load(path) if kind == "npy" else read_zarr_block(path, slice(None))
    assert_array_equal(got, np.full(3, winner))
    assert sorted(os.listdir(tmp_path)) == [f"out.{kind}"]  # the loser left nothing


def test_zarr_overwrite_swaps_in_one_step(tmp_path):
    path = str(tmp_path / "a.zarr")
    tg.from_numpy(np.zeros(4), chunks=2).to_zarr(path)
    tg.from_numpy(np.ones(4), chunks=2).to_zarr(path, overwrite=True)
    assert_array_equal(tg.from_zarr(path).compute(), np.ones(4))
    assert os.listdir(tmp_path) == ["a.zarr"]


def test_zarr_overwrite_killed_between_renames_is_repaired_by_the_next_open(tmp_path):
    path = str(tmp_path / "a.zarr")
    tg.from_numpy(np.arange(4.0), chunks=2).to_zarr(path)
    # a writer on a file system without RENAME_EXCHANGE, killed after moving the old array
    # aside and before moving the new one in
    code = textwrap.dedent(f"""
        import os, numpy as np, tilegraph as tg
        from tilegraph.io import _atomic
        _atomic.exchange = lambda src, dst: False
        rename = os.rename
        def rename_then_die(src, dst):
            rename(src, dst)
            if ".old-" in os.path.basename(dst):
                os._exit(9)
        os.rename = rename_then_die
        tg.from_numpy(np.ones(4), chunks=2).to_zarr({path!r}, overwrite=True)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert proc.returncode == 9
    assert not os.path.exists(path)  # the crash window: the old array is hidden
    assert any(".old-" in n for n in os.listdir(tmp_path))
    assert_array_equal(tg.from_zarr(path).compute(), np.arange(4.0))
    assert not any(".old-" in n for n in os.listdir(tmp_path))
    # and the next write cleans the rest (the new array's temporary directory)
    tg.from_numpy(np.ones(4), chunks=2).to_zarr(path, overwrite=True)
    assert os.listdir(tmp_path) == ["a.zarr"]


def test_fsync_path_flushes_every_file_and_directory_of_a_tree(tmp_path, monkeypatch):
    """Every file of a store (flushed by several threads) and every directory, deepest
    directories before their parents."""

    root = tmp_path / "store"
    for i in range(3):
        for j in range(7):
            (root / "c" / str(i)).mkdir(parents=True, exist_ok=True)
            (root / "c" / str(i) / str(j)).write_bytes(b"x" * (i + j))
    (root / "zarr.json").write_text("{}")
    flushed: list[str] = []
    real = _atomic._fsync_one
    monkeypatch.setattr(_atomic, "_fsync_one", lambda p: (flushed.append(p), real(p)))
    _atomic.fsync_path(str(root))
    files = {str(p) for p in root.rglob("*") if p.is_file()}
    dirs = [str(root), str(root / "c"), *(str(root / "c" / str(i)) for i in range(3))]
    assert sorted(flushed) == sorted(files | set(dirs))
    assert len(flushed) == len(files) + len(dirs)
    assert flushed.index(str(root)) > flushed.index(str(root / "c" / "2"))
    assert set(flushed[:len(files)]) == files  # the files before any directory
    single = tmp_path / "one.npy"
    single.write_bytes(b"y")
    flushed.clear()
    _atomic.fsync_path(str(single))
    assert flushed == [str(single)]
