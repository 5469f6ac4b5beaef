"""Distributed training on Determined 0.38.1's Core API, unmodified, launched by
`determined.launch.torch_distributed`: every worker joins torch.distributed, the workers all-reduce
their ranks, and the chief reports the sum, the world size and a checkpoint."""

import json
import pathlib

import determined as det
import torch
import torch.distributed as dist

info = det.get_cluster_info()
assert info is not None
dist.init_process_group("gloo")
distributed = det.core.DistributedContext.from_torch_distributed()
with det.core.init(distributed=distributed) as core:
    total = torch.tensor([float(distributed.rank)])
    dist.all_reduce(total)
    gathered = distributed.allgather(info.agent_id)
    for op in core.searcher.operations():
        for step in range(1, op.length + 1):
            if distributed.rank == 0:
                core.train.report_training_metrics(
                    steps_completed=step,
                    metrics={"rank_sum": total.item(), "world_size": float(distributed.size), "loss": 1.0 / step},
                )
        if distributed.rank == 0:
            core.train.report_validation_metrics(steps_completed=op.length, metrics={"validation_loss": 0.5})
            op.report_completed(0.5)
        with core.checkpoint.store_path({"steps_completed": op.length}, shard=True) as (path, uuid):
            (pathlib.Path(path) / f"rank{distributed.rank}.json").write_text(json.dumps({"agents": gathered}))
print(f"rank {distributed.rank} of {distributed.size} done on {info.agent_id}", flush=True)
