"""The serverless engine's public names (:mod:`tilegraph.runtime.serverless`): ``Pool``,
``run_program``, the object stores and the provisioners."""

from tilegraph.runtime.serverless import *  # noqa: F403
from tilegraph.runtime.serverless import __all__  # noqa: F401
