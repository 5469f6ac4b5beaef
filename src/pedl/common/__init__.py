"""Pieces shared by the master, the agent, the CLI and pedl.core."""
