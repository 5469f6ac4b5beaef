"""`pedl master logs [-f] [--tail N]`: the master's records from GET /api/v1/master/logs."""

from __future__ import annotations

from tests.cli.fake_master import NDJSON, FakeMaster

PATH = "/api/v1/master/logs"


def entry(i: int, message: str, level: str = "LOG_LEVEL_INFO") -> dict:
    return {"logEntry": {"id": i, "message": message, "level": level, "timestamp": "2025-01-02T03:04:05Z"}}


def test_each_record_is_a_line_with_its_level(cli, master: FakeMaster) -> None:
    master.route(
        "GET", PATH, NDJSON([entry(1, "pedl.master: up"), entry(2, "pedl.master: [x] odd", "LOG_LEVEL_WARNING")])
    )
    result = cli("master", "logs")
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()
    assert first.endswith("INFO     pedl.master: up") and second.endswith("WARNING  pedl.master: [x] odd")
    call = master.calls("GET", PATH)[0]
    assert (call.q("follow"), call.q("offset")) == ("false", None)


def test_tail_and_follow_are_asked_of_the_master(cli, master: FakeMaster) -> None:
    master.route("GET", PATH, NDJSON([entry(7, "x")]))
    cli("master", "logs", "--tail", "5", "-f")
    call = master.calls("GET", PATH)[0]
    assert (call.q("follow"), call.q("offset")) == ("true", "-5")


def test_a_user_who_is_not_an_admin_is_told(cli, master: FakeMaster) -> None:
    master.route(
        "GET", PATH, (403, {"code": 7, "pedlCode": "forbidden", "message": "only an admin may read the master's logs"})
    )
    result = cli("master", "logs")
    assert result.exit_code == 1 and "only an admin may read the master's logs" in result.output
