"""What the tests of checkpoint GC tasks share: a trial on a fake agent that stores checkpoints with files
where its experiment keeps them, a user's delete, the spec a GC task was given and its report."""

from __future__ import annotations

import io
import json
import tarfile
import uuid as uuid_lib
from typing import Any

from fastapi.testclient import TestClient

from pedl.common.checkpoint_files import list_directory
from pedl.common.checkpoint_storage import SharedFSStorage
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, ctx_of, post

FILES = {"model.pt": b"m" * 100, "state": b"s" * 50, "logs/events.txt": b"e" * 10, "metadata.json": b"{}"}


def start_trial(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    return started


def storage_of(client: TestClient) -> SharedFSStorage:
    return SharedFSStorage(ctx_of(client.app).config.effective_checkpoint_storage().host_path)


def stored(client: TestClient, task: StartedTask, steps: int, files: dict[str, bytes] = FILES) -> str:
    name = str(uuid_lib.uuid4())
    with storage_of(client).store_path(name) as path:
        for rel, data in files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_bytes(data)
        listing = list_directory(path)
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "training": {},
        "metadata": {"steps_completed": steps},
        "state": "STATE_COMPLETED",
        "resources": {k: str(v) for k, v in listing.items()},
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    return name


def shown(client: TestClient, headers: dict, name: str) -> dict:
    r = client.get(f"/api/v1/checkpoints/{name}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["checkpoint"]


def delete(client: TestClient, headers: dict, *names: str):
    return client.request(
        "DELETE", "/api/v1/checkpoints", content=json.dumps({"checkpointUuids": list(names)}), headers=headers
    )


def spec_of(client: TestClient, gc: StartedTask) -> dict[str, Any]:
    """The spec in the GC task's context, as its agent gets it."""
    r = client.get(f"/api/v1/tasks/{gc.task_id}/context_directory", headers=bearer(gc.token))
    assert r.status_code == 200, r.text
    import base64

    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.json()["b64Tgz"])), mode="r:gz") as tar:
        return json.load(tar.extractfile(".pedl/checkpoint_gc.json"))


def report(client: TestClient, gc: StartedTask, left: dict[str, dict[str, int]], token: str | None = None):
    body = {"checkpoints": [{"uuid": u, "resources": files} for u, files in left.items()]}
    return post(client, f"/api/v1/allocations/{gc.allocation_id}/checkpoint_gc", body, bearer(token or gc.token))
