"""`python3 -m pedl.launch.torch_distributed [options] [--] COMMAND...`: one worker per slot.

Put it in front of the training command in the entrypoint:

    entrypoint: python3 -m pedl.launch.torch_distributed -- python3 train.py

On each node of the trial it starts COMMAND once per slot with RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, NODE_RANK, NNODES, MASTER_ADDR and MASTER_PORT set (torchrun's names), so a
trial of 2 agents x 4 GPUs is a world of 8 processes, one per GPU (LOCAL_RANK picks the device).
`pedl.core.init()` joins that world; rank 0 is the chief. Output lines carry `[rank=N] `. When one
worker fails the others get SIGTERM (then SIGKILL after the grace period) and the launcher exits
with the failed worker's status, so the master restarts the trial as a whole.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from pedl.launch.layout import LayoutError, layout_from_env
from pedl.launch.workers import Workers

PROG = "python3 -m pedl.launch.torch_distributed"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        default=None,
        metavar="N",
        help="workers per node (default: the node's slots, at least 1)",
    )
    parser.add_argument(
        "--grace-period",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long the other workers may take to stop after one fails (default 10)",
    )
    parser.add_argument("--no-log-prefix", action="store_true", help="do not prefix output lines with [rank=N]")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the training command and its arguments")
    args = parser.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error(
            "the argument COMMAND is required: the training command to run once per slot, e.g. -- python3 train.py"
        )
    if args.grace_period < 0:
        parser.error(f"argument --grace-period: must not be negative, got {args.grace_period}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        layout = layout_from_env(os.environ, nproc_per_node=args.nproc_per_node)
    except LayoutError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    first, n = layout.first_rank, layout.local_size
    print(
        f"pedl launch: node {layout.node_rank} of {len(layout.node_sizes)}, ranks {first}-{first + n - 1} "
        f"of {layout.world_size}, rendezvous {layout.master_addr}:{layout.master_port}",
        file=sys.stderr,
        flush=True,
    )
    envs = [{**os.environ, **layout.worker_env(i)} for i in range(n)]
    workers = Workers(args.command, envs, grace_period=args.grace_period, prefix=not args.no_log_prefix)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: workers.stop(signum))
    return workers.run()


if __name__ == "__main__":
    sys.exit(main())
