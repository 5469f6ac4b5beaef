"""Request latency by route template: two trial ids make one series, unmatched paths and unknown
methods share one label each, the status is a class, the injected timer measures, WebSockets pass
through untimed, and the master's own app labels its routes the same way."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, HTTPException, WebSocket
from fastapi.testclient import TestClient

from pedl.master.observability.master_metrics import MasterMetrics
from pedl.master.observability.request_latency import RequestLatency


class StepTimer:
    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


@pytest.fixture
def metrics() -> MasterMetrics:
    return MasterMetrics(timer=StepTimer(0.2), process_metrics=False)


@pytest.fixture
def client(metrics: MasterMetrics):
    app = FastAPI()
    app.add_middleware(RequestLatency, metrics=metrics)

    @app.get("/api/v1/trials/{trial_id}")
    def get_trial(trial_id: int) -> dict:
        if trial_id == 0:
            raise HTTPException(404, "no such trial")
        return {"id": trial_id}

    @app.get("/boom")
    def boom() -> dict:
        raise RuntimeError("a bug")

    @app.websocket("/agents/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        await socket.send_text("hi")
        await socket.close()

    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def series(metrics: MasterMetrics) -> dict[tuple[str, str, str], float]:
    """(method, route, status) -> observed requests."""
    return {
        (s.labels["method"], s.labels["route"], s.labels["status"]): s.value
        for family in metrics.registry.collect()
        if family.name == "pedl_api_request_duration_seconds"
        for s in family.samples
        if s.name.endswith("_count")
    }


def test_requests_are_labelled_by_route_template_never_the_raw_path(client: TestClient, metrics: MasterMetrics) -> None:
    for trial_id in (1, 2, 3):
        assert client.get(f"/api/v1/trials/{trial_id}").status_code == 200
    assert client.get("/api/v1/trials/0").status_code == 404
    assert series(metrics) == {
        ("GET", "/api/v1/trials/{trial_id}", "2xx"): 3,
        ("GET", "/api/v1/trials/{trial_id}", "4xx"): 1,
    }
    assert metrics.registry.get_sample_value(
        "pedl_api_request_duration_seconds_sum",
        {"method": "GET", "route": "/api/v1/trials/{trial_id}", "status": "2xx"},
    ) == pytest.approx(0.6)


def test_unmatched_paths_unknown_methods_and_errors_share_bounded_labels(
    client: TestClient, metrics: MasterMetrics
) -> None:
    for n in range(5):
        assert client.get(f"/no/such/path/{n}").status_code == 404
    assert client.request("BREW", "/api/v1/trials/1").status_code == 405
    assert client.get("/boom").status_code == 500
    assert series(metrics) == {
        ("GET", "<unmatched>", "4xx"): 5,
        ("OTHER", "/api/v1/trials/{trial_id}", "4xx"): 1,
        ("GET", "/boom", "5xx"): 1,
    }


def test_websockets_pass_through_untimed(client: TestClient, metrics: MasterMetrics) -> None:
    with client.websocket_connect("/agents/ws") as socket:
        assert socket.receive_text() == "hi"
    assert series(metrics) == {}


def test_the_master_labels_its_own_routes(client_of_master: TestClient) -> None:
    ctx = client_of_master.app.state.ctx
    for trial_id in (7, 8):
        client_of_master.get(f"/api/v1/trials/{trial_id}")  # 401: no token; still one route
    routes = {route for _, route, _ in series(ctx.metrics)}
    assert "/api/v1/trials/{trial_id}" in routes
    assert not any("/7" in r or "/8" in r for r in routes)


@pytest.fixture
def client_of_master(app: FastAPI):
    with TestClient(app) as c:
        yield c
