"""xarray's chunk manager for tilegraph: registration, chunking, arithmetic, reductions,
to_zarr and open_dataset/open_zarr through ``chunked_array_type="tilegraph"``."""

import importlib.metadata as md
import pathlib
import tomllib

import numpy as np
import pytest

import tilegraph as tg

xr = pytest.importorskip("xarray")
from xarray.namedarray import parallelcompat  # noqa: E402

from tilegraph.interop.xarray import TilegraphManager  # noqa: E402

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
    with pytest.raises(ValueError, match="not both"):
        m.map_blocks(np.sum, x, drop_axis=0, new_axis=1)
    with pytest.raises(NotImplementedError, match="core dimensions"):
        m.apply_gufunc(np.sum, "(i)->()", x)
    with pytest.raises(NotImplementedError, match="compute=False"):
        m.store([x], [np.empty(a.shape)], compute=False)
    out = np.zeros((12, 8), dtype=dtype)
    m.store([x], [out], regions=[(slice(3, 12), slice(0, 8))])
    np.testing.assert_array_equal(out[3:], a)
