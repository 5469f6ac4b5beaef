"""pedl.core.preempt: the long-poll watcher, acknowledgement, and the never-preempted local twin."""

from __future__ import annotations

import time
from pathlib import Path

import pedl.core
from pedl.core.master_session import MasterSession, RetryPolicy
from pedl.core.preempt import PreemptionWatcher

from .fake_master import TOKEN, FakeMaster

SIGNAL = "/api/v1/allocations/3.1.0/signals/preemption"
ACK = "/api/v1/allocations/3.1.0/signals/ack_preemption"


def wait_until_preempted(core: pedl.core.Context) -> None:
    # No deadline here: pytest-timeout ends a hung test.
    while not core.preempt.should_preempt():
        time.sleep(0.01)


def test_not_preempted_until_the_master_says_so(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        assert core.preempt.should_preempt() is False
        fake_master.wait_for_request("GET", SIGNAL)
        assert fake_master.calls("POST", ACK) == []
        fake_master.preempt()
        wait_until_preempted(core)
        assert core.preempt.should_preempt() is True
    polls = fake_master.calls("GET", SIGNAL)
    assert polls[0].query == {"timeout_seconds": ["0"]}
    assert {"timeout_seconds": ["60"]} in [p.query for p in polls[1:]]
    assert all(p.headers["authorization"] == f"Bearer {TOKEN}" for p in polls)
    [ack] = fake_master.calls("POST", ACK)
    assert ack.headers["authorization"] == f"Bearer {TOKEN}"


def test_pending_preemption_is_seen_on_the_first_call(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.preempt()
    with pedl.core.init() as core:
        assert core.preempt.should_preempt() is True
    assert len(fake_master.calls("POST", ACK)) == 1
    # The watcher stops polling once the answer is true.
    assert len(fake_master.calls("GET", SIGNAL)) == 1


def test_ack_only_when_asked(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.preempt()
    with pedl.core.init() as core:
        assert core.preempt.should_preempt(auto_ack=False) is True
        assert fake_master.calls("POST", ACK) == []
        core.preempt.acknowledge_preemption_signal()
        assert core.preempt.should_preempt() is True
    assert len(fake_master.calls("POST", ACK)) == 1


def test_watcher_keeps_polling_through_errors(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.fail("GET", SIGNAL, 500, 404)
    with pedl.core.init() as core:
        fake_master.preempt()
        wait_until_preempted(core)
    statuses = [c.status for c in fake_master.calls("GET", SIGNAL, ok=False)]
    assert statuses[:2] == [500, 404]
    assert statuses[-1] == 200


def test_watcher_survives_the_master_restarting(fake_master: FakeMaster) -> None:
    # The watcher's own session: connection refused first, then a master on the port.
    from .fake_master import free_port

    port = free_port()
    session = MasterSession(f"http://127.0.0.1:{port}", TOKEN, retry=RetryPolicy())
    watcher = PreemptionWatcher(session, "a1", backoff=RetryPolicy(initial_s=0.01, max_s=0.05))
    watcher.start_once()
    assert watcher.should_preempt() is False
    restarted = FakeMaster(port=port).start()
    try:
        restarted.preempt()
        while not watcher.should_preempt():
            time.sleep(0.01)
        assert restarted.calls("GET", "/api/v1/allocations/a1/signals/preemption")
    finally:
        watcher.stop()
        restarted.stop()


def test_local_is_never_preempted(off_cluster: None, tmp_path: Path) -> None:
    with pedl.core.init(checkpoint_storage=tmp_path) as core:
        assert core.preempt.should_preempt() is False
        core.preempt.acknowledge_preemption_signal()
