"""`pedl task logs ID [-f] [--tail N]`: a task's lines from GET /api/v1/tasks/{id}/logs."""

from __future__ import annotations

from tests.cli.fake_master import NDJSON, FakeMaster, log

TASK = "3.6a1f0d5e-2b8c-4d6e-9f10-1a2b3c4d5e6f"
PATH = f"/api/v1/tasks/{TASK}/logs"


def test_task_logs_print_each_line(cli, master: FakeMaster) -> None:
    master.route("GET", PATH, NDJSON([log(1, "step 1"), log(2, "step 2")]))
    result = cli("task", "logs", TASK)
    assert result.exit_code == 0, result.output
    assert result.stdout == "step 1\nstep 2\n"
    assert master.calls("GET", PATH)[0].q("follow") == "false"


def test_tail_asks_for_the_newest_and_prints_them_oldest_first(cli, master: FakeMaster) -> None:
    master.route("GET", PATH, NDJSON([log(9, "last"), log(8, "before last")]))  # newest first, as asked
    result = cli("task", "logs", TASK, "--tail", "2")
    assert result.stdout == "before last\nlast\n"
    call = master.calls("GET", PATH)[0]
    assert (call.q("limit"), call.q("orderBy"), call.q("follow")) == ("2", "ORDER_BY_DESC", "false")


def test_follow_after_tail_skips_what_was_printed(cli, master: FakeMaster) -> None:
    master.sequence("GET", PATH, [NDJSON([log(2, "b")]), NDJSON([log(1, "a"), log(2, "b"), log(3, "c")])])
    result = cli("task", "logs", TASK, "--tail", "1", "-f")
    assert result.stdout == "b\nc\n"
    assert master.calls("GET", PATH)[1].q("follow") == "true"


def test_an_unknown_task_is_one_line(cli, master: FakeMaster) -> None:
    result = cli("task", "logs", "1.nope")
    assert result.exit_code == 1 and "no route GET /api/v1/tasks/1.nope/logs" in result.output
