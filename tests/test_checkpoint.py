"""Checkpoint stores (tilegraph.checkpoint): ``compute(..., checkpoint=)`` and ``persist(...,
store=)`` write the blocks of the results as they finish; a rerun of the same plan after a
killed run computes only the rest; a changed plan, and a block that is half-written,
damaged, foreign or moved, is never used; a store others could write is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.checkpoint import CheckpointError, CheckpointStore, last_resumed, plan_keys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _product(seed: int = 1, dtype: str = "float64"):
    a = tg.random.random((130, 95), chunks=(40, 30), seed=seed).astype(dtype)
    b = tg.random.random((95, 70), chunks=(30, 25), seed=seed + 1).astype(dtype)
    return a @ b + 1


def _blocks(store: str) -> list[str]:
    return sorted(n for n in os.listdir(store) if n.endswith(".blk"))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "complex128"])
def test_a_rerun_takes_every_finished_block_and_gives_the_same_result(tmp_path, dtype):
    x = _product(dtype=dtype)
    want = x.compute()
    store = str(tmp_path / "ckpt")
    got = x.compute(checkpoint=store)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype
    assert last_resumed().loaded == 0 and last_resumed().blocks == 12
    assert len(_blocks(store)) == 12  # 4 x 3 blocks, uneven at the edges
    assert os.stat(store).st_mode & 0o777 == 0o700
    assert os.stat(os.path.join(store, "key")).st_mode & 0o777 == 0o600
    again = _product(dtype=dtype).compute(checkpoint=store)  # the same plan, built anew
    np.testing.assert_array_equal(again, want)
    assert last_resumed().loaded == 12


def test_one_block_and_zero_d_results(tmp_path):
    store = str(tmp_path / "s")
    x = tg.random.random((50, 40), chunks=25, seed=4)
    total, small = tg.compute(x.sum(), x[:10, :10] * 2, checkpoint=store)
    want = x.compute()
    assert np.isclose(total, want.sum()) and np.ndim(total) == 0
    np.testing.assert_array_equal(small, want[:10, :10] * 2)
    again = tg.compute(x.sum(), x[:10, :10] * 2, checkpoint=store)
    assert last_resumed().loaded == 2
    assert again[0] == total and np.array_equal(again[1], small)


KILLED = """
import json, sys, time
import numpy as np
import tilegraph as tg
from tilegraph.checkpoint import last_resumed

def slow(b):
    time.sleep(0.15)
    return b * 3

x = tg.random.random((400, 300), chunks=50, seed=7).map_blocks(slow)
print("started", flush=True)
got = x.compute(checkpoint=sys.argv[1], workers=2)
resumed = tg.last_run().ntasks
full = x.compute(workers=2)
print(json.dumps({"right": bool(np.array_equal(got, full)), "loaded": last_resumed().loaded,
                  "refused": len(last_resumed().refused), "resumed": resumed,
                  "full": tg.last_run().ntasks}))
"""


def test_a_run_killed_midway_is_resumed_from_what_it_finished(tmp_path):
    store = str(tmp_path / "ckpt")
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, store], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                not os.path.isdir(store) or len(_blocks(store)) < 10):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = len(_blocks(store))
    assert 10 <= finished < 48  # the run was killed midway
    rerun = subprocess.run([sys.executable, "-c", KILLED, store], capture_output=True,
                           text=True, env=env, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    out = json.loads(rerun.stdout.splitlines()[-1])
    assert out["right"] and out["loaded"] == finished and out["refused"] == 0
    assert out["resumed"] < out["full"]  # tasks run by the rerun < the whole plan's
    assert len(_blocks(store)) == 48
    assert not [n for n in os.listdir(store) if n.startswith(".")]  # no temporary file left


def test_a_changed_plan_never_takes_stale_blocks(tmp_path):
    store = str(tmp_path / "s")
    _product(seed=1).compute(checkpoint=store)
    for changed in (_product(seed=5), _product(seed=1) * 2, _product(seed=1).T,
                    _product(seed=1, dtype="float32")):
        want = changed.compute()
        np.testing.assert_array_equal(changed.compute(checkpoint=store), want)
        assert last_resumed().loaded == 0, changed
    # a function whose constant changed is another plan too
    base = tg.random.random((60, 60), chunks=30, seed=2)
    for k in (1.0, 2.0):
        got = base.map_blocks(lambda b, k=k: b + k).compute(checkpoint=store)
        np.testing.assert_array_equal(got, base.compute() + k)
        assert last_resumed().loaded == 0
    # an input array whose content changed
    data = np.arange(100.0).reshape(10, 10)
    tg.from_numpy(data, chunks=5).compute(checkpoint=store)
    data[0, 0] = -1
    got = (tg.from_numpy(data, chunks=5) + 0).compute(checkpoint=store)
    assert got[0, 0] == -1


def test_damaged_foreign_and_moved_blocks_are_never_trusted(tmp_path):
    store = str(tmp_path / "s")
    want = _product().compute(checkpoint=store)
    names = _blocks(store)
    path = [os.path.join(store, n) for n in names]
    with open(path[0], "r+b") as f:  # one byte of the data flipped
        f.seek(-40, os.SEEK_END)
        b = f.read(1)
        f.seek(-40, os.SEEK_END)
        f.write(bytes([b[0] ^ 1]))
    with open(path[1], "r+b") as f:  # cut short, as a crash mid-write leaves it
        f.truncate(os.path.getsize(path[1]) // 2)
    os.replace(path[2], path[3])  # one block moved over another's name
    other = str(tmp_path / "other")
    _product().compute(checkpoint=other)  # the same block under another store's key
    os.replace(os.path.join(other, names[4]), path[4])
    with open(path[5], "wb") as f:
        f.write(b"not a block at all")
    got = _product().compute(checkpoint=store)
    np.testing.assert_array_equal(got, want)
    r = last_resumed()
    assert r.loaded == 12 - 6 and len(r.refused) == 5  # (path[2] is missing now)
    why = " | ".join(r.refused.values())
    assert "MAC does not match" in why and "another plan key" in why
    assert "not a checkpoint block" in why
    # written again: a third run takes them all
    _product().compute(checkpoint=store)
    assert last_resumed().loaded == 12 and not last_resumed().refused


def test_a_store_others_could_write_or_that_is_a_link_is_refused(tmp_path):
    store = tmp_path / "s"
    x = tg.random.random((20, 20), chunks=10, seed=1)
    x.compute(checkpoint=str(store))
    os.chmod(store, 0o777)
    with pytest.raises(CheckpointError, match="writable by others"):
        x.compute(checkpoint=str(store))
    os.chmod(store, 0o700)
    os.chmod(store / "key", 0o644)
    with pytest.raises(CheckpointError, match="only they can read"):
        x.compute(checkpoint=str(store))
    os.chmod(store / "key", 0o600)
    os.symlink(store, tmp_path / "link")
    with pytest.raises(CheckpointError, match="is not a directory"):
        x.compute(checkpoint=str(tmp_path / "link"))
    key = (store / "key").read_bytes()
    (store / "key").unlink()
    (tmp_path / "mine").write_bytes(key)
    os.chmod(tmp_path / "mine", 0o600)
    os.symlink(tmp_path / "mine", store / "key")
    with pytest.raises(CheckpointError, match="is a link"):
        x.compute(checkpoint=str(store))
    if os.geteuid() == 0:  # a store of another user
        other = tmp_path / "theirs"
        other.mkdir(mode=0o700)
        os.chown(other, 65534, 65534)
        with pytest.raises(CheckpointError, match="belongs to user 65534"):
            x.compute(checkpoint=str(other))
    with pytest.raises(CheckpointError, match="does not exist on host"):
        CheckpointStore(tmp_path / "missing")


def test_persist_to_a_store_reads_the_blocks_back_checked(tmp_path):
    store = str(tmp_path / "p")
    x = _product()
    want = x.compute()
    y, n = tg.persist(x, 3, store=store)
    assert n == 3 and y.chunks == x.chunks and y.dtype == x.dtype
    assert "persisted" in y.name
    np.testing.assert_array_equal(y.compute(), want)
    np.testing.assert_allclose((y.T @ y).compute(), want.T @ want)
    (z,) = tg.persist(_product(), store=store)  # all there already: nothing computed
    assert last_resumed().loaded == 12
    np.testing.assert_array_equal(z.compute(), want)
    victim = os.path.join(store, _blocks(store)[0])
    with open(victim, "r+b") as f:
        f.seek(30)
        f.write(b"\x00\x01\x02")
    with pytest.raises(CheckpointError, match=r"persisted in .*/p cannot be used on host "):
        y.compute()


def test_bad_arguments_are_refused_before_anything_runs(tmp_path):
    x = tg.random.random((20, 20), chunks=10, seed=1)
    with pytest.raises(TypeError, match="a checkpoint store is a directory path"):
        x.compute(checkpoint=3)
    with pytest.raises(ValueError, match="path is empty"):
        x.compute(checkpoint="")
    with pytest.raises(TypeError, match="a checkpoint store is a directory path"):
        tg.persist(x, store=True)
    with pytest.raises(ValueError, match="checkpoint= is not taken with a scheduler"):
        x.compute(checkpoint=str(tmp_path), scheduler=lambda dsk, keys, **kw: None)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        x.compute(checkpoint=str(tmp_path / "file"))
    with pytest.raises(ValueError, match="64 hexadecimal digits"):
        CheckpointStore(tmp_path / "s", create=True).block_path("../../etc/passwd")
    assert not os.path.exists(tmp_path / "s" / "x.blk")


def test_plan_keys_are_the_same_in_another_process_and_leave_names_out(tmp_path):
    code = ("import tilegraph as tg\n"
            "from tilegraph.array.lowering import lower_arrays\n"
            "from tilegraph.checkpoint import plan_keys\n"
            "x = tg.random.random((60, 40), chunks=20, seed=3)\n"
            "y = (x @ x.T).sum(axis=0)\n"
            "g, r = lower_arrays([y])\n"
            "print(plan_keys(g, [y.collection.key((i,)) for i in range(3)], "
            "[(20,)] * 3, ['f8'] * 3))\n")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": ROOT}, check=True).stdout
            for _ in range(2)}
    assert len(outs) == 1 and len(eval(outs.pop())) == 3
    from tilegraph.array.lowering import lower_arrays

    x = tg.random.random((60, 40), chunks=20, seed=3)
    g, _ = lower_arrays([x])
    k = [x.collection.key((0, 0)), x.collection.key((1, 0))]
    a, b = plan_keys(g, k, [(20, 20)] * 2, ["f8"] * 2)
    assert a != b  # two blocks of one array differ
    assert plan_keys(g, k[:1], [(20, 20)], ["f4"]) != [a]  # the planned dtype counts
