"""A trace job as the replay runs it: its lifecycle (one table of allowed transitions) and what it
holds while it runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from pedl.scheduling.scaling_decider import PendingTask
from pedl.scheduling.scheduler import SlotRequest
from pedl.sim.cloud import SimInstance
from pedl.sim.trace import TraceJob


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    NEVER_FIT = "never_fit"


JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.NEVER_FIT}),
    # finished; or cut short (spot interruption, instance terminated) and queued again
    JobState.RUNNING: frozenset({JobState.DONE, JobState.PENDING}),
    JobState.DONE: frozenset(),
    JobState.NEVER_FIT: frozenset(),
}


@dataclass(eq=False)
class SimJob:
    trace: TraceJob
    state: JobState = JobState.PENDING
    progress: float = 0.0  # run time saved in checkpoints
    started_at: float | None = None  # first start
    run_started: float = 0.0  # this run's start (billed GPU time counts from here)
    trained_from: float = 0.0  # this run's start after its restore: progress counts from here
    run_seq: int = 0  # tells a live finish event from one of a run cut short
    placements: list[tuple[SimInstance, list[str]]] = field(default_factory=list)
    request: SlotRequest | None = None
    task: PendingTask | None = None
    moving: bool = False  # checkpointing to move: it leaves its instances when that ends
    restore_debt: float = 0.0  # seconds its next start spends restoring a move's checkpoint
    yielding: bool = False  # it moves (or moved and waits) to give its slots to new work
    yielded_at: float | None = None  # when it left its slots to new work and queued again

    def trained(self, now: float) -> float:
        """Seconds of training in this run so far (its restore is none)."""
        return max(now - self.trained_from, 0.0)

    @property
    def id(self) -> str:
        return self.trace.id

    def set_state(self, state: JobState) -> None:
        if state not in JOB_TRANSITIONS[self.state]:
            raise RuntimeError(f"job {self.id}: {self.state} -> {state} is not allowed")
        self.state = state
