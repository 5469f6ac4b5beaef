"""`pedl trial describe` and `pedl trial logs` (plain, --tail, --follow)."""

from __future__ import annotations

import json

from tests.cli.fake_master import NDJSON, FakeMaster, log, page, trial


def test_logs_prints_messages_verbatim(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/trials/4/logs", NDJSON([log(1, "epoch 1 [ok]"), log(2, "epoch 2")]))
    result = cli("trial", "logs", "4")
    assert result.exit_code == 0, result.output
    assert result.stdout == "epoch 1 [ok]\nepoch 2\n"
    assert master.calls("GET", "/api/v1/trials/4/logs")[0].q("follow") == "false"


def test_logs_tail_asks_newest_first_and_prints_oldest_first(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/trials/4/logs", NDJSON([log(9, "nine"), log(8, "eight")]))
    result = cli("trial", "logs", "4", "--tail", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout == "eight\nnine\n"
    (req,) = master.calls("GET", "/api/v1/trials/4/logs")
    assert (req.q("limit"), req.q("orderBy"), req.q("follow")) == ("2", "ORDER_BY_DESC", "false")


def test_logs_tail_and_follow_continue_after_the_last_line(cli, master: FakeMaster) -> None:
    def logs(req):
        if req.q("follow") == "true":
            return NDJSON([log(1, "one"), log(2, "two"), log(3, "three")])
        return NDJSON([log(2, "two"), log(1, "one")])

    master.route("GET", "/api/v1/trials/4/logs", logs)
    result = cli("trial", "logs", "4", "--tail", "2", "-f")
    assert result.exit_code == 0, result.output
    assert result.stdout == "one\ntwo\nthree\n"


def test_logs_follow_streams_until_the_master_ends_the_stream(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/trials/4/logs", NDJSON([log(i, f"line {i}") for i in range(5)], pause=0.01))
    result = cli("trial", "logs", "4", "--follow")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"line {i}" for i in range(5)]
    assert master.calls("GET", "/api/v1/trials/4/logs")[0].q("follow") == "true"


def test_logs_of_unknown_trial(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/trials/77/logs", (404, {"code": "not_found", "message": "trial 77 not found"}))
    result = cli("trial", "logs", "77")
    assert result.exit_code == 1
    assert result.output.strip() == "error: trial 77 not found"


def test_describe(cli, master: FakeMaster) -> None:
    master.route(
        "GET",
        "/api/v1/trials/2",
        {
            "trial": trial(
                2,
                1,
                "STATE_RUNNING",
                latestValidation={"metrics": {"avgMetrics": {"loss": 0.5}}, "numInputs": 0, "totalBatches": 5},
            )
        },
    )
    master.route(
        "GET",
        "/api/v1/trials/2/workloads",
        page(
            "workloads",
            [
                {
                    "validation": {
                        "metrics": {"avgMetrics": {"loss": 0.5}},
                        "numInputs": 0,
                        "totalBatches": 5,
                        "endTime": "2025-01-01T00:00:00Z",
                    }
                }
            ],
        ),
    )
    result = cli("trial", "describe", "2")
    assert result.exit_code == 0, result.output
    for text in ("Trial 2", "RUNNING", '"loss": 0.5', "validation"):
        assert text in result.stdout, (text, result.stdout)
    data = json.loads(cli("trial", "describe", "2", "--json").stdout)
    assert data["trial"]["id"] == 2 and len(data["workloads"]) == 1


def test_describe_says_why_a_queued_trial_waits(cli, master: FakeMaster) -> None:
    why = "no agent in pool default is large enough: it needs 3 slots"
    master.route("GET", "/api/v1/trials/3", {"trial": trial(3, 1, "STATE_QUEUED", waitReason=why)})
    master.route("GET", "/api/v1/trials/3/workloads", page("workloads", []))
    result = cli("trial", "describe", "3")
    assert result.exit_code == 0, result.output
    assert "Waiting because" in result.stdout and why in result.stdout
