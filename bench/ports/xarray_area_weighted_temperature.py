"""xarray's area-weighted temperature example: daily means of air temperature in degrees
Celsius, then the mean over the map weighted by the cosine of latitude (``weighted``),
beside the unweighted mean.

Source: pydata/xarray, ``doc/examples/area_weighted_temperature.ipynb``. The tutorial data
set is synthetic (``_synthetic.air_temperature``) and opened in blocks of 200 time steps
(the notebook loads it; a dask user opens it with ``chunks=``); maps are not drawn.
"""

import numpy as np
import xarray as xr
from _synthetic import air_temperature_file

xr.set_options(chunk_manager="dask")

SOURCE = "pydata/xarray: doc/examples/area_weighted_temperature.ipynb"
RTOL = 1e-9


def inputs(scale):
    return {"path": air_temperature_file(max(40, int(2920 * scale)))}


def program(inp):
    ds = xr.open_dataset(inp["path"], chunks={"time": 200})
    air = ds.air - 273.15
    air = air.resample(time="D").mean()
    weights = np.cos(np.deg2rad(air.lat))
    weights.name = "weights"
    air_weighted = air.weighted(weights)
    weighted_mean = air_weighted.mean(("lon", "lat"))
    out = {"weighted": weighted_mean.compute(),
           "unweighted": air.mean(("lon", "lat")).compute(),
           "first_day": air.isel(time=0).compute()}
    ds.close()
    return out


if __name__ == "__main__":
    print({k: v.shape for k, v in program(inputs(0.1)).items()})
