"""Culling before planning: a slice (and ``compute`` of a slice, ``tg.compute`` of several,
``persist`` of one) plans only the blocks it reads, for every kind of operation. Checked on
structure (the planned tasks are exactly those the whole plan, culled to the slice, keeps;
task counts independent of the array's size) and on values against NumPy with uneven edge
blocks."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.algebra.demand import BLOCK_RULES, LoweringPlan, lower
from tilegraph.array.lowering import lower_arrays, planning_options

SHAPE, CHUNKS = (23, 19), (5, 4)  # last blocks of 3 rows and 3 columns
RNG = np.random.default_rng(41)
X = RNG.random(SHAPE)
Y = RNG.random(SHAPE)
V = RNG.random(SHAPE[1])


def lap(b: np.ndarray) -> np.ndarray:
    """A 5-point Laplacian of the interior; the edge rows and columns kept."""
    out = b.copy()
    out[1:-1, 1:-1] = (b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
                       - 4 * b[1:-1, 1:-1])
    return out


def padded(f, mode):
    return lambda a: f(np.pad(a, 1, mode=mode))[1:-1, 1:-1]


def _x():
    return tg.from_numpy(X, chunks=CHUNKS)


def _y():
    return tg.from_numpy(Y, chunks=CHUNKS)


def _computed(a):
    """``a`` as a computed array (not views of one NumPy array: the general plans)."""
    return tg.from_numpy(a, chunks=CHUNKS) + 0


def _setitem():
    z = _x().copy()
    z[3:9, 2:13] = 7.0
    return z


def _setitem_ref():
    z = X.copy()
    z[3:9, 2:13] = 7.0
    return z


def _staged_rechunk():
    x = tg.from_numpy(X, chunks=(1, 19)) + 0
    return x.rechunk((23, 1), max_mem=4 * 23 * 8)


def _matvec():
    a = tg.from_numpy(X, chunks=(5, 6)) + 0
    return a @ tg.from_numpy(V.reshape(-1, 1), chunks=(6, 1))


B = RNG.random((19, 17))

# name -> (the lazy array, its value in NumPy); 2-D results
OPS_2D = {
    "elementwise": (lambda: (_x() + 1) * _y() - _x(), lambda: (X + 1) * Y - X),
    "broadcast": (lambda: _x() * tg.from_numpy(V, chunks=4), lambda: X * V),
    "map_blocks": (lambda: _x().map_blocks(lambda b: b * 2 + 1), lambda: X * 2 + 1),
    "map_overlap none": (lambda: _x().map_overlap(lap, depth=1), lambda: lap(X)),
    "map_overlap reflect": (lambda: _x().map_overlap(lap, depth=1, boundary="reflect"),
                            lambda: padded(lap, "symmetric")(X)),
    "map_overlap periodic": (
        lambda: _x().map_overlap(lap, depth=1, boundary="periodic").map_overlap(
            lap, depth=1, boundary="periodic"),
        lambda: padded(lap, "wrap")(padded(lap, "wrap")(X))),
    "overlap": (lambda: tg.overlap(_x(), depth=1, boundary="nearest"), None),
    "cumsum": (lambda: tg.cumsum(_x(), axis=1), lambda: np.cumsum(X, axis=1)),
    "matmul": (lambda: _computed(X) @ _computed(B.T.copy()).T, lambda: X @ B),
    "matmul panels": (lambda: tg.from_numpy(X, chunks=CHUNKS) @ tg.from_numpy(
        B, chunks=(4, 5)), lambda: X @ B),
    "matvec": (_matvec, lambda: X @ V.reshape(-1, 1)),
    "einsum": (lambda: tg.einsum("ij,kj->ik", _computed(X), _computed(Y)),
               lambda: X @ Y.T),
    "rechunk": (lambda: _computed(X).rechunk((7, 3)), lambda: X),
    "rechunk staged": (_staged_rechunk, lambda: X),
    "slice of slice": (lambda: _x()[2:][::2, ::-1], lambda: X[2:][::2, ::-1]),
    "take": (lambda: tg.take(_x(), [5, 0, 22, 7, 7, 13], axis=0),
             lambda: np.take(X, [5, 0, 22, 7, 7, 13], axis=0)),
    "concatenate": (lambda: tg.concatenate([_x(), _y()], axis=1),
                    lambda: np.concatenate([X, Y], axis=1)),
    "stack": (lambda: tg.stack([_x(), _y()], axis=1)[:, 1], lambda: Y),
    "reshape": (lambda: _computed(X).reshape(19, 23), lambda: X.reshape(19, 23)),
    "transpose": (lambda: _computed(X).T, lambda: X.T),
    "pad constant": (lambda: tg.pad(_x(), 2), lambda: np.pad(X, 2)),
    "pad reflect": (lambda: tg.pad(_x(), 2, mode="reflect"),
                    lambda: np.pad(X, 2, mode="reflect")),
    "pad edge": (lambda: tg.pad(_x(), (1, 3), mode="edge"),
                 lambda: np.pad(X, (1, 3), mode="edge")),
    "pad wrap": (lambda: tg.pad(_x(), ((7, 0), (2, 9)), mode="wrap"),
                 lambda: np.pad(X, ((7, 0), (2, 9)), mode="wrap")),
    "pad linear_ramp": (lambda: tg.pad(_x(), 2, mode="linear_ramp", end_values=5),
                        lambda: np.pad(X, 2, mode="linear_ramp", end_values=5)),
    "pad mean": (lambda: tg.pad(_x(), 2, mode="mean", stat_length=3),
                 lambda: np.pad(X, 2, mode="mean", stat_length=3)),
    "where": (lambda: tg.where(_x() > 0.5, _x(), _y()), lambda: np.where(X > 0.5, X, Y)),
    "astype": (lambda: _x().astype(np.float32), lambda: X.astype(np.float32)),
    "setitem": (_setitem, _setitem_ref),
    "zeros": (lambda: tg.zeros(SHAPE, chunks=CHUNKS), lambda: np.zeros(SHAPE)),
    "broadcast_to": (lambda: tg.broadcast_to(tg.from_numpy(V, chunks=4), SHAPE),
                     lambda: np.broadcast_to(V, SHAPE)),
    "diff": (lambda: tg.diff(_x(), axis=1, prepend=0), lambda: np.diff(X, axis=1, prepend=0)),
    "roll": (lambda: tg.roll(_x(), 3, axis=1), lambda: np.roll(X, 3, axis=1)),
    "blockwise": (lambda: tg.blockwise(np.add, "ij", _x(), "ij", tg.from_numpy(V, chunks=4),
                                       "j", dtype=float), lambda: X + V),
    "outer": (lambda: tg.outer(_x()[:, 0], tg.from_numpy(V, chunks=4)),
              lambda: np.outer(X[:, 0], V)),
    "random": (lambda: tg.random.random(SHAPE, chunks=CHUNKS, seed=3), None),
}

# name -> (the lazy array, its value); 1-D results
OPS_1D = {
    "sum axis 0": (lambda: _x().sum(axis=0), lambda: X.sum(axis=0)),
    "sum axis 1": (lambda: (_x() * 2).sum(axis=1), lambda: (X * 2).sum(axis=1)),
    "mean axis 1": (lambda: _x().mean(axis=1), lambda: X.mean(axis=1)),
    "argmax axis 0": (lambda: _x().argmax(axis=0), lambda: X.argmax(axis=0)),
    "ravel": (lambda: _computed(X).reshape(-1), lambda: X.reshape(-1)),
    "arange": (lambda: tg.arange(0, 41, chunks=6), lambda: np.arange(0, 41)),
    "diagonal": (lambda: tg.diagonal(tg.from_numpy(X[:19, :19], chunks=4) * 2),
                 lambda: np.diagonal(X[:19, :19] * 2)),
}

SLICES_2D = [np.s_[6:9, 5:7], np.s_[4:12, 14:19], np.s_[-4:, -6:-1], np.s_[::7, -1],
             np.s_[-3, :]]
SLICES_1D = [np.s_[3:9], np.s_[-3:], np.s_[::5], np.s_[7]]

OPTIONS = planning_options("tests")


def planned_keys(*arrays) -> set:
    graph, _ = lower_arrays(list(arrays), OPTIONS)
    return set(graph.keys)


def culled_keys(whole, part) -> set:
    """The tasks of ``part`` as culling the plan of ``whole`` and ``part`` together keeps
    them (the tasks planned before lowering culled)."""
    graph, results = lower_arrays([whole, part], OPTIONS)
    own = [k for k in results.keys if not (isinstance(k, tuple) and k[0]
                                           == f"store-{whole.name}")]
    return set(graph.cull(own).keys)


def check_slice(make, ref, index):
    whole = make()
    part = whole[index]
    keys = planned_keys(part)
    # exactly what the whole plan keeps for the slice, however large the whole plan
    assert keys == culled_keys(whole, part)
    assert LoweringPlan([part.collection], OPTIONS).count() + (
        part.npartitions if part.npartitions > 1 else 0) == len(keys)
    want = (np.asarray(whole.compute()) if ref is None else ref())[index]
    np.testing.assert_allclose(part.compute(), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("index", SLICES_2D, ids=str)
@pytest.mark.parametrize("op", list(OPS_2D))
def test_a_slice_plans_only_the_blocks_it_reads(op, index):
    make, ref = OPS_2D[op]
    check_slice(make, ref, index)


@pytest.mark.parametrize("index", SLICES_1D, ids=str)
@pytest.mark.parametrize("op", list(OPS_1D))
def test_a_slice_of_a_1d_result_plans_only_the_blocks_it_reads(op, index):
    make, ref = OPS_1D[op]
    check_slice(make, ref, index)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """X in an .npy file and in a zarr array, in CHUNKS."""
    where = tmp_path_factory.mktemp("cull")
    np.save(where / "x.npy", X)
    tg.from_numpy(X, chunks=CHUNKS).to_zarr(where / "x.zarr")
    return where


@pytest.mark.parametrize("reader", ["from_npy", "from_zarr"])
@pytest.mark.parametrize("index", SLICES_2D, ids=str)
def test_a_slice_of_a_file_reads_the_blocks_it_needs(stored, reader, index):
    if reader == "from_npy":
        check_slice(lambda: tg.from_npy(stored / "x.npy", chunks=CHUNKS) * 2,
                    lambda: X * 2, index)
    else:
        check_slice(lambda: tg.from_zarr(stored / "x.zarr") * 2, lambda: X * 2, index)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128])
def test_values_of_sliced_chains_in_several_dtypes(dtype):
    a = (X * 100).astype(dtype)
    x = tg.from_numpy(a, chunks=CHUNKS)
    y = ((x + 1) * 3).map_overlap(lambda b: b + np.roll(b, 1, axis=0), depth={0: (1, 0)})
    got = y[4:11, 17:].compute()
    b = (a + 1) * 3
    assert got.dtype == b.dtype
    np.testing.assert_allclose(got, (b + np.roll(b, 1, axis=0))[4:11, 17:], rtol=1e-6)


def test_a_whole_result_plans_every_block():
    x = _x()
    y = (x + 1).sum(axis=0)
    assert planned_keys(y) == set(lower_arrays([y], OPTIONS)[0].cull(
        lower_arrays([y], OPTIONS)[1].keys).keys)
    assert sum(1 for k in planned_keys(y) if k[0] == x.name) == x.npartitions


# -- compute, tg.compute, persist ------------------------------------------------------------


def refused_at(run) -> int:
    """The task count a plan of ``run(max_tasks=1)`` is refused with."""
    with pytest.raises(ValueError, match="the plan has") as info:  # PlanTooLargeError
        run(1)
    return int(str(info.value).split(" tasks")[0].rsplit(" ", 1)[1].replace(",", ""))


def test_compute_of_a_slice_plans_its_tasks_only():
    x = tg.random.random((400, 300), chunks=(10, 10), seed=4)
    y = np.sin(x) * 2 + x
    part = y[95:105, 7]  # two blocks of x: (9, 0) and (10, 0)
    n = refused_at(lambda m: part.compute(max_tasks=m))
    # per block: random, sin, multiply, add, getitem; a store each (two blocks)
    assert n == 2 * 5 + 2
    got = part.compute(max_tasks=n)
    xs = x[90:110, 0:10].compute()
    np.testing.assert_allclose(got, (np.sin(xs) * 2 + xs)[5:15, 7])
    whole = refused_at(lambda m: y.compute(max_tasks=m))
    assert whole == x.npartitions * 4 + x.npartitions  # and a store per block


def test_compute_of_several_slices_plans_their_union():
    x = tg.random.random((400, 300), chunks=(10, 10), seed=5)
    y = x * 3
    a, b = y[0, :15], y[3:5, 12:14]  # both read blocks (0, 0) and (0, 1) of y
    n = refused_at(lambda m: tg.compute(a, b, max_tasks=m))
    # random and multiply of the two blocks; a getitem per block of each slice, a store
    # per block of a (two blocks), none for b (one)
    assert n == 2 * 2 + 2 + 1 + 2
    got_a, got_b = tg.compute(a, b, max_tasks=n)
    ref = x[:10, :20].compute() * 3
    np.testing.assert_allclose(got_a, ref[0, :15])
    np.testing.assert_allclose(got_b, ref[3:5, 12:14])


def test_persist_of_a_slice_plans_its_tasks_only():
    x = tg.random.random((400, 300), chunks=(10, 10), seed=6)
    part = (x - 1)[15:32, -3:]
    n = refused_at(lambda m: part.persist(max_tasks=m))
    assert n == 3 * 3  # three blocks of x: random, subtract, getitem
    p = part.persist(max_tasks=n)
    np.testing.assert_allclose(p.compute(), x[10:40, 290:].compute()[5:22, -3:] - 1)
    assert planned_keys(p[2:4]) <= {*planned_keys(p), *(k for k in planned_keys(p[2:4])
                                                        if k[0].startswith("getitem"))}


def test_map_overlap_slice_of_a_large_array_plans_a_few_tasks():
    # 10000^2 in 100^2 blocks: 10^4 blocks, 10^5 tasks when planned whole
    x = tg.random.random((10_000, 10_000), chunks=100, seed=7)
    y = x.map_overlap(lap, depth=1)
    part = y[95:105, 99]  # rows across blocks 0 and 1 of column block 0
    n = refused_at(lambda m: part.compute(max_tasks=m))
    # per output block: getitem, trim, map, overlap (2 each); the slabs of their
    # neighbours (3 for block (0, 0) at the corner, 5 for (1, 0)); the 6 random blocks
    # they cut from; a store per block
    assert n == 2 * 4 + 3 + 5 + 6 + 2
    assert LoweringPlan([y.collection], OPTIONS).count() > 100_000
    got = part.compute(max_tasks=n)
    ref = lap(x[:300, :300].compute())
    np.testing.assert_allclose(got, ref[95:105, 99])


# -- size independence -----------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 7])
def test_a_k_block_slice_of_an_elementwise_chain_plans_o_of_k_tasks(k):
    counts = []
    for n in (10, 1_000, 5_000):  # blocks per axis: up to 2.5 10^7 blocks
        x = tg.random.random((10 * n, 10 * n), chunks=10, seed=1)
        y = tg.random.random((10 * n, 10 * n), chunks=10, seed=2)
        z = ((x + 1) * y - x / 2) ** 2
        part = z[5, 3:3 + 10 * (k - 1) + 1]  # k blocks along a row
        counts.append(LoweringPlan([part.collection], OPTIONS).count())
    # two sources, five elementwise steps and the getitem per block, whatever the size
    assert counts == [8 * k] * 3
    assert len(lower([part.collection], options=OPTIONS).build()) == 8 * k


def test_every_operator_of_the_algebra_has_a_rule():
    from tilegraph import algebra

    for op in ("source", "map", "apply", "remap", "flat_map", "join", "reduce",
               "group_by_join"):
        assert op in BLOCK_RULES
    assert algebra.map_blocks("m", abs, [algebra.source("s", (2,), lambda c: (abs, (1,)))],
                              (2,)).op == "map"


@pytest.mark.parametrize("op", ["elementwise", "map_overlap reflect", "matmul", "cumsum"])
def test_a_block_of_a_result_plans_what_it_reads(op):
    make, ref = OPS_2D[op]
    whole = make()
    part = whole.blocks[1, -1]  # a block of the result (x.blocks), uneven along axis 1
    assert planned_keys(part) == culled_keys(whole, part)
    rows, cols = (np.cumsum((0, *c)) for c in whole.chunks)
    np.testing.assert_allclose(part.compute(), ref()[rows[1]:rows[2], cols[-2]:cols[-1]])
