"""The serverless engine's public names: those of :mod:`tilegraph.runtime.serverless`
(``Pool``, the object stores and the provisioners), and ``run_program``, which runs a
LambdaPACK DAG on a pool without expanding it (:mod:`tilegraph.lambdapack.implicit`, loaded
when first used, so that starting a pool does not import LambdaPACK)."""

from typing import Any as _Any

from tilegraph.runtime.serverless import *  # noqa: F403
from tilegraph.runtime.serverless import __all__ as _runtime_names

__all__ = [*_runtime_names, "run_program"]  # noqa: F405  (run_program: see __getattr__)


def __getattr__(name: str) -> _Any:
    if name == "run_program":
        from tilegraph.lambdapack.implicit import run_program

        return run_program
    raise AttributeError(f"module 'tilegraph.serverless' has no attribute {name!r}")
