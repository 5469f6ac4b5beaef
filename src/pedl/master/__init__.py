"""The pedl master: REST API, database, scheduler and the control loop that drives experiments."""
