"""`pedl experiment list|describe|wait|kill|pause|activate|move|list-checkpoints` (and `create`, from
experiment_create.py; `delete`, `continue` and `set`, from experiment_lifecycle.py), over Determined's
/api/v1/experiments endpoints."""

from __future__ import annotations

import time
from typing import Any

import typer

from pedl.cli.client import MasterClient
from pedl.cli.experiment_create import create
from pedl.cli.experiment_lifecycle import continue_, delete, set_app
from pedl.cli.experiment_watch import COMPLETED, wait_for_experiment
from pedl.cli.output import (
    JsonFlag,
    cell_text,
    err,
    fmt_bytes,
    fmt_percent,
    fmt_state,
    fmt_time,
    print_fields,
    print_json,
    print_table,
    say,
)
from pedl.cli.state import client_of
from pedl.errors import NotFound

app = typer.Typer(no_args_is_help=True, help="Create, watch and control experiments.")
app.command("create")(create)
app.command("delete")(delete)
app.command("continue")(continue_)
app.add_typer(set_app, name="set")

RECENT_EVENTS = 10
DELETED = "STATE_DELETED"  # a checkpoint whose files garbage collection removed


@app.command("list")
def list_(
    ctx: typer.Context,
    all_: bool = typer.Option(False, "--all", "-a", help="every user's, archived included"),
    as_json: JsonFlag = False,
) -> None:
    """List your experiments (GET /api/v1/experiments)."""
    client = client_of(ctx)
    params: dict[str, Any] = {} if all_ else {"archived": False, "users": [client.username]}
    experiments = client.paginate("/api/v1/experiments", "experiments", params)
    if as_json:
        print_json(experiments)
        return
    print_table(
        ["ID", "Owner", "Name", "State", "Progress", "Started", "Ended", "Resource pool"],
        [
            [
                e.get("id"),
                e.get("username"),
                e.get("name"),
                fmt_state(e.get("state")),
                fmt_percent(e.get("progress")),
                fmt_time(e.get("startTime")),
                fmt_time(e.get("endTime")),
                e.get("resourcePool"),
            ]
            for e in experiments
        ],
    )


def searcher_metric(body: dict[str, Any]) -> str | None:
    config = body.get("config") or (body.get("experiment") or {}).get("config") or {}
    searcher = config.get("searcher") if isinstance(config, dict) else None
    return searcher.get("metric") if isinstance(searcher, dict) else None


def best_validation(trial: dict[str, Any], metric: str | None) -> Any:
    metrics = (trial.get("bestValidation") or {}).get("metrics") or {}
    values = metrics.get("avgMetrics", metrics) if isinstance(metrics, dict) else {}
    if metric and isinstance(values, dict) and metric in values:
        return values[metric]
    return trial.get("searcherMetricValue")


def kept_checkpoints(client: MasterClient, experiment_id: int, trials: list[dict[str, Any]]) -> dict[Any, str]:
    """trial id -> uuid of its checkpoint to use: its bestCheckpoint unless deleted, else the best
    by searcher metric of its checkpoints that still have files, else its latest such one. A
    master's trial list may carry no bestCheckpoint (pedl's does not: it would cost a metrics scan
    per trial), so the experiment's checkpoints are read once, only when one is missing."""
    chosen: dict[Any, str] = {}
    for t in trials:
        best = t.get("bestCheckpoint") or {}
        if best.get("uuid") and best.get("state") != DELETED:
            chosen[t.get("id")] = best["uuid"]
    if len(chosen) == len(trials):
        return chosen
    try:
        checkpoints = (
            client.get(f"/api/v1/experiments/{experiment_id}/checkpoints", sortByAttr="SORT_BY_SEARCHER_METRIC").get(
                "checkpoints"
            )
            or []
        )
    except NotFound:  # a master without the endpoint: show what the trials carry
        return chosen
    latest: dict[Any, tuple[int, str]] = {}
    for c in checkpoints:  # best first, those without the searcher metric last
        training = c.get("training") or {}
        trial_id = training.get("trialId")
        if c.get("state") == DELETED or trial_id is None or not c.get("uuid"):
            continue
        if "searcherMetric" in training:
            chosen.setdefault(trial_id, c["uuid"])
        steps = (c.get("metadata") or {}).get("steps_completed")
        steps = steps if isinstance(steps, int) else -1
        if trial_id not in latest or steps >= latest[trial_id][0]:
            latest[trial_id] = (steps, c["uuid"])
    return {**{tid: uuid for tid, (_, uuid) in latest.items()}, **chosen}


def experiment_events(client: MasterClient, experiment_id: int) -> list[dict[str, Any]] | None:
    """Recent lifecycle events, or None where the master has no events endpoint."""
    try:
        body = client.get(f"/api/v1/experiments/{experiment_id}/events")
    except NotFound:
        return None
    events = body.get("events") if isinstance(body, dict) else body
    return events if isinstance(events, list) else None


def _event_row(event: dict[str, Any]) -> list[Any]:
    """pedl's events: {time, entityType, entityId, fromState, toState, level, message}."""
    entity = " ".join(str(p) for p in (event.get("entityType"), event.get("entityId")) if p is not None)
    change = fmt_state(event.get("toState"))
    if event.get("fromState"):
        change = f"{fmt_state(event.get('fromState'))} -> {change}"
    return [fmt_time(event.get("time")), entity, change, event.get("message") or ""]


@app.command("describe")
def describe(ctx: typer.Context, experiment_id: int, as_json: JsonFlag = False) -> None:
    """Show an experiment, its trials and its recent events."""
    client = client_of(ctx)
    body = client.get(f"/api/v1/experiments/{experiment_id}")
    trials = client.paginate(f"/api/v1/experiments/{experiment_id}/trials", "trials")
    events = experiment_events(client, experiment_id)
    if as_json:
        print_json({**body, "trials": trials, "events": events})
        return
    exp = body.get("experiment") or {}
    metric = searcher_metric(body)
    print_fields(
        [
            ("ID", exp.get("id")),
            ("Name", exp.get("name")),
            ("State", fmt_state(exp.get("state"))),
            ("Owner", exp.get("username")),
            ("Progress", fmt_percent(exp.get("progress"))),
            ("Started", fmt_time(exp.get("startTime"))),
            ("Ended", fmt_time(exp.get("endTime"))),
            ("Searcher", exp.get("searcherType")),
            ("Metric", metric),
            ("Resource pool", exp.get("resourcePool")),
            ("Labels", ", ".join(exp.get("labels") or [])),
            ("Outcome", exp.get("endReason") or ""),
        ],
        title=f"Experiment {experiment_id}",
    )
    # why a trial ended early: stopped by the searcher (and its rung), failed, never fit
    kept = kept_checkpoints(client, experiment_id, trials) if trials else {}
    print_table(
        [
            "Trial",
            "State",
            "Hyperparameters",
            f"Best {metric or 'metric'}",
            "Restarts",
            "Batches",
            "Checkpoint",
            "Ended because",
        ],
        [
            [
                t.get("id"),
                fmt_state(t.get("state")),
                cell_text(t.get("hparams")),
                best_validation(t, metric),
                t.get("restarts"),
                t.get("totalBatchesProcessed"),
                kept.get(t.get("id")),
                t.get("endReason") or "",
            ]
            for t in trials
        ],
        title="Trials",
    )
    if events:
        print_table(
            ["Time", "Entity", "State", "Message"],
            [_event_row(e) for e in events[-RECENT_EVENTS:]],
            title="Recent events",
        )


@app.command("wait")
def wait(
    ctx: typer.Context,
    experiment_id: int,
    interval: float = typer.Option(5.0, "--interval", min=0.0, help="seconds between polls"),
) -> None:
    """Wait for the experiment to end: exit 0 if it COMPLETED, 1 otherwise."""
    client = client_of(ctx)
    with err().status(f"experiment {experiment_id}: ...") as status:
        final = wait_for_experiment(
            client,
            experiment_id,
            interval,
            lambda s: status.update(f"experiment {experiment_id}: {fmt_state(s)}"),
            time.sleep,
        )
    say(f"Experiment {experiment_id} is {fmt_state(final)}")
    raise typer.Exit(0 if final == COMPLETED else 1)


def _action(ctx: typer.Context, experiment_id: int, verb: str, done: str) -> None:
    client_of(ctx).post(f"/api/v1/experiments/{experiment_id}/{verb}")
    say(f"Experiment {experiment_id} {done}")


@app.command("kill")
def kill(ctx: typer.Context, experiment_id: int) -> None:
    """Kill the experiment's trials and end it (CANCELED)."""
    _action(ctx, experiment_id, "kill", "is being killed")


@app.command("pause")
def pause(ctx: typer.Context, experiment_id: int) -> None:
    """Pause the experiment; its trials stop after checkpointing."""
    _action(ctx, experiment_id, "pause", "is paused")


@app.command("activate")
def activate(ctx: typer.Context, experiment_id: int) -> None:
    """Activate a paused (or created --paused) experiment."""
    _action(ctx, experiment_id, "activate", "is active")


@app.command("move")
def move(
    ctx: typer.Context,
    experiment_id: int,
    project: int = typer.Option(
        ...,
        "--project",
        "--project-id",
        min=1,
        help="the id of the project it goes into (pedl project list shows them)",
    ),
) -> None:
    """Move the experiment into another project (its owner or an admin; not into an archived one)."""
    client = client_of(ctx)
    client.post(
        f"/api/v1/experiments/{experiment_id}/move", {"destinationProjectId": project, "experimentId": experiment_id}
    )
    exp = client.get(f"/api/v1/experiments/{experiment_id}").get("experiment") or {}
    say(
        f"Moved experiment {experiment_id} to project {exp.get('projectId', project)} "
        f"({exp.get('workspaceName', '?')}/{exp.get('projectName', '?')})"
    )


@app.command("list-checkpoints")
def list_checkpoints(ctx: typer.Context, experiment_id: int, as_json: JsonFlag = False) -> None:
    """List the experiment's checkpoints (GET /api/v1/experiments/{id}/checkpoints)."""
    client = client_of(ctx)
    # One call, not paginated, as det makes it.
    checkpoints = (
        client.get(f"/api/v1/experiments/{experiment_id}/checkpoints", sortByAttr="SORT_BY_END_TIME").get("checkpoints")
        or []
    )
    if as_json:
        print_json(checkpoints)
        return
    metric = None
    if checkpoints:
        metric = searcher_metric({"config": (checkpoints[0].get("training") or {}).get("experimentConfig")})
    rows = []
    for c in checkpoints:
        training = c.get("training") or {}
        values = (training.get("validationMetrics") or {}).get("avgMetrics") or {}
        size = sum(int(v) for v in (c.get("resources") or {}).values() if str(v).isdigit())
        rows.append(
            [
                training.get("trialId"),
                (c.get("metadata") or {}).get("steps_completed"),
                c.get("uuid"),
                fmt_state(c.get("state")),
                values.get(metric) if metric else None,
                "" if c.get("state") == DELETED else fmt_bytes(size),
                fmt_time(c.get("reportTime")),
            ]
        )
    print_table(["Trial", "Steps", "UUID", "State", f"Validation {metric or 'metric'}", "Size", "Reported"], rows)
