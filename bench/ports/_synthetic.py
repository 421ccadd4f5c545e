"""Synthetic stand-ins, of the same shapes, coordinates and dtypes, for the data sets the
ported programs download (xarray's tutorial data sets, Pangeo's cloud stores), written to
files in a temporary directory so that the programs open them as they open the real ones.
Seeded: every call with the same arguments makes the same numbers."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pandas as pd
import xarray as xr


def workdir() -> str:
    """A temporary directory for one run's files (removed at exit)."""
    import atexit
    import shutil

    path = tempfile.mkdtemp(prefix="tilegraph-port-")
    atexit.register(shutil.rmtree, path, True)
    return path


def air_temperature(ntime: int = 2920) -> xr.Dataset:
    """xarray's ``air_temperature`` tutorial data set: 6-hourly air temperature in K from
    2013-01-01 over North America, (time, lat=25, lon=53) float64, lat descending."""
    rng = np.random.default_rng(42)
    time = pd.date_range("2013-01-01", periods=ntime, freq="6h")
    lat = np.arange(75.0, 14.9, -2.5)
    lon = np.arange(200.0, 330.1, 2.5)
    day = (time.dayofyear.values / 365.25)[:, None, None]
    base = 273.15 + 25 * np.cos(np.deg2rad(lat))[None, :, None] - 10 * np.cos(
        2 * np.pi * day)
    air = base + 3 * rng.standard_normal((ntime, lat.size, lon.size))
    return xr.Dataset({"air": (("time", "lat", "lon"), air.round(2),
                               {"units": "degK", "long_name": "air temperature"})},
                      coords={"time": time, "lat": lat, "lon": lon})


def air_temperature_file(ntime: int = 2920) -> str:
    """:func:`air_temperature` written as netCDF; its path."""
    path = os.path.join(workdir(), "air_temperature.nc")
    air_temperature(ntime).to_netcdf(path, engine="scipy")
    return path


def rasm_file(ny: int = 205, nx: int = 275) -> str:
    """xarray's ``rasm`` tutorial data set (monthly surface air temperature ``Tair`` of a
    regional model, 36 months from 1980-09, on a (y, x) grid, NaN over the ocean) as
    netCDF; its path."""
    rng = np.random.default_rng(7)
    time = pd.date_range("1980-09-01", periods=36, freq="MS")
    month = time.month.values[:, None, None]
    tair = -10 + 20 * np.sin(2 * np.pi * (month - 4) / 12) + 2 * rng.standard_normal(
        (36, ny, nx))
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    ocean = (yy - ny / 2) ** 2 / (ny / 2) ** 2 + (xx - nx / 2) ** 2 / (nx / 2) ** 2 > 1
    tair[:, ocean] = np.nan
    ds = xr.Dataset({"Tair": (("time", "y", "x"), tair, {"units": "C"})},
                    coords={"time": time, "yc": (("y", "x"), yy * 0.5 + 16.0),
                            "xc": (("y", "x"), xx * 0.5 + 189.0)})
    path = os.path.join(workdir(), "rasm.nc")
    ds.to_netcdf(path, engine="scipy")
    return path


def cmip6_tas_store(model: str, experiment: str, nyears: int, nlat: int, nlon: int,
                    chunk_years: int = 10) -> str:
    """A CMIP6 ``Amon`` ``tas`` zarr store as Pangeo's cloud catalogue holds them
    (monthly near-surface air temperature in K with ``lat_bnds``/``time_bnds``), its
    warming trend depending on the experiment; its path."""
    seed = sum(map(ord, model + experiment))
    rng = np.random.default_rng(seed)
    start = {"historical": "1850-01-01", "ssp245": "2015-01-01", "ssp585": "2015-01-01"}
    trend = {"historical": 0.005, "ssp245": 0.02, "ssp585": 0.045}[experiment]
    time = pd.date_range(start[experiment], periods=12 * nyears, freq="MS")
    lat = np.linspace(-89.0, 89.0, nlat)
    lon = np.linspace(0.0, 360.0, nlon, endpoint=False)
    years = np.arange(time.size)[:, None, None] / 12
    tas = (288 - 30 * np.sin(np.deg2rad(lat))[None, :, None] ** 2 + trend * years
           + rng.standard_normal((time.size, nlat, nlon))).astype(np.float32)
    ds = xr.Dataset({"tas": (("time", "lat", "lon"), tas, {"units": "K"}),
                     "lat_bnds": (("lat", "bnds"), np.stack([lat - 1, lat + 1], 1))},
                    coords={"time": time, "lat": lat, "lon": lon})
    path = os.path.join(workdir(), f"{model}-{experiment}.zarr")
    ds.to_zarr(path, mode="w", consolidated=True,
               encoding={"tas": {"chunks": (12 * chunk_years, nlat, nlon)}})
    return path


def sea_surface_height_store(ntime: int, nlat: int, nlon: int) -> str:
    """Pangeo's ``sea_surface_height`` store (AVISO daily sea level anomaly ``sla`` and
    geostrophic velocity anomalies ``ugosa``/``vgosa`` in m and m/s, (time, latitude,
    longitude), NaN over land), chunked by 5 days as the original; its path."""
    rng = np.random.default_rng(3)
    time = pd.date_range("1993-01-01", periods=ntime, freq="D")
    lat = np.linspace(-89.875, 89.875, nlat)
    lon = np.linspace(0.125, 359.875, nlon)
    days = np.arange(ntime)[:, None, None]
    sla = (0.0001 * days + 0.1 * np.sin(2 * np.pi * days / 365.25)
           * np.cos(np.deg2rad(lat))[None, :, None]
           + 0.05 * rng.standard_normal((ntime, nlat, nlon)))
    land = (np.abs(lat)[:, None] > 80) | ((lon[None, :] > 20) & (lon[None, :] < 40))
    sla[:, land] = np.nan
    u = 0.1 * rng.standard_normal(sla.shape)
    v = 0.1 * rng.standard_normal(sla.shape)
    u[:, land] = np.nan
    v[:, land] = np.nan
    ds = xr.Dataset({name: (("time", "latitude", "longitude"), data, {"units": unit})
                     for name, data, unit in (("sla", sla, "m"), ("ugosa", u, "m/s"),
                                              ("vgosa", v, "m/s"))},
                    coords={"time": time, "latitude": lat, "longitude": lon})
    path = os.path.join(workdir(), "sea_surface_height.zarr")
    ds.to_zarr(path, mode="w", consolidated=True,
               encoding={k: {"chunks": (5, nlat, nlon)} for k in ds.data_vars})
    return path
