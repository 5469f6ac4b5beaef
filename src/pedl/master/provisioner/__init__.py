"""Dynamic agents: a pure scaling decider, the per-pool provisioner that applies its decisions,
and the providers (local processes, AWS) behind one small interface."""
