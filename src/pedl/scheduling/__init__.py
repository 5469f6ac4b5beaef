"""The decision core: pure code that takes state and time and returns decisions. Who runs where (scheduler,
fit), which instances a pool launches and ends (scaling_decider over snapshot, with the pool's policy in
pool_policy), which trials move or yield (consolidation, yielding) and which trials an experiment runs (searcher/).

It touches no database and calls no cloud, so unit tests and the simulator (pedl.sim) drive it as the master
does. Nothing here imports `pedl.master` (tests/test_scheduling_layering.py), and this `__init__` imports
nothing: a caller imports the module that holds a name."""
