"""AgentOptions resolves its machine-dependent defaults once, at construction."""

from pathlib import Path

import pytest

from pedl.agent import AgentOptions


def test_defaults_come_from_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEDL_AGENT_TOKEN", raising=False)
    options = AgentOptions("http://master:8080/", hostname="box-1")
    assert options.master_url == "http://master:8080"
    assert options.agent_id == "box-1"
    assert options.resource_pool == "default"
    assert options.slots is None and options.token is None and options.heartbeat_interval is None
    assert options.work_dir == Path.home() / ".local/share/pedl/agent/box-1"


def test_token_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEDL_AGENT_TOKEN", "s3cret")
    assert AgentOptions("http://m").token == "s3cret"
    assert AgentOptions("http://m", token="given").token == "given"


def test_explicit_values_are_kept(tmp_path: Path) -> None:
    options = AgentOptions("http://m", agent_id="a1", work_dir=str(tmp_path), slots=0)
    assert options.agent_id == "a1"
    assert options.work_dir == tmp_path
    assert options.slots == 0


def test_negative_slots_are_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        AgentOptions("http://m", slots=-1)


def test_the_master_ca_comes_from_the_option_else_the_environment_as_an_absolute_path(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support.tls import write_tls_files

    tls = write_tls_files(tmp_path / "tls")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PEDL_MASTER_CERT", raising=False)
    assert AgentOptions("https://m").cert is None
    assert AgentOptions("https://m").ssl_context is not None  # the system's CAs
    assert AgentOptions("http://m").ssl_context is None
    monkeypatch.setenv("PEDL_MASTER_CERT", "tls/ca.pem")
    assert AgentOptions("https://m").cert == tls.ca  # tasks run elsewhere: relative would not do
    assert AgentOptions("https://m", cert=tls.other_ca).cert == tls.other_ca


def test_an_unreadable_master_ca_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"cannot read the master's CA certificate {tmp_path / 'absent.pem'}"):
        AgentOptions("https://m", cert=tmp_path / "absent.pem")
