"""The serverless engine's public names (:mod:`tilegraph.runtime.serverless`): ``Pool``,
``run_program``, the object stores and the provisioners."""

from tilegraph.runtime.serverless import (
    FsspecStore,
    LithopsProvisioner,
    LocalProvisioner,
    LocalStore,
    ObjectStore,
    Pool,
    PoolFailure,
    ServerlessBackend,
    open_store,
    run_program,
    workers_info,
)

__all__ = [
    "FsspecStore",
    "LithopsProvisioner",
    "LocalProvisioner",
    "LocalStore",
    "ObjectStore",
    "Pool",
    "PoolFailure",
    "ServerlessBackend",
    "open_store",
    "run_program",
    "workers_info",
]
