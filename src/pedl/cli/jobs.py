"""`pedl job list|update`: each pool's queue in the scheduler's order (GET /api/v1/job-queues-v2),
and a job's priority, weight, pool or place in its queue (POST /api/v1/job-queues), as det's
`job list` and `job update` (and more: --ahead-of/--behind-of, which det 0.38.1 lacks)."""

from __future__ import annotations

from typing import Any

import typer

from pedl.cli.output import JsonFlag, fail, fmt_enum, fmt_time, print_json, print_table, say
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="The job queue: list jobs, change their priority, weight, pool or place.")


@app.command("list")
def list_(
    ctx: typer.Context,
    resource_pool: str | None = typer.Option(None, "--resource-pool", "-p", help="only this pool's queue"),
    as_json: JsonFlag = False,
) -> None:
    """List the jobs (experiments with a trial waiting or running), most urgent first in each pool."""
    params: dict[str, Any] = {"resourcePool": resource_pool} if resource_pool else {}
    jobs = [j["full"] for j in client_of(ctx).paginate("/api/v1/job-queues-v2", "jobs", params)]
    if as_json:
        print_json(jobs)
        return
    rows = [
        [
            j["summary"]["jobsAhead"],
            j["jobId"],
            f"{j['name']} ({j['entityId']})",
            j["resourcePool"],
            j.get("priority", ""),
            j.get("weight", ""),
            fmt_time(j["submissionTime"]),
            f"{j['allocatedSlots']}/{j['requestedSlots']}",
            fmt_enum(j["summary"]["state"]),
            j["username"],
        ]
        for j in jobs
    ]
    print_table(
        ["#", "Job", "Experiment", "Pool", "Priority", "Weight", "Submitted", "Slots (held/asked)", "State", "User"],
        rows,
    )


@app.command("update")
def update(
    ctx: typer.Context,
    job_id: str = typer.Argument(..., help="the job, as `pedl job list` shows it (job-<experiment id>)"),
    priority: int | None = typer.Option(None, "--priority", "-p", help="1 (most urgent) to 99"),
    weight: float | None = typer.Option(None, "--weight", "-w", help="its fair-share weight"),
    resource_pool: str | None = typer.Option(
        None, "--resource-pool", help="move it to this pool (none of its trials may be running)"
    ),
    ahead_of: str | None = typer.Option(None, "--ahead-of", help="put it right ahead of this job of its priority"),
    behind_of: str | None = typer.Option(None, "--behind-of", help="put it right behind this job of its priority"),
) -> None:
    """Change one thing of a job: its priority, weight, pool, or place in the queue."""
    change = {
        k: v
        for k, v in (
            ("priority", priority),
            ("weight", weight),
            ("resourcePool", resource_pool),
            ("aheadOf", ahead_of),
            ("behindOf", behind_of),
        )
        if v is not None
    }
    if len(change) != 1:
        fail("give one of --priority, --weight, --resource-pool, --ahead-of or --behind-of")
    client_of(ctx).post("/api/v1/job-queues", {"updates": [{"jobId": job_id, **change}]})
    [(key, value)] = change.items()
    say(
        f"{job_id}: {key} set to {value}"
        if key in ("priority", "weight", "resourcePool")
        else f"{job_id} moved {'ahead of' if key == 'aheadOf' else 'behind'} {value}"
    )
