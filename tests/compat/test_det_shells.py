"""The real det CLI (0.38.1) on a pedl cluster's shells (a master, a local agent and the shell's sshd,
real processes): det shell start --detach, list, open ID -- CMD (ssh through det's own tunnel, which
sends no credentials, with the key det reads from the master) and kill."""

from __future__ import annotations

import pytest

from pedl.devcluster import wait_for
from tests.compat.test_det_cli import DET, det, ended
from tests.e2e.conftest import Cluster
from tests.e2e.test_shells_e2e import require_openssh

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


@pytest.fixture(scope="module")
def shell_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    require_openssh()
    c = Cluster(tmp_path_factory.mktemp("det-shells"), None).start()
    c.add_agent("shell-agent-1", slots=1)
    yield c
    c.stop()


def test_det_shell_start_list_open_and_kill(shell_cluster) -> None:
    c = shell_cluster
    shell_id = det(c, "shell", "start", "--detach").stdout.strip()
    assert shell_id in det(c, "shell", "list", "-q").stdout.split()
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/tasks/{shell_id}")["task"]["allocations"][0]["isReady"],
        90,
        what="the shell's sshd to listen",
    )
    # ssh joins the words of the command with spaces for the remote shell, as with Determined's shells
    out = det(c, "shell", "open", shell_id, "--", "bash", "-c", "'echo user=$USER'").stdout
    assert "user=pedl-user-determined" in out.split(), out  # no agent user group: a uid of the user's own
    out = det(c, "shell", "open", shell_id, "--", "echo", "task=$DET_TASK_ID").stdout
    assert f"task={shell_id}" in out.split(), out
    det(c, "shell", "kill", shell_id)
    wait_for(lambda: ended(c, "shells", shell_id), 60, what="the shell to end")
    assert c.master.api("GET", f"/api/v1/shells/{shell_id}")["shell"]["state"] == "STATE_TERMINATED"
