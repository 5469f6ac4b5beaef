"""The rules every domain and the cluster obey, below both: each lifecycle's states and legal edges
(states) and its one setter (transitions), what a step may ask beyond its transaction (effects, which the
Controller implements), an allocation's operations (allocations), what an allocation's end means for its
trial and experiment (progression, search_progress, trial_room, task_contact), what a task is started with
(task_specs, task_env, generic_task_specs, task_kinds and each kind's module, agent_user_groups, tokens),
its log lines as stored (log_lines), the checkpoint GC task as the cluster sees it (checkpoint_gc_task_rows,
checkpoint_gc_holds) and the task-token check (task_access).

Nothing here imports cluster/, provisioner/ or a domain package (tests/master/test_layering.py), and this
`__init__` imports nothing: the cluster and the domains import the module that holds a name."""
