"""xarray's apply_ufunc tutorial: 1-D interpolation (``np.interp``) along latitude
vectorized over the other dimensions with ``vectorize=True``, run in blocks with
``dask="parallelized"``, checked against ``DataArray.interp``.

Source: pydata/xarray, ``doc/examples/apply_ufunc_vectorize_1d.ipynb`` (its dask
section). The tutorial data set is synthetic (``_synthetic.air_temperature``); the notebook
takes 4 time steps and 3 longitudes, this takes ``120 * scale`` time steps and every
longitude, in the notebook's blocks (``{"time": 2, "lon": 2}``).
"""

import numpy as np
import xarray as xr
from _synthetic import air_temperature

xr.set_options(chunk_manager="dask")

SOURCE = "pydata/xarray: doc/examples/apply_ufunc_vectorize_1d.ipynb"
RTOL = 1e-9


def inputs(scale):
    ntime = max(4, int(120 * scale))
    return {"air": air_temperature(ntime).air.sortby("lat")}


def interp1d_np(data, x, xi):
    return np.interp(xi, x, data)


def program(inp):
    air = inp["air"]
    newlat = np.linspace(15, 75, 100)
    expected = air.interp(lat=newlat)
    interped = xr.apply_ufunc(
        interp1d_np,
        air.chunk({"time": 2, "lon": 2}),
        air.lat,
        newlat,
        input_core_dims=[["lat"], ["lat"], ["new_lat"]],
        output_core_dims=[["new_lat"]],
        exclude_dims=set(("lat",)),
        vectorize=True,
        dask="parallelized",
        output_dtypes=[air.dtype],
    ).rename({"new_lat": "lat"})
    interped["lat"] = newlat
    interped = interped.compute()
    xr.testing.assert_allclose(expected.transpose(*interped.dims), interped)
    return {"interped": interped}


if __name__ == "__main__":
    print(program(inputs(0.1))["interped"].shape)
