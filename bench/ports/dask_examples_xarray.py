"""dask-examples' xarray notebook: air temperature opened in blocks, monthly climatology
and anomalies, weekly resampling and its standard deviation, a 30-step rolling mean, one
time step selected and loaded, and a Spearman rank correlation by ``xr.apply_ufunc(...,
dask="parallelized")`` with the time axis in one block.

Source: dask/dask-examples, ``xarray.ipynb``. The tutorial data set is synthetic
(``_synthetic.air_temperature``: same shape, coordinates and chunking); the ranks are
NumPy's double argsort instead of ``bottleneck.rankdata`` (bottleneck is not installed
here; NaNs of the rolling mean's first steps rank last instead of propagating).
"""

import numpy as np
import xarray as xr
from _synthetic import air_temperature_file

xr.set_options(chunk_manager="dask")

SOURCE = "dask/dask-examples: xarray.ipynb"
RTOL = 1e-9


def inputs(scale):
    return {"path": air_temperature_file(max(240, int(2920 * scale)))}


def covariance_gufunc(x, y):
    return ((x - x.mean(axis=-1, keepdims=True))
            * (y - y.mean(axis=-1, keepdims=True))).mean(axis=-1)


def pearson_correlation_gufunc(x, y):
    return covariance_gufunc(x, y) / (x.std(axis=-1) * y.std(axis=-1))


def rankdata(x, axis=-1):
    return np.argsort(np.argsort(x, axis=axis), axis=axis).astype(float)


def spearman_correlation_gufunc(x, y):
    x_ranks = rankdata(x, axis=-1)
    y_ranks = rankdata(y, axis=-1)
    return pearson_correlation_gufunc(x_ranks, y_ranks)


def spearman_correlation(x, y, dim):
    return xr.apply_ufunc(
        spearman_correlation_gufunc, x, y,
        input_core_dims=[[dim], [dim]],
        dask='parallelized',
        output_dtypes=[float])


def program(inp):
    ds = xr.open_dataset(inp["path"], chunks={'lat': 25, 'lon': 25, 'time': -1})
    da = ds['air']
    da2 = da.groupby('time.month').mean('time')
    da3 = da - da2
    computed_da = da3.compute()
    da = da.persist()
    resampled_da = da.resample(time='1W').mean('time')
    weekly_std = resampled_da.std('time').compute()
    da_smooth = da.rolling(time=30).mean()
    one_step = da.sel(time='2013-01-01T18:00:00').load()
    corr = spearman_correlation(da.chunk({'time': -1}), da_smooth.chunk({'time': -1}),
                                'time')
    out = {"anomaly": computed_da, "weekly_std": weekly_std, "one_step": one_step,
           "smooth_tail": da_smooth.isel(time=slice(-5, None)).compute(),
           "corr": corr.compute()}
    ds.close()
    return out


if __name__ == "__main__":
    print({k: v.shape for k, v in program(inputs(0.1)).items()})
