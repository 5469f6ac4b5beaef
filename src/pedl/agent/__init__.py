"""The pedl agent: a daemon that registers a machine's slots with the master and runs its tasks.

`run_agent(AgentOptions(...))` is the blocking entry point; `Agent.run(stop)` runs it in-process.
"""

from pedl.agent.connection import AgentRefused
from pedl.agent.daemon import Agent, run_agent
from pedl.agent.options import AgentOptions
from pedl.agent.work_dir_lock import WorkDirInUse

__all__ = ["Agent", "AgentOptions", "AgentRefused", "WorkDirInUse", "run_agent"]
