"""tilegraph in other array systems' plug-in points: xarray's chunk manager
(:mod:`tilegraph.interop.xarray`). dask collections both ways live in
:mod:`tilegraph.array.dask_interop`, dask's scheduler callbacks in
:mod:`tilegraph.runtime.dask_callbacks` and the dask.distributed backend in
:mod:`tilegraph.runtime.dask_backend`.

Nothing here is imported at ``import tilegraph``, and each module imports its foreign
package (xarray, dask) only when it is used.
"""
