"""GET /api/v1/instances: the machines provisioners launched, for any logged-in user, filtered by
pool, the terminated ones only when asked for."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.master.db import models
from pedl.master.lifecycle.states import InstanceState
from tests.master.fakes import ctx_of

N = InstanceState
HOUR = 3600.0


@pytest.fixture
def instances(app: FastAPI, client: TestClient, clock: ManualClock) -> None:
    now = clock.now()
    rows = [
        ("i-1", "default", N.RUNNING, now - 2 * HOUR, None, 0.5),
        ("i-2", "default", N.TERMINATED, now - 4 * HOUR, now - 3 * HOUR, 1.0),
        ("i-3", "gpu", N.STARTING, now - HOUR, None, 3.0),
    ]
    with ctx_of(app).db.session() as s:
        s.add_all(
            [
                models.Instance(
                    id=i,
                    resource_pool=pool,
                    provider="aws",
                    instance_type="g4dn.xlarge",
                    state=state,
                    slots=1,
                    price_per_hour=price,
                    launched_at=launched,
                    terminated_at=ended,
                )
                for i, pool, state, launched, ended, price in rows
            ]
        )


def ids(r) -> list[str]:
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["instances"]]


def test_unauthenticated_is_401(client: TestClient, instances: None) -> None:
    r = client.get("/api/v1/instances")
    assert r.status_code == 401, r.text


def test_a_user_sees_the_live_instances_with_their_cost(client: TestClient, user: dict, instances: None) -> None:
    r = client.get("/api/v1/instances", headers=user)
    assert ids(r) == ["i-1", "i-3"]  # by launch time; the terminated one left out
    first = r.json()["instances"][0]
    assert (first["resourcePool"], first["state"], first["instanceHours"], first["cost"]) == (
        "default",
        "RUNNING",
        2.0,
        1.0,
    )
    assert first["idleSeconds"] is None  # no provisioner runs for these pools


def test_the_resource_pool_filter(client: TestClient, user: dict, instances: None) -> None:
    assert ids(client.get("/api/v1/instances?resourcePool=gpu", headers=user)) == ["i-3"]
    assert ids(client.get("/api/v1/instances?resourcePool=default&all=true", headers=user)) == ["i-2", "i-1"]
    assert ids(client.get("/api/v1/instances?resourcePool=elsewhere", headers=user)) == []


def test_all_true_includes_terminated_instances(client: TestClient, admin: dict, instances: None) -> None:
    r = client.get("/api/v1/instances?all=true", headers=admin)
    assert ids(r) == ["i-2", "i-1", "i-3"]
    ended = r.json()["instances"][0]
    assert (ended["state"], ended["instanceHours"], ended["cost"]) == ("TERMINATED", 1.0, 1.0)
    assert ids(client.get("/api/v1/instances?all=false", headers=admin)) == ["i-1", "i-3"]
