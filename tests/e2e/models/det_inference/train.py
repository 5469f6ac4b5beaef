"""Batch inference written against Determined 0.38.1's Core API, unmodified, the way Determined documents
it: the task says which checkpoint (hparam checkpoint_uuid) or model version (model_name, model_version)
it uses, through core_context.experimental, then reports metrics; the SDK's get_metrics of that
checkpoint or version then reads them. The SDK's client logs in as `determined` (blank password)."""

import determined as det
from determined.experimental import client

info = det.get_cluster_info()
assert info is not None, "det.get_cluster_info() is None: no /run/determined/info"
hp = info.trial.hparams
client.login(master=info.master_url, user="determined", password="")

with det.core.init() as core:
    if hp.get("model_name"):
        version = client.get_model(hp["model_name"]).get_version(int(hp["model_version"]))
        core.experimental.report_task_using_model_version(version)
        print(f"using model {hp['model_name']} version {version.model_version}", flush=True)
    else:
        ckpt = client.get_checkpoint(hp["checkpoint_uuid"])
        core.experimental.report_task_using_checkpoint(ckpt)
        print(f"using checkpoint {ckpt.uuid}", flush=True)
    scale = float(hp.get("scale", 1.0))
    for batch in range(1, 4):
        core.train.report_training_metrics(steps_completed=batch, metrics={"batch_loss": scale / batch})
    core.train.report_validation_metrics(steps_completed=3, metrics={"accuracy": 0.5 * scale})
print("done", flush=True)
