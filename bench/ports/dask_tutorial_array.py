"""The dask tutorial's array lesson: a sum of ones in two blocks, the column means of a
large normal array, ``(x + x.T).mean(axis=1)``, a cube rechunked by a dict with ``-1``,
a size and ``"auto"``, and the mean of arrays read from zarr stores, also with other
blocks than the store's.

Source: dask/dask-tutorial, ``02_array.ipynb`` (its xarray part is the dask-examples
port's). The random arrays are NumPy's (seeded) through ``from_array``, in the lesson's
blocks; sizes at ``scale=1``: (10000, 10000) in (1000, 1000) blocks (the lesson's is
(30000, 30000): 7 GB), a (400, 400, 400) cube (the lesson's 1000), zarr stores of
(25000000,) in 6.25M and 1M blocks (the lesson's ``prep.py`` makes them so).
"""

import dask.array as da
import numpy as np
import zarr
from _synthetic import workdir

SOURCE = "dask/dask-tutorial: 02_array.ipynb"
RTOL = 1e-9


def inputs(scale):
    rng = np.random.default_rng(0)
    n = max(40, int(10000 * scale))
    m = max(8, int(400 * scale))
    k = max(1000, int(25_000_000 * scale))
    base = workdir()
    flat = rng.random(k)
    stores = {}
    for name, chunk in (("random.zarr", max(10, k // 4)), ("random_sc.zarr", max(10, k // 25))):
        z = zarr.open_array(f"{base}/{name}", mode="w", shape=(k,), chunks=(chunk,),
                            dtype="f8")
        z[:] = flat
        stores[name] = f"{base}/{name}"
    return {"normal": rng.normal(10, 0.1, size=(n, n)), "cube": rng.random((m, m, m)),
            "stores": stores, "k": k}


def program(inp):
    a_da = da.ones(10, chunks=5)
    a_da_sum = a_da.sum().compute()
    n = inp["normal"].shape[0]
    xd = da.from_array(inp["normal"], chunks=(n // 10, n // 10))
    yd = xd.mean(axis=0).compute()
    x_sum = xd + xd.T
    res = x_sum.mean(axis=1).compute()
    m = inp["cube"].shape[0]
    darr = da.from_array(inp["cube"], chunks=(m // 2, m // 2, m // 2))
    darr = darr.rechunk({0: -1, 1: max(1, m // 10), 2: "auto"})
    a = da.from_zarr(inp["stores"]["random.zarr"])
    b = da.from_zarr(inp["stores"]["random_sc.zarr"])
    c = da.from_zarr(inp["stores"]["random_sc.zarr"], chunks=(inp["k"] // 4,))
    return {"ones": a_da_sum, "col_mean": yd, "sym_mean": res,
            "cube_chunks_0_1": np.array([darr.chunks[0], darr.chunks[1][:1]],
                                        dtype=object).astype(str),
            "cube_mean": darr.mean(axis=(0, 1)).compute(),
            "zarr_means": np.array([a.mean().compute(), b.mean().compute(),
                                    c.mean().compute()]),
            "zarr_chunks": np.array([a.chunks[0][0], b.chunks[0][0], c.chunks[0][0]])}


if __name__ == "__main__":
    print(program(inputs(0.01))["zarr_means"])
