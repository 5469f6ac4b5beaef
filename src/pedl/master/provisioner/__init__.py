"""Dynamic agents: the per-pool provisioner that applies the pure scaling decider's and move planners'
decisions (pedl.scheduling), and the providers (local processes, AWS) behind one small interface."""
