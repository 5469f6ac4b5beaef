"""GET /api/v1/resources/allocation/raw (Determined's ResourceAllocationRaw): the allocations that held
slots in a window, the seconds inside it; admins see all, users their own; bad windows name the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.master.agents import resource_allocation
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment

RAW = "/api/v1/resources/allocation/raw"


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")  # as det's suite sends them


def entries(client: TestClient, headers: dict, after: float, before: float, **extra: str) -> list[dict]:
    r = client.get(RAW, params={"timestampAfter": iso(after), "timestampBefore": iso(before), **extra}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["resourceEntries"]


def test_an_allocation_counts_its_seconds_inside_the_window(
    app: FastAPI, client: TestClient, clock: ManualClock, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-u", slots=1)
    try:
        exp = create_experiment(client, user, SINGLE_CONFIG)
        t0 = clock.now()
        [task] = fake.start_all()
        clock.advance(100)
        fake.exit(task.allocation_id, 0)
        [entry] = entries(client, admin, t0 - 50, t0 + 40)
        assert entry["kind"] == "TRIAL" and entry["experimentId"] == exp["id"] and entry["slots"] == 1
        assert entry["username"] == "determined" and entry["seconds"] == pytest.approx(40, abs=1)
        assert entry["startTime"] and entry["endTime"]
        assert entries(client, user, t0 - 50, t0 + 500)[0]["seconds"] == pytest.approx(100, abs=1)
        assert entries(client, admin, t0 + 200, t0 + 300) == []  # it had ended
        r = client.get(
            RAW, params={"timestamp_after": iso(t0 - 50), "timestamp_before": iso(t0 + 500)}, headers=admin
        )  # det resources raw --json sends snake_case
        assert r.status_code == 200 and len(r.json()["resourceEntries"]) == 1, r.text
    finally:
        fake.close()


def test_a_user_sees_only_their_own(
    app: FastAPI, client: TestClient, clock: ManualClock, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-o", slots=1)
    try:
        create_experiment(client, admin, SINGLE_CONFIG)  # the admin's
        t0 = clock.now()
        fake.start_all()
        clock.advance(10)
        assert entries(client, user, t0 - 1, t0 + 60) == []
        [entry] = entries(client, admin, t0 - 1, t0 + 60)
        assert entry["endTime"] is None and entry["seconds"] == pytest.approx(11, abs=1)  # running: up to now
    finally:
        fake.close()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"timestampBefore": "2024-01-01T00:00:00Z"}, "timestampAfter"),
        ({"timestampAfter": "yesterday", "timestampBefore": "2024-01-01T00:00:00Z"}, "timestampAfter"),
        ({"timestampAfter": "2024-01-02T00:00:00Z", "timestampBefore": "2024-01-01T00:00:00Z"}, "timestampBefore"),
        ({"timestampAfter": "2020-01-01T00:00:00Z", "timestampBefore": "2024-01-01T00:00:00Z"}, "timestampBefore"),
    ],
)
def test_bad_windows_name_the_field(client: TestClient, user: dict, params: dict, field: str) -> None:
    r = client.get(RAW, params=params, headers=user)
    assert r.status_code == 400 and r.json()["message"].startswith(field), r.text


def test_a_window_with_too_many_allocations_is_refused(
    app: FastAPI, client: TestClient, clock: ManualClock, admin: dict, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resource_allocation, "ROWS_MAX", 1)
    fake = FakeAgent(app, "agent-m", slots=2)
    try:
        create_experiment(client, user, SINGLE_CONFIG)
        create_experiment(client, user, SINGLE_CONFIG)
        assert len(fake.start_all()) == 2
        r = client.get(
            RAW, params={"timestampAfter": iso(clock.now() - 5), "timestampBefore": iso(clock.now() + 5)}, headers=admin
        )
        assert r.status_code == 400 and "timestampAfter" in r.json()["message"], r.text
    finally:
        fake.close()
