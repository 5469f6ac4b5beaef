"""Polling an experiment: states reported on every poll; a restarting master is ridden out."""

from __future__ import annotations

import pytest

from pedl.cli.experiment_watch import wait_for_experiment
from pedl.errors import Unavailable


class ScriptedClient:
    """`get` answers from a script; an exception in the script is raised instead."""

    def __init__(self, script: list) -> None:
        self.script = script

    def get(self, path: str, **params):
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return {"experiment": {"id": 1, "state": step}}


def test_wait_reports_states_and_rides_out_a_lost_master() -> None:
    client = ScriptedClient(["STATE_ACTIVE", Unavailable("down"), Unavailable("down"), "STATE_COMPLETED"])
    seen: list[str] = []
    final = wait_for_experiment(client, 1, 0, seen.append, sleep=lambda _s: None)
    assert final == "STATE_COMPLETED"
    assert seen == ["STATE_ACTIVE", "master unreachable, retrying", "master unreachable, retrying",
                    "STATE_COMPLETED"]


def test_wait_fails_at_once_when_the_master_was_never_reached() -> None:
    client = ScriptedClient([Unavailable("cannot reach the master at http://x:1")])
    with pytest.raises(Unavailable, match="cannot reach"):
        wait_for_experiment(client, 1, 0, lambda s: None, sleep=lambda _s: None)


def test_paused_is_not_terminal() -> None:
    client = ScriptedClient(["STATE_PAUSED", "STATE_ACTIVE", "STATE_CANCELED"])
    assert wait_for_experiment(client, 1, 0, lambda s: None, sleep=lambda _s: None) == "STATE_CANCELED"
