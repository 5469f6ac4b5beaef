"""Agents and what they run on: agents as the API shows them, enabled and disabled by an admin (service),
how an agent authenticates (credentials), the instances provisioners launched (instances), resource pools
(resource_pools) and the report of what allocations held (resource_allocation)."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.agents.credentials import (
        HAS_CREDENTIAL,
        MISSING_TOKEN,
        WRONG_TOKEN,
        InstanceSecrets,
        Offer,
        Refused,
        forget,
        known_secret,
        may_download,
        register,
        spot_instance,
    )
    from pedl.master.agents.instances import instance_summary
    from pedl.master.agents.resource_allocation import raw
    from pedl.master.agents.resource_pools import describe_pool, summaries
    from pedl.master.agents.service import one, set_enabled, set_slot_enabled, store_logs

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "credentials": [
            "HAS_CREDENTIAL",
            "InstanceSecrets",
            "MISSING_TOKEN",
            "Offer",
            "Refused",
            "WRONG_TOKEN",
            "forget",
            "known_secret",
            "may_download",
            "register",
            "spot_instance",
        ],
        "instances": ["instance_summary"],
        "resource_allocation": ["raw"],
        "resource_pools": ["describe_pool", "summaries"],
        "service": ["one", "set_enabled", "set_slot_enabled", "store_logs"],
    },
)
