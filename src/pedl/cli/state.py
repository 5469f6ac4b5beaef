"""Global options shared by every command (`-m/--master`, `-u/--user`, `--cert`), kept on the Typer context.
Commands call `client_of(ctx)` to get the one MasterClient of this invocation."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from pedl.cli.client import DEFAULT_MASTER, MasterClient


@dataclass
class CliState:
    master: str = DEFAULT_MASTER
    user: str | None = None
    cert: str | None = None  # CA file for an https:// master; None: the system's CAs
    _client: MasterClient | None = None

    def client(self) -> MasterClient:
        if self._client is None:
            self._client = MasterClient(self.master, user=self.user, cert=self.cert)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def state_of(ctx: typer.Context) -> CliState:
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def client_of(ctx: typer.Context) -> MasterClient:
    return state_of(ctx).client()
