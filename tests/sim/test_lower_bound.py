"""The lower bound: ∫ ceil(GPUs demanded(t) / GPUs per instance) dt, checked on step functions."""

from __future__ import annotations

import pytest

from pedl.sim.lower_bound import lower_bound_instance_hours
from pedl.sim.trace import TraceJob


def jobs(*spans: tuple[float, float, int]) -> list[TraceJob]:
    return [TraceJob(f"j{k}", start, end - start, gpus) for k, (start, end, gpus) in enumerate(spans)]


def test_one_job_is_its_run_time() -> None:
    assert lower_bound_instance_hours(jobs((0, 3600, 1)), 1) == 1.0
    assert lower_bound_instance_hours(jobs((0, 3600, 3)), 4) == 1.0  # 3 GPUs still take one instance


def test_a_step_function() -> None:
    # 1 GPU on [0,10), 4 GPUs on [5,15): demand 1, 5, 4 -> 1, 2, 1 four-GPU instances for 5 s each
    assert lower_bound_instance_hours(jobs((0, 10, 1), (5, 15, 4)), 4) * 3600 == pytest.approx(20.0)
    # the same demand on one-GPU instances: 1*5 + 5*5 + 4*5
    assert lower_bound_instance_hours(jobs((0, 10, 1), (5, 15, 4)), 1) * 3600 == pytest.approx(50.0)


def test_jobs_that_meet_end_to_end_do_not_overlap() -> None:
    # one ends exactly when the next starts: never 2 GPUs at once
    assert lower_bound_instance_hours(jobs((0, 3600, 1), (3600, 7200, 1)), 1) == 2.0


def test_gaps_cost_nothing_and_packing_is_perfect() -> None:
    spans = [(0, 3600, 1)] * 4 + [(10_000, 13_600, 8)]
    assert lower_bound_instance_hours(jobs(*spans), 4) == 3.0  # 1 h of one instance + 1 h of two


def test_zero_gpu_jobs_need_one_instance() -> None:
    assert lower_bound_instance_hours(jobs((0, 3600, 0), (0, 1800, 0)), 4) == 1.0
    assert lower_bound_instance_hours(jobs((0, 3600, 0), (0, 3600, 4)), 4) == 1.0


def test_no_jobs_no_hours() -> None:
    assert lower_bound_instance_hours([], 4) == 0.0
