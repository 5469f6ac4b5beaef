"""A trial that looks for secrets wherever it can read: its environment, /proc/*/cmdline and
/proc/*/environ of every process it can see, and every file under the directories it is given. It
looks for 43-character url-safe tokens (what pedl's secrets are) whose sha256 is one of its
hyperparameter `digests`, and prints where it found each, and how much it could read, as one line."""

import hashlib
import json
import os
import re

import pedl
import pedl.core

TOKEN = re.compile(rb"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")

hp = pedl.get_cluster_info().trial.hparams
names = {digest: name for name, digest in json.loads(hp["digests"]).items()}
found: list[list[str]] = []
read = {"proc_cmdline": 0, "proc_environ": 0, "files": 0}


def scan(blob: bytes, where: str) -> None:
    for match in TOKEN.finditer(blob):
        name = names.get(hashlib.sha256(match.group()).hexdigest())
        if name is not None:
            found.append([name, where])


print(f"scanning as uid {os.getuid()} for {len(names)} secrets", flush=True)
scan(b"\0".join(f"{k}={v}".encode() for k, v in os.environ.items()), "os.environ")
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for part in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as f:
                blob = f.read()
        except OSError:
            continue
        read[f"proc_{part}"] += 1
        scan(blob, f"/proc/{pid}/{part}")
for root in json.loads(hp["roots"]):
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            try:
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as f:
                    blob = f.read(8 << 20)
            except OSError:
                continue
            read["files"] += 1
            scan(blob, path)

with pedl.core.init() as core:
    core.train.report_training_metrics(steps_completed=1, metrics={"found": len(found)})
print("SCAN " + json.dumps({"found": found, "read": read}), flush=True)
