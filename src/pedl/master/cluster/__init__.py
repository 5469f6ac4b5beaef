"""Resource pools: the live agent hub, the controller and the scheduling pass that applies the pure scheduler
(pedl.scheduling), and the resource manager it places allocations through (agents today)."""
