"""Polling an experiment (states reported on every poll; a restarting master is ridden out) and
following one (its events and its trials' logs in the order they happened)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pedl.cli.client import MasterClient
from pedl.cli.experiment_watch import follow_experiment, wait_for_experiment
from pedl.cli.main import app
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for
from pedl.errors import Unavailable
from tests.cli.fake_master import NDJSON, FakeMaster, experiment, log, page, trial
from tests.support.shared_dirs import enterable_twin

STEPS_MODEL = Path(__file__).parents[1] / "e2e" / "models" / "steps"


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
    assert seen == ["STATE_ACTIVE", "master unreachable, retrying", "master unreachable, retrying", "STATE_COMPLETED"]


def test_wait_fails_at_once_when_the_master_was_never_reached() -> None:
    client = ScriptedClient([Unavailable("cannot reach the master at http://x:1")])
    with pytest.raises(Unavailable, match="cannot reach"):
        wait_for_experiment(client, 1, 0, lambda s: None, sleep=lambda _s: None)


def test_paused_is_not_terminal() -> None:
    client = ScriptedClient(["STATE_PAUSED", "STATE_ACTIVE", "STATE_CANCELED"])
    assert wait_for_experiment(client, 1, 0, lambda s: None, sleep=lambda _s: None) == "STATE_CANCELED"


# -- `create --follow`: events and log lines in the order they happened ---------------------------

T0 = 1_767_000_000.0


def at(offset: float) -> str:
    return datetime.fromtimestamp(T0 + offset, tz=UTC).isoformat().replace("+00:00", "Z")


def event(
    event_id: int, offset: float, entity: str, ident: int, to: str | None, message: str, before: str | None = None
) -> dict:
    return {
        "id": event_id,
        "entityType": entity,
        "entityId": str(ident),
        "time": at(offset),
        "fromState": before,
        "toState": to,
        "level": "info",
        "message": message,
    }


def timed_log(log_id: int, offset: float, message: str, trial_id: int) -> dict:
    return {**log(log_id, message, trial_id), "timestamp": at(offset)}


CREATED = event(1, 0.0, "experiment", 3, "STATE_ACTIVE", "created by determined (2 files, 300 bytes)")
EVENTS = [
    event(2, 0.0, "trial", 5, "STATE_QUEUED", "created by the single searcher with {'lr': 0.1}"),
    event(3, 1.0, "trial", 5, "STATE_RUNNING", "allocation 3.5.1 started", "STATE_QUEUED"),
    event(4, 3.0, "trial", 5, "STATE_COMPLETED", "completed", "STATE_RUNNING"),
    event(5, 3.0, "experiment", 3, "STATE_COMPLETED", "the searcher finished: 1 trial(s) completed", "STATE_ACTIVE"),
]


def first(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(prefix))


@pytest.mark.parametrize("creation_event", [True, False], ids=["creation-event", "older-master"])
def test_follow_prints_events_and_lines_in_the_order_they_happened(
    master: FakeMaster, capsys, creation_event: bool
) -> None:
    """The trial's first lines come after it is RUNNING (they reach us before the next poll of the
    events does), and the experiment's end comes after its last trial's. A master whose experiment
    has no creation event with its state gets that line made up from the experiment."""
    reads: list[int] = []
    all_events = [CREATED, *EVENTS] if creation_event else EVENTS

    def events(req) -> dict:
        reads.append(int(req.q("after") or 0))
        shown = all_events[:-2] if len(reads) == 1 else all_events  # the trial's end is seen on the next poll
        return {"events": [e for e in shown if e["id"] > reads[-1]]}

    master.route("GET", "/api/v1/experiments/3/events", events)
    master.sequence(
        "GET",
        "/api/v1/experiments/3",
        [
            {"experiment": experiment(3, "STATE_ACTIVE", startTime=at(0))},
            {"experiment": experiment(3, "STATE_COMPLETED", startTime=at(0))},
        ],
    )
    master.sequence(
        "GET",
        "/api/v1/experiments/3/trials",
        [page("trials", [trial(5, 3, "STATE_RUNNING")]), page("trials", [trial(5, 3, "STATE_COMPLETED")])],
    )
    master.route("GET", "/api/v1/trials/5/logs", NDJSON([timed_log(1, 1.5, "hello", 5), timed_log(2, 2.5, "bye", 5)]))
    final = follow_experiment(MasterClient(master.url), 3, interval=0.01)
    assert final == "STATE_COMPLETED"
    lines = capsys.readouterr().out.splitlines()
    assert first(lines, "[trial 5] is RUNNING") < first(lines, "[trial 5] hello")
    assert first(lines, "[trial 5] is COMPLETED") < first(lines, "Experiment 3 is COMPLETED")
    assert lines == [
        "Experiment 3 is ACTIVE" + (" (created by determined (2 files, 300 bytes))" if creation_event else ""),
        "[trial 5] is QUEUED (created by the single searcher with {'lr': 0.1})",
        "[trial 5] is RUNNING (allocation 3.5.1 started)",
        "[trial 5] hello",
        "[trial 5] bye",
        "[trial 5] is COMPLETED",
        "Experiment 3 is COMPLETED (the searcher finished: 1 trial(s) completed)",
    ]


def test_without_the_events_route_trials_change_before_their_experiment(master: FakeMaster, capsys) -> None:
    """A master without GET .../events (Determined's): states seen by polling, trials first."""
    master.sequence(
        "GET",
        "/api/v1/experiments/3",
        [{"experiment": experiment(3, "STATE_ACTIVE")}, {"experiment": experiment(3, "STATE_COMPLETED")}],
    )
    master.sequence(
        "GET",
        "/api/v1/experiments/3/trials",
        [page("trials", [trial(5, 3, "STATE_RUNNING")]), page("trials", [trial(5, 3, "STATE_COMPLETED")])],
    )
    master.route("GET", "/api/v1/trials/5/logs", NDJSON([log(1, "hello", 5)]))
    assert follow_experiment(MasterClient(master.url), 3, interval=0.01) == "STATE_COMPLETED"
    lines = capsys.readouterr().out.splitlines()
    assert first(lines, "[trial 5] is COMPLETED") < first(lines, "Experiment 3 is COMPLETED")
    assert sorted(lines) == sorted(
        [
            "Experiment 3 is ACTIVE",
            "[trial 5] is RUNNING",
            "[trial 5] hello",
            "[trial 5] is COMPLETED",
            "Experiment 3 is COMPLETED",
        ]
    )


@pytest.mark.e2e
def test_follow_against_a_real_master_keeps_the_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pedl experiment create --follow` on a master with one agent: each trial is RUNNING before
    its first line and COMPLETED after its last, and the experiment ends after its trials."""
    monkeypatch.setattr("pedl.cli.experiment_watch.FOLLOW_INTERVAL", 1.0)  # as a user runs it
    # the trials run as their user's own uid and write checkpoints at host_path: tmp_path is root's alone
    ckpts = enterable_twin(tmp_path) / "ckpts"
    master = Master(tmp_path, {"checkpoint_storage": {"type": "shared_fs", "host_path": str(ckpts)}})
    master.start()
    agent = LocalAgent(tmp_path, master.url, "watch-agent", slots=1, token=master.agent_token).start()
    try:
        wait_for(lambda: agent_connected(master, "watch-agent"), 60, what="the agent to connect")
        config = tmp_path / "steps.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "name": "follow-order",
                    "entrypoint": "python3 train.py",
                    "hyperparameters": {
                        "steps": 4,
                        "delay": 0.05,
                        "ckpt_every": 100,
                        "tag": {"type": "categorical", "vals": ["a", "b"]},
                    },
                    "searcher": {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 4}},
                    "resources": {"slots_per_trial": 1},
                }
            )
        )
        result = CliRunner().invoke(
            app, ["-m", master.url, "experiment", "create", "--follow", str(config), str(STEPS_MODEL)]
        )
    finally:
        agent.stop()
        master.stop()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "STATE_" not in result.stdout
    trials = sorted({line.split("]")[0] + "]" for line in lines if line.startswith("[trial ")})
    assert len(trials) == 2, lines
    assert sum(line.startswith("Experiment 1 is ") for line in lines) == 2, lines  # ACTIVE, then COMPLETED
    end = first(lines, "Experiment 1 is COMPLETED")
    for t in trials:
        output = [i for i, line in enumerate(lines) if line.startswith(f"{t} step") or line == f"{t} done"]
        assert output, lines
        assert first(lines, f"{t} is RUNNING") < output[0], lines
        assert output[-1] < first(lines, f"{t} is COMPLETED") < end, lines
