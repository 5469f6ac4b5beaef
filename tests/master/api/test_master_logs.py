"""GET /api/v1/master/logs (`det master logs [-f] [--tail N]`): the master's own recent records, as
Determined's v1MasterLogsResponse lines, for admins only."""

from __future__ import annotations

import json
import logging

from fastapi.testclient import TestClient

log = logging.getLogger("pedl.master.test")


def entries(client: TestClient, headers: dict, **params) -> list[dict]:
    r = client.get("/api/v1/master/logs", headers=headers, params=params)
    assert r.status_code == 200, r.text
    return [json.loads(line)["result"]["logEntry"] for line in r.text.splitlines()]


def test_the_master_keeps_its_records_for_admins(client: TestClient, admin: dict, user: dict) -> None:
    log.warning("first marker")
    log.error("second marker for %s", "alice")
    got = entries(client, admin)
    mine = [e for e in got if "marker" in e["message"]]
    assert [(e["level"], e["message"]) for e in mine] == [
        ("LOG_LEVEL_WARNING", "pedl.master.test: first marker"),
        ("LOG_LEVEL_ERROR", "pedl.master.test: second marker for alice"),
    ]
    assert all(isinstance(e["id"], int) and e["timestamp"].endswith("Z") for e in got)
    assert [e["id"] for e in got] == sorted({e["id"] for e in got})
    assert entries(client, admin, offset=-1) == got[-1:]  # det's --tail 1
    assert entries(client, admin, limit=1) == got[:1]
    assert entries(client, admin, offset=len(got) - 2) == got[-2:]
    r = client.get("/api/v1/master/logs", headers=user)
    assert r.status_code == 403 and "admin" in r.json()["message"]
    assert client.get("/api/v1/master/logs").status_code == 401


def test_a_followed_stream_goes_on_with_new_records(client: TestClient, admin: dict) -> None:
    log.warning("before")
    start = entries(client, admin, offset=-1)[0]["id"]
    log.warning("after one")
    log.warning("after two")
    # follow ends here because the limit is reached; without one it goes on until the client leaves
    got = entries(client, admin, follow="true", offset=-3, limit=3)
    assert [e["id"] for e in got] == [start, start + 1, start + 2]
    assert [e["message"].split(": ")[-1] for e in got] == ["before", "after one", "after two"]
