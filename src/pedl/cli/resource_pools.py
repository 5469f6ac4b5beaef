"""`pedl resource-pool list|describe` and `pedl instance list`: capacity, queues, instances (with
idle time) and recent provisioning errors of each pool."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer

from pedl.cli.output import JsonFlag, fail, fmt_enum, print_fields, print_json, print_table, say
from pedl.cli.state import client_of
from pedl.config.durations import format_duration

app = typer.Typer(no_args_is_help=True, help="Resource pools: slots, queue, instances.")
instances_app = typer.Typer(no_args_is_help=True, help="Instances launched by the master.")


def _ts(value: float | None) -> str:
    if value is None:
        return ""
    return datetime.fromtimestamp(value, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _dur(value: float | None) -> str:
    return "" if value is None else format_duration(round(value))


def _provider(p: dict[str, Any]) -> str:
    prov = p.get("provider")
    if not prov:
        return "static"
    spot = " spot" if prov.get("spot") else ""
    return f"{prov['type']}{spot} {','.join(prov.get('instanceTypes') or [])}"


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List pools with their slots, queue and instances."""
    pools = client_of(ctx).get("/api/v1/resource-pools").get("resourcePools") or []
    if as_json:
        print_json(pools)
        return
    rows = [
        [
            p["name"],
            _provider(p),
            p["numAgents"],
            f"{p['slotsUsed']}/{p['slotsAvailable']}",
            p["queuedTasks"],
            p["pendingSlots"],
            p["numInstances"],
            f"{p.get('minAgents', '')}-{p.get('maxAgents', '')}" if p.get("provider") else "",
            (p.get("provisioning") or {}).get("lastError") or "",
        ]
        for p in pools
    ]
    print_table(
        [
            "Pool",
            "Provider",
            "Agents",
            "Slots used",
            "Queued",
            "Pending slots",
            "Instances",
            "Min-max",
            "Last provisioning error",
        ],
        rows,
    )


def _instance_rows(instances: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            i["id"],
            i["resourcePool"],
            i["instanceType"],
            "spot" if i["spot"] else "on-demand",
            fmt_enum(i["state"]),
            i["slots"],
            _ts(i["launchedAt"]),
            _ts(i["registeredAt"]),
            _dur(i["idleSeconds"]),
            f"{i['instanceHours']:.2f}",
            f"${i['cost']:.2f}",
            i.get("terminationReason") or "",
        ]
        for i in instances
    ]


INSTANCE_COLUMNS = [
    "Instance",
    "Pool",
    "Type",
    "Market",
    "State",
    "Slots",
    "Launched",
    "Registered",
    "Idle",
    "Hours",
    "Cost",
    "Reason",
]


@app.command("describe")
def describe(ctx: typer.Context, name: str = typer.Argument(..., help="pool name"), as_json: JsonFlag = False) -> None:
    """One pool: settings, demand, instances and recent provisioning events."""
    pool = client_of(ctx).get(f"/api/v1/resource-pools/{name}")["resourcePool"]
    if as_json:
        print_json(pool)
        return
    prov = pool.get("provisioning") or {}
    print_fields(
        [
            ("Pool", pool["name"]),
            ("Provider", _provider(pool)),
            ("Agents", pool["numAgents"]),
            ("Slots used / available", f"{pool['slotsUsed']}/{pool['slotsAvailable']}"),
            ("Queued tasks", pool["queuedTasks"]),
            ("Pending slots", pool["pendingSlots"]),
            ("Instances", pool["numInstances"]),
            ("Last provisioning error", prov.get("lastError") or "none"),
            ("Launches held back until", _ts(prov.get("backoffUntil")) or "-"),
            *_cost_fields(pool),
        ],
        title=f"Resource pool {name}",
    )
    if pool.get("instances"):
        print_table(INSTANCE_COLUMNS, _instance_rows(pool["instances"]), title="Instances")
    if pool.get("draining"):
        print_table(
            ["Instance", "Draining since", "Why"],
            [[d["instanceId"], _ts(d["since"]), d["reason"] or ""] for d in pool["draining"]],
            title="Planned moves: draining",
        )
    if pool.get("moves"):
        print_table(
            ["Time", "Trial", "From", "To", "Saves $/h", "Why"],
            [
                [
                    _ts(m["at"]),
                    m["trialId"] if m["trialId"] is not None else "-",
                    ",".join(m["from"]),
                    ",".join(m["to"]),
                    f"{m['savingPerHour']:.2f}",
                    m["reason"],
                ]
                for m in pool["moves"]
            ],
            title="Recent moves",
        )
    if pool.get("recentEvents"):
        print_table(
            ["Time", "Level", "Event"],
            [[_ts(e["time"]), e["level"], e["message"]] for e in pool["recentEvents"]],
            title="Recent provisioning events",
        )


def _cost_fields(pool: dict) -> list[tuple[str, object]]:
    cost = pool.get("cost")
    if not cost:
        return []
    bound = cost["lowerBoundPerHour"]
    ratio = f" ({cost['perHour'] / bound:.2f}x)" if bound > 0 else ""
    return [("Cost per hour / lower bound", f"${cost['perHour']:.2f} / ${bound:.2f}{ratio}")]


@instances_app.command("list")
def list_instances(
    ctx: typer.Context,
    pool: str | None = typer.Option(None, "--pool", help="only this pool"),
    all_: bool = typer.Option(False, "--all", help="include terminated instances"),
    as_json: JsonFlag = False,
) -> None:
    """List instances with their type, market, state, idle time and cost so far."""
    params: dict[str, Any] = {"all": "true" if all_ else "false"}
    if pool:
        params["resourcePool"] = pool
    client = client_of(ctx)
    instances = client.get("/api/v1/instances", **params).get("instances") or []
    if as_json:
        print_json(instances)
    elif instances:
        print_table(INSTANCE_COLUMNS, _instance_rows(instances))
    else:
        say(no_instances_note(client.get("/api/v1/resource-pools").get("resourcePools") or [], pool, all_))


def no_instances_note(pools: list[dict[str, Any]], pool: str | None, all_: bool) -> str:
    """Why `instance list` found none: a pool of static agents has no instances (the master launches
    none for it); a pool with a provider has none now."""
    by_name = {p["name"]: p for p in pools}
    dynamic = [p["name"] for p in pools if p.get("provider")]
    live = "" if all_ else " (--all also lists terminated ones)"
    static = "the master launches no instances for it; `pedl agent list` shows its agents"
    if pool is not None:
        if pool not in by_name:
            fail(f"no resource pool named {pool!r}; the pools: {', '.join(by_name) or 'none'}")
        if not by_name[pool].get("provider"):
            return f"Pool {pool} has static agents only: {static}."
        return f"No instances in pool {pool}{live}."
    if not dynamic:
        return (
            "Every pool has static agents only (none has a provider), so the master launches no instances; "
            "`pedl agent list` shows the agents."
        )
    return f"No instances in pool{'s' if len(dynamic) > 1 else ''} {', '.join(dynamic)}{live}."
