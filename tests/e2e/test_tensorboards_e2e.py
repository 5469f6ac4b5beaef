"""A TensorBoard end to end, on a real master and local agent with TensorBoard from PyPI: it
shows a pedl.core trial from the metrics the master stored, and another trial from the event files
Determined's Core API would have written to checkpoint storage; read through the master's proxy, its
scalars are what the trials reported. Another user cannot reach it. A trial still running when it
starts shows its later reports too."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from pedl.devcluster import wait_experiment, wait_for
from pedl.launch.tensorboard_runs import EventFile
from tests.e2e.conftest import MODELS, steps_config
from tests.e2e.test_proxy_e2e import _login

pytestmark = pytest.mark.e2e

STEPS = 5


def reports_config(name: str) -> dict:
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {"steps": STEPS},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": STEPS}},
        "resources": {"slots_per_trial": 1},
    }


def task_logs(c, task_id: str) -> str:
    text = c.master.api("GET", f"/api/v1/tasks/{task_id}/logs", follow="false")
    return "".join(json.loads(line)["result"]["message"] for line in text.splitlines() if line)


def test_a_tensorboard_shows_the_trials_scalars_through_the_proxy(cluster) -> None:
    c = cluster
    c.add_agent("a1")
    from_metrics = c.create(reports_config("tb-metrics"), MODELS / "fast_reports")
    from_storage = c.create(reports_config("tb-storage"), MODELS / "fast_reports")
    for exp_id in (from_metrics, from_storage):
        wait_experiment(c.master, exp_id, {"STATE_COMPLETED"})
    [metrics_trial] = c.trials(from_metrics)
    [storage_trial] = c.trials(from_storage)
    # what Determined's Core API would have synced for the second trial (determined/tensorboard/build.py)
    cluster_id = c.master.api("GET", "/api/v1/master")["clusterId"]
    synced = (
        c.work
        / "ckpts"
        / cluster_id
        / "tensorboard"
        / "experiment"
        / str(from_storage)
        / "trial"
        / str(storage_trial["id"])
    )
    f = EventFile(str(synced), 1000.0)
    f.write(1001.0, 3, {"Determined/from_storage": 0.125})
    f.flush()

    out = c.master.api(
        "POST", "/api/v1/tensorboards", {"experimentIds": [from_metrics], "trialIds": [storage_trial["id"]]}
    )
    tb = out["tensorboard"]
    assert tb["experimentIds"] == [from_metrics, from_storage] and tb["trialIds"] == [storage_trial["id"]]
    assert tb["description"] == f"TensorBoard (Experiment {from_metrics}, {from_storage})"
    task_id = tb["id"]

    wait_ready(c, task_id)
    base = f"{c.master.url}/proxy/{task_id}/"
    owner = {"Authorization": f"Bearer {c.master.token()}"}
    metrics_run = f"experiment/{from_metrics}/trial/{metrics_trial['id']}"
    storage_run = f"experiment/{from_storage}/trial/{storage_trial['id']}"

    seen: list[str] = []

    def tags() -> dict | None:
        r = httpx.get(base + "data/plugin/scalars/tags", headers=owner, timeout=30)
        seen[:] = [f"{r.status_code} {r.text[:1000]}"]
        got = r.json() if r.status_code == 200 else {}
        wanted = {f"{metrics_run}/training", f"{metrics_run}/validation", storage_run}
        return got if wanted <= set(got) else None

    try:
        found = wait_for(tags, 60, interval=0.5, what="TensorBoard to load the runs")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: last answer {seen}; the task's log:\n{task_logs(c, task_id)[-4000:]}") from None
    assert set(found[f"{metrics_run}/training"]) == {"Determined/loss"}
    assert set(found[f"{metrics_run}/validation"]) == {"Determined/validation_loss"}
    assert set(found[storage_run]) == {"Determined/from_storage"}

    def series(run: str, tag: str) -> list[tuple[int, float]]:
        r = httpx.get(base + "data/plugin/scalars/scalars", params={"run": run, "tag": tag}, headers=owner)
        assert r.status_code == 200, r.text
        return [(step, value) for _wall, step, value in r.json()]

    assert series(f"{metrics_run}/training", "Determined/loss") == [(s, 1.0 / s) for s in range(1, STEPS + 1)]
    assert series(f"{metrics_run}/validation", "Determined/validation_loss") == [(STEPS, 1.0 / STEPS)]
    assert series(storage_run, "Determined/from_storage") == [(3, 0.125)]
    # the reports as the master stored them: the same numbers
    stored = c.master.api("GET", f"/api/v1/trials/{metrics_trial['id']}/metrics", group="training")["metrics"]
    assert [(m["stepsCompleted"], m["metrics"]["loss"]) for m in stored] == series(
        f"{metrics_run}/training", "Determined/loss"
    )

    # Determined's e2e waits for TensorBoard's own line in the task's log
    logs = task_logs(c, task_id)
    assert re.search(r"TensorBoard \S+ at http://\S+/proxy/" + task_id, logs), logs[-3000:]

    admin = _login(c.master.url, "admin")
    body = {"user": {"username": "bob", "admin": False, "active": True}, "password": "", "isHashed": False}
    assert httpx.post(f"{c.master.url}/api/v1/users", content=json.dumps(body), headers=admin).status_code == 200
    bob = _login(c.master.url, "bob")
    assert httpx.get(base + "data/plugin/scalars/tags", headers=bob).status_code == 404

    c.master.api("POST", f"/api/v1/tensorboards/{task_id}/kill")
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/tensorboards/{task_id}")["tensorboard"]["state"] == "STATE_TERMINATED",
        60,
        what="the TensorBoard to end",
    )


def wait_ready(c, task_id: str) -> None:
    def ready() -> bool:
        task = c.master.api("GET", f"/api/v1/tasks/{task_id}")["task"]
        assert not task["endTime"], task_logs(c, task_id)[-3000:]
        return bool(task["allocations"]) and task["allocations"][0]["isReady"]

    wait_for(ready, 120, interval=0.5, what="the TensorBoard to be ready")


def test_a_running_trials_later_reports_reach_the_tensorboard(cluster, enterable_tmp) -> None:
    c = cluster
    c.add_agent("a1")
    release = enterable_tmp / "release"  # the trials, run as their user, look for it
    total = 60
    exp_id = c.create(
        steps_config("tb-live", steps=total, delay=1.0, ckpt_every=20, release=str(release)), MODELS / "held"
    )
    wait_for(
        lambda: (c.trials(exp_id) or [{}])[0].get("totalBatchesProcessed", 0) >= 2,
        120,
        what="the trial's first reports",
    )
    [trial] = c.trials(exp_id)
    env = {"environment_variables": ["PEDL_TENSORBOARD_REFRESH_SECONDS=0.5"]}
    tb = c.master.api("POST", "/api/v1/tensorboards", {"experimentIds": [exp_id], "config": {"environment": env}})
    task_id = tb["tensorboard"]["id"]
    wait_ready(c, task_id)
    base = f"{c.master.url}/proxy/{task_id}/data/plugin/scalars/scalars"
    owner = {"Authorization": f"Bearer {c.master.token()}"}
    run = f"experiment/{exp_id}/trial/{trial['id']}"

    seen: list[str] = []

    def loss() -> list[tuple[int, float]]:
        r = httpx.get(base, params={"run": f"{run}/training", "tag": "Determined/loss"}, headers=owner)
        seen[:] = [f"{r.status_code} {r.text[:500]}"]
        return [(step, value) for _wall, step, value in r.json()] if r.status_code == 200 else []

    try:
        early = wait_for(loss, 60, interval=0.5, what="the first reports in TensorBoard")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: last answer {seen}; the task's log:\n{task_logs(c, task_id)[-4000:]}") from None
    assert 2 <= len(early) < total
    release.touch()
    wait_experiment(c.master, exp_id, {"STATE_COMPLETED"})
    wait_for(lambda: len(loss()) == total, 60, interval=0.5, what="every report in TensorBoard")
    assert loss() == [(s, 1.0 / s) for s in range(1, total + 1)]
    r = httpx.get(base, params={"run": f"{run}/validation", "tag": "Determined/validation_loss"}, headers=owner)
    assert [(step, value) for _wall, step, value in r.json()] == [(s, 1.0 / s) for s in (20, 40, 60)]
    c.master.api("POST", f"/api/v1/tensorboards/{task_id}/kill")
