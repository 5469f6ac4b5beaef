"""Launchers that run one training process per slot of a task (`python3 -m pedl.launch.torch_distributed`)."""
