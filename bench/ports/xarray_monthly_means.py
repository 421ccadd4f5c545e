"""xarray's monthly-means example: seasonal means of a regional model's monthly surface
air temperature, weighted by the length of each month, beside the unweighted ones and
their difference.

Source: pydata/xarray, ``doc/examples/monthly-means.ipynb``. The ``rasm`` tutorial data
set is synthetic (``_synthetic.rasm_file``: 36 months on a (205, 275) grid at
``scale=1``, NaN outside an ellipse of land) and opened in blocks of 12 months (the
notebook loads it into memory; a dask user opens it with ``chunks=``).
"""

import numpy as np
import xarray as xr
from _synthetic import rasm_file

xr.set_options(chunk_manager="dask")

SOURCE = "pydata/xarray: doc/examples/monthly-means.ipynb"
RTOL = 1e-9


def inputs(scale):
    return {"path": rasm_file(max(10, int(205 * scale)), max(10, int(275 * scale)))}


def season_mean(ds, calendar="standard"):
    month_length = ds.time.dt.days_in_month
    weights = (
        month_length.groupby("time.season") / month_length.groupby("time.season").sum()
    )
    np.testing.assert_allclose(weights.groupby("time.season").sum().values, np.ones(4))
    return (ds * weights).groupby("time.season").sum(dim="time")


def program(inp):
    ds = xr.open_dataset(inp["path"], chunks={"time": 12})
    ds_weighted = season_mean(ds)
    ds_unweighted = ds.groupby("time.season").mean("time")
    ds_diff = ds_weighted - ds_unweighted
    notnull = ds_unweighted["Tair"][0].notnull()
    out = {"weighted": ds_weighted["Tair"].where(notnull).compute(),
           "unweighted": ds_unweighted["Tair"].where(notnull).compute(),
           "diff": ds_diff["Tair"].where(notnull).compute()}
    ds.close()
    return out


if __name__ == "__main__":
    print({k: v.shape for k, v in program(inputs(0.1)).items()})
