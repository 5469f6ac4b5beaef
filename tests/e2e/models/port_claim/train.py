"""A trial that claims proxy ports with its own token: first a port some other process of the host
listens on (the hyperparameter `other_port`), then one it listens on itself; it prints the master's
answers as one line."""

import json
import os
import socket
import urllib.error
import urllib.request

import pedl
import pedl.core

hp = pedl.get_cluster_info().trial.hparams
own = socket.socket()
own.bind(("0.0.0.0", 0))
own.listen()


def claim(port: int) -> list:
    url = f"{os.environ['DET_MASTER']}/api/v1/allocations/{os.environ['DET_ALLOCATION_ID']}/proxy_port"
    request = urllib.request.Request(
        url,
        data=json.dumps({"port": port}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {os.environ['DET_SESSION_TOKEN']}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return [answer.status, ""]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode()]


answers = {"other": claim(int(hp["other_port"])), "own": claim(own.getsockname()[1]), "own_port": own.getsockname()[1]}
with pedl.core.init() as core:
    core.train.report_training_metrics(steps_completed=1, metrics={"claimed": 1.0})
print("starting", flush=True)
print("PORTS " + json.dumps(answers), flush=True)
