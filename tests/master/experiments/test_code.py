"""An experiment's code over GET /experiments/{id}/model_def (the SDK's download_code, det e
download-model-def): the archive its tasks unpack, for any logged-in user; 404 for an unknown one."""

from __future__ import annotations

import base64
import io
import tarfile

from fastapi.testclient import TestClient

from tests.master.fakes import SINGLE_CONFIG, FakeAgent, bearer, create_experiment, file_entry


def members(b64: str) -> dict[str, bytes | None]:
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(b64)), mode="r:gz") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()}  # type: ignore[union-attr]


def test_any_user_downloads_the_code_the_tasks_get(
    client: TestClient, user: dict, admin: dict, agent: FakeAgent
) -> None:
    files = [
        file_entry("sub", directory=True),
        file_entry("sub/util.py", b"X = 1\n"),
        file_entry("train.py", b"print('hello')\n"),
    ]
    exp = create_experiment(client, user, SINGLE_CONFIG, files=files)
    [task] = agent.start_all()
    given = client.get(f"/api/v1/tasks/{task.task_id}/context_directory", headers=bearer(task.token)).json()["b64Tgz"]
    for headers in (user, admin):
        r = client.get(f"/api/v1/experiments/{exp['id']}/model_def", headers=headers)
        assert r.status_code == 200, r.text
        assert r.json() == {"b64Tgz": given}
    assert members(given) == {"sub": None, "sub/util.py": b"X = 1\n", "train.py": b"print('hello')\n"}


def test_an_empty_model_directory_is_an_empty_archive(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, files=[], activate=False)
    r = client.get(f"/api/v1/experiments/{exp['id']}/model_def", headers=user)
    assert r.status_code == 200 and members(r.json()["b64Tgz"]) == {}


def test_unknown_experiment_and_no_token(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/experiments/424242/model_def", headers=user)
    assert r.status_code == 404 and "424242" in r.json()["message"]
    assert client.get("/api/v1/experiments/1/model_def").status_code == 401
