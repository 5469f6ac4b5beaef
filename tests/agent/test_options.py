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
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
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


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.split()


def test_the_env_token_leaves_the_environment_and_proc_environ() -> None:
    """Tasks and children (the docker client) inherit nothing of it, and /proc/<agent>/environ, which shows the
    environment the process started with, no longer holds it."""
    import os

    code = (
        "import os; from pedl.agent.options import AgentOptions; o = AgentOptions('http://m'); "
        "print(o.token, 'PEDL_AGENT_TOKEN' in os.environ, b'enroll-secret-value' in open('/proc/self/environ', "
        "'rb').read())"
    )
    env = {**os.environ, "PEDL_AGENT_TOKEN": "enroll-secret-value"}
    assert _python(code, env=env) == ["enroll-secret-value", "False", "False"]


def test_a_token_on_the_command_line_is_overwritten_in_proc_cmdline() -> None:
    code = (
        "import sys; from pedl.agent.options import hide_in_cmdline; print(hide_in_cmdline(sys.argv[1]), "
        "sys.argv[1].encode() in open('/proc/self/cmdline', 'rb').read())"
    )
    assert _python(code, "s3cret-on-argv") == ["True", "False"]


def test_the_token_file_must_be_its_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("from-a-file\n")
    path.chmod(0o644)
    with pytest.raises(ValueError, match="mode 644: other users may read"):
        AgentOptions("http://m", token_file=path)
    path.chmod(0o600)
    assert AgentOptions("http://m", token_file=path).token == "from-a-file"
    with pytest.raises(ValueError, match="contradict"):
        AgentOptions("http://m", token="x", token_file=path)
    with pytest.raises(ValueError, match="cannot read"):
        AgentOptions("http://m", token_file=tmp_path / "absent")
