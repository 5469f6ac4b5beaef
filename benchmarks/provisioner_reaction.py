"""Provisioner reaction: from submit (just before the experiment-create POST) to the first
RunInstances call reaching EC2, on a real master process (SQLite) whose pool's provider is `aws`,
against moto (in this process) through the EC2 fault proxy, which timestamps every call.

Each sample is "work arrives on an idle pool": the pool has no live instance and no waiting task,
and its provisioner is between passes. The experiment's one trial needs one slot, so the master
launches one g4dn.xlarge; the sample ends when that RunInstances arrives at the proxy. Then the
experiment is killed (its allocation leaves the queue) and no agent ever registers on the
instance, so the master itself terminates it after max_agent_starting_period (1s here); the next
submission waits until no instance is requested, starting or running, plus a random pause (0 to
--jitter seconds) so that submissions fall at random points of the master's 1 s control tick and
5 s provisioner safety tick instead of in step with them. A few warm-up submissions are not
counted (the first boto3 calls open connections)."""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import httpx
import yaml
from tests.support.ec2_fault_proxy import Call, EC2FaultProxy
from tests.support.moto_server import (
    REGION,
    ec2_client,
    fake_aws_env,
    make_network,
    running_moto_server,
)

from benchmarks.harness import (
    MODELS,
    Figure,
    add_common_args,
    median,
    percentile,
    run_main,
    work_dir,
)
from pedl.cli.model_upload import pack_model_dir
from pedl.common.ports import free_port
from pedl.devcluster import Master, wait_for

NAME = "provisioner_reaction"
INSTANCE_TYPE = "g4dn.xlarge"
LIVE = ("REQUESTED", "STARTING", "RUNNING")
TAG_KEY, TAG_VALUE = "pedl-bench", "agents"


def experiment_config(i: int) -> str:
    return yaml.safe_dump(
        {
            "name": f"reaction-{i}",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "hyperparameters": {"stamp_file": "/dev/null"},
            "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
            "resources": {"slots_per_trial": 1},
        }
    )


def master_config(work: Path, proxy_url: str, image_id: str, key_name: str, port: int, settle: str) -> dict:
    return {
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")},
        "resource_pools": [
            {
                "pool_name": "default",
                "provider": {
                    "type": "aws",
                    "region": REGION,
                    "endpoint_url": proxy_url,
                    "image_id": image_id,
                    "ssh_key_name": key_name,
                    "master_url": f"http://127.0.0.1:{port}",
                    "instance_type": INSTANCE_TYPE,
                    "tag_key": TAG_KEY,
                    "tag_value": TAG_VALUE,
                    "max_instances": 5,
                    # settle=master: the master ends each agent-less instance itself, soon
                    "max_agent_starting_period": "1s" if settle == "master" else "20m",
                },
            }
        ],
    }


def forget_terminated(region: str) -> int:
    """Real EC2 stops listing a terminated instance after about an hour; moto lists it forever, and
    its DescribeInstances slows down by ~0.4 ms for each one it keeps (40 ms after 100 samples,
    twice per launching pass), which would make later samples slower than earlier ones. Between
    samples, the terminated instances are dropped from moto's in-process backend (the
    ThreadedMotoServer runs in this process)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    gone = [
        rid
        for rid, res in list(backend.reservations.items())
        if res.instances and all(inst.state == "terminated" for inst in res.instances)
    ]
    for rid in gone:
        backend.reservations.pop(rid, None)
    return len(gone)


def is_list_call(call: Call) -> bool:
    """The provider's list_instances: DescribeInstances by tag and live state (a pass begins with it)."""
    return call.action == "DescribeInstances" and "instance-state-name" in call.filters()


def measure(args: argparse.Namespace) -> list[Figure]:
    files = pack_model_dir(MODELS / "stamp")
    rng = random.Random(args.seed)
    with work_dir("reaction", args.keep) as work, fake_aws_env(), running_moto_server() as moto:
        net = make_network(moto)
        ec2 = ec2_client(moto)  # the cloud's own hand, not through the proxy
        proxy = EC2FaultProxy(moto).start()
        port = free_port()
        master = Master(work, master_config(work, proxy.url, net.image_id, net.key_name, port, args.settle), port=port)
        master.start()
        client = httpx.Client(base_url=master.url, headers={"Authorization": f"Bearer {master.token()}"}, timeout=60)

        def instances() -> list[dict]:
            return client.get("/api/v1/instances", params={"all": "true"}).json()["instances"]

        def settled() -> bool:
            """Nothing queued or running, every launch recorded (its row is written just after
            RunInstances returns), and no instance live: in the master's view (settle=master) or
            in the cloud's (settle=cloud: the master learns it on its next list, as after any
            instance that goes away by itself)."""
            pool = client.get("/api/v1/resource-pools/default").json()["resourcePool"]
            if pool["queuedTasks"] or pool["runningTasks"]:
                return False
            rows = instances()
            if len(rows) < proxy.count("RunInstances"):
                return False
            if args.settle == "master":
                return not [i for i in rows if i["state"] in LIVE]
            in_cloud = {
                i["InstanceId"]
                for r in ec2.describe_instances(
                    Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "shutting-down"]}]
                )["Reservations"]
                for i in r["Instances"]
            }
            return not [i for i in rows if i["state"] in LIVE and i["id"] in in_cloud]

        # (submit, create answered, launching pass began, RunInstances arrived), monotonic
        samples: list[tuple[float, float, float | None, float]] = []
        forgotten = 0
        other_calls = 0  # calls of the launching pass besides list, token lookup and RunInstances
        try:
            for i in range(args.warmup + args.submissions):
                wait_for(settled, 60, interval=0.05, what="the pool to be idle")
                forgotten += forget_terminated(REGION)
                time.sleep(rng.uniform(0, args.jitter))
                body = json.dumps({"config": experiment_config(i), "modelDefinition": files, "activate": True})
                t_submit = time.monotonic()
                r = client.post("/api/v1/experiments", content=body)
                t_answer = time.monotonic()
                r.raise_for_status()
                exp_id = r.json()["experiment"]["id"]
                run = proxy.wait_call("RunInstances", t_submit, 60)
                before = [c for c in proxy.calls(since=t_submit) if c.t <= run.t]
                starts = [c.t for c in before if is_list_call(c)]
                pass_start = starts[-1] if starts else None
                client.post(f"/api/v1/experiments/{exp_id}/kill").raise_for_status()
                if i >= args.warmup:
                    samples.append((t_submit, t_answer, pass_start, run.t))
                    if pass_start is not None:
                        other_calls += len([c for c in before if c.t > pass_start and c.action != "RunInstances"]) - 1
                if args.settle == "cloud":
                    wait_for(
                        lambda: len(instances()) >= proxy.count("RunInstances"),
                        30,
                        interval=0.02,
                        what="the launch to be recorded",
                    )
                    ids = [i["id"] for i in instances() if i["state"] in LIVE]
                    if ids:
                        ec2.terminate_instances(InstanceIds=ids)
            launches = proxy.count("RunInstances")
        finally:
            client.close()
            master.stop()
            proxy.stop()

    total = [1000 * (run - submit) for submit, _, _, run in samples]
    post = [1000 * (answer - submit) for submit, answer, _, _ in samples]
    wake = [1000 * (start - submit) for submit, _, start, _ in samples if start is not None]
    inside = [1000 * (run - start) for _, _, start, run in samples if start is not None]
    n = len(samples)
    settle = (
        "the master ended the previous instance (max_agent_starting_period 1s) and recorded it"
        if args.settle == "master"
        else "the previous instance was terminated in moto directly"
    )
    how = (
        f"{n} submissions, each on an idle pool ({settle}; nothing queued; random 0-{args.jitter:g}s pause); "
        f"real master (SQLite), moto via the fault proxy; {launches} RunInstances in all ({args.warmup} warm-up); "
        f"{forgotten} terminated instances dropped from moto between samples"
    )
    figures = [
        Figure(NAME, "submit → first RunInstances p50", percentile(total, 50), "ms", how),
        Figure(NAME, "submit → first RunInstances p99", percentile(total, 99), "ms", ""),
        Figure(NAME, "submit → first RunInstances max", max(total), "ms", ""),
        Figure(
            NAME,
            "… create POST round trip p50",
            median(post),
            "ms",
            "validate, store the model definition, create trial + allocation, wake the control loop",
        ),
    ]
    if wake:
        figures += [
            Figure(
                NAME,
                "… submit → the launching pass begins p50",
                median(wake),
                "ms",
                f"its list call (DescribeInstances by tag) reaches the proxy; p99 {percentile(wake, 99):.1f} ms",
            ),
            Figure(
                NAME,
                "… pass begins → RunInstances p50",
                median(inside),
                "ms",
                f"list, sync + plan (SQLite), launch-token lookup; p99 {percentile(inside, 99):.1f} ms; "
                f"{other_calls} other call(s) in those passes",
            ),
        ]
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.provisioner_reaction",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--submissions", type=int, default=100, help="measured submissions (default 100)")
    p.add_argument("--warmup", type=int, default=2, help="submissions first, not counted (default 2)")
    p.add_argument(
        "--jitter",
        type=float,
        default=1.0,
        help="random pause before each submission, up to this many seconds (default 1.0)",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the pauses (default 1)")
    p.add_argument(
        "--settle",
        choices=["cloud", "master"],
        default="cloud",
        help="cloud (default): after each sample the instance is terminated in moto directly; "
        "master: the master ends it itself (max_agent_starting_period 1s) and each sample "
        "waits until it recorded that, which its 5 s safety-net pass does: ~5 s a sample",
    )
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()
