"""``tilegraph.random``: the random arrays of :mod:`tilegraph.array.random`, importable by
this shorter name (``from tilegraph.random import normal``)."""

from tilegraph.array.random import *  # noqa: F403
from tilegraph.array.random import __all__  # noqa: F401
