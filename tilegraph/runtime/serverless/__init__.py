"""The serverless engine: stateless workers coordinated through a task queue with leases
and a state store (a Redis-protocol server) and an object store.

- :class:`Pool`: an embedded Valkey server (or yours), an object store, and a provisioner of
  worker processes (:mod:`tilegraph.runtime.serverless.pool`);
- ``backend="serverless"`` (:class:`ServerlessBackend`): any computation through the one
  pipeline, with ``pool=`` or ``redis=``/``store=`` options;
- ``ServerlessBackend.run_implicit``: an implicit graph (:mod:`tilegraph.graph.implicit`)
  run without expanding it, through :func:`tilegraph.pipeline.run_implicit` (LambdaPACK's
  ``run_program``, public in :mod:`tilegraph.serverless`);
- ``tilegraph worker --redis URL``: a worker process on any machine
  (:mod:`tilegraph.runtime.serverless.worker`), given the pool's credentials;
- :class:`Credentials` and :class:`IntegrityError`: the state store's password and the
  MAC secret under which everything read back is checked
  (:mod:`tilegraph.runtime.serverless.auth`).

The Redis keys and the Lua transitions are documented in :mod:`tilegraph.runtime.serverless.state`.
"""

from tilegraph.runtime.serverless.auth import Credentials, IntegrityError
from tilegraph.runtime.serverless.backend import PoolFailure, ServerlessBackend
from tilegraph.runtime.serverless.pool import (
    LithopsProvisioner,
    LocalProvisioner,
    Pool,
    workers_info,
)
from tilegraph.runtime.serverless.store import FsspecStore, LocalStore, ObjectStore, open_store

__all__ = [
    "Credentials",
    "FsspecStore",
    "IntegrityError",
    "LithopsProvisioner",
    "LocalProvisioner",
    "LocalStore",
    "ObjectStore",
    "Pool",
    "PoolFailure",
    "ServerlessBackend",
    "open_store",
    "workers_info",
]
