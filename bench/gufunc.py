"""Generalized ufuncs with core dimensions: tilegraph against dask and NumPy, in one run.

1. ``xr.apply_ufunc(np.sort along "x", dask="parallelized")`` ("(x)->(x)") of an
   ``--rows`` x ``--cols`` float64 DataArray in blocks of ``--block`` rows, chunked by the
   tilegraph chunk manager and by dask's, then ``.values``; NumPy's ``np.sort(a, axis=-1)``
   as the single-call reference.
2. ``apply_gufunc(np.linalg.inv, "(m,m)->(m,m)")`` on a stack of ``--rows`` 4x4 matrices in
   blocks of ``--block``: ``tilegraph.array.gufunc.apply_gufunc`` against
   ``dask.array.apply_gufunc`` and one ``np.linalg.inv`` call.

Each row prints the best time of ``--repeat`` alternating runs and the ratios
(dask / tilegraph: above 1 means tilegraph is faster). The machine may be shared: the
figures are noisy. Run: ``python bench/gufunc.py [--rows 200000] [--cols 64]
[--block 20000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from measure import best_alternating

import tilegraph as tg
from tilegraph.array.gufunc import apply_gufunc


def report(label: str, t: dict[str, float]) -> None:
    ours = t["tilegraph"]
    parts = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in t.items())
    ratios = ", ".join(f"{k}/tilegraph {v / ours:.2f}x" for k, v in t.items()
                       if k != "tilegraph")
    print(f"{label}: {parts}; {ratios}")


def sort_rows(rows: int, cols: int, block: int, repeat: int) -> None:
    import xarray as xr

    import tilegraph.interop.xarray  # noqa: F401  (the chunk manager)

    a = np.random.default_rng(0).random((rows, cols))
    da = xr.DataArray(a, dims=("row", "x"))
    chunked = {name: da.chunk({"row": block, "x": -1}, chunked_array_type=name)
               for name in ("tilegraph", "dask")}

    def run(name: str) -> np.ndarray:
        return xr.apply_ufunc(lambda b: np.sort(b, axis=-1), chunked[name],
                              input_core_dims=[["x"]], output_core_dims=[["x"]],
                              dask="parallelized", output_dtypes=[a.dtype]).values

    want = np.sort(a, axis=-1)
    for name in chunked:
        np.testing.assert_array_equal(run(name), want)
    t = best_alternating({"tilegraph": lambda: run("tilegraph"),
                          "dask": lambda: run("dask"),
                          "numpy": lambda: np.sort(a, axis=-1)}, repeat)
    report(f"xr.apply_ufunc sort (x)->(x), {rows}x{cols}, blocks of {block} rows", t)


def inverse_stack(rows: int, block: int, repeat: int) -> None:
    import dask.array as da

    rng = np.random.default_rng(1)
    a = rng.random((rows, 4, 4)) + 4 * np.eye(4)
    x = tg.from_numpy(a, chunks=(block, 4, 4))
    d = da.from_array(a, chunks=(block, 4, 4))
    want = np.linalg.inv(a)
    np.testing.assert_allclose(apply_gufunc(np.linalg.inv, "(m,m)->(m,m)", x).compute(),
                               want)
    t = best_alternating(
        {"tilegraph": lambda: apply_gufunc(np.linalg.inv, "(m,m)->(m,m)", x).compute(),
         "dask": lambda: da.apply_gufunc(np.linalg.inv, "(m,m)->(m,m)", d,
                                        output_dtypes=float).compute(
             scheduler="threads"),
         "numpy": lambda: np.linalg.inv(a)}, repeat)
    report(f"apply_gufunc inv (m,m)->(m,m), {rows} 4x4 matrices, blocks of {block}", t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--cols", type=int, default=64)
    p.add_argument("--block", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    sort_rows(args.rows, args.cols, args.block, args.repeat)
    inverse_stack(args.rows, args.block, args.repeat)


if __name__ == "__main__":
    main()
