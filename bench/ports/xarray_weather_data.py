"""xarray's toy weather data example: daily minimum and maximum temperatures at a few
places over two years; the probability of freezing by month, monthly averages by
resampling, the monthly climatology and anomalies, standardized anomalies by
``xr.apply_ufunc`` over a groupby, and missing values filled from the climatology.

Source: pydata/xarray, ``doc/examples/weather-data.ipynb``. The data are made as in the
notebook (seeded), at ``300 * scale`` places instead of 3, and put in blocks of 100 days
(``.chunk``: the notebook's data are in memory; a dask user chunks them, and then
``apply_ufunc`` over the groupby needs ``dask="allowed"``, as dask itself asks); plots and
DataFrames are left out.
"""

import numpy as np
import pandas as pd
import xarray as xr

xr.set_options(chunk_manager="dask")

SOURCE = "pydata/xarray: doc/examples/weather-data.ipynb"
RTOL = 1e-9


def inputs(scale):
    nloc = max(3, int(300 * scale))
    rng = np.random.default_rng(123)
    times = pd.date_range("2000-01-01", "2001-12-31", name="time")
    annual_cycle = np.sin(2 * np.pi * (times.dayofyear.values / 365.25 - 0.28))
    base = 10 + 15 * annual_cycle.reshape(-1, 1)
    tmin_values = base + 3 * rng.standard_normal((annual_cycle.size, nloc))
    tmax_values = base + 10 + 3 * rng.standard_normal((annual_cycle.size, nloc))
    return {"times": times, "tmin": tmin_values, "tmax": tmax_values,
            "locations": [f"L{i}" for i in range(nloc)]}


def program(inp):
    ds = xr.Dataset(
        {
            "tmin": (("time", "location"), inp["tmin"]),
            "tmax": (("time", "location"), inp["tmax"]),
        },
        {"time": inp["times"], "location": inp["locations"]},
    ).chunk({"time": 100})
    freeze = (ds["tmin"] <= 0).groupby("time.month").mean("time")
    monthly_avg = ds.resample(time="1MS").mean()
    climatology = ds.groupby("time.month").mean("time")
    anomalies = ds.groupby("time.month") - climatology
    climatology_mean = ds.groupby("time.month").mean("time")
    climatology_std = ds.groupby("time.month").std("time")
    stand_anomalies = xr.apply_ufunc(
        lambda x, m, s: (x - m) / s,
        ds.groupby("time.month"),
        climatology_mean,
        climatology_std,
        dask="allowed",
    )
    some_missing = ds.tmin.sel(time=ds["time.day"] > 15).reindex_like(ds)
    filled = some_missing.groupby("time.month").fillna(climatology.tmin)
    return {"freeze": freeze.compute(), "monthly_avg": monthly_avg.compute(),
            "anomalies": anomalies.mean("location").compute(),
            "stand_anomalies": stand_anomalies.mean("location").compute(),
            "filled": filled.compute()}


if __name__ == "__main__":
    print({k: getattr(v, "shape", None) for k, v in program(inputs(0.01)).items()})
