"""dask-examples' stencil notebook: a 3x3 integer smoothing of every 2-D slice of a large
int8 cube, blocked along its first axis by bytes (``chunks=('64 MB', None, None)``),
applied block by block with ``map_blocks``, then the maximum.

Source: dask/dask-examples, ``applications/stencils-with-numba.ipynb`` (the ``map_blocks``
form, "before gufuncs"). numba is not installed here: the smoother is the notebook's
stencil written with NumPy slices (same values: the 3x3 sum floor-divided by 9 inside,
the border left at zero as numba's stencil leaves it). Same dtype and chunking at
``scale=1`` with (1000, 1000, 1000) instead of (10000, 1000, 1000) (the notebook's is 10
GB); the input is NumPy's (seeded) through ``from_array``.
"""

import dask.array as da
import numpy as np

SOURCE = "dask/dask-examples: applications/stencils-with-numba.ipynb"
RTOL = 0


def _smooth(x):
    out = np.zeros_like(x)
    s = x.astype(np.int64)
    total = (s[..., :-2, :-2] + s[..., :-2, 1:-1] + s[..., :-2, 2:]
             + s[..., 1:-1, :-2] + s[..., 1:-1, 1:-1] + s[..., 1:-1, 2:]
             + s[..., 2:, :-2] + s[..., 2:, 1:-1] + s[..., 2:, 2:])
    out[..., 1:-1, 1:-1] = total // 9
    return out


def smooth(x):
    return _smooth(x)


def inputs(scale):
    n = max(8, int(1000 * scale))
    rng = np.random.default_rng(0)
    return {"x": rng.integers(0, 127, size=(n, n, n), dtype=np.int8)}


def program(inp):
    x = da.from_array(inp["x"], chunks=("64 MB", None, None))
    y = x.map_blocks(smooth, dtype="int8")
    return {"max": y.max().compute(), "slice": y[len(inp["x"]) // 2].compute()}


if __name__ == "__main__":
    print(program(inputs(0.05))["max"])
