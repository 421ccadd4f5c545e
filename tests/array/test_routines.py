"""The routines dask.array has beside NumPy's ufuncs (tilegraph.array.routines and the
dask names answered with a pointer): each against NumPy on uneven blocks for several
dtypes, through tg.<name> and np.<name> (``__array_function__``), and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg

rng = np.random.default_rng(12)
BASE = rng.standard_normal((7, 5)) * 4


def data(dtype):
    if np.dtype(dtype).kind == "b":
        return BASE > 0
    if np.dtype(dtype).kind == "c":
        return (BASE + 1j * BASE[::-1]).astype(dtype)
    return BASE.astype(dtype)


def x_of(a, chunks=((3, 3, 1), (2, 2, 1))):
    return tg.from_numpy(a, chunks=chunks)


def same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w)
        return
    assert isinstance(got, tg.Array), type(got)
    value = got.compute()
    assert value.shape == np.shape(want), (value.shape, np.shape(want))
    assert value.dtype == np.asarray(want).dtype, (value.dtype, np.asarray(want).dtype)
    if value.dtype.kind in "fc":
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(value, want)


# name -> f(xp, a, b): the same call with xp = tilegraph (a, b tilegraph arrays) and with
# xp = NumPy (a, b NumPy arrays)
CALLS = {
    "append": lambda xp, a, b: (xp.append(a, b, axis=0), xp.append(a, b)),
    "delete": lambda xp, a, b: (xp.delete(a, [0, 6, 3], axis=0), xp.delete(a, 1, axis=1),
                                xp.delete(a, slice(1, 5, 2)), xp.delete(a, -1, axis=0)),
    "insert": lambda xp, a, b: (xp.insert(a, 2, a[0], axis=0), xp.insert(a, [1, 1, 5], 0,
                                                                         axis=1),
                                xp.insert(a, [6, 0], b[:2], axis=0), xp.insert(a, 3, 9),
                                xp.insert(a, slice(0, 4, 2), 7, axis=1)),
    "block": lambda xp, a, b: (xp.block([[a, b], [b, a]]), xp.block([a[0], b[1]])),
    "broadcast_arrays": lambda xp, a, b: xp.broadcast_arrays(a, b[0]),
    "diag": lambda xp, a, b: (xp.diag(a), xp.diag(a, 2), xp.diag(a, -3), xp.diag(a[0]),
                              xp.diag(a[0], -2), xp.diag(a[:, 1], 3)),
    "diagonal": lambda xp, a, b: (xp.diagonal(a, 1), xp.diagonal(a, -2),
                                  xp.diagonal(xp.stack([a, b]), 0, 1, 2)),
    "trace": lambda xp, a, b: (xp.trace(a, 1), xp.trace(xp.stack([a, b]), 0, 0, 2)),
    "tril": lambda xp, a, b: (xp.tril(a, -1), xp.triu(a, 2), xp.tril(xp.stack([a, b]))),
    "meshgrid": lambda xp, a, b: (*xp.meshgrid(a[0], a[:, 0]),
                                  *xp.meshgrid(a[0], b[:, 1], indexing="ij", sparse=True)),
    "rot90": lambda xp, a, b: (xp.rot90(a), xp.rot90(a, 2), xp.rot90(a, -1),
                               xp.rot90(xp.stack([a, b]), 1, (0, 2))),
    "rollaxis": lambda xp, a, b: (xp.rollaxis(xp.stack([a, b]), 2),
                                  xp.rollaxis(xp.stack([a, b]), 0, 3)),
    "tile": lambda xp, a, b: (xp.tile(a, 2), xp.tile(a[0], (2, 1, 3))),
    "repeat": lambda xp, a, b: (xp.repeat(a, 2, axis=0), xp.repeat(a, [1, 0, 2, 1, 3],
                                                                   axis=1), xp.repeat(a, 2)),
    "ediff1d": lambda xp, a, b: (xp.ediff1d(a), xp.ediff1d(a[0], to_begin=[0], to_end=[9])),
    "union1d": lambda xp, a, b: xp.union1d(a[0], b[:, 2]),
    "vdot": lambda xp, a, b: xp.vdot(a, b),
    "choose": lambda xp, a, b: xp.choose((a > 0).astype(int), [a, b]),
    "select": lambda xp, a, b: xp.select([a > 1, a < -1], [a, b], 0),
    "apply_over_axes": lambda xp, a, b: xp.apply_over_axes(xp.sum, xp.stack([a, b]), [0, 2]),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int16,
                                   np.complex128, np.bool_])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_routines_match_numpy_through_both_doors(name, dtype):
    a, b = data(dtype), data(dtype)[::-1].copy()
    if name in ("union1d",) and np.dtype(dtype).kind == "c":
        return
    try:
        want = CALLS[name](np, a, b)
    except (TypeError, ValueError):
        return  # NumPy refuses this dtype too
    got_tg = CALLS[name](tg, x_of(a), x_of(b))
    with tg.config.set(backend="sync"):
        same(got_tg, want)
    # np.<name> on tilegraph arrays dispatches (where NumPy has the name)
    if name not in ("trace",):
        class ViaNumPy:
            def __getattr__(self, attr):
                return getattr(np, attr)
        got_np = CALLS[name](ViaNumPy(), x_of(a), x_of(b))
        with tg.config.set(backend="sync"):
            same(got_np, want)


def test_creation_routines_match_numpy(forbid_compute):
    made = {
        "indices": (tg.indices((4, 3), chunks=2), np.indices((4, 3))),
        "indices-f": (tg.indices((3, 2), dtype=float), np.indices((3, 2), dtype=float)),
        "tri": (tg.tri(7, 5, -1, chunks=3), np.tri(7, 5, -1)),
        "tri-int": (tg.tri(4, dtype=int, chunks=3), np.tri(4, dtype=int)),
        "fromfunction": (tg.fromfunction(lambda i, j: i * 10 + j, shape=(5, 4), chunks=3,
                                         dtype=int),
                         np.fromfunction(lambda i, j: i * 10 + j, (5, 4), dtype=int)),
        "empty_like": (tg.empty_like(x_of(BASE)).shape, (7, 5)),
        "full_like": (tg.full_like(x_of(BASE), 3, dtype=np.int8), np.full((7, 5), 3, np.int8)),
        "array": (tg.array([[1, 2], [3, 4]], ndmin=3), np.array([[1, 2], [3, 4]], ndmin=3)),
    }
    for name, (got, want) in made.items():
        if isinstance(got, tuple):
            assert got == want, name
            continue
        with tg.config.set(backend="sync"):
            same(got, want)
    rows, cols = tg.tril_indices(5, 1, 4, chunks=3)
    wr, wc = np.tril_indices(5, 1, 4)
    with tg.config.set(backend="sync"):
        same((rows, cols), (wr, wc))
        same(tg.triu_indices_from(tg.from_numpy(BASE[:5], chunks=2), 1),
             np.triu_indices_from(BASE[:5], 1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_coarsen_moment_digitize_piecewise_push(dtype):
    a = np.arange(48, dtype=dtype).reshape(6, 8)
    x = tg.from_numpy(a, chunks=(4, 3))  # blocks not multiples of the factors: recut
    same(tg.coarsen(np.sum, x, {0: 2, 1: 4}), a.reshape(3, 2, 2, 4).sum(axis=(1, 3)))
    same(tg.coarsen(np.mean, tg.from_numpy(a[:5], chunks=2), {0: 2}, trim_excess=True),
         a[:4].reshape(2, 2, 8).mean(axis=1))
    g = data(dtype)
    xg = x_of(g)
    centred = g.astype(np.var(np.ones(1, dtype)).dtype) - g.mean(axis=0)
    same(tg.moment(xg, 3, axis=0), (centred ** 3).mean(axis=0).astype(centred.dtype))
    same(tg.digitize(xg, np.array([-2, 0, 3])), np.digitize(g, np.array([-2, 0, 3])))
    same(tg.piecewise(xg, [xg < 0, xg >= 0], [lambda v: -v, lambda v: v * 2]),
         np.piecewise(g, [g < 0, g >= 0], [lambda v: -v, lambda v: v * 2]))
    if np.dtype(dtype).kind == "f":
        import pandas as pd

        holes = np.where(BASE > 1, np.nan, BASE).astype(dtype)
        same(tg.push(x_of(holes), None, axis=0), pd.DataFrame(holes).ffill().to_numpy())
        same(tg.push(x_of(holes), 1, axis=0),
             pd.DataFrame(holes).ffill(limit=1).to_numpy())


def test_histograms_of_several_dimensions():
    pts = rng.standard_normal((50, 3))
    x = tg.from_numpy(pts, chunks=(17, 3))
    h, edges = tg.histogramdd(x, bins=(3, 4, 5), range=[(-2, 2)] * 3)
    wh, wedges = np.histogramdd(pts, bins=(3, 4, 5), range=[(-2, 2)] * 3)
    same(h, wh)
    for e, w in zip(edges, wedges, strict=True):
        np.testing.assert_allclose(e, w)
    h2, ex, ey = np.histogram2d(x[:, 0], x[:, 1], bins=5, weights=x[:, 2], density=True)
    w2, wx, wy = np.histogram2d(pts[:, 0], pts[:, 1], bins=5, weights=pts[:, 2],
                                density=True)
    same(h2, w2)
    np.testing.assert_allclose(ex, wx)
    np.testing.assert_allclose(ey, wy)
    h3, _ = tg.histogramdd([x[:, 0], x[:, 1]], bins=[np.array([-3, 0, 3]), 2])
    same(h3, np.histogramdd([pts[:, 0], pts[:, 1]], bins=[np.array([-3, 0, 3]), 2])[0])


def test_reduction_shuffle_unify_chunks_and_assert_eq():
    x = x_of(BASE)
    same(tg.reduction(x, np.max, np.max, axis=1), BASE.max(axis=1))
    same(tg.reduction(x, np.sum, np.sum, axis=(0, 1), keepdims=True, split_every=2),
         BASE.sum(keepdims=True))
    same(tg.shuffle(x, [[4, 0], [6, 1, 2], [3, 5]], axis=0), BASE[[4, 0, 6, 1, 2, 3, 5]])
    y = tg.from_numpy(BASE, chunks=((2, 5), (5,)))
    chunkss, (a, b) = tg.unify_chunks(x, "ij", y, "ij")
    assert chunkss == {"i": (2, 1, 3, 1), "j": (2, 2, 1)}
    assert a.chunks == b.chunks == ((2, 1, 3, 1), (2, 2, 1))
    assert tg.assert_eq(x * 2, BASE * 2)
    with pytest.raises(AssertionError):
        tg.assert_eq(x, BASE + 1)
    assert tg.result_type(x.astype(np.float32), np.int64) == np.result_type(np.float32,
                                                                            np.int64)
    assert tg.shape(x) == (7, 5) and tg.ndim(x) == 2 and np.shape(x) == (7, 5)


def test_bad_input_names_the_problem_and_computes_nothing(forbid_compute):
    x = x_of(BASE)
    lazy = tg.from_numpy(np.array([0, 2]))
    with pytest.raises(TypeError, match="not a lazy tilegraph array"):
        tg.delete(x, lazy, axis=0)
    with pytest.raises(TypeError, match="not a lazy tilegraph array"):
        tg.digitize(x, lazy)
    with pytest.raises(TypeError, match="not a lazy tilegraph array"):
        tg.repeat(x, lazy)
    with pytest.raises(IndexError, match="out of bounds"):
        tg.insert(x, 9, 0.0, axis=0)
    with pytest.raises(IndexError, match="boolean"):
        tg.insert(x, np.array([True, False]), 0.0, axis=0)
    with pytest.raises(ValueError, match="do not align"):
        tg.coarsen(np.sum, x, {0: 2})
    with pytest.raises(ValueError, match="same length"):
        tg.select([x > 0], [x, x])
    with pytest.raises(TypeError, match="boolean"):
        tg.select([x], [x])
    with pytest.raises(ValueError, match="different depths"):
        tg.block([[x], x])
    with pytest.raises(TypeError, match="tuple"):
        tg.block((x, x))
    with pytest.raises(ValueError, match="1- or 2-d"):
        tg.diag(tg.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="axis1 and axis2"):
        tg.diagonal(x, 0, 1, 1)
    with pytest.raises(ValueError, match="axes must be different"):
        tg.rot90(x, 1, (0, 0))
    with pytest.raises(TypeError, match="concatenate=False"):
        tg.reduction(x, np.sum, np.sum, concatenate=False)
    with pytest.raises(ValueError, match="pairs"):
        tg.unify_chunks(x, "ij", x)
    with pytest.raises(ValueError, match="order must be an integer"):
        tg.moment(x, -1)
    with pytest.raises(ValueError, match="n must be non-negative"):
        tg.push(x, -1, axis=0)


def test_names_without_a_tilegraph_meaning_point_at_the_alternative():
    for call, hint in ((lambda: tg.from_delayed(1, (2,), float), "tg.from_dask"),
                       (lambda: tg.frompyfunc(abs, 1, 1), "tg.gufunc"),
                       (lambda: tg.from_tiledb("uri"), "tg.from_array"),
                       (lambda: tg.to_tiledb(tg.ones(2), "uri"), "tg.store"),
                       (lambda: tg.register_chunk_type(list), "NumPy arrays"),
                       (lambda: tg.ones(2).to_delayed(), "to_dask().to_delayed()"),
                       (lambda: tg.ones(2).to_dask_dataframe(), "to_dask_dataframe"),
                       (lambda: tg.ones(2).to_svg(), "visualize")):
        with pytest.raises(TypeError, match=hint.replace("(", r"\(").replace(")", r"\)")):
            call()
    with pytest.warns(FutureWarning, match="blockwise"):
        out = tg.atop(np.add, "i", tg.ones(3), "i", tg.ones(3), "i", dtype=float)
    np.testing.assert_array_equal(out.compute(), [2.0, 2.0, 2.0])
    window = tg.lib.stride_tricks.sliding_window_view(tg.from_numpy(np.arange(5.0)), 3)
    np.testing.assert_array_equal(window.compute(),
                                  np.lib.stride_tricks.sliding_window_view(np.arange(5.0), 3))


def test_array_methods_of_dask():
    x = x_of(BASE)
    same(x.view(np.int64), BASE.view(np.int64))
    f32 = tg.from_numpy(BASE.astype(np.float32), chunks=(3, 2))
    same(f32.view(np.uint16), BASE.astype(np.float32).view(np.uint16))
    with pytest.raises(ValueError, match="whole number"):
        f32.view(np.float64)
    same(x.moment(2, axis=1), BASE.var(axis=1))
    same(x.repeat(2, axis=1), BASE.repeat(2, axis=1))
    same(tg.from_numpy(np.array([0, 1, 1]), chunks=2).choose([np.arange(3), -np.arange(3)]),
         np.array([0, -1, -2]))
    same(x.shuffle([[1, 0]], axis=1), BASE[:, [1, 0]])
    assert x.A is x and x.compute_chunk_sizes() is x
    assert x.partitions[0, 1].shape == (3, 2)
    assert format(tg.from_numpy(np.float64(2.5)), ".2f") == "2.50"
    with pytest.raises(TypeError, match="0-d"):
        format(x, ".2f")
