"""xarray's chunk manager for tilegraph: registration, chunking, arithmetic, reductions,
apply_ufunc with core dimensions, to_zarr/to_netcdf (also with compute=False),
open_dataset/open_zarr through ``chunked_array_type="tilegraph"``, window/weighted ops,
outer indexing and interp, and groupby (shuffle_to_chunks, chunked groupers, datetime
means)."""

import importlib.metadata as md
import inspect
import pathlib
import tomllib
import warnings

import numpy as np
import pytest

import tilegraph as tg

xr = pytest.importorskip("xarray")
from xarray.namedarray import parallelcompat  # noqa: E402

from tilegraph.interop.xarray import StoreWrites, TilegraphManager  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _declared_entry_point() -> md.EntryPoint:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    value = meta["project"]["entry-points"]["xarray.chunkmanagers"]["tilegraph"]
    return md.EntryPoint(name="tilegraph", value=value, group="xarray.chunkmanagers")


@pytest.fixture
def registered(monkeypatch):
    """xarray sees the entry point pyproject.toml declares (as an installed package would
    show it), whatever the state of the installed metadata."""
    ep = _declared_entry_point()
    real = parallelcompat.entry_points

    def entry_points(**kw):
        eps = [e for e in real(**kw) if e.name != "tilegraph"]
        if kw.get("group") == "xarray.chunkmanagers":
            eps.append(ep)
        return md.EntryPoints(eps)

    monkeypatch.setattr(parallelcompat, "entry_points", entry_points)
    return ep


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    a = rng.random((20, 13))
    w = np.arange(20.0)
    ds = xr.Dataset({"v": (("x", "y"), a), "w": (("x",), w)},
                    coords={"x": np.arange(20), "y": np.arange(13) * 0.5})
    return ds, a, w


def test_entry_point_is_declared_and_loads(registered):
    assert registered.load() is TilegraphManager
    managers = parallelcompat.list_chunkmanagers()
    assert isinstance(managers["tilegraph"], TilegraphManager)
    x = tg.ones((4, 4), chunks=2)
    # tilegraph arrays are dask collections too, but only one manager may claim them
    chosen = parallelcompat.get_chunked_array_type(x)
    assert isinstance(chosen, TilegraphManager)
    assert not managers["dask"].is_chunked_array(x)


def test_chunk_arithmetic_and_reductions(registered, data):
    ds, a, w = data
    c = ds.chunk({"x": 7, "y": 5}, chunked_array_type="tilegraph")
    assert isinstance(c.v.data, tg.Array) and c.v.data.chunks == ((7, 7, 6), (5, 5, 3))
    expr = (c.v * 2 + c.w) ** 2
    assert isinstance(expr.data, tg.Array)  # lazy until computed
    np.testing.assert_allclose(expr.values, (a * 2 + w[:, None]) ** 2)
    np.testing.assert_allclose(expr.mean("y", skipna=False).compute().values,
                               ((a * 2 + w[:, None]) ** 2).mean(axis=1))
    np.testing.assert_allclose(c.v.sum(skipna=False).values, a.sum())
    np.testing.assert_allclose(c.v.max("x", skipna=False).values, a.max(axis=0))
    np.testing.assert_allclose(c.v.std("x", skipna=False).values, a.std(axis=0))
    np.testing.assert_allclose(c.v.isel(x=slice(3, 15)).T.values, a[3:15].T)
    holes = ds.v.where(ds.v > 0.2).chunk({"x": 7}, chunked_array_type="tilegraph")
    assert isinstance(holes.data, tg.Array)
    b = np.where(a > 0.2, a, np.nan)
    np.testing.assert_allclose(holes.mean("x").values, np.nanmean(b, axis=0))  # skips NaN
    np.testing.assert_allclose(holes.std("y", ddof=1).values, np.nanstd(b, axis=1, ddof=1))
    persisted = c.persist()
    assert isinstance(persisted.v.data, tg.Array)
    np.testing.assert_allclose(persisted.v.values, a)
    sin = xr.apply_ufunc(np.sin, c.v, dask="parallelized", output_dtypes=[float])
    assert isinstance(sin.data, tg.Array)
    np.testing.assert_allclose(sin.values, np.sin(a))
    re = c.v.chunk({"x": 10}, chunked_array_type="tilegraph")
    assert re.data.chunks[0] == (10, 10)
    wrapped = xr.DataArray(tg.from_numpy(a, chunks=(6, 13)), dims=("x", "y"))
    assert wrapped.chunks == ((6, 6, 6, 2), (13,))
    total = (wrapped + 1).sum("x", skipna=False)
    assert isinstance(total.data, tg.Array)
    np.testing.assert_allclose(total.values, (a + 1).sum(axis=0))


def test_to_zarr_and_open_back(registered, data, tmp_path):
    ds, a, w = data
    c = ds.chunk({"x": 5}, chunked_array_type="tilegraph")
    (c * 3).to_zarr(tmp_path / "out.zarr", consolidated=False)
    back = xr.open_zarr(tmp_path / "out.zarr", chunks={}, chunked_array_type="tilegraph",
                        consolidated=False)
    assert isinstance(back.v.data, tg.Array)
    np.testing.assert_allclose(back.v.values, a * 3)
    np.testing.assert_allclose(back.w.values, w * 3)


def test_open_dataset_reads_lazily(registered, data, tmp_path):
    ds, a, w = data
    ds.to_netcdf(tmp_path / "f.nc")
    with xr.open_dataset(tmp_path / "f.nc", chunks={"x": 6},
                         chunked_array_type="tilegraph") as o:
        assert isinstance(o.v.data, tg.Array) and o.v.data.chunks[0] == (6, 6, 6, 2)
        np.testing.assert_allclose((o.v - o.w).min("x", skipna=False).values,
                                   (a - w[:, None]).min(axis=0))


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_manager_reduction_and_unify_chunks(dtype):
    m = TilegraphManager()
    a = (np.random.default_rng(1).random((9, 8)) * 10).astype(dtype)
    x = tg.from_numpy(a, chunks=(4, 3))
    got = m.reduction(x, np.sum, aggregate_func=np.sum, axis=0, dtype=dtype)
    np.testing.assert_allclose(got.compute(), a.sum(axis=0))
    kept = m.reduction(x, np.max, axis=(0, 1), dtype=dtype, keepdims=True)
    assert kept.compute().shape == (1, 1) and kept.compute()[0, 0] == a.max()
    y = tg.from_numpy(a, chunks=(3, 8))
    common, (x2, y2) = m.unify_chunks(x, "ij", y, "ij")
    assert x2.chunks == y2.chunks == ((3, 1, 2, 2, 1), (3, 3, 2))
    assert common == {"i": (3, 1, 2, 2, 1), "j": (3, 3, 2)}
    assert m.normalize_chunks({0: 4}, shape=(9, 8)) == ((4, 4, 1), (8,))
    summed = m.map_blocks(lambda b: b.sum(axis=0), x, drop_axis=0, dtype=dtype)
    np.testing.assert_allclose(summed.compute(), a.sum(axis=0))
    assert summed.chunks == ((3, 3, 2),)
    tripled = m.map_blocks(lambda b: np.stack([b, b + 1, b + 2]), x, new_axis=0,
                           chunks=(3, 4, 3), dtype=dtype)
    assert tripled.chunks == ((3,), (4, 4, 1), (3, 3, 2))
    np.testing.assert_array_equal(tripled.compute(), np.stack([a, a + 1, a + 2]))
    both = m.map_blocks(lambda b: b.sum(axis=0)[:, None], x, drop_axis=0, new_axis=1,
                        dtype=dtype)  # as in dask, the new axes after the dropped ones
    assert both.chunks == ((3, 3, 2), (1,))
    np.testing.assert_allclose(both.compute(), a.sum(axis=0)[:, None])
    out = np.zeros((12, 8), dtype=dtype)
    m.store([x], [out], regions=[(slice(3, 12), slice(0, 8))])
    np.testing.assert_array_equal(out[3:], a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_apply_ufunc_with_core_dimensions(registered, dtype):
    a = (np.random.default_rng(2).standard_normal((20, 13)) * 10).astype(dtype)
    da = xr.DataArray(a, dims=("x", "y"), coords={"x": np.arange(20)})
    c = da.chunk({"x": 7, "y": 5}, chunked_array_type="tilegraph")
    # a reduction along the core dimension "x"; xarray refuses a split core dimension
    with pytest.raises(ValueError, match="dimension x on 0th function argument"):
        xr.apply_ufunc(lambda b: b.sum(-1), c, input_core_dims=[["x"]],
                       dask="parallelized", output_dtypes=[dtype])
    total = xr.apply_ufunc(lambda b: b.sum(-1), c, input_core_dims=[["x"]],
                           dask="parallelized", output_dtypes=[dtype],
                           dask_gufunc_kwargs={"allow_rechunk": True})
    assert isinstance(total.data, tg.Array) and total.dims == ("y",)
    assert total.data.chunks == ((5, 5, 3),)
    np.testing.assert_allclose(total.values, a.sum(axis=0), rtol=1e-5 if dtype == np.float32
                               else 1e-12)
    whole = c.chunk({"x": -1}, chunked_array_type="tilegraph")
    # a per-row sort "(i)->(i)": the core dimension comes back last
    srt = xr.apply_ufunc(lambda b: np.sort(b, axis=-1), whole, input_core_dims=[["x"]],
                         output_core_dims=[["x"]], dask="parallelized", output_dtypes=[dtype])
    assert isinstance(srt.data, tg.Array) and srt.dims == ("y", "x")
    np.testing.assert_array_equal(srt.values, np.sort(a, axis=0).T)
    # a new output core dimension whose size comes from output_sizes
    rng_ = xr.apply_ufunc(lambda b: np.stack([b.min(-1), b.max(-1)], axis=-1), whole,
                          input_core_dims=[["x"]], output_core_dims=[["bound"]],
                          dask="parallelized", output_dtypes=[dtype],
                          dask_gufunc_kwargs={"output_sizes": {"bound": 2}})
    assert rng_.dims == ("y", "bound") and rng_.data.chunks == ((5, 5, 3), (2,))
    np.testing.assert_array_equal(rng_.values, np.stack([a.min(0), a.max(0)], axis=-1))
    # two outputs from one call per block
    lo, hi = xr.apply_ufunc(lambda b: (b.min(-1), b.max(-1)), whole, input_core_dims=[["x"]],
                            output_core_dims=[[], []], dask="parallelized",
                            output_dtypes=[dtype, dtype])
    assert isinstance(lo.data, tg.Array) and isinstance(hi.data, tg.Array)
    np.testing.assert_array_equal(lo.values, a.min(0))
    np.testing.assert_array_equal(hi.values, a.max(0))
    # vectorize=True with a NumPy function of one row, two arguments
    xs = xr.DataArray(np.arange(20.0), dims="x")
    fit = xr.apply_ufunc(np.polyfit, xs, whole, 1, input_core_dims=[["x"], ["x"], []],
                         output_core_dims=[["deg"]], vectorize=True, dask="parallelized",
                         output_dtypes=[float], dask_gufunc_kwargs={"output_sizes": {"deg": 2}})
    assert isinstance(fit.data, tg.Array) and fit.dims == ("y", "deg")
    np.testing.assert_allclose(fit.values, np.polyfit(np.arange(20.0), a, 1).T,
                               rtol=1e-6, atol=1e-9)


def test_manager_apply_gufunc_against_numpy():
    m = TilegraphManager()
    rng = np.random.default_rng(5)
    mats = rng.random((7, 3, 3)) + 3 * np.eye(3)
    x = tg.from_numpy(mats, chunks=(3, 3, 3))
    np.testing.assert_allclose(m.apply_gufunc(np.linalg.det, "(m,m)->()", x).compute(),
                               np.linalg.det(mats))
    v = rng.random((7, 5))
    y = tg.from_numpy(v, chunks=(2, 2))
    got = m.apply_gufunc(np.vecdot, "(i),(i)->()", y, y, axis=0, keepdims=True,
                         allow_rechunk=True)
    np.testing.assert_allclose(got.compute(), np.vecdot(v, v, axis=0, keepdims=True))
    with pytest.raises(ValueError, match=r"core dimension 'i' .*allow_rechunk=True"):
        m.apply_gufunc(np.vecdot, "(i),(i)->()", y, y)
    with pytest.raises(ValueError, match="not a gufunc signature"):
        m.apply_gufunc(np.vecdot, "(i),(i)=>()", y, y)
    with pytest.raises(ValueError, match="output_sizes"):
        m.apply_gufunc(lambda b: b, "(i)->(k)", y, allow_rechunk=True)


def test_to_zarr_compute_false_writes_on_compute(registered, data, tmp_path):
    pytest.importorskip("dask")  # xarray wraps the delayed writes in dask.delayed
    zarr = pytest.importorskip("zarr")
    ds, a, w = data
    c = ds.chunk({"x": 6}, chunked_array_type="tilegraph") * 3
    path = tmp_path / "lazy.zarr"
    delayed = c.to_zarr(path, compute=False, consolidated=False)
    group = zarr.open_group(path, mode="r")
    assert group["v"].shape == (20, 13) and group["v"].nchunks_initialized == 0
    assert np.isnan(group["v"][:]).all()  # metadata only: every element is the fill value
    assert delayed.compute() is None
    back = xr.open_zarr(path, chunks={}, chunked_array_type="tilegraph", consolidated=False)
    np.testing.assert_allclose(back.v.values, a * 3)
    np.testing.assert_allclose(back.w.values, w * 3)


def test_to_netcdf_compute_false_writes_on_compute(registered, data, tmp_path):
    pytest.importorskip("dask")
    ds, a, w = data
    c = ds.chunk({"x": 6}, chunked_array_type="tilegraph") + 1
    delayed = c.to_netcdf(tmp_path / "lazy.nc", compute=False)
    delayed.compute()
    with xr.open_dataset(tmp_path / "lazy.nc") as back:
        np.testing.assert_allclose(back.v.values, a + 1)
        np.testing.assert_allclose(back.w.values, w + 1)


def test_manager_store_compute_false_is_lazy():
    m = TilegraphManager()
    a = np.arange(35.0).reshape(5, 7)
    x = tg.from_numpy(a, chunks=(2, 3)) * 2
    out = np.zeros((5, 7))
    part = np.zeros((9, 7))
    writes = m.store([x, x], [out, part], compute=False,
                     regions=[None, (slice(4, 9), slice(0, 7))])
    assert isinstance(writes, StoreWrites)
    assert not out.any() and not part.any()  # nothing written before compute
    assert writes.compute(backend="sync") is None
    np.testing.assert_array_equal(out, a * 2)
    np.testing.assert_array_equal(part[4:], a * 2)
    assert not part[:4].any()
    # a dask collection of one task: dask.compute runs the writes
    dask = pytest.importorskip("dask")
    again = np.zeros((5, 7))
    lazy = m.store(x + 1, again, compute=False)
    assert not again.any()
    dask.compute(lazy)
    np.testing.assert_array_equal(again, a * 2 + 1)


def test_manager_store_bad_input():
    m = TilegraphManager()
    x = tg.from_numpy(np.ones((4, 3)), chunks=2)
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        m.store([x, x], [np.empty((4, 3))], compute=False)
    with pytest.raises(ValueError, match=r"target #0 has shape \(4, 4\) but its source has "
                                         r"shape \(4, 3\)"):
        m.store([x], [np.empty((4, 4))], compute=False)
    with pytest.raises(ValueError, match=r"region #0 .* has shape \(2, 3\)"):
        m.store([x], [np.empty((8, 3))], regions=[(slice(0, 2), slice(0, 3))],
                compute=False)
    with pytest.raises(ValueError, match="must be a tuple of 2 slices"):
        m.store([x], [np.empty((8, 3))], regions=[(slice(0, 4),)], compute=False)
    with pytest.raises(TypeError, match=r"return_stored=True\) is not supported"):
        m.store([x], [np.empty((4, 3))], return_stored=True)
    with pytest.raises(TypeError, match="does not support target"):
        m.store([x], [object()], compute=False)
    with pytest.raises((TypeError, ValueError), match="no_such_option"):
        m.store([x], [np.empty((4, 3))], compute=False, no_such_option=1)


@pytest.mark.parametrize(("name", "op"), [
    ("rolling mean", lambda d: d.rolling(x=3).mean()),
    ("centred rolling sum", lambda d: d.rolling(x=4, center=True).sum()),
    ("rolling max, min_periods", lambda d: d.rolling(x=3, min_periods=1).max()),
    ("rolling over two dims", lambda d: d.rolling(x=3, y=2).mean()),
    ("rolling construct", lambda d: d.rolling(x=3).construct("window")),
    ("weighted mean", lambda d: d.weighted(xr.DataArray(np.arange(13.0), dims="y")).mean("y")),
    ("shift", lambda d: d.shift(x=2)),
    ("roll", lambda d: d.roll(x=-3)),
    ("pad wrap", lambda d: d.pad(x=(1, 2), mode="wrap")),
    ("idxmax", lambda d: d.idxmax("x")),
    ("quantile", lambda d: d.quantile([0.3, 0.5], dim="x")),
    ("quantile over two dims", lambda d: d.quantile(0.3, dim=("x", "y"))),
    ("median over two dims", lambda d: d.median(("x", "y"))),
])
def test_window_shift_weighted_and_quantile_ops_match_numpy(registered, data, name, op):
    ds, _, _ = data
    c = ds.v.chunk({"x": 7, "y": 5}, chunked_array_type="tilegraph")
    got = op(c)
    assert isinstance(got.data, tg.Array), name
    want = op(ds.v)
    assert got.dims == want.dims
    np.testing.assert_allclose(got.values, want.values, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_outer_indexing_and_interp_match_numpy(registered, dtype):
    # isel with a list per dimension is outer indexing (xarray's OuterIndexer): with
    # equal-length lists NumPy-style point-wise indexing would give the wrong shape
    rng = np.random.default_rng(4)
    a = (rng.random((11, 9, 4)) * 100).astype(dtype)
    v = xr.DataArray(a, dims=("x", "y", "t"),
                     coords={"x": np.arange(11.0), "y": np.linspace(0, 1, 9)})
    c = v.chunk({"x": 4, "y": 5, "t": 3}, chunked_array_type="tilegraph")
    for sel in ({"x": [0, 7, 3], "y": [8, 1, 1]}, {"x": [2, 10], "y": [4, 0], "t": [3, 0]},
                {"x": 5, "y": [0, 2]}, {"x": slice(2, 9, 3), "y": [6, 1, 2]}):
        got = c.isel(sel)
        assert isinstance(got.data, tg.Array)
        want = v.isel(sel)
        assert got.dims == want.dims and got.shape == want.shape
        np.testing.assert_array_equal(got.values, want.values)
    # interpolation of the chunked dimensions, onto points inside and outside the grid
    # (xarray chunks the coordinates with its default chunk manager, so interp of tilegraph
    # arrays needs tilegraph to be the default: dask's arrays would be mixed in otherwise)
    for method in ("linear", "nearest"):
        targets = {"x": [0.5, 3.2, 9.9, 12.0], "y": [0.05, 0.55, 0.8]}
        with xr.set_options(chunk_manager="tilegraph"):
            got = c.interp(targets, method=method)
        assert isinstance(got.data, tg.Array)
        want = v.interp(targets, method=method)
        assert got.dims == want.dims
        # xarray declares the input's float dtype for chunked interpolation (NumPy's path
        # gives float64); tilegraph's values have the dtype it declares
        assert got.dtype == (a.dtype if a.dtype.kind == "f" else np.float64)
        assert got.values.dtype == got.dtype
        np.testing.assert_allclose(got.values, want.values, equal_nan=True, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_manager_shuffle_keeps_each_group_in_one_block(dtype):
    rng = np.random.default_rng(7)
    a = (rng.random((5, 23)) * 100).astype(dtype)
    x = tg.from_numpy(a, chunks=(2, 6))  # 23 = 6 + 6 + 6 + 5
    # groups of unequal sizes, out of order; position 4 is left out (a NaN label)
    groups = [[22, 0, 11], [1, 2, 3, 5, 6, 7, 8, 9], [10], [12, 13, 14, 15, 16, 17, 18, 19,
                                                           20, 21]]
    got = TilegraphManager().shuffle(x, groups, axis=1, chunks=None)
    want = a[:, np.concatenate(groups)]
    assert isinstance(got, tg.Array) and got.chunks[0] == x.chunks[0]
    np.testing.assert_array_equal(got.compute(), want)
    ends = set(np.cumsum(got.chunks[1]).tolist())
    assert set(np.cumsum([len(g) for g in groups]).tolist()) >= ends  # no group split
    # mean input block 23/4 = 5.75: groups share a block up to 1.25 times that
    assert got.chunks[1] == (3, 8, 1, 10)
    assert TilegraphManager().shuffle(x, [[3, 1], [0]], axis=-1, chunks="auto").chunks[1] \
        == (3,)


def test_manager_shuffle_bad_input():
    x = tg.from_numpy(np.ones((4, 6)), chunks=3)
    m = TilegraphManager()
    with pytest.raises(ValueError, match=r"chunks=.*not supported.*None or 'auto'"):
        m.shuffle(x, [[0, 1]], axis=1, chunks={1: 2})
    with pytest.raises(IndexError, match=r"outside 0\.\.5 of axis 1"):
        m.shuffle(x, [[0, 6]], axis=1, chunks=None)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        m.shuffle(x, [[0]], axis=2, chunks=None)
    with pytest.raises(ValueError, match="list of lists"):
        m.shuffle(x, [0, 1], axis=1, chunks=None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_groupby_shuffle_lazy_groupers_and_datetime_mean_match_numpy(registered, dtype):
    from xarray.groupers import UniqueGrouper

    rng = np.random.default_rng(8)
    v = xr.DataArray((rng.random((11, 4)) * 50).astype(dtype), dims=("t", "y"),
                     coords={"lab": ("t", list("abcabcaabbc"))})
    c = v.chunk({"t": 3}, chunked_array_type="tilegraph").assign_coords(lab=v.lab)
    # shuffle_to_chunks: each label's rows in one block (the chunk manager's shuffle)
    shuffled = c.groupby("lab").shuffle_to_chunks()
    assert isinstance(shuffled.data, tg.Array)
    for op in ("mean", "sum", "max"):
        got = getattr(shuffled.groupby("lab"), op)()
        want = getattr(v.groupby("lab"), op)()
        np.testing.assert_allclose(got.values, want.values, rtol=1e-6)
    # grouping by a chunked (lazy) label array: its codes stay tilegraph arrays
    b = xr.DataArray(np.arange(24, dtype=dtype).reshape(2, 3, 4), dims=["x", "y", "z"],
                     coords={"xy": (("x", "y"), [["a", "b", "c"], ["b", "c", "c"]])})
    lazy = b.copy()
    lazy["xy"] = b["xy"].chunk({"y": 2}, chunked_array_type="tilegraph")
    groupers = {"x": UniqueGrouper(), "xy": UniqueGrouper(labels=["a", "b", "c"])}
    codes = lazy.groupby(**groupers).encoded.codes
    assert isinstance(codes.data, tg.Array)
    np.testing.assert_array_equal(codes.values, b.groupby(**groupers).encoded.codes.values)
    # datetime means go through isnull (NaT) in tilegraph's namespace
    times = np.array(["2001-01-01T00", "NaT", "2001-03-01T12", "2002-01-01T00"] * 2,
                     dtype="datetime64[ns]")
    ds = xr.Dataset({"when": ("t", times), "v": ("t", np.arange(8).astype(dtype))},
                    coords={"g": ("t", [0, 0, 1, 1, 0, 1, 1, 0])})
    chunked = ds.chunk({"t": 3}, chunked_array_type="tilegraph").assign_coords(g=ds.g)
    got = chunked.groupby("g").mean()
    assert isinstance(got.when.data, tg.Array)
    want = ds.groupby("g").mean()
    np.testing.assert_array_equal(got.when.values, want.when.values)
    np.testing.assert_allclose(got.v.values, want.v.values)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_manager_scan_forward_fills_across_blocks(dtype):
    # what xarray's ffill/bfill ask of a chunk manager: a block scan plus a carry
    def ffill(block, axis, dtype=None):
        b = np.moveaxis(block, axis, 0)
        idx = np.where(np.isnan(b), 0, np.arange(b.shape[0]).reshape(-1, *[1] * (b.ndim - 1)))
        return np.moveaxis(np.take_along_axis(b, np.maximum.accumulate(idx, axis=0), 0),
                           0, axis)

    rng = np.random.default_rng(11)
    a = rng.random((4, 17)).astype(dtype)
    a[rng.random(a.shape) < 0.5] = np.nan
    a[2, 5:12] = np.nan
    x = tg.from_numpy(a, chunks=(3, (5, 4, 6, 2)))
    m = TilegraphManager()
    for method in ("sequential", "blelloch"):
        got = m.scan(ffill, lambda c, b: np.where(np.isnan(b), c, b), np.nan, x, axis=1,
                     dtype=a.dtype, method=method, preop=np.nanmax)
        assert isinstance(got, tg.Array) and got.dtype == a.dtype
        np.testing.assert_array_equal(got.compute(), ffill(a, 1))
    with pytest.raises(ValueError, match="method='parallel'"):
        m.scan(ffill, np.add, 0, x, axis=1, method="parallel")
    with pytest.raises(TypeError, match="unexpected keywords"):
        m.scan(ffill, np.add, 0, x, axis=1, out=None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("skipna", [False, True])
def test_polyfit_and_polyval_over_several_dimensions_match_numpy(registered, dtype, skipna):
    # polyfit folds the other dimensions block by block (reshape_blockwise), solves, and
    # unfolds them; with skipna each series is fitted on its own (apply_along_axis)
    rng = np.random.default_rng(15)
    t = np.arange(30.0)
    a = (2.0 + 0.5 * t[:, None, None] - 0.01 * t[:, None, None] ** 2
         + rng.random((30, 5, 4))).astype(dtype)
    if skipna:
        a[rng.random(a.shape) < 0.1] = np.nan
    v = xr.DataArray(a, dims=("time", "lat", "lon"), coords={"time": t})
    c = v.chunk({"time": 7, "lat": 2, "lon": 3}, chunked_array_type="tilegraph")
    got = c.polyfit("time", 2, skipna=skipna)
    assert isinstance(got.polyfit_coefficients.data, tg.Array)
    want = v.polyfit("time", 2, skipna=skipna)
    np.testing.assert_allclose(got.polyfit_coefficients.values,
                               want.polyfit_coefficients.values, rtol=1e-4, atol=1e-6)
    fitted = xr.polyval(c.time, got.polyfit_coefficients)
    assert isinstance(fitted.data, tg.Array)
    np.testing.assert_allclose(fitted.values,
                               xr.polyval(v.time, want.polyfit_coefficients).values,
                               rtol=1e-4)




# -- tilegraph arrays stay tilegraph ----------------------------------------------------------


def _no_dask(obj) -> None:
    """Every chunked variable of ``obj`` is a tilegraph array, none a dask array."""
    for name, v in obj.variables.items():
        assert not type(v._data).__module__.startswith("dask"), (name, type(v._data))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_chunk_without_chunked_array_type_stays_tilegraph(registered, data, dtype):
    _, a, w = data
    a = (a * 10).astype(dtype)
    tgds = xr.Dataset({"v": (("x", "y"), tg.from_numpy(a, chunks=(6, 5))),
                       "w": (("x",), w)},  # a NumPy variable beside it
                      coords={"x": np.arange(20), "y": np.arange(13) * 0.5})
    parallelcompat.list_chunkmanagers()  # the manager is loaded (see the next test)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # dask's "already a Dask collection" among them
        out = tgds.chunk({"x": 7})
        da = tgds.v.chunk({"y": 4})
        var = tgds.v.variable.chunk({"x": 3})
    _no_dask(out)
    assert isinstance(out.v.data, tg.Array) and isinstance(out.w.data, tg.Array)
    assert out.v.data.chunks == ((7, 7, 6), (5, 5, 3))
    assert out.w.data.chunks == ((7, 7, 6),)
    assert isinstance(da.data, tg.Array) and da.data.chunks == ((6, 6, 6, 2), (4, 4, 4, 1))
    assert isinstance(var.data, tg.Array) and var.data.chunks[0] == (3,) * 6 + (2,)
    np.testing.assert_array_equal((out.v * 2 + out.w).values, a * 2 + w[:, None])
    np.testing.assert_array_equal(da.values, a)
    assert out.v.dtype == dtype


def test_a_dataset_holding_dask_arrays_is_left_to_xarray(registered, data):
    ds, a, _ = data
    dsk = ds.chunk({"x": 5})  # NumPy variables: dask, xarray's default
    assert type(dsk.v.data).__module__.startswith("dask")
    again = dsk.chunk({"x": 10})
    assert type(again.v.data).__module__.startswith("dask")
    np.testing.assert_array_equal(again.v.values, a)


def test_dasks_manager_asked_for_a_tilegraph_array_keeps_it_and_warns_once(
        registered, data, monkeypatch):
    import tilegraph.interop.xarray as tx

    _, a, _ = data
    monkeypatch.setattr(tx, "_WARNED_DASK_CHUNK", [])
    tgv = xr.Dataset({"v": (("x", "y"), tg.from_numpy(a, chunks=4))})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = tgv.chunk({"x": 9}, chunked_array_type="dask")
        line = inspect.currentframe().f_lineno - 1
        tgv.chunk({"x": 3}, chunked_array_type="dask")
    ours = [w for w in seen if "tilegraph" in str(w.message)]
    assert len(ours) == 1
    assert "xr.set_options(chunk_manager='tilegraph')" in str(ours[0].message)
    assert (ours[0].filename, ours[0].lineno) == (__file__, line)
    assert not any("already a Dask collection" in str(w.message) for w in seen)
    assert isinstance(out.v.data, tg.Array) and out.v.data.chunks[0] == (9, 9, 2)
    np.testing.assert_array_equal(out.v.values, a)


def test_open_dataset_under_the_chunk_manager_option(registered, data, tmp_path):
    ds, a, _ = data
    path = tmp_path / "d.nc"
    ds.to_netcdf(path)
    with xr.set_options(chunk_manager="tilegraph"):
        got = xr.open_dataset(path, chunks={"x": 6})
        _no_dask(got)
        assert isinstance(got.v.data, tg.Array) and got.v.data.chunks[0] == (6, 6, 6, 2)
        rechunked = got.chunk({"x": 4, "y": 5})
        assert isinstance(rechunked.v.data, tg.Array)
        np.testing.assert_allclose(rechunked.v.mean("x").values, a.mean(0))
        got.close()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_map_blocks_of_tilegraph_arrays_gives_tilegraph_arrays(registered, data, dtype):
    _, a, w = data
    a = a.astype(dtype)
    tgds = xr.Dataset({"v": (("x", "y"), a), "w": (("x",), w)},
                      coords={"x": np.arange(20), "y": np.arange(13) * 0.5}).chunk(
        {"x": 6, "y": 5}, chunked_array_type="tilegraph")

    def anomaly(block):  # an xarray object per block, its coordinates with it
        assert isinstance(block.v.data, np.ndarray)
        return block - block.mean("y") + block.x

    out = xr.map_blocks(anomaly, tgds)
    _no_dask(out)
    assert isinstance(out.v.data, tg.Array) and out.v.data.chunks == ((6, 6, 6, 2),
                                                                      (5, 5, 3))
    expect = np.empty_like(a)
    for j0, j1 in ((0, 5), (5, 10), (10, 13)):
        blk = a[:, j0:j1]
        expect[:, j0:j1] = blk - blk.mean(1, keepdims=True) + np.arange(20)[:, None]
    np.testing.assert_allclose(out.v.values, expect, rtol=1e-5)
    method = tgds.v.map_blocks(lambda b: b * 2, template=tgds.v)
    assert isinstance(method.data, tg.Array)
    np.testing.assert_allclose(method.values, a * 2, rtol=1e-6)
    np.testing.assert_allclose(tgds.map_blocks(lambda b: b + 1).w.values, w + 1)
    ufunc = xr.apply_ufunc(np.sin, tgds.v, dask="parallelized", output_dtypes=[dtype])
    assert isinstance(ufunc.data, tg.Array)
    np.testing.assert_allclose(ufunc.values, np.sin(a), rtol=1e-5)


def test_dask_compute_and_persist_of_tilegraph_backed_objects_run_on_tilegraph(registered,
                                                                              data):
    dask = pytest.importorskip("dask")
    ds, a, w = data
    tgds = ds.chunk({"x": 6}, chunked_array_type="tilegraph")
    before = tg.last_run()
    (mean, both) = dask.compute(tgds.v.mean("x") * 2, {"d": tgds, "l": [tgds.w]})
    assert tg.last_run() is not before  # tilegraph ran it, not dask's threads
    np.testing.assert_allclose(mean.values, a.mean(0) * 2)
    np.testing.assert_array_equal(both["d"].v.values, a)
    np.testing.assert_array_equal(both["l"][0].values, w)
    (kept,) = dask.persist(tgds)
    assert isinstance(kept.v.data, tg.Array)
    np.testing.assert_array_equal(kept.v.values, a)
    dsk = ds.chunk({"x": 6})  # dask arrays: dask's scheduler, as before
    assert dsk.__dask_scheduler__ is not tgds.__dask_scheduler__
    np.testing.assert_array_equal(dask.compute(dsk.v)[0].values, a)


def test_map_blocks_of_a_dataset_keeping_a_variable_plans_its_source_once(registered):
    """A map_blocks result beside its unchanged input variable: the input's blocks are
    planned once (tilegraph's), not again from the dask graph xarray builds."""
    a = np.arange(30.0).reshape(6, 5)
    b = np.arange(6.0)
    ds = xr.Dataset({"a": (("x", "y"), a), "b": (("x",), b)}).chunk(
        {"x": 4}, chunked_array_type="tilegraph")

    def double_a(block):
        block = block.copy()
        block["a"] = block.a * 2
        return block

    out = xr.map_blocks(double_a, ds)
    _no_dask(out)
    got = out.compute()
    np.testing.assert_array_equal(got.a.values, a * 2)
    np.testing.assert_array_equal(got.b.values, b)
    both = (out.a + ds.a).sum()  # the result and its source in one plan
    assert float(both) == float((a * 3).sum())
    with pytest.raises(TypeError, match="args must be"):
        xr.map_blocks(double_a, ds, args=3)
