"""Distributed trials on real processes: slots_per_trial 2 on two one-slot agents runs one
torch.distributed (gloo, CPU) process per agent, and pedl.launch.torch_distributed runs one per
slot; the ranks train in step and only the chief reports."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
import yaml

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e import completed_checkpoints
from tests.e2e.conftest import steps_config

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).parents[2] / "examples"
DDP_PAUSED_BATCHES = 1200


def log_lines(c, trial_id: int) -> list[dict]:
    text = c.master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
    return [json.loads(line)["result"] for line in text.splitlines() if line]


def run_to_completion(c, config: str, *, slots_per_agent: int) -> tuple[int, dict, list[dict], str]:
    """examples/torch_ddp/<config> on agents a1 and a2; (experiment id, trial, log lines, all text)
    once it completed, in one run."""
    c.add_agent("a1", slots=slots_per_agent)
    c.add_agent("a2", slots=slots_per_agent)
    exp_id = c.create((EXAMPLES / "torch_ddp" / config).read_text(), EXAMPLES / "torch_ddp")
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=300)
    (trial,) = c.trials(exp_id)
    lines = log_lines(c, trial["id"])
    logs = "".join(line["message"] for line in lines)
    assert exp["state"] == "STATE_COMPLETED", logs[-4000:]
    assert trial["state"] == "STATE_COMPLETED" and trial["restarts"] == 0
    return exp_id, trial, lines, logs


@pytest.mark.parametrize("any_db_cluster", ["postgres"], indirect=True)  # one database (tests/e2e/conftest.py: e2e_db)
def test_ddp_trial_on_two_agents(any_db_cluster) -> None:
    pytest.importorskip("torch")
    c = any_db_cluster
    exp_id, trial, lines, logs = run_to_completion(c, "distributed.yaml", slots_per_agent=1)

    # Both ranks ran, one on each agent.
    agent_of = {r: {line["agentId"] for line in lines if line["message"].startswith(f"rank {r} ")} for r in (0, 1)}
    assert all(len(agents) == 1 for agents in agent_of.values()), agent_of
    assert agent_of[0] | agent_of[1] == {"a1", "a2"}
    assert "rank 0 of 2" in logs and "rank 1 of 2" in logs

    # They agree on the result: the same weights, bit for bit.
    hashes = dict(re.findall(r"^rank (\d) done at batch 200: .* final parameter hash (\w+)$", logs, re.M))
    assert set(hashes) == {"0", "1"} and hashes["0"] == hashes["1"], hashes

    # One stored report per step, all from the chief (rank 1's calls are no-ops: the fake-master
    # tests in tests/core/test_distributed_torch.py count the requests themselves).
    training = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in training] == list(range(25, 201, 25))
    validation = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="validation")["metrics"]
    assert [m["stepsCompleted"] for m in validation] == [50, 100, 150, 200]
    assert trial["totalBatchesProcessed"] == 200
    # the trial's searcher metric is its best validation (smaller_is_better), not its last
    assert trial["searcherMetricValue"] == pytest.approx(min(v["metrics"]["validation_loss"] for v in validation))

    # The chief's checkpoints (at 100 and 200), which rank 1 waited for; garbage collection keeps
    # the latest.
    ckpts = c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert sorted(ck["metadata"]["steps_completed"] for ck in ckpts) == [100, 200]
    for ck in ckpts:
        assert f"rank 1 checkpoint {ck['uuid']} at batch {ck['metadata']['steps_completed']}" in logs
    # a checkpoint leaves COMPLETED before the checkpoint GC task may delete its files
    kept = completed_checkpoints.with_files(
        c.master, ckpts, lambda ck: (c.work / "ckpts" / ck["uuid"] / "state.pt").is_file()
    )
    assert 200 in [ck["metadata"]["steps_completed"] for ck in kept]


def test_paused_ddp_trial_stops_every_rank_together_and_resumes(cluster) -> None:
    pytest.importorskip("torch")
    cluster.add_agent("a1", slots=1)
    cluster.add_agent("a2", slots=1)
    config = yaml.safe_load((EXAMPLES / "torch_ddp" / "distributed.yaml").read_text())
    # long enough to pause in the middle: the pause is sent after the first checkpoint (batch 100)
    # and every rank asks should_preempt at every batch
    config["searcher"]["max_length"] = {"batches": DDP_PAUSED_BATCHES}
    exp_id = cluster.create(config, EXAMPLES / "torch_ddp")
    wait_for(
        lambda: cluster.trials(exp_id) and "rank 1 checkpoint" in cluster.logs(cluster.trials(exp_id)[0]["id"]),
        120,
        what="the first checkpoint of the distributed trial",
    )
    cluster.master.api("POST", f"/api/v1/experiments/{exp_id}/pause")
    wait_for(lambda: cluster.trials(exp_id)[0]["state"] == "STATE_PAUSED", 60, what="trial paused")
    trial_id = cluster.trials(exp_id)[0]["id"]

    # The chief saw the signal and broadcast it: both ranks stopped after the same batch.
    logs = cluster.logs(trial_id)
    stopped = dict(re.findall(r"^rank (\d) preempted at batch (\d+);", logs, re.M))
    assert set(stopped) == {"0", "1"} and stopped["0"] == stopped["1"], logs[-3000:]
    batch = int(stopped["0"])
    assert batch < DDP_PAUSED_BATCHES

    cluster.master.api("POST", f"/api/v1/experiments/{exp_id}/activate")
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
    logs = cluster.logs(trial_id)
    assert exp["state"] == "STATE_COMPLETED", logs[-4000:]
    (trial,) = cluster.trials(exp_id)
    assert trial["restarts"] == 0  # a pause is not a failure
    for r in (0, 1):
        assert re.search(rf"^rank {r} resumed from checkpoint \S+ at batch {batch}$", logs, re.M), logs[-3000:]
    hashes = dict(
        re.findall(rf"^rank (\d) done at batch {DDP_PAUSED_BATCHES}: .* final parameter hash (\w+)$", logs, re.M)
    )
    assert set(hashes) == {"0", "1"} and hashes["0"] == hashes["1"], hashes
    training = cluster.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in training] == list(range(25, DDP_PAUSED_BATCHES + 1, 25))


def test_one_process_per_slot_on_two_agents_of_two_slots(cluster) -> None:
    """slots_per_trial 4 on two 2-slot agents with pedl.launch.torch_distributed: a world of four
    processes, two on each agent, numbered node by node, training in step."""
    pytest.importorskip("torch")
    exp_id, trial, lines, logs = run_to_completion(cluster, "per_slot.yaml", slots_per_agent=2)

    # Each process's lines carry its rank; ranks 0-1 run on the chief agent, 2-3 on the other.
    agent_of: dict[int, set[str]] = {}
    for line in lines:
        m = re.match(r"\[rank=(\d)\] rank (\d) of 4 on agent", line["message"])
        if m:
            assert m.group(1) == m.group(2), line
            agent_of.setdefault(int(m.group(1)), set()).add(line["agentId"])
    assert set(agent_of) == {0, 1, 2, 3}, logs[-3000:]
    assert all(len(a) == 1 for a in agent_of.values())
    assert agent_of[0] == agent_of[1] and agent_of[2] == agent_of[3] and agent_of[0] != agent_of[2]
    assert re.search(r"node 0 of 2, ranks 0-1 of 4", logs) and re.search(r"node 1 of 2, ranks 2-3 of 4", logs)

    # The four agree on the weights, and only the chief's reports were stored.
    hashes = dict(re.findall(r"^\[rank=\d\] rank (\d) done at batch 200: .* final parameter hash (\w+)$", logs, re.M))
    assert set(hashes) == {"0", "1", "2", "3"} and len(set(hashes.values())) == 1, hashes
    training = cluster.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in training] == list(range(25, 201, 25))
    ckpts = cluster.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert sorted(ck["metadata"]["steps_completed"] for ck in ckpts) == [100, 200]


def test_a_rendezvous_port_busy_outside_pedl_fails_the_run_with_a_message_naming_it(make_cluster) -> None:
    """The range holds one port, and another program listens on it: the chief's agent refuses to
    start, and the trial's end reason and logs say why."""
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        c = make_cluster({"rendezvous_port_range": f"{port}-{port}"})
        c.add_agent("a1", slots=1)
        c.add_agent("a2", slots=1)
        config = steps_config(max_restarts=0)
        config["resources"]["slots_per_trial"] = 2
        exp_id = c.create(config)
        wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
        (trial,) = c.trials(exp_id)
        logs = c.logs(trial["id"])
    assert trial["state"] == "STATE_ERROR"
    assert f"rendezvous port {port} (MASTER_PORT) is in use on this agent" in trial["endReason"], trial
    assert f"task failed to start: rendezvous port {port}" in logs  # the chief agent's line in the trial's logs
