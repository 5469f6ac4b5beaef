"""The real det CLI (determined==0.38.1, in its own venv) against a pedl master, once over HTTP and
once over HTTPS (security.tls), where det trusts the master through its own DET_MASTER_CERT_FILE."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS, Cluster, steps_config
from tests.support.tls import write_tls_files

pytestmark = [pytest.mark.compat, pytest.mark.e2e]
DET = Path(__file__).parents[2] / ".venv-det" / "bin" / "det"


@pytest.fixture(scope="module", params=["http", "https"])
def det_cluster(request, tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET} (make det-venv could not install the package)")
    work = tmp_path_factory.mktemp(f"det-{request.param}")
    tls = write_tls_files(work / "tls") if request.param == "https" else None
    c = Cluster(work, None, tls=tls).start()
    c.add_agent("det-agent-1", slots=2)
    yield c
    c.stop()


def ended(c: Cluster, plural: str, task_id: str) -> bool:
    """A command, notebook, shell or TensorBoard has ended (det's lists show an ended one for a day)."""
    return c.master.api("GET", f"/api/v1/{plural}/{task_id}")[plural[:-1]]["state"] == "STATE_TERMINATED"


def det(
    c: Cluster, *args: str, stdin: str = "", check: bool = True, cert: Path | None = None
) -> subprocess.CompletedProcess:
    """Runs det against `c`; over HTTPS it trusts `cert`, by default the CA that signed the master's."""
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override the bundle det sets on its session
    # (psf/requests#3829), so with either set det never uses DET_MASTER_CERT_FILE
    dropped = ("DET_USER", "DET_PASS", "PEDL_MASTER_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update({"DET_DEBUG_CONFIG_PATH": str(c.work / "det-config"), "DET_MASTER": c.master.url})
    if c.tls:
        env["DET_MASTER_CERT_FILE"] = str(cert or c.tls.ca)
    proc = subprocess.run(
        [str(DET), "-m", c.master.url, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"det {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    assert "Consider upgrading" not in proc.stderr, proc.stderr  # det's version check: no warning
    return proc


def test_master_info(det_cluster) -> None:
    out = det(det_cluster, "master", "info", "--json").stdout
    info = json.loads(out)
    assert info["clusterId"] and info["version"]


UNAUTH_MASTER_SCRIPT = """
import json, sys
from determined.common import api
from determined.common.api import bindings
info = bindings.get_GetMaster(api.UnauthSession(sys.argv[1], cert=None))
print(json.dumps({"clusterId": info.clusterId, "version": info.version}))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_determined_sdk_reads_the_master_without_logging_in(det_cluster) -> None:
    """The 0.38.1 SDK asks for GET /api/v1/master with no token before it logs in (Determined answers it)."""
    proc = subprocess.run(
        [str(DET.parent / "python"), "-c", UNAUTH_MASTER_SCRIPT, det_cluster.master.url],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    info = det_cluster.master.api("GET", "/info")
    assert got == {"clusterId": info["cluster_id"], "version": "0.38.1"}


def test_user_login_and_whoami(det_cluster) -> None:
    det(det_cluster, "user", "login", "determined", stdin="\n")
    assert "determined" in det(det_cluster, "user", "whoami").stdout
    # a wrong password is a 401, which det reports as Determined's own master makes it report it
    wrong = det(det_cluster, "user", "login", "admin", stdin="wrong\n", check=False)
    assert wrong.returncode != 0 and "Invalid username/password combination" in wrong.stdout + wrong.stderr
    assert "determined" in det(det_cluster, "user", "whoami").stdout  # the earlier login still holds


def test_agent_and_slot_list(det_cluster) -> None:
    agents = json.loads(det(det_cluster, "agent", "list", "--json").stdout)
    assert [a["id"] for a in agents] == ["det-agent-1"]
    slots = det(det_cluster, "slot", "list").stdout
    assert slots.count("det-agent-1") == 2
    assert "FREE" in slots


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)  # TLS: info, login, agents
def test_experiment_create_list_describe_logs_kill(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "const.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="from-det", steps=6)))
    out = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    assert "Created experiment" in out
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    exp = wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"
    listing = det(det_cluster, "experiment", "list").stdout
    assert "from-det" in listing and "COMPLETED" in listing
    describe = det(det_cluster, "experiment", "describe", str(exp_id)).stdout
    assert "COMPLETED" in describe
    described = json.loads(det(det_cluster, "experiment", "describe", str(exp_id), "--json").stdout)
    assert described[0]["experiment"]["id"] == exp_id
    (trial,) = det_cluster.trials(exp_id)
    logs = det(det_cluster, "trial", "logs", str(trial["id"])).stdout
    assert "step 6" in logs and "done" in logs
    waited = det(det_cluster, "experiment", "wait", str(exp_id), "--polling-interval", "1", check=False)
    assert waited.returncode == 0
    ckpts = det(det_cluster, "experiment", "list-checkpoints", str(exp_id)).stdout
    assert trial and "6" in ckpts

    # a long one, killed from det
    cfg.write_text(yaml.safe_dump(steps_config(name="to-kill", steps=5000, delay=0.05, ckpt_every=1000)))
    out = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    kill_id = int(out.strip().split("Created experiment")[-1].split()[0])
    wait_for(
        lambda: det_cluster.trials(kill_id) and det_cluster.trials(kill_id)[0]["state"] == "STATE_RUNNING",
        60,
        what="trial running",
    )
    det(det_cluster, "experiment", "kill", str(kill_id))
    assert wait_experiment(det_cluster.master, kill_id, {"STATE_CANCELED"}, timeout=60)["state"] == "STATE_CANCELED"
    waited = det(det_cluster, "experiment", "wait", str(kill_id), "--polling-interval", "1", check=False)
    assert waited.returncode == 1


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)  # TLS: info, login, agents
def test_trial_logs_follow_ends_with_the_trial(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "follow.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="follow", steps=8, delay=0.1)))
    proc = det(det_cluster, "experiment", "create", "--follow-first-trial", str(cfg), str(MODELS / "steps"))
    assert "step 8" in proc.stdout and "done" in proc.stdout


def _csv(text: str) -> list[dict[str, str]]:
    import csv
    import io

    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)  # TLS: the tests above
def test_det_shows_progress_workload_states_and_the_files_deleted_checkpoints_had(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "ten.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="ten-steps", steps=10)))  # checkpoints at 5 and 10
    out = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"

    def states() -> dict[int, str]:
        got = det_cluster.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        return {c["metadata"]["steps_completed"]: c["state"] for c in got}

    # garbage collection keeps the trial's best and latest (both the one at 10)
    wait_for(lambda: states() == {5: "STATE_DELETED", 10: "STATE_COMPLETED"}, 60, what="checkpoint 5 deleted")
    rows = {
        int(r["# of Batches"]): r
        for r in _csv(det(det_cluster, "experiment", "list-checkpoints", str(exp_id), "--csv").stdout)
    }
    # as Determined's, a DELETED checkpoint keeps listing the files it had; its state says they are gone
    assert rows[5]["State"].endswith("DELETED") and "state.json" in rows[5]["Resources"]
    assert rows[10]["State"].endswith("COMPLETED") and "state.json" in rows[10]["Resources"]

    outdir = tmp_path / "described"
    outdir.mkdir()
    det(det_cluster, "experiment", "describe", str(exp_id), "--outdir", str(outdir))
    workloads = {int(r["# of Batches"]): r["State"] for r in _csv((outdir / "workloads.csv").read_text())}
    assert (workloads[5], workloads[10]) == ("DELETED", "COMPLETED")  # a checkpoint's state at its step
    assert workloads[1] == ""  # training alone has no state in det 0.38
    assert "100.0%" in _csv((outdir / "experiments.csv").read_text())[0]["Progress"]

    # a killed experiment keeps the progress it reached
    cfg.write_text(yaml.safe_dump(steps_config(name="killed-midway", steps=2000, delay=0.02, ckpt_every=1000)))
    out = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    kill_id = int(out.strip().split("Created experiment")[-1].split()[0])
    wait_for(
        lambda: (det_cluster.trials(kill_id) or [{}])[0].get("totalBatchesProcessed", 0) >= 40,
        60,
        what="the trial to report 40 batches",
    )
    det(det_cluster, "experiment", "kill", str(kill_id))
    final = wait_experiment(det_cluster.master, kill_id, {"STATE_CANCELED"}, timeout=60)
    assert 0.02 <= final["progress"] < 1.0
    [line] = [line for line in det(det_cluster, "experiment", "list").stdout.splitlines() if "killed-midway" in line]
    assert f"{final['progress']:.1%}" in line and "CANCELED" in line


@pytest.mark.parametrize("det_cluster", ["https"], indirect=True)
def test_det_refuses_a_master_its_ca_did_not_sign(det_cluster) -> None:
    # det offers to trust the certificate it was sent; answering no, it stops
    proc = det(det_cluster, "master", "info", stdin="n\n", check=False, cert=det_cluster.tls.other_ca)
    assert proc.returncode != 0
    assert "untrusted certificate" in proc.stdout + proc.stderr
    assert "Unable to verify master certificate" in proc.stderr


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_edits_an_experiment_and_the_api_shows_it(det_cluster, tmp_path) -> None:
    """archive, unarchive, set name/description/priority/weight/max-slots, label add/remove."""
    cfg = tmp_path / "edit.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="to-edit", steps=2)))
    out = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    exp_id = str(int(out.strip().split("Created experiment")[-1].split()[0]))
    assert (
        wait_experiment(det_cluster.master, int(exp_id), {"STATE_COMPLETED", "STATE_ERROR"})["state"]
        == "STATE_COMPLETED"
    )

    def shown() -> dict:
        got = det_cluster.master.api("GET", f"/api/v1/experiments/{exp_id}")
        return {**got["experiment"], "config": got["config"]}

    det(det_cluster, "experiment", "set", "description", exp_id, "what it tried")
    det(det_cluster, "experiment", "set", "name", exp_id, "renamed-by-det")
    det(det_cluster, "experiment", "label", "add", exp_id, "keep")
    det(det_cluster, "experiment", "label", "add", exp_id, "drop")
    det(det_cluster, "experiment", "label", "remove", exp_id, "drop")
    det(det_cluster, "experiment", "set", "priority", exp_id, "12")
    det(det_cluster, "experiment", "set", "weight", exp_id, "2.5")
    det(det_cluster, "experiment", "archive", exp_id)
    exp = shown()
    assert (exp["description"], exp["name"], exp["labels"], exp["archived"]) == (
        "what it tried",
        "renamed-by-det",
        ["keep"],
        True,
    )
    assert exp["config"]["resources"]["priority"] == 12 and exp["config"]["resources"]["weight"] == 2.5
    det(det_cluster, "experiment", "unarchive", exp_id)
    assert shown()["archived"] is False
    det(det_cluster, "experiment", "set", "max-slots", exp_id, "2")
    assert shown()["config"]["resources"]["max_slots"] == 2
    det(det_cluster, "experiment", "set", "max-slots", exp_id, "None")  # det sends null: no cap
    assert shown()["config"]["resources"]["max_slots"] is None


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_disables_and_enables_an_agent(det_cluster) -> None:
    def enabled() -> tuple[bool, bool]:
        [agent] = [a for a in det_cluster.master.api("GET", "/api/v1/agents")["agents"] if a["id"] == "det-agent-1"]
        return agent["enabled"], agent["draining"]

    refused = det(det_cluster, "-u", "determined", "agent", "disable", "det-agent-1", stdin="\n", check=False)
    assert refused.returncode != 0 and "admin" in refused.stdout + refused.stderr and enabled() == (True, False)
    det(det_cluster, "-u", "admin", "agent", "disable", "--drain", "det-agent-1", stdin="\n")  # blank password
    assert enabled() == (False, True)
    det(det_cluster, "-u", "admin", "agent", "enable", "det-agent-1", stdin="\n")
    assert enabled() == (True, False)


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)  # TLS: the tests above
def test_det_disables_and_enables_a_slot(det_cluster) -> None:
    def slot(slot_id: str) -> dict:
        [row] = [
            r
            for r in json.loads(det(det_cluster, "slot", "list", "--json").stdout)
            if r["agent_id"] == "det-agent-1" and r["slot_id"] == slot_id
        ]
        return row

    refused = det(det_cluster, "-u", "determined", "slot", "disable", "det-agent-1", "1", stdin="\n", check=False)
    assert refused.returncode != 0 and "Forbidden" in refused.stdout + refused.stderr  # det's wording of a 403
    assert slot("1")["enabled"] is True and slot("1")["allocation_id"] == "FREE"
    out = det(det_cluster, "-u", "admin", "slot", "disable", "det-agent-1", "1", stdin="\n").stdout
    assert "Disabled slot 1 of agent det-agent-1" in out
    assert (slot("1")["enabled"], slot("0")["enabled"]) == (False, True)
    det(det_cluster, "-u", "admin", "slot", "enable", "det-agent-1", "1", stdin="\n")
    assert slot("1")["enabled"] is True


SDK_SCRIPT = """
import json, sys
from determined.experimental import client
client.login(master=sys.argv[1], user="determined", password="")
exp = client.get_experiment(int(sys.argv[2]))
[trial] = exp.get_trials()
out = {
    "training": [(m.steps_completed, m.metrics) for m in trial.iter_metrics("training")],
    "validation": [(m.steps_completed, m.metrics) for m in trial.iter_metrics("validation")],
    "streamed": [m.steps_completed for m in client.stream_trials_training_metrics([trial.id])],
    "checkpoints": [c.uuid for c in trial.list_checkpoints()],
}
exp.add_label("from-sdk")
exp.add_label("gone")
exp.remove_label("gone")
print(json.dumps(out))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_determined_sdk_reads_metrics_and_checkpoints_and_labels(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "sdk.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="for-the-sdk", steps=4)))
    out = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    proc = subprocess.run(
        [str(DET.parent / "python"), "-c", SDK_SCRIPT, det_cluster.master.url, str(exp_id)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    [trial] = det_cluster.master.api("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
    stored = det_cluster.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics")["metrics"]
    for group in ("training", "validation"):
        assert [[m["stepsCompleted"], m["metrics"]] for m in stored if m["group"] == group] == got[group], group
    assert got["training"] and got["streamed"] == [step for step, _ in got["training"]]
    api_ckpts = det_cluster.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert sorted(got["checkpoints"]) == sorted(c["uuid"] for c in api_ckpts) and got["checkpoints"]
    assert det_cluster.master.api("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["labels"] == ["from-sdk"]


def _completed_run_with_a_deleted_checkpoint(c: Cluster, tmp_path: Path, name: str) -> tuple[int, str, str]:
    """A 10-step experiment: checkpoints at 5 and 10; garbage collection deletes the one at 5.
    Returns (experiment id, the kept checkpoint's uuid, the deleted one's)."""
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name=name, steps=10)))
    out = det(c, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    assert wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"

    def by_step() -> dict[int, dict]:
        got = c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        return {ck["metadata"]["steps_completed"]: ck for ck in got}

    wait_for(lambda: by_step()[5]["state"] == "STATE_DELETED", 60, what="checkpoint 5 deleted")
    return exp_id, by_step()[10]["uuid"], by_step()[5]["uuid"]


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_model_registry_and_the_api_agree(det_cluster, tmp_path) -> None:
    """det model create/list/describe/register-version/list-versions/move/delete; refusals named."""
    _exp_id, kept, deleted = _completed_run_with_a_deleted_checkpoint(det_cluster, tmp_path, "for-det-models")
    api = det_cluster.master.api

    det(det_cluster, "model", "create", "det-model", "--description", "made by det")
    made = json.loads(det(det_cluster, "model", "create", "det-json", "--json").stdout)
    assert made["name"] == "det-json" and made["archived"] is False
    assert "det-model" in det(det_cluster, "model", "list").stdout
    listed = json.loads(det(det_cluster, "model", "list", "--json").stdout)
    assert sorted(m["name"] for m in listed) == ["det-json", "det-model"]
    out = det(det_cluster, "model", "register-version", "det-model", kept).stdout
    assert kept in out
    described = det(det_cluster, "model", "describe", "det-model").stdout
    assert "made by det" in described and kept in described
    assert kept in det(det_cluster, "model", "list-versions", "det-model").stdout
    versions = json.loads(det(det_cluster, "model", "list-versions", "det-model", "--json").stdout)
    assert [v["checkpoint"]["uuid"] for v in versions["modelVersions"]] == [kept]
    by_json = json.loads(det(det_cluster, "model", "register-version", "det-model", kept, "--json").stdout)
    assert by_json["modelVersion"]["version"] == 2
    det(det_cluster, "workspace", "create", "models-ws")
    ws_id = api("GET", "/api/v1/workspaces", name="models-ws")["workspaces"][0]["id"]
    det(det_cluster, "model", "move", "det-model", "-w", "models-ws")
    in_ws = json.loads(det(det_cluster, "model", "list", "-w", "models-ws", "--json").stdout)
    assert [m["name"] for m in in_ws] == ["det-model"]

    model = api("GET", "/api/v1/models/det-model")["model"]
    assert (model["description"], model["numVersions"], model["username"], model["workspaceId"]) == (
        "made by det",
        2,
        "determined",
        ws_id,
    )
    got = api("GET", "/api/v1/models/det-model/versions")["modelVersions"]
    assert [(v["version"], v["checkpoint"]["uuid"]) for v in got] == [(1, kept), (2, kept)]

    refused = det(det_cluster, "model", "register-version", "det-model", deleted, check=False)
    assert refused.returncode != 0 and "checkpointUuid" in refused.stdout + refused.stderr, refused
    for name, words in (("det-model", "already exists"), ("a/b", "'/'")):
        refused = det(det_cluster, "model", "create", name, check=False)
        assert refused.returncode != 0 and words in refused.stdout + refused.stderr, refused
    assert api("GET", "/api/v1/models/det-model/versions")["pagination"]["total"] == 2
    assert len(api("GET", "/api/v1/models")["models"]) == 2

    det(det_cluster, "model", "delete", "det-json")
    assert [m["name"] for m in api("GET", "/api/v1/models")["models"]] == ["det-model"]


SDK_MODELS_SCRIPT = """
import json, os, sys, warnings
from determined.experimental import client
client.login(master=sys.argv[1], user="determined", password="")
uuid, outdir = sys.argv[2], sys.argv[3]
m = client.create_model("sdk-model", description="first", metadata={"a": 1, "b": 2})
m.add_metadata({"c": 3})
m.remove_metadata(["a"])
m.set_labels(["y", "z"])
m.set_description("second")
v1 = m.register_version(uuid)
v1.set_name("one")
v1.set_notes("the notes")
m.register_version(uuid).delete()
m.register_version(uuid)
got = client.get_model("sdk-model")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    by_id = client.get_model_by_id(m.model_id)
    old_style = [v.model_version for v in got.get_versions()]
one = got.get_version(1)
path = one.checkpoint.download(os.path.join(outdir, "ckpt"))
m.archive()
archived = client.get_model(m.model_id).archived
m.unarchive()
doomed = client.create_model("sdk-doomed")
doomed.delete()
out = {
    "id": m.model_id, "by_id": by_id.name, "names": [x.name for x in client.list_models()],
    "metadata": got.metadata, "labels": got.labels, "description": got.description,
    "versions": [(v.model_version, v.checkpoint.uuid, v.name, v.notes) for v in got.list_versions()],
    "old_style": old_style, "latest": got.get_version().model_version, "one": [one.name, one.checkpoint.uuid],
    "files": sorted(os.listdir(path)), "archived": archived,
}
print(json.dumps(out))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_determined_sdk_drives_the_model_registry(det_cluster, tmp_path) -> None:
    _exp_id, kept, _deleted = _completed_run_with_a_deleted_checkpoint(det_cluster, tmp_path, "for-sdk-models")
    proc = subprocess.run(
        [str(DET.parent / "python"), "-c", SDK_MODELS_SCRIPT, det_cluster.master.url, kept, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    api = det_cluster.master.api
    model = api("GET", "/api/v1/models/sdk-model")["model"]
    assert model["id"] == got["id"] and got["by_id"] == "sdk-model"
    assert (model["metadata"], model["labels"], model["description"], model["archived"]) == (
        {"b": 2, "c": 3},
        ["y", "z"],
        "second",
        False,
    )
    assert (got["metadata"], got["labels"], got["description"], got["archived"]) == (
        {"b": 2, "c": 3},
        ["y", "z"],
        "second",
        True,
    )
    assert "sdk-model" in got["names"] and "sdk-doomed" not in got["names"]
    assert [m["name"] for m in api("GET", "/api/v1/models", name="sdk-")["models"]] == ["sdk-model"]
    versions = api("GET", "/api/v1/models/sdk-model/versions", orderBy="ORDER_BY_DESC")["modelVersions"]
    assert [[v["version"], v["checkpoint"]["uuid"], v["name"], v["notes"]] for v in versions] == got["versions"]
    assert got["versions"] == [[2, kept, "", ""], [1, kept, "one", "the notes"]]  # version 2 deleted, then again
    assert got["old_style"] == [2, 1] and got["latest"] == 2 and got["one"] == ["one", kept]
    files = api("GET", f"/api/v1/checkpoints/{kept}")["checkpoint"]["resources"]
    assert got["files"] == sorted(files) and got["files"]


WORKSPACE_SDK_SCRIPT = """
import json, sys
from determined.experimental import client
client.login(master=sys.argv[1], user="determined", password="")
ws = client.get_workspace(sys.argv[2])
print(json.dumps({"workspaces": [w.name for w in client.list_workspaces()],
                  "projects": [p.name for p in ws.list_projects()],
                  "experiments": [e.id for e in ws.get_project(sys.argv[3]).list_experiments()]}))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_workspaces_projects_and_templates(det_cluster, tmp_path) -> None:
    """workspace list/create/describe, project create/list/describe, template set/list/describe/remove,
    e create --project_id --template; each effect checked through the API."""
    api = det_cluster.master.api

    def experiments() -> list[dict]:
        return api("GET", "/api/v1/experiments")["experiments"]

    assert "Uncategorized" in det(det_cluster, "workspace", "list").stdout
    known = len(api("GET", "/api/v1/workspaces")["workspaces"])  # other tests of this cluster may add theirs
    det(det_cluster, "workspace", "create", "det-ws")
    [ws] = api("GET", "/api/v1/workspaces", name="det-ws")["workspaces"]
    assert (ws["name"], ws["username"]) == ("det-ws", "determined")
    taken = det(det_cluster, "workspace", "create", "DET-WS", check=False)
    assert taken.returncode != 0 and "exists already" in taken.stdout + taken.stderr
    assert len(api("GET", "/api/v1/workspaces")["workspaces"]) == known + 1
    assert "det-ws" in det(det_cluster, "workspace", "describe", "det-ws").stdout

    det(det_cluster, "project", "create", "det-ws", "det-proj", "--description", "from det")
    [proj] = api("GET", f"/api/v1/workspaces/{ws['id']}/projects")["projects"]
    assert (proj["name"], proj["description"], proj["workspaceName"]) == ("det-proj", "from det", "det-ws")
    assert "det-proj" in det(det_cluster, "project", "list", "det-ws").stdout
    refused = det(det_cluster, "project", "create", "Uncategorized", "nope", check=False)
    assert refused.returncode != 0 and "immutable" in refused.stdout + refused.stderr

    tpl = tmp_path / "tpl.yaml"
    tpl.write_text(yaml.safe_dump({"max_restarts": 0, "labels": ["from-template"]}))
    det(det_cluster, "template", "set", "det-tpl", str(tpl))  # GET 404, then POST
    tpl.write_text(
        yaml.safe_dump(
            {
                "max_restarts": 4,
                "labels": ["from-template"],
                "searcher": {"name": "single", "metric": "validation_loss"},
            }
        )
    )
    det(det_cluster, "template", "set", "det-tpl", str(tpl))  # GET, then PATCH
    assert api("GET", "/api/v1/templates/det-tpl")["template"]["config"]["max_restarts"] == 4
    listed = det(det_cluster, "template", "list").stdout
    assert "det-tpl" in listed and "Uncategorized" in listed
    assert yaml.safe_load(det(det_cluster, "template", "describe", "det-tpl").stdout)["max_restarts"] == 4

    cfg = tmp_path / "partial.yaml"
    config = steps_config(name="in-a-project", steps=2)
    del config["searcher"]["name"], config["searcher"]["metric"], config["max_restarts"]  # the template's
    cfg.write_text(yaml.safe_dump({**config, "labels": ["mine"]}))
    out = det(
        det_cluster,
        "experiment",
        "create",
        "--paused",
        "--project_id",
        str(proj["id"]),
        "--template",
        "det-tpl",
        str(cfg),
        str(MODELS / "steps"),
    ).stdout
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    got = api("GET", f"/api/v1/experiments/{exp_id}")
    exp = got["experiment"]
    assert (exp["projectId"], exp["projectName"], exp["workspaceId"], exp["workspaceName"]) == (
        proj["id"],
        "det-proj",
        ws["id"],
        "det-ws",
    )
    assert got["config"]["max_restarts"] == 4 and got["config"]["labels"] == ["mine"]  # the experiment's wins
    assert got["config"]["searcher"]["metric"] == "validation_loss"
    assert "in-a-project" in det(det_cluster, "project", "describe", "det-ws", "det-proj").stdout

    before = len(experiments())
    for flags, said in (
        (["--project_id", "9999", "--template", "det-tpl"], "projectId"),
        (["--template", "no-such-tpl"], "no-such-tpl"),
    ):
        proc = det(
            det_cluster, "experiment", "create", "--paused", *flags, str(cfg), str(MODELS / "steps"), check=False
        )
        assert proc.returncode != 0 and said in proc.stdout + proc.stderr, proc
    assert len(experiments()) == before

    proc = subprocess.run(
        [str(DET.parent / "python"), "-c", WORKSPACE_SDK_SCRIPT, det_cluster.master.url, "det-ws", "det-proj"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert listed["workspaces"] == [w["name"] for w in api("GET", "/api/v1/workspaces")["workspaces"]]
    assert {"Uncategorized", "det-ws"} <= set(listed["workspaces"])
    assert (listed["projects"], listed["experiments"]) == (["det-proj"], [exp_id])

    det(det_cluster, "template", "remove", "det-tpl")
    api("GET", "/api/v1/templates/det-tpl", expect=404)


def _created(out: str) -> int:
    return int(out.strip().split("Created experiment")[-1].split()[0])


def _stream(c: Cluster, path: str, token: str | None = None, **params: object) -> list[dict]:
    """The `result` of each line of an NDJSON answer of the master."""
    import httpx

    r = httpx.get(
        f"{c.master.url}{path}",
        params=params,
        timeout=60,
        headers={"Authorization": f"Bearer {token or c.master.token()}"},
    )
    assert r.status_code == 200, r.text
    return [json.loads(line)["result"] for line in r.text.splitlines() if line.strip()]


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_lists_the_job_queue_and_updates_jobs(det_cluster, tmp_path) -> None:
    """det job list (which reads the pools first: every v1ResourcePool key), job update -p and
    --resource-pool, and job update-batch, each checked through the API's queue and configs."""
    api = det_cluster.master.api
    cfg = tmp_path / "queued.yaml"
    ids = []
    for name in ("q-run", "q-a", "q-b"):  # two slots each on the two-slot agent: one runs, two wait
        config = steps_config(name=name, steps=5000, delay=0.05, ckpt_every=1000)
        config["resources"]["slots_per_trial"] = 2
        cfg.write_text(yaml.safe_dump(config))
        ids.append(_created(det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout))
    run, a, b = ids
    wait_for(lambda: det_cluster.trials(run)[0]["state"] == "STATE_RUNNING", 60, what="the first trial running")
    ours = {str(i) for i in ids}

    def queue() -> list[tuple[str, str]]:
        jobs = [j["full"] for j in api("GET", "/api/v1/job-queues-v2")["jobs"]]
        return [(j["jobId"], j["summary"]["state"]) for j in jobs if j["entityId"] in ours]

    def priority(exp_id: int) -> int:
        return api("GET", f"/api/v1/experiments/{exp_id}")["config"]["resources"]["priority"]

    listed = json.loads(det(det_cluster, "job", "list", "--json").stdout)["jobs"]
    assert (
        [(j["jobId"], j["summary"]["state"]) for j in listed if j["entityId"] in ours]
        == queue()
        == [(f"job-{run}", "STATE_SCHEDULED"), (f"job-{a}", "STATE_QUEUED"), (f"job-{b}", "STATE_QUEUED")]
    )
    assert api("GET", f"/api/v1/experiments/{a}")["experiment"]["jobId"] == f"job-{a}"  # one id everywhere
    assert f"job-{b}" in det(det_cluster, "job", "list").stdout

    det(det_cluster, "job", "update", f"job-{b}", "--priority", "10")
    assert priority(b) == 10 and queue()[0] == (f"job-{b}", "STATE_QUEUED")  # ahead of all, the running one too
    det(det_cluster, "job", "update-batch", f"job-{a}.priority=10")
    assert priority(a) == 10  # the same priority again: submission order decides
    assert queue() == [(f"job-{a}", "STATE_QUEUED"), (f"job-{b}", "STATE_QUEUED"), (f"job-{run}", "STATE_SCHEDULED")]
    refused = det(det_cluster, "job", "update", f"job-{a}", "--resource-pool", "nope", check=False)
    assert refused.returncode != 0 and "resourcePool" in refused.stdout + refused.stderr, refused
    refused = det(det_cluster, "job", "update", f"job-{run}", "--resource-pool", "default", check=False)
    assert refused.returncode == 0  # its own pool: nothing to move
    for exp_id in ids:
        det(det_cluster, "experiment", "kill", str(exp_id))
    for exp_id in ids:
        wait_experiment(det_cluster.master, exp_id, {"STATE_CANCELED"}, timeout=60)
    assert queue() == []


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_task_logs_by_the_task_id_pedl_gives(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "task.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="task-logs", steps=30, delay=0.1)))
    exp_id = _created(det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout)
    wait_for(lambda: det_cluster.trials(exp_id)[0]["state"] == "STATE_RUNNING", 60, what="the trial running")
    [trial] = det_cluster.trials(exp_id)
    task_id = trial["taskId"]
    assert task_id.startswith(f"{exp_id}.") and len(task_id.split(".", 1)[1]) == 36  # {experiment}.{uuid}
    assert task_id in det(det_cluster, "task", "list").stdout
    followed = det(det_cluster, "task", "logs", "-f", task_id).stdout  # it ends with the task
    assert "step 30" in followed and "done" in followed
    stored = [ln["message"] for ln in _stream(det_cluster, f"/api/v1/tasks/{task_id}/logs")]
    assert stored and det(det_cluster, "task", "logs", task_id).stdout.startswith("".join(stored))
    assert det(det_cluster, "task", "logs", "--tail", "2", task_id).stdout.startswith("".join(stored[-2:]))
    task = det_cluster.master.api("GET", f"/api/v1/tasks/{task_id}")["task"]
    assert task["taskId"] == task_id and task["allocations"][0]["state"] == "STATE_TERMINATED"


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_master_logs_for_admins(det_cluster) -> None:
    import httpx

    refused = det(det_cluster, "-u", "determined", "master", "logs", stdin="\n", check=False)
    assert refused.returncode != 0 and "admin" in refused.stdout + refused.stderr
    out = det(det_cluster, "-u", "admin", "master", "logs", stdin="\n").stdout
    assert "pedl master listening on" in out and " [INFO]: " in out
    r = httpx.post(
        f"{det_cluster.master.url}/api/v1/auth/login",
        timeout=30,
        content=json.dumps({"username": "admin", "password": ""}),
    )
    token = r.json()["token"]

    def newest() -> list[str]:
        return [e["logEntry"]["message"] for e in _stream(det_cluster, "/api/v1/master/logs", token, offset=-3)]

    before = newest()
    tail = det(det_cluster, "-u", "admin", "master", "logs", "--tail", "3", stdin="\n").stdout
    after = newest()
    # det prints "<time> [<LEVEL>]: <message>", a message (a traceback) may span lines; the master may
    # log a record between two reads
    printed = [m.rstrip("\n") for m in re.split(r"(?m)^\d{4}-\d\d-\d\dT[\d:.]+Z \[[A-Z]+\]: ", tail)[1:]]
    assert printed in ([m.rstrip("\n") for m in before], [m.rstrip("\n") for m in after]), (tail, before, after)


def _det_created(c: Cluster, cfg: Path, *flags: str) -> int:
    out = det(c, "experiment", "create", *flags, str(cfg), str(MODELS / "steps")).stdout
    return int(out.strip().split("Created experiment")[-1].split()[0])


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_continues_then_deletes_an_experiment(det_cluster, tmp_path) -> None:
    """det e continue trains the trial on from its latest checkpoint with the override applied; det e
    delete answers at once, and the experiment, its checkpoints and their files go."""
    api = det_cluster.master.api
    cfg = tmp_path / "cont.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {**steps_config(name="to-continue", steps=6, ckpt_every=3), "checkpoint_storage": {"save_trial_latest": 5}}
        )
    )
    exp_id = _det_created(det_cluster, cfg)
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    [trial] = det_cluster.trials(exp_id)
    first = {
        c["metadata"]["steps_completed"]: c["uuid"]
        for c in api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    }
    assert sorted(first) == [3, 6]

    out = det(
        det_cluster,
        "experiment",
        "continue",
        str(exp_id),
        "--config",
        "hyperparameters.steps=9",
        "--config",
        "searcher.max_length.batches=9",
    ).stdout
    assert f"Continued experiment {exp_id}" in out
    final = wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert final["state"] == "STATE_COMPLETED"
    got = api("GET", f"/api/v1/experiments/{exp_id}")
    assert got["config"]["searcher"]["max_length"]["batches"] == 9
    assert got["config"]["hyperparameters"]["steps"] == {"type": "const", "val": 9}
    assert "steps: 6" in got["experiment"]["originalConfig"]  # as the user sent it
    [trial] = det_cluster.trials(exp_id)
    assert (trial["state"], trial["restarts"], trial["totalBatchesProcessed"]) == ("STATE_COMPLETED", 0, 9)
    logs = det(det_cluster, "trial", "logs", str(trial["id"])).stdout
    assert f"resumed from {first[6]} at step 6" in logs and "step 9" in logs
    assert logs.count("step 1 pid") == 1  # the new run did not start over
    after = {
        c["metadata"]["steps_completed"] for c in api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    }
    assert after == {3, 6, 9}

    storage = got["config"]["checkpoint_storage"]
    dirs = [Path(storage["host_path"], storage.get("storage_path") or "", uuid) for uuid in first.values()]
    assert all(d.is_dir() for d in dirs)
    out = det(det_cluster, "experiment", "delete", str(exp_id), "--yes").stdout
    assert f"Deletion of experiment {exp_id} is in progress" in out
    wait_for(
        lambda: api("GET", f"/api/v1/experiments/{exp_id}", expect=None).get("code") == 5,
        60,
        what="the experiment deleted",
    )
    api("GET", f"/api/v1/checkpoints/{first[6]}", expect=404)
    api("GET", f"/api/v1/trials/{trial['id']}", expect=404)
    assert not any(d.exists() for d in dirs)


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_refuses_to_delete_or_continue_a_running_experiment(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "long.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="still-running", steps=4000, delay=0.05, ckpt_every=1000)))
    exp_id = _det_created(det_cluster, cfg)
    for args in (("delete", str(exp_id), "--yes"), ("continue", str(exp_id))):
        proc = det(det_cluster, "experiment", *args, check=False)
        out = proc.stdout + proc.stderr  # the state as the API shows it: active is QUEUED, STARTING or RUNNING
        assert proc.returncode != 0 and any(f"is {st}:" in out for st in ("QUEUED", "STARTING", "RUNNING")), proc
    shown = det_cluster.master.api("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]
    assert shown in ("STATE_QUEUED", "STATE_STARTING", "STATE_RUNNING")  # active, as 0.38.1 reports it
    det(det_cluster, "experiment", "kill", str(exp_id))
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_CANCELED"}, timeout=60)["state"] == "STATE_CANCELED"


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_set_max_slots_holds_trials_back_until_raised(det_cluster, tmp_path) -> None:
    """The agent has 2 slots; with max-slots 1 the experiment runs one trial at a time, the other
    waiting on max_slots; raised to 2, the next scheduling pass starts it."""
    api = det_cluster.master.api
    config = steps_config(name="capped", steps=4000, delay=0.05, ckpt_every=1000)
    config["searcher"] = {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 4000}}
    config["hyperparameters"]["delay"] = {"type": "categorical", "vals": [0.05, 0.051]}
    cfg = tmp_path / "capped.yaml"
    cfg.write_text(yaml.safe_dump(config))
    exp_id = _det_created(det_cluster, cfg, "--paused")
    det(det_cluster, "experiment", "set", "max-slots", str(exp_id), "1")
    assert api("GET", f"/api/v1/experiments/{exp_id}")["config"]["resources"]["max_slots"] == 1
    det(det_cluster, "experiment", "activate", str(exp_id))

    def states() -> list[str]:
        return sorted(t["state"] for t in det_cluster.trials(exp_id))

    wait_for(lambda: states() == ["STATE_QUEUED", "STATE_RUNNING"], 60, what="one trial running")
    [waiting] = [t for t in det_cluster.trials(exp_id) if t["state"] == "STATE_QUEUED"]
    wait_for(
        lambda: "max_slots" in (api("GET", f"/api/v1/trials/{waiting['id']}")["trial"].get("waitReason") or ""),
        30,
        what="the wait reason naming max_slots",
    )
    assert states() == ["STATE_QUEUED", "STATE_RUNNING"]  # a free slot, and still it waits
    det(det_cluster, "experiment", "set", "max-slots", str(exp_id), "2")
    wait_for(lambda: states() == ["STATE_RUNNING", "STATE_RUNNING"], 60, what="both trials running")
    det(det_cluster, "experiment", "kill", str(exp_id))
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_CANCELED"}, timeout=60)["state"] == "STATE_CANCELED"


DOWNLOAD_SDK_SCRIPT = """
import json, sys
from determined.experimental import client
client.login(master=sys.argv[1], user="determined", password="")
trial = client.get_trial(int(sys.argv[2]))
steps = lambda ckpts: [c.metadata["steps_completed"] for c in ckpts]
print(json.dumps({
    "top": trial.top_checkpoint().metadata["steps_completed"],
    "best_first": steps(trial.list_checkpoints()),
    "newest_first": steps(trial.list_checkpoints(sort_by=client.CheckpointSortBy.BATCH_NUMBER,
                                                 order_by=client.OrderBy.DESC)),
}))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_det_trial_download_and_the_sdk_read_checkpoints_in_determineds_order(det_cluster, tmp_path) -> None:
    """Checkpoints at steps 3, 6 and 9 with validation losses 0.01, 3.01 and 6.01 (the best is the
    oldest). The master lists them as Determined's does: best first for the searcher metric, newest
    first for steps descending, which the SDK's top_checkpoint() and list_checkpoints() rely on. det
    0.38.1's `trial download` takes the LAST downloadable checkpoint of that list (a bug of its own:
    against Determined it does the same), so --best downloads step 9 and --latest step 3; the files it
    writes are those of the checkpoint it names."""
    cfg = tmp_path / "three.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                **steps_config(name="three-checkpoints", steps=9, ckpt_every=3, val_best_at=3),
                "checkpoint_storage": {"save_trial_latest": 5},
            }
        )
    )
    exp_id = _det_created(det_cluster, cfg)
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    [trial] = det_cluster.trials(exp_id)
    proc = subprocess.run(
        [str(DET.parent / "python"), "-c", DOWNLOAD_SDK_SCRIPT, det_cluster.master.url, str(trial["id"])],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "top": 3,
        "best_first": [3, 6, 9],
        "newest_first": [9, 6, 3],
    }
    for flag, step in (("--best", 9), ("--latest", 3)):
        out = tmp_path / flag.strip("-")
        printed = det(det_cluster, "trial", "download", str(trial["id"]), flag, "-o", str(out), "-q").stdout
        assert printed.strip() == str(out)
        assert json.loads((out / "state.json").read_text()) == {"step": step}, flag
        assert json.loads((out / "metadata.json").read_text())["steps_completed"] == step


CHECKPOINT_SDK_SCRIPT = """
import json, sys
from determined.experimental import client
client.login(master=sys.argv[1], user="determined", password="")
kept, trimmed, doomed = (client.get_checkpoint(u) for u in sys.argv[2:5])
out = {group: [(m.steps_completed, m.metrics) for m in kept.get_metrics(group)] for group in ("training", "validation")}
out["every"] = [(m.group, m.steps_completed) for m in kept.get_metrics()]
kept.add_metadata({"note": "from-sdk", "score": 0.5})
kept.remove_metadata(["score"])
out["metadata"] = kept.metadata
trimmed.remove_files(["state.json"])
doomed.delete()
print(json.dumps(out))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_determined_sdk_and_det_change_and_delete_checkpoints(det_cluster, tmp_path) -> None:
    """Checkpoints at steps 3, 6 and 9. The SDK reads the metric reports behind the one at 9 (none: no
    trial reported using it, and the reports of the trial that took it are not the checkpoint's, as in
    Determined; see the trial source info test below), adds and removes its metadata, removes state.json
    from the one at 3 and deletes the one at 6; then det checkpoint rm and delete finish them. Checked
    through the API and on disk; det trial describe still shows the trial."""
    api = det_cluster.master.api
    cfg = tmp_path / "edits.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                **steps_config(name="checkpoint-edits", steps=9, ckpt_every=3),
                "checkpoint_storage": {"save_trial_latest": 5},
            }
        )
    )
    exp_id = _det_created(det_cluster, cfg)
    assert wait_experiment(det_cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    [trial] = det_cluster.trials(exp_id)
    by_step = {
        c["metadata"]["steps_completed"]: c["uuid"]
        for c in api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    }
    assert sorted(by_step) == [3, 6, 9]
    storage = api("GET", f"/api/v1/experiments/{exp_id}")["config"]["checkpoint_storage"]
    home = {step: Path(storage["host_path"], storage.get("storage_path") or "", uuid) for step, uuid in by_step.items()}
    (home[3] / "extra").mkdir()
    (home[3] / "extra" / "notes.txt").write_text("kept by the SDK's rm, then removed by det's")
    owner = home[3].stat()  # the trial's user: its GC task, run as that user, removes what that user made
    for made in (home[3] / "extra", home[3] / "extra" / "notes.txt"):
        os.chown(made, owner.st_uid, owner.st_gid)

    proc = subprocess.run(
        [
            str(DET.parent / "python"),
            "-c",
            CHECKPOINT_SDK_SCRIPT,
            det_cluster.master.url,
            by_step[9],
            by_step[3],
            by_step[6],
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert api("GET", f"/api/v1/trials/{trial['id']}/metrics")["metrics"]  # the trial's own reports...
    assert got["training"] == got["validation"] == got["every"] == []  # ...are not the checkpoint's

    def show() -> dict[int, dict]:
        return {step: api("GET", f"/api/v1/checkpoints/{uuid}")["checkpoint"] for step, uuid in by_step.items()}

    # the removals run as a checkpoint GC task on the agent, as in Determined: the rows change on its report
    wait_for(
        lambda: [c["state"] for _, c in sorted(show().items())][:2] == ["STATE_PARTIALLY_DELETED", "STATE_DELETED"],
        120,
        what="the SDK's remove_files and delete to be reported by their GC tasks",
    )
    shown = show()
    assert shown[9]["metadata"]["note"] == "from-sdk" and "score" not in shown[9]["metadata"]
    assert got["metadata"] == {**shown[9]["metadata"]}
    # remove_files: state.json gone on disk, the rest kept and listed
    assert not (home[3] / "state.json").exists() and (home[3] / "extra" / "notes.txt").exists()
    assert shown[3]["state"] == "STATE_PARTIALLY_DELETED"
    assert "state.json" not in shown[3]["resources"] and "extra/notes.txt" in shown[3]["resources"]
    assert sorted(shown[3]["resources"]) == sorted(
        str(p.relative_to(home[3])) + ("/" if p.is_dir() else "") for p in home[3].rglob("*")
    )
    # delete: the directory gone, the checkpoint DELETED
    assert not home[6].exists() and shown[6]["state"] == "STATE_DELETED"
    det(det_cluster, "trial", "describe", str(trial["id"]))  # a PARTIALLY_DELETED checkpoint does not break it

    out = det(det_cluster, "checkpoint", "rm", by_step[3], "--glob", "extra", "--yes").stdout
    assert "Removal of files" in out
    wait_for(lambda: "extra/notes.txt" not in show()[3]["resources"], 120, what="det checkpoint rm's GC task")
    assert not (home[3] / "extra").exists()
    assert "extra/notes.txt" not in api("GET", f"/api/v1/checkpoints/{by_step[3]}")["checkpoint"]["resources"]
    out = det(det_cluster, "checkpoint", "delete", f"{by_step[3]},{by_step[9]}", "--yes").stdout
    assert "Deletion of checkpoints" in out
    wait_for(
        lambda: {show()[s]["state"] for s in (3, 9)} == {"STATE_DELETED"}, 120, what="det checkpoint delete's GC task"
    )
    assert not home[3].exists() and not home[9].exists()
    assert {api("GET", f"/api/v1/checkpoints/{by_step[s]}")["checkpoint"]["state"] for s in (3, 9)} == {"STATE_DELETED"}


SDK_EXPERIMENT_SCRIPT = """
import json, sys
from determined.experimental import client
from determined.common.api import errors
client.login(master=sys.argv[1], user="determined", password="")
exp = client.get_experiment(int(sys.argv[2]))
path = exp.download_code(sys.argv[3])
exp.move_to_project(sys.argv[4], sys.argv[5])
exp.delete_tensorboard_files()
me, admin = client.get_user_by_name("determined"), client.get_user_by_name("admin")
try:
    client.get_user_by_name("nobody-at-all")
    missing = ""
except errors.NotFoundException as e:
    missing = str(e)
print(json.dumps({"path": path, "project_id": exp.project_id, "me": [me.user_id, me.username, me.admin],
                  "admin": [admin.user_id, admin.username, admin.admin], "missing": missing}))
"""


def _model_dir(root: Path) -> Path:
    """A model directory with a subdirectory, a binary file and a file its .detignore leaves out."""
    model = root / "model"
    (model / "sub").mkdir(parents=True)
    (model / "train.py").write_text((MODELS / "steps" / "train.py").read_text())
    (model / "sub" / "util.py").write_text("X = 1\n")
    (model / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 4)
    (model / "ignored.txt").write_text("not uploaded\n")
    (model / ".detignore").write_text("ignored.txt\n")
    return model


def _files_of(tgz: Path) -> dict[str, bytes]:
    import tarfile

    with tarfile.open(tgz, mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


TENSORBOARD_SCRIPT = """
import json, os, sys
from determined.tensorboard.build import build
storage, cluster_id, exp_id, work = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
os.environ["DET_ALLOCATION_ID"] = "compat"
manager = build(cluster_id, exp_id, "1", {**storage, "base_path": work}, async_upload=False)
manager.base_path.mkdir(parents=True)
(manager.base_path / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"event")
manager.close()  # syncs: copies the file where a trial of the experiment keeps it
print(manager.shared_fs_base)
"""


def _write_events(c: Cluster, exp_id: int, work: Path) -> Path:
    """An event file where Determined's own TensorBoard manager puts a trial's (its host_path is what a
    task sees as /determined_shared_fs); -> the experiment's TensorBoard directory."""
    storage = c.master.api("GET", f"/api/v1/experiments/{exp_id}")["config"]["checkpoint_storage"]
    cluster_id = c.master.api("GET", "/api/v1/master")["clusterId"]
    proc = subprocess.run(
        [
            str(DET.parent / "python"),
            "-c",
            TENSORBOARD_SCRIPT,
            json.dumps(storage),
            cluster_id,
            str(exp_id),
            str(work / f"tb-{exp_id}"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    trial_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert [p.name for p in trial_dir.iterdir()] == ["events.out.tfevents.1700000000.host.1.0"]
    expected = Path(
        storage["host_path"], storage.get("storage_path") or "", cluster_id, "tensorboard", "experiment", str(exp_id)
    )
    assert trial_dir == expected / "trial" / "1"
    return expected


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_determined_sdk_downloads_code_moves_deletes_tensorboard_files_and_finds_users(det_cluster, tmp_path) -> None:
    """The SDK's download_code, move_to_project, delete_tensorboard_files and get_user_by_name, and det e
    download-model-def, move and delete-tb-files; each effect checked through the API or on disk."""
    api = det_cluster.master.api
    model = _model_dir(tmp_path)
    cfg = tmp_path / "code.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="for-sdk-code", steps=2)))
    sdk_exp, det_exp = (
        _created(det(det_cluster, "experiment", "create", "--paused", str(cfg), str(model)).stdout) for _ in range(2)
    )
    det(det_cluster, "workspace", "create", "moves-ws")
    det(det_cluster, "project", "create", "moves-ws", "sdk-target")
    det(det_cluster, "project", "create", "moves-ws", "det-target")
    ws_id = api("GET", "/api/v1/workspaces", name="moves-ws")["workspaces"][0]["id"]
    targets = {p["name"]: p["id"] for p in api("GET", f"/api/v1/workspaces/{ws_id}/projects")["projects"]}
    doomed, kept = _write_events(det_cluster, sdk_exp, tmp_path), _write_events(det_cluster, det_exp, tmp_path)

    out = tmp_path / "downloaded"
    proc = subprocess.run(
        [
            str(DET.parent / "python"),
            "-c",
            SDK_EXPERIMENT_SCRIPT,
            det_cluster.master.url,
            str(sdk_exp),
            str(out),
            "moves-ws",
            "sdk-target",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = {
        "train.py": (model / "train.py").read_bytes(),
        "sub/util.py": b"X = 1\n",
        "sub/weights.bin": (model / "sub" / "weights.bin").read_bytes(),
    }
    assert _files_of(Path(got["path"])) == expected  # .detignore and ignored.txt stayed behind
    exp = api("GET", f"/api/v1/experiments/{sdk_exp}")["experiment"]
    assert (exp["projectId"], exp["projectName"], exp["workspaceId"]) == (targets["sdk-target"], "sdk-target", ws_id)
    assert got["project_id"] == targets["sdk-target"]
    assert not doomed.exists() and (kept / "trial" / "1").is_dir()
    users = {u["username"]: u for u in api("GET", "/api/v1/users")["users"]}
    assert got["me"] == [users["determined"]["id"], "determined", False]
    assert got["admin"] == [users["admin"]["id"], "admin", True]
    assert "nobody-at-all" in got["missing"]

    det(det_cluster, "experiment", "download-model-def", str(det_exp), "--output-dir", str(tmp_path))
    assert _files_of(tmp_path / f"experiment_{det_exp}_model_def.tgz") == expected
    said = det(det_cluster, "experiment", "move", str(det_exp), "moves-ws", "det-target").stdout
    assert "det-target" in said
    assert api("GET", f"/api/v1/experiments/{det_exp}")["experiment"]["projectId"] == targets["det-target"]
    det(det_cluster, "experiment", "delete-tb-files", str(det_exp))
    assert not kept.exists()
    det(
        det_cluster, "-u", "admin", "experiment", "move", str(det_exp), "Uncategorized", "Uncategorized", stdin="\n"
    )  # an admin moves anyone's (blank password)
    assert api("GET", f"/api/v1/experiments/{det_exp}")["experiment"]["projectId"] == 1


TRIAL_SOURCE_SDK_SCRIPT = """
import json, sys
from determined.experimental import client
client.login(master=sys.argv[1], user="determined", password="")
def shown(reports):
    return [[m.trial_id, m.group, m.steps_completed, m.metrics] for m in reports]
ckpt, version_ckpt = client.get_checkpoint(sys.argv[2]), client.get_checkpoint(sys.argv[3])
version = client.get_model(sys.argv[4]).get_version(int(sys.argv[5]))
out = {"checkpoint": {g or "every": shown(ckpt.get_metrics(g)) for g in ("training", "validation", None)},
       "version": {g or "every": shown(version.get_metrics(g)) for g in ("training", "validation", None)},
       "version_checkpoint": shown(version_ckpt.get_metrics("validation"))}
print(json.dumps(out))
"""


@pytest.mark.parametrize("det_cluster", ["http"], indirect=True)
def test_determined_sdk_reads_the_metrics_of_the_trials_that_used_a_checkpoint_or_model_version(
    det_cluster, tmp_path
) -> None:
    """A training run takes checkpoints at steps 2 and 4; the one at 2 becomes version 1 of a model. Two
    Determined batch-inference scripts (tests/e2e/models/det_inference) run as processes: one reports
    using the checkpoint at 4 (report_task_using_checkpoint), the other using the model version
    (report_task_using_model_version); both report metrics. The real SDK's checkpoint.get_metrics and
    model_version.get_metrics then yield exactly the reports of the trial that used each, as the API
    stores them, never those of the training trial."""
    from pedl.common.mount_namespace import probe
    from tests.compat.conftest import det_venv

    problem = probe()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"process tasks cannot get /run/determined/info here ({problem}); CI runs as root")
        pytest.skip(f"process tasks cannot get /run/determined/info here: {problem}")
    c, api = det_cluster, det_cluster.master.api
    cfg = tmp_path / "producer.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                **steps_config(name="source-producer", steps=4, ckpt_every=2),
                "checkpoint_storage": {"save_trial_latest": 5},
            }
        )
    )
    producer_exp = _det_created(c, cfg)
    assert wait_experiment(c.master, producer_exp, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    [producer] = c.trials(producer_exp)
    by_step = {
        ck["metadata"]["steps_completed"]: ck["uuid"]
        for ck in api("GET", f"/api/v1/trials/{producer['id']}/checkpoints")["checkpoints"]
    }
    assert sorted(by_step) == [2, 4]
    det(c, "model", "create", "inference-model")
    det(c, "model", "register-version", "inference-model", by_step[2])

    def inference(name: str, **hparams: object) -> int:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "name": name,
                    "entrypoint": "python3 train.py",
                    "max_restarts": 0,
                    "hyperparameters": hparams,
                    "searcher": {"name": "single", "metric": "accuracy", "max_length": {"batches": 3}},
                    "environment": {
                        "environment_variables": [f"PATH={det_venv() / 'bin'}:/usr/local/bin:/usr/bin:/bin"]
                    },
                    "resources": {"slots_per_trial": 1},
                }
            )
        )
        return _created(det(c, "experiment", "create", str(path), str(MODELS / "det_inference")).stdout)

    by_checkpoint = inference("uses-checkpoint", checkpoint_uuid=by_step[4], scale=1.0)
    by_version = inference("uses-version", model_name="inference-model", model_version=1, scale=2.0)
    trial_of = {}
    for exp_id in (by_checkpoint, by_version):
        state = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)["state"]
        [trial_of[exp_id]] = c.trials(exp_id)
        assert state == "STATE_COMPLETED", c.logs(trial_of[exp_id]["id"])
    a, b = trial_of[by_checkpoint]["id"], trial_of[by_version]["id"]

    proc = subprocess.run(
        [
            str(DET.parent / "python"),
            "-c",
            TRIAL_SOURCE_SDK_SCRIPT,
            c.master.url,
            by_step[4],
            by_step[2],
            "inference-model",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("DET_")},
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])

    def stored(trial_id: int, *groups: str) -> list[list]:
        reports = api("GET", f"/api/v1/trials/{trial_id}/metrics")["metrics"]
        return [[trial_id, g, m["stepsCompleted"], m["metrics"]] for g in groups for m in reports if m["group"] == g]

    for key, trial_id in (("checkpoint", a), ("version", b)):
        assert got[key]["training"] == stored(trial_id, "training") and len(got[key]["training"]) == 3, key
        assert got[key]["validation"] == stored(trial_id, "validation") and got[key]["validation"], key
        assert got[key]["every"] == stored(trial_id, "training", "validation"), key
    assert got["version"]["validation"][0][3] == {"accuracy": 1.0} and got["checkpoint"]["validation"][0][3] == {
        "accuracy": 0.5
    }
    # the version's checkpoint: the trial that used the version; the training trial's reports in none
    assert got["version_checkpoint"] == stored(b, "validation")
    assert producer["id"] not in {
        r[0] for part in got.values() for rs in (part.values() if isinstance(part, dict) else [part]) for r in rs
    }
    # the API answers what the SDK read
    shown = api(
        "GET",
        f"/api/v1/checkpoints/{by_step[4]}/metrics",
        metricGroup="validation",
        trialSourceInfoType="TRIAL_SOURCE_INFO_TYPE_INFERENCE",
    )["metrics"]
    assert [[m["trialId"], m["group"], m["totalBatches"], m["metrics"]["validation_metrics"]] for m in shown] == got[
        "checkpoint"
    ]["validation"]
    shown = api("GET", "/api/v1/models/inference-model/versions/1/metrics", metricGroup="validation")["metrics"]
    assert [m["trialId"] for m in shown] == [b]
