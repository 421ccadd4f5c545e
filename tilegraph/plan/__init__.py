"""Planning: lowering, ordering (priorities), placement, the cost model and the simulator."""

from tilegraph.plan.cost import CostModel
from tilegraph.plan.order import order
from tilegraph.plan.place import place
from tilegraph.plan.simulate import SimResult, communication_volume, simulate

__all__ = ["CostModel", "SimResult", "communication_volume", "order", "place", "simulate"]
