"""The serverless engine's public names: those of :mod:`tilegraph.runtime.serverless`
(``Pool``, the object stores and the provisioners), and ``run_program``, which runs a
LambdaPACK DAG on a pool without expanding it (:mod:`tilegraph.lambdapack.implicit`)."""

from tilegraph.lambdapack.implicit import run_program
from tilegraph.runtime.serverless import *  # noqa: F403
from tilegraph.runtime.serverless import __all__ as _runtime_names

__all__ = [*_runtime_names, "run_program"]
