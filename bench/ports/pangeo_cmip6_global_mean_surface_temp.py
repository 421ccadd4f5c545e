"""Pangeo's CMIP6 gallery notebook: near-surface air temperature of several models and
experiments opened lazily (``dask.delayed`` opens, one ``dask.compute``), the
cosine-of-latitude weighted global mean, annual means by ``coarsen(year=12)``, the
experiments concatenated with an outer join, then all computed at once with
``dask.compute``.

Source: pangeo-gallery/cmip6, ``global_mean_surface_temp.ipynb``. The cloud catalogue's
zarr stores are synthetic (``_synthetic.cmip6_tas_store``: monthly ``tas`` with bounds
variables, 3 models by 3 experiments, ten-year blocks as the catalogue's stores have),
at a (36, 72) grid and ``165 * scale`` historical and ``86 * scale`` scenario years;
the final seaborn plot is left out.
"""

from collections import defaultdict

import dask
import numpy as np
import pandas as pd
import xarray as xr
from _synthetic import cmip6_tas_store

xr.set_options(chunk_manager="dask")

SOURCE = "pangeo-gallery/cmip6: global_mean_surface_temp.ipynb"
RTOL = 1e-5
MODELS = ["ModelA", "ModelB", "ModelC"]
EXPTS = ['historical', 'ssp245', 'ssp585']


def inputs(scale):
    hist, scen = max(2, int(165 * scale)), max(2, int(86 * scale))
    stores = [{"source_id": m, "experiment_id": e,
               "zstore": cmip6_tas_store(m, e, hist if e == "historical" else scen, 36, 72)}
              for m in MODELS for e in EXPTS]
    return {"catalogue": pd.DataFrame(stores)}


def drop_all_bounds(ds):
    drop_vars = [vname for vname in ds.variables
                 if ('_bounds' in vname) or ('_bnds' in vname)]
    return ds.drop_vars(drop_vars)


def open_dset(df):
    assert len(df) == 1
    ds = xr.open_zarr(df.zstore.values[0], consolidated=True)
    return drop_all_bounds(ds)


def open_delayed(df):
    return dask.delayed(open_dset)(df)


def get_lat_name(ds):
    for lat_name in ['lat', 'latitude']:
        if lat_name in ds.coords:
            return lat_name
    raise RuntimeError("Couldn't find a latitude coordinate")


def global_mean(ds):
    lat = ds[get_lat_name(ds)]
    weight = np.cos(np.deg2rad(lat))
    weight /= weight.mean()
    other_dims = set(ds.dims) - {'time'}
    return (ds * weight).mean(other_dims)


def program(inp):
    dsets = defaultdict(dict)
    for group, df in inp["catalogue"].groupby(by=['source_id', 'experiment_id']):
        dsets[group[0]][group[1]] = open_delayed(df)
    dsets_ = dask.compute(dict(dsets))[0]
    expt_da = xr.DataArray(EXPTS, dims='experiment_id', name='experiment_id',
                           coords={'experiment_id': EXPTS})
    dsets_aligned = {}
    for k, v in dsets_.items():
        for ds in v.values():
            ds.coords['year'] = ds.time.dt.year
        dsets_ann_mean = [v[expt].pipe(global_mean)
                          .swap_dims({'time': 'year'})
                          .drop_vars('time')
                          .coarsen(year=12).mean()
                          for expt in EXPTS]
        dsets_aligned[k] = xr.concat(dsets_ann_mean, join='outer', dim=expt_da)
    dsets_aligned_ = dask.compute(dsets_aligned)[0]
    source_ids = list(dsets_aligned_.keys())
    source_da = xr.DataArray(source_ids, dims='source_id', name='source_id',
                             coords={'source_id': source_ids})
    big_ds = xr.concat([ds.reset_coords(drop=True) for ds in dsets_aligned_.values()],
                       dim=source_da)
    return {"tas": big_ds.tas.values, "year": big_ds.year.values}


if __name__ == "__main__":
    print(program(inputs(0.1))["tas"].shape)
