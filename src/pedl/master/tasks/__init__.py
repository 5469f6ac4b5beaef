"""Tasks: commands, notebooks, shells, TensorBoards and generic tasks as users launch, list and kill them
(service), what a task asks of its allocation (allocations), its logs read back (logs), its last use
(activity), where the proxy connects (proxy_targets), model definitions (the context a task or trial downloads)
and the bind mounts a task config may name. What each kind starts with is lifecycle/task_kinds.py and its
neighbours; workers/idle_tasks.py ends idle ones."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.tasks.activity import ActivityThrottle, report, touch
    from pedl.master.tasks.allocations import ack_preemption, context_b64, live_summaries, post_logs, wait_preemption
    from pedl.master.tasks.bind_mount_roots import check
    from pedl.master.tasks.logs import LogFilter, batch, describe, fields, follow_slot, require
    from pedl.master.tasks.model_definitions import b64_tgz, check_stored, files_to_tgz, upload_slot
    from pedl.master.tasks.proxy_targets import (
        MIN_PORT,
        UNAUTHENTICATED,
        ProxyTarget,
        ended,
        register_port,
        resolve,
        verify,
    )
    from pedl.master.tasks.service import (
        Described,
        LaunchRequest,
        Shown,
        kill,
        kill_in_workspace,
        launch,
        listing,
        set_priority,
    )

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "activity": ["ActivityThrottle", "report", "touch"],
        "allocations": ["ack_preemption", "context_b64", "live_summaries", "post_logs", "wait_preemption"],
        "bind_mount_roots": ["check"],
        "logs": ["LogFilter", "batch", "describe", "fields", "follow_slot", "require"],
        "model_definitions": ["b64_tgz", "check_stored", "files_to_tgz", "upload_slot"],
        "proxy_targets": ["MIN_PORT", "ProxyTarget", "UNAUTHENTICATED", "ended", "register_port", "resolve", "verify"],
        "service": [
            "Described",
            "LaunchRequest",
            "Shown",
            "kill",
            "kill_in_workspace",
            "launch",
            "listing",
            "set_priority",
        ],
    },
)
