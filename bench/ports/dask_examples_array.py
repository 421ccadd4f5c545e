"""dask-examples' first array notebook: a random square array, ``x + x.T``, a strided slice
and its mean, ``persist`` then a single element and a full sum.

Source: dask/dask-examples, ``array.ipynb``. Same shape and chunking at ``scale=1``
((10000, 10000) in (1000, 1000) blocks); the random input is NumPy's (seeded) through
``from_array``, so dask and tilegraph see the same numbers.
"""

import dask.array as da
import numpy as np

SOURCE = "dask/dask-examples: array.ipynb"
RTOL = 1e-9


def inputs(scale):
    n = max(20, int(10000 * scale))
    return {"x": np.random.default_rng(0).random((n, n)), "block": max(2, n // 10)}


def program(inp):
    n, b = inp["x"].shape[0], inp["block"]
    x = da.from_array(inp["x"], chunks=(b, b))
    y = x + x.T
    z = y[::2, n // 2:].mean(axis=1)
    z_values = z.compute()
    y = y.persist()
    corner = y[0, 0].compute()
    total = y.sum().compute()
    return {"z": z_values, "corner": corner, "total": total}


if __name__ == "__main__":
    out = program(inputs(0.1))
    print({k: np.asarray(v).shape for k, v in out.items()}, out["total"])
