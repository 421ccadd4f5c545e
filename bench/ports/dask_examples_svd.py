"""dask-examples' SVD notebook: the exact SVD of a tall-and-skinny array (one block column:
``da.linalg.svd``, a TSQR), then an approximate rank-5 SVD of a square one
(``da.linalg.svd_compressed``).

Source: dask/dask-examples, ``machine-learning/svd.ipynb``. Same shapes and chunking at
``scale=1``: (200000, 100) in (10000, 100) blocks, and (10000, 10000) in (2000, 2000)
blocks; the inputs are NumPy's (seeded) through ``from_array``. The factors are compared
through what does not depend on signs or on the random projection: the tall array's
singular values and its reconstruction ``u * s @ v``, and whether the square array's
leading singular value is within 2% of NumPy's (a rank-5 randomized SVD without power
iterations finds it to about 0.5%; each library draws its own random projection). NumPy's
exact SVD of the square array, the check's reference, is made with the inputs, outside
the timed program.
"""

import dask.array as da
import numpy as np

SOURCE = "dask/dask-examples: machine-learning/svd.ipynb"
RTOL = 1e-8


def inputs(scale):
    rng = np.random.default_rng(0)
    rows = max(400, int(200000 * scale))
    n = max(40, int(10000 * scale))
    square = rng.random((n, n))
    # the reference the check needs, made with the inputs (outside the timed program)
    top = np.linalg.svd(square, compute_uv=False)[0]
    return {"tall": rng.random((rows, 100)), "tall_block": max(100, rows // 20),
            "square": square, "square_block": max(10, n // 5), "square_top": top}


def program(inp):
    X = da.from_array(inp["tall"], chunks=(inp["tall_block"], 100)).persist()
    u, s, v = da.linalg.svd(X)
    u_, s_, v_ = da.compute(u, s, v)
    Y = da.from_array(inp["square"], chunks=inp["square_block"]).persist()
    cu, cs, cv = da.linalg.svd_compressed(Y, k=5, seed=0)
    top = cs[0].compute()
    exact = inp["square_top"]
    return {"tall_s": s_, "tall_rebuilt": (u_ * s_) @ v_,
            "square_top_s_within_2_percent": abs(top - exact) < 0.02 * exact,
            "square_shapes": np.array([cu.shape, cv.shape])}


if __name__ == "__main__":
    out = program(inputs(0.01))
    print(out["tall_s"][:3], out["square_top_s_within_2_percent"])
