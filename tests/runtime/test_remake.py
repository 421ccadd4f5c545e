"""Remaking under memory pressure: a block is dropped and made again only when its chain to
a source gives the same block again; any other block is spilled (or kept), and a block made
again that differs from the one dropped is an error. The run record says which was which."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.io.snapshot import InputChangedError
from tilegraph.runtime.events import RunEnd
from tilegraph.runtime.memory import MemoryLimitError
from tilegraph.runtime.spill import SpillRecord, block_digest

DTYPES = [np.float32, np.float64, np.int64]
LIMIT = "150KB"  # x of 230 x 170 in blocks of 60 x 50 (edges of 50 and 20), and x @ x.T


class Fresh:
    """A source whose every read of a region gives new values (a sensor, a generator):
    the n-th read of a region is the data plus 3 (n - 1). ``reads`` counts the reads of
    each region."""

    def __init__(self, data: np.ndarray):
        self.data, self.shape, self.dtype = data, data.shape, data.dtype
        self.reads: dict[str, int] = {}

    def __getitem__(self, idx):
        key = repr(idx)
        n = self.reads[key] = self.reads.get(key, 0) + 1
        return self.data[idx] + (n - 1) * 3


class Same(Fresh):
    """A source that gives the same values on every read (counted as Fresh's)."""

    def __getitem__(self, idx):
        super().__getitem__(idx)
        return self.data[idx].copy()


def _data(dtype) -> np.ndarray:
    # small integers: every product and sum is exact in each dtype, so x @ x.T is exactly
    # symmetric and exactly NumPy's
    return np.random.default_rng(1).integers(0, 8, (230, 170)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_source_that_is_not_repeatable_is_spilled_not_read_again(tmp_path, dtype):
    base = _data(dtype)
    src = Fresh(base)
    x = tg.from_array(src, chunks=(60, 50))
    events = []
    report = tmp_path / "run.html"
    g = (x @ x.T).compute(memory_limit=LIMIT, callbacks=[events.append], report=str(report))
    run = tg.last_run()
    # each block read once, so the result is NumPy's of what was read, exactly symmetric
    assert set(src.reads.values()) == {1} and len(src.reads) == 4 * 4
    np.testing.assert_array_equal(g, base @ base.T)
    np.testing.assert_array_equal(g, g.T)
    assert g.dtype == dtype
    # the loads went to disk instead, and the record says so and why
    assert run.spilled_unrepeatable.get("load", 0) > 0 and run.spilled_bytes > 0
    assert not run.remade and run.recomputed_bytes == 0
    assert "from_array of a Fresh" in run.unrepeatable_reasons["load"]
    assert "repeatable=True" in run.unrepeatable_reasons["load"]
    assert "spilled, not remade (source not repeatable)" in str(run)
    end = next(e for e in events if isinstance(e, RunEnd))
    assert end.spilled_unrepeatable == run.spilled_unrepeatable
    assert end.unrepeatable_reasons == run.unrepeatable_reasons
    html = report.read_text()
    assert "spilled, source not repeatable" in html
    assert f"{sum(run.spilled_unrepeatable.values())} (load " in html
    assert "load: from_array of a Fresh: reading a block again may not give" in html
    # with room for everything, nothing is spilled nor read twice
    src = Fresh(base)
    x = tg.from_array(src, chunks=(60, 50))
    np.testing.assert_array_equal((x @ x.T).compute(memory_limit="2GB"), base @ base.T)
    assert set(src.reads.values()) == {1}
    assert not tg.last_run().spilled_unrepeatable


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_source_declared_repeatable_is_read_again_instead_of_spilled(dtype):
    base = _data(dtype)
    src = Same(base)
    x = tg.from_array(src, chunks=(60, 50), repeatable=True)
    g = (x @ x.T).compute(memory_limit=LIMIT)
    run = tg.last_run()
    np.testing.assert_array_equal(g, base @ base.T)
    assert max(src.reads.values()) > 1  # blocks were read again ...
    assert sum(src.reads.values()) == 16 + run.remade["load"]  # ... once per remade block
    assert not run.spilled_unrepeatable
    assert f"remade {run.remade['load']} blocks (load {run.remade['load']})" in str(run)


def test_a_source_declared_repeatable_that_is_not_is_an_error_never_a_mix():
    src = Fresh(_data(np.float64))
    x = tg.from_array(src, chunks=(60, 50), repeatable=True)
    with pytest.raises(InputChangedError, match=r"op from_array\) was made again.*gave another "
                                                r"block") as info:
        (x @ x.T).compute(memory_limit=LIMIT)
    assert "repeatable=True" in str(info.value)
    assert max(src.reads.values()) == 2  # it stopped at the first block that differed


def test_seeded_random_and_checked_files_are_still_remade(tmp_path):
    base = _data(np.float64)
    np.save(tmp_path / "a.npy", base)
    x = tg.from_npy(tmp_path / "a.npy", chunks=(60, 50))
    r = tg.random.random((230, 170), chunks=(60, 50), seed=5)
    want_r = r.compute()
    got = (x @ r.T).compute(memory_limit=LIMIT)
    run = tg.last_run()
    np.testing.assert_allclose(got, base @ want_r.T, rtol=1e-12)
    assert run.remade.get("load", 0) > 0 and run.remade.get("random", 0) > 0
    assert not run.spilled_unrepeatable
    report = tmp_path / "run.html"
    (x @ r.T).compute(memory_limit=LIMIT, report=str(report))
    html = report.read_text()
    assert "blocks remade" in html and "random " in html


def test_the_whole_fused_chain_must_be_repeatable():
    base = _data(np.float64)
    fresh = tg.from_array(Fresh(base), chunks=(60, 50))
    same = tg.from_array(Same(base), chunks=(60, 50), repeatable=True)
    user = tg.random.random((230, 170), chunks=(60, 50), seed=2).map_blocks(np.negative)
    outs = [(fresh + 1).sum(axis=0), (same * 2).sum(axis=0), (user + 1).sum(axis=0)]
    g = plan_arrays(outs).graph
    remake, refused, rep = g.remakeable(), g.remake_refused(), g.repeatable()
    names = g.meta["name"]
    by_name = {}
    for i in range(len(g)):
        if g.in_degree()[i] == 0:
            by_name.setdefault(names[i], set()).add((remake[i], refused[i]))
    fused_fresh = next(n for n in by_name if n.startswith("from_array+add"))
    fused_same = next(n for n in by_name if n.startswith("from_array+multiply"))
    assert by_name[fused_fresh] == {(0, 1)}  # cheap, but a step of it is not repeatable
    assert by_name[fused_same] == {(1, 0)}
    user_chain = next(n for n in by_name if "negative" in n)
    assert by_name[user_chain] == {(0, 0)}  # a user's function: neither (cost unknown)
    i = names.index(fused_fresh)
    assert g.unrepeatable_reason(i).startswith("from_array of a Fresh")
    j = names.index(user_chain)
    assert "negative (map): it runs a user's function" in g.unrepeatable_reason(j)
    # downstream of a step that is not repeatable, nothing is
    spoilt = [c for c in range(len(g)) if i in g.dep_idx[g.dep_ptr[c]:g.dep_ptr[c + 1]]]
    assert spoilt and not any(rep[c] for c in spoilt)
    assert "from_array of a Fresh" in g.unrepeatable_reason(spoilt[0])
    k = names.index(fused_same)
    assert rep[k] and g.unrepeatable_reason(k) == ""


def test_explain_says_per_op_what_is_remade_and_what_is_spilled_and_why():
    base = _data(np.float64)
    x = tg.from_array(Fresh(base), chunks=(60, 50))
    r = tg.random.random((230, 170), chunks=(60, 50), seed=5)
    text = (x @ r.T).explain()
    assert "remade per op: random-random (16 tasks)" in text
    assert ("spilled (or kept), not made again: from_array (16 tasks), because from_array "
            "of a Fresh") in text


def test_spill_false_keeps_a_source_that_is_not_repeatable_in_memory():
    """Without disk, a block that cannot be read again must stay in memory: a plan that
    needs more than the limit for them is refused before anything is read; declared
    repeatable, the same plan runs, reading blocks again."""
    base = _data(np.float64)
    src = Fresh(base)
    x = tg.from_array(src, chunks=(60, 50))
    y = ((x - x.mean(axis=0)) ** 2).sum()
    with pytest.raises(MemoryLimitError, match="spill=False"):
        y.compute(memory_limit="100KB", spill=False, workers=1)
    assert src.reads == {}
    src = Same(base)
    x = tg.from_array(src, chunks=(60, 50), repeatable=True)
    got = ((x - x.mean(axis=0)) ** 2).sum().compute(memory_limit="100KB", spill=False,
                                                     workers=1)
    assert got == pytest.approx(float(((base - base.mean(axis=0)) ** 2).sum()))
    assert tg.last_run().spilled_bytes == 0 and tg.last_run().remade["load"] > 0


def test_from_array_repeatable_is_validated():
    src = Same(np.ones((4, 4)))
    for bad in (1, "yes", 0.5, [True]):
        with pytest.raises(TypeError, match="repeatable must be True, False or None"):
            tg.from_array(src, repeatable=bad)
    with pytest.raises(TypeError, match="repeatable= is for an object read block by block"):
        tg.from_array(tg.ones(3), repeatable=True)
    with pytest.raises(TypeError, match="repeatable=False cannot hold for data in memory"):
        tg.from_array(np.ones(3), repeatable=False)
    np.testing.assert_array_equal(tg.from_array(np.ones(3), repeatable=True).compute(),
                                  np.ones(3))
    x = tg.from_array(src, chunks=2, repeatable=False)
    g = plan_arrays([x]).graph
    assert not any(g.remakeable())
    assert "(repeatable=False)" in g.unrepeatable_reason(0)


def test_a_block_digest_tells_blocks_apart():
    a = np.arange(12.0).reshape(3, 4)
    assert block_digest(a) == block_digest(a.copy()) == block_digest(np.asfortranarray(a))
    assert block_digest(a) == block_digest(a[:, ::1]) != block_digest(a[:, ::2].copy() + 0)
    assert block_digest(a) != block_digest(a.astype(np.float32))
    assert block_digest(a) != block_digest(a.reshape(4, 3))
    b = a.copy()
    b[2, 3] += 1
    assert block_digest(a) != block_digest(b)
    assert block_digest(a.T) == block_digest(np.ascontiguousarray(a.T))
    assert block_digest([1, 2]) is None and block_digest(np.array([None])) is None
    assert SpillRecord("", (3, 4), a.dtype, 96).digest is None


def test_a_memory_map_written_through_the_map_during_a_run_is_an_error(tmp_path):
    """The map's file is read again (its blocks are remade) after a write through the map
    itself: the file's fingerprint no longer matches the first read's."""
    path = os.fspath(tmp_path / "m.dat")
    base = _data(np.float64)
    m = np.memmap(path, dtype=base.dtype, mode="w+", shape=base.shape)
    m[:] = base
    m.flush()
    x = tg.from_array(m, chunks=(60, 50))
    r = tg.random.random((230, 170), chunks=(60, 50), seed=1)
    seen = []

    def rewrite(event):
        if isinstance(event, RunEnd) or getattr(event, "kind", "") != "product" or seen:
            return
        seen.append(event)  # by then every block of x was read once
        m[:] = base + 1
        m.flush()

    with pytest.raises(InputChangedError, match=r"m\.dat.*the file was modified"):
        (x @ r.T).compute(memory_limit=LIMIT, callbacks=[rewrite], workers=1)
    assert seen
    m[:] = base
    m.flush()
    y = tg.from_array(m, chunks=(60, 50))  # made again: reads the file as it is now
    np.testing.assert_array_equal((y @ y.T).compute(memory_limit=LIMIT), base @ base.T)
    assert tg.last_run().remade["load"] > 0
