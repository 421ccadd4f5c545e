"""Planning: lowering, ordering (priorities), placement and the cost model."""

from tilegraph.plan.order import order

__all__ = ["order"]
