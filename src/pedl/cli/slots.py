"""`pedl slot list`: every slot of every agent, with the allocation running on it, if any.
Reads GET /api/v1/agents and GET /api/v1/tasks, like `det slot list`."""

from __future__ import annotations

import typer

from pedl.cli.output import JsonFlag, fmt_enum, print_json, print_table
from pedl.cli.state import client_of
from pedl.cli.tasks import allocation_summaries, allocations_by_container

app = typer.Typer(no_args_is_help=True, help="List slots.")


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List slots: agent, slot id, device, and what runs there."""
    client = client_of(ctx)
    agents = client.get("/api/v1/agents").get("agents") or []
    by_container = allocations_by_container(allocation_summaries(client))
    rows = []
    for agent in agents:
        for slot_id, slot in sorted((agent.get("slots") or {}).items()):
            device = slot.get("device") or {}
            container = slot.get("container") or {}
            alloc = by_container.get(container.get("id") or "") or {}
            rows.append(
                {
                    "agentId": agent.get("id"),
                    "resourcePools": agent.get("resourcePools") or [],
                    "slotId": slot.get("id") or slot_id,
                    "enabled": slot.get("enabled"),
                    "draining": slot.get("draining"),
                    "allocationId": alloc.get("allocationId") or ("OCCUPIED" if container else "FREE"),
                    "taskName": alloc.get("name") or "",
                    "type": fmt_enum(device.get("type")).lower(),
                    "device": device.get("brand") or "",
                }
            )
    if as_json:
        print_json(rows)
        return
    print_table(
        ["Agent ID", "Resource pool", "Slot ID", "Enabled", "Draining", "Allocation ID", "Task name", "Type", "Device"],
        [
            [
                r["agentId"],
                ", ".join(r["resourcePools"]),
                r["slotId"],
                r["enabled"],
                r["draining"],
                r["allocationId"],
                r["taskName"],
                r["type"],
                r["device"],
            ]
            for r in rows
        ],
    )
