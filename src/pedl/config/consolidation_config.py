"""A dynamic pool's `consolidation:` section: when the provisioner may move checkpointed trials to
other instances so that a half-empty or on-demand instance can go away, and what a move may cost."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from pedl.config.durations import Duration
from pedl.config.loading import StrictModel

# Fields are declared in the order the cross-field checks need: a field validator sees only the
# fields declared before it (info.data), and only those that were valid.


class ConsolidationConfig(StrictModel):
    enabled: bool = Field(default=True, description="move trials so that instances can be terminated")
    max_moves_per_hour: int = Field(
        default=20, ge=0, le=1_000_000, description="the pool's disruption budget: trials moved in any hour"
    )
    min_saving_per_hour: float = Field(
        default=0.5, ge=0, allow_inf_nan=False, description="USD/h; a move that saves less per hour is not made"
    )
    checkpoint_cost: Duration = Field(default=60.0, description="expected time a move spends checkpointing the trial")
    restore_cost: Duration = Field(default=60.0, description="expected time a moved trial spends restoring")
    min_trial_runtime_between_moves: Duration = Field(
        default=1800.0, description="a trial started or last moved less than this ago is not moved"
    )
    yield_to_new_work: bool = Field(
        default=True,
        description="a long checkpointed trial gives its slots to new work that would wait for a boot, "
        "and resumes on the instance booting for that work (a move: within the budget)",
    )
    min_remaining_to_yield: Duration = Field(
        default=3600.0, description="only a trial expected to run at least this much longer yields to new work"
    )
    keep_free_slots: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="free slots the pool keeps after its moves, so that new work starts "
        "without waiting for a boot (the queue's tail against cost)",
    )

    @field_validator("max_moves_per_hour", mode="after")
    @classmethod
    def _budget(cls, v: int, info: ValidationInfo) -> int:
        if v == 0 and info.data.get("enabled"):
            raise ValueError("0 allows no move while consolidation.enabled is true; set enabled: false")
        return v

    @field_validator("min_trial_runtime_between_moves", mode="after")
    @classmethod
    def _recovered(cls, v: float, info: ValidationInfo) -> float:
        # a trial moved again before it recovered from its last move would only ever be moving
        checkpoint, restore = info.data.get("checkpoint_cost"), info.data.get("restore_cost")
        if checkpoint is not None and restore is not None and v < checkpoint + restore:
            raise ValueError(
                f"{v:g}s is shorter than consolidation.checkpoint_cost + consolidation.restore_cost "
                f"({checkpoint + restore:g}s): a trial could be moved again before it recovered from its "
                f"last move"
            )
        return v
