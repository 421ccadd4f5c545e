"""Remaking under memory pressure: a block is dropped and made again only when its chain to
a source gives the same block again; any other block is spilled (or kept), and a block made
again that differs from the one dropped is an error. The run record says which was which."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.array.lowering import plan_arrays
from tilegraph.graph.remake import generated, remake_reason
from tilegraph.io.snapshot import InputChangedError
from tilegraph.runtime.budget import MemoryLimitError
from tilegraph.runtime.events import RunEnd
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


@pytest.mark.parametrize("fuse", [False, True])
def test_only_blocks_computed_from_the_plan_alone_are_made_again_unchecked(tmp_path, fuse):
    # a checksum guards what is read from outside the run (a file that may change, an
    # object declared repeatable); a chain from seeded generators and constants reads
    # nothing and is made again unchecked
    np.save(tmp_path / "a.npy", _data(np.float64)[:60, :50])
    f = tg.from_npy(tmp_path / "a.npy", chunks=(30, 50))
    r = tg.random.random((60, 50), chunks=(30, 50), seed=5)
    z = tg.full((60, 50), 2.0, chunks=(30, 50))
    outs = [(r * z + 1).sum(axis=0), (f + r).sum(axis=0), (r.astype(np.float32) - 1).max()]
    g = plan_arrays(outs, fuse=fuse).graph
    mask, names = generated(g), g.meta["name"]
    for i in range(len(g)):
        reads_file = "load" in (names[i] or "") or any(
            not mask[d] for d in g.dep_idx[g.dep_ptr[i]:g.dep_ptr[i + 1]].tolist())
        if g.in_degree()[i] == 0 and not g.remake_verdicts().data[i]:
            assert mask[i] == (g.meta["kind"][i] in ("random", "creation")), names[i]
        elif reads_file:
            assert not mask[i], names[i]
    assert any(mask[i] and g.in_degree()[i] for i in range(len(g)))  # a chain, unchecked
    got = tg.compute(*outs, memory_limit=LIMIT)
    want_r = r.compute()
    np.testing.assert_allclose(got[1], (_data(np.float64)[:60, :50] + want_r).sum(axis=0))
    np.testing.assert_allclose(got[0], (want_r * 2 + 1).sum(axis=0))


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


# -- remaking through the steps between a block and its source ---------------------------------


def _anomaly_mean(x, groups):
    """coiled's test_anom_mean with arrays: (rows, X) reshaped to (rows/g, g, X), the
    climatology over axis 0, the anomaly against it, its mean over (0, 1)."""
    rows, width = x.shape
    r = x.reshape((rows // groups, groups, width))
    return (r - r.mean(axis=0)).mean(axis=(0, 1))


def _check_anomaly_mean(x, groups, limit):
    """Run :func:`_anomaly_mean` of ``x`` under ``limit`` on two workers, check it against
    NumPy's, and return the run's summary."""
    got = _anomaly_mean(x, groups).compute(memory_limit=limit, workers=2)
    run = tg.last_run()
    rows, width = x.shape
    xs = x.compute().astype(np.float64).reshape(rows // groups, groups, width)
    np.testing.assert_allclose(got, (xs - xs.mean(axis=0)).mean(axis=(0, 1)),
                               atol=1e-5 if x.dtype == np.float32 else 1e-12)
    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_array_anomaly_mean_remakes_through_the_reshape_and_spills_nothing(dtype):
    rows, width, groups = 96, 5000, 6  # one-row blocks; 16 reshaped blocks of 6 rows
    x = tg.random.random((rows, width), chunks=(1, width), seed=3, dtype=dtype)
    limit = 12 * groups * width * np.dtype(dtype).itemsize
    run = _check_anomaly_mean(x, groups, limit)
    # the input is needed twice (climatology, anomaly): its rows are dropped and made
    # again from their seeds, never written to disk
    assert run.spilled_bytes == 0 and run.unspilled_bytes == 0
    assert run.remade.get("random", 0) > 0
    assert run.recomputed_bytes > 0 and run.peak_bytes <= limit
    # the reshape splits the time axis in place: each block a view of one random row,
    # nothing gathered
    graph = plan_arrays([_anomaly_mean(x, groups)], fuse=False).graph
    names = graph.meta["name"]
    assert "rechunk" not in names
    views = [i for i in range(len(graph)) if names[i] == "reshape"]
    assert len(views) == rows and all(graph.remakeable()[i] for i in views)
    assert all(graph.in_degree()[i] == 1 for i in views)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [20000, 26214])
def test_the_anomaly_means_partials_are_folded_as_they_arrive_not_spilled(dtype, width):
    # coiled's array anomaly at T=600 (100 groups of 6 rows) scaled down, under a limit of
    # about 8 reshaped blocks: the final mean's 100 partials used to be spilled as they
    # waited for a tree (or for the far end of an accumulation chain the walk had on its
    # path), and the admission wrote them out for a deficit the running task was about to
    # give back
    rows, groups = 600, 6
    x = tg.random.random((rows, width), chunks=(1, width), seed=5, dtype=dtype)
    limit = 8 * groups * width * np.dtype(dtype).itemsize
    run = _check_anomaly_mean(x, groups, limit)
    assert run.spilled_bytes == 0 and run.unspilled_bytes == 0
    assert run.remade.get("random", 0) > 0 and run.peak_bytes <= limit


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8])
def test_a_chain_of_pieces_casts_and_elementwise_steps_is_made_again_from_its_source(dtype):
    base = _data(dtype)  # 230 x 170 in blocks of 60 x 50: uneven edge blocks
    x = tg.from_array(Same(base), chunks=(60, 50), repeatable=True)
    y = (x.rechunk((45, 70))[:, 3:].astype(np.float64) * 2 - 1).T  # pieces, a slice, a cast
    z = ((y - y.mean()) ** 2).sum(axis=0)  # y read in two passes over all of it
    # x fits half the limit (its pieces are gathered in memory), y (float64) does not
    got = z.compute(memory_limit="320KB", workers=1)
    run = tg.last_run()
    want_y = (base.astype(np.float64)[:, 3:] * 2 - 1).T
    np.testing.assert_allclose(got, ((want_y - want_y.mean()) ** 2).sum(axis=0),
                               rtol=1e-10)
    assert run.spilled_bytes == 0
    assert run.remade.get("load", 0) > 0 and sum(run.remade.values()) > run.remade["load"]


def test_a_chain_over_a_source_that_is_not_repeatable_is_spilled_with_the_reason():
    base = _data(np.float32)
    src = Fresh(base)
    x = tg.from_array(src, chunks=(60, 50))
    y = x.rechunk((45, 70)).astype(np.float64) * 2
    got = ((y - y.mean()) ** 2).sum().compute(memory_limit="320KB", workers=1)
    run = tg.last_run()
    assert set(src.reads.values()) == {1}  # each block read once: what was read is used
    want = base.astype(np.float64) * 2
    assert got == pytest.approx(float(((want - want.mean()) ** 2).sum()))
    assert run.spilled_bytes > 0 and sum(run.spilled_unrepeatable.values()) > 0
    assert not run.remade
    assert any("from_array of a Fresh" in why for why in run.unrepeatable_reasons.values())
    g = plan_arrays([((y - y.mean()) ** 2).sum()]).graph
    names = g.meta["name"]
    chain = next(i for i in range(len(g)) if names[i].startswith("rechunk"))
    assert g.remake_refused()[chain] and not g.remakeable()[chain]
    assert "from_array of a Fresh" in remake_reason(g, chain)


def test_a_source_that_changes_is_caught_through_the_chain_made_again():
    src = Fresh(_data(np.float32))
    x = tg.from_array(src, chunks=(60, 50), repeatable=True)
    y = x.rechunk((45, 70)).astype(np.float64) * 2
    with pytest.raises(InputChangedError, match=r"was made again .* gave another block"):
        ((y - y.mean()) ** 2).sum().compute(memory_limit="320KB", workers=1)


def test_a_chain_costlier_to_make_again_than_to_spill_is_spilled():
    # a partial of 8 bytes per 800 KB column: making it again means making the column
    x = tg.random.random((100_000, 6), chunks=(100_000, 1), seed=1)
    g = plan_arrays([x.sum(axis=0), x.max(axis=0)], fuse=False).graph
    names = g.meta["name"]
    partial = names.index("sum-partial")
    assert g.remakeable()[names.index("random-random")]
    assert not g.remakeable()[partial] and not g.remake_refused()[partial]
    why = remake_reason(g, partial)
    assert why.startswith("spilled: making it again from its sources takes about")
    assert "more than the" in why and "to write and read back" in why
    # a cheap chain over the same blocks is made again
    g = plan_arrays([(x * 2).rechunk((50_000, 6)).sum()], fuse=False).graph
    names = g.meta["name"]
    assert g.remakeable()[names.index("multiply")]


def test_results_that_arrive_from_elsewhere_and_their_chains_are_never_remade():
    from tilegraph.runtime.core import Execution

    b = tg.GraphBuilder()
    b.add("src", np.ones, args=(4,), kind="random", nbytes=32)
    b.add("local", np.ones, args=(4,), kind="random", nbytes=32)
    b.add("view", np.negative, deps=["src"], kind="elementwise", nbytes=32)
    b.add("sum", np.add, deps=["view", "local"], kind="elementwise", nbytes=32)
    b.add("own", np.negative, deps=["local"], kind="elementwise", nbytes=32)
    g = b.build()
    assert all(g.remakeable())
    ex = Execution(g, g.indices(["sum", "own"]), np.arange(5), external=g.indices(["src"]))
    remake = dict(zip(g.keys, ex.memory.remakeable, strict=True))
    assert remake == {"src": 0, "local": 1, "view": 0, "sum": 0, "own": 1}


def test_explain_shows_per_op_whether_it_is_made_again_or_spilled_and_why():
    x = tg.random.random((96, 5000), chunks=(1, 5000), seed=3)
    text = _anomaly_mean(x, 6).explain()
    lines = text.splitlines()
    start = lines.index("under memory pressure, per op (the most bytes first): made again "
                        "or spilled, and why")
    per_op = lines[start + 1:]
    assert any(ln.startswith("  random-random (96 tasks, 3.7 MiB): made again: 1 step back "
                             "to its sources (random), about") for ln in per_op), text
    assert any(ln.startswith("  reshape+mean-partial (96 tasks, 3.7 MiB): made again: 2 "
                             "steps back to its sources (random), about") for ln in per_op), text
    assert any(ln.startswith("  reshape+subtract+mean-partial (96 tasks")
               and ln.endswith("spilled: its input mean-combine+mean (aggregate) is not "
                               "made again") for ln in per_op), text


def test_a_chain_over_a_literal_is_made_again_with_the_literal_the_plan_holds():
    n, k = 20_000, 8  # blocks of 160 KB
    lit = np.arange(n, dtype=np.float64)
    b = tg.GraphBuilder()
    b.add_data("lit", lit)
    for j in range(k):
        b.add(("r", j), np.full, args=(n, float(j)), kind="creation", nbytes=8 * n)
        b.add(("y", j), np.add, deps=["lit", ("r", j)], kind="elementwise", nbytes=8 * n)
    for j in range(k):  # a first pass over every y (opaque steps: never fused)
        b.add(("s", j), lambda y: float(y.sum()), deps=[("y", j)], nbytes=8)
    b.add("mean", lambda *s: sum(s) / (n * k), deps=[("s", j) for j in range(k)], nbytes=8)
    for j in range(k):  # a second pass over every y, after the mean
        b.add(("z", j), lambda y, m: float(((y - m) ** 2).sum()), deps=[("y", j), "mean"],
              nbytes=8)
    b.add("total", lambda *zs: sum(zs), deps=[("z", j) for j in range(k)], nbytes=8)
    g = b.build()
    ys = [g.index[("y", j)] for j in range(k)]
    assert all(g.remakeable()[i] for i in ys)
    (got,) = tg.run(g, ["total"], memory_limit=4 * 8 * n, workers=1)
    run = tg.last_run()
    want_y = [lit + j for j in range(k)]
    m = sum(float(y.sum()) for y in want_y) / (n * k)
    assert got == pytest.approx(sum(float(((y - m) ** 2).sum()) for y in want_y))
    assert run.spilled_bytes == 0 and run.remade.get("elementwise", 0) > 0


@pytest.mark.parametrize("fuse", [False, True])
def test_the_orders_verdicts_at_the_sources_are_the_whole_rules(tmp_path, fuse):
    """The order judges only the tasks without inputs (it needs no more); each verdict must
    be the one the whole graph's rule gives, on sources of every kind: random, a literal,
    a checked file, a source that is not repeatable, and chains of pieces over them."""
    from tilegraph.plan.order import _remade_sources

    path = tmp_path / "x.npy"
    np.save(path, np.arange(600.0).reshape(20, 30))
    f = tg.from_npy(str(path), chunks=(7, 30))
    r = tg.random.random((20, 30), chunks=(3, 30), seed=4)
    lit = tg.from_array(np.ones((20, 30)), chunks=(5, 30))
    once = tg.from_array(Fresh(np.ones((20, 30))), chunks=(4, 30))
    y = (f.rechunk((5, 30)) + r - lit * once).astype(np.float32)
    g = plan_arrays([y - y.mean(axis=0), f.sum()], fuse=fuse).graph
    whole = g.remakeable()
    sources = g.in_degree() == 0
    got = _remade_sources(g)
    assert [got[i] for i in range(len(g))] == [whole[i] if sources[i] else 0
                                               for i in range(len(g))]
    assert any(got) and any(whole[i] and not sources[i] for i in range(len(g)))
