"""Pangeo's sea-surface-height notebook: daily satellite sea level anomaly opened from a
zarr store; the global mean sea level time series and its centred annual rolling mean,
the zonal mean over time (a Hovmoller diagram) and the variability (standard deviation
over time) of each point.

Source: pangeo-gallery/physical-oceanography, ``01_sea-surface-height.ipynb``. The cloud
store is synthetic (``_synthetic.sea_surface_height_store``: ``sla``, ``ugosa``, ``vgosa``
with NaN over land, five-day blocks as the original) on a (180, 360) grid for ``730 *
scale`` days (the original: (720, 1440), 8901 days); plots are left out.
"""

import xarray as xr
from _synthetic import sea_surface_height_store

xr.set_options(chunk_manager="dask")

SOURCE = "pangeo-gallery/physical-oceanography: 01_sea-surface-height.ipynb"
RTOL = 1e-9


def inputs(scale):
    return {"path": sea_surface_height_store(max(20, int(730 * scale)), 180, 360)}


def program(inp):
    ds = xr.open_zarr(inp["path"])
    sla_timeseries = ds.sla.mean(dim=('latitude', 'longitude')).load()
    annual = sla_timeseries.rolling(time=365, center=True, min_periods=1).mean()
    sla_hov = ds.sla.mean(dim='longitude').load()
    sla_std = ds.sla.std(dim='time').load()
    return {"timeseries": sla_timeseries, "annual": annual, "hovmoller": sla_hov,
            "std": sla_std}


if __name__ == "__main__":
    print({k: v.shape for k, v in program(inputs(0.05)).items()})
