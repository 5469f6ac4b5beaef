"""Resource pools: the live agent hub, the pure scheduler and the controller that applies it."""
