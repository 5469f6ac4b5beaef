"""The master's background workers, each a loop the app starts and stops (worker_passes.py): checkpoint
garbage collection, experiment deletion, the metric digester, metric retention and idle tasks. What a
pass changes belongs to its domain package; the app and the wiring import each worker's module."""
