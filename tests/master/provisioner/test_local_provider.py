"""The local provider's spot market, on real processes (each instance waits out a long boot delay, so
no agent starts): spot launches marked spot in the registry and the listing, a market file that
says no capacity refusing spot launches as EC2 does, and the spot mark found again by a new provider
object (a master restart)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.clock import ManualClock
from pedl.config.provider_config import LocalProviderConfig
from pedl.master.provisioner.providers.base import CloudError, CloudErrorKind, CloudState, LaunchRequest
from pedl.master.provisioner.providers.local import LocalProvider

# the instances' shells sleep through this boot delay and are terminated before it ends
CFG = LocalProviderConfig(type="local", boot_delay=3600)


def make(data_dir: Path, clock: ManualClock) -> LocalProvider:
    return LocalProvider(
        CFG,
        pool="default",
        cluster_id="c1",
        data_dir=data_dir,
        master_url="http://127.0.0.1:1",
        agent_token=None,
        clock=clock,
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000.0)


@pytest.fixture
def provider(tmp_path: Path, clock: ManualClock) -> Iterator[LocalProvider]:
    p = make(tmp_path, clock)
    yield p
    p.terminate([i.id for i in p.list_instances()])
    for child in p._children.values():  # whatever a failed test left behind ends too, and all are reaped
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)


def market(p: LocalProvider, text: str) -> None:
    (p.dir / "spot-capacity").write_text(text)


def registry(p: LocalProvider) -> dict[str, dict]:
    return json.loads(p.registry.read_text())


def test_a_spot_launch_makes_spot_instances_and_on_demand_stays_on_demand(provider: LocalProvider) -> None:
    (spot,) = provider.launch(LaunchRequest("local", 1, True, "t-spot", 1))
    (od,) = provider.launch(LaunchRequest("local", 1, False, "t-od", 1))
    assert (spot.spot, od.spot) == (True, False)
    assert {i.id: i.spot for i in provider.list_instances()} == {spot.id: True, od.id: False}
    assert (registry(provider)[spot.id]["spot"], registry(provider)[od.id]["spot"]) == (True, False)
    assert provider.launch(LaunchRequest("local", 1, True, "t-spot", 1)) == [spot]  # idempotent by token


def test_no_spot_capacity_refuses_spot_launches_like_ec2_and_starts_nothing(provider: LocalProvider) -> None:
    market(provider, "unavailable\n")
    with pytest.raises(CloudError) as info:
        provider.launch(LaunchRequest("local", 2, True, "t1", 1))
    assert (info.value.kind, info.value.code) == (CloudErrorKind.CAPACITY, "InsufficientInstanceCapacity")
    assert "no spot capacity for 2 x local" in info.value.message
    assert str(provider.dir / "spot-capacity") in info.value.message
    assert provider.list_instances() == []
    assert not provider.registry.exists() and list(provider.dir.glob("*.log")) == []  # no process started
    # on demand is a market of its own: the fallback launches
    (od,) = provider.launch(LaunchRequest("local", 1, False, "t2", 1))
    assert [(i.id, i.spot) for i in provider.list_instances()] == [(od.id, False)]


def test_the_market_opens_when_its_file_says_so(provider: LocalProvider) -> None:
    market(provider, "unavailable")
    with pytest.raises(CloudError):
        provider.launch(LaunchRequest("local", 1, True, "t1", 1))
    market(provider, "available")
    (spot,) = provider.launch(LaunchRequest("local", 1, True, "t1", 1))  # a refusal was not remembered
    assert spot.spot and [i.id for i in provider.list_instances()] == [spot.id]
    (provider.dir / "spot-capacity").unlink()  # no file: capacity
    assert len(provider.launch(LaunchRequest("local", 1, True, "t2", 1))) == 1


def test_closing_the_market_leaves_running_spot_instances_alone(provider: LocalProvider) -> None:
    (spot,) = provider.launch(LaunchRequest("local", 1, True, "t1", 1))
    market(provider, "unavailable")
    assert [(i.id, i.spot, i.state) for i in provider.list_instances()] == [(spot.id, True, CloudState.PENDING)]


@pytest.mark.parametrize("text", ["", "maybe", "unavailable later"])
def test_a_market_file_it_cannot_read_fails_spot_launches_naming_the_file(provider: LocalProvider, text: str) -> None:
    market(provider, text)
    with pytest.raises(CloudError) as info:
        provider.launch(LaunchRequest("local", 1, True, "t1", 1))
    assert info.value.kind == CloudErrorKind.INVALID_CONFIG
    assert f"{provider.dir / 'spot-capacity'}: {text!r} is neither 'available' nor 'unavailable'" in info.value.message
    assert provider.list_instances() == []
    assert len(provider.launch(LaunchRequest("local", 1, False, "t2", 1))) == 1  # on demand ignores the file


def test_a_new_provider_object_finds_the_spot_mark_again(
    provider: LocalProvider, tmp_path: Path, clock: ManualClock
) -> None:
    (spot,) = provider.launch(LaunchRequest("local", 1, True, "t-spot", 1))
    (od,) = provider.launch(LaunchRequest("local", 1, False, "t-od", 1))
    restarted = make(tmp_path, clock)  # a master restart: no children of its own, only the registry
    assert {i.id: i.spot for i in restarted.list_instances()} == {spot.id: True, od.id: False}


def test_a_registry_entry_from_before_spot_is_on_demand(
    provider: LocalProvider, tmp_path: Path, clock: ManualClock
) -> None:
    (inst,) = provider.launch(LaunchRequest("local", 1, False, "t1", 1))
    data = registry(provider)
    del data[inst.id]["spot"]
    provider.registry.write_text(json.dumps(data))
    assert [(i.id, i.spot) for i in make(tmp_path, clock).list_instances()] == [(inst.id, False)]


def test_a_restarted_master_finds_an_instance_by_its_process_start_time(
    provider: LocalProvider, tmp_path: Path, clock: ManualClock
) -> None:
    (inst,) = provider.launch(LaunchRequest("local", 1, False, "t1", 1))
    assert isinstance(registry(provider)[inst.id]["started"], int)
    assert [i.id for i in make(tmp_path, clock).list_instances()] == [inst.id]


def test_a_pid_that_now_names_another_process_is_not_an_instance(
    provider: LocalProvider, tmp_path: Path, clock: ManualClock
) -> None:
    (inst,) = provider.launch(LaunchRequest("local", 1, False, "t1", 1))
    data = registry(provider)
    real = dict(data[inst.id])
    data[inst.id]["started"] += 1  # the same pid, started at another time: a reused pid
    provider.registry.write_text(json.dumps(data))
    assert make(tmp_path, clock).list_instances() == []
    data = {inst.id: real} | {"local-default-old": {**real, "started": None}}
    del data["local-default-old"]["started"]  # an entry from before start times: its argv must name it
    provider.registry.write_text(json.dumps(data))
    assert [i.id for i in make(tmp_path, clock).list_instances()] == [inst.id]


def test_two_pools_launching_at_once_keep_each_others_instances(
    provider: LocalProvider, tmp_path: Path, clock: ManualClock
) -> None:
    """A master's pools share one registry file: launches in both at once lose no entry (each lost one
    was an agent that outlived its master, since nothing listed it to end it)."""
    import threading

    other = LocalProvider(
        CFG,
        pool="aux",
        cluster_id="c1",
        data_dir=tmp_path,
        master_url="http://127.0.0.1:1",
        agent_token=None,
        clock=clock,
    )
    launched: dict[str, list[str]] = {"default": [], "aux": []}

    def launch(p: LocalProvider, n: int) -> None:
        for k in range(n):
            launched[p.pool] += [i.id for i in p.launch(LaunchRequest("local", 1, False, f"{p.pool}-{k}", 1))]

    threads = [threading.Thread(target=launch, args=(p, 4)) for p in (provider, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert set(registry(provider)) == {*launched["default"], *launched["aux"]} and len(registry(provider)) == 8
        assert {i.id for i in other.list_instances()} == set(launched["aux"])
    finally:
        other.terminate(launched["aux"])
        for child in other._children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)


def test_the_agent_token_reaches_the_agent_in_a_file_of_its_own_not_argv_or_environment(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, it travelled in the agent's environment, which the agent copied into every task."""
    monkeypatch.setenv("PEDL_AGENT_TOKEN", "the-masters-own-environment")  # not passed on either
    p = LocalProvider(
        CFG,
        pool="default",
        cluster_id="c1",
        data_dir=tmp_path,
        master_url="http://127.0.0.1:1",
        agent_token="s3cret-enrollment-token",
        clock=clock,
    )
    try:
        (inst,) = p.launch(LaunchRequest("local", 1, False, "tok-1"))
        pid = registry(p)[inst.id]["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        token_file = p.dir / "agent-token"
        assert f"--token-file {token_file}".encode() in cmdline
        assert b"s3cret-enrollment-token" not in cmdline + environ
        assert b"PEDL_AGENT_TOKEN" not in environ
        assert token_file.read_text().strip() == "s3cret-enrollment-token"
        assert token_file.stat().st_mode & 0o777 == 0o600
    finally:
        p.terminate([i.id for i in p.list_instances()])
        for child in p._children.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
